//! The host: the daemon's loop around the engine. It owns the NIC (through
//! the engine) and runs the engine on this thread; applications connect to
//! its control socket, get a segment (memfd) and the engine's doorbell
//! (eventfd), and from then on talk to it only through the segment (see
//! `appif::seg`).
//!
//! ```text
//!   loop: for each application: take ≤ 64 descriptors from its command ring,
//!                               check them, apply them to the engine
//!         engine iteration (rx burst, timers, tx)
//!         every 10 ms: new applications, departed ones, ring violations
//!         idle (adaptive/interrupt): set the engine-sleeping flag in every
//!         segment, re-check the command rings, sleep on epoll over the NIC
//!         queue fd, the doorbells and the control sockets (≤ 1 ms)
//! ```
//! An application that breaks the protocol (a bad descriptor or slot, an
//! impossible ring index, bytes on the control socket: a
//! [`ProtocolViolation`]) loses its association: its connections are reset
//! and its memory is released; the others carry on. One that exits (even by
//! SIGKILL) is noticed by the end of its control socket within 10 ms.
//!
//! Single-threaded: [`Host::run`] is the loop; nothing else touches the
//! engine or the association table.

use crate::apps::{self, AppsPublisher};
use crate::assoc::{self, App, Ending, JoinError};
use crate::config::{Policy, Validated};
use crate::control::ControlSocket;
use crate::forks::Forks;
use crate::mailbox::{lock, Msg, Role};
use crate::translate::{translate, ProtocolViolation};

mod forking;
use appif::ctl::{self, Epoll};
use appif::notify::Notify;
use appif::seg::{AppSegmentAccept, Desc};
use core::time::Duration;
use engine::publish::Published;
use engine::time::Instant;
use engine::Engine;
use nic::Port;
use std::fmt;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use thiserror::Error;
use tracing::{info, warn};

/// Descriptors taken from one application per iteration.
const CMD_BURST: usize = 64;
/// Control work (new and departed applications) runs this often.
const CONTROL_EVERY: Duration = Duration::from_millis(10);
/// An application has this long to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest sleep while idle: the engine's timers are checked at least this often.
const MAX_NAP: Duration = Duration::from_millis(1);
/// Control connections waiting for their hello, at most.
const MAX_WAITING: usize = 64;

const TOKEN_NIC: u64 = 0;
const TOKEN_LISTENER: u64 = 1;
const TOKEN_APP: u64 = 2;

/// The host could not be set up around its engine (before any application
/// joined): an epoll or socket call failed.
#[derive(Debug, Error)]
#[error("{what}")]
pub struct SetupError {
    /// What was being done.
    what: &'static str,
    /// Why it failed.
    source: io::Error,
}

impl SetupError {
    fn new(what: &'static str) -> impl FnOnce(io::Error) -> SetupError {
        move |source| SetupError { what, source }
    }
}

/// The daemon's state around the engine: the control socket, the
/// associations, and the epoll set the loop sleeps on.
pub struct Host<P: Port> {
    engine: Published<P>,
    cfg: Validated,
    /// The only or first engine's (control socket), or another's.
    role: Role,
    /// With several engines: this engine's doorbell (other engines ring it
    /// after a handoff while it sleeps).
    bell: Option<Arc<appif::doorbell::Doorbell>>,
    /// This engine's command ring in each segment.
    lane: u32,
    /// Control connections that have not said hello yet, since when.
    waiting: Vec<(UnixStream, Instant)>,
    /// The association table.
    apps: Vec<App>,
    next_assoc: u32,
    epoll: Epoll,
    mtu: u32,
    last_control: Instant,
    last_work: Instant,
    violations: Vec<u32>,
    events: Vec<u64>,
    /// The application table for `corestack stat` (None without /dev/shm).
    app_table: Option<AppsPublisher>,
    /// Sockets shared across fork, and the references held for children.
    forks: Forks,
    /// Engine 0 of several: lends of connections other engines hold.
    elsewhere: Vec<forking::Elsewhere>,
    /// Engine 0 of several: borrows answered once the engine holding the
    /// lent connection has taken its `Lend` (at most [`MAX_WAITING`]).
    borrows: Vec<forking::Borrowing>,
}

impl<P: Port> Host<P> {
    /// The daemon on `port`, with an engine configured from `cfg` (see
    /// [`Validated::engine_config`]), serving `control` (from
    /// [`ControlSocket::bind`] on `cfg.socket`).
    ///
    /// Errors: creating the epoll set or adding the port's queue fd or the
    /// control socket to it failed.
    pub fn new(port: P, cfg: Validated, control: ControlSocket) -> Result<Self, SetupError> {
        // The daemon takes commands from application segments, not from this channel.
        let (_unused, rx) = appif::spsc::channel(1);
        let engine = Engine::new(
            port,
            cfg.engine_config(),
            rx,
            Arc::new(Notify::default()),
            Instant::now(),
        );
        Self::with_engine(engine, cfg, Role::First(control, Vec::new()), None)
    }

    /// The host of `engine` (joined to its handoff mesh when there are
    /// several) in `role`, sleeping on `bell` too when it has one.
    /// Errors: as [`Host::new`].
    pub(crate) fn with_engine(
        engine: Engine<P>,
        cfg: Validated,
        role: Role,
        bell: Option<Arc<appif::doorbell::Doorbell>>,
    ) -> Result<Self, SetupError> {
        let epoll = Epoll::new().map_err(SetupError::new("creating the epoll set"))?;
        if let Role::First(control, _) = &role {
            let listener = control.listener();
            listener
                .set_nonblocking(true)
                .map_err(SetupError::new("making the control socket nonblocking"))?;
            epoll
                .add(listener.as_fd(), TOKEN_LISTENER)
                .map_err(SetupError::new("watching the control socket"))?;
        }
        if let Some(fd) = engine.rx_fd() {
            // The fd stays open as long as the engine, which the host owns.
            epoll
                .add_raw(fd, TOKEN_NIC)
                .map_err(SetupError::new("watching the NIC queue"))?;
        }
        if let Some(b) = &bell {
            // The doorbell lives as long as the engine's handoff, which the host owns.
            epoll
                .add_raw(b.fd(), TOKEN_NIC)
                .map_err(SetupError::new("watching the engine's doorbell"))?;
        }
        let mtu = engine.mtu() as u32;
        let lane = engine.index() as u32;
        let now = Instant::now();
        let app_table = match role {
            Role::First(..) => AppsPublisher::new(),
            Role::Other(_) => None,
        };
        Ok(Host {
            engine: Published::new(engine),
            cfg,
            role,
            bell,
            lane,
            waiting: Vec::new(),
            apps: Vec::new(),
            next_assoc: 1,
            epoll,
            mtu,
            last_control: now,
            last_work: now,
            violations: Vec::new(),
            events: Vec::with_capacity(64),
            app_table,
            forks: Forks::default(),
            elsewhere: Vec::new(),
            borrows: Vec::new(),
        })
    }

    /// Runs until `stop` is set (SIGTERM, SIGINT), then resets every
    /// connection, tells every application (ECONNRESET), and removes the
    /// control socket.
    pub fn run(&mut self, stop: &AtomicBool) {
        let Role::First(control, _) = &self.role else {
            info!(engine = self.lane, "corestack engine ready");
            return self.serve(stop);
        };
        info!(
            socket = %control.path().display(),
            engines = self.cfg.cores,
            ip = %format_args!("{}/{}", self.cfg.ip, self.cfg.prefix),
            ip6 = %self.cfg.ip6.map_or("none".to_string(), |(a, p)| format!("{a}/{p}")),
            policy = ?self.cfg.policy,
            "corestack daemon ready"
        );
        self.serve(stop);
    }

    /// The loop of [`Host::run`].
    fn serve(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            let mut worked = false;
            for i in (0..self.apps.len()).rev() {
                match self.pump(i, now) {
                    Ok(n) => worked |= n > 0,
                    Err(why) => self.end(i, Ending::Violation(why), now),
                }
            }
            worked |= self.engine.engine.poll(now);
            self.engine.publish(now, false);
            if !self.borrows.is_empty() {
                self.answer_borrows(now);
            }
            let mail = match &self.role {
                Role::Other(m) => m.mail.load(Ordering::Acquire),
                Role::First(..) => false,
            };
            if mail || now.saturating_since(self.last_control) >= CONTROL_EVERY {
                self.last_control = now;
                self.control(now);
            }
            if worked {
                self.last_work = now;
            } else {
                self.idle(now);
            }
        }
        self.stop();
    }

    /// Takes up to a burst of descriptors from application `i` and applies
    /// them; returns how many. Errors: the application broke the protocol.
    fn pump(&mut self, i: usize, now: Instant) -> Result<usize, ProtocolViolation> {
        let mut n = 0;
        while n < CMD_BURST {
            let app = &mut self.apps[i];
            let d = match app.cmds.pop() {
                None => break,
                Some(d) => d?,
            };
            n += 1;
            app.stats.commands += 1;
            let (parent, then_close) = match self.shared(i, d, now)? {
                forking::Then::Done => continue,
                forking::Then::Apply(parent, then_close) => (parent, then_close),
            };
            let app = &mut self.apps[i];
            let (assoc, seg, privileged) = (app.assoc, &app.seg, app.privileged);
            if let Some(cmd) = translate(seg, assoc, d, privileged, parent, &mut app.stats)? {
                self.engine.engine.submit(cmd, now);
            }
            if let Desc::Close { slot } | Desc::Abort { slot } = d {
                // After the engine took the Close: only now may the slot be reused.
                AppSegmentAccept::app_closed(&self.apps[i].seg, slot);
            }
            self.close_now(then_close, now);
        }
        Ok(n)
    }

    /// Applies everything left in application `i`'s command ring (it is
    /// leaving: what it asked before it went still happens, as the
    /// kernel carries out a process's calls before its exit).
    fn drain(&mut self, i: usize, now: Instant) {
        while matches!(self.pump(i, now), Ok(n) if n > 0) {}
    }

    /// New applications, hellos, departures, ring violations (the first
    /// engine); what the first engine said, ring violations (the others).
    fn control(&mut self, now: Instant) {
        match &self.role {
            Role::First(..) => self.control_first(now),
            Role::Other(mailbox) => {
                mailbox.mail.store(false, Ordering::Release);
                let msgs = std::mem::take(&mut *lock(&mailbox.to));
                for m in msgs {
                    match m {
                        Msg::Join(app, claim) => {
                            self.adopt_view(*app);
                            self.joined(claim, now);
                        }
                        Msg::End(assoc) => {
                            if let Some(i) = self.apps.iter().position(|a| a.assoc == assoc) {
                                self.drain(i, now);
                                self.end(i, Ending::Departed, now);
                            }
                        }
                    }
                }
            }
        }
        let gone = self.forks.reap(std::time::Instant::now());
        self.close_now(gone, now);
        self.engine.engine.take_violations(&mut self.violations);
        while let Some(assoc) = self.violations.pop() {
            if let Some(i) = self.apps.iter().position(|a| a.assoc == assoc) {
                self.end(i, Ending::Violation(ProtocolViolation::RingIndex), now);
            }
        }
    }

    /// Engine e ≥ 1: serves `app`, its view of a new association.
    fn adopt_view(&mut self, app: App) {
        let watched = self.epoll.add(app.doorbell.as_fd(), TOKEN_APP);
        if let (Err(e), Role::Other(mailbox)) = (watched, &self.role) {
            warn!(assoc = app.assoc, "watching an application's doorbell: {e}");
            lock(&mailbox.broken).push(app.assoc);
        }
        self.apps.push(app);
        self.publish_owners();
    }

    /// The first engine's control work: hellos, departures, forks, and
    /// the associations other engines found broken.
    fn control_first(&mut self, now: Instant) {
        if let Some(t) = self.app_table.as_mut() {
            t.publish(self.apps.iter().map(|a| apps::AppRow {
                assoc: a.assoc,
                pid: a.cred.pid,
                uid: a.cred.uid,
                name: a.name.clone(),
                commands: a.stats.commands,
                opens: a.stats.opens,
                closes: a.stats.closes,
                refused: a.stats.refused,
            }));
        }
        loop {
            let Role::First(control, _) = &self.role else {
                return;
            };
            match control.listener().accept() {
                Ok((s, _)) => {
                    // Bounded: connections that never say hello cannot pile up.
                    if self.waiting.len() < MAX_WAITING && s.set_nonblocking(true).is_ok() {
                        self.waiting.push((s, now));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    warn!("accepting on the control socket: {e}");
                    break;
                }
            }
        }
        for k in (0..self.waiting.len()).rev() {
            let mut buf = [0u8; ctl::HELLO_LEN];
            let mut fds = Vec::new();
            let r = ctl::recv_msg(&self.waiting[k].0, &mut buf, &mut fds);
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if now.saturating_since(self.waiting[k].1) > HELLO_TIMEOUT {
                        self.waiting.swap_remove(k);
                    }
                }
                Ok(n) if n == ctl::BORROW_LEN => {
                    let (s, _) = self.waiting.swap_remove(k);
                    self.lent(s, &buf[..n], now);
                }
                Ok(n) if n > 0 => {
                    let (s, _) = self.waiting.swap_remove(k);
                    if let Err(e) = self.welcome(s, &buf[..n], fds) {
                        warn!("refused an application: {}", Chain(&e));
                    }
                }
                _ => {
                    self.waiting.swap_remove(k);
                }
            }
        }
        for i in (0..self.apps.len()).rev() {
            let mut b = [0u8; 1];
            match (&self.apps[i].ctl).read(&mut b) {
                Ok(0) => {
                    self.drain(i, now);
                    self.end(i, Ending::Departed, now)
                }
                Ok(_) => self.end(
                    i,
                    Ending::Violation(ProtocolViolation::ControlSocketWrite),
                    now,
                ),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => self.end(i, Ending::Departed, now),
            }
        }
        let Role::First(_, others) = &self.role else {
            return;
        };
        let broken: Vec<u32> = others
            .iter()
            .flat_map(|m| std::mem::take(&mut *lock(&m.broken)))
            .collect();
        for assoc in broken {
            if let Some(i) = self.apps.iter().position(|a| a.assoc == assoc) {
                self.end(i, Ending::Violation(ProtocolViolation::OnOtherEngine), now);
            }
        }
    }

    /// Answers a hello: a new association, or a refusal.
    fn welcome(
        &mut self,
        s: UnixStream,
        hello: &[u8],
        wakers: Vec<std::os::fd::OwnedFd>,
    ) -> Result<(), JoinError> {
        // A forked child's parent said Forking before the fork: take it
        // (and the Forked after it) before judging the child's hello.
        let claim = ctl::Hello::decode(hello)
            .map(|h| (h.parent, h.ticket))
            .unwrap_or_default();
        if let Some(p) = self.apps.iter().position(|a| a.assoc == claim.0) {
            let now = Instant::now();
            self.drain(p, now);
        }
        let forks = &self.forks;
        let mut app = assoc::join(
            s,
            hello,
            wakers,
            &self.cfg,
            self.apps.len(),
            self.next_assoc,
            self.mtu,
            // A parent that died meanwhile no longer passes: its children
            // were reparented at once, so /proc names another parent.
            |a| self.apps.iter().find(|x| x.assoc == a).map(|x| x.cred.pid),
            |pid| forks.is_child(claim.0, claim.1, pid),
        )?;
        if claim.0 != 0 {
            self.forks.joined(claim.0, claim.1, app.assoc);
        }
        self.epoll
            .add(app.doorbell.as_fd(), TOKEN_APP)
            .and_then(|()| self.epoll.add(app.ctl.as_fd(), TOKEN_APP))
            .map_err(JoinError::Watch)?;
        self.next_assoc += 1;
        if let Role::First(_, others) = &self.role {
            // Every other engine's view, or none (the application sees its
            // control connection end).
            let views = (1..=others.len() as u32)
                .map(|e| app.for_engine(e))
                .collect::<io::Result<Vec<_>>>()
                .map_err(JoinError::Watch)?;
            for (m, view) in others.iter().zip(views) {
                m.post(Msg::Join(Box::new(view), claim));
            }
        }
        let layout = app.seg.layout();
        info!(
            assoc = app.assoc,
            app = %app.name,
            pid = app.cred.pid,
            uid = app.cred.uid,
            nslots = layout.nslots,
            ring_bytes = layout.ring_bytes,
            "application joined"
        );
        self.apps.push(app);
        self.publish_owners();
        Ok(())
    }

    /// Tells the connection table who each association is (pid and name).
    fn publish_owners(&mut self) {
        let owners = self.apps.iter().map(|a| {
            (
                a.assoc,
                a.cred.pid as u32,
                observe::stats_shm::comm_bytes(&a.name),
            )
        });
        self.engine.set_owners(owners);
    }

    /// Ends application `i`'s association: resets its connections, marks
    /// its segment closed, wakes it, and lets go of its memory.
    fn end(&mut self, i: usize, why: Ending, now: Instant) {
        let app = self.apps.swap_remove(i);
        self.publish_owners();
        match (&self.role, &why) {
            (Role::First(_, others), _) => {
                for m in others {
                    m.post(Msg::End(app.assoc));
                }
            }
            (Role::Other(m), Ending::Violation(_)) => lock(&m.broken).push(app.assoc),
            (Role::Other(_), _) => {}
        }
        let errno = appif::errno::ECONNRESET;
        app.seg.closed().store(errno as u32, Ordering::Release);
        let ids = self.engine.engine.sockets_of(app.assoc);
        let (keep, close) = self.forks.ending(app.assoc, &ids);
        let dropped = self
            .engine
            .engine
            .drop_owner(app.assoc, errno, now, |id| keep.contains(&id));
        self.engine.engine.orphan_listeners(&keep, now);
        self.close_now(close, now);
        app.seg.notify_app();
        let _ = self.epoll.delete(app.doorbell.as_fd());
        let _ = self.epoll.delete(app.ctl.as_fd());
        let s = app.stats;
        match why {
            Ending::Departed => info!(
                assoc = app.assoc, app = %app.name, pid = app.cred.pid, sockets = dropped,
                commands = s.commands, "application left; its connections were reset"
            ),
            Ending::Violation(reason) => warn!(
                assoc = app.assoc, app = %app.name, pid = app.cred.pid, sockets = dropped,
                "application disconnected: {reason}"
            ),
            Ending::Stopping => info!(
                assoc = app.assoc, app = %app.name, sockets = dropped,
                "daemon stopping: application's connections reset"
            ),
        }
        // `app` (its segment mapping, doorbell and control socket) goes here.
    }

    /// Sleeps per the polling policy when nothing happened for long enough.
    fn idle(&mut self, now: Instant) {
        let after = match self.cfg.policy {
            Policy::Busy => return,
            Policy::Adaptive { idle } => idle,
            Policy::Interrupt => Duration::ZERO,
        };
        if now.saturating_since(self.last_work) < after {
            // Still polling: an application on this CPU (same priority)
            // runs first if it can, instead of after the poll period
            // (`sched_yield` returns at once when none is waiting).
            std::thread::yield_now();
            return;
        }
        let lane = self.lane;
        for a in &self.apps {
            if let Some(f) = a.seg.lane_sleeping(lane) {
                f.store(1, Ordering::SeqCst);
            }
        }
        if let Some(b) = &self.bell {
            b.nap_begin();
        }
        // Re-check after setting the flags: a command enqueued (or a frame
        // handed over) before its producer saw the flag would otherwise
        // wait for the nap to end.
        let pending = self
            .apps
            .iter_mut()
            .any(|a| !matches!(a.cmds.pending(), Ok(0)))
            || self.engine.engine.has_commands();
        if !pending {
            let _ = self.epoll.wait(&mut self.events, Some(MAX_NAP));
        }
        if let Some(b) = &self.bell {
            b.nap_end();
        }
        for a in &self.apps {
            if let Some(f) = a.seg.lane_sleeping(lane) {
                f.store(0, Ordering::SeqCst);
            }
            ctl::eventfd_drain(a.doorbell.as_fd());
        }
    }

    fn stop(&mut self) {
        let now = Instant::now();
        while !self.apps.is_empty() {
            self.end(self.apps.len() - 1, Ending::Stopping, now);
        }
        self.engine.engine.shutdown(now);
        self.engine.publish(now, true);
        if let Role::First(control, _) = &self.role {
            let _ = std::fs::remove_file(control.path());
            info!("corestack daemon stopped");
        }
    }
}

/// An error and its sources on one line, `a: b: c`, for the log.
struct Chain<'a>(&'a dyn std::error::Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(e) = source {
            write!(f, ": {e}")?;
            source = e.source();
        }
        Ok(())
    }
}
