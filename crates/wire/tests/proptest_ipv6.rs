//! Property tests of the IPv6 parsers (ipv6, ipv6_ext, icmpv6, ndisc): no
//! parse or walk panics on arbitrary bytes, and `parse(emit(repr)) == repr`
//! for arbitrary valid reprs. Seeded with a fixed value, like proptest.rs.

mod common;

use std::net::Ipv6Addr;

use proptest::prelude::*;
use wire::icmpv6::{self, Echo, Icmpv6Packet, Icmpv6Repr};
use wire::ipv6::{self, Ipv6Packet, Ipv6Repr};
use wire::ipv6_ext::{
    self, walk_after_fragment, walk_chain, Ipv6ChainEnd, Ipv6FragmentRepr, Ipv6OptionsRepr,
    Ipv6RoutingRepr,
};
use wire::ndisc::{self, NdiscOption, NdiscOptionIter, NdiscRepr};

fn ip6() -> impl Strategy<Value = Ipv6Addr> {
    any::<[u8; 16]>().prop_map(Ipv6Addr::from)
}

/// Calls every IPv6 parser, walker and accessor on `bytes`.
fn parse_everything(bytes: &[u8], src: Ipv6Addr, dst: Ipv6Addr) {
    if let Ok(p) = Ipv6Packet::new_checked(bytes) {
        let _ = (
            p.version(),
            p.traffic_class(),
            p.flow_label(),
            p.hop_limit(),
        );
        let _ = (p.src(), p.dst(), p.header(), p.repr());
        assert_eq!(p.payload().len(), p.payload_len());
        check_walk(p.next_header(), p.payload());
    }
    for next_header in [0u8, 43, 44, 51, 60, 6, bytes.first().copied().unwrap_or(0)] {
        check_walk(next_header, bytes);
    }
    for offset in 0..bytes.len().min(16) {
        let _ = walk_after_fragment(bytes, offset);
    }
    if let Ok(r) = Ipv6OptionsRepr::parse(bytes) {
        assert!(r.options().all(|o| o.is_ok()));
        assert_eq!(r.buffer_len(), 2 + r.options.len());
    }
    let _ = (
        Ipv6RoutingRepr::parse(bytes),
        Ipv6FragmentRepr::parse(bytes),
    );
    if let Ok(p) = Icmpv6Packet::new_checked(bytes) {
        let _ = (p.msg_type(), p.code(), p.checksum(), p.is_error(), p.body());
        let _ = p.checksum_valid(src, dst);
    }
    for verify in [false, true] {
        if let Ok(r) = Icmpv6Repr::parse(bytes, src, dst, verify) {
            assert_eq!(r.buffer_len(), bytes.len());
        }
        if let Ok(r) = NdiscRepr::parse(bytes, src, dst, verify) {
            assert!(r.options().all(|o| o.is_ok()));
            let _ = (r.source_lladdr(), r.target_lladdr());
            assert_eq!(r.buffer_len(), bytes.len());
        }
    }
    for opt in NdiscOptionIter::new(bytes).flatten() {
        assert!(opt.buffer_len() % 8 == 0);
    }
}

/// Walks `payload` from `next_header`; a result points inside the payload.
fn check_walk(next_header: u8, payload: &[u8]) {
    match walk_chain(next_header, payload) {
        Ok(Ipv6ChainEnd::UpperLayer {
            offset, pointer, ..
        }) => {
            assert!(offset <= payload.len() && offset <= ipv6_ext::MAX_CHAIN_LEN);
            assert!(pointer == ipv6::NEXT_HEADER_OFFSET || pointer < ipv6::HEADER_LEN + offset);
        }
        Ok(Ipv6ChainEnd::Fragment { offset, .. }) => {
            assert!(offset + 8 <= payload.len());
            let _ = walk_after_fragment(payload, offset);
        }
        Err(e) => {
            if let Some((_, pointer)) = e.param_problem(false) {
                assert!((pointer as usize) < ipv6::HEADER_LEN + payload.len());
            }
            let _ = (
                e.param_problem(true),
                e.is_type0_routing(),
                wire::Error::from(e),
            );
        }
    }
}

/// A chain of 0..10 extension headers, each of a random kind (Hop-by-Hop,
/// Destination Options, Routing, Fragment, AH or an upper layer), with a
/// plausible length byte and random contents: walks far deeper than random
/// bytes.
fn chain_like() -> impl Strategy<Value = (u8, Vec<u8>)> {
    let header = (
        prop::sample::select(vec![0u8, 43, 44, 51, 60, 6, 58]),
        0u8..4,
        prop::collection::vec(any::<u8>(), 0..40),
    );
    (
        prop::sample::select(vec![0u8, 43, 44, 51, 60]),
        prop::collection::vec(header, 0..10),
        any::<bool>(),
    )
        .prop_map(|(first, headers, cut)| {
            let mut out = Vec::new();
            for (next, units, mut body) in headers {
                body.resize(6 + 8 * usize::from(units), 0);
                out.push(next);
                out.push(units);
                out.extend_from_slice(&body);
            }
            if cut && !out.is_empty() {
                out.pop();
            }
            (first, out)
        })
}

fn icmpv6_repr<'a>(kind: u8, a: u32, code: u8, data: &'a [u8]) -> Icmpv6Repr<'a> {
    match kind {
        0 => Icmpv6Repr::DstUnreachable { code, data },
        1 => Icmpv6Repr::PacketTooBig { mtu: a, data },
        2 => Icmpv6Repr::TimeExceeded { code, data },
        3 => Icmpv6Repr::ParamProblem {
            code,
            pointer: a,
            data,
        },
        4 => Icmpv6Repr::EchoRequest(Echo {
            ident: (a >> 16) as u16,
            seq_no: a as u16,
            data,
        }),
        5 => Icmpv6Repr::EchoReply(Echo {
            ident: (a >> 16) as u16,
            seq_no: a as u16,
            data,
        }),
        _ => Icmpv6Repr::Other {
            msg_type: 130 + (a % 10) as u8,
            code,
            body: data,
        },
    }
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..160), src in ip6(), dst in ip6()) {
        parse_everything(&bytes, src, dst);
    }

    #[test]
    fn ipv6_like_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 40..200), payload_len in 0u16..200) {
        bytes[0] = 0x60 | (bytes[0] & 0x0f);
        bytes[4..6].copy_from_slice(&payload_len.to_be_bytes());
        parse_everything(&bytes, Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
    }

    #[test]
    fn extension_chains_never_panic((first, payload) in chain_like()) {
        check_walk(first, &payload);
    }

    #[test]
    fn ndisc_like_bytes_never_panic(msg_type in 133u8..=137, mut bytes in prop::collection::vec(any::<u8>(), 8..96), src in ip6()) {
        bytes[0] = msg_type;
        bytes[1] = 0;
        let dst = ndisc::solicited_node(src);
        if let Ok(repr) = NdiscRepr::parse(&bytes, src, dst, false) {
            // Whatever parsed re-emits to a message that parses the same.
            let mut buf = vec![0u8; repr.buffer_len()];
            prop_assert_eq!(repr.emit(src, dst, &mut buf), buf.len());
            prop_assert_eq!(NdiscRepr::parse(&buf, src, dst, true), Ok(repr));
        }
    }

    #[test]
    fn ipv6_repr_round_trips(src in ip6(), dst in ip6(), next_header: u8, hop_limit: u8, traffic_class: u8, flow_label in 0u32..=0xf_ffff, payload_len in 0usize..=65535) {
        let repr = Ipv6Repr { src, dst, next_header, hop_limit, traffic_class, flow_label, payload_len };
        let mut buf = vec![0u8; repr.total_len()];
        repr.emit(&mut buf);
        let p = Ipv6Packet::new_checked(&buf).unwrap();
        prop_assert_eq!(p.repr(), repr);
        prop_assert_eq!(p.payload().len(), payload_len);
    }

    #[test]
    fn extension_header_reprs_round_trip(next_header: u8, units in 0u8..=255, routing_type: u8, segments_left: u8, frag_units in 0usize..8192, more_frags: bool, ident: u32) {
        // An options area of PadN runs, any length the header allows.
        let area_len = 6 + 8 * usize::from(units);
        let mut area = vec![0u8; area_len];
        let mut at = 0;
        while at < area_len {
            let n = (area_len - at).min(257);
            ipv6_ext::option::emit_padding(&mut area[at..], n);
            at += n;
        }
        let opts = Ipv6OptionsRepr { next_header, options: &area };
        let mut buf = vec![0u8; opts.buffer_len()];
        prop_assert_eq!(opts.emit(&mut buf), area_len + 2);
        prop_assert_eq!(Ipv6OptionsRepr::parse(&buf), Ok(opts));
        let data = vec![0xa5u8; 4 + 8 * usize::from(units)];
        let routing = Ipv6RoutingRepr { next_header, routing_type, segments_left, data: &data };
        let mut buf = vec![0u8; routing.buffer_len()];
        routing.emit(&mut buf);
        prop_assert_eq!(Ipv6RoutingRepr::parse(&buf), Ok(routing));
        let frag = Ipv6FragmentRepr { next_header, frag_offset: frag_units * 8, more_frags, ident };
        let mut buf = [0u8; 8];
        frag.emit(&mut buf);
        prop_assert_eq!(Ipv6FragmentRepr::parse(&buf), Ok(frag));
    }

    #[test]
    fn icmpv6_repr_round_trips(kind in 0u8..7, a: u32, code: u8, data in prop::collection::vec(any::<u8>(), 4..100), src in ip6(), dst in ip6()) {
        let repr = icmpv6_repr(kind, a, code, &data);
        let mut buf = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(src, dst, &mut buf), buf.len());
        prop_assert!(icmpv6::checksum_valid(&buf, src, dst));
        prop_assert_eq!(Icmpv6Repr::parse(&buf, src, dst, true), Ok(repr));
    }

    #[test]
    fn neighbor_messages_round_trip(target_low: [u8; 8], mac: [u8; 6], flags in 0u8..8, src_low: [u8; 8]) {
        let mut t = [0u8; 16];
        t[0] = 0xfe;
        t[1] = 0x80;
        t[8..].copy_from_slice(&target_low);
        let target = Ipv6Addr::from(t);
        t[8..].copy_from_slice(&src_low);
        let src = Ipv6Addr::from(t);
        let mut opt = [0u8; 8];
        NdiscOption::SourceLinkLayerAddr(wire::MacAddr(mac)).emit(&mut opt);
        let ns = NdiscRepr::NeighborSolicit { target, options: &opt };
        let na = NdiscRepr::NeighborAdvert {
            router_flag: flags & 4 != 0,
            solicited_flag: flags & 2 != 0,
            override_flag: flags & 1 != 0,
            target,
            options: &[],
        };
        for (repr, dst) in [(ns, ndisc::solicited_node(target)), (na, src)] {
            let mut buf = [0u8; 32];
            let len = repr.emit(src, dst, &mut buf);
            prop_assert_eq!(NdiscRepr::parse(&buf[..len], src, dst, true), Ok(repr));
        }
    }
}
