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
//! `--family 6` runs the same matrix over IPv6: IPv6 goes on for the kernel's ends only (`ck`
//! fd00:78::1, `sk` fd00:78::2, no DAD, no router solicitation, permanent neighbour entries),
//! corestack gets fd00:78::4 beside its IPv4 address (its echo then listens on `[::]`) and
//! resolves the client with Neighbor Discovery; the client connects to `[fd00:78::2]` or
//! `[fd00:78::4]`. The bridge forwards every ethertype alike, so IPv6 frames meet the same
//! impairments (a corrupted bit in an IPv6 frame is caught by the TCP checksum over the IPv6
//! pseudo-header, RFC 8200 §8.1, as the IPv4 header checksum and TCP's catch it in IPv4).
//! `--family both` runs each case and seed over IPv4, then IPv6, and prints one table with a
//! row per case and family, so that the ratios of both families come from one run.
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
//!
//! ```text
//!  cases   the impairment cases and `--cases`
//!  run     one run: its server, a new bridge, the client watched; what it found (RunResult)
//!  report  the table, the client's repairs, the failure blocks, `--json`, `--plot`
//! ```

mod cases;
mod report;
mod run;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::harness::children::LogDir;
use crate::harness::matrix::{Family, Lab, Topology};
use cmdline::{core_cc_arg, stop_flag};

pub use cases::{select_cases, Case, CASES};
pub use run::{Outcome, RunResult, Server, TcpState};

use report::{cell, plot_bars, rows};
use run::Ctx;

/// `bench echo-matrix` options.
#[derive(Args, Debug)]
pub struct EchoMatrix {
    /// MiB the client sends (and reads back) per run.
    #[arg(long, default_value_t = 8)]
    mib: u64,
    /// Seeds of the impairment bridge, comma-separated (1 to 32): every case runs once per
    /// seed and server. Without it, `--seeds-count` fresh random seeds are drawn for this run
    /// (printed at the start, in the table and in the JSON, to be given here again).
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// How many random bridge seeds to draw when `--seeds` is not given (1 to 32, default 3).
    #[arg(long, value_name = "N")]
    seeds_count: Option<usize>,
    /// Whether the seeds were drawn at random (no `--seeds`); set by `run`.
    #[arg(skip)]
    seeds_drawn: bool,
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
    /// The address family of the connections: 4, 6 (the client connects to the servers'
    /// IPv6 addresses, fd00:78::2 and fd00:78::4), or both (every case and seed over IPv4,
    /// then IPv6; one table, a row per case and family).
    #[arg(long, value_enum, default_value = "4")]
    family: Family,
}

/// The most seeds one run takes (`--seeds`, `--seeds-count`).
const MAX_SEEDS: usize = 32;
/// Random seeds drawn without `--seeds` or `--seeds-count`.
const DEFAULT_SEEDS_COUNT: usize = 3;

/// `n` distinct random bridge seeds (1 to 999 999, short enough to type back with `--seeds`),
/// from the thread's OS-seeded generator: a new set every run.
fn draw_seeds(n: usize) -> Vec<u64> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let mut seeds = Vec::with_capacity(n);
    while seeds.len() < n {
        let s = rng.gen_range(1..1_000_000u64);
        if !seeds.contains(&s) {
            seeds.push(s);
        }
    }
    seeds
}

/// The seeds joined by `sep`.
fn seed_list(seeds: &[u64], sep: &str) -> String {
    let v: Vec<String> = seeds.iter().map(u64::to_string).collect();
    v.join(sep)
}

/// Where the impairment bridge runs (`--bridge-cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BridgeCpu {
    /// Pinned to the client's CPU.
    Client,
    /// Not pinned.
    Any,
}

impl EchoMatrix {
    pub fn run(mut self) -> Result<()> {
        let cases = self.check()?;
        if self.seeds.is_empty() {
            self.seeds = draw_seeds(self.seeds_count.unwrap_or(DEFAULT_SEEDS_COUNT));
            self.seeds_drawn = true;
        }
        eprintln!(
            "bridge seeds: {} ({}; repeat this run with --seeds {})",
            seed_list(&self.seeds, ", "),
            if self.seeds_drawn {
                "drawn at random for this run"
            } else {
                "given with --seeds"
            },
            seed_list(&self.seeds, ",")
        );
        let stop = stop_flag()?;
        netns::check_privileges()?;
        let exe = crate::harness::this_program()?;
        let logs = LogDir::new("echo-matrix")?;
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        eprintln!(
            "creating namespaces (client, mid, server), veth pairs and bridges (offloads off)"
        );
        let topo = Topology::build("em", false)?;
        topo.static_neighbours()?;
        if self.family.has_v6() {
            topo.enable_ipv6()?;
        }
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
        let families = self.family.each();
        let total = cases.len() * self.seeds.len() * 2 * families.len();
        for case in &cases {
            for &seed in &self.seeds {
                for &family in families {
                    for server in [Server::Linux, Server::Corestack] {
                        let r = ctx.run(case, seed, server, family)?;
                        let how = match r.outcome {
                            Outcome::Ok => " MB/s".to_string(),
                            _ => format!(" ({})", r.detail),
                        };
                        eprintln!(
                            "[{}/{total}] {}, {}, seed {seed}, {}: {}{how}",
                            runs.len() + 1,
                            case.name,
                            family.name(),
                            server.name(),
                            cell(Some(&r)),
                        );
                        runs.push(r);
                    }
                }
            }
        }
        let rows = rows(&cases, families);
        let pin = ctx.lab.pinned;
        drop(topo);

        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        let ccs = (server_cc.as_str(), client_cc.as_str());
        self.print(&rows, &runs, pin, &load.join(" "), ccs);
        if let Some(path) = &self.json {
            let report = self.json_report(&rows, &runs, pin, ccs);
            let text = serde_json::to_string_pretty(&report)?;
            std::fs::write(path, text + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &self.plot {
            let (cats, bars) = plot_bars(&rows, &self.seeds, &runs);
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
        if !self.seeds.is_empty() && self.seeds_count.is_some() {
            bail!("--seeds and --seeds-count exclude each other: give the seeds, or how many to draw at random");
        }
        if self.seeds.len() > MAX_SEEDS {
            bail!("--seeds takes 1 to {MAX_SEEDS} seeds, e.g. 5,7,11");
        }
        if let Some(n) = self.seeds_count {
            if !(1..=MAX_SEEDS).contains(&n) {
                bail!("--seeds-count must be 1 to {MAX_SEEDS}");
            }
        }
        if !(1.0..=600.0).contains(&self.stall_secs) {
            bail!("--stall-secs must be in [1, 600]");
        }
        if !(self.cap_secs >= self.stall_secs && self.cap_secs <= 3000.0) {
            bail!("--cap-secs must be in [--stall-secs, 3000]");
        }
        select_cases(&self.cases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        m: EchoMatrix,
    }

    /// The options as parsed from `args`, then checked: the error's text, or the seeds given.
    fn check(args: &str) -> Result<Vec<u64>, String> {
        let argv = std::iter::once("em").chain(args.split_whitespace());
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        cli.m.check().map_err(|e| e.to_string())?;
        Ok(cli.m.seeds)
    }

    #[test]
    fn seeds_and_seeds_count_are_checked() {
        assert_eq!(check(""), Ok(vec![]));
        assert_eq!(check("--seeds 5,7,11"), Ok(vec![5, 7, 11]));
        assert!(check("--seeds-count 1").is_ok());
        assert!(check("--seeds-count 32").is_ok());
        let list: Vec<String> = (1..=32).map(|s| s.to_string()).collect();
        assert_eq!(
            check(&format!("--seeds {}", list.join(","))).unwrap().len(),
            32
        );
        let too_many: Vec<String> = (1..=33).map(|s| s.to_string()).collect();
        let err = check(&format!("--seeds {}", too_many.join(","))).unwrap_err();
        assert!(err.contains("1 to 32"), "{err}");
        for n in ["0", "33"] {
            let err = check(&format!("--seeds-count {n}")).unwrap_err();
            assert!(err.contains("--seeds-count must be 1 to 32"), "{err}");
        }
        let err = check("--seeds 5 --seeds-count 2").unwrap_err();
        assert!(
            err.contains("exclude each other") && !err.contains('\n'),
            "{err}"
        );
    }

    #[test]
    fn drawn_seeds_are_distinct_and_short() {
        let s = draw_seeds(32);
        assert_eq!(s.len(), 32);
        let mut d = s.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 32);
        assert!(s.iter().all(|&x| (1..1_000_000).contains(&x)));
        assert_eq!(seed_list(&[5, 7], ","), "5,7");
    }
}
