//! `bench scale`'s memcached rows: per engine count N, memcached `-t N` on a veth of N queues,
//! on Linux (the kernel's address on the veth) and under `corestack exec --cores N` (embedded
//! mode: N engine threads in memcached's process, the shim), each driven by `bench memcached`'s
//! open-loop ETC generator over a rate sweep; the peak QPS whose p99 meets the objective, by
//! `bench memcached`'s definition ([`crate::memcached::drive::peak_at_sla`]).
//!
//! ```text
//!  namespace sml… (generator, --client-cpus)     namespace smc… (memcached, --server-cpus)
//!  vl 10.196.1.1/24 ── veth, N rx and tx queues each end ── vc 10.196.1.2/24
//!                                 (Linux: the kernel's address; corestack: its own via af_xdp)
//! ```
//!
//! A new pair of namespaces per row, so that no row inherits another's XDP program or
//! neighbour cache. The generator and the server run under [`shim::sched`] (real-time priority
//! where it is granted, normal priority with a note where it is refused), pinned to the
//! `bench --client-cpus` and `--server-cpus` lists.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use crate::harness::children::{last_line, LogDir};
use crate::harness::shim::{self, CLIENT_CPU, SERVER_CPU};
use crate::memcached::drive::{self, Sweep, PORT, SLA_US};
use crate::memcached::load::Step;
use cmdline::{one_line, Interrupted};

/// The subnet octet of the rows' veth: 10.196.1.0/24 (and up, one per engine count).
const NET: u8 = 196;
/// Seconds each step waits for answers after its sending window.
const DRAIN_SECS: f64 = 0.5;

/// The memcached rows' options (flattened into `bench scale`'s).
#[derive(Args, Debug, Clone)]
pub struct McOptions {
    /// Skip the memcached rows.
    #[arg(long)]
    pub no_memcached: bool,
    /// Offered rates of the memcached sweep per engine, requests per second, in increasing
    /// order; the row of N engines is offered N times each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10000,20000,30000,40000,50000,60000,70000,80000,90000,100000,110000,\
                         120000,140000,160000,180000,200000"
    )]
    pub mc_rates: Vec<f64>,
    /// Seconds of load per rate.
    #[arg(long, default_value_t = 1.0)]
    pub mc_seconds: f64,
    /// The most seconds one sweep may spend in its steps (each: --mc-seconds of load and
    /// 0.5 s for the answers); the rates that do not fit are not offered. A sweep also ends
    /// after two steps in a row miss the objective.
    #[arg(long, default_value_t = 25.0)]
    pub mc_sweep_secs: f64,
    /// The generator's connections.
    #[arg(long, default_value_t = 32)]
    pub mc_conns: usize,
    /// The objective: p99 below this many µs (from each request's scheduled send time).
    #[arg(long, default_value_t = SLA_US)]
    pub sla_us: f64,
    /// The memcached binary.
    #[arg(long, default_value = "memcached")]
    pub memcached: String,
}

/// One stack's sweep at one engine count.
#[derive(Debug, Serialize)]
pub struct McStack {
    /// Peak achieved QPS of a step with p99 under the objective and every request answered;
    /// None if no step met it.
    pub peak_qps_at_sla: Option<f64>,
    /// The cores the per-core figure divides by: the server's threads (Linux: memcached's N
    /// workers; corestack: those and its N engines), at most the CPUs of `--server-cpus`.
    pub cores: usize,
    /// The server process's CPU time (utime + stime) per second at the peak step: the cores
    /// it kept busy.
    pub busy_cores_at_peak: Option<f64>,
    /// Every step of the sweep.
    pub steps: Vec<Step>,
    /// Why it did not run, if it did not.
    pub skipped: Option<String>,
}

impl McStack {
    /// Peak QPS per counted core.
    fn per_core(&self) -> Option<f64> {
        self.peak_qps_at_sla.map(|q| q / self.cores.max(1) as f64)
    }
}

/// One engine count's memcached row: Linux and corestack side by side.
#[derive(Debug, Serialize)]
pub struct McRow {
    /// N: engines, memcached threads, and veth queues.
    pub engines: usize,
    pub linux: McStack,
    pub corestack: McStack,
}

/// How many CPUs a `taskset -c` list names (`0-3,8,10-11`, with `-N:S` strides); None if it
/// does not parse.
pub fn cpu_count(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.split(',') {
        let (range, stride) = match part.split_once(':') {
            Some((r, s)) => (r, s.trim().parse::<usize>().ok().filter(|&s| s > 0)?),
            None => (part, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>().ok()?, b.trim().parse().ok()?),
            None => {
                let c = range.trim().parse::<usize>().ok()?;
                (c, c)
            }
        };
        if hi < lo {
            return None;
        }
        n += (hi - lo) / stride + 1;
    }
    Some(n)
}

/// The sweep `o` asks for at `n` engines: the per-engine rates times `n`, as many as fit in
/// `--mc-sweep-secs` (at least one), ended by two steps in a row over the objective.
pub fn sweep(o: &McOptions, n: usize) -> Sweep {
    let per_step = o.mc_seconds + DRAIN_SECS;
    let fit = ((o.mc_sweep_secs / per_step).floor() as usize).max(1);
    Sweep {
        rates: o.mc_rates.iter().take(fit).map(|r| r * n as f64).collect(),
        seconds: o.mc_seconds,
        drain_secs: DRAIN_SECS,
        conns: o.mc_conns,
        keys: 10_000,
        seed: 1,
        give_up_us: o.sla_us,
        stop_after: 2,
    }
}

/// Errors for options that cannot run.
pub fn validate(o: &McOptions) -> Result<()> {
    if o.mc_rates.is_empty() || o.mc_rates.iter().any(|r| !(*r > 0.0 && *r <= 5_000_000.0)) {
        bail!("--mc-rates must be rates in (0, 5000000] requests per second");
    }
    crate::harness::check_seconds("--mc-seconds", o.mc_seconds, 60.0)?;
    crate::harness::check_seconds("--mc-sweep-secs", o.mc_sweep_secs, 600.0)?;
    if o.mc_conns == 0 || o.mc_conns > 4000 || o.sla_us.is_nan() || o.sla_us <= 0.0 {
        bail!("--mc-conns must be 1 to 4000 and --sla-us positive");
    }
    Ok(())
}

/// Runs the memcached rows for every engine count: Linux, then corestack, one server at a
/// time. A stack that fails is kept with the reason; Ctrl-C ends them all ([`Interrupted`]).
pub fn rows(
    engines: &[usize],
    o: &McOptions,
    exe: &Path,
    logs: &LogDir,
    stop: &AtomicBool,
) -> Result<Vec<McRow>> {
    drive::check_tools(&o.memcached, exe)?;
    let server_cpus = cpu_count(SERVER_CPU.as_str());
    let mut out = Vec::new();
    for (k, &n) in engines.iter().enumerate() {
        let net = NET + (k % 8) as u8;
        let run = |linux: bool| -> Result<McStack> {
            let threads = if linux { n } else { 2 * n };
            let cores = server_cpus.map_or(threads, |c| threads.min(c));
            let mut st = McStack {
                peak_qps_at_sla: None,
                cores,
                busy_cores_at_peak: None,
                steps: Vec::new(),
                skipped: None,
            };
            match stack(linux, n, net, o, exe, logs, stop) {
                Ok(steps) => {
                    st.peak_qps_at_sla = drive::peak_at_sla(&steps, o.sla_us);
                    st.busy_cores_at_peak = steps
                        .iter()
                        .find(|s| Some(s.achieved_qps) == st.peak_qps_at_sla)
                        .map(|s| s.cpu_us_per_req * s.achieved_qps / 1e6);
                    st.steps = steps;
                }
                Err(e) if e.is::<Interrupted>() => return Err(e),
                Err(e) => st.skipped = Some(one_line(&e)),
            }
            let name = if linux { "Linux" } else { "corestack" };
            eprintln!(
                "bench scale: memcached -t {n}, {name}: peak {} QPS with p99 < {:.0} µs{}",
                st.peak_qps_at_sla
                    .map_or("none".to_string(), |q| format!("{q:.0}")),
                o.sla_us,
                st.skipped
                    .as_ref()
                    .map_or(String::new(), |w| format!(" (skipped: {w})")),
            );
            Ok(st)
        };
        let linux = run(true)?;
        let corestack = run(false)?;
        out.push(McRow {
            engines: n,
            linux,
            corestack,
        });
    }
    Ok(out)
}

/// One sweep: memcached `-t n` on a new veth of `n` queues (subnet 10.`net`.1.0/24), on Linux
/// or under `corestack exec --cores n`, and the generator against it.
fn stack(
    linux: bool,
    n: usize,
    net: u8,
    o: &McOptions,
    exe: &Path,
    logs: &LogDir,
    stop: &AtomicBool,
) -> Result<Vec<Step>> {
    if stop.load(Ordering::Relaxed) {
        return Err(Interrupted.into());
    }
    let key = if linux { "linux" } else { "corestack" };
    let pair = netns::Pair::with_queues("sm", net, n as u32)?;
    let cidr = format!("{}/24", pair.core_ip);
    let mc = drive::memcached_command(&o.memcached, n as u32);
    let log = logs.file(&format!("memcached-{key}-{n}.log"));
    let mut server = if linux {
        netns::addr_add(&pair.core, "vc", &cidr)?;
        let args: Vec<&str> = mc[1..].iter().map(String::as_str).collect();
        shim::spawn(
            &pair.core,
            SERVER_CPU.as_str(),
            Path::new(&mc[0]),
            &args,
            &log,
        )?
    } else {
        let cores = n.to_string();
        let mut args = vec![
            "exec", "--cores", &cores, "--iface", "vc", "--ip", &cidr, "--",
        ];
        args.extend(mc.iter().map(String::as_str));
        shim::spawn(&pair.core, SERVER_CPU.as_str(), exe, &args, &log)?
    };
    let pid = server.id();
    let comm = Path::new(&o.memcached)
        .file_name()
        .and_then(|c| c.to_str())
        .unwrap_or("memcached");
    shim::wait_comm(pid, comm).with_context(|| last_line(&log))?;
    let target = format!("{}:{PORT}", pair.core_ip);
    let gen_log = logs.file(&format!("generator-{key}-{n}.log"));
    eprintln!(
        "bench scale: memcached -t {n} on {}, {n} queue(s) ...",
        if linux {
            "Linux".to_string()
        } else {
            format!("corestack exec --cores {n}")
        }
    );
    let (steps, _) = sweep(o, n).run(
        &pair.linux,
        CLIENT_CPU.as_str(),
        exe,
        &target,
        &[pid],
        &gen_log,
        &log,
        stop,
        "bench scale",
        None,
    )?;
    server.terminate(Duration::from_secs(3))?;
    Ok(steps)
}

/// The memcached table.
pub fn print(rows: &[McRow], o: &McOptions) {
    println!(
        "\nmemcached -t N, Facebook's ETC workload (bench memcached's generator: one thread, open \
         loop, {} connections, {} s per rate, rates per engine {}..{} times N), on a veth of N \
         queues; Linux: memcached on the kernel stack; corestack: corestack exec --cores N \
         (embedded, N engines); generator on CPUs {CLIENT_CPU}, memcached on CPUs {SERVER_CPU}, at {}",
        o.mc_conns,
        o.mc_seconds,
        o.mc_rates.first().copied().unwrap_or(0.0),
        o.mc_rates.last().copied().unwrap_or(0.0),
        shim::sched(),
    );
    println!(
        "{:>7} {:>11} {:>11} {:>6} {:>9} {:>11} {:>11} {:>6} {:>9} {:>10} {:>12}",
        "engines",
        "peak Linux",
        "peak core",
        "c/L",
        "cores L/c",
        "QPS/core L",
        "QPS/core c",
        "c/L",
        "scale Lx",
        "scale core",
        "busy L/c"
    );
    let base = rows.iter().find(|r| r.engines == 1);
    let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    for r in rows {
        let (l, c) = (&r.linux, &r.corestack);
        let scale = |v: Option<f64>, b: Option<f64>| ratio(v, b.map(|b| b * r.engines as f64));
        println!(
            "{:>7} {:>11} {:>11} {:>6} {:>9} {:>11} {:>11} {:>6} {:>9} {:>10} {:>12}",
            r.engines,
            f(l.peak_qps_at_sla, 0),
            f(c.peak_qps_at_sla, 0),
            f(ratio(c.peak_qps_at_sla, l.peak_qps_at_sla), 2),
            format!("{}/{}", l.cores, c.cores),
            f(l.per_core(), 0),
            f(c.per_core(), 0),
            f(ratio(c.per_core(), l.per_core()), 2),
            f(
                scale(
                    l.peak_qps_at_sla,
                    base.and_then(|b| b.linux.peak_qps_at_sla)
                ),
                2
            ),
            f(
                scale(
                    c.peak_qps_at_sla,
                    base.and_then(|b| b.corestack.peak_qps_at_sla)
                ),
                2
            ),
            format!(
                "{}/{}",
                f(l.busy_cores_at_peak, 2),
                f(c.busy_cores_at_peak, 2)
            ),
        );
        for (name, s) in [("Linux", l), ("corestack", c)] {
            if let Some(why) = &s.skipped {
                println!("        {name}: skipped: {why}");
            }
        }
    }
    println!(
        "peak: the highest achieved QPS of a step with p99 < {:.0} µs and every request \
         answered; scale: QPS(N) / (N · QPS(1)); a core: a CPU the server may use, at most one \
         per server thread (Linux: memcached's N workers; corestack: those and its N engine \
         threads), at most the CPUs of --server-cpus; over veth the kernel's receive work runs \
         on the sender's CPU (the generator's), counted for neither; busy: the server \
         process's CPU seconds per second at its peak step",
        o.sla_us
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        mc: McOptions,
    }

    fn opts(args: &[&str]) -> McOptions {
        let mut v = vec!["t"];
        v.extend(args);
        Cli::try_parse_from(v).unwrap().mc
    }

    #[test]
    fn cpu_lists_count_as_taskset_reads_them() {
        assert_eq!(cpu_count("1"), Some(1));
        assert_eq!(cpu_count("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_count("0-7:2"), Some(4));
        assert_eq!(cpu_count("3-1"), None);
        assert_eq!(cpu_count("a"), None);
        assert_eq!(cpu_count("0-7:0"), None);
    }

    #[test]
    fn sweep_scales_rates_with_engines_and_fits_the_time_limit() {
        let o = opts(&["--mc-rates", "10,20,30,40", "--mc-seconds", "1"]);
        let s = sweep(&o, 3);
        assert_eq!(s.rates, vec![30.0, 60.0, 90.0, 120.0]);
        assert_eq!(s.give_up_us, SLA_US);
        // 1 s of load and 0.5 s of drain per step: 4 s hold two steps.
        let o = opts(&["--mc-rates", "10,20,30,40", "--mc-sweep-secs", "4"]);
        assert_eq!(sweep(&o, 1).rates, vec![10.0, 20.0]);
        // A limit shorter than one step still offers the first rate.
        let o = opts(&["--mc-sweep-secs", "0.1"]);
        assert_eq!(sweep(&o, 2).rates, vec![20_000.0]);
        assert!(validate(&o).is_ok());
        assert!(validate(&opts(&["--mc-rates", "0"])).is_err());
        assert!(validate(&opts(&["--mc-seconds", "0"])).is_err());
    }

    #[test]
    fn peak_is_the_highest_step_under_the_objective_and_per_core_divides_by_counted_cores() {
        let step = |qps: f64, p99: f64, unanswered: u64| Step {
            offered_qps: qps,
            requests: qps as u64,
            completed: qps as u64 - unanswered,
            unanswered,
            achieved_qps: qps,
            p50_us: p99 / 2.0,
            p99_us: p99,
            p999_us: p99,
            max_us: p99,
            send_lag_p99_us: 0.0,
            hits: 0,
            misses: 0,
            stored: 0,
            errors: 0,
            server_cpu_s: 0.5,
            cpu_us_per_req: 10.0,
            machine_cpu_us_per_req: 0.0,
            client_retrans: 0,
            client_loss_probes: 0,
            client_timeouts: 0,
        };
        // 30 000 misses the objective, 40 000 meets it, 50 000 left requests unanswered.
        let steps = vec![
            step(20_000.0, 100.0, 0),
            step(30_000.0, 900.0, 0),
            step(40_000.0, 400.0, 0),
            step(50_000.0, 200.0, 3),
        ];
        let peak = drive::peak_at_sla(&steps, SLA_US);
        assert_eq!(peak, Some(40_000.0));
        let st = McStack {
            peak_qps_at_sla: peak,
            cores: 4,
            busy_cores_at_peak: None,
            steps,
            skipped: None,
        };
        assert_eq!(st.per_core(), Some(10_000.0));
    }
}
