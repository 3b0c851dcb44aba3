//! The descriptor-to-command path, the one translation of service mode:
//! what an application's descriptor ([`Desc`], read from its command ring)
//! asks of the engine, as a [`Command`] naming the application's sockets by
//! their service ids (and, opening one, the association as its [`Owner`]),
//! once checked. The application side builds descriptors directly
//! (`corestack`'s `stack::Request`).
//!
//! Everything here comes from an application's shared memory, so nothing
//! is trusted: a slot out of range is a [`ProtocolViolation`] (the
//! application loses its association), and opening a port below 1024
//! needs a grant (refused with EACCES, the way Linux refuses `bind` without
//! `CAP_NET_BIND_SERVICE`), whatever the address family. Addresses are IPv4
//! or IPv6 (a bad family byte never decodes: a violation); an IPv4-mapped
//! peer of a connect is reached over IPv4 (RFC 4291 §2.5.5.2), as the
//! engine's `Connect` expects.

use appif::command::{Command, Owner};
use appif::errno;
use appif::seg::AcceptQueue;
use appif::seg::{self, AppSegment, AppSegmentAccept, CmdError, Desc, DescError};
use thiserror::Error;

/// Ports below this are privileged: opening one needs root or a grant in
/// the configuration's `[ports]` (Linux's `ip_unprivileged_port_start`
/// default).
pub const PRIVILEGED_PORTS_END: u16 = 1024;

/// Per-application counters (published for `corestack stat`), kept by
/// [`translate`] as it takes each descriptor.
#[derive(Debug, Default, Clone, Copy)]
pub struct AppStats {
    /// Descriptors taken.
    pub commands: u64,
    /// Connect, listen and bind descriptors.
    pub opens: u64,
    /// Close descriptors.
    pub closes: u64,
    /// Opens refused for permission (EACCES).
    pub refused: u64,
}

/// How an application broke the shared-memory protocol. It loses its
/// association (its connections are reset, its memory released); the
/// daemon and the other applications carry on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProtocolViolation {
    /// The command ring's head moved backwards or more than a ring ahead
    /// of the tail.
    #[error("command ring head {head} impossible (tail {tail})")]
    CommandIndex {
        /// The head the application wrote, descriptors.
        head: u64,
        /// The daemon's tail, descriptors.
        tail: u64,
    },
    /// A descriptor that does not decode.
    #[error("bad descriptor: {0:?}")]
    BadDescriptor(DescError),
    /// A descriptor names a socket slot the segment does not have.
    #[error("descriptor names slot {slot} out of range")]
    SlotOutOfRange {
        /// The slot named.
        slot: u32,
    },
    /// Bytes on the control socket after the hello (the protocol has none).
    #[error("wrote on the control socket after its hello")]
    ControlSocketWrite,
    /// The engine found an impossible index or geometry in one of the
    /// application's socket rings (see `appif::bytes`).
    #[error("impossible index in a socket ring")]
    RingIndex,
    /// With several engines: another engine found one of the violations
    /// above in what it reads (its command ring, its sockets' rings; that
    /// engine logged which).
    #[error("broke the protocol on another engine (see that engine's line)")]
    OnOtherEngine,
}

impl From<CmdError> for ProtocolViolation {
    fn from(e: CmdError) -> ProtocolViolation {
        match e {
            CmdError::BadIndex { head, tail } => ProtocolViolation::CommandIndex { head, tail },
            CmdError::BadDesc(d) => ProtocolViolation::BadDescriptor(d),
        }
    }
}

/// The engine command for descriptor `d` of association `assoc`, whose
/// segment is `seg`; `privileged`: the application may open ports below
/// [`PRIVILEGED_PORTS_END`]; `parent`: the association whose listeners it
/// may join (a forked child's parent, checked at its hello). Counts opens,
/// closes and refusals in `stats`.
///
/// Returns None when the daemon answered the descriptor itself: an open of
/// a privileged port without the grant, whose socket is closed with
/// `EACCES` in its status block (the application's call fails with it), or
/// a `JoinListener` from an application that is no verified child, closed
/// with `EPERM`. Joining needs no port grant: the parent opened the port.
///
/// Errors: [`ProtocolViolation::SlotOutOfRange`] for a slot the segment
/// does not have.
pub fn translate(
    seg: &AppSegment,
    assoc: u32,
    d: Desc,
    privileged: bool,
    parent: Option<u32>,
    stats: &mut AppStats,
) -> Result<Option<Command>, ProtocolViolation> {
    let slot = d.slot();
    let range = || ProtocolViolation::SlotOutOfRange { slot };
    if slot >= seg.layout().nslots {
        return Err(range());
    }
    let id = seg::service_id(assoc, slot);
    let owner = Owner::association(assoc);
    let port = match d {
        Desc::Connect { local_port, .. } => Some(local_port),
        Desc::Listen { local, .. } | Desc::UdpBind { local, .. } => Some(local.port()),
        _ => None,
    };
    let refuse = |stats: &mut AppStats, errno: i32| {
        stats.refused += 1;
        if let Some(sh) = seg.shared(slot, true) {
            sh.set_closed(errno);
        }
        Ok(None)
    };
    if let Some(p) = port {
        stats.opens += 1;
        if p != 0 && p < PRIVILEGED_PORTS_END && !privileged {
            return refuse(stats, errno::EACCES);
        }
    }
    // The slot's status block and a listener's accept queue in it.
    let shared = || seg.shared(slot, true).ok_or_else(range);
    let accept = |backlog: u32| {
        AppSegmentAccept::new(seg.clone(), assoc, slot, backlog as usize)
            .map(AcceptQueue::AppSegment)
            .ok_or_else(range)
    };
    Ok(Some(match d {
        // The host's own: references across fork (see `forks`).
        Desc::Forking { .. } | Desc::Forked { .. } | Desc::Adopt { .. } | Desc::Lend { .. } => {
            return Ok(None)
        }
        Desc::Connect {
            remote,
            local_port,
            nodelay,
            ..
        } => Command::Connect {
            id,
            owner,
            shared: shared()?,
            local_port,
            remote: appif::socket::from_mapped(remote),
            tx: seg.tx_reader(slot).ok_or_else(range)?,
            rx: seg.rx_writer(slot).ok_or_else(range)?,
            nodelay,
        },
        Desc::Listen {
            local,
            backlog,
            v6only,
            reuseport,
            ..
        } => Command::Listen {
            id,
            owner,
            shared: shared()?,
            local,
            v6only,
            accept: accept(backlog)?,
            reuseport,
        },
        Desc::UdpBind { local, v6only, .. } => Command::UdpBind {
            id,
            owner,
            shared: shared()?,
            local,
            v6only,
            tx: seg.tx_reader(slot).ok_or_else(range)?,
            rx: seg.rx_writer(slot).ok_or_else(range)?,
        },
        Desc::JoinListener {
            parent_slot,
            backlog,
            ..
        } => {
            stats.opens += 1;
            let Some(parent) = parent else {
                return refuse(stats, errno::EPERM);
            };
            Command::JoinListener {
                id,
                owner,
                shared: shared()?,
                group: seg::service_id(parent, parent_slot),
                accept: accept(backlog)?,
            }
        }
        Desc::Abort { .. } => {
            stats.closes += 1;
            Command::Abort { id }
        }
        Desc::SetKeepaliveParams {
            idle_s,
            interval_s,
            count,
            ..
        } => Command::SetKeepaliveParams {
            id,
            idle_s,
            interval_s,
            count,
        },
        Desc::Send { .. } => Command::Send { id },
        Desc::Recvd { .. } => Command::Recvd { id },
        Desc::Shutdown { .. } => Command::Shutdown { id },
        Desc::Close { .. } => {
            stats.closes += 1;
            Command::Close { id }
        }
        Desc::SetNodelay { on, .. } => Command::SetNodelay { id, on },
        Desc::SetUserTimeout { ms, .. } => Command::SetUserTimeout { id, ms },
        Desc::SetKeepalive { on, .. } => Command::SetKeepalive { id, on },
        Desc::SetCongestion { cc, .. } => Command::SetCongestion { id, cc },
        Desc::SetBuffers { rcv, snd, .. } => Command::SetBuffers {
            id,
            rcv: rcv as usize,
            snd: snd as usize,
        },
        Desc::SetIpv6Header {
            tclass, hop_limit, ..
        } => Command::SetIpv6Header {
            id,
            tclass,
            hop_limit,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use appif::cc::CcKind;
    use appif::region::Region;
    use appif::seg::{service_owner, Layout};
    use core::net::SocketAddr;
    use std::sync::Arc;

    const ASSOC: u32 = 7;

    /// A fresh 4-slot segment, as the daemon lays one out.
    fn segment() -> AppSegment {
        let layout = Layout {
            nslots: 4,
            ring_bytes: 4096,
            ring_max_bytes: 4096,
            cmd_slots: 16,
            engines: 1,
        };
        let region = Arc::new(Region::anon(layout.total_len()).expect("anonymous memory"));
        AppSegment::init(region, layout, ASSOC).expect("a valid layout")
    }

    fn listen(slot: u32, port: u16) -> Desc {
        Desc::Listen {
            slot,
            local: SocketAddr::from(([0, 0, 0, 0], port)),
            backlog: 8,
            v6only: false,
            reuseport: None,
        }
    }

    fn connect(slot: u32, remote: &str, local_port: u16, nodelay: bool) -> Desc {
        Desc::Connect {
            slot,
            remote: remote.parse().expect("addr"),
            local_port,
            nodelay,
        }
    }

    fn udp_bind(slot: u32, local: &str, v6only: bool) -> Desc {
        Desc::UdpBind {
            slot,
            local: local.parse().expect("addr"),
            v6only,
        }
    }

    /// The engine command `d` becomes (no parent claim); panics on a violation or an answer
    /// from the daemon.
    fn command(seg: &AppSegment, d: Desc, privileged: bool, stats: &mut AppStats) -> Command {
        translate(seg, ASSOC, d, privileged, None, stats)
            .expect("no violation")
            .expect("a command for the engine")
    }

    /// `d` from an application without the privileged-port grant is answered by the daemon:
    /// no command, and the descriptor's slot closed with EACCES.
    fn assert_refused(seg: &AppSegment, d: Desc, stats: &mut AppStats) {
        let slot = d.slot();
        let r = translate(seg, ASSOC, d, false, None, stats);
        assert!(matches!(r, Ok(None)), "answered by the daemon");
        let status = seg.shared(slot, false).expect("the descriptor's slot");
        assert_eq!(status.error(), errno::EACCES);
    }

    #[test]
    fn unprivileged_listen_below_1024_is_refused_and_slot_closed_with_eacces() {
        let seg = segment();
        let mut stats = AppStats::default();
        assert_refused(&seg, listen(1, 80), &mut stats);
        assert_eq!((stats.opens, stats.refused), (1, 1));
    }

    #[test]
    fn unprivileged_connect_from_local_port_below_1024_is_refused() {
        let seg = segment();
        let mut stats = AppStats::default();
        let d = connect(2, "10.0.0.1:8080", 1023, false);
        assert_refused(&seg, d, &mut stats);
        let d = udp_bind(3, "0.0.0.0:53", false);
        assert_refused(&seg, d, &mut stats);
        assert_eq!(stats.refused, 2);
    }

    #[test]
    fn unprivileged_ports_zero_and_from_1024_open() {
        let seg = segment();
        let mut stats = AppStats::default();
        for (slot, port) in [(0, 0), (1, 1024), (2, 65535)] {
            let c = command(&seg, listen(slot, port), false, &mut stats);
            assert!(matches!(c, Command::Listen { local, .. } if local.port() == port));
        }
        assert_eq!((stats.opens, stats.refused), (3, 0));
    }

    #[test]
    fn privileged_app_listen_below_1024_opens() {
        let seg = segment();
        let mut stats = AppStats::default();
        let c = command(&seg, listen(0, 80), true, &mut stats);
        assert!(matches!(c, Command::Listen { .. }));
        assert_eq!(seg.shared(0, false).expect("slot 0").error(), 0);
        assert_eq!(stats.refused, 0);
    }

    #[test]
    fn join_listener_needs_a_verified_parent_and_names_the_parents_listener() {
        let join = |slot| Desc::JoinListener {
            slot,
            parent_slot: 5,
            backlog: 16,
            owner: 0,
        };
        let (seg, mut stats) = (segment(), AppStats::default());
        let r = translate(&seg, ASSOC, join(1), true, None, &mut stats);
        assert!(matches!(r, Ok(None)), "no parent: answered by the daemon");
        assert_eq!(seg.shared(1, false).expect("slot 1").error(), errno::EPERM);
        assert_eq!((stats.opens, stats.refused), (1, 1));
        // A verified child, even unprivileged, joins (the parent opened the port).
        let c = translate(&seg, ASSOC, join(2), false, Some(3), &mut stats)
            .expect("no violation")
            .expect("a command for the engine");
        match c {
            Command::JoinListener {
                id,
                owner,
                group,
                accept,
                ..
            } => {
                assert_eq!(service_owner(id), Some((ASSOC, 2)));
                assert_eq!(owner, Owner::association(ASSOC), "the child's member");
                assert_eq!(service_owner(group), Some((3, 5)), "the parent's slot 5");
                assert_eq!(accept.capacity(), 16);
            }
            _ => panic!("JoinListener became another command"),
        }
        assert_eq!((stats.opens, stats.refused), (2, 1));
    }

    #[test]
    fn any_descriptor_naming_a_slot_out_of_range_is_a_violation() {
        let seg = segment();
        let mut stats = AppStats::default();
        for d in [
            listen(4, 8080),
            Desc::Send { slot: 4 },
            Desc::Close { slot: u32::MAX },
        ] {
            let e = translate(&seg, ASSOC, d, true, None, &mut stats).err();
            assert_eq!(
                e,
                Some(ProtocolViolation::SlotOutOfRange { slot: d.slot() }),
                "{d:?}"
            );
        }
        assert_eq!(stats.opens, 0, "nothing counted for a refused descriptor");
    }

    #[test]
    fn every_descriptor_becomes_its_command_on_the_apps_socket_id() {
        let seg = segment();
        let mut stats = AppStats::default();
        let all = [
            connect(3, "10.0.0.1:80", 0, true),
            listen(1, 8080),
            udp_bind(2, "10.0.0.2:5353", false),
            Desc::Send { slot: 3 },
            Desc::Recvd { slot: 3 },
            Desc::Shutdown { slot: 3 },
            Desc::SetNodelay { slot: 3, on: false },
            Desc::SetKeepalive { slot: 3, on: true },
            Desc::SetCongestion {
                slot: 3,
                cc: CcKind::Dctcp,
            },
            Desc::SetBuffers {
                slot: 3,
                rcv: 1 << 20,
                snd: 65536,
            },
            Desc::SetKeepaliveParams {
                slot: 3,
                idle_s: 10,
                interval_s: 2,
                count: 4,
            },
            Desc::SetIpv6Header {
                slot: 3,
                tclass: 0xb8,
                hop_limit: 9,
            },
            Desc::Abort { slot: 3 },
            Desc::Close { slot: 3 },
        ];
        for d in all {
            let c = command(&seg, d, false, &mut stats);
            // The command of the same kind, with the same arguments, on the app's socket id.
            // Opening commands name the association as the socket's owner.
            let mine = Owner::association(ASSOC);
            let id = match (d, c) {
                (
                    Desc::Connect { nodelay, .. },
                    Command::Connect {
                        id,
                        owner,
                        nodelay: n,
                        ..
                    },
                ) if nodelay == n && owner == mine => Some(id),
                (
                    Desc::Listen { backlog, .. },
                    Command::Listen {
                        id, owner, accept, ..
                    },
                ) if accept.capacity() == backlog as usize && owner == mine => Some(id),
                (
                    Desc::UdpBind { local, .. },
                    Command::UdpBind {
                        id,
                        owner,
                        local: l,
                        ..
                    },
                ) => (local == l && owner == mine).then_some(id),
                (Desc::Send { .. }, Command::Send { id })
                | (Desc::Recvd { .. }, Command::Recvd { id })
                | (Desc::Shutdown { .. }, Command::Shutdown { id })
                | (Desc::Close { .. }, Command::Close { id }) => Some(id),
                (Desc::SetNodelay { on, .. }, Command::SetNodelay { id, on: o })
                | (Desc::SetKeepalive { on, .. }, Command::SetKeepalive { id, on: o }) => {
                    (on == o).then_some(id)
                }
                (
                    Desc::SetKeepaliveParams {
                        idle_s,
                        interval_s,
                        count,
                        ..
                    },
                    Command::SetKeepaliveParams {
                        id,
                        idle_s: i,
                        interval_s: v,
                        count: n,
                    },
                ) => ((idle_s, interval_s, count) == (i, v, n)).then_some(id),
                (Desc::Abort { .. }, Command::Abort { id }) => Some(id),
                (Desc::SetCongestion { cc, .. }, Command::SetCongestion { id, cc: c }) => {
                    (cc == c).then_some(id)
                }
                (Desc::SetBuffers { rcv, snd, .. }, Command::SetBuffers { id, rcv: r, snd: s }) => {
                    ((rcv as usize, snd as usize) == (r, s)).then_some(id)
                }
                (
                    Desc::SetIpv6Header {
                        tclass, hop_limit, ..
                    },
                    Command::SetIpv6Header {
                        id,
                        tclass: t,
                        hop_limit: h,
                    },
                ) => ((tclass, hop_limit) == (t, h)).then_some(id),
                _ => None,
            };
            let id = id.unwrap_or_else(|| panic!("{d:?} became another command"));
            assert_eq!(service_owner(id), Some((ASSOC, d.slot())), "{d:?}");
        }
        assert_eq!((stats.opens, stats.closes), (3, 2), "Abort closes too");
    }

    #[test]
    fn ipv6_descriptors_become_ipv6_commands_with_their_v6only() {
        let seg = segment();
        let mut stats = AppStats::default();
        let d = Desc::Listen {
            slot: 0,
            local: "[::]:8080".parse().expect("addr"),
            backlog: 8,
            v6only: true,
            reuseport: None,
        };
        let c = translate(
            &seg,
            ASSOC,
            Desc::decode(&d.encode()).expect("decodes"),
            false,
            None,
            &mut stats,
        );
        assert!(
            matches!(c, Ok(Some(Command::Listen { local, v6only: true, .. })) if local == "[::]:8080".parse().expect("addr")),
            "a V6ONLY listener on [::]:8080"
        );
        let d = udp_bind(1, "[fd00:77::2]:5353", false);
        let c = translate(&seg, ASSOC, d, false, None, &mut stats);
        assert!(
            matches!(c, Ok(Some(Command::UdpBind { local, v6only: false, .. })) if local.is_ipv6())
        );
        let d = connect(2, "[fd00:77::1]:443", 0, true);
        let c = translate(&seg, ASSOC, d, false, None, &mut stats);
        assert!(
            matches!(c, Ok(Some(Command::Connect { remote, .. })) if remote == "[fd00:77::1]:443".parse().expect("addr"))
        );
        // An IPv4-mapped peer is reached over IPv4.
        let d = connect(3, "[::ffff:10.0.0.1]:80", 0, false);
        let c = translate(&seg, ASSOC, d, false, None, &mut stats);
        assert!(
            matches!(c, Ok(Some(Command::Connect { remote, .. })) if remote == "10.0.0.1:80".parse().expect("addr"))
        );
    }

    #[test]
    fn privileged_ports_need_the_grant_over_ipv6_too() {
        let seg = segment();
        let mut stats = AppStats::default();
        let on_v6 = |slot, port| Desc::Listen {
            slot,
            local: SocketAddr::from(([0u16; 8], port)),
            backlog: 8,
            v6only: false,
            reuseport: None,
        };
        assert_refused(&seg, on_v6(1, 443), &mut stats);
        let d = udp_bind(2, "[fd00:77::2]:53", true);
        assert_refused(&seg, d, &mut stats);
        let c = translate(&seg, ASSOC, on_v6(3, 443), true, None, &mut stats);
        assert!(matches!(c, Ok(Some(Command::Listen { .. }))), "granted");
        assert_eq!((stats.opens, stats.refused), (3, 2));
    }

    #[test]
    fn command_ring_errors_are_violations_of_their_own_kind() {
        assert_eq!(
            ProtocolViolation::from(CmdError::BadIndex { head: 9, tail: 2 }),
            ProtocolViolation::CommandIndex { head: 9, tail: 2 }
        );
        let v = ProtocolViolation::from(CmdError::BadDesc(DescError::BadOpcode(0xee)));
        assert_eq!(v.to_string(), "bad descriptor: BadOpcode(238)");
        let v = ProtocolViolation::from(CmdError::BadDesc(DescError::BadFamily(5)));
        assert_eq!(v.to_string(), "bad descriptor: BadFamily(5)");
    }
}
