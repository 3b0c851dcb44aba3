//! `corestack run`'s configuration: a TOML file, command-line overrides, and
//! validation into the values the daemon uses.
//!
//! ```toml
//! iface = "veth1"            # required unless given on the command line
//! ip = ["10.0.0.2/24", "fd00::2/64"]  # ADDR/PREFIX, one per family; IPv4 required
//! gateway = ["10.0.0.1", "fe80::1"]   # optional, one per family (one string: one address)
//! driver = "af_xdp"          # af_xdp | tap
//! cores = 1                  # engines, one thread and NIC queue each (1..=64)
//! socket = "/run/corestack/ctl.sock"
//! ring_bytes = 262144        # per-connection ring size at the start, power of two, 4 KiB..16 MiB
//! ring_max_bytes = 8388608   # the most a ring grows to (auto-tuning), ring_bytes..16 MiB
//! buffer_growth_limit = 268435456  # ring growth allowed per application, bytes
//! max_sockets_per_app = 1024
//! max_apps = 256             # processes at once (a fork-per-connection server: one per connection)
//! congestion = "cubic"       # newreno | cubic | dctcp | bbr (default: the host's)
//! [polling]
//! policy = "adaptive"        # busy | adaptive | interrupt
//! idle_us = 50               # adaptive: idle time before sleeping
//! [ports]
//! privileged_uids = [1000]   # may bind ports < 1024 besides root
//! privileged_gids = []
//! ```
//!
//! Every key is optional (an empty file is the defaults) and unknown keys are
//! errors, so a typo never goes unnoticed. Order of precedence: command line
//! ([`Overrides`]), then the file, then the defaults. Every error is a
//! [`ConfigError`] whose message is one line that says what to fix.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use engine::tcp::CcKind;
pub use engine::PollPolicy;
pub use nic::Driver;
use serde::Deserialize;
use thiserror::Error;

/// The smallest `ring_bytes`, in bytes (4 KiB).
pub const RING_BYTES_MIN: u32 = 4 << 10;
/// The largest `ring_bytes`, in bytes (16 MiB).
pub const RING_BYTES_MAX: u32 = 16 << 20;
/// The largest `max_sockets_per_app`.
pub const MAX_SOCKETS_PER_APP_LIMIT: u32 = 1 << 16;
/// The largest `max_apps`.
pub const MAX_APPS_LIMIT: u32 = 4096;
/// The largest `polling.idle_us`, in microseconds (1 s).
pub const IDLE_US_MAX: u64 = 1_000_000;
/// The most engines the daemon runs (`cores`). Each application's welcome
/// carries its segment and one doorbell per engine in one `SCM_RIGHTS`
/// message (at most `appif::ctl::MAX_FDS`, 128, descriptors), and the
/// engines' handoff mesh reserves N·(N-1) rings of
/// `engine::steer::HANDOFF_RING_BYTES` (4 MiB) of address space, touched as
/// used: 16 GiB at 64 engines.
pub const CORES_SUPPORTED: u32 = 64;
const _: () = assert!((CORES_SUPPORTED as usize) < appif::ctl::MAX_FDS);

/// The longest interface name Linux accepts, in bytes (`IFNAMSIZ` - 1).
pub const IFNAME_MAX: usize = 15;
/// The longest Unix socket path, in bytes (`sizeof(sun_path)` - 1).
pub const SOCKET_PATH_MAX: usize = 107;

/// Why a configuration was refused: the file could not be read or parsed,
/// or a value is out of bounds. Each message is one line that names the key
/// and says what to write instead.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("reading config {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// TOML syntax, an unknown key, or a value of the wrong type.
    #[error("{} {}: {message}", origin(file.as_deref()), place(*line, quoted.as_deref()))]
    Syntax {
        /// The file; None for text parsed on its own.
        file: Option<PathBuf>,
        /// The line (from 1), when the parser could tell.
        line: Option<usize>,
        /// That line, trimmed and shortened to 60 characters.
        quoted: Option<String>,
        /// The parser's message, on one line.
        message: String,
    },
    /// No `iface`.
    #[error("no interface: set iface = \"veth1\" (say) in the config file or pass --iface")]
    NoIface,
    /// `iface` is longer than [`IFNAME_MAX`].
    #[error(
        "iface = \"{name}\" is too long: Linux interface names have at most {IFNAME_MAX} bytes"
    )]
    IfaceTooLong {
        /// The name given.
        name: String,
    },
    /// `iface` holds characters Linux refuses in interface names.
    #[error("iface = \"{name}\" is not an interface name (no '/', ':' or spaces); see `ip link`")]
    BadIface {
        /// The name given.
        name: String,
    },
    /// No `ip`.
    #[error("no address: set ip = \"10.0.0.2/24\" (say) in the config file or pass --ip")]
    NoIp,
    /// `ip` has an IPv6 address but no IPv4 one.
    #[error(
        "ip = \"{text}\" alone: corestack needs an IPv4 address too (no IPv6-only stack), \
         e.g. ip = [\"10.0.0.2/24\", \"{text}\"] or --ip 10.0.0.2/24 --ip {text}"
    )]
    NoIpv4 {
        /// The IPv6 value given.
        text: String,
    },
    /// Two addresses (or gateways) of one family.
    #[error(
        "{key} = [\"{first}\", \"{second}\"]: at most one {key} per family (IPv4, IPv6); remove one"
    )]
    TwoOfAFamily {
        /// `ip` or `gateway`.
        key: &'static str,
        /// The first value of the family.
        first: String,
        /// The second.
        second: String,
    },
    /// An IPv6 `ip` that is no global or unique local unicast address.
    #[error(
        "ip = \"{text}\" is not usable as the stack's IPv6 address (unspecified, loopback, \
         multicast, link-local or IPv4-mapped): choose one such as fd00::2/64 (the link-local \
         address comes from the MAC)"
    )]
    UnusableAddress6 {
        /// The value given.
        text: String,
    },
    /// An IPv6 `gateway` without an IPv6 `ip`.
    #[error(
        "gateway = \"{text}\" is IPv6 but the stack has no IPv6 address: add one to ip, \
         e.g. ip = [\"10.0.0.2/24\", \"fd00::2/64\"]"
    )]
    Gateway6WithoutIp6 {
        /// The value given.
        text: String,
    },
    /// `ip` has no `/PREFIX`.
    #[error("ip = \"{text}\" has no prefix length: write ADDR/PREFIX, e.g. \"{text}/24\"")]
    NoPrefix {
        /// The value given.
        text: String,
    },
    /// `ip`'s address part is not an IPv4 or IPv6 address.
    #[error(
        "ip = \"{text}\": \"{addr}\" is not an IPv4 or IPv6 address; write ADDR/PREFIX, \
         e.g. 10.0.0.2/24 or fd00::2/64"
    )]
    BadAddress {
        /// The value given.
        text: String,
        /// Its address part.
        addr: String,
    },
    /// `ip`'s prefix part is not 0 to 32 (IPv4) or 0 to 128 (IPv6).
    #[error(
        "ip = \"{text}\": \"{prefix}\" is not a prefix length (0 to 32 for IPv4, 0 to 128 \
         for IPv6), e.g. 10.0.0.2/24"
    )]
    BadPrefix {
        /// The value given.
        text: String,
        /// Its prefix part.
        prefix: String,
    },
    /// `ip` is unspecified, broadcast, multicast or loopback.
    #[error(
        "ip = \"{text}\" is not usable as the stack's address (unspecified, broadcast, \
         multicast or loopback): choose a unicast address such as 10.0.0.2/24"
    )]
    UnusableAddress {
        /// The value given.
        text: String,
    },
    /// `ip` is its subnet's network or broadcast address (prefixes up to /30;
    /// /31 and /32 have neither, RFC 3021).
    #[error(
        "ip = \"{text}\" is the {} address of its subnet: choose a host address inside it",
        if *network { "network" } else { "broadcast" }
    )]
    SubnetAddress {
        /// The value given.
        text: String,
        /// True for the network address, false for the broadcast address.
        network: bool,
    },
    /// `gateway` is not a unicast IPv4 or IPv6 address.
    #[error(
        "gateway = \"{text}\" is not a unicast IPv4 or IPv6 address (e.g. 10.0.0.1, \
         fe80::1); remove it if there is none"
    )]
    BadGateway {
        /// The value given.
        text: String,
    },
    /// `gateway` is the stack's own address.
    #[error("gateway = \"{text}\" is the stack's own address: give the router's address")]
    GatewayIsOwnAddress {
        /// The value given.
        text: String,
    },
    /// `gateway` is outside the stack's subnet (and, for IPv6, not
    /// link-local), so it cannot be reached.
    #[error("gateway = \"{text}\" is not in the stack's subnet {net}/{prefix}: fix gateway or ip's prefix")]
    GatewayOffSubnet {
        /// The value given.
        text: String,
        /// The stack's subnet (of the gateway's family).
        net: IpAddr,
        /// Its prefix length, bits.
        prefix: u8,
    },
    /// `cores = 0`.
    #[error("cores = 0: the engine needs at least one core; set cores = 1")]
    NoCores,
    /// More cores than [`CORES_SUPPORTED`].
    #[error(
        "cores = {cores}: the daemon runs at most {CORES_SUPPORTED} engines; set cores = 1..={CORES_SUPPORTED}"
    )]
    TooManyCores {
        /// The value given.
        cores: u32,
    },
    /// `cpus` is not a CPU list.
    #[error("cpus = \"{value}\": {why}; write CPUs as taskset -c does, e.g. cpus = \"2-3,6\"")]
    Cpus {
        /// What was written.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// An empty `socket` path.
    #[error(
        "socket is empty: set socket = \"{}\" or another path",
        appif::ctl::DEFAULT_SOCKET
    )]
    EmptySocket,
    /// A `socket` path longer than [`SOCKET_PATH_MAX`].
    #[error(
        "socket = \"{}\" is {len} bytes long: Unix socket paths have at most \
         {SOCKET_PATH_MAX}; choose a shorter path",
        path.display()
    )]
    SocketTooLong {
        /// The path given.
        path: PathBuf,
        /// Its length, bytes.
        len: usize,
    },
    /// `ring_bytes` is not a power of two in
    /// [`RING_BYTES_MIN`]..=[`RING_BYTES_MAX`].
    #[error(
        "ring_bytes = {value}: must be a power of two from {RING_BYTES_MIN} (4 KiB) to \
         {RING_BYTES_MAX} (16 MiB), e.g. 262144"
    )]
    RingBytes {
        /// The value given, bytes.
        value: u32,
    },
    /// `ring_max_bytes` is not a power of two in
    /// [`RING_BYTES_MIN`]..=[`RING_BYTES_MAX`].
    #[error(
        "ring_max_bytes = {value}: must be a power of two from {RING_BYTES_MIN} (4 KiB) to \
         {RING_BYTES_MAX} (16 MiB), e.g. 8388608"
    )]
    RingMaxBytes {
        /// The value given, bytes.
        value: u32,
    },
    /// `max_sockets_per_app` is not 1..=[`MAX_SOCKETS_PER_APP_LIMIT`].
    #[error("max_sockets_per_app = {value}: must be 1 to {MAX_SOCKETS_PER_APP_LIMIT}")]
    MaxSocketsPerApp {
        /// The value given.
        value: u32,
    },
    /// `max_apps` is not 1..=[`MAX_APPS_LIMIT`].
    #[error("max_apps = {value}: must be 1 to {MAX_APPS_LIMIT}")]
    MaxApps {
        /// The value given.
        value: u32,
    },
    /// `polling.idle_us` over [`IDLE_US_MAX`] with the adaptive policy.
    #[error(
        "polling.idle_us = {idle_us}: at most {IDLE_US_MAX} (1 s); for an engine that \
         never sleeps set policy = \"busy\""
    )]
    IdleTooLong {
        /// The value given, microseconds.
        idle_us: u64,
    },
}

/// Where a syntax error's text came from, for its message.
fn origin(file: Option<&Path>) -> String {
    file.map_or_else(|| "config".to_string(), |p| p.display().to_string())
}

/// Where in the text a syntax error is, for its message: ``line N (`text`)``.
fn place(line: Option<usize>, quoted: Option<&str>) -> String {
    match (line, quoted) {
        (Some(n), Some(q)) => format!("line {n} (`{q}`)"),
        (Some(n), None) => format!("line {n}"),
        (None, _) => "error".to_string(),
    }
}

/// `corestack run`'s configuration as written in the file (after
/// [`Config::apply`], with the command line's values). Unchecked: call
/// [`Config::validate`] before use.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Interface the engine drives (`--iface`); required in the end.
    pub iface: Option<String>,
    /// The stack's addresses and prefixes, `ADDR/PREFIX` each (`--ip`,
    /// repeated): one IPv4 (required in the end) and at most one IPv6
    /// (global or unique local). In the file one string or a list.
    #[serde(deserialize_with = "net::one_or_many")]
    pub ip: Vec<String>,
    /// Default gateways for destinations off the subnet, at most one per
    /// family (`--gateway`, repeated); an IPv6 one is link-local or inside
    /// the IPv6 prefix. In the file one string or a list.
    #[serde(deserialize_with = "net::one_or_many")]
    pub gateway: Vec<String>,
    /// Port driver (`--driver`); default af_xdp.
    pub driver: Driver,
    /// Engines (`--cores`), each with its own thread and NIC queue(s);
    /// default 1, at most [`CORES_SUPPORTED`].
    pub cores: u32,
    /// CPUs for the engine threads (`--cpus`), as `taskset -c` writes them
    /// (`"2-3,6"`): engine i runs on the i-th, cycling through the list;
    /// default none (where the scheduler puts them).
    pub cpus: Option<String>,
    /// Path of the control socket (`--socket`); default
    /// [`appif::ctl::DEFAULT_SOCKET`].
    pub socket: PathBuf,
    /// Size of each connection's RX and TX byte ring when it starts and the
    /// application asks for no size, in bytes: a power of two in
    /// [`RING_BYTES_MIN`]..=[`RING_BYTES_MAX`]; default 262144 (256 KiB).
    pub ring_bytes: u32,
    /// The most a ring grows to (receive-window auto-tuning, a send buffer
    /// of twice cwnd), in bytes: a power of two in
    /// [`RING_BYTES_MIN`]..=[`RING_BYTES_MAX`], and at least `ring_bytes`
    /// in effect (a smaller value means rings that do not grow); default 8388608 (8 MiB; the receive window stops
    /// at 6 MiB, Linux's default maximum). That much address space is
    /// reserved per ring; memory is used only as a ring grows.
    pub ring_max_bytes: u32,
    /// Ring memory one application may add by growing its rings beyond
    /// `ring_bytes`, in bytes; default 268435456 (256 MiB).
    pub buffer_growth_limit: u64,
    /// Most sockets one application may have open at once; default 1024.
    pub max_sockets_per_app: u32,
    /// Most applications connected at once; default 64.
    pub max_apps: u32,
    /// TCP congestion control of every connection; default: the host's
    /// (`net.ipv4.tcp_congestion_control`) when corestack has it, else cubic.
    pub congestion: CcKind,
    /// `[polling]`: how the engine waits for work.
    pub polling: Polling,
    /// `[ports]`: who may bind ports below 1024.
    pub ports: Ports,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            iface: None,
            ip: Vec::new(),
            gateway: Vec::new(),
            driver: Driver::AfXdp,
            cores: 1,
            cpus: None,
            socket: PathBuf::from(appif::ctl::DEFAULT_SOCKET),
            ring_bytes: 256 << 10,
            ring_max_bytes: 8 << 20,
            buffer_growth_limit: 256 << 20,
            max_sockets_per_app: 1024,
            max_apps: 256,
            congestion: CcKind::system_default(),
            polling: Polling::default(),
            ports: Ports::default(),
        }
    }
}

/// `[polling]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Polling {
    /// How the engine waits (`--poll`); default adaptive.
    pub policy: PollPolicy,
    /// Adaptive policy: time without work before the engine sleeps, in
    /// microseconds (`--idle-us`); default 50, at most [`IDLE_US_MAX`].
    pub idle_us: u64,
}

impl Default for Polling {
    fn default() -> Polling {
        Polling {
            policy: PollPolicy::Adaptive,
            idle_us: 50,
        }
    }
}

/// `[ports]`: besides root, who may bind TCP/UDP ports below 1024.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Ports {
    /// User ids allowed; default none.
    pub privileged_uids: Vec<u32>,
    /// Group ids (primary or supplementary) allowed; default none.
    pub privileged_gids: Vec<u32>,
}

/// Values from the command line; each `Some` replaces the file's value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--iface`.
    pub iface: Option<String>,
    /// `--ip`, `ADDR/PREFIX` each (once per family); empty: the file's.
    pub ip: Vec<String>,
    /// `--gateway` (once per family); empty: the file's.
    pub gateway: Vec<String>,
    /// `--driver`.
    pub driver: Option<Driver>,
    /// `--cores`.
    pub cores: Option<u32>,
    /// `--cpus`.
    pub cpus: Option<String>,
    /// `--socket`.
    pub socket: Option<PathBuf>,
    /// `--poll` (`polling.policy`).
    pub policy: Option<PollPolicy>,
    /// `--idle-us` (`polling.idle_us`), in microseconds.
    pub idle_us: Option<u64>,
}

/// How the engine waits for work, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Spin without pause.
    Busy,
    /// Spin; after `idle` without work, sleep on epoll over the NIC queue
    /// and the application doorbells.
    Adaptive {
        /// Time without work before sleeping.
        idle: Duration,
    },
    /// Sleep on epoll whenever there is no work.
    Interrupt,
}

/// A checked configuration, in the types the daemon uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validated {
    /// Interface the engine drives.
    pub iface: String,
    /// The stack's IPv4 address.
    pub ip: Ipv4Addr,
    /// Prefix length of the stack's subnet, in bits (0..=32).
    pub prefix: u8,
    /// Default gateway, inside the subnet and not `ip`.
    pub gateway: Option<Ipv4Addr>,
    /// The stack's global (or unique local) IPv6 address and its prefix
    /// length in bits; None: IPv4 only. The link-local address is derived
    /// from the interface's MAC (RFC 4291 appendix A).
    pub ip6: Option<(Ipv6Addr, u8)>,
    /// The IPv6 default router (link-local or inside `ip6`'s prefix).
    pub gateway6: Option<Ipv6Addr>,
    /// Port driver.
    pub driver: Driver,
    /// Engines, 1..=[`CORES_SUPPORTED`].
    pub cores: u32,
    /// CPUs for the engine threads (engine i on entry i mod the length);
    /// empty: not pinned.
    pub cpus: Vec<usize>,
    /// Path of the control socket (at most 107 bytes).
    pub socket: PathBuf,
    /// Default per-connection ring size at the start, in bytes (power of
    /// two, 4 KiB..=16 MiB).
    pub ring_bytes: u32,
    /// The most a ring grows to, in bytes (power of two, ring_bytes..=16 MiB).
    pub ring_max_bytes: u32,
    /// Ring growth allowed per application, in bytes.
    pub buffer_growth_limit: u64,
    /// Most sockets per application (1..=65536).
    pub max_sockets_per_app: u32,
    /// Most applications at once (1..=4096).
    pub max_apps: u32,
    /// TCP congestion control.
    pub congestion: CcKind,
    /// How the engine waits for work.
    pub policy: Policy,
    /// Users besides root who may bind ports below 1024.
    pub privileged_uids: Vec<u32>,
    /// Groups whose members may bind ports below 1024.
    pub privileged_gids: Vec<u32>,
}

impl Validated {
    /// True when a process with user id `uid` and groups `gids` (its primary
    /// and supplementary group ids, e.g. from `SO_PEERCRED` and
    /// `appif::ctl::supplementary_gids`) may bind ports below 1024: root
    /// always, else a listed uid or a member of a listed group.
    pub fn may_bind_privileged(&self, uid: u32, gids: &[u32]) -> bool {
        uid == 0
            || self.privileged_uids.contains(&uid)
            || gids.iter().any(|g| self.privileged_gids.contains(g))
    }
}

impl Config {
    /// Parses a configuration from TOML text.
    ///
    /// Errors: [`ConfigError::Syntax`], ``config line N (`the line`): <what
    /// is wrong>``, for a syntax error, an unknown key or a value of the
    /// wrong type.
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        parse(text, None)
    }

    /// Reads and parses the configuration file at `path`.
    ///
    /// Errors: [`ConfigError::Read`] (`reading config <path>`, the I/O error
    /// as its source) or [`ConfigError::Syntax`] naming the file, ``<path>
    /// line N (`the line`): <what is wrong>``.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        parse(&text, Some(path))
    }

    /// Replaces every value that the command line gave.
    pub fn apply(&mut self, o: &Overrides) {
        if let Some(v) = &o.iface {
            self.iface = Some(v.clone());
        }
        if !o.ip.is_empty() {
            self.ip = o.ip.clone();
        }
        if !o.gateway.is_empty() {
            self.gateway = o.gateway.clone();
        }
        if let Some(v) = o.driver {
            self.driver = v;
        }
        if let Some(v) = o.cores {
            self.cores = v;
        }
        if let Some(v) = &o.cpus {
            self.cpus = Some(v.clone());
        }
        if let Some(v) = &o.socket {
            self.socket = v.clone();
        }
        if let Some(v) = o.policy {
            self.polling.policy = v;
        }
        if let Some(v) = o.idle_us {
            self.polling.idle_us = v;
        }
    }

    /// Checks every value and converts it for the daemon.
    ///
    /// Errors: the first problem found; its message is one line that names
    /// the key and says what to write instead.
    pub fn validate(&self) -> Result<Validated, ConfigError> {
        let iface = validate_iface(self.iface.as_deref())?;
        let net = net::validate(&self.ip, &self.gateway)?;
        if self.cores == 0 {
            return Err(ConfigError::NoCores);
        }
        if self.cores > CORES_SUPPORTED {
            return Err(ConfigError::TooManyCores { cores: self.cores });
        }
        let cpus = match &self.cpus {
            Some(text) => appif::parse_cpu_list(text).map_err(|why| ConfigError::Cpus {
                value: text.clone(),
                why,
            })?,
            None => Vec::new(),
        };
        let socket_len = self.socket.as_os_str().len();
        if socket_len == 0 {
            return Err(ConfigError::EmptySocket);
        }
        if socket_len > SOCKET_PATH_MAX {
            return Err(ConfigError::SocketTooLong {
                path: self.socket.clone(),
                len: socket_len,
            });
        }
        if !self.ring_bytes.is_power_of_two()
            || !(RING_BYTES_MIN..=RING_BYTES_MAX).contains(&self.ring_bytes)
        {
            return Err(ConfigError::RingBytes {
                value: self.ring_bytes,
            });
        }
        if !self.ring_max_bytes.is_power_of_two()
            || !(RING_BYTES_MIN..=RING_BYTES_MAX).contains(&self.ring_max_bytes)
        {
            return Err(ConfigError::RingMaxBytes {
                value: self.ring_max_bytes,
            });
        }
        if !(1..=MAX_SOCKETS_PER_APP_LIMIT).contains(&self.max_sockets_per_app) {
            return Err(ConfigError::MaxSocketsPerApp {
                value: self.max_sockets_per_app,
            });
        }
        if !(1..=MAX_APPS_LIMIT).contains(&self.max_apps) {
            return Err(ConfigError::MaxApps {
                value: self.max_apps,
            });
        }
        let policy = match self.polling.policy {
            PollPolicy::Busy => Policy::Busy,
            PollPolicy::Interrupt => Policy::Interrupt,
            PollPolicy::Adaptive => {
                if self.polling.idle_us > IDLE_US_MAX {
                    return Err(ConfigError::IdleTooLong {
                        idle_us: self.polling.idle_us,
                    });
                }
                Policy::Adaptive {
                    idle: Duration::from_micros(self.polling.idle_us),
                }
            }
        };
        Ok(Validated {
            iface,
            ip: net.ip,
            prefix: net.prefix,
            gateway: net.gateway,
            ip6: net.ip6,
            gateway6: net.gateway6,
            driver: self.driver,
            cores: self.cores,
            cpus,
            socket: self.socket.clone(),
            ring_bytes: self.ring_bytes,
            ring_max_bytes: self.ring_max_bytes.max(self.ring_bytes),
            buffer_growth_limit: self.buffer_growth_limit,
            max_sockets_per_app: self.max_sockets_per_app,
            max_apps: self.max_apps,
            congestion: self.congestion,
            policy,
            privileged_uids: self.ports.privileged_uids.clone(),
            privileged_gids: self.ports.privileged_gids.clone(),
        })
    }
}

/// Parses TOML (from `file`, if any) into a `Config`; on error, where
/// (the line and its text, when known) and the message, on one line.
fn parse(text: &str, file: Option<&Path>) -> Result<Config, ConfigError> {
    toml::from_str(text).map_err(|e: toml::de::Error| {
        let (line, quoted) = match e.span() {
            Some(r) => {
                let start = r.start.min(text.len());
                let n = text.as_bytes()[..start]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count();
                let quoted = text
                    .lines()
                    .nth(n)
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(|l| shorten(l, 60));
                (Some(n + 1), quoted)
            }
            None => (None, None),
        };
        ConfigError::Syntax {
            file: file.map(Path::to_path_buf),
            line,
            quoted,
            message: e.message().trim().replace('\n', " "),
        }
    })
}

/// `s` cut to at most `max` characters, with "..." when cut.
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

fn validate_iface(iface: Option<&str>) -> Result<String, ConfigError> {
    let Some(name) = iface.filter(|s| !s.is_empty()) else {
        return Err(ConfigError::NoIface);
    };
    if name.len() > IFNAME_MAX {
        return Err(ConfigError::IfaceTooLong { name: name.into() });
    }
    if name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        return Err(ConfigError::BadIface { name: name.into() });
    }
    Ok(name.to_string())
}

mod net;
mod stack;

#[cfg(test)]
mod tests;
