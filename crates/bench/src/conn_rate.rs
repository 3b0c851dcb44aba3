//! `corestack bench conn-rate`: short connections at rate. K clients each loop over connect,
//! one request, its echo, close (the client closes first), against a Linux and a corestack
//! server side by side in one run, and a corestack client against the Linux server.
//!
//! ```text
//!  namespace client (CPU 0)                          namespace server (CPU 1)
//!  c1 10.N.1.1/24   ── veth ──  s1 (corestack 10.N.1.2 via af_xdp: serve echo, inline, spins)
//!  c2 10.N.2.1/24   ── veth ──  s2 10.N.2.2/24 (Linux: bench conn-echo, one thread, epoll, spins)
//!  c2 10.N.2.3 (corestack client via af_xdp, inline, spins)
//! ```
//!
//! Rows, each the median of `--rounds` runs, one server at a time:
//! - Linux → Linux: `bench rate-client` on the kernel stack against the Linux server;
//! - Linux → corestack: the same client against the corestack server;
//! - corestack → Linux: `bench rate-client --iface c2` on corestack against the Linux server.
//!
//! The kernel client's namespace takes ports in TIME-WAIT again (`tcp_tw_reuse = 1`) and has
//! the whole port range; corestack's client does the same by itself (RFC 6191).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

use crate::harness::{CLIENT_CPU, SERVER_CPU};
use crate::report::median;
use crate::sweep::{busy_small_rings, counters_moved, engine_counters, Bed, PORT};
use cmdline::{one_line, Interrupted, StackOpts};

/// `bench conn-rate` options.
#[derive(Args, Debug)]
pub struct ConnRate {
    /// Clients running at once (each: connect, request, response, close, again).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    conns: u32,
    /// Measured seconds per run (after a 0.3 s warm-up).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Request (and response) size, bytes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    size: u32,
    /// Runs per row; the table shows their medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    rounds: u32,
    /// Also write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// One run of one row.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RateRun {
    /// Exchanges completed per second (connect to close).
    pub conns_per_s: f64,
    /// Median exchange, µs (connect called to response read).
    pub p50_us: f64,
    /// 99th percentile exchange, µs.
    pub p99_us: f64,
    /// Exchanges that failed (refused, reset, timed out, wrong echo).
    pub failed: u64,
}

/// One row: its runs and their medians.
#[derive(Debug, Clone, Serialize)]
struct Row {
    name: &'static str,
    runs: Vec<RateRun>,
    median: RateRun,
    /// What the corestack engine counted during the runs (drops, retransmissions).
    note: Option<String>,
}

/// The rows: (name, server stack, client on corestack).
const ROWS: [(&str, &str, bool); 3] = [
    ("Linux -> Linux", "Linux", false),
    ("Linux -> corestack", "corestack", false),
    ("corestack -> Linux", "Linux", true),
];

/// Engine counters shown beside a row when they moved.
const WATCHED: [&str; 7] = [
    "rx_fill_empty",
    "tx_no_buffer",
    "drop_tcp_backlog_full",
    "drop_tcp_table_full",
    "tcp_syncookies_sent",
    "tcp_retransmits",
    "tcp_time_wait_recycled",
];

impl ConnRate {
    /// Builds the namespaces, runs every row `--rounds` times, prints the table and writes
    /// `--json`. Errors: not root, a server that does not start, Ctrl-C.
    pub fn run(self) -> Result<()> {
        crate::harness::check_seconds("--seconds", self.seconds, 60.0)?;
        let bed = Bed::new("conn-rate", 163)?;
        for setting in [
            "net.ipv4.tcp_tw_reuse=1",
            "net.ipv4.ip_local_port_range=1024 65535",
        ] {
            bed.topo.client.run("sysctl", &["-qw", setting])?;
        }
        bed.topo
            .server
            .run("sysctl", &["-qw", "net.core.somaxconn=4096"])?;
        let (k, size, secs) = (
            self.conns.to_string(),
            self.size.to_string(),
            self.seconds.to_string(),
        );
        let client_ip = format!("10.{}.2.3/24", bed.net);
        let mut rows = Vec::new();
        for (name, server_stack, core_client) in ROWS {
            eprintln!("conn-rate: {name}");
            let mut server = if server_stack == "Linux" {
                let ip = format!("10.{}.2.2", bed.net);
                let port = PORT.to_string();
                bed.spawn_server(
                    server_stack,
                    &["bench", "conn-echo", "--ip", &ip, "--port", &port],
                )?
            } else {
                bed.server(
                    server_stack,
                    &["--ring-bytes", "4096", "--ring-max-bytes", "4096"],
                )?
            };
            let target = bed.target(server_stack);
            let mut args = vec![
                "bench",
                "rate-client",
                "--target",
                &target,
                "--conns",
                &k,
                "--size",
                &size,
                "--seconds",
                &secs,
            ];
            if core_client {
                args.extend_from_slice(&["--iface", "c2", "--ip", &client_ip]);
                args.extend_from_slice(&busy_small_rings("inline"));
            }
            let before = (server_stack != "Linux")
                .then(|| engine_counters(server.id()))
                .flatten();
            let mut runs = Vec::new();
            let mut note = None;
            for round in 0..self.rounds {
                let log = format!("rate-{}-{round}.log", name.replace(' ', ""));
                let timeout = Duration::from_secs_f64(self.seconds + 60.0);
                match bed.client(&args, &log, timeout) {
                    Ok(v) => {
                        let f = |key: &str| v.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN);
                        let run = RateRun {
                            conns_per_s: f("conns_per_s"),
                            p50_us: f("p50_us"),
                            p99_us: f("p99_us"),
                            failed: v.get("failed").and_then(Value::as_u64).unwrap_or(0),
                        };
                        if let Some(c) = v.get("counters").and_then(Value::as_str) {
                            note = Some(format!("corestack client: {c}"));
                        }
                        eprintln!(
                            "  run {}: {:.0} connections/s, p50 {:.1} µs, p99 {:.1} µs, {} failed",
                            round + 1,
                            run.conns_per_s,
                            run.p50_us,
                            run.p99_us,
                            run.failed
                        );
                        runs.push(run);
                    }
                    Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
                    Err(e) => {
                        eprintln!("  run {}: {}", round + 1, one_line(&e));
                        note = Some(one_line(&e));
                    }
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            if let (Some(b), Some(a)) = (before, engine_counters(server.id())) {
                let moved = counters_moved(&b, &a, &WATCHED);
                if !moved.is_empty() {
                    note = Some(format!("corestack server: {}", moved.join(", ")));
                }
            }
            server.terminate(Duration::from_secs(5))?;
            let pick = |f: fn(&RateRun) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
            let median_run = RateRun {
                conns_per_s: pick(|r| r.conns_per_s),
                p50_us: pick(|r| r.p50_us),
                p99_us: pick(|r| r.p99_us),
                failed: runs.iter().map(|r| r.failed).sum(),
            };
            rows.push(Row {
                name,
                runs,
                median: median_run,
                note,
            });
        }
        drop(bed);
        println!(
            "corestack bench conn-rate: {} clients at once, each: connect, {}-byte request, \
             echo, close (the client closes first)",
            self.conns, self.size
        );
        println!(
            "servers: Linux: bench conn-echo (one thread, epoll, spins); corestack: serve echo \
             (inline engine, --poll busy, af_xdp); clients: bench rate-client, kernel (epoll, \
             blocks) or corestack (inline, spins); server on CPU {SERVER_CPU}, client on CPU \
             {CLIENT_CPU}"
        );
        println!(
            "median of {} runs of {} s; failed: all runs\n",
            self.rounds, self.seconds
        );
        println!(
            "{:<20} {:>12} {:>9} {:>10} {:>10} {:>7}",
            "client -> server", "conns/s", "x Linux", "p50 µs", "p99 µs", "failed"
        );
        let base = rows[0].median.conns_per_s;
        for r in &rows {
            let m = &r.median;
            println!(
                "{:<20} {:>12.0} {:>9.2} {:>10.1} {:>10.1} {:>7}",
                r.name,
                m.conns_per_s,
                m.conns_per_s / base,
                m.p50_us,
                m.p99_us,
                m.failed
            );
        }
        for r in &rows {
            if let Some(n) = &r.note {
                println!("note: {}: {n}", r.name);
            }
        }
        if let Some(path) = &self.json {
            let out = serde_json::json!({
                "bench": "conn-rate",
                "clients": self.conns,
                "size": self.size,
                "seconds": self.seconds,
                "rows": rows,
            });
            std::fs::write(path, serde_json::to_string_pretty(&out)?)
                .with_context(|| format!("writing {}", path.display()))?;
            println!("json: {}", path.display());
        }
        Ok(())
    }
}

/// `bench rate-client` (hidden; run by conn-rate): K clients looping over connect, request,
/// echo, close, on the kernel stack (epoll) or on corestack (`--iface`); prints one JSON
/// object: `conns_per_s`, `p50_us`, `p99_us`, `failed`, `exchanges`.
#[derive(Args, Debug)]
pub struct RateClient {
    /// The echo server.
    #[arg(long)]
    target: SocketAddrV4,
    /// Clients at once.
    #[arg(long, default_value_t = 64)]
    conns: u32,
    /// Request size, bytes (at most 4096).
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Measured seconds (after a 0.3 s warm-up).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// The stack: corestack with --iface, else the kernel's.
    #[command(flatten)]
    stack: StackOpts,
}

/// An exchange taking longer than this failed.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(3);

/// What one client's exchange has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Connect called; waiting for the handshake.
    Connecting,
    /// Request written (`sent` bytes), echo `got` bytes back.
    Exchanging { sent: usize, got: usize },
}

/// Counts, latencies and the measured window of a client run.
struct Tally {
    hist: Histogram<u64>,
    failed: u64,
    /// Failures by what failed: connect, write, eof, read, echo, timeout.
    failures: std::collections::BTreeMap<&'static str, u64>,
    warm_end: Instant,
    end: Instant,
}

impl Tally {
    fn new(seconds: f64) -> Result<Tally> {
        let warm_end = Instant::now() + Duration::from_millis(300);
        Ok(Tally {
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3).context("histogram")?,
            failed: 0,
            failures: Default::default(),
            warm_end,
            end: warm_end + Duration::from_secs_f64(seconds.clamp(0.1, 60.0)),
        })
    }

    fn done(&mut self, t0: Instant) {
        if t0 >= self.warm_end && Instant::now() <= self.end {
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.hist.saturating_record(ns.max(1));
        }
    }

    fn fail(&mut self, t0: Instant, why: &'static str) {
        if t0 >= self.warm_end {
            self.failed += 1;
            *self.failures.entry(why).or_default() += 1;
        }
    }

    /// A connection's exchange ended (`Done` or `Failed`): counted, and
    /// slot `i` is restarted.
    fn ended(&mut self, step: Step, t0: Instant, i: usize, restart: &mut Vec<usize>) {
        match step {
            Step::Done => self.done(t0),
            Step::Failed(why) => self.fail(t0, why),
            Step::More => {}
        }
        restart.push(i);
    }

    /// Every 100 ms: slots whose exchange ran past [`EXCHANGE_LIMIT`]
    /// (counted as failed) and empty slots go to `restart`.
    fn sweep<S, P>(
        &mut self,
        slots: &[Option<(S, Instant, P)>],
        last_sweep: &mut Instant,
        restart: &mut Vec<usize>,
    ) {
        if last_sweep.elapsed() <= Duration::from_millis(100) {
            return;
        }
        *last_sweep = Instant::now();
        for (i, slot) in slots.iter().enumerate() {
            match slot {
                Some((_, t0, _)) if t0.elapsed() > EXCHANGE_LIMIT => {
                    self.fail(*t0, "timeout");
                    restart.push(i);
                }
                None => restart.push(i),
                _ => {}
            }
        }
    }

    fn report(&self, counters: Option<String>) {
        let secs = self.end.duration_since(self.warm_end).as_secs_f64();
        let us = |q: f64| self.hist.value_at_quantile(q) as f64 / 1000.0;
        let out = serde_json::json!({
            "exchanges": self.hist.len(),
            "conns_per_s": self.hist.len() as f64 / secs,
            "p50_us": us(0.5),
            "p99_us": us(0.99),
            "failed": self.failed,
            "failures": self.failures,
            "counters": counters,
        });
        println!("{out}");
    }
}

impl RateClient {
    /// Runs the clients for the warm-up and `--seconds`, then prints the JSON object.
    /// Errors: corestack cannot start, epoll fails.
    pub fn run(self) -> Result<()> {
        let size = self.size.clamp(1, 4096) as usize;
        let msg: Vec<u8> = (0..size).map(|i| (i as u8).wrapping_mul(13)).collect();
        if self.stack.iface.is_some() {
            self.run_corestack(&msg)
        } else {
            self.run_kernel(&msg)
        }
    }

    fn run_kernel(&self, msg: &[u8]) -> Result<()> {
        let mut poll = mio::Poll::new().context("creating epoll")?;
        let mut events = mio::Events::with_capacity(1024);
        let mut tally = Tally::new(self.seconds)?;
        let n = self.conns as usize;
        let mut slots: Vec<Option<(mio::net::TcpStream, Instant, Phase)>> = Vec::new();
        let open = |poll: &mut mio::Poll, i: usize| -> io::Result<(mio::net::TcpStream, Instant)> {
            let t0 = Instant::now();
            let mut s = mio::net::TcpStream::connect(SocketAddr::V4(self.target))?;
            poll.registry().register(
                &mut s,
                mio::Token(i),
                mio::Interest::READABLE | mio::Interest::WRITABLE,
            )?;
            Ok((s, t0))
        };
        for i in 0..n {
            slots.push(
                open(&mut poll, i)
                    .ok()
                    .map(|(s, t0)| (s, t0, Phase::Connecting)),
            );
        }
        let mut buf = vec![0u8; msg.len()];
        let mut last_sweep = Instant::now();
        while Instant::now() < tally.end {
            match poll.poll(&mut events, Some(Duration::from_millis(10))) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("epoll_wait"),
            }
            let mut restart = Vec::new();
            for ev in events.iter() {
                let i = ev.token().0;
                let Some((s, t0, phase)) = slots.get_mut(i).and_then(Option::as_mut) else {
                    continue;
                };
                match kernel_step(s, phase, msg, &mut buf) {
                    Step::More => {}
                    end => tally.ended(end, *t0, i, &mut restart),
                }
            }
            tally.sweep(&slots, &mut last_sweep, &mut restart);
            for i in restart {
                if let Some((mut s, _, _)) = slots[i].take() {
                    let _ = poll.registry().deregister(&mut s);
                }
                slots[i] = open(&mut poll, i)
                    .ok()
                    .map(|(s, t0)| (s, t0, Phase::Connecting));
            }
        }
        tally.report(None);
        Ok(())
    }

    fn run_corestack(&self, msg: &[u8]) -> Result<()> {
        use corestack::{Interest, Poller, TcpStream};
        let stack = self.stack.start()?;
        let mut poller = Poller::new(&stack);
        let mut tally = Tally::new(self.seconds)?;
        let n = self.conns as usize;
        let mut slots: Vec<Option<(TcpStream, Instant, Phase)>> = Vec::new();
        // Tokens are never reused: an exchange's token is k * n + i, for the k-th of slot i.
        let mut gen = vec![0u64; n];
        let open = |poller: &mut Poller, token: u64| -> io::Result<(TcpStream, Instant)> {
            let t0 = Instant::now();
            let s = TcpStream::start_connect(&stack, self.target, 0, true)?;
            poller.register(&s, token, Interest::BOTH)?;
            Ok((s, t0))
        };
        for (i, g) in gen.iter().enumerate() {
            let token = g * n as u64 + i as u64;
            slots.push(
                open(&mut poller, token)
                    .ok()
                    .map(|(s, t0)| (s, t0, Phase::Connecting)),
            );
        }
        let mut events = Vec::with_capacity(1024);
        let mut buf = vec![0u8; msg.len()];
        let mut last_sweep = Instant::now();
        while Instant::now() < tally.end {
            // Inline mode: the engine runs in waits that wait; a loop whose waits always
            // find a socket ready runs it itself.
            stack.drive();
            poller.wait(&mut events, 1024, Some(Duration::from_millis(1)))?;
            let mut restart = Vec::new();
            for ev in &events {
                let i = (ev.token % n as u64) as usize;
                if ev.token / n as u64 != gen[i] {
                    continue;
                }
                let Some((s, t0, phase)) = slots.get_mut(i).and_then(Option::as_mut) else {
                    continue;
                };
                let was_sending = matches!(*phase, Phase::Connecting)
                    || matches!(*phase, Phase::Exchanging { sent, .. } if sent < msg.len());
                match core_step(s, phase, msg, &mut buf) {
                    Step::More => {
                        let sent_all =
                            matches!(*phase, Phase::Exchanging { sent, .. } if sent == msg.len());
                        if was_sending && sent_all {
                            // The request is out: wait for the echo only.
                            poller.reregister(ev.token, Interest::READABLE)?;
                        }
                    }
                    end => tally.ended(end, *t0, i, &mut restart),
                }
            }
            tally.sweep(&slots, &mut last_sweep, &mut restart);
            for i in restart {
                let token = gen[i] * n as u64 + i as u64;
                if slots[i].take().is_some() {
                    let _ = poller.deregister(token);
                }
                gen[i] += 1;
                let token = gen[i] * n as u64 + i as u64;
                slots[i] = open(&mut poller, token)
                    .ok()
                    .map(|(s, t0)| (s, t0, Phase::Connecting));
            }
        }
        let s = stack.stats();
        let counters = format!(
            "active opens {}, time-wait recycled {}, table full {}, retransmits {}",
            s.tcp_active_opens, s.tcp_time_wait_recycled, s.drop_tcp_table_full, s.tcp_retransmits
        );
        tally.report(Some(counters));
        Ok(())
    }
}

/// What a client's readiness moved.
enum Step {
    More,
    Done,
    /// The exchange failed, and why (a key of the client's `failures`).
    Failed(&'static str),
}

/// Moves a kernel client's exchange on: the request out once connected, the echo in.
fn kernel_step(s: &mut mio::net::TcpStream, phase: &mut Phase, msg: &[u8], buf: &mut [u8]) -> Step {
    if *phase == Phase::Connecting {
        match s.take_error() {
            Ok(None) => {}
            _ => return Step::Failed("connect"),
        }
        match s.peer_addr() {
            Ok(_) => *phase = Phase::Exchanging { sent: 0, got: 0 },
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return Step::More,
            Err(_) => return Step::Failed("connect"),
        }
    }
    exchange(s, phase, msg, buf)
}

/// Moves a corestack client's exchange on, as [`kernel_step`].
fn core_step(s: &mut corestack::TcpStream, phase: &mut Phase, msg: &[u8], buf: &mut [u8]) -> Step {
    if *phase == Phase::Connecting {
        if s.take_error() != 0 {
            return Step::Failed("connect");
        }
        if s.is_connecting() {
            return Step::More;
        }
        *phase = Phase::Exchanging { sent: 0, got: 0 };
    }
    exchange(s, phase, msg, buf)
}

/// Writes what is left of the request, reads what came of the echo; Done when the whole
/// echo is back and right.
fn exchange<S: Read + Write>(s: &mut S, phase: &mut Phase, msg: &[u8], buf: &mut [u8]) -> Step {
    let Phase::Exchanging { sent, got } = phase else {
        return Step::More;
    };
    while *sent < msg.len() {
        match s.write(&msg[*sent..]) {
            Ok(0) => return Step::Failed("write"),
            Ok(k) => *sent += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::More,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Step::Failed("write"),
        }
    }
    loop {
        match s.read(&mut buf[*got..]) {
            Ok(0) => return Step::Failed("eof"),
            Ok(k) => {
                if buf[*got..*got + k] != msg[*got..*got + k] {
                    return Step::Failed("echo");
                }
                *got += k;
                if *got == msg.len() {
                    return Step::Done;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::More,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Step::Failed("read"),
        }
    }
}
