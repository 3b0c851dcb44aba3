//! The measurement window of the cost breakdown: `perf stat` attached to the server's
//! processes and `perf record` on the CPUs they may run on, started with their events
//! disabled and switched on and off through control FIFOs (`--control fifo:CTL,ACK`, each
//! command acknowledged), so that their window is the one of the /proc readings taken beside
//! them.
//!
//! perf record samples whole CPUs (`-C`, the CPUs the processes may run on) and the
//! classification keeps the samples of the server's processes: sampling per task (`-p`)
//! switches the sampling events at every context switch of the server's threads, which in
//! this VM added about a quarter to the inline server's CPU per sockperf round trip (40 µs
//! against 32 without perf; with `-C`, 30 against 30) and moved part of it into the waits.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use netns::ChildGuard;
use serde::{Deserialize, Serialize};

use crate::harness::children::last_line;
use crate::harness::cpu::cpu_seconds;

/// perf record's sampling rate, Hz (`-F`).
pub const SAMPLE_HZ: u32 = 5000;
/// The events perf stat counts: system calls entered and context switches.
const STAT_EVENTS: &str = "raw_syscalls:sys_enter,context-switches";
/// How long perf may take to start, or to acknowledge a command.
const PERF_TIMEOUT: Duration = Duration::from_secs(10);

/// What a window counted on the server's processes, before the CPU split is classified
/// (it travels as JSON from the generator that took it to the benchmark).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Window {
    /// Requests answered in the window (set by the caller).
    pub requests: u64,
    /// Its length, seconds.
    pub seconds: f64,
    /// CPU time of the processes (utime + stime, /proc/PID/stat), seconds.
    pub cpu_s: f64,
    /// System calls entered (perf stat, raw_syscalls:sys_enter); None without perf.
    pub syscalls: Option<u64>,
    /// Context switches (perf stat, context-switches); None without perf.
    pub switches: Option<u64>,
    /// Voluntary and nonvoluntary context switches of every thread
    /// (/proc/PID/task/*/status): threads that block, threads preempted.
    pub voluntary_switches: u64,
    pub nonvoluntary_switches: u64,
    /// Packets the server's interface received and sent (/proc/PID/net/dev); None when it
    /// could not be read.
    pub packets_in: Option<u64>,
    pub packets_out: Option<u64>,
    /// perf record's file of samples, to classify; None without perf.
    pub perf_data: Option<PathBuf>,
    /// The processes whose samples count (perf record samples their CPUs whole).
    #[serde(default)]
    pub pids: Vec<u32>,
    /// Why part of it is missing (perf absent or refused).
    pub note: Option<String>,
}

/// The /proc counters read at either end of a window.
#[derive(Debug, Clone, Copy)]
struct Reading {
    cpu_s: f64,
    voluntary: u64,
    nonvoluntary: u64,
    packets: Option<(u64, u64)>,
}

impl Reading {
    fn take(pids: &[u32], iface: &str) -> Result<Reading> {
        let (mut voluntary, mut nonvoluntary) = (0, 0);
        for pid in pids {
            let (v, n) = switches(*pid);
            voluntary += v;
            nonvoluntary += n;
        }
        let packets = pids.first().and_then(|pid| {
            let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).ok()?;
            dev_packets(&dev, iface)
        });
        Ok(Reading {
            cpu_s: cpu_seconds(pids)?,
            voluntary,
            nonvoluntary,
            packets,
        })
    }
}

/// Voluntary and nonvoluntary context switches of every thread of `pid` (0 for a thread
/// gone meanwhile).
fn switches(pid: u32) -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    let (mut v, mut n) = (0, 0);
    for t in tasks.flatten() {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let (a, b) = status_switches(&status);
        v += a;
        n += b;
    }
    (v, n)
}

/// `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` of a /proc status file.
pub fn status_switches(status: &str) -> (u64, u64) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim_start_matches(':').trim().parse().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches"),
        field("nonvoluntary_ctxt_switches"),
    )
}

/// Packets received and sent by `iface` in a /proc/net/dev text.
pub fn dev_packets(dev: &str, iface: &str) -> Option<(u64, u64)> {
    let line = dev.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        (name.trim() == iface).then_some(rest)
    })?;
    let f: Vec<u64> = line
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    Some((*f.get(1)?, *f.get(9)?))
}

/// The counts of `perf stat -x,` output: (system calls, context switches).
pub fn stat_counts(text: &str) -> (Option<u64>, Option<u64>) {
    let count = |event: &str| {
        text.lines().find_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.get(2) == Some(&event))
                .then(|| f[0].parse().ok())
                .flatten()
        })
    };
    (count("raw_syscalls:sys_enter"), count("context-switches"))
}

/// The CPUs the threads of `pids` may run on (`Cpus_allowed_list`), as a comma list; None
/// when none could be read.
fn allowed_cpus(pids: &[u32]) -> Option<String> {
    let mut cpus: Vec<usize> = Vec::new();
    for pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            let list = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|l| cmdline::cpu_list(l.trim()).ok());
            cpus.extend(list.map(|l| l.0).unwrap_or_default());
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then(|| {
        cpus.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// One perf process with its events disabled until [`Perf::command`] says `enable`.
struct Perf {
    child: ChildGuard,
    ctl: File,
    ack: File,
    log: PathBuf,
}

impl Perf {
    /// Starts `perf ARGS -D -1 --control fifo:CTL,ACK` (the FIFOs `stem.ctl`, `stem.ack`, both
    /// opened here first so that neither side blocks), at normal priority (`chrt -o 0` where
    /// the rows run at real-time priority, as the caller may), its stderr into `stem.log`.
    fn start(args: &[&str], stem: &Path) -> Result<Perf> {
        let path = |ext: &str| stem.with_extension(ext);
        let (ctl, ack, log) = (path("ctl"), path("ack"), path("log"));
        for fifo in [&ctl, &ack] {
            let _ = std::fs::remove_file(fifo);
            rustix::fs::mknodat(
                rustix::fs::CWD,
                fifo,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .with_context(|| format!("creating the FIFO {}", fifo.display()))?;
        }
        // O_RDWR: a FIFO opened for both never blocks on open (Linux).
        let open = |p: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
                .open(p)
                .with_context(|| format!("opening {}", p.display()))
        };
        let (ctl_file, ack_file) = (open(&ctl)?, open(&ack)?);
        let control = format!("fifo:{},{}", ctl.display(), ack.display());
        let mut cmd = if crate::harness::shim::realtime_allowed() {
            let mut c = Command::new("chrt");
            c.args(["-o", "0", "perf"]);
            c
        } else {
            Command::new("perf")
        };
        cmd.args(args)
            .args(["-D", "-1", "--control", &control])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).context("creating perf's log")?);
        let child = ChildGuard::spawn(&mut cmd).context("starting perf")?;
        Ok(Perf {
            child,
            ctl: ctl_file,
            ack: ack_file,
            log,
        })
    }

    /// Sends `enable` or `disable` and waits for perf's `ack`. Errors: perf exited (its last
    /// line says why) or did not answer within [`PERF_TIMEOUT`].
    fn command(&mut self, what: &str) -> Result<()> {
        self.ctl
            .write_all(format!("{what}\n").as_bytes())
            .context("writing to perf's control FIFO")?;
        let deadline = Instant::now() + PERF_TIMEOUT;
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match self.ack.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).context("reading perf's ack"),
            }
            if got.windows(4).any(|w| w == b"ack\n") {
                return Ok(());
            }
            if self.child.wait_timeout(Duration::from_millis(1))?.is_some() {
                bail!("{}", last_line(&self.log));
            }
            if Instant::now() > deadline {
                bail!("no answer to {what} within {} s", PERF_TIMEOUT.as_secs());
            }
        }
    }

    /// Disables its events, stops it with SIGINT (perf then writes its output) and waits.
    fn finish(mut self) -> Result<()> {
        self.command("disable")?;
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32)
            .ok_or_else(|| anyhow!("perf has no pid"))?;
        rustix::process::kill_process(pid, rustix::process::Signal::INT)
            .context("stopping perf")?;
        match self.child.wait_timeout(Duration::from_secs(30))? {
            Some(_) => Ok(()),
            None => bail!("perf did not stop within 30 s of SIGINT"),
        }
    }
}

/// A window being measured on the server's processes.
pub struct Probe {
    pids: Vec<u32>,
    iface: String,
    stat: Option<(Perf, PathBuf)>,
    record: Option<(Perf, PathBuf)>,
    note: Option<String>,
    started: Instant,
    before: Reading,
}

impl Probe {
    /// Starts a window on the processes `pids` (all their threads) and interface `iface` of
    /// their namespace, perf's files in `dir`. Without perf, or where perf refuses, the window
    /// carries a note saying so and only the /proc counters. Errors: /proc unreadable.
    pub fn start(pids: &[u32], iface: &str, dir: &Path) -> Result<Probe> {
        let list = pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let name = format!("perf-{}", pids.first().copied().unwrap_or(0));
        let stem = dir.join(&name);
        let stat_out = stem.with_extension("stat");
        let data = stem.with_extension("data");
        let hz = SAMPLE_HZ.to_string();
        let mut note = None;
        let (stat, record) = if perf_found() {
            let started = (|| -> Result<_> {
                let cpus = allowed_cpus(pids).context("reading the processes' CPUs")?;
                let so = stat_out.to_string_lossy();
                let mut stat = Perf::start(
                    &["stat", "-e", STAT_EVENTS, "-x", ",", "-o", &so, "-p", &list],
                    &dir.join(format!("{name}-stat")),
                )?;
                let d = data.to_string_lossy();
                let mut record = Perf::start(
                    &[
                        "record",
                        "-g",
                        "-e",
                        "cpu-clock",
                        "-F",
                        &hz,
                        "-B",
                        "-N",
                        "-q",
                        "-o",
                        &d,
                        "-C",
                        &cpus,
                    ],
                    &dir.join(format!("{name}-record")),
                )?;
                stat.command("enable")?;
                record.command("enable")?;
                Ok((stat, record))
            })();
            match started {
                Ok((s, r)) => (Some((s, stat_out)), Some((r, data))),
                Err(e) => {
                    note = Some(format!(
                        "perf refused ({}): no CPU split, system calls or perf's switch count; \
                         switches and packets from /proc",
                        cmdline::one_line(&e)
                    ));
                    (None, None)
                }
            }
        } else {
            note = Some(
                "perf is not installed: no CPU split, system calls or perf's switch count; \
                 switches and packets from /proc"
                    .into(),
            );
            (None, None)
        };
        let before = Reading::take(pids, iface)?;
        Ok(Probe {
            pids: pids.to_vec(),
            iface: iface.to_string(),
            stat,
            record,
            note,
            started: Instant::now(),
            before,
        })
    }

    /// Ends the window with `requests` answered in it; stops perf (its sample file stays for
    /// [`super::Breakdown::of`]). Errors: /proc unreadable; a perf that fails to stop only
    /// leaves a note.
    pub fn finish(self, requests: u64) -> Result<Window> {
        let after = Reading::take(&self.pids, &self.iface)?;
        let seconds = self.started.elapsed().as_secs_f64();
        let mut w = Window {
            requests,
            seconds,
            cpu_s: after.cpu_s - self.before.cpu_s,
            voluntary_switches: after.voluntary.saturating_sub(self.before.voluntary),
            nonvoluntary_switches: after.nonvoluntary.saturating_sub(self.before.nonvoluntary),
            note: self.note,
            pids: self.pids.clone(),
            ..Window::default()
        };
        if let (Some((i0, o0)), Some((i1, o1))) = (self.before.packets, after.packets) {
            w.packets_in = Some(i1.saturating_sub(i0));
            w.packets_out = Some(o1.saturating_sub(o0));
        }
        if let Some((perf, out)) = self.stat {
            match perf.finish() {
                Ok(()) => {
                    let text = std::fs::read_to_string(&out).unwrap_or_default();
                    (w.syscalls, w.switches) = stat_counts(&text);
                }
                Err(e) => w.note = Some(format!("perf stat failed: {}", e)),
            }
        }
        if let Some((perf, data)) = self.record {
            match perf.finish() {
                Ok(()) => w.perf_data = Some(data),
                Err(e) => w.note = Some(format!("perf record failed: {}", e)),
            }
        }
        Ok(w)
    }
}

/// Whether `perf` runs here (`perf --version`).
pub fn perf_found() -> bool {
    Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
