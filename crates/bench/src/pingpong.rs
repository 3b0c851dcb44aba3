//! `corestack bench pingpong`: a ping-pong latency client, on the kernel stack or (with
//! `--iface --ip`) on corestack.
//!
//! One connection (or one UDP socket), one message of `--size` bytes in flight; after a
//! warm-up, every round trip's time goes into an HDR histogram (ns, 3 significant digits). It
//! prints p50/p99/p99.9 in µs, round trips per second, and whether this client spins or blocks
//! (the server's side is the server's flag; the demo states both). Bounded by `--duration`; a TCP
//! round trip that takes over 2 s is an error, a UDP one over 200 ms counts as lost.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;

use cmdline::{bind_error, connect_error, set_kernel_cc, Datagram, StackOpts, Stream, Waiter};

/// A TCP round trip slower than this is an error (the server is gone or stuck).
const TCP_RTT_LIMIT: Duration = Duration::from_secs(2);
/// A UDP round trip slower than this counts as lost; the next message is sent.
const UDP_RTT_LIMIT: Duration = Duration::from_millis(200);

/// Protocol choice (exactly one).
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
struct Proto {
    /// Ping-pong over one TCP connection.
    #[arg(long)]
    tcp: bool,
    /// Ping-pong with UDP datagrams.
    #[arg(long)]
    udp: bool,
}

/// How this client waits for the echo.
#[derive(Args, Debug)]
#[group(multiple = false)]
struct WaitMode {
    /// Busy-poll nonblocking sockets (the default).
    #[arg(long)]
    spin: bool,
    /// Block (kernel: blocking sockets; corestack: wait in Stack::poll).
    #[arg(long)]
    block: bool,
}

/// `bench pingpong` options.
#[derive(Args, Debug)]
pub struct Pingpong {
    #[command(flatten)]
    proto: Proto,
    /// Echo server address, IPv4 or IPv6 (`[fd00::2]:7`).
    #[arg(long, value_name = "IP:PORT")]
    target: SocketAddr,
    /// Message size in bytes (UDP: at most 65000).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65536))]
    size: u32,
    /// Measured time in seconds (after the warm-up).
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Warm-up time in seconds, not measured.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Pause between round trips in µs (light load: e.g. 1000 for at most 1000 round trips/s).
    #[arg(long, default_value_t = 0)]
    gap_us: u64,
    #[command(flatten)]
    out: crate::plot::Outputs,
    /// Trace the stages of every corestack process here (this one with --iface, a corestack
    /// server) during the run and print the breakdown after the latency (`corestack trace`).
    #[arg(long, conflicts_with = "json")]
    trace: bool,
    /// Kernel stack, TCP: the socket's congestion control (TCP_CONGESTION), e.g. cubic;
    /// default: the system's.
    #[arg(long, value_name = "NAME")]
    kernel_cc: Option<String>,
    /// Kernel stack: SO_BUSY_POLL on the socket, µs (a client tuned as the benchmarks'
    /// "Linux tuned" servers are, see `bench conn-sweep --linux-tuned`); 0: off.
    #[arg(long, default_value_t = 0, value_name = "US")]
    busy_poll_us: u32,
    #[command(flatten)]
    stack: StackOpts,
    #[command(flatten)]
    wait: WaitMode,
}

/// What a ping-pong run measured (the `--json` object).
#[derive(Debug, Serialize)]
pub struct Report {
    proto: &'static str,
    stack: String,
    target: String,
    size_bytes: u32,
    duration_s: f64,
    round_trips: u64,
    round_trips_per_s: f64,
    lost: u64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    mean_us: f64,
    client: &'static str,
    /// The latency CDF: [round trip µs, fraction of round trips at or below it].
    cdf: Vec<(f64, f64)>,
}

/// The round-trip loop's common state.
struct Run {
    /// Pause after each round trip.
    gap: Duration,
    waiter: Waiter,
    spin: bool,
    size: usize,
    hist: Histogram<u64>,
    lost: u64,
}

impl Run {
    /// Waits once for the socket: spin, or block up to `left`.
    fn idle(&self, left: Duration) -> io::Result<()> {
        if self.spin {
            self.waiter.spin()
        } else {
            self.waiter.wait(left.min(Duration::from_millis(10)))
        }
    }

    /// Runs `one(seq)` (one round trip; Ok(None) = lost) through the warm-up, then measures
    /// until the end of the duration. Returns the measured wall time.
    fn drive(
        &mut self,
        warmup: Duration,
        duration: Duration,
        mut one: impl FnMut(&mut Run, u64) -> Result<Option<Duration>>,
    ) -> Result<Duration> {
        let mut seq = 0u64;
        let start = Instant::now();
        while start.elapsed() < warmup {
            one(self, seq)?;
            seq += 1;
        }
        self.lost = 0;
        let start = Instant::now();
        while start.elapsed() < duration {
            match one(self, seq)? {
                Some(rtt) => {
                    let ns = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX).max(1);
                    self.hist.saturating_record(ns);
                }
                None => self.lost += 1,
            }
            seq += 1;
            if !self.gap.is_zero() {
                std::thread::sleep(self.gap);
            }
        }
        Ok(start.elapsed())
    }
}

/// Fills `msg` for message `seq`: the sequence number, then a pattern.
fn fill(msg: &mut [u8], seq: u64) {
    for (i, b) in msg.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(seq as u8);
    }
    let n = msg.len().min(8);
    msg[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

/// The arguments of `corestack bench pingpong` (after the program's name) for a `proto`
/// (`--tcp` or `--udp`) ping-pong of `size`-byte messages with the echo server at `target` for
/// `secs` seconds; callers add the rest (`--json`, `--spin`, `--warmup S`, ...).
pub fn command_line<'a>(
    proto: &'a str,
    target: &'a str,
    size: &'a str,
    secs: &'a str,
) -> [&'a str; 9] {
    [
        "bench",
        "pingpong",
        proto,
        "--target",
        target,
        "--size",
        size,
        "--duration",
        secs,
    ]
}

impl Pingpong {
    pub fn run(self) -> Result<()> {
        let spin = !self.wait.block;
        let duration_ok = self.duration > 0.0 && self.duration <= 3600.0;
        if !duration_ok || !(0.0..=60.0).contains(&self.warmup) {
            bail!("--duration must be in (0, 3600] seconds and --warmup in [0, 60]");
        }
        if self.proto.udp && self.size > 65000 {
            bail!("--size: a UDP message holds at most 65000 bytes here");
        }
        let earlier = self.out.check()?;
        let warmup = Duration::from_secs_f64(self.warmup);
        let duration = Duration::from_secs_f64(self.duration);
        if self.busy_poll_us > 0 && self.stack.wants_corestack() {
            bail!("--busy-poll-us tunes a kernel socket: leave it out with --iface/--ip");
        }
        let busy_poll = |fd: std::os::fd::BorrowedFd<'_>| -> Result<()> {
            if self.busy_poll_us > 0 {
                crate::harness::tuned::set_busy_poll(fd, self.busy_poll_us)
                    .context("setting SO_BUSY_POLL")?;
            }
            Ok(())
        };
        let (waiter, core) = if self.stack.wants_corestack() {
            let stack = self.stack.start()?;
            (self.stack.waiter(&stack), Some(stack))
        } else {
            (Waiter::Kernel, None)
        };
        let hist =
            Histogram::new_with_bounds(1, 60_000_000_000, 3).context("creating the histogram")?;
        let mut run = Run {
            gap: Duration::from_micros(self.gap_us.min(1_000_000)),
            waiter,
            spin,
            size: self.size as usize,
            hist,
            lost: 0,
        };
        let target = self.target;
        let tracing = if self.trace {
            Some(crate::trace::Tracing::start()?)
        } else {
            None
        };
        let elapsed = match (self.proto.tcp, &core) {
            (true, None) => {
                let mut s = std::net::TcpStream::connect_timeout(&target, Duration::from_secs(3))
                    .map_err(|e| connect_error(e, target))?;
                if let Some(cc) = &self.kernel_cc {
                    set_kernel_cc(&s, cc)?;
                }
                busy_poll(std::os::fd::AsFd::as_fd(&s))?;
                if !spin {
                    s.set_read_timeout(Some(TCP_RTT_LIMIT))?;
                }
                tcp_pingpong(&mut run, &mut s, warmup, duration)?
            }
            (true, Some(stack)) => {
                let mut s = corestack::TcpStream::connect(stack, target)
                    .map_err(|e| connect_error(e, target))?;
                tcp_pingpong(&mut run, &mut s, warmup, duration)?
            }
            (false, None) => {
                let mut u =
                    std::net::UdpSocket::bind(any_of(target)).context("binding a UDP socket")?;
                u.set_nonblocking(true)?;
                busy_poll(std::os::fd::AsFd::as_fd(&u))?;
                udp_pingpong(&mut run, &mut u, target, warmup, duration)?
            }
            (false, Some(stack)) => {
                let local = match target {
                    SocketAddr::V4(_) => SocketAddrV4::new(
                        self.stack.ip4().map_or(Ipv4Addr::UNSPECIFIED, |c| c.addr),
                        0,
                    )
                    .into(),
                    SocketAddr::V6(_) => any_of(target),
                };
                let mut u = corestack::UdpSocket::bind(stack, local)
                    .map_err(|e| bind_error(e, "UDP", local))?;
                u.set_nonblocking(true)?;
                udp_pingpong(&mut run, &mut u, target, warmup, duration)?
            }
        };
        let h = &run.hist;
        let us = |ns: u64| ns as f64 / 1000.0;
        let report = Report {
            proto: if self.proto.tcp { "tcp" } else { "udp" },
            stack: if self.busy_poll_us > 0 {
                format!(
                    "{} (SO_BUSY_POLL {} µs)",
                    self.stack.describe(),
                    self.busy_poll_us
                )
            } else {
                self.stack.describe()
            },
            target: target.to_string(),
            size_bytes: self.size,
            duration_s: elapsed.as_secs_f64(),
            round_trips: h.len(),
            round_trips_per_s: h.len() as f64 / elapsed.as_secs_f64(),
            lost: run.lost,
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1000.0,
            client: if spin { "spins" } else { "blocks" },
            cdf: crate::plot::cdf_points(h),
        };
        if h.is_empty() {
            bail!(
                "no round trip completed with {target} in {:.1} s ({} lost)",
                self.duration,
                run.lost
            );
        }
        self.out.emit(&report)?;
        if !self.out.json_on_stdout() {
            print_report(&report);
        }
        if let Some(t) = tracing {
            t.finish(report.p50_us)?;
        }
        if let Some(path) = &self.out.plot {
            plot_cdf(path, &report, &earlier)?;
            if !self.out.json_on_stdout() {
                println!("plot: {}", path.display());
            }
        }
        if let Some(stack) = core {
            if !self.out.json_on_stdout() {
                println!("corestack statistics:\n{}", stack.stats());
            }
        }
        Ok(())
    }
}

/// The label of a run in a plot: its stack, protocol and size.
fn run_label(stack: &str, proto: &str, size: u64, client: &str) -> String {
    format!("{stack}, {proto} {size} B, client {client}")
}

/// Draws this run's latency CDF with those of `earlier` runs (their `--json FILE`).
fn plot_cdf(path: &std::path::Path, r: &Report, earlier: &[serde_json::Value]) -> Result<()> {
    use crate::plot::Series;
    let mut series = Vec::new();
    for v in earlier {
        let s = |k: &str| v.get(k).and_then(serde_json::Value::as_str).unwrap_or("?");
        let size = v
            .get("size_bytes")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        let points: Vec<(f64, f64)> =
            serde_json::from_value(v.get("cdf").cloned().unwrap_or_default()).context(
                "--plot-with: that file has no ping-pong CDF (is it bench pingpong --json FILE?)",
            )?;
        series.push(Series::new(
            run_label(s("stack"), s("proto"), size, s("client")),
            points,
        ));
    }
    series.push(Series::new(
        run_label(&r.stack, r.proto, r.size_bytes.into(), r.client),
        r.cdf.clone(),
    ));
    crate::plot::cdf(
        path,
        &format!("ping-pong round trips to {}: CDF", r.target),
        &series,
    )
}

fn print_report(r: &Report) {
    println!(
        "{} ping-pong with {}, {} bytes, {}, {:.1} s measured",
        r.proto, r.target, r.size_bytes, r.stack, r.duration_s
    );
    println!(
        "client: {} (the server's mode is set on the server)",
        r.client
    );
    println!(
        "round trips: {} ({:.0}/s), lost: {}",
        r.round_trips, r.round_trips_per_s, r.lost
    );
    println!(
        "RTT µs: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
        r.p50_us, r.p99_us, r.p999_us, r.max_us, r.mean_us
    );
}

fn tcp_pingpong<S: Stream>(
    run: &mut Run,
    s: &mut S,
    warmup: Duration,
    duration: Duration,
) -> Result<Duration> {
    let _ = s.nodelay();
    s.nonblocking(run.spin || matches!(run.waiter, Waiter::Core { .. }))?;
    let mut msg = vec![0u8; run.size];
    let mut echo = vec![0u8; run.size];
    run.drive(warmup, duration, |run, seq| {
        fill(&mut msg, seq);
        let t0 = Instant::now();
        let deadline = t0 + TCP_RTT_LIMIT;
        let mut off = 0;
        while off < msg.len() {
            if let Step::Moved(n) = io_step(run, s.write(&msg[off..]), deadline, "sending")? {
                off += n;
            }
        }
        let mut got = 0;
        while got < echo.len() {
            match io_step(
                run,
                s.read(&mut echo[got..]),
                deadline,
                "waiting for the echo",
            )? {
                Step::Moved(0) => bail!("the server closed the connection"),
                Step::Moved(n) => got += n,
                Step::Waited => {}
            }
        }
        let rtt = t0.elapsed();
        if echo != msg {
            bail!("the echo differs from what was sent (round trip {seq})");
        }
        Ok(Some(rtt))
    })
}

/// What one nonblocking read or write attempt did.
enum Step {
    /// Moved this many bytes (0 from a read: end of stream).
    Moved(usize),
    /// It would have blocked; we waited (spun or polled) once.
    Waited,
}

/// Judges one read/write attempt; waits once when it would block. Errors past `deadline`.
fn io_step(run: &Run, r: io::Result<usize>, deadline: Instant, what: &str) -> Result<Step> {
    match r {
        Ok(n) => Ok(Step::Moved(n)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            ) =>
        {
            let now = Instant::now();
            if now >= deadline {
                bail!(
                    "{what}: no progress within {} s (is the server running?)",
                    TCP_RTT_LIMIT.as_secs()
                );
            }
            run.idle(deadline - now)?;
            Ok(Step::Waited)
        }
        Err(e) => Err(anyhow!("{what}: {e}")),
    }
}

/// The wildcard address of `target`'s family, port 0 (a client's local address).
fn any_of(target: SocketAddr) -> SocketAddr {
    match target {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

fn udp_pingpong<U: Datagram>(
    run: &mut Run,
    u: &mut U,
    target: SocketAddr,
    warmup: Duration,
    duration: Duration,
) -> Result<Duration> {
    let mut msg = vec![0u8; run.size];
    let mut echo = vec![0u8; run.size + 1];
    run.drive(warmup, duration, |run, seq| {
        fill(&mut msg, seq);
        let t0 = Instant::now();
        let deadline = t0 + UDP_RTT_LIMIT;
        loop {
            match u.send_one(&msg, target) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => bail!("sending to {target}: {e}"),
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            run.idle(deadline - Instant::now())?;
        }
        loop {
            match u.recv_one(&mut echo) {
                // A late echo of an earlier (lost) message is skipped.
                Ok((n, from)) if from == target && echo[..n] == msg[..] => return Ok(Some(t0.elapsed())),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    bail!("{target} refused the datagram (ICMP port unreachable): is the server running?")
                }
                Err(e) => bail!("receiving from {target}: {e}"),
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            run.idle(deadline - now)?;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_with_different_seq_differs() {
        let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
        fill(&mut a, 1);
        fill(&mut b, 2);
        assert_ne!(a, b);
    }
}
