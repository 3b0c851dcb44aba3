//! Reading the tables running engines publish (`observe::stats_shm`): a process's connection
//! table and, for a `corestack run` daemon, its application table, read without stopping the
//! engine (the reader copies under the segment's sequence lock); and an application's own text
//! made safe to print. `stat`, `ss` and the Prometheus renderer read through these.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use observe::stats_shm::{
    engine_segments, segment_path, table_rows, AppRow, ConnRow, StatsReader, APPS, APP_WORDS,
    CONNS, ROW_WORDS, STATS,
};

/// One engine's counters, as its segment holds them.
pub struct EngineCounters {
    /// The engine's index in its process (0 for the only one).
    pub engine: usize,
    /// Its counters segment.
    pub path: PathBuf,
    /// The counters, in the engine's declaration order (as many as
    /// `corestack::Stats` has: checked).
    pub values: Vec<u64>,
}

/// Reads the counters of every engine of process `pid`, by engine (one
/// element for a one-engine process). Errors (described): no counters
/// segment for engine 0 (the `io::Error` of opening it is in the chain),
/// one that kept changing, or one written by another corestack version.
pub fn read_counters(pid: u32) -> Result<Vec<EngineCounters>> {
    let names = corestack::Stats::default().iter().count();
    let mut segs = engine_segments(pid, STATS);
    if !matches!(segs.first(), Some((0, _))) {
        // Described by the error of opening engine 0's segment.
        segs.insert(0, (0, observe::stats_shm::stats_path(pid)));
    }
    let mut out = Vec::with_capacity(segs.len());
    for (engine, path) in segs {
        let r = StatsReader::open(&path)
            .with_context(|| format!("no corestack engine statistics at {}", path.display()))?;
        let values = r
            .read()
            .ok_or_else(|| anyhow!("pid {pid}: the counters kept changing, try again"))?;
        if values.len() != names {
            bail!(
                "pid {pid}: {} written by another corestack version ({} counters, this one has {names})",
                path.display(),
                values.len()
            );
        }
        out.push(EngineCounters {
            engine,
            path,
            values,
        });
    }
    Ok(out)
}

/// A process's published connection table.
pub struct ConnTable {
    /// The rows, as published.
    pub rows: Vec<ConnRow>,
    /// The table held every row it has room for: sockets may be missing.
    pub full: bool,
    /// The engines whose tables were read (the process's engines).
    pub engines: usize,
}

/// Reads process `pid`'s connection table: every engine's rows, engine 0's
/// first; `full` when any engine's table is. Errors (described): no
/// segment for engine 0, one that keeps changing, or one of another
/// corestack version.
pub fn read_conns(pid: u32) -> Result<ConnTable> {
    let mut segs = engine_segments(pid, CONNS);
    if !matches!(segs.first(), Some((0, _))) {
        segs.insert(0, (0, segment_path(pid, CONNS)));
    }
    let mut all = ConnTable {
        rows: Vec::new(),
        full: false,
        engines: 0,
    };
    for (engine, path) in segs {
        let t = read_conns_at(&path, engine)?;
        all.rows.extend(t.rows);
        all.full |= t.full;
        all.engines += 1;
    }
    Ok(all)
}

/// Reads engine `engine`'s connection table at `path`; every row names
/// that engine (the segment's, whatever the row says). Errors as
/// [`read_conns`]'.
pub fn read_conns_at(path: &Path, engine: usize) -> Result<ConnTable> {
    let r = StatsReader::open(path).with_context(|| format!("opening {}", path.display()))?;
    if r.count() == 0 || !(r.count() - 1).is_multiple_of(ROW_WORDS) {
        bail!(
            "{} was written by another corestack version (rows of another width)",
            path.display()
        );
    }
    let Some(words) = r.read() else {
        bail!("the connection table kept changing, try again");
    };
    let engine = u32::try_from(engine).unwrap_or(u32::MAX);
    let rows: Vec<ConnRow> = table_rows(&words, ROW_WORDS)
        .map(|w| ConnRow {
            engine,
            ..ConnRow::decode(w)
        })
        .collect();
    let full = rows.len() == (r.count() - 1) / ROW_WORDS;
    Ok(ConnTable {
        rows,
        full,
        engines: 1,
    })
}

/// Reads process `pid`'s application table; None when it has none (it is
/// not a `corestack run` daemon) or it cannot be read consistently.
pub fn read_apps(pid: u32) -> Option<Vec<AppRow>> {
    let r = StatsReader::open(&segment_path(pid, APPS)).ok()?;
    let words = r.read()?;
    Some(table_rows(&words, APP_WORDS).map(AppRow::decode).collect())
}

/// `name` (an application's own text) with control characters shown as
/// `?`, so it cannot drive the terminal.
pub fn printable(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Rows and cells the commands' unit tests build and read.
#[cfg(test)]
pub mod fixtures {
    use observe::stats_shm::{ConnRow, ConnState};

    /// A connection row of application `owner` in `state` (the published code).
    pub fn conn(owner: u32, state: u8, bytes_in: u64, bytes_out: u64, retransmits: u64) -> ConnRow {
        ConnRow {
            local: "10.0.0.2:7".parse().unwrap(),
            remote: "10.0.0.1:40000".parse().unwrap(),
            state: ConnState::try_from(state).unwrap_or(ConnState::Unknown),
            owner,
            bytes_in,
            bytes_out,
            retransmits,
            ..ConnRow::default()
        }
    }

    /// The whitespace-separated cells of a table line.
    pub fn cells(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }
}
