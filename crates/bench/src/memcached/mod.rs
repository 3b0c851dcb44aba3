//! `corestack bench memcached`: unmodified memcached (the distribution's binary) on Linux and
//! on corestack through the sockets shim, under Facebook's ETC workload, open loop, at a sweep
//! of offered rates, in one run.
//!
//! ```text
//!  namespace mcbc (client)                      namespace mcbs (server)
//!  c1 10.84.1.1/24 ── veth ── s1 (no kernel address; corestack 10.84.1.2 via af_xdp)
//!  c2 10.84.2.1/24 ── veth ── s2 10.84.2.2/24 (Linux)
//!  generator on CPU 0                           memcached (+ its engine, + the daemon) on CPU 1
//! ```
//!
//! Rows, one server at a time, each with a new generator process (`bench memcached-load`, see
//! [`load`]) that sets the key space and then steps through the rates:
//!
//! - `linux`: `memcached` on the kernel stack;
//! - `embedded`: `corestack exec --iface s1 --ip 10.84.1.2/24 -- memcached` (the engine is a
//!   thread of memcached's process, adaptive polling);
//! - `inline`: the same with `--inline` (memcached's own threads drive the engine);
//! - `service`: `corestack run` on s1 and `corestack exec --socket PATH -- memcached`, both on
//!   CPU 1; the CPU per request counts both processes. A row whose server does not answer
//!   (service mode before the shim supports it) is printed as skipped with the reason.
//!
//! Per step: offered and achieved QPS, p50/p99 latency from the scheduled send time, and the
//! server's CPU per request (utime + stime from /proc over the step / answers). Per row: the
//! peak achieved QPS with p99 under `--sla-us`; then the corestack/Linux ratios of that peak
//! and of the CPU per request at the highest offered rate both rows sustained under the SLA.
//! `--json FILE` writes every figure, `--plot FILE.svg` the QPS–p99 curves (SVG only: the
//! PNG backend needs system font libraries for its labels).
//!
//! `linux-tuned` is `linux` with busy polling switched on ([`crate::harness::tuned`]); where
//! it ran, every ratio is also given over it (`/tuned`). `--breakdown` adds the cost
//! breakdown ([`crate::harness::cost`]) of the step at `--breakdown-rate` (added to the rates
//! if it is not one of them): where a request's CPU time goes on the server, row by row.
//!
//! Every namespace, process and log it created goes when it ends, also on error and Ctrl-C.

pub mod drive;
pub mod etc;
pub mod load;
mod plot;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use crate::harness::children::{LogDir, Topology};
use crate::harness::cost::{self, Breakdown};
use crate::harness::shim::{self, Row, CLIENT_CPU, NET, SERVER_CPU};
use cmdline::{one_line, stop_flag, Interrupted};
pub use drive::{peak_at_sla, sustained};
use drive::{Sweep, PORT, SLA_US};
use load::Step;

/// `bench memcached` options.
#[derive(Args, Debug)]
pub struct MemcachedBench {
    /// Offered rates, requests per second, comma-separated, in increasing order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10000,20000,40000,60000,80000,100000,120000,150000"
    )]
    rates: Vec<f64>,
    /// Seconds of load per rate.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Seconds to wait for answers after each step's sending window.
    #[arg(long, default_value_t = 1.0)]
    drain_secs: f64,
    /// Connections of the generator.
    #[arg(long, default_value_t = 32)]
    conns: usize,
    /// Keys in the key space.
    #[arg(long, default_value_t = 10_000)]
    keys: usize,
    /// memcached worker threads (`-t`).
    #[arg(long, default_value_t = 1)]
    threads: u32,
    /// The latency objective: p99 below this many µs.
    #[arg(long, default_value_t = SLA_US)]
    sla_us: f64,
    /// A row's sweep ends after this many consecutive overloaded steps (under 90 % of the
    /// offered rate answered, or p99 above --give-up-us).
    #[arg(long, default_value_t = 2)]
    stop_after: usize,
    /// A step whose p99 exceeds this many µs counts as overloaded.
    #[arg(long, default_value_t = 20_000.0)]
    give_up_us: f64,
    /// Seed of the workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rows, comma-separated, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "linux,embedded,inline,service"
    )]
    rows: Vec<Row>,
    /// The memcached binary.
    #[arg(long, default_value = "memcached")]
    memcached: String,
    /// Also write every figure to this file as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw the QPS–p99 curve of each row into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Also break each row's CPU time per request down (perf and /proc on the server's
    /// processes over the step at --breakdown-rate): by code, system calls, switches, packets.
    #[arg(long)]
    breakdown: bool,
    /// The offered rate of the step --breakdown measures, requests per second (added to
    /// --rates if it is not one of them).
    #[arg(long, default_value_t = 40_000.0, value_name = "QPS")]
    breakdown_rate: f64,
}

/// One row's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct RowResult {
    pub row: Row,
    pub label: &'static str,
    /// Why it did not run, if it did not.
    pub skipped: Option<String>,
    pub steps: Vec<Step>,
    /// The highest achieved QPS of a step with p99 below the objective and every request
    /// answered.
    pub peak_qps_at_sla: Option<f64>,
    /// peak_qps_at_sla / Linux's.
    pub peak_ratio: Option<f64>,
    /// The highest achieved QPS of any step with every request answered (whatever its
    /// latency), and its ratio to Linux's.
    pub max_qps: Option<f64>,
    pub max_ratio: Option<f64>,
    /// The offered rate at which the CPU per request is compared with Linux (the highest both
    /// sustained under the objective, else the highest both answered without overload).
    pub cpu_compare_qps: Option<f64>,
    /// CPU µs per request at that rate, this row and Linux.
    pub cpu_us_per_req: Option<f64>,
    pub linux_cpu_us_per_req: Option<f64>,
    /// cpu_us_per_req / Linux's.
    pub cpu_ratio: Option<f64>,
    /// Busy time of all CPUs per request at that rate / Linux's (see
    /// [`load::Step::machine_cpu_us_per_req`]).
    #[serde(default)]
    pub machine_cpu_ratio: Option<f64>,
    /// The same comparisons with the Linux tuned row, where it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_tuned: Option<Ratios>,
    /// The cost breakdown of the step at --breakdown-rate (--breakdown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<Breakdown>,
    /// What the row's server said of itself (Linux tuned: its settings, whether they can act).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_note: Option<String>,
}

/// A row's figures over another row's (Linux's or Linux tuned's).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Ratios {
    /// Peak QPS under the objective / the other's.
    pub peak_ratio: Option<f64>,
    /// Highest fully answered QPS / the other's.
    pub max_ratio: Option<f64>,
    /// The offered rate the CPU is compared at (as in [`RowResult::cpu_compare_qps`]).
    pub cpu_compare_qps: Option<f64>,
    /// CPU µs per request there, this row and the other.
    pub cpu_us_per_req: Option<f64>,
    pub base_cpu_us_per_req: Option<f64>,
    /// cpu_us_per_req / the other's.
    pub cpu_ratio: Option<f64>,
    /// Busy time of all CPUs per request there / the other's.
    pub machine_cpu_ratio: Option<f64>,
}

impl Ratios {
    /// Row `r` over row `base`, the CPU compared at the highest offered rate both sustained
    /// under `sla_us`, else the highest both answered without overload.
    pub fn of(r: &RowResult, base: &RowResult, sla_us: f64) -> Ratios {
        let over = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let common = |ok: &dyn Fn(&Step) -> bool| {
            r.steps.iter().rev().filter(|s| ok(s)).find_map(|s| {
                base.steps
                    .iter()
                    .find(|l| l.offered_qps == s.offered_qps && ok(l))
                    .map(|l| (s.clone(), l.clone()))
            })
        };
        let both = common(&|s| sustained(s, sla_us))
            .or_else(|| common(&|s| s.unanswered == 0 && s.achieved_qps >= 0.9 * s.offered_qps));
        let mut out = Ratios {
            peak_ratio: over(r.peak_qps_at_sla, base.peak_qps_at_sla),
            max_ratio: over(r.max_qps, base.max_qps),
            ..Ratios::default()
        };
        if let Some((s, l)) = both {
            out.cpu_compare_qps = Some(s.offered_qps);
            out.cpu_us_per_req = Some(s.cpu_us_per_req);
            out.base_cpu_us_per_req = Some(l.cpu_us_per_req);
            out.cpu_ratio = over(Some(s.cpu_us_per_req), Some(l.cpu_us_per_req));
            out.machine_cpu_ratio = over(
                Some(s.machine_cpu_us_per_req),
                Some(l.machine_cpu_us_per_req),
            );
        }
        out
    }
}

impl RowResult {
    /// The row `row` that ran `steps`: its peak under the objective `sla_us` and its highest
    /// fully answered QPS; the comparisons with Linux are left for [`MemcachedBench::compare`].
    pub fn of(row: Row, steps: Vec<Step>, sla_us: f64) -> RowResult {
        RowResult {
            row,
            label: row.label(),
            skipped: None,
            peak_qps_at_sla: peak_at_sla(&steps, sla_us),
            max_qps: steps
                .iter()
                .filter(|s| s.unanswered == 0)
                .map(|s| s.achieved_qps)
                .max_by(f64::total_cmp),
            steps,
            peak_ratio: None,
            max_ratio: None,
            cpu_compare_qps: None,
            cpu_us_per_req: None,
            linux_cpu_us_per_req: None,
            cpu_ratio: None,
            machine_cpu_ratio: None,
            vs_tuned: None,
            breakdown: None,
            server_note: None,
        }
    }
}

#[derive(Serialize)]
struct Report<'a> {
    rates: &'a [f64],
    seconds: f64,
    conns: usize,
    keys: usize,
    memcached_threads: u32,
    sla_us: f64,
    seed: u64,
    generator_cpu: &'static str,
    server_cpu: &'static str,
    rows: &'a [RowResult],
}

impl MemcachedBench {
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        if self.rates.is_empty() || self.rates.iter().any(|r| r.is_nan() || *r <= 0.0) {
            bail!("--rates must be positive requests per second");
        }
        if !(self.seconds > 0.0 && self.seconds <= 60.0) || self.rates.len() > 50 {
            bail!("--seconds must be in (0, 60] and --rates at most 50 steps");
        }
        if self.breakdown && !(self.breakdown_rate > 0.0 && self.breakdown_rate <= 10_000_000.0) {
            bail!("--breakdown-rate must be in (0, 10000000] requests per second");
        }
        if let Some(p) = &self.plot {
            if p.extension().and_then(|e| e.to_str()) != Some("svg") {
                bail!("--plot writes SVG only: give a FILE.svg");
            }
        }
        netns::check_privileges()?;
        if !crate::harness::can_pin() {
            bail!("bench memcached needs 2 CPUs (the generator on CPU 0, memcached on CPU 1)");
        }
        let exe = crate::harness::this_program()?;
        drive::check_tools(&self.memcached, &exe)?;
        let logs = LogDir::new("bench-memcached")?;
        let topo = Topology::build("mcbc", "mcbs", NET)?;
        let socket = format!("/tmp/corestack-mcb-{}.sock", std::process::id());
        let say = |m: &str| eprintln!("bench memcached: {m}");

        let mut results: Vec<RowResult> = Vec::new();
        for &row in &self.rows {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(Interrupted.into());
            }
            say(&format!("{} ...", row.label()));
            let r = self.run_row(row, &exe, &topo, &logs, &socket, &stop);
            let r = match r {
                Ok(r) => r,
                Err(e) if e.is::<Interrupted>() => return Err(e),
                Err(e) => {
                    let reason = one_line(&e);
                    say(&format!("{}: skipped: {reason}", row.label()));
                    results.push(RowResult {
                        skipped: Some(reason),
                        ..RowResult::of(row, Vec::new(), self.sla_us)
                    });
                    continue;
                }
            };
            let (steps, breakdown, server_note) = r;
            results.push(RowResult {
                breakdown,
                server_note,
                ..RowResult::of(row, steps, self.sla_us)
            });
        }
        self.compare(&mut results);
        print!("{}", self.render(&results));
        if let Some(path) = &self.json {
            let rates = self.rates();
            let report = Report {
                rates: &rates,
                seconds: self.seconds,
                conns: self.conns,
                keys: self.keys,
                memcached_threads: self.threads,
                sla_us: self.sla_us,
                seed: self.seed,
                generator_cpu: CLIENT_CPU.as_str(),
                server_cpu: SERVER_CPU.as_str(),
                rows: &results,
            };
            std::fs::write(path, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &self.plot {
            plot::draw(path, &results, self.sla_us)
                .with_context(|| format!("drawing {}", path.display()))?;
            println!("QPS-p99 curves: {}", path.display());
        }
        Ok(())
    }

    /// Fills the ratios against the Linux row and the Linux tuned row.
    fn compare(&self, results: &mut [RowResult]) {
        let find = |want: Row| {
            results
                .iter()
                .find(|r| r.row == want && r.skipped.is_none())
                .cloned()
        };
        let (linux, tuned) = (find(Row::Linux), find(Row::LinuxTuned));
        for r in results.iter_mut().filter(|r| r.skipped.is_none()) {
            if let Some(linux) = &linux {
                let x = Ratios::of(r, linux, self.sla_us);
                r.peak_ratio = x.peak_ratio;
                r.max_ratio = x.max_ratio;
                r.cpu_compare_qps = x.cpu_compare_qps;
                r.cpu_us_per_req = x.cpu_us_per_req;
                r.linux_cpu_us_per_req = x.base_cpu_us_per_req;
                r.cpu_ratio = x.cpu_ratio;
                r.machine_cpu_ratio = x.machine_cpu_ratio;
            }
            r.vs_tuned = tuned.as_ref().map(|t| Ratios::of(r, t, self.sla_us));
        }
    }

    /// The offered rates: --rates, with --breakdown-rate in its place when --breakdown adds it.
    fn rates(&self) -> Vec<f64> {
        let mut rates = self.rates.clone();
        if self.breakdown && !rates.contains(&self.breakdown_rate) {
            rates.push(self.breakdown_rate);
            rates.sort_by(f64::total_cmp);
        }
        rates
    }

    /// The generator's sweep these options describe.
    fn sweep(&self) -> Sweep {
        Sweep {
            rates: self.rates(),
            seconds: self.seconds,
            drain_secs: self.drain_secs,
            conns: self.conns,
            keys: self.keys,
            seed: self.seed,
            give_up_us: self.give_up_us,
            stop_after: self.stop_after,
        }
    }

    /// Starts the row's server and runs the generator against it: the steps it printed, the
    /// breakdown of the step at --breakdown-rate (--breakdown, if that step ran) and the
    /// server's note.
    fn run_row(
        &self,
        row: Row,
        exe: &std::path::Path,
        topo: &Topology,
        logs: &LogDir,
        socket: &str,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<(Vec<Step>, Option<Breakdown>, Option<String>)> {
        let mc = drive::memcached_command(&self.memcached, self.threads);
        let mc: Vec<&str> = mc.iter().map(String::as_str).collect();
        let server = shim::start(row, &mc, exe, topo, logs, socket, stop)?;
        let target = format!("{}:{PORT}", server.ip);
        let gen_log = logs.file(&format!("generator-{}.log", row.key()));
        let dir = logs.file(&format!("breakdown-{}", row.key()));
        if self.breakdown {
            std::fs::create_dir_all(&dir).context("creating the breakdown's directory")?;
        }
        let at = self.breakdown.then_some(drive::BreakdownAt {
            rate: self.breakdown_rate,
            iface: server.iface,
            dir: &dir,
        });
        let (steps, window) = self.sweep().run(
            &topo.client,
            CLIENT_CPU.as_str(),
            exe,
            &target,
            &server.cpu_pids,
            &gen_log,
            &server.log,
            stop,
            "bench memcached",
            at,
        )?;
        let note = server.note.clone();
        server.stop()?;
        Ok((steps, window.as_ref().map(Breakdown::of), note))
    }

    /// The cost breakdown's table: who waits how, the table, its legend.
    fn render_breakdown(&self, results: &[RowResult]) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "\nwhere a request's CPU time goes on the server (memcached -t {} and, in service \
             mode, the daemon), the step at {:.0} QPS offered with perf attached:",
            self.threads, self.breakdown_rate
        );
        let _ = writeln!(
            o,
            "generator on CPU {CLIENT_CPU} sleeps in epoll_pwait2; on CPU {SERVER_CPU}: Linux, \
             memcached blocks in epoll_wait; Linux tuned, the same with busy polling (epoll and \
             reads poll {} µs first); embedded, memcached's wait sleeps at once on an eventfd \
             and the engine thread naps as soon as it is idle; inline, memcached's thread drives \
             the engine, spinning up to 50 µs (a budget learnt from its idle spells) before it sleeps on the NIC queue; service, the daemon's \
             engine (adaptive polling) beside it",
            crate::harness::tuned::BUSY_POLL_US
        );
        let rows: Vec<(Row, &str, &Breakdown)> = results
            .iter()
            .filter_map(|r| r.breakdown.as_ref().map(|b| (r.row, r.label, b)))
            .collect();
        for r in results
            .iter()
            .filter(|r| r.skipped.is_none() && r.breakdown.is_none())
        {
            let _ = writeln!(
                o,
                "{}: no breakdown (the sweep ended before {:.0} QPS)",
                r.label, self.breakdown_rate
            );
        }
        if rows.is_empty() {
            return o;
        }
        o.push_str(&cost::table(&rows));
        o.push_str(&cost::legend());
        o
    }

    fn render(&self, results: &[RowResult]) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "\ncorestack bench memcached: ETC workload (mutilate's model: key GEV, value generalized \
             Pareto, 30:1 get:set), open-loop Poisson, {} connections, {} keys set beforehand, {} s per rate",
            self.conns, self.keys, self.seconds
        );
        let _ = writeln!(
            o,
            "generator (kernel stack, one thread sleeping in epoll_pwait2) on CPU {CLIENT_CPU}; \
             memcached -t {} (+ corestack's engine thread, + the daemon in service mode) on CPU \
             {SERVER_CPU}; all at {}; the embedded engine thread naps as soon as it is idle (one CPU \
             shared with memcached)",
            self.threads,
            shim::sched()
        );
        let _ = writeln!(
            o,
            "latency from each request's scheduled send time; CPU = utime+stime of the server \
             process(es) over the step / answers; all CPUs: busy time of both CPUs (generator, \
             server, and the kernel's work wherever it ran: a veth delivers a frame to the \
             receiving stack on the sender's CPU, so Linux's receive processing for memcached runs \
             on the generator's CPU) / answers; cli retx/TLP/RTO: segments the generator's \
             kernel retransmitted, its tail loss probes and timeouts\n"
        );
        for r in results {
            if let Some(why) = &r.skipped {
                let _ = writeln!(o, "{}: skipped: {why}\n", r.label);
                continue;
            }
            let _ = writeln!(o, "{}", r.label);
            let _ = writeln!(
                o,
                "  {:>11} {:>12} {:>9} {:>9} {:>10} {:>9} {:>11} {:>8}",
                "offered QPS",
                "achieved QPS",
                "p50 µs",
                "p99 µs",
                "CPU µs/req",
                "all CPUs",
                "unanswered",
                "hit %"
            );
            for s in &r.steps {
                let gets = s.hits + s.misses;
                let hit = if gets > 0 {
                    100.0 * s.hits as f64 / gets as f64
                } else {
                    0.0
                };
                let _ = writeln!(
                    o,
                    "  {:>11.0} {:>12.0} {:>9.1} {:>9.1} {:>10.2} {:>9.2} {:>10} {:>6.1} {:>14}{}",
                    s.offered_qps,
                    s.achieved_qps,
                    s.p50_us,
                    s.p99_us,
                    s.cpu_us_per_req,
                    s.machine_cpu_us_per_req,
                    s.unanswered,
                    hit,
                    format!(
                        "{}/{}/{}",
                        s.client_retrans, s.client_loss_probes, s.client_timeouts
                    ),
                    if s.send_lag_p99_us > 50.0 {
                        format!("  (generator lag p99 {:.0} µs)", s.send_lag_p99_us)
                    } else {
                        String::new()
                    }
                );
            }
            let _ = writeln!(
                o,
                "  peak QPS with p99 < {:.0} µs: {}\n",
                self.sla_us,
                r.peak_qps_at_sla
                    .map_or("none".to_string(), |q| format!("{q:.0}"))
            );
        }
        let f = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
        let tuned = results
            .iter()
            .any(|r| r.row == Row::LinuxTuned && r.skipped.is_none());
        // "/Linux" and, with a tuned row, "/tuned" after each compared figure.
        let ratios = |o: &mut String, linux: Option<f64>, t: Option<f64>, w: usize| {
            let _ = write!(o, " {:>w$}", f(linux, 2));
            if tuned {
                let _ = write!(o, " {:>6}", f(t, 2));
            }
        };
        let heads = |o: &mut String, w: usize| {
            let _ = write!(o, " {:>w$}", "/Linux");
            if tuned {
                let _ = write!(o, " {:>6}", "/tuned");
            }
        };
        let _ = write!(o, "{:<20} {:>14}", "", "peak QPS @SLA");
        heads(&mut o, 7);
        let _ = write!(o, " {:>10}", "max QPS");
        heads(&mut o, 7);
        let _ = write!(o, " {:>9} {:>11}", "CPU at", "CPU µs/req");
        heads(&mut o, 7);
        let _ = write!(o, " {:>14}", "all CPUs/Linux");
        if tuned {
            let _ = write!(o, " {:>6}", "/tuned");
        }
        o.push('\n');
        for r in results.iter().filter(|r| r.skipped.is_none()) {
            let t = r.vs_tuned.unwrap_or_default();
            let _ = write!(o, "{:<20} {:>14}", r.label, f(r.peak_qps_at_sla, 0));
            ratios(&mut o, r.peak_ratio, t.peak_ratio, 7);
            let _ = write!(o, " {:>10}", f(r.max_qps, 0));
            ratios(&mut o, r.max_ratio, t.max_ratio, 7);
            let _ = write!(
                o,
                " {:>9} {:>11}",
                f(r.cpu_compare_qps, 0),
                f(r.cpu_us_per_req, 2)
            );
            ratios(&mut o, r.cpu_ratio, t.cpu_ratio, 7);
            ratios(&mut o, r.machine_cpu_ratio, t.machine_cpu_ratio, 14);
            o.push('\n');
        }
        let _ = writeln!(
            o,
            "(targets: peak QPS at the SLA >= 2x Linux, CPU per request <= 0.5x Linux; max QPS: the \
             highest achieved with every request answered, whatever the latency; CPU compared at \
             the highest offered rate both rows sustained under the SLA, else at the highest both \
             ran without overload{})",
            if tuned {
                "; /tuned: the same over Linux tuned, compared at the rate this row and Linux \
                 tuned both sustained (the CPU columns show the rate and figure against Linux)"
            } else {
                ""
            }
        );
        for r in results.iter().filter(|r| r.skipped.is_none()) {
            if let Some(n) = &r.server_note {
                let _ = writeln!(o, "{}: {n}", r.label);
            }
        }
        if self.breakdown {
            o.push_str(&self.render_breakdown(results));
        }
        o
    }
}
