//! Reading the tables running engines publish (`appif::stats_shm`): a process's connection
//! table and, for a `corestack run` daemon, its application table, read without stopping the
//! engine (the reader copies under the segment's sequence lock); and an application's own text
//! made safe to print. `stat`, `ss` and the Prometheus renderer read through these.

use anyhow::{bail, Context, Result};
use appif::stats_shm::{
    segment_path, table_rows, AppRow, ConnRow, StatsReader, APPS, APP_WORDS, CONNS, ROW_WORDS,
};

/// A process's published connection table.
pub struct ConnTable {
    /// The rows, as published.
    pub rows: Vec<ConnRow>,
    /// The table held every row it has room for: sockets may be missing.
    pub full: bool,
}

/// Reads process `pid`'s connection table. Errors (described): no segment,
/// one that keeps changing, or one of another corestack version.
pub fn read_conns(pid: u32) -> Result<ConnTable> {
    let path = segment_path(pid, CONNS);
    let r = StatsReader::open(&path).with_context(|| format!("opening {}", path.display()))?;
    if r.count() == 0 || !(r.count() - 1).is_multiple_of(ROW_WORDS) {
        bail!(
            "{} was written by another corestack version (rows of another width)",
            path.display()
        );
    }
    let Some(words) = r.read() else {
        bail!("the connection table kept changing, try again");
    };
    let rows: Vec<ConnRow> = table_rows(&words, ROW_WORDS).map(ConnRow::decode).collect();
    let full = rows.len() == (r.count() - 1) / ROW_WORDS;
    Ok(ConnTable { rows, full })
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
    use appif::stats_shm::{ConnRow, ConnState};

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
