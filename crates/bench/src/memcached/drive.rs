//! What every memcached benchmark shares (`bench memcached`, and `bench scale`'s memcached
//! rows): memcached's command line, the check that memcached and the shim are there, the
//! objective, and one row's rate sweep (a `bench memcached-load` process against a memcached
//! already started, its JSON steps read as they come).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use netns::{Netns, NextLine};

use super::load::Step;
use crate::harness::children::last_line;
use crate::harness::cost::Window;
use crate::harness::shim;
use cmdline::Interrupted;

/// memcached's TCP port in every row.
pub const PORT: u16 = 11211;

/// The latency objective, µs: a step meets it when its p99 (from each request's scheduled
/// send time) is below this and every request was answered.
pub const SLA_US: f64 = 500.0;

/// memcached's command line for a benchmark server: the binary `bin`, `-t threads` worker
/// threads, TCP on [`PORT`], UDP off, up to 4096 connections, running as root (`-u root`).
pub fn memcached_command(bin: &str, threads: u32) -> Vec<String> {
    let threads = threads.to_string();
    let port = PORT.to_string();
    [
        bin, "-u", "root", "-t", &threads, "-p", &port, "-U", "0", "-c", "4096",
    ]
    .map(String::from)
    .to_vec()
}

/// Errors unless the memcached binary `bin` is on the PATH and the shim
/// (`libcorestack_preload.so` beside `exe`, or `CORESTACK_PRELOAD`) exists.
pub fn check_tools(bin: &str, exe: &Path) -> Result<()> {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        bail!("{bin} is not installed: run scripts/setup.sh (as root)");
    }
    let shim = exe.with_file_name("libcorestack_preload.so");
    if !shim.is_file() && std::env::var_os("CORESTACK_PRELOAD").is_none() {
        bail!(
            "{} is missing: build it with cargo build --release -p corestack-preload",
            shim.display()
        );
    }
    Ok(())
}

/// Whether step `s` meets the objective `sla_us`: every request answered without error and
/// p99 below `sla_us`.
pub fn sustained(s: &Step, sla_us: f64) -> bool {
    s.unanswered == 0 && s.errors == 0 && s.p99_us < sla_us
}

/// The peak achieved QPS of the steps that meet the objective `sla_us` (None if none does).
pub fn peak_at_sla(steps: &[Step], sla_us: f64) -> Option<f64> {
    steps
        .iter()
        .filter(|s| sustained(s, sla_us))
        .map(|s| s.achieved_qps)
        .max_by(f64::total_cmp)
}

/// The cost breakdown's step of a sweep (see [`crate::harness::cost`]).
#[derive(Debug, Clone, Copy)]
pub struct BreakdownAt<'a> {
    /// The offered rate of the step measured, requests per second (one of the sweep's).
    pub rate: f64,
    /// The server's interface in its namespace.
    pub iface: &'a str,
    /// Where perf's files go.
    pub dir: &'a Path,
}

/// One row's rate sweep: the generator's options (see [`super::load::Load`]).
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Offered rates, requests per second, in increasing order.
    pub rates: Vec<f64>,
    /// Seconds of load per rate.
    pub seconds: f64,
    /// Seconds to wait for answers after each step's sending window.
    pub drain_secs: f64,
    /// The generator's connections.
    pub conns: usize,
    /// Keys in the key space, set before the first step.
    pub keys: usize,
    /// Seed of the workload.
    pub seed: u64,
    /// A step whose p99 exceeds this many µs counts as overloaded.
    pub give_up_us: f64,
    /// The sweep ends after this many consecutive overloaded steps.
    pub stop_after: usize,
}

impl Sweep {
    /// The longest the sweep may take, beyond the generator's start: each step's window and
    /// two drains, a second each for the rest, and 60 s for connecting and setting keys.
    pub fn limit(&self) -> Duration {
        Duration::from_secs_f64(
            60.0 + self.rates.len() as f64 * (self.seconds + 2.0 * self.drain_secs + 1.0),
        )
    }

    /// Runs the generator (`exe bench memcached-load`) in `ns` pinned to `cpu`, under
    /// [`shim::sched`], against memcached at `target`, with the CPU time of `cpu_pids`
    /// counted as the server's; its stderr goes to `gen_log`. Prints each step on stderr
    /// after `tag`; with `breakdown`, the cost breakdown's window over the step at its rate (taken by
    /// the generator, so that it spans exactly that step). Returns the steps and that window, if
    /// the step ran. Errors: the generator fails (the message carries the
    /// last line of `gen_log` and of `server_log`), takes longer than [`Sweep::limit`], or
    /// `stop` is raised ([`Interrupted`]).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        ns: &Netns,
        cpu: &str,
        exe: &Path,
        target: &str,
        cpu_pids: &[u32],
        gen_log: &Path,
        server_log: &Path,
        stop: &AtomicBool,
        tag: &str,
        breakdown: Option<BreakdownAt<'_>>,
    ) -> Result<(Vec<Step>, Option<Window>)> {
        let rates: Vec<String> = self.rates.iter().map(|r| format!("{r}")).collect();
        let rates = rates.join(",");
        let (secs, drain) = (self.seconds.to_string(), self.drain_secs.to_string());
        let (conns, keys, seed) = (
            self.conns.to_string(),
            self.keys.to_string(),
            self.seed.to_string(),
        );
        let (give_up, stop_after) = (self.give_up_us.to_string(), self.stop_after.to_string());
        let pids: Vec<String> = cpu_pids.iter().map(u32::to_string).collect();
        let mut args = vec![
            "bench",
            "memcached-load",
            "--target",
            target,
            "--rates",
            &rates,
            "--seconds",
            &secs,
            "--drain-secs",
            &drain,
            "--conns",
            &conns,
            "--keys",
            &keys,
            "--seed",
            &seed,
            "--give-up-us",
            &give_up,
            "--stop-after",
            &stop_after,
            "--connect-secs",
            "10",
        ];
        for p in &pids {
            args.extend(["--cpu-pid", p]);
        }
        let (b_rate, b_dir) = breakdown.map_or((String::new(), String::new()), |b| {
            (b.rate.to_string(), b.dir.to_string_lossy().into_owned())
        });
        if let Some(b) = &breakdown {
            args.extend(["--breakdown-rate", &b_rate, "--breakdown-iface", b.iface]);
            args.extend(["--breakdown-dir", &b_dir]);
        }
        let mut gen = shim::spawn(ns, cpu, exe, &args, gen_log)?;
        let limit = self.limit();
        let deadline = Instant::now() + limit;
        let mut steps = Vec::new();
        let mut window = None;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(Interrupted.into());
            }
            match gen.next_line(Duration::from_millis(100)) {
                NextLine::Line(l) if l.starts_with("{\"breakdown\"") => {
                    let mut v: serde_json::Value =
                        serde_json::from_str(&l).context("the generator's breakdown JSON")?;
                    let w: Window = serde_json::from_value(v["breakdown"].take())
                        .context("the generator's breakdown JSON")?;
                    window = Some(w);
                }
                NextLine::Line(l) if l.starts_with('{') => {
                    let s: Step = serde_json::from_str(&l).context("the generator's JSON")?;
                    eprintln!(
                        "{tag}:   {:>8.0} offered, {:>8.0} achieved, p99 {:.0} µs",
                        s.offered_qps, s.achieved_qps, s.p99_us
                    );
                    steps.push(s);
                }
                NextLine::Line(_) | NextLine::Pending => {}
                NextLine::Closed => break,
            }
            if Instant::now() > deadline {
                bail!("the generator did not finish within {} s", limit.as_secs());
            }
        }
        let status = gen.wait_timeout(Duration::from_secs(5))?;
        if !status.is_some_and(|s| s.success()) {
            let server_said = last_line(server_log);
            bail!(
                "the generator failed: {}{}",
                last_line(gen_log),
                if server_said.is_empty() {
                    String::new()
                } else {
                    format!(" (memcached's last line: {server_said})")
                }
            );
        }
        Ok((steps, window))
    }
}
