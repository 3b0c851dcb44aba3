//! The impairment bridge between two veth pairs:
//! nsC [c] <-> [a] nsB (bridge) [b] <-> [s] nsS, pinged from nsC to nsS.
//! Root required: these tests fail, not skip, without it.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use nic::bridge::{self, BridgeStats};
use nic::impair::Impairments;

struct Lab {
    bridge_ns: Netns,
    _client_ns: Netns,
    _server_ns: Netns,
    envs: Vec<(&'static str, String)>,
}

/// Builds the three namespaces with static neighbours (no ARP, IPv6 off),
/// so the only frames crossing the bridge are the pings.
fn lab() -> Lab {
    require_root();
    let c = Netns::new("nicC");
    let b = Netns::new("nicB");
    let s = Netns::new("nicS");
    let (ci, ba, bb, si) = (unique("bc"), unique("ba"), unique("bb"), unique("bs"));
    veth_between(&c, &ci, &b, &ba);
    veth_between(&b, &bb, &s, &si);
    let net = format!("10.90.{}", std::process::id() % 250 + 1);
    c.exec(&format!("ip addr add {net}.1/24 dev {ci}"));
    s.exec(&format!("ip addr add {net}.2/24 dev {si}"));
    let cmac = c.exec(&format!("cat /sys/class/net/{ci}/address"));
    let smac = s.exec(&format!("cat /sys/class/net/{si}/address"));
    c.exec(&format!(
        "ip neigh replace {net}.2 lladdr {} dev {ci} nud permanent",
        smac.trim()
    ));
    s.exec(&format!(
        "ip neigh replace {net}.1 lladdr {} dev {si} nud permanent",
        cmac.trim()
    ));
    let envs = vec![
        ("NIC_BR_A", ba),
        ("NIC_BR_B", bb),
        ("NIC_CLIENT_NS", c.name.clone()),
        ("NIC_SERVER_IP", format!("{net}.2")),
    ];
    Lab {
        bridge_ns: b,
        _client_ns: c,
        _server_ns: s,
        envs,
    }
}

/// Inside the bridge namespace: runs the bridge with `a_to_b`/`b_to_a`
/// while nsC pings nsS with `ping_args`; returns ping's output and the
/// bridge's counters.
fn ping_through_bridge(
    a_to_b: Impairments,
    b_to_a: Impairments,
    seed: u64,
    ping_args: &str,
) -> (String, BridgeStats) {
    println!("bridge seed {seed}, a_to_b {a_to_b:?}, b_to_a {b_to_a:?}");
    let (if_a, if_b) = (env("NIC_BR_A"), env("NIC_BR_B"));
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let stop = stop.clone();
        std::thread::spawn(move || bridge::run(&if_a, &if_b, a_to_b, b_to_a, seed, &stop))
    };
    std::thread::sleep(Duration::from_millis(100));
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &env("NIC_CLIENT_NS"), "sh", "-c"])
        .arg(format!("ping {ping_args} {} || true", env("NIC_SERVER_IP")))
        .output()
        .expect("ping");
    stop.store(true, Ordering::Relaxed);
    let started = std::time::Instant::now();
    let stats = handle
        .join()
        .expect("bridge thread")
        .unwrap_or_else(|e| panic!("bridge: {e}"));
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "bridge took {:?} to stop",
        started.elapsed()
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}\n{stats:?}");
    (text, stats)
}

/// In the outer run of `test`: builds the lab, re-runs the test in its
/// bridge namespace and returns true (the caller returns); in the inner
/// run returns false.
fn reran_in_lab(test: &str) -> bool {
    if is_inner(test) {
        return false;
    }
    let lab = lab();
    run_inner(&lab.bridge_ns, test, &lab.envs);
    true
}

fn received(ping: &str) -> u32 {
    ping.lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(" transmitted, ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no summary in ping output: {ping}"))
}

#[test]
fn bridge_no_loss_all_pings_answered() {
    if reran_in_lab("bridge_no_loss_all_pings_answered") {
        return;
    }
    let (out, stats) = ping_through_bridge(
        Impairments::none(),
        Impairments::none(),
        1,
        "-c 20 -i 0.05 -W 1",
    );
    assert_eq!(received(&out), 20);
    assert_eq!(
        stats.a_to_b.pushed, 20,
        "only the echo requests cross a to b"
    );
    assert_eq!(stats.b_to_a.pushed, 20);
    assert_eq!(stats.send_errors, 0);
}

#[test]
fn bridge_half_loss_some_pings_lost() {
    if reran_in_lab("bridge_half_loss_some_pings_lost") {
        return;
    }
    let (out, stats) = ping_through_bridge(
        Impairments::loss(0.5),
        Impairments::none(),
        2,
        "-c 20 -i 0.05 -W 1",
    );
    let got = received(&out);
    // Binomial(20, 0.5): outside 3..=17 with probability 0.0004.
    assert!((3..=17).contains(&got), "{got} of 20 pings answered");
    assert_eq!(u64::from(got), 20 - stats.a_to_b.lost);
    assert_eq!(stats.b_to_a.lost, 0);
}

#[test]
fn bridge_delay_20ms_each_way_rtt_at_least_40ms() {
    if reran_in_lab("bridge_delay_20ms_each_way_rtt_at_least_40ms") {
        return;
    }
    let delay = Impairments {
        delay_ns: 20_000_000,
        ..Impairments::none()
    };
    let (out, _) = ping_through_bridge(delay, delay, 3, "-c 5 -i 0.1 -W 1");
    assert_eq!(received(&out), 5);
    let min_ms: f64 = out
        .lines()
        .find_map(|l| l.split_once("= ")?.1.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no rtt line: {out}"));
    assert!((40.0..80.0).contains(&min_ms), "min rtt {min_ms} ms");
}
