//! What `bench echo-matrix` prints and writes: the table of MB/s and corestack/Linux ratios,
//! the Linux client's repairs, one block per run that did not end well, the `--json` report and
//! the `--plot` bars.

use std::fmt::Write as _;

use serde::Serialize;

use super::cases::{Case, CLEAN};
use super::run::{Outcome, RunResult, Server};
use super::{BridgeCpu, EchoMatrix};
use crate::harness::matrix::{Family, CLIENT_CPU, SERVER_CPU};
use crate::report::{columns, indent, median};

/// MB/s as the table shows it: no decimals from 10 up, one below.
fn mbps(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A run's table cell: its MB/s, or how it ended; `?` when missing.
pub(super) fn cell(r: Option<&RunResult>) -> String {
    match r {
        None => "?".to_string(),
        Some(r) => match (r.outcome, r.mbytes_per_s) {
            (Outcome::Ok, Some(v)) => mbps(v),
            (o, _) => o.cell().to_string(),
        },
    }
}

/// A row of the tables: a case over one family.
#[derive(Clone, Copy)]
pub(super) struct Row<'a> {
    pub case: &'a Case,
    pub family: Family,
}

/// The rows: each case, and under it each of `families` (IPv4 first).
pub(super) fn rows<'a>(cases: &'a [Case], families: &[Family]) -> Vec<Row<'a>> {
    cases
        .iter()
        .flat_map(|case| families.iter().map(move |&family| Row { case, family }))
        .collect()
}

impl Row<'_> {
    /// The row's name: the case's, with its family when several are run.
    fn name(&self, several: bool) -> String {
        if several {
            format!("{}, {}", self.case.name, self.family.name())
        } else {
            self.case.name.to_string()
        }
    }
}

/// corestack/Linux per seed (None unless both runs are good), in `seeds` order.
fn ratios(runs: &[RunResult], row: Row, seeds: &[u64]) -> Vec<Option<f64>> {
    seeds
        .iter()
        .map(|&seed| {
            let good = |server| good_mbps(runs, row, seed, server);
            match (good(Server::Linux), good(Server::Corestack)) {
                (Some(l), Some(c)) if l > 0.0 => Some(c / l),
                _ => None,
            }
        })
        .collect()
}

fn find<'a>(runs: &'a [RunResult], row: Row, seed: u64, server: Server) -> Option<&'a RunResult> {
    runs.iter().find(|r| {
        r.case == row.case.key && r.family == row.family && r.seed == seed && r.server == server
    })
}

/// The MB/s of a run that came back whole and equal.
fn good_mbps(runs: &[RunResult], row: Row, seed: u64, server: Server) -> Option<f64> {
    find(runs, row, seed, server)
        .filter(|r| r.outcome == Outcome::Ok)
        .and_then(|r| r.mbytes_per_s)
}

/// The median of the ratios there are.
fn median_ratio(ratios: &[Option<f64>]) -> Option<f64> {
    let v: Vec<f64> = ratios.iter().flatten().copied().collect();
    (!v.is_empty()).then(|| median(&v))
}

/// The plot's bars: per row, the median MB/s over the seeds of the runs that completed, for
/// Linux and for corestack (NaN: none completed).
pub(super) fn plot_bars(
    rows: &[Row],
    seeds: &[u64],
    runs: &[RunResult],
) -> (Vec<String>, Vec<(String, Vec<f64>)>) {
    let several = several(rows);
    let cats = rows.iter().map(|r| r.name(several)).collect();
    let bars = [("Linux", Server::Linux), ("corestack", Server::Corestack)]
        .into_iter()
        .map(|(name, server)| {
            let values = rows
                .iter()
                .map(|&row| {
                    let v: Vec<f64> = seeds
                        .iter()
                        .filter_map(|&s| good_mbps(runs, row, s, server))
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

/// Whether the rows are of more than one family.
fn several(rows: &[Row]) -> bool {
    rows.iter().any(|r| r.family != rows[0].family)
}

/// The table: a header and one row per case and family, columns padded to their widest cell.
fn table(rows_in: &[Row], seeds: &[u64], runs: &[RunResult]) -> String {
    let several = several(rows_in);
    let seed_list: Vec<String> = seeds.iter().map(u64::to_string).collect();
    let mut rows = vec![[
        format!("case (bridge seeds {})", seed_list.join(", ")),
        "Linux MB/s".to_string(),
        "corestack MB/s".to_string(),
        "corestack/Linux (per seed)".to_string(),
        "median".to_string(),
    ]];
    for &row in rows_in {
        let cells = |server| {
            seeds
                .iter()
                .map(|&s| cell(find(runs, row, s, server)))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        let ratios = ratios(runs, row, seeds);
        let per_seed: Vec<String> = ratios
            .iter()
            .map(|r| r.map_or("-".to_string(), |r| format!("{r:.2}")))
            .collect();
        rows.push([
            row.name(several),
            cells(Server::Linux),
            cells(Server::Corestack),
            per_seed.join(" "),
            median_ratio(&ratios).map_or("-".to_string(), |m| format!("{m:.2}")),
        ]);
    }
    columns(&rows)
}

/// The runs below half of Linux's median for their row, per server: how many, and how many
/// of them had a retransmission timeout (the Linux client's `TCPTimeouts`, or corestack's
/// `tcp_rto_timeouts`; the Linux server's own are not counted), which costs 1 s in a
/// handshake and at least 200 ms after it. Runs that did not complete count as slow.
fn slow_runs(rows_in: &[Row], seeds: &[u64], runs: &[RunResult]) -> String {
    let mut n = [0usize; 2];
    let mut slow = [0usize; 2];
    let mut timed_out = [0usize; 2];
    for &row in rows_in {
        let linux: Vec<f64> = seeds
            .iter()
            .filter_map(|&s| good_mbps(runs, row, s, Server::Linux))
            .collect();
        if linux.is_empty() {
            continue;
        }
        let half = median(&linux) / 2.0;
        for (i, server) in [Server::Linux, Server::Corestack].into_iter().enumerate() {
            for &seed in seeds {
                let Some(r) = find(runs, row, seed, server) else {
                    continue;
                };
                n[i] += 1;
                if good_mbps(runs, row, seed, server).is_some_and(|v| v >= half) {
                    continue;
                }
                slow[i] += 1;
                let rto = r.client_repairs.get("TCPTimeouts").copied().unwrap_or(0)
                    + r.server_counters
                        .get("tcp_rto_timeouts")
                        .copied()
                        .unwrap_or(0);
                timed_out[i] += usize::from(rto > 0);
            }
        }
    }
    format!(
        "runs below half of Linux's median for their case: Linux {} of {}, corestack {} of {}; of those with a retransmission timeout (the client's, or corestack's server's): Linux {}, corestack {}\n",
        slow[0], n[0], slow[1], n[1], timed_out[0], timed_out[1]
    )
}

/// The Linux client's repairs per case and seed against each server: retransmitted
/// segments / tail loss probes / RTO expiries (what it had to do for the data it sent).
fn repairs_table(rows_in: &[Row], seeds: &[u64], runs: &[RunResult]) -> String {
    let several = several(rows_in);
    let cell = |row: Row, server: Server| {
        seeds
            .iter()
            .map(|&seed| match find(runs, row, seed, server) {
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
    let rows: Vec<[String; 3]> = rows_in
        .iter()
        .map(|&r| {
            [
                r.name(several),
                cell(r, Server::Linux),
                cell(r, Server::Corestack),
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

/// One block for a run that did not end well: what happened, the bridge's counters, both
/// sides' state.
fn failure_block(case: &Case, r: &RunResult) -> String {
    let mut out = format!(
        "{}: {}, {}, bridge seed {}, {} server: {}\n",
        r.outcome.cell(),
        case.name,
        r.family.name(),
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
pub(super) struct JsonReport<'a> {
    mib: u64,
    seeds: &'a [u64],
    /// Whether `seeds` were drawn at random for this run (no `--seeds`).
    seeds_random: bool,
    stall_secs: f64,
    cap_secs: f64,
    server_cc: &'a str,
    client_cc: &'a str,
    client_cpu: Option<&'a str>,
    server_cpu: Option<&'a str>,
    bridge_cpu: &'a str,
    family: Family,
    cases: Vec<JsonCase<'a>>,
    runs: &'a [RunResult],
}

#[derive(Serialize)]
struct JsonCase<'a> {
    case: &'a Case,
    family: Family,
    linux_mbytes_per_s: Vec<Option<f64>>,
    corestack_mbytes_per_s: Vec<Option<f64>>,
    ratios: Vec<Option<f64>>,
    median_ratio: Option<f64>,
}

impl EchoMatrix {
    /// What was run, the table, then one block per run that did not end well.
    /// `ccs`: the servers' and the client's congestion control.
    pub(super) fn print(
        &self,
        rows: &[Row],
        runs: &[RunResult],
        pin: bool,
        load: &str,
        ccs: (&str, &str),
    ) {
        let (server_cc, client_cc) = ccs;
        println!();
        println!(
            "corestack bench echo-matrix: a Linux client sends {} MiB to an echo server while it reads the echo back (both directions loaded at once); sha256 compared every run",
            self.mib
        );
        println!("MB/s = bytes echoed back (10^6) / seconds from connect to the last byte; one run per server, case and bridge seed, one run at a time");
        println!("path: client ns -> br0 -> corestack impair (user-space AF_PACKET bridge in ns mid, both directions impaired alike, seeded, restarted every run) -> br0 -> server ns; veth, offloads off; delays are one way per direction (RTT + twice the delay)");
        println!(
            "family: {}{}",
            self.family.name(),
            if self.family.has_v6() {
                " (IPv6: 10.78.1.0/24's servers at fd00:78::2 (Linux) and fd00:78::4 (corestack, a [::] listener), MSS 1440 where IPv4 has 1460)"
            } else {
                ""
            }
        );
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
        let seeds: Vec<String> = self.seeds.iter().map(u64::to_string).collect();
        println!(
            "bridge seeds: {} ({}; this run again: --seeds {})",
            seeds.join(", "),
            if self.seeds_drawn {
                "drawn at random for this run"
            } else {
                "given with --seeds"
            },
            seeds.join(",")
        );
        println!();
        print!("{}", table(rows, &self.seeds, runs));
        println!();
        println!("stall: stopped, no progress; cap: stopped at the cap; badsha: echo not byte-exact; fail: the client or a server failed; ratios and medians only over seeds where both runs completed");
        println!();
        print!("{}", repairs_table(rows, &self.seeds, runs));
        println!();
        print!("{}", slow_runs(rows, &self.seeds, runs));
        let beyond: Vec<String> = runs
            .iter()
            .filter_map(|r| {
                let b = r.bridge?;
                (b.queue_full + b.socket_drops > 0).then(|| {
                    format!(
                        "{} {} seed {} {}: queue full {}, socket drops {}",
                        r.case,
                        r.family.name(),
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
            let case = rows
                .iter()
                .find(|row| row.case.key == r.case)
                .map_or(&CLEAN, |row| row.case);
            println!();
            print!("{}", failure_block(case, r));
        }
    }

    /// Everything, for `--json`.
    pub(super) fn json_report<'a>(
        &'a self,
        rows: &[Row<'a>],
        runs: &'a [RunResult],
        pin: bool,
        (server_cc, client_cc): (&'a str, &'a str),
    ) -> JsonReport<'a> {
        let per_case = |&row: &Row<'a>| {
            let mb = |server| {
                self.seeds
                    .iter()
                    .map(|&s| good_mbps(runs, row, s, server))
                    .collect()
            };
            let ratios = ratios(runs, row, &self.seeds);
            JsonCase {
                case: row.case,
                family: row.family,
                linux_mbytes_per_s: mb(Server::Linux),
                corestack_mbytes_per_s: mb(Server::Corestack),
                median_ratio: median_ratio(&ratios),
                ratios,
            }
        };
        JsonReport {
            mib: self.mib,
            seeds: &self.seeds,
            seeds_random: self.seeds_drawn,
            stall_secs: self.stall_secs,
            cap_secs: self.cap_secs,
            server_cc,
            client_cc,
            client_cpu: pin.then_some(CLIENT_CPU.as_str()),
            server_cpu: pin.then_some(SERVER_CPU.as_str()),
            bridge_cpu: if self.bridge_cpu == BridgeCpu::Client && pin {
                CLIENT_CPU.as_str()
            } else {
                "not pinned"
            },
            family: self.family,
            cases: rows.iter().map(per_case).collect(),
            runs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::echo_matrix::cases::{select_cases, CASES};
    use crate::echo_matrix::run::TcpState;
    use crate::harness::matrix::BridgeTotals;

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
            ..RunResult::new(case, seed, server, Family::V4)
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
        let t = repairs_table(&rows(&loss1, &[Family::V4]), &[5, 7], &[a, b]);
        let row = t.lines().find(|l| l.starts_with("loss 1 %")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().skip(3).collect();
        assert_eq!(cells, ["61/2/0", "-", "70/0/1", "-"]);
    }

    #[test]
    fn slow_runs_count_runs_below_half_of_linuxs_median_and_their_timeouts() {
        let ok = Outcome::Ok;
        // Linux's median over the three seeds: 80 MB/s, so below 40 is slow.
        let mut runs = seeds(
            "loss1",
            &[
                (5, (ok, 80.0), (ok, 39.0)),
                (7, (ok, 30.0), (Outcome::Stalled, 0.0)),
                (11, (ok, 90.0), (ok, 85.0)),
            ],
        );
        runs[1]
            .server_counters
            .insert("tcp_rto_timeouts".to_string(), 1);
        runs[2].client_repairs.insert("TCPTimeouts".to_string(), 1);
        let loss1 = select_cases("loss1").unwrap();
        let t = slow_runs(&rows(&loss1, &[Family::V4]), &[5, 7, 11], &runs);
        assert!(
            t.contains("Linux 1 of 3, corestack 2 of 3") && t.ends_with("Linux 1, corestack 1\n"),
            "{t}"
        );
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
        let loss1 = select_cases("loss1").unwrap();
        let r = ratios(&runs, rows(&loss1, &[Family::V4])[0], &[5, 7, 11]);
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
        let t = table(&rows(&cases, &[Family::V4]), &[5, 7], &runs);
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
            b.starts_with("stall: loss 5 %, IPv4, bridge seed 7, corestack server: no byte"),
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

    #[test]
    fn both_families_give_a_row_each_per_case_with_its_own_ratios() {
        let ok = Outcome::Ok;
        let cases = [CLEAN];
        let mut runs = seeds("clean", &[(5, (ok, 80.0), (ok, 60.0))]);
        let mut v6 = seeds("clean", &[(5, (ok, 70.0), (ok, 70.0))]);
        for r in &mut v6 {
            r.family = Family::V6;
        }
        runs.extend(v6);
        let t = table(&rows(&cases, &[Family::V4, Family::V6]), &[5], &runs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        let cells = |l: &str| -> Vec<String> {
            l.split("   ")
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect()
        };
        assert_eq!(cells(lines[1]), ["clean, IPv4", "80", "60", "0.75", "0.75"]);
        assert_eq!(cells(lines[2]), ["clean, IPv6", "70", "70", "1.00", "1.00"]);
        // One family: the case's name alone, and only that family's runs.
        let t = table(&rows(&cases, &[Family::V6]), &[5], &runs);
        assert!(t.lines().nth(1).unwrap().starts_with("clean   "), "{t}");
        assert!(t.contains("1.00"), "{t}");
    }
}
