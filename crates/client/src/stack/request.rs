//! What an application asks of a socket it already has, written once for
//! both ways to its engine: a [`Command`] on an engine's command ring
//! (embedded and inline mode) or a [`Desc`] on the segment's command ring
//! (service mode). [`crate::Stack::request`] picks the one its mode takes;
//! nothing is translated twice.

use appif::cc::CcKind;
use appif::command::Command;
use appif::seg::Desc;
use appif::socket::SockId;

/// A request about one open socket (opening ones are
/// [`crate::Stack`]'s `open_*` functions: they carry rings and an owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// New bytes (TCP) or datagrams (UDP) wait in the TX ring.
    Send,
    /// The application consumed RX bytes; the receive window may open.
    Recvd,
    /// shutdown(SHUT_WR): FIN once the TX ring drains.
    Shutdown,
    /// The application let go of the socket.
    Close,
    /// Close with a reset (SO_LINGER with a zero timeout).
    Abort,
    /// TCP_NODELAY on (true) or off (RFC 9293 §3.7.4).
    SetNodelay(bool),
    /// SO_KEEPALIVE on or off (RFC 1122 §4.2.3.6).
    SetKeepalive(bool),
    /// TCP_KEEPIDLE and TCP_KEEPINTVL in seconds, TCP_KEEPCNT in probes.
    SetKeepaliveParams {
        /// Idle time before the first probe, seconds.
        idle_s: u32,
        /// Time between unanswered probes, seconds.
        interval_s: u32,
        /// Unanswered probes before the connection times out.
        count: u32,
    },
    /// TCP_CONGESTION.
    SetCongestion(CcKind),
    /// SO_RCVBUF / SO_SNDBUF in bytes (0: as it is).
    SetBuffers {
        /// Receive buffer, bytes.
        rcv: usize,
        /// Send buffer, bytes.
        snd: usize,
    },
    /// TCP_USER_TIMEOUT in milliseconds (RFC 5482; 0: the retry limit alone).
    SetUserTimeout(u32),
    /// IPV6_TCLASS and IPV6_UNICAST_HOPS (RFC 3542 §6.5; hop limit 0: 64).
    SetIpv6Header {
        /// Traffic Class.
        tclass: u8,
        /// Hop Limit.
        hop_limit: u8,
    },
}

impl Request {
    /// The engine command for socket `id` (embedded and inline mode).
    pub(crate) fn command(self, id: SockId) -> Command {
        match self {
            Request::Send => Command::Send { id },
            Request::Recvd => Command::Recvd { id },
            Request::Shutdown => Command::Shutdown { id },
            Request::Close => Command::Close { id },
            Request::Abort => Command::Abort { id },
            Request::SetNodelay(on) => Command::SetNodelay { id, on },
            Request::SetKeepalive(on) => Command::SetKeepalive { id, on },
            Request::SetKeepaliveParams {
                idle_s,
                interval_s,
                count,
            } => Command::SetKeepaliveParams {
                id,
                idle_s,
                interval_s,
                count,
            },
            Request::SetCongestion(cc) => Command::SetCongestion { id, cc },
            Request::SetBuffers { rcv, snd } => Command::SetBuffers { id, rcv, snd },
            Request::SetUserTimeout(ms) => Command::SetUserTimeout { id, ms },
            Request::SetIpv6Header { tclass, hop_limit } => Command::SetIpv6Header {
                id,
                tclass,
                hop_limit,
            },
        }
    }

    /// The descriptor for segment slot `slot` (service mode). Buffer sizes
    /// past `u32::MAX` bytes are sent as `u32::MAX`.
    pub(crate) fn desc(self, slot: u32) -> Desc {
        let bytes = |n: usize| n.min(u32::MAX as usize) as u32;
        match self {
            Request::Send => Desc::Send { slot },
            Request::Recvd => Desc::Recvd { slot },
            Request::Shutdown => Desc::Shutdown { slot },
            Request::Close => Desc::Close { slot },
            Request::Abort => Desc::Abort { slot },
            Request::SetNodelay(on) => Desc::SetNodelay { slot, on },
            Request::SetKeepalive(on) => Desc::SetKeepalive { slot, on },
            Request::SetKeepaliveParams {
                idle_s,
                interval_s,
                count,
            } => Desc::SetKeepaliveParams {
                slot,
                idle_s,
                interval_s,
                count,
            },
            Request::SetCongestion(cc) => Desc::SetCongestion { slot, cc },
            Request::SetBuffers { rcv, snd } => Desc::SetBuffers {
                slot,
                rcv: bytes(rcv),
                snd: bytes(snd),
            },
            Request::SetUserTimeout(ms) => Desc::SetUserTimeout { slot, ms },
            Request::SetIpv6Header { tclass, hop_limit } => Desc::SetIpv6Header {
                slot,
                tclass,
                hop_limit,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request says the same thing in both modes: the command and the
    /// descriptor name the same socket and carry the same arguments.
    #[test]
    fn command_and_descriptor_agree() {
        let all = [
            Request::Send,
            Request::Recvd,
            Request::Shutdown,
            Request::Close,
            Request::Abort,
            Request::SetNodelay(true),
            Request::SetKeepalive(false),
            Request::SetKeepaliveParams {
                idle_s: 7,
                interval_s: 3,
                count: 5,
            },
            Request::SetCongestion(CcKind::Cubic),
            Request::SetBuffers {
                rcv: 1 << 20,
                snd: usize::MAX,
            },
            Request::SetUserTimeout(1500),
            Request::SetIpv6Header {
                tclass: 0x28,
                hop_limit: 9,
            },
        ];
        for r in all {
            let d = r.desc(5);
            assert_eq!(d.slot(), 5, "{r:?}");
            // The descriptor survives its 64-byte encoding.
            assert_eq!(Desc::decode(&d.encode()), Ok(d), "{r:?}");
            let c = r.command(42);
            assert_eq!(c.id(), 42, "{r:?}");
            let same = match (c, d) {
                (Command::Send { .. }, Desc::Send { .. })
                | (Command::Recvd { .. }, Desc::Recvd { .. })
                | (Command::Shutdown { .. }, Desc::Shutdown { .. })
                | (Command::Close { .. }, Desc::Close { .. })
                | (Command::Abort { .. }, Desc::Abort { .. }) => true,
                (Command::SetNodelay { on, .. }, Desc::SetNodelay { on: o, .. })
                | (Command::SetKeepalive { on, .. }, Desc::SetKeepalive { on: o, .. }) => on == o,
                (
                    Command::SetKeepaliveParams {
                        idle_s,
                        interval_s,
                        count,
                        ..
                    },
                    Desc::SetKeepaliveParams {
                        idle_s: i,
                        interval_s: v,
                        count: n,
                        ..
                    },
                ) => (idle_s, interval_s, count) == (i, v, n),
                (Command::SetCongestion { cc, .. }, Desc::SetCongestion { cc: k, .. }) => cc == k,
                (Command::SetBuffers { rcv, snd, .. }, Desc::SetBuffers { rcv: r, snd: s, .. }) => {
                    rcv == r as usize && snd.min(u32::MAX as usize) == s as usize
                }
                (Command::SetUserTimeout { ms, .. }, Desc::SetUserTimeout { ms: m, .. }) => ms == m,
                (
                    Command::SetIpv6Header {
                        tclass, hop_limit, ..
                    },
                    Desc::SetIpv6Header {
                        tclass: t,
                        hop_limit: h,
                        ..
                    },
                ) => (tclass, hop_limit) == (t, h),
                _ => false,
            };
            assert!(same, "{r:?}");
        }
    }
}
