//! Property tests: no parse function panics on arbitrary bytes, and
//! `parse(emit(repr)) == repr` for arbitrary valid reprs. The generator is
//! seeded with a fixed value, so every run checks the same inputs (new
//! inputs come from the fuzz targets).

mod common;

use std::net::Ipv4Addr;

use proptest::prelude::*;
use wire::arp::{self, ArpOp, ArpRepr};
use wire::ethernet::{self, EthernetRepr};
use wire::icmp::{Echo, Icmpv4Repr};
use wire::ipv4::{self, Ipv4Packet, Ipv4Repr};
use wire::tcp::{self, SackBlock, TcpFlags, TcpOptions, TcpRepr};
use wire::udp::{self, UdpRepr};
use wire::{MacAddr, SeqNum};

fn ip() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}

fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

/// Calls every parser and every accessor of a checked view on `bytes`.
fn parse_everything(bytes: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    let _ = EthernetRepr::parse(bytes);
    let _ = ArpRepr::parse(bytes);
    if let Ok(p) = Ipv4Packet::new_checked(bytes) {
        let _ = (
            p.header_len(),
            p.total_len(),
            p.ident(),
            p.dont_frag(),
            p.more_frags(),
        );
        let _ = (
            p.frag_offset(),
            p.is_fragment(),
            p.ttl(),
            p.protocol(),
            p.tos(),
        );
        let _ = (p.src(), p.dst(), p.checksum_valid(), p.checksum(), p.repr());
        assert!(p.header().len() >= ipv4::HEADER_LEN);
        assert_eq!(p.header().len() + p.payload().len(), p.total_len());
    }
    for verify in [false, true] {
        let _ = Icmpv4Repr::parse(bytes, verify);
        if let Ok((r, payload)) = UdpRepr::parse(bytes, src, dst, verify) {
            assert_eq!(r.payload_len, payload.len());
        }
        if let Ok((r, payload)) = TcpRepr::parse(bytes, src, dst, verify) {
            assert_eq!(r.payload_len, payload.len());
            assert!(usize::from(r.options.sack_len) <= tcp::MAX_SACK_BLOCKS);
        }
    }
}

/// A TCP header with a plausible data offset and arbitrary option bytes,
/// so that the option parser is exercised far more than by random bytes.
fn tcp_with_random_options() -> impl Strategy<Value = Vec<u8>> {
    (0usize..=10, prop::collection::vec(any::<u8>(), 0..=44)).prop_map(|(words, opts)| {
        let mut seg = vec![0u8; tcp::HEADER_LEN];
        seg[12] = ((5 + words) as u8) << 4;
        seg.extend_from_slice(&opts);
        seg
    })
}

fn options() -> impl Strategy<Value = TcpOptions> {
    (
        prop::option::of(any::<u16>()),
        prop::option::of(any::<u8>()),
        any::<bool>(),
        prop::option::of(any::<(u32, u32)>()),
        prop::collection::vec(any::<(u32, u32)>(), 0..=4),
    )
        .prop_map(|(mss, window_scale, sack_permitted, timestamps, blocks)| {
            let mut o = TcpOptions {
                mss,
                window_scale,
                sack_permitted,
                timestamps,
                ..Default::default()
            };
            // Keep only the blocks that fit next to the other options
            // (emit drops the rest; see the tcp module docs).
            let fixed = o.emitted_len();
            let fit = (tcp::MAX_OPTIONS_LEN - fixed).saturating_sub(4) / 8;
            for (i, &(l, r)) in blocks.iter().take(fit).enumerate() {
                o.sack[i] = SackBlock {
                    left: SeqNum(l),
                    right: SeqNum(r),
                };
                o.sack_len += 1;
            }
            o
        })
}

fn tcp_repr() -> impl Strategy<Value = TcpRepr> {
    (
        any::<(u16, u16, u32, u32, u8, u16, u16)>(),
        options(),
        0usize..200,
    )
        .prop_map(
            |((src_port, dst_port, seq, ack, flags, window, urgent), options, payload_len)| {
                TcpRepr {
                    src_port,
                    dst_port,
                    seq: SeqNum(seq),
                    ack: SeqNum(ack),
                    flags: TcpFlags(flags),
                    window,
                    urgent,
                    options,
                    payload_len,
                }
            },
        )
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..128), src in ip(), dst in ip()) {
        parse_everything(&bytes, src, dst);
    }

    #[test]
    fn ipv4_like_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 20..100), ihl in 0u8..16, total in 0u16..120) {
        bytes[0] = 0x40 | ihl;
        bytes[2..4].copy_from_slice(&total.to_be_bytes());
        parse_everything(&bytes, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
    }

    #[test]
    fn tcp_random_options_never_panic(seg in tcp_with_random_options()) {
        let r = TcpRepr::parse(&seg, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, false);
        if let Ok((repr, _)) = r {
            // Whatever parsed can be emitted, within the header limit.
            prop_assert!(repr.header_len() <= tcp::MAX_HEADER_LEN);
            let mut buf = [0u8; tcp::MAX_HEADER_LEN];
            prop_assert_eq!(repr.emit_header(&mut buf), repr.header_len());
        }
    }

    #[test]
    fn tcp_repr_round_trips(repr in tcp_repr(), src in ip(), dst in ip(), fill in any::<u8>()) {
        let mut buf = vec![fill; repr.header_len() + repr.payload_len];
        let hl = repr.emit_header(&mut buf);
        prop_assert!(hl <= tcp::MAX_HEADER_LEN && hl % 4 == 0);
        tcp::fill_checksum(&mut buf, src, dst);
        let (parsed, payload) = TcpRepr::parse(&buf, src, dst, true).unwrap();
        prop_assert_eq!(parsed, repr);
        prop_assert_eq!(payload.len(), repr.payload_len);
    }

    #[test]
    fn udp_repr_round_trips(src_port: u16, dst_port: u16, payload in prop::collection::vec(any::<u8>(), 0..300), src in ip(), dst in ip()) {
        let repr = UdpRepr { src_port, dst_port, payload_len: payload.len() };
        let mut buf = vec![0u8; udp::HEADER_LEN + payload.len()];
        repr.emit_header(&mut buf);
        buf[udp::HEADER_LEN..].copy_from_slice(&payload);
        udp::fill_checksum(&mut buf, src, dst);
        prop_assert_ne!(u16::from_be_bytes([buf[6], buf[7]]), 0);
        let (parsed, got) = UdpRepr::parse(&buf, src, dst, true).unwrap();
        prop_assert_eq!(parsed, repr);
        prop_assert_eq!(got, &payload[..]);
    }

    #[test]
    fn ipv4_repr_round_trips(src in ip(), dst in ip(), protocol: u8, ttl: u8, ident: u16, dont_frag: bool, payload_len in 0usize..=(65535 - 20)) {
        let repr = Ipv4Repr { src, dst, protocol, ttl, ident, dont_frag, payload_len };
        let mut buf = vec![0u8; repr.total_len()];
        repr.emit(&mut buf);
        let p = Ipv4Packet::new_checked(&buf).unwrap();
        prop_assert!(p.checksum_valid());
        prop_assert_eq!(p.repr(), repr);
        prop_assert_eq!(p.payload().len(), payload_len);
    }

    #[test]
    fn ethernet_and_arp_reprs_round_trip(dst in mac(), src in mac(), ethertype: u16, request: bool, sender_ip in ip(), target_ip in ip(), target_mac in mac()) {
        let eth = EthernetRepr { dst, src, ethertype };
        let mut buf = [0u8; ethernet::HEADER_LEN + arp::PACKET_LEN];
        eth.emit(&mut buf);
        let arp = ArpRepr {
            op: if request { ArpOp::Request } else { ArpOp::Reply },
            sender_mac: src,
            sender_ip,
            target_mac,
            target_ip,
        };
        arp.emit(&mut buf[ethernet::HEADER_LEN..]);
        let (parsed, payload) = EthernetRepr::parse(&buf).unwrap();
        prop_assert_eq!(parsed, eth);
        prop_assert_eq!(ArpRepr::parse(payload).unwrap(), arp);
    }

    #[test]
    fn icmp_repr_round_trips(kind in 0u8..4, a: u16, b: u16, code: u8, other_type in 4u8..=255, data in prop::collection::vec(any::<u8>(), 0..100)) {
        let repr = match kind {
            0 => Icmpv4Repr::EchoRequest(Echo { ident: a, seq_no: b, data: &data }),
            1 => Icmpv4Repr::EchoReply(Echo { ident: a, seq_no: b, data: &data }),
            2 => Icmpv4Repr::DstUnreachable { code, next_hop_mtu: b, data: &data },
            _ => Icmpv4Repr::Other { msg_type: if other_type == 8 { 11 } else { other_type }, code },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut buf), buf.len());
        prop_assert_eq!(Icmpv4Repr::parse(&buf, true).unwrap(), repr);
    }
}
