//! `corestack run`: the daemon (service mode). Flags and the configuration
//! file become a [`service::Validated`] configuration; the `service` crate
//! does the rest.

use anyhow::Result;
use service::config::{Config, Driver, Overrides, PollPolicy};
use service::{ControlSocket, RunError};
use std::path::PathBuf;

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
    /// The stack's address, ADDR/PREFIX, IPv4 (required) or IPv6 (optional): once per
    /// family, e.g. --ip 10.0.0.2/24 --ip fd00::2/64 (overrides the config file's list).
    #[arg(long, value_name = "ADDR/PREFIX")]
    ip: Vec<String>,
    /// Default gateway, IPv4 or IPv6 (link-local or inside the IPv6 prefix): once per family
    /// (overrides the config file's list).
    #[arg(long, value_name = "ADDR")]
    gateway: Vec<String>,
    /// Port driver.
    #[arg(long, value_enum)]
    driver: Option<Driver>,
    /// Engines, each on its own thread and NIC queue(s) (1..=64; AF_XDP: the interface
    /// needs as many queues, TAP: a multi_queue tap).
    #[arg(long)]
    cores: Option<u32>,
    /// CPUs for the engine threads, as `taskset -c` writes them (`2-3,6`): engine i runs on
    /// the i-th, cycling (overrides the config file's `cpus`).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Control socket path (default: CORESTACK_SOCKET, else /run/corestack/ctl.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Engine polling: busy (always poll), adaptive (sleep after --idle-us without work),
    /// interrupt (sleep whenever idle).
    #[arg(long, value_enum)]
    poll: Option<PollPolicy>,
    /// Adaptive polling: idle time before sleeping, in µs.
    #[arg(long)]
    idle_us: Option<u64>,
    /// Serve Prometheus metrics (`GET /metrics`) on this kernel TCP address, e.g.
    /// 127.0.0.1:9464, from a thread apart from the engine.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// The private daemon of the program with this pid, which `corestack exec` started and
    /// the shim moved to service mode (started by the shim, not by hand): detaches, waits for
    /// EOF on stdin, stops once the program and its processes are gone.
    #[arg(long, value_name = "PID", hide = true)]
    private_for: Option<u32>,
}

impl Run {
    pub fn run(self) -> Result<()> {
        if self.private_for.is_some() {
            if super::private::launched()? {
                return Ok(());
            }
            super::private::wait_for_release();
        }
        // A private daemon shares the program's stderr: warnings and errors only.
        let level = if self.private_for.is_some() {
            "warn"
        } else {
            "info"
        };
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
            )
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init();
        let mut cfg = match &self.config {
            Some(p) => Config::load(p)?,
            None => Config::default(),
        };
        cfg.apply(&Overrides {
            iface: self.iface,
            ip: self.ip,
            gateway: self.gateway,
            driver: self.driver,
            cores: self.cores,
            cpus: self.cpus,
            socket: self.socket.or_else(appif::ctl::socket_path_from_env),
            policy: self.poll,
            idle_us: self.idle_us,
        });
        let v = cfg.validate()?;
        let cfg_socket = v.socket.clone();
        let stop = cmdline::stop_flag()?;
        if let Some(pid) = self.private_for {
            super::private::watch(pid, stop.clone());
            let result = run_private(v, &stop);
            super::private::remove_dir(&cfg_socket);
            return result;
        }
        // The control socket first: a second daemon must say "already listens"
        // before it touches the interface.
        let control = ControlSocket::bind(&v.socket)?;
        let metrics = match self.metrics_listen {
            Some(addr) => {
                let m = crate::observe::http::MetricsServer::start(addr)?;
                if let Some(a) = m.addr() {
                    eprintln!("corestack daemon metrics at http://{a}/metrics");
                }
                Some(m)
            }
            None => None,
        };
        let result = service::run(v, control, &stop).map_err(|e| match e {
            // Setting up around an open port; what precedes it names the interface.
            RunError::Setup(e) => anyhow::Error::new(e).context("corestack run"),
            e => e.into(),
        });
        drop(metrics);
        result
    }
}

/// The private daemon's run (`--private-for`): the interface is opened again while the
/// kernel still holds the program's old AF_XDP sockets, for up to
/// [`super::private::OPEN_RETRY`].
fn run_private(v: service::Validated, stop: &std::sync::atomic::AtomicBool) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        let control = ControlSocket::bind(&v.socket)?;
        match service::run(v.clone(), control, stop) {
            Err(RunError::Open { .. }) | Err(RunError::NoInterface { .. })
                if start.elapsed() < super::private::OPEN_RETRY
                    && !stop.load(std::sync::atomic::Ordering::Relaxed) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            r => {
                return r.map_err(|e| anyhow::Error::new(e).context("corestack run --private-for"))
            }
        }
    }
}
