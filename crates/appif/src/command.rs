//! What an application asks of the engine: the [`Command`]s of embedded
//! and inline mode (service mode's descriptors, [`crate::seg::Desc`],
//! become these in the daemon).

use crate::bytes;
use crate::cc::CcKind;
use crate::seg::AcceptQueue;
use crate::socket::{ReusePort, SockId, StatusHandle};
use core::net::SocketAddr;
use std::sync::Arc;

/// The application a socket belongs to, as the engine knows it: a
/// service-mode association (numbered from 1 by the daemon), or
/// [`Owner::LOCAL`] for the sockets of the engine's own process (embedded
/// and inline mode). Given once, in the command that opens the socket;
/// the engine keeps it with the socket (connections a listener accepts
/// take the listener's) and never reads it from a [`SockId`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(pub u32);

impl Owner {
    /// The engine's own process (embedded and inline mode).
    pub const LOCAL: Owner = Owner(0);

    /// The service-mode association `assoc` (1 or more; 0 is [`Owner::LOCAL`]).
    pub fn association(assoc: u32) -> Owner {
        Owner(assoc)
    }

    /// The association, None for [`Owner::LOCAL`].
    pub fn assoc(self) -> Option<u32> {
        (self.0 != 0).then_some(self.0)
    }
}

/// A request from the application to the engine.
pub enum Command {
    /// Open a TCP connection to `remote` from `local` (port 0 = ephemeral).
    Connect {
        /// The socket this command is for.
        id: SockId,
        /// The application the socket belongs to.
        owner: Owner,
        /// The socket's status block, which the engine writes from now on.
        shared: Arc<StatusHandle>,
        /// Local port; 0 picks an ephemeral one.
        local_port: u16,
        /// The peer's address and port, IPv4 or IPv6 (an IPv4-mapped IPv6
        /// address is the caller's to turn into IPv4 first).
        remote: SocketAddr,
        /// The engine's end of the TX ring (it sends from there).
        tx: bytes::Reader,
        /// The engine's end of the RX ring (it writes received bytes there).
        rx: bytes::Writer,
        /// TCP_NODELAY from the start (Nagle off, RFC 9293 §3.7.4).
        nodelay: bool,
    },
    /// Listen for TCP connections on `local`; accepted ones go to `accept`,
    /// whose capacity is the backlog.
    Listen {
        /// The socket this command is for.
        id: SockId,
        /// The application the socket belongs to.
        owner: Owner,
        /// The socket's status block, which the engine writes from now on.
        shared: Arc<StatusHandle>,
        /// Local address (0.0.0.0, ::, or one of the stack's) and port
        /// (0: ephemeral).
        local: SocketAddr,
        /// IPV6_V6ONLY (RFC 3493 §5.3) for an IPv6 `local`: when false
        /// (Linux's default) a listener on `::` also accepts IPv4, its
        /// peers seen as `::ffff:a.b.c.d`; ignored for IPv4.
        v6only: bool,
        /// Where accepted connections go; its capacity is the backlog.
        accept: AcceptQueue,
        /// SO_REUSEPORT, if set: the listener may join a group on the port.
        reuseport: Option<ReusePort>,
    },
    /// Join the listening socket `group` (another application's listener,
    /// or a member of its group) as one more member: the port is shared,
    /// each new connection goes to one member's `accept` (service mode: a
    /// forked child's inherited listener). The status block is closed with
    /// EINVAL when `group` is no listener.
    JoinListener {
        /// The socket this command is for.
        id: SockId,
        /// The application the socket belongs to.
        owner: Owner,
        /// The socket's status block, which the engine writes from now on.
        shared: Arc<StatusHandle>,
        /// The listener joined.
        group: SockId,
        /// Where connections given to this member go; its capacity is its backlog.
        accept: AcceptQueue,
    },
    /// Service mode: the TCP connection `from` (another association's
    /// socket, inherited across fork) answers to `id` from now on: its
    /// status is copied into `shared`, which the engine writes and wakes
    /// from then on, and commands name it `id`; its byte rings stay where
    /// they are. `shared` is closed with ENETDOWN when `from` is no TCP
    /// connection.
    Adopt {
        /// The socket's new id.
        id: SockId,
        /// The association that takes the connection over (its owner from
        /// now on).
        owner: Owner,
        /// The new status block, which the engine writes from now on.
        shared: Arc<StatusHandle>,
        /// The connection's id until now.
        from: SockId,
    },
    /// Bind a UDP socket. Datagrams travel in the byte rings as records:
    /// a [`UdpHeader`](crate::socket::UdpHeader) then the payload.
    UdpBind {
        /// The socket this command is for.
        id: SockId,
        /// The application the socket belongs to.
        owner: Owner,
        /// The socket's status block, which the engine writes from now on.
        shared: Arc<StatusHandle>,
        /// Local address (0.0.0.0, ::, or one of the stack's) and port
        /// (0: ephemeral).
        local: SocketAddr,
        /// IPV6_V6ONLY for an IPv6 `local`, as for `Listen`: when false a
        /// socket on `::` also receives IPv4 datagrams (peers as
        /// `::ffff:a.b.c.d`) and may send to IPv4-mapped addresses.
        v6only: bool,
        /// The engine's end of the TX ring (datagram records to send).
        tx: bytes::Reader,
        /// The engine's end of the RX ring (datagram records received).
        rx: bytes::Writer,
    },
    /// New bytes (TCP) or datagrams (UDP) wait in the TX ring.
    Send {
        /// The socket this command is for.
        id: SockId,
    },
    /// The application consumed RX bytes; the receive window may open.
    Recvd {
        /// The socket this command is for.
        id: SockId,
    },
    /// No more data will be written (TCP shutdown(SHUT_WR)): send FIN after the TX ring drains.
    Shutdown {
        /// The socket this command is for.
        id: SockId,
    },
    /// The application is gone from this socket: close it (RST if unread
    /// data remains, as Linux does), and free it when the protocol is done.
    Close {
        /// The socket this command is for.
        id: SockId,
    },
    /// Like `Close`, but the connection is reset at once (RST to the peer,
    /// unsent bytes dropped): SO_LINGER with a zero timeout.
    Abort {
        /// The socket this command is for.
        id: SockId,
    },
    /// TCP_NODELAY on or off.
    SetNodelay {
        /// The socket this command is for.
        id: SockId,
        /// True: Nagle off (RFC 9293 §3.7.4).
        on: bool,
    },
    /// SO_KEEPALIVE on or off (RFC 1122 §4.2.3.6; Linux timing defaults).
    SetKeepalive {
        /// The socket this command is for.
        id: SockId,
        /// True: probe an idle connection.
        on: bool,
    },
    /// TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT: idle time and probe
    /// interval in seconds, probe count.
    SetKeepaliveParams {
        /// The socket this command is for.
        id: SockId,
        /// Idle time before the first probe, seconds (TCP_KEEPIDLE).
        idle_s: u32,
        /// Time between unanswered probes, seconds (TCP_KEEPINTVL).
        interval_s: u32,
        /// Unanswered probes before the connection times out (TCP_KEEPCNT).
        count: u32,
    },
    /// TCP_CONGESTION: the connection switches to `cc`.
    SetCongestion {
        /// The socket this command is for.
        id: SockId,
        /// The algorithm from now on.
        cc: CcKind,
    },
    /// SO_RCVBUF / SO_SNDBUF: the receive window grows no further than
    /// `rcv` bytes and auto-tuning stops; the send buffer offered is `snd`
    /// bytes. 0 leaves one as it is. On a listener: for the connections it
    /// accepts from then on.
    SetBuffers {
        /// The socket this command is for.
        id: SockId,
        /// Receive buffer, bytes (0: as it is).
        rcv: usize,
        /// Send buffer, bytes (0: as it is).
        snd: usize,
    },
    /// TCP_USER_TIMEOUT (RFC 5482): data unacknowledged this long after the
    /// first retransmission timeout ends the connection with ETIMEDOUT.
    SetUserTimeout {
        /// The socket this command is for.
        id: SockId,
        /// Milliseconds; 0: the retry limit alone (the default).
        ms: u32,
    },
    /// IPV6_TCLASS and IPV6_UNICAST_HOPS (RFC 3542 §6.5, RFC 3493 §5.1):
    /// the Traffic Class and Hop Limit of the socket's IPv6 packets from
    /// now on (the ECN bits of the class stay the engine's, RFC 3168). On
    /// a listener: for the connections it accepts from then on.
    SetIpv6Header {
        /// The socket this command is for.
        id: SockId,
        /// Traffic Class (DSCP in its upper six bits).
        tclass: u8,
        /// Hop Limit; 0: the default (64).
        hop_limit: u8,
    },
}

impl Command {
    /// The socket the command is for (a listener joining a group: the new
    /// member).
    pub fn id(&self) -> SockId {
        match self {
            Command::Connect { id, .. }
            | Command::Listen { id, .. }
            | Command::JoinListener { id, .. }
            | Command::Adopt { id, .. }
            | Command::UdpBind { id, .. }
            | Command::Send { id }
            | Command::Recvd { id }
            | Command::Shutdown { id }
            | Command::Close { id }
            | Command::Abort { id }
            | Command::SetNodelay { id, .. }
            | Command::SetKeepalive { id, .. }
            | Command::SetKeepaliveParams { id, .. }
            | Command::SetCongestion { id, .. }
            | Command::SetBuffers { id, .. }
            | Command::SetUserTimeout { id, .. }
            | Command::SetIpv6Header { id, .. } => *id,
        }
    }
}
