//! `corestack stat`: the counters of running corestack engines, read from
//! their shared statistics segments without stopping them (like `nstat`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use appif::stats_shm::{stats_dir, stats_path, StatsReader};
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
