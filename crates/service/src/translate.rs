//! The descriptor-to-command path: what an application's descriptor
//! ([`Desc`], read from its command ring) asks of the engine, as a
//! [`Command`] naming the application's sockets by their service ids, once
//! checked. The application side is `corestack::service` (Command → Desc).
//!
//! Everything here comes from an application's shared memory, so nothing
//! is trusted: a slot out of range is a [`ProtocolViolation`] (the
//! application loses its association), and opening a port below 1024
//! needs a grant (refused with EACCES, the way Linux refuses `bind` without
//! `CAP_NET_BIND_SERVICE`).

use crate::assoc::AppStats;
use appif::seg::{self, CmdError, Desc, DescError, Segment, SegmentAccept};
use appif::socket::{AcceptQueue, Command};
use core::net::SocketAddrV4;
use thiserror::Error;

/// Ports below this are privileged: opening one needs root or a grant in
/// the configuration's `[ports]` (Linux's `ip_unprivileged_port_start`
/// default).
pub const PRIVILEGED_PORTS_END: u16 = 1024;

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
/// [`PRIVILEGED_PORTS_END`]. Counts opens, closes and refusals in `stats`.
///
/// Returns None when the daemon answered the descriptor itself: an open of
/// a privileged port without the grant, whose socket is closed with
/// `EACCES` in its status block (the application's call fails with it).
///
/// Errors: [`ProtocolViolation::SlotOutOfRange`] for a slot the segment
/// does not have.
pub fn translate(
    seg: &Segment,
    assoc: u32,
    d: Desc,
    privileged: bool,
    stats: &mut AppStats,
) -> Result<Option<Command>, ProtocolViolation> {
    let slot = d.slot();
    let range = || ProtocolViolation::SlotOutOfRange { slot };
    if slot >= seg.layout().nslots {
        return Err(range());
    }
    let id = seg::service_id(assoc, slot);
    let port = match d {
        Desc::Connect { local_port, .. } => Some(local_port),
        Desc::Listen { local, .. } | Desc::UdpBind { local, .. } => Some(local.port()),
        _ => None,
    };
    if let Some(p) = port {
        stats.opens += 1;
        if p != 0 && p < PRIVILEGED_PORTS_END && !privileged {
            stats.refused += 1;
            if let Some(sh) = seg.shared(slot, true) {
                sh.set_closed(libc::EACCES);
            }
            return Ok(None);
        }
    }
    Ok(Some(match d {
        Desc::Connect {
            remote,
            local_port,
            nodelay,
            ..
        } => Command::Connect {
            id,
            shared: seg.shared(slot, true).ok_or_else(range)?,
            local_port,
            remote,
            tx: seg.tx_reader(slot).ok_or_else(range)?,
            rx: seg.rx_writer(slot).ok_or_else(range)?,
            nodelay,
        },
        Desc::Listen { local, backlog, .. } => Command::Listen {
            id,
            shared: seg.shared(slot, true).ok_or_else(range)?,
            local,
            accept: AcceptQueue::Segment(
                SegmentAccept::new(seg.clone(), assoc, slot, backlog as usize).ok_or_else(range)?,
            ),
        },
        Desc::UdpBind { local, .. } => Command::UdpBind {
            id,
            shared: seg.shared(slot, true).ok_or_else(range)?,
            local: SocketAddrV4::new(*local.ip(), local.port()),
            tx: seg.tx_reader(slot).ok_or_else(range)?,
            rx: seg.rx_writer(slot).ok_or_else(range)?,
        },
        Desc::Send { .. } => Command::Send { id },
        Desc::Recvd { .. } => Command::Recvd { id },
        Desc::Shutdown { .. } => Command::Shutdown { id },
        Desc::Close { .. } => {
            stats.closes += 1;
            Command::Close { id }
        }
        Desc::SetNodelay { on, .. } => Command::SetNodelay { id, on },
        Desc::SetKeepalive { on, .. } => Command::SetKeepalive { id, on },
        Desc::SetCongestion { algorithm, .. } => Command::SetCongestion { id, algorithm },
        Desc::SetBuffers { rcv, snd, .. } => Command::SetBuffers {
            id,
            rcv: rcv as usize,
            snd: snd as usize,
        },
    }))
}
