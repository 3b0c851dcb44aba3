//! The sockets shim over IPv6 (issue 25): unmodified programs on a dual-stack corestack
//! (`corestack exec --ip 10.N.1.2/24 --ip fd00:N::2/64`), driven by Linux peers in the other
//! namespace. Needs root, python3 and curl (a missing one fails naming it).
//!
//! Addresses (unique local, RFC 4193, only inside these namespaces): fd00:N::1/64 is Linux
//! (added with `nodad`), fd00:N::2/64 is corestack, next to 10.N.1.1 / 10.N.1.2. IPv6 is
//! turned on in the Linux namespace only (corestack's end of the veth is not the kernel's).
//! Every process is started by the test and killed through a guard; every wait is bounded.

mod common;

use common::daemon;
use common::shim::{need, payload, plain, profile_dir, script, served, shimmed};
use common::*;
use std::process::Command;
use std::time::Duration;

/// The longest a step (a program's run) may take.
const STEP: Duration = Duration::from_secs(60);

/// A fresh pair of namespaces `p6`, `net`, with IPv6 on Linux's side: the pair, Linux's
/// IPv6 address and corestack's (fd00:N::1, fd00:N::2).
fn pair6(net: u8) -> (Pair, String, String) {
    let pair = Pair::new("p6", net).expect("creating the namespaces");
    let (linux6, core6) = linux_ipv6(&pair, net);
    (pair, linux6, core6)
}

/// `corestack exec --iface vc --ip CORE4/24 --ip CORE6/64 [--inline] -- program args` in
/// the core namespace.
fn shimmed6(pair: &Pair, core6: &str, inline: bool, program: &str, args: &[&str]) -> Command {
    let ips = [format!("{}/24", pair.core_ip), format!("{core6}/64")];
    shimmed(pair, &ips, inline, program, args)
}

/// `python3 -u tests/shim/NAME args` on Linux's side (the kernel stack), once it printed
/// `peer listening`.
fn linux_peer(pair: &Pair, name: &str, args: &[&str]) -> Proc {
    let py = script(name);
    let argv = [&["-u", py.to_str().unwrap()][..], args].concat();
    let mut peer = Proc::spawn(
        &format!("{name} (linux)"),
        plain(&pair.linux, "python3", &argv),
        None,
        Out::Text,
    );
    peer.wait_stdout("peer listening", STEP);
    peer
}

/// `python3 -u tests/shim/NAME args` under the shim (embedded mode, [`shimmed6`]), run to
/// its end.
fn shim_script6(pair: &Pair, core6: &str, name: &str, args: &[&str]) -> Finished {
    let py = script(name);
    let argv = [&["-u", py.to_str().unwrap()][..], args].concat();
    Proc::spawn(
        &format!("{name} (shim)"),
        shimmed6(pair, core6, false, "python3", &argv),
        None,
        Out::Text,
    )
    .finish(STEP)
}

/// Linux's link-local address on `vl`, once Duplicate Address Detection is done with it
/// (at most 10 s).
fn linux_link_local(pair: &Pair) -> String {
    for _ in 0..100 {
        let out = pair
            .linux
            .run(
                "ip",
                &["-6", "-o", "addr", "show", "dev", "vl", "scope", "link"],
            )
            .unwrap_or_default();
        if !out.contains("tentative") {
            let ll = out
                .split_whitespace()
                .skip_while(|w| *w != "inet6")
                .nth(1)
                .and_then(|a| a.split('/').next());
            if let Some(ll) = ll {
                return ll.to_string();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("Linux's link-local address on vl never left DAD");
}

/// python's http.server bound to `[::]` (dual-stack) under the shim, in embedded and in
/// inline mode, serves 2 MiB to `curl -6` and `curl -4` from Linux at the same time, three
/// rounds, byte-exact; its log names the IPv4 clients `::ffff:10.N.1.1` and the IPv6 ones by
/// their own address.
#[test]
fn shim6_dual_stack_http_server_serves_curl_6_and_curl_4_at_once_byte_exact() {
    let _lock = start();
    need("python3");
    need("curl");
    let (pair, linux6, core6) = pair6(217);
    let www = profile_dir().join("shim6-www");
    std::fs::create_dir_all(&www).expect("creating the web root");
    let data = payload(2 << 20, 0x2545_f491_4f6c_dd1d);
    std::fs::write(www.join("data.bin"), &data).expect("writing the file to serve");
    let www_s = www.to_str().unwrap();
    for (inline, port) in [(false, "8080"), (true, "8081")] {
        let mode = if inline { "inline" } else { "embedded" };
        let mut server = Proc::spawn(
            &format!("python3 -m http.server --bind :: (shim, {mode})"),
            shimmed6(
                &pair,
                &core6,
                inline,
                "python3",
                &[
                    "-u",
                    "-m",
                    "http.server",
                    port,
                    "--bind",
                    "::",
                    "--directory",
                    www_s,
                ],
            ),
            None,
            Out::Text,
        );
        server.wait_stdout("Serving HTTP", STEP);
        ping6_until_up(&pair, &core6, 10);
        for round in 0..3 {
            let mut fetches = Vec::new();
            for (flag, host) in [("-6", format!("[{core6}]")), ("-4", pair.core_ip.clone())] {
                let got = www.join(format!("got{flag}-{mode}-{round}.bin"));
                let _ = std::fs::remove_file(&got);
                let url = format!("http://{host}:{port}/data.bin");
                let cmd = plain(
                    &pair.linux,
                    "curl",
                    &[
                        flag,
                        "-sS",
                        "-m",
                        "30",
                        "-o",
                        got.to_str().unwrap(),
                        "-w",
                        "%{http_code} %{size_download}",
                        &url,
                    ],
                );
                let name = format!("linux curl {flag} ({mode}) round {round}");
                fetches.push((Proc::spawn(&name, cmd, None, Out::Text), got, name));
            }
            for (p, got, name) in fetches {
                let f = p.finish(STEP);
                assert!(
                    f.status.success() && f.stdout.starts_with("200"),
                    "{name}: {} {}\nstderr: {}\nserver:\n{}",
                    f.status,
                    f.stdout,
                    f.stderr,
                    server.stderr()
                );
                assert!(
                    std::fs::read(&got).ok().as_deref() == Some(&data[..]),
                    "{name} got different bytes"
                );
            }
        }
        let log = server.stderr();
        assert!(
            log.contains(&format!("::ffff:{} ", pair.linux_ip)),
            "{mode}: the IPv4 clients are not logged as ::ffff:{}:\n{log}",
            pair.linux_ip
        );
        assert!(
            log.contains(&format!("{linux6} ")),
            "{mode}: the IPv6 clients are not logged as {linux6}:\n{log}"
        );
        drop(server.terminate());
    }
}

/// tests/shim/v6_shim.py under the shim against tests/shim/v6_peer.py on Linux: IPV6_V6ONLY
/// (default, EINVAL after bind, an AF_INET listener sharing the port of a V6ONLY one,
/// EADDRINUSE against a dual-stack one), v4-mapped peers and local addresses of `[::]`,
/// epoll on a dual-stack listener, IPV6_RECVPKTINFO / IPV6_PKTINFO on recvmsg and sendmsg,
/// IPV6_TCLASS, IPV6_UNICAST_HOPS, ENOPROTOOPT for others, connect to ::ffff:a.b.c.d, and
/// link-local peers (UDP and TCP, scope ids as the interface index).
#[test]
fn shim6_v6only_pktinfo_options_and_mapped_peers_behave_as_on_linux() {
    let _lock = start();
    need("python3");
    let (pair, linux6, core6) = pair6(218);
    let peer = linux_peer(&pair, "v6_peer.py", &["7100"]);
    let linux_ll = linux_link_local(&pair);
    let f = shim_script6(
        &pair,
        &core6,
        "v6_shim.py",
        &[
            &pair.core_ip,
            &core6,
            &pair.linux_ip,
            &linux6,
            "7100",
            "vc",
            &linux_ll,
        ],
    );
    f.assert_said("ALL OK", "v6_shim.py", || {
        format!("\npeer:\n{}{}", peer.stdout(), peer.stderr())
    });
    drop(peer.terminate());
}

/// Service mode (a `corestack run` daemon with 10.N.1.2/24 and fd00:N::2/64): under the shim
/// an AF_INET6 `[::]` listener without IPV6_V6ONLY serves an IPv4 client from Linux, which it
/// sees as `::ffff:10.N.1.1`, and an IPv6 one; a `[::]` listener with IPV6_V6ONLY serves IPv6
/// and refuses IPv4 (an AF_INET listener could share its port).
#[test]
fn shim6_service_mode_dual_stack_and_v6only_listeners_serve_as_on_linux() {
    need("python3");
    let _lock = start();
    let pair = Pair::new("p6", 219).expect("creating the namespaces");
    let (sock, daemon, core6) = daemon::dual_stack_daemon(&pair, 219, "v6svc");
    let linux6 = "fd00:219::1";
    let app = "import socket as S\n\
        V6 = S.IPPROTO_IPV6\n\
        def listener(port, v6only):\n\
        \x20   s = S.socket(S.AF_INET6, S.SOCK_STREAM)\n\
        \x20   s.setsockopt(V6, S.IPV6_V6ONLY, v6only)\n\
        \x20   s.bind(('::', port))\n\
        \x20   s.listen(8)\n\
        \x20   s.settimeout(20)\n\
        \x20   return s\n\
        only6 = listener(7201, 1)\n\
        dual = listener(7202, 0)\n\
        print('ready', flush=True)\n\
        for l in (dual, dual, only6):\n\
        \x20   c, peer = l.accept()\n\
        \x20   c.sendall(('%s %s' % (peer[0], c.getsockname()[0])).encode())\n\
        \x20   c.close()\n\
        print('served', flush=True)\n";
    let cmd = served(&pair, &sock, "python3", &["-u", "-c", app]);
    let mut p = Proc::spawn("python3 (service-mode shim)", cmd, None, Out::Text);
    p.wait_stdout("ready", STEP);
    ping6_until_up(&pair, &core6, 10);
    // One connection at a time, in the order the application accepts them.
    let client = "import socket,sys\n\
        for host, port in ((sys.argv[1], 7202), (sys.argv[2], 7202), (sys.argv[2], 7201)):\n\
        \x20   s = socket.create_connection((host, port), timeout=10)\n\
        \x20   d = b''\n\
        \x20   while True:\n\
        \x20       c = s.recv(128)\n\
        \x20       if not c: break\n\
        \x20       d += c\n\
        \x20   print(d.decode())\n\
        try:\n\
        \x20   socket.create_connection((sys.argv[1], 7201), timeout=5)\n\
        \x20   print('ipv4 to the V6ONLY port: connected')\n\
        except ConnectionRefusedError:\n\
        \x20   print('ipv4 to the V6ONLY port: refused')\n";
    let seen = pair
        .linux
        .run("python3", &["-c", client, &pair.core_ip, &core6])
        .unwrap_or_else(|e| panic!("Linux client: {e}; app:\n{}{}", p.stdout(), p.stderr()));
    let f = p.finish(STEP);
    let want = format!(
        "::ffff:{l4} ::ffff:{c4}\n{linux6} {core6}\n{linux6} {core6}\n\
         ipv4 to the V6ONLY port: refused",
        l4 = pair.linux_ip,
        c4 = pair.core_ip
    );
    assert_eq!(
        seen.trim(),
        want,
        "peers and local addresses as the application saw them; app:\n{}{}\ndaemon:\n{}",
        f.stdout,
        f.stderr,
        daemon.tail()
    );
    daemon.assert_no_panic();
}

/// IPV6_TCLASS and IPV6_UNICAST_HOPS under the shim reach the wire (tests/shim/v6_header.py
/// against tests/shim/v6_header_peer.py): UDP datagrams arrive with the class and hop limit
/// set after the socket exists (the peer reads them with IPV6_RECVTCLASS and
/// IPV6_RECVHOPLIMIT), a connection's data segments with those set before connect, and an
/// accepted connection's with those of its listener (read by tcpdump on Linux's end). The ECN
/// bits of the class are the engine's, so only the upper six are compared for TCP.
#[test]
fn shim6_traffic_class_and_hop_limit_reach_the_wire_for_udp_tcp_and_accepted() {
    let _lock = start();
    need("python3");
    need("tcpdump");
    let (pair, linux6, core6) = pair6(220);
    let (uport, tport, lport) = ("7301", "7302", "7303");
    let filter = format!("ip6 and tcp and src host {core6} and greater 300");
    let mut dump = Proc::spawn(
        "tcpdump (linux)",
        plain(
            &pair.linux,
            "timeout",
            &[
                "30", "tcpdump", "-i", "vl", "-nn", "-v", "-l", "-c", "6", &filter,
            ],
        ),
        None,
        Out::Text,
    );
    dump.wait_stderr("listening on", STEP);
    let peer = linux_peer(&pair, "v6_header_peer.py", &[&core6, uport, tport, lport]);
    let f = shim_script6(
        &pair,
        &core6,
        "v6_header.py",
        &[&linux6, uport, tport, lport],
    );
    let peer = peer.finish(STEP);
    let dump = dump.finish(STEP);
    let context = || {
        format!(
            "shim side:\n{}{}\npeer:\n{}{}\ntcpdump:\n{}{}",
            f.stdout, f.stderr, peer.stdout, peer.stderr, dump.stdout, dump.stderr
        )
    };
    assert!(
        f.status.success() && f.stdout.contains("done"),
        "{}",
        context()
    );
    let udp: Vec<&str> = peer
        .stdout
        .lines()
        .filter(|l| l.starts_with("udp "))
        .collect();
    assert!(
        udp.len() == 5 && udp.iter().all(|l| *l == "udp 184 9"),
        "UDP datagrams should arrive with class 0xb8 (184) and hop limit 9:\n{}",
        context()
    );
    // tcpdump -v: "IP6 (class 0x28, flowlabel 0x..., hlim 17, ...) SRC.PORT > DST.PORT: ...".
    let field = |line: &str, key: &str| -> Option<u32> {
        let v = line.split(key).nth(1)?.split([',', ')']).next()?.trim();
        match v.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    };
    let (mut active, mut accepted) = (0, 0);
    for line in dump.stdout.lines().filter(|l| l.contains("IP6")) {
        let class = field(line, "class ").unwrap_or(0) & 0xfc;
        let hlim = field(line, "hlim ");
        if line.contains(&format!("> {linux6}.{tport}:")) {
            assert_eq!((class, hlim), (0x28, Some(17)), "{line}\n{}", context());
            active += 1;
        } else if line.contains(&format!("{core6}.{lport} >")) {
            assert_eq!((class, hlim), (0x48, Some(33)), "{line}\n{}", context());
            accepted += 1;
        }
    }
    assert!(
        active >= 1 && accepted >= 1,
        "tcpdump saw {active} data segments of the connection and {accepted} of the \
         accepted one:\n{}",
        context()
    );
}
