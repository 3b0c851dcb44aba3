//! The IPv6 network layer through a whole engine on a `mem` wire (issue
//! 25): Neighbor Discovery, ICMPv6 echo, extension header chains,
//! reassembly, Packet Too Big and Duplicate Address Detection, fed frames
//! built with the wire reprs; and the IPv6 header of a TIME-WAIT record's
//! ACKs (issue 23).

mod common;

use appif::bytes;
use appif::command::Command;
use appif::notify::Notify;
use appif::socket::StatusHandle;
use appif::spsc;
use common::RawWire;
use core::net::Ipv6Addr;
use engine::egress6::AddrState;
use engine::time::Instant;
use engine::{link_local_from_mac, Engine, EngineConfig, Ipv6Config};
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort};
use nic::{Port, TxQueue};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wire::ethernet::{EthernetRepr, ETHERTYPE_IPV6};
use wire::icmpv6::{self, Echo, Icmpv6Repr};
use wire::ipv6::{
    Ipv6Packet, Ipv6Repr, NEXT_DST_OPTS, NEXT_FRAGMENT, NEXT_ICMPV6, NEXT_ROUTING, NEXT_TCP,
};
use wire::ipv6_ext::Ipv6FragmentRepr;
use wire::ndisc::{self, NdiscOption, NdiscRepr};
use wire::tcp::{TcpFlags, TcpRepr};
use wire::MacAddr;
use wire::SeqNum;

const PEER_MAC: MacAddr = MacAddr(mem::MAC_A);
const ENGINE_MAC: MacAddr = MacAddr(mem::MAC_B);
const PEER: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const ENGINE: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const PEER_LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0xa);

/// The engine under test at end B, the peer sending raw frames at end A.
type Bench = RawWire;

impl Bench {
    fn with(ipv6: Option<Ipv6Config>) -> Bench {
        let cfg = EngineConfig {
            ip: core::net::Ipv4Addr::new(10, 0, 0, 2),
            ipv6,
            ..EngineConfig::default()
        };
        common::raw_wire(1, mem::MEM_WIRE_FRAMES, cfg)
    }

    fn new() -> Bench {
        Bench::with(Some(Ipv6Config {
            global: Some((ENGINE, 64)),
            ..Ipv6Config::default()
        }))
    }

    /// Sends IPv6 `packet` from the peer in a frame to `dst_mac`, runs
    /// the engine once and returns the IPv6 packets it sent.
    fn exchange(&mut self, dst_mac: MacAddr, packet: &[u8]) -> Vec<Vec<u8>> {
        let eth = EthernetRepr {
            dst: dst_mac,
            src: PEER_MAC,
            ethertype: ETHERTYPE_IPV6,
        };
        self.send_frame(&eth, packet);
        self.step(1000);
        self.received()
    }

    /// IPv6 packets the engine sent (padding cut), with the frame's
    /// destination MAC checked against the IPv6 destination.
    fn received(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.peer.rx_burst(64, |f, _| {
            let (eth, p) = EthernetRepr::parse(f).unwrap();
            assert_eq!(eth.ethertype, ETHERTYPE_IPV6);
            assert_eq!(eth.src, ENGINE_MAC);
            let ip = Ipv6Packet::new_checked(p).unwrap();
            if ip.dst().is_multicast() {
                assert_eq!(eth.dst, ndisc::multicast_mac(ip.dst()));
            } else {
                assert_eq!(eth.dst, PEER_MAC);
            }
            out.push(ip.packet().to_vec());
        });
        out
    }

    /// Introduces the peer by a Neighbor Solicitation for our address.
    fn introduce(&mut self) {
        let out = self.exchange(ENGINE_MAC, &ns(PEER, ENGINE, ENGINE, 255));
        assert_eq!(out.len(), 1, "a Neighbor Advertisement");
    }
}

/// An IPv6 packet from `src` to `dst` with `payload` after the fixed
/// header, its first header `next`.
fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40 + payload.len()];
    Ipv6Repr {
        src,
        dst,
        next_header: next,
        hop_limit: hop,
        traffic_class: 0,
        flow_label: 0,
        payload_len: payload.len(),
    }
    .emit(&mut p);
    p[40..].copy_from_slice(payload);
    p
}

fn icmp(src: Ipv6Addr, dst: Ipv6Addr, msg: &Icmpv6Repr) -> Vec<u8> {
    let mut m = vec![0u8; msg.buffer_len()];
    msg.emit(src, dst, &mut m);
    m
}

/// An Echo Request message (identifier 7, sequence 1) from `src` to
/// `dst` carrying `data`, without its IPv6 header.
fn echo_message(src: Ipv6Addr, dst: Ipv6Addr, data: &[u8]) -> Vec<u8> {
    let msg = Icmpv6Repr::EchoRequest(Echo {
        ident: 7,
        seq_no: 1,
        data,
    });
    icmp(src, dst, &msg)
}

fn echo_request(src: Ipv6Addr, dst: Ipv6Addr, data: &[u8]) -> Vec<u8> {
    ipv6(src, dst, NEXT_ICMPV6, 64, &echo_message(src, dst, data))
}

/// A Neighbor Solicitation from `src` (with our MAC as its source
/// link-layer address unless unspecified) for `target`, to the target's
/// solicited-node group.
fn ns(src: Ipv6Addr, _to: Ipv6Addr, target: Ipv6Addr, hop: u8) -> Vec<u8> {
    let mut opt = [0u8; 8];
    NdiscOption::SourceLinkLayerAddr(PEER_MAC).emit(&mut opt);
    let options: &[u8] = if src.is_unspecified() { &[] } else { &opt };
    let dst = ndisc::solicited_node(target);
    let msg = NdiscRepr::NeighborSolicit { target, options };
    let mut m = vec![0u8; msg.buffer_len()];
    msg.emit(src, dst, &mut m);
    ipv6(src, dst, NEXT_ICMPV6, hop, &m)
}

/// A solicited Neighbor Advertisement from the peer for `target`.
fn na(target: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut opt = [0u8; 8];
    NdiscOption::TargetLinkLayerAddr(PEER_MAC).emit(&mut opt);
    let msg = NdiscRepr::NeighborAdvert {
        router_flag: false,
        solicited_flag: !dst.is_multicast(),
        override_flag: true,
        target,
        options: &opt,
    };
    let mut m = vec![0u8; msg.buffer_len()];
    msg.emit(target, dst, &mut m);
    ipv6(target, dst, NEXT_ICMPV6, 255, &m)
}

/// The ICMPv6 message of an IPv6 packet without extension headers.
fn icmp_of(p: &[u8]) -> Icmpv6Repr<'_> {
    let ip = Ipv6Packet::new_checked(p).unwrap();
    assert_eq!(ip.next_header(), NEXT_ICMPV6);
    let m = ip.payload();
    assert!(icmpv6::checksum_valid(m, ip.src(), ip.dst()));
    Icmpv6Repr::parse(m, ip.src(), ip.dst(), true).unwrap()
}

#[test]
fn ipv6_is_off_by_default() {
    let mut b = Bench::with(None);
    let out = b.exchange(ENGINE_MAC, &echo_request(PEER, ENGINE, b"hi"));
    assert!(out.is_empty());
    assert_eq!(b.engine.stats().drop_eth_unsupported, 1);
    assert_eq!(b.engine.stats().ipv6_rx, 0);
}

#[test]
fn neighbor_solicitation_answered_with_advertisement_and_bad_hop_limit_dropped() {
    let mut b = Bench::new();
    let group_mac = ndisc::multicast_mac(ndisc::solicited_node(ENGINE));
    let out = b.exchange(group_mac, &ns(PEER, ENGINE, ENGINE, 255));
    assert_eq!(out.len(), 1);
    let ip = Ipv6Packet::new_checked(&out[0]).unwrap();
    assert_eq!((ip.src(), ip.dst(), ip.hop_limit()), (ENGINE, PEER, 255));
    let nd = NdiscRepr::parse(ip.payload(), ip.src(), ip.dst(), true).unwrap();
    match nd {
        NdiscRepr::NeighborAdvert {
            solicited_flag,
            override_flag,
            router_flag,
            target,
            ..
        } => {
            assert!(solicited_flag && override_flag && !router_flag);
            assert_eq!(target, ENGINE);
        }
        other => panic!("not an NA: {other:?}"),
    }
    assert_eq!(nd.target_lladdr(), Some(ENGINE_MAC));
    // The link-local address answers too, derived from the MAC.
    let ll = link_local_from_mac(ENGINE_MAC);
    let out = b.exchange(group_mac, &ns(PEER_LL, ll, ll, 255));
    assert_eq!(out.len(), 1);
    // Hop limit below 255: from off-link, dropped (RFC 4861 §7.1.1).
    let out = b.exchange(group_mac, &ns(PEER, ENGINE, ENGINE, 254));
    assert!(out.is_empty());
    let s = b.engine.stats();
    assert_eq!((s.nd_ns_rx, s.nd_na_tx, s.drop_nd_hop_limit), (2, 2, 1));
    // A solicitation for someone else's address.
    let other = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x77);
    let out = b.exchange(group_mac, &ns(PEER, other, other, 255));
    assert!(out.is_empty());
    assert_eq!(b.engine.stats().drop_ipv6_other_dst, 1, "not our group");
}

#[test]
fn echo_request_answered() {
    let mut b = Bench::new();
    b.introduce();
    let out = b.exchange(ENGINE_MAC, &echo_request(PEER, ENGINE, b"ping6 data"));
    assert_eq!(out.len(), 1);
    let ip = Ipv6Packet::new_checked(&out[0]).unwrap();
    assert_eq!((ip.src(), ip.dst()), (ENGINE, PEER));
    assert_eq!(
        icmp_of(&out[0]),
        Icmpv6Repr::EchoReply(Echo {
            ident: 7,
            seq_no: 1,
            data: b"ping6 data"
        })
    );
    assert_eq!(b.engine.stats().icmpv6_echo_replies_tx, 1);
    // To all-nodes: not answered.
    let out = b.exchange(
        ndisc::multicast_mac(ndisc::ALL_NODES),
        &echo_request(PEER, ndisc::ALL_NODES, b"x"),
    );
    assert!(out.is_empty());
    assert_eq!(b.engine.stats().drop_icmpv6_echo, 1);
}

#[test]
fn echo_reply_to_unknown_neighbor_waits_for_resolution() {
    let mut b = Bench::new();
    let out = b.exchange(ENGINE_MAC, &echo_request(PEER, ENGINE, b"who"));
    assert_eq!(out.len(), 1, "a solicitation, not the reply");
    let ip = Ipv6Packet::new_checked(&out[0]).unwrap();
    assert_eq!(ip.dst(), ndisc::solicited_node(PEER));
    assert_eq!(ip.hop_limit(), 255);
    let nd = NdiscRepr::parse(ip.payload(), ip.src(), ip.dst(), true).unwrap();
    assert!(matches!(nd, NdiscRepr::NeighborSolicit { target, .. } if target == PEER));
    assert_eq!(nd.source_lladdr(), Some(ENGINE_MAC));
    // The advertisement releases the waiting reply.
    let out = b.exchange(ENGINE_MAC, &na(PEER, ENGINE));
    assert_eq!(out.len(), 1);
    assert!(matches!(
        icmp_of(&out[0]),
        Icmpv6Repr::EchoReply(Echo { data: b"who", .. })
    ));
    let n = b.engine.ipv6().unwrap().neighbors.peek(PEER, Instant(b.t));
    assert_eq!(
        n,
        Some((engine::neighbor::NeighborState::Reachable, PEER_MAC))
    );
}

#[test]
fn unresolved_neighbor_is_solicited_three_times_then_dropped() {
    let mut b = Bench::new();
    assert_eq!(
        b.exchange(ENGINE_MAC, &echo_request(PEER, ENGINE, b"x"))
            .len(),
        1
    );
    for _ in 0..40 {
        b.step(100_000_000);
    }
    let s = b.engine.stats();
    assert_eq!((s.nd_ns_tx, s.drop_nd_unresolved), (3, 1));
}

/// An 8-byte Destination Options header holding `area` (6 bytes).
fn dst_opts(next: u8, area: [u8; 6]) -> Vec<u8> {
    let mut h = vec![next, 0];
    h.extend_from_slice(&area);
    h
}

#[test]
fn bad_extension_chains_are_counted_and_answered_where_rfc_8200_says() {
    let mut b = Bench::new();
    b.introduce();
    let echo = icmp(
        PEER,
        ENGINE,
        &Icmpv6Repr::EchoRequest(Echo {
            ident: 1,
            seq_no: 1,
            data: b"x",
        }),
    );
    // An unknown option of type 0x80 (discard, Parameter Problem).
    let mut p = dst_opts(NEXT_ICMPV6, [0x80, 0, 1, 2, 0, 0]);
    p.extend_from_slice(&echo);
    let out = b.exchange(ENGINE_MAC, &ipv6(PEER, ENGINE, NEXT_DST_OPTS, 64, &p));
    assert_eq!(out.len(), 1);
    assert!(matches!(
        icmp_of(&out[0]),
        Icmpv6Repr::ParamProblem {
            code: icmpv6::PARAM_PROBLEM_OPTION,
            pointer: 42,
            ..
        }
    ));
    // A Type 0 Routing header with segments left: RFC 5095.
    let mut p = vec![NEXT_ICMPV6, 2, 0, 1, 0, 0, 0, 0];
    p.extend_from_slice(&[0; 16]);
    p.extend_from_slice(&echo);
    let out = b.exchange(ENGINE_MAC, &ipv6(PEER, ENGINE, NEXT_ROUTING, 64, &p));
    assert!(matches!(
        icmp_of(&out[0]),
        Icmpv6Repr::ParamProblem {
            code: icmpv6::PARAM_PROBLEM_HEADER_FIELD,
            pointer: 42,
            ..
        }
    ));
    // An unknown upper layer: code 1 at the fixed header's Next Header.
    let out = b.exchange(ENGINE_MAC, &ipv6(PEER, ENGINE, 253, 64, b"12345678"));
    assert!(matches!(
        icmp_of(&out[0]),
        Icmpv6Repr::ParamProblem {
            code: icmpv6::PARAM_PROBLEM_NEXT_HEADER,
            pointer: 6,
            ..
        }
    ));
    // Garbage: a truncated header, a short packet, version 4, another
    // destination, a multicast source: dropped silently.
    let out = b.exchange(ENGINE_MAC, &ipv6(PEER, ENGINE, NEXT_DST_OPTS, 64, &[58, 3]));
    assert!(out.is_empty());
    assert!(b.exchange(ENGINE_MAC, &[0x60, 0, 0]).is_empty());
    let mut v4 = echo_request(PEER, ENGINE, b"x");
    v4[0] = 0x40;
    assert!(b.exchange(ENGINE_MAC, &v4).is_empty());
    let other = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9);
    assert!(b
        .exchange(ENGINE_MAC, &echo_request(PEER, other, b"x"))
        .is_empty());
    let mcast_src = echo_request(ndisc::ALL_NODES, ENGINE, b"x");
    assert!(b.exchange(ENGINE_MAC, &mcast_src).is_empty());
    // An error about a packet to a multicast group is not sent (RFC 4443
    // §2.4 (e.3)): an unknown upper layer to all-nodes.
    let all = ndisc::multicast_mac(ndisc::ALL_NODES);
    assert!(b
        .exchange(all, &ipv6(PEER, ndisc::ALL_NODES, 253, 64, b"12345678"))
        .is_empty());
    let s = b.engine.stats();
    assert_eq!(s.drop_ipv6_ext_option, 1);
    assert_eq!(s.drop_ipv6_rh0, 1);
    assert_eq!(s.drop_ipv6_unknown_next_header, 2);
    assert_eq!(s.drop_ipv6_ext_malformed, 1);
    assert_eq!(s.drop_ipv6_malformed, 2);
    assert_eq!(s.drop_ipv6_other_dst, 1);
    assert_eq!(s.drop_ipv6_bad_src, 1);
    assert_eq!(s.icmpv6_param_problem_tx, 3);
    assert_eq!(s.icmpv6_errors_suppressed, 1);
}

/// The IPv6 fragments of `upper` (an upper-layer message of protocol
/// `next`), `size` bytes each (a multiple of 8 but the last).
fn fragments(ident: u32, next: u8, upper: &[u8], size: usize) -> Vec<Vec<u8>> {
    upper
        .chunks(size)
        .enumerate()
        .map(|(k, c)| fragment(ident, next, k * size, c, (k + 1) * size < upper.len()))
        .collect()
}

fn fragment(ident: u32, next: u8, offset: usize, data: &[u8], more: bool) -> Vec<u8> {
    let mut p = vec![0u8; 8 + data.len()];
    Ipv6FragmentRepr {
        next_header: next,
        frag_offset: offset,
        more_frags: more,
        ident,
    }
    .emit(&mut p);
    p[8..].copy_from_slice(data);
    ipv6(PEER, ENGINE, NEXT_FRAGMENT, 64, &p)
}

#[test]
fn echo_request_in_three_fragments_is_answered() {
    let mut b = Bench::new();
    b.introduce();
    let data: Vec<u8> = (0..600).map(|i| i as u8).collect();
    let msg = echo_message(PEER, ENGINE, &data);
    let frags = fragments(0x1234, NEXT_ICMPV6, &msg, 208);
    assert_eq!(frags.len(), 3);
    assert!(b.exchange(ENGINE_MAC, &frags[2]).is_empty());
    assert!(b.exchange(ENGINE_MAC, &frags[0]).is_empty());
    let out = b.exchange(ENGINE_MAC, &frags[1]);
    assert_eq!(out.len(), 1);
    assert!(
        matches!(icmp_of(&out[0]), Icmpv6Repr::EchoReply(Echo { data: d, .. }) if d == &data[..])
    );
    let s = b.engine.stats();
    assert_eq!((s.ipv6_frag_rx, s.ipv6_frag_reassembled), (3, 1));
    // An atomic fragment is a whole packet (RFC 6946).
    let out = b.exchange(ENGINE_MAC, &fragment(9, NEXT_ICMPV6, 0, &msg, false));
    assert_eq!(out.len(), 1);
    assert_eq!(b.engine.stats().ipv6_frag_atomic, 1);
}

#[test]
fn overlapping_and_tiny_fragments_are_dropped() {
    let mut b = Bench::new();
    b.introduce();
    let data = [5u8; 300];
    let msg = echo_message(PEER, ENGINE, &data);
    // Overlap: 0..160, then 152..end.
    assert!(b
        .exchange(ENGINE_MAC, &fragment(1, 58, 0, &msg[..160], true))
        .is_empty());
    assert!(b
        .exchange(ENGINE_MAC, &fragment(1, 58, 152, &msg[152..], false))
        .is_empty());
    // Even the missing middle cannot complete it now.
    assert!(b
        .exchange(ENGINE_MAC, &fragment(1, 58, 160, &msg[160..], false))
        .is_empty());
    assert_eq!(b.engine.stats().drop_ipv6_frag_overlap, 1);
    assert_eq!(b.engine.stats().ipv6_frag_reassembled, 0);
    // A tiny first fragment without the ICMPv6 header (RFC 7112): with
    // a Destination Options header before it, 8 bytes are not enough.
    let mut first = dst_opts(NEXT_ICMPV6, [1, 4, 0, 0, 0, 0]);
    first.extend_from_slice(&msg[..0]);
    let out = b.exchange(ENGINE_MAC, &fragment(2, NEXT_DST_OPTS, 0, &first, true));
    assert_eq!(b.engine.stats().drop_ipv6_frag_incomplete_chain, 1);
    assert!(matches!(
        icmp_of(&out[0]),
        Icmpv6Repr::ParamProblem { code: 3, .. }
    ));
    // A fragment with M set and a length not a multiple of 8.
    let out = b.exchange(ENGINE_MAC, &fragment(3, 58, 0, &msg[..20], true));
    assert!(matches!(
        icmp_of(&out[0]),
        Icmpv6Repr::ParamProblem {
            code: 0,
            pointer: 4,
            ..
        }
    ));
    // Incomplete datagrams time out after 60 s.
    assert!(b
        .exchange(ENGINE_MAC, &fragment(4, 58, 0, &msg[..160], true))
        .is_empty());
    for _ in 0..610 {
        b.step(100_000_000);
    }
    assert_eq!(
        b.engine.stats().drop_ipv6_frag_timeout,
        2,
        "ident 4, and ident 1 restarted by its last fragment"
    );
}

#[test]
fn packet_too_big_lowers_path_mtu_never_below_1280() {
    let mut b = Bench::new();
    b.introduce();
    let far = Ipv6Addr::new(0x2001, 0xdb9, 0, 0, 0, 0, 0, 1);
    assert_eq!(b.engine.pmtu_v6(far), 1500);
    // The quoted packet: one we sent to `far`.
    let quoted = echo_request(ENGINE, far, &[0; 64]);
    let ptb = |mtu| {
        let m = icmp(
            PEER,
            ENGINE,
            &Icmpv6Repr::PacketTooBig { mtu, data: &quoted },
        );
        ipv6(PEER, ENGINE, NEXT_ICMPV6, 64, &m)
    };
    assert!(b.exchange(ENGINE_MAC, &ptb(1400)).is_empty());
    assert_eq!(b.engine.pmtu_v6(far), 1400);
    b.exchange(ENGINE_MAC, &ptb(1450));
    assert_eq!(b.engine.pmtu_v6(far), 1400, "never raised");
    b.exchange(ENGINE_MAC, &ptb(500));
    assert_eq!(b.engine.pmtu_v6(far), 1280, "never below the minimum MTU");
    // Quoting a packet that is not ours: ignored.
    let forged = echo_request(PEER, far, &[0; 8]);
    let m = icmp(
        PEER,
        ENGINE,
        &Icmpv6Repr::PacketTooBig {
            mtu: 1300,
            data: &forged,
        },
    );
    b.exchange(ENGINE_MAC, &ipv6(PEER, ENGINE, NEXT_ICMPV6, 64, &m));
    let s = b.engine.stats();
    assert_eq!(
        (
            s.icmpv6_ptb_rx,
            s.icmpv6_pmtu_reductions,
            s.icmpv6_ptb_ignored
        ),
        (4, 2, 2)
    );
    // Ten minutes later the link MTU is tried again.
    b.step(601_000_000_000);
    assert_eq!(b.engine.pmtu_v6(far), 1500);
}

#[test]
fn duplicate_address_detection_refuses_an_address_in_use() {
    let mut b = Bench::with(Some(Ipv6Config {
        global: Some((ENGINE, 64)),
        dad: true,
        ..Ipv6Config::default()
    }));
    b.step(200_000_000);
    let out = b.received();
    assert_eq!(out.len(), 2, "one DAD solicitation per address");
    for p in &out {
        let ip = Ipv6Packet::new_checked(p).unwrap();
        assert!(ip.src().is_unspecified());
        let nd = NdiscRepr::parse(ip.payload(), ip.src(), ip.dst(), true).unwrap();
        assert_eq!(nd.source_lladdr(), None);
    }
    let e6 = b.engine.ipv6().unwrap();
    assert!(matches!(
        e6.state_of(ENGINE),
        Some(AddrState::Tentative { .. })
    ));
    // Another node holds ENGINE: its advertisement to all-nodes.
    let all = ndisc::multicast_mac(ndisc::ALL_NODES);
    assert!(b.exchange(all, &na(ENGINE, ndisc::ALL_NODES)).is_empty());
    b.step(1_100_000_000);
    let e6 = b.engine.ipv6().unwrap();
    assert_eq!(e6.state_of(ENGINE), Some(AddrState::Duplicate));
    let ll = link_local_from_mac(ENGINE_MAC);
    assert_eq!(e6.state_of(ll), Some(AddrState::Preferred));
    assert_eq!(b.engine.stats().nd_dad_duplicates, 1);
    // The refused address is not ours: no answer.
    assert!(b
        .exchange(ENGINE_MAC, &echo_request(PEER, ENGINE, b"x"))
        .is_empty());
    assert_eq!(b.engine.stats().drop_ipv6_other_dst, 1);
}

#[test]
fn neighbor_solicitation_learned_by_one_engine_is_copied_to_all() {
    use engine::steer::{handoff_mesh, HANDOFF_RING_BYTES};
    use nic::mem::Steer;
    use nic::rss::Steering;
    let none = Impairments::none();
    // Every frame from the peer lands on engine 0's queue.
    let (mut qa, qb) = mem::multi_pair(none, none, 1, 1, 2, Steer::AllToZero, Steer::AllToZero);
    let mut peer = qa.remove(0);
    let (clock, ns_clock) = MemClock::manual();
    peer.set_clock(clock);
    let t = 1_000_000_000;
    ns_clock.store(t, Ordering::Release);
    let cfg = EngineConfig {
        ipv6: Some(Ipv6Config {
            global: Some((ENGINE, 64)),
            ..Ipv6Config::default()
        }),
        ..EngineConfig::default()
    };
    let mesh = handoff_mesh(Arc::new(Steering::new(2)), HANDOFF_RING_BYTES);
    let mut keep = Vec::new();
    let mut engines: Vec<Engine<MemPort>> = qb
        .into_iter()
        .zip(mesh)
        .map(|(port, h)| {
            let (c, rx) = spsc::channel(64);
            keep.push(c);
            let mut e = Engine::new(
                port,
                cfg.clone(),
                rx,
                Arc::new(Notify::default()),
                Instant(t),
            );
            e.join(h);
            e
        })
        .collect();
    let packet = ns(PEER, ENGINE, ENGINE, 255);
    let eth = EthernetRepr {
        dst: ndisc::multicast_mac(ndisc::solicited_node(ENGINE)),
        src: PEER_MAC,
        ethertype: ETHERTYPE_IPV6,
    };
    let tx = peer.tx();
    assert!(tx.transmit(14 + packet.len(), |buf| {
        eth.emit(buf);
        buf[14..14 + packet.len()].copy_from_slice(&packet);
        14 + packet.len()
    }));
    tx.flush();
    for _ in 0..3 {
        for e in &mut engines {
            e.poll(Instant(t + 1000));
        }
    }
    let (s0, s1) = (engines[0].stats(), engines[1].stats());
    assert_eq!((s0.nd_ns_rx, s0.nd_na_tx, s0.handoff_tx), (1, 1, 1));
    assert_eq!((s1.nd_ns_rx, s1.nd_na_tx, s1.handoff_rx), (0, 0, 1));
    for e in &engines {
        let n = e.ipv6().unwrap().neighbors.peek(PEER, Instant(t + 1000));
        assert_eq!(n, Some((engine::neighbor::NeighborState::Stale, PEER_MAC)));
    }
    let mut answers = 0;
    peer.rx_burst(64, |_, _| answers += 1);
    assert_eq!(
        answers, 1,
        "one advertisement, from the engine that got the NS"
    );
}

/// The TCP segments in IPv6 `packets`, with each packet's Traffic Class
/// and Hop Limit.
fn tcp_of(packets: &[Vec<u8>]) -> Vec<(TcpRepr, u8, u8)> {
    let mut out = Vec::new();
    for p in packets {
        let ip = Ipv6Packet::new_checked(&p[..]).unwrap();
        if ip.next_header() == NEXT_TCP {
            let (seg, _) = TcpRepr::parse(ip.payload(), ip.src(), ip.dst(), true).unwrap();
            out.push((seg, ip.traffic_class(), ip.hop_limit()));
        }
    }
    out
}

/// `seg` from the peer in an IPv6 packet to the engine.
fn tcp6(seg: &TcpRepr) -> Vec<u8> {
    let mut l4 = vec![0u8; seg.header_len()];
    seg.emit_header(&mut l4);
    wire::tcp::fill_checksum(&mut l4, PEER, ENGINE);
    ipv6(PEER, ENGINE, NEXT_TCP, 64, &l4)
}

/// A connection whose socket set IPV6_TCLASS and IPV6_UNICAST_HOPS and
/// that closed first: its FIN carries both; once TIME-WAIT became a
/// record, the record's ACK of a retransmitted FIN keeps the Traffic
/// Class and takes the default Hop Limit, as Linux's TIME-WAIT answers.
#[test]
fn a_time_wait_records_acks_keep_the_sockets_traffic_class() {
    let mut b = Bench::new();
    b.introduce();
    let shared = StatusHandle::local();
    let (_app_tx, eng_tx) = bytes::ring(4096);
    let (eng_rx, _app_rx) = bytes::ring(4096);
    let to = core::net::SocketAddr::new(PEER.into(), 80);
    common::push(
        &mut b.cmds,
        common::connect(1, &shared, to, (eng_tx, eng_rx), true),
    );
    common::push(
        &mut b.cmds,
        Command::SetIpv6Header {
            id: 1,
            tclass: 0xb8,
            hop_limit: 9,
        },
    );
    b.step(1000);
    let syn = tcp_of(&b.received())
        .into_iter()
        .find(|(s, ..)| s.flags.syn())
        .expect("a SYN")
        .0;
    // The peer's segment from port 80: SEQ, ACK, flags, TSval echoing `of`.
    let peer = |seq: u32, ack: SeqNum, flags: u8, tsval: u32, of: &TcpRepr| {
        let mut s = TcpRepr {
            src_port: 80,
            dst_port: syn.src_port,
            seq: SeqNum(seq),
            ack,
            flags: TcpFlags(flags),
            window: 65535,
            ..TcpRepr::default()
        };
        s.options.timestamps = Some((tsval, of.options.timestamps.expect("TS").0));
        s
    };
    let mut synack = peer(
        7000,
        syn.seq + 1usize,
        TcpFlags::SYN | TcpFlags::ACK,
        100,
        &syn,
    );
    synack.options.mss = Some(1440);
    b.exchange(ENGINE_MAC, &tcp6(&synack));
    common::push(&mut b.cmds, Command::Close { id: 1 });
    b.step(1000);
    let out = tcp_of(&b.received());
    let &(fin, class, hops) = out.iter().find(|(s, ..)| s.flags.fin()).expect("FIN");
    assert_eq!((class & !0b11, hops), (0xb8, 9), "the socket's header");
    let fin_ack = TcpFlags::FIN | TcpFlags::ACK;
    let finack = peer(7001, fin.seq + 1usize, fin_ack, 101, &fin);
    let out = tcp_of(&b.exchange(ENGINE_MAC, &tcp6(&finack)));
    assert!(out.iter().any(|(s, ..)| s.ack == SeqNum(7002)), "{out:?}");
    let mut tcbs = 0;
    b.engine.for_each_tcb(|_| tcbs += 1);
    assert_eq!((b.engine.time_wait_records(), tcbs), (1, 0), "a record");
    let again = peer(7001, fin.seq + 1usize, fin_ack, 102, &fin);
    let out = tcp_of(&b.exchange(ENGINE_MAC, &tcp6(&again)));
    assert_eq!(out.len(), 1, "{out:?}");
    let (ack, class, hops) = out[0];
    assert_eq!((ack.seq, ack.ack), (fin.seq + 1usize, SeqNum(7002)));
    assert_eq!(
        (class, hops),
        (0xb8, 64),
        "Traffic Class kept, Hop Limit the default"
    );
    assert_eq!(b.engine.stats().tcp_time_wait_acks, 1);
}
