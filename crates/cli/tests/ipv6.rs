//! IPv6 against the Linux stack in network namespaces each test creates (issue 25): `ping -6`
//! to corestack, 100 MiB TCP transfers both ways over IPv6 with `nc`, UDP echo over IPv6, and a
//! dual-stack `serve echo` answering IPv4 and IPv6 clients. They need root (but the `ss` and
//! `stat` test, on a `mem` wire).
//!
//! Addresses (unique local, RFC 4193, only inside these namespaces): fd00:N::1/64 is Linux
//! (added with `nodad`: Duplicate Address Detection would hold it back), fd00:N::2/64 is
//! corestack, next to 10.N.1.1 / 10.N.1.2. The namespaces start with IPv6 disabled; it is
//! turned on for Linux's end only (corestack's end of the veth is not the kernel's).

mod common;

use std::net::{Ipv6Addr, SocketAddrV6};
use std::time::{Duration, Instant};

use common::*;
use corestack::{TcpListener, TcpStream};
use testkit::mem_wire::{stacks_v6, B6};

const TIMEOUT: Duration = Duration::from_secs(180);

#[test]
fn afxdp_ipv6_ping6_and_udp_echo_from_linux() {
    let _lock = start();
    let pair = Pair::new("s6", 230).expect("creating the namespaces");
    let (args, ip6) = dual_stack(&pair, 230);
    let mut server = echo_server(&pair.core, &args, 7);
    ping6_until_up(&pair, &ip6, 10);
    let out = pair
        .linux
        .run("ping", &["-6", "-c", "5", "-i", "0.2", "-W", "2", &ip6]);
    let out = out.unwrap_or_else(|e| panic!("ping -6 failed: {e}; server:\n{}", server.stderr()));
    assert!(out.contains("5 received"), "{out}");
    // UDP echo over IPv6, and over IPv4 to the same [::] socket.
    for target in [ip6.as_str(), pair.core_ip.as_str()] {
        let ok = udp_echoes(&pair.linux, target);
        assert!(ok >= 19, "only {ok} of 20 UDP echoes from {target}");
    }
    // TCP to the dual-stack listener over both families.
    for target in [ip6.as_str(), pair.core_ip.as_str()] {
        let out = pair
            .linux
            .run("python3", &["-c", TCP_ECHO_64K, target, "7"])
            .unwrap_or_else(|e| panic!("TCP echo to {target}: {e}; server:\n{}", server.stderr()));
        assert!(out.starts_with("True"), "TCP echo to {target}: {out}");
    }
    // `corestack ss` shows the dual-stack listener with its IPv6 address.
    let ss = corestack_out(&["ss", "--pid", &server.pid().to_string()]);
    assert!(
        ss.lines()
            .any(|l| l.contains("LISTEN") && l.contains("[::]:7")),
        "no [::]:7 listener in corestack ss:\n{ss}"
    );
    drop(server);
}

#[test]
fn afxdp_ipv6_linux_nc_to_corestack_100mib_sha256_equal() {
    let _lock = start();
    let pair = Pair::new("s6", 231).expect("creating the namespaces");
    let (args, ip6) = dual_stack(&pair, 231);
    let mut srv = corestack(&pair.core, &["nc", "-l", "5011"]);
    srv.args(&args);
    let mut server = Proc::spawn("corestack nc -l", srv, None, Out::Hash);
    server.wait_stderr("listening on", Duration::from_secs(30));
    ping6_until_up(&pair, &ip6, 10);
    let mut cli = pair.linux.exec("nc");
    cli.args(["-6", "-N", &ip6, "5011"]);
    check_transfer(
        cli,
        server,
        TRANSFER_BYTES,
        TIMEOUT,
        (["linux nc -6", "corestack nc -l"], "corestack"),
    );
}

#[test]
fn afxdp_ipv6_corestack_nc_to_linux_100mib_sha256_equal() {
    let _lock = start();
    let pair = Pair::new("s6", 232).expect("creating the namespaces");
    let (args, _ip6) = dual_stack(&pair, 232);
    let mut srv = pair.linux.exec("nc");
    srv.args(["-6", "-l", "5012"]);
    let server = Proc::spawn("linux nc -6 -l", srv, None, Out::Hash);
    wait_kernel_listen(&pair.linux, 5012);
    let mut cli = corestack(&pair.core, &["nc"]);
    cli.args(&args).args(["fd00:232::1", "5012"]);
    check_transfer(
        cli,
        server,
        TRANSFER_BYTES,
        TIMEOUT,
        (["corestack nc", "linux nc -6 -l"], "Linux"),
    );
}

/// `corestack ss` and `corestack stat` of a process whose two dual-stack stacks (a `mem` wire,
/// no root) hold an IPv6 connection: ss shows the connection with both IPv6 addresses, stat
/// the IPv6 and Neighbor Discovery counters. (Two stacks in one process: the tools read one of
/// them, either end of the connection; the `[::]` listener is checked in
/// `afxdp_ipv6_ping6_and_udp_echo_from_linux`.)
#[test]
fn ss_and_stat_show_an_ipv6_connection_and_ipv6_counters() {
    let (a, b) = stacks_v6(false);
    let mut l = TcpListener::bind(&b, SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 7, 0, 0)).unwrap();
    let c = TcpStream::connect(&a, SocketAddrV6::new(B6, 7, 0, 0)).unwrap();
    let (s, _) = l.accept().unwrap();
    let tool = |what: &str| corestack_ok(&[what, "--pid", &std::process::id().to_string()]);
    // The segments are published every few ms: poll (bounded).
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut ss, mut stat);
    loop {
        (ss, stat) = (tool("ss"), tool("stat"));
        let conn = ss.lines().any(|l| {
            l.contains("ESTAB") && l.contains("[fd00:1::2]:7") && l.contains("[fd00:1::1]:")
        });
        let counters = ["ipv6_rx", "nd_"].iter().all(|k| {
            stat.lines().any(|l| {
                l.trim_start().starts_with(k)
                    && l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                        > Some(0)
            })
        });
        if conn && counters {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no IPv6 connection in ss or no IPv6 counters in stat:\n{ss}\n{stat}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop((c, s, l));
}
