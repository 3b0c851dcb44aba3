//! `corestack bench conn-sweep`: the points, their client processes, their memory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde_json::Value;

use super::*;
use crate::harness::tuned::BusyPollSysctls;

/// `bench conn-sweep` options.
#[derive(Args, Debug)]
pub struct ConnSweep {
    /// Concurrent connections per point.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 10, 100, 1000, 10000])]
    counts: Vec<u32>,
    /// Measured seconds per point and stack (after the connections are open).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Message size in bytes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    size: u32,
    /// Also write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw round trips/s and p99 against the connection count to FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Also run the Linux server tuned: busy polling on (net.core.busy_poll/busy_read while it
    /// runs, SO_BUSY_POLL on its sockets, epoll busy poll where the kernel has it).
    #[arg(long)]
    linux_tuned: bool,
}

impl ConnSweep {
    /// Builds the namespaces, runs every connection count against each server, prints the
    /// table and writes `--json`/`--plot`. Errors: not root, a server that does not start,
    /// Ctrl-C (a count that cannot be reached is shown in the table instead).
    pub fn run(self) -> Result<()> {
        let counts_ok =
            !self.counts.is_empty() && self.counts.iter().all(|&c| c > 0 && c <= 100_000);
        let counts_rule = "--counts must be 1..=100000 each";
        check_options(self.seconds, counts_ok, counts_rule, self.plot.as_ref())?;
        let max = *self.counts.iter().max().expect("not empty");
        // Each side needs a descriptor per connection (the corestack server does not: its
        // sockets are not file descriptors). Children inherit the limit.
        let want = u64::from(max) + 256;
        let (soft, hard) = rlimit::Resource::NOFILE.get().unwrap_or((1024, 1024));
        let nofile = if soft < want {
            // Root may raise the hard limit too (up to fs.nr_open).
            rlimit::Resource::NOFILE
                .set(want, want.max(hard))
                .map(|()| want)
                .or_else(|_| {
                    rlimit::Resource::NOFILE
                        .set(want.min(hard), hard)
                        .map(|()| want.min(hard))
                })
                .unwrap_or(soft)
        } else {
            soft
        };
        let bed = Bed::new("conn-sweep", 162)?;
        // A client process holds at most CLIENT_CONNS connections (a descriptor each), from
        // an address of its own (10.N.{1,2}.1, .11, .12, ...; its ports from 2000 up).
        let clients_max = (max as usize).div_ceil(CLIENT_CONNS);
        // Ports of connections closed at an earlier point wait in TIME-WAIT at the client:
        // let new connections to the same server take them (RFC 6191 timestamps).
        bed.topo
            .client
            .run("sysctl", &["-qw", "net.ipv4.tcp_tw_reuse=1"])?;
        let mut sources: HashMap<&str, Vec<String>> = HashMap::new();
        let stacks: Vec<&str> = if self.linux_tuned {
            vec!["Linux", TUNED, "corestack"]
        } else {
            STACKS.to_vec()
        };
        for (stack, sub, dev) in [("Linux", 2, "c2"), ("corestack", 1, "c1")] {
            let mut list = vec![format!("10.{}.{sub}.1", bed.net)];
            for k in 1..clients_max {
                let ip = format!("10.{}.{sub}.{}", bed.net, 10 + k);
                netns::addr_add(&bed.topo.client, dev, &format!("{ip}/24"))?;
                list.push(ip);
            }
            sources.insert(stack, list);
        }
        // The tuned Linux server is the Linux one: the same addresses.
        let linux_sources = sources["Linux"].clone();
        sources.insert(TUNED, linux_sources);
        // The Linux server likewise: processes sharing the port (SO_REUSEPORT).
        let linux_procs = clients_max.to_string();
        let size = self.size.to_string();
        let secs = self.seconds.to_string();
        let max_sockets = (max + 64).max(4096).to_string();
        let mut points = Vec::new();
        let mut tuned_note = None;
        let busy_us = crate::harness::tuned::BUSY_POLL_US.to_string();
        for &stack in &stacks {
            eprintln!("conn-sweep: {stack} echo server");
            let port = PORT.to_string();
            let linux_ip = format!("10.{}.2.2", bed.net);
            // Linux tuned: the global busy-poll settings, put back when the server stopped.
            let busy_poll = if stack == TUNED {
                let set = BusyPollSysctls::switch_on().context("switching busy polling on")?;
                tuned_note = Some(format!(
                    "{}; {}",
                    set.describe(),
                    crate::harness::tuned::napi_note(&bed.topo.server, "s2")
                ));
                Some(set)
            } else {
                None
            };
            let mut server = if stack != "corestack" {
                let mut args = vec![
                    "bench",
                    "conn-echo",
                    "--ip",
                    &linux_ip,
                    "--port",
                    &port,
                    "--procs",
                    &linux_procs,
                ];
                if busy_poll.is_some() {
                    args.extend(["--busy-poll-us", &busy_us]);
                }
                bed.spawn_server(stack, &args)?
            } else {
                bed.server(
                    stack,
                    &[
                        "--ring-bytes",
                        "4096",
                        "--ring-max-bytes",
                        "4096",
                        "--max-sockets",
                        &max_sockets,
                    ],
                )?
            };
            let target = bed.target(stack);
            let server_pid = server.id();
            // The client's end of this server's veth: frames it dropped never reached the
            // server (a corestack server's veth end holds 256 frames in its XDP ring).
            let client_dev = if stack == "corestack" { "c1" } else { "c2" };
            for &count in &self.counts {
                let before = (stack == "corestack")
                    .then(|| engine_counters(server_pid))
                    .flatten();
                let dropped_before = bed.topo.client.tx_dropped(client_dev).ok();
                let timeout = Duration::from_secs_f64(self.seconds + 90.0);
                let mut point = Point::unmeasured(stack, count);
                let mut measured = None;
                let n_clients = (count as usize).div_ceil(CLIENT_CONNS);
                let share = (count as usize).div_ceil(n_clients);
                if share as u64 + 64 > nofile {
                    point.note = Some(format!(
                        "not run: ulimit -n is {nofile} (hard limit {hard}); raise it"
                    ));
                } else {
                    let pid = server_pid.to_string();
                    let results: Vec<Result<Value>> = std::thread::scope(|scope| {
                        let runs: Vec<_> = (0..n_clients)
                            .map(|c| {
                                let conns = share.min(count as usize - c * share).to_string();
                                let (bed, target, size, secs, pid) =
                                    (&bed, &target, &size, &secs, &pid);
                                let src = sources[stack][c].clone();
                                scope.spawn(move || {
                                    let mut args = ConnClient::args(target, &conns, size, secs);
                                    args.extend(["--sources", &src, "--server-pid", pid]);
                                    let log = format!("conn-{stack}-{count}-{c}.log");
                                    bed.client(&args, &log, timeout)
                                })
                            })
                            .collect();
                        runs.into_iter()
                            .map(|h| {
                                h.join()
                                    .unwrap_or_else(|_| Err(anyhow::anyhow!("panicked")))
                            })
                            .collect()
                    });
                    match merge_clients(results) {
                        Ok((merged, memory, counters)) => {
                            measured = counters;
                            point.connected = merged.connected;
                            point.p50_us = merged.p50_us;
                            point.p99_us = merged.p99_us;
                            point.round_trips_per_s = merged.round_trips_per_s;
                            point.note = merged.note;
                            point.memory = memory;
                        }
                        Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
                        Err(e) => point.note = Some(one_line(&e)),
                    }
                }
                // What the corestack engine refused while this point ran, from its counters:
                // up to the end of the measurement, and apart what moved while the
                // connections idled for the memory reading.
                if let (Some(b), Some(a)) = (before, engine_counters(server_pid)) {
                    let end = measured.as_ref().unwrap_or(&a);
                    let mut moved = Vec::new();
                    let run = counters_moved(&b, end, &WATCHED);
                    if !run.is_empty() {
                        moved.push(format!("corestack engine counters: {}", run.join(", ")));
                    }
                    let idle = counters_moved(end, &a, &WATCHED);
                    if !idle.is_empty() {
                        moved.push(format!("after it, idle: {}", idle.join(", ")));
                    }
                    if let (Some(d0), Ok(d1)) =
                        (dropped_before, bed.topo.client.tx_dropped(client_dev))
                    {
                        if d1 > d0 {
                            moved.push(format!(
                                "the client's veth end {client_dev} dropped {} frames to the server \
                                 (its XDP ring full: a burst of delayed ACKs, which the engine then \
                                 probes for)",
                                d1 - d0
                            ));
                        }
                    }
                    if !moved.is_empty() {
                        let n = point.note.take().map(|n| n + "; ").unwrap_or_default();
                        point.note = Some(format!("{n}{}", moved.join("; ")));
                    }
                }
                eprintln!(
                    "  {stack} {count} connections ({} open): {:.0} round trips/s, p99 {:.1} µs{}",
                    point.connected,
                    point.round_trips_per_s,
                    point.p99_us,
                    point
                        .note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                );
                points.push(point);
                // Let the closed connections leave the server before the next point.
                std::thread::sleep(Duration::from_millis(500));
            }
            server.terminate(Duration::from_secs(5))?;
            drop(busy_poll);
        }
        drop(bed);
        let client = "bench conn-client, kernel stack, one thread waiting in epoll (blocks), \
                      one process per 15 000 connections";
        let servers = "Linux: bench conn-echo, one thread, epoll polled without sleeping \
                       (spins), one process per 15 000 connections sharing the port \
                       (SO_REUSEPORT); corestack: serve echo, one process, inline engine, \
                       --poll busy (spins), af_xdp, 4 KiB fixed rings; all on one CPU";
        println!(
            "corestack bench conn-sweep: N TCP connections, each with one {}-byte message in flight",
            self.size
        );
        println!("client: {client}");
        println!("servers: {servers}");
        if let Some(n) = &tuned_note {
            println!(
                "Linux tuned: the Linux server with SO_BUSY_POLL {busy_us} µs on its sockets and \
                 epoll busy poll (EPIOCSPARAMS) where the kernel has it (the server's log says); {n}"
            );
        }
        println!(
            "{} s measured per point and stack; ulimit -n {nofile}; one server at a time\n",
            self.seconds
        );
        print_table("connections", &points, true);
        print_memory(&points);
        write_outputs(
            "conn-sweep",
            "concurrent connections",
            client,
            servers,
            self.seconds,
            &points,
            self.json.as_ref(),
            self.plot.as_ref(),
        )
    }
}

/// Connections one conn-sweep client process opens (a descriptor each; this container's
/// hard limit is 20 000 a process), each process from an address of its own.
const CLIENT_CONNS: usize = 15_000;

/// Engine counters by name.
type Counters = HashMap<&'static str, u64>;

/// The clients of one point together: connections, round trips/s summed; p50/p99 of all
/// their round trips (their latency histograms merged); memory: the server's before the
/// first opened, with every client's connections open and once they idled (the largest of
/// the readings).
fn merge_clients(results: Vec<Result<Value>>) -> Result<(Point, Option<Memory>, Option<Counters>)> {
    let mut merged = Point::default();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).context("histogram")?;
    let (mut rss0, mut rss1, mut k0, mut k1) = (u64::MAX, 0u64, u64::MAX, 0u64);
    let (mut rss_idle, mut k_idle) = (0u64, 0u64);
    // The server's counters when the measurement ended: the largest reading of each.
    let mut measured: Option<Counters> = None;
    let mut notes = Vec::new();
    for r in results {
        let v = r?;
        merged.connected += v.get("connected").and_then(Value::as_u64).unwrap_or(0) as u32;
        merged.round_trips_per_s += f64_of(&v, "round_trips_per_s");
        if let Some(pairs) = v.get("hist").and_then(Value::as_array) {
            for p in pairs {
                if let (Some(ns), Some(n)) = (p[0].as_u64(), p[1].as_u64()) {
                    hist.saturating_record_n(ns.max(1), n);
                }
            }
        }
        if let Some(n) = v.get("note").and_then(Value::as_str) {
            notes.push(n.to_string());
        }
        let kib = |k: &str| v.get(k).and_then(Value::as_u64);
        if let (Some(a), Some(b), Some(c), Some(d)) = (
            kib("server_rss_before_kib"),
            kib("server_rss_kib"),
            kib("kernel_before_kib"),
            kib("kernel_kib"),
        ) {
            (rss0, rss1, k0, k1) = (rss0.min(a), rss1.max(b), k0.min(c), k1.max(d));
        }
        if let (Some(a), Some(b)) = (kib("server_rss_idle_kib"), kib("kernel_idle_kib")) {
            (rss_idle, k_idle) = (rss_idle.max(a), k_idle.max(b));
        }
        if let Some(c) = v.get("counters_measured").and_then(Value::as_object) {
            let m = measured.get_or_insert_with(HashMap::new);
            for name in WATCHED {
                if let Some(n) = c.get(name).and_then(Value::as_u64) {
                    let e = m.entry(name).or_insert(0);
                    *e = (*e).max(n);
                }
            }
        }
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    merged.p50_us = us(0.5);
    merged.p99_us = us(0.99);
    merged.note = (!notes.is_empty()).then(|| notes.join("; "));
    let memory = (rss0 != u64::MAX && k0 != u64::MAX).then_some(Memory {
        server_rss_kib: rss1,
        server_rss_before_kib: rss0,
        kernel_kib: k1,
        kernel_before_kib: k0,
        server_rss_idle_kib: rss_idle,
        kernel_idle_kib: k_idle,
    });
    Ok((merged, memory, measured))
}
