//! `corestack bench sockperf`: 64-byte TCP ping-pong with the distribution's sockperf, its
//! server on Linux and under `corestack exec` (embedded, inline; service mode once the shim has
//! it), its client on the kernel stack in the other namespace; the topology and rows of
//! [`crate::harness::shim`].
//!
//! Who spins and who blocks (as sockperf 3.7 does it by default):
//! - the client (`sockperf ping-pong -i IP`) uses one blocking socket: it sends, then blocks
//!   in recvfrom(2) for the answer (it does not spin);
//! - the server (`sockperf server -f FEED -F epoll`) blocks in epoll_wait(2) with its 10 ms
//!   timeout, then reads and answers. Under the shim in embedded mode, with the server and its
//!   engine thread on one CPU, that wait sleeps at once on an eventfd the engine signals, and
//!   the engine thread naps on the NIC queue as soon as it is idle (corestack's client does
//!   not spin on a single allowed CPU); in inline mode the waiting server thread drives the
//!   engine itself, spinning up to 50 µs (a budget learnt from its idle
//!   spells) before it sleeps on the NIC queue.
//!
//! Latency is sockperf's round-trip time (`--full-rtt`), its percentiles as it prints them.
//! Rows alternate within each round; the table shows each figure's median over the rounds.
//! The server's CPU (utime + stime from /proc, program and daemon) is divided by the round
//! trips. `--json FILE` writes every round.
//!
//! `linux-tuned` is `linux` with busy polling switched on ([`crate::harness::tuned`]); the
//! ratios are given over it too (`/tuned`). `--breakdown` runs each row once more, apart from
//! the rounds, with perf attached to the server for the whole ping-pong, and prints the cost
//! breakdown ([`crate::harness::cost`]): where a round trip's CPU time goes on the server.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use netns::NextLine;
use serde::Serialize;

use crate::harness::children::{last_line, LogDir, Topology};
use crate::harness::cost::{self, Breakdown, Probe, Window};
use crate::harness::cpu::cpu_seconds;
use crate::harness::shim::{self, Row, CLIENT_CPU, NET, SERVER_CPU};
use crate::report::upper_median;
use cmdline::{one_line, stop_flag, Interrupted};

const PORT: u16 = 11111;

/// `bench sockperf` options.
#[derive(Args, Debug)]
pub struct SockperfBench {
    /// Seconds of ping-pong per row and round.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Rounds (rows alternate within each); the table shows medians.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Message size, bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Rows, comma-separated, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "linux,embedded,inline,service"
    )]
    rows: Vec<Row>,
    /// Also write every round's figures to this file as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also break each row's CPU time per round trip down (one more run per row, perf and
    /// /proc on the server's processes): by code, system calls, switches, packets.
    #[arg(long)]
    breakdown: bool,
}

/// One ping-pong run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Run {
    /// Median round trip, µs.
    pub p50_us: f64,
    /// 99th percentile round trip, µs.
    pub p99_us: f64,
    /// Round trips per second.
    pub round_trips_per_s: f64,
    /// Server CPU (program + daemon) per round trip, µs.
    pub server_cpu_us_per_rt: f64,
}

/// A row's runs and medians.
#[derive(Debug, Clone, Serialize)]
pub struct RowRuns {
    pub row: Row,
    pub label: &'static str,
    pub skipped: Option<String>,
    pub runs: Vec<Run>,
    pub median: Option<Run>,
    /// The cost breakdown of the extra run (--breakdown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<Breakdown>,
    /// What the row's server said of itself (Linux tuned: its settings, whether they act).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_note: Option<String>,
}

/// The figure after `key` in sockperf's output (`... key  12.345`).
pub fn field(out: &str, key: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        let (_, rest) = l.split_once(key)?;
        rest.trim_start_matches([' ', '='])
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()?
            .parse()
            .ok()
    })
}

/// Parses a `sockperf ping-pong --full-rtt` output.
pub fn parse_pingpong(out: &str) -> Result<(f64, f64, f64)> {
    let p50 = field(out, "percentile 50.000");
    let p99 = field(out, "percentile 99.000");
    let received = field(out, "ReceivedMessages=");
    let runtime = field(out, "RunTime=");
    match (p50, p99, received, runtime) {
        (Some(a), Some(b), Some(n), Some(t)) if t > 0.0 && n > 0.0 => Ok((a, b, n / t)),
        _ => bail!("no ping-pong result in sockperf's output"),
    }
}

impl SockperfBench {
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        if !((1.0..=60.0).contains(&self.seconds) && (1..=20).contains(&self.rounds)) {
            bail!("--seconds must be in [1, 60] (sockperf's unit) and --rounds in 1..=20");
        }
        if !(14..=65000).contains(&self.size) {
            bail!("--size must be in 14..=65000 bytes (sockperf's limits)");
        }
        netns::check_privileges()?;
        let found = std::process::Command::new("sh")
            .args(["-c", "command -v sockperf"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            bail!("sockperf is not installed: run scripts/setup.sh (as root)");
        }
        let exe = crate::harness::this_program()?;
        let logs = LogDir::new("bench-sockperf")?;
        let topo = Topology::build("mcbc", "mcbs", NET)?;
        let socket = format!("/tmp/corestack-mcb-sp-{}.sock", std::process::id());
        let mut rows: Vec<RowRuns> = self
            .rows
            .iter()
            .map(|&row| RowRuns {
                row,
                label: row.label(),
                skipped: None,
                runs: Vec::new(),
                median: None,
                breakdown: None,
                server_note: None,
            })
            .collect();
        for round in 0..self.rounds {
            for r in rows.iter_mut().filter(|r| r.skipped.is_none()) {
                if stop.load(Ordering::Relaxed) {
                    return Err(Interrupted.into());
                }
                eprintln!(
                    "bench sockperf: round {}/{}: {}",
                    round + 1,
                    self.rounds,
                    r.label
                );
                match self.one(r.row, round, &exe, &topo, &logs, &socket, &stop, None) {
                    Ok((run, _, note)) => {
                        r.runs.push(run);
                        r.server_note = note;
                    }
                    Err(e) if e.is::<Interrupted>() => return Err(e),
                    Err(e) => {
                        let why = one_line(&e);
                        eprintln!("bench sockperf: {}: skipped: {why}", r.label);
                        r.skipped = Some(why);
                        r.runs.clear();
                    }
                }
            }
        }
        if self.breakdown {
            for r in rows.iter_mut().filter(|r| r.skipped.is_none()) {
                if stop.load(Ordering::Relaxed) {
                    return Err(Interrupted.into());
                }
                eprintln!("bench sockperf: breakdown: {}", r.label);
                let dir = logs.file(&format!("breakdown-{}", r.row.key()));
                std::fs::create_dir_all(&dir).context("creating the breakdown's directory")?;
                let run = self.one(
                    r.row,
                    self.rounds,
                    &exe,
                    &topo,
                    &logs,
                    &socket,
                    &stop,
                    Some(&dir),
                );
                match run {
                    Ok((_, w, _)) => r.breakdown = w.as_ref().map(Breakdown::of),
                    Err(e) if e.is::<Interrupted>() => return Err(e),
                    Err(e) => eprintln!(
                        "bench sockperf: {}: no breakdown: {}",
                        r.label,
                        one_line(&e)
                    ),
                }
            }
        }
        for r in &mut rows {
            if r.runs.is_empty() {
                continue;
            }
            let m = |f: fn(&Run) -> f64| upper_median(&r.runs.iter().map(f).collect::<Vec<_>>());
            r.median = Some(Run {
                p50_us: m(|x| x.p50_us),
                p99_us: m(|x| x.p99_us),
                round_trips_per_s: m(|x| x.round_trips_per_s),
                server_cpu_us_per_rt: m(|x| x.server_cpu_us_per_rt),
            });
        }
        print!("{}", self.render(&rows));
        if let Some(path) = &self.json {
            #[derive(Serialize)]
            struct Report<'a> {
                size: usize,
                seconds: f64,
                rounds: usize,
                client_cpu: &'static str,
                server_cpu: &'static str,
                client: &'static str,
                server: &'static str,
                rows: &'a [RowRuns],
            }
            let report = Report {
                size: self.size,
                seconds: self.seconds,
                rounds: self.rounds,
                client_cpu: CLIENT_CPU.as_str(),
                server_cpu: SERVER_CPU.as_str(),
                client: "blocks (recvfrom on a blocking socket)",
                server: "blocks (epoll_wait, -F epoll); embedded: no spin, the engine naps when idle; inline: drives the engine, 50 µs spin, then sleeps",
                rows: &rows,
            };
            std::fs::write(path, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// One ping-pong run against `row`'s server: its figures, with `probe` (a directory for
    /// perf's files) the cost breakdown's window over the client's run, and the server's note.
    #[allow(clippy::too_many_arguments)]
    fn one(
        &self,
        row: Row,
        round: usize,
        exe: &std::path::Path,
        topo: &Topology,
        logs: &LogDir,
        socket: &str,
        stop: &AtomicBool,
        probe: Option<&std::path::Path>,
    ) -> Result<(Run, Option<Window>, Option<String>)> {
        let ip = if row.on_kernel() {
            shim::LINUX_IP
        } else {
            shim::CORE_IP
        };
        let feed = logs.file(&format!("feed-{}", row.key()));
        std::fs::write(&feed, format!("T:{ip}:{PORT}\n")).context("writing sockperf's feed")?;
        let feed = feed.to_string_lossy().to_string();
        let msg = self.size.to_string();
        let server = shim::start(
            row,
            &["sockperf", "server", "-f", &feed, "-F", "epoll"],
            exe,
            topo,
            logs,
            socket,
            stop,
        )?;
        let secs = format!("{}", self.seconds.round() as u64);
        let port = PORT.to_string();
        let args = [
            "ping-pong",
            "--tcp",
            "-i",
            ip,
            "-p",
            &port,
            "-m",
            &msg,
            "-t",
            &secs,
            "--full-rtt",
        ];
        let log = logs.file(&format!("client-{}-{round}.log", row.key()));
        // The server is ready when it accepts: retry a refused client for a few seconds.
        let deadline = Instant::now() + Duration::from_secs(5);
        let (out, cpu, window) = loop {
            if stop.load(Ordering::Relaxed) {
                return Err(Interrupted.into());
            }
            let window = probe
                .map(|dir| Probe::start(&server.cpu_pids, server.iface, dir))
                .transpose()?;
            let cpu0 = cpu_seconds(&server.cpu_pids)?;
            let mut c = shim::spawn(
                &topo.client,
                CLIENT_CPU.as_str(),
                std::path::Path::new("sockperf"),
                &args,
                &log,
            )?;
            let limit = Instant::now() + Duration::from_secs_f64(self.seconds + 20.0);
            let mut out = String::new();
            loop {
                match c.next_line(Duration::from_millis(100)) {
                    NextLine::Line(l) => {
                        out.push_str(&l);
                        out.push('\n');
                    }
                    NextLine::Pending => {}
                    NextLine::Closed => break,
                }
                if Instant::now() > limit {
                    bail!("sockperf ping-pong did not finish in time");
                }
            }
            let ok = c
                .wait_timeout(Duration::from_secs(5))?
                .is_some_and(|s| s.success());
            let cpu = cpu_seconds(&server.cpu_pids)? - cpu0;
            if ok && parse_pingpong(&out).is_ok() {
                // Every answer of the run, its warm-up included, is in the window.
                let answered = field(&out, "ReceivedMessages=").unwrap_or(0.0) as u64;
                break (out, cpu, window.map(|w| w.finish(answered)).transpose()?);
            }
            if Instant::now() > deadline {
                let said = last_line(&server.log);
                bail!(
                    "sockperf ping-pong to {ip}:{PORT} failed: {}{}",
                    out.lines()
                        .rev()
                        .find(|l| l.contains("ERROR") || l.contains("rror"))
                        .unwrap_or_else(|| out.lines().last().unwrap_or("no output")),
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(" (server's last line: {said})")
                    }
                );
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        let note = server.note.clone();
        server.stop()?;
        let (p50_us, p99_us, rt) = parse_pingpong(&out)?;
        let run = Run {
            p50_us,
            p99_us,
            round_trips_per_s: rt,
            server_cpu_us_per_rt: cpu * 1e6 / (rt * self.seconds.round()).max(1.0),
        };
        Ok((run, window, note))
    }

    fn render(&self, rows: &[RowRuns]) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "\ncorestack bench sockperf: {}-byte TCP ping-pong, sockperf server vs a Linux \
             sockperf client; median of {} rounds of {} s (rows alternate)",
            self.size,
            self.rounds,
            self.seconds.round()
        );
        let _ = writeln!(
            o,
            "client on CPU {CLIENT_CPU}: blocks (ping-pong on a blocking socket: send, then \
             recvfrom); server on CPU {SERVER_CPU}: blocks in epoll_wait (-F epoll); both at {}",
            shim::sched()
        );
        let _ = writeln!(
            o,
            "under the shim: embedded, the server's wait sleeps at once on an eventfd and the engine \
             thread (same CPU) naps as soon as it is idle; inline, the server thread drives the \
             engine, spinning up to 50 µs (a budget learnt from its idle spells) before it sleeps on the NIC queue\n"
        );
        let median_of = |want: Row| rows.iter().find(|r| r.row == want).and_then(|r| r.median);
        let (linux, tuned) = (median_of(Row::Linux), median_of(Row::LinuxTuned));
        let _ = write!(
            o,
            "{:<20} {:>11} {:>11} {:>12} {:>13} {:>10} {:>10}",
            "",
            "p50 RTT µs",
            "p99 RTT µs",
            "round trips/s",
            "srv CPU µs/RT",
            "p50/Linux",
            "p99/Linux"
        );
        if tuned.is_some() {
            let _ = write!(o, " {:>10} {:>10}", "p50/tuned", "p99/tuned");
        }
        o.push('\n');
        for r in rows {
            let Some(m) = r.median else {
                let _ = writeln!(
                    o,
                    "{:<20} skipped: {}",
                    r.label,
                    r.skipped.as_deref().unwrap_or("no run")
                );
                continue;
            };
            let ratio = |a: f64, b: Option<f64>| {
                b.filter(|b| *b > 0.0)
                    .map_or("-".into(), |b| format!("{:.2}", a / b))
            };
            let _ = write!(
                o,
                "{:<20} {:>11.1} {:>11.1} {:>12.0} {:>13.2} {:>10} {:>10}",
                r.label,
                m.p50_us,
                m.p99_us,
                m.round_trips_per_s,
                m.server_cpu_us_per_rt,
                ratio(m.p50_us, linux.map(|l| l.p50_us)),
                ratio(m.p99_us, linux.map(|l| l.p99_us)),
            );
            if tuned.is_some() {
                let _ = write!(
                    o,
                    " {:>10} {:>10}",
                    ratio(m.p50_us, tuned.map(|l| l.p50_us)),
                    ratio(m.p99_us, tuned.map(|l| l.p99_us)),
                );
            }
            o.push('\n');
        }
        for r in rows {
            if let Some(n) = &r.server_note {
                let _ = writeln!(o, "{}: {n}", r.label);
            }
        }
        let parts: Vec<(Row, &str, &Breakdown)> = rows
            .iter()
            .filter_map(|r| r.breakdown.as_ref().map(|b| (r.row, r.label, b)))
            .collect();
        if self.breakdown && !parts.is_empty() {
            let _ = writeln!(
                o,
                "\nwhere a round trip's CPU time goes on the server (sockperf and, in service mode, \
                 the daemon), one more {} s run per row with perf attached from the client's start \
                 to its end:",
                self.seconds.round()
            );
            let _ = writeln!(
                o,
                "client on CPU {CLIENT_CPU} blocks in recvfrom; on CPU {SERVER_CPU}: Linux, the \
                 server blocks in epoll_wait; Linux tuned, the same with busy polling (epoll and \
                 reads poll {} µs first); embedded, its wait sleeps at once on an eventfd and the \
                 engine thread naps as soon as it is idle; inline, the server thread drives the \
                 engine, spinning up to 50 µs (a budget learnt from its idle spells) before it sleeps on the NIC queue; service, the daemon's \
                 engine (adaptive polling) beside it",
                crate::harness::tuned::BUSY_POLL_US
            );
            o.push_str(&cost::table(&parts));
            o.push_str(&cost::legend());
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_pingpong_reads_sockperf_full_rtt_output() {
        let out = "sockperf: [Valid Duration] RunTime=0.546 sec; SentMessages=4166; ReceivedMessages=4166\n\
                   sockperf: ---> percentile 99.000 = 2244.579\n\
                   sockperf: ---> percentile 90.000 =   68.558\n\
                   sockperf: ---> percentile 50.000 =   57.998\n";
        let (p50, p99, rt) = parse_pingpong(out).unwrap();
        assert_eq!((p50, p99), (57.998, 2244.579));
        assert!((rt - 4166.0 / 0.546).abs() < 1e-6);
        assert!(parse_pingpong("sockperf: ERROR: connect failed\n").is_err());
    }
}
