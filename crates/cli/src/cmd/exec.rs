//! `corestack exec`: runs an unmodified program on corestack through the sockets shim
//! (`libcorestack_preload.so`, LD_PRELOAD).
//!
//! Embedded mode (`--iface IF --ip ADDR/PREFIX`): the program's process starts its own engine
//! on the interface the first time one of its sockets goes to corestack. Service mode
//! (`--socket PATH`) joins a `corestack run` daemon: its sockets live on the daemon's engine.
//!
//! The shim is `CORESTACK_PRELOAD` if set, else `libcorestack_preload.so` next to this binary.
//! It is added to LD_PRELOAD (kept in front of whatever the environment already preloads), the
//! CORESTACK_* variables are set, and this process is replaced by the program (exec), so its
//! pid, signals and exit status are the program's own.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::net::Cidr;
use corestack::Driver;

/// `exec` options.
#[derive(Args, Debug)]
pub struct Exec {
    /// Interface corestack drives (embedded mode).
    #[arg(long, value_name = "IF", requires = "ip", conflicts_with = "socket")]
    iface: Option<String>,
    /// corestack's IPv4 address and prefix, e.g. 10.77.1.2/24 (embedded mode).
    #[arg(long, value_name = "ADDR/PREFIX", requires = "iface")]
    ip: Option<Cidr>,
    /// Port driver (embedded mode).
    #[arg(long, value_enum, default_value_t = Driver::AfXdp)]
    driver: Driver,
    /// Default gateway for destinations off the subnet (embedded mode).
    #[arg(long, value_name = "ADDR")]
    gateway: Option<Ipv4Addr>,
    /// Inline mode: no engine thread; the program's waiting threads run the engine.
    #[arg(long)]
    inline: bool,
    /// Service mode: the control socket of a `corestack run` daemon.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    command: Vec<OsString>,
}

/// The shim: `CORESTACK_PRELOAD`, else `libcorestack_preload.so` beside this executable.
fn preload_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CORESTACK_PRELOAD").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "CORESTACK_PRELOAD={} does not exist: build it with `cargo build --release`",
                p.display()
            );
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("finding the corestack executable")?;
    let dir = exe
        .parent()
        .context("the corestack executable has no directory")?;
    let p = dir.join("libcorestack_preload.so");
    if !p.is_file() {
        bail!(
            "{} not found: build the workspace (`cargo build --release` builds the shim next to corestack) or set CORESTACK_PRELOAD",
            p.display()
        );
    }
    Ok(p)
}

impl Exec {
    pub fn run(self) -> Result<()> {
        let shim = preload_path()?;
        let (program, args) = self
            .command
            .split_first()
            .context("give the program to run after `--`")?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        let mut preload = OsString::from(&shim);
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
            preload.push(":");
            preload.push(old);
        }
        cmd.env("LD_PRELOAD", preload);
        match (&self.iface, &self.ip, &self.socket) {
            (Some(iface), Some(ip), None) => {
                let prefix = ip
                    .prefix
                    .context("--ip needs a prefix length, e.g. 10.77.1.2/24")?;
                cmd.env("CORESTACK_IFACE", iface)
                    .env("CORESTACK_IP", format!("{}/{prefix}", ip.addr))
                    .env_remove("CORESTACK_SOCKET")
                    .env("CORESTACK_DRIVER", self.driver.name())
                    .env("CORESTACK_INLINE", if self.inline { "1" } else { "0" });
                match self.gateway {
                    Some(g) => cmd.env("CORESTACK_GATEWAY", g.to_string()),
                    None => cmd.env_remove("CORESTACK_GATEWAY"),
                };
            }
            (None, None, Some(path)) => {
                cmd.env("CORESTACK_SOCKET", path)
                    .env_remove("CORESTACK_IFACE");
            }
            _ => bail!(
                "give --iface IF --ip ADDR/PREFIX (embedded mode) or --socket PATH (service mode)"
            ),
        }
        let err = cmd.exec();
        Err(err).with_context(|| format!("cannot run {}", program.to_string_lossy()))
    }
}
