//! `corestack run`: the daemon (service mode). See the `service` crate.

use anyhow::{anyhow, bail, Context, Result};
use engine::time::Instant;
use engine::EngineConfig;
use service::config::{Config, Congestion, Driver, Overrides, PolicyKind};
use service::{bind_control, Host};
use std::path::{Path, PathBuf};

/// Run the corestack daemon: own the interface, serve applications over shared memory.
///
/// Applications find it through the control socket (default
/// /run/corestack/ctl.sock, or CORESTACK_SOCKET). Stops on SIGTERM or SIGINT,
/// resetting every connection.
#[derive(clap::Args, Debug)]
pub struct Run {
    /// Interface to drive (overrides the config file).
    #[arg(long)]
    iface: Option<String>,
    /// The stack's address, ADDR/PREFIX (overrides the config file).
    #[arg(long)]
    ip: Option<String>,
    /// Default gateway.
    #[arg(long)]
    gateway: Option<String>,
    /// Port driver.
    #[arg(long, value_enum)]
    driver: Option<Driver>,
    /// Engine cores (only 1 is supported).
    #[arg(long)]
    cores: Option<u32>,
    /// TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Control socket path (default: CORESTACK_SOCKET, else /run/corestack/ctl.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Engine polling: busy (always poll), adaptive (sleep after --idle-us without work),
    /// interrupt (sleep whenever idle).
    #[arg(long, value_enum)]
    poll: Option<PolicyKind>,
    /// Adaptive polling: idle time before sleeping, in µs.
    #[arg(long)]
    idle_us: Option<u64>,
}

impl Run {
    pub fn run(self) -> Result<()> {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init();
        let mut cfg = match &self.config {
            Some(p) => Config::load(p)?,
            None => Config::default(),
        };
        cfg.apply(&Overrides {
            iface: self.iface.clone(),
            ip: self.ip.clone(),
            gateway: self.gateway.clone(),
            driver: self.driver,
            cores: self.cores,
            socket: self
                .socket
                .clone()
                .or_else(appif::ctl::socket_path_from_env),
            policy: self.poll,
            idle_us: self.idle_us,
        });
        let v = cfg.validate()?;
        let mut ecfg = EngineConfig {
            ip: v.ip,
            prefix_len: v.prefix,
            gateway: v.gateway,
            ring_bytes: v.ring_bytes as usize,
            ring_max_bytes: v.ring_max_bytes as usize,
            buffer_growth_limit: usize::try_from(v.buffer_growth_limit).unwrap_or(usize::MAX),
            // Every application can fill its own segment without starving the others.
            max_sockets: (v.max_apps as usize * v.max_sockets_per_app as usize)
                .clamp(4096, 1 << 18),
            ..EngineConfig::default()
        };
        ecfg.tcp.cc = match v.congestion {
            Congestion::Newreno => engine::tcp::CcKind::NewReno,
            Congestion::Cubic => engine::tcp::CcKind::Cubic,
            Congestion::Dctcp => {
                ecfg.tcp.ecn = true;
                engine::tcp::CcKind::Dctcp
            }
        };
        let stop = crate::net::stop_flag()?;
        // The control socket first: a second daemon must say "already listens"
        // before it touches the interface.
        let listener = bind_control(&v.socket)?;
        let _socket_file = SocketFile(v.socket.clone());
        let iface = v.iface.clone();
        match v.driver {
            Driver::AfXdp => {
                if !Path::new("/sys/class/net").join(&iface).exists() {
                    bail!(
                        "interface {iface} not found in this network namespace (check `ip link`)"
                    );
                }
                let tx_path = nic::af_xdp::TxPath::from_env()
                    .map_err(|e| anyhow::anyhow!("CORESTACK_AF_XDP_TX: {e}"))?;
                let xcfg = nic::af_xdp::AfXdpConfig {
                    ifname: iface.clone(),
                    steer_ip: Some(v.ip),
                    tx_path,
                    ..Default::default()
                };
                let port = nic::af_xdp::AfXdpPort::open(&xcfg)
                    .map_err(|e| explain(std::io::Error::from(e), &iface))?;
                if port.xdp_mode() == nic::af_xdp::XdpMode::Generic {
                    tracing::warn!("af_xdp on {iface} fell back to generic (copy) XDP mode");
                }
                serve(port, ecfg, v, listener, &stop)
            }
            Driver::Tap => {
                let port = nic::tap::TapPort::open(&iface)
                    .map_err(|e| explain(std::io::Error::from(e), &iface))?;
                serve(port, ecfg, v, listener, &stop)
            }
        }
        .context("corestack run")
    }
}

/// Removes the control socket file when the daemon ends, also on an error
/// after it was created.
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs the daemon on `port` until `stop`.
fn serve<P: nic::Port>(
    port: P,
    ecfg: EngineConfig,
    v: service::config::Validated,
    listener: std::os::unix::net::UnixListener,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    // The daemon takes commands from application segments, not from this channel.
    let (_unused, rx) = appif::spsc::channel(1);
    let engine = engine::Engine::new(
        port,
        ecfg,
        rx,
        std::sync::Arc::new(appif::notify::Notify::default()),
        Instant::now(),
    );
    Host::new(engine, v, listener)?.run(stop)
}

fn explain(e: std::io::Error, iface: &str) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        return anyhow!("needs root or CAP_NET_ADMIN to drive {iface}: run with sudo ({e})");
    }
    anyhow!("opening {iface}: {e}")
}
