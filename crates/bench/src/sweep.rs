//! `corestack bench size-sweep` and `corestack bench conn-sweep`: Linux and corestack echo
//! servers in one run, over message sizes and over numbers of concurrent connections.
//!
//! ```text
//!  namespace client (CPU 0)                   namespace server (CPU 1)
//!  c1 10.N.1.1/24  ── veth ──  s1 (corestack 10.N.1.2 via af_xdp, inline engine)
//!  c2 10.N.2.1/24  ── veth ──  s2 10.N.2.2/24 (Linux echo server)
//! ```
//!
//! size-sweep: `bench pingpong --tcp --spin` (one connection, the kernel stack) at each size
//! against the Linux echo (`serve echo --kernel --spin`) and the corestack echo (`serve echo`,
//! inline, spinning); one server at a time, every size against one before the other.
//!
//! conn-sweep: `bench conn-client` (hidden) opens N connections on the kernel stack and keeps
//! one message in flight on each, waiting in epoll (it blocks); the Linux server is `bench
//! conn-echo` (hidden: one thread, epoll polled without sleeping, so it spins) and the
//! corestack server `serve echo` with 4 KiB fixed rings and room for N sockets. A kernel
//! socket is a descriptor and a process here may hold 20 000: beyond 15 000 connections the
//! client runs as several processes (each from an address of its own) and the Linux server
//! as several processes sharing the port (SO_REUSEPORT), all on the server's one CPU; the
//! corestack server stays one process. Connection counts the client, the server or the
//! system cannot reach (ulimit -n, socket table, connect timeouts) are reported in the table
//! with the reason; the memory table gives each server's bytes per connection.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

use crate::harness::children::{run_client, spawn, wait_ready, LogDir, Topology};
use crate::harness::{CLIENT_CPU, SERVER_CPU};
use crate::plot::{self, Series};
use cmdline::{one_line, stop_flag, Interrupted};

pub(crate) const PORT: u16 = 7;

/// The two servers of a sweep, in the order they run.
const STACKS: [&str; 2] = ["Linux", "corestack"];

/// `bench size-sweep` options.
#[derive(Args, Debug)]
pub struct SizeSweep {
    /// Message sizes in bytes (TCP; at most 65536).
    #[arg(long, value_delimiter = ',', default_values_t = [64u32, 256, 1024, 4096, 16384, 65536])]
    sizes: Vec<u32>,
    /// Measured seconds per size and stack.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Also write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw p50/p99 against the message size, Linux and corestack, to FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

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
}

/// One point of a sweep on one stack.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Point {
    /// `Linux` or `corestack` (the server's stack; the client is on the kernel stack).
    pub stack: String,
    /// Message size (size-sweep) or connection count (conn-sweep).
    pub x: u32,
    /// Connections that were open while measuring (conn-sweep).
    pub connected: u32,
    /// Median round trip, µs (NaN: not measured).
    pub p50_us: f64,
    /// 99th percentile round trip, µs (NaN: not measured).
    pub p99_us: f64,
    /// Round trips per second, all connections together (NaN: not measured).
    pub round_trips_per_s: f64,
    /// Why the point was not measured, or not with every connection.
    pub note: Option<String>,
    /// What the open connections cost in memory (conn-sweep).
    pub memory: Option<Memory>,
}

/// Memory with a conn-sweep point's connections open, against before they opened.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Memory {
    /// Resident memory of the server process(es), KiB (VmRSS), with the connections open.
    pub server_rss_kib: u64,
    /// The same before the point's connections opened, KiB.
    pub server_rss_before_kib: u64,
    /// The kernel's memory (slab plus TCP buffers, machine-wide: the client's sockets and,
    /// for the Linux server, its own), KiB, with the connections open.
    pub kernel_kib: u64,
    /// The same before the point's connections opened, KiB.
    pub kernel_before_kib: u64,
}

impl Point {
    /// The point of `stack` at `x` before it is measured: no connections, NaN figures.
    fn unmeasured(stack: &str, x: u32) -> Point {
        Point {
            stack: stack.into(),
            x,
            p50_us: f64::NAN,
            p99_us: f64::NAN,
            round_trips_per_s: f64::NAN,
            ..Point::default()
        }
    }
}

/// What a sweep writes with `--json`.
#[derive(Debug, Serialize)]
struct SweepReport<'a> {
    sweep: &'a str,
    x: &'a str,
    client: &'a str,
    servers: &'a str,
    seconds_per_point: f64,
    points: &'a [Point],
}

/// The namespaces, logs and this program, for one sweep.
pub(crate) struct Bed {
    pub(crate) topo: Topology,
    logs: LogDir,
    exe: PathBuf,
    client_cpu: Option<&'static str>,
    server_cpu: Option<&'static str>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(crate) net: u8,
}

impl Bed {
    pub(crate) fn new(what: &str, net: u8) -> Result<Bed> {
        let stop = stop_flag()?;
        netns::check_privileges()?;
        let exe = std::env::current_exe().context("finding this program's path")?;
        let pin = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
        let logs = LogDir::new(what)?;
        let topo = Topology::build("metc", "mets", net)?;
        Ok(Bed {
            topo,
            logs,
            exe,
            client_cpu: pin.then_some(CLIENT_CPU),
            server_cpu: pin.then_some(SERVER_CPU),
            stop,
            net,
        })
    }

    pub(crate) fn target(&self, stack: &str) -> String {
        let sub = if stack == "Linux" { 2 } else { 1 };
        format!("10.{}.{sub}.2:{PORT}", self.net)
    }

    /// Starts `stack`'s server with `extra` arguments (after the common ones).
    pub(crate) fn server(
        &self,
        stack: &str,
        corestack_extra: &[&str],
    ) -> Result<netns::ChildGuard> {
        let linux_ip = format!("10.{}.2.2", self.net);
        let core_ip = format!("10.{}.1.2/24", self.net);
        let port = PORT.to_string();
        let mut args: Vec<&str> = if stack == "Linux" {
            vec![
                "serve", "echo", "--kernel", "--ip", &linux_ip, "--port", &port, "--spin",
            ]
        } else {
            vec![
                "serve", "echo", "--iface", "s1", "--ip", &core_ip, "--port", &port, "--driver",
                "af_xdp", "--mode", "inline", "--poll", "busy",
            ]
        };
        if stack != "Linux" {
            args.extend_from_slice(corestack_extra);
        }
        self.spawn_server(stack, &args)
    }

    pub(crate) fn spawn_server(&self, stack: &str, args: &[&str]) -> Result<netns::ChildGuard> {
        let log = self.logs.file(&format!("server-{stack}.log"));
        let mut server = spawn(&self.topo.server, self.server_cpu, &self.exe, args, &log)?;
        wait_ready(&mut server, "listening", &log, false, &self.stop)
            .with_context(|| format!("starting the {stack} echo server"))?;
        Ok(server)
    }

    pub(crate) fn client(&self, args: &[&str], log: &str, timeout: Duration) -> Result<Value> {
        let log = self.logs.file(log);
        run_client(
            spawn(&self.topo.client, self.client_cpu, &self.exe, args, &log)?,
            &log,
            timeout,
            &self.stop,
        )
    }
}

/// Checks a sweep's options: `seconds` in (0, 60], the swept list (`list_ok`, else the error
/// `list_rule`), and `--plot`'s format.
fn check_options(s: f64, list_ok: bool, list_rule: &str, plot: Option<&PathBuf>) -> Result<()> {
    if !(s > 0.0 && s <= 60.0) {
        bail!("--seconds must be in (0, 60]");
    }
    if !list_ok {
        bail!("{list_rule}");
    }
    if let Some(p) = plot {
        plot::format_of(p)?;
    }
    Ok(())
}

fn f64_of(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

impl SizeSweep {
    /// Builds the namespaces, runs every size against each server, prints the table and
    /// writes `--json`/`--plot`. Errors: not root, a server that does not start, Ctrl-C
    /// (a failed point is shown in the table instead).
    pub fn run(self) -> Result<()> {
        let sizes_ok = !self.sizes.is_empty() && self.sizes.iter().all(|&s| s > 0 && s <= 65536);
        let sizes_rule = "--sizes must be 1..=65536 bytes each";
        check_options(self.seconds, sizes_ok, sizes_rule, self.plot.as_ref())?;
        let bed = Bed::new("size-sweep", 161)?;
        let secs = self.seconds.to_string();
        let mut points = Vec::new();
        for stack in STACKS {
            eprintln!("size-sweep: {stack} echo server");
            let mut server = bed.server(stack, &[])?;
            let target = bed.target(stack);
            for &size in &self.sizes {
                let size_s = size.to_string();
                let run = crate::pingpong::command_line("--tcp", &target, &size_s, &secs);
                let args = [&run[..], &["--warmup", "0.3", "--json", "--spin"]].concat();
                let log = format!("pingpong-{stack}-{size}.log");
                let timeout = Duration::from_secs_f64(self.seconds + 20.0);
                let point = match bed.client(&args, &log, timeout) {
                    Ok(v) => Point {
                        stack: stack.into(),
                        x: size,
                        connected: 1,
                        p50_us: f64_of(&v, "p50_us"),
                        p99_us: f64_of(&v, "p99_us"),
                        round_trips_per_s: f64_of(&v, "round_trips_per_s"),
                        note: None,
                        memory: None,
                    },
                    Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
                    Err(e) => Point {
                        note: Some(one_line(&e)),
                        ..Point::unmeasured(stack, size)
                    },
                };
                eprintln!(
                    "  {stack} {size} B: p50 {:.1} µs, p99 {:.1} µs, {:.0}/s",
                    point.p50_us, point.p99_us, point.round_trips_per_s
                );
                points.push(point);
            }
            server.terminate(Duration::from_secs(3))?;
        }
        drop(bed);
        let client = "bench pingpong, kernel stack, spins (nonblocking busy loop)";
        let servers = "Linux: serve echo --kernel --spin (one thread, nonblocking busy loop); \
                       corestack: serve echo, inline engine, --poll busy (spins), af_xdp";
        println!(
            "corestack bench size-sweep: TCP ping-pong, one connection, one message in flight"
        );
        println!("client: {client}");
        println!("servers: {servers}");
        println!(
            "{} s measured per size and stack; one server at a time\n",
            self.seconds
        );
        print_table("size (B)", &points, false);
        write_outputs(
            "size-sweep",
            "message size (B)",
            client,
            servers,
            self.seconds,
            &points,
            self.json.as_ref(),
            self.plot.as_ref(),
        )
    }
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
        for (stack, sub, dev) in [("Linux", 2, "c2"), ("corestack", 1, "c1")] {
            let mut list = vec![format!("10.{}.{sub}.1", bed.net)];
            for k in 1..clients_max {
                let ip = format!("10.{}.{sub}.{}", bed.net, 10 + k);
                netns::addr_add(&bed.topo.client, dev, &format!("{ip}/24"))?;
                list.push(ip);
            }
            sources.insert(stack, list);
        }
        // The Linux server likewise: processes sharing the port (SO_REUSEPORT).
        let linux_procs = clients_max.to_string();
        let size = self.size.to_string();
        let secs = self.seconds.to_string();
        let max_sockets = (max + 64).max(4096).to_string();
        let mut points = Vec::new();
        for stack in STACKS {
            eprintln!("conn-sweep: {stack} echo server");
            let port = PORT.to_string();
            let linux_ip = format!("10.{}.2.2", bed.net);
            let mut server = if stack == "Linux" {
                bed.spawn_server(
                    stack,
                    &[
                        "bench",
                        "conn-echo",
                        "--ip",
                        &linux_ip,
                        "--port",
                        &port,
                        "--procs",
                        &linux_procs,
                    ],
                )?
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
            for &count in &self.counts {
                let before = (stack != "Linux")
                    .then(|| engine_counters(server_pid))
                    .flatten();
                let timeout = Duration::from_secs_f64(self.seconds + 90.0);
                let mut point = Point::unmeasured(stack, count);
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
                                    let args = [
                                        "bench",
                                        "conn-client",
                                        "--target",
                                        target,
                                        "--conns",
                                        &conns,
                                        "--size",
                                        size,
                                        "--seconds",
                                        secs,
                                        "--sources",
                                        &src,
                                        "--server-pid",
                                        pid,
                                    ];
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
                        Ok((merged, memory)) => {
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
                // What the corestack engine refused while this point ran, from its counters.
                if let (Some(b), Some(a)) = (before, engine_counters(server_pid)) {
                    let refused: Vec<String> = WATCHED
                        .iter()
                        .filter_map(|&name| {
                            let d = a.get(name)?.saturating_sub(*b.get(name)?);
                            (d > 0).then(|| format!("{name} +{d}"))
                        })
                        .collect();
                    if !refused.is_empty() {
                        let n = point.note.take().map(|n| n + "; ").unwrap_or_default();
                        point.note = Some(format!(
                            "{n}corestack engine counters: {}",
                            refused.join(", ")
                        ));
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

/// The corestack counters that say why connections were refused or slow to open.
const WATCHED: [&str; 13] = [
    "rx_ring_full",
    "rx_fill_empty",
    "rx_port_dropped",
    "tx_no_buffer",
    "tx_output_deferred",
    "drop_tcp_backlog_full",
    "drop_tcp_table_full",
    "tcp_syncookies_sent",
    "tcp_no_socket",
    "tcp_retransmits",
    "tcp_rto_timeouts",
    "tcp_tlp_probes",
    "tcp_spurious_retransmits",
];

/// The counters of the corestack engine in process `pid`, by name (from its statistics
/// segment); None when it cannot be read.
pub(crate) fn engine_counters(pid: u32) -> Option<HashMap<&'static str, u64>> {
    let r = appif::stats_shm::StatsReader::open(&appif::stats_shm::stats_path(pid)).ok()?;
    let values = r.read()?;
    let names = corestack::Stats::default();
    let names: Vec<&'static str> = names.iter().map(|(n, _)| n).collect();
    (values.len() == names.len()).then(|| names.into_iter().zip(values).collect())
}

/// The sweep's table: per x, Linux and corestack p50, p99, round trips/s and the ratios.
fn print_table(x_name: &str, points: &[Point], show_open: bool) {
    let by: HashMap<(&str, u32), &Point> = points
        .iter()
        .map(|p| ((p.stack.as_str(), p.x), p))
        .collect();
    let mut xs: Vec<u32> = points.iter().map(|p| p.x).collect();
    xs.sort_unstable();
    xs.dedup();
    println!(
        "{x_name:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8}",
        "p50 Linux", "p50 core", "p99 Linux", "p99 core", "rt/s Linux", "rt/s core", "rt/s c/L"
    );
    let f = |v: f64, d: usize| {
        if v.is_finite() {
            format!("{v:.d$}")
        } else {
            "-".into()
        }
    };
    let mut notes = Vec::new();
    for x in xs {
        let (l, c) = (by.get(&("Linux", x)), by.get(&("corestack", x)));
        let g = |p: Option<&&Point>, k: fn(&Point) -> f64| p.map_or(f64::NAN, |p| k(p));
        let (lr, cr) = (g(l, |p| p.round_trips_per_s), g(c, |p| p.round_trips_per_s));
        println!(
            "{x:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8}",
            f(g(l, |p| p.p50_us), 1),
            f(g(c, |p| p.p50_us), 1),
            f(g(l, |p| p.p99_us), 1),
            f(g(c, |p| p.p99_us), 1),
            f(lr, 0),
            f(cr, 0),
            f(cr / lr, 2),
        );
        for p in [l, c].into_iter().flatten() {
            if let Some(n) = &p.note {
                notes.push(format!("{x} {}: {n}", p.stack));
            } else if show_open && p.connected != p.x {
                notes.push(format!("{x} {}: {} connections open", p.stack, p.connected));
            }
        }
    }
    println!("(µs; rt/s: round trips per second, all connections together; c/L: corestack/Linux)");
    for n in notes {
        println!("note: {n}");
    }
}

/// conn-sweep's memory table: the servers' resident memory, the growth of the kernel's
/// memory, and what one connection costs each server. Growth is counted from before each
/// stack's first point (memory freed between points stays with the process or the slab,
/// so a point's own growth would undercount): corestack's in its process; Linux's in its
/// processes and in the kernel, where the kernel's growth in the Linux run less its growth
/// in the corestack run (the client's sockets, the same in both runs) is the Linux
/// server's sockets.
fn print_memory(points: &[Point]) {
    let first = |stack: &str| {
        points
            .iter()
            .filter(|p| p.stack == stack)
            .find_map(|p| p.memory)
            .map(|m| (m.server_rss_before_kib as i64, m.kernel_before_kib as i64))
    };
    let mem = |stack: &str, x: u32| {
        points
            .iter()
            .find(|p| p.stack == stack && p.x == x)
            .and_then(|p| p.memory.map(|m| (m, p.connected)))
    };
    let (Some((l_rss0, l_k0)), Some((c_rss0, c_k0))) = (first("Linux"), first("corestack")) else {
        return;
    };
    let mut xs: Vec<u32> = points.iter().map(|p| p.x).collect();
    xs.sort_unstable();
    xs.dedup();
    println!(
        "\n{:>11} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13}",
        "connections",
        "RSS Linux",
        "RSS core",
        "kernel+ L",
        "kernel+ core",
        "B/conn Linux",
        "B/conn core"
    );
    let mib = |kib: i64| format!("{:.1}", kib as f64 / 1024.0);
    for x in xs {
        let (Some((l, ln)), Some((c, cn))) = (mem("Linux", x), mem("corestack", x)) else {
            continue;
        };
        let per = |kib: i64, n: u32| {
            if n == 0 {
                "-".to_string()
            } else {
                format!("{:.0}", kib as f64 * 1024.0 / f64::from(n))
            }
        };
        let l_kernel = l.kernel_kib as i64 - l_k0;
        let c_kernel = c.kernel_kib as i64 - c_k0;
        let linux_server = l.server_rss_kib as i64 - l_rss0 + l_kernel - c_kernel;
        println!(
            "{x:>11} {:>13} {:>13} {:>13} {:>13} {:>13} {:>13}",
            mib(l.server_rss_kib as i64),
            mib(c.server_rss_kib as i64),
            mib(l_kernel),
            mib(c_kernel),
            per(linux_server, ln),
            per(c.server_rss_kib as i64 - c_rss0, cn),
        );
    }
    println!(
        "(MiB; RSS: the server's processes; kernel+: growth of slab and TCP buffer memory, \
         machine-wide, since before the first point; B/conn: bytes per open connection of \
         each server since before its first point, Linux's in its processes and the kernel)"
    );
}

#[allow(clippy::too_many_arguments)]
fn write_outputs(
    sweep: &str,
    x_name: &str,
    client: &str,
    servers: &str,
    seconds: f64,
    points: &[Point],
    json: Option<&PathBuf>,
    plot_path: Option<&PathBuf>,
) -> Result<()> {
    if let Some(path) = json {
        plot::write_json(
            path,
            &SweepReport {
                sweep,
                x: x_name,
                client,
                servers,
                seconds_per_point: seconds,
                points,
            },
        )?;
    }
    if let Some(path) = plot_path {
        let mut series = Vec::new();
        for stack in STACKS {
            for (what, k) in [
                ("p50", (|p: &Point| p.p50_us) as fn(&Point) -> f64),
                ("p99", |p: &Point| p.p99_us),
            ] {
                let pts: Vec<(f64, f64)> = points
                    .iter()
                    .filter(|p| p.stack == stack && k(p).is_finite())
                    .map(|p| (f64::from(p.x), k(p)))
                    .collect();
                series.push(Series::new(format!("{stack} {what}"), pts));
            }
        }
        plot::lines(
            path,
            &format!("corestack bench {sweep}: round-trip time"),
            x_name,
            "round-trip time (µs)",
            (true, true),
            &series,
        )?;
        // The rates beside it: FILE-rate.svg.
        let rate_path = rate_path(path);
        let series: Vec<Series> = STACKS
            .iter()
            .map(|stack| {
                Series::new(
                    *stack,
                    points
                        .iter()
                        .filter(|p| p.stack == *stack && p.round_trips_per_s.is_finite())
                        .map(|p| (f64::from(p.x), p.round_trips_per_s))
                        .collect(),
                )
            })
            .collect();
        plot::lines(
            &rate_path,
            &format!("corestack bench {sweep}: round trips per second"),
            x_name,
            "round trips/s",
            (true, false),
            &series,
        )?;
        println!(
            "plots: {} (p50/p99), {} (round trips/s)",
            path.display(),
            rate_path.display()
        );
    }
    Ok(())
}

/// `dir/name.svg` -> `dir/name-rate.svg`.
fn rate_path(path: &std::path::Path) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plot");
    let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("svg");
    path.with_file_name(format!("{stem}-rate.{ext}"))
}

/// `bench conn-client` (hidden; run by conn-sweep): N connections on the kernel stack, one
/// message in flight on each, waiting in epoll; prints one JSON object.
#[derive(Args, Debug)]
pub struct ConnClient {
    /// The echo server.
    #[arg(long)]
    target: SocketAddrV4,
    /// Connections to open (one after the other, for at most 30 s).
    #[arg(long)]
    conns: u32,
    /// Message size, bytes (at most 4096).
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Measured seconds (after a 0.3 s warm-up).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Source addresses to connect from, in turn, each with ports from 2000 up, at most
    /// 60 000 connections an address (default: the kernel's choice of address and port).
    #[arg(long, value_delimiter = ',')]
    sources: Vec<Ipv4Addr>,
    /// The server's process, whose memory is reported before and with the connections open.
    #[arg(long)]
    server_pid: Option<u32>,
}

/// A connection of the client: when its message left, and how much of the echo is back.
struct Slot {
    stream: mio::net::TcpStream,
    t0: Instant,
    got: usize,
}

/// How long the client may take to open its connections.
const CONNECT_PHASE: Duration = Duration::from_secs(60);

/// Connections one conn-sweep client process opens (a descriptor each; this container's
/// hard limit is 20 000 a process), each process from an address of its own.
const CLIENT_CONNS: usize = 15_000;

/// The clients of one point together: connections, round trips/s summed; p50/p99 of all
/// their round trips (their latency histograms merged); memory: the server's before the
/// first opened and with every client's connections open (the largest of the readings).
fn merge_clients(results: Vec<Result<Value>>) -> Result<(Point, Option<Memory>)> {
    let mut merged = Point::default();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).context("histogram")?;
    let (mut rss0, mut rss1, mut k0, mut k1) = (u64::MAX, 0u64, u64::MAX, 0u64);
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
    });
    Ok((merged, memory))
}
/// The first client port conn-client binds with `--sources` (ports below the ephemeral
/// range, so that nothing else in the client's namespace holds them).
const FIRST_PORT: u16 = 2_000;

/// Resident memory of process `pid` and its children, KiB (VmRSS of /proc/PID/status:
/// the Linux server may be a group of processes).
fn rss_kib(pid: u32) -> Option<u64> {
    let own = |pid: u32| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let children: u64 = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    // Fields after the command's closing parenthesis: state, ppid, ...
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .filter_map(own)
        .sum();
    Some(own(pid)? + children)
}

/// The kernel's memory that sockets take, KiB: slab (socket, file, dentry, epoll
/// objects) plus TCP buffer pages (/proc/net/sockstat `mem`). Machine-wide.
fn kernel_kib() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let slab: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("Slab:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let tcp = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let words: Vec<&str> = tcp.split_whitespace().collect();
    let pages: u64 = words
        .iter()
        .position(|w| *w == "mem")
        .and_then(|i| words.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some(slab + pages * 4)
}

impl ConnClient {
    /// Opens the connections, ping-pongs on all of them, prints one JSON object: `conns`,
    /// `connected`, `round_trips`, `round_trips_per_s`, `p50_us`, `p99_us`, `note` (why fewer
    /// connections opened). Errors: none opened, the server closed one, an echo differed.
    pub fn run(self) -> Result<()> {
        let size = self.size.clamp(1, 4096) as usize;
        let msg: Vec<u8> = (0..size).map(|i| (i as u8).wrapping_mul(7)).collect();
        let mut poll = mio::Poll::new().context("creating epoll")?;
        let mut slots: Vec<Slot> = Vec::new();
        let mut note = None;
        // A descriptor per connection.
        raise_nofile(u64::from(self.conns) + 64);
        let rss_before = self.server_pid.and_then(rss_kib);
        let kernel_before = kernel_kib();
        let started = Instant::now();
        for i in 0..self.conns {
            if started.elapsed() > CONNECT_PHASE {
                note = Some(format!(
                    "only {i} of {} connections opened within {} s",
                    self.conns,
                    CONNECT_PHASE.as_secs()
                ));
                break;
            }
            // Connection i from address i % n, port FIRST_PORT + i / n: distinct 4-tuples.
            let source = (!self.sources.is_empty()).then(|| {
                let n = self.sources.len();
                let port = FIRST_PORT as usize + i as usize / n;
                SocketAddrV4::new(self.sources[i as usize % n], port as u16)
            });
            let s = match connect_from(source, self.target, Duration::from_secs(3)) {
                Ok(s) => s,
                Err(e) => {
                    let why = match e.raw_os_error() {
                        Some(24) => "out of file descriptors (ulimit -n)".to_string(),
                        _ => e.to_string(),
                    };
                    note = Some(format!(
                        "connection {} of {} failed: {why}",
                        i + 1,
                        self.conns
                    ));
                    break;
                }
            };
            s.set_nodelay(true)?;
            s.set_nonblocking(true)?;
            let mut stream = mio::net::TcpStream::from_std(s);
            poll.registry()
                .register(&mut stream, mio::Token(i as usize), mio::Interest::READABLE)
                .context("epoll_ctl")?;
            slots.push(Slot {
                stream,
                t0: Instant::now(),
                got: 0,
            });
        }
        if slots.is_empty() {
            bail!("{}", note.unwrap_or_else(|| "no connection opened".into()));
        }
        let mut hist =
            Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).context("histogram")?;
        for s in slots.iter_mut() {
            send(&mut s.stream, &msg)?;
            s.t0 = Instant::now();
        }
        let mut events = mio::Events::with_capacity(1024);
        let mut buf = vec![0u8; size];
        let warm_end = Instant::now() + Duration::from_millis(300);
        let end = warm_end + Duration::from_secs_f64(self.seconds.clamp(0.1, 60.0));
        let mut measured_from = None;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if now >= warm_end && measured_from.is_none() {
                measured_from = Some(now);
            }
            poll.poll(&mut events, Some(Duration::from_millis(50)))
                .or_else(|e| {
                    if e.kind() == io::ErrorKind::Interrupted {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })?;
            for ev in events.iter() {
                let Some(s) = slots.get_mut(ev.token().0) else {
                    continue;
                };
                loop {
                    match s.stream.read(&mut buf[..size - s.got]) {
                        Ok(0) => bail!("the server closed connection {}", ev.token().0),
                        Ok(n) => {
                            if buf[..n] != msg[s.got..s.got + n] {
                                bail!("the echo differs from what was sent");
                            }
                            s.got += n;
                            if s.got == size {
                                let done = Instant::now();
                                if measured_from.is_some() {
                                    let ns =
                                        u64::try_from((done - s.t0).as_nanos()).unwrap_or(u64::MAX);
                                    hist.saturating_record(ns.max(1));
                                }
                                s.got = 0;
                                send(&mut s.stream, &msg)?;
                                s.t0 = Instant::now();
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => bail!("reading: {e}"),
                    }
                }
            }
        }
        let elapsed = measured_from.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
        // With every connection still open.
        let rss = self.server_pid.and_then(rss_kib);
        let kernel = kernel_kib();
        let hist_pairs: Vec<[u64; 2]> = hist
            .iter_recorded()
            .map(|v| [v.value_iterated_to(), v.count_at_value()])
            .collect();
        let out = serde_json::json!({
            "hist": hist_pairs,
            "server_rss_before_kib": rss_before,
            "server_rss_kib": rss,
            "kernel_before_kib": kernel_before,
            "kernel_kib": kernel,
            "conns": self.conns,
            "connected": slots.len(),
            "round_trips": hist.len(),
            "round_trips_per_s": if elapsed > 0.0 { hist.len() as f64 / elapsed } else { 0.0 },
            "p50_us": us(0.5),
            "p99_us": us(0.99),
            "client": "blocks (epoll)",
            "note": note,
        });
        println!("{out}");
        Ok(())
    }
}

/// A blocking connect to `target` from `source` (an address and a port of the client's
/// own choosing: each connection of a run has its own), within `timeout`. The port may
/// still be in TIME-WAIT from an earlier run: SO_REUSEADDR and the namespace's
/// tcp_tw_reuse let the connection take it.
fn connect_from(
    source: Option<SocketAddrV4>,
    target: SocketAddrV4,
    timeout: Duration,
) -> io::Result<std::net::TcpStream> {
    let Some(from) = source else {
        return std::net::TcpStream::connect_timeout(&SocketAddr::V4(target), timeout);
    };
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&SocketAddr::V4(from).into())?;
    s.connect_timeout(&SocketAddr::V4(target).into(), timeout)?;
    Ok(s.into())
}

/// Writes `msg` whole on a nonblocking socket with room for it (one small message in flight
/// per connection), retrying briefly when the socket buffer is full.
fn send(s: &mut mio::net::TcpStream, msg: &[u8]) -> Result<()> {
    let mut off = 0;
    let deadline = Instant::now() + Duration::from_secs(2);
    while off < msg.len() {
        match s.write(&msg[off..]) {
            Ok(n) => off += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                if Instant::now() > deadline {
                    bail!("sending: the socket stayed full for 2 s");
                }
                std::thread::yield_now();
            }
            Err(e) => bail!("sending: {e}"),
        }
    }
    Ok(())
}

/// `bench conn-echo` (hidden; conn-sweep's Linux server): TCP echo on the kernel stack, one
/// thread, epoll polled without sleeping, any number of connections; until SIGTERM/SIGINT.
#[derive(Args, Debug)]
pub struct ConnEcho {
    /// The address to listen on.
    #[arg(long)]
    ip: Ipv4Addr,
    /// The TCP port.
    #[arg(long)]
    port: u16,
    /// Processes serving the port together (SO_REUSEPORT), each with its own descriptor
    /// limit: how the Linux server reaches more connections than one process may hold.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    procs: u32,
}

impl ConnEcho {
    /// Serves until SIGTERM/SIGINT. Errors: the address cannot be bound, epoll fails.
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        let addr = SocketAddr::V4(SocketAddrV4::new(self.ip, self.port));
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        sock.set_reuse_address(true)?;
        sock.set_reuse_port(true)?;
        sock.bind(&addr.into())
            .with_context(|| format!("binding {addr}"))?;
        sock.listen(4096)?;
        raise_nofile(1 << 20);
        // The other processes of the group: this program again, each dying with this one.
        let mut peers = Vec::new();
        for _ in 1..self.procs {
            let exe = std::env::current_exe().context("finding this program's path")?;
            let mut cmd = std::process::Command::new(exe);
            cmd.args(["bench", "conn-echo", "--ip", &self.ip.to_string()])
                .args(["--port", &self.port.to_string()])
                .stdout(std::process::Stdio::null());
            // Each asks for SIGKILL when its parent dies (below); dropping the guards at
            // the end kills them too.
            peers.push(netns::ChildGuard::spawn(&mut cmd)?);
        }
        // Dies with whoever started it (the benchmark, or the group's first process).
        let _ =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
        sock.set_nonblocking(true)?;
        let mut listener = mio::net::TcpListener::from_std(sock.into());
        let mut poll = mio::Poll::new()?;
        const LISTENER: mio::Token = mio::Token(usize::MAX);
        poll.registry()
            .register(&mut listener, LISTENER, mio::Interest::READABLE)?;
        println!("listening on {addr} (tcp), kernel, epoll, spinning");
        io::stdout().flush()?;
        let mut conns: Vec<Option<(mio::net::TcpStream, Vec<u8>)>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut events = mio::Events::with_capacity(1024);
        let mut buf = vec![0u8; 64 << 10];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            match poll.poll(&mut events, Some(Duration::ZERO)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
            for ev in events.iter() {
                if ev.token() == LISTENER {
                    loop {
                        match listener.accept() {
                            Ok((mut s, _)) => {
                                let _ = s.set_nodelay(true);
                                let i = free.pop().unwrap_or_else(|| {
                                    conns.push(None);
                                    conns.len() - 1
                                });
                                poll.registry().register(
                                    &mut s,
                                    mio::Token(i),
                                    mio::Interest::READABLE | mio::Interest::WRITABLE,
                                )?;
                                conns[i] = Some((s, Vec::new()));
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            // Out of descriptors and the like: try again on the next event.
                            Err(_) => break,
                        }
                    }
                    continue;
                }
                let i = ev.token().0;
                let Some(Some((s, pending))) = conns.get_mut(i) else {
                    continue;
                };
                let mut closed = false;
                loop {
                    // Echo what is pending first, then read more.
                    while !pending.is_empty() {
                        match s.write(pending) {
                            Ok(n) => {
                                pending.drain(..n);
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(_) => {
                                closed = true;
                                break;
                            }
                        }
                    }
                    if closed || !pending.is_empty() {
                        break;
                    }
                    match s.read(&mut buf) {
                        Ok(0) => {
                            closed = true;
                            break;
                        }
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            closed = true;
                            break;
                        }
                    }
                }
                if closed {
                    if let Some((mut s, _)) = conns[i].take() {
                        let _ = poll.registry().deregister(&mut s);
                    }
                    free.push(i);
                }
            }
        }
        drop(peers);
        Ok(())
    }
}

/// Raises this process's descriptor limit towards `want` (the soft limit up to the hard
/// one; the hard one too where the process may).
fn raise_nofile(want: u64) {
    if let Ok((soft, hard)) = rlimit::Resource::NOFILE.get() {
        if soft < want && rlimit::Resource::NOFILE.set(want, want.max(hard)).is_err() {
            let _ = rlimit::Resource::NOFILE.set(want.min(hard), hard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_plot_sits_beside_the_latency_plot() {
        assert_eq!(
            rate_path(std::path::Path::new("/tmp/x/sweep.svg")),
            PathBuf::from("/tmp/x/sweep-rate.svg")
        );
        assert_eq!(
            rate_path(std::path::Path::new("a.png")),
            PathBuf::from("a-rate.png")
        );
    }
}
