//! The engine against a raw peer that writes frames by hand:
//! - SYN cookies (RFC 4987): with the listener's SYN queue full, SYNs are
//!   answered statelessly, a client that returns a valid cookie still gets a
//!   working connection, and a forged ACK gets a RST;
//! - path MTU (RFC 1191): ICMP "fragmentation needed" for a segment in flight
//!   makes the connection resend it in smaller pieces;
//! - bad input at scale: 100 000 half-open SYNs and a burst of RSTs for
//!   10 000 live connections leave the other connections serving, and the
//!   counters say what happened.

use appif::command::Command;
use appif::seg::Accepted;
use appif::socket::StatusHandle;
use appif::spsc;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::mem::MemPort;
use nic::{Port, TxQueue};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wire::arp::ArpRepr;
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use wire::ipv4::{Ipv4Packet, Ipv4Repr, PROTO_TCP};
use wire::tcp::{TcpFlags, TcpRepr};
use wire::{MacAddr, SeqNum};

mod common;
mod owner_bench;
use common::RawWire;
use owner_bench::{segment, syn, HOST, PEER};

/// Sends one frame from the raw peer.
fn send(port: &mut MemPort, frame: &[u8]) {
    assert!(port.tx().transmit(frame.len(), |b| {
        b[..frame.len()].copy_from_slice(frame);
        frame.len()
    }));
    port.tx().flush();
}

/// A frame from the peer to the host: Ethernet and IPv4 headers (TTL 64,
/// `protocol`, `ident`, DF as `dont_frag`) followed by `payload_len` zero
/// bytes, from offset 34, for the caller to fill.
fn ipv4_frame(
    peer_mac: MacAddr,
    host_mac: MacAddr,
    protocol: u8,
    ident: u16,
    dont_frag: bool,
    payload_len: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + payload_len];
    EthernetRepr {
        dst: host_mac,
        src: peer_mac,
        ethertype: ETHERTYPE_IPV4,
    }
    .emit(&mut f);
    let ip = Ipv4Repr {
        src: PEER,
        dst: HOST,
        protocol,
        ttl: 64,
        ident,
        dont_frag,
        payload_len,
    };
    ip.emit(&mut f[14..]);
    f
}

fn tcp_frame(peer_mac: MacAddr, host_mac: MacAddr, seg: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    let hl = seg.header_len();
    let mut f = ipv4_frame(peer_mac, host_mac, PROTO_TCP, 1, true, hl + payload.len());
    seg.emit_header(&mut f[34..34 + hl]);
    f[34 + hl..].copy_from_slice(payload);
    wire::tcp::fill_checksum(&mut f[34..], PEER, HOST);
    f
}

/// Every TCP segment the host sent since the last call.
fn received(port: &mut MemPort) -> Vec<TcpRepr> {
    let mut out = Vec::new();
    port.rx_burst(256, |frame, _| {
        let Ok((eth, payload)) = EthernetRepr::parse(frame) else {
            return;
        };
        if eth.ethertype != ETHERTYPE_IPV4 {
            return;
        }
        let ip = Ipv4Packet::new_checked(payload).unwrap();
        if ip.protocol() == PROTO_TCP {
            out.push(
                TcpRepr::parse(ip.payload(), ip.src(), ip.dst(), true)
                    .unwrap()
                    .0,
            );
        }
    });
    out
}

/// A host engine on a `mem` port listening on port 80 (backlog 2), and the
/// raw peer at the other end, whose MAC the host already learned by ARP.
struct Fixture {
    peer: MemPort,
    host: Engine<MemPort>,
    cmds: spsc::Sender<Command>,
    accepted: spsc::Receiver<Accepted>,
    ns: Arc<std::sync::atomic::AtomicU64>,
    t: u64,
    peer_mac: MacAddr,
    host_mac: MacAddr,
}

impl Fixture {
    fn new(seed: u64) -> Fixture {
        Fixture::with_backlog(seed, 2)
    }

    /// A fixture whose listener has room for `backlog` connections.
    fn with_backlog(seed: u64, backlog: usize) -> Fixture {
        let mut f = Fixture::unresolved(seed, backlog);
        // Let the host learn our MAC: an ARP request for its address.
        f.send_arp(ArpRepr::request(f.peer_mac, PEER, HOST));
        f.step();
        f
    }

    /// Sends the ARP packet `arp` from the peer, broadcast.
    fn send_arp(&mut self, arp: ArpRepr) {
        let mut frame = vec![0u8; 42];
        EthernetRepr {
            dst: MacAddr::BROADCAST,
            src: self.peer_mac,
            ethertype: ETHERTYPE_ARP,
        }
        .emit(&mut frame);
        arp.emit(&mut frame[14..]);
        send(&mut self.peer, &frame);
    }

    /// A fixture whose host has not heard of the peer yet.
    fn unresolved(seed: u64, backlog: usize) -> Fixture {
        let cfg = EngineConfig {
            ip: HOST,
            prefix_len: 24,
            ..EngineConfig::default()
        };
        let RawWire {
            peer,
            engine: host,
            mut cmds,
            ns,
            t,
        } = common::raw_wire(seed, 8192, cfg);
        let peer_mac = MacAddr(peer.mac());
        let host_mac = MacAddr(host.port().mac());
        let (acc_tx, accepted) = spsc::channel::<Accepted>(backlog);
        let local = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80);
        common::push(
            &mut cmds,
            common::listen(1, StatusHandle::local(), local, false, acc_tx),
        );
        let mut f = Fixture {
            peer,
            host,
            cmds,
            accepted,
            ns,
            t,
            peer_mac,
            host_mac,
        };
        f.step();
        f
    }

    /// 10 µs of virtual time and one engine iteration.
    fn step(&mut self) {
        self.t += 10_000;
        self.ns.store(self.t, Ordering::Release);
        self.host.poll(Instant(self.t));
    }

    /// Sends a TCP segment from the peer.
    fn send_tcp(&mut self, seg: &TcpRepr, payload: &[u8]) {
        let f = tcp_frame(self.peer_mac, self.host_mac, seg, payload);
        send(&mut self.peer, &f);
    }
}

#[test]
fn listen_syn_queue_full_cookie_ack_opens_connection_and_forged_ack_is_reset() {
    let mut f = Fixture::new(1);

    // Ten SYNs that never complete: two fill the SYN queue, eight get cookies.
    for i in 0..10u16 {
        f.send_tcp(&syn(40000 + i, 1000 * u32::from(i)), &[]);
    }
    f.step();
    let synacks = received(&mut f.peer);
    assert_eq!(synacks.len(), 10, "every SYN is answered");
    assert_eq!(f.host.stats().tcp_syncookies_sent, 8);
    let cookie = synacks.iter().find(|s| s.dst_port == 40009).unwrap();
    assert!(cookie.flags.syn() && cookie.flags.ack());
    assert_eq!(
        cookie.options.window_scale, None,
        "a cookie remembers no window scale"
    );

    // A forged ACK for another port's handshake is reset, not accepted.
    let forged = segment(40008, 8001, cookie.seq + 1usize, TcpFlags::ACK, 0);
    f.send_tcp(&forged, &[]);
    f.step();
    let rst = received(&mut f.peer);
    assert!(
        rst.iter().any(|s| s.flags.rst() && s.dst_port == 40008),
        "forged cookie gets RST: {rst:?}"
    );
    assert_eq!(f.host.stats().tcp_syncookies_ok, 0);

    // The right ACK, carrying data, opens the connection.
    let ack = segment(
        40009,
        9001,
        cookie.seq + 1usize,
        TcpFlags::ACK | TcpFlags::PSH,
        5,
    );
    f.send_tcp(&ack, b"hello");
    for _ in 0..10 {
        f.step();
    }
    assert_eq!(f.host.stats().tcp_syncookies_ok, 1);
    let mut acc = f.accepted.pop().expect("cookie connection accepted");
    assert_eq!(acc.shared.remote(), SocketAddrV4::new(PEER, 40009).into());
    let mut buf = [0u8; 16];
    let n = acc.rx.read(&mut buf);
    assert_eq!(&buf[..n], b"hello");
    // The host acknowledges the data (within the 40 ms delayed-ACK time).
    let mut acked = false;
    for _ in 0..10_000 {
        f.step();
        acked |= received(&mut f.peer)
            .iter()
            .any(|s| s.dst_port == 40009 && s.flags.ack() && s.ack == SeqNum(9006));
        if acked {
            break;
        }
    }
    assert!(acked, "data on the cookie connection is acknowledged");
}

/// Frames the host sent since the last call: (ARP requests for `PEER`,
/// TCP segments).
fn received_all(port: &mut MemPort) -> (usize, Vec<TcpRepr>) {
    let (mut arp, mut tcp) = (0, Vec::new());
    port.rx_burst(256, |frame, _| {
        let Ok((eth, payload)) = EthernetRepr::parse(frame) else {
            return;
        };
        if eth.ethertype == ETHERTYPE_ARP {
            let a = ArpRepr::parse(payload).unwrap();
            arp += usize::from(a.op == wire::arp::ArpOp::Request && a.target_ip == PEER);
        } else if eth.ethertype == ETHERTYPE_IPV4 {
            let ip = Ipv4Packet::new_checked(payload).unwrap();
            tcp.push(
                TcpRepr::parse(ip.payload(), ip.src(), ip.dst(), true)
                    .unwrap()
                    .0,
            );
        }
    });
    (arp, tcp)
}

#[test]
fn syn_from_unresolved_on_link_peer_gets_its_syn_ack_before_any_arp_reply() {
    let mut f = Fixture::unresolved(4, 2);
    // A SYN from a peer the host never heard of: the SYN-ACK goes to the
    // SYN's link-layer source at once (a lost ARP request or reply would
    // cost 1 s), and a request then asks to confirm the gleaned address.
    f.send_tcp(&syn(40000, 1000), &[]);
    f.step();
    let (arps, segs) = received_all(&mut f.peer);
    let synack = segs.iter().find(|s| s.flags.syn() && s.flags.ack());
    assert!(synack.is_some(), "SYN-ACK without ARP: {segs:?}");
    assert_eq!(f.host.stats().arp_gleaned, 1);
    let mut requests = arps;
    for _ in 0..20_000 {
        f.step(); // 200 ms: past one housekeeping pass
        requests += received_all(&mut f.peer).0;
    }
    assert_eq!(requests, 1, "one request confirms the gleaned entry");
    // The handshake completes and data flows; the reply confirms it.
    let host_isn = synack.unwrap().seq;
    let reply = ArpRepr {
        op: wire::arp::ArpOp::Reply,
        sender_mac: f.peer_mac,
        sender_ip: PEER,
        target_mac: f.host_mac,
        target_ip: HOST,
    };
    f.send_arp(reply);
    f.send_tcp(
        &segment(40000, 1001, host_isn + 1usize, TcpFlags::ACK, 0),
        &[],
    );
    f.step();
    let _acc = f.accepted.pop().expect("accepted");
    // Past the gleaned lifetime: still resolved (confirmed), data is
    // acknowledged without a request.
    for _ in 0..500_000 {
        f.step(); // 5 s
    }
    received_all(&mut f.peer);
    let data = segment(
        40000,
        1001,
        host_isn + 1usize,
        TcpFlags::ACK | TcpFlags::PSH,
        2,
    );
    f.send_tcp(&data, b"hi");
    let (mut arps, mut acked) = (0, false);
    for _ in 0..10_000 {
        f.step(); // 100 ms: past the delayed-ACK time
        let (a, segs) = received_all(&mut f.peer);
        arps += a;
        acked |= segs.iter().any(|s| s.ack == SeqNum(1003));
    }
    assert!(acked, "the data is acknowledged");
    assert_eq!(arps, 0, "confirmed: no request");
}

/// Engine iterations until the host sends nothing more; everything it sent.
fn settle(f: &mut Fixture) -> Vec<TcpRepr> {
    let mut out = Vec::new();
    loop {
        f.step();
        let got = received(&mut f.peer);
        if got.is_empty() {
            let more = received(&mut f.peer);
            if more.is_empty() {
                return out;
            }
            out.extend(more);
        }
        out.extend(got);
    }
}

#[test]
fn half_open_syn_flood_and_reset_burst_leave_the_other_connections_serving() {
    const LIVE: u16 = 10_000;
    const FLOOD: u32 = 100_000;
    // A SYN queue of 256: the flood beyond it is answered with cookies.
    let mut f = Fixture::with_backlog(3, 256);
    // LIVE + 1 connections by hand: SYN, the host's SYN-ACK, our ACK.
    let isn = |port: u16| u32::from(port) * 100_000;
    let mut host_isn = std::collections::HashMap::new();
    for first in (0..=LIVE).step_by(200) {
        let ports = first..(first + 200).min(LIVE + 1);
        for i in ports.clone() {
            f.send_tcp(&syn(20_000 + i, isn(i)), &[]);
        }
        for s in settle(&mut f) {
            if s.flags.syn() && s.flags.ack() {
                host_isn.insert(s.dst_port, s.seq);
            }
        }
        for i in ports {
            let port = 20_000 + i;
            let ack = segment(port, isn(i) + 1, host_isn[&port] + 1usize, TcpFlags::ACK, 0);
            f.send_tcp(&ack, &[]);
        }
        settle(&mut f);
        while f.accepted.pop().is_some() {}
    }
    assert_eq!(f.host.stats().tcp_passive_opens, u64::from(LIVE) + 1);
    let survivor = 20_000 + LIVE;

    // The flood: SYNs that never complete, from ports the live connections
    // do not use, each port many times with other sequence numbers.
    for k in 0..FLOOD {
        let port = 1024 + (k % 18_000) as u16;
        f.send_tcp(&syn(port, k.wrapping_mul(7919)), &[]);
        if k % 500 == 499 {
            settle(&mut f);
        }
    }
    settle(&mut f);
    let st = f.host.stats();
    let mut tcbs = 0;
    f.host.for_each_tcb(|_| tcbs += 1);
    assert!(
        tcbs <= usize::from(LIVE) + 1 + 256,
        "{tcbs} connections held after the flood: state grew with it"
    );
    // Beyond the 256 half-open connections of the SYN queue (whose ports
    // the flood hits a few times more), cookies answer it.
    assert!(
        st.tcp_syncookies_sent >= u64::from(FLOOD) - 256 * (u64::from(FLOOD) / 18_000 + 1),
        "cookies answered the flood: {st:?}"
    );
    assert_eq!(st.tx_no_buffer, 0, "{st:?}");

    // A burst of RSTs for every live connection but one.
    for i in 0..LIVE {
        let port = 20_000 + i;
        let rst = segment(port, isn(i) + 1, SeqNum(0), TcpFlags::RST, 0);
        f.send_tcp(&rst, &[]);
        if i % 500 == 499 {
            settle(&mut f);
        }
    }
    settle(&mut f);
    let after = f.host.stats();
    assert_eq!(
        after.tcp_resets - st.tcp_resets,
        u64::from(LIVE),
        "each reset connection counted once"
    );

    // The survivor still serves: its data is acknowledged.
    let data = segment(
        survivor,
        isn(LIVE) + 1,
        host_isn[&survivor] + 1usize,
        TcpFlags::ACK | TcpFlags::PSH,
        5,
    );
    f.send_tcp(&data, b"still");
    let mut acked = false;
    for _ in 0..10_000 {
        f.step();
        acked |= received(&mut f.peer)
            .iter()
            .any(|s| s.dst_port == survivor && s.flags.ack() && s.ack == SeqNum(isn(LIVE) + 6));
        if acked {
            break;
        }
    }
    assert!(acked, "the connection the burst spared is acknowledged");
}

/// An ICMP "fragmentation needed" frame from a router (the peer's address
/// here) quoting the first 28 bytes of `quoted` (an IPv4 packet the host sent).
fn frag_needed(peer_mac: MacAddr, host_mac: MacAddr, mtu: u16, quoted: &[u8]) -> Vec<u8> {
    let msg = wire::icmp::Icmpv4Repr::DstUnreachable {
        code: wire::icmp::DST_UNREACH_FRAG_NEEDED,
        next_hop_mtu: mtu,
        data: &quoted[..28],
    };
    let len = msg.buffer_len();
    let mut f = ipv4_frame(peer_mac, host_mac, wire::ipv4::PROTO_ICMP, 2, false, len);
    msg.emit(&mut f[34..]);
    f
}

impl Fixture {
    /// Opens a connection from the peer's `port` (its ISN `isn`) and
    /// returns the host's end, accepted, with the SYN-ACK's MSS option.
    fn open(&mut self, port: u16, isn: u32) -> (Accepted, Option<u16>) {
        self.send_tcp(&syn(port, isn), &[]);
        self.step();
        let synack = received(&mut self.peer)
            .into_iter()
            .find(|s| s.flags.syn() && s.dst_port == port)
            .expect("SYN-ACK");
        let ack = segment(port, isn + 1, synack.seq + 1usize, TcpFlags::ACK, 0);
        self.send_tcp(&ack, &[]);
        self.step();
        (self.accepted.pop().expect("accepted"), synack.options.mss)
    }

    /// The host writes `len` bytes on `acc` and sends what it may now:
    /// returns the data segments' (peer port, payload length) and the first
    /// one's IPv4 packet, for an ICMP error to quote.
    fn send_from_host(&mut self, acc: &mut Accepted, len: usize) -> (Vec<(u16, usize)>, Vec<u8>) {
        assert!(acc.tx.write_all(&vec![0x42; len]));
        let _ = self.cmds.push(Command::Send { id: acc.id });
        self.step();
        self.data_from_host()
    }

    /// The data segments the host sent since the last look, as
    /// [`Fixture::send_from_host`] returns them.
    fn data_from_host(&mut self) -> (Vec<(u16, usize)>, Vec<u8>) {
        let (mut sizes, mut first_ip) = (Vec::new(), Vec::new());
        self.peer.rx_burst(64, |frame, _| {
            let ip = &frame[14..];
            let p = Ipv4Packet::new_checked(ip).unwrap();
            if p.protocol() == PROTO_TCP {
                let (seg, _) = TcpRepr::parse(p.payload(), p.src(), p.dst(), true).unwrap();
                if seg.payload_len > 0 {
                    sizes.push((seg.dst_port, seg.payload_len));
                    if first_ip.is_empty() {
                        first_ip = ip[..p.total_len()].to_vec();
                    }
                }
            }
        });
        (sizes, first_ip)
    }

    /// Steps until the host has sent `total` payload bytes to peer port
    /// `port` (at most 100 steps); returns their segments' lengths.
    fn resent_to(&mut self, port: u16, total: usize) -> Vec<usize> {
        let mut resent = Vec::new();
        for _ in 0..100 {
            self.step();
            let (sizes, _) = self.data_from_host();
            resent.extend(sizes.iter().filter(|(p, _)| *p == port).map(|(_, n)| *n));
            if resent.iter().sum::<usize>() >= total {
                break;
            }
        }
        resent
    }
}

#[test]
fn established_frag_needed_for_segment_in_flight_resends_smaller() {
    let mut f = Fixture::new(2);
    // Handshake (no options: MSS 536 would be too small to test; offer 1460).
    let (mut acc, _) = f.open(50000, 7000);
    // The host sends 4 full segments; the peer keeps the first one's bytes.
    let (sizes, first_ip) = f.send_from_host(&mut acc, 4 * 1460);
    assert_eq!(sizes, vec![(50000, 1460); 4], "full-sized segments first");
    // A router on the way says: 1000 bytes fit.
    let icmp = frag_needed(f.peer_mac, f.host_mac, 1000, &first_ip);
    send(&mut f.peer, &icmp);
    let resent = f.resent_to(50000, 4 * 1460);
    assert_eq!(f.host.stats().tcp_pmtu_reductions, 1);
    assert!(
        resent.iter().all(|&n| n <= 960),
        "resent after the MTU drop: {resent:?}"
    );
    assert!(
        resent.iter().sum::<usize>() >= 4 * 1460,
        "everything resent: {resent:?}"
    );
}

/// RFC 1191 §6.3, RFC 8201 §5.2: the path MTU is the destination's. A
/// Fragmentation Needed for one connection lowers it for every connection
/// to that peer: one with data in flight at the old size resends it smaller
/// at its next send, a new one offers the smaller MSS in its SYN-ACK; one
/// quoting data out of the window changes nothing and is counted.
#[test]
fn frag_needed_for_one_connection_lowers_the_path_mtu_of_every_connection_to_the_peer() {
    let mut f = Fixture::with_backlog(3, 4);
    let (mut a, _) = f.open(50001, 1000);
    let (mut b, _) = f.open(50002, 2000);
    let (sizes, quote_a) = f.send_from_host(&mut a, 4 * 1460);
    assert_eq!(sizes, vec![(50001, 1460); 4]);
    let (sizes, quote_b) = f.send_from_host(&mut b, 4 * 1460);
    assert_eq!(sizes, vec![(50002, 1460); 4]);
    // Out of the window: a quote of a sequence number B never sent.
    let mut forged = quote_b.clone();
    forged[24..28].copy_from_slice(&0x7000_0000u32.to_be_bytes());
    send(
        &mut f.peer,
        &frag_needed(f.peer_mac, f.host_mac, 900, &forged),
    );
    f.step();
    assert_eq!(f.host.stats().icmp_frag_needed_ignored, 1);
    assert_eq!(f.host.stats().tcp_pmtu_reductions, 0);
    // A's segment was too big for a router: 1000 bytes fit.
    send(
        &mut f.peer,
        &frag_needed(f.peer_mac, f.host_mac, 1000, &quote_a),
    );
    let resent_a = f.resent_to(50001, 4 * 1460);
    assert!(resent_a.iter().all(|&n| n <= 960), "{resent_a:?}");
    assert_eq!(f.host.stats().icmp_pmtu_reductions, 1);
    // B learns it with no ICMP of its own: its next send is small, and
    // what it had in flight at 1460 goes again in pieces.
    let (sizes, _) = f.send_from_host(&mut b, 1460);
    assert!(!sizes.is_empty());
    assert!(
        sizes.iter().all(|&(_, n)| n <= 960),
        "B after A's ICMP: {sizes:?}"
    );
    let resent_b = f.resent_to(50002, 4 * 1460);
    assert!(resent_b.iter().all(|&n| n <= 960), "{resent_b:?}");
    assert_eq!(
        f.host.stats().tcp_pmtu_reductions,
        2,
        "A by its ICMP, B by the table"
    );
    // The same report quoting B now changes nothing more: counted.
    send(
        &mut f.peer,
        &frag_needed(f.peer_mac, f.host_mac, 1000, &quote_b),
    );
    f.step();
    assert_eq!(f.host.stats().icmp_frag_needed_ignored, 2);
    // A new connection offers an MSS that fits the path.
    let (_c, mss) = f.open(50003, 3000);
    assert_eq!(mss, Some(960));
}
