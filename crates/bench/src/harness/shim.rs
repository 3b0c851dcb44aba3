//! Unmodified programs as servers, on Linux and under `corestack exec`, one row at a time:
//! what `bench memcached` and `bench sockperf` share.
//!
//! ```text
//!  namespace client (CPU 0 for clients)          namespace server (CPU 1 for servers)
//!  c1 10.84.1.1/24 ── veth ── s1 (no kernel address; corestack 10.84.1.2 via af_xdp)
//!  c2 10.84.2.1/24 ── veth ── s2 10.84.2.2/24 (Linux)
//! ```
//!
//! A row is one way of running the server program: on the kernel stack (as it is, or tuned:
//! busy polling switched on, see [`super::tuned`]), or under the shim in embedded mode, inline
//! mode, or service mode (a `corestack run` daemon on s1, also on the server CPU). A new mode
//! is one more [`Row`] and one more arm in [`start`].

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use netns::{ChildGuard, Netns};
use serde::Serialize;
use std::fs::File;
use std::process::{Command, Stdio};

use super::children::{last_line, wait_ready, LogDir, Topology};
use super::tuned::BusyPollSysctls;

/// The third octet pair of the topology: 10.84.x.y.
pub const NET: u8 = 84;
/// corestack's address on s1.
pub const CORE_CIDR: &str = "10.84.1.2/24";
pub const CORE_IP: &str = "10.84.1.2";
/// The kernel's address on s2.
pub const LINUX_IP: &str = "10.84.2.2";
pub use crate::harness::{CLIENT_CPU, ENGINE_CPU, SERVER_CPU};

/// The scheduling class of every process the rows start (servers, daemons, clients) and of
/// their threads: SCHED_FIFO priority 10 (`chrt -f 10`). On a machine shared with other work,
/// a normal (even nice -20) thread that wakes for a packet waits behind an unrelated build's
/// time slice: on the development VM under a load of 9, a 100 µs sleep overslept p99 1.2 ms
/// at nice -20 and 69 µs at SCHED_FIFO. Every party here blocks when idle (the engines nap
/// after 50 µs without work), and the kernel's RT throttling leaves others 5 % of each CPU.
pub const SCHED: &str = "SCHED_FIFO 10";

/// Whether real-time priority is granted here (`chrt -f 10 true` succeeds): containers and
/// some VMs refuse it. Asked once; the first refusal prints one line saying the rows run at
/// normal priority instead.
pub fn realtime_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let ok = Command::new("chrt")
            .args(["-f", "10", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!(
                "note: real-time priority refused here (chrt -f 10 failed): every process runs \
                 at normal priority (SCHED_OTHER), so latencies include time-slice waits"
            );
        }
        ok
    })
}

/// The scheduling class the rows run at: [`SCHED`] where real-time priority is allowed, else
/// `SCHED_OTHER`.
pub fn sched() -> &'static str {
    if realtime_allowed() {
        SCHED
    } else {
        "SCHED_OTHER (real-time refused)"
    }
}

/// Runs `exe args` in `ns`, pinned to `cpu`, under [`sched`] (`chrt -f 10 taskset -c CPU
/// ip netns exec NS exe args`, one pid through the execs; without `chrt` where real-time
/// priority is refused); stdout read by lines, stderr into `log`.
pub fn spawn(ns: &Netns, cpu: &str, exe: &Path, args: &[&str], log: &Path) -> Result<ChildGuard> {
    let mut cmd = if realtime_allowed() {
        let mut c = Command::new("chrt");
        c.args(["-f", "10", "taskset"]);
        c
    } else {
        Command::new("taskset")
    };
    cmd.args(["-c", cpu, "ip", "netns", "exec", ns.name()])
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .env_remove("CORESTACK_SOCKET");
    if let Some(list) = super::engine_cpus() {
        cmd.env("CORESTACK_ENGINE_CPUS", list);
    }
    let err = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stderr(err);
    Ok(ChildGuard::spawn_lines(&mut cmd)?)
}

/// A way of running the server program.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Row {
    /// On the kernel stack.
    Linux,
    /// On the kernel stack with busy polling switched on (`net.core.busy_poll` and
    /// `busy_read` at 50 µs while the row runs; see [`super::tuned`]).
    LinuxTuned,
    /// Under `corestack exec` (embedded: an engine thread in the program's process).
    Embedded,
    /// Under `corestack exec --inline` (the program's own threads drive the engine).
    Inline,
    /// Under `corestack exec --socket`, an application of a `corestack run` daemon.
    Service,
}

impl Row {
    /// Its name in tables.
    pub fn label(self) -> &'static str {
        match self {
            Row::Linux => "Linux",
            Row::LinuxTuned => "Linux tuned",
            Row::Embedded => "corestack embedded",
            Row::Inline => "corestack inline",
            Row::Service => "corestack service",
        }
    }

    /// Its name in file names.
    pub fn key(self) -> &'static str {
        match self {
            Row::Linux => "linux",
            Row::LinuxTuned => "linux-tuned",
            Row::Embedded => "embedded",
            Row::Inline => "inline",
            Row::Service => "service",
        }
    }

    /// True for the rows on the kernel stack (Linux, Linux tuned).
    pub fn on_kernel(self) -> bool {
        matches!(self, Row::Linux | Row::LinuxTuned)
    }
}

/// The row's server, running.
pub struct Server {
    /// The processes (daemon first), stopped in reverse order by [`Server::stop`] or killed on
    /// drop.
    guards: Vec<ChildGuard>,
    /// Whose CPU time is the server's: the program (and the daemon).
    pub cpu_pids: Vec<u32>,
    /// The address clients connect to.
    pub ip: &'static str,
    /// The program's stderr.
    pub log: std::path::PathBuf,
    /// The server's interface in its namespace (s2 on Linux, s1 on corestack).
    pub iface: &'static str,
    /// Linux tuned: what it set, and whether busy polling can poll the interface.
    pub note: Option<String>,
    /// Linux tuned: the busy-poll settings, put back after the processes stopped (fields drop
    /// in order: the guards first).
    busy_poll: Option<BusyPollSysctls>,
}

impl Server {
    /// Stops its processes, the program first.
    pub fn stop(self) -> Result<()> {
        let Server {
            guards, busy_poll, ..
        } = self;
        for mut g in guards.into_iter().rev() {
            g.terminate(Duration::from_secs(3))?;
        }
        drop(busy_poll);
        Ok(())
    }
}

/// Waits until `/proc/PID/comm` is `name` (the exec chain taskset → ip netns exec → corestack
/// exec → the program keeps one pid). Errors: it is not within 10 s.
pub fn wait_comm(pid: u32, name: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let name: String = name.chars().take(15).collect();
    loop {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == name {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("process {pid} is {:?}, not {name}, after 10 s", comm.trim());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `program` (`program[0]` and its arguments) in `row`'s way in the server namespace,
/// pinned to [`SERVER_CPU`], waiting until the process is the program. `exe` is this binary;
/// `socket` the daemon's control socket in service mode.
pub fn start(
    row: Row,
    program: &[&str],
    exe: &Path,
    topo: &Topology,
    logs: &LogDir,
    socket: &str,
    stop: &AtomicBool,
) -> Result<Server> {
    let (prog, _) = program.split_first().context("no program to run")?;
    let comm = Path::new(prog)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(prog)
        .to_string();
    let mut guards = Vec::new();
    let mut cpu_pids = Vec::new();
    let log = logs.file(&format!("{comm}-{}.log", row.key()));
    let mut busy_poll = None;
    let mut note = None;
    let (ip, prefix): (&'static str, Vec<&str>) = match row {
        Row::Linux => (LINUX_IP, vec![]),
        Row::LinuxTuned => {
            let set = BusyPollSysctls::switch_on().context("switching busy polling on")?;
            note = Some(format!(
                "{}; {}",
                set.describe(),
                super::tuned::napi_note(&topo.server, "s2")
            ));
            busy_poll = Some(set);
            (LINUX_IP, vec![])
        }
        Row::Embedded => (
            CORE_IP,
            vec!["exec", "--iface", "s1", "--ip", CORE_CIDR, "--"],
        ),
        Row::Inline => (
            CORE_IP,
            vec!["exec", "--iface", "s1", "--ip", CORE_CIDR, "--inline", "--"],
        ),
        Row::Service => {
            let dlog = logs.file(&format!("daemon-{comm}.log"));
            let mut args = vec![
                "run", "--iface", "s1", "--ip", CORE_CIDR, "--socket", socket,
            ];
            args.extend(super::daemon_cpu_args());
            let mut d = spawn(&topo.server, ENGINE_CPU.as_str(), exe, &args, &dlog)?;
            wait_ready(&mut d, "daemon ready", &dlog, true, stop)
                .context("starting the corestack daemon")?;
            cpu_pids.push(d.id());
            guards.push(d);
            (CORE_IP, vec!["exec", "--socket", socket, "--"])
        }
    };
    let server = if prefix.is_empty() {
        spawn(
            &topo.server,
            SERVER_CPU.as_str(),
            Path::new(prog),
            &program[1..],
            &log,
        )?
    } else {
        let args: Vec<&str> = prefix.iter().chain(program.iter()).copied().collect();
        spawn(&topo.server, SERVER_CPU.as_str(), exe, &args, &log)?
    };
    let pid = server.id();
    guards.push(server);
    wait_comm(pid, &comm).with_context(|| last_line(&log))?;
    cpu_pids.push(pid);
    Ok(Server {
        guards,
        cpu_pids,
        ip,
        log,
        iface: if row.on_kernel() { "s2" } else { "s1" },
        note,
        busy_poll,
    })
}
