//! End-to-end tests of the `corestack` binary against the Linux stack, in network namespaces
//! each test creates (and removes, also on failure). They need root: without it they fail with a
//! message saying so. They run one at a time (a lock), since corestack spins a core.
//!
//! Addresses: 10.N.1.1 is Linux, 10.N.1.2 is corestack, N differs per test.

mod common;

use std::time::Duration;

use common::*;

/// Impairments for the lossy-link tests: 1% loss and 1% reordering each way, fixed seed.
const IMPAIR: &[&str] = &["--loss", "1", "--reorder", "1", "--seed", "42"];
const CLEAN_TIMEOUT: Duration = Duration::from_secs(120);
const IMPAIRED_TIMEOUT: Duration = Duration::from_secs(240);

#[test]
fn afxdp_echo_server_ping_from_linux_gets_every_reply() {
    let _lock = start();
    let pair = Pair::new("t", 80).expect("creating the namespaces");
    let server = echo_server(&pair.core, &pair.core_args(), 7);
    let out = pair
        .linux
        .run("ping", &["-c", "5", "-i", "0.2", "-W", "2", &pair.core_ip]);
    let out =
        out.unwrap_or_else(|e| panic!("ping failed: {e}; server stderr:\n{}", server.stderr()));
    assert!(out.contains("5 received"), "{out}");
    let f = server.terminate().assert_success("serve echo", String::new);
    assert!(
        f.stdout.contains("corestack statistics"),
        "no statistics at exit: {}",
        f.stdout
    );
}

#[test]
fn afxdp_echo_server_udp_from_linux_client_echoes_every_datagram() {
    let _lock = start();
    let pair = Pair::new("t", 81).expect("creating the namespaces");
    let server = echo_server(&pair.core, &pair.core_args(), 7);
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    let target = format!("{}:7", pair.core_ip);
    for size in [64, 1400] {
        let r = kernel_pingpong(&pair.linux, "--udp", &target, size, 1.0);
        let trips = r["round_trips"].as_u64().unwrap_or(0);
        assert!(
            trips >= 100,
            "only {trips} UDP round trips of {size} bytes in 1 s: {r}"
        );
        assert_eq!(
            r["lost"].as_u64(),
            Some(0),
            "UDP echoes lost on a clean link: {r}"
        );
    }
    let r = kernel_pingpong(&pair.linux, "--tcp", &target, 64, 1.0);
    assert!(
        r["round_trips"].as_u64().unwrap_or(0) >= 100,
        "TCP ping-pong too slow: {r}"
    );
    drop(server);
}

#[test]
fn afxdp_nc_connect_to_closed_port_reports_econnrefused() {
    let _lock = start();
    let pair = Pair::new("t", 82).expect("creating the namespaces");
    let mut cmd = corestack(&pair.core, &["nc"]);
    cmd.args(pair.core_args())
        .args([pair.linux_ip.as_str(), "9"]);
    let f = Proc::spawn("corestack nc", cmd, None, Out::Text).finish(Duration::from_secs(30));
    assert!(
        !f.status.success(),
        "connect to a closed port succeeded: {}",
        f.stderr
    );
    assert!(
        f.stderr.contains("ECONNREFUSED"),
        "expected ECONNREFUSED, got: {}",
        f.stderr
    );
    assert!(
        f.stderr.starts_with("error: ") || f.stderr.contains("\nerror: "),
        "{}",
        f.stderr
    );
}

#[test]
fn afxdp_clean_link_linux_nc_to_corestack_100mib_sha256_equal() {
    let _lock = start();
    let pair = Pair::new("t", 83).expect("creating the namespaces");
    transfer_linux_to_corestack(&pair, &pair.core_args(), 5001, CLEAN_TIMEOUT);
}

#[test]
fn afxdp_clean_link_corestack_nc_to_linux_100mib_sha256_equal() {
    let _lock = start();
    let pair = Pair::new("t", 84).expect("creating the namespaces");
    transfer_corestack_to_linux(&pair, &pair.core_args(), 5002, CLEAN_TIMEOUT);
}

/// Runs `transfer` (100 MiB with `nc`, one way) through the impairment bridge with [`IMPAIR`]
/// (namespaces numbered `net`, `port`), then asserts that the bridge lost and reordered more
/// than 100 frames each.
fn transfer_over_lossy_link(net: u8, transfer: fn(&Pair, &[String], u16, Duration), port: u16) {
    let mut net = Impaired::new(net, IMPAIR);
    transfer(&net.pair, &net.pair.core_args(), port, IMPAIRED_TIMEOUT);
    let (lost, reordered) = net.stop_bridge();
    eprintln!("impairment bridge: lost {lost}, reordered {reordered}");
    assert!(
        lost > 100 && reordered > 100,
        "the link was not impaired: lost {lost}, reordered {reordered}"
    );
}

#[test]
fn afxdp_lossy_reordering_link_linux_nc_to_corestack_100mib_sha256_equal() {
    let _lock = start();
    transfer_over_lossy_link(85, transfer_linux_to_corestack, 5003);
}

#[test]
fn afxdp_lossy_reordering_link_corestack_nc_to_linux_100mib_sha256_equal() {
    let _lock = start();
    transfer_over_lossy_link(86, transfer_corestack_to_linux, 5004);
}

#[test]
fn tap_echo_server_ping_and_udp_from_linux_are_answered() {
    let _lock = start();
    let pair = tap_pair(87);
    let server = echo_server(&pair.core, &tap_args(&pair), 7);
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    let out = pair
        .linux
        .run("ping", &["-c", "3", "-i", "0.2", "-W", "2", &pair.core_ip]);
    let out =
        out.unwrap_or_else(|e| panic!("ping failed: {e}; server stderr:\n{}", server.stderr()));
    assert!(out.contains("3 received"), "{out}");
    let r = kernel_pingpong(
        &pair.linux,
        "--udp",
        &format!("{}:7", pair.core_ip),
        512,
        1.0,
    );
    assert!(
        r["round_trips"].as_u64().unwrap_or(0) >= 100,
        "tap UDP echo too slow: {r}"
    );
    assert_eq!(r["lost"].as_u64(), Some(0), "UDP echoes lost over tap: {r}");
}

#[test]
fn tap_clean_link_linux_nc_to_corestack_100mib_sha256_equal() {
    let _lock = start();
    let pair = tap_pair(88);
    transfer_linux_to_corestack(&pair, &tap_args(&pair), 5005, CLEAN_TIMEOUT);
}

#[test]
fn tap_clean_link_corestack_nc_to_linux_100mib_sha256_equal() {
    let _lock = start();
    let pair = tap_pair(89);
    transfer_corestack_to_linux(&pair, &tap_args(&pair), 5006, CLEAN_TIMEOUT);
}

/// CPU time (user + system) of process `pid` in clock ticks, from /proc.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("reading /proc stat");
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn afxdp_idle_echo_server_adaptive_sleeps_and_busy_spins_inline_and_embedded() {
    let _lock = start();
    let pair = Pair::new("t", 95).expect("creating the namespaces");
    // Inline mode: the waiting thread polls; embedded mode: the engine thread does.
    for (mode, poll, busy) in [
        ("inline", "adaptive", false),
        ("inline", "busy", true),
        ("embedded", "adaptive", false),
        ("embedded", "busy", true),
        ("embedded", "interrupt", false),
    ] {
        let mut args = pair.core_args();
        args.extend(["--poll", poll, "--mode", mode].map(String::from));
        let mut server = echo_server(&pair.core, &args, 7);
        ping_until_up(&pair.linux, &pair.core_ip, 10);
        let pid = server.pid();
        let before = cpu_ticks(pid);
        std::thread::sleep(std::time::Duration::from_secs(1));
        let used = cpu_ticks(pid) - before; // ticks of 10 ms
                                            // Still serving after an idle second.
        let out = pair
            .linux
            .run("ping", &["-c", "1", "-W", "2", &pair.core_ip]);
        assert!(
            out.is_ok_and(|o| o.contains("1 received")),
            "{mode} {poll}: ping after idle"
        );
        let f = server.terminate();
        assert!(f.status.success(), "{mode} {poll}: {}", f.stderr);
        if busy {
            assert!(
                used >= 60,
                "{mode}: busy polling used only {used} ticks of 100 in an idle second"
            );
        } else {
            assert!(
                used <= 25,
                "{mode}: {poll} polling used {used} ticks of 100 in an idle second"
            );
        }
    }
}

#[test]
fn afxdp_running_echo_server_counters_are_read_by_stat() {
    let _lock = start();
    let pair = Pair::new("t", 96).expect("creating the namespaces");
    let mut server = echo_server(&pair.core, &pair.core_args(), 7);
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    let out = pair
        .linux
        .run("ping", &["-c", "3", "-i", "0.2", "-W", "2", &pair.core_ip]);
    assert!(out.is_ok_and(|o| o.contains("3 received")), "ping");
    std::thread::sleep(std::time::Duration::from_millis(50)); // one publication period
    let pid = server.pid().to_string();
    let text = corestack_ok(&["stat", "--pid", &pid]);
    let replies: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("icmp_echo_replies_tx"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no echo reply counter in:\n{text}"));
    assert!(replies >= 3, "{replies} echo replies counted:\n{text}");
    // An open TCP connection from Linux shows in `corestack ss`.
    let mut nc = pair
        .linux
        .exec("nc")
        .args([pair.core_ip.as_str(), "7"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("starting nc");
    let mut established = String::new();
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        established = corestack_out(&["ss", "--pid", &pid]);
        if established.contains("ESTAB") {
            break;
        }
    }
    let _ = nc.kill();
    let _ = nc.wait();
    let listen = format!("{}:7", pair.core_ip);
    assert!(
        established
            .lines()
            .any(|l| l.contains("ESTAB") && l.contains(&listen)),
        "no established connection in ss:\n{established}"
    );
    assert!(
        established.contains("LISTEN"),
        "no listener in ss:\n{established}"
    );
    let f = server.terminate();
    assert!(f.status.success(), "{}", f.stderr);
    // The segment goes away with the engine.
    let gone = corestack_output(&["stat", "--pid", &pid]);
    assert!(
        !gone.status.success(),
        "stat still finds the stopped server"
    );
}
