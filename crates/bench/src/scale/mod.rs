//! `corestack bench scale`: what more engines buy, next to Linux with as many queues and
//! server threads.
//!
//! Two parts:
//! - **Work per request** (`work`): one thread runs everything, so its CPU time is the
//!   work: corestack with 1…N server engines on a multi-queue `mem` wire (frames steered to
//!   their owner, or spread at random and handed over), Linux over loopback sockets.
//! - **Messages per second** on a veth of N queues in native XDP mode: `corestack serve echo
//!   --cores N` against Linux's `bench conn-echo --procs N` (SO_REUSEPORT), each driven by N
//!   kernel client processes (`bench conn-client`) over many connections with one message in
//!   flight each; QPS(N)/(N·QPS(1)) per stack.
//! - **memcached** (`memcached`): memcached `-t N` on a veth of N queues, on Linux and under
//!   `corestack exec --cores N`, each under `bench memcached`'s open-loop ETC generator over a
//!   rate sweep: the peak QPS with p99 under the objective, per core, and QPS(N)/(N·QPS(1)).

mod memcached;
mod work;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use serde_json::Value;

use crate::harness::children::{run_client, spawn, wait_ready, LogDir};
use crate::sweep::{busy_small_rings, ConnClient};
use cmdline::stop_flag;
pub use work::Spread;

/// `bench scale` options.
#[derive(Args, Debug)]
pub struct ScaleBench {
    /// Engine counts (and Linux server threads, and NIC queues) to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4])]
    engines: Vec<usize>,
    /// Connections, each with one message in flight.
    #[arg(long, default_value_t = 256)]
    conns: usize,
    /// Message size, bytes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    size: u32,
    /// Rounds (a message on every connection and its echo) per work-per-request measurement.
    #[arg(long, default_value_t = 500)]
    rounds: usize,
    /// Work-per-request measurements per cell, interleaved; the median is shown.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Measured seconds per messages-per-second row.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Pin the messages-per-second rows' servers and clients to `bench --server-cpus` /
    /// `--client-cpus` (by default they are not pinned: N engines need N CPUs of their own).
    /// The memcached rows always pin, as `bench memcached` does.
    #[arg(long)]
    pin: bool,
    /// Only the work-per-request part (no namespaces, no root).
    #[arg(long)]
    work_only: bool,
    #[command(flatten)]
    mc: memcached::McOptions,
    /// Also write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// One work-per-request row.
#[derive(Debug, Serialize)]
struct WorkRow {
    engines: usize,
    /// CPU ns per request, frames steered to their owner.
    owner_ns: f64,
    /// CPU ns per request, frames spread at random (handed over).
    random_ns: f64,
    /// Handoffs per request with random spreading.
    random_handoffs: f64,
}

/// One messages-per-second row.
#[derive(Debug, Serialize)]
struct RateRow {
    engines: usize,
    linux_rt_per_s: f64,
    corestack_rt_per_s: f64,
    linux_p99_us: f64,
    corestack_p99_us: f64,
    note: Option<String>,
}

impl ScaleBench {
    /// Runs the parts and prints their tables. Errors: bad options, not root (every part but
    /// the first), a server that does not start, memcached or the shim missing, Ctrl-C.
    pub fn run(self) -> Result<()> {
        if self.engines.is_empty() || self.engines.iter().any(|&n| n == 0 || n > 64) {
            bail!("--engines must list counts of 1 to 64");
        }
        if self.conns == 0 || self.conns > 20_000 || self.rounds == 0 {
            bail!("--conns must be 1 to 20000 and --rounds at least 1");
        }
        crate::harness::check_seconds("--seconds", self.seconds, 60.0)?;
        memcached::validate(&self.mc)?;
        if !self.work_only && !self.mc.no_memcached {
            // Before the first part, so that a missing memcached costs no time.
            let exe = crate::harness::this_program()?;
            crate::memcached::drive::check_tools(&self.mc.memcached, &exe)?;
        }
        let size = self.size as usize;
        println!(
            "corestack bench scale: {} connections, {size}-byte messages, one in flight each",
            self.conns
        );
        // Interleaved repeats: a slow spell of the machine hits every cell alike.
        let repeats = self.repeats.max(1);
        let mut linux = Vec::new();
        let mut cells: Vec<[Vec<work::Work>; 2]> = self
            .engines
            .iter()
            .map(|_| [Vec::new(), Vec::new()])
            .collect();
        for _ in 0..repeats {
            linux.push(work::linux(self.conns, self.rounds, size)?);
            for (k, &n) in self.engines.iter().enumerate() {
                for (s, spread) in [Spread::Owner, Spread::Random].into_iter().enumerate() {
                    cells[k][s].push(work::corestack(n, spread, self.conns, self.rounds, size)?);
                }
            }
        }
        let linux_ns = median(linux);
        let work_rows: Vec<WorkRow> = self
            .engines
            .iter()
            .zip(cells)
            .map(|(&n, [owner, random])| WorkRow {
                engines: n,
                owner_ns: median(owner.iter().map(|w| w.ns_per_request).collect()),
                random_ns: median(random.iter().map(|w| w.ns_per_request).collect()),
                random_handoffs: median(random.iter().map(|w| w.handoffs_per_request).collect()),
            })
            .collect();
        print_work(&work_rows, linux_ns, self.rounds, repeats);
        let mut rate_rows = Vec::new();
        let mut mc_rows = Vec::new();
        if !self.work_only {
            rate_rows = self.rates()?;
            print_rates(&rate_rows, &self);
            if !self.mc.no_memcached {
                let stop = stop_flag()?;
                let exe = crate::harness::this_program()?;
                let logs = LogDir::new("scale-memcached")?;
                mc_rows = memcached::rows(&self.engines, &self.mc, &exe, &logs, &stop)?;
                memcached::print(&mc_rows, &self.mc);
            }
        }
        if let Some(path) = &self.json {
            let v = serde_json::json!({
                "conns": self.conns,
                "size": size,
                "linux_loopback_ns_per_request": linux_ns,
                "work": work_rows,
                "rates": rate_rows,
                "memcached_sla_us": self.mc.sla_us,
                "memcached": mc_rows,
            });
            std::fs::write(path, serde_json::to_string_pretty(&v)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// The messages-per-second rows: per engine count, Linux then corestack.
    fn rates(&self) -> Result<Vec<RateRow>> {
        netns::check_privileges()?;
        let stop = stop_flag()?;
        let exe = crate::harness::this_program()?;
        let logs = LogDir::new("scale")?;
        let mut rows = Vec::new();
        for (k, &n) in self.engines.iter().enumerate() {
            let mut row = RateRow {
                engines: n,
                linux_rt_per_s: f64::NAN,
                corestack_rt_per_s: f64::NAN,
                linux_p99_us: f64::NAN,
                corestack_p99_us: f64::NAN,
                note: None,
            };
            for stack in ["Linux", "corestack"] {
                let net = 186 + (k % 8) as u8;
                let pair = netns::Pair::with_queues("sc", net, n as u32)?;
                let core_ip = pair.core_ip.clone();
                let queues = n.to_string();
                let port = "7";
                let server_log = logs.file(&format!("server-{stack}-{n}.log"));
                let cidr = format!("{core_ip}/24");
                let args: Vec<&str> = if stack == "Linux" {
                    netns::addr_add(&pair.core, "vc", &cidr)?;
                    vec![
                        "bench",
                        "conn-echo",
                        "--ip",
                        &core_ip,
                        "--port",
                        port,
                        "--procs",
                        &queues,
                    ]
                } else {
                    let mut args = vec![
                        "serve", "echo", "--iface", "vc", "--ip", &cidr, "--port", port,
                        "--driver", "af_xdp", "--cores", &queues,
                    ];
                    args.extend(busy_small_rings("embedded"));
                    args
                };
                let server_cpus = self.pin.then(|| crate::harness::SERVER_CPU.as_str());
                let mut server = spawn(&pair.core, server_cpus, &exe, &args, &server_log)?;
                wait_ready(&mut server, "listening", &server_log, false, &stop)
                    .with_context(|| format!("starting the {stack} server on {n} queues"))?;
                let target = format!("{core_ip}:{port}");
                let share = self.conns.div_ceil(n);
                let secs = self.seconds.to_string();
                let size = self.size.to_string();
                let results: Vec<Result<Value>> = std::thread::scope(|scope| {
                    let runs: Vec<_> = (0..n)
                        .map(|c| {
                            let conns = share.min(self.conns.saturating_sub(c * share)).max(1);
                            let conns = conns.to_string();
                            let (pair, exe, logs, stop) = (&pair, &exe, &logs, &stop);
                            let (target, secs, size) = (&target, &secs, &size);
                            let cpus = self.pin.then(|| crate::harness::CLIENT_CPU.as_str());
                            scope.spawn(move || {
                                let log = logs.file(&format!("client-{stack}-{n}-{c}.log"));
                                let args = ConnClient::args(target, &conns, size, secs);
                                let child = spawn(&pair.linux, cpus, exe, &args, &log)?;
                                let timeout = Duration::from_secs_f64(self.seconds + 60.0);
                                run_client(child, &log, timeout, stop)
                            })
                        })
                        .collect();
                    runs.into_iter()
                        .map(|h| {
                            h.join()
                                .unwrap_or_else(|_| Err(anyhow::anyhow!("a client panicked")))
                        })
                        .collect()
                });
                let (mut rate, mut p99, mut notes) = (0.0, 0.0f64, Vec::new());
                for r in results {
                    match r {
                        Ok(v) => {
                            rate += v["round_trips_per_s"].as_f64().unwrap_or(0.0);
                            p99 = p99.max(v["p99_us"].as_f64().unwrap_or(f64::NAN));
                            if let Some(note) = v["note"].as_str() {
                                notes.push(format!("{stack}: {note}"));
                            }
                        }
                        Err(e) if e.downcast_ref::<cmdline::Interrupted>().is_some() => {
                            return Err(e)
                        }
                        Err(e) => notes.push(format!("{stack}: {}", cmdline::one_line(&e))),
                    }
                }
                if stack == "Linux" {
                    (row.linux_rt_per_s, row.linux_p99_us) = (rate, p99);
                } else {
                    (row.corestack_rt_per_s, row.corestack_p99_us) = (rate, p99);
                }
                if !notes.is_empty() {
                    let prev = row.note.take().map(|p| p + "; ").unwrap_or_default();
                    row.note = Some(prev + &notes.join("; "));
                }
                server.terminate(Duration::from_secs(5))?;
                eprintln!("scale: {stack} on {n} queue(s): {rate:.0} round trips/s");
            }
            rows.push(row);
        }
        Ok(rows)
    }
}

/// The median of `v` (NaN when empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The work-per-request table.
fn print_work(rows: &[WorkRow], linux_ns: f64, rounds: usize, repeats: usize) {
    println!(
        "\nwork per request: one thread runs both ends ({rounds} rounds), its CPU time per \
         request (a message and its echo; client and server stacks and the application \
         loop together), ns; median of {repeats} interleaved runs"
    );
    println!("Linux, loopback sockets in the same thread: {linux_ns:.0} ns per request");
    println!(
        "{:>7} {:>14} {:>9} {:>14} {:>9} {:>15} {:>12}",
        "engines", "steered ns", "vs 1", "random ns", "vs 1", "handoffs/req", "steered c/L"
    );
    let base = rows.iter().find(|r| r.engines == 1);
    for r in rows {
        let vs = |v: f64, b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.2}", v / b));
        println!(
            "{:>7} {:>14.0} {:>9} {:>14.0} {:>9} {:>15.2} {:>12.2}",
            r.engines,
            r.owner_ns,
            vs(r.owner_ns, base.map(|b| b.owner_ns)),
            r.random_ns,
            vs(r.random_ns, base.map(|b| b.random_ns)),
            r.random_handoffs,
            r.owner_ns / linux_ns,
        );
    }
    println!(
        "steered: the server's NIC puts every frame on its owner's queue (its RSS programmed \
         with the engines' key and table); random: a queue at random per frame (veth, TAP), \
         frames handed to their owner"
    );
}

/// The messages-per-second table.
fn print_rates(rows: &[RateRow], opts: &ScaleBench) {
    println!(
        "\nmessages per second on a veth of N queues (native XDP), {} s per row, N kernel client \
         processes ({}); Linux: bench conn-echo --procs N (SO_REUSEPORT, epoll polled without \
         sleeping); corestack: serve echo --cores N, embedded, --poll busy; servers on CPUs {}",
        opts.seconds,
        if opts.pin {
            crate::harness::CLIENT_CPU.as_str()
        } else {
            "not pinned"
        },
        if opts.pin {
            crate::harness::SERVER_CPU.as_str()
        } else {
            "not pinned"
        },
    );
    println!(
        "{:>7} {:>12} {:>12} {:>6} {:>11} {:>11} {:>11} {:>11}",
        "engines",
        "rt/s Linux",
        "rt/s core",
        "c/L",
        "p99 Linux",
        "p99 core",
        "scale Lx",
        "scale core"
    );
    let base = rows.iter().find(|r| r.engines == 1);
    for r in rows {
        let scale = |v: f64, b: Option<f64>| {
            b.map_or("-".to_string(), |b| {
                format!("{:.2}", v / (r.engines as f64 * b))
            })
        };
        println!(
            "{:>7} {:>12.0} {:>12.0} {:>6.2} {:>11.1} {:>11.1} {:>11} {:>11}",
            r.engines,
            r.linux_rt_per_s,
            r.corestack_rt_per_s,
            r.corestack_rt_per_s / r.linux_rt_per_s,
            r.linux_p99_us,
            r.corestack_p99_us,
            scale(r.linux_rt_per_s, base.map(|b| b.linux_rt_per_s)),
            scale(r.corestack_rt_per_s, base.map(|b| b.corestack_rt_per_s)),
        );
        if let Some(n) = &r.note {
            println!("        note: {n}");
        }
    }
    println!("scale: QPS(N) / (N · QPS(1)); a machine with fewer CPUs than N engines plus N clients is oversubscribed");
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        scale: ScaleBench,
    }

    /// `--work-only` runs without root, namespaces or memcached (the memcached binary named
    /// here does not exist) and writes a work row per engine count and no memcached rows.
    #[test]
    fn work_only_needs_no_memcached_and_writes_work_rows() {
        let json = std::env::temp_dir().join(format!("scale-work-{}.json", std::process::id()));
        let args = [
            "t",
            "--work-only",
            "--engines",
            "1,2",
            "--conns",
            "4",
            "--rounds",
            "3",
            "--repeats",
            "1",
            "--memcached",
            "no-such-memcached",
            "--json",
        ];
        let cli =
            Cli::try_parse_from(args.iter().copied().chain([json.to_str().unwrap()])).unwrap();
        cli.scale.run().unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let _ = std::fs::remove_file(&json);
        let work = v["work"].as_array().unwrap();
        assert_eq!(work.len(), 2);
        for (row, n) in work.iter().zip([1, 2]) {
            assert_eq!(row["engines"], n);
            assert!(row["owner_ns"].as_f64().unwrap() > 0.0, "{row}");
        }
        assert_eq!(v["memcached"].as_array().unwrap().len(), 0);
        assert_eq!(v["rates"].as_array().unwrap().len(), 0);
    }

    /// Bad memcached options are refused before anything runs.
    #[test]
    fn bad_memcached_options_are_refused() {
        let cli = Cli::try_parse_from(["t", "--work-only", "--mc-seconds", "0"]).unwrap();
        let e = cli.scale.run().unwrap_err();
        assert!(e.to_string().contains("--mc-seconds"), "{e}");
    }
}
