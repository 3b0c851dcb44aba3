//! Building a [`Stack`]: its settings, opening the port, and starting the
//! engine in service, inline or embedded mode.

use super::run::{engine_cpu, run_engine, EngineNap, Idle, SpinBudget, IDLE_BEFORE_SLEEP};
use super::wait::spin_time;
use super::{Driver, Inner, Mode, NicNotes, Stack};
use appif::notify::Notify;
use appif::spsc;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::time::Duration;
use engine::publish::Published;
use engine::stats::Stats;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::Port;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

/// Settings for a [`Stack`]; see [`Stack::builder`].
pub struct StackBuilder {
    driver: Driver,
    iface: Option<String>,
    ip: Option<(Ipv4Addr, u8)>,
    gateway: Option<Ipv4Addr>,
    ip6: Option<(Ipv6Addr, u8)>,
    gateway6: Option<Ipv6Addr>,
    inline: bool,
    ring_bytes: usize,
    idle_sleep: Option<Duration>,
    engine: EngineConfig,
    mem: Vec<nic::mem::MemPort>,
    /// Engines to run (one per NIC queue).
    engines: usize,
    /// CPUs to pin embedded mode's engine threads to (engine i on entry i
    /// mod the length); empty: the environment's, if any.
    engine_cpus: Vec<usize>,
    service: Option<std::path::PathBuf>,
    wakers: Vec<std::os::fd::OwnedFd>,
    af_xdp_tx: Option<nic::af_xdp::TxPath>,
    parent: u32,
    ticket: u32,
}

impl Default for StackBuilder {
    fn default() -> Self {
        let cc = engine::tcp::CcKind::system_default();
        StackBuilder {
            driver: Driver::AfXdp,
            iface: None,
            ip: None,
            gateway: None,
            ip6: None,
            gateway6: None,
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
            mem: Vec::new(),
            engines: 1,
            engine_cpus: Vec::new(),
            service: None,
            wakers: Vec::new(),
            af_xdp_tx: None,
            parent: 0,
            ticket: 0,
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

    /// Our global (or unique local) IPv6 address and its prefix length in
    /// bits: turns IPv6 on (`EngineConfig::ipv6`), with a link-local
    /// address from the MAC (RFC 4291 §2.5.6, modified EUI-64). The IPv4
    /// address stays required: the stack is dual-stack.
    pub fn ip6(mut self, addr: Ipv6Addr, prefix_len: u8) -> Self {
        self.ip6 = Some((addr, prefix_len.min(128)));
        self
    }

    /// The IPv6 default router (usually its link-local address); turns
    /// IPv6 on as [`StackBuilder::ip6`] does.
    pub fn gateway6(mut self, gw: Ipv6Addr) -> Self {
        self.gateway6 = Some(gw);
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
    /// UDP sockets; default 1 000 000, a limit: the table grows with them):
    /// opening more fails with EMFILE.
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
    /// association's process (the daemon checks), unless the parent named
    /// this process as the child of fork `ticket` ([`Stack::forking`]).
    pub fn child_of(mut self, assoc: u32) -> Self {
        self.parent = assoc;
        self
    }

    /// Service mode, in a forked child: the ticket of the fork that made
    /// this process ([`Stack::forking`] in the parent, 0: none). With it
    /// the child may take over the sockets it inherited
    /// ([`TcpStream::adopt`](crate::TcpStream::adopt),
    /// [`TcpListener::join`]), and joins even when its parent has exited.
    pub fn fork_ticket(mut self, ticket: u32) -> Self {
        self.ticket = ticket;
        self
    }

    /// Uses an in-memory port instead of a NIC (tests, simulations).
    pub fn mem_port(mut self, port: nic::mem::MemPort) -> Self {
        self.mem = vec![port];
        self.engines = 1;
        self
    }

    /// Runs one engine on each of `ports` (the queues of one end of a
    /// [`nic::mem::multi_pair`]).
    pub fn mem_ports(mut self, ports: Vec<nic::mem::MemPort>) -> Self {
        self.engines = ports.len().max(1);
        self.mem = ports;
        self
    }

    /// Pins embedded mode's engine threads: engine i to `cpus[i % len]`
    /// (see [`crate::parse_cpu_list`]). Without it, `CORESTACK_ENGINE_CPUS`
    /// (a list) or `CORESTACK_ENGINE_CPU` (engine i on that CPU plus i)
    /// decide, if set; else the engines run where the scheduler puts them.
    /// Inline mode has no engine threads: the list is not used.
    pub fn engine_cpus(mut self, cpus: Vec<usize>) -> Self {
        self.engine_cpus = cpus;
        self
    }

    /// Runs `n` engines (1..=255), each on its own NIC queue with its own
    /// thread (embedded mode) or lock (inline mode); a flow belongs to the
    /// engine its symmetric Toeplitz hash picks ([`nic::rss::Steering`]).
    /// Default 1.
    pub fn engines(mut self, n: usize) -> Self {
        self.engines = n.clamp(1, appif::socket::MAX_ENGINES);
        self
    }

    /// Starts the engine on `port` with `cfg` and this builder's mode,
    /// ring size and idle sleep (`nic`: what the NIC setup found, e.g.
    /// AF_XDP fell back to generic mode).
    fn launch_on<P: Port + Send + 'static>(
        &self,
        ports: Vec<P>,
        cfg: EngineConfig,
        nic: NicNotes,
    ) -> Stack {
        launch(
            ports,
            cfg,
            self.inline,
            self.ring_bytes,
            nic,
            (self.idle_sleep, &self.engine_cpus),
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
            (None, m) if m.is_empty() => appif::ctl::socket_path_from_env(),
            (None, _) => None,
        };
        if let Some(path) = service {
            return launch_service(
                &path,
                self.ring_bytes,
                self.wakers,
                (self.parent, self.ticket),
            );
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
        if self.ip6.is_some() || self.gateway6.is_some() {
            let mut v6 = cfg.ipv6.take().unwrap_or_default();
            v6.global = self.ip6.or(v6.global);
            v6.gateway = self.gateway6.or(v6.gateway);
            cfg.ipv6 = Some(v6);
        }
        // Active opens take their ports where the host's sockets do, unless set.
        if self.mem.is_empty() && cfg.ephemeral_ports == EngineConfig::default().ephemeral_ports {
            if let Some(range) = local_port_range() {
                cfg.ephemeral_ports = range;
            }
        }
        cfg.ring_bytes = self.ring_bytes;
        if !self.mem.is_empty() {
            let ports = std::mem::take(&mut self.mem);
            return Ok(self.launch_on(ports, cfg, NicNotes::default()));
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
                // Our IPv6 addresses (global and link-local) and their
                // solicited-node groups come to us; other IPv6 to the kernel.
                let steer_ip6 = match &cfg.ipv6 {
                    Some(v6) => {
                        let ll = v6
                            .link_local
                            .or_else(|| iface_mac(&iface).map(engine::link_local_from_mac));
                        v6.global.map(|g| g.0).into_iter().chain(ll).collect()
                    }
                    None => Vec::new(),
                };
                let xcfg = nic::af_xdp::AfXdpConfig {
                    ifname: iface,
                    steer_ip: Some(ip),
                    steer_ip6,
                    tx_path,
                    ..Default::default()
                };
                if self.engines == 1 {
                    let port = nic::af_xdp::AfXdpPort::open(&xcfg).map_err(io::Error::from)?;
                    let notes = NicNotes {
                        xdp_generic: port.xdp_mode() == nic::af_xdp::XdpMode::Generic,
                        rss: None,
                    };
                    return Ok(self.launch_on(vec![port], cfg, notes));
                }
                // Engine e reads queues e, e + N, ...; the NIC steers by
                // the engines' hash where it can.
                let (groups, rss) = nic::group::af_xdp_engines(&xcfg, self.engines)?;
                let notes = NicNotes {
                    xdp_generic: groups
                        .iter()
                        .flat_map(|g| g.ports())
                        .any(|p| p.xdp_mode() == nic::af_xdp::XdpMode::Generic),
                    rss: Some(rss),
                };
                Ok(self.launch_on(groups, cfg, notes))
            }
            Driver::Tap if self.engines == 1 => {
                let port = nic::tap::TapPort::open(&iface).map_err(io::Error::from)?;
                Ok(self.launch_on(vec![port], cfg, NicNotes::default()))
            }
            Driver::Tap => {
                // A queue of a multi-queue tap per engine.
                let groups = nic::group::tap_engines(&iface, self.engines)?;
                Ok(self.launch_on(groups, cfg, NicNotes::default()))
            }
        }
    }
}

/// The MAC address of interface `iface` (from sysfs), if it has one.
fn iface_mac(iface: &str) -> Option<wire::MacAddr> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{iface}/address")).ok()?;
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(wire::MacAddr(mac))
}

fn launch_service(
    path: &std::path::Path,
    ring_bytes: usize,
    wakers: Vec<std::os::fd::OwnedFd>,
    parent: (u32, u32),
) -> io::Result<Stack> {
    let service = crate::service::Service::connect(path, ring_bytes, wakers, parent)?;
    let (tx, _rx) = spsc::channel(1);
    let mtu = service.mtu();
    let ring_bytes = service.seg.layout().ring_bytes as usize;
    let ring_max_bytes = service.seg.layout().ring_max_bytes as usize;
    let steering =
        (service.engines() > 1).then(|| Arc::new(nic::rss::Steering::new(service.engines())));
    let ip = service.seg.net().0.map_or(Ipv4Addr::UNSPECIFIED, |n| n.0);
    let ip6 = service.seg.net6().map(|n| n.0);
    Ok(Stack {
        inner: Arc::new(Inner {
            lanes: vec![super::Lane {
                commands: Mutex::new(tx),
                doorbell: None,
            }],
            // With several engines in the daemon, a flow goes to the
            // engine its hash picks there, from the daemon's addresses.
            steering,
            ip,
            ip6,
            wake: Arc::new(Notify::default()),
            next_id: AtomicU64::new(1),
            mode: Mode::Service(service),
            ring_bytes,
            ring_max_bytes,
            nic: NicNotes::default(),
            mtu,
            idle: Idle {
                spin: None,
                rx_fd: None,
                runner: AtomicU64::new(0),
            },
            spin: spin_time(false),
            tracer: observe::trace::Tracer::process(),
        }),
    })
}

/// Starts one engine per port (several: steered and joined by handoff
/// rings) in inline or embedded mode.
fn launch<P: Port + Send + 'static>(
    ports: Vec<P>,
    cfg: EngineConfig,
    inline: bool,
    ring_bytes: usize,
    nic: NicNotes,
    (idle_sleep, cpus): (Option<Duration>, &[usize]),
) -> Stack {
    let wake = Arc::new(Notify::default());
    let n = ports.len();
    let mtu = ports.first().map_or(1500, |p| p.mtu());
    // Inline mode's waiter naps on one engine's NIC fd: with one engine.
    let rx_fd = ports.first().and_then(|p| p.rx_fd()).filter(|_| n == 1);
    let ring_max_bytes = cfg.ring_max_bytes.max(ring_bytes);
    let ip = cfg.ip;
    let ip6 = cfg.ipv6.as_ref().and_then(|v6| v6.global).map(|g| g.0);
    let steering = (n > 1).then(|| Arc::new(nic::rss::Steering::new(n)));
    let mut mesh = steering
        .as_ref()
        .map(|s| engine::steer::handoff_mesh(s.clone(), engine::steer::HANDOFF_RING_BYTES));
    // Embedded mode's engine threads sleep like an inline waiter (adaptive
    // polling) when each has a NIC fd to sleep on and a doorbell to be woken
    // by (for commands, and for frames other engines hand over).
    let naps = !inline && idle_sleep.is_some() && ports.iter().all(|p| p.rx_fd().is_some());
    let bells: Vec<_> = (0..n)
        .map(|_| {
            naps.then(|| appif::doorbell::Doorbell::new().ok())
                .flatten()
        })
        .collect();
    let mut lanes = Vec::with_capacity(n);
    let mut engines = Vec::with_capacity(n);
    for (port, bell) in ports.into_iter().zip(&bells) {
        let (tx, rx) = spsc::channel(1024);
        let mut engine = Engine::new(port, cfg.clone(), rx, wake.clone(), Instant::now());
        if let Some(m) = mesh.as_mut() {
            let mut handoff = m.remove(0);
            handoff.set_doorbells(bells.clone());
            engine.join(handoff);
        }
        lanes.push(super::Lane {
            commands: Mutex::new(tx),
            doorbell: bell.clone(),
        });
        engines.push(engine);
    }
    let mode = if inline {
        Mode::Inline(
            engines
                .into_iter()
                .map(|e| Mutex::new(Box::new(Published::new(e)) as super::run::DynEngine))
                .collect(),
            super::owner::Owners::new(n),
        )
    } else {
        let stop = Arc::new(AtomicBool::new(false));
        let mut stats = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for (i, engine) in engines.into_iter().enumerate() {
            let s = Arc::new(Mutex::new(Stats::default()));
            stats.push(s.clone());
            let nap = match (&lanes[i].doorbell, idle_sleep, engine.rx_fd()) {
                (Some(d), Some(after), Some(fd)) => Some(EngineNap {
                    after,
                    rx_fd: fd,
                    doorbell: d.clone(),
                }),
                _ => None,
            };
            threads.push(spawn_engine(
                engine,
                (i, engine_cpu(cpus, i)),
                stop.clone(),
                s,
                nap,
            ));
        }
        Mode::Embedded {
            stop,
            threads: Mutex::new(threads),
            stats,
        }
    };
    Stack {
        inner: Arc::new(Inner {
            lanes,
            steering,
            ip,
            ip6,
            wake,
            next_id: AtomicU64::new(1),
            mode,
            ring_bytes,
            ring_max_bytes,
            nic,
            mtu,
            idle: Idle {
                spin: idle_sleep
                    .filter(|_| inline && rx_fd.is_some())
                    .map(SpinBudget::new),
                rx_fd,
                runner: AtomicU64::new(0),
            },
            spin: spin_time(!inline),
            tracer: observe::trace::Tracer::process(),
        }),
    }
}

/// Embedded mode's thread for engine `index`, pinned to
/// `CORESTACK_ENGINE_CPU` + `index` when that is set. The engine's
/// segments (`corestack stat`, `ss`) are created here, before the thread
/// starts: they exist once the stack has started.
fn spawn_engine<P: Port + Send + 'static>(
    engine: Engine<P>,
    (index, cpu): (usize, Option<usize>),
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<Stats>>,
    nap: Option<EngineNap>,
) -> std::thread::JoinHandle<()> {
    let engine = Published::new(engine);
    std::thread::Builder::new()
        .name(format!("corestack-engine-{index}"))
        .spawn(move || {
            let mut nap = nap;
            if let Some(cpu) = cpu {
                appif::pin_current_thread(cpu);
            } else if crate::sys::allowed_cpus() == Some(1) {
                // The application's threads can only run on this CPU
                // too: idling on it delays the very thread the engine
                // just handed data to (under SCHED_FIFO it cannot run
                // at all until the engine blocks). Nap at once.
                if let Some(n) = nap.as_mut() {
                    n.after = Duration::ZERO;
                }
            }
            run_engine(engine, &stop, &stats, nap)
        })
        .expect("spawning the engine thread")
}

impl Stack {
    /// A builder with defaults: AF_XDP, embedded mode, 256 KiB rings.
    pub fn builder() -> StackBuilder {
        StackBuilder::default()
    }
}

/// This network namespace's `net.ipv4.ip_local_port_range` (first, last).
fn local_port_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|w| w.parse::<u16>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    (0 < lo && lo <= hi).then_some((lo, hi))
}
