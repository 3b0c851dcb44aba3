//! `corestack ss`: the sockets of running corestack engines (like `ss`), read
//! from their shared connection tables without stopping them, with the
//! owning application and the bytes each socket moved.

use std::path::Path;

use anyhow::{bail, Context, Result};
use appif::stats_shm::{
    segment_path, stats_dir, table_rows, ConnRow, ConnState, StatsReader, CONNS, ROW_WORDS,
};
use clap::Args;

/// `ss` options.
#[derive(Args, Debug)]
pub struct Ss {
    /// Only the engine of this process (default: every running one).
    #[arg(long)]
    pid: Option<u32>,
}

/// TCP state names as `ss` prints them, in the engine's `tcp::State` order.
pub const TCP_STATES: [&str; 11] = [
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
        println!("{}", ss_header());
        for pid in pids {
            match read_conns(pid) {
                Ok(t) => {
                    for row in &t.rows {
                        println!("{}", ss_line(pid, row));
                    }
                }
                Err(e) => eprintln!("pid {pid}: {e}"),
            }
        }
        Ok(())
    }
}

/// The `ss` column titles.
fn ss_header() -> String {
    format!(
        "{:<7} {:<16} {:>5} {:<11} {:<21} {:<21} {:>8} {:>6} {:>8} {:>8} {:>8} {:>5} {:>7} {:>12} {:>12}",
        "pid",
        "process",
        "app",
        "state",
        "local",
        "peer",
        "rtt(µs)",
        "rto",
        "cwnd",
        "ssthresh",
        "inflight",
        "mss",
        "retrans",
        "bytes-in",
        "bytes-out"
    )
}

/// One `ss` line: the process the socket belongs to (its pid and name:
/// the engine's process `pid` for an embedded engine, the application in
/// service mode), the owning application's association (`-` for an
/// embedded engine's socket), the state, the addresses, TCP's windows and
/// timers, and the bytes delivered to (in) and taken from (out) the
/// application.
fn ss_line(pid: u32, row: &ConnRow) -> String {
    let proc_pid = if row.pid != 0 { row.pid } else { pid };
    let name = match crate::cmd::stat::printable(&row.process_name()) {
        n if n.is_empty() => "-".to_string(),
        n => n.replace(' ', "_"),
    };
    let app = if row.owner == 0 {
        "-".to_string()
    } else {
        row.owner.to_string()
    };
    let bytes = |v: u64| {
        if row.state == ConnState::Listener {
            String::new()
        } else {
            v.to_string()
        }
    };
    let (state, peer, tcp) = match row.state {
        ConnState::Udp => ("udp UNCONN".to_string(), "*:*".to_string(), None),
        ConnState::Listener => ("tcp LISTEN".to_string(), "*:*".to_string(), None),
        s => {
            let ssthresh = if row.ssthresh == u32::MAX {
                "inf".to_string()
            } else {
                row.ssthresh.to_string()
            };
            let cells = [
                row.srtt_us.to_string(),
                format!("{}ms", row.rto_ms),
                row.cwnd.to_string(),
                ssthresh,
                row.in_flight.to_string(),
                row.mss.to_string(),
                row.retransmits.to_string(),
            ];
            (
                tcp_state(s).to_string(),
                row.remote.to_string(),
                Some(cells),
            )
        }
    };
    let [rtt, rto, cwnd, ssthresh, inflight, mss, retrans] = tcp.unwrap_or_default();
    format!(
        "{proc_pid:<7} {name:<16} {app:>5} {state:<11} {:<21} {peer:<21} {rtt:>8} {rto:>6} {cwnd:>8} {ssthresh:>8} {inflight:>8} {mss:>5} {retrans:>7} {:>12} {:>12}",
        row.local.to_string(),
        bytes(row.bytes_in),
        bytes(row.bytes_out),
    )
    .trim_end()
    .to_string()
}

/// The name of TCP state `s` as `ss` prints it ("ESTAB", ...; "?" for an
/// unknown code).
pub fn tcp_state(s: ConnState) -> &'static str {
    s.name()
}

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
        .filter(|p| Path::new(&format!("/proc/{p}")).exists())
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

#[cfg(test)]
pub mod tests {
    use super::*;

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

    #[test]
    fn ss_line_shows_app_and_bytes() {
        let header = cells(&ss_header());
        assert_eq!(&header[..3], ["pid", "process", "app"]);
        assert_eq!(&header[header.len() - 2..], ["bytes-in", "bytes-out"]);
        let mut r = conn(3, 6, 1234, 5678, 1);
        r.ssthresh = u32::MAX;
        r.pid = 4242;
        r.comm = appif::stats_shm::comm_bytes("memcached");
        let c = cells(&ss_line(42, &r));
        assert_eq!(c.len(), header.len(), "{c:?}");
        assert_eq!(
            &c[..6],
            [
                "4242",
                "memcached",
                "3",
                "ESTAB",
                "10.0.0.2:7",
                "10.0.0.1:40000"
            ],
            "the application's pid and name, not the daemon's"
        );
        assert_eq!(c[9], "inf");
        assert_eq!(&c[c.len() - 2..], ["1234", "5678"]);
        // Embedded engine's socket: no application; the engine's process, name unknown.
        let c = cells(&ss_line(42, &conn(0, 6, 0, 0, 0)));
        assert_eq!(&c[..3], ["42", "-", "-"]);
        // A name with a space and a control character stays one printable cell.
        let mut r = conn(3, 6, 0, 0, 0);
        r.comm = appif::stats_shm::comm_bytes("a b\x1b");
        assert_eq!(cells(&ss_line(42, &r))[1], "a_b?");
        // UDP: bytes but no TCP cells; listener: neither.
        let line = ss_line(42, &conn(2, 0, 64, 32, 0));
        assert!(line.contains("udp UNCONN"), "{line}");
        assert!(line.ends_with(" 64           32"), "{line:?}");
        let line = ss_line(42, &conn(2, 1, 0, 0, 0));
        assert!(line.ends_with("*:*"), "{line:?}");
        assert!(line.contains("tcp LISTEN"));
    }
}
