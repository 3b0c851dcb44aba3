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
//! Everything is read from the shared segments (`appif::stats_shm`) through
//! the readers `stat` and `ss` use, so serving `/metrics` never stops or
//! slows the engine: the reader copies under the segment's sequence lock.

use std::collections::HashMap;
use std::fmt::Write as _;

use anyhow::{anyhow, bail, Context, Result};
use appif::stats_shm::{stats_path, AppRow, ConnRow, ConnState, StatsReader};

use super::tables::{read_apps, read_conns};

/// The Content-Type of text exposition format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What one engine published: its counters, and its tables when it has them.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The engine's process id.
    pub pid: u32,
    /// Counter name (as `corestack stat` prints it) and value, in the
    /// engine's declaration order.
    pub counters: Vec<(&'static str, u64)>,
    /// The connection table's rows; None when it could not be read.
    pub conns: Option<Vec<ConnRow>>,
    /// The connection table held every row it has room for.
    pub conns_full: bool,
    /// The application table (a `corestack run` daemon only).
    pub apps: Option<Vec<AppRow>>,
}

/// Reads engine `pid`'s segments. Errors: no counters segment, one that
/// kept changing, or one of another corestack version (described).
pub fn snapshot(pid: u32) -> Result<Snapshot> {
    let path = stats_path(pid);
    let r = StatsReader::open(&path)
        .with_context(|| format!("no corestack engine statistics at {}", path.display()))?;
    let values = r
        .read()
        .ok_or_else(|| anyhow!("pid {pid}: the counters kept changing, try again"))?;
    snapshot_from(pid, values)
}

/// A snapshot of engine `pid` whose counters read `values` (in declaration
/// order); its tables are read from their segments.
pub fn snapshot_from(pid: u32, values: Vec<u64>) -> Result<Snapshot> {
    let names: Vec<&'static str> = corestack::Stats::docs().map(|(n, _)| n).collect();
    if values.len() != names.len() {
        bail!(
            "pid {pid}: written by another corestack version ({} counters, this one has {})",
            values.len(),
            names.len()
        );
    }
    let table = read_conns(pid).ok();
    Ok(Snapshot {
        pid,
        counters: names.into_iter().zip(values).collect(),
        conns_full: table.as_ref().is_some_and(|t| t.full),
        conns: table.map(|t| t.rows),
        apps: read_apps(pid),
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
                    e.add(
                        &family,
                        COUNTER,
                        &help,
                        &[("pid", &pid), ("reason", reason)],
                        Value::Int(v),
                    );
                }
                None => {
                    let help = docs.get(name).cloned().unwrap_or_default();
                    e.add(&family, COUNTER, &help, &[("pid", &pid)], Value::Int(v));
                }
            }
        }
        if let Some(rows) = &snap.conns {
            add_conns(&mut e, &pid, rows, snap.conns_full);
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

fn add_conns(e: &mut Exposition, pid: &str, rows: &[ConnRow], full: bool) {
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
            &[("pid", pid), ("proto", proto), ("state", state)],
            Value::Int(n),
        );
    }
    e.add(
        "corestack_conn_table_full",
        GAUGE,
        "1 when the published connection table is full (sockets past its rows are not shown).",
        &[("pid", pid)],
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
            ("pid", pid),
            ("app", app.as_str()),
            ("proto", proto),
            ("state", state),
            ("local_ip", lip.as_str()),
            ("local_port", lport.as_str()),
            ("remote_ip", rip.as_str()),
            ("remote_port", rport.as_str()),
        ];
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
mod tests {
    use super::*;
    use testkit::prom::{parse, samples, value};

    /// Families every exposition of an engine with a TCP connection, a UDP
    /// socket, a listener and an application holds. Renaming or dropping one
    /// breaks dashboards: this list changes only with a note in the README.
    const GOLDEN: &[&str] = &[
        "corestack_link_rx_frames_total",
        "corestack_link_rx_bytes_total",
        "corestack_link_tx_frames_total",
        "corestack_link_tx_bytes_total",
        "corestack_link_tx_no_buffer_total",
        "corestack_eth_dropped_total",
        "corestack_arp_requests_rx_total",
        "corestack_arp_replies_rx_total",
        "corestack_arp_requests_tx_total",
        "corestack_arp_replies_tx_total",
        "corestack_arp_dropped_total",
        "corestack_ipv4_dropped_total",
        "corestack_frag_rx_total",
        "corestack_frag_reassembled_total",
        "corestack_frag_duplicate_total",
        "corestack_frag_dropped_total",
        "corestack_icmp_echo_replies_tx_total",
        "corestack_icmp_unreachable_tx_total",
        "corestack_icmp_rate_limited_total",
        "corestack_icmp_other_rx_total",
        "corestack_icmp_tcp_errors_rx_total",
        "corestack_icmp_dropped_total",
        "corestack_udp_rx_total",
        "corestack_udp_tx_total",
        "corestack_udp_dropped_total",
        "corestack_tcp_rx_segments_total",
        "corestack_tcp_tx_segments_total",
        "corestack_tcp_tso_sends_total",
        "corestack_tcp_dropped_total",
        "corestack_tcp_no_socket_total",
        "corestack_tcp_rst_tx_total",
        "corestack_tcp_syncookies_sent_total",
        "corestack_tcp_syncookies_ok_total",
        "corestack_tcp_pmtu_reductions_total",
        "corestack_tcp_retransmits_total",
        "corestack_tcp_rto_timeouts_total",
        "corestack_tcp_sack_recoveries_total",
        "corestack_tcp_rack_losses_total",
        "corestack_tcp_tlp_probes_total",
        "corestack_tcp_recovery_probes_total",
        "corestack_tcp_spurious_retransmits_total",
        "corestack_tcp_acks_compressed_total",
        "corestack_tcp_acks_of_unacceptable_total",
        "corestack_tcp_spurious_rtos_total",
        "corestack_tcp_rcv_full_dropped_bytes_total",
        "corestack_tcp_active_opens_total",
        "corestack_tcp_passive_opens_total",
        "corestack_tcp_resets_total",
        "corestack_tcp_timeouts_total",
        "corestack_engine_cmd_unknown_socket_total",
        "corestack_engine_timers_fired_total",
        "corestack_sockets",
        "corestack_conn_table_full",
        "corestack_conn_received_bytes_total",
        "corestack_conn_sent_bytes_total",
        "corestack_tcp_conn_retransmits_total",
        "corestack_tcp_conn_srtt_seconds",
        "corestack_tcp_conn_rto_seconds",
        "corestack_tcp_conn_cwnd_bytes",
        "corestack_tcp_conn_ssthresh_bytes",
        "corestack_tcp_conn_in_flight_bytes",
        "corestack_tcp_conn_snd_wnd_bytes",
        "corestack_tcp_conn_rcv_wnd_bytes",
        "corestack_tcp_conn_mss_bytes",
        "corestack_apps",
        "corestack_app_commands_total",
        "corestack_app_opens_total",
        "corestack_app_closes_total",
        "corestack_app_refused_total",
    ];

    /// An engine (pid 4242) whose counters are 1000 + their index, with an
    /// established connection, a listener, a UDP socket and an application
    /// with a name that needs escaping.
    fn fixture() -> Snapshot {
        let counters = corestack::Stats::docs()
            .enumerate()
            .map(|(i, (n, _))| (n, 1000 + i as u64))
            .collect();
        let estab = ConnRow {
            local: "10.0.0.2:7".parse().unwrap(),
            remote: "10.0.0.1:40000".parse().unwrap(),
            state: ConnState::Established,
            srtt_us: 125,
            rto_ms: 201,
            cwnd: 14480,
            ssthresh: 28960,
            in_flight: 2896,
            snd_wnd: 65535,
            rcv_wnd: 262144,
            mss: 1448,
            retransmits: 3,
            owner: 2,
            bytes_out: 5000,
            bytes_in: 1 << 40,
            ..ConnRow::default()
        };
        let mut slow_start = estab;
        slow_start.remote = "10.0.0.9:41000".parse().unwrap();
        slow_start.ssthresh = u32::MAX;
        let listener = ConnRow {
            local: "0.0.0.0:7".parse().unwrap(),
            state: ConnState::Listener,
            ..ConnRow::default()
        };
        let udp = ConnRow {
            local: "10.0.0.2:7".parse().unwrap(),
            bytes_in: 64,
            bytes_out: 32,
            ..ConnRow::default()
        };
        Snapshot {
            pid: 4242,
            counters,
            conns: Some(vec![estab, slow_start, listener, udp]),
            conns_full: false,
            apps: Some(vec![AppRow {
                assoc: 2,
                pid: 77,
                uid: 1000,
                name: "echo".into(),
                commands: 12,
                opens: 3,
                closes: 1,
                refused: 0,
            }]),
        }
    }

    #[test]
    fn exposition_parses_and_holds_every_golden_family() {
        let text = render(&[fixture()]);
        let scrape = parse(&text);
        for name in GOLDEN {
            assert!(
                scrape.samples.iter().any(|s| s.metric == *name),
                "{name} is missing (renamed or dropped?)"
            );
            assert!(
                scrape.docs.get(*name).is_some_and(|h| !h.is_empty()),
                "{name} has no HELP"
            );
        }
        // Every family is named by the conventions and typed once.
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let w: Vec<&str> = line.split(' ').collect();
            let (name, kind) = (w[2], w[3]);
            assert!(name.starts_with("corestack_"), "{line}");
            assert_eq!(
                kind == "counter",
                name.ends_with("_total"),
                "counters and only counters end in _total: {line}"
            );
            assert_eq!(
                text.matches(&format!("# TYPE {name} ")).count(),
                1,
                "{name} typed twice"
            );
        }
    }

    #[test]
    fn counter_values_match_the_segment() {
        let snap = fixture();
        let scrape = parse(&render(std::slice::from_ref(&snap)));
        for &(name, v) in &snap.counters {
            let (family, reason) = counter_family(name);
            let mut labels = vec![("pid", "4242")];
            if let Some(r) = reason {
                labels.push(("reason", r));
            }
            let found = samples(&scrape, &family, &labels);
            assert_eq!(found.len(), 1, "{name} as {family} {labels:?}");
            assert_eq!(value(found[0]), v as f64, "{name}");
        }
        // Every counter has its own sample: none folded into another.
        let counter_samples = scrape
            .samples
            .iter()
            .filter(|s| matches!(s.value, prometheus_parse::Value::Counter(_)))
            .filter(|s| !s.metric.contains("_conn_") && !s.metric.starts_with("corestack_app_"))
            .count();
        assert_eq!(counter_samples, snap.counters.len());
        let drops = samples(
            &scrape,
            "corestack_tcp_dropped_total",
            &[("reason", "checksum")],
        );
        assert_eq!(drops.len(), 1);
    }

    #[test]
    fn connections_are_labelled_by_4_tuple_and_state_in_base_units() {
        let scrape = parse(&render(&[fixture()]));
        let estab = [
            ("pid", "4242"),
            ("app", "2"),
            ("proto", "tcp"),
            ("state", "ESTAB"),
            ("local_ip", "10.0.0.2"),
            ("local_port", "7"),
            ("remote_ip", "10.0.0.1"),
            ("remote_port", "40000"),
        ];
        let one = |m: &str, l: &[(&str, &str)]| {
            let f = samples(&scrape, m, l);
            assert_eq!(f.len(), 1, "{m} {l:?}");
            value(f[0])
        };
        assert_eq!(one("corestack_tcp_conn_srtt_seconds", &estab), 125e-6);
        assert_eq!(one("corestack_tcp_conn_rto_seconds", &estab), 0.201);
        assert_eq!(one("corestack_tcp_conn_cwnd_bytes", &estab), 14480.0);
        assert_eq!(one("corestack_tcp_conn_ssthresh_bytes", &estab), 28960.0);
        assert_eq!(one("corestack_tcp_conn_in_flight_bytes", &estab), 2896.0);
        assert_eq!(one("corestack_tcp_conn_mss_bytes", &estab), 1448.0);
        assert_eq!(one("corestack_tcp_conn_retransmits_total", &estab), 3.0);
        assert_eq!(
            one("corestack_conn_received_bytes_total", &estab),
            (1u64 << 40) as f64
        );
        assert_eq!(one("corestack_conn_sent_bytes_total", &estab), 5000.0);
        // Infinite ssthresh: no sample (rather than a huge number).
        let other = [("remote_ip", "10.0.0.9"), ("remote_port", "41000")];
        assert!(samples(&scrape, "corestack_tcp_conn_ssthresh_bytes", &other).is_empty());
        assert_eq!(one("corestack_tcp_conn_cwnd_bytes", &other), 14480.0);
        // UDP: bytes only; the listener: counted, no per-socket series.
        let udp = [("proto", "udp"), ("state", "UNCONN"), ("app", "-")];
        assert_eq!(one("corestack_conn_received_bytes_total", &udp), 64.0);
        assert!(samples(&scrape, "corestack_tcp_conn_cwnd_bytes", &udp).is_empty());
        assert!(samples(
            &scrape,
            "corestack_conn_sent_bytes_total",
            &[("state", "LISTEN")]
        )
        .is_empty());
        assert_eq!(one("corestack_sockets", &[("state", "ESTAB")]), 2.0);
        assert_eq!(one("corestack_sockets", &[("state", "LISTEN")]), 1.0);
        assert_eq!(one("corestack_sockets", &[("proto", "udp")]), 1.0);
        // The application.
        let app = [("app", "2"), ("app_pid", "77"), ("name", "echo")];
        assert_eq!(one("corestack_app_commands_total", &app), 12.0);
        assert_eq!(one("corestack_apps", &[("pid", "4242")]), 1.0);
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut snap = fixture();
        if let Some(apps) = snap.apps.as_mut() {
            apps[0].name = "a\"b\\c\nd".into();
        }
        let text = render(&[snap]);
        assert!(
            text.contains(r#"name="a\"b\\c\nd"} 12"#),
            "{}",
            text.lines()
                .find(|l| l.starts_with("corestack_app_commands"))
                .unwrap_or("")
        );
        assert_eq!(escape_help("x\\y\nz"), r"x\\y\nz");
        assert!(text.lines().all(|l| !l.is_empty()));
    }

    #[test]
    fn two_engines_share_each_family_once() {
        let a = fixture();
        let mut b = fixture();
        b.pid = 5151;
        b.apps = None;
        let text = render(&[a, b]);
        assert_eq!(
            text.matches("# TYPE corestack_link_rx_frames_total ")
                .count(),
            1
        );
        let scrape = parse(&text);
        assert_eq!(
            samples(&scrape, "corestack_link_rx_frames_total", &[]).len(),
            2
        );
        assert_eq!(samples(&scrape, "corestack_apps", &[]).len(), 1);
    }

    #[test]
    fn counter_family_names() {
        assert_eq!(
            counter_family("rx_bytes"),
            ("corestack_link_rx_bytes_total".into(), None)
        );
        assert_eq!(
            counter_family("drop_tcp_backlog_full"),
            ("corestack_tcp_dropped_total".into(), Some("backlog_full"))
        );
        assert_eq!(
            counter_family("drop_ipv4_unsupported_proto"),
            (
                "corestack_ipv4_dropped_total".into(),
                Some("unsupported_proto")
            )
        );
        assert_eq!(
            counter_family("drop_no_route"),
            ("corestack_ipv4_dropped_total".into(), Some("no_route"))
        );
        assert_eq!(
            counter_family("timers_fired"),
            ("corestack_engine_timers_fired_total".into(), None)
        );
        assert_eq!(
            counter_family("tcp_retransmits"),
            ("corestack_tcp_retransmits_total".into(), None)
        );
    }

    #[test]
    fn help_comes_from_the_counters_doc_comments() {
        let docs: HashMap<&str, String> = corestack::Stats::docs()
            .map(|(n, d)| (n, doc_text(d)))
            .collect();
        assert_eq!(docs["rx_frames"], "Frames received from the port.");
        assert_eq!(
            docs["tcp_pmtu_reductions"],
            r#"Connections whose MSS went down after ICMP "fragmentation needed" (RFC 1191)."#
        );
        assert_eq!(
            doc_text("doc = \" a \\\"b\\\" \"\ndoc =\nr\" c\"\n"),
            r#"a "b" c"#
        );
        assert!(docs.values().all(|d| !d.is_empty() && !d.contains("doc =")));
        let text = render(&[fixture()]);
        assert!(
            text.contains("# HELP corestack_link_rx_frames_total Frames received from the port.\n")
        );
    }
}
