//! `corestack demo`: Linux versus corestack, echo round trips between two namespaces.
//!
//! ```text
//!  namespace client (CPU 0)                 namespace server (CPU 1)
//!  c1 10.77.1.1/24     ── veth ──  s1 (no kernel address; corestack 10.77.1.2
//!     fd00:77:1::1/64                  and fd00:77:1::2 via af_xdp)
//!  c2 10.77.2.1/24     ── veth ──  s2 10.77.2.2/24, fd00:77:2::2/64 (Linux echo server)
//!     fd00:77:2::1/64
//! ```
//!
//! Offloads are off on every veth end. The Linux echo server (`serve echo --kernel --spin`) and
//! then the corestack echo server (`serve echo`, inline: the one thread runs the engine and
//! spins) run one at a time so they never compete for the two cores; both listen on `[::]`,
//! IPv4 and IPv6 on one socket; each is driven from the client namespace by `bench pingpong
//! --json` (TCP over IPv4, UDP over IPv4, then TCP over IPv6, 64 bytes). Then a 100 MiB echo
//! transfer through corestack (client on the kernel stack) checks sha256(sent) == sha256(received).
//! Everything it creates (namespaces, links, processes, logs) goes on exit, also on Ctrl-C: the
//! signal only sets a flag; every wait polls it and returns, and the guards tear down.

use std::fs;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use serde_json::Value;

use crate::harness::children::{run_client, spawn, wait_ready, Latency, LogDir, Topology};
use crate::harness::{pinned_cpus, CLIENT_CPU, SERVER_CPU};
use cmdline::stop_flag;

const PORT: u16 = 7;
const LINUX_SERVER_IP: &str = "10.77.2.2";
const CORESTACK_IP: &str = "10.77.1.2";
const LINUX_SERVER_IP6: &str = "fd00:77:2::2";
const CORESTACK_IP6: &str = "fd00:77:1::2";

/// `demo` options.
#[derive(Args, Debug)]
pub struct Demo {
    /// Measured seconds per ping-pong run (each round runs TCP and UDP over IPv4 and TCP over
    /// IPv6 on Linux and on corestack).
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Rounds of alternating Linux and corestack runs; the table shows the median of the rounds,
    /// so that a burst of noise on this shared machine hits both stacks alike (each round opens
    /// new connections, whose round-trip times vary by a few µs on both stacks here).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Bytes in the checked echo transfer through corestack.
    #[arg(long, default_value_t = 100 << 20)]
    transfer_bytes: u64,
    /// Message size for the ping-pong runs, bytes.
    #[arg(long, default_value_t = 64)]
    size: u32,
}

/// Progress shown on a terminal; plain lines on stderr otherwise.
struct Progress {
    bar: ProgressBar,
    started: Instant,
}

impl Progress {
    fn new() -> Progress {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner:.green} [{elapsed:>3}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress {
            bar,
            started: Instant::now(),
        }
    }

    fn step(&self, msg: &str) {
        if self.bar.is_hidden() {
            eprintln!("[{:>5.1}s] {msg}", self.started.elapsed().as_secs_f64());
        }
        self.bar.set_message(msg.to_string());
    }

    fn done(&self, msg: &str) {
        if self.bar.is_hidden() {
            eprintln!("[{:>5.1}s] ✓ {msg}", self.started.elapsed().as_secs_f64());
        } else {
            self.bar.println(format!("✓ {msg}"));
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

impl Demo {
    pub fn run(self) -> Result<()> {
        crate::harness::check_seconds("--seconds", self.seconds, 600.0)?;
        let stop = stop_flag()?;
        netns::check_privileges()?;
        let exe = crate::harness::this_program()?;
        let (client_cpu, server_cpu) = pinned_cpus();
        let logs = LogDir::new("demo")?;
        let progress = Progress::new();

        progress.step("creating namespaces csc/css and two veth pairs (offloads off)");
        let topo = Topology::build("csc", "css", 77)?;
        topo.add_ipv6(77)?;
        progress.done(
            "namespaces and veth pairs ready: 10.77.1.0/24 and fd00:77:1::/64 (corestack), 10.77.2.0/24 and fd00:77:2::/64 (Linux)",
        );

        let secs = format!("{}", self.seconds);
        let size = self.size.to_string();
        let bench_timeout = Duration::from_secs_f64(self.seconds + 20.0);
        let pingpong = |proto: &str, target: &str, log: &str| -> Result<Latency> {
            let run = crate::pingpong::command_line(proto, target, &size, &secs);
            let args = [&run[..], &["--json", "--spin"]].concat();
            let log = logs.file(log);
            let v = run_client(
                spawn(&topo.client, client_cpu, &exe, &args, &log)?,
                &log,
                bench_timeout,
                &stop,
            )?;
            Latency::from_json(&v)
        };

        // Alternate the two servers, one at a time, for `rounds` rounds.
        let linux_target = format!("{LINUX_SERVER_IP}:{PORT}");
        let core_target = format!("{CORESTACK_IP}:{PORT}");
        let linux_target6 = format!("[{LINUX_SERVER_IP6}]:{PORT}");
        let core_target6 = format!("[{CORESTACK_IP6}]:{PORT}");
        let core_ip6 = format!("{CORESTACK_IP6}/64");
        let linux_args = [
            "serve",
            "echo",
            "--kernel",
            "--ip",
            LINUX_SERVER_IP,
            "--ip",
            LINUX_SERVER_IP6,
            "--port",
            "7",
            "--spin",
        ];
        let core_args = [
            "serve",
            "echo",
            "--iface",
            "s1",
            "--ip",
            "10.77.1.2/24",
            "--ip",
            &core_ip6,
            "--port",
            "7",
            "--driver",
            "af_xdp",
            "--mode",
            "inline",
        ];
        let rounds = self.rounds.max(1);
        // Linux tcp, udp, tcp over IPv6; then corestack's.
        let mut runs: [Vec<Latency>; 6] = Default::default();
        let mut generic = false;
        let mut core_server = None;
        for round in 1..=rounds {
            for (name, args, targets, first) in [
                ("Linux", &linux_args[..], [&linux_target, &linux_target6], 0),
                (
                    "corestack",
                    &core_args[..],
                    [&core_target, &core_target6],
                    3,
                ),
            ] {
                progress.step(&format!(
                    "round {round}/{rounds}: starting the {name} echo server"
                ));
                let log = logs.file(&format!("server-{name}-{round}.log"));
                let mut server = spawn(&topo.server, server_cpu, &exe, args, &log)?;
                wait_ready(&mut server, "listening", &log, false, &stop)
                    .with_context(|| format!("starting the {name} echo server"))?;
                generic |= first == 3
                    && fs::read_to_string(&log)
                        .unwrap_or_default()
                        .contains("generic");
                let kinds = [
                    ("--tcp", targets[0], "tcp"),
                    ("--udp", targets[0], "udp"),
                    ("--tcp", targets[1], "tcp-ipv6"),
                ];
                for (k, (proto, target, label)) in kinds.into_iter().enumerate() {
                    progress.step(&format!(
                        "round {round}/{rounds}: {name} {label} ping-pong, {} s",
                        self.seconds
                    ));
                    let l = pingpong(proto, target, &format!("bench-{name}-{label}-{round}.log"))
                        .with_context(|| format!("{name} {label} ping-pong"))?;
                    progress.done(&format!(
                        "round {round}: {name} {label}: p50 {:.1} µs, p99 {:.1} µs",
                        l.p50_us, l.p99_us
                    ));
                    runs[first + k].push(l);
                }
                if first == 3 && round == rounds {
                    core_server = Some(server); // kept for the transfer
                } else {
                    server.terminate(Duration::from_secs(3))?;
                }
            }
        }
        let [linux_tcp, linux_udp, linux_tcp6, core_tcp, core_udp, core_tcp6] =
            runs.map(|r| Latency::median(&r));
        let mut server = core_server.expect("the last round ran corestack");

        let mib = self.transfer_bytes as f64 / (1 << 20) as f64;
        progress.step(&format!(
            "{mib:.0} MiB echo transfer through corestack, checking sha256"
        ));
        let bytes = self.transfer_bytes.to_string();
        let args = [
            "bench",
            "transfer",
            "--target",
            &core_target,
            "--bytes",
            &bytes,
            "--timeout",
            "150",
            "--json",
        ];
        let log = logs.file("transfer.log");
        let transfer = run_client(
            spawn(&topo.client, client_cpu, &exe, &args, &log)?,
            &log,
            Duration::from_secs(170),
            &stop,
        )
        .context("the echo transfer through corestack")?;
        let equal = transfer.get("equal").and_then(Value::as_bool) == Some(true);
        let sha = transfer
            .get("received_sha256")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let transfer_secs = transfer
            .get("seconds")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let rate = transfer
            .get("mbytes_per_s")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        progress.done(&format!(
            "{mib:.0} MiB echo transfer: {}",
            if equal {
                "sha256 equal"
            } else {
                "sha256 DIFFERENT"
            }
        ));
        server.terminate(Duration::from_secs(3))?;
        drop(server);
        drop(progress);

        println!();
        println!(
            "corestack demo: {}-byte echo round trips between two network namespaces over veth",
            self.size
        );
        println!(
            "median of {rounds} alternating rounds of {} s per stack and protocol",
            self.seconds
        );
        println!("client: spins, server: spins (Linux: nonblocking busy loop; corestack: inline engine, af_xdp); both servers listen on [::] (IPv4 and IPv6)");
        if client_cpu.is_some() {
            println!("client pinned to CPU {CLIENT_CPU}, server to CPU {SERVER_CPU}; one server at a time");
        } else {
            println!("one CPU only: client and server not pinned, results are pessimistic");
        }
        if generic {
            println!("warning: af_xdp ran in generic (copy) XDP mode on s1: corestack numbers are pessimistic");
        }
        println!();
        println!(
            "{:<27}{:>12}{:>12}{:>18}",
            "", "Linux", "corestack", "corestack/Linux"
        );
        for (proto, l, c) in [
            ("TCP", linux_tcp, core_tcp),
            ("UDP", linux_udp, core_udp),
            ("TCP/IPv6", linux_tcp6, core_tcp6),
        ] {
            row(&format!("{proto} p50 RTT (µs)"), l.p50_us, c.p50_us, 1);
            row(&format!("{proto} p99 RTT (µs)"), l.p99_us, c.p99_us, 1);
            row(&format!("{proto} round trips/s"), l.per_s, c.per_s, 0);
        }
        println!();
        println!(
            "{mib:.0} MiB echo through corestack (client on the kernel stack): {} in {transfer_secs:.2} s ({rate:.1} MB/s)",
            if equal { "sha256 of sent == received" } else { "sha256 DIFFERENT" }
        );
        println!("sha256 {sha}");
        drop(topo);
        if !equal {
            bail!("the echo transfer through corestack came back different");
        }
        Ok(())
    }
}

fn row(label: &str, linux: f64, core: f64, decimals: usize) {
    let ratio = if linux > 0.0 {
        format!("{:.2}", core / linux)
    } else {
        "-".to_string()
    };
    println!("{label:<27}{linux:>12.decimals$}{core:>12.decimals$}{ratio:>18}");
}
