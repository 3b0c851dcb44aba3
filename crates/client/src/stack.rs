//! The stack handle: starts an engine on a port and carries commands to it.

use appif::bytes;
use appif::errno;
use appif::notify::Notify;
use appif::seg::Desc;
use appif::socket::{AcceptQueue, Accepted, Command, SockId, SockState, StatusBlock, StatusHandle};
use appif::spsc;
use core::net::{Ipv4Addr, SocketAddrV4};
use core::time::Duration;
use engine::publish::Published;
use engine::stats::Stats;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::Port;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub use nic::Driver;

/// How long a waiting application thread spins before it sleeps (embedded mode).
const SPIN: Duration = Duration::from_micros(50);

/// One round of a waiter's spin: hands the CPU to any thread waiting for
/// it, else returns at once (a `sched_yield`). The thread that produces
/// what the waiter waits for (the engine thread, the daemon, another thread
/// of the program) may share this CPU at the same priority; under
/// SCHED_FIFO a waiter that only paused would hold it off until the spin
/// ended (sockperf ping-pong in service mode, daemon and server on one CPU:
/// p50 120 µs, one spin per wait).
pub fn spin_round() {
    std::thread::yield_now();
}

/// The CPU embedded mode's engine thread pins itself to:
/// `CORESTACK_ENGINE_CPU` if set (a dedicated core), else none.
fn engine_cpu() -> Option<usize> {
    std::env::var("CORESTACK_ENGINE_CPU")
        .ok()
        .and_then(|v| v.trim().parse().ok())
}

/// How long a waiter spins before it sleeps: `CORESTACK_SPIN_US` (µs) if
/// set (at most 1 s), else 50 µs. 0 makes every wait block at once (for a thread that
/// shares its core with the engine or with its peers). Without the variable,
/// embedded mode (`shares_engine_cpu`: an engine thread not pinned elsewhere
/// by `CORESTACK_ENGINE_CPU`) on a process allowed a single CPU does not
/// spin: the engine thread needs that very CPU to produce what the waiter
/// waits for, so a spin only delays it (sockperf ping-pong under the shim
/// with server and engine on one CPU: p50 126 -> 22 µs, p99 2030 -> 121 µs).
fn spin_time(shares_engine_cpu: bool) -> Duration {
    let env = std::env::var("CORESTACK_SPIN_US")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    match env {
        Some(us) => Duration::from_micros(us.min(1_000_000)),
        None if shares_engine_cpu
            && engine_cpu().is_none()
            && crate::sys::allowed_cpus() == Some(1) =>
        {
            Duration::ZERO
        }
        None => SPIN,
    }
}

/// How long a service-mode waiter sleeps before it checks that the daemon
/// is still there.
const LIVENESS: Duration = Duration::from_millis(100);

/// Settings for a [`Stack`]; see [`Stack::builder`].
pub struct StackBuilder {
    driver: Driver,
    iface: Option<String>,
    ip: Option<(Ipv4Addr, u8)>,
    gateway: Option<Ipv4Addr>,
    inline: bool,
    ring_bytes: usize,
    idle_sleep: Option<Duration>,
    engine: EngineConfig,
    mem: Option<nic::mem::MemPort>,
    service: Option<std::path::PathBuf>,
    wakers: Vec<std::os::fd::OwnedFd>,
    af_xdp_tx: Option<nic::af_xdp::TxPath>,
    parent: u32,
}

/// The parts of a socket the application holds.
pub(crate) struct Parts {
    pub id: SockId,
    pub shared: Arc<StatusHandle>,
    pub tx: bytes::Writer,
    pub rx: bytes::Reader,
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
    /// Embedded and inline mode: values from the engine thread.
    Local(spsc::Receiver<Accepted>),
    /// Service mode: slot numbers in the listener slot's RX ring.
    Segment(bytes::Reader),
}

impl AcceptRx {
    /// True when no connection waits.
    pub fn is_empty(&self) -> bool {
        match self {
            AcceptRx::Local(r) => r.is_empty(),
            AcceptRx::Segment(r) => r.len() < 4,
        }
    }
}

/// A running corestack engine and the way to it. Cheap to clone.
#[derive(Clone)]
pub struct Stack {
    pub(crate) inner: Arc<Inner>,
}

type DynEngine = Box<dyn EngineLoop + Send>;

/// The engine of any port type behind one dyn call per loop iteration, not
/// per packet (not to be confused with the readiness [`crate::Poller`]).
trait EngineLoop {
    /// One engine iteration at `now`, then publishing; true if it did work.
    fn poll(&mut self, now: Instant) -> bool;
    /// The engine's counters.
    fn stats(&self) -> Stats;
    /// Resets every connection and stops.
    fn shutdown(&mut self, now: Instant);
}

impl<P: Port> EngineLoop for Published<P> {
    fn poll(&mut self, now: Instant) -> bool {
        let worked = self.engine.poll(now);
        self.publish(now, false);
        worked
    }
    fn stats(&self) -> Stats {
        self.engine.stats()
    }
    fn shutdown(&mut self, now: Instant) {
        self.engine.shutdown(now)
    }
}

enum Mode {
    Service(crate::service::Service),
    Inline(Mutex<DynEngine>),
    Embedded {
        /// Rung after a command when the engine thread naps (adaptive polling).
        doorbell: Option<Arc<EngineDoorbell>>,
        stop: Arc<AtomicBool>,
        thread: Mutex<Option<JoinHandle<()>>>,
        stats: Arc<Mutex<Stats>>,
    },
}

pub(crate) struct Inner {
    commands: Mutex<spsc::Sender<Command>>,
    /// Bumped by the engine after each iteration that changed a socket.
    wake: Arc<Notify>,
    next_id: AtomicU64,
    mode: Mode,
    pub(crate) ring_bytes: usize,
    /// The most a TCP connection's ring may grow to, bytes.
    ring_max_bytes: usize,
    xdp_generic: bool,
    mtu: usize,
    idle: Idle,
    /// Spin time of waits before they sleep.
    spin: Duration,
    /// The process's trace segment (`corestack trace`).
    pub(crate) tracer: appif::trace::Tracer,
}

/// Inline mode's adaptive polling: when the engine has had nothing to do
/// for `sleep_after`, a waiting thread sleeps on the NIC queue's fd.
struct Idle {
    sleep_after: Option<Duration>,
    rx_fd: Option<RawFd>,
    /// When an engine iteration last did work, ns.
    last_work: AtomicU64,
}

impl Idle {
    /// Records the outcome of an engine iteration at `now`; after a long
    /// enough idle spell, sleeps until frames arrive or `left` (at most
    /// 1 ms, so timers and other threads' commands are not held up) passes.
    fn after_poll(&self, worked: bool, now: Instant, left: Option<Duration>) {
        if worked {
            self.last_work.store(now.as_nanos(), Ordering::Relaxed);
            return;
        }
        let (Some(after), Some(fd)) = (self.sleep_after, self.rx_fd) else {
            return;
        };
        let idle_ns = now
            .as_nanos()
            .saturating_sub(self.last_work.load(Ordering::Relaxed));
        if idle_ns < after.as_nanos() as u64 {
            return;
        }
        let nap = left.unwrap_or(MAX_NAP).min(MAX_NAP);
        if !nap.is_zero() {
            crate::sys::wait_readable(fd, nap);
        }
    }
}

/// The longest inline-mode sleep on the NIC fd.
const MAX_NAP: Duration = Duration::from_millis(1);
/// Default idle time before an inline-mode waiter sleeps.
const IDLE_BEFORE_SLEEP: Duration = Duration::from_micros(50);

impl Drop for Inner {
    fn drop(&mut self) {
        match &self.mode {
            Mode::Service(_) => {}
            Mode::Inline(e) => {
                if let Ok(mut e) = e.lock() {
                    e.shutdown(Instant::now());
                }
            }
            Mode::Embedded { stop, thread, .. } => {
                stop.store(true, Ordering::Release);
                if let Some(t) = thread.lock().ok().and_then(|mut t| t.take()) {
                    let _ = t.join();
                }
            }
        }
    }
}

impl Default for StackBuilder {
    fn default() -> Self {
        let cc = engine::tcp::CcKind::system_default();
        StackBuilder {
            driver: Driver::AfXdp,
            iface: None,
            ip: None,
            gateway: None,
            inline: false,
            ring_bytes: 256 * 1024,
            idle_sleep: Some(IDLE_BEFORE_SLEEP),
            engine: EngineConfig {
                tcp: engine::tcp::TcpConfig {
                    cc,
                    ecn: cc == engine::tcp::CcKind::Dctcp,
                    ..Default::default()
                },
                ..EngineConfig::default()
            },
            mem: None,
            service: None,
            wakers: Vec::new(),
            af_xdp_tx: None,
            parent: 0,
        }
    }
}

impl StackBuilder {
    /// The port driver (default AF_XDP).
    pub fn driver(mut self, d: Driver) -> Self {
        self.driver = d;
        self
    }

    /// The network interface to drive (required unless [`StackBuilder::mem_port`]).
    pub fn iface(mut self, name: &str) -> Self {
        self.iface = Some(name.to_string());
        self
    }

    /// Our IPv4 address and subnet prefix length (required).
    pub fn ip(mut self, addr: Ipv4Addr, prefix_len: u8) -> Self {
        self.ip = Some((addr, prefix_len));
        self
    }

    /// Next hop for destinations outside the subnet.
    pub fn gateway(mut self, gw: Ipv4Addr) -> Self {
        self.gateway = Some(gw);
        self
    }

    /// How an AF_XDP port transmits (default: `CORESTACK_AF_XDP_TX` = auto,
    /// xsk or packet if set, else auto: the AF_XDP tx ring in zero-copy
    /// mode, else a packet socket with segmentation offload; see
    /// [`nic::af_xdp::TxPath`]).
    pub fn af_xdp_tx(mut self, path: nic::af_xdp::TxPath) -> Self {
        self.af_xdp_tx = Some(path);
        self
    }

    /// Inline mode: no engine thread; waiting threads run the engine.
    pub fn inline(mut self, on: bool) -> Self {
        self.inline = on;
        self
    }

    /// The engine's polling policy: after `Some(idle)` without work it
    /// sleeps on the NIC queue's fd (at most 1 ms at a time) instead of
    /// spinning, so it leaves the core to others ("adaptive", the default,
    /// 50 µs): in inline mode the waiting application thread, in embedded
    /// mode the engine thread (woken early by a doorbell when a command
    /// arrives). `None` spins without pause ("busy").
    pub fn idle_sleep(mut self, idle: Option<Duration>) -> Self {
        self.idle_sleep = idle;
        self
    }

    /// RX and TX ring size per connection when it starts, in bytes
    /// (default 256 KiB).
    pub fn ring_bytes(mut self, n: usize) -> Self {
        self.ring_bytes = n.max(4096).next_power_of_two();
        self
    }

    /// The most a TCP connection's RX or TX ring grows to, in bytes
    /// (default 8 MiB): the receive window follows the measured
    /// bandwidth-delay product up to 6 MiB (or this, if smaller), the send
    /// buffer twice the congestion window. That much address space is
    /// reserved per ring; memory is used only as a ring grows. Set it to
    /// `ring_bytes` for fixed rings. (Service mode: the daemon's
    /// `ring_max_bytes` applies.)
    pub fn ring_max_bytes(mut self, n: usize) -> Self {
        self.engine.ring_max_bytes = n.max(4096).next_power_of_two();
        self
    }

    /// The default TCP congestion control of every connection (unless set:
    /// the host's, `net.ipv4.tcp_congestion_control`, when corestack has it,
    /// else CUBIC; DCTCP also turns ECN on).
    pub fn congestion(mut self, cc: engine::tcp::CcKind) -> Self {
        self.engine.tcp.cc = cc;
        if cc == engine::tcp::CcKind::Dctcp {
            self.engine.tcp.ecn = true;
        }
        self
    }

    /// The most sockets the engine holds at once (connections, listeners,
    /// UDP sockets; default 4096): opening more fails with EMFILE.
    pub fn max_sockets(mut self, n: usize) -> Self {
        self.engine.max_sockets = n.max(1);
        self
    }

    /// Engine settings beyond the address (TCP defaults, table sizes).
    pub fn engine_config(mut self, cfg: EngineConfig) -> Self {
        self.engine = cfg;
        self
    }

    /// Service mode: join the `corestack run` daemon listening on the Unix
    /// socket `path` instead of driving an interface (the default when the
    /// environment has `CORESTACK_SOCKET`). Errors at `start()`: ENOENT or
    /// ECONNREFUSED when no daemon listens there, the daemon's refusal
    /// (EMFILE: too many applications).
    pub fn service(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.service = Some(path.into());
        self
    }

    /// Service mode: eventfds this process's readiness waiters will sleep
    /// on (at most `appif::notify::SEGMENT_SLEEPERS`, more are closed),
    /// handed to the daemon when the stack joins it, so that the engine in
    /// the daemon can wake a waiter armed with one ([`Stack::arm`]). Other
    /// modes do not need them (the engine is in this process) and close
    /// them.
    pub fn wake_eventfds(mut self, fds: Vec<std::os::fd::OwnedFd>) -> Self {
        self.wakers = fds;
        self
    }

    /// Service mode, in a forked child: join as a child of association
    /// `assoc` (the parent process's, [`Stack::association`]), which lets
    /// this stack join the parent's listeners ([`TcpListener::join`]).
    /// Errors at `start()`: EPERM when this process's parent is not that
    /// association's process (the daemon checks).
    pub fn child_of(mut self, assoc: u32) -> Self {
        self.parent = assoc;
        self
    }

    /// Uses an in-memory port instead of a NIC (tests, simulations).
    pub fn mem_port(mut self, port: nic::mem::MemPort) -> Self {
        self.mem = Some(port);
        self
    }

    /// Starts the engine on `port` with `cfg` and this builder's mode,
    /// ring size and idle sleep (`xdp_generic`: AF_XDP fell back to
    /// generic mode).
    fn launch_on<P: Port + Send + 'static>(
        &self,
        port: P,
        cfg: EngineConfig,
        xdp_generic: bool,
    ) -> Stack {
        launch(
            port,
            cfg,
            self.inline,
            self.ring_bytes,
            xdp_generic,
            self.idle_sleep,
        )
    }

    /// Opens the port and starts the engine.
    ///
    /// Errors: `InvalidInput` without an address or interface; `NotFound`
    /// for a missing interface; `PermissionDenied` without root or
    /// CAP_NET_ADMIN; others as the driver reports them. Each message is
    /// one line saying what to do.
    pub fn start(mut self) -> io::Result<Stack> {
        let service = match (&self.service, &self.mem) {
            (Some(p), _) => Some(p.clone()),
            (None, None) => appif::ctl::socket_path_from_env(),
            (None, Some(_)) => None,
        };
        if let Some(path) = service {
            return launch_service(&path, self.ring_bytes, self.wakers, self.parent);
        }
        let (ip, prefix) = self.ip.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "no address: give the stack an IPv4 address (--ip ADDR/PREFIX)",
            )
        })?;
        let mut cfg = self.engine.clone();
        cfg.ip = ip;
        cfg.prefix_len = prefix;
        cfg.gateway = self.gateway;
        cfg.ring_bytes = self.ring_bytes;
        if let Some(port) = self.mem.take() {
            return Ok(self.launch_on(port, cfg, false));
        }
        let iface = self.iface.clone().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "no interface: name the interface to drive (--iface IF)",
            )
        })?;
        match self.driver {
            Driver::AfXdp => {
                let tx_path = match self.af_xdp_tx {
                    Some(p) => p,
                    None => nic::af_xdp::TxPath::from_env().map_err(io::Error::from)?,
                };
                let xcfg = nic::af_xdp::AfXdpConfig {
                    ifname: iface,
                    steer_ip: Some(ip),
                    tx_path,
                    ..Default::default()
                };
                let port = nic::af_xdp::AfXdpPort::open(&xcfg).map_err(io::Error::from)?;
                let generic = port.xdp_mode() == nic::af_xdp::XdpMode::Generic;
                Ok(self.launch_on(port, cfg, generic))
            }
            Driver::Tap => {
                let port = nic::tap::TapPort::open(&iface).map_err(io::Error::from)?;
                Ok(self.launch_on(port, cfg, false))
            }
        }
    }
}

fn launch_service(
    path: &std::path::Path,
    ring_bytes: usize,
    wakers: Vec<std::os::fd::OwnedFd>,
    parent: u32,
) -> io::Result<Stack> {
    let service = crate::service::Service::connect(path, ring_bytes, wakers, parent)?;
    let (tx, _rx) = spsc::channel(1);
    let mtu = service.mtu();
    let ring_bytes = service.seg.layout().ring_bytes as usize;
    let ring_max_bytes = service.seg.layout().ring_max_bytes as usize;
    Ok(Stack {
        inner: Arc::new(Inner {
            commands: Mutex::new(tx),
            wake: Arc::new(Notify::default()),
            next_id: AtomicU64::new(1),
            mode: Mode::Service(service),
            ring_bytes,
            ring_max_bytes,
            xdp_generic: false,
            mtu,
            idle: Idle {
                sleep_after: None,
                rx_fd: None,
                last_work: AtomicU64::new(0),
            },
            spin: spin_time(false),
            tracer: appif::trace::Tracer::process(),
        }),
    })
}

fn launch<P: Port + Send + 'static>(
    port: P,
    cfg: EngineConfig,
    inline: bool,
    ring_bytes: usize,
    xdp_generic: bool,
    idle_sleep: Option<Duration>,
) -> Stack {
    let (tx, rx) = spsc::channel(1024);
    let wake = Arc::new(Notify::default());
    let mtu = port.mtu();
    let rx_fd = port.rx_fd();
    let ring_max_bytes = cfg.ring_max_bytes.max(ring_bytes);
    let engine = Engine::new(port, cfg, rx, wake.clone(), Instant::now());
    // Embedded mode's engine thread sleeps like an inline waiter (adaptive
    // polling) when it has a NIC fd to sleep on and a doorbell to be woken by.
    let doorbell = match (inline, idle_sleep, rx_fd) {
        (false, Some(_), Some(_)) => appif::ctl::eventfd().ok().map(|fd| {
            Arc::new(EngineDoorbell {
                sleeping: AtomicBool::new(false),
                fd,
            })
        }),
        _ => None,
    };
    let mode = if inline {
        Mode::Inline(Mutex::new(Box::new(Published::new(engine))))
    } else {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(Stats::default()));
        let thread = {
            let stop = stop.clone();
            let stats = stats.clone();
            let nap = match (&doorbell, idle_sleep, rx_fd) {
                (Some(d), Some(after), Some(fd)) => Some(EngineNap {
                    after,
                    rx_fd: fd,
                    doorbell: d.clone(),
                }),
                _ => None,
            };
            std::thread::Builder::new()
                .name("corestack-engine".into())
                .spawn(move || {
                    let mut nap = nap;
                    if let Some(cpu) = engine_cpu() {
                        crate::sys::pin_current_thread(cpu);
                    } else if crate::sys::allowed_cpus() == Some(1) {
                        // The application's threads can only run on this CPU
                        // too: idling on it delays the very thread the engine
                        // just handed data to (under SCHED_FIFO it cannot run
                        // at all until the engine blocks). Nap at once.
                        if let Some(n) = nap.as_mut() {
                            n.after = Duration::ZERO;
                        }
                    }
                    run_engine(Published::new(engine), &stop, &stats, nap)
                })
                .expect("spawning the engine thread")
        };
        Mode::Embedded {
            stop,
            thread: Mutex::new(Some(thread)),
            stats,
            doorbell,
        }
    };
    Stack {
        inner: Arc::new(Inner {
            commands: Mutex::new(tx),
            wake,
            next_id: AtomicU64::new(1),
            mode,
            ring_bytes,
            ring_max_bytes,
            xdp_generic,
            mtu,
            idle: Idle {
                sleep_after: idle_sleep.filter(|_| inline && rx_fd.is_some()),
                rx_fd,
                last_work: AtomicU64::new(Instant::now().as_nanos()),
            },
            spin: spin_time(!inline),
            tracer: appif::trace::Tracer::process(),
        }),
    }
}

/// How embedded mode's engine thread wakes up from a nap: the application
/// sets nothing but, after queueing a command, clears `sleeping` and writes
/// `fd` if it found it set (the notify-flag protocol).
struct EngineDoorbell {
    sleeping: AtomicBool,
    fd: std::os::fd::OwnedFd,
}

/// When embedded mode's engine thread sleeps: after `after` without work,
/// on the NIC queue's fd and the doorbell, at most [`MAX_NAP`] at a time.
struct EngineNap {
    after: Duration,
    rx_fd: RawFd,
    doorbell: Arc<EngineDoorbell>,
}

/// The embedded engine thread: poll until told to stop, napping per `nap`
/// (None: busy polling).
fn run_engine<P: Port>(
    mut engine: Published<P>,
    stop: &AtomicBool,
    stats: &Mutex<Stats>,
    nap: Option<EngineNap>,
) {
    use std::os::fd::AsRawFd;
    let mut last_work = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if engine.engine.poll(now) {
            last_work = now;
        } else if let Some(n) = &nap {
            if now.saturating_since(last_work) >= n.after {
                let db = &n.doorbell;
                db.sleeping.store(true, Ordering::SeqCst);
                // Re-check after setting the flag: a command queued before
                // the application saw it would otherwise wait for the nap.
                if !engine.engine.has_commands() {
                    crate::sys::wait_readable_any(&[n.rx_fd, db.fd.as_raw_fd()], MAX_NAP);
                }
                db.sleeping.store(false, Ordering::SeqCst);
                appif::ctl::eventfd_drain(std::os::fd::AsFd::as_fd(&db.fd));
            }
        }
        if let Some(latest) = engine.publish(now, false) {
            if let Ok(mut s) = stats.lock() {
                *s = latest;
            }
        }
    }
    engine.engine.shutdown(Instant::now());
    if let (Some(latest), Ok(mut s)) = (engine.publish(Instant::now(), true), stats.lock()) {
        *s = latest;
    }
}

impl Stack {
    /// A builder with defaults: AF_XDP, embedded mode, 256 KiB rings.
    pub fn builder() -> StackBuilder {
        StackBuilder::default()
    }

    /// Inline mode: runs engine iterations until one does some work or
    /// `timeout` passes. Embedded mode: waits until the engine reports a
    /// change to any socket or `timeout` passes. None waits without limit.
    pub fn poll(&self, timeout: Option<Duration>) {
        self.wait_change(self.change_seq(), timeout)
    }

    /// The sequence number of socket changes (see [`Stack::wait_change`]).
    pub(crate) fn change_seq(&self) -> u32 {
        match &self.inner.mode {
            Mode::Service(s) => s.seg.app_wake().seq(),
            _ => self.inner.wake.seq(),
        }
    }

    /// Like [`Stack::poll`], but returns at once if a change happened
    /// since `seen` (from [`Stack::change_seq`]) was read.
    pub(crate) fn wait_change(&self, seen: u32, timeout: Option<Duration>) {
        let start = Instant::now();
        match &self.inner.mode {
            Mode::Inline(e) => loop {
                let now = Instant::now();
                let elapsed = now.saturating_since(start);
                // The engine lock is released before any sleep.
                let worked = e.lock().map(|mut e| e.poll(now)).unwrap_or(false);
                self.inner
                    .idle
                    .after_poll(worked, now, timeout.map(|t| t.saturating_sub(elapsed)));
                if worked || timeout.is_some_and(|t| elapsed >= t) {
                    return;
                }
            },
            Mode::Service(s) => {
                let wake = s.seg.app_wake();
                let spin = self.inner.spin;
                let spin_until = start + spin.min(timeout.unwrap_or(spin));
                while Instant::now() < spin_until {
                    if wake.seq() != seen {
                        return;
                    }
                    spin_round();
                }
                let left =
                    timeout.map(|t| t.saturating_sub(Instant::now().saturating_since(start)));
                if left != Some(Duration::ZERO) {
                    let nap = left.unwrap_or(LIVENESS).min(LIVENESS);
                    if s.alive() {
                        wake.wait(seen, Some(nap));
                    } else {
                        // Nothing will change any more: a caller that loops
                        // on errors must not spin.
                        std::thread::sleep(nap.min(Duration::from_millis(10)));
                    }
                }
            }
            Mode::Embedded { .. } => {
                let spin = self.inner.spin;
                let spin_until = start + spin.min(timeout.unwrap_or(spin));
                while Instant::now() < spin_until {
                    if self.inner.wake.seq() != seen {
                        return;
                    }
                    spin_round();
                }
                let left =
                    timeout.map(|t| t.saturating_sub(Instant::now().saturating_since(start)));
                if left != Some(Duration::ZERO) {
                    self.inner.wake.wait(seen, left);
                }
            }
        }
    }

    /// True when AF_XDP fell back to generic (skb) XDP mode: it works, slower.
    pub fn xdp_generic_fallback(&self) -> bool {
        self.inner.xdp_generic
    }

    /// The link MTU in bytes.
    pub fn mtu(&self) -> usize {
        self.inner.mtu
    }

    /// The engine's counters (in embedded mode, at most 10 ms old).
    pub fn stats(&self) -> Stats {
        match &self.inner.mode {
            Mode::Service(_) => Stats::default(),
            Mode::Inline(e) => e.lock().map(|e| e.stats()).unwrap_or_default(),
            Mode::Embedded { stats, .. } => stats.lock().map(|s| s.clone()).unwrap_or_default(),
        }
    }

    /// A fresh socket id.
    /// The association id the daemon gave this application (service mode).
    pub fn association(&self) -> Option<u32> {
        match &self.inner.mode {
            Mode::Service(s) => Some(s.assoc),
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
    pub(crate) fn open_stream(&self, remote: SocketAddrV4) -> io::Result<Parts> {
        self.open_stream_from(remote, 0, false)
    }

    /// A new UDP socket bound to `local` (the engine is asked to bind).
    /// Errors: EMFILE when the service segment has no free slot.
    pub(crate) fn open_udp(&self, local: SocketAddrV4) -> io::Result<Parts> {
        self.open_socket(
            |slot| Desc::UdpBind { slot, local },
            false,
            |id, shared, tx, rx| Command::UdpBind {
                id,
                shared,
                local,
                tx,
                rx,
            },
        )
    }

    /// A new socket: in service mode a slot of the segment, announced to
    /// the daemon with `desc(slot)`; else parts in this process's memory
    /// ([`Stack::local_parts`], `growable` for TCP), announced to the engine
    /// with `command(id, status, engine's TX end, engine's RX end)`.
    /// Errors: EMFILE when the service segment has no free slot.
    fn open_socket(
        &self,
        desc: impl FnOnce(u32) -> Desc,
        growable: bool,
        command: impl FnOnce(SockId, Arc<StatusHandle>, bytes::Reader, bytes::Writer) -> Command,
    ) -> io::Result<Parts> {
        if let Mode::Service(s) = &self.inner.mode {
            let p = s.new_socket()?;
            s.submit_desc(desc(p.id as u32));
            return Ok(Parts::from(p));
        }
        let (parts, tx, rx) = self.local_parts(growable);
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

    /// A new listener on `local` with room for `backlog` connections not
    /// yet accepted. Errors: EMFILE when the service segment has no free slot.
    pub(crate) fn open_listener(
        &self,
        local: SocketAddrV4,
        backlog: usize,
    ) -> io::Result<(SockId, Arc<StatusHandle>, AcceptRx)> {
        if let Mode::Service(s) = &self.inner.mode {
            let p = s.new_socket()?;
            s.submit_desc(Desc::Listen {
                slot: p.id as u32,
                local,
                backlog: backlog as u32,
            });
            return Ok((p.id, p.shared, AcceptRx::Segment(p.rx)));
        }
        let id = self.next_id();
        let shared = StatusHandle::local();
        let (tx, rx) = spsc::channel(backlog);
        self.command(Command::Listen {
            id,
            shared: shared.clone(),
            local,
            accept: AcceptQueue::Local(tx),
        });
        Ok((id, shared, AcceptRx::Local(rx)))
    }

    /// Service mode: a new member of listener `group_slot` of the parent
    /// association (see [`StackBuilder::child_of`]). Errors: EOPNOTSUPP
    /// outside service mode, EMFILE when the segment has no free slot.
    pub(crate) fn join_listener(
        &self,
        group_slot: u32,
        backlog: usize,
    ) -> io::Result<(SockId, Arc<StatusHandle>, AcceptRx)> {
        let Mode::Service(s) = &self.inner.mode else {
            return Err(errno::io(libc::EOPNOTSUPP));
        };
        let p = s.new_socket()?;
        s.submit_desc(Desc::JoinListener {
            slot: p.id as u32,
            parent_slot: group_slot,
            backlog: backlog as u32,
        });
        Ok((p.id, p.shared, AcceptRx::Segment(p.rx)))
    }

    /// The next accepted connection waiting in `q`, if any.
    pub(crate) fn pop_accepted(&self, q: &mut AcceptRx) -> Option<Accepted> {
        match q {
            AcceptRx::Local(r) => r.pop(),
            AcceptRx::Segment(r) => {
                let Mode::Service(s) = &self.inner.mode else {
                    return None;
                };
                // Bounded by the queue's length: each record is 4 bytes.
                while r.len() >= 4 {
                    let mut b = [0u8; 4];
                    r.read(&mut b);
                    let slot = u32::from_le_bytes(b);
                    if !s.hold(slot) {
                        continue;
                    }
                    if let Some(p) = s.parts(slot) {
                        return Some(Accepted {
                            id: p.id,
                            shared: p.shared,
                            tx: p.tx,
                            rx: p.rx,
                        });
                    }
                }
                None
            }
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a command, waiting (running the engine in inline mode) while
    /// the command ring is full.
    pub(crate) fn command(&self, mut cmd: Command) {
        if let Mode::Service(s) = &self.inner.mode {
            return s.submit(&cmd);
        }
        loop {
            let r = match self.inner.commands.lock() {
                Ok(mut q) => q.push(cmd),
                Err(p) => p.into_inner().push(cmd),
            };
            match r {
                Ok(()) => {
                    if let Mode::Embedded {
                        doorbell: Some(db), ..
                    } = &self.inner.mode
                    {
                        if db.sleeping.load(Ordering::SeqCst)
                            && db.sleeping.swap(false, Ordering::SeqCst)
                        {
                            appif::ctl::eventfd_signal(std::os::fd::AsFd::as_fd(&db.fd));
                        }
                    }
                    return;
                }
                Err(c) => {
                    cmd = c;
                    self.idle_step();
                }
            }
        }
    }

    /// One step of waiting: an engine iteration in inline mode, a pause otherwise.
    fn idle_step(&self) {
        match &self.inner.mode {
            Mode::Inline(e) => {
                if let Ok(mut e) = e.try_lock() {
                    e.poll(Instant::now());
                }
            }
            Mode::Embedded { .. } | Mode::Service(_) => spin_round(),
        }
    }

    /// Waits until `ready()` holds or `timeout` passes; returns whether it
    /// holds. Inline mode runs the engine meanwhile; embedded mode spins for
    /// a short while, then sleeps on the socket's notify word.
    pub(crate) fn wait(
        &self,
        shared: &StatusBlock,
        timeout: Option<Duration>,
        ready: impl Fn() -> bool,
    ) -> bool {
        let start = Instant::now();
        let expired = |now: Instant| timeout.is_some_and(|t| now.saturating_since(start) >= t);
        match &self.inner.mode {
            Mode::Inline(e) => loop {
                if ready() {
                    return true;
                }
                let now = Instant::now();
                if expired(now) {
                    return false;
                }
                // The engine lock is released before any sleep.
                let worked = e.try_lock().map(|mut e| e.poll(now)).ok();
                if let Some(worked) = worked {
                    let left = timeout.map(|t| t.saturating_sub(now.saturating_since(start)));
                    self.inner.idle.after_poll(worked, now, left);
                }
            },
            mode @ (Mode::Service(_) | Mode::Embedded { .. }) => loop {
                if ready() {
                    return true;
                }
                let now = Instant::now();
                if expired(now) {
                    return false;
                }
                if now.saturating_since(start) < self.inner.spin {
                    spin_round();
                    continue;
                }
                let seen = shared.notify.seq();
                if ready() {
                    return true;
                }
                let left = timeout.map(|t| t.saturating_sub(now.saturating_since(start)));
                let mut nap = left.unwrap_or(LIVENESS);
                if let Mode::Service(s) = mode {
                    // A daemon that died cannot wake us: check on it between naps
                    // (when it is gone, `alive` closes the sockets, so `ready` holds).
                    if !s.alive() && ready() {
                        return true;
                    }
                    nap = nap.min(LIVENESS);
                }
                shared.notify.wait(seen, Some(nap));
            },
        }
    }

    /// Waits for a socket to leave `Opening` (the engine took its command).
    pub(crate) fn wait_opened(&self, shared: &StatusBlock) -> io::Result<()> {
        self.wait(shared, None, || shared.state() != SockState::Opening);
        match shared.state() {
            SockState::Closed => Err(errno::io(shared.take_error().max(1))),
            _ => Ok(()),
        }
    }
}

/// How [`Stack::wait_until`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The condition holds.
    Ready,
    /// The timeout passed first.
    TimedOut,
    /// A signal handler ran while the thread slept in the kernel (EINTR),
    /// or while it spun ([`crate::SpinSignals`]).
    /// Without a timeout, embedded and service mode sleep in a futex wait
    /// that the kernel restarts by itself after a handler with SA_RESTART,
    /// so there this means a handler without it; inline mode sleeps in
    /// poll(2), which reports every handler.
    Interrupted,
}

/// Waiting and driving, for a sockets layer above this library (the
/// `LD_PRELOAD` shim), which sleeps in the kernel itself so that signals
/// interrupt it as they interrupt Linux socket calls.
impl Stack {
    /// Like `open_stream`, from local port `local_port` (0: ephemeral) with
    /// TCP_NODELAY `nodelay` from the first segment.
    /// Errors: EMFILE when the service segment has no free slot.
    pub(crate) fn open_stream_from(
        &self,
        remote: SocketAddrV4,
        local_port: u16,
        nodelay: bool,
    ) -> io::Result<Parts> {
        let desc = |slot| Desc::Connect {
            slot,
            remote,
            local_port,
            nodelay,
        };
        self.open_socket(desc, true, |id, shared, tx, rx| Command::Connect {
            id,
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

    /// True in inline mode (no engine thread: waiting threads run the engine).
    pub fn is_inline(&self) -> bool {
        matches!(self.inner.mode, Mode::Inline(_))
    }

    /// Inline mode: one engine iteration, unless another thread is running
    /// one; returns whether it did any work. Other modes: false.
    pub fn drive(&self) -> bool {
        match &self.inner.mode {
            Mode::Inline(e) => {
                let now = Instant::now();
                let worked = e.try_lock().map(|mut e| e.poll(now)).unwrap_or(false);
                if worked {
                    self.inner
                        .idle
                        .last_work
                        .store(now.as_nanos(), Ordering::Relaxed);
                }
                worked
            }
            _ => false,
        }
    }

    /// Inline mode: true when the engine has had nothing to do for its idle
    /// time, so a waiter may sleep (at most [`Stack::MAX_INLINE_SLEEP`]) on
    /// [`Stack::nic_fd`]. Other modes: true.
    pub fn idle(&self) -> bool {
        let Mode::Inline(_) = &self.inner.mode else {
            return true;
        };
        let Some(after) = self.inner.idle.sleep_after else {
            return false;
        };
        let last = self.inner.idle.last_work.load(Ordering::Relaxed);
        Instant::now().as_nanos().saturating_sub(last) >= after.as_nanos() as u64
    }

    /// The longest an inline-mode waiter sleeps before it runs the engine
    /// again (its timers): 1 ms.
    pub const MAX_INLINE_SLEEP: Duration = MAX_NAP;

    /// Inline mode: the NIC queue's fd, readable when frames arrive.
    pub fn nic_fd(&self) -> Option<RawFd> {
        match &self.inner.mode {
            Mode::Inline(_) => self.inner.idle.rx_fd,
            _ => None,
        }
    }

    /// How long a waiter spins before it sleeps (`CORESTACK_SPIN_US`).
    pub fn spin_time(&self) -> Duration {
        self.inner.spin
    }

    /// Waits until `ready()` holds, `timeout` passes (None: no limit) or a
    /// signal handler runs, whichever is first. Spins for
    /// [`Stack::spin_time`], then sleeps in the kernel: on `notify` (the
    /// socket's doorbell, a futex wait) in embedded and service mode, on
    /// the NIC fd between engine iterations in inline mode.
    pub fn wait_until(
        &self,
        notify: &Notify,
        timeout: Option<Duration>,
        ready: impl Fn() -> bool,
    ) -> Waited {
        let start = Instant::now();
        let left = |now: Instant| timeout.map(|t| t.saturating_sub(now.saturating_since(start)));
        // Signals that arrive while this thread spins (see SpinSignals).
        let mut sig = crate::sys::SpinSignals::new(None);
        loop {
            if ready() {
                return Waited::Ready;
            }
            if sig.check().is_some() {
                return Waited::Interrupted;
            }
            let now = Instant::now();
            let remaining = left(now);
            if remaining == Some(Duration::ZERO) {
                return Waited::TimedOut;
            }
            match &self.inner.mode {
                Mode::Inline(_) => {
                    // Held through the naps too (they unblock atomically).
                    sig.hold();
                    if self.drive() || !self.idle() {
                        continue;
                    }
                    if sig.check().is_some() {
                        return Waited::Interrupted;
                    }
                    let nap = remaining.unwrap_or(MAX_NAP).min(MAX_NAP);
                    if let Some(fd) = self.inner.idle.rx_fd {
                        let mask = sig.sleep_mask();
                        if crate::sys::sleep_readable(fd, nap, mask.as_ref()) {
                            return Waited::Interrupted;
                        }
                    }
                }
                Mode::Embedded { .. } | Mode::Service(_) => {
                    if now.saturating_since(start) < self.inner.spin {
                        sig.hold();
                        spin_round();
                        continue;
                    }
                    if sig.release().is_some() {
                        return Waited::Interrupted;
                    }
                    let seen = notify.seq();
                    if ready() {
                        return Waited::Ready;
                    }
                    let mut nap = remaining;
                    if let Mode::Service(s) = &self.inner.mode {
                        // A daemon that died cannot wake us (see `wait`).
                        if !s.alive() && ready() {
                            return Waited::Ready;
                        }
                        nap = Some(nap.unwrap_or(LIVENESS).min(LIVENESS));
                    }
                    if notify.wait(seen, nap) == appif::notify::Woke::Interrupted {
                        return Waited::Interrupted;
                    }
                }
            }
        }
    }
}

impl Stack {
    /// The RX and TX ring size of each connection, bytes.
    pub fn ring_bytes(&self) -> usize {
        self.inner.ring_bytes
    }
}
