//! The corestack options (`--iface --ip --driver --mode ...`) and starting a stack from them,
//! with errors a newcomer understands: the options decide between the kernel stack and
//! corestack (embedded, inline or service mode).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::str::FromStr;

use anyhow::{anyhow, bail, Context, Result};
use corestack::{CcKind, ConfigError, Driver, PollPolicy, Stack, StackConfig};

use crate::wait::Waiter;

/// An IPv4 address with an optional prefix length: `10.77.1.2/24` or `10.77.1.2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// The prefix length in bits (0..=32), if given.
    pub prefix: Option<u8>,
}

/// `ADDR/PREFIX` split at the slash: the address text and the prefix text, if any.
fn split_prefix(s: &str) -> (&str, Option<&str>) {
    match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    }
}

/// The prefix length `p` in bits, if given; an error unless it is a number in 0..=`max`.
fn prefix_len(p: Option<&str>, max: u8) -> std::result::Result<Option<u8>, String> {
    match p {
        None => Ok(None),
        Some(p) => match p.parse::<u8>() {
            Ok(n) if n <= max => Ok(Some(n)),
            _ => Err(format!("{p:?} is not a prefix length (0..={max})")),
        },
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (a, p) = split_prefix(s);
        let addr = a
            .parse()
            .map_err(|_| format!("{a:?} is not an IPv4 address (e.g. 10.77.1.2/24)"))?;
        let prefix = prefix_len(p, 32)?;
        Ok(Cidr { addr, prefix })
    }
}

/// Where a kernel-stack server (`serve echo --kernel`, `serve sink --kernel`) listens on
/// `port`: its `--ip` as the bind address; an IPv4 and an IPv6 `--ip`: `[::]`, which on Linux
/// (net.ipv6.bindv6only = 0, the default) takes both families on one socket (RFC 3493 §3.7);
/// no `--ip`: 0.0.0.0.
pub fn kernel_listen_addr(opts: &StackOpts, port: u16) -> std::net::SocketAddr {
    match (opts.ip4(), opts.ip6()) {
        (Some(_), Some(_)) => (Ipv6Addr::UNSPECIFIED, port).into(),
        (Some(c), None) => (c.addr, port).into(),
        (None, Some((a, _))) => (a, port).into(),
        (None, None) => (Ipv4Addr::UNSPECIFIED, port).into(),
    }
}

/// An IPv4 or IPv6 address with an optional prefix length: `10.77.1.2/24`,
/// `fd00:1::2/64` (`--ip`, which may be given once per family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpCidr {
    /// An IPv4 address.
    V4(Cidr),
    /// An IPv6 address and its prefix length in bits (0..=128), if given.
    V6(Ipv6Addr, Option<u8>),
}

impl FromStr for IpCidr {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (a, p) = split_prefix(s);
        if let Ok(addr) = a.parse::<Ipv6Addr>() {
            return Ok(IpCidr::V6(addr, prefix_len(p, 128)?));
        }
        s.parse::<Cidr>().map(IpCidr::V4).map_err(|_| {
            format!("{a:?} is not an IPv4 or IPv6 address (e.g. 10.77.1.2/24, fd00:1::2/64)")
        })
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
    /// corestack's address and prefix, IPv4 (e.g. 10.77.1.2/24) or IPv6 (e.g. fd00:1::2/64);
    /// give it once per family for a dual-stack corestack (an IPv4 address is required; with
    /// --kernel: the address to bind).
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub ip: Vec<IpCidr>,
    /// Port driver.
    #[arg(long, value_enum, default_value_t = Driver::AfXdp)]
    pub driver: Driver,
    /// Engine placement: inline (in the application thread) or embedded (own thread).
    #[arg(long, value_enum, default_value_t = ModeArg::Inline)]
    pub mode: ModeArg,
    /// Default gateway for destinations off the subnet, IPv4 or IPv6 (once per family).
    #[arg(long, value_name = "ADDR")]
    pub gateway: Vec<IpAddr>,
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
    /// Sockets the engine holds at most, of every kind and state (default 1 000 000): a
    /// limit, the table grows with the sockets open.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(16..=1_000_000))]
    pub max_sockets: Option<u32>,
    /// Engines, one per NIC queue (queues 0..N), each owning the flows its symmetric
    /// Toeplitz hash picks; a frame that lands on another engine's queue is handed over.
    /// Embedded mode: one thread each (pinned from CORESTACK_ENGINE_CPU on, when set);
    /// inline mode: one lock each. Default 1.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=255))]
    pub cores: u16,
    /// CPUs for the engine threads (embedded mode), as `taskset -c` writes them (`2-3`,
    /// `4,6`): engine i runs on the i-th (cycling through the list).
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cpus: Option<CpuList>,
}

/// `--cpus LIST`: CPU numbers in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses `--cpus` (see [`corestack::parse_cpu_list`]).
pub fn cpu_list(text: &str) -> Result<CpuList, String> {
    corestack::parse_cpu_list(text).map(CpuList)
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
    /// The IPv4 `--ip`, if given.
    pub fn ip4(&self) -> Option<Cidr> {
        self.ip.iter().find_map(|c| match c {
            IpCidr::V4(c) => Some(*c),
            IpCidr::V6(..) => None,
        })
    }

    /// The IPv6 `--ip` and its prefix length (default 64), if given.
    pub fn ip6(&self) -> Option<(Ipv6Addr, u8)> {
        self.ip.iter().find_map(|c| match c {
            IpCidr::V6(a, p) => Some((*a, p.unwrap_or(64))),
            IpCidr::V4(_) => None,
        })
    }

    /// The IPv4 `--gateway`, if given.
    pub fn gateway4(&self) -> Option<Ipv4Addr> {
        self.gateway.iter().find_map(|g| match g {
            IpAddr::V4(a) => Some(*a),
            IpAddr::V6(_) => None,
        })
    }

    /// The IPv6 `--gateway`, if given.
    pub fn gateway6(&self) -> Option<Ipv6Addr> {
        self.gateway.iter().find_map(|g| match g {
            IpAddr::V6(a) => Some(*a),
            IpAddr::V4(_) => None,
        })
    }

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

    /// The stack these options ask for, as the library's one
    /// configuration type: service mode with CORESTACK_SOCKET set and no
    /// `--iface`, else embedded or inline mode on `--iface` with `--ip`
    /// (an IPv4 `--ip` without a prefix: /24).
    ///
    /// Errors: a [`ConfigError`] naming the flag, when `--iface` or an IPv4
    /// `--ip` is missing.
    pub fn config(&self) -> std::result::Result<StackConfig, ConfigError> {
        if let Some(path) = self.service_path() {
            return Ok(StackConfig {
                service: Some(path),
                ..StackConfig::default()
            });
        }
        let iface = self.iface.clone().ok_or_else(|| {
            ConfigError::new("--iface", "--iface IF is required to use corestack".into())
        })?;
        let cidr = self.ip4().ok_or_else(|| {
            ConfigError::new(
                "--ip",
                "an IPv4 --ip ADDR/PREFIX is required with --iface (e.g. --ip 10.77.1.2/24)".into(),
            )
        })?;
        Ok(StackConfig {
            iface,
            driver: self.driver,
            ip: cidr.addr,
            prefix: cidr.prefix.unwrap_or(24),
            gateway: self.gateway4(),
            ip6: self.ip6(),
            gateway6: self.gateway6(),
            inline: self.mode == ModeArg::Inline,
            engines: usize::from(self.cores),
            engine_cpus: self.cpus.as_ref().map(|c| c.0.clone()).unwrap_or_default(),
            poll: self.poll,
            af_xdp_tx: self.af_xdp_tx.map(|tx| match tx {
                TxArg::Auto => corestack::TxPath::Auto,
                TxArg::Xsk => corestack::TxPath::Xsk,
                TxArg::Packet => corestack::TxPath::Packet,
            }),
            ring_bytes: self.ring_bytes,
            ring_max_bytes: self.ring_max_bytes,
            max_sockets: self.max_sockets.map(|n| n as usize),
            congestion: self.cc,
            ..StackConfig::default()
        })
    }

    /// Starts corestack as [`StackOpts::config`] says (or, with CORESTACK_SOCKET set and no
    /// `--iface`, joins the daemon as an application); prints a warning when AF_XDP fell back to
    /// generic XDP. Errors name what to do (missing interface, not root, XDP refused).
    pub fn start(&self) -> Result<Stack> {
        let cfg = self.config()?;
        if let Some(path) = &cfg.service {
            return cfg
                .builder()
                .start()
                .with_context(|| format!("joining the corestack daemon at {}", path.display()));
        }
        let iface = cfg.iface.as_str();
        if !Path::new("/sys/class/net").join(iface).exists() && cfg.driver == Driver::AfXdp {
            bail!("interface {iface} not found in this network namespace (check `ip link`)");
        }
        let stack = cfg
            .builder()
            .start()
            .map_err(|e| explain_start_error(e, iface))
            .with_context(|| format!("starting corestack on {iface} ({})", cfg.driver))?;
        if stack.xdp_generic_fallback() {
            eprintln!(
                "warning: af_xdp on {iface} fell back to generic (copy) XDP mode: expect higher latency \
                 (the driver lacks native XDP)"
            );
        }
        if let Some(rss) = stack.nic_rss() {
            eprintln!("{iface}: {rss}");
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
    fn kernel_listen_addr_follows_the_families_of_ip() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cmd {
            #[command(flatten)]
            stack: StackOpts,
        }
        let at = |args: &[&str]| {
            let cmd = Cmd::parse_from([&["x"], args].concat());
            kernel_listen_addr(&cmd.stack, 7).to_string()
        };
        assert_eq!(at(&[]), "0.0.0.0:7");
        assert_eq!(at(&["--ip", "10.0.0.2"]), "10.0.0.2:7");
        assert_eq!(at(&["--ip", "fd00::2"]), "[fd00::2]:7");
        assert_eq!(at(&["--ip", "10.0.0.2", "--ip", "fd00::2/64"]), "[::]:7");
    }

    #[test]
    fn flags_become_one_stack_config_and_missing_ones_are_named() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cmd {
            #[command(flatten)]
            stack: StackOpts,
        }
        let config = |args: &[&str]| Cmd::parse_from([&["x"], args].concat()).stack.config();
        let c = config(&[
            "--iface",
            "veth1",
            "--ip",
            "10.0.0.2",
            "--ip",
            "fd00::2/64",
            "--gateway",
            "10.0.0.1",
            "--mode",
            "embedded",
            "--cores",
            "2",
            "--poll",
            "busy",
            "--cc",
            "dctcp",
            "--ring-bytes",
            "4096",
        ])
        .unwrap();
        assert_eq!(
            c,
            StackConfig {
                iface: "veth1".into(),
                ip: Ipv4Addr::new(10, 0, 0, 2),
                prefix: 24,
                gateway: Some(Ipv4Addr::new(10, 0, 0, 1)),
                ip6: Some(("fd00::2".parse().unwrap(), 64)),
                engines: 2,
                poll: PollPolicy::Busy,
                congestion: Some(CcKind::Dctcp),
                ring_bytes: Some(4096),
                ..StackConfig::default()
            }
        );
        if std::env::var_os("CORESTACK_SOCKET").is_none() {
            assert_eq!(config(&[]).unwrap_err().name, "--iface");
            assert_eq!(config(&["--iface", "veth1"]).unwrap_err().name, "--ip");
        }
    }

    #[test]
    fn cidr_with_bad_prefix_is_rejected() {
        assert!("10.0.0.1/33".parse::<Cidr>().is_err());
        assert!("10.0.0/24".parse::<Cidr>().is_err());
        assert_eq!(
            "10.0.0.1/x".parse::<Cidr>(),
            Err("\"x\" is not a prefix length (0..=32)".to_string())
        );
    }

    #[test]
    fn ip_cidr_takes_either_family_with_its_own_prefix_bound() {
        let v6 = "fd00:1::2".parse::<Ipv6Addr>().unwrap();
        assert_eq!("fd00:1::2/128".parse(), Ok(IpCidr::V6(v6, Some(128))));
        assert_eq!("fd00:1::2".parse(), Ok(IpCidr::V6(v6, None)));
        assert_eq!(
            "fd00:1::2/129".parse::<IpCidr>(),
            Err("\"129\" is not a prefix length (0..=128)".to_string())
        );
        assert_eq!(
            "10.0.0.1/32".parse(),
            Ok(IpCidr::V4(Cidr {
                addr: Ipv4Addr::new(10, 0, 0, 1),
                prefix: Some(32)
            }))
        );
        assert!("10.0.0.1/33".parse::<IpCidr>().is_err());
    }
}
