//! `corestack bench floor`: the 64-byte ping-pong's tail against the raw AF_XDP frame floor.
//!
//! ```text
//!  namespace client (CPU 0)                     namespace server (CPU 1)
//!  c1 (10.N.1.1 kernel; 10.N.1.3 AF_XDP) ─ veth ─ s1 (10.N.1.2, AF_XDP only)
//!  c2 10.N.2.1/24                       ─ veth ─ s2 10.N.2.2/24 (Linux)
//! ```
//!
//! Per round, one pair at a time so they never share the two cores, each for `--seconds`:
//! - **floor**: `bench xdp-ping` sends one frame of a TCP segment's size (Ethernet, IPv4, 32
//!   bytes where TCP's header with timestamps goes, the message) through an AF_XDP socket on
//!   c1; `bench xdp-echo` on s1 swaps its addresses and sends it back through its own. No
//!   protocol runs: this is what the NIC path alone costs a round trip, both ends spinning on
//!   their rx rings, with the same transmit path corestack takes (`--af-xdp-tx`);
//! - **Linux**: `serve echo --kernel --spin` and `bench pingpong --spin` over c2/s2;
//! - **corestack**: `serve echo` and `bench pingpong --spin`, both on corestack in inline mode,
//!   with the default (adaptive) polling, then with `--poll busy`.
//!
//! Each row is the upper median of the rounds, with p50, p99 and p99.9 and their ratio to the
//! floor's (issue 21's target: corestack's p99 ≤ 2× and p99.9 ≤ 3× the floor's with the default
//! polling). Everything it creates goes when it ends, also on error and Ctrl-C.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

use crate::harness::children::{json_f64, run_client, spawn, wait_ready, LogDir, Topology};
use crate::harness::{pinned_cpus, CLIENT_CPU, SERVER_CPU};
use cmdline::stop_flag;
use nic::af_xdp::{AfXdpConfig, AfXdpPort, TxPath};
use nic::{Port, TxQueue};

const NET: u8 = 79;
const PORT: &str = "7";
/// The IP protocol number of the floor's frames: 253, for experiments (RFC 3692).
const PROTO_EXPERIMENT: u8 = 253;
/// Ethernet (14) + IPv4 (20) + a TCP header with the timestamp option (32).
const HEADERS: usize = 14 + 20 + 32;
/// A floor frame that has not come back in this long counts as lost.
const FLOOR_LIMIT: Duration = Duration::from_millis(200);
/// The most an `xdp-echo` runs, whatever it is told (bounded, stops by itself).
const ECHO_MAX: Duration = Duration::from_secs(600);

/// `bench floor` options.
#[derive(Args, Debug)]
pub struct Floor {
    /// Measured seconds per run (after a 0.5 s warm-up).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Rounds of the four runs; each figure is the upper median of the rounds.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Message size in bytes (the floor's frame carries as many after the headers).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1400))]
    size: u32,
}

/// `bench xdp-echo` options (the floor's server: frames bounced back as they came).
#[derive(Args, Debug)]
pub struct XdpEcho {
    /// Interface whose AF_XDP socket bounces the frames.
    #[arg(long)]
    iface: String,
    /// The address the XDP program steers to the socket.
    #[arg(long)]
    ip: std::net::Ipv4Addr,
    /// Seconds to run at most (600 at most).
    #[arg(long, default_value_t = 600.0)]
    seconds: f64,
}

/// `bench xdp-ping` options (the floor's client).
#[derive(Args, Debug)]
pub struct XdpPing {
    /// Interface whose AF_XDP socket sends and receives.
    #[arg(long)]
    iface: String,
    /// This end's address (the XDP program steers it to the socket).
    #[arg(long)]
    ip: std::net::Ipv4Addr,
    /// The echoing end's address.
    #[arg(long)]
    target: std::net::Ipv4Addr,
    /// Message bytes after the headers.
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Measured seconds.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
}

/// One run's figures, µs (the subset of `bench pingpong --json` that this compares).
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Tail {
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    round_trips_per_s: f64,
}

impl Tail {
    fn from_json(v: &Value) -> Result<Tail> {
        let f = |k: &str| json_f64(v, k);
        Ok(Tail {
            p50_us: f("p50_us")?,
            p99_us: f("p99_us")?,
            p999_us: f("p999_us")?,
            round_trips_per_s: f("round_trips_per_s")?,
        })
    }

    fn median(runs: &[Tail]) -> Tail {
        let med = |f: fn(&Tail) -> f64| {
            crate::report::upper_median(&runs.iter().map(f).collect::<Vec<_>>())
        };
        Tail {
            p50_us: med(|t| t.p50_us),
            p99_us: med(|t| t.p99_us),
            p999_us: med(|t| t.p999_us),
            round_trips_per_s: med(|t| t.round_trips_per_s),
        }
    }
}

/// The port on `iface` with `ip` steered to it, on the transmit path corestack would take.
fn open_port(iface: &str, ip: std::net::Ipv4Addr) -> Result<AfXdpPort> {
    let cfg = AfXdpConfig {
        ifname: iface.to_string(),
        steer_ip: Some(ip),
        tx_path: TxPath::from_env()?,
        ..AfXdpConfig::default()
    };
    AfXdpPort::open(&cfg).with_context(|| format!("opening an AF_XDP socket on {iface}"))
}

/// True for a floor frame: IPv4, protocol [`PROTO_EXPERIMENT`], long enough.
fn is_floor_frame(f: &[u8]) -> bool {
    f.len() >= HEADERS + 8 && f[12..14] == [0x08, 0x00] && f[23] == PROTO_EXPERIMENT
}

/// The IPv4 header checksum of `h` (checksum field zero): RFC 791, RFC 1071.
fn ipv4_header_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl XdpEcho {
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        let mut port = open_port(&self.iface, self.ip)?;
        println!("listening (raw AF_XDP echo on {})", self.iface);
        let end = Instant::now() + Duration::from_secs_f64(self.seconds.clamp(0.0, 600.0));
        let end = end.min(Instant::now() + ECHO_MAX);
        let mut n = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let got = port.rx_burst(64, |f, tx| {
                if !is_floor_frame(f) {
                    return;
                }
                tx.transmit(f.len(), |b| {
                    let Some(b) = b.get_mut(..f.len()) else {
                        return 0;
                    };
                    b.copy_from_slice(f);
                    // Ethernet destination <-> source, IPv4 source <-> destination.
                    b[..6].copy_from_slice(&f[6..12]);
                    b[6..12].copy_from_slice(&f[..6]);
                    b[26..30].copy_from_slice(&f[30..34]);
                    b[30..34].copy_from_slice(&f[26..30]);
                    f.len()
                });
            });
            if got > 0 {
                port.tx().flush();
                n += got as u64;
            } else if n & 0xff == 0 && Instant::now() >= end {
                break;
            }
        }
        eprintln!("xdp-echo: {n} frames bounced");
        Ok(())
    }
}

impl XdpPing {
    pub fn run(self) -> Result<()> {
        if !(self.duration > 0.0 && self.duration <= 600.0 && (0.0..=60.0).contains(&self.warmup)) {
            bail!("--duration must be in (0, 600] seconds and --warmup in [0, 60]");
        }
        let stop = stop_flag()?;
        let mut port = open_port(&self.iface, self.ip)?;
        let mac = port.mac();
        let len = HEADERS + self.size as usize;
        let mut frame = vec![0u8; len];
        frame[..6].fill(0xff); // the echo swaps it for ours; veth delivers either
        frame[6..12].copy_from_slice(&mac);
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[16..18].copy_from_slice(&u16::try_from(len - 14)?.to_be_bytes());
        frame[22] = 64;
        frame[23] = PROTO_EXPERIMENT;
        frame[26..30].copy_from_slice(&self.ip.octets());
        frame[30..34].copy_from_slice(&self.target.octets());
        let sum = ipv4_header_checksum(&frame[14..34]);
        frame[24..26].copy_from_slice(&sum.to_be_bytes());
        let mut hist =
            Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).context("histogram")?;
        let (warmup, duration) = (
            Duration::from_secs_f64(self.warmup),
            Duration::from_secs_f64(self.duration),
        );
        let mut lost = 0u64;
        let start = Instant::now();
        let mut measured_from = None;
        let mut seq = 0u64;
        loop {
            let now = Instant::now();
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                bail!("interrupted");
            }
            let since = now.saturating_duration_since(start);
            if since >= warmup && measured_from.is_none() {
                measured_from = Some(now);
                lost = 0;
            }
            if measured_from.is_some_and(|m| now.saturating_duration_since(m) >= duration) {
                break;
            }
            seq += 1;
            frame[HEADERS..HEADERS + 8.min(self.size as usize)]
                .copy_from_slice(&seq.to_le_bytes()[..8.min(self.size as usize)]);
            let t0 = Instant::now();
            let sent = port.tx().transmit(len, |b| match b.get_mut(..len) {
                Some(b) => {
                    b.copy_from_slice(&frame);
                    len
                }
                None => 0,
            });
            if !sent {
                bail!("no AF_XDP transmit buffer free");
            }
            port.tx().flush();
            let want = &frame[HEADERS..HEADERS + 8.min(self.size as usize)];
            let mut back = false;
            while !back {
                port.rx_burst(64, |f, _| {
                    back |= is_floor_frame(f) && f.get(HEADERS..HEADERS + want.len()) == Some(want);
                });
                if !back && t0.elapsed() > FLOOR_LIMIT {
                    break;
                }
            }
            let rtt = t0.elapsed();
            if measured_from.is_some() {
                if back {
                    hist.saturating_record(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX));
                } else {
                    lost += 1;
                }
            }
        }
        let elapsed = measured_from.map_or(duration, |m| m.elapsed());
        if hist.is_empty() {
            bail!("no frame came back from {} ({lost} lost)", self.target);
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let v = serde_json::json!({
            "proto": "raw",
            "stack": format!("AF_XDP on {}, transmit path {:?}", self.iface, port.tx_path()),
            "size_bytes": self.size,
            "frame_bytes": len,
            "round_trips": hist.len(),
            "round_trips_per_s": hist.len() as f64 / elapsed.as_secs_f64(),
            "lost": lost,
            "p50_us": us(hist.value_at_quantile(0.5)),
            "p99_us": us(hist.value_at_quantile(0.99)),
            "p999_us": us(hist.value_at_quantile(0.999)),
            "max_us": us(hist.max()),
            "client": "spins",
        });
        println!("{v}");
        Ok(())
    }
}

/// The four rows, in the order printed.
const ROWS: [&str; 4] = [
    "raw AF_XDP frames (floor)",
    "Linux <-> Linux",
    "corestack <-> corestack, adaptive",
    "corestack <-> corestack, busy",
];

impl Floor {
    pub fn run(self) -> Result<()> {
        crate::harness::check_seconds("--seconds", self.seconds, 60.0)?;
        let stop = stop_flag()?;
        netns::check_privileges()?;
        let exe = crate::harness::this_program()?;
        let (ccpu, scpu) = pinned_cpus();
        let logs = LogDir::new("floor")?;
        let topo = Topology::build("flc", "fls", NET)?;
        let (client_ip, server_ip, linux_ip) = (
            format!("10.{NET}.1.3"),
            format!("10.{NET}.1.2"),
            format!("10.{NET}.2.2"),
        );
        let secs = self.seconds.to_string();
        let size = self.size.to_string();
        let timeout = Duration::from_secs_f64(self.seconds + 30.0);
        let client_cidr = format!("{client_ip}/24");
        let server_cidr = format!("{server_ip}/24");
        let core_target = format!("{server_ip}:{PORT}");
        let linux_target = format!("{linux_ip}:{PORT}");
        let mut runs: [Vec<Tail>; 4] = Default::default();
        let mut tx_path = String::new();
        for round in 1..=self.rounds.max(1) {
            for (row, runs) in runs.iter_mut().enumerate() {
                let poll = if row == 3 { "busy" } else { "adaptive" };
                let server_args: Vec<&str> = match row {
                    0 => vec!["bench", "xdp-echo", "--iface", "s1", "--ip", &server_ip],
                    1 => vec![
                        "serve", "echo", "--kernel", "--ip", &linux_ip, "--port", PORT, "--spin",
                    ],
                    _ => vec![
                        "serve",
                        "echo",
                        "--iface",
                        "s1",
                        "--ip",
                        &server_cidr,
                        "--port",
                        PORT,
                        "--mode",
                        "inline",
                        "--poll",
                        poll,
                    ],
                };
                let client_args: Vec<&str> = match row {
                    0 => vec![
                        "bench",
                        "xdp-ping",
                        "--iface",
                        "c1",
                        "--ip",
                        &client_ip,
                        "--target",
                        &server_ip,
                        "--size",
                        &size,
                        "--duration",
                        &secs,
                    ],
                    1 => [
                        &crate::pingpong::command_line("--tcp", &linux_target, &size, &secs)[..],
                        &["--json", "--spin"],
                    ]
                    .concat(),
                    _ => [
                        &crate::pingpong::command_line("--tcp", &core_target, &size, &secs)[..],
                        &[
                            "--json",
                            "--spin",
                            "--iface",
                            "c1",
                            "--ip",
                            &client_cidr,
                            "--mode",
                            "inline",
                            "--poll",
                            poll,
                        ],
                    ]
                    .concat(),
                };
                eprintln!("round {round}: {}", ROWS[row]);
                let slog = logs.file(&format!("server-{row}-{round}.log"));
                let mut server = spawn(&topo.server, scpu, &exe, &server_args, &slog)?;
                wait_ready(&mut server, "listening", &slog, false, &stop)
                    .with_context(|| format!("starting the server of {}", ROWS[row]))?;
                let clog = logs.file(&format!("client-{row}-{round}.log"));
                let v = run_client(
                    spawn(&topo.client, ccpu, &exe, &client_args, &clog)?,
                    &clog,
                    timeout,
                    &stop,
                )
                .with_context(|| format!("the client of {}", ROWS[row]))?;
                if row == 0 {
                    tx_path = v
                        .get("stack")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string();
                }
                runs.push(Tail::from_json(&v)?);
                server.terminate(Duration::from_secs(3))?;
            }
        }
        let rows = runs.map(|r| Tail::median(&r));
        print_table(&self, &rows, &tx_path, ccpu.is_some());
        drop(topo);
        Ok(())
    }
}

fn print_table(f: &Floor, rows: &[Tail; 4], tx_path: &str, pin: bool) {
    println!();
    println!(
        "{}-byte TCP ping-pong against the raw AF_XDP frame floor, over veth, upper median of {} rounds of {} s",
        f.size, f.rounds.max(1), f.seconds
    );
    println!("every client and server spins; corestack runs inline on both ends (client: bench pingpong --spin, server: serve echo); one pair at a time");
    println!(
        "floor: {tx_path}, frames of {} bytes",
        HEADERS + f.size as usize
    );
    if pin {
        println!("clients on CPU {CLIENT_CPU}, servers on CPU {SERVER_CPU}");
    }
    println!();
    println!(
        "{:<36}{:>9}{:>9}{:>10}{:>15}{:>10}{:>10}{:>11}",
        "", "p50 µs", "p99 µs", "p99.9 µs", "round trips/s", "p50/fl", "p99/fl", "p99.9/fl"
    );
    let floor = rows[0];
    for (name, t) in ROWS.iter().zip(rows) {
        let r = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        println!(
            "{name:<36}{:>9.1}{:>9.1}{:>10.1}{:>15.0}{:>10.2}{:>10.2}{:>11.2}",
            t.p50_us,
            t.p99_us,
            t.p999_us,
            t.round_trips_per_s,
            r(t.p50_us, floor.p50_us),
            r(t.p99_us, floor.p99_us),
            r(t.p999_us, floor.p999_us)
        );
    }
    let core = rows[2];
    let linux = rows[1];
    println!();
    println!(
        "corestack adaptive / Linux: p50 {:.2}, p99 {:.2}, p99.9 {:.2}, round trips/s {:.2}",
        core.p50_us / linux.p50_us,
        core.p99_us / linux.p99_us,
        core.p999_us / linux.p999_us,
        core.round_trips_per_s / linux.round_trips_per_s
    );
    println!(
        "target (issue 21): adaptive p99 <= 2x floor: {}, p99.9 <= 3x floor: {}",
        if core.p99_us <= 2.0 * floor.p99_us {
            "holds"
        } else {
            "MISSED"
        },
        if core.p999_us <= 3.0 * floor.p999_us {
            "holds"
        } else {
            "MISSED"
        }
    );
}
