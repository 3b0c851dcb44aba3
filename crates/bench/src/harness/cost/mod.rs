//! The cost breakdown (`--breakdown` of `bench memcached` and `bench sockperf`): where a
//! request's CPU time goes on the server's processes (the program and, in service mode, the
//! daemon: [`crate::harness::shim::Server::cpu_pids`]), row by row, Linux beside corestack.
//!
//! Over one window (memcached: the step at `--breakdown-rate`; sockperf: one more ping-pong
//! run per row, apart from the rounds of the latency table) it counts:
//!
//! - CPU time, exactly: utime + stime of the processes (/proc/PID/stat) over the window,
//!   divided by the requests answered in it: CPU µs per request;
//! - system calls and context switches: `perf stat -e raw_syscalls:sys_enter,context-switches
//!   -p PIDS` (tracepoint counting, cheap), and the voluntary and nonvoluntary switches of
//!   every thread from /proc/PID/task/*/status;
//! - packets in and out on the server's veth (/proc/PID/net/dev of the server's namespace);
//! - the split of the CPU time: `perf record -g -e cpu-clock -F 5000 -C CPUS` (the CPUs the
//!   processes may run on: per-task sampling costs an event switch per context switch, see
//!   [`probe`]), then `perf script -F comm,pid,ip,sym,dso`; every sample of the processes
//!   goes to one [`Category`] ([`classify`]), and each category's fraction of the samples is
//!   scaled to the exact CPU µs per request above (in a VM perf's sample count under-counts
//!   the time, so only the fractions are used).
//!
//! The categories:
//!
//! ```text
//!  user space, by the leaf frame:
//!   application      the program's own code and libraries (libc, libevent, ...)
//!   engine           engine::, wire::            (in libcorestack_preload.so or the daemon)
//!   NIC path         nic::
//!   app interface    appif::, corestack:: (client library), service::
//!   shim             corestack_preload::
//!   corestack other  std/core/alloc/dependencies inside corestack's objects
//!   vdso clock       __vdso_clock_gettime
//!  kernel, by the call stack (first match):
//!   kernel tx        tcp_sendmsg, packet_sendmsg, xsk_sendmsg, __xsk_generic_xmit (with the
//!                    peer's receive, which a veth runs on the sender's CPU, for both stacks)
//!   kernel rx        tcp_recvmsg, packet/xsk receive, net_rx_action and the receive path
//!   waits            epoll_wait, poll, select, eventfd, futex, sched_yield, sleeps, schedule
//!   other kernel     the rest: system call entry/exit, page faults, timers
//! ```
//!
//! User-space call chains are not unwound (corestack and libc are built without frame
//! pointers), so libc's memcpy counts as the application's whoever called it. Without perf,
//! or where perf refuses (`perf_event_paranoid`), the table says so in one line and keeps the
//! columns /proc gives (CPU, switches, packets).

pub mod classify;
pub mod probe;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Serialize;

pub use classify::{Category, Counts};
pub use probe::{Probe, Window};

use crate::harness::shim::Row;

/// One category's share of a request's CPU time.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Share {
    pub category: Category,
    /// CPU µs per request: the category's fraction of the samples times the exact total.
    pub us_per_req: f64,
    /// perf samples in the category.
    pub samples: u64,
}

/// Where a request's CPU time went on the server's processes over one window.
#[derive(Debug, Clone, Serialize)]
pub struct Breakdown {
    /// Requests answered in the window.
    pub requests: u64,
    /// The window's length, seconds.
    pub seconds: f64,
    /// CPU time (utime + stime) of the server's processes per request, µs.
    pub cpu_us_per_req: f64,
    /// Its split by category, in [`Category::ALL`] order; empty without perf samples.
    pub split: Vec<Share>,
    /// perf samples classified.
    pub samples: u64,
    /// System calls entered per request (perf stat).
    pub syscalls_per_req: Option<f64>,
    /// Context switches per request (perf stat).
    pub switches_per_req: Option<f64>,
    /// Voluntary (blocking) and nonvoluntary (preempted) switches per request, from /proc.
    pub voluntary_switches_per_req: f64,
    pub nonvoluntary_switches_per_req: f64,
    /// Packets the server's veth received and sent per request.
    pub packets_in_per_req: Option<f64>,
    pub packets_out_per_req: Option<f64>,
    /// What is missing and why.
    pub note: Option<String>,
}

impl Breakdown {
    /// The breakdown of window `w`, its perf samples classified (`perf script` on its file);
    /// a file perf script cannot read leaves the split empty and a note.
    pub fn of(w: &Window) -> Breakdown {
        let counts = w.perf_data.as_deref().map(script);
        match counts {
            Some(Ok(text)) => Breakdown::from_counts(w, Some(Counts::of(&text, &w.pids))),
            Some(Err(e)) => Breakdown {
                note: Some(format!("perf script failed: {}", cmdline::one_line(&e))),
                ..Breakdown::from_counts(w, None)
            },
            None => Breakdown::from_counts(w, None),
        }
    }

    /// The breakdown of window `w` with the samples `counts` (None: no split).
    pub fn from_counts(w: &Window, counts: Option<Counts>) -> Breakdown {
        let n = w.requests.max(1) as f64;
        let cpu_us_per_req = w.cpu_s * 1e6 / n;
        let per = |v: u64| v as f64 / n;
        let counts = counts.filter(|c| c.total() > 0);
        let split = counts.map_or_else(Vec::new, |c| {
            let total = c.total() as f64;
            Category::ALL
                .iter()
                .map(|&category| Share {
                    category,
                    us_per_req: cpu_us_per_req * c.get(category) as f64 / total,
                    samples: c.get(category),
                })
                .collect()
        });
        let note = match (&w.note, w.perf_data.is_some() && split.is_empty()) {
            (Some(n), _) => Some(n.clone()),
            (None, true) => Some("perf recorded no sample of the server".into()),
            (None, false) => None,
        };
        Breakdown {
            requests: w.requests,
            seconds: w.seconds,
            cpu_us_per_req,
            samples: counts.map_or(0, |c| c.total()),
            split,
            syscalls_per_req: w.syscalls.map(per),
            switches_per_req: w.switches.map(per),
            voluntary_switches_per_req: per(w.voluntary_switches),
            nonvoluntary_switches_per_req: per(w.nonvoluntary_switches),
            packets_in_per_req: w.packets_in.map(per),
            packets_out_per_req: w.packets_out.map(per),
            note,
        }
    }

    /// The µs per request of `category` (None without a split).
    pub fn us(&self, category: Category) -> Option<f64> {
        self.split
            .iter()
            .find(|s| s.category == category)
            .map(|s| s.us_per_req)
    }

    /// Context switches per request: perf's count, else /proc's voluntary + nonvoluntary.
    pub fn switches(&self) -> f64 {
        self.switches_per_req
            .unwrap_or(self.voluntary_switches_per_req + self.nonvoluntary_switches_per_req)
    }
}

/// The text of `perf script -F comm,pid,ip,sym,dso` on the file `data` (no inline
/// expansion: that would run addr2line per frame). Errors: perf fails.
fn script(data: &Path) -> Result<String> {
    let out = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(data)
        .args(["-F", "comm,pid,ip,sym,dso", "--no-inline"])
        .output()
        .context("running perf script")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!("{}", err.lines().last().unwrap_or("failed"));
    }
    String::from_utf8(out.stdout).context("perf script's output is not UTF-8")
}

/// A value with `prec` decimals, `-` for none.
fn cell(v: Option<f64>, prec: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or("-".to_string(), |v| format!("{v:.prec$}"))
}

/// The breakdown table of `rows` (each party's row kind, label and breakdown): CPU µs per
/// request, each category's µs per request, system calls, switches and packets per request,
/// and the CPU per request over Linux's and over Linux tuned's where those rows are there;
/// then a line per row with a note and the samples behind each split.
pub fn table(rows: &[(Row, &str, &Breakdown)]) -> String {
    let find = |want: Row| {
        rows.iter()
            .find(|(r, _, _)| *r == want)
            .map(|(_, _, b)| b.cpu_us_per_req)
    };
    let (linux, tuned) = (find(Row::Linux), find(Row::LinuxTuned));
    let mut o = String::new();
    let _ = write!(o, "{:<20} {:>8}", "", "CPU µs");
    for c in Category::ALL {
        let _ = write!(o, " {:>8}", c.header());
    }
    let _ = write!(
        o,
        " {:>7} {:>7} {:>6} {:>6} {:>6}",
        "sys", "switch", "pk in", "pk out", "/Linux"
    );
    if tuned.is_some() {
        let _ = write!(o, " {:>6}", "/tuned");
    }
    o.push('\n');
    let ratio = |a: f64, b: Option<f64>| cell(b.filter(|b| *b > 0.0).map(|b| a / b), 2);
    for (_, label, b) in rows {
        let _ = write!(o, "{label:<20} {:>8.2}", b.cpu_us_per_req);
        for c in Category::ALL {
            let _ = write!(o, " {:>8}", cell(b.us(c), 2));
        }
        let _ = write!(
            o,
            " {:>7} {:>7.2} {:>6} {:>6} {:>6}",
            cell(b.syscalls_per_req, 2),
            b.switches(),
            cell(b.packets_in_per_req, 2),
            cell(b.packets_out_per_req, 2),
            ratio(b.cpu_us_per_req, linux)
        );
        if tuned.is_some() {
            let _ = write!(o, " {:>6}", ratio(b.cpu_us_per_req, tuned));
        }
        o.push('\n');
    }
    let samples: Vec<String> = rows
        .iter()
        .map(|(_, label, b)| {
            format!(
                "{label} {} samples, {} requests in {:.1} s",
                b.samples, b.requests, b.seconds
            )
        })
        .collect();
    let _ = writeln!(o, "(per request; {})", samples.join("; "));
    for (_, label, b) in rows {
        if let Some(n) = &b.note {
            let _ = writeln!(o, "note: {label}: {n}");
        }
    }
    o
}

/// What the table's columns mean, a line each.
pub fn legend() -> String {
    let mut o = String::from(
        "CPU µs: utime+stime of the server's processes over the window / requests answered in \
         it, perf attached (its sampling and syscall tracepoint add to it: compare rows within \
         this table); each category: its share of perf's cpu-clock samples (call graphs, ",
    );
    let _ = writeln!(
        o,
        "{} Hz) times that total (only the fractions are used: the VM under-counts samples)",
        probe::SAMPLE_HZ
    );
    for c in Category::ALL {
        let _ = writeln!(o, "  {:<8} {}", c.header(), c.means());
    }
    o.push_str(
        "sys: system calls entered (perf stat raw_syscalls:sys_enter); switch: context switches \
         (perf stat; /proc's voluntary + nonvoluntary without perf; both in --json); pk in/out: \
         packets the server's veth received/sent; /Linux, /tuned: CPU µs over Linux's, Linux \
         tuned's\n",
    );
    o
}
