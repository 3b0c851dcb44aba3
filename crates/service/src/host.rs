//! `corestack run`: the daemon. It owns the NIC and runs the engine on this
//! thread; applications connect to its Unix control socket, get a segment
//! (memfd) and the engine's doorbell (eventfd), and from then on talk to it
//! only through the segment (see `appif::seg`).
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
//! impossible ring index, bytes on the control socket) loses its
//! association: its connections are reset and its memory is released; the
//! others carry on. One that exits (even by SIGKILL) is noticed by the end
//! of its control socket within 10 ms.

use crate::apps;
use crate::config::{self, Policy, Validated};
use anyhow::{bail, Context, Result};
use appif::ctl::{self, Epoll, PeerCred};
use appif::region::Region;
use appif::seg::{self, CmdConsumer, CmdError, Desc, Layout, Segment, SegmentAccept};
use appif::socket::{AcceptQueue, Command};
use core::net::SocketAddrV4;
use core::time::Duration;
use engine::publish::Published;
use engine::time::Instant;
use nic::Port;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tracing::{info, warn};

const ECONNRESET: i32 = 104;
const EACCES: i32 = 13;
const EMFILE: i32 = 24;
const EINVAL: i32 = 22;
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
/// Command descriptors per application.
const CMD_SLOTS: u32 = 256;

/// Per-application counters.
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
struct App {
    assoc: u32,
    name: String,
    cred: PeerCred,
    gids: Vec<u32>,
    seg: Segment,
    cmds: CmdConsumer,
    ctl: UnixStream,
    doorbell: OwnedFd,
    stats: AppStats,
}

/// Why an association ends.
enum Ending {
    /// The application closed its control socket (exit, crash, SIGKILL).
    Departed,
    /// It broke the protocol.
    Violation(String),
    /// The daemon is stopping.
    Stopping,
}

/// The daemon's state around the engine.
pub struct Host<P: Port> {
    engine: Published<P>,
    cfg: Validated,
    listener: UnixListener,
    socket_path: PathBuf,
    waiting: Vec<(UnixStream, Instant)>,
    apps: Vec<App>,
    next_assoc: u32,
    epoll: Epoll,
    mtu: u32,
    last_control: Instant,
    last_work: Instant,
    violations: Vec<u32>,
    events: Vec<u64>,
    /// The application table for `corestack stat` (None without /dev/shm).
    app_table: Option<apps::AppsPublisher>,
}

const TOKEN_NIC: u64 = 0;
const TOKEN_LISTENER: u64 = 1;
const TOKEN_APP: u64 = 2;

impl<P: Port> Host<P> {
    /// The daemon on an engine already bound to its port, serving the
    /// control socket `listener` (from [`bind_control`] on `cfg.socket`).
    pub fn new(engine: engine::Engine<P>, cfg: Validated, listener: UnixListener) -> Result<Self> {
        let socket_path = cfg.socket.clone();
        listener.set_nonblocking(true)?;
        let epoll = Epoll::new().context("creating the epoll set")?;
        if let Some(fd) = engine.rx_fd() {
            // The fd stays open as long as the engine, which the host owns.
            epoll.add_raw(fd, TOKEN_NIC)?;
        }
        epoll.add(listener.as_fd(), TOKEN_LISTENER)?;
        let mtu = engine.mtu() as u32;
        let now = Instant::now();
        Ok(Host {
            engine: Published::new(engine),
            cfg,
            listener,
            socket_path,
            waiting: Vec::new(),
            apps: Vec::new(),
            next_assoc: 1,
            epoll,
            mtu,
            last_control: now,
            last_work: now,
            violations: Vec::new(),
            events: Vec::with_capacity(64),
            app_table: apps::AppsPublisher::new(),
        })
    }

    /// Runs until `stop` is set (SIGTERM, SIGINT), then resets every
    /// connection, tells every application, and removes the control socket.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<()> {
        info!(
            socket = %self.socket_path.display(),
            policy = ?self.cfg.policy,
            "corestack daemon ready"
        );
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
            if now.saturating_since(self.last_control) >= CONTROL_EVERY {
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
        Ok(())
    }

    /// Takes up to a burst of descriptors from application `i` and applies
    /// them. Errors: a protocol violation, described.
    fn pump(&mut self, i: usize, now: Instant) -> Result<usize, String> {
        let mut n = 0;
        while n < CMD_BURST {
            let app = &mut self.apps[i];
            let d = match app.cmds.pop() {
                None => break,
                Some(Ok(d)) => d,
                Some(Err(CmdError::BadIndex { head, tail })) => {
                    return Err(format!("command ring head {head} impossible (tail {tail})"))
                }
                Some(Err(CmdError::BadDesc(e))) => return Err(format!("bad descriptor: {e:?}")),
            };
            n += 1;
            app.stats.commands += 1;
            if d.slot() >= app.seg.layout().nslots {
                return Err(format!("descriptor names slot {} out of range", d.slot()));
            }
            if let Some(cmd) = self.translate(i, d)? {
                self.engine.engine.submit(cmd, now);
            }
            if let Desc::Close { slot } = d {
                // After the engine took the Close: only now may the slot be reused.
                SegmentAccept::app_closed(&self.apps[i].seg, slot);
            }
        }
        Ok(n)
    }

    /// The engine command for descriptor `d` of application `i`; None when
    /// the daemon answered it itself (a refused privileged port).
    fn translate(&mut self, i: usize, d: Desc) -> Result<Option<Command>, String> {
        let app = &mut self.apps[i];
        let seg = &app.seg;
        let id = seg::service_id(app.assoc, d.slot());
        let range = || format!("slot {} out of range", d.slot());
        let port = match d {
            Desc::Connect { local_port, .. } => Some(local_port),
            Desc::Listen { local, .. } | Desc::UdpBind { local, .. } => Some(local.port()),
            _ => None,
        };
        if let Some(p) = port {
            app.stats.opens += 1;
            if p != 0 && p < 1024 && !self.cfg.may_bind_privileged(app.cred.uid, &app.gids) {
                app.stats.refused += 1;
                if let Some(sh) = seg.shared(d.slot(), true) {
                    sh.set_closed(EACCES);
                }
                return Ok(None);
            }
        }
        let slot = d.slot();
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
                    SegmentAccept::new(seg.clone(), app.assoc, slot, backlog as usize)
                        .ok_or_else(range)?,
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
                app.stats.closes += 1;
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

    /// New applications, hellos, departures, ring violations.
    fn control(&mut self, now: Instant) {
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
            match self.listener.accept() {
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
                Ok(n) if n > 0 => {
                    let (s, _) = self.waiting.swap_remove(k);
                    if let Err(e) = self.welcome(s, &buf[..n]) {
                        warn!("refused an application: {e:#}");
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
                Ok(0) => self.end(i, Ending::Departed, now),
                Ok(_) => self.end(
                    i,
                    Ending::Violation("wrote on the control socket after its hello".into()),
                    now,
                ),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => self.end(i, Ending::Departed, now),
            }
        }
        self.engine.engine.take_violations(&mut self.violations);
        while let Some(assoc) = self.violations.pop() {
            if let Some(i) = self.apps.iter().position(|a| a.assoc == assoc) {
                self.end(
                    i,
                    Ending::Violation("impossible index in a socket ring".into()),
                    now,
                );
            }
        }
    }

    /// Answers a hello: a segment and the doorbell, or a refusal.
    fn welcome(&mut self, s: UnixStream, hello: &[u8]) -> Result<()> {
        let refuse = |s: &UnixStream, errno: i32| {
            let _ = ctl::send_msg(s, &ctl::Welcome::refused(errno).encode(), &[]);
        };
        let hello = match ctl::Hello::decode(hello) {
            Ok(h) => h,
            Err(e) => {
                refuse(&s, EINVAL);
                bail!("bad hello: {e}");
            }
        };
        let cred = ctl::peer_cred(&s)?;
        if self.apps.len() >= self.cfg.max_apps as usize {
            refuse(&s, EMFILE);
            bail!("{} (pid {}): too many applications", hello.name, cred.pid);
        }
        let nslots = match hello.nslots {
            0 => self.cfg.max_sockets_per_app,
            n => n.min(self.cfg.max_sockets_per_app),
        };
        let ring_bytes = match hello.ring_bytes {
            0 => self.cfg.ring_bytes,
            n => n
                .clamp(config::RING_BYTES_MIN, config::RING_BYTES_MAX)
                .next_power_of_two(),
        };
        let layout = Layout {
            nslots,
            ring_bytes,
            ring_max_bytes: self.cfg.ring_max_bytes.max(ring_bytes),
            cmd_slots: CMD_SLOTS,
        };
        let assoc = self.next_assoc;
        let len = layout.total_len();
        let memfd = ctl::memfd(&format!("corestack-app-{assoc}"), len as u64)?;
        let region = Arc::new(Region::map_fd(memfd.as_fd(), len)?);
        let seg = Segment::init(region, layout, assoc).map_err(|e| anyhow::anyhow!(e))?;
        seg.set_mtu(self.mtu);
        let doorbell = ctl::eventfd()?;
        let w = ctl::Welcome {
            status: 0,
            assoc,
            nslots,
            ring_bytes,
            cmd_slots: CMD_SLOTS,
            seg_len: len as u64,
        };
        ctl::send_msg(&s, &w.encode(), &[memfd.as_fd(), doorbell.as_fd()])?;
        self.epoll.add(doorbell.as_fd(), TOKEN_APP)?;
        self.epoll.add(s.as_fd(), TOKEN_APP)?;
        self.next_assoc += 1;
        let mut gids = ctl::supplementary_gids(cred.pid);
        gids.push(cred.gid);
        info!(
            assoc,
            app = %hello.name,
            pid = cred.pid,
            uid = cred.uid,
            nslots,
            ring_bytes,
            "application joined"
        );
        self.apps.push(App {
            assoc,
            name: hello.name,
            cred,
            gids,
            cmds: CmdConsumer::new(seg.clone()),
            seg,
            ctl: s,
            doorbell,
            stats: AppStats::default(),
        });
        Ok(())
    }

    /// Ends application `i`'s association: resets its connections, marks
    /// its segment closed, wakes it, and lets go of its memory.
    fn end(&mut self, i: usize, why: Ending, now: Instant) {
        let app = self.apps.swap_remove(i);
        let errno = ECONNRESET;
        app.seg.closed().store(errno as u32, Ordering::Release);
        let dropped = self.engine.engine.drop_owner(app.assoc, errno, now);
        app.seg.app_wake().notify();
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
            return;
        }
        for a in &self.apps {
            a.seg.engine_sleeping().store(1, Ordering::SeqCst);
        }
        // Re-check after setting the flags: a command enqueued before an
        // application saw its flag would otherwise wait for the nap to end.
        let pending = self
            .apps
            .iter_mut()
            .any(|a| !matches!(a.cmds.pending(), Ok(0)));
        if !pending {
            let _ = self.epoll.wait(&mut self.events, Some(MAX_NAP));
        }
        for a in &self.apps {
            a.seg.engine_sleeping().store(0, Ordering::SeqCst);
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
        let _ = std::fs::remove_file(&self.socket_path);
        info!("corestack daemon stopped");
    }
}

/// Creates the control socket at `path` (and its directory), world
/// connectable: permissions are enforced per port, not per connection.
/// Errors: another daemon answers on `path` ("already listens"), or the
/// directory or socket cannot be created (with what to do).
pub fn bind_control(path: &Path) -> Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating {} (run as root?)", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!(
                "a corestack daemon already listens on {} (stop it, or give this one another --socket)",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("removing the stale socket {}", path.display()))?;
    }
    let l = UnixListener::bind(path)
        .with_context(|| format!("binding the control socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(l)
}
