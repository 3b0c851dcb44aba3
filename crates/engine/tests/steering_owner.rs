//! Fragments and ICMP errors resolve at the owner engine (issue: "Fragments,
//! ICMP errors, SYN cookies and TIME-WAIT resolve at the owner"; the TCP
//! half is `steering_owner_tcp.rs`). Four engines behind a four-queue
//! `mem` NIC, a raw peer writing frames by hand (`owner_bench`):
//! - IPv4 fragments are reassembled where they land and the whole
//!   datagram goes to the engine owning the UDP port (`Kind::Datagram`);
//! - an ICMP error is acted on by the engine owning the flow it quotes (a
//!   TCP connection's path MTU, a UDP port), the engine it landed on only
//!   hands it over.

mod owner_bench;

use appif::bytes;
use appif::command::{Command, Owner};
use appif::socket::{SockState, StatusHandle, UdpHeader};
use engine::stats::Stats;
use nic::mem::Steer;
use owner_bench::{
    check_clean, ip_frame, push, under_foreign_spreads, unreachable, Bench, ENGINES, PEER,
};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use wire::ethernet::{EthernetRepr, ETHERTYPE_IPV4};
use wire::icmp::{DST_UNREACH_FRAG_NEEDED, DST_UNREACH_PORT};
use wire::ipv4::{Ipv4Packet, PROTO_UDP};

/// A UDP socket's application end.
struct Udp {
    id: u64,
    port: u16,
    tx: bytes::Writer,
    rx: bytes::Reader,
}

/// A UDP socket bound to port 0 on engine `e`: the port it got is one `e`
/// owns.
fn bind(b: &mut Bench, e: usize) -> Udp {
    let id = b.id(e);
    let shared = StatusHandle::local();
    let (tx, eng_tx) = bytes::ring(16 * 1024);
    let (eng_rx, rx) = bytes::ring(64 * 1024);
    push(
        &mut b.cmds[e],
        Command::UdpBind {
            id,
            owner: Owner::LOCAL,
            shared: shared.clone(),
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0).into(),
            tx: eng_tx,
            rx: eng_rx,
            v6only: false,
        },
    );
    b.run(2);
    assert_eq!(shared.state(), SockState::Open);
    let port = shared.local().port();
    assert_eq!(
        engine::steer::udp_owner(&b.steering, port),
        e,
        "bind to port 0 on engine {e} picks a port it owns"
    );
    Udp { id, port, tx, rx }
}

impl Udp {
    /// The next datagram in the RX ring: its source port and payload.
    fn recv(&mut self) -> Option<(u16, Vec<u8>)> {
        let mut hb = [0u8; UdpHeader::LEN];
        if self.rx.read(&mut hb) < UdpHeader::LEN {
            return None;
        }
        let h = UdpHeader::decode(&hb);
        assert_eq!(h.addr.ip(), std::net::IpAddr::V4(PEER));
        let mut data = vec![0u8; usize::from(h.len)];
        assert_eq!(self.rx.read(&mut data), data.len());
        Some((h.addr.port(), data))
    }
}

/// The payload of test datagram `n`: 3 000 bytes.
fn payload(n: u16) -> Vec<u8> {
    (0..3000u32)
        .map(|i| (i.wrapping_mul(31) + u32::from(n) * 7) as u8)
        .collect()
}

/// A UDP datagram from the peer's port `1000 + n` to `dport` carrying
/// [`payload`]`(n)`, as three IPv4 fragments (1 480, 1 480 and 48 bytes
/// of IP payload) with identification `n`.
fn fragmented(dport: u16, n: u16) -> Vec<Vec<u8>> {
    let data = payload(n);
    let mut d = vec![0u8; 8 + data.len()];
    wire::udp::UdpRepr {
        src_port: 1000 + n,
        dst_port: dport,
        payload_len: data.len(),
    }
    .emit_header(&mut d);
    d[8..].copy_from_slice(&data);
    wire::udp::fill_checksum(&mut d, PEER, owner_bench::HOST);
    let frags: Vec<Vec<u8>> = d
        .chunks(1480)
        .enumerate()
        .map(|(k, chunk)| {
            let more = (k + 1) * 1480 < d.len();
            let field = (k * 1480 / 8) as u16 | if more { 0x2000 } else { 0 };
            ip_frame(PROTO_UDP, n, field, chunk)
        })
        .collect();
    assert_eq!(frags.len(), 3);
    frags
}

/// One datagram in three fragments to each engine's socket, under a NIC
/// that puts all fragments of a datagram on one queue (`steer`: all to
/// queue 0, or hashed by addresses as a real NIC does): the engine they
/// land on reassembles each, keeps the one for its own port and hands the
/// others whole to their owners, whose sockets get them.
fn fragments_land_together(steer: Steer, policy: &str) {
    let mut b = Bench::new(steer.clone(), 16);
    let mut socks: Vec<Udp> = (0..ENGINES).map(|e| bind(&mut b, e)).collect();
    // Where the NIC puts them: every fragment of every datagram to us
    // hashes by the same two addresses.
    let frags: Vec<Vec<Vec<u8>>> = (0..ENGINES)
        .map(|e| fragmented(socks[e].port, e as u16 + 1))
        .collect();
    let landing = match &steer {
        Steer::Hash(s) => s.frame_queue(&frags[0][0]),
        _ => 0,
    };
    for f in frags.iter().flatten() {
        if let Steer::Hash(s) = &steer {
            assert_eq!(s.frame_queue(f), landing, "fragments hash together");
        }
    }
    let before = b.stats();
    // Out of order: last, first, middle.
    for f in &frags {
        for k in [2, 0, 1] {
            b.send(&f[k]);
        }
    }
    b.run(4);
    let d = b.since(&before);
    for (e, sock) in socks.iter_mut().enumerate() {
        let (sport, data) = sock.recv().expect("the datagram reached its socket");
        assert_eq!((sport, data), (1000 + e as u16 + 1, payload(e as u16 + 1)));
        assert!(sock.recv().is_none());
        assert_eq!(d(e, |s| s.udp_rx), 1, "{policy}: engine {e}");
        if e == landing {
            // Reassembled all four; handed over the three it does not own.
            let got = (d(e, |s| s.frag_rx), d(e, |s| s.frag_reassembled));
            assert_eq!(got, (12, 4), "{policy}: engine {e} reassembles");
            assert_eq!(d(e, |s| s.handoff_tx), 3, "{policy}: Datagram handoffs");
            assert_eq!(d(e, |s| s.handoff_rx), 0);
        } else {
            assert_eq!(d(e, |s| s.frag_rx), 0, "{policy}: engine {e}");
            assert_eq!(d(e, |s| s.handoff_rx), 1, "{policy}: engine {e}");
            assert_eq!(d(e, |s| s.handoff_tx), 0, "{policy}: engine {e}");
        }
        // A whole datagram is no foreign frame: rx_foreign counts frames.
        assert_eq!(d(e, |s| s.rx_foreign), 0, "{policy}: engine {e}");
        assert_eq!(d(e, |s| s.drop_udp_no_socket), 0, "{policy}: engine {e}");
    }
    check_clean(&b.stats(), policy);
}

#[test]
fn fragments_all_on_queue_0_are_reassembled_there_and_reach_each_port_owner() {
    fragments_land_together(Steer::AllToZero, "all to queue 0");
}

#[test]
fn fragments_hashed_by_addresses_are_reassembled_together_and_reach_each_port_owner() {
    let steering = Arc::new(nic::rss::Steering::new(ENGINES));
    fragments_land_together(Steer::Hash(steering), "hash");
}

/// A NIC spreading each frame at random is no NIC's behaviour for
/// fragments: RSS hashes a fragment by its addresses alone (it carries no
/// ports past the first), so every fragment of a datagram lands on one
/// queue. `Steer::RandomPerFrame` splits them over the engines; since
/// fragments are reassembled where they land, a split datagram is never
/// whole anywhere: each engine holding a part times it out (30 s), counted
/// in `drop_frag_timeout`, and nothing breaks. A datagram whose fragments
/// happened to land together arrives whole at its owner.
#[test]
fn fragments_split_per_frame_time_out_where_they_landed_and_harm_nothing() {
    const EACH: u16 = 4;
    let policy = "random per frame";
    let mut b = Bench::new(Steer::RandomPerFrame, 16);
    let mut socks: Vec<Udp> = (0..ENGINES).map(|e| bind(&mut b, e)).collect();
    let before = b.stats();
    for (e, sock) in socks.iter().enumerate() {
        for i in 0..EACH {
            for f in fragmented(sock.port, e as u16 * EACH + i + 1) {
                b.send(&f);
            }
        }
    }
    b.run(4);
    b.run_ms(31_000);
    let d = b.since(&before);
    let total = |f: fn(&Stats) -> u64| (0..ENGINES).map(|e| d(e, f)).sum();
    let mut delivered = 0u64;
    for (e, sock) in socks.iter_mut().enumerate() {
        while let Some((sport, data)) = sock.recv() {
            let n = sport - 1000;
            assert_eq!(usize::from((n - 1) / EACH), e, "on the port's owner");
            assert_eq!(data, payload(n), "{policy}: whole and intact");
            delivered += 1;
        }
    }
    let sent = u64::from(EACH) * ENGINES as u64;
    assert_eq!(total(|s| s.frag_rx), 3 * sent);
    assert_eq!(total(|s| s.frag_reassembled), delivered);
    assert_eq!(total(|s| s.udp_rx), delivered);
    assert!(delivered < sent, "no datagram was split: {delivered}");
    // Each split datagram left a part on two or three engines.
    let lost = sent - delivered;
    let timeouts: u64 = total(|s| s.drop_frag_timeout);
    assert!(
        (2 * lost..=3 * lost).contains(&timeouts),
        "{timeouts} timeouts for {lost} split datagrams"
    );
    check_clean(&b.stats(), policy);
}

/// Engine `owner`'s connection from the peer sends four full segments the
/// peer does not acknowledge; the first one's IPv4 packet.
fn segment_in_flight(b: &mut Bench, sport: u16, owner: usize) -> Vec<u8> {
    let mut c = b.open(sport, owner, false);
    let mut a = c.accepted.take().unwrap();
    assert!(a.tx.write_all(&[0x42; 4 * 1460]));
    push(&mut b.cmds[owner], Command::Send { id: a.id });
    b.run(3);
    let data: Vec<_> = b
        .received_tcp()
        .into_iter()
        .filter(|(s, _)| s.dst_port == sport && s.payload_len > 0)
        .collect();
    assert_eq!(data.len(), 4, "four full segments in flight");
    assert!(data.iter().all(|(s, _)| s.payload_len == 1460));
    data[0].1.clone()
}

/// ICMP errors landing anywhere (all on engine 0's queue, or at random)
/// reach the engine owning the flow they quote:
/// - "fragmentation needed" (MTU 1280) quoting a segment in flight of a
///   connection engine `k` owns lowers that connection's MSS on engine `k`
///   (RFC 1191, RFC 5927: the quoted sequence number is in flight);
/// - "port unreachable" quoting a datagram sent from a UDP port engine `k`
///   owns is counted by engine `k`.
///
/// Engine 0, where they land under "all to queue 0", only hands them over.
fn icmp_errors_reach_the_quoted_flows_owner(steer: Steer, policy: &str) {
    let mut b = Bench::new(steer.clone(), 16);
    for k in 1..ENGINES {
        // TCP: a connection of engine k with data in flight.
        let sport = b.port_owned_by(k, owner_bench::PORT, 40_000 + 100 * k as u16);
        let quoted = segment_in_flight(&mut b, sport, k);
        assert_eq!(b.tcb(k, sport).map(|t| t.1), Some(1460));
        let before = b.stats();
        b.send(&unreachable(DST_UNREACH_FRAG_NEEDED, 1280, &quoted));
        b.run(4);
        let d = b.since(&before);
        let (_, mss) = b.tcb(k, sport).expect("the connection lives on its owner");
        assert!(
            mss <= 1240,
            "{policy}: engine {k}'s MSS after MTU 1280: {mss}"
        );
        assert_eq!(d(k, |s| s.tcp_pmtu_reductions), 1, "{policy}: engine {k}");
        assert_eq!(d(k, |s| s.icmp_tcp_errors_rx), 1, "{policy}: engine {k}");
        assert_eq!(d(k, |s| s.icmp_other_rx), 1, "{policy}: engine {k}");
        for e in (0..ENGINES).filter(|&e| e != k) {
            assert_eq!(d(e, |s| s.icmp_other_rx), 0, "{policy}: engine {e}");
            assert_eq!(d(e, |s| s.tcp_pmtu_reductions), 0, "{policy}: engine {e}");
            assert!(b.tcb(e, sport).is_none(), "{policy}: engine {e}");
        }
        if matches!(steer, Steer::AllToZero) {
            assert_eq!(
                d(0, |s| s.rx_foreign),
                1,
                "{policy}: engine 0 hands it over"
            );
            assert_eq!(d(k, |s| s.handoff_rx), 1, "{policy}: engine {k} takes it");
        }
        // The connection resends what was in flight in smaller segments.
        b.run(3);
        let resent: Vec<usize> = b
            .received_tcp()
            .into_iter()
            .filter(|(s, _)| s.dst_port == sport && s.payload_len > 0)
            .map(|(s, _)| s.payload_len)
            .collect();
        assert!(
            !resent.is_empty() && resent.iter().all(|&n| n <= 1240),
            "{policy}: resent {resent:?}"
        );

        // UDP: a datagram from engine k's port to a closed peer port.
        let mut u = bind(&mut b, k);
        let h = UdpHeader {
            addr: SocketAddrV4::new(PEER, 9).into(),
            len: 32,
        };
        assert_eq!(u.tx.write(&h.encode()), UdpHeader::LEN);
        assert_eq!(u.tx.write(&[7u8; 32]), 32);
        push(&mut b.cmds[k], Command::Send { id: u.id });
        b.run(2);
        let sent: Vec<Vec<u8>> = b
            .received()
            .into_iter()
            .filter_map(|f| {
                let (eth, ip) = EthernetRepr::parse(&f).ok()?;
                let p = Ipv4Packet::new_checked(ip).ok()?;
                let udp = p.payload();
                let ours = eth.ethertype == ETHERTYPE_IPV4
                    && p.protocol() == PROTO_UDP
                    && udp[..2] == u.port.to_be_bytes();
                ours.then(|| ip[..p.total_len()].to_vec())
            })
            .collect();
        assert_eq!(sent.len(), 1, "{policy}: the datagram went out");
        let before = b.stats();
        b.send(&unreachable(DST_UNREACH_PORT, 0, &sent[0]));
        b.run(4);
        let d = b.since(&before);
        assert_eq!(d(k, |s| s.icmp_other_rx), 1, "{policy}: engine {k}");
        for e in (0..ENGINES).filter(|&e| e != k) {
            assert_eq!(d(e, |s| s.icmp_other_rx), 0, "{policy}: engine {e}");
        }
        if matches!(steer, Steer::AllToZero) {
            assert_eq!(
                d(0, |s| s.rx_foreign),
                1,
                "{policy}: engine 0 hands it over"
            );
        }
    }
    check_clean(&b.stats(), policy);
}

#[test]
fn icmp_errors_on_queue_0_or_spread_per_frame_are_handled_by_the_quoted_flows_owner() {
    under_foreign_spreads(icmp_errors_reach_the_quoted_flows_owner);
}
