//! `corestack bench service`: service mode next to embedded mode and Linux, in one run.
//!
//! ```text
//!  namespace client                       namespace server
//!  c1 10.79.1.1/24  ── veth ──  s1 (no kernel address; corestack 10.79.1.2 via af_xdp)
//!  c2 10.79.2.1/24  ── veth ──  s2 10.79.2.2/24 (Linux)
//! ```
//!
//! 1. 64-byte TCP ping-pong. The client and the echo application both block and share the
//!    client CPUs (`bench --client-cpus`, default CPU 0); corestack's engine (the daemon, or
//!    embedded mode's engine thread) has the engine CPUs (`--engine-cpus`, default the server
//!    CPUs, CPU 1) to itself, the deployment service mode is for. Linux is measured with its
//!    server on the client CPUs (the same placement as the applications) and on the engine's.
//! 2. The daemon under each polling policy: its CPU use idle (an application connected, no
//!    traffic), under light load (one round trip per ms), and at full ping-pong load, next to
//!    the latency it gives.
//! 3. Messages per second: one connection carrying back-to-back 64-byte writes into a Linux
//!    sink, written by Linux, by an embedded-mode application and by a service-mode one.
//!
//! Everything it creates (namespaces, links, processes, the control socket) goes on exit.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use netns::ChildGuard;

use crate::harness::children::{
    json_f64, run_client, spawn_env, wait_ready, Latency, LogDir, Topology,
};
use crate::harness::cpu::cpu_seconds;
use crate::harness::{daemon_cpu_args, CLIENT_CPU, ENGINE_CPU};
use cmdline::stop_flag;

const CORE_CIDR: &str = "10.79.1.2/24";
const CORE_IP: &str = "10.79.1.2";
const LINUX_IP: &str = "10.79.2.2";
const SINK_CORE_SIDE: &str = "10.79.1.1:9";
const SINK_LINUX_SIDE: &str = "10.79.2.1:9";

/// `bench service` options.
#[derive(Args, Debug)]
pub struct ServiceBench {
    /// Measured seconds per run.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Seconds the daemon's idle CPU use is measured for, per policy.
    #[arg(long, default_value_t = 2.0)]
    idle_seconds: f64,
    /// Run only these parts (default: all).
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// Also write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
    /// Draw the ping-pong latencies (p50, p99) per setup as bars to FILE.svg or FILE.png, and
    /// the messages per second to FILE-messages.svg|png beside it.
    #[arg(long, value_name = "FILE")]
    plot: Option<std::path::PathBuf>,
}

/// A part of the benchmark.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Ping-pong latency, and the daemon's polling policies.
    Latency,
    /// 64-byte messages per second.
    Messages,
}

/// CPU use of `pid` over `f()`, in percent of one core.
fn cpu_during<T>(pid: u32, f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let (c0, t0) = (cpu_seconds(&[pid])?, Instant::now());
    let v = f()?;
    let (c1, secs) = (cpu_seconds(&[pid])?, t0.elapsed().as_secs_f64());
    Ok((v, 100.0 * (c1 - c0) / secs.max(1e-3)))
}

/// One row of the trade-off table.
struct PolicyRow {
    policy: &'static str,
    idle_cpu: f64,
    light: Latency,
    light_cpu: f64,
    full: Latency,
    full_cpu: f64,
}

impl ServiceBench {
    pub fn run(self) -> Result<()> {
        let ok = |v: f64| v > 0.0 && v <= 60.0;
        if !ok(self.seconds) || !ok(self.idle_seconds) {
            bail!("--seconds and --idle-seconds must be in (0, 60]");
        }
        if let Some(p) = &self.plot {
            crate::plot::format_of(p)?;
        }
        let stop = stop_flag()?;
        netns::check_privileges()?;
        if !crate::harness::can_pin() {
            bail!("bench service needs 2 CPUs (applications on one, the engine on the other)");
        }
        let exe = crate::harness::this_program()?;
        let logs = LogDir::new("bench-service")?;
        let topo = Topology::build("cbc", "cbs", 79)?;
        let socket = format!("/tmp/corestack-bench-{}.sock", std::process::id());
        let secs = format!("{}", self.seconds);
        let timeout = Duration::from_secs_f64(self.seconds + 30.0);
        let say = |m: &str| eprintln!("bench service: {m}");

        let pingpong = |target: &str, gap_us: u64, log: &str| -> Result<Latency> {
            let gap = gap_us.to_string();
            let args = [
                "bench",
                "pingpong",
                "--tcp",
                "--target",
                target,
                "--size",
                "64",
                "--duration",
                &secs,
                "--json",
                "--block",
                "--gap-us",
                &gap,
            ];
            let log = logs.file(log);
            let child = spawn_env(
                &topo.client,
                Some(CLIENT_CPU.as_str()),
                &exe,
                &args,
                &log,
                &[],
            )?;
            Latency::from_json(&run_client(child, &log, timeout, &stop)?)
        };
        let start_server = |cpu: Option<&str>,
                            args: &[&str],
                            env: &[(&str, &str)],
                            log: &str|
         -> Result<ChildGuard> {
            let log = logs.file(log);
            let mut c = spawn_env(&topo.server, cpu, &exe, args, &log, env)?;
            wait_ready(&mut c, "listening", &log, false, &stop)
                .with_context(|| format!("starting {}", args.join(" ")))?;
            Ok(c)
        };
        let start_daemon = |policy: &str, log: &str| -> Result<ChildGuard> {
            let log = logs.file(log);
            let mut args = vec![
                "run", "--iface", "s1", "--ip", CORE_CIDR, "--socket", &socket, "--poll", policy,
            ];
            args.extend(daemon_cpu_args());
            let mut d = spawn_env(
                &topo.server,
                Some(ENGINE_CPU.as_str()),
                &exe,
                &args,
                &log,
                &[],
            )?;
            wait_ready(&mut d, "daemon ready", &log, true, &stop)
                .context("starting the corestack daemon")?;
            Ok(d)
        };
        let app_env = [
            ("CORESTACK_SOCKET", socket.as_str()),
            ("CORESTACK_SPIN_US", "0"),
        ];
        let echo_args = ["serve", "echo", "--port", "7"];
        let linux_target = format!("{LINUX_IP}:7");
        let core_target = format!("{CORE_IP}:7");

        // 1. Latency.
        let mut lat = Vec::new();
        let mut rows = Vec::new();
        let mut linux_light = Vec::new();
        if self.only != Some(Part::Messages) {
            for (i, (label, cpu)) in [
                ("Linux, server on the client CPU", CLIENT_CPU),
                ("Linux, server on the engine CPU", ENGINE_CPU),
            ]
            .into_iter()
            .enumerate()
            {
                say(&format!("ping-pong: {label}"));
                let mut s = start_server(
                    Some(cpu.as_str()),
                    &["serve", "echo", "--kernel", "--ip", LINUX_IP, "--port", "7"],
                    &[],
                    &format!("linux-echo-{i}.log"),
                )?;
                lat.push((
                    label,
                    pingpong(&linux_target, 0, &format!("pp-linux-{i}.log"))?,
                ));
                linux_light.push((
                    label,
                    pingpong(&linux_target, 1000, &format!("pp-linux-light-{i}.log"))?,
                ));
                s.terminate(Duration::from_secs(3))?;
            }
            say("ping-pong: corestack embedded mode");
            {
                let mut s = start_server(
                    Some(CLIENT_CPU.as_str()),
                    &[
                        "serve", "echo", "--iface", "s1", "--ip", CORE_CIDR, "--port", "7",
                        "--mode", "embedded", "--poll", "busy",
                    ],
                    &[
                        ("CORESTACK_SPIN_US", "0"),
                        ("CORESTACK_ENGINE_CPUS", ENGINE_CPU.as_str()),
                    ],
                    "embedded-echo.log",
                )?;
                lat.push((
                    "corestack embedded (own engine CPU)",
                    pingpong(&core_target, 0, "pp-embedded.log")?,
                ));
                s.terminate(Duration::from_secs(3))?;
            }

            // 2. Service mode under each policy.
            for policy in ["busy", "adaptive", "interrupt"] {
                say(&format!("service mode, {policy} polling"));
                let mut d = start_daemon(policy, &format!("daemon-{policy}.log"))?;
                let dpid = d.id();
                let mut app = start_server(
                    Some(CLIENT_CPU.as_str()),
                    &echo_args,
                    &app_env,
                    &format!("service-echo-{policy}.log"),
                )?;
                let ((), idle_cpu) = cpu_during(dpid, || {
                    std::thread::sleep(Duration::from_secs_f64(self.idle_seconds));
                    Ok(())
                })?;
                let (light, light_cpu) = cpu_during(dpid, || {
                    pingpong(&core_target, 1000, &format!("pp-light-{policy}.log"))
                })?;
                let (full, full_cpu) = cpu_during(dpid, || {
                    pingpong(&core_target, 0, &format!("pp-full-{policy}.log"))
                })?;
                rows.push(PolicyRow {
                    policy,
                    idle_cpu,
                    light,
                    light_cpu,
                    full,
                    full_cpu,
                });
                app.terminate(Duration::from_secs(3))?;
                d.terminate(Duration::from_secs(5))?;
            }
        }

        // 3. Messages per second.
        let mut msgs = Vec::new();
        if self.only != Some(Part::Latency) {
            say("64-byte writes: Linux sink in the client namespace");
            let sink_log = logs.file("sink.log");
            let mut sink = spawn_env(
                &topo.client,
                Some(CLIENT_CPU.as_str()),
                &exe,
                &["serve", "sink", "--kernel", "--port", "9"],
                &sink_log,
                &[],
            )?;
            wait_ready(&mut sink, "listening", &sink_log, false, &stop)
                .context("starting the sink")?;
            let stream = |target: &str,
                          cpu: Option<&str>,
                          extra: &[&str],
                          env: &[(&str, &str)],
                          log: &str|
             -> Result<f64> {
                let mut args = vec![
                    "bench",
                    "stream",
                    "--target",
                    target,
                    "--duration",
                    &secs,
                    "--write-size",
                    "64",
                    "--json",
                ];
                args.extend_from_slice(extra);
                let log = logs.file(log);
                let child = spawn_env(&topo.server, cpu, &exe, &args, &log, env)?;
                let v = run_client(child, &log, timeout, &stop)?;
                json_f64(&v, "writes_per_s")
            };
            say("64-byte writes: Linux");
            msgs.push((
                "Linux (writer on the engine CPU)",
                stream(
                    SINK_LINUX_SIDE,
                    Some(ENGINE_CPU.as_str()),
                    &[],
                    &[],
                    "stream-linux.log",
                )?,
            ));
            say("64-byte writes: corestack embedded");
            msgs.push((
                "corestack embedded (own engine CPU)",
                stream(
                    SINK_CORE_SIDE,
                    Some(CLIENT_CPU.as_str()),
                    &[
                        "--iface", "s1", "--ip", CORE_CIDR, "--mode", "embedded", "--poll", "busy",
                    ],
                    &[
                        ("CORESTACK_ENGINE_CPUS", ENGINE_CPU.as_str()),
                        ("CORESTACK_SPIN_US", "0"),
                    ],
                    "stream-embedded.log",
                )?,
            ));
            say("64-byte writes: corestack service mode (busy daemon on the engine CPU)");
            let msgs_service = {
                let mut d = start_daemon("busy", "daemon-stream.log")?;
                let r = stream(
                    SINK_CORE_SIDE,
                    Some(CLIENT_CPU.as_str()),
                    &[],
                    &app_env,
                    "stream-service.log",
                );
                d.terminate(Duration::from_secs(5))?;
                r?
            };
            msgs.push(("corestack service (app on client CPU)", msgs_service));
            sink.terminate(Duration::from_secs(3))?;
        }
        drop(topo);

        if !lat.is_empty() {
            print_latency(&lat, &linux_light, &rows, self.seconds);
        }
        if let Some(&(_, linux)) = msgs.first() {
            println!();
            println!(
                "one connection, back-to-back 64-byte writes into a Linux sink on CPU {} ({} s):",
                CLIENT_CPU, self.seconds
            );
            println!("{:<36}{:>14}{:>12}", "writer", "messages/s", "vs Linux");
            for (label, m) in &msgs {
                println!("{label:<36}{m:>14.0}{:>12.2}", m / linux.max(1e-9));
            }
        }
        self.outputs(&lat, &rows, &msgs)
    }

    /// `--json FILE` and `--plot FILE`.
    fn outputs(
        &self,
        lat: &[(&str, Latency)],
        rows: &[PolicyRow],
        msgs: &[(&str, f64)],
    ) -> Result<()> {
        let lat_json = |l: &Latency| serde_json::json!({"p50_us": l.p50_us, "p99_us": l.p99_us, "round_trips_per_s": l.per_s});
        // Every latency setup: the fixed ones, then service mode under full load per policy.
        let mut setups: Vec<(String, Latency)> =
            lat.iter().map(|(l, v)| (l.to_string(), *v)).collect();
        setups.extend(
            rows.iter()
                .map(|r| (format!("service, {} polling", r.policy), r.full)),
        );
        if let Some(path) = &self.json {
            let report = serde_json::json!({
                "bench": "service",
                "seconds": self.seconds,
                "latency": setups.iter().map(|(l, v)| {
                    let mut o = lat_json(v);
                    o["setup"] = l.as_str().into();
                    o
                }).collect::<Vec<_>>(),
                "policies": rows.iter().map(|r| serde_json::json!({
                    "policy": r.policy,
                    "idle_cpu": r.idle_cpu,
                    "light": lat_json(&r.light),
                    "light_cpu": r.light_cpu,
                    "full": lat_json(&r.full),
                    "full_cpu": r.full_cpu,
                })).collect::<Vec<_>>(),
                "messages_per_s": msgs.iter().map(|(l, m)| serde_json::json!({"writer": l, "messages_per_s": m})).collect::<Vec<_>>(),
            });
            crate::plot::write_json(path, &report)?;
        }
        if let Some(path) = &self.plot {
            if !setups.is_empty() {
                let cats: Vec<String> = setups.iter().map(|s| s.0.clone()).collect();
                crate::plot::bars(
                    path,
                    "bench service: 64-byte ping-pong round trip",
                    "µs",
                    &cats,
                    &[
                        ("p50".into(), setups.iter().map(|s| s.1.p50_us).collect()),
                        ("p99".into(), setups.iter().map(|s| s.1.p99_us).collect()),
                    ],
                )?;
                println!("plot: {}", path.display());
            }
            if !msgs.is_empty() {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plot");
                let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("svg");
                let mpath = path.with_file_name(format!("{stem}-messages.{ext}"));
                crate::plot::run_bars(
                    &mpath,
                    "bench service: 64-byte writes per second",
                    "messages/s",
                    &msgs
                        .iter()
                        .map(|(l, m)| (l.to_string(), *m))
                        .collect::<Vec<_>>(),
                )?;
                println!("plot: {}", mpath.display());
            }
        }
        Ok(())
    }
}

fn print_latency(
    lat: &[(&str, Latency)],
    linux_light: &[(&str, Latency)],
    rows: &[PolicyRow],
    seconds: f64,
) {
    let linux1 = lat[1].1;
    println!();
    println!(
        "corestack bench service: 64-byte TCP over veth between two namespaces (af_xdp, copy mode)"
    );
    println!(
        "ping-pong: client blocks (CPU {CLIENT_CPU}); echo application blocks (CPU {CLIENT_CPU}); \
         corestack's engine spins"
    );
    println!(
        "on CPU {ENGINE_CPU} (the daemon busy-polling, or embedded mode's engine thread); {seconds} s per run"
    );
    println!();
    println!(
        "{:<36}{:>9}{:>9}{:>14}{:>15}",
        "full load (back to back)", "p50 µs", "p99 µs", "round trips/s", "p50/Linux(1)"
    );
    let lrow = |label: &str, l: Latency| {
        println!(
            "{label:<36}{:>9.1}{:>9.1}{:>14.0}{:>15.2}",
            l.p50_us,
            l.p99_us,
            l.per_s,
            l.p50_us / linux1.p50_us.max(1e-9)
        )
    };
    for (label, l) in lat {
        lrow(label, *l);
    }
    if let Some(busy) = rows.first() {
        lrow("corestack service (busy daemon)", busy.full);
    }
    println!(
        "Linux(1): Linux with its server on the engine's CPU {ENGINE_CPU}, which like corestack crosses cores per message;"
    );
    println!("with client and server on one core Linux needs no cross-core wake-up at all.");
    println!();
    println!("light load (one round trip, then 1 ms pause), Linux:");
    for (label, l) in linux_light {
        println!("{label:<36}{:>9.1}{:>9.1}", l.p50_us, l.p99_us);
    }
    println!();
    println!(
        "the daemon's polling policies (daemon pinned to CPU {ENGINE_CPU}; CPU in % of one core, from /proc):"
    );
    println!(
        "{:<11}{:>9}{:>11}{:>11}{:>11}{:>10}{:>10}{:>10}{:>11}",
        "policy",
        "idle CPU",
        "light CPU",
        "light p50",
        "light p99",
        "full CPU",
        "full p50",
        "full p99",
        "full rt/s"
    );
    for r in rows {
        println!(
            "{:<11}{:>8.0}%{:>10.0}%{:>11.1}{:>11.1}{:>9.0}%{:>10.1}{:>10.1}{:>11.0}",
            r.policy,
            r.idle_cpu,
            r.light_cpu,
            r.light.p50_us,
            r.light.p99_us,
            r.full_cpu,
            r.full.p50_us,
            r.full.p99_us,
            r.full.per_s
        );
    }
    println!("latencies in µs");
}
