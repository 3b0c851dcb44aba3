//! The Prometheus renderer: the counters `corestack stat` shows and the sockets
//! `corestack ss` shows, as text exposition format 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>), for
//! `corestack stat --prometheus` and for `GET /metrics` on the kernel TCP
//! socket `corestack run --metrics-listen ADDR:PORT` serves ([`super::http`]).
//!
//! Names: `corestack_<subsystem>_<name>_total` for the engine's counters
//! (subsystems `link`, `eth`, `arp`, `ipv4`, `frag`, `icmp`, `udp`, `tcp`,
//! `engine`); the `drop_<subsystem>_<reason>` counters become one family per
//! subsystem, `corestack_<subsystem>_dropped_total{reason="<reason>"}`.
//! Per socket: `corestack_conn_*` and `corestack_tcp_conn_*` in base units
//! (`_bytes`, `_seconds`), labelled with the engine's `pid`, the owning
//! application (`app`, `-` for an embedded engine's socket), `proto`,
//! `state` and the 4-tuple (`local_ip`, `local_port`, `remote_ip`,
//! `remote_port`). Per application of a daemon: `corestack_app_*_total`.
//! Every sample carries `pid`, the engine's process id. The names are
//! stable: a test holds the list.
//!
//! A process with several engines (`--cores N`) has the samples of each
//! engine's counters, sockets and connections labelled `engine="N"` (0,
//! 1, ...): sum them for the process's totals. A one-engine process's
//! samples carry no `engine` label, as before engines were several.
//!
//! Everything is read from the shared segments (`observe::stats_shm`) through
//! the readers `stat` and `ss` use, so serving `/metrics` never stops or
//! slows the engine: the reader copies under the segment's sequence lock.

use std::collections::HashMap;
use std::fmt::Write as _;

use anyhow::{bail, Result};
use observe::stats_shm::{engine_kind, segment_path, AppRow, ConnRow, ConnState, CONNS};

use super::tables::{read_apps, read_conns_at, read_counters};

/// The Content-Type of text exposition format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What one engine published: its counters, and its tables when it has them.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The engine's process id.
    pub pid: u32,
    /// The engine's index when its process has several (its samples are
    /// labelled `engine="N"`); None for a process's only engine.
    pub engine: Option<usize>,
    /// Counter name (as `corestack stat` prints it) and value, in the
    /// engine's declaration order.
    pub counters: Vec<(&'static str, u64)>,
    /// The connection table's rows; None when it could not be read.
    pub conns: Option<Vec<ConnRow>>,
    /// The connection table held every row it has room for.
    pub conns_full: bool,
    /// The application table (a `corestack run` daemon only; with several
    /// engines, in engine 0's snapshot).
    pub apps: Option<Vec<AppRow>>,
}

/// Reads the segments of every engine of process `pid`: one snapshot per
/// engine. Errors: no counters segment, one that kept changing, or one of
/// another corestack version (described).
pub fn snapshots(pid: u32) -> Result<Vec<Snapshot>> {
    let engines = read_counters(pid)?;
    let several = engines.len() > 1;
    engines
        .into_iter()
        .map(|e| snapshot_from(pid, several.then_some(e.engine), e.values))
        .collect()
}

/// A snapshot of process `pid`'s engine `engine` (None: its only one) whose
/// counters read `values` (in declaration order); its tables are read from
/// their segments (the application table with engine 0's). Errors: `values`
/// of another corestack version (another number of counters).
pub fn snapshot_from(pid: u32, engine: Option<usize>, values: Vec<u64>) -> Result<Snapshot> {
    let names: Vec<&'static str> = corestack::Stats::docs().map(|(n, _)| n).collect();
    if values.len() != names.len() {
        bail!(
            "pid {pid}: written by another corestack version ({} counters, this one has {})",
            values.len(),
            names.len()
        );
    }
    let e = engine.unwrap_or(0);
    let table = read_conns_at(&segment_path(pid, &engine_kind(CONNS, e)), e).ok();
    Ok(Snapshot {
        pid,
        engine,
        counters: names.into_iter().zip(values).collect(),
        conns_full: table.as_ref().is_some_and(|t| t.full),
        conns: table.map(|t| t.rows),
        apps: if e == 0 { read_apps(pid) } else { None },
    })
}

/// Subsystems that name counters `<subsystem>_...` or `drop_<subsystem>_...`.
const SUBSYSTEMS: [&str; 7] = ["eth", "arp", "ipv4", "frag", "icmp", "udp", "tcp"];

/// The family and `reason` label of engine counter `name`: see the module
/// documentation.
pub fn counter_family(name: &str) -> (String, Option<&str>) {
    if let Some(rest) = name.strip_prefix("drop_") {
        for sub in SUBSYSTEMS {
            if let Some(reason) = rest.strip_prefix(sub).and_then(|r| r.strip_prefix('_')) {
                return (format!("corestack_{sub}_dropped_total"), Some(reason));
            }
        }
        // drop_no_route: routing is IPv4's.
        return ("corestack_ipv4_dropped_total".into(), Some(rest));
    }
    let sub = if name.starts_with("rx_") || name.starts_with("tx_") {
        "link_"
    } else if SUBSYSTEMS
        .iter()
        .any(|s| name.strip_prefix(s).is_some_and(|r| r.starts_with('_')))
    {
        ""
    } else {
        "engine_"
    };
    (format!("corestack_{sub}{name}_total"), None)
}

/// The text of a counter's doc comment (`Stats::docs`' `doc = "..."`
/// attributes, as `stringify!` wrote them: raw or escaped literals, maybe
/// with line breaks inside) as one line.
fn doc_text(raw: &str) -> String {
    let mut parts = Vec::new();
    let mut rest = raw;
    while let Some(i) = rest.find("doc =") {
        let lit = rest[i + 5..].trim_start();
        let (body, after) = if let Some(r) = lit.strip_prefix('r') {
            let hashes = r.len() - r.trim_start_matches('#').len();
            let Some(open) = r[hashes..].strip_prefix('"') else {
                break;
            };
            let close = format!("\"{}", &r[..hashes]);
            let Some(end) = open.find(&close) else {
                break;
            };
            (open[..end].to_string(), &open[end + close.len()..])
        } else {
            let Some(open) = lit.strip_prefix('"') else {
                break;
            };
            let mut body = String::new();
            let mut chars = open.char_indices();
            let mut end = open.len();
            while let Some((j, c)) = chars.next() {
                match c {
                    '"' => {
                        end = j + 1;
                        break;
                    }
                    '\\' => match chars.next() {
                        Some((_, 'n')) => body.push(' '),
                        Some((_, c)) => body.push(c),
                        None => {}
                    },
                    c => body.push(c),
                }
            }
            (body, &open[end..])
        };
        let body = body.trim();
        if !body.is_empty() {
            parts.push(body.to_string());
        }
        rest = after;
    }
    parts.join(" ")
}

/// One metric family being built.
struct Family {
    name: String,
    help: String,
    kind: &'static str,
    samples: Vec<String>,
}

/// Families in order of first use, each with its samples.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
    index: HashMap<String, usize>,
}

/// A sample's value: counters and sizes as integers, times as seconds.
enum Value {
    Int(u64),
    Float(f64),
}

impl Exposition {
    fn add(
        &mut self,
        name: &str,
        kind: &'static str,
        help: &str,
        labels: &[(&str, &str)],
        value: Value,
    ) {
        let i = *self.index.entry(name.to_string()).or_insert_with(|| {
            self.families.push(Family {
                name: name.to_string(),
                help: help.to_string(),
                kind,
                samples: Vec::new(),
            });
            self.families.len() - 1
        });
        let mut s = name.to_string();
        if !labels.is_empty() {
            s.push('{');
            for (j, (k, v)) in labels.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                let _ = write!(s, "{k}=\"{}\"", escape_label(v));
            }
            s.push('}');
        }
        match value {
            Value::Int(v) => {
                let _ = write!(s, " {v}");
            }
            Value::Float(v) => {
                let _ = write!(s, " {v:?}");
            }
        }
        self.families[i].samples.push(s);
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
            for s in &f.samples {
                out.push_str(s);
                out.push('\n');
            }
        }
        out
    }
}

/// A label value escaped as the format asks (backslash, quote, newline).
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A HELP text escaped as the format asks (backslash, newline).
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

const COUNTER: &str = "counter";
const GAUGE: &str = "gauge";

/// The exposition of `snaps` (text format 0.0.4).
pub fn render(snaps: &[Snapshot]) -> String {
    let docs: HashMap<&str, String> = corestack::Stats::docs()
        .map(|(n, d)| (n, doc_text(d)))
        .collect();
    let mut e = Exposition::default();
    for snap in snaps {
        let pid = snap.pid.to_string();
        let engine = snap.engine.map(|e| e.to_string());
        // `pid`, and `engine` when the process has several.
        let mut who = vec![("pid", pid.as_str())];
        if let Some(e) = &engine {
            who.push(("engine", e.as_str()));
        }
        let who = who.as_slice();
        for &(name, v) in &snap.counters {
            let (family, reason) = counter_family(name);
            match reason {
                Some(reason) => {
                    let sub = family
                        .strip_prefix("corestack_")
                        .and_then(|f| f.strip_suffix("_dropped_total"))
                        .unwrap_or("?");
                    let help = format!(
                        "Packets the engine dropped in {sub} input or output, by reason \
                         (corestack stat's drop_* counters)."
                    );
                    let labels = [who, &[("reason", reason)]].concat();
                    e.add(&family, COUNTER, &help, &labels, Value::Int(v));
                }
                None => {
                    let help = docs.get(name).cloned().unwrap_or_default();
                    e.add(&family, COUNTER, &help, who, Value::Int(v));
                }
            }
        }
        if let Some(rows) = &snap.conns {
            add_conns(&mut e, who, rows, snap.conns_full);
        }
        if let Some(apps) = &snap.apps {
            add_apps(&mut e, &pid, apps);
        }
    }
    e.text()
}

/// The protocol and state labels of a row.
fn proto_state(row: &ConnRow) -> (&'static str, &'static str) {
    match row.state {
        ConnState::Udp => ("udp", "UNCONN"),
        ConnState::Listener => ("tcp", "LISTEN"),
        s => ("tcp", s.name()),
    }
}

/// The socket and connection samples of `rows`, labelled with `who` (the
/// process, and the engine of several).
fn add_conns(e: &mut Exposition, who: &[(&str, &str)], rows: &[ConnRow], full: bool) {
    let mut by_state: Vec<((&str, &str), u64)> = Vec::new();
    for row in rows {
        let key = proto_state(row);
        match by_state.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => by_state.push((key, 1)),
        }
    }
    for ((proto, state), n) in by_state {
        e.add(
            "corestack_sockets",
            GAUGE,
            "Open sockets of the engine, by protocol and state.",
            &[who, &[("proto", proto), ("state", state)]].concat(),
            Value::Int(n),
        );
    }
    e.add(
        "corestack_conn_table_full",
        GAUGE,
        "1 when the published connection table is full (sockets past its rows are not shown).",
        who,
        Value::Int(u64::from(full)),
    );
    for row in rows {
        let (proto, state) = proto_state(row);
        if row.state == ConnState::Listener {
            continue; // a listener has no bytes, windows or timers
        }
        let app = if row.owner == 0 {
            "-".to_string()
        } else {
            row.owner.to_string()
        };
        let (lip, lport) = (row.local.ip().to_string(), row.local.port().to_string());
        let (rip, rport) = (row.remote.ip().to_string(), row.remote.port().to_string());
        let labels = [
            who,
            &[
                ("app", app.as_str()),
                ("proto", proto),
                ("state", state),
                ("local_ip", lip.as_str()),
                ("local_port", lport.as_str()),
                ("remote_ip", rip.as_str()),
                ("remote_port", rport.as_str()),
            ],
        ]
        .concat();
        e.add(
            "corestack_conn_received_bytes_total",
            COUNTER,
            "Bytes the engine delivered into the socket's receive ring (UDP: with each \
             datagram's ring header).",
            &labels,
            Value::Int(row.bytes_in),
        );
        e.add(
            "corestack_conn_sent_bytes_total",
            COUNTER,
            "Bytes of the application's writes the engine consumed from the socket's send ring \
             (TCP: acknowledged by the peer; UDP: sent, with each datagram's ring header).",
            &labels,
            Value::Int(row.bytes_out),
        );
        if row.state == ConnState::Udp {
            continue;
        }
        e.add(
            "corestack_tcp_conn_retransmits_total",
            COUNTER,
            "Segments the connection retransmitted.",
            &labels,
            Value::Int(row.retransmits),
        );
        let gauges: [(&str, &str, Value); 8] = [
            (
                "corestack_tcp_conn_srtt_seconds",
                "Smoothed round-trip time (RFC 6298).",
                Value::Float(f64::from(row.srtt_us) / 1e6),
            ),
            (
                "corestack_tcp_conn_rto_seconds",
                "Retransmission timeout (RFC 6298).",
                Value::Float(f64::from(row.rto_ms) / 1e3),
            ),
            (
                "corestack_tcp_conn_cwnd_bytes",
                "Congestion window (RFC 5681).",
                Value::Int(row.cwnd.into()),
            ),
            (
                "corestack_tcp_conn_ssthresh_bytes",
                "Slow-start threshold (RFC 5681); absent while it is infinite.",
                Value::Int(row.ssthresh.into()),
            ),
            (
                "corestack_tcp_conn_in_flight_bytes",
                "Bytes sent and not yet acknowledged.",
                Value::Int(row.in_flight.into()),
            ),
            (
                "corestack_tcp_conn_snd_wnd_bytes",
                "The peer's receive window (snd_wnd).",
                Value::Int(row.snd_wnd.into()),
            ),
            (
                "corestack_tcp_conn_rcv_wnd_bytes",
                "The window this end offers (rcv_wnd).",
                Value::Int(row.rcv_wnd.into()),
            ),
            (
                "corestack_tcp_conn_mss_bytes",
                "Effective maximum segment size.",
                Value::Int(row.mss.into()),
            ),
        ];
        for (name, help, v) in gauges {
            if name == "corestack_tcp_conn_ssthresh_bytes" && row.ssthresh == u32::MAX {
                continue;
            }
            e.add(name, GAUGE, help, &labels, v);
        }
    }
}

fn add_apps(e: &mut Exposition, pid: &str, apps: &[AppRow]) {
    e.add(
        "corestack_apps",
        GAUGE,
        "Applications joined to the corestack run daemon.",
        &[("pid", pid)],
        Value::Int(apps.len() as u64),
    );
    for a in apps {
        let (assoc, app_pid, uid) = (a.assoc.to_string(), a.pid.to_string(), a.uid.to_string());
        let labels = [
            ("pid", pid),
            ("app", assoc.as_str()),
            ("app_pid", app_pid.as_str()),
            ("uid", uid.as_str()),
            ("name", a.name.as_str()),
        ];
        for (name, help, v) in [
            (
                "corestack_app_commands_total",
                "Command descriptors the daemon took from the application.",
                a.commands,
            ),
            (
                "corestack_app_opens_total",
                "Connect, listen and bind commands of the application.",
                a.opens,
            ),
            (
                "corestack_app_closes_total",
                "Close commands of the application.",
                a.closes,
            ),
            (
                "corestack_app_refused_total",
                "Opens of the application refused for permission (EACCES).",
                a.refused,
            ),
        ] {
            e.add(name, COUNTER, help, &labels, Value::Int(v));
        }
    }
}

#[cfg(test)]
mod tests;
