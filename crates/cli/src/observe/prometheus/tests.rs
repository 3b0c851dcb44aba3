use super::*;
use testkit::prom::{parse, samples, value};

/// Families every exposition of an engine with a TCP connection, a UDP
/// socket, a listener and an application holds. Renaming or dropping one
/// breaks dashboards: this list changes only with a note in docs/observability.md.
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
        engine: None,
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
fn several_engines_of_a_process_are_labelled_by_engine() {
    let mut e0 = fixture();
    e0.engine = Some(0);
    let mut e1 = fixture();
    e1.engine = Some(1);
    e1.apps = None;
    for (_, v) in e1.counters.iter_mut() {
        *v += 1;
    }
    let text = render(&[e0.clone(), e1.clone()]);
    let scrape = parse(&text);
    // Each engine's counters, by engine: one sample each, its own value.
    for (snap, engine) in [(&e0, "0"), (&e1, "1")] {
        for &(name, v) in &snap.counters {
            let (family, reason) = counter_family(name);
            let mut labels = vec![("pid", "4242"), ("engine", engine)];
            if let Some(r) = reason {
                labels.push(("reason", r));
            }
            let found = samples(&scrape, &family, &labels);
            assert_eq!(found.len(), 1, "{name} of engine {engine}");
            assert_eq!(value(found[0]), v as f64, "{name} of engine {engine}");
        }
    }
    let handoff = samples(&scrape, "corestack_engine_handoff_rx_total", &[]);
    assert_eq!(handoff.len(), 2, "one sample per engine, no total");
    // Sockets and connections too; the applications are the process's.
    let estab = [
        ("engine", "1"),
        ("state", "ESTAB"),
        ("remote_port", "40000"),
    ];
    assert_eq!(
        samples(&scrape, "corestack_tcp_conn_cwnd_bytes", &estab).len(),
        1
    );
    assert_eq!(
        samples(&scrape, "corestack_sockets", &[("engine", "0")]).len(),
        3
    );
    assert_eq!(samples(&scrape, "corestack_apps", &[]).len(), 1);
    assert!(samples(&scrape, "corestack_apps", &[("engine", "0")]).is_empty());
    // A one-engine process: no engine label anywhere.
    assert!(!render(&[fixture()]).contains("engine=\""));
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
        r#"Connections whose MSS went down after ICMP "fragmentation needed" (RFC 1191) or "packet too big" (RFC 8201), or to a smaller path MTU another connection to the same destination learned."#
    );
    assert_eq!(
        doc_text("doc = \" a \\\"b\\\" \"\ndoc =\nr\" c\"\n"),
        r#"a "b" c"#
    );
    assert!(docs.values().all(|d| !d.is_empty() && !d.contains("doc =")));
    let text = render(&[fixture()]);
    assert!(text.contains("# HELP corestack_link_rx_frames_total Frames received from the port.\n"));
}
