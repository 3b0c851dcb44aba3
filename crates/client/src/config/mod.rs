//! What a stack needs to start, as one [`StackConfig`], and its reader of
//! the environment ([`StackConfig::from_env`], the shim's and the C API's).
//! The other readers turn their own syntax into the same type: the
//! command-line flags (`cmdline::StackOpts::config`) and the daemon's
//! configuration file (crate `service`).
//!
//! A reader refuses a bad value with a [`ConfigError`], one line that
//! names the variable, flag or key and says what it expects.

use core::net::{Ipv4Addr, Ipv6Addr};
use core::time::Duration;
use std::path::PathBuf;

use crate::{CcKind, Driver, EngineConfig, PollPolicy, StackBuilder, TxPath};

mod env;

/// The time an adaptive engine spins without work before it sleeps, in
/// microseconds, when nothing else is configured (50 µs).
pub const IDLE_US_DEFAULT: u64 = 50;

/// How a stack starts: service mode (join a daemon) when `service` is set,
/// else embedded or inline mode on `iface` with `ip`/`prefix`. Every field
/// but those three has a default ([`StackConfig::default`]); `None` in an
/// optional setting means the [`StackBuilder`]'s default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackConfig {
    /// Service mode: the control socket of a `corestack run` daemon
    /// (`CORESTACK_SOCKET`); then the daemon's settings apply and the
    /// fields below are not used. Default none.
    pub service: Option<PathBuf>,
    /// The interface to drive (`CORESTACK_IFACE`, `--iface`, `iface`);
    /// required in embedded and inline mode.
    pub iface: String,
    /// The port driver (`CORESTACK_DRIVER`, `--driver`, `driver`); default
    /// af_xdp.
    pub driver: Driver,
    /// corestack's IPv4 address (`CORESTACK_IP`, `--ip`, `ip`); required.
    pub ip: Ipv4Addr,
    /// The IPv4 subnet's prefix length, bits (0..=32).
    pub prefix: u8,
    /// The IPv4 next hop beyond the subnet (`CORESTACK_GATEWAY`,
    /// `--gateway`, `gateway`); default none.
    pub gateway: Option<Ipv4Addr>,
    /// corestack's global (or unique local) IPv6 address and its prefix
    /// length in bits (`CORESTACK_IP6`, an IPv6 `--ip`, `ip`); turns IPv6
    /// on, with a link-local address from the MAC. Default none.
    pub ip6: Option<(Ipv6Addr, u8)>,
    /// The IPv6 default router, usually its link-local address
    /// (`CORESTACK_GATEWAY6`, an IPv6 `--gateway`, `gateway`); default none.
    pub gateway6: Option<Ipv6Addr>,
    /// Inline mode: no engine thread, threads that wait run the engine
    /// (`CORESTACK_INLINE=1`, `--mode inline`); default false (embedded).
    pub inline: bool,
    /// Engines, one per NIC queue (`CORESTACK_CORES`, `--cores`, `cores`),
    /// 1..=255; default 1.
    pub engines: usize,
    /// CPUs for embedded mode's engine threads, engine i on entry i mod the
    /// length (`--cpus`, `cpus`); empty (the default): `CORESTACK_ENGINE_CPUS`
    /// or `CORESTACK_ENGINE_CPU` if set, else not pinned.
    pub engine_cpus: Vec<usize>,
    /// How the engine waits for work (`CORESTACK_POLL`, `--poll`,
    /// `polling.policy`); default adaptive.
    pub poll: PollPolicy,
    /// Adaptive polling: time without work before the engine sleeps, in
    /// microseconds (`--idle-us`, `polling.idle_us`); default
    /// [`IDLE_US_DEFAULT`].
    pub idle_us: u64,
    /// How an af_xdp port transmits (`--af-xdp-tx`); None:
    /// `CORESTACK_AF_XDP_TX`, else auto.
    pub af_xdp_tx: Option<TxPath>,
    /// Each connection's RX and TX ring when it starts, in bytes
    /// (`--ring-bytes`, `ring_bytes`); None: 256 KiB.
    pub ring_bytes: Option<usize>,
    /// The most a ring grows to, in bytes (`--ring-max-bytes`,
    /// `ring_max_bytes`); None: 8 MiB.
    pub ring_max_bytes: Option<usize>,
    /// The most sockets the engine holds (`--max-sockets`); None: 1 000 000.
    pub max_sockets: Option<usize>,
    /// TCP congestion control of every connection (`--cc`, `congestion`);
    /// None: the host's (`net.ipv4.tcp_congestion_control`) when corestack
    /// has it, else cubic.
    pub congestion: Option<CcKind>,
}

impl Default for StackConfig {
    /// No interface and no address yet (0.0.0.0/0); every other setting at
    /// its default.
    fn default() -> StackConfig {
        StackConfig {
            service: None,
            iface: String::new(),
            driver: Driver::AfXdp,
            ip: Ipv4Addr::UNSPECIFIED,
            prefix: 0,
            gateway: None,
            ip6: None,
            gateway6: None,
            inline: false,
            engines: 1,
            engine_cpus: Vec::new(),
            poll: PollPolicy::Adaptive,
            idle_us: IDLE_US_DEFAULT,
            af_xdp_tx: None,
            ring_bytes: None,
            ring_max_bytes: None,
            max_sockets: None,
            congestion: None,
        }
    }
}

/// A value a reader refused: one line naming the variable, flag or key
/// and what it expects (`CORESTACK_CORES="0" is not a number of engines
/// from 1 to 255`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable, flag or key (`CORESTACK_IP`, `--ip`, `ip`).
    pub name: String,
    /// The whole message, which names it.
    pub message: String,
}

impl ConfigError {
    /// A refusal of `name` with `message` (which should name it).
    pub fn new(name: &str, message: String) -> ConfigError {
        ConfigError {
            name: name.to_string(),
            message,
        }
    }
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

impl From<ConfigError> for std::io::Error {
    fn from(e: ConfigError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.message)
    }
}

impl StackConfig {
    /// True in service mode (a daemon's control socket is set).
    pub fn is_service(&self) -> bool {
        self.service.is_some()
    }

    /// `inline` or `embedded` (`service` in service mode), for messages.
    pub fn mode_name(&self) -> &'static str {
        match (self.is_service(), self.inline) {
            (true, _) => "service",
            (false, true) => "inline",
            (false, false) => "embedded",
        }
    }

    /// The time an idle engine spins before it sleeps, as
    /// [`StackBuilder::idle_sleep`] takes it: `Some(idle_us)` (adaptive),
    /// None (busy) or zero (interrupt).
    pub fn idle_sleep(&self) -> Option<Duration> {
        match self.poll {
            PollPolicy::Adaptive => Some(Duration::from_micros(self.idle_us)),
            PollPolicy::Busy => None,
            PollPolicy::Interrupt => Some(Duration::ZERO),
        }
    }

    /// The engine's settings for this configuration, as a daemon that
    /// runs its own engines takes them: the addresses (IPv6, when
    /// configured, with the link-local address left to come from the
    /// port's MAC), the ring sizes, the socket limit and the congestion
    /// control (DCTCP turns ECN on, RFC 8257 §3); the rest at
    /// [`EngineConfig::default`].
    pub fn engine_config(&self) -> EngineConfig {
        let mut e = EngineConfig {
            ip: self.ip,
            prefix_len: self.prefix,
            gateway: self.gateway,
            ..EngineConfig::default()
        };
        if self.ip6.is_some() || self.gateway6.is_some() {
            e.ipv6 = Some(engine::Ipv6Config {
                global: self.ip6,
                gateway: self.gateway6,
                ..engine::Ipv6Config::default()
            });
        }
        if let Some(n) = self.ring_bytes {
            e.ring_bytes = n;
        }
        if let Some(n) = self.ring_max_bytes {
            e.ring_max_bytes = n;
        }
        if let Some(n) = self.max_sockets {
            e.max_sockets = n;
        }
        e.tcp.cc = self.congestion.unwrap_or_else(CcKind::system_default);
        if e.tcp.cc == CcKind::Dctcp {
            e.tcp.ecn = true;
        }
        e
    }

    /// A builder with these settings; the caller may add what only it
    /// knows (wake-up eventfds, a fork's ticket) and starts it. Service
    /// mode: a builder that joins the daemon at `service`.
    pub fn builder(&self) -> StackBuilder {
        let b = crate::Stack::builder();
        if let Some(path) = &self.service {
            return b.service(path);
        }
        let mut b = b
            .driver(self.driver)
            .iface(&self.iface)
            .ip(self.ip, self.prefix)
            .inline(self.inline)
            .engines(self.engines)
            .idle_sleep(self.idle_sleep());
        if let Some(g) = self.gateway {
            b = b.gateway(g);
        }
        if let Some((a, p)) = self.ip6 {
            b = b.ip6(a, p);
        }
        if let Some(g) = self.gateway6 {
            b = b.gateway6(g);
        }
        if !self.engine_cpus.is_empty() {
            b = b.engine_cpus(self.engine_cpus.clone());
        }
        if let Some(tx) = self.af_xdp_tx {
            b = b.af_xdp_tx(tx);
        }
        if let Some(n) = self.ring_bytes {
            b = b.ring_bytes(n);
        }
        if let Some(n) = self.ring_max_bytes {
            b = b.ring_max_bytes(n);
        }
        if let Some(n) = self.max_sockets {
            b = b.max_sockets(n);
        }
        if let Some(cc) = self.congestion {
            b = b.congestion(cc);
        }
        b
    }
}
