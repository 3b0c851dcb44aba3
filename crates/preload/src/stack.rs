//! The process's corestack: configuration from the environment, the stack
//! started on first use, fork and exit.
//!
//! | variable | meaning |
//! |---|---|
//! | `CORESTACK_IFACE` | interface to drive (embedded mode; without it the shim passes everything to the kernel) |
//! | `CORESTACK_IP` | `ADDR/PREFIX`, corestack's address |
//! | `CORESTACK_GATEWAY` | next hop beyond the subnet (optional) |
//! | `CORESTACK_IP6` | `ADDR/PREFIX`, corestack's IPv6 address (optional: turns IPv6 on; the link-local address comes from the interface's MAC) |
//! | `CORESTACK_GATEWAY6` | IPv6 default router (optional; usually its link-local address) |
//! | `CORESTACK_DRIVER` | `af_xdp` (default) or `tap` |
//! | `CORESTACK_INLINE` | `1`: no engine thread, waiting threads run the engine |
//! | `CORESTACK_CORES` | engines, one per NIC queue group (default 1; see `corestack exec --cores`) |
//! | `CORESTACK_SOCKET` | service mode: the control socket of a `corestack run` daemon (then the variables above are not used: address, prefix and gateway are the daemon's) |
//! | `CORESTACK_POLL` | embedded and inline mode: `adaptive` (default: the engine, or inline mode's runner, spins up to 50 µs without work (`CORESTACK_IDLE_US`; inline mode learns a shorter budget from its idle spells), then sleeps on the NIC queue's fd), `busy` (never sleeps), `interrupt` (sleeps as soon as it finds nothing) |
//! | `CORESTACK_IDLE_US` | adaptive polling: µs without work before the engine (or inline mode's runner) sleeps (default 50) |
//! | `CORESTACK_LINGER_MS` | how long exit waits for closed connections to deliver their data (default 5000) |
//!
//! The stack's variables (all but `CORESTACK_LINGER_MS`) are read by the
//! library's one reader, `corestack::StackConfig::from_env`, which the C
//! API shares; a missing `CORESTACK_IP` or a malformed variable leaves the
//! shim inert, said once on stderr with the variable's name.
//!
//! The stack starts at the first bind/connect/listen that goes to corestack,
//! so a process (or a forked helper that only execs) that never uses a
//! corestack socket never starts it. In service mode "starting" is joining
//! the daemon (which also tells the address and subnet the decisions need),
//! done at the first bind/connect/sendto that may go to corestack; the
//! process hands the daemon [`WAKERS`] eventfds with its hello, on which its
//! waiting threads sleep and which the daemon's engine writes when they are
//! armed (`appif::notify`). If the daemon cannot be reached, that is said
//! once and every socket stays in the kernel.
//!
//! fork: the engine thread does not exist in the child (service mode: the
//! association is the parent's). The child marks itself [`forked`].
//! Nothing of the parent's stack is ever dropped in the child (that would
//! join a thread that is not there, or close the parent's sockets); in
//! service mode the child closes its copy of the parent's control
//! connection, so that the parent's exit ends the association at once.
//! - Embedded and inline mode: its inherited corestack sockets answer
//!   ENETDOWN and close without touching the parent's rings, and its new
//!   sockets stay in the kernel.
//! - Service mode: the shim's `fork` announces the fork to the daemon
//!   first ([`before_fork`]: every socket the parent holds gets a reference
//!   for the child) and records the parent's association and the fork's
//!   ticket for the child. On its first use of a corestack socket (an
//!   inherited one, or a new one) the child joins the daemon as an
//!   application of its own with that ticket ([`stack`]); a child that
//!   never touches a socket costs the daemon a pidfd until it exits. An
//!   inherited listener then joins the parent's as a member of a shared
//!   listener, an inherited connection or UDP socket is taken over
//!   (`sock`). A child that forks joins first, so that
//!   its own children ([`generation`] up to 8) hold what it holds; one
//!   that execs joins first ([`before_exec`]), so that the exec gives its
//!   references back.
//!
//! exit: Linux closes every fd of an exiting process and keeps delivering
//! the data of its sockets after it is gone; corestack's engine dies with
//! the process. So an `atexit` handler closes the sockets still open and
//! waits (at most `CORESTACK_LINGER_MS`) until the connections' data has
//! been acknowledged.
#![forbid(unsafe_code)]

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use core::time::Duration;
use corestack::{Probe, Stack, StackConfig};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The eventfds a service-mode process hands to the daemon: how many of
/// its threads (and epoll sets) can sleep at once woken by the engine;
/// more sleep in naps of at most 1 ms.
pub const WAKERS: usize = appif::notify::SEGMENT_SLEEPERS;

/// corestack's address, subnet and gateway.
#[derive(Debug, Clone, Copy)]
pub struct Net {
    pub ip: Ipv4Addr,
    pub prefix: u8,
    pub gateway: Option<Ipv4Addr>,
    /// IPv6, when the stack has it (service mode: the daemon's global
    /// address and prefix only, as its segment tells them; its link-local
    /// address and IPv6 gateway are not told, so a bind to its link-local
    /// address and off-link IPv6 destinations stay in the kernel).
    pub v6: Option<Net6>,
}

/// corestack's IPv6 side.
#[derive(Debug, Clone, Copy)]
pub struct Net6 {
    /// The global (or unique local) address and its prefix length, bits.
    pub global: Option<(Ipv6Addr, u8)>,
    /// The link-local address (fe80::/64, modified EUI-64 of the MAC;
    /// None in service mode).
    pub link_local: Option<Ipv6Addr>,
    /// The default router.
    pub gateway: Option<Ipv6Addr>,
}

static CONFIG: OnceLock<Option<StackConfig>> = OnceLock::new();
static STACK: OnceLock<Result<Stack, i32>> = OnceLock::new();
static FORKED: AtomicBool = AtomicBool::new(false);
/// Forks a chain of service-mode processes may go through with an
/// association in each (a daemonizing server's master and its workers
/// need 2); deeper children get the embedded-mode behaviour.
const MAX_GENERATIONS: usize = 8;
/// A forked child's own association (service mode), joined on first use:
/// one cell per [`generation`], so that a child finds its own cell fresh
/// (its parent only ever touched the one before it).
static CHILD: [OnceLock<Result<Stack, i32>>; MAX_GENERATIONS] =
    [const { OnceLock::new() }; MAX_GENERATIONS];
/// Service mode: the association of the process that forked this one and
/// the ticket of that fork (association << 32 | ticket; 0: none). Set by
/// the parent just before fork, so the child finds it in its copy.
static FORK_PARENT: AtomicU64 = AtomicU64::new(0);
/// Forks since the stack started (0 in the process that started it).
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// What runs once the embedded or inline stack has started (see
/// [`when_started`]).
static ON_START: OnceLock<fn()> = OnceLock::new();

/// Has `f` run when the embedded or inline stack has started (the library
/// constructor sets it: `switch::stack_started`).
pub fn when_started(f: fn()) {
    let _ = ON_START.set(f);
}

/// Set once the application closed a corestack TCP connection (see
/// [`streams_closed`]).
static CLOSED_STREAMS: AtomicBool = AtomicBool::new(false);

/// Notes that the application closed a corestack TCP connection.
pub fn stream_closed() {
    CLOSED_STREAMS.store(true, Ordering::Relaxed);
}

/// True once the application closed a corestack TCP connection.
pub fn streams_closed() -> bool {
    CLOSED_STREAMS.load(Ordering::Relaxed)
}

/// Set in the environment of a program moved to service mode: its first
/// join waits for the private daemon to come up.
pub const PRIVATE: &str = "CORESTACK_PRIVATE_DAEMON";

/// The private daemon's log (its stderr), beside its control socket.
pub fn log_path(socket: &std::path::Path) -> std::path::PathBuf {
    socket.with_file_name("daemon.log")
}

/// The last line of the private daemon's log beside `socket`, for a join
/// that failed.
pub fn daemon_said(socket: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(log_path(socket)).ok()?;
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The configuration, read once from the environment by the library's
/// reader (`StackConfig::from_env`, which the C API shares). None: the
/// shim is inert (every call goes to the kernel), which is the case
/// without `CORESTACK_IFACE` or `CORESTACK_SOCKET`, and with a missing or
/// malformed variable (said once on stderr, naming it).
pub fn config() -> Option<&'static StackConfig> {
    // Unit tests: the harness's stack on a mem wire, for its threads only.
    #[cfg(test)]
    if let Some(c) = crate::tests::config() {
        return Some(c);
    }
    CONFIG
        .get_or_init(|| {
            let _inside = crate::sys::Inside::enter();
            StackConfig::from_env().unwrap_or_else(|e| {
                crate::sys::log_line(&format!("{e}: every socket stays in the kernel"));
                None
            })
        })
        .as_ref()
}

/// True in the child of a fork of a process whose stack was running: its
/// corestack sockets are dead (ENETDOWN) and new sockets stay in the kernel.
pub fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// How many forks separate this process from the one whose stack it
/// inherited (0: its own, or none started). A socket made in another
/// generation is the parent's.
pub fn generation() -> u32 {
    GENERATION.load(Ordering::Relaxed)
}

/// True in a forked child that may have a stack of its own: service mode,
/// forked by a process that had an association (see the module's notes).
fn may_join() -> bool {
    FORK_PARENT.load(Ordering::Relaxed) != 0 && config().is_some_and(|c| c.service.is_some())
}

/// True when new AF_INET sockets may go to corestack.
pub fn active() -> bool {
    config().is_some() && (!forked() || may_join())
}

/// This forked child's own association, if it joined one.
fn joined_child() -> Option<&'static Stack> {
    CHILD.get(generation() as usize)?.get()?.as_ref().ok()
}

/// A forked child's own association (service mode): joins the daemon as
/// the child of the fork its parent announced ([`before_fork`]) on first
/// use, with wake-up eventfds of its own, which replace the parent's in
/// the pool.
fn child_stack(cfg: &StackConfig) -> Result<&'static Stack, i32> {
    let Some(path) = cfg.service.as_ref().filter(|_| may_join()) else {
        return Err(libc::ENETDOWN);
    };
    let Some(cell) = CHILD.get(generation() as usize) else {
        return Err(libc::ENETDOWN);
    };
    cell.get_or_init(|| {
        let _inside = crate::sys::Inside::enter();
        let fp = FORK_PARENT.load(Ordering::Relaxed);
        let s = join_daemon(
            path,
            ((fp >> 32) as u32, fp as u32),
            "forked child: {e}: its inherited corestack sockets answer ENETDOWN",
        )?;
        crate::wait::replace_wakers(&s.wake_eventfds());
        Ok(s)
    })
    .as_ref()
    .map_err(|e| *e)
}

/// Joins the daemon at `path` (as the child of fork `ticket` of
/// association `parent`, unless 0) with [`WAKERS`] fresh eventfds; a
/// failure is said once on stderr as `why`, where `{e}` stands for the
/// error. Errors: the errno of the join.
///
/// A program moved to service mode by `corestack exec`
/// (`CORESTACK_PRIVATE_DAEMON`, see `crate::switch`) may start before its
/// private daemon serves: its joins are tried again for up to 10 s.
fn join_daemon(
    path: &std::path::Path,
    (parent, ticket): (u32, u32),
    why: &str,
) -> Result<Stack, i32> {
    let patient = env(PRIVATE).is_some();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let wakers = (0..WAKERS)
            .filter_map(|_| crate::table::internal_eventfd_owned().ok())
            .collect();
        match Stack::builder()
            .service(path)
            .child_of(parent)
            .fork_ticket(ticket)
            .wake_eventfds(wakers)
            .start()
        {
            Ok(s) => return Ok(s),
            Err(_) if patient && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                let mut text = e.to_string();
                if let Some(said) = patient.then(|| daemon_said(path)).flatten() {
                    text = format!("{text} (the private daemon: {said})");
                }
                crate::sys::log_line(&why.replace("{e}", &text));
                return Err(e.raw_os_error().unwrap_or(libc::ENETDOWN));
            }
        }
    }
}

/// The stack, started on first use. Errors: the start's errno (ENODEV for a
/// missing interface, EPERM without privileges, ...), said once on stderr;
/// ENETDOWN in a forked child (service mode: the child's own association,
/// joined on first use; ENETDOWN only if the daemon refuses it).
pub fn start() -> Result<&'static Stack, i32> {
    let Some(cfg) = config() else {
        return Err(libc::ENETDOWN);
    };
    if forked() {
        return child_stack(cfg);
    }
    STACK
        .get_or_init(|| {
            let _inside = crate::sys::Inside::enter();
            if let Some(path) = &cfg.service {
                let s = join_daemon(path, (0, 0), "{e}: every socket stays in the kernel")?;
                crate::wait::add_wakers(&s.wake_eventfds());
                return Ok(s);
            }
            // The engine thread must not take the application's signals.
            let _blocked = crate::sys::SignalsBlocked::new();
            #[cfg(test)]
            if let Some(s) = crate::tests::start() {
                return s;
            }
            let b = cfg.builder();
            let s = b.start().map_err(|e| {
                crate::sys::log_line(&format!(
                    "cannot start the stack on {} ({}/{}): {e}",
                    cfg.iface, cfg.ip, cfg.prefix
                ));
                e.raw_os_error().unwrap_or(libc::ENETDOWN)
            })?;
            if let Some(f) = ON_START.get() {
                f();
            }
            Ok(s)
        })
        .as_ref()
        .map_err(|e| *e)
}

/// The stack if it has been started (never starts it); in a forked child
/// its own association if it joined one (service mode), else None.
pub fn started() -> Option<&'static Stack> {
    if forked() {
        return joined_child();
    }
    STACK.get().and_then(|r| r.as_ref().ok())
}

/// corestack's address, subnet and gateway: the configuration's, or in
/// service mode the daemon's (joining it on first use). None when the shim
/// is inert, in a forked child (but for its own association in service
/// mode), or the daemon cannot be reached.
pub fn net() -> Option<Net> {
    if forked() && !may_join() {
        return None;
    }
    let c = config()?;
    if c.service.is_none() {
        return Some(Net {
            ip: c.ip,
            prefix: c.prefix,
            gateway: c.gateway,
            v6: net6(c),
        });
    }
    let stack = start().ok()?;
    let (ip, prefix, gateway) = stack.service_net()?;
    Some(Net {
        ip,
        prefix,
        gateway,
        v6: stack.service_net6().map(|g| Net6 {
            global: Some(g),
            link_local: None,
            gateway: None,
        }),
    })
}

/// The IPv6 side of an embedded or inline stack: None unless
/// `CORESTACK_IP6` or `CORESTACK_GATEWAY6` turned IPv6 on. Read once.
fn net6(c: &StackConfig) -> Option<Net6> {
    static NET6: OnceLock<Option<Net6>> = OnceLock::new();
    *NET6.get_or_init(|| {
        if c.ip6.is_none() && c.gateway6.is_none() {
            return None;
        }
        Some(Net6 {
            global: c.ip6,
            link_local: iface_mac(&c.iface).map(corestack::link_local_from_mac),
            gateway: c.gateway6,
        })
    })
}

/// The MAC address of interface `iface` (from sysfs).
fn iface_mac(iface: &str) -> Option<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{iface}/address")).ok()?;
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(mac)
}

/// The interface index of the stack's interface (IPV6_PKTINFO,
/// link-local scope ids); 0 when unknown (service mode, or no sysfs).
pub fn ifindex() -> u32 {
    static INDEX: OnceLock<u32> = OnceLock::new();
    *INDEX.get_or_init(|| {
        config()
            .filter(|c| c.service.is_none())
            .and_then(|c| {
                std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", c.iface)).ok()
            })
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// True when the stack has IPv6 (an IPv6 address configured, or in
/// service mode a daemon with one).
pub fn has_ipv6() -> bool {
    net().is_some_and(|c| c.v6.is_some())
}

/// True when `ip` is one of corestack's IPv6 addresses (global or
/// link-local).
pub fn is_own6(ip: Ipv6Addr) -> bool {
    net()
        .and_then(|c| c.v6)
        .is_some_and(|v6| v6.global.is_some_and(|(g, _)| g == ip) || v6.link_local == Some(ip))
}

/// Where a socket bound to `a` belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// corestack's own address: corestack only.
    Core,
    /// The wildcard: corestack and the kernel (loopback, other addresses).
    Both,
    /// Anything else (loopback, another interface's address).
    Kernel,
}

/// Where a bind to `ip` belongs (always the kernel in a forked child but
/// for service mode's). IPv6: one of corestack's IPv6 addresses is
/// corestack's, `::` is both (with or without IPv6 on corestack: a
/// dual-stack `::` also serves IPv4), anything else the kernel's.
pub fn bind_place(ip: IpAddr) -> Place {
    if !active() || ip.is_loopback() || ip.is_multicast() || config().is_none() {
        return Place::Kernel;
    }
    match (net(), ip) {
        (Some(c), IpAddr::V4(ip)) if ip == c.ip => Place::Core,
        (Some(_), IpAddr::V6(ip)) if is_own6(ip) => Place::Core,
        (Some(_), ip) if ip.is_unspecified() => Place::Both,
        _ => Place::Kernel,
    }
}

/// True when corestack carries traffic to `dst` (see [`routes4`],
/// [`routes6`]).
pub fn routes(dst: IpAddr) -> bool {
    match dst {
        IpAddr::V4(d) => routes4(d),
        IpAddr::V6(d) => routes6(d),
    }
}

/// True when corestack carries IPv6 traffic to `dst`: the stack has IPv6,
/// and `dst` is a unicast address that is not loopback or ours; a
/// link-local one (on-link by definition, RFC 4291 §2.5.6), one inside
/// the global address's prefix, or any other when a default router is
/// configured.
pub fn routes6(dst: Ipv6Addr) -> bool {
    if !active() || dst.is_loopback() || dst.is_multicast() || dst.is_unspecified() {
        return false;
    }
    let Some(v6) = net().and_then(|c| c.v6) else {
        return false;
    };
    if is_own6(dst) {
        return false; // the kernel has no route to us through the wire either
    }
    if dst.is_unicast_link_local() {
        return true;
    }
    let on_link = v6.global.is_some_and(|(g, p)| {
        let mask = if p == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(p))
        };
        u128::from(dst) & mask == u128::from(g) & mask
    });
    on_link || v6.gateway.is_some()
}

/// True when corestack carries traffic to `dst`: not loopback, multicast
/// or broadcast; inside corestack's subnet, or any other unicast address
/// when a gateway is configured.
pub fn routes4(dst: Ipv4Addr) -> bool {
    if !active() {
        return false;
    }
    if dst.is_loopback() || dst.is_multicast() || dst.is_broadcast() || dst.is_unspecified() {
        return false;
    }
    let Some(c) = net() else {
        return false;
    };
    let mask = if c.prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(c.prefix))
    };
    let same_net = u32::from(dst) & mask == u32::from(c.ip) & mask;
    if same_net && u32::from(dst) | mask == u32::MAX {
        return false; // the subnet's broadcast address
    }
    same_net || c.gateway.is_some()
}

/// corestack's address.
pub fn local_ip() -> Ipv4Addr {
    net().map_or(Ipv4Addr::UNSPECIFIED, |c| c.ip)
}

/// Just before fork(2) (service mode): a process with an association of
/// its own announces the fork (`Stack::forking`), so that every socket it
/// holds gets a reference for the child, and records the association and
/// the fork's ticket for the child to find. A forked child that has not
/// joined yet joins first when it may (so that what it inherited reaches
/// its own children). Returns what [`after_fork_parent`] needs.
pub fn before_fork() -> Option<(&'static Stack, u32)> {
    let announce = || -> Option<(&'static Stack, u32)> {
        let cfg = config()?;
        cfg.service.as_ref()?;
        let own = if forked() {
            child_stack(cfg).ok()?
        } else {
            started()?
        };
        Some((own, own.forking()?))
    };
    let r = announce();
    let word = r
        .and_then(|(s, t)| Some(u64::from(s.association()?) << 32 | u64::from(t)))
        .unwrap_or(0);
    FORK_PARENT.store(word, Ordering::Relaxed);
    r
}

/// fork(2) returned `pid` in the parent (-1: it failed): tells the daemon
/// which process holds the fork's references.
pub fn after_fork_parent(announced: Option<(&'static Stack, u32)>, pid: i32) {
    if let Some((s, ticket)) = announced {
        s.forked(ticket, pid);
    }
}

/// Just before execve(2) in a forked child (service mode) that inherited
/// references from its parent's fork and has not joined: joins, so that
/// the exec, which closes the association's control connection, gives
/// those references back at once (as Linux closes close-on-exec sockets).
pub fn before_exec() {
    if forked() && may_join() && joined_child().is_none() {
        if let Some(cfg) = config() {
            let _ = child_stack(cfg);
        }
    }
}

/// fork's child handler: from now on this process has no engine (and the
/// parent's sockets are the parent's: [`generation`] moves on). In service
/// mode it also closes its copy of the parent's control connection (which
/// it never uses): else the daemon would not see the parent leave while
/// the child lives. Its own association, if it needs one, is joined on
/// first use as the child of the fork its parent announced.
pub fn after_fork_child() {
    let own = if forked() {
        joined_child()
    } else {
        STACK.get().and_then(|r| r.as_ref().ok())
    };
    if let Some(started) = own {
        FORKED.store(true, Ordering::Relaxed);
        GENERATION.fetch_add(1, Ordering::Relaxed);
        if let Some(fd) = started.service_ctl_fd() {
            crate::sys::k::close_fd(fd);
        }
    } else if forked() {
        // A child that never joined: its children are one fork further.
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

/// Connections the application closed whose data may still be on its way:
/// their TX probes, checked at exit.
static LINGERING: Mutex<Vec<Probe>> = Mutex::new(Vec::new());

/// Keeps `probe` of a closed stream until its TX ring drains (see exit).
pub fn linger(probe: Probe) {
    let mut l = LINGERING.lock().unwrap_or_else(|p| p.into_inner());
    l.retain(|p| p.status().tx_pending > 0);
    if probe.status().tx_pending > 0 {
        l.push(probe);
    }
}

/// The exit handler: closes the sockets still open (`close_all`: the
/// table's, which the caller holds), waits until every closed
/// connection's data was acknowledged, at most `CORESTACK_LINGER_MS` (5 s
/// by default), then a little longer for the FINs to leave.
pub fn at_exit(close_all: impl FnOnce()) {
    if started().is_none() {
        return;
    }
    let max = env("CORESTACK_LINGER_MS")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(5), Duration::from_millis);
    // Linux closes every fd at exit: the sockets still open close now, and
    // the ones with data on its way join the lingering list.
    close_all();
    let start = Instant::now();
    let mut any = false;
    while start.elapsed() < max {
        let pending = {
            let mut l = LINGERING.lock().unwrap_or_else(|p| p.into_inner());
            l.retain(|p| p.status().tx_pending > 0);
            l.len()
        };
        if pending == 0 {
            break;
        }
        any = true;
        if let Some(s) = started() {
            if !s.drive() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    if any || streams_closed() {
        // The FINs (and the last ACKs) go out on the engine's next iterations.
        settle(SETTLE);
    }
}

/// How long the engine is given to send what closing sockets queued (the
/// FINs at exit, the resets before a switch).
pub const SETTLE: Duration = Duration::from_millis(20);

/// Gives the engine `d` to send what is queued: inline mode drives it,
/// the other modes (an engine thread or the daemon sends) sleep.
pub fn settle(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        match started() {
            Some(s) if s.is_inline() => {
                s.drive();
            }
            _ => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// True when `a` is corestack's own address or the wildcard on a port.
pub fn is_local(a: SocketAddr) -> bool {
    match a.ip() {
        IpAddr::V4(ip) => ip.is_unspecified() || ip == local_ip(),
        IpAddr::V6(ip) => ip.is_unspecified() || is_own6(ip),
    }
}

/// The local address corestack sends from to `dst` (canonical form): the
/// IPv4 address, or for IPv6 the link-local address to a link-local
/// destination and the global one otherwise (RFC 6724's scope rule).
pub fn source_for(dst: IpAddr) -> IpAddr {
    match dst {
        IpAddr::V4(_) => IpAddr::V4(local_ip()),
        IpAddr::V6(d) => {
            let v6 = net().and_then(|c| c.v6);
            let ll = v6.and_then(|v| v.link_local);
            let global = v6.and_then(|v| v.global).map(|(g, _)| g);
            let pick = if d.is_unicast_link_local() {
                ll.or(global)
            } else {
                global.or(ll)
            };
            IpAddr::V6(pick.unwrap_or(Ipv6Addr::UNSPECIFIED))
        }
    }
}
