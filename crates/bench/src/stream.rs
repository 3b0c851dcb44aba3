//! `corestack bench stream`: one-way TCP goodput to `corestack serve sink`, on either stack.
//!
//! The client sends `--bytes` (or for `--duration`) of data, then half-closes. The sink reads and
//! discards; at the client's FIN it answers one line, `sink: BYTES bytes NANOS ns\n` (what it
//! received and how long from accept to FIN), and closes. The client's goodput is the bytes the
//! sink reports over the time from connect to that report, so it counts only bytes the receiving
//! application read, retransmissions and the tail included. The sink prints one line per
//! connection and, at exit (SIGINT/SIGTERM), its totals and corestack's counters.
//!
//! corestack (either side): one thread, nonblocking sockets, the inline engine run by the waits
//! (it spins). Kernel client: blocking writes. Kernel sink: one blocking thread per connection.
//! The report line's format (written by the sink, parsed here) is `cmdline::sink`'s.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Serialize;

use cmdline::sink::{mbit_per_s, parse_report, would_block, CHUNK_BYTES};
use cmdline::{connect_error, set_kernel_cc, stop_flag, Interrupted, StackOpts, Stream, Waiter};

/// Longest report line the client accepts, bytes.
const REPORT_MAX_BYTES: usize = 128;
/// How long a kernel socket blocks before the loop checks its deadline and the stop flag.
const KERNEL_TIMEOUT: Duration = Duration::from_millis(200);

/// `bench stream` options.
#[derive(Args, Debug)]
pub struct StreamBench {
    /// Sink server address (`corestack serve sink`), IPv4 or IPv6 (`[fd00::2]:5201`).
    #[arg(long, value_name = "IP:PORT")]
    target: SocketAddr,
    /// Bytes to send (instead of --duration).
    #[arg(long, conflicts_with = "duration")]
    bytes: Option<u64>,
    /// Seconds to send for (default 5 unless --bytes).
    #[arg(long)]
    duration: Option<f64>,
    /// Give up after this many seconds in all (default: the duration + 60).
    #[arg(long)]
    timeout: Option<f64>,
    #[command(flatten)]
    out: crate::plot::Outputs,
    /// Kernel stack: the sending socket's congestion control (TCP_CONGESTION), e.g. cubic;
    /// default: the system's.
    #[arg(long, value_name = "NAME")]
    kernel_cc: Option<String>,
    /// Bytes per write call (64 measures how many small messages per second a stack takes).
    #[arg(long, default_value_t = CHUNK_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65536))]
    write_size: usize,
    #[command(flatten)]
    stack: StackOpts,
}

/// What a stream run measured (the `--json` object).
#[derive(Debug, Serialize)]
pub struct StreamReport {
    /// Bytes per write call.
    write_size: usize,
    /// Write calls' worth of bytes the sink read per second (bytes_received / write_size / seconds).
    writes_per_s: f64,
    stack: String,
    target: String,
    bytes_sent: u64,
    /// Bytes the sink read (its report).
    bytes_received: u64,
    /// Connect to the sink's report, seconds.
    seconds: f64,
    /// bytes_received over seconds.
    goodput_mbit_s: f64,
    /// The sink's own time, accept to FIN, seconds.
    sink_seconds: f64,
}

/// When the sending stops.
#[derive(Debug, Clone, Copy)]
enum Until {
    Bytes(u64),
    Elapsed(Duration),
}

impl StreamBench {
    pub fn run(self) -> Result<()> {
        let earlier = self.out.check()?;
        let until = match (self.bytes, self.duration) {
            (Some(b), _) => Until::Bytes(b),
            (None, Some(d)) if d > 0.0 && d <= 3600.0 => Until::Elapsed(Duration::from_secs_f64(d)),
            (None, Some(_)) => bail!("--duration must be in (0, 3600] seconds"),
            (None, None) => Until::Elapsed(Duration::from_secs(5)),
        };
        let timeout = match (self.timeout, until) {
            (Some(t), _) if t > 0.0 && t <= 7200.0 => Duration::from_secs_f64(t),
            (Some(_), _) => bail!("--timeout must be in (0, 7200] seconds"),
            (None, Until::Elapsed(d)) => d + Duration::from_secs(60),
            (None, Until::Bytes(_)) => Duration::from_secs(300),
        };
        let stop = stop_flag()?;
        let deadline = Instant::now() + timeout;
        let target = self.target;
        let (t0, sent, report) = if self.stack.wants_corestack() {
            let stack = self.stack.start()?;
            let s = corestack::TcpStream::connect(&stack, target)
                .map_err(|e| connect_error(e, target))?;
            let t0 = Instant::now();
            let waiter = self.stack.waiter(&stack);
            let (sent, report) =
                send_stream(s, Some(&waiter), until, self.write_size, deadline, &stop)?;
            if !self.out.json_on_stdout() {
                println!("corestack statistics:\n{}", stack.stats());
            }
            (t0, sent, report)
        } else {
            let s = std::net::TcpStream::connect_timeout(&target, Duration::from_secs(5))
                .map_err(|e| connect_error(e, target))?;
            s.set_write_timeout(Some(KERNEL_TIMEOUT))?;
            s.set_read_timeout(Some(KERNEL_TIMEOUT))?;
            if let Some(cc) = &self.kernel_cc {
                set_kernel_cc(&s, cc)?;
            }
            let t0 = Instant::now();
            let (sent, report) = send_stream(s, None, until, self.write_size, deadline, &stop)?;
            (t0, sent, report)
        };
        let secs = t0.elapsed().as_secs_f64();
        let (received, sink_ns) = report;
        let r = StreamReport {
            write_size: self.write_size,
            writes_per_s: received as f64 / self.write_size as f64 / secs.max(1e-9),
            stack: self.stack.describe(),
            target: target.to_string(),
            bytes_sent: sent,
            bytes_received: received,
            seconds: secs,
            goodput_mbit_s: mbit_per_s(received, secs),
            sink_seconds: sink_ns as f64 / 1e9,
        };
        let what = ("stream goodput", "Mbit/s", "goodput_mbit_s");
        self.out
            .emit_bar(&r, &earlier, what, (&r.stack, r.goodput_mbit_s))?;
        if !self.out.json_on_stdout() {
            println!(
                "sent {} bytes to {} with {}; the sink read {} bytes\n{:.2} s from connect to the sink's report: {:.1} Mbit/s goodput",
                r.bytes_sent, r.target, r.stack, r.bytes_received, r.seconds, r.goodput_mbit_s
            );
        }
        if received != sent {
            bail!("the sink read {received} bytes but {sent} were sent");
        }
        Ok(())
    }
}

/// Sends until `until`, half-closes, reads the sink's report. `waiter` is Some for corestack
/// (nonblocking, the waits run the engine), None for a kernel socket with timeouts set.
/// Returns (bytes sent, (bytes the sink read, the sink's ns)).
fn send_stream<S: Stream>(
    mut s: S,
    waiter: Option<&Waiter>,
    until: Until,
    write_size: usize,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<(u64, (u64, u64))> {
    s.nonblocking(waiter.is_some())?;
    let chunk: Vec<u8> = (0..CHUNK_BYTES).map(|i| (i * 7 + 3) as u8).collect();
    let start = Instant::now();
    let mut sent = 0u64;
    let mut off = 0usize;
    let idle = |what: &str, sent: u64| -> Result<()> {
        if stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        if Instant::now() >= deadline {
            bail!("{what}: timed out after {sent} bytes sent");
        }
        if let Some(w) = waiter {
            w.wait(Duration::from_millis(1))?;
        }
        Ok(())
    };
    loop {
        let more = match until {
            Until::Bytes(b) => sent < b,
            Until::Elapsed(d) => start.elapsed() < d,
        };
        if !more {
            break;
        }
        let len = match until {
            Until::Bytes(b) => (b - sent).min((CHUNK_BYTES - off) as u64) as usize,
            Until::Elapsed(_) => CHUNK_BYTES - off,
        }
        .min(write_size);
        match s.write(&chunk[off..off + len]) {
            Ok(n) => {
                sent += n as u64;
                off = (off + n) % CHUNK_BYTES;
                if waiter.is_some() && stop.load(Ordering::Relaxed) {
                    return Err(Interrupted.into());
                }
            }
            Err(e) if would_block(&e) => idle("sending", sent)?,
            Err(e) => bail!("sending after {sent} bytes: {e}"),
        }
        if waiter.is_none() && stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
    }
    s.shutdown_write().context("half-closing the connection")?;
    let mut line = Vec::with_capacity(REPORT_MAX_BYTES);
    let mut buf = [0u8; REPORT_MAX_BYTES];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                line.extend_from_slice(&buf[..n]);
                if line.len() > REPORT_MAX_BYTES {
                    bail!("the server sent more than a sink report: is it `corestack serve sink`?");
                }
            }
            Err(e) if would_block(&e) => idle("waiting for the sink's report", sent)?,
            Err(e) => bail!("waiting for the sink's report: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&line);
    let report = parse_report(&text).ok_or_else(|| {
        anyhow!("no sink report from the server (got {text:?}): is it `corestack serve sink`?")
    })?;
    Ok((sent, report))
}
