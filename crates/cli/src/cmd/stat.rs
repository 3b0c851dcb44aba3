//! `corestack stat`: the counters of running corestack engines, read from
//! their shared statistics segments without stopping them (like `nstat`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use appif::stats_shm::{
    segment_path, stats_dir, stats_path, ConnRow, StatsReader, CONNS, ROW_WORDS,
};
use clap::Args;

/// `stat` options.
#[derive(Args, Debug)]
pub struct Stat {
    /// Only the engine of this process (default: every running one).
    #[arg(long)]
    pid: Option<u32>,
    /// Print every counter, zeros included.
    #[arg(long)]
    all: bool,
}

impl Stat {
    pub fn run(self) -> Result<()> {
        let paths: Vec<PathBuf> = match self.pid {
            Some(pid) => vec![stats_path(pid)],
            None => {
                let dir = stats_dir();
                let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .with_context(|| format!("reading {}", dir.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("corestack-") && n.ends_with(".stats"))
                    })
                    .collect();
                v.sort();
                v
            }
        };
        let names: Vec<&'static str> = corestack::Stats::default().iter().map(|(n, _)| n).collect();
        let mut shown = 0;
        for path in &paths {
            let r = match StatsReader::open(path) {
                Ok(r) => r,
                Err(e) if self.pid.is_some() => {
                    bail!(
                        "no corestack engine statistics for pid {} ({}: {e})",
                        self.pid.unwrap_or(0),
                        path.display()
                    )
                }
                Err(_) => continue,
            };
            if !std::path::Path::new(&format!("/proc/{}", r.pid())).exists() {
                continue; // left behind by a process that died
            }
            let Some(values) = r.read() else {
                eprintln!("pid {}: the counters kept changing, try again", r.pid());
                continue;
            };
            if values.len() != names.len() {
                eprintln!(
                    "pid {}: written by another corestack version ({} counters), skipped",
                    r.pid(),
                    values.len()
                );
                continue;
            }
            println!("pid {} ({})", r.pid(), path.display());
            for (name, v) in names.iter().zip(&values) {
                if self.all || *v != 0 {
                    println!("  {name:<28} {v}");
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
        Ok(())
    }
}

/// `ss` options.
#[derive(Args, Debug)]
pub struct Ss {
    /// Only the engine of this process (default: every running one).
    #[arg(long)]
    pid: Option<u32>,
}

/// TCP state names as `ss` prints them, in the engine's `tcp::State` order.
const TCP_STATES: [&str; 11] = [
    "CLOSED",
    "LISTEN",
    "SYN-SENT",
    "SYN-RECV",
    "ESTAB",
    "FIN-WAIT-1",
    "FIN-WAIT-2",
    "CLOSE-WAIT",
    "CLOSING",
    "LAST-ACK",
    "TIME-WAIT",
];

impl Ss {
    pub fn run(self) -> Result<()> {
        let pids = running_pids(self.pid, CONNS)?;
        println!(
            "{:<7} {:<11} {:<21} {:<21} {:>8} {:>6} {:>8} {:>8} {:>8} {:>5} {:>7}",
            "pid",
            "state",
            "local",
            "peer",
            "rtt(µs)",
            "rto",
            "cwnd",
            "ssthresh",
            "inflight",
            "mss",
            "retrans"
        );
        for pid in pids {
            let Ok(r) = StatsReader::open(&segment_path(pid, CONNS)) else {
                continue;
            };
            let Some(words) = r.read() else { continue };
            let n = (words.first().copied().unwrap_or(0) as usize)
                .min((words.len().saturating_sub(1)) / ROW_WORDS);
            for row in words[1..1 + n * ROW_WORDS]
                .chunks(ROW_WORDS)
                .map(ConnRow::decode)
            {
                let (proto, state) = match row.state {
                    0 => ("udp", "UNCONN"),
                    1 => ("tcp", "LISTEN"),
                    s => (
                        "tcp",
                        TCP_STATES.get(usize::from(s) - 2).copied().unwrap_or("?"),
                    ),
                };
                if row.state < 2 {
                    println!(
                        "{pid:<7} {:<11} {:<21} {:<21}",
                        format!("{proto} {state}"),
                        row.local.to_string(),
                        "*:*"
                    );
                    continue;
                }
                let ssthresh = if row.ssthresh == u32::MAX {
                    "inf".to_string()
                } else {
                    row.ssthresh.to_string()
                };
                println!(
                    "{pid:<7} {:<11} {:<21} {:<21} {:>8} {:>6} {:>8} {:>8} {:>8} {:>5} {:>7}",
                    state,
                    row.local.to_string(),
                    row.remote.to_string(),
                    row.srtt_us,
                    format!("{}ms", row.rto_ms),
                    row.cwnd,
                    ssthresh,
                    row.in_flight,
                    row.mss,
                    row.retransmits
                );
            }
        }
        Ok(())
    }
}

/// Process ids with a live segment of `kind` (just `pid` if given).
fn running_pids(pid: Option<u32>, kind: &str) -> Result<Vec<u32>> {
    if let Some(p) = pid {
        if !segment_path(p, kind).exists() {
            bail!(
                "no corestack engine in process {p} (no {})",
                segment_path(p, kind).display()
            );
        }
        return Ok(vec![p]);
    }
    let dir = stats_dir();
    let suffix = format!(".{kind}");
    let mut pids: Vec<u32> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix("corestack-")?
                .strip_suffix(&suffix)?
                .parse()
                .ok()
        })
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect();
    pids.sort_unstable();
    Ok(pids)
}
