//! Service mode over IPv6 against Linux in namespaces (issue 25): `corestack run --ip
//! 10.N.1.2/24 --ip fd00:N::2/64` owns `vc`; an application (`corestack serve echo` with
//! CORESTACK_SOCKET) serves TCP echo on `[::]` to a Linux IPv6 client and an IPv4 client at
//! once and UDP echo over IPv6; another application (`corestack nc`) opens a connection to a
//! Linux IPv6 server; `corestack ss` and `stat` on the daemon show the IPv6 rows. The same
//! without root, over the `mem` port: `crates/service/tests/ipv6.rs`.
//!
//! Needs root (namespaces, AF_XDP). One test at a time (the lock in `common`); every child is
//! killed by PID on drop, every namespace deleted on drop, every wait bounded. Addresses:
//! 10.N.1.1 and fd00:N::1 (Linux), 10.N.1.2 and fd00:N::2 (the daemon), N = 236, 237.

mod common;

use std::time::Duration;

use common::daemon::*;
use common::*;

/// Python in the Linux namespace: one TCP connection to each address in argv at once, 64 KiB
/// echoed on each, interleaved; prints each connection's result and local address, then
/// "echoed", then holds the connections open for 30 s (for `ss`; the test kills it sooner).
const TCP_BOTH: &str = "import socket,sys,time\n\
    conns = [socket.create_connection((a, 7), timeout=10) for a in sys.argv[1:]]\n\
    m = bytes(range(256)) * 256\n\
    for c in conns: c.sendall(m)\n\
    for c in conns:\n\
    \x20   d = b''\n\
    \x20   while len(d) < len(m):\n\
    \x20       k = c.recv(65536)\n\
    \x20       if not k: break\n\
    \x20       d += k\n\
    \x20   print(d == m, c.getsockname()[0], flush=True)\n\
    print('echoed', flush=True)\n\
    time.sleep(30)\n";

/// Takes the suite's lock, makes the namespaces v6s/`net` and starts a dual-stack daemon on
/// them ([`dual_stack_daemon`], socket tag `tag`): the lock, the pair, the daemon's socket, the
/// daemon and its IPv6 address.
fn dual_stack_daemon_test(
    net: u8,
    tag: &str,
) -> (
    std::sync::MutexGuard<'static, ()>,
    Pair,
    SocketPath,
    Daemon,
    String,
) {
    let lock = start();
    let pair = Pair::new("v6s", net).expect("creating the namespaces");
    let (sock, daemon, core6) = dual_stack_daemon(&pair, net, tag);
    (lock, pair, sock, daemon, core6)
}

#[test]
fn service_app_echoes_on_dual_stack_listener_to_linux_ipv6_and_ipv4_and_udp6() {
    let (_lock, pair, sock, mut daemon, core6) = dual_stack_daemon_test(236, "v6echo");
    let mut app = echo_app(&pair, &sock, 7, &daemon);
    assert!(
        app.stdout().contains("listening on [::]:7"),
        "the echo app should serve [::] on a dual-stack daemon: {}",
        app.stdout()
    );
    ping6_until_up(&pair, &core6, 10);
    // TCP: one IPv6 and one IPv4 client at once.
    let mut py = pair.linux.exec("python3");
    py.args(["-c", TCP_BOTH, &core6, &pair.core_ip]);
    let mut tcp = Proc::spawn("Linux TCP clients (IPv6 and IPv4)", py, None, Out::Text);
    tcp.wait_stdout("echoed", Duration::from_secs(20));
    let out = tcp.stdout();
    assert!(
        out.contains("True fd00:236::1") && out.contains("True 10.236.1.1"),
        "both echoes byte-exact: {out}\napp: {}\ndaemon log:\n{}",
        app.stderr(),
        daemon.tail()
    );
    // While the two connections live, the daemon's `ss` shows them and the [::] listener (the
    // engine publishes its table now and then: ask again for up to 5 s).
    let app_pid = app.pid().to_string();
    type Row = (&'static str, fn(&str) -> bool);
    let wanted: [Row; 3] = [
        ("the [::]:7 listener", |l| {
            l.contains("LISTEN") && l.contains("[::]:7")
        }),
        ("the IPv6 connection", |l| {
            l.contains("ESTAB") && l.contains("[fd00:236::2]:7") && l.contains("[fd00:236::1]:")
        }),
        // The engine holds the IPv4 peer's connection as an IPv4 flow (the application sees
        // ::ffff:10.236.1.1).
        ("the IPv4 connection", |l| {
            l.contains("ESTAB") && l.contains("10.236.1.2:7") && l.contains("10.236.1.1:")
        }),
    ];
    let mut ss = String::new();
    for _ in 0..50 {
        ss = corestack_out(&["ss", "--pid", &daemon.pid().to_string()]);
        let rows: Vec<&str> = ss.lines().filter(|l| l.starts_with(&app_pid)).collect();
        if wanted.iter().all(|(_, f)| rows.iter().any(|l| f(l))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let rows: Vec<&str> = ss.lines().filter(|l| l.starts_with(&app_pid)).collect();
    for (what, f) in wanted {
        assert!(
            rows.iter().any(|l| f(l)),
            "no row of {what} of the app in the daemon's ss:\n{ss}"
        );
    }
    drop(tcp);
    // UDP over IPv6 (and IPv4) to the same [::] socket.
    for target in [core6.as_str(), pair.core_ip.as_str()] {
        let ok = udp_echoes(&pair.linux, target);
        assert!(
            ok >= 19,
            "only {ok} of 20 UDP echoes from {target}; daemon log:\n{}",
            daemon.tail()
        );
    }
    // The daemon's counters saw IPv6.
    let stat = corestack_out(&["stat", "--pid", &daemon.pid().to_string()]);
    let ipv6_rx: u64 = stat
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("ipv6_rx")).then(|| w.last().and_then(|n| n.parse().ok()))?
        })
        .unwrap_or(0);
    assert!(ipv6_rx > 0, "no ipv6_rx in the daemon's stat:\n{stat}");
    drop(app);
    daemon.stop_cleanly();
}

#[test]
fn service_app_connects_to_linux_ipv6_server_16mib_sha256_equal() {
    let (_lock, pair, sock, mut daemon, core6) = dual_stack_daemon_test(237, "v6open");
    ping6_until_up(&pair, &core6, 10);
    let mut srv = pair.linux.exec("nc");
    srv.args(["-6", "-l", "5013"]);
    let server = Proc::spawn("linux nc -6 -l", srv, None, Out::Hash);
    wait_kernel_listen(&pair.linux, 5013);
    let cli = app(&pair.core, &sock, &["nc", "fd00:237::1", "5013"]);
    check_transfer(
        cli,
        server,
        16 << 20,
        Duration::from_secs(60),
        (["corestack nc (service mode)", "linux nc -6 -l"], "Linux"),
    );
    let log = daemon.stop_cleanly();
    assert!(
        log.contains("application joined"),
        "the nc app should have joined the daemon:\n{log}"
    );
}

#[test]
fn service_ipv6_ports_need_the_grant_and_belong_to_one_app() {
    let (_lock, pair, sock, mut daemon, core6) = dual_stack_daemon_test(238, "v6ports");
    ping6_until_up(&pair, &core6, 10);
    let echo6 = |port: u16, what: &str| {
        let out = pair
            .linux
            .run("python3", &["-c", TCP_ECHO_64K, &core6, &port.to_string()])
            .unwrap_or_else(|e| panic!("{what}: {e}; daemon log:\n{}", daemon.tail()));
        assert!(out.starts_with("True"), "{what}: {out}");
    };
    // nobody's [::]:80 is refused (EACCES); root's is served over IPv6, nobody's [::]:8080
    // too; a second application on either port is refused.
    let (root80, nobody8080) =
        ports_need_root_and_belong_to_one_app(&pair, &sock, &daemon, "[::]:", |port, what| {
            echo6(port, &format!("{what} over IPv6"))
        });
    drop((root80, nobody8080));
    daemon.stop_cleanly();
}
