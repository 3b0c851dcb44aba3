//! `corestack stat`: the counters of running corestack engines, read from
//! their shared statistics segments without stopping them (like `nstat`);
//! for a `corestack run` daemon, also one line per application (its sockets,
//! bytes and commands, from the connection table `ss.rs` reads).
//!
//! A process with one engine prints `name value` lines; one with several
//! (`--cores N`) prints a column per engine (`e0`, `e1`, ...) and their
//! `total`, or one engine's counters alone with `--engine N`.

use anyhow::{bail, Context, Result};
use clap::Args;
use observe::stats_shm::{stats_dir, AppRow, ConnRow, ConnState};

use crate::observe::prometheus;
use crate::observe::tables::{printable, read_apps, read_conns, read_counters, EngineCounters};

/// `stat` options.
#[derive(Args, Debug)]
pub struct Stat {
    /// Only the engine of this process (default: every running one).
    #[arg(long)]
    pid: Option<u32>,
    /// Print every counter, zeros included.
    #[arg(long)]
    all: bool,
    /// Only engine N of a process with several (0 is the first): its
    /// counters alone, as a one-engine process prints them.
    #[arg(long, value_name = "N")]
    engine: Option<usize>,
    /// Print the counters and sockets as Prometheus text exposition (format 0.0.4).
    #[arg(long)]
    prometheus: bool,
}

impl Stat {
    pub fn run(self) -> Result<()> {
        let pids: Vec<u32> = match self.pid {
            Some(pid) => vec![pid],
            None => {
                let dir = stats_dir();
                let mut v: Vec<u32> = std::fs::read_dir(&dir)
                    .with_context(|| format!("reading {}", dir.display()))?
                    .filter_map(|e| {
                        let name = e.ok()?.file_name().into_string().ok()?;
                        name.strip_prefix("corestack-")?
                            .strip_suffix(".stats")?
                            .parse()
                            .ok()
                    })
                    .collect();
                v.sort_unstable();
                v
            }
        };
        let names: Vec<&'static str> = corestack::Stats::default().iter().map(|(n, _)| n).collect();
        let mut shown = 0;
        let mut snaps = Vec::new();
        for pid in pids {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                continue; // left behind by a process that died
            }
            let mut engines = match read_counters(pid) {
                Ok(e) => e,
                Err(e) if self.pid.is_some() => {
                    bail!("no corestack engine statistics for pid {pid}: {e:#}")
                }
                Err(e) => {
                    let gone = e
                        .downcast_ref::<std::io::Error>()
                        .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound);
                    if !gone {
                        eprintln!("pid {pid}: {e:#}");
                    }
                    continue;
                }
            };
            if let Some(n) = self.engine {
                let count = engines.len();
                engines.retain(|e| e.engine == n);
                if engines.is_empty() {
                    if self.pid.is_some() {
                        bail!(
                            "pid {pid} has no engine {n} ({count} engines: 0 to {})",
                            count - 1
                        );
                    }
                    continue;
                }
            }
            if self.prometheus {
                let several = engines.len() > 1;
                for e in engines {
                    let engine = several.then_some(e.engine);
                    snaps.push(prometheus::snapshot_from(pid, engine, e.values)?);
                }
                shown += 1;
                continue;
            }
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            match engines.as_slice() {
                [one] => {
                    let engine = match self.engine {
                        Some(n) => format!(", engine {n}"),
                        None => String::new(),
                    };
                    println!(
                        "pid {pid} {} ({}{engine})",
                        printable(comm.trim_end()),
                        one.path.display()
                    );
                    for (name, v) in names.iter().zip(&one.values) {
                        if self.all || *v != 0 {
                            println!("  {name:<28} {v}");
                        }
                    }
                }
                several => {
                    println!(
                        "pid {pid} {} ({}, {} engines)",
                        printable(comm.trim_end()),
                        several[0].path.display(),
                        several.len()
                    );
                    for line in engine_columns(&names, several, self.all) {
                        println!("{line}");
                    }
                }
            }
            if self.engine.is_none() {
                if let Some(apps) = read_apps(pid) {
                    print_apps(pid, &apps);
                }
            }
            shown += 1;
        }
        if shown == 0 {
            bail!(
                "no running corestack engine found (segments live in {})",
                stats_dir().display()
            );
        }
        if self.prometheus {
            print!("{}", prometheus::render(&snaps));
        }
        Ok(())
    }
}

/// The counters of several engines of one process, a column each (`e0`,
/// `e1`, ...) and their `total` (the sum of that one reading, wrapping at
/// 2^64): a title line, then one line per counter, the counters no engine
/// counted left out unless `all`.
fn engine_columns(names: &[&str], engines: &[EngineCounters], all: bool) -> Vec<String> {
    let mut title = format!("  {:<28}", "counter");
    for e in engines {
        title.push_str(&format!(" {:>12}", format!("e{}", e.engine)));
    }
    title.push_str(&format!(" {:>12}", "total"));
    let mut out = vec![title];
    for (i, name) in names.iter().enumerate() {
        let values: Vec<u64> = engines
            .iter()
            .map(|e| e.values.get(i).copied().unwrap_or(0))
            .collect();
        if !all && values.iter().all(|v| *v == 0) {
            continue;
        }
        let mut line = format!("  {name:<28}");
        for v in &values {
            line.push_str(&format!(" {v:>12}"));
        }
        let total = values.iter().fold(0u64, |a, v| a.wrapping_add(*v));
        line.push_str(&format!(" {total:>12}"));
        out.push(line);
    }
    out
}

/// Prints the application table of daemon `pid` (`corestack run`).
fn print_apps(pid: u32, apps: &[AppRow]) {
    let conns = match read_conns(pid) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("pid {pid}: {e:#}");
            None
        }
    };
    println!(
        "applications: {} (sockets, bytes and retransmits: their open sockets)",
        apps.len()
    );
    if apps.is_empty() {
        return;
    }
    for line in app_lines(apps, conns.as_ref().map(|t| t.rows.as_slice())) {
        println!("{line}");
    }
    if conns.is_some_and(|t| t.full) {
        println!("  (the connection table is full: some sockets are not counted)");
    }
}

/// The application table of `corestack stat`: one line per application
/// with its open sockets by state and their bytes and retransmissions
/// summed (from `conns`; None when the connection table is unavailable),
/// and the daemon's command counters.
fn app_lines(apps: &[AppRow], conns: Option<&[ConnRow]>) -> Vec<String> {
    let mut out = vec![format!(
        "  {:>5} {:>7} {:>6} {:<16} {:<28} {:>12} {:>12} {:>7} {:>9} {:>6} {:>6} {:>7}",
        "app",
        "pid",
        "uid",
        "name",
        "sockets",
        "bytes-in",
        "bytes-out",
        "retrans",
        "commands",
        "opens",
        "closes",
        "refused"
    )];
    for a in apps {
        let (sockets, bytes_in, bytes_out, retrans) = match conns {
            Some(rows) => {
                let mine: Vec<&ConnRow> = rows.iter().filter(|r| r.owner == a.assoc).collect();
                let sum = |f: fn(&ConnRow) -> u64| {
                    mine.iter()
                        .fold(0u64, |acc, r| acc.wrapping_add(f(r)))
                        .to_string()
                };
                (
                    sockets_by_state(&mine),
                    sum(|r| r.bytes_in),
                    sum(|r| r.bytes_out),
                    sum(|r| r.retransmits),
                )
            }
            None => ("?".into(), "?".into(), "?".into(), "?".into()),
        };
        out.push(format!(
            "  {:>5} {:>7} {:>6} {:<16} {:<28} {:>12} {:>12} {:>7} {:>9} {:>6} {:>6} {:>7}",
            a.assoc,
            a.pid,
            a.uid,
            printable(&a.name),
            sockets,
            bytes_in,
            bytes_out,
            retrans,
            a.commands,
            a.opens,
            a.closes,
            a.refused
        ));
    }
    out
}

/// "3 ESTAB, 1 LISTEN, 1 UDP": counts by state, established first, then
/// listeners, UDP, and the other TCP states in their order; "none" when
/// there are none.
fn sockets_by_state(rows: &[&ConnRow]) -> String {
    const FIRST: [&str; 3] = ["ESTAB", "LISTEN", "UDP"];
    // Every published state's name in code order: UDP, LISTEN, CLOSED, LISTEN, SYN-SENT, ...
    let named = (0..=u8::MAX)
        .map_while(|code| ConnState::try_from(code).ok())
        .map(ConnState::name);
    let mut order: Vec<&str> = FIRST.to_vec();
    for name in named.chain(["?"]) {
        if !order.contains(&name) {
            order.push(name);
        }
    }
    let parts: Vec<String> = order
        .into_iter()
        .filter_map(|name| {
            let n = rows.iter().filter(|r| r.state.name() == name).count();
            (n > 0).then(|| format!("{n} {name}"))
        })
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::tables::fixtures::{cells, conn};

    fn app(assoc: u32, name: &str) -> AppRow {
        AppRow {
            assoc,
            pid: 100 + assoc as i32,
            uid: 1000,
            name: name.into(),
            commands: 12,
            opens: 3,
            closes: 1,
            refused: 1,
        }
    }

    #[test]
    fn stat_apps_sum_only_their_own_sockets() {
        const ESTAB: u8 = 6;
        let conns = [
            conn(1, ESTAB, 100, 10, 2),
            conn(1, ESTAB, 200, 20, 0),
            conn(1, 1, 0, 0, 0),
            conn(1, 0, 40, 4, 0),
            conn(2, ESTAB, 5000, 500, 7),
            conn(0, ESTAB, 9999, 9999, 9),
        ];
        let lines = app_lines(
            &[app(1, "echo"), app(2, "nc"), app(3, "idle")],
            Some(&conns),
        );
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(lines[0].contains("bytes-in") && lines[0].contains("refused"));
        assert!(
            lines[1].contains("2 ESTAB, 1 LISTEN, 1 UDP"),
            "{}",
            lines[1]
        );
        // app pid uid name <sockets: 6 words> in out retrans cmds opens closes refused
        let c = cells(&lines[1]);
        assert_eq!(&c[..4], ["1", "101", "1000", "echo"]);
        assert_eq!(&c[10..], ["340", "34", "2", "12", "3", "1", "1"]);
        let c = cells(&lines[2]);
        assert_eq!(
            &c[3..],
            ["nc", "1", "ESTAB", "5000", "500", "7", "12", "3", "1", "1"]
        );
        let c = cells(&lines[3]);
        assert_eq!(&c[3..8], ["idle", "none", "0", "0", "0"]);
    }

    #[test]
    fn several_engines_print_a_column_each_and_their_total() {
        let e = |engine: usize, values: Vec<u64>| EngineCounters {
            engine,
            path: std::path::PathBuf::new(),
            values,
        };
        let names = ["rx_frames", "tx_frames", "handoff_rx"];
        let engines = [e(0, vec![3, 0, 0]), e(1, vec![4, 0, u64::MAX])];
        let lines = engine_columns(&names, &engines, false);
        assert_eq!(cells(&lines[0]), ["counter", "e0", "e1", "total"]);
        assert_eq!(lines.len(), 3, "tx_frames is 0 everywhere: {lines:#?}");
        assert_eq!(cells(&lines[1]), ["rx_frames", "3", "4", "7"]);
        let max = u64::MAX.to_string();
        assert_eq!(cells(&lines[2]), ["handoff_rx", "0", &max, &max]);
        let all = engine_columns(&names, &engines, true);
        assert_eq!(cells(&all[2]), ["tx_frames", "0", "0", "0"]);
    }

    #[test]
    fn stat_apps_without_connection_table_show_unknown_sockets() {
        let lines = app_lines(&[app(1, "echo")], None);
        assert_eq!(&cells(&lines[1])[3..8], ["echo", "?", "?", "?", "?"]);
    }

    #[test]
    fn stat_app_name_control_characters_are_not_printed() {
        let lines = app_lines(&[app(1, "evil\x1b[2J\n")], Some(&[]));
        assert!(!lines[1].chars().any(|c| c.is_control()), "{:?}", lines[1]);
        assert!(lines[1].contains("evil?[2J?"));
    }

    #[test]
    fn sockets_by_state_lists_established_listeners_udp_then_the_rest() {
        let rows = [
            conn(1, 2 + 10, 0, 0, 0), // TIME-WAIT
            conn(1, 0, 0, 0, 0),
            conn(1, 6, 0, 0, 0),
            conn(1, 1, 0, 0, 0),
            conn(1, 200, 0, 0, 0), // out of range: counted, not a panic
        ];
        let refs: Vec<&ConnRow> = rows.iter().collect();
        assert_eq!(
            sockets_by_state(&refs),
            "1 ESTAB, 1 LISTEN, 1 UDP, 1 TIME-WAIT, 1 ?"
        );
        assert_eq!(sockets_by_state(&[]), "none");
    }
}
