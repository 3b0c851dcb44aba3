//! Associations: one per application that said hello on the control
//! socket. An association owns the application's segment (a sealed memfd
//! both map), the consuming end of its command ring, its control
//! connection (whose end means the application is gone) and the engine's
//! doorbell it rings; it ends when the application leaves, breaks the
//! protocol, or the daemon stops.

use crate::config::{self, Validated};
use crate::translate::{AppStats, ProtocolViolation};
use appif::ctl::{self, CtlError, PeerCred};
use appif::errno;
use appif::region::Region;
use appif::seg::{AppSegment, CmdConsumer, Layout};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use thiserror::Error;

/// Command descriptors per application.
pub const CMD_SLOTS: u32 = 256;

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
    /// A forked child's parent association, checked at hello: the
    /// listeners it may join.
    pub parent: Option<u32>,
    /// Its segment.
    pub seg: AppSegment,
    /// The segment's memfd, for an application it lends a connection to
    /// (`ctl::Lent`).
    pub memfd: OwnedFd,
    /// The consuming end of its command ring.
    pub cmds: CmdConsumer,
    /// Its control connection: end of file when it exits.
    pub ctl: UnixStream,
    /// The engine's doorbell, which it rings when the engine sleeps.
    pub doorbell: OwnedFd,
    /// With several engines (on the first engine's association): the
    /// doorbells of engines 1.. (each engine's association takes its own,
    /// [`App::for_engine`]).
    pub lanes: Vec<Option<OwnedFd>>,
    /// Its counters.
    pub stats: AppStats,
}

impl App {
    /// Engine `engine`'s view of this association (engine ≥ 1 of a daemon
    /// with several): the same segment, application and credentials, the
    /// consuming end of that engine's command ring and its doorbell.
    /// Errors: EBADF when that engine's view was taken already or the
    /// segment has no such engine; `dup` failing (EMFILE).
    pub(crate) fn for_engine(&mut self, engine: u32) -> io::Result<App> {
        let ebadf = || errno::io(errno::EBADF);
        let doorbell = self
            .lanes
            .get_mut((engine as usize).wrapping_sub(1))
            .and_then(Option::take)
            .ok_or_else(ebadf)?;
        Ok(App {
            assoc: self.assoc,
            name: self.name.clone(),
            cred: self.cred,
            privileged: self.privileged,
            parent: self.parent,
            cmds: CmdConsumer::lane(self.seg.clone(), engine).ok_or_else(ebadf)?,
            seg: self.seg.for_lane(engine),
            memfd: self.memfd.try_clone()?,
            ctl: self.ctl.try_clone()?,
            doorbell,
            lanes: Vec::new(),
            stats: AppStats::default(),
        })
    }
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
    /// The hello claimed a parent association, but the parent process of
    /// the application is not that association's process, or no such
    /// association lives (refused with EPERM).
    #[error("{name} (pid {pid}): not a child of association {parent}'s process")]
    NotChild {
        /// The name in its hello.
        name: String,
        /// Its process id.
        pid: i32,
        /// The association it claimed.
        parent: u32,
    },
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
        engines: cfg.cores,
    }
}

/// Answers the `hello` that arrived on control connection `s` (with
/// `wakers`, the eventfds its readiness waiters sleep on, which the engine
/// writes when they are armed: see `appif::notify`; anything but an
/// eventfd among them is closed): with
/// `apps` applications connected, either a refusal, or association
/// `assoc` (a fresh segment, in which the link MTU `mtu` is recorded, and
/// the engine's doorbell, one per engine with `cores` > 1, all sent by
/// `SCM_RIGHTS` with the welcome: the memfd first, then the doorbells in
/// engine order).
///
/// Errors: a [`JoinError`]; the application was told with an errno where
/// the protocol has one.
///
/// A hello with a parent association (a forked child) is welcomed only
/// when `pid_of` names that association's process and it is the parent
/// (`/proc/<pid>/stat`, field 4) of the process on the control connection
/// (`SO_PEERCRED`): ancestry, not uid, so a worker that dropped its
/// privileges after fork still joins. Its own permissions (ports below
/// 1024) are those of its own credentials, as for any application. A
/// child whose parent named it (`forked_child`: its pid is the one the
/// parent gave with the hello's fork ticket) is welcomed even after the
/// parent exited (a daemonizing server).
#[allow(clippy::too_many_arguments)]
pub(crate) fn join(
    s: UnixStream,
    hello: &[u8],
    wakers: Vec<OwnedFd>,
    cfg: &Validated,
    apps: usize,
    assoc: u32,
    mtu: u32,
    pid_of: impl Fn(u32) -> Option<i32>,
    forked_child: impl Fn(i32) -> bool,
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
    let parent = match hello.parent {
        0 => None,
        p if pid_of(p).is_some_and(|pp| parent_pid(cred.pid) == Some(pp)) => Some(p),
        p if forked_child(cred.pid) => Some(p),
        p => {
            refuse(&s, errno::EPERM);
            return Err(JoinError::NotChild {
                name: hello.name,
                pid: cred.pid,
                parent: p,
            });
        }
    };
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
    let seg = AppSegment::init(Arc::new(region), layout, assoc)
        .map_err(JoinError::Layout)?
        .with_sleepers(ctl::keep_eventfds(wakers));
    seg.set_mtu(mtu);
    seg.set_net(cfg.ip, cfg.prefix, cfg.gateway);
    seg.set_net6(cfg.ip6);
    let doorbell = ctl::eventfd().map_err(JoinError::Doorbell)?;
    let lanes = (1..layout.engines)
        .map(|_| ctl::eventfd().map(Some))
        .collect::<io::Result<Vec<_>>>()
        .map_err(JoinError::Doorbell)?;
    let w = ctl::Welcome {
        status: 0,
        assoc,
        nslots: layout.nslots,
        ring_bytes: layout.ring_bytes,
        cmd_slots: CMD_SLOTS,
        seg_len: len as u64,
    };
    // The memfd, then each engine's doorbell in engine order.
    let fds: Vec<_> = [memfd.as_fd(), doorbell.as_fd()]
        .into_iter()
        .chain(lanes.iter().flatten().map(|d| d.as_fd()))
        .collect();
    ctl::send_msg(&s, &w.encode(), &fds).map_err(JoinError::Welcome)?;
    drop(fds);
    let mut gids = ctl::supplementary_gids(cred.pid);
    gids.push(cred.gid);
    Ok(App {
        assoc,
        name: hello.name,
        privileged: cfg.may_bind_privileged(cred.uid, &gids),
        parent,
        cred,
        cmds: CmdConsumer::new(seg.clone()),
        // Engine 0's view: its status blocks push to its ready ring.
        seg: seg.for_lane(0),
        memfd,
        ctl: s,
        doorbell,
        lanes,
        stats: AppStats::default(),
    })
}

/// The parent process id of `pid`: field 4 of `/proc/<pid>/stat` (after
/// the command name in parentheses, which may itself hold spaces or
/// parentheses). None when the process is gone or the line is garbled.
pub(crate) fn parent_pid(pid: i32) -> Option<i32> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_ppid(&stat)
}

fn stat_ppid(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(')')?;
    // " S 1234 ...": state, then the parent's pid.
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn cfg() -> Validated {
        Config {
            iface: Some("mem0".into()),
            ip: vec!["10.0.0.2/24".into()],
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
            parent: 0,
            ticket: 0,
        }
    }

    #[test]
    fn parent_pid_reads_field_4_of_proc_stat() {
        assert_eq!(stat_ppid("42 (cat) R 7 42 42 0"), Some(7));
        assert_eq!(
            stat_ppid("42 (a) b (c) S 9 1 1"),
            Some(9),
            "parentheses in comm"
        );
        assert_eq!(stat_ppid("garbage"), None);
        assert_eq!(stat_ppid("1 (x)"), None);
        let me = std::process::id() as i32;
        let parent = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| stat_ppid(&s));
        assert!(parent.is_some_and(|p| p > 0));
        assert_eq!(parent_pid(me), parent);
        assert_eq!(parent_pid(-1), None);
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
