//! The stack handle: starts an engine on a port and carries commands to it.
//!
//! Files: `builder` (settings, opening the port, starting the engine in
//! one of three modes), `run` (the engine loop of embedded and inline
//! mode: the engine thread, its naps and doorbell), `steps` (the steps of
//! every wait, written once: spin, arm, look again, sleep), `wait` (how an
//! application thread waits for the engine with them), and here
//! the handle itself and the sockets it opens.

mod builder;
mod fork;
mod listen;
mod owner;
mod request;
mod run;
mod spin;
mod steps;
mod wait;

pub use appif::parse_cpu_list;
pub use builder::StackBuilder;
pub use nic::Driver;
pub use owner::EngineClaim;
pub(crate) use request::Request;
pub use steps::{spin_round, Step, StepInterrupted, WaitSteps};
pub(crate) use wait::Policy;
pub use wait::Waited;

use appif::bytes;
use appif::command::{Command, Owner};
use appif::errno;
use appif::notify::Notify;
use appif::seg::Desc;
use appif::seg::{AcceptQueue, Accepted};
use appif::socket::{ReusePort, SockId, StatusHandle};
use appif::spsc;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use core::time::Duration;
use engine::stats::Stats;
use engine::time::Instant;
use run::{DynEngine, Idle};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The parts of a socket the application holds.
pub(crate) struct Parts {
    pub id: SockId,
    pub shared: Arc<StatusHandle>,
    pub tx: bytes::Writer,
    pub rx: bytes::Reader,
}

impl From<appif::seg::Accepted> for Parts {
    fn from(a: appif::seg::Accepted) -> Parts {
        Parts {
            id: a.id,
            shared: a.shared,
            tx: a.tx,
            rx: a.rx,
        }
    }
}

impl From<crate::service::SlotParts> for Parts {
    fn from(p: crate::service::SlotParts) -> Parts {
        Parts {
            id: p.id,
            shared: p.shared,
            tx: p.tx,
            rx: p.rx,
        }
    }
}

/// A listener's queue of accepted connections.
pub(crate) enum AcceptRx {
    /// Embedded and inline mode: values from each engine (one queue per
    /// engine: the listener exists on every engine), taken in turn from
    /// the one after the queue last taken from.
    Local(Vec<spsc::Receiver<Accepted>>, usize),
    /// Service mode: slot numbers in the RX ring of the listener's slot
    /// on each of the daemon's engines (with that engine), taken in turn
    /// from the one after the ring last taken from.
    AppSegment(Vec<(bytes::Reader, usize)>, usize),
}

impl AcceptRx {
    /// True when no connection waits.
    pub fn is_empty(&self) -> bool {
        match self {
            AcceptRx::Local(qs, _) => qs.iter().all(|q| q.is_empty()),
            AcceptRx::AppSegment(rs, _) => rs.iter().all(|(r, _)| r.len() < 4),
        }
    }

    /// True for a service-mode listener on several engines: each engine
    /// announces its connections on its own member's status block, and
    /// all of them on the segment's wake-up point
    /// ([`Stack::changes`]), which a waiter for one of them sleeps on.
    pub fn on_several(&self) -> bool {
        matches!(self, AcceptRx::AppSegment(rs, _) if rs.len() > 1)
    }
}

/// A running corestack engine and the way to it. Cheap to clone.
#[derive(Clone)]
pub struct Stack {
    pub(crate) inner: Arc<Inner>,
}

enum Mode {
    Service(crate::service::Service),
    /// One engine per lock: a waiting thread runs its own engine (see
    /// [`Stack::claim_engine`]) and every engine nobody owns it can lock.
    Inline(Vec<Mutex<DynEngine>>, Arc<owner::Owners>),
    Embedded {
        stop: Arc<AtomicBool>,
        /// One thread per engine.
        threads: Mutex<Vec<JoinHandle<()>>>,
        /// Each engine's counters, as its thread last published them.
        stats: Vec<Arc<Mutex<Stats>>>,
    },
}

/// The way to one engine: its command ring, and in embedded mode the
/// doorbell of its thread.
pub(crate) struct Lane {
    commands: Mutex<spsc::Sender<Command>>,
    /// Rung after a command when the engine thread naps (adaptive polling).
    doorbell: Option<Arc<appif::doorbell::Doorbell>>,
}

/// What setting up the NIC found, for the command line to say.
#[derive(Debug, Clone, Default)]
pub(crate) struct NicNotes {
    /// AF_XDP fell back to generic (skb) mode.
    pub xdp_generic: bool,
    /// Several engines on AF_XDP: how programming the NIC's RSS went.
    pub rss: Option<nic::rss::NicRss>,
}

pub(crate) struct Inner {
    /// One per engine (one in service mode: the daemon's).
    lanes: Vec<Lane>,
    /// Who owns a flow, when there are several engines.
    steering: Option<Arc<nic::rss::Steering>>,
    /// The stack's address (for the owner of a flow).
    ip: Ipv4Addr,
    /// The stack's global IPv6 address, if it has one (for the owner of
    /// an IPv6 flow).
    ip6: Option<Ipv6Addr>,
    /// Bumped by the engine after each iteration that changed a socket.
    wake: Arc<Notify>,
    next_id: AtomicU64,
    mode: Mode,
    pub(crate) ring_bytes: usize,
    /// The most a TCP connection's ring may grow to, bytes.
    ring_max_bytes: usize,
    nic: NicNotes,
    mtu: usize,
    idle: Idle,
    /// Spin time of waits before they sleep.
    spin: Duration,
    /// The process's trace segment (`corestack trace`).
    pub(crate) tracer: observe::trace::Tracer,
}

impl Drop for Inner {
    fn drop(&mut self) {
        match &self.mode {
            Mode::Service(_) => {}
            Mode::Inline(engines, _) => {
                for e in engines {
                    if let Ok(mut e) = e.lock() {
                        e.shutdown(Instant::now());
                    }
                }
            }
            Mode::Embedded { stop, threads, .. } => {
                stop.store(true, Ordering::Release);
                let threads = threads.lock().map(|mut t| std::mem::take(&mut *t));
                for t in threads.unwrap_or_default() {
                    let _ = t.join();
                }
            }
        }
    }
}

impl Stack {
    /// True when AF_XDP fell back to generic (skb) XDP mode: it works, slower.
    pub fn xdp_generic_fallback(&self) -> bool {
        self.inner.nic.xdp_generic
    }

    /// With several engines on an AF_XDP interface: whether its RSS was
    /// programmed with the engines' hash, or why not (see
    /// [`nic::rss::program_nic`]); None otherwise.
    pub fn nic_rss(&self) -> Option<&nic::rss::NicRss> {
        self.inner.nic.rss.as_ref()
    }

    /// The link MTU in bytes.
    pub fn mtu(&self) -> usize {
        self.inner.mtu
    }

    /// The engines' counters, summed (in embedded mode, at most 10 ms old).
    pub fn stats(&self) -> Stats {
        let mut total = Stats::default();
        for s in self.engine_stats() {
            total.add(&s);
        }
        total
    }

    /// Each engine's counters, in engine order (service mode: none; see
    /// `corestack stat` for the daemon's).
    pub fn engine_stats(&self) -> Vec<Stats> {
        match &self.inner.mode {
            Mode::Service(_) => Vec::new(),
            Mode::Inline(engines, _) => engines
                .iter()
                .map(|e| e.lock().map(|e| e.stats()).unwrap_or_default())
                .collect(),
            Mode::Embedded { stats, .. } => stats
                .iter()
                .map(|s| s.lock().map(|s| s.clone()).unwrap_or_default())
                .collect(),
        }
    }

    /// The number of engines serving this stack (in service mode, the
    /// daemon's).
    pub fn engines(&self) -> usize {
        match &self.inner.mode {
            Mode::Service(s) => s.engines(),
            _ => self.inner.lanes.len(),
        }
    }

    /// The engine this thread's new sockets go to when nothing else
    /// decides (a connect from an ephemeral port, a UDP socket without a
    /// port, the home of a SO_REUSEPORT listener): each thread is given one
    /// in turn at its first socket, so the threads of a server spread over
    /// the engines. 0 with one engine.
    pub fn current_engine(&self) -> usize {
        self.thread_engine()
    }

    /// The engine holding socket `id` (0 with one engine).
    pub(crate) fn engine_of(&self, id: SockId) -> usize {
        match &self.inner.mode {
            Mode::Service(s) => s.lane_of(id as u32).0,
            _ => appif::socket::engine_of(id),
        }
    }

    /// The engine a new socket of this thread goes to when nothing else
    /// decides: each thread is given one in turn at its first socket, so
    /// the threads of a server spread over the engines.
    fn thread_engine(&self) -> usize {
        let n = self.engines();
        if n <= 1 {
            return 0;
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        thread_local! {
            static MINE: core::cell::Cell<Option<u64>> = const { core::cell::Cell::new(None) };
        }
        let k = MINE.with(|m| match m.get() {
            Some(k) => k,
            None => {
                let k = NEXT.fetch_add(1, Ordering::Relaxed);
                m.set(Some(k));
                k
            }
        });
        (k % n as u64) as usize
    }

    /// The engine owning a TCP flow from our `local_port` to `remote`.
    fn flow_engine(&self, local_port: u16, remote: SocketAddr) -> usize {
        match (&self.inner.steering, remote.ip(), self.inner.ip6) {
            (Some(s), IpAddr::V4(r), _) => s.owner_v4(self.inner.ip, r, local_port, remote.port()),
            (Some(s), IpAddr::V6(r), Some(l)) => s.owner_v6(l, r, local_port, remote.port()),
            _ => 0,
        }
    }

    /// The association id the daemon gave this application (service mode).
    pub fn association(&self) -> Option<u32> {
        match &self.inner.mode {
            Mode::Service(s) => Some(s.assoc),
            _ => None,
        }
    }

    /// Service mode: the application's segment.
    pub(crate) fn service_segment(&self) -> Option<appif::seg::AppSegment> {
        match &self.inner.mode {
            Mode::Service(s) => Some(s.seg.clone()),
            _ => None,
        }
    }

    /// True in service mode (an application of a `corestack run` daemon).
    pub fn is_service(&self) -> bool {
        matches!(self.inner.mode, Mode::Service(_))
    }

    /// A new TCP connection to `remote`: its id, status block and the
    /// application's ends of its rings; the engine is asked to connect.
    /// Errors: EMFILE when the service segment has no free slot.
    pub(crate) fn open_stream(&self, remote: SocketAddr) -> io::Result<Parts> {
        self.open_stream_from(remote, 0, false)
    }

    /// A new UDP socket bound to `local` (the engine is asked to bind).
    /// Errors: EMFILE when the service segment has no free slot.
    pub(crate) fn open_udp(&self, local: SocketAddr, v6only: bool) -> io::Result<Parts> {
        let engine = match (&self.inner.steering, local.port()) {
            (Some(s), p) if p != 0 => engine::steer::udp_owner(s, p),
            _ => self.thread_engine(),
        };
        self.open_socket(
            engine,
            |slot| Desc::UdpBind {
                slot,
                local,
                v6only,
            },
            false,
            |id, shared, tx, rx| Command::UdpBind {
                id,
                owner: Owner::LOCAL,
                shared,
                local,
                v6only,
                tx,
                rx,
            },
        )
    }

    /// A new socket: in service mode a slot of the segment, announced to
    /// the daemon with `desc(slot)` (the daemon names its owner); else parts in this process's memory
    /// ([`Stack::local_parts`], `growable` for TCP) owned by `engine`,
    /// announced to it with `command(id, status, engine's TX end, engine's
    /// RX end)`. Errors: EMFILE when the service segment has no free slot.
    fn open_socket(
        &self,
        engine: usize,
        desc: impl FnOnce(u32) -> Desc,
        growable: bool,
        command: impl FnOnce(SockId, Arc<StatusHandle>, bytes::Reader, bytes::Writer) -> Command,
    ) -> io::Result<Parts> {
        if let Mode::Service(s) = &self.inner.mode {
            let p = s.new_socket(engine)?;
            s.submit_desc(engine, desc(p.id as u32));
            return Ok(Parts::from(p));
        }
        let (mut parts, tx, rx) = self.local_parts(growable);
        parts.id = appif::socket::with_engine(parts.id, engine);
        self.command(command(parts.id, parts.shared.clone(), tx, rx));
        Ok(parts)
    }

    /// A new socket in this process's memory: the application's parts and
    /// the engine's ends of its TX and RX rings, which may grow up to
    /// `ring_max_bytes` if `growable` (TCP).
    fn local_parts(&self, growable: bool) -> (Parts, bytes::Reader, bytes::Writer) {
        let cap = self.inner.ring_bytes;
        let max = if growable {
            self.inner.ring_max_bytes
        } else {
            cap
        };
        let (app_tx, eng_tx) = bytes::growable_ring(cap, max);
        let (eng_rx, app_rx) = bytes::growable_ring(cap, max);
        let parts = Parts {
            id: self.next_id(),
            shared: StatusHandle::local(),
            tx: app_tx,
            rx: app_rx,
        };
        (parts, eng_tx, eng_rx)
    }

    /// A fresh socket id.
    pub(crate) fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Asks `r` of the open socket `id`: in service mode as a descriptor
    /// for its slot in the segment, else as a command to the engine the id
    /// names (a listener's: every engine). Waits (running the engines in
    /// inline mode) while the command ring is full.
    pub(crate) fn request(&self, id: SockId, r: Request) {
        match &self.inner.mode {
            Mode::Service(s) => s.submit(id as u32, |slot| r.desc(slot)),
            _ => self.command(r.command(id)),
        }
    }

    /// Like [`Stack::request`], for a socket that exists on every engine
    /// (a listener, `id` naming its copy on engine 0): each copy gets it.
    /// Service mode: the daemon's engine 0 passes it on.
    pub(crate) fn request_every_engine(&self, id: SockId, r: Request) {
        match &self.inner.mode {
            Mode::Service(_) => self.request(id, r),
            _ => {
                for e in 0..self.inner.lanes.len() {
                    self.command(r.command(appif::socket::with_engine(id, e)));
                }
            }
        }
    }

    /// Sends a command to the engine its socket's id names (embedded and
    /// inline mode; service mode sends descriptors), waiting (running the
    /// engines in inline mode) while the command ring is full.
    fn command(&self, cmd: Command) {
        let lanes = self.inner.lanes.len();
        let engine = appif::socket::engine_of(cmd.id());
        if engine >= lanes {
            return; // not an id this stack made
        }
        self.command_to(engine, cmd)
    }

    /// Sends a command to engine `engine`'s ring.
    fn command_to(&self, engine: usize, cmd: Command) {
        let lane = &self.inner.lanes[engine];
        let mut cmd = Some(cmd);
        let sent = || {
            let Some(c) = cmd.take() else {
                return true;
            };
            let r = match lane.commands.lock() {
                Ok(mut q) => q.push(c),
                Err(p) => p.into_inner().push(c),
            };
            match r {
                Ok(()) => {
                    if let Some(db) = &lane.doorbell {
                        db.ring();
                    }
                    true
                }
                Err(c) => {
                    cmd = Some(c);
                    false
                }
            }
        };
        // Nothing rings when the ring has room: `Spin` never sleeps.
        self.wait_for(self.changes(), None, Policy::Spin, sent);
    }
}

/// For a sockets layer above this library (the `LD_PRELOAD` shim).
impl Stack {
    /// Like `open_stream`, from local port `local_port` (0: ephemeral) with
    /// TCP_NODELAY `nodelay` from the first segment.
    /// Errors: EMFILE when the service segment has no free slot.
    pub(crate) fn open_stream_from(
        &self,
        remote: SocketAddr,
        local_port: u16,
        nodelay: bool,
    ) -> io::Result<Parts> {
        // An IPv4-mapped peer is reached over IPv4 (RFC 3493 §3.7).
        let remote = appif::socket::from_mapped(remote);
        let engine = match local_port {
            0 => self.thread_engine(),
            p => self.flow_engine(p, remote),
        };
        let desc = |slot| Desc::Connect {
            slot,
            remote,
            local_port,
            nodelay,
        };
        self.open_socket(engine, desc, true, |id, shared, tx, rx| Command::Connect {
            id,
            owner: Owner::LOCAL,
            shared,
            local_port,
            remote,
            tx,
            rx,
            nodelay,
        })
    }

    /// The stack-wide doorbell: notified after every engine iteration that
    /// changed any socket (in service mode, any of this application's).
    /// Arm it with an eventfd ([`Notify::arm`]) to sleep in the kernel
    /// together with other fds (embedded mode: the engine runs in this
    /// process and writes the eventfd; inline mode has no engine thread:
    /// use [`Stack::drive`] and [`Stack::nic_fd`] instead).
    pub fn changes(&self) -> &Notify {
        match &self.inner.mode {
            Mode::Service(s) => s.seg.app_wake(),
            _ => &self.inner.wake,
        }
    }

    /// Arms `eventfd` on doorbell `n` (the stack's [`Stack::changes`] or a
    /// socket's) so that the engine writes it at the next change: in
    /// service mode in the segment's table, where `eventfd` must be one of
    /// [`Stack::wake_eventfds`]; else in this process's table (any
    /// eventfd). See [`Notify::arm`] for the protocol. None: not armed
    /// (table full, or an eventfd the daemon does not know): sleep briefly.
    pub fn arm<'a>(&'a self, n: &'a Notify, eventfd: i32) -> Option<appif::notify::Armed<'a>> {
        match &self.inner.mode {
            Mode::Service(s) => n.arm_in(s.seg.sleepers(), eventfd),
            _ => n.arm(eventfd),
        }
    }

    /// Service mode: the daemon's address, subnet prefix length and
    /// gateway (as it recorded them in the segment); None in other modes.
    pub fn service_net(&self) -> Option<(Ipv4Addr, u8, Option<Ipv4Addr>)> {
        match &self.inner.mode {
            Mode::Service(s) => {
                let (net, gw) = s.seg.net();
                net.map(|(ip, prefix)| (ip, prefix, gw))
            }
            _ => None,
        }
    }

    /// Service mode: the daemon's global IPv6 address and its prefix
    /// length in bits (as it recorded them in the segment); None in other
    /// modes or when the daemon has no IPv6.
    pub fn service_net6(&self) -> Option<(Ipv6Addr, u8)> {
        match &self.inner.mode {
            Mode::Service(s) => s.seg.net6(),
            _ => None,
        }
    }

    /// The stack's global IPv6 address, if it has one: the configured one
    /// in embedded and inline mode, the daemon's in service mode. A server
    /// that serves every address binds `[::]` when there is one.
    pub fn ip6(&self) -> Option<Ipv6Addr> {
        match &self.inner.mode {
            Mode::Service(s) => s.seg.net6().map(|n| n.0),
            _ => self.inner.ip6,
        }
    }

    /// Service mode: the control connection's fd. A forked child that
    /// will not use this stack closes its copy, so that the daemon sees
    /// the connection end when this process exits (the connection's end is
    /// how it learns an application is gone).
    pub fn service_ctl_fd(&self) -> Option<RawFd> {
        match &self.inner.mode {
            Mode::Service(s) => Some(s.ctl_fd()),
            _ => None,
        }
    }

    /// Service mode: the daemon's process id (from its control
    /// connection's peer credentials); None in other modes or when unknown.
    pub fn service_daemon_pid(&self) -> Option<u32> {
        match &self.inner.mode {
            Mode::Service(s) => s.daemon_pid(),
            _ => None,
        }
    }

    /// Service mode: the eventfds the daemon knows ([`StackBuilder::wake_eventfds`]),
    /// as numbered in this process; empty in other modes.
    pub fn wake_eventfds(&self) -> Vec<i32> {
        match &self.inner.mode {
            Mode::Service(s) => s.seg.sleepers().map(|t| t.eventfds()).unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// The RX and TX ring size of each connection, bytes.
    pub fn ring_bytes(&self) -> usize {
        self.inner.ring_bytes
    }
}
