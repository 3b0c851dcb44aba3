//! Hostile input from the peer namespace: a corestack echo server (AF_XDP on a veth) under a
//! bounded SYN flood, blind attacks on an established connection, malformed frames and odd
//! windows, each sent with scapy (`tests/common/hostile.py`) as Ethernet frames on the Linux
//! end of the veth, to the server's MAC learnt with `ping` and `ip neigh`.
//!
//! After each, the engine must still serve (ping, a TCP echo and UDP echoes work) and its
//! counters, printed by `serve echo` at exit, must show the drops. Needs root and scapy (`pip
//! install scapy`; scripts/setup.sh installs it). Runs one test at a time (the lock in
//! `common`). Addresses 10.N.1.1 (Linux) and 10.N.1.2 (corestack), N = 110..=128.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::Duration;

use common::*;

/// The scapy script.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/common/hostile.py")
}

/// Panics with what to do when scapy is missing.
fn need_scapy() {
    let ok = Command::new("python3")
        .args(["-c", "import scapy"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "these tests send frames with scapy: `pip install scapy` (scripts/setup.sh does it)"
    );
}

/// A pair with a corestack echo server on port 7, up (answering ping), and its MAC.
struct Target {
    pair: Pair,
    server: Option<Proc>,
    mac: String,
    driver: Driver,
}

/// Which corestack driver the server uses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Driver {
    AfXdp,
    /// The TAP driver behind a Linux bridge: it sees every frame, where the AF_XDP steering
    /// program passes IPv4 frames too short to hold an IP header (< 34 bytes) to the kernel.
    Tap,
}

impl Target {
    fn new(net: u8) -> Target {
        Target::with(net, Driver::AfXdp)
    }

    fn with(net: u8, driver: Driver) -> Target {
        need_scapy();
        let (pair, args) = match driver {
            Driver::AfXdp => {
                let pair = Pair::new("t", net).expect("creating the namespaces");
                let args = pair.core_args();
                (pair, args)
            }
            Driver::Tap => {
                let pair = tap_pair(net);
                let args = tap_args(&pair);
                (pair, args)
            }
        };
        let server = echo_server(&pair.core, &args, 7);
        ping_until_up(&pair.linux, &pair.core_ip, 10);
        let neigh = pair
            .linux
            .run("ip", &["neigh", "show", &pair.core_ip, "dev", "vl"])
            .expect("ip neigh");
        let mac = neigh
            .split_whitespace()
            .skip_while(|w| *w != "lladdr")
            .nth(1)
            .unwrap_or_else(|| panic!("no MAC for {} in `ip neigh`: {neigh:?}", pair.core_ip))
            .to_string();
        Target {
            pair,
            server: Some(server),
            mac,
            driver,
        }
    }

    /// Runs `hostile.py MODE` in the Linux namespace; panics (with its stderr) unless it succeeds
    /// within `bound`.
    fn scapy(&self, mode: &str, extra: &[&str], bound: Duration) -> String {
        self.scapy_proc(mode, extra).finish_ok(bound)
    }

    fn scapy_proc(&self, mode: &str, extra: &[&str]) -> Proc {
        // Over TAP, frames are written straight into tap0 (corestack reads them): the Linux
        // bridge in between drops Ethernet frames too short to hold an IP header.
        let (ns, iface) = match self.driver {
            Driver::AfXdp => (&self.pair.linux, "vl"),
            Driver::Tap => (&self.pair.core, "tap0"),
        };
        let mut cmd = ns.exec("python3");
        cmd.arg(script())
            .arg(mode)
            .args(["--iface", iface, "--dst-mac", &self.mac])
            .args([
                "--dst-ip",
                &self.pair.core_ip,
                "--src-ip",
                &self.pair.linux_ip,
            ])
            .args(extra);
        Proc::spawn(&format!("hostile.py {mode}"), cmd, None, Out::Text)
    }

    /// Ping, a 64 KiB TCP echo and UDP echoes still work.
    fn still_serves(&self, after: &str) {
        let ip = &self.pair.core_ip;
        let out = self
            .pair
            .linux
            .run("ping", &["-c", "2", "-i", "0.2", "-W", "2", ip]);
        assert!(
            out.as_ref().is_ok_and(|o| o.contains("2 received")),
            "after {after}: ping failed: {out:?}; server stderr:\n{}",
            self.server_stderr()
        );
        let target = format!("{ip}:7");
        let cmd = corestack(
            &self.pair.linux,
            &[
                "bench",
                "transfer",
                "--target",
                &target,
                "--bytes",
                "65536",
                "--timeout",
                "20",
            ],
        );
        let f = Proc::spawn("bench transfer", cmd, None, Out::Text).finish(Duration::from_secs(30));
        assert!(
            f.status.success() && f.stdout.contains("equal"),
            "after {after}: TCP echo failed: {}{}",
            f.stdout,
            f.stderr
        );
        let r = kernel_pingpong(&self.pair.linux, "--udp", &target, 64, 0.3);
        assert!(
            r["round_trips"].as_u64().unwrap_or(0) >= 10,
            "after {after}: UDP echo failed: {r}"
        );
    }

    fn server_stderr(&self) -> String {
        self.server.as_ref().map(Proc::stderr).unwrap_or_default()
    }

    /// Stops the server and returns its counters (`name value` lines after `corestack
    /// statistics:`; counters at zero are not printed).
    fn stop(&mut self) -> HashMap<String, u64> {
        let server = self.server.take().expect("server running");
        let f = server.terminate().assert_success("serve echo", String::new);
        let (_, stats) = f
            .stdout
            .split_once("corestack statistics:")
            .unwrap_or_else(|| panic!("no statistics at exit: {}", f.stdout));
        stats
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((w.next()?.to_string(), w.next()?.parse().ok()?))
            })
            .collect()
    }
}

trait FinishOk {
    fn finish_ok(self, bound: Duration) -> String;
}

impl FinishOk for Proc {
    /// Waits (bounded) and asserts success; returns stdout.
    fn finish_ok(self, bound: Duration) -> String {
        self.finish(bound)
            .assert_success("hostile.py", String::new)
            .stdout
    }
}

fn counter(stats: &HashMap<String, u64>, name: &str) -> u64 {
    stats.get(name).copied().unwrap_or(0)
}

#[test]
fn echo_server_syn_flood_20k_linux_client_still_echoes_1mib() {
    let _lock = start();
    let mut t = Target::new(110);
    let subnet = "10.110.1";
    // 20 000 SYNs at 2 500/s: about 8 s.
    let flood = t.scapy_proc(
        "synflood",
        &[
            "--count",
            "20000",
            "--rate",
            "2500",
            "--subnet",
            subnet,
            "--max-seconds",
            "20",
            "--seed",
            "7",
        ],
    );
    thread::sleep(Duration::from_secs(2));
    // While the flood runs: a Linux client connects and echoes 1 MiB byte-exact.
    let target = format!("{}:7", t.pair.core_ip);
    let cmd = corestack(
        &t.pair.linux,
        &[
            "bench",
            "transfer",
            "--target",
            &target,
            "--bytes",
            "1048576",
            "--timeout",
            "30",
            "--json",
        ],
    );
    let f = Proc::spawn("bench transfer during the flood", cmd, None, Out::Text)
        .finish(Duration::from_secs(40));
    let flood_out = flood.finish_ok(Duration::from_secs(40));
    assert!(
        f.status.success() && f.stdout.contains("\"equal\":true"),
        "a Linux client could not echo 1 MiB during the SYN flood ({}): {}{}",
        f.status,
        f.stdout,
        f.stderr
    );
    eprintln!("{}", flood_out.trim());
    t.still_serves("the SYN flood");
    let stats = t.stop();
    eprintln!("{stats:?}");
    assert!(
        counter(&stats, "tcp_rx_segments") >= 20_000,
        "the server did not see the flood: {stats:?}"
    );
}

#[test]
fn established_connection_blind_rst_syn_data_keeps_echoing_exactly() {
    let _lock = start();
    let mut t = Target::new(111);
    let out = t.scapy(
        "blind",
        &["--count", "1000", "--sport", "45678", "--seed", "9"],
        Duration::from_secs(90),
    );
    eprintln!("{}", out.trim());
    t.still_serves("the blind attacks");
    let stats = t.stop();
    eprintln!("{stats:?}");
    assert_eq!(
        counter(&stats, "tcp_resets"),
        0,
        "a connection was reset by blind segments: {stats:?}"
    );
}

/// Sends 5 copies of a malformed frame of `kind`; the engine must keep serving and count them
/// under `drop_counter`.
fn malformed(net: u8, kind: &str, drop_counter: &str) {
    malformed_on(net, kind, drop_counter, Driver::AfXdp)
}

fn malformed_on(net: u8, kind: &str, drop_counter: &str, driver: Driver) {
    let _lock = start();
    let mut t = Target::with(net, driver);
    let out = t.scapy(
        "malformed",
        &["--kind", kind, "--copies", "5"],
        Duration::from_secs(30),
    );
    eprintln!("{}", out.trim());
    t.still_serves(kind);
    let stats = t.stop();
    assert!(
        counter(&stats, drop_counter) >= 5,
        "5 frames of kind {kind} were not counted under {drop_counter}: {stats:?}"
    );
}

#[test]
fn echo_server_bad_ip_checksum_dropped_and_counted() {
    malformed(112, "ip_checksum", "drop_ipv4_checksum");
}

#[test]
fn echo_server_bad_tcp_checksum_dropped_and_counted() {
    malformed(113, "tcp_checksum", "drop_tcp_checksum");
}

#[test]
fn echo_server_bad_udp_checksum_dropped_and_counted() {
    malformed(114, "udp_checksum", "drop_udp_checksum");
}

#[test]
fn echo_server_ip_total_length_past_frame_dropped_and_counted() {
    malformed(115, "ip_total_length", "drop_ipv4_malformed");
}

#[test]
fn echo_server_ip_ihl_below_5_dropped_and_counted() {
    malformed(116, "ip_ihl", "drop_ipv4_malformed");
}

#[test]
fn echo_server_tcp_data_offset_below_5_dropped_and_counted() {
    malformed(117, "tcp_offset_short", "drop_tcp_malformed");
}

#[test]
fn echo_server_tcp_data_offset_past_segment_dropped_and_counted() {
    malformed(118, "tcp_offset_long", "drop_tcp_malformed");
}

#[test]
fn echo_server_tcp_option_past_header_dropped_and_counted() {
    malformed(119, "tcp_options", "drop_tcp_malformed");
}

/// A 14-byte frame: an Ethernet header saying IPv4 and nothing after it. Over TAP (written into
/// tap0): with AF_XDP the steering program hands IPv4 frames under 34 bytes to the kernel, and
/// the Linux bridge in front of tap0 drops them too. (A frame shorter than
/// the Ethernet header cannot be sent: the kernel refuses packet-socket sends below 14 bytes on
/// Ethernet devices, so drop_eth_truncated cannot be reached from a veth peer.)
#[test]
fn tap_echo_server_ethernet_header_only_dropped_and_counted() {
    malformed_on(120, "eth_only", "drop_ipv4_malformed", Driver::Tap);
}

/// Ethernet and the first 10 bytes of an IP header (written into tap0, as above).
#[test]
fn tap_echo_server_half_ip_header_dropped_and_counted() {
    malformed_on(121, "ip_half", "drop_ipv4_malformed", Driver::Tap);
}

#[test]
fn echo_server_half_arp_packet_dropped_and_counted() {
    malformed(122, "arp_half", "drop_arp_malformed");
}

/// A scapy TCP client (source 10.N.1.50, answering ARP itself) with an odd window: the echo
/// must come back whole, and the engine keep serving.
fn odd_window(net: u8, kind: &str) {
    let _lock = start();
    let mut t = Target::new(net);
    let fake = format!("10.{net}.1.50");
    let out = t.scapy(
        "window",
        &["--kind", kind, "--fake-ip", &fake],
        Duration::from_secs(40),
    );
    eprintln!("{}", out.trim());
    t.still_serves(&format!("a {kind} window"));
    let stats = t.stop();
    assert!(
        counter(&stats, "tcp_passive_opens") >= 2,
        "the scapy client's connection was not accepted: {stats:?}"
    );
}

#[test]
fn established_zero_window_echo_waits_then_arrives_whole() {
    odd_window(123, "zero");
}

#[test]
fn syn_with_wscale_14_huge_window_echo_arrives_whole() {
    odd_window(124, "huge");
}

#[test]
fn syn_with_wscale_255_is_clamped_echo_arrives_whole() {
    odd_window(125, "wscale255");
}
