//! Several engines on a multi-queue NIC, end to end against the Linux stack: a 4-queue veth
//! in native XDP mode, `corestack serve echo --cores N` on one end, two Linux client
//! processes on the other. The kernel picks a sender's tx queue from a random per-socket
//! hash (veth has no XPS), so most frames land on an engine that does not own their flow
//! and are handed over. Needs root; the namespaces are removed also on failure.

mod common;

use std::time::Duration;

use common::shim::{need, preload};
use common::*;

/// `serve echo` with `args` (on `engines` engines) in `core` serves 256 echo connections from
/// two Linux processes of 128 each in `linux`: every connection opens, no TCP input runs off
/// its owner, nothing handed over is dropped, and every engine owns connections and received
/// frames from its own queue. Returns the running server, the round trips and the counters.
fn serve_256(
    core: &netns::Netns,
    linux: &netns::Netns,
    core_ip: &str,
    args: &[String],
    engines: usize,
) -> (Proc, u64, std::collections::HashMap<String, u64>) {
    let mut server = echo_server(core, args, 7);
    ping_until_up(linux, core_ip, 10);
    let target = format!("{core_ip}:7");
    let trips = conn_clients(linux, &target, &[None, None], 128, 2, server.pid());
    let c = assert_256_on_engines(server.pid(), trips, engines, String::new);
    (server, trips, c)
}

/// `engines` engines serve 256 echo connections from two Linux processes of 128 each.
fn echo_on_engines(engines: usize, net: u8) {
    let _lock = start();
    let pair = netns::Pair::with_queues("q", net, 4).expect("creating the namespaces");
    let mut args = pair.core_args();
    args.extend(["--cores", &engines.to_string(), "--mode", "embedded"].map(String::from));
    let (server, trips, c) = serve_256(&pair.core, &pair.linux, &pair.core_ip, &args, engines);
    let get = |k: &str| c.get(k).copied().unwrap_or(0);
    assert!(get("rx_foreign") > 0, "no frame needed a handoff: {c:?}");
    let queues = pair.core.rx_queue_packets("vc").expect("ethtool -S vc");
    let busy = queues.iter().filter(|&&n| n > 0).count();
    assert!(busy >= 2, "frames arrived on {busy} queue(s): {queues:?}");
    // veth has no RSS to program: the server says so, and frames are handed over.
    let said = server.stderr();
    assert!(
        said.contains("vc: RSS not programmed (vc has no programmable RSS)"),
        "no line on the NIC's RSS: {said}"
    );
    eprintln!(
        "{engines} engines: {trips} round trips in 2 s; frames per queue {queues:?}; {} handed over",
        get("handoff_tx")
    );
    server.terminate();
}

/// Two engines on a multi-queue TAP device (a queue each; the kernel picks a frame's queue by
/// its flow hash, so frames are handed over to their owner): 256 echo connections from two
/// Linux processes, every engine owns connections and reads frames from its own queue, no
/// TCP input off its owner. Before, `--driver tap` refused `--cores 2`.
#[test]
fn two_engines_echo_256_connections_over_a_multi_queue_tap() {
    let _lock = start();
    let pair = tap_pair_with(99, true);
    let mut args = tap_args(&pair);
    args.extend(["--cores", "2", "--mode", "embedded"].map(String::from));
    let (server, trips, c) = serve_256(&pair.core, &pair.linux, &pair.core_ip, &args, 2);
    let get = |k: &str| c.get(k).copied().unwrap_or(0);
    eprintln!(
        "multi-queue tap, 2 engines: {trips} round trips in 2 s; {} frames arrived at a non-owner",
        get("rx_foreign")
    );
    server.terminate();
}

#[test]
fn two_engines_echo_256_connections_over_a_four_queue_veth() {
    echo_on_engines(2, 92);
}

#[test]
fn four_engines_echo_256_connections_over_a_four_queue_veth() {
    echo_on_engines(4, 93);
}

/// memcached -t 4 under the shim (`corestack exec --cores 2`, embedded mode) on a 4-queue veth:
/// a Linux client sets and gets over 8 connections and checks every value; both engines
/// carry connections and no TCP input runs off its owner.
#[test]
fn shim_memcached_t4_on_two_engines_serves_every_get() {
    let _lock = start();
    need("memcached");
    need("python3");
    let pair = netns::Pair::with_queues("qm", 94, 4).expect("creating the namespaces");
    let mut cmd = pair.core.exec(bin());
    cmd.args(["exec", "--cores", "2", "--iface", "vc", "--ip"])
        .arg(format!("{}/24", pair.core_ip))
        .args(["--", "memcached"])
        .args(common::shim::memcached_args("4"))
        .env("CORESTACK_PRELOAD", preload())
        .env_remove("CORESTACK_SOCKET")
        .env_remove("LD_PRELOAD");
    let mut server = Proc::spawn("memcached -t 4 on 2 engines", cmd, None, Out::Text);
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    let c = common::shim::memcached_client(&pair.linux, &pair.core_ip, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(50));
    let counters = engine_counters(server.pid());
    let s = server.terminate();
    common::shim::assert_memcached_served(&c, &s, "");
    let get = |k: &str| counters.get(k).copied().unwrap_or(0);
    assert!(get("tcp_passive_opens") >= 8, "{counters:?}");
    assert!(get("handoff_rx") > 0, "{counters:?}");
    assert_eq!(get("owner_violations"), 0, "{counters:?}");
}

/// Two engines on a 4-queue veth behind the impairment bridge with 1 % loss each way: 128
/// Linux connections echo byte-exact through retransmissions, the bridge's frames spread over
/// the queues (by flow hash), no TCP input runs off its owner.
#[test]
fn two_engines_echo_through_one_percent_loss() {
    let _lock = start();
    let mut link = Impaired::with_queues(91, &["--loss", "1", "--seed", "11"], 4);
    let pair = &link.pair;
    let mut args = pair.core_args();
    args.extend(["--cores", "2", "--mode", "embedded"].map(String::from));
    let mut server = echo_server(&pair.core, &args, 7);
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    let target = format!("{}:7", pair.core_ip);
    let pid = server.pid();
    let trips = conn_clients(&pair.linux, &target, &[None], 128, 3, pid);
    assert!(trips >= 128, "{trips} round trips");
    std::thread::sleep(Duration::from_millis(50));
    let c = engine_counters(server.pid());
    let get = |k: &str| c.get(k).copied().unwrap_or(0);
    assert_eq!(get("owner_violations"), 0, "{c:?}");
    assert_eq!(get("handoff_dropped"), 0, "{c:?}");
    assert!(
        get("tcp_retransmits") > 0,
        "no retransmission through 1 % loss: {c:?}"
    );
    let queues = pair.core.rx_queue_packets("vc").expect("ethtool -S vc");
    assert!(
        queues.iter().filter(|&&n| n > 0).count() >= 2,
        "the bridge's frames arrived on one queue: {queues:?}"
    );
    server.terminate();
    let (lost, _) = link.stop_bridge();
    assert!(lost > 0, "the bridge lost nothing");
}
