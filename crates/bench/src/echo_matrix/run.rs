//! One run of `bench echo-matrix`: a case, a bridge seed and a server; its server, a new
//! bridge with the seed, the Linux client watched for progress, and both sides' TCP state when
//! it stalls, is capped or fails.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use netns::{ChildGuard, NextLine};
use serde::Serialize;
use serde_json::Value;

use super::cases::Case;
use crate::harness::children::last_line;
use crate::harness::matrix::{BridgeTotals, Family, Lab, CORE_SERVER6, PORT};
use cmdline::{one_line, Interrupted};

/// The client's progress line interval, ms.
const PROGRESS_MS: &str = "250";
/// How much longer than the cap the client itself may run (it is stopped at the cap anyway).
const CLIENT_SLACK_SECS: f64 = 30.0;

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
    pub(super) fn name(self) -> &'static str {
        match self {
            Server::Linux => "Linux",
            Server::Corestack => "corestack",
        }
    }

    /// The server's address in `family` (IPv4 or IPv6).
    fn ip(self, family: Family) -> &'static str {
        match self {
            Server::Linux => family.linux_server(),
            Server::Corestack => family.core_server(),
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
    pub(super) fn cell(self) -> &'static str {
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
    /// The address family of the connection (IPv4 or IPv6).
    pub family: Family,
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
    pub(super) fn new(case: &Case, seed: u64, server: Server, family: Family) -> RunResult {
        RunResult {
            case: case.key,
            seed,
            server,
            family,
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
pub(super) struct Ctx<'a> {
    /// The namespaces, the logs, the stop flag.
    pub lab: Lab<'a>,
    /// Bytes the client sends (and reads back).
    pub bytes: u64,
    /// No byte sent or received for this long: stalled.
    pub stall: Duration,
    /// Stopped after this long whatever it does.
    pub cap: Duration,
    /// Congestion control of both servers (its Linux name).
    pub server_cc: &'a str,
    /// The same as corestack's `--cc` value.
    pub core_cc: &'static str,
    /// TCP_CONGESTION of the client.
    pub client_cc: &'a str,
    /// Where per-run captures go, if anywhere.
    pub pcap: Option<&'a Path>,
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

    /// Starts `server` in the server namespace and waits until it listens (on its address in
    /// `family`; corestack in IPv6 on `[::]`, with both its addresses).
    fn start_server(&self, server: Server, family: Family, log: &Path) -> Result<ChildGuard> {
        let ips = family.core_ips(
            &format!("{}/24", crate::harness::matrix::CORE_SERVER),
            &format!("{CORE_SERVER6}/64"),
        );
        let mut args = vec!["serve", "echo", "--port", PORT];
        match server {
            Server::Linux => args.extend_from_slice(&[
                "--kernel",
                "--ip",
                family.linux_server(),
                "--kernel-cc",
                self.server_cc,
            ]),
            Server::Corestack => {
                args.extend_from_slice(&["--iface", "sc", "--driver", "af_xdp"]);
                args.extend(ips.iter().map(String::as_str));
                args.extend_from_slice(&["--cc", self.core_cc]);
            }
        }
        self.lab
            .server(&args, log)
            .with_context(|| format!("starting the {} echo server", server.name()))
    }

    /// One run of `case` with bridge seed `seed` against `server` over `family`: its server, a
    /// new bridge with the seed, the client; then the bridge's totals.
    pub(super) fn run(
        &self,
        case: &Case,
        seed: u64,
        server: Server,
        family: Family,
    ) -> Result<RunResult> {
        let v = if family == Family::V6 { "-v6" } else { "" };
        let tag = format!("{}-{seed}-{}{v}", case.key, server.name());
        let mut result = RunResult::new(case, seed, server, family);
        let not_interrupted = |e: anyhow::Error, result: &mut RunResult| {
            if e.is::<Interrupted>() {
                return Err(e);
            }
            result.detail = one_line(&e);
            Ok(())
        };
        let server_log = self.lab.logs.file(&format!("{tag}-server.log"));
        let mut srv = match self.start_server(server, family, &server_log) {
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
            result.state = Some(self.tcp_state(server, family, srv.id()));
        }
        // The client has ended or been stopped by now. A stopped client's socket lives on as an
        // orphan that keeps sending (its unsent data, window probes) and would meet the next
        // run's server: it goes now (`ss -K`, the kernel resets it).
        let dst = Family::target(server.ip(family), PORT);
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
        let target = Family::target(result.server.ip(result.family), PORT);
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
            result.state = Some(self.tcp_state(result.server, result.family, server_pid));
            child.terminate(Duration::from_secs(2))?;
        } else {
            child.wait_timeout(Duration::from_secs(5))?;
            result.judge(report.as_ref(), &last_line(log));
        }
        Ok(())
    }

    /// `ss -tino` of the client's connection to `server`, in the client namespace.
    fn client_ss(&self, server: Server, family: Family) -> String {
        let dst = Family::target(server.ip(family), PORT);
        output_or_error(self.lab.topo.client.run("ss", &["-tino", "dst", &dst]))
    }

    /// Both sides' TCP state now.
    fn tcp_state(&self, server: Server, family: Family, pid: u32) -> TcpState {
        let client = self.client_ss(server, family);
        match server {
            Server::Linux => {
                let src = Family::target(family.linux_server(), PORT);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::echo_matrix::cases::CLEAN;

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
    fn judge_reads_the_final_report() {
        let mut r = RunResult::new(&CLEAN, 5, Server::Linux, Family::V4);
        let ok = serde_json::json!({"bytes_sent": 8, "bytes_received": 8, "equal": true,
            "sent_sha256": "aa", "received_sha256": "aa", "mbytes_per_s": 12.5});
        r.judge(Some(&ok), "");
        assert_eq!(
            (r.outcome, r.mbytes_per_s, r.bytes_received),
            (Outcome::Ok, Some(12.5), 8)
        );

        let mut r = RunResult::new(&CLEAN, 5, Server::Corestack, Family::V4);
        let bad = serde_json::json!({"bytes_sent": 8, "bytes_received": 8, "equal": false,
            "sent_sha256": "aa", "received_sha256": "bb", "mbytes_per_s": 12.5});
        r.judge(Some(&bad), "error: the echoed data differs");
        assert_eq!((r.outcome, r.mbytes_per_s), (Outcome::Mismatch, None));
        assert!(
            r.detail.contains("sha256 aa sent, bb received"),
            "{}",
            r.detail
        );

        let mut r = RunResult::new(&CLEAN, 5, Server::Corestack, Family::V4);
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
}
