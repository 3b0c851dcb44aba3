//! Many connections and short connections at rate, end to end against the Linux stack, in
//! network namespaces the tests create (and remove, also on failure). They need root.
//!
//! - conn-rate: every row (Linux and corestack servers, a corestack client) completes
//!   exchanges without a failure.
//! - 20 000 connections at once on one corestack echo server, each with a message in flight:
//!   every connection opens, every echo comes back byte-exact, and the NIC side drops nothing.

mod common;

use common::*;

#[test]
fn conn_rate_every_row_completes_exchanges_without_a_failure() {
    let _lock = start();
    let json = std::env::temp_dir().join(format!("cs-conn-rate-{}.json", std::process::id()));
    let json_arg = json.to_str().expect("a UTF-8 temporary path");
    let text = corestack_ok(&[
        "bench",
        "conn-rate",
        "--rounds",
        "1",
        "--seconds",
        "1",
        "--conns",
        "16",
        "--json",
        json_arg,
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON")).unwrap();
    let _ = std::fs::remove_file(&json);
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3, "{text}");
    for r in rows {
        let m = &r["median"];
        let rate = m["conns_per_s"].as_f64().unwrap_or(0.0);
        assert!(rate > 100.0, "{}: {rate} connections/s\n{text}", r["name"]);
        assert_eq!(
            m["failed"].as_u64(),
            Some(0),
            "{}: failures\n{text}",
            r["name"]
        );
    }
}

#[test]
fn twenty_thousand_connections_echo_byte_exact_and_the_nic_drops_nothing() {
    let _lock = start();
    let pair = Pair::new("t", 97).expect("creating the namespaces");
    // Two client processes of 10 000 connections, each from its own address (the
    // descriptor limit here is 20 000 a process).
    netns::addr_add(&pair.linux, "vl", "10.97.1.11/24").expect("a second client address");
    let mut args = pair.core_args();
    args.extend(
        [
            "--mode",
            "inline",
            "--poll",
            "busy",
            "--max-sockets",
            "20100",
            "--ring-bytes",
            "4096",
            "--ring-max-bytes",
            "4096",
        ]
        .map(String::from),
    );
    let mut server = echo_server(&pair.core, &args, 7);
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    let target = format!("{}:7", pair.core_ip);
    let sources = [Some("10.97.1.1"), Some("10.97.1.11")];
    let pid = server.pid();
    let trips = conn_clients(&pair.linux, &target, &sources, 10_000, 2, pid);
    let c = engine_counters(server.pid());
    let get = |k: &str| c.get(k).copied().unwrap_or(0);
    assert!(
        trips >= 20_000,
        "{trips} round trips over 20 000 connections"
    );
    assert_eq!(get("tcp_passive_opens"), 20_000, "{c:?}");
    for k in [
        "rx_ring_full",
        "rx_fill_empty",
        "rx_port_dropped",
        "tx_no_buffer",
    ] {
        assert_eq!(get(k), 0, "{k}: {c:?}");
    }
    eprintln!(
        "20 000 connections: {trips} round trips in 2 s, {} retransmissions, {} TLP probes",
        get("tcp_retransmits"),
        get("tcp_tlp_probes")
    );
    server.terminate();
}
