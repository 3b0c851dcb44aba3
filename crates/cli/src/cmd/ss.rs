//! `corestack ss`: the sockets of running corestack engines (like `ss`), read
//! from their shared connection tables without stopping them, with the
//! owning application and the bytes each socket moved. When a process shown
//! runs several engines (`--cores N`), an `eng` column names the engine
//! that holds each socket.

use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::Args;
use observe::stats_shm::{segment_path, stats_dir, ConnRow, ConnState, CONNS};

use crate::observe::tables::{printable, read_conns};

/// `ss` options.
#[derive(Args, Debug)]
pub struct Ss {
    /// Only the engine of this process (default: every running one).
    #[arg(long)]
    pid: Option<u32>,
}

impl Ss {
    pub fn run(self) -> Result<()> {
        let pids = running_pids(self.pid, CONNS)?;
        let tables: Vec<_> = pids
            .into_iter()
            .filter_map(|pid| match read_conns(pid) {
                Ok(t) => Some((pid, t)),
                Err(e) => {
                    eprintln!("pid {pid}: {e}");
                    None
                }
            })
            .collect();
        let engines = tables.iter().any(|(_, t)| t.engines > 1);
        println!("{}", ss_header(engines));
        for (pid, t) in &tables {
            for row in &t.rows {
                println!("{}", ss_line(*pid, row, engines));
            }
        }
        Ok(())
    }
}

/// The `ss` column titles; with `engines`, the `eng` column after `app`.
fn ss_header(engines: bool) -> String {
    format!(
        "{:<7} {:<16} {:>5} {}{:<11} {:<21} {:<21} {:>8} {:>6} {:>8} {:>8} {:>8} {:>5} {:>7} {:>12} {:>12}",
        "pid",
        "process",
        "app",
        if engines { "eng " } else { "" },
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
/// application; with `engines`, the engine that holds the socket after
/// the application.
fn ss_line(pid: u32, row: &ConnRow, engines: bool) -> String {
    let proc_pid = if row.pid != 0 { row.pid } else { pid };
    let name = match printable(&row.process_name()) {
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
            (s.name().to_string(), row.remote.to_string(), Some(cells))
        }
    };
    let [rtt, rto, cwnd, ssthresh, inflight, mss, retrans] = tcp.unwrap_or_default();
    let eng = if engines {
        format!("{:>3} ", row.engine)
    } else {
        String::new()
    };
    format!(
        "{proc_pid:<7} {name:<16} {app:>5} {eng}{state:<11} {:<21} {peer:<21} {rtt:>8} {rto:>6} {cwnd:>8} {ssthresh:>8} {inflight:>8} {mss:>5} {retrans:>7} {:>12} {:>12}",
        row.local.to_string(),
        bytes(row.bytes_in),
        bytes(row.bytes_out),
    )
    .trim_end()
    .to_string()
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
mod tests {
    use super::*;
    use crate::observe::tables::fixtures::{cells, conn};

    #[test]
    fn ss_line_shows_app_and_bytes() {
        let header = cells(&ss_header(false));
        assert_eq!(&header[..3], ["pid", "process", "app"]);
        assert_eq!(&header[header.len() - 2..], ["bytes-in", "bytes-out"]);
        let mut r = conn(3, 6, 1234, 5678, 1);
        r.ssthresh = u32::MAX;
        r.pid = 4242;
        r.comm = observe::stats_shm::comm_bytes("memcached");
        let c = cells(&ss_line(42, &r, false));
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
        let c = cells(&ss_line_of(&conn(0, 6, 0, 0, 0)));
        assert_eq!(&c[..3], ["42", "-", "-"]);
        // A name with a space and a control character stays one printable cell.
        let mut r = conn(3, 6, 0, 0, 0);
        r.comm = observe::stats_shm::comm_bytes("a b\x1b");
        assert_eq!(cells(&ss_line(42, &r, false))[1], "a_b?");
        // UDP: bytes but no TCP cells; listener: neither.
        let line = ss_line_of(&conn(2, 0, 64, 32, 0));
        assert!(line.contains("udp UNCONN"), "{line}");
        assert!(line.ends_with(" 64           32"), "{line:?}");
        let line = ss_line_of(&conn(2, 1, 0, 0, 0));
        assert!(line.ends_with("*:*"), "{line:?}");
        assert!(line.contains("tcp LISTEN"));
    }

    fn ss_line_of(row: &ConnRow) -> String {
        ss_line(42, row, false)
    }

    #[test]
    fn ss_engine_column_names_the_engine_of_each_socket() {
        let header = cells(&ss_header(true));
        assert_eq!(&header[..5], ["pid", "process", "app", "eng", "state"]);
        let mut r = conn(0, 6, 10, 20, 0);
        r.engine = 3;
        let c = cells(&ss_line(42, &r, true));
        assert_eq!(c.len(), header.len(), "{c:?}");
        assert_eq!(&c[..5], ["42", "-", "-", "3", "ESTAB"]);
        let header_line = ss_header(true);
        let line = ss_line(42, &r, true);
        assert_eq!(
            header_line.find("eng").map(|i| i + 2),
            line.find(" 3 ").map(|i| i + 1),
            "the engine is right-aligned under its title:\n{header_line}\n{line}"
        );
        // Without the column, the line is as before.
        assert!(!cells(&ss_line(42, &r, false)).contains(&"3".to_string()));
    }
}
