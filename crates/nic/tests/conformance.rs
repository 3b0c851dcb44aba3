//! The conformance suite, run against every port: mem (always; one queue
//! per end, and several), tap and af_xdp in namespaces the tests create
//! (root required: those tests fail, not skip, without it).
//!
//! Namespace tests re-run themselves inside the namespace that holds the
//! port (`ip netns exec NS <this test binary> <test> --exact`), so the port
//! never touches the host's interfaces. The Linux side of each link sits in
//! a second namespace with a 10.x address.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;
use std::time::Duration;

use common::alloc::CountingAlloc;
use common::conformance::{
    arp_request_gets_reply, check_identity, receive_matching, send_test_frames,
};
use common::*;
use nic::af_xdp::{AfXdpConfig, AfXdpPort, TxPath, XdpMode};
use nic::impair::Impairments;
use nic::mem;
use nic::tap::TapPort;
use nic::{ErrorKind, Port, TxQueue};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// A per-process /24 in 10.x, so parallel runs do not share addresses.
fn subnet(salt: u32) -> [u8; 3] {
    let pid = std::process::id();
    [10, 100 + (salt % 50) as u8, (pid % 250) as u8 + 1]
}

fn ip(net: [u8; 3], host: u8) -> [u8; 4] {
    [net[0], net[1], net[2], host]
}

fn ip_str(a: [u8; 4]) -> String {
    Ipv4Addr::from(a).to_string()
}

// ---------------------------------------------------------------- mem

/// Answers ARP requests for `ip` on `port` (a simulated peer stack).
fn arp_responder(port: &mut mem::MemPort, ip: [u8; 4]) {
    let mac = port.mac();
    port.rx_burst(64, |frame, tx| {
        if let Some((from_mac, from_ip)) = arp_request_for(frame, ip) {
            tx.transmit(64, |buf| arp_reply(buf, mac, ip, from_mac, from_ip));
        }
    });
    port.tx().flush();
}

#[test]
fn mem_pair_identity_matches_defaults() {
    let (a, b) = mem::pair(Impairments::none(), Impairments::none(), 1);
    check_identity(&a, 1500);
    check_identity(&b, 1500);
    assert_eq!(a.mac(), mem::MAC_A);
    assert_eq!(b.mac(), mem::MAC_B);
    assert!(a.rx_fd().is_none());
}

#[test]
fn mem_arp_request_gets_reply() {
    let (mut a, mut b) = mem::pair(Impairments::none(), Impairments::none(), 2);
    let peer = [10, 0, 0, 2];
    let mac = arp_request_gets_reply(&mut a, [10, 0, 0, 1], peer, &mut || {
        arp_responder(&mut b, peer)
    });
    assert_eq!(mac, mem::MAC_B);
}

#[test]
fn mem_more_frames_than_tx_slots_all_delivered_without_allocation() {
    let (mut a, mut b) = mem::pair(Impairments::none(), Impairments::none(), 3);
    let total = mem::MEM_TX_SLOTS as u32 * 4;
    let mut seen = vec![false; total as usize];
    let dst = b.mac();
    let allocs = {
        let seen = &mut seen;
        send_test_frames(&mut a, dst, total, 64, 100, &mut || {
            b.rx_burst(1024, |f, _| {
                if let Some(s) = test_frame_seq(f) {
                    if let Some(x) = seen.get_mut(s as usize) {
                        *x = true;
                    }
                }
            });
        })
    };
    assert_eq!(allocs, 0, "mem transmit/flush allocated");
    assert!(seen.iter().all(|s| *s), "some frames were not delivered");
}

#[test]
fn mem_full_tx_without_flush_refuses_transmit() {
    let (mut a, _b) = mem::pair(Impairments::none(), Impairments::none(), 4);
    for _ in 0..mem::MEM_TX_SLOTS {
        assert!(a.tx().transmit(60, |_| 60));
    }
    let mut called = false;
    assert!(!a.tx().transmit(60, |_| {
        called = true;
        60
    }));
    assert!(!called, "fill was called although no buffer was free");
    a.tx().flush();
    assert!(a.tx().transmit(60, |_| 60));
}

#[test]
fn mem_rx_burst_respects_max() {
    let (mut a, mut b) = mem::pair(Impairments::none(), Impairments::none(), 5);
    let dst = b.mac();
    let src = a.mac();
    for seq in 0..10 {
        a.tx()
            .transmit(64, |buf| test_frame(buf, dst, src, seq, 64));
    }
    a.tx().flush();
    let (n, allocs) = common::alloc::count_allocs(|| b.rx_burst(4, |_, _| {}));
    assert_eq!(n, 4);
    assert_eq!(allocs, 0, "mem rx_burst allocated");
    assert_eq!(b.rx_burst(100, |_, _| {}), 6);
    assert_eq!(b.rx_burst(100, |_, _| {}), 0);
}

// ------------------------------------------------- mem, several queues

/// A wire without impairments of `queues_a` queues on the first end and
/// `queues_b` on the second, both ends steering arriving frames by `steer`.
fn clean_multi(
    seed: u64,
    queues_a: usize,
    queues_b: usize,
    steer: mem::Steer,
) -> (Vec<mem::MemPort>, Vec<mem::MemPort>) {
    mem::multi_pair(
        Impairments::none(),
        Impairments::none(),
        seed,
        queues_a,
        queues_b,
        steer.clone(),
        steer,
    )
}

/// A wire of 3 queues on the first end and 4 on the second, every frame
/// arriving on a random queue.
fn mem_multi(seed: u64) -> (Vec<mem::MemPort>, Vec<mem::MemPort>) {
    clean_multi(seed, 3, 4, mem::Steer::RandomPerFrame)
}

#[test]
fn mem_multi_queue_identity_matches_defaults() {
    let (a, b) = mem_multi(11);
    for (q, port) in a.iter().enumerate() {
        check_identity(port, 1500);
        assert_eq!((port.mac(), port.queue()), (mem::MAC_A, q));
    }
    for (q, port) in b.iter().enumerate() {
        check_identity(port, 1500);
        assert_eq!((port.mac(), port.queue()), (mem::MAC_B, q));
    }
}

#[test]
fn mem_multi_queue_arp_request_gets_reply() {
    // ARP has no RSS hash: on queue 0 under every policy but RandomPerFrame.
    let (mut a, mut b) = clean_multi(12, 2, 4, mem::Steer::RandomPerFlow);
    let peer = [10, 0, 0, 2];
    let mac = arp_request_gets_reply(&mut a[0], [10, 0, 0, 1], peer, &mut || {
        arp_responder(&mut b[0], peer)
    });
    assert_eq!(mac, mem::MAC_B);
}

#[test]
fn mem_multi_queue_more_frames_than_tx_slots_all_delivered_without_allocation() {
    let (mut a, mut b) = mem_multi(13);
    let total = mem::MEM_TX_SLOTS as u32 * 4;
    let mut seen = vec![false; total as usize];
    let dst = b[0].mac();
    let mut rx_allocs = 0;
    let tx_allocs = {
        let seen = &mut seen;
        let rx_allocs = &mut rx_allocs;
        send_test_frames(&mut a[1], dst, total, 64, 100, &mut || {
            for port in b.iter_mut().rev() {
                let (_, n) = common::alloc::count_allocs(|| {
                    port.rx_burst(1024, |f, _| {
                        if let Some(s) = test_frame_seq(f) {
                            if let Some(x) = seen.get_mut(s as usize) {
                                *x = true;
                            }
                        }
                    })
                });
                *rx_allocs += n;
            }
        })
    };
    assert_eq!(tx_allocs, 0, "mem transmit/flush allocated");
    assert_eq!(rx_allocs, 0, "mem rx_burst allocated");
    assert!(seen.iter().all(|s| *s), "some frames were not delivered");
    let per_queue: Vec<u64> = b.iter().map(|p| p.rx_queue_frames()).collect();
    assert_eq!(per_queue.iter().sum::<u64>(), u64::from(total));
    assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
}

#[test]
fn mem_multi_queue_full_tx_without_flush_refuses_transmit() {
    let (mut a, _b) = mem_multi(14);
    for _ in 0..mem::MEM_TX_SLOTS {
        assert!(a[2].tx().transmit(60, |_| 60));
    }
    assert!(!a[2].tx().transmit(60, |_| 60));
    // Each queue has its own tx slots.
    assert!(a[0].tx().transmit(60, |_| 60));
    a[2].tx().flush();
    assert!(a[2].tx().transmit(60, |_| 60));
}

#[test]
fn mem_multi_queue_rx_burst_respects_max() {
    let (mut a, mut b) = clean_multi(15, 1, 4, mem::Steer::AllToZero);
    let dst = b[0].mac();
    let src = a[0].mac();
    for seq in 0..10 {
        a[0].tx()
            .transmit(64, |buf| test_frame(buf, dst, src, seq, 64));
    }
    a[0].tx().flush();
    assert_eq!(b[3].rx_burst(100, |_, _| {}), 0);
    let (n, allocs) = common::alloc::count_allocs(|| b[0].rx_burst(4, |_, _| {}));
    assert_eq!(n, 4);
    assert_eq!(allocs, 0, "mem rx_burst allocated");
    assert_eq!(b[0].rx_burst(100, |_, _| {}), 6);
    assert_eq!(b[0].rx_burst(100, |_, _| {}), 0);
}

// ---------------------------------------------------------------- af_xdp

#[test]
fn af_xdp_missing_interface_open_fails_with_hint() {
    let ifname = unique("nosuch");
    let cfg = AfXdpConfig {
        ifname: ifname.clone(),
        ..AfXdpConfig::default()
    };
    let err = AfXdpPort::open(&cfg).expect_err("opened a missing interface");
    assert_eq!(err.kind(), ErrorKind::NoSuchInterface);
    assert_eq!(
        err.to_string(),
        format!("interface {ifname} not found (check `ip link`)")
    );
    assert_eq!(err.io_kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn af_xdp_bad_frame_size_open_fails_with_hint() {
    let cfg = AfXdpConfig {
        ifname: "lo".into(),
        frame_size: 3000,
        ..AfXdpConfig::default()
    };
    refusal(
        AfXdpPort::open(&cfg),
        "frame_size 3000",
        ErrorKind::InvalidConfig,
        &["power of two"],
    );
}

/// `net` as the outer run passes it to the inner one (NIC_NET).
/// The IPv6 address `host` of the lab's IPv6 subnet fd00:<net>::/64.
fn ip6(net: [u8; 3], host: u16) -> Ipv6Addr {
    let [a, b, c] = net.map(u16::from);
    Ipv6Addr::new(0xfd00, a, b, c, 0, 0, 0, host)
}

fn net_str(net: [u8; 3]) -> String {
    format!("{}.{}.{}", net[0], net[1], net[2])
}

/// The /24 the outer run passed in NIC_NET.
fn net_env() -> [u8; 3] {
    let net: Vec<u8> = env("NIC_NET")
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    [net[0], net[1], net[2]]
}

/// For a test that needs only a namespace of its own: in the outer run
/// (root required) creates one named from `prefix`, re-runs `test` in it
/// and returns true (the caller returns); in the inner run returns false.
fn reran_in_fresh_netns(test: &str, prefix: &str) -> bool {
    if is_inner(test) {
        return false;
    }
    require_root();
    let ns = Netns::new(prefix);
    run_inner(&ns, test, &[]);
    true
}

/// The port side (`P`) and the Linux side (`L`) of a veth pair, each in a
/// fresh namespace; Linux has `.1`, the stack `.2` of the subnet.
struct VethLab {
    port_ns: Netns,
    linux_ns: Netns,
    port_if: String,
    linux_if: String,
    net: [u8; 3],
}

impl VethLab {
    fn new(salt: u32) -> VethLab {
        require_root();
        let port_ns = Netns::new("nicP");
        let linux_ns = Netns::new("nicL");
        let port_if = unique("xp");
        let linux_if = unique("xl");
        veth_between(&port_ns, &port_if, &linux_ns, &linux_if);
        let net = subnet(salt);
        linux_ns.exec(&format!(
            "ip addr add {}/24 dev {linux_if}",
            ip_str(ip(net, 1))
        ));
        // New namespaces may start with IPv6 off.
        linux_ns.exec(&format!(
            "sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.{linux_if}.disable_ipv6=0 \
             && ip -6 addr add {}/64 dev {linux_if} nodad",
            ip6(net, 1)
        ));
        VethLab {
            port_ns,
            linux_ns,
            port_if,
            linux_if,
            net,
        }
    }

    fn envs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("NIC_PORT_IF", self.port_if.clone()),
            ("NIC_LINUX_NS", self.linux_ns.name.clone()),
            ("NIC_LINUX_IF", self.linux_if.clone()),
            ("NIC_NET", net_str(self.net)),
        ]
    }
}

/// What an inner run reads from its environment.
struct Inner {
    port_if: String,
    linux: std::mem::ManuallyDrop<Netns>,
    linux_if: String,
    net: [u8; 3],
}

impl Inner {
    fn from_env() -> Inner {
        Inner {
            port_if: env("NIC_PORT_IF"),
            linux: Netns::existing(env("NIC_LINUX_NS")),
            linux_if: env("NIC_LINUX_IF"),
            net: net_env(),
        }
    }
}

/// The whole conformance run for an AF_XDP port on veth in `mode`,
/// transmitting through `tx_path` (`expect_tx` once resolved).
fn af_xdp_veth_conformance(
    test: &str,
    (mode, expect): (XdpMode, XdpMode),
    (tx_path, expect_tx): (TxPath, TxPath),
    salt: u32,
) {
    if !is_inner(test) {
        let lab = VethLab::new(salt);
        run_inner(&lab.port_ns, test, &lab.envs());
        return;
    }
    let inner = Inner::from_env();
    let my_ip = ip(inner.net, 2);
    let linux_ip = ip(inner.net, 1);
    let cfg = AfXdpConfig {
        ifname: inner.port_if.clone(),
        frame_count: 512,
        ring_size: 256,
        mode,
        steer_ip: Some(Ipv4Addr::from(my_ip)),
        steer_ip6: vec![ip6(inner.net, 2)],
        busy_poll: mode == XdpMode::Auto,
        tx_path,
        ..AfXdpConfig::default()
    };
    let mut port = AfXdpPort::open(&cfg).unwrap_or_else(|e| panic!("open: {e}"));
    println!(
        "af_xdp on {}: mode {:?}, zero-copy {}",
        inner.port_if,
        port.xdp_mode(),
        port.zero_copy()
    );
    assert_eq!(port.xdp_mode(), expect);
    assert_eq!(port.tx_path(), expect_tx);
    let caps = port.capabilities();
    assert_eq!(caps.tx_tcp_checksum, expect_tx == TxPath::Packet);
    assert_eq!(caps.tx_gso_max > 0, expect_tx == TxPath::Packet);
    assert_eq!(caps.tx_gather, expect_tx == TxPath::Packet);
    // Identity: the interface's own MAC and MTU; a pollable fd.
    check_identity(&port, 1500);
    let if_mac = parse_mac(&sh(&format!(
        "cat /sys/class/net/{}/address",
        inner.port_if
    )));
    assert_eq!(port.mac(), if_mac);
    assert!(port.rx_fd().is_some());

    // ARP: our request reaches Linux, its reply reaches us (steered).
    let linux_mac = arp_request_gets_reply(&mut port, my_ip, linux_ip, &mut || {});
    let linux_if_mac = parse_mac(
        &inner
            .linux
            .exec(&format!("cat /sys/class/net/{}/address", inner.linux_if)),
    );
    assert_eq!(linux_mac, linux_if_mac);

    // ICMP from Linux's ping to our address arrives through rx_burst.
    let mac = fmt_mac(port.mac());
    inner
        .linux
        .exec(&neigh_permanent(my_ip, &mac, &inner.linux_if));
    let linux_ns = Some(inner.linux.name.as_str());
    let (echoes, rx_allocs) = ping_into(&mut port, linux_ns, my_ip, 3, Duration::from_secs(3));
    assert_eq!(echoes, 3, "echo requests received through rx_burst");
    assert_eq!(rx_allocs, 0, "af_xdp rx_burst allocated");

    // Traffic for another address is passed to the kernel, not to us.
    let other = ip(inner.net, 3);
    inner
        .linux
        .exec(&neigh_permanent(other, &mac, &inner.linux_if));
    let port_rx_before = counter_here(&inner.port_if, "rx_packets");
    let (stolen, _) = ping_into(&mut port, linux_ns, other, 1, Duration::from_millis(1200));
    assert_eq!(
        stolen, 0,
        "frames for {other:?} were redirected to the socket"
    );
    let passed = counter_here(&inner.port_if, "rx_packets") - port_rx_before;
    assert!(
        passed >= 3,
        "the kernel saw {passed} frames, expected the 3 pings"
    );

    // IPv6 (steer_ip6): Linux's Neighbor Solicitation for our address
    // (to its solicited-node group) and then its echo requests arrive;
    // an IPv6 address not ours goes to the kernel.
    let my_ip6 = ip6(inner.net, 2);
    let ns6 = |f: &[u8]| {
        f.len() >= 78
            && f[12..14] == [0x86, 0xdd]
            && f[20] == 58
            && f[54] == 135
            && f[62..78] == my_ip6.octets()
    };
    let mut ping6 = ping6_cmd(linux_ns, my_ip6);
    let (solicits, _) = receive_matching(&mut port, 1, Duration::from_secs(3), &mut || {}, ns6);
    let _ = ping6.wait();
    assert_eq!(solicits, 1, "the NS for {my_ip6} was not redirected");
    // The unanswered NS left that ping's echo requests queued on the incomplete
    // neighbour entry: deleting it drops them, or the permanent entry below would
    // release them into the next count.
    inner
        .linux
        .exec_ok(&format!("ip -6 neigh del {my_ip6} dev {}", inner.linux_if));
    inner
        .linux
        .exec(&neigh6_permanent(my_ip6, &mac, &inner.linux_if));
    let echoes6 = ping6_into(&mut port, linux_ns, my_ip6, 3, Duration::from_secs(3));
    assert_eq!(echoes6, 3, "IPv6 echo requests received through rx_burst");
    let other6 = ip6(inner.net, 3);
    inner
        .linux
        .exec(&neigh6_permanent(other6, &mac, &inner.linux_if));
    let stolen6 = ping6_into(&mut port, linux_ns, other6, 1, Duration::from_millis(1200));
    assert_eq!(
        stolen6, 0,
        "frames for {other6} were redirected to the socket"
    );

    // More frames than the tx half holds, across many flushes: all sent.
    let before = counter(&inner.linux, &inner.linux_if, "rx_packets");
    let total = 1024; // 4x the 256 tx frames
    let tx_allocs = send_test_frames(&mut port, linux_if_mac, total, 64, 60, &mut || {});
    assert_eq!(tx_allocs, 0, "af_xdp transmit/flush allocated");
    let arrived = wait_for(Duration::from_secs(2), || {
        let n = counter(&inner.linux, &inner.linux_if, "rx_packets") - before;
        (n >= u64::from(total)).then_some(n)
    });
    let stats = port.stats();
    assert!(
        arrived.is_some(),
        "Linux received {} of {total} frames; {stats:?}",
        counter(&inner.linux, &inner.linux_if, "rx_packets") - before
    );
    assert_eq!(stats.tx_invalid + stats.rx_invalid, 0, "{stats:?}");
    assert_eq!(port.tx().free_frames(), 256, "tx frames not all back");
}

/// The command that makes the neighbour table send frames for `addr` to
/// `mac` on `dev` without asking ARP.
fn neigh_permanent(addr: [u8; 4], mac: &str, dev: &str) -> String {
    format!(
        "ip neigh replace {} lladdr {mac} dev {dev} nud permanent",
        ip_str(addr)
    )
}

/// `ip -6 neigh replace addr lladdr mac dev dev nud permanent`.
fn neigh6_permanent(addr: Ipv6Addr, mac: &str, dev: &str) -> String {
    format!("ip -6 neigh replace {addr} lladdr {mac} dev {dev} nud permanent")
}

/// Runs `ping -c 3 -i 0.2 -W 1 addr` (inside namespace `ns` when given)
/// while `port` receives: returns how many echo requests for `addr` it
/// got (stopping at `want` or after `timeout`) and the allocations its
/// rx_burst made.
fn ping_into<P: Port>(
    port: &mut P,
    ns: Option<&str>,
    addr: [u8; 4],
    want: usize,
    timeout: Duration,
) -> (usize, u64) {
    let mut cmd = match ns {
        Some(ns) => {
            let mut ip = Command::new("ip");
            ip.args(["netns", "exec", ns, "ping"]);
            ip
        }
        None => Command::new("ping"),
    };
    let mut ping = cmd
        .args(["-c", "3", "-i", "0.2", "-W", "1"])
        .arg(ip_str(addr))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn ping");
    let got = receive_matching(port, want, timeout, &mut || {}, |f| {
        icmp_echo_request_to(f, addr).is_some()
    });
    let _ = ping.wait();
    got
}

/// Starts `ping -6 -c 3 -i 0.2 -W 1 addr` inside namespace `ns`.
fn ping6_cmd(ns: Option<&str>, addr: Ipv6Addr) -> std::process::Child {
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        ns.expect("the Linux namespace"),
        "ping",
        "-6",
    ]);
    cmd.args(["-c", "3", "-i", "0.2", "-W", "1"])
        .arg(addr.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ping -6")
}

/// Runs [`ping6_cmd`] while `port` receives: returns how many ICMPv6
/// echo requests to `addr` it got, stopping at `want` or after `timeout`.
fn ping6_into<P: Port>(
    port: &mut P,
    ns: Option<&str>,
    addr: Ipv6Addr,
    want: usize,
    timeout: Duration,
) -> usize {
    let mut ping6 = ping6_cmd(ns, addr);
    let (got, _) = receive_matching(port, want, timeout, &mut || {}, |f| {
        echo6_request_to(f, addr)
    });
    let _ = ping6.wait();
    got
}

/// Whether `f` is an Ethernet frame holding an ICMPv6 echo request (type
/// 128, RFC 4443 §4.1) to `dst` (IPv6 without extension headers).
fn echo6_request_to(f: &[u8], dst: Ipv6Addr) -> bool {
    f.len() >= 62
        && f[12..14] == [0x86, 0xdd]
        && f[20] == 58
        && f[54] == 128
        && f[38..54] == dst.octets()
}

fn counter_here(ifname: &str, name: &str) -> u64 {
    sh(&format!("cat /sys/class/net/{ifname}/statistics/{name}"))
        .trim()
        .parse()
        .expect("counter")
}

/// A test that runs [`af_xdp_veth_conformance`] under its own name: the
/// XDP mode asked for => the one expected, the tx path asked for => the one
/// expected, and the subnet's salt.
macro_rules! af_xdp_veth_test {
    ($name:ident, $mode:ident => $got:ident, $tx:ident => $tx_got:ident, $salt:literal) => {
        #[test]
        fn $name() {
            af_xdp_veth_conformance(
                stringify!($name),
                (XdpMode::$mode, XdpMode::$got),
                (TxPath::$tx, TxPath::$tx_got),
                $salt,
            );
        }
    };
}

af_xdp_veth_test!(af_xdp_native_veth_passes_conformance, Native => Native, Xsk => Xsk, 1);
af_xdp_veth_test!(af_xdp_generic_veth_passes_conformance, Generic => Generic, Packet => Packet, 2);
// veth has no zero-copy AF_XDP: Auto transmits through the packet socket.
af_xdp_veth_test!(af_xdp_auto_veth_attaches_native, Auto => Native, Auto => Packet, 3);

#[test]
fn af_xdp_loopback_auto_falls_back_to_generic_native_refused() {
    // Loopback has no native XDP; a fresh namespace has its own.
    if reran_in_fresh_netns(
        "af_xdp_loopback_auto_falls_back_to_generic_native_refused",
        "nicD",
    ) {
        return;
    }
    let mut cfg = AfXdpConfig {
        ifname: "lo".into(),
        frame_count: 64,
        ring_size: 64,
        mode: XdpMode::Auto,
        ..AfXdpConfig::default()
    };
    let port = AfXdpPort::open(&cfg).unwrap_or_else(|e| panic!("Auto on lo: {e}"));
    assert_eq!(port.xdp_mode(), XdpMode::Generic);
    drop(port);
    cfg.mode = XdpMode::Native;
    let msg = refusal(
        AfXdpPort::open(&cfg),
        "native XDP on loopback",
        ErrorKind::XdpAttach,
        &[],
    );
    assert!(msg.starts_with("XDP attach refused on lo: "), "{msg}");
    assert!(msg.ends_with("; use --driver tap"), "{msg}");
    // Dropping the port detached the program: Generic attaches again.
    cfg.mode = XdpMode::Generic;
    let port = AfXdpPort::open(&cfg).unwrap_or_else(|e| panic!("Generic again: {e}"));
    assert_eq!(port.xdp_mode(), XdpMode::Generic);
}

// ---------------------------------------------------------------- tap

#[test]
fn tap_persistent_passes_conformance() {
    const TEST: &str = "tap_persistent_passes_conformance";
    if !is_inner(TEST) {
        require_root();
        let ns = Netns::new("nicT");
        let tap = unique("tp");
        let net = subnet(4);
        ns.exec(&format!(
            "ip tuntap add dev {tap} mode tap && sysctl -qw net.ipv6.conf.{tap}.disable_ipv6=1 && ip addr add {}/24 dev {tap}",
            ip_str(ip(net, 1))
        ));
        offloads_off(&ns, &tap);
        run_inner(&ns, TEST, &[("NIC_TAP", tap), ("NIC_NET", net_str(net))]);
        return;
    }
    let tap = env("NIC_TAP");
    let net = net_env();
    let my_ip = ip(net, 2);
    let linux_ip = ip(net, 1);
    let mut port = TapPort::open(&tap).unwrap_or_else(|e| panic!("open: {e}"));
    check_identity(&port, 1500);
    assert_eq!(port.mac(), nic::tap::tap_mac(&tap));
    let dev_mac = parse_mac(&sh(&format!("cat /sys/class/net/{tap}/address")));
    assert_ne!(
        port.mac(),
        dev_mac,
        "the stack must not reuse the tap device's MAC"
    );
    assert!(port.rx_fd().is_some());
    assert!(
        sh(&format!("ip link show {tap}")).contains(",UP"),
        "open did not bring {tap} up"
    );

    let linux_mac = arp_request_gets_reply(&mut port, my_ip, linux_ip, &mut || {});
    assert_eq!(linux_mac, dev_mac);

    sh(&neigh_permanent(my_ip, &fmt_mac(port.mac()), &tap));
    let (echoes, rx_allocs) = ping_into(&mut port, None, my_ip, 3, Duration::from_secs(3));
    assert_eq!(echoes, 3, "echo requests received through rx_burst");
    assert_eq!(rx_allocs, 0, "tap rx_burst allocated");

    let before = counter_here(&tap, "rx_packets");
    let total = 1024;
    let tx_allocs = send_test_frames(&mut port, dev_mac, total, 64, 60, &mut || {});
    assert_eq!(tx_allocs, 0, "tap transmit allocated");
    let got = counter_here(&tap, "rx_packets") - before;
    assert_eq!(got, u64::from(total), "{:?}", port.stats());
}

#[test]
fn tap_existing_non_tap_device_open_fails_with_hint() {
    if reran_in_fresh_netns("tap_existing_non_tap_device_open_fails_with_hint", "nicE") {
        return;
    }
    refusal(
        TapPort::open("lo"),
        "tap on lo",
        ErrorKind::InvalidConfig,
        &["lo exists but is not a tap device"],
    );
}
