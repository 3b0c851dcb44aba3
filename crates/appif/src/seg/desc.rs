//! The command ring of an application segment: the application's
//! [`Desc`] descriptors (64 bytes each, checked by the engine before use),
//! and the two ends of the ring.

use super::Lane;
use super::{AppSegment, DESC_BYTES};
use crate::cc::CcKind;
use crate::socket::ReusePort;
use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use core::sync::atomic::Ordering;

/// A command descriptor: what the application asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Desc {
    /// Open a TCP connection from `slot` to `remote` (local port 0 = ephemeral).
    Connect {
        /// The application's socket slot in its segment.
        slot: u32,
        /// The peer's address and port, IPv4 or IPv6 (an IPv4-mapped IPv6
        /// address is the daemon's to turn into IPv4; the IPv6 scope id
        /// and flow label are not carried).
        remote: SocketAddr,
        /// Local port; 0 picks an ephemeral one.
        local_port: u16,
        /// TCP_NODELAY from the start.
        nodelay: bool,
    },
    /// Listen on `local` with at most `backlog` connections not yet accepted.
    Listen {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Local address (0.0.0.0, ::, or one of the stack's) and port.
        local: SocketAddr,
        /// Connections accepted but not yet taken by the application, at most.
        backlog: u32,
        /// IPV6_V6ONLY for an IPv6 `local` (RFC 3493 §5.3): false lets a
        /// listener on `::` accept IPv4 too; ignored for IPv4.
        v6only: bool,
        /// SO_REUSEPORT, if set (flag byte: 0 none, 1 set, 3 set on the
        /// opening thread's engine).
        reuseport: Option<ReusePort>,
    },
    /// Bind a UDP socket to `local`.
    UdpBind {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Local address (0.0.0.0, ::, or one of the stack's) and port.
        local: SocketAddr,
        /// IPV6_V6ONLY for an IPv6 `local`, as for `Listen`.
        v6only: bool,
    },
    /// New bytes wait in the slot's TX ring.
    Send {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// The application consumed RX bytes.
    Recvd {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// shutdown(SHUT_WR).
    Shutdown {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// The application is done with the slot.
    Close {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// TCP_NODELAY.
    SetNodelay {
        /// The application's socket slot in its segment.
        slot: u32,
        /// True: Nagle off.
        on: bool,
    },
    /// SO_KEEPALIVE.
    SetKeepalive {
        /// The application's socket slot in its segment.
        slot: u32,
        /// True: probe an idle connection.
        on: bool,
    },
    /// TCP_CONGESTION, carried as [`CcKind::wire`]'s byte.
    SetCongestion {
        /// The application's socket slot in its segment.
        slot: u32,
        /// The algorithm from now on.
        cc: CcKind,
    },
    /// SO_RCVBUF / SO_SNDBUF in bytes (0: leave as is).
    SetBuffers {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Receive buffer, bytes (0: as it is).
        rcv: u32,
        /// Send buffer, bytes (0: as it is).
        snd: u32,
    },
    /// A forked child joins the listener it inherited: `slot` becomes one
    /// more member of the listening socket in `parent_slot` of association
    /// `owner` (0: its parent's, the one its hello named), sharing its
    /// port; new connections go to the members that accept.
    JoinListener {
        /// The child's socket slot in its own segment.
        slot: u32,
        /// The listener's slot in the owner's segment.
        parent_slot: u32,
        /// Connections accepted but not yet taken by this member, at most.
        backlog: u32,
        /// The association whose listener it is; 0: the parent's.
        owner: u32,
    },
    /// Close with a reset (SO_LINGER {1, 0}): RST to the peer, unsent
    /// bytes dropped (RFC 9293 §3.10.5); the slot is let go as by Close.
    Abort {
        /// The application's socket slot in its segment.
        slot: u32,
    },
    /// TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT (RFC 1122 §4.2.3.6).
    SetKeepaliveParams {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Idle time before the first probe, seconds.
        idle_s: u32,
        /// Time between unanswered probes, seconds.
        interval_s: u32,
        /// Unanswered probes before the connection times out.
        count: u32,
    },
    /// The application is about to fork(2): every socket it holds now
    /// (connections and listeners, its own and those it inherited and
    /// has not taken over) gets one more reference, held for the child
    /// that presents `ticket` in its hello, until that child takes the
    /// socket over ([`Desc::Adopt`], [`Desc::JoinListener`]) or ends. The
    /// descriptor names no slot ([`Desc::slot`] is 0).
    Forking {
        /// A number the application chose for this fork, unique among
        /// its forks.
        ticket: u32,
    },
    /// fork(2) returned in the parent: the child of `ticket` is process
    /// `pid`, watched so that its references go when it exits without
    /// joining; `pid` 0: the fork failed and the references go now.
    Forked {
        /// The ticket of the matching [`Desc::Forking`].
        ticket: u32,
        /// The child's process id; 0 when fork failed.
        pid: u32,
    },
    /// A forked child takes over the TCP connection it inherited in
    /// `parent_slot` of association `owner` (0: its parent's): from now on
    /// the connection answers to `slot` of the child's segment (its status
    /// block, wake-ups and commands) while its byte rings stay where they
    /// are, in the owner's segment, which the child inherited mapped.
    /// Closed with ENETDOWN in `slot` when the child holds no reference to
    /// it or it is no TCP connection.
    Adopt {
        /// The child's socket slot in its own segment.
        slot: u32,
        /// The connection's slot in the owner's segment.
        parent_slot: u32,
        /// The association whose connection it is; 0: the parent's.
        owner: u32,
    },
    /// TCP_USER_TIMEOUT in milliseconds (0: off).
    SetUserTimeout {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Milliseconds.
        ms: u32,
    },
    /// The application passes the TCP connection in `slot` to another
    /// process with SCM_RIGHTS (a Node.js cluster's primary hands each
    /// accepted connection to a worker): it gets one more reference, held
    /// for the application that presents `key` (the passed fd's open-file
    /// key, see `ctl::Borrow`) within 10 s, which may take it over
    /// (`Desc::Adopt` with this application as owner).
    Lend {
        /// The application's socket slot in its segment.
        slot: u32,
        /// The passed fd's open-file key.
        key: u64,
    },
    /// IPV6_TCLASS and IPV6_UNICAST_HOPS: traffic class in the flag byte,
    /// hop limit (0: the default) in the argument.
    SetIpv6Header {
        /// The application's socket slot in its segment.
        slot: u32,
        /// Traffic Class.
        tclass: u8,
        /// Hop Limit; 0: the default.
        hop_limit: u8,
    },
}

/// Why a descriptor was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescError {
    /// The opcode is not one of [`Desc`]'s.
    BadOpcode(u8),
    /// A boolean field holds something other than 0 or 1.
    BadFlag,
    /// A congestion-control byte that names no [`CcKind`].
    BadCc(u8),
    /// An address family byte other than [`FAMILY_V4`] or [`FAMILY_V6`] in
    /// a descriptor that carries an address.
    BadFamily(u8),
}

/// The family byte (offset 24) of a descriptor carrying an IPv4 address.
pub const FAMILY_V4: u8 = 4;
/// The family byte (offset 24) of a descriptor carrying an IPv6 address.
pub const FAMILY_V6: u8 = 6;

/// Byte offsets inside a descriptor's [`DESC_BYTES`] (see [`Desc::encode`]).
pub mod desc_layout {
    /// The opcode, a u8.
    pub const OPCODE: usize = 0;
    /// A flag (nodelay, on/off) or a congestion-control byte, a u8.
    pub const FLAG: usize = 1;
    /// The port, u16 big-endian.
    pub const PORT: usize = 2;
    /// The slot, u32 little-endian.
    pub const SLOT: usize = 4;
    /// An IPv4 address, 4 bytes in network order.
    pub const ADDR_V4: usize = 8;
    /// The first argument, u32 little-endian.
    pub const ARG: usize = 12;
    /// The second argument, u32 little-endian.
    pub const ARG2: usize = 16;
    /// The third argument, u32 little-endian.
    pub const ARG3: usize = 20;
    /// The address family byte: 4 or 6 ([`super::FAMILY_V4`],
    /// [`super::FAMILY_V6`]), 0 in descriptors without an address.
    pub const FAMILY: usize = 24;
    /// IPV6_V6ONLY of a listen or bind, a u8 (0 or 1).
    pub const V6ONLY: usize = 25;
    /// An IPv6 address, 16 bytes in network order.
    pub const ADDR_V6: usize = 32;

    const _: () = assert!(ADDR_V4 + 4 <= ARG && ARG3 + 4 <= FAMILY && V6ONLY < ADDR_V6);
    const _: () = assert!(ADDR_V6 + 16 <= super::DESC_BYTES);
}

impl Desc {
    /// The slot the descriptor names (0 for [`Desc::Forking`] and
    /// [`Desc::Forked`], which name none).
    pub fn slot(&self) -> u32 {
        match *self {
            Desc::Forking { .. } | Desc::Forked { .. } => 0,
            Desc::Adopt { slot, .. } | Desc::Lend { slot, .. } => slot,
            Desc::SetUserTimeout { slot, .. } => slot,
            Desc::Connect { slot, .. }
            | Desc::Listen { slot, .. }
            | Desc::UdpBind { slot, .. }
            | Desc::Send { slot }
            | Desc::Recvd { slot }
            | Desc::Shutdown { slot }
            | Desc::Close { slot }
            | Desc::SetNodelay { slot, .. }
            | Desc::SetKeepalive { slot, .. }
            | Desc::SetCongestion { slot, .. }
            | Desc::SetBuffers { slot, .. }
            | Desc::JoinListener { slot, .. }
            | Desc::Abort { slot }
            | Desc::SetKeepaliveParams { slot, .. }
            | Desc::SetIpv6Header { slot, .. } => slot,
        }
    }

    /// Encodes as 64 bytes ([`desc_layout`]): opcode (1), flag (1), port
    /// (2, BE), slot (4, LE), IPv4 address (4), argument (4, LE), second
    /// argument (4, LE), third argument (4, LE), family (1: 4, 6, or 0 when
    /// no address), V6ONLY (1), zeros (6), IPv6 address (16), zeros (16).
    pub fn encode(&self) -> [u8; DESC_BYTES] {
        use desc_layout::*;
        let mut b = [0u8; DESC_BYTES];
        let (op, flag, addr, arg) = match *self {
            Desc::Connect {
                remote,
                local_port,
                nodelay,
                ..
            } => (1, nodelay as u8, Some(remote), u32::from(local_port)),
            Desc::Listen {
                local,
                backlog,
                v6only,
                reuseport,
                ..
            } => {
                b[V6ONLY] = v6only as u8;
                let flag = match reuseport {
                    None => 0,
                    Some(ReusePort { home: false }) => 1,
                    Some(ReusePort { home: true }) => 3,
                };
                (2, flag, Some(local), backlog)
            }
            Desc::UdpBind { local, v6only, .. } => {
                b[V6ONLY] = v6only as u8;
                (3, 0, Some(local), 0)
            }
            Desc::Send { .. } => (4, 0, None, 0),
            Desc::Recvd { .. } => (5, 0, None, 0),
            Desc::Shutdown { .. } => (6, 0, None, 0),
            Desc::Close { .. } => (7, 0, None, 0),
            Desc::SetNodelay { on, .. } => (8, on as u8, None, 0),
            Desc::SetKeepalive { on, .. } => (9, on as u8, None, 0),
            Desc::SetCongestion { cc, .. } => (10, cc.wire(), None, 0),
            Desc::SetBuffers { rcv, snd, .. } => {
                b[ARG2..ARG2 + 4].copy_from_slice(&snd.to_le_bytes());
                (11, 0, None, rcv)
            }
            Desc::JoinListener {
                parent_slot,
                backlog,
                owner,
                ..
            } => {
                b[ARG2..ARG2 + 4].copy_from_slice(&parent_slot.to_le_bytes());
                b[ARG3..ARG3 + 4].copy_from_slice(&owner.to_le_bytes());
                (12, 0, None, backlog)
            }
            Desc::Forking { ticket } => (16, 0, None, ticket),
            Desc::Forked { ticket, pid } => {
                b[ARG2..ARG2 + 4].copy_from_slice(&pid.to_le_bytes());
                (17, 0, None, ticket)
            }
            Desc::Adopt {
                parent_slot, owner, ..
            } => {
                b[ARG2..ARG2 + 4].copy_from_slice(&parent_slot.to_le_bytes());
                b[ARG3..ARG3 + 4].copy_from_slice(&owner.to_le_bytes());
                (18, 0, None, 0)
            }
            Desc::SetUserTimeout { ms, .. } => (20, 0, None, ms),
            Desc::Lend { key, .. } => {
                b[ARG2..ARG2 + 4].copy_from_slice(&(key as u32).to_le_bytes());
                b[ARG3..ARG3 + 4].copy_from_slice(&((key >> 32) as u32).to_le_bytes());
                (19, 0, None, 0)
            }
            Desc::Abort { .. } => (13, 0, None, 0),
            Desc::SetKeepaliveParams {
                idle_s,
                interval_s,
                count,
                ..
            } => {
                b[ARG2..ARG2 + 4].copy_from_slice(&interval_s.to_le_bytes());
                b[ARG3..ARG3 + 4].copy_from_slice(&count.to_le_bytes());
                (14, 0, None, idle_s)
            }
            Desc::SetIpv6Header {
                tclass, hop_limit, ..
            } => (15, tclass, None, u32::from(hop_limit)),
        };
        b[OPCODE] = op;
        b[FLAG] = flag;
        if let Some(a) = addr {
            b[PORT..PORT + 2].copy_from_slice(&a.port().to_be_bytes());
            match a {
                SocketAddr::V4(a) => {
                    b[FAMILY] = FAMILY_V4;
                    b[ADDR_V4..ADDR_V4 + 4].copy_from_slice(&a.ip().octets());
                }
                SocketAddr::V6(a) => {
                    b[FAMILY] = FAMILY_V6;
                    b[ADDR_V6..ADDR_V6 + 16].copy_from_slice(&a.ip().octets());
                }
            }
        }
        b[SLOT..SLOT + 4].copy_from_slice(&self.slot().to_le_bytes());
        b[ARG..ARG + 4].copy_from_slice(&arg.to_le_bytes());
        b
    }

    /// Decodes 64 bytes written by an application (anything at all).
    /// Errors: an unknown opcode, a flag or V6ONLY byte other than 0 or 1,
    /// an unknown congestion control, or (in a descriptor that carries an
    /// address) a family byte other than 4 or 6.
    pub fn decode(b: &[u8; DESC_BYTES]) -> Result<Desc, DescError> {
        use desc_layout::*;
        let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let slot = word(SLOT);
        let port = u16::from_be_bytes([b[PORT], b[PORT + 1]]);
        let addr = || match b[FAMILY] {
            FAMILY_V4 => {
                let ip = Ipv4Addr::new(b[ADDR_V4], b[ADDR_V4 + 1], b[ADDR_V4 + 2], b[ADDR_V4 + 3]);
                Ok(SocketAddr::V4(SocketAddrV4::new(ip, port)))
            }
            FAMILY_V6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(&b[ADDR_V6..ADDR_V6 + 16]);
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(o),
                    port,
                    0,
                    0,
                )))
            }
            f => Err(DescError::BadFamily(f)),
        };
        let arg = word(ARG);
        let arg2 = word(ARG2);
        let arg3 = word(ARG3);
        let bool_at = |at: usize| match b[at] {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DescError::BadFlag),
        };
        let flag = || bool_at(FLAG);
        Ok(match b[OPCODE] {
            1 => Desc::Connect {
                slot,
                remote: addr()?,
                local_port: arg as u16,
                nodelay: flag()?,
            },
            2 => Desc::Listen {
                slot,
                local: addr()?,
                backlog: arg,
                v6only: bool_at(V6ONLY)?,
                reuseport: match b[FLAG] {
                    0 => None,
                    1 => Some(ReusePort { home: false }),
                    3 => Some(ReusePort { home: true }),
                    _ => return Err(DescError::BadFlag),
                },
            },
            3 => Desc::UdpBind {
                slot,
                local: addr()?,
                v6only: bool_at(V6ONLY)?,
            },
            4 => Desc::Send { slot },
            5 => Desc::Recvd { slot },
            6 => Desc::Shutdown { slot },
            7 => Desc::Close { slot },
            8 => Desc::SetNodelay { slot, on: flag()? },
            9 => Desc::SetKeepalive { slot, on: flag()? },
            10 => Desc::SetCongestion {
                slot,
                cc: CcKind::from_wire(b[1]).ok_or(DescError::BadCc(b[1]))?,
            },
            11 => Desc::SetBuffers {
                slot,
                rcv: arg,
                snd: arg2,
            },
            12 => Desc::JoinListener {
                slot,
                parent_slot: arg2,
                backlog: arg,
                owner: arg3,
            },
            16 => Desc::Forking { ticket: arg },
            17 => Desc::Forked {
                ticket: arg,
                pid: arg2,
            },
            18 => Desc::Adopt {
                slot,
                parent_slot: arg2,
                owner: arg3,
            },
            20 => Desc::SetUserTimeout { slot, ms: arg },
            19 => Desc::Lend {
                slot,
                key: u64::from(arg3) << 32 | u64::from(arg2),
            },
            13 => Desc::Abort { slot },
            14 => Desc::SetKeepaliveParams {
                slot,
                idle_s: arg,
                interval_s: arg2,
                count: arg3,
            },
            15 => Desc::SetIpv6Header {
                slot,
                tclass: b[FLAG],
                hop_limit: u8::try_from(arg).map_err(|_| DescError::BadFlag)?,
            },
            op => return Err(DescError::BadOpcode(op)),
        })
    }
}

/// Application: the producing end of the command ring.
pub struct CmdProducer {
    seg: AppSegment,
    lane: Lane,
    head: u64,
}

impl CmdProducer {
    /// The producer of `seg`'s (first engine's) command ring, continuing
    /// from its head.
    pub fn new(seg: AppSegment) -> CmdProducer {
        Self::lane(seg, 0).expect("every segment has engine 0")
    }

    /// The producer of engine `engine`'s command ring in `seg`, continuing
    /// from its head; None past the segment's engines.
    pub fn lane(seg: AppSegment, engine: u32) -> Option<CmdProducer> {
        let lane = seg.layout.lane(engine)?;
        let head = seg.word64(lane.head).load(Ordering::Acquire);
        Some(CmdProducer { seg, lane, head })
    }

    /// Enqueues `d`; false when the ring is full.
    pub fn push(&mut self, d: &Desc) -> bool {
        let tail = self.seg.word64(self.lane.tail).load(Ordering::Acquire);
        if self.head.wrapping_sub(tail) >= u64::from(self.seg.layout.cmd_slots) {
            return false;
        }
        let bytes = d.encode();
        // The descriptor at head is outside [tail, head): only this producer
        // writes it until the release store below publishes it.
        let at = self.seg.cmd_at(self.lane.ring, self.head);
        for (w, c) in at.iter().zip(bytes.chunks_exact(8)) {
            w.store(
                u64::from_ne_bytes(c.try_into().expect("8 bytes")),
                Ordering::Relaxed,
            );
        }
        self.head = self.head.wrapping_add(1);
        self.seg
            .word64(self.lane.head)
            .store(self.head, Ordering::Release);
        true
    }

    /// After pushing: true when the engine is asleep and must be woken
    /// (its flag is cleared here, so one doorbell per sleep).
    pub fn engine_needs_doorbell(&self) -> bool {
        let f = self.seg.word32(self.lane.sleeping);
        f.load(Ordering::SeqCst) != 0 && f.swap(0, Ordering::SeqCst) != 0
    }
}

/// What the engine found in an application's command ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmdError {
    /// The application moved the head backwards or more than a ring ahead.
    BadIndex {
        /// The head the application wrote.
        head: u64,
        /// The engine's tail when it read it.
        tail: u64,
    },
    /// A descriptor that does not decode.
    BadDesc(DescError),
}

/// Engine: the consuming end of an application's command ring.
pub struct CmdConsumer {
    seg: AppSegment,
    lane: Lane,
    tail: u64,
    head_seen: u64,
}

impl CmdConsumer {
    /// The consumer of `seg`'s (first engine's) command ring (fresh from
    /// [`AppSegment::init`]).
    pub fn new(seg: AppSegment) -> CmdConsumer {
        Self::lane(seg, 0).expect("every segment has engine 0")
    }

    /// The consumer of engine `engine`'s command ring in `seg` (fresh from
    /// [`AppSegment::init`]); None past the segment's engines.
    pub fn lane(seg: AppSegment, engine: u32) -> Option<CmdConsumer> {
        let lane = seg.layout.lane(engine)?;
        Some(CmdConsumer {
            seg,
            lane,
            tail: 0,
            head_seen: 0,
        })
    }

    /// Descriptors waiting, after checking the application's head index.
    pub fn pending(&mut self) -> Result<u64, CmdError> {
        let head = self.seg.word64(self.lane.head).load(Ordering::Acquire);
        let cap = u64::from(self.seg.layout.cmd_slots);
        if head.wrapping_sub(self.head_seen)
            > self.tail.wrapping_add(cap).wrapping_sub(self.head_seen)
        {
            return Err(CmdError::BadIndex {
                head,
                tail: self.tail,
            });
        }
        self.head_seen = head;
        Ok(head.wrapping_sub(self.tail))
    }

    /// Takes the next descriptor (copied out before it is decoded), if any.
    pub fn pop(&mut self) -> Option<Result<Desc, CmdError>> {
        match self.pending() {
            Err(e) => return Some(Err(e)),
            Ok(0) => return None,
            Ok(_) => {}
        }
        let mut b = [0u8; DESC_BYTES];
        // The descriptor at tail is inside [tail, head) as checked above,
        // published by the producer's release store; it is copied out before
        // it is looked at (copy-then-check).
        let at = self.seg.cmd_at(self.lane.ring, self.tail);
        for (w, c) in at.iter().zip(b.chunks_exact_mut(8)) {
            c.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        self.tail = self.tail.wrapping_add(1);
        self.seg
            .word64(self.lane.tail)
            .store(self.tail, Ordering::Release);
        Some(Desc::decode(&b).map_err(CmdError::BadDesc))
    }
}
