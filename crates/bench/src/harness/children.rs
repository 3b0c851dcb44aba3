//! Child processes of the commands that build their own namespaces (`demo`,
//! `bench stream-matrix`): `corestack` ([`super::this_program`]) run inside a namespace, pinned
//! to a CPU, its stderr in a log file that is removed afterwards.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use netns::{ChildGuard, Netns, NextLine};
use serde_json::Value;

use crate::report::upper_median;
use cmdline::Interrupted;

/// How long a server may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A directory for child logs, removed on drop.
pub struct LogDir(PathBuf);

impl LogDir {
    /// `/tmp/corestack-<what>-<pid>`.
    pub fn new(what: &str) -> Result<LogDir> {
        let dir = std::env::temp_dir().join(format!("corestack-{what}-{}", std::process::id()));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(LogDir(dir))
    }

    /// The path of log `name` in the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for LogDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The last non-empty line of a log, for error messages.
pub fn last_line(path: &Path) -> String {
    fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// Runs the program `exe` with `args` in `ns`, pinned to `cpu` if given; stdout read by lines,
/// stderr into `log`.
pub fn spawn(
    ns: &Netns,
    cpu: Option<&str>,
    exe: &Path,
    args: &[&str],
    log: &Path,
) -> Result<ChildGuard> {
    spawn_env(ns, cpu, exe, args, log, &[])
}

/// [`spawn`] with extra environment variables.
pub fn spawn_env(
    ns: &Netns,
    cpu: Option<&str>,
    exe: &Path,
    args: &[&str],
    log: &Path,
    env: &[(&str, &str)],
) -> Result<ChildGuard> {
    let mut cmd = match cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpu, "ip", "netns", "exec", ns.name()])
                .arg(exe);
            c
        }
        None => ns.exec(exe),
    };
    cmd.args(args).stdin(Stdio::null());
    cmd.env_remove("CORESTACK_SOCKET");
    if let Some(list) = super::engine_cpus() {
        cmd.env("CORESTACK_ENGINE_CPUS", list);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let err = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stderr(err);
    Ok(ChildGuard::spawn_lines(&mut cmd)?)
}

/// Waits for a line containing `needle` on the child's stdout (`on_log`: in its log), polling
/// `stop`.
pub fn wait_ready(
    child: &mut ChildGuard,
    needle: &str,
    log: &Path,
    on_log: bool,
    stop: &AtomicBool,
) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        if on_log {
            if fs::read_to_string(log).unwrap_or_default().contains(needle) {
                return Ok(());
            }
            if child.wait_timeout(Duration::from_millis(50))?.is_some() {
                bail!("it exited: {}", last_line(log));
            }
        } else {
            match child.next_line(Duration::from_millis(100)) {
                NextLine::Line(l) if l.contains(needle) => return Ok(()),
                NextLine::Line(_) | NextLine::Pending => {}
                NextLine::Closed => bail!("it exited: {}", last_line(log)),
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "not ready within {} s: {}",
                READY_TIMEOUT.as_secs(),
                last_line(log)
            );
        }
    }
}

/// The number `key` of a child's JSON report `v`; an error naming `key` when it is missing or
/// not a number.
pub fn json_f64(v: &Value, key: &str) -> Result<f64> {
    v.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| anyhow!("the JSON report lacks the number {key}"))
}

/// Runs a client to completion (bounded by `timeout`, polling `stop`); returns its last JSON
/// line.
pub fn run_client(
    mut child: ChildGuard,
    log: &Path,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<Value> {
    let deadline = Instant::now() + timeout;
    let mut json = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        match child.next_line(Duration::from_millis(100)) {
            NextLine::Line(l) if l.starts_with('{') => json = Some(l),
            NextLine::Line(_) | NextLine::Pending => {}
            NextLine::Closed => break,
        }
        if Instant::now() >= deadline {
            bail!("the client did not finish within {} s", timeout.as_secs());
        }
    }
    let status = child.wait_timeout(Duration::from_secs(5))?;
    match (status, json) {
        (Some(s), Some(line)) if s.success() => {
            serde_json::from_str(&line).context("parsing the client's JSON")
        }
        _ => bail!("the client failed: {}", last_line(log)),
    }
}

/// Two namespaces joined by two veth pairs (offloads off):
/// `c1 10.N.1.1/24 ── s1` (no kernel address: corestack's interface) and
/// `c2 10.N.2.1/24 ── s2 10.N.2.2/24` (Linux). Dropped last, after the children.
pub struct Topology {
    pub client: Netns,
    pub server: Netns,
}

impl Topology {
    /// Builds it with namespace name prefixes `client` and `server` and subnet octet `net`.
    pub fn build(client: &str, server: &str, net: u8) -> Result<Topology> {
        let client = Netns::new(client)?;
        let server = Netns::new(server)?;
        netns::veth_pair(&client, "c1", &server, "s1")?;
        netns::veth_pair(&client, "c2", &server, "s2")?;
        netns::addr_add(&client, "c1", &format!("10.{net}.1.1/24"))?;
        netns::addr_add(&client, "c2", &format!("10.{net}.2.1/24"))?;
        netns::addr_add(&server, "s2", &format!("10.{net}.2.2/24"))?;
        Ok(Topology { client, server })
    }

    /// IPv6 beside the IPv4 addresses of [`Topology::build`] (subnet octet `net`): fd00:`net`:1::1
    /// on `c1` (corestack takes fd00:`net`:1::2 on `s1`, whose kernel end gets no IPv6),
    /// fd00:`net`:2::1 on `c2` and fd00:`net`:2::2 on `s2`, all /64, without Duplicate Address
    /// Detection (`nodad`). Unique local addresses (RFC 4193), only inside these namespaces.
    pub fn add_ipv6(&self, net: u8) -> Result<()> {
        let sysctl = |ns: &Netns, setting: &str| {
            ns.run("sysctl", &["-qw", setting])
                .map(drop)
                .with_context(|| format!("sysctl {setting} in {}", ns.name()))
        };
        sysctl(&self.server, "net.ipv6.conf.s1.disable_ipv6=1")?;
        for (ns, dev, addr) in [
            (&self.client, "c1", format!("fd00:{net}:1::1/64")),
            (&self.client, "c2", format!("fd00:{net}:2::1/64")),
            (&self.server, "s2", format!("fd00:{net}:2::2/64")),
        ] {
            sysctl(ns, &format!("net.ipv6.conf.{dev}.disable_ipv6=0"))?;
            ns.run("ip", &["-6", "addr", "add", &addr, "dev", dev, "nodad"])
                .with_context(|| format!("adding {addr} to {dev} in {}", ns.name()))?;
        }
        Ok(())
    }
}

/// One ping-pong result (a subset of `bench pingpong --json`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Latency {
    /// Median round trip, µs.
    pub p50_us: f64,
    /// 99th percentile round trip, µs.
    pub p99_us: f64,
    /// Round trips per second.
    pub per_s: f64,
}

impl Latency {
    /// The upper median of each figure over several runs (a measured value each).
    pub fn median(runs: &[Latency]) -> Latency {
        let med = |f: fn(&Latency) -> f64| upper_median(&runs.iter().map(f).collect::<Vec<_>>());
        Latency {
            p50_us: med(|l| l.p50_us),
            p99_us: med(|l| l.p99_us),
            per_s: med(|l| l.per_s),
        }
    }

    /// Reads it from `bench pingpong --json`'s object.
    pub fn from_json(v: &Value) -> Result<Latency> {
        let f = |k: &str| json_f64(v, k);
        Ok(Latency {
            p50_us: f("p50_us")?,
            p99_us: f("p99_us")?,
            per_s: f("round_trips_per_s")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_f64_takes_a_number_and_names_a_missing_or_wrong_key() {
        let v: Value = serde_json::json!({"p50_us": 12.5, "runs": 3, "note": "x"});
        assert_eq!(json_f64(&v, "p50_us").unwrap(), 12.5);
        assert_eq!(json_f64(&v, "runs").unwrap(), 3.0);
        for key in ["p99_us", "note"] {
            let e = json_f64(&v, key).unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        }
    }
}
