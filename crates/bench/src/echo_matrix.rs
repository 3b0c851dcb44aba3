//! `corestack bench echo-matrix`: a Linux client sends N MiB to an echo server while it reads
//! the echo back, against a Linux and a corestack echo server side by side, on one path through
//! the impairment bridge, for a set of impairments and bridge seeds; it reports MB/s, the
//! corestack/Linux ratio, and every run that stalled or did not come back byte-exact, with both
//! sides' TCP state at that moment.
//!
//! ```text
//!  client ns (CPU 0)        mid ns (bridge: CPU 0)              server ns (CPU 1)
//!                                                                   ┌─ sk 10.78.1.2 Linux echo
//!  ck 10.78.1.1 ─ br0 ─ cm ══ ml [corestack impair] mr ══ sm ─ br0 ─┤
//!  (kernel client)                                                  └─ sc 10.78.1.4 corestack echo
//! ```
//!
//! The path is `matrix.rs`'s (shared with `bench stream-matrix`), always through the bridge:
//! veth pairs with offloads off (tx checksum, TSO, GSO, GRO), a Linux bridge in each end
//! namespace, IPv6 off, permanent neighbour entries for the kernel's ends (no ARP from the
//! kernel crosses the bridge; corestack resolves the client once per start, on AF_XDP in copy
//! mode on `sc`).
//!
//! Each case is one setting of `corestack impair`, the same in both directions: `--loss`,
//! `--reorder`, `--duplicate`, `--corrupt` are percentages of frames, and `--delay-us` is added
//! to every frame in each direction on its own, so it is a one-way delay and a round trip gains
//! twice it (10 ms: RTT + 20 ms). A reordered frame is held back until the next frame of its
//! direction has gone, or for the delay (at least 1 ms). The `clean` case runs the bridge without
//! impairment (its own cost: one user-space copy per frame). The bridge holds at most 4096
//! frames per direction (`nic::bridge::BRIDGE_SLOTS`): with 10 ms of delay that is about 6 MB
//! in flight per direction (600 MB/s), far beyond what the path carries, so that the case's
//! model decides the losses, not the queue. Frames beyond it would be dropped and counted
//! (`queue full`, listed under the table). With 1024 (netem's default limit is 1000) both
//! servers overflowed it in most 10 ms runs, and the drops were loss beyond the model.
//!
//! For each case and bridge seed, one run against the Linux server (`serve echo --kernel`, a
//! blocking thread per connection), then one against the corestack server (`serve echo` on
//! `sc`, inline engine, adaptive polling). Each run starts its server and a new bridge with the
//! seed, so both servers meet the same sequence of random decisions: the n-th frame of a
//! direction is lost, or not, alike. The seed fixes that sequence, not the outcome: which frame
//! is the n-th depends on what the stacks send and when, so two runs with one seed can differ.
//!
//! The client is `bench transfer --progress-ms` on the kernel stack: one nonblocking socket that
//! writes seeded data while it reads the echo, then compares the sha256 of both. Congestion
//! control: both servers run the same one (`--server-cc`; default: the system's, which a Linux
//! server gets without asking, bbr on many current systems), so the two servers' sending
//! compares like with like; the client runs the system's default (`--client-cc`), as a user's
//! client does, the same against both servers.
//!
//! A run with no byte sent or received for `--stall-secs` is stopped as stalled, a run longer
//! than `--cap-secs` as capped; then, as when the client fails or the echo differs, `ss -tino`
//! of the client's socket (client namespace) and the server's state (`corestack ss` and
//! `corestack stat` of its pid, or `ss -tino` in the server namespace) are taken before anything
//! is stopped.
//!
//! It prints a table (MB/s = bytes echoed back / seconds from connect to the last byte, per
//! seed; the corestack/Linux ratio per seed and its median), then one block per stalled or
//! failed run; `--json FILE` writes every figure. The exit status is 1 when any run stalled,
//! was capped, failed or was not byte-exact (after the full output), 130 on Ctrl-C. Every
//! namespace, link, process and log it created is removed when it ends, also on error and
//! Ctrl-C (the [`Topology`] and `ChildGuard`s are dropped).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use netns::{ChildGuard, NextLine};
use serde::Serialize;
use serde_json::Value;

use crate::harness::children::{last_line, LogDir};
use crate::harness::matrix::{
    median, BridgeTotals, Lab, Topology, CLIENT_CPU, CORE_SERVER, LINUX_SERVER, PORT, SERVER_CPU,
};
use cmdline::{core_cc_arg, one_line, stop_flag, Interrupted};

/// The client's progress line interval, ms.
const PROGRESS_MS: &str = "250";
/// How much longer than the cap the client itself may run (it is stopped at the cap anyway).
const CLIENT_SLACK_SECS: f64 = 30.0;

/// `bench echo-matrix` options.
#[derive(Args, Debug)]
pub struct EchoMatrix {
    /// MiB the client sends (and reads back) per run.
    #[arg(long, default_value_t = 8)]
    mib: u64,
    /// Seeds of the impairment bridge, comma-separated: every case runs once per seed and
    /// server.
    #[arg(long, value_delimiter = ',', default_value = "5,7,11")]
    seeds: Vec<u64>,
    /// `all`, or cases separated by commas, by key or name (spaces and % ignored): clean,
    /// loss0.1, loss1, loss5, delay10-loss1, delay2-reorder5, dup1, corrupt0.1, all-at-once.
    #[arg(long, default_value = "all")]
    cases: String,
    /// A run with no byte sent or received for this many seconds is stopped as stalled.
    #[arg(long, default_value_t = 10.0)]
    stall_secs: f64,
    /// A run is stopped (capped) after this many seconds whatever it does.
    #[arg(long, default_value_t = 120.0)]
    cap_secs: f64,
    /// Congestion control of both echo servers (Linux: TCP_CONGESTION on its listener;
    /// corestack: `--cc`), by its Linux name: reno, cubic, dctcp, bbr. Default: the system's
    /// (net.ipv4.tcp_congestion_control), which a Linux server gets without asking.
    #[arg(long, alias = "linux-cc", value_name = "NAME")]
    server_cc: Option<String>,
    /// Congestion control of the client (the same against both servers); default: the
    /// system's (net.ipv4.tcp_congestion_control), as a user's client has.
    #[arg(long, value_name = "NAME")]
    client_cc: Option<String>,
    /// Also write every figure, and the state of every failed run, to this file as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw each case's median MB/s over the seeds, Linux beside corestack, as bars to
    /// FILE.svg or FILE.png (runs that did not complete are left out of the medians).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Capture the frames on both sides of the bridge (headers only) with tcpdump, two pcaps
    /// per run in this directory: CASE-SEED-SERVER-client-side.pcap (before the impairment
    /// of the client's frames) and ...-server-side.pcap (after it).
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// Where the impairment bridge runs: `client`, pinned to the client's CPU, so that the
    /// wire never takes the server's CPU (corestack's engine is built for a core of its
    /// own); `any`, where the scheduler puts it (on the server's CPU at times: then a
    /// user-space server loses its CPU to the wire, and the kernel server does not).
    #[arg(long, value_enum, default_value = "client")]
    bridge_cpu: BridgeCpu,
}

/// Where the impairment bridge runs (`--bridge-cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BridgeCpu {
    /// Pinned to the client's CPU.
    Client,
    /// Not pinned.
    Any,
}

/// One impairment setting of the bridge (each direction alike).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Case {
    /// Short name for `--cases`.
    pub key: &'static str,
    /// Name in the table.
    pub name: &'static str,
    /// Frames dropped, percent.
    pub loss: f64,
    /// Frames held back behind a later one, percent.
    pub reorder: f64,
    /// Frames sent twice, percent.
    pub duplicate: f64,
    /// Frames with one bit flipped, percent.
    pub corrupt: f64,
    /// Delay added in each direction (one way), µs.
    pub delay_us: u64,
}

const CLEAN: Case = Case {
    key: "clean",
    name: "clean",
    loss: 0.0,
    reorder: 0.0,
    duplicate: 0.0,
    corrupt: 0.0,
    delay_us: 0,
};

/// Every case, in table order.
pub const CASES: [Case; 9] = [
    CLEAN,
    Case {
        key: "loss0.1",
        name: "loss 0.1 %",
        loss: 0.1,
        ..CLEAN
    },
    Case {
        key: "loss1",
        name: "loss 1 %",
        loss: 1.0,
        ..CLEAN
    },
    Case {
        key: "loss5",
        name: "loss 5 %",
        loss: 5.0,
        ..CLEAN
    },
    Case {
        key: "delay10-loss1",
        name: "10 ms + loss 1 %",
        loss: 1.0,
        delay_us: 10_000,
        ..CLEAN
    },
    Case {
        key: "delay2-reorder5",
        name: "2 ms + reorder 5 %",
        reorder: 5.0,
        delay_us: 2_000,
        ..CLEAN
    },
    Case {
        key: "dup1",
        name: "duplicate 1 %",
        duplicate: 1.0,
        ..CLEAN
    },
    Case {
        key: "corrupt0.1",
        name: "corrupt 0.1 %",
        corrupt: 0.1,
        ..CLEAN
    },
    Case {
        key: "all-at-once",
        name: "all at once",
        loss: 1.0,
        reorder: 5.0,
        duplicate: 1.0,
        corrupt: 0.1,
        delay_us: 10_000,
    },
];

/// Lower case, without spaces and `%`: how `--cases` names are compared.
fn normalize(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '%')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The cases `--cases` names, in table order; `all` is every case.
pub fn select_cases(arg: &str) -> Result<Vec<Case>> {
    if normalize(arg) == "all" {
        return Ok(CASES.to_vec());
    }
    let mut wanted = Vec::new();
    for part in arg.split(',').filter(|p| !p.trim().is_empty()) {
        let n = normalize(part);
        let case = CASES
            .iter()
            .find(|c| normalize(c.key) == n || normalize(c.name) == n)
            .ok_or_else(|| {
                let keys: Vec<&str> = CASES.iter().map(|c| c.key).collect();
                anyhow!(
                    "no case {part:?} (--cases takes all, or some of: {})",
                    keys.join(", ")
                )
            })?;
        if !wanted.contains(&case.key) {
            wanted.push(case.key);
        }
    }
    if wanted.is_empty() {
        bail!("--cases names no case");
    }
    Ok(CASES
        .iter()
        .filter(|c| wanted.contains(&c.key))
        .copied()
        .collect())
}

impl Case {
    /// `corestack impair` arguments for this case with bridge seed `seed`.
    fn impair_args(&self, seed: u64) -> Vec<String> {
        let mut v = Vec::new();
        for (flag, pct) in [
            ("--loss", self.loss),
            ("--reorder", self.reorder),
            ("--duplicate", self.duplicate),
            ("--corrupt", self.corrupt),
        ] {
            if pct > 0.0 {
                v.extend([flag.to_string(), pct.to_string()]);
            }
        }
        if self.delay_us > 0 {
            v.extend(["--delay-us".to_string(), self.delay_us.to_string()]);
        }
        v.extend(["--seed".to_string(), seed.to_string()]);
        v
    }
}

/// Which echo server a run is against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Server {
    /// `serve echo --kernel` on `sk`.
    Linux,
    /// `serve echo` on corestack, driving `sc`.
    Corestack,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Linux => "Linux",
            Server::Corestack => "corestack",
        }
    }

    fn ip(self) -> &'static str {
        match self {
            Server::Linux => LINUX_SERVER,
            Server::Corestack => CORE_SERVER,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every byte came back, equal.
    Ok,
    /// No byte sent or received for `--stall-secs`: stopped.
    Stalled,
    /// Still running at `--cap-secs`: stopped.
    Capped,
    /// Every byte came back, but the sha256 differs.
    Mismatch,
    /// The client (or a server, or the bridge) failed.
    Failed,
}

impl Outcome {
    /// The table cell of a run that did not end well.
    fn cell(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Stalled => "stall",
            Outcome::Capped => "cap",
            Outcome::Mismatch => "badsha",
            Outcome::Failed => "fail",
        }
    }
}

/// Both sides' TCP state when a run was stopped, or just after it failed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TcpState {
    /// `ss -tino` of the client's socket, in the client namespace.
    pub client: String,
    /// The server's sockets: `corestack ss --pid`, or `ss -tino` in the server namespace.
    pub server: String,
    /// corestack's counters (`corestack stat --pid`); empty for the Linux server.
    pub server_counters: String,
}

/// One run: a case, a seed, a server.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// The case's key.
    pub case: &'static str,
    /// The bridge's seed.
    pub seed: u64,
    /// The server.
    pub server: Server,
    /// How it ended.
    pub outcome: Outcome,
    /// Bytes echoed back per second (10^6), from connect to the last byte; for a complete run.
    pub mbytes_per_s: Option<f64>,
    /// Wall time of the run until it ended or was stopped, s.
    pub seconds: f64,
    /// Bytes the client had written to its socket (last report).
    pub bytes_sent: u64,
    /// Bytes the client had read back (last report).
    pub bytes_received: u64,
    /// Why it failed, or what was seen when it was stopped.
    pub detail: String,
    /// Both sides' state, for a run that did not end well.
    pub state: Option<TcpState>,
    /// What the bridge did during the run.
    pub bridge: Option<BridgeTotals>,
    /// The corestack server's counters when it stopped (those it printed at exit, TCP
    /// counters of its connections included); empty for the Linux server.
    pub server_counters: std::collections::BTreeMap<String, u64>,
    /// What the Linux client's kernel did to repair its sending over the run (the client
    /// namespace's [`CLIENT_REPAIRS`] counters, after − before).
    #[serde(default)]
    pub client_repairs: std::collections::BTreeMap<String, u64>,
}

/// The client kernel's repair counters kept per run: (file, group, name).
const CLIENT_REPAIRS: [(&str, &str, &str); 7] = [
    ("snmp", "Tcp:", "RetransSegs"),
    ("netstat", "TcpExt:", "TCPTimeouts"),
    ("netstat", "TcpExt:", "TCPLossProbes"),
    ("netstat", "TcpExt:", "TCPSackRecovery"),
    ("netstat", "TcpExt:", "TCPSpuriousRTOs"),
    ("netstat", "TcpExt:", "TCPDSACKRecv"),
    ("netstat", "TcpExt:", "TCPSACKReorder"),
];

/// [`CLIENT_REPAIRS`] in namespace `ns` now (a counter it cannot read is left out).
fn client_repairs(ns: &netns::Netns) -> std::collections::BTreeMap<String, u64> {
    let snmp = ns.run("cat", &["/proc/net/snmp"]).unwrap_or_default();
    let netstat = ns.run("cat", &["/proc/net/netstat"]).unwrap_or_default();
    CLIENT_REPAIRS
        .iter()
        .filter_map(|&(file, group, name)| {
            let text = if file == "snmp" { &snmp } else { &netstat };
            crate::memcached::load::proc_net_counter(text, group, name)
                .map(|v| (name.to_string(), v))
        })
        .collect()
}

/// The counters `serve` prints at exit after its "corestack statistics:" line (stdout
/// `lines`), as name → value.
fn exit_counters(lines: &[String]) -> std::collections::BTreeMap<String, u64> {
    lines
        .iter()
        .skip_while(|l| !l.starts_with("corestack statistics:"))
        .skip(1)
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (name, value) = (it.next()?, it.next()?.parse().ok()?);
            it.next().is_none().then(|| (name.to_string(), value))
        })
        .collect()
}

impl RunResult {
    /// A run not done yet (failed until it says otherwise).
    fn new(case: &Case, seed: u64, server: Server) -> RunResult {
        RunResult {
            case: case.key,
            seed,
            server,
            outcome: Outcome::Failed,
            mbytes_per_s: None,
            seconds: 0.0,
            bytes_sent: 0,
            bytes_received: 0,
            detail: String::new(),
            state: None,
            bridge: None,
            server_counters: Default::default(),
            client_repairs: Default::default(),
        }
    }

    /// Judges a client that ended by itself from its final report (`bench transfer --json`),
    /// if it printed one; `last_words` is what it said last on stderr, for a failure.
    fn judge(&mut self, report: Option<&Value>, last_words: &str) {
        let Some(v) = report else {
            self.outcome = Outcome::Failed;
            self.detail = format!("the client failed: {last_words}");
            return;
        };
        let num = |k: &str| v.get(k).and_then(Value::as_u64);
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?");
        self.bytes_sent = num("bytes_sent").unwrap_or(self.bytes_sent);
        self.bytes_received = num("bytes_received").unwrap_or(self.bytes_received);
        if v.get("equal").and_then(Value::as_bool) == Some(true) {
            self.outcome = Outcome::Ok;
            self.mbytes_per_s = v.get("mbytes_per_s").and_then(Value::as_f64);
        } else {
            self.outcome = Outcome::Mismatch;
            self.detail = format!(
                "the echo is not byte-exact: {} bytes sent, {} received, sha256 {} sent, {} received",
                self.bytes_sent,
                self.bytes_received,
                text("sent_sha256"),
                text("received_sha256")
            );
        }
    }
}

/// What a run needs.
struct Ctx<'a> {
    lab: Lab<'a>,
    bytes: u64,
    stall: Duration,
    cap: Duration,
    /// Congestion control of both servers (its Linux name).
    server_cc: &'a str,
    /// The same as corestack's `--cc` value.
    core_cc: &'static str,
    /// TCP_CONGESTION of the client.
    client_cc: &'a str,
    /// Where per-run captures go, if anywhere.
    pcap: Option<&'a Path>,
}

impl Ctx<'_> {
    /// Starts tcpdump on one of the bridge's links in the mid namespace (`mr` towards the
    /// servers, after the impairment; `ml` towards the client, before it), headers only,
    /// writing `file`; it runs until terminated.
    fn capture(&self, link: &str, file: &Path) -> Result<ChildGuard> {
        let log = self.lab.logs.file(&format!("tcpdump-{link}.log"));
        let err =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = self.lab.topo.mid.exec("tcpdump");
        cmd.args(["-i", link, "-n", "-s", "128", "-U", "-w"])
            .arg(file)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(err);
        let child = ChildGuard::spawn(&mut cmd).context("starting tcpdump (is it installed?)")?;
        // tcpdump opens the link before it says so; give it that moment.
        std::thread::sleep(Duration::from_millis(300));
        Ok(child)
    }

    /// Starts `server` in the server namespace and waits until it listens.
    fn start_server(&self, server: Server, log: &Path) -> Result<ChildGuard> {
        let core_ip = format!("{CORE_SERVER}/24");
        let mut args = vec!["serve", "echo", "--port", PORT];
        match server {
            Server::Linux => args.extend_from_slice(&[
                "--kernel",
                "--ip",
                LINUX_SERVER,
                "--kernel-cc",
                self.server_cc,
            ]),
            Server::Corestack => args.extend_from_slice(&[
                "--iface",
                "sc",
                "--ip",
                &core_ip,
                "--driver",
                "af_xdp",
                "--cc",
                self.core_cc,
            ]),
        }
        self.lab
            .server(&args, log)
            .with_context(|| format!("starting the {} echo server", server.name()))
    }

    /// One run of `case` with bridge seed `seed` against `server`: its server, a new bridge
    /// with the seed, the client; then the bridge's totals.
    fn run(&self, case: &Case, seed: u64, server: Server) -> Result<RunResult> {
        let tag = format!("{}-{seed}-{}", case.key, server.name());
        let mut result = RunResult::new(case, seed, server);
        let not_interrupted = |e: anyhow::Error, result: &mut RunResult| {
            if e.is::<Interrupted>() {
                return Err(e);
            }
            result.detail = one_line(&e);
            Ok(())
        };
        let server_log = self.lab.logs.file(&format!("{tag}-server.log"));
        let mut srv = match self.start_server(server, &server_log) {
            Ok(c) => c,
            Err(e) => return not_interrupted(e, &mut result).map(|()| result),
        };
        let args = case.impair_args(seed);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let bridge = match self.lab.bridge(&args, &format!("{tag}-impair.log")) {
            Ok(b) => b,
            Err(e) => return not_interrupted(e, &mut result).map(|()| result),
        };
        let capture = match self.pcap {
            Some(dir) => Some((
                self.capture("mr", &dir.join(format!("{tag}-server-side.pcap")))?,
                self.capture("ml", &dir.join(format!("{tag}-client-side.pcap")))?,
            )),
            None => None,
        };
        let client_log = self.lab.logs.file(&format!("{tag}-client.log"));
        let repairs0 = client_repairs(&self.lab.topo.client);
        if let Err(e) = self.transfer(srv.id(), &client_log, &mut result) {
            not_interrupted(e, &mut result)?;
        }
        let repairs1 = client_repairs(&self.lab.topo.client);
        result.client_repairs = repairs1
            .iter()
            .map(|(k, v)| (k.clone(), v.saturating_sub(*repairs0.get(k).unwrap_or(&0))))
            .collect();
        if result.outcome != Outcome::Ok && result.state.is_none() {
            result.state = Some(self.tcp_state(server, srv.id()));
        }
        // The client has ended or been stopped by now. A stopped client's socket lives on as an
        // orphan that keeps sending (its unsent data, window probes) and would meet the next
        // run's server: it goes now (`ss -K`, the kernel resets it).
        let dst = format!("{}:{PORT}", server.ip());
        let _ = self.lab.topo.client.run("ss", &["-K", "-tn", "dst", &dst]);
        // Then the capture, the bridge, the server.
        if let Some((mut a, mut b)) = capture {
            a.terminate(Duration::from_secs(3))?;
            b.terminate(Duration::from_secs(3))?;
        }
        result.bridge = bridge.stop().unwrap_or(None);
        srv.terminate(Duration::from_secs(3))?;
        if server == Server::Corestack {
            result.server_counters = exit_counters(&srv.remaining_lines(Duration::from_secs(1)));
        }
        if result.outcome == Outcome::Failed {
            let srv_last = last_line(&server_log);
            if !srv_last.is_empty() {
                let _ = write!(result.detail, " (the server's last line: {srv_last})");
            }
        }
        Ok(result)
    }

    /// Runs the client against `result.server` (process `server_pid`) and watches it; when
    /// it stalls or reaches the cap, takes both sides' state, then stops it.
    fn transfer(&self, server_pid: u32, log: &Path, result: &mut RunResult) -> Result<()> {
        let target = format!("{}:{PORT}", result.server.ip());
        let bytes = self.bytes.to_string();
        let timeout = format!("{:.0}", self.cap.as_secs_f64() + CLIENT_SLACK_SECS);
        let args = [
            "bench",
            "transfer",
            "--target",
            &target,
            "--bytes",
            &bytes,
            "--json",
            "--progress-ms",
            PROGRESS_MS,
            "--timeout",
            &timeout,
            "--kernel-cc",
            self.client_cc,
        ];
        let mut child = self.lab.client(&args, log)?;
        let report = watch(&mut child, self.stall, self.cap, self.lab.stop, result)?;
        if matches!(result.outcome, Outcome::Stalled | Outcome::Capped) {
            result.state = Some(self.tcp_state(result.server, server_pid));
            child.terminate(Duration::from_secs(2))?;
        } else {
            child.wait_timeout(Duration::from_secs(5))?;
            result.judge(report.as_ref(), &last_line(log));
        }
        Ok(())
    }

    /// `ss -tino` of the client's connection to `server`, in the client namespace.
    fn client_ss(&self, server: Server) -> String {
        let dst = format!("{}:{PORT}", server.ip());
        output_or_error(self.lab.topo.client.run("ss", &["-tino", "dst", &dst]))
    }

    /// Both sides' TCP state now.
    fn tcp_state(&self, server: Server, pid: u32) -> TcpState {
        let client = self.client_ss(server);
        match server {
            Server::Linux => {
                let src = format!("{LINUX_SERVER}:{PORT}");
                TcpState {
                    client,
                    server: output_or_error(
                        self.lab.topo.server.run("ss", &["-tino", "src", &src]),
                    ),
                    server_counters: String::new(),
                }
            }
            Server::Corestack => {
                let pid = pid.to_string();
                let own = |what: &str| {
                    output_or_error(netns::run(
                        Command::new(self.lab.exe).args([what, "--pid", &pid]),
                    ))
                };
                TcpState {
                    client,
                    server: own("ss"),
                    server_counters: own("stat"),
                }
            }
        }
    }
}

/// A command's output, or its error, as text.
fn output_or_error(r: netns::Result<String>) -> String {
    match r {
        Ok(s) => s.trim_end().to_string(),
        Err(e) => format!("(not available: {e})"),
    }
}

/// Reads the client's progress lines into `r` until the client ends (then returns its final
/// report, if any, for [`RunResult::judge`]), stalls (no byte sent or received for `stall`) or
/// runs past `cap` (then `r.outcome` says which).
fn watch(
    child: &mut ChildGuard,
    stall: Duration,
    cap: Duration,
    stop: &AtomicBool,
    r: &mut RunResult,
) -> Result<Option<Value>> {
    let start = Instant::now();
    let mut last_change = start;
    let mut report = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        let line = child.next_line(Duration::from_millis(100));
        r.seconds = start.elapsed().as_secs_f64();
        match line {
            // The client prints only JSON lines; anything else is not ours.
            NextLine::Line(l) => {
                if let Ok(v) = serde_json::from_str::<Value>(&l) {
                    match v.get("progress") {
                        Some(p) => {
                            let field = |k: &str| p.get(k).and_then(Value::as_u64).unwrap_or(0);
                            let now = (field("bytes_sent"), field("bytes_received"));
                            if now != (r.bytes_sent, r.bytes_received) {
                                (r.bytes_sent, r.bytes_received) = now;
                                last_change = Instant::now();
                            }
                        }
                        None => report = Some(v),
                    }
                }
            }
            NextLine::Pending => {}
            NextLine::Closed => return Ok(report),
        }
        let (outcome, why) = if last_change.elapsed() >= stall {
            (
                Outcome::Stalled,
                format!("no byte sent or received for {:.0} s", stall.as_secs_f64()),
            )
        } else if start.elapsed() >= cap {
            (
                Outcome::Capped,
                format!("still running after {:.0} s", cap.as_secs_f64()),
            )
        } else {
            continue;
        };
        r.outcome = outcome;
        r.detail = format!(
            "{why}: {} bytes sent, {} received in {:.1} s",
            r.bytes_sent, r.bytes_received, r.seconds
        );
        return Ok(None);
    }
}

/// MB/s as the table shows it: no decimals from 10 up, one below.
fn mbps(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A run's table cell: its MB/s, or how it ended; `?` when missing.
fn cell(r: Option<&RunResult>) -> String {
    match r {
        None => "?".to_string(),
        Some(r) => match (r.outcome, r.mbytes_per_s) {
            (Outcome::Ok, Some(v)) => mbps(v),
            (o, _) => o.cell().to_string(),
        },
    }
}

/// corestack/Linux per seed (None unless both runs are good), in `seeds` order.
fn ratios(runs: &[RunResult], case: &str, seeds: &[u64]) -> Vec<Option<f64>> {
    seeds
        .iter()
        .map(|&seed| {
            let good = |server| good_mbps(runs, case, seed, server);
            match (good(Server::Linux), good(Server::Corestack)) {
                (Some(l), Some(c)) if l > 0.0 => Some(c / l),
                _ => None,
            }
        })
        .collect()
}

fn find<'a>(runs: &'a [RunResult], case: &str, seed: u64, server: Server) -> Option<&'a RunResult> {
    runs.iter()
        .find(|r| r.case == case && r.seed == seed && r.server == server)
}

/// The MB/s of a run that came back whole and equal.
fn good_mbps(runs: &[RunResult], case: &str, seed: u64, server: Server) -> Option<f64> {
    find(runs, case, seed, server)
        .filter(|r| r.outcome == Outcome::Ok)
        .and_then(|r| r.mbytes_per_s)
}

/// The median of the ratios there are.
fn median_ratio(ratios: &[Option<f64>]) -> Option<f64> {
    let v: Vec<f64> = ratios.iter().flatten().copied().collect();
    (!v.is_empty()).then(|| median(&v))
}

/// The plot's bars: per case, the median MB/s over the seeds of the runs that completed, for
/// Linux and for corestack (NaN: none completed).
fn plot_bars(
    cases: &[Case],
    seeds: &[u64],
    runs: &[RunResult],
) -> (Vec<String>, Vec<(String, Vec<f64>)>) {
    let cats = cases.iter().map(|c| c.name.to_string()).collect();
    let bars = [("Linux", Server::Linux), ("corestack", Server::Corestack)]
        .into_iter()
        .map(|(name, server)| {
            let values = cases
                .iter()
                .map(|c| {
                    let v: Vec<f64> = seeds
                        .iter()
                        .filter_map(|&s| good_mbps(runs, c.key, s, server))
                        .collect();
                    if v.is_empty() {
                        f64::NAN
                    } else {
                        median(&v)
                    }
                })
                .collect();
            (name.to_string(), values)
        })
        .collect();
    (cats, bars)
}

/// The table: a header and one row per case, columns padded to their widest cell.
fn table(cases: &[Case], seeds: &[u64], runs: &[RunResult]) -> String {
    let seed_list: Vec<String> = seeds.iter().map(u64::to_string).collect();
    let mut rows = vec![[
        format!("case (bridge seeds {})", seed_list.join(", ")),
        "Linux MB/s".to_string(),
        "corestack MB/s".to_string(),
        "corestack/Linux (per seed)".to_string(),
        "median".to_string(),
    ]];
    for case in cases {
        let cells = |server| {
            seeds
                .iter()
                .map(|&s| cell(find(runs, case.key, s, server)))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        let ratios = ratios(runs, case.key, seeds);
        let per_seed: Vec<String> = ratios
            .iter()
            .map(|r| r.map_or("-".to_string(), |r| format!("{r:.2}")))
            .collect();
        rows.push([
            case.name.to_string(),
            cells(Server::Linux),
            cells(Server::Corestack),
            per_seed.join(" "),
            median_ratio(&ratios).map_or("-".to_string(), |m| format!("{m:.2}")),
        ]);
    }
    let mut widths = [0usize; 5];
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}   ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Indents every line of `text` by `n` spaces.
/// The Linux client's repairs per case and seed against each server: retransmitted
/// segments / tail loss probes / RTO expiries (what it had to do for the data it sent).
fn repairs_table(cases: &[Case], seeds: &[u64], runs: &[RunResult]) -> String {
    let cell = |case: &str, server: Server| {
        seeds
            .iter()
            .map(|&seed| match find(runs, case, seed, server) {
                Some(r) if !r.client_repairs.is_empty() => {
                    let g = |k: &str| r.client_repairs.get(k).copied().unwrap_or(0);
                    format!(
                        "{}/{}/{}",
                        g("RetransSegs"),
                        g("TCPLossProbes"),
                        g("TCPTimeouts")
                    )
                }
                _ => "-".to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let rows: Vec<[String; 3]> = cases
        .iter()
        .map(|c| {
            [
                c.name.to_string(),
                cell(c.key, Server::Linux),
                cell(c.key, Server::Corestack),
            ]
        })
        .collect();
    let w = |i: usize, head: &str| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
            .max(head.len())
    };
    let heads = [
        "the Linux client's repairs",
        "against Linux",
        "against corestack",
    ];
    let (w0, w1) = (w(0, heads[0]), w(1, heads[1]));
    let mut out = format!("{:<w0$}   {:<w1$}   {}\n", heads[0], heads[1], heads[2]);
    for r in &rows {
        out += &format!("{:<w0$}   {:<w1$}   {}\n", r[0], r[1], r[2]);
    }
    out += "(per seed: segments retransmitted / tail loss probes / RTO expiries, from the client namespace's /proc/net/snmp and netstat)\n";
    out
}

fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One block for a run that did not end well: what happened, the bridge's counters, both
/// sides' state.
fn failure_block(case: &Case, r: &RunResult) -> String {
    let mut out = format!(
        "{}: {}, bridge seed {}, {} server: {}\n",
        r.outcome.cell(),
        case.name,
        r.seed,
        r.server.name(),
        r.detail
    );
    if let Some(b) = &r.bridge {
        let _ = writeln!(
            out,
            "  bridge: lost {}, reordered {}, duplicated {}, corrupted {}, queue full {}, socket drops {}",
            b.lost, b.reordered, b.duplicated, b.corrupted, b.queue_full, b.socket_drops
        );
    }
    if let Some(s) = &r.state {
        let or_none = |t: &str| indent(if t.is_empty() { "(nothing)" } else { t }, 4);
        let server_how = match r.server {
            Server::Linux => "Linux, ss -tino in the server namespace",
            Server::Corestack => "corestack, corestack ss --pid",
        };
        let _ = writeln!(
            out,
            "  client (Linux, ss -tino in the client namespace):\n{}",
            or_none(&s.client)
        );
        let _ = writeln!(out, "  server ({server_how}):\n{}", or_none(&s.server));
        if !s.server_counters.is_empty() {
            let _ = writeln!(
                out,
                "  server counters (corestack stat --pid):\n{}",
                indent(&s.server_counters, 4)
            );
        }
    }
    out
}

/// The `--json` file's content.
#[derive(Serialize)]
struct JsonReport<'a> {
    mib: u64,
    seeds: &'a [u64],
    stall_secs: f64,
    cap_secs: f64,
    server_cc: &'a str,
    client_cc: &'a str,
    client_cpu: Option<&'a str>,
    server_cpu: Option<&'a str>,
    bridge_cpu: &'a str,
    cases: Vec<JsonCase<'a>>,
    runs: &'a [RunResult],
}

#[derive(Serialize)]
struct JsonCase<'a> {
    case: &'a Case,
    linux_mbytes_per_s: Vec<Option<f64>>,
    corestack_mbytes_per_s: Vec<Option<f64>>,
    ratios: Vec<Option<f64>>,
    median_ratio: Option<f64>,
}

impl EchoMatrix {
    pub fn run(self) -> Result<()> {
        let cases = self.check()?;
        let stop = stop_flag()?;
        netns::check_privileges()?;
        let exe = std::env::current_exe().context("finding this program's path")?;
        let logs = LogDir::new("echo-matrix")?;
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        eprintln!(
            "creating namespaces (client, mid, server), veth pairs and bridges (offloads off)"
        );
        let topo = Topology::build("em", false)?;
        topo.static_neighbours()?;
        let client_cc = match &self.client_cc {
            Some(cc) => cc.clone(),
            None => topo
                .client
                .run("sysctl", &["-n", "net.ipv4.tcp_congestion_control"])
                .context("reading the system's congestion control")?
                .trim()
                .to_string(),
        };
        let server_cc = match &self.server_cc {
            Some(cc) => cc.trim().to_string(),
            None => topo
                .server
                .run("sysctl", &["-n", "net.ipv4.tcp_congestion_control"])
                .context("reading the system's congestion control")?
                .trim()
                .to_string(),
        };
        let Some(core_cc) = core_cc_arg(&server_cc) else {
            bail!("corestack has no congestion control {server_cc:?} (reno, cubic, dctcp, bbr): choose one with --server-cc");
        };
        let mut lab = Lab::new(&topo, &exe, &logs, &stop);
        lab.bridge_on_client_cpu = self.bridge_cpu == BridgeCpu::Client;
        let mut probe = lab.bridge(&[], "probe-impair.log")?;
        topo.through(&mut probe)?;
        probe.stop()?;
        let ctx = Ctx {
            lab,
            bytes: self.mib << 20,
            stall: Duration::from_secs_f64(self.stall_secs),
            cap: Duration::from_secs_f64(self.cap_secs),
            server_cc: &server_cc,
            core_cc,
            client_cc: &client_cc,
            pcap: self.pcap.as_deref(),
        };
        let mut runs = Vec::new();
        let total = cases.len() * self.seeds.len() * 2;
        for case in &cases {
            for &seed in &self.seeds {
                for server in [Server::Linux, Server::Corestack] {
                    let r = ctx.run(case, seed, server)?;
                    let how = match r.outcome {
                        Outcome::Ok => " MB/s".to_string(),
                        _ => format!(" ({})", r.detail),
                    };
                    eprintln!(
                        "[{}/{total}] {}, seed {seed}, {}: {}{how}",
                        runs.len() + 1,
                        case.name,
                        server.name(),
                        cell(Some(&r)),
                    );
                    runs.push(r);
                }
            }
        }
        let pin = ctx.lab.pinned;
        drop(topo);

        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        let ccs = (server_cc.as_str(), client_cc.as_str());
        self.print(&cases, &runs, pin, &load.join(" "), ccs);
        if let Some(path) = &self.json {
            let report = self.json_report(&cases, &runs, pin, ccs);
            let text = serde_json::to_string_pretty(&report)?;
            std::fs::write(path, text + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &self.plot {
            let (cats, bars) = plot_bars(&cases, &self.seeds, &runs);
            crate::plot::bars(
                path,
                &format!("echo-matrix: {} MiB echoed, median over seeds", self.mib),
                "MB/s",
                &cats,
                &bars,
            )?;
            println!("plot: {}", path.display());
        }
        let bad = runs.iter().filter(|r| r.outcome != Outcome::Ok).count();
        if bad > 0 {
            bail!(
                "{bad} of {} runs stalled, were capped, failed or were not byte-exact (blocks above)",
                runs.len()
            );
        }
        Ok(())
    }

    /// Checks the options; returns the cases to run.
    fn check(&self) -> Result<Vec<Case>> {
        if let Some(p) = &self.plot {
            crate::plot::format_of(p)?;
        }
        if !(1..=1024).contains(&self.mib) {
            bail!("--mib must be 1 to 1024");
        }
        if self.seeds.is_empty() || self.seeds.len() > 20 {
            bail!("--seeds takes 1 to 20 seeds, e.g. 5,7,11");
        }
        if !(1.0..=600.0).contains(&self.stall_secs) {
            bail!("--stall-secs must be in [1, 600]");
        }
        if !(self.cap_secs >= self.stall_secs && self.cap_secs <= 3000.0) {
            bail!("--cap-secs must be in [--stall-secs, 3000]");
        }
        select_cases(&self.cases)
    }

    /// What was run, the table, then one block per run that did not end well.
    /// `ccs`: the servers' and the client's congestion control.
    fn print(&self, cases: &[Case], runs: &[RunResult], pin: bool, load: &str, ccs: (&str, &str)) {
        let (server_cc, client_cc) = ccs;
        println!();
        println!(
            "corestack bench echo-matrix: a Linux client sends {} MiB to an echo server while it reads the echo back (both directions loaded at once); sha256 compared every run",
            self.mib
        );
        println!("MB/s = bytes echoed back (10^6) / seconds from connect to the last byte; one run per server, case and bridge seed, one run at a time");
        println!("path: client ns -> br0 -> corestack impair (user-space AF_PACKET bridge in ns mid, both directions impaired alike, seeded, restarted every run) -> br0 -> server ns; veth, offloads off; delays are one way per direction (RTT + twice the delay)");
        println!(
            "servers: Linux `serve echo --kernel` (a blocking thread per connection, {server_cc}{}), corestack `serve echo` (inline engine, af_xdp copy mode, adaptive polling, {server_cc}); client: kernel stack ({client_cc}{}), one nonblocking socket writing while it reads",
            if self.server_cc.is_none() { ", the system's default" } else { "" },
            if self.client_cc.is_none() { ", the system's default" } else { "" }
        );
        if pin {
            let bridge = if self.bridge_cpu == BridgeCpu::Client {
                format!("the bridge to CPU {CLIENT_CPU} with the client")
            } else {
                "the bridge is not pinned (the scheduler runs it on either CPU)".to_string()
            };
            println!("client pinned to CPU {CLIENT_CPU}, servers to CPU {SERVER_CPU}; {bridge}; load average before: {load}");
        } else {
            println!("nothing pinned (fewer than 2 CPUs); load average before: {load}");
        }
        println!(
            "a run is stopped as stalled after {} s without a byte sent or received, and capped at {} s",
            self.stall_secs, self.cap_secs
        );
        println!();
        print!("{}", table(cases, &self.seeds, runs));
        println!();
        println!("stall: stopped, no progress; cap: stopped at the cap; badsha: echo not byte-exact; fail: the client or a server failed; ratios and medians only over seeds where both runs completed");
        println!();
        print!("{}", repairs_table(cases, &self.seeds, runs));
        let beyond: Vec<String> = runs
            .iter()
            .filter_map(|r| {
                let b = r.bridge?;
                (b.queue_full + b.socket_drops > 0).then(|| {
                    format!(
                        "{} seed {} {}: queue full {}, socket drops {}",
                        r.case,
                        r.seed,
                        r.server.name(),
                        b.queue_full,
                        b.socket_drops
                    )
                })
            })
            .collect();
        if !beyond.is_empty() {
            println!(
                "the bridge dropped frames beyond the model (its queue of {} frames per direction, or its socket buffer, full) in: {}",
                nic::bridge::BRIDGE_SLOTS,
                beyond.join("; ")
            );
        }
        for r in runs.iter().filter(|r| r.outcome != Outcome::Ok) {
            let case = cases.iter().find(|c| c.key == r.case).unwrap_or(&CLEAN);
            println!();
            print!("{}", failure_block(case, r));
        }
    }

    /// Everything, for `--json`.
    fn json_report<'a>(
        &'a self,
        cases: &'a [Case],
        runs: &'a [RunResult],
        pin: bool,
        (server_cc, client_cc): (&'a str, &'a str),
    ) -> JsonReport<'a> {
        let per_case = |c: &'a Case| {
            let mb = |server| {
                self.seeds
                    .iter()
                    .map(|&s| good_mbps(runs, c.key, s, server))
                    .collect()
            };
            let ratios = ratios(runs, c.key, &self.seeds);
            JsonCase {
                case: c,
                linux_mbytes_per_s: mb(Server::Linux),
                corestack_mbytes_per_s: mb(Server::Corestack),
                median_ratio: median_ratio(&ratios),
                ratios,
            }
        };
        JsonReport {
            mib: self.mib,
            seeds: &self.seeds,
            stall_secs: self.stall_secs,
            cap_secs: self.cap_secs,
            server_cc,
            client_cc,
            client_cpu: pin.then_some(CLIENT_CPU),
            server_cpu: pin.then_some(SERVER_CPU),
            bridge_cpu: if self.bridge_cpu == BridgeCpu::Client && pin {
                CLIENT_CPU
            } else {
                "not pinned"
            },
            cases: cases.iter().map(per_case).collect(),
            runs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished run of the case keyed `key`: 1 s, `mb` MB/s.
    fn run(key: &str, seed: u64, server: Server, outcome: Outcome, mb: f64) -> RunResult {
        let case = CASES
            .iter()
            .find(|c| c.key == key)
            .expect("a case of the table");
        RunResult {
            outcome,
            mbytes_per_s: Some(mb),
            seconds: 1.0,
            ..RunResult::new(case, seed, server)
        }
    }

    /// One server's run in a row of [`seeds`]: (outcome, MB/s).
    type Side = (Outcome, f64);

    /// The runs of `case`: per row (seed, Linux's (outcome, MB/s), corestack's), the Linux
    /// run, then the corestack one.
    fn seeds(case: &'static str, rows: &[(u64, Side, Side)]) -> Vec<RunResult> {
        rows.iter()
            .flat_map(|&(seed, linux, core)| {
                [
                    run(case, seed, Server::Linux, linux.0, linux.1),
                    run(case, seed, Server::Corestack, core.0, core.1),
                ]
            })
            .collect()
    }

    #[test]
    fn repairs_table_shows_each_servers_client_counters_per_seed() {
        let mut a = run("loss1", 5, Server::Linux, Outcome::Ok, 90.0);
        a.client_repairs = [
            ("RetransSegs", 61),
            ("TCPLossProbes", 2),
            ("TCPTimeouts", 0),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
        let mut b = run("loss1", 5, Server::Corestack, Outcome::Ok, 80.0);
        b.client_repairs = [("RetransSegs", 70), ("TCPTimeouts", 1)]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        let loss1 = select_cases("loss1").unwrap();
        let t = repairs_table(&loss1, &[5, 7], &[a, b]);
        let row = t.lines().find(|l| l.starts_with("loss 1 %")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().skip(3).collect();
        assert_eq!(cells, ["61/2/0", "-", "70/0/1", "-"]);
    }

    #[test]
    fn exit_counters_are_read_after_the_statistics_line() {
        let lines: Vec<String> = [
            "listening on 10.0.0.1:7",
            "rx_frames 12",
            "corestack statistics:",
            "rx_frames                    300",
            "tcp_retransmits              4",
            "not a counter line here",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = exit_counters(&lines);
        assert_eq!(c.len(), 2);
        assert_eq!(c["rx_frames"], 300);
        assert_eq!(c["tcp_retransmits"], 4);
    }

    #[test]
    fn select_cases_by_key_or_name_in_table_order() {
        let keys =
            |arg: &str| -> Vec<&str> { select_cases(arg).unwrap().iter().map(|c| c.key).collect() };
        assert_eq!(keys("all").len(), CASES.len());
        assert_eq!(keys("loss 1%,clean"), ["clean", "loss1"]);
        assert_eq!(keys("Loss 0.1 %, loss1, loss1"), ["loss0.1", "loss1"]);
        assert_eq!(keys("10 ms + loss 1 %"), ["delay10-loss1"]);
        let err = select_cases("clean,nosuch").unwrap_err().to_string();
        assert!(
            err.contains("nosuch") && err.contains("delay2-reorder5"),
            "{err}"
        );
        assert!(select_cases(",").is_err());
    }

    #[test]
    fn impair_args_carry_only_what_the_case_sets_and_the_seed() {
        let all = CASES.iter().find(|c| c.key == "all-at-once").unwrap();
        assert_eq!(
            all.impair_args(7).join(" "),
            "--loss 1 --reorder 5 --duplicate 1 --corrupt 0.1 --delay-us 10000 --seed 7"
        );
        assert_eq!(CLEAN.impair_args(5).join(" "), "--seed 5");
    }

    #[test]
    fn ratios_and_median_skip_seeds_without_two_good_runs() {
        let ok = Outcome::Ok;
        let runs = seeds(
            "loss1",
            &[
                (5, (ok, 80.0), (ok, 40.0)),
                (7, (ok, 50.0), (Outcome::Stalled, 0.0)),
                (11, (ok, 10.0), (ok, 20.0)),
            ],
        );
        let r = ratios(&runs, "loss1", &[5, 7, 11]);
        assert_eq!(r, [Some(0.5), None, Some(2.0)]);
        assert_eq!(median_ratio(&r), Some(1.25));
        assert_eq!(median_ratio(&[None]), None);
    }

    #[test]
    fn table_pads_columns_and_marks_bad_runs() {
        let cases = [CLEAN, CASES[2]];
        let ok = Outcome::Ok;
        let clean = [(5, (ok, 84.2), (ok, 77.0)), (7, (ok, 7.44), (ok, 8.2))];
        let loss1 = [
            (5, (ok, 74.0), (Outcome::Stalled, 0.0)),
            (7, (Outcome::Failed, 0.0), (Outcome::Mismatch, 30.0)),
        ];
        let runs = [seeds("clean", &clean), seeds("loss1", &loss1)].concat();
        let t = table(&cases, &[5, 7], &runs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines,
            [
                "case (bridge seeds 5, 7)   Linux MB/s   corestack MB/s   corestack/Linux (per seed)   median",
                "clean                      84 / 7.4     77 / 8.2         0.91 1.10                    1.01",
                "loss 1 %                   74 / fail    stall / badsha   - -                          -",
            ]
        );
    }

    #[test]
    fn judge_reads_the_final_report() {
        let mut r = RunResult::new(&CLEAN, 5, Server::Linux);
        let ok = serde_json::json!({"bytes_sent": 8, "bytes_received": 8, "equal": true,
            "sent_sha256": "aa", "received_sha256": "aa", "mbytes_per_s": 12.5});
        r.judge(Some(&ok), "");
        assert_eq!(
            (r.outcome, r.mbytes_per_s, r.bytes_received),
            (Outcome::Ok, Some(12.5), 8)
        );

        let mut r = RunResult::new(&CLEAN, 5, Server::Corestack);
        let bad = serde_json::json!({"bytes_sent": 8, "bytes_received": 8, "equal": false,
            "sent_sha256": "aa", "received_sha256": "bb", "mbytes_per_s": 12.5});
        r.judge(Some(&bad), "error: the echoed data differs");
        assert_eq!((r.outcome, r.mbytes_per_s), (Outcome::Mismatch, None));
        assert!(
            r.detail.contains("sha256 aa sent, bb received"),
            "{}",
            r.detail
        );

        let mut r = RunResult::new(&CLEAN, 5, Server::Corestack);
        r.judge(
            None,
            "error: receiving after 100 bytes: Connection reset by peer",
        );
        assert_eq!(r.outcome, Outcome::Failed);
        assert!(
            r.detail.ends_with("Connection reset by peer"),
            "{}",
            r.detail
        );
    }

    #[test]
    fn failure_block_has_detail_bridge_and_both_sides() {
        let mut r = run("loss5", 7, Server::Corestack, Outcome::Stalled, 0.0);
        r.detail = "no byte sent or received for 10 s".to_string();
        r.bridge = Some(BridgeTotals {
            lost: 3,
            ..BridgeTotals::default()
        });
        r.state = Some(TcpState {
            client: "ESTAB 0 100\n\t cubic rto:800".to_string(),
            server: String::new(),
            server_counters: "tcp_retransmits 4".to_string(),
        });
        let b = failure_block(&CASES[3], &r);
        assert!(
            b.starts_with("stall: loss 5 %, bridge seed 7, corestack server: no byte"),
            "{b}"
        );
        assert!(b.contains("  bridge: lost 3,"), "{b}");
        assert!(
            b.contains("\n    ESTAB 0 100\n    \t cubic rto:800\n"),
            "{b}"
        );
        assert!(b.contains("corestack ss --pid):\n    (nothing)\n"), "{b}");
        assert!(b.contains("\n    tcp_retransmits 4"), "{b}");
    }
}
