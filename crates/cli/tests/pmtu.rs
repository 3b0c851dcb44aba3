//! Path MTU discovery through a Linux router (issue 35): RFC 8201 for IPv6, RFC 1191 for IPv4,
//! and RFC 4821's black-hole fallback where no ICMP comes.
//!
//! Three namespaces: Linux (`vl`) — router (`rl` | `rc`) — corestack (`vc`, AF_XDP).
//! - [`Path::Icmp`]: every device keeps its 1500-byte MTU, so neither end learns a smaller MSS
//!   from its own link; the router forwards at most 1280 bytes of IPv6 (`net.ipv6.conf.*.mtu`)
//!   and 1000 bytes of IPv4 (a locked route MTU) in both directions, and answers anything bigger
//!   with an ICMPv6 Packet Too Big or an ICMP Fragmentation Needed. 100 MiB go each way over
//!   each family, byte-exact, within a bound that a stalled connection cannot meet, and the
//!   router's own ICMP counters show it did send the errors (the path really was smaller). Then
//!   eight echo connections, all open before any data, each 1 MiB: the first Packet Too Big
//!   lowers the destination's path MTU, and the other seven must still shrink their segments.
//! - [`Path::BlackHole`]: the router's `rc` takes frames of at most 1280 (IPv6) or 1100 (IPv4)
//!   bytes and drops bigger ones without a word (a veth receiving over its MTU); corestack's own
//!   link says 1500. 100 MiB from corestack to Linux must still arrive.
//!
//! Addresses (only inside these namespaces): Linux 10.N.2.1 and fd00:N:2::1, the router
//! 10.N.2.254 / fd00:N:2::fe toward Linux and 10.N.1.1 / fd00:N:1::1 toward corestack, which
//! owns 10.N.1.2 and fd00:N:1::2 with the router as its gateway.

mod common;

use std::time::Duration;

use common::*;
use netns::{addr_add, veth_pair, Netns};

/// 100 MiB at a few hundred Mbit/s is well under this; a connection that stalls after the first
/// Packet Too Big never gets there.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The router's IPv6 MTU, the IPv6 minimum (RFC 8200 §5).
const MTU6: &str = "1280";
/// The router's IPv4 route MTU.
const MTU4: &str = "1000";

/// How the router's path is smaller than the ends' links.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    /// Forwarding MTUs of 1280 (IPv6) and 1000 (IPv4), with ICMP errors.
    Icmp,
    /// `rc`'s device MTU at `mtu`: bigger frames from corestack vanish.
    BlackHole { mtu: u32 },
}

struct Routed {
    linux: Netns,
    router: Netns,
    core: Netns,
    net: u8,
}

fn ip(ns: &Netns, args: &[&str]) {
    ns.run("ip", args)
        .unwrap_or_else(|e| panic!("ip {args:?} in {}: {e}", ns.name()));
}

fn sysctl(ns: &Netns, kv: &str) {
    ns.run("sysctl", &["-qw", kv])
        .unwrap_or_else(|e| panic!("sysctl {kv} in {}: {e}", ns.name()));
}

impl Routed {
    fn new(net: u8, path: Path) -> Routed {
        let linux = Netns::new("pl").expect("creating a namespace");
        let router = Netns::new("pr").expect("creating a namespace");
        let core = Netns::new("pc").expect("creating a namespace");
        veth_pair(&linux, "vl", &router, "rl").expect("creating a veth pair");
        veth_pair(&router, "rc", &core, "vc").expect("creating a veth pair");
        for (ns, ifs) in [(&linux, &["vl"][..]), (&router, &["rl", "rc"][..])] {
            sysctl(ns, "net.ipv6.conf.all.disable_ipv6=0");
            for i in ifs {
                sysctl(ns, &format!("net.ipv6.conf.{i}.disable_ipv6=0"));
            }
        }
        let add6 = |ns: &Netns, ifname: &str, cidr: &str| {
            ip(ns, &["-6", "addr", "add", cidr, "dev", ifname, "nodad"])
        };
        addr_add(&linux, "vl", &format!("10.{net}.2.1/24")).expect("address");
        add6(&linux, "vl", &format!("fd00:{net}:2::1/64"));
        ip(
            &linux,
            &["route", "add", "default", "via", &format!("10.{net}.2.254")],
        );
        ip(
            &linux,
            &[
                "-6",
                "route",
                "add",
                "default",
                "via",
                &format!("fd00:{net}:2::fe"),
            ],
        );
        addr_add(&router, "rl", &format!("10.{net}.2.254/24")).expect("address");
        addr_add(&router, "rc", &format!("10.{net}.1.1/24")).expect("address");
        add6(&router, "rl", &format!("fd00:{net}:2::fe/64"));
        add6(&router, "rc", &format!("fd00:{net}:1::1/64"));
        sysctl(&router, "net.ipv4.ip_forward=1");
        sysctl(&router, "net.ipv6.conf.all.forwarding=1");
        match path {
            Path::Icmp => {
                for (ifname, subnet) in [("rl", 2), ("rc", 1)] {
                    // IPv6: the interface's own MTU for IPv6, below the device's (forwarding
                    // uses it).
                    sysctl(&router, &format!("net.ipv6.conf.{ifname}.mtu={MTU6}"));
                    // IPv4: a locked route MTU, which forwarding honours (the DF bit is set).
                    let dst = format!("10.{net}.{subnet}.0/24");
                    ip(
                        &router,
                        &["route", "change", &dst, "dev", ifname, "mtu", "lock", MTU4],
                    );
                }
            }
            Path::BlackHole { mtu } => {
                ip(&router, &["link", "set", "rc", "mtu", &mtu.to_string()]);
            }
        }
        Routed {
            linux,
            router,
            core,
            net,
        }
    }

    /// corestack's options: both families, the router as gateway.
    fn core_args(&self) -> Vec<String> {
        let n = self.net;
        [
            "--iface".to_string(),
            "vc".to_string(),
            "--driver".to_string(),
            "af_xdp".to_string(),
            "--ip".to_string(),
            format!("10.{n}.1.2/24"),
            "--ip".to_string(),
            format!("fd00:{n}:1::2/64"),
            "--gateway".to_string(),
            format!("10.{n}.1.1"),
            "--gateway".to_string(),
            format!("fd00:{n}:1::1"),
        ]
        .to_vec()
    }

    /// The router's counter `name` from `/proc/net/snmp` (IPv4, `Icmp:` rows) or
    /// `/proc/net/snmp6`.
    fn router_counter(&self, name: &str) -> u64 {
        let snmp = self.router.run("cat", &["/proc/net/snmp"]).expect("snmp");
        let snmp6 = self.router.run("cat", &["/proc/net/snmp6"]).expect("snmp6");
        if let Some(v) = snmp6.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(name)).then(|| it.next()?.parse().ok())?
        }) {
            return v;
        }
        // /proc/net/snmp: a header row of names, then a row of values, per protocol.
        let lines: Vec<&str> = snmp.lines().collect();
        for w in lines.windows(2) {
            let (names, values) = (w[0], w[1]);
            if names.split(':').next() != values.split(':').next() {
                continue;
            }
            let names: Vec<&str> = names.split_whitespace().collect();
            let values: Vec<&str> = values.split_whitespace().collect();
            if let Some(i) = names.iter().position(|n| *n == name) {
                return values[i].parse().expect("a counter");
            }
        }
        panic!("no {name} in the router's counters");
    }
}

/// Linux `nc` → `corestack nc -l`, then `corestack nc` → Linux `nc -l`, to `core_ip` and
/// `linux_ip`: 100 MiB each way, byte-exact.
fn both_ways(r: &Routed, core_ip: &str, linux_ip: &str, port: u16) {
    let args = r.core_args();
    let mut srv = corestack(&r.core, &["nc", "-l", &port.to_string()]);
    srv.args(&args);
    let mut server = Proc::spawn("corestack nc -l", srv, None, Out::Hash);
    server.wait_stderr("listening on", Duration::from_secs(30));
    let mut cli = r.linux.exec("nc");
    cli.args(["-N", core_ip, &port.to_string()]);
    let names = (["linux nc", "corestack nc -l"], "corestack");
    check_transfer(cli, server, TRANSFER_BYTES, TIMEOUT, names);

    corestack_to_linux(r, linux_ip, port + 1);
}

/// `corestack nc` → Linux `nc -l` at `linux_ip`: 100 MiB, byte-exact.
fn corestack_to_linux(r: &Routed, linux_ip: &str, port: u16) {
    let mut srv = r.linux.exec("nc");
    // OpenBSD nc listens on IPv4 alone unless told -6.
    let family = if linux_ip.contains(':') { "-6" } else { "-4" };
    srv.args([family, "-l", &port.to_string()]);
    let server = Proc::spawn("linux nc -l", srv, None, Out::Hash);
    wait_kernel_listen(&r.linux, port);
    let mut cli = corestack(&r.core, &["nc"]);
    cli.args(r.core_args()).args([linux_ip, &port.to_string()]);
    let names = (["corestack nc", "linux nc -l"], "Linux");
    check_transfer(cli, server, TRANSFER_BYTES, TIMEOUT, names);
}

/// The router's count of frames `ifname` dropped on receipt.
fn rx_dropped(r: &Routed, ifname: &str) -> u64 {
    let path = format!("/sys/class/net/{ifname}/statistics/rx_dropped");
    let v = r.router.run("cat", &[&path]).expect("rx_dropped");
    v.trim().parse().expect("a counter")
}

/// Eight connections from Linux to `corestack serve echo` at `core_ip`, all open before any
/// data, each echoing 1 MiB: every one must come back byte-exact within 60 s.
fn concurrent_echo(r: &Routed, core_ip: &str) {
    let server = echo_server(&r.core, &r.core_args(), 7);
    let out = r
        .linux
        .run(
            "timeout",
            &[
                "60", "python3", "-c", ECHO_MANY, core_ip, "7", "8", "1048576",
            ],
        )
        .unwrap_or_else(|e| panic!("echo through the router: {e}; server:\n{}", server.stderr()));
    assert!(out.starts_with("ALL OK"), "echo through the router: {out}");
    drop(server);
}

/// `python3 -c ECHO_MANY HOST PORT N BYTES`: opens N connections, then on each sends BYTES
/// (a thread each) while reading them back; prints "ALL OK" when every echo is equal, else how
/// many bytes each got back.
const ECHO_MANY: &str = "import socket,sys,threading\n\
    h, p, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])\n\
    cs = [socket.create_connection((h, p), timeout=50) for _ in range(n)]\n\
    m = bytes(range(256)) * (size // 256)\n\
    got = {}\n\
    def run(i, c):\n\
    \x20   threading.Thread(target=c.sendall, args=(m,), daemon=True).start()\n\
    \x20   d = bytearray()\n\
    \x20   try:\n\
    \x20       while len(d) < len(m):\n\
    \x20           k = c.recv(65536)\n\
    \x20           if not k: break\n\
    \x20           d += k\n\
    \x20   except OSError:\n\
    \x20       pass\n\
    \x20   got[i] = bytes(d) == m and len(d)\n\
    ts = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(cs)]\n\
    [t.start() for t in ts]\n\
    [t.join() for t in ts]\n\
    print('ALL OK' if all(got.get(i) for i in range(n)) else got)\n";

#[test]
fn ipv6_packet_too_big_from_a_1280_router_100mib_both_ways_and_eight_echoes() {
    let _lock = start();
    let r = Routed::new(241, Path::Icmp);
    let (core6, linux6) = ("fd00:241:1::2", "fd00:241:2::1");
    let before = r.router_counter("Icmp6OutPktTooBigs");
    both_ways(&r, core6, linux6, 5101);
    let sent = r.router_counter("Icmp6OutPktTooBigs") - before;
    assert!(
        sent > 0,
        "the router sent no Packet Too Big: the path was not smaller"
    );
    // Linux remembers the path MTU it learned on the way in: forget it, so its SYNs offer the
    // full MSS again and corestack's echoes start at the link's size.
    ip(&r.linux, &["-6", "route", "flush", "cache"]);
    concurrent_echo(&r, core6);
}

#[test]
fn ipv4_fragmentation_needed_from_a_1000_router_100mib_both_ways_and_eight_echoes() {
    let _lock = start();
    let r = Routed::new(242, Path::Icmp);
    let before = r.router_counter("OutDestUnreachs");
    both_ways(&r, "10.242.1.2", "10.242.2.1", 5103);
    let sent = r.router_counter("OutDestUnreachs") - before;
    assert!(
        sent > 0,
        "the router sent no Fragmentation Needed: the path was not smaller"
    );
    ip(&r.linux, &["route", "flush", "cache"]);
    concurrent_echo(&r, "10.242.1.2");
}

/// corestack → Linux, 100 MiB, through a router that drops corestack's full-size frames
/// without ICMP: corestack's black-hole fallback (RFC 4821 §7.7) must carry it.
fn through_black_hole(net: u8, mtu: u32, linux_ip: &str, port: u16) {
    let r = Routed::new(net, Path::BlackHole { mtu });
    corestack_to_linux(&r, linux_ip, port);
    assert!(
        rx_dropped(&r, "rc") > 0,
        "the router dropped nothing: there was no black hole"
    );
}

#[test]
fn ipv6_black_hole_without_packet_too_big_100mib() {
    let _lock = start();
    through_black_hole(243, 1280, "fd00:243:2::1", 5105);
}

#[test]
fn ipv4_black_hole_without_fragmentation_needed_100mib() {
    let _lock = start();
    through_black_hole(244, 1100, "10.244.2.1", 5106);
}
