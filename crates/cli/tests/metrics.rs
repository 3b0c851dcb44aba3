//! Prometheus metrics (issue 15 item 3) end to end: `corestack run --metrics-listen` serves
//! `GET /metrics` on a kernel socket of the daemon while an application's connection carries
//! traffic; the exposition parses, shows that connection by its 4-tuple and state and the
//! application, and its counters agree with what `corestack stat` reads from the same segment
//! (between two scrapes); `corestack stat --prometheus` prints the same families.
//!
//! Needs root (namespaces, AF_XDP). Runs one test at a time (the lock in `common`).
//! Addresses 10.160.1.1 (Linux) and 10.160.1.2 (the daemon); namespaces `metl`/`metc`.

mod common;

use std::time::Duration;

use common::daemon::*;
use common::*;
use testkit::prom::{parse, samples, value};

const METRICS: &str = "127.0.0.1:9464";

/// `curl` in the daemon's namespace: (HTTP status, Content-Type, body).
fn get(pair: &Pair, path: &str) -> (u16, String, String) {
    let mut curl = pair.core.exec("curl");
    curl.args([
        "-sS",
        "--max-time",
        "5",
        "-o",
        "-",
        "-w",
        "\n%{http_code} %{content_type}",
        &format!("http://{METRICS}{path}"),
    ]);
    let out = stdout_of(
        &mut curl,
        &format!("curl {path} (scripts/setup.sh installs curl)"),
    );
    let text = String::from_utf8(out).expect("UTF-8 exposition");
    let (body, tail) = text.rsplit_once('\n').expect("curl's status line");
    let (code, ctype) = tail.split_once(' ').unwrap_or((tail, ""));
    (
        code.parse().expect("an HTTP status"),
        ctype.to_string(),
        format!("{body}\n"),
    )
}

fn one(scrape: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found = samples(scrape, metric, labels);
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    value(found[0])
}

/// `corestack stat --pid PID --all`: counter name -> value.
fn stat_counters(pid: u32) -> Vec<(String, u64)> {
    corestack_ok(&["stat", "--all", "--pid", &pid.to_string()])
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (name, v) = (w.next()?, w.next()?);
            Some((name.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn daemon_serves_metrics_that_match_its_segments() {
    let _lock = start();
    let pair = Pair::new("met", 160).expect("creating the namespaces");
    let sock = SocketPath::new("metrics");
    let mut daemon = Daemon::start(&pair, &sock, &["--metrics-listen", METRICS]);
    daemon.expect_line(
        &["metrics at http://127.0.0.1:9464/metrics"],
        Duration::from_secs(1),
        "the metrics address logged",
    );
    let dpid = daemon.pid();
    let mut echo = echo_app(&pair, &sock, 7000, &daemon);
    let assoc = daemon.assoc_of(echo.pid());
    // A Linux client keeps one connection busy (blocking, 1 ms apart) while we scrape.
    let client = Proc::spawn(
        "Linux ping-pong client",
        linux(
            &pair,
            &[
                "bench",
                "pingpong",
                "--tcp",
                "--block",
                "--gap-us",
                "1000",
                "--warmup",
                "0.2",
                "--duration",
                "3",
                "--target",
                &format!("{}:7000", pair.core_ip),
            ],
        ),
        None,
        Out::Text,
    );
    std::thread::sleep(Duration::from_millis(1200));

    let (code, ctype, first) = get(&pair, "/metrics");
    assert_eq!(code, 200, "{first}");
    assert_eq!(ctype, "text/plain; version=0.0.4; charset=utf-8");
    let stat = stat_counters(dpid);
    let (_, _, second) = get(&pair, "/metrics");
    let (a, b) = (parse(&first), parse(&second));
    let pid = dpid.to_string();

    // The counters agree with `corestack stat` reading the same segment, taken between them.
    let mut checked = 0;
    for (name, family) in [
        ("rx_frames", "corestack_link_rx_frames_total"),
        ("tx_frames", "corestack_link_tx_frames_total"),
        ("rx_bytes", "corestack_link_rx_bytes_total"),
        ("tcp_rx_segments", "corestack_tcp_rx_segments_total"),
        ("tcp_passive_opens", "corestack_tcp_passive_opens_total"),
    ] {
        let s = stat
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("stat printed no {name}: {stat:?}"))
            .1 as f64;
        let (va, vb) = (
            one(&a, family, &[("pid", &pid)]),
            one(&b, family, &[("pid", &pid)]),
        );
        assert!(
            va <= s && s <= vb,
            "{family}: scrape {va}, stat {s}, scrape {vb}"
        );
        checked += 1;
    }
    assert_eq!(checked, 5);
    assert!(one(&a, "corestack_link_rx_frames_total", &[("pid", &pid)]) > 100.0);
    assert!(one(&a, "corestack_tcp_passive_opens_total", &[("pid", &pid)]) >= 1.0);

    // The client's connection, by its 4-tuple and state, owned by the echo application.
    let app = assoc.to_string();
    let conn = [
        ("pid", pid.as_str()),
        ("app", app.as_str()),
        ("proto", "tcp"),
        ("state", "ESTAB"),
        ("local_ip", pair.core_ip.as_str()),
        ("local_port", "7000"),
        ("remote_ip", pair.linux_ip.as_str()),
    ];
    let srtt = one(&a, "corestack_tcp_conn_srtt_seconds", &conn);
    assert!(srtt > 0.0 && srtt < 0.1, "srtt {srtt} s");
    assert!(one(&a, "corestack_tcp_conn_mss_bytes", &conn) >= 536.0);
    assert!(one(&a, "corestack_tcp_conn_cwnd_bytes", &conn) > 0.0);
    let (rx_a, rx_b) = (
        one(&a, "corestack_conn_received_bytes_total", &conn),
        one(&b, "corestack_conn_received_bytes_total", &conn),
    );
    assert!(rx_a >= 64.0 && rx_b >= rx_a, "{rx_a} then {rx_b}");
    assert!(one(&a, "corestack_conn_sent_bytes_total", &conn) >= 64.0);
    assert_eq!(
        one(
            &a,
            "corestack_sockets",
            &[("proto", "tcp"), ("state", "LISTEN")]
        ),
        1.0
    );
    assert_eq!(one(&a, "corestack_apps", &[("pid", &pid)]), 1.0);
    let app_labels = [("app", app.as_str()), ("name", "corestack")];
    assert!(one(&a, "corestack_app_opens_total", &app_labels) >= 1.0);
    assert!(one(&a, "corestack_app_commands_total", &app_labels) >= 1.0);

    // Elsewhere: 404; and `stat --prometheus` prints the same families.
    let (code, _, body) = get(&pair, "/");
    assert_eq!(code, 404, "{body}");
    let printed = parse(&corestack_ok(&["stat", "--prometheus", "--pid", &pid]));
    let families = |s: &prometheus_parse::Scrape| {
        let mut f: Vec<String> = s.docs.keys().cloned().collect();
        f.sort();
        f
    };
    assert_eq!(families(&printed), families(&a));

    let client = client.finish(Duration::from_secs(10));
    client.assert_success("the ping-pong client", String::new);
    drop(echo);
    daemon.stop_cleanly();
}
