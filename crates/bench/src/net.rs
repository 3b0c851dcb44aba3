//! What the subcommands share: the corestack options (`--iface --ip --driver --mode`), starting a
//! stack with errors a newcomer understands, the stop flag (SIGINT/SIGTERM), and small socket
//! traits implemented by both the kernel's `std::net` sockets and corestack's, so one echo loop,
//! one ping-pong client and one netcat drive either stack.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use corestack::{CcKind, Driver, PollPolicy, Stack};

/// An IPv4 address with an optional prefix length: `10.77.1.2/24` or `10.77.1.2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// The prefix length in bits (0..=32), if given.
    pub prefix: Option<u8>,
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr = a
            .parse()
            .map_err(|_| format!("{a:?} is not an IPv4 address (e.g. 10.77.1.2/24)"))?;
        let prefix = match p {
            None => None,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= 32 => Some(n),
                _ => return Err(format!("{p:?} is not a prefix length (0..=32)")),
            },
        };
        Ok(Cidr { addr, prefix })
    }
}

/// Where corestack's engine runs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeArg {
    /// The application thread runs the engine loop while it waits or polls.
    Inline,
    /// The engine runs on its own busy-polling thread.
    Embedded,
}

/// corestack's `--cc` value for the congestion control Linux calls `name` (reno, cubic,
/// dctcp, bbr), None when corestack has no such algorithm.
pub fn core_cc_arg(name: &str) -> Option<&'static str> {
    corestack::CcKind::from_name(name).map(corestack::CcKind::name)
}

/// Options that select corestack instead of the kernel stack.
#[derive(clap::Args, Debug, Clone)]
pub struct StackOpts {
    /// Interface corestack drives (a veth end, a NIC, or a tap device); without it the kernel
    /// stack is used.
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    /// corestack's IPv4 address and prefix, e.g. 10.77.1.2/24 (with --kernel: the address to bind).
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub ip: Option<Cidr>,
    /// Port driver.
    #[arg(long, value_enum, default_value_t = Driver::AfXdp)]
    pub driver: Driver,
    /// Engine placement: inline (in the application thread) or embedded (own thread).
    #[arg(long, value_enum, default_value_t = ModeArg::Inline)]
    pub mode: ModeArg,
    /// Default gateway for destinations off the subnet.
    #[arg(long, value_name = "ADDR")]
    pub gateway: Option<Ipv4Addr>,
    /// TCP congestion control of corestack's connections (default: the host's,
    /// net.ipv4.tcp_congestion_control, when corestack has it, else cubic).
    #[arg(long, value_enum, value_name = "NAME")]
    pub cc: Option<CcKind>,
    /// The engine's polling (inline mode: the waiting thread; embedded: the engine thread):
    /// adaptive (spin, sleep on the NIC fd after 50 µs idle), busy (spin without pause) or
    /// interrupt (sleep whenever idle).
    #[arg(long, value_enum, default_value_t = PollPolicy::Adaptive)]
    pub poll: PollPolicy,
    /// How an af_xdp port transmits: auto (the AF_XDP tx ring in zero-copy mode, else packet),
    /// xsk (the AF_XDP tx ring) or packet (a packet socket with segmentation offload).
    /// Default: CORESTACK_AF_XDP_TX, else auto.
    #[arg(long, value_enum, value_name = "PATH")]
    pub af_xdp_tx: Option<TxArg>,
    /// Each connection's RX and TX ring when it starts, bytes (default 256 KiB; rounded up to
    /// a power of two, at least 4096). Small rings let many connections fit in memory.
    #[arg(long, value_name = "BYTES")]
    pub ring_bytes: Option<usize>,
    /// The most a connection's ring grows to, bytes (default 8 MiB; that much address space
    /// is reserved per ring). Equal to --ring-bytes: fixed rings.
    #[arg(long, value_name = "BYTES")]
    pub ring_max_bytes: Option<usize>,
    /// Sockets the engine holds at most, of every kind and state (default 4096).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(16..=1_000_000))]
    pub max_sockets: Option<u32>,
}

/// `--af-xdp-tx`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxArg {
    /// The AF_XDP tx ring in zero-copy mode, else packet.
    Auto,
    /// The AF_XDP tx ring (one kernel buffer per frame in copy mode).
    Xsk,
    /// A packet socket with virtio-net headers: TCP segments merged into GSO frames.
    Packet,
}

impl StackOpts {
    /// True when these options ask for corestack (an interface was given).
    pub fn wants_corestack(&self) -> bool {
        self.iface.is_some() || self.service_path().is_some()
    }

    /// The daemon's control socket when this process should be one of its
    /// applications: CORESTACK_SOCKET is set and no --iface was given.
    pub fn service_path(&self) -> Option<std::path::PathBuf> {
        if self.iface.is_some() {
            return None;
        }
        appif::ctl::socket_path_from_env()
    }

    /// A short description for output: `corestack (af_xdp on veth1, inline)` or `kernel`.
    pub fn describe(&self) -> String {
        if let Some(p) = self.service_path() {
            return format!("corestack (service mode, daemon at {})", p.display());
        }
        match &self.iface {
            None => "kernel".to_string(),
            Some(i) => format!(
                "corestack ({} on {i}, {}{}{})",
                self.driver,
                self.mode_name(),
                match self.af_xdp_tx {
                    None | Some(TxArg::Auto) => "",
                    Some(TxArg::Xsk) => ", xsk tx",
                    Some(TxArg::Packet) => ", packet tx",
                },
                match self.cc {
                    None => String::new(),
                    Some(cc) => format!(", {cc}"),
                }
            ),
        }
    }

    fn mode_name(&self) -> &'static str {
        match self.mode {
            ModeArg::Inline => "inline",
            ModeArg::Embedded => "embedded",
        }
    }

    /// How a loop on `stack` (started from these options) waits.
    pub fn waiter(&self, stack: &Stack) -> Waiter {
        Waiter::Core {
            stack: stack.clone(),
            inline: self.mode == ModeArg::Inline,
        }
    }

    /// Starts corestack on `--iface` with `--ip` (or, with CORESTACK_SOCKET set and no
    /// `--iface`, joins the daemon as an application); prints a warning when AF_XDP fell back to
    /// generic XDP. Errors name what to do (missing interface, not root, XDP refused).
    pub fn start(&self) -> Result<Stack> {
        if let Some(path) = self.service_path() {
            return Stack::builder()
                .start()
                .with_context(|| format!("joining the corestack daemon at {}", path.display()));
        }
        let iface = self
            .iface
            .as_deref()
            .ok_or_else(|| anyhow!("--iface IF is required to use corestack"))?;
        let cidr = self.ip.ok_or_else(|| {
            anyhow!("--ip ADDR/PREFIX is required with --iface (e.g. --ip 10.77.1.2/24)")
        })?;
        if !Path::new("/sys/class/net").join(iface).exists() && self.driver == Driver::AfXdp {
            bail!("interface {iface} not found in this network namespace (check `ip link`)");
        }
        let mut builder = Stack::builder();
        if let Some(n) = self.max_sockets {
            builder = builder.max_sockets(n as usize);
        }
        let mut builder = builder
            .driver(self.driver)
            .iface(iface)
            .ip(cidr.addr, cidr.prefix.unwrap_or(24))
            .inline(self.mode == ModeArg::Inline);
        match self.poll {
            PollPolicy::Adaptive => {}
            PollPolicy::Busy => builder = builder.idle_sleep(None),
            PollPolicy::Interrupt => builder = builder.idle_sleep(Some(Duration::ZERO)),
        }
        if let Some(gw) = self.gateway {
            builder = builder.gateway(gw);
        }
        if let Some(n) = self.ring_bytes {
            builder = builder.ring_bytes(n);
        }
        if let Some(n) = self.ring_max_bytes {
            builder = builder.ring_max_bytes(n);
        }
        if let Some(tx) = self.af_xdp_tx {
            builder = builder.af_xdp_tx(match tx {
                TxArg::Auto => corestack::TxPath::Auto,
                TxArg::Xsk => corestack::TxPath::Xsk,
                TxArg::Packet => corestack::TxPath::Packet,
            });
        }
        if let Some(cc) = self.cc {
            builder = builder.congestion(cc);
        }
        let stack = builder
            .start()
            .map_err(|e| explain_start_error(e, iface))
            .with_context(|| format!("starting corestack on {iface} ({})", self.driver))?;
        if stack.xdp_generic_fallback() {
            eprintln!(
                "warning: af_xdp on {iface} fell back to generic (copy) XDP mode: expect higher latency \
                 (the driver lacks native XDP)"
            );
        }
        Ok(stack)
    }
}

fn explain_start_error(e: io::Error, iface: &str) -> anyhow::Error {
    let msg = e.to_string();
    if e.kind() == io::ErrorKind::PermissionDenied && !msg.contains("sudo") && !msg.contains("root")
    {
        return anyhow!("needs root or CAP_NET_ADMIN to drive {iface}: run with sudo ({msg})");
    }
    anyhow!(e)
}

/// An error that means "the user interrupted us": exit with status 130.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// The error as one line: its context chain joined by ": ", newlines removed.
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

/// A flag set by SIGINT or SIGTERM (the default action of both is replaced: poll the flag).
pub fn stop_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .context("installing the signal handler")?;
    }
    Ok(flag)
}

/// Sets TCP_CONGESTION on a kernel socket (on a listener: for the connections it accepts).
pub fn set_kernel_cc<S: std::os::fd::AsFd>(s: &S, name: &str) -> Result<()> {
    socket2::SockRef::from(s)
        .set_tcp_congestion(name.as_bytes())
        .with_context(|| {
            format!("setting TCP congestion control {name} (see /proc/sys/net/ipv4/tcp_available_congestion_control)")
        })
}

/// Explains a bind error (address in use is the one people meet).
pub fn bind_error(e: io::Error, what: &str, addr: SocketAddrV4) -> anyhow::Error {
    if e.kind() == io::ErrorKind::AddrInUse {
        anyhow!("{what} {addr} is already in use (is another server running? pick another --port)")
    } else {
        anyhow!("binding {what} {addr}: {e}")
    }
}

/// Explains a connect error.
pub fn connect_error(e: io::Error, addr: SocketAddrV4) -> anyhow::Error {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            anyhow!(
                "connection refused by {addr} (ECONNREFUSED): is a server listening on that port?"
            )
        }
        io::ErrorKind::TimedOut => {
            anyhow!("connecting to {addr} timed out (ETIMEDOUT): check the address and route")
        }
        _ => anyhow!("connecting to {addr}: {e}"),
    }
}

/// How a loop waits when a nonblocking pass found nothing to do.
#[derive(Clone)]
pub enum Waiter {
    /// The kernel stack: spin (a CPU hint) or sleep briefly.
    Kernel,
    /// corestack: `Stack::poll`, which in inline mode runs the engine.
    Core {
        /// The stack to poll.
        stack: Stack,
        /// Inline mode (the app thread runs the engine); else embedded.
        inline: bool,
    },
}

impl Waiter {
    /// Spin once: no sleeping. For corestack this runs engine iterations (inline) without
    /// waiting.
    pub fn spin(&self) -> io::Result<()> {
        match self {
            Waiter::Kernel => {
                std::hint::spin_loop();
                Ok(())
            }
            Waiter::Core { stack, inline } => {
                stack.poll(Some(Duration::ZERO));
                if !inline {
                    // The engine thread may share this CPU: let it run.
                    std::thread::yield_now();
                }
                Ok(())
            }
        }
    }

    /// Wait up to `timeout` for something to happen (corestack: any socket event; kernel: a
    /// short sleep, at most `timeout`).
    pub fn wait(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Waiter::Kernel => {
                std::thread::sleep(timeout.min(Duration::from_micros(200)));
                Ok(())
            }
            Waiter::Core { stack, .. } => {
                stack.poll(Some(timeout));
                Ok(())
            }
        }
    }
}

/// A byte stream either stack provides.
pub trait Stream: Read + Write {
    /// Half-closes the sending side (FIN).
    fn shutdown_write(&mut self) -> io::Result<()>;
    /// Switches between blocking and nonblocking (EWOULDBLOCK) reads and writes.
    fn nonblocking(&mut self, on: bool) -> io::Result<()>;
    /// Disables Nagle.
    fn nodelay(&mut self) -> io::Result<()>;
}

impl Stream for std::net::TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        std::net::TcpStream::shutdown(self, Shutdown::Write)
    }
    fn nonblocking(&mut self, on: bool) -> io::Result<()> {
        std::net::TcpStream::set_nonblocking(self, on)
    }
    fn nodelay(&mut self) -> io::Result<()> {
        std::net::TcpStream::set_nodelay(self, true)
    }
}

impl Stream for corestack::TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        corestack::TcpStream::shutdown(self, Shutdown::Write)
    }
    fn nonblocking(&mut self, on: bool) -> io::Result<()> {
        corestack::TcpStream::set_nonblocking(self, on)
    }
    fn nodelay(&mut self) -> io::Result<()> {
        corestack::TcpStream::set_nodelay(self, true)
    }
}

/// A listening TCP socket either stack provides.
pub trait Listener {
    /// The accepted stream type.
    type Stream: Stream;
    /// Accepts one connection (EWOULDBLOCK when nonblocking and none is pending).
    fn accept_one(&mut self) -> io::Result<(Self::Stream, SocketAddrV4)>;
    /// Switches between blocking and nonblocking (EWOULDBLOCK) accepts.
    fn nonblocking(&mut self, on: bool) -> io::Result<()>;
}

impl Listener for std::net::TcpListener {
    type Stream = std::net::TcpStream;
    fn accept_one(&mut self) -> io::Result<(std::net::TcpStream, SocketAddrV4)> {
        let (s, peer) = self.accept()?;
        Ok((s, v4(peer)))
    }
    fn nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.set_nonblocking(on)
    }
}

impl Listener for corestack::TcpListener {
    type Stream = corestack::TcpStream;
    fn accept_one(&mut self) -> io::Result<(corestack::TcpStream, SocketAddrV4)> {
        self.accept()
    }
    fn nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.set_nonblocking(on)
    }
}

/// A UDP socket either stack provides.
pub trait Datagram {
    /// Sends one datagram; returns the bytes sent.
    fn send_one(&mut self, buf: &[u8], to: SocketAddrV4) -> io::Result<usize>;
    /// Receives one datagram (EWOULDBLOCK when nonblocking and none is queued).
    fn recv_one(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddrV4)>;
}

impl Datagram for std::net::UdpSocket {
    fn send_one(&mut self, buf: &[u8], to: SocketAddrV4) -> io::Result<usize> {
        self.send_to(buf, to)
    }
    fn recv_one(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddrV4)> {
        let (n, from) = self.recv_from(buf)?;
        Ok((n, v4(from)))
    }
}

impl Datagram for corestack::UdpSocket {
    fn send_one(&mut self, buf: &[u8], to: SocketAddrV4) -> io::Result<usize> {
        self.send_to(buf, to)
    }
    fn recv_one(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddrV4)> {
        self.recv_from(buf)
    }
}

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(a) => SocketAddrV4::new(
            a.ip().to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
            a.port(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_with_prefix_parses_both_parts() {
        let c: Cidr = "10.77.1.2/24".parse().unwrap();
        assert_eq!(
            c,
            Cidr {
                addr: Ipv4Addr::new(10, 77, 1, 2),
                prefix: Some(24)
            }
        );
        let c: Cidr = "10.0.0.1".parse().unwrap();
        assert_eq!(c.prefix, None);
    }

    #[test]
    fn cidr_with_bad_prefix_is_rejected() {
        assert!("10.0.0.1/33".parse::<Cidr>().is_err());
        assert!("10.0.0/24".parse::<Cidr>().is_err());
    }

    #[test]
    fn one_line_with_context_joins_on_one_line() {
        let e = anyhow!("interface x not found\n(check `ip link`)").context("starting corestack");
        assert_eq!(
            one_line(&e),
            "starting corestack: interface x not found (check `ip link`)"
        );
    }
}
