//! Private network namespaces, veth pairs and child processes that clean up after themselves.
//!
//! Multi-queue veth pairs ([`veth_pair_queues`]) and per-queue counters
//! ([`Netns::rx_queue_packets`]) serve the one-engine-per-queue tests.
//!
//! Used by the integration tests, the benchmarks and `corestack demo`. Everything is done by
//! running `ip` and `ethtool` (iproute2, ethtool), so the calling process needs root (or
//! CAP_NET_ADMIN and CAP_SYS_ADMIN): [`Netns::new`] says so in one line instead of failing later.
//!
//! Cleanup rules:
//! - a [`Netns`] is deleted when dropped; before that every process still living in it is killed
//!   by PID (only processes inside a namespace this guard created, so only processes we started);
//!   veth, tap and bridge devices inside it go with it;
//! - a [`ChildGuard`] kills (SIGKILL, by PID) and reaps its child when dropped.
//!
//! Names are unique per process and call (`{prefix}{pid}n{counter}`) so parallel tests never
//! collide. Interface names are per namespace, so the same `if_a` can be reused across tests.
#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::fmt;
use std::io::{self, BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// What went wrong while setting up or tearing down namespaces.
#[derive(Debug)]
pub enum Error {
    /// The process lacks CAP_NET_ADMIN / CAP_SYS_ADMIN.
    NotRoot,
    /// A required program (`ip`, `ethtool`, ...) is not installed.
    ToolMissing(&'static str),
    /// A command exited with a failure status; `detail` is its stderr (first line).
    Command {
        /// The command line, for the message.
        cmd: String,
        /// What the command printed on stderr.
        detail: String,
    },
    /// A child did not print the expected line in time (see [`ChildGuard::wait_line`]).
    Timeout(String),
    /// Any other I/O error (spawning, reading a pipe).
    Io(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotRoot => write!(
                f,
                "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces: run with sudo"
            ),
            Error::ToolMissing(tool) => write!(
                f,
                "`{tool}` not found: install it (apt-get install iproute2 ethtool) or run scripts/setup.sh"
            ),
            Error::Command { cmd, detail } => write!(f, "`{cmd}` failed: {detail}"),
            Error::Timeout(what) => write!(f, "timed out: {what}"),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// Result of this crate's operations.
pub type Result<T> = std::result::Result<T, Error>;

/// CAP_NET_ADMIN's bit in the capability sets (linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;
/// CAP_SYS_ADMIN's bit, needed by `ip netns add` (it mounts a bind of the namespace).
const CAP_SYS_ADMIN: u32 = 21;

/// Returns `Ok` when this process may create namespaces and configure links, else
/// [`Error::NotRoot`]. Reads the effective capability set from `/proc/self/status`.
pub fn check_privileges() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let needed = (1u64 << CAP_NET_ADMIN) | (1u64 << CAP_SYS_ADMIN);
    if cap_eff & needed == needed {
        Ok(())
    } else {
        Err(Error::NotRoot)
    }
}

/// Runs `cmd` to completion and returns its stdout; a non-zero exit becomes
/// [`Error::Command`] with the command's stderr, a missing program [`Error::ToolMissing`].
pub fn run(cmd: &mut Command) -> Result<String> {
    let line = describe(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| spawn_error(cmd, e))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let detail = stderr
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string();
    let detail = if detail.is_empty() {
        format!("exit status {}", out.status)
    } else {
        detail
    };
    if detail.contains("Operation not permitted") {
        return Err(Error::NotRoot);
    }
    Err(Error::Command { cmd: line, detail })
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn spawn_error(cmd: &Command, e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::NotFound {
        match cmd.get_program().to_str() {
            Some("ip") => return Error::ToolMissing("ip"),
            Some("ethtool") => return Error::ToolMissing("ethtool"),
            _ => {}
        }
    }
    Error::Io(io::Error::new(
        e.kind(),
        format!("cannot run `{}`: {e}", describe(cmd)),
    ))
}

fn ip(args: &[&str]) -> Result<String> {
    run(Command::new("ip").args(args))
}

/// A network namespace created by this process; deleted (with its devices and every process
/// still inside it) on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Netns {
    /// Creates a namespace named `{prefix}{pid}n{counter}` and brings its loopback up.
    ///
    /// Errors: [`Error::NotRoot`] without the capabilities, [`Error::ToolMissing`] without
    /// `ip`, [`Error::Command`] if `ip netns add` fails.
    pub fn new(prefix: &str) -> Result<Netns> {
        check_privileges()?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}{}n{n}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.link_up("lo")?;
        Ok(ns)
    }

    /// The namespace's name (as `ip netns` knows it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs `program` inside the namespace (`ip netns exec NAME program`); add
    /// arguments and spawn it as usual. Wrap the child in a [`ChildGuard`].
    pub fn exec(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// Runs `program args` inside the namespace to completion and returns its stdout.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String> {
        run(self.exec(program).args(args))
    }

    /// Brings link `ifname` up.
    pub fn link_up(&self, ifname: &str) -> Result<()> {
        ip(&["-n", &self.name, "link", "set", ifname, "up"]).map(drop)
    }

    /// Turns off tx checksumming, TSO, GSO and GRO on `ifname`, so the link presents frames as a
    /// real NIC does (`ethtool -K IF tx off tso off gso off gro off`).
    pub fn offloads_off(&self, ifname: &str) -> Result<()> {
        self.run(
            "ethtool",
            &[
                "-K", ifname, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
            ],
        )
        .map(drop)
        .map_err(|e| match e {
            // `ip netns exec` reports: exec of "ethtool" failed: No such file or directory
            Error::Command { detail, .. } if detail.contains("exec of") => {
                Error::ToolMissing("ethtool")
            }
            other => other,
        })
    }

    /// Packets received per rx queue of `ifname` (index = queue), from `ethtool -S` run in the
    /// namespace: see [`parse_rx_queue_packets`] for the counter names understood. An empty
    /// vector when the driver has no per-queue counters.
    ///
    /// Errors: [`Error::ToolMissing`] without `ethtool`, [`Error::Command`] if `ethtool -S`
    /// fails (no such interface, or a driver without statistics).
    pub fn rx_queue_packets(&self, ifname: &str) -> Result<Vec<u64>> {
        let out = self.run("ethtool", &["-S", ifname]).map_err(|e| match e {
            Error::Command { detail, .. } if detail.contains("exec of") => {
                Error::ToolMissing("ethtool")
            }
            other => other,
        })?;
        Ok(parse_rx_queue_packets(&out))
    }

    /// Frames `ifname` dropped on transmit (`statistics/tx_dropped` in sysfs, read in the
    /// namespace): on a veth, frames its peer could not take (the peer's XDP ring, 256
    /// frames, was full).
    ///
    /// Errors: [`Error::Command`] when the interface has no such counter (it does not exist).
    pub fn tx_dropped(&self, ifname: &str) -> Result<u64> {
        let path = format!("/sys/class/net/{ifname}/statistics/tx_dropped");
        let out = self.run("cat", &[&path])?;
        out.trim().parse().map_err(|_| Error::Command {
            cmd: format!("cat {path}"),
            detail: format!("not a number: {out}"),
        })
    }

    /// PIDs of the processes whose network namespace is this one.
    pub fn pids(&self) -> Result<Vec<u32>> {
        let out = ip(&["netns", "pids", &self.name])?;
        Ok(out.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    fn kill_all(&self) {
        let own = std::process::id();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            let pids: Vec<u32> = match self.pids() {
                Ok(p) => p.into_iter().filter(|&p| p != own).collect(),
                Err(_) => return,
            };
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.kill_all();
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Creates a veth pair `if_a` (in `a`) <-> `if_b` (in `b`), turns offloads off on both ends
/// (see [`Netns::offloads_off`]) and brings both links up.
pub fn veth_pair(a: &Netns, if_a: &str, b: &Netns, if_b: &str) -> Result<()> {
    add_veth(a, if_a, b, if_b, &[])
}

/// Like [`veth_pair`], with `queues` rx and `queues` tx queues on both ends (`ip link add A
/// numtxqueues N numrxqueues N type veth peer name B numtxqueues N numrxqueues N`), as a
/// multi-queue NIC has. On veth a frame arrives on the peer's rx queue numbered like the
/// sender's tx queue, and native XDP on one end needs its rx queues >= the peer's tx queues
/// (else the attach fails with ENOSPC), which equal counts satisfy.
///
/// Errors: [`Error::Io`] (`InvalidInput`) when `queues` is 0 or above 4096 (the kernel's limit);
/// otherwise as [`veth_pair`].
pub fn veth_pair_queues(a: &Netns, if_a: &str, b: &Netns, if_b: &str, queues: u32) -> Result<()> {
    if !(1..=4096).contains(&queues) {
        return Err(Error::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a veth pair with {queues} queues: use 1 to 4096"),
        )));
    }
    let n = queues.to_string();
    add_veth(a, if_a, b, if_b, &["numtxqueues", &n, "numrxqueues", &n])
}

/// `ip link add if_a netns A [link_opts] type veth peer name if_b netns B
/// [link_opts]`: the pair with `link_opts` (e.g. queue counts) on both
/// ends, then [`finish_veth`].
fn add_veth(a: &Netns, if_a: &str, b: &Netns, if_b: &str, link_opts: &[&str]) -> Result<()> {
    let mut args = vec!["link", "add", if_a, "netns", a.name()];
    args.extend_from_slice(link_opts);
    args.extend_from_slice(&["type", "veth", "peer", "name", if_b, "netns", b.name()]);
    args.extend_from_slice(link_opts);
    ip(&args)?;
    finish_veth(a, if_a, b, if_b)
}

/// Offloads off and links up on both ends of a new veth pair.
fn finish_veth(a: &Netns, if_a: &str, b: &Netns, if_b: &str) -> Result<()> {
    a.offloads_off(if_a)?;
    b.offloads_off(if_b)?;
    a.link_up(if_a)?;
    b.link_up(if_b)
}

/// Per-queue received packets from the output of `ethtool -S IF`: element `i` is queue `i`'s
/// count. Understands, in this order of preference, veth's `rx_queue_<i>_xdp_packets` (every
/// frame its rx queue's NAPI handled: counted only while an XDP program is attached, since
/// without one veth hands frames to the stack directly), virtio-net's `rx_queue_<i>_packets`,
/// mlx5's `rx<i>_packets` and the Intel drivers' `rx-<i>.packets` / `rx_queue_<i>_packets`.
/// Queues are numbered from 0 with no gaps; the first missing index ends the list. Empty when
/// none of those names appears.
pub fn parse_rx_queue_packets(ethtool_s: &str) -> Vec<u64> {
    let stats: Vec<(&str, u64)> = ethtool_s
        .lines()
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            Some((name.trim(), value.trim().parse().ok()?))
        })
        .collect();
    let find = |name: &str| stats.iter().find(|(n, _)| *n == name).map(|&(_, v)| v);
    let patterns: [fn(usize) -> String; 4] = [
        |i| format!("rx_queue_{i}_xdp_packets"),
        |i| format!("rx_queue_{i}_packets"),
        |i| format!("rx{i}_packets"),
        |i| format!("rx-{i}.packets"),
    ];
    for name_of in patterns {
        let mut counts = Vec::new();
        // Bounded by the number of lines: each queue needs a line of its own.
        while counts.len() < stats.len() {
            match find(&name_of(counts.len())) {
                Some(v) => counts.push(v),
                None => break,
            }
        }
        if !counts.is_empty() {
            return counts;
        }
    }
    Vec::new()
}

/// Two namespaces joined by one veth pair (offloads off): `linux` has `vl`
/// with 10.{net}.1.1/24; `core` has `vc` with no kernel address (corestack
/// takes 10.{net}.1.2 there). Both go when it is dropped.
pub struct Pair {
    /// The namespace of the Linux peer (`vl`).
    pub linux: Netns,
    /// The namespace corestack drives (`vc`).
    pub core: Netns,
    /// `10.{net}.1.1`.
    pub linux_ip: String,
    /// `10.{net}.1.2`.
    pub core_ip: String,
}

impl Pair {
    /// Builds it; `prefix` starts both namespace names. Errors: see [`Netns::new`].
    pub fn new(prefix: &str, net: u8) -> Result<Pair> {
        Self::with_queues(prefix, net, 1)
    }

    /// Builds it with `queues` rx and tx queues on both veth ends (a
    /// multi-queue NIC, see [`veth_pair_queues`]). Errors: see [`Netns::new`]
    /// and [`veth_pair_queues`].
    pub fn with_queues(prefix: &str, net: u8, queues: u32) -> Result<Pair> {
        let linux = Netns::new(&format!("{prefix}l"))?;
        let core = Netns::new(&format!("{prefix}c"))?;
        if queues == 1 {
            veth_pair(&linux, "vl", &core, "vc")?;
        } else {
            veth_pair_queues(&linux, "vl", &core, "vc", queues)?;
        }
        addr_add(&linux, "vl", &format!("10.{net}.1.1/24"))?;
        Ok(Pair {
            linux,
            core,
            linux_ip: format!("10.{net}.1.1"),
            core_ip: format!("10.{net}.1.2"),
        })
    }
}

/// Adds the address `cidr` (e.g. `"10.77.1.1/24"`) to `ifname` in `ns`.
pub fn addr_add(ns: &Netns, ifname: &str, cidr: &str) -> Result<()> {
    ip(&["-n", ns.name(), "addr", "add", cidr, "dev", ifname]).map(drop)
}

/// What [`ChildGuard::next_line`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextLine {
    /// A whole line, without its newline.
    Line(String),
    /// Nothing yet within the timeout.
    Pending,
    /// The child closed its stdout (it exited, usually).
    Closed,
}

/// A spawned child process that is killed (SIGKILL, by PID) and reaped when dropped.
///
/// With [`ChildGuard::spawn_lines`] its stdout is read line by line on a helper thread, so a
/// caller can wait for a readiness line ([`ChildGuard::wait_line`]) without blocking forever.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
    lines: Option<Receiver<String>>,
}

impl ChildGuard {
    /// Wraps an already spawned child.
    pub fn new(child: Child) -> ChildGuard {
        ChildGuard {
            child: Some(child),
            lines: None,
        }
    }

    /// Spawns `cmd` as is.
    pub fn spawn(cmd: &mut Command) -> Result<ChildGuard> {
        let child = cmd.spawn().map_err(|e| spawn_error(cmd, e))?;
        Ok(ChildGuard::new(child))
    }

    /// Spawns `cmd` with stdout piped and read line by line (see [`ChildGuard::wait_line`]).
    pub fn spawn_lines(cmd: &mut Command) -> Result<ChildGuard> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| spawn_error(cmd, e))?;
        let (tx, rx) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(ChildGuard {
            child: Some(child),
            lines: Some(rx),
        })
    }

    /// The child's PID.
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The child, e.g. to take its stdin.
    pub fn child_mut(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("ChildGuard holds a child until dropped")
    }

    /// Waits up to `timeout` for a stdout line containing `needle` and returns it (earlier
    /// lines are discarded). Errors: [`Error::Timeout`] if none came, or if the child exited
    /// first (with its exit status in the message). Needs [`ChildGuard::spawn_lines`].
    pub fn wait_line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        let Some(rx) = self.lines.as_ref() else {
            return Err(Error::Timeout(
                "child stdout is not piped (use spawn_lines)".into(),
            ));
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return Ok(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(Error::Timeout(format!(
                        "no line containing {needle:?} within {timeout:?}"
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.wait_timeout(Duration::from_secs(2))?;
                    let status = status.map_or("still running".to_string(), |s| s.to_string());
                    return Err(Error::Timeout(format!(
                        "child exited ({status}) before printing a line containing {needle:?}"
                    )));
                }
            }
        }
    }

    /// The next stdout line, waiting up to `timeout` for it (needs [`ChildGuard::spawn_lines`]).
    pub fn next_line(&mut self, timeout: Duration) -> NextLine {
        let Some(rx) = self.lines.as_ref() else {
            return NextLine::Closed;
        };
        match rx.recv_timeout(timeout) {
            Ok(line) => NextLine::Line(line),
            Err(RecvTimeoutError::Timeout) => NextLine::Pending,
            Err(RecvTimeoutError::Disconnected) => NextLine::Closed,
        }
    }

    /// Every stdout line received so far and not yet consumed (needs
    /// [`ChildGuard::spawn_lines`]); waits up to `timeout` for the pipe to close.
    pub fn remaining_lines(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        let Some(rx) = self.lines.as_ref() else {
            return out;
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => out.push(line),
                Err(_) => return out,
            }
        }
    }

    /// Waits up to `timeout` for the child to exit; `Ok(None)` if it is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        let child = self.child_mut();
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends SIGTERM (by PID) and waits up to `timeout` for a clean exit; then SIGKILL.
    /// Returns the exit status (None if it had to be killed).
    pub fn terminate(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        if let Some(status) = self.child_mut().try_wait()? {
            return Ok(Some(status));
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.id().to_string()])
            .stderr(Stdio::null())
            .status();
        match self.wait_timeout(timeout)? {
            Some(status) => Ok(Some(status)),
            None => {
                let child = self.child_mut();
                let _ = child.kill();
                let _ = child.wait();
                Ok(None)
            }
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netns_new_twice_gives_unique_names_and_drop_removes_them() {
        let a = Netns::new("nt").expect("netns tests need root: run with sudo");
        let b = Netns::new("nt").unwrap();
        assert_ne!(a.name(), b.name());
        let (na, nb) = (a.name().to_string(), b.name().to_string());
        drop(a);
        drop(b);
        let list = ip(&["netns", "list"]).unwrap();
        assert!(!list
            .lines()
            .any(|l| l.split_whitespace().next() == Some(na.as_str())));
        assert!(!list
            .lines()
            .any(|l| l.split_whitespace().next() == Some(nb.as_str())));
    }

    #[test]
    fn veth_pair_with_addresses_pings_across() {
        let a = Netns::new("nt").expect("netns tests need root: run with sudo");
        let b = Netns::new("nt").unwrap();
        veth_pair(&a, "va", &b, "vb").unwrap();
        addr_add(&a, "va", "10.99.0.1/24").unwrap();
        addr_add(&b, "vb", "10.99.0.2/24").unwrap();
        a.run("ping", &["-c", "1", "-W", "2", "10.99.0.2"]).unwrap();
        let features = b.run("ethtool", &["-k", "vb"]).unwrap();
        assert!(
            features.contains("generic-receive-offload: off"),
            "{features}"
        );
        assert!(
            features.contains("tcp-segmentation-offload: off"),
            "{features}"
        );
    }

    #[test]
    fn veth_pair_queues_gives_both_ends_n_queues_and_counts_per_queue() {
        let a = Netns::new("nt").expect("netns tests need root: run with sudo");
        let b = Netns::new("nt").unwrap();
        veth_pair_queues(&a, "qa", &b, "qb", 4).unwrap();
        for (ns, ifname) in [(&a, "qa"), (&b, "qb")] {
            let channels = ns.run("ethtool", &["-l", ifname]).unwrap();
            let current = channels
                .split("Current hardware settings:")
                .nth(1)
                .unwrap_or("");
            assert!(current.contains("RX:\t\t4"), "{channels}");
            assert!(current.contains("TX:\t\t4"), "{channels}");
        }
        // veth counts per rx queue only with XDP attached: the names are there, at 0.
        assert_eq!(a.rx_queue_packets("qa").unwrap(), vec![0; 4]);
        let err = veth_pair_queues(&a, "qc", &b, "qd", 0).unwrap_err();
        assert!(err.to_string().contains("1 to 4096"), "{err}");
    }

    #[test]
    fn parse_rx_queue_packets_reads_veth_virtio_and_mlx5_names() {
        let veth = "NIC statistics:\n     peer_ifindex: 2\n     rx_queue_0_xdp_packets: 5\n     \
                    rx_queue_0_xdp_bytes: 300\n     rx_queue_1_xdp_packets: 0\n     \
                    rx_queue_2_xdp_packets: 7\n     tx_queue_0_xdp_xmit: 1\n";
        assert_eq!(parse_rx_queue_packets(veth), vec![5, 0, 7]);
        let virtio = "NIC statistics:\n     rx_queue_0_packets: 3\n     rx_queue_1_packets: 4\n";
        assert_eq!(parse_rx_queue_packets(virtio), vec![3, 4]);
        let mlx5 = "     rx_packets: 9\n     rx0_packets: 1\n     rx1_packets: 8\n";
        assert_eq!(parse_rx_queue_packets(mlx5), vec![1, 8]);
        assert!(parse_rx_queue_packets("NIC statistics:\n     rx_packets: 9\n").is_empty());
    }

    #[test]
    fn netns_drop_with_running_child_kills_it() {
        let ns = Netns::new("nt").expect("netns tests need root: run with sudo");
        let mut child = ns.exec("sleep");
        child.arg("30");
        let mut guard = ChildGuard::spawn(&mut child).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while ns.pids().unwrap().is_empty() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(ns.pids().unwrap(), vec![guard.id()]);
        drop(ns);
        let status = guard.wait_timeout(Duration::from_secs(3)).unwrap();
        assert!(
            status.is_some(),
            "child still running after the namespace was dropped"
        );
    }

    #[test]
    fn child_guard_wait_line_with_silent_exit_reports_exit() {
        let mut g =
            ChildGuard::spawn_lines(Command::new("sh").args(["-c", "echo hello; echo ready 1"]))
                .unwrap();
        assert_eq!(
            g.wait_line("ready", Duration::from_secs(5)).unwrap(),
            "ready 1"
        );
        let err = g.wait_line("never", Duration::from_secs(5)).unwrap_err();
        assert!(err.to_string().contains("exited"), "{err}");
    }

    #[test]
    fn run_with_missing_program_says_what_to_do() {
        let err = run(&mut Command::new("ip-does-not-exist-here")).unwrap_err();
        assert!(matches!(err, Error::Io(_)), "{err:?}");
        let err = run(Command::new("ip").args(["link", "show", "nosuchif0"])).unwrap_err();
        assert!(err.to_string().contains("nosuchif0"), "{err}");
    }
}
