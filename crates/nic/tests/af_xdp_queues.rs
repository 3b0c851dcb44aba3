//! `AfXdpPort::open_queues` on a 4-queue veth in native mode: one port per
//! queue, one program and XSKMAP for the interface. Root required (the test
//! fails, not skips, without it).
//!
//! Three processes, each in its place: the outer run (host namespace)
//! builds two namespaces joined by a 4-queue veth (`netns` guards: deleted
//! with everything in them, even on failure); the port run (re-executed in
//! the port's namespace) opens the queues and receives; the sender run
//! (re-executed by the port run in the Linux namespace, killed on drop)
//! sends UDP datagrams from 64 connected sockets. Each connected socket
//! draws a random `sk_txhash`, which picks its veth tx queue; on veth the
//! peer's rx queue is the sender's tx queue, so the datagrams spread over
//! the four XSKs.

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{env, is_inner, refusal, require_root, run_inner, sh, INNER};
use nic::af_xdp::{AfXdpConfig, AfXdpPort, TxPath, XdpMode};
use nic::{ErrorKind, Port, TxQueue};

const TEST: &str = "af_xdp_open_queues_native_veth_spreads_senders_over_4_queues";
/// `INNER` for the sender run.
const SENDER: &str = "af_xdp_open_queues_native_veth_spreads_senders_over_4_queues:sender";
const QUEUES: usize = 4;
const SOCKETS: u32 = 64;
const ROUNDS: u32 = 8;
const PORT_RX: u16 = 7000;
const LINUX_RX: u16 = 7001;
/// The port's interface (4 queues) and the Linux end.
const PORT_IF: &str = "xq";
const LINUX_IF: &str = "lq";
/// A second pair: the port end has 2 rx queues, its peer 4 tx queues.
const SHORT_IF: &str = "xs";

/// The /24 of this run: 10.210.x, x from the pid.
fn net() -> [u8; 3] {
    [10, 210, (std::process::id() % 250) as u8 + 1]
}

fn addr(net: [u8; 3], host: u8) -> Ipv4Addr {
    Ipv4Addr::new(net[0], net[1], net[2], host)
}

fn net_env() -> [u8; 3] {
    let v: Vec<u8> = env("NIC_NET")
        .split('.')
        .map(|p| p.parse().expect("NIC_NET"))
        .collect();
    [v[0], v[1], v[2]]
}

#[test]
fn af_xdp_open_queues_native_veth_spreads_senders_over_4_queues() {
    match std::env::var(INNER).as_deref() {
        Ok(SENDER) => sender(),
        _ if is_inner(TEST) => port_side(),
        _ => outer(),
    }
}

/// Host namespace: builds the lab and runs the port side in it.
fn outer() {
    require_root();
    let port_ns = netns::Netns::new("mqP").expect("port namespace");
    let linux_ns = netns::Netns::new("mqL").expect("linux namespace");
    netns::veth_pair_queues(&port_ns, PORT_IF, &linux_ns, LINUX_IF, QUEUES as u32)
        .expect("4-queue veth");
    // 2 rx queues on the XDP side, 4 tx queues on the peer: native XDP refused.
    netns::run(Command::new("ip").args([
        "link",
        "add",
        SHORT_IF,
        "netns",
        port_ns.name(),
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        "ls",
        "netns",
        linux_ns.name(),
        "numtxqueues",
        "4",
        "numrxqueues",
        "4",
    ]))
    .expect("asymmetric veth");
    for (ns, ifname) in [(&port_ns, PORT_IF), (&linux_ns, LINUX_IF)] {
        ns.run(
            "sysctl",
            &["-qw", &format!("net.ipv6.conf.{ifname}.disable_ipv6=1")],
        )
        .expect("ipv6 off");
    }
    let net = net();
    netns::addr_add(&linux_ns, LINUX_IF, &format!("{}/24", addr(net, 1))).expect("address");
    let mac = port_ns
        .run("cat", &[&format!("/sys/class/net/{PORT_IF}/address")])
        .expect("port mac");
    // The Linux side sends to the port's MAC without asking ARP.
    let core_ip = addr(net, 2).to_string();
    linux_ns
        .run(
            "ip",
            &[
                "neigh",
                "replace",
                &core_ip,
                "lladdr",
                mac.trim(),
                "dev",
                LINUX_IF,
                "nud",
                "permanent",
            ],
        )
        .expect("neighbour");
    let ns = common::Netns::existing(port_ns.name().to_string());
    run_inner(
        &ns,
        TEST,
        &[
            ("NIC_LINUX_NS", linux_ns.name().to_string()),
            ("NIC_NET", format!("{}.{}.{}", net[0], net[1], net[2])),
        ],
    );
}

/// Port namespace: opens the queues, starts the sender, receives, transmits.
fn port_side() {
    let net = net_env();
    let my_ip = addr(net, 2);
    let cfg = AfXdpConfig {
        ifname: PORT_IF.into(),
        frame_count: 1024,
        ring_size: 512,
        mode: XdpMode::Native,
        steer_ip: Some(my_ip),
        tx_path: TxPath::Xsk,
        ..AfXdpConfig::default()
    };

    // More queues than the interface has: the count and the fix.
    refusal(
        AfXdpPort::open_queues(&cfg, 8),
        "8 queues on a 4-queue veth",
        ErrorKind::InvalidConfig,
        &["needs 8 queues but it has 4", "ethtool -L xq combined 8"],
    );

    // Native XDP where the peer has more tx queues than we have rx queues.
    let short = AfXdpConfig {
        ifname: SHORT_IF.into(),
        ..cfg.clone()
    };
    refusal(
        AfXdpPort::open_queues(&short, 2),
        "native XDP with 2 rx < 4 peer tx",
        ErrorKind::XdpAttach,
        &["ENOSPC", "numrxqueues"],
    );

    let mut ports = AfXdpPort::open_queues(&cfg, QUEUES).unwrap_or_else(|e| panic!("open: {e}"));
    assert_eq!(ports.len(), QUEUES);
    for (i, p) in ports.iter().enumerate() {
        assert_eq!(p.queue_id(), i as u32);
        assert_eq!(p.xdp_mode(), XdpMode::Native);
        assert_eq!(p.tx_path(), TxPath::Xsk);
    }
    // One program for the interface: a second open of any queue collides.
    let err = AfXdpPort::open(&cfg).expect_err("a second program on xq");
    assert_eq!(err.kind(), ErrorKind::XdpAttach, "{err}");

    let exe = std::env::current_exe().expect("current_exe");
    let mut sender = netns::ChildGuard::spawn_lines(
        Command::new("ip")
            .args(["netns", "exec", &env("NIC_LINUX_NS")])
            .arg(exe)
            .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(INNER, SENDER)
            .env("NIC_NET", env("NIC_NET")),
    )
    .expect("spawn sender");

    // Receive on every queue until all datagrams are in, for at most 5 s.
    let total = (SOCKETS * ROUNDS) as usize;
    let mut seen = vec![0u32; total];
    let mut per_queue = [0u64; QUEUES];
    // The queue each socket's datagrams arrived on (one per socket).
    let mut socket_queues = vec![[false; QUEUES]; SOCKETS as usize];
    let mut linux_mac = None;
    let mut other = 0u64;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = 0usize;
    while got < total && Instant::now() < deadline {
        let mut n = 0;
        for (q, port) in ports.iter_mut().enumerate() {
            n += port.rx_burst(64, |f, _| match datagram_id(f, my_ip) {
                Some(id) if (id as usize) < total => {
                    seen[id as usize] += 1;
                    per_queue[q] += 1;
                    socket_queues[(id / ROUNDS) as usize][q] = true;
                    let mut mac = [0u8; 6];
                    mac.copy_from_slice(&f[6..12]);
                    linux_mac = Some(mac);
                }
                _ => other += 1,
            });
        }
        got = seen.iter().filter(|&&c| c > 0).count();
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let used: Vec<usize> = (0..QUEUES).filter(|&q| per_queue[q] > 0).collect();
    println!("datagrams per XSK (queue 0..3): {per_queue:?}; other frames {other}");
    let missing = seen.iter().filter(|&&c| c == 0).count();
    let dups = seen.iter().filter(|&&c| c > 1).count();
    let drops: Vec<_> = ports.iter().map(|p| p.rx_drops()).collect();
    assert_eq!(
        missing, 0,
        "{missing} of {total} never arrived; drops {drops:?}"
    );
    assert_eq!(dups, 0, "{dups} datagrams arrived more than once");
    assert_eq!(per_queue.iter().sum::<u64>(), total as u64);
    assert!(used.len() >= 2, "only queues {used:?} carried traffic");
    // veth: a socket's tx queue is the peer's rx queue, fixed by its txhash.
    let split = socket_queues
        .iter()
        .filter(|qs| qs.iter().filter(|&&b| b).count() > 1)
        .count();
    assert_eq!(
        split, 0,
        "{split} sockets' datagrams arrived on several queues"
    );

    // The kernel's per-queue counters agree (veth counts while XDP is attached).
    let counters = netns::parse_rx_queue_packets(&sh(&format!("ethtool -S {PORT_IF}")));
    println!("ethtool rx_queue_<i>_xdp_packets: {counters:?}");
    if !counters.is_empty() {
        assert_eq!(counters.len(), QUEUES, "{counters:?}");
        for q in 0..QUEUES {
            assert!(
                counters[q] >= per_queue[q],
                "queue {q}: counter {} < {} received",
                counters[q],
                per_queue[q]
            );
        }
        let busy = counters.iter().filter(|&&c| c > 0).count();
        assert!(
            busy >= 2,
            "ethtool shows traffic on {busy} queues: {counters:?}"
        );
    }

    // Queue 2 transmits to a kernel UDP socket on the Linux side.
    let dst_mac = linux_mac.expect("a datagram carried the Linux MAC");
    let src_mac = ports[2].mac();
    let mut received = None;
    for _ in 0..30 {
        let tx = ports[2].tx();
        assert!(tx.transmit(128, |buf| udp_frame(
            buf,
            (dst_mac, src_mac),
            (my_ip, addr(net, 1)),
            (PORT_RX, LINUX_RX),
            b"csmq tx",
        )));
        tx.flush();
        if let Ok(line) = sender.wait_line("tx received", Duration::from_millis(100)) {
            received = Some(line);
            break;
        }
    }
    let line = received.unwrap_or_else(|| panic!("the Linux socket got nothing from queue 2"));
    println!("{line}; queue 2 stats {:?}", ports[2].stats());
    assert!(ports[2].stats().tx_frames >= 1);
    let status = sender
        .wait_timeout(Duration::from_secs(5))
        .expect("wait sender");
    assert!(status.is_some_and(|s| s.success()), "sender: {status:?}");
}

/// Linux namespace: 64 connected UDP sockets send 8 rounds each (paced),
/// then one socket waits for the port's datagram.
fn sender() {
    let net = net_env();
    let (linux_ip, core_ip) = (addr(net, 1), addr(net, 2));
    let rx = UdpSocket::bind((linux_ip, LINUX_RX)).expect("bind rx socket");
    rx.set_read_timeout(Some(Duration::from_secs(6)))
        .expect("timeout");
    let socks: Vec<UdpSocket> = (0..SOCKETS)
        .map(|_| {
            let s = UdpSocket::bind((linux_ip, 0)).expect("bind");
            // connect() draws the socket's random sk_txhash: its tx queue.
            s.connect((core_ip, PORT_RX)).expect("connect");
            s
        })
        .collect();
    for r in 0..ROUNDS {
        for (s, sock) in socks.iter().enumerate() {
            sock.send(format!("csmq {s} {r}").as_bytes()).expect("send");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    println!("sent {}", SOCKETS * ROUNDS);
    let mut buf = [0u8; 64];
    let (n, from) = rx.recv_from(&mut buf).expect("datagram from queue 2");
    assert_eq!(&buf[..n], b"csmq tx");
    println!("tx received from {from}");
}

/// The id (socket * ROUNDS + round) of a "csmq S R" datagram to
/// `dst:PORT_RX`, if `f` is one.
fn datagram_id(f: &[u8], dst: Ipv4Addr) -> Option<u32> {
    if f.len() < 42 || f[12..14] != [0x08, 0x00] || f[23] != 17 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    if f[30..34] != dst.octets() || f.len() < 14 + ihl + 8 {
        return None;
    }
    let udp = &f[14 + ihl..];
    if u16::from_be_bytes([udp[2], udp[3]]) != PORT_RX {
        return None;
    }
    let text = std::str::from_utf8(&udp[8..]).ok()?;
    let mut parts = text.strip_prefix("csmq ")?.split(' ');
    let s: u32 = parts.next()?.parse().ok()?;
    let r: u32 = parts.next()?.parse().ok()?;
    (s < SOCKETS && r < ROUNDS).then_some(s * ROUNDS + r)
}

/// Writes an Ethernet + IPv4 + UDP frame (UDP checksum 0: none) into
/// `buf`; returns its length.
fn udp_frame(
    buf: &mut [u8],
    (dst_mac, src_mac): ([u8; 6], [u8; 6]),
    (src, dst): (Ipv4Addr, Ipv4Addr),
    (sport, dport): (u16, u16),
    payload: &[u8],
) -> usize {
    let len = 14 + 20 + 8 + payload.len();
    let f = &mut buf[..len];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&src_mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (20 + 8 + payload.len()) as u16;
    let ip = &mut f[14..34];
    ip.copy_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    f[42..].copy_from_slice(payload);
    len
}
