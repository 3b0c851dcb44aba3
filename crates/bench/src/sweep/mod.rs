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

mod client;
mod conn;
mod size;

pub use client::{ConnClient, ConnEcho};
pub use conn::ConnSweep;
pub use size::SizeSweep;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::harness::children::{run_client, spawn, wait_ready, LogDir, Topology};
use crate::harness::pinned_cpus;
use crate::plot::{self, Series};
use cmdline::{one_line, stop_flag, Interrupted};

pub(crate) const PORT: u16 = 7;

/// The two servers of a sweep, in the order they run.
const STACKS: [&str; 2] = ["Linux", "corestack"];
/// conn-sweep's third server (`--linux-tuned`): the Linux one with busy polling on.
const TUNED: &str = "Linux tuned";

/// One point of a sweep on one stack.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Point {
    /// `Linux`, `Linux tuned` or `corestack` (the server's stack; the client is on the kernel
    /// stack).
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
    /// The server's resident memory once the open connections idled (every echo read
    /// back, nothing sent, the reading settled), KiB; 0: not read.
    pub server_rss_idle_kib: u64,
    /// The kernel's memory at the same moment, KiB; 0: not read.
    pub kernel_idle_kib: u64,
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
        let exe = crate::harness::this_program()?;
        let (client_cpu, server_cpu) = pinned_cpus();
        let logs = LogDir::new(what)?;
        let topo = Topology::build("metc", "mets", net)?;
        Ok(Bed {
            topo,
            logs,
            exe,
            client_cpu,
            server_cpu,
            stop,
            net,
        })
    }

    pub(crate) fn target(&self, stack: &str) -> String {
        let sub = if stack == "corestack" { 1 } else { 2 };
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
    let r = observe::stats_shm::StatsReader::open(&observe::stats_shm::stats_path(pid)).ok()?;
    let values = r.read()?;
    let names = corestack::Stats::default();
    let names: Vec<&'static str> = names.iter().map(|(n, _)| n).collect();
    (values.len() == names.len()).then(|| names.into_iter().zip(values).collect())
}

/// The options the connection benchmarks give a corestack end: `mode`, busy polling and fixed
/// 4 KiB socket rings (so that memory follows the connections, not the traffic).
pub(crate) fn busy_small_rings(mode: &'static str) -> [&'static str; 8] {
    [
        "--mode",
        mode,
        "--poll",
        "busy",
        "--ring-bytes",
        "4096",
        "--ring-max-bytes",
        "4096",
    ]
}

/// The `watched` counters that grew from `before` to `after`, as `name +delta`.
pub(crate) fn counters_moved(
    before: &HashMap<&'static str, u64>,
    after: &HashMap<&'static str, u64>,
    watched: &[&str],
) -> Vec<String> {
    watched
        .iter()
        .filter_map(|&name| {
            let d = after.get(name)?.saturating_sub(*before.get(name)?);
            (d > 0).then(|| format!("{name} +{d}"))
        })
        .collect()
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
    let tuned = points.iter().any(|p| p.stack == TUNED);
    print!(
        "{x_name:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8}",
        "p50 Linux", "p50 core", "p99 Linux", "p99 core", "rt/s Linux", "rt/s core", "rt/s c/L"
    );
    if tuned {
        print!(
            " {:>9} {:>9} {:>11} {:>8}",
            "p50 tuned", "p99 tuned", "rt/s tuned", "rt/s c/T"
        );
    }
    println!();
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
        print!(
            "{x:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8}",
            f(g(l, |p| p.p50_us), 1),
            f(g(c, |p| p.p50_us), 1),
            f(g(l, |p| p.p99_us), 1),
            f(g(c, |p| p.p99_us), 1),
            f(lr, 0),
            f(cr, 0),
            f(cr / lr, 2),
        );
        let t = by.get(&(TUNED, x));
        if tuned {
            let tr = g(t, |p| p.round_trips_per_s);
            print!(
                " {:>9} {:>9} {:>11} {:>8}",
                f(g(t, |p| p.p50_us), 1),
                f(g(t, |p| p.p99_us), 1),
                f(tr, 0),
                f(cr / tr, 2),
            );
        }
        println!();
        for p in [l, t, c].into_iter().flatten() {
            if let Some(n) = &p.note {
                notes.push(format!("{x} {}: {n}", p.stack));
            } else if show_open && p.connected != p.x {
                notes.push(format!("{x} {}: {} connections open", p.stack, p.connected));
            }
        }
    }
    println!(
        "(µs; rt/s: round trips per second, all connections together; c/L: corestack/Linux{})",
        if tuned {
            "; c/T: corestack/Linux tuned"
        } else {
            ""
        }
    );
    for n in notes {
        println!("note: {n}");
    }
}

/// conn-sweep's memory table: the servers' resident memory, the growth of the kernel's
/// memory, and what one connection costs each server, busy and idle. Growth is counted from before each
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
        "\n{:>11} {:>11} {:>11} {:>11} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "connections",
        "RSS Linux",
        "RSS core",
        "kernel+ L",
        "kernel+ core",
        "B/conn L",
        "B/conn core",
        "idle B/c L",
        "idle B/c core"
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
        let idle = |rss: u64, kernel: u64| rss != 0 && kernel != 0;
        let (l_idle, c_idle) = if idle(l.server_rss_idle_kib, l.kernel_idle_kib)
            && idle(c.server_rss_idle_kib, c.kernel_idle_kib)
        {
            let (lk, ck) = (
                l.kernel_idle_kib as i64 - l_k0,
                c.kernel_idle_kib as i64 - c_k0,
            );
            (
                per(l.server_rss_idle_kib as i64 - l_rss0 + lk - ck, ln),
                per(c.server_rss_idle_kib as i64 - c_rss0, cn),
            )
        } else {
            ("-".to_string(), "-".to_string())
        };
        println!(
            "{x:>11} {:>11} {:>11} {:>11} {:>12} {:>12} {:>12} {:>12} {:>12}",
            mib(l.server_rss_kib as i64),
            mib(c.server_rss_kib as i64),
            mib(l_kernel),
            mib(c_kernel),
            per(linux_server, ln),
            per(c.server_rss_kib as i64 - c_rss0, cn),
            l_idle,
            c_idle,
        );
    }
    println!(
        "(MiB; RSS: the server's processes; kernel+: growth of slab and TCP buffer memory, \
         machine-wide, since before the first point; B/conn: bytes per open connection of \
         each server since before its first point, Linux's in its processes and the kernel, \
         with one message in flight on each; idle B/c: the same once every echo was read \
         back and the server's memory stopped falling, nothing sent)"
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
        let mut stacks: Vec<&str> = Vec::new();
        for p in points {
            if !stacks.contains(&p.stack.as_str()) {
                stacks.push(&p.stack);
            }
        }
        let mut series = Vec::new();
        for &stack in &stacks {
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
        let series: Vec<Series> = stacks
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
