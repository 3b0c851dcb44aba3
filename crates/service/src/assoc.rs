//! Associations: one per application that said hello on the control
//! socket. An association owns the application's segment (a sealed memfd
//! both map), the consuming end of its command ring, its control
//! connection (whose end means the application is gone) and the engine's
//! doorbell it rings; it ends when the application leaves, breaks the
//! protocol, or the daemon stops.

use crate::config::{self, Validated};
use crate::translate::ProtocolViolation;
use appif::ctl::{self, CtlError, PeerCred};
use appif::errno;
use appif::region::Region;
use appif::seg::{CmdConsumer, Layout, Segment};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use thiserror::Error;

/// Command descriptors per application.
pub const CMD_SLOTS: u32 = 256;

/// Per-application counters (published for `corestack stat`).
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

/// One application's association.
pub(crate) struct App {
    /// The association id (from 1, never reused while the daemon runs).
    pub assoc: u32,
    /// The name the application gave in its hello.
    pub name: String,
    /// Who it is, as the kernel recorded it on the control connection.
    pub cred: PeerCred,
    /// It may open ports below 1024 (root, or a grant in `[ports]`).
    pub privileged: bool,
    /// Its segment.
    pub seg: Segment,
    /// The consuming end of its command ring.
    pub cmds: CmdConsumer,
    /// Its control connection: end of file when it exits.
    pub ctl: UnixStream,
    /// The engine's doorbell, which it rings when the engine sleeps.
    pub doorbell: OwnedFd,
    /// Its counters.
    pub stats: AppStats,
}

/// Why an association ends.
pub(crate) enum Ending {
    /// The application closed its control socket (exit, crash, SIGKILL).
    Departed,
    /// It broke the protocol.
    Violation(ProtocolViolation),
    /// The daemon is stopping.
    Stopping,
}

/// Why an application that said hello was not given an association. The
/// application is told with an errno where the protocol has one (EINVAL,
/// EMFILE); otherwise its control connection is closed.
#[derive(Debug, Error)]
pub enum JoinError {
    /// The hello did not decode (refused with EINVAL).
    #[error("bad hello: {0}")]
    BadHello(CtlError),
    /// `SO_PEERCRED` on the control connection failed.
    #[error("reading the application's credentials")]
    PeerCred(#[source] io::Error),
    /// `max_apps` applications are connected already (refused with EMFILE).
    #[error("{name} (pid {pid}): too many applications")]
    TooMany {
        /// The name in its hello.
        name: String,
        /// Its process id.
        pid: i32,
    },
    /// Creating or mapping its segment's memfd failed.
    #[error("creating its segment")]
    Memory(#[source] io::Error),
    /// The segment's layout was refused (cannot happen with a validated
    /// configuration).
    #[error("laying out its segment: {0}")]
    Layout(&'static str),
    /// Creating its doorbell (an eventfd) failed.
    #[error("creating its doorbell")]
    Doorbell(#[source] io::Error),
    /// Sending the welcome with the segment and doorbell failed.
    #[error("sending the welcome")]
    Welcome(#[source] io::Error),
    /// Adding its doorbell or control connection to the daemon's epoll set
    /// failed (after the welcome: the application sees its control
    /// connection end).
    #[error("watching its doorbell and control socket")]
    Watch(#[source] io::Error),
}

/// What an application gets, from its hello and the configuration: the
/// slots it asks for (0: the default) up to `max_sockets_per_app`, its
/// rings' starting size (0: the default; else clamped to the bounds and
/// rounded up to a power of two), and room for them to grow to
/// `ring_max_bytes`.
pub(crate) fn layout_for(hello: &ctl::Hello, cfg: &Validated) -> Layout {
    let nslots = match hello.nslots {
        0 => cfg.max_sockets_per_app,
        n => n.min(cfg.max_sockets_per_app),
    };
    let ring_bytes = match hello.ring_bytes {
        0 => cfg.ring_bytes,
        n => n
            .clamp(config::RING_BYTES_MIN, config::RING_BYTES_MAX)
            .next_power_of_two(),
    };
    Layout {
        nslots,
        ring_bytes,
        ring_max_bytes: cfg.ring_max_bytes.max(ring_bytes),
        cmd_slots: CMD_SLOTS,
    }
}

/// Answers the `hello` that arrived on control connection `s` (with
/// `wakers`, the eventfds its readiness waiters sleep on, which the engine
/// writes when they are armed: see `appif::notify`; anything but an
/// eventfd among them is closed): with
/// `apps` applications connected, either a refusal, or association
/// `assoc` (a fresh segment, in which the link MTU `mtu` is recorded, and
/// the engine's doorbell, both sent by `SCM_RIGHTS` with the welcome).
///
/// Errors: a [`JoinError`]; the application was told with an errno where
/// the protocol has one.
pub(crate) fn join(
    s: UnixStream,
    hello: &[u8],
    wakers: Vec<OwnedFd>,
    cfg: &Validated,
    apps: usize,
    assoc: u32,
    mtu: u32,
) -> Result<App, JoinError> {
    let refuse = |s: &UnixStream, errno: i32| {
        let _ = ctl::send_msg(s, &ctl::Welcome::refused(errno).encode(), &[]);
    };
    let hello = match ctl::Hello::decode(hello) {
        Ok(h) => h,
        Err(e) => {
            refuse(&s, errno::EINVAL);
            return Err(JoinError::BadHello(e));
        }
    };
    let cred = ctl::peer_cred(&s).map_err(JoinError::PeerCred)?;
    if apps >= cfg.max_apps as usize {
        refuse(&s, errno::EMFILE);
        return Err(JoinError::TooMany {
            name: hello.name,
            pid: cred.pid,
        });
    }
    let layout = layout_for(&hello, cfg);
    let len = layout.total_len();
    let memfd =
        ctl::memfd(&format!("corestack-app-{assoc}"), len as u64).map_err(JoinError::Memory)?;
    let region = Region::map_fd(memfd.as_fd(), len).map_err(JoinError::Memory)?;
    let seg = Segment::init(Arc::new(region), layout, assoc)
        .map_err(JoinError::Layout)?
        .with_sleepers(ctl::keep_eventfds(wakers));
    seg.set_mtu(mtu);
    seg.set_net(cfg.ip, cfg.prefix, cfg.gateway);
    let doorbell = ctl::eventfd().map_err(JoinError::Doorbell)?;
    let w = ctl::Welcome {
        status: 0,
        assoc,
        nslots: layout.nslots,
        ring_bytes: layout.ring_bytes,
        cmd_slots: CMD_SLOTS,
        seg_len: len as u64,
    };
    ctl::send_msg(&s, &w.encode(), &[memfd.as_fd(), doorbell.as_fd()])
        .map_err(JoinError::Welcome)?;
    let mut gids = ctl::supplementary_gids(cred.pid);
    gids.push(cred.gid);
    Ok(App {
        assoc,
        name: hello.name,
        privileged: cfg.may_bind_privileged(cred.uid, &gids),
        cred,
        cmds: CmdConsumer::new(seg.clone()),
        seg,
        ctl: s,
        doorbell,
        stats: AppStats::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn cfg() -> Validated {
        Config {
            iface: Some("mem0".into()),
            ip: Some("10.0.0.2/24".into()),
            max_sockets_per_app: 8,
            ..Config::default()
        }
        .validate()
        .expect("a valid configuration")
    }

    fn hello(nslots: u32, ring_bytes: u32) -> ctl::Hello {
        ctl::Hello {
            nslots,
            ring_bytes,
            name: "app".into(),
        }
    }

    #[test]
    fn hello_asking_nothing_gets_the_configured_defaults() {
        let c = cfg();
        let l = layout_for(&hello(0, 0), &c);
        assert_eq!(
            (l.nslots, l.ring_bytes, l.ring_max_bytes, l.cmd_slots),
            (8, c.ring_bytes, c.ring_max_bytes, CMD_SLOTS)
        );
        assert!(l.validate().is_ok());
    }

    #[test]
    fn hello_asking_too_much_or_odd_sizes_is_clamped_and_rounded() {
        let c = cfg();
        let l = layout_for(&hello(100, 5000), &c);
        assert_eq!(
            (l.nslots, l.ring_bytes),
            (8, 8192),
            "slots capped, ring rounded up"
        );
        let l = layout_for(&hello(3, 1), &c);
        assert_eq!((l.nslots, l.ring_bytes), (3, config::RING_BYTES_MIN));
        let l = layout_for(&hello(3, u32::MAX), &c);
        assert_eq!(l.ring_bytes, config::RING_BYTES_MAX);
        assert_eq!(
            l.ring_max_bytes,
            config::RING_BYTES_MAX,
            "room to grow, at least the start"
        );
        assert!(l.validate().is_ok());
    }
}
