//! Tests of the ND messages: a Neighbor Solicitation built by hand from RFC
//! 4861 §4.3 (checksum computed outside this crate), round trips of every
//! message, and every validity check.

use super::*;
use crate::test_util::assert_prefixes_truncated;

const MAC_A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

fn a() -> Ipv6Addr {
    "fe80::ff:fe00:1".parse().unwrap()
}

fn b() -> Ipv6Addr {
    "fe80::ff:fe00:2".parse().unwrap()
}

/// NS from fe80::ff:fe00:1 (MAC 02:00:00:00:00:01) for fe80::ff:fe00:2,
/// to ff02::1:ff00:2, with a Source Link-Layer Address option. The checksum
/// (0x7c97) was computed with an independent Python implementation of RFC
/// 4443 §2.3.
const NS: [u8; 32] = [
    0x87, 0x00, 0x7c, 0x97, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x02, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
];

fn sllao() -> [u8; 8] {
    let mut opt = [0u8; 8];
    NdiscOption::SourceLinkLayerAddr(MAC_A).emit(&mut opt);
    opt
}

#[test]
fn known_neighbor_solicitation_parses_and_re_emits() {
    let dst = solicited_node(b());
    assert_eq!(dst, "ff02::1:ff00:2".parse::<Ipv6Addr>().unwrap());
    let repr = NdiscRepr::parse(&NS, a(), dst, true).unwrap();
    assert_eq!(
        repr,
        NdiscRepr::NeighborSolicit {
            target: b(),
            options: &NS[24..],
        }
    );
    assert_eq!(repr.source_lladdr(), Some(MAC_A));
    assert_eq!(repr.target_lladdr(), None);
    let mut buf = [0u8; 32];
    assert_eq!(repr.emit(a(), dst, &mut buf), 32);
    assert_eq!(buf, NS);
    // The same bytes are an ICMPv6 message of another type for icmpv6.
    assert!(icmpv6::checksum_valid(&NS, a(), dst));
}

#[test]
fn every_message_round_trips() {
    let opts = sllao();
    let mut tlla = [0u8; 8];
    NdiscOption::TargetLinkLayerAddr(MAC_A).emit(&mut tlla);
    let mut ra_opts = [0u8; 48];
    let mut at = NdiscOption::SourceLinkLayerAddr(MAC_A).emit(&mut ra_opts);
    at += NdiscOption::Mtu(1500).emit(&mut ra_opts[at..]);
    NdiscOption::PrefixInformation(PrefixInfo {
        prefix_len: 64,
        on_link: true,
        autonomous: false,
        valid_lifetime: u32::MAX,
        preferred_lifetime: 0,
        prefix: "2001:db8::".parse().unwrap(),
    })
    .emit(&mut ra_opts[at..]);
    let cases = [
        (
            NdiscRepr::RouterSolicit { options: &opts },
            a(),
            ALL_ROUTERS,
        ),
        (
            NdiscRepr::RouterAdvert {
                cur_hop_limit: 64,
                flags: RA_FLAG_MANAGED | RA_FLAG_OTHER | 0x08,
                router_lifetime: 1800,
                reachable_time: 30_000,
                retrans_timer: 1000,
                options: &ra_opts,
            },
            a(),
            ALL_NODES,
        ),
        (
            NdiscRepr::NeighborSolicit {
                target: b(),
                options: &opts,
            },
            a(),
            solicited_node(b()),
        ),
        (
            NdiscRepr::NeighborAdvert {
                router_flag: true,
                solicited_flag: true,
                override_flag: false,
                target: b(),
                options: &tlla,
            },
            b(),
            a(),
        ),
        (
            NdiscRepr::NeighborAdvert {
                router_flag: false,
                solicited_flag: false,
                override_flag: true,
                target: b(),
                options: &[],
            },
            b(),
            ALL_NODES,
        ),
        (
            NdiscRepr::Redirect {
                target: b(),
                dst: "2001:db8::9".parse().unwrap(),
                options: &tlla,
            },
            a(),
            b(),
        ),
    ];
    for (repr, src, dst) in cases {
        let mut buf = [0u8; 96];
        let len = repr.emit(src, dst, &mut buf);
        assert_eq!(len, repr.buffer_len());
        assert_eq!(NdiscRepr::parse(&buf[..len], src, dst, true), Ok(repr));
        assert!(repr.options().all(|o| o.is_ok()));
        let icmp = icmpv6::Icmpv6Repr::parse(&buf[..len], src, dst, true).unwrap();
        assert!(
            matches!(icmp, icmpv6::Icmpv6Repr::Other { msg_type, .. } if msg_type == repr.msg_type())
        );
    }
}

#[test]
fn neighbor_advert_flags_layout() {
    let repr = NdiscRepr::NeighborAdvert {
        router_flag: true,
        solicited_flag: false,
        override_flag: true,
        target: b(),
        options: &[],
    };
    let mut buf = [0u8; 24];
    repr.emit(b(), a(), &mut buf);
    assert_eq!(buf[..8], [136, 0, buf[2], buf[3], 0xa0, 0, 0, 0]);
}

/// `ns` parsed as sent from `a()` to `b()`'s solicited-node address, without
/// verifying the checksum.
fn parse_ns(ns: &[u8]) -> crate::Result<NdiscRepr<'_>> {
    NdiscRepr::parse(ns, a(), solicited_node(b()), false)
}

/// [`NS`] with byte `at` set to `value`, parsed as [`parse_ns`] does; `Ok(())`
/// when it parses.
fn parse_ns_with(at: usize, value: u8) -> crate::Result<()> {
    let mut ns = NS;
    ns[at] = value;
    parse_ns(&ns).map(drop)
}

#[test]
fn short_message_any_length_is_truncated() {
    assert_prefixes_truncated(&NS, 0..24, parse_ns);
    // 24..32 cuts the option.
    assert_prefixes_truncated(&NS, 25..32, parse_ns);
}

#[test]
fn zero_length_option_is_malformed() {
    assert_eq!(parse_ns_with(25, 0), Err(Error::Malformed));
}

#[test]
fn bad_checksum_only_when_verified() {
    let mut ns = NS;
    ns[31] ^= 1;
    let dst = solicited_node(b());
    assert_eq!(NdiscRepr::parse(&ns, a(), dst, true), Err(Error::Checksum));
    assert!(NdiscRepr::parse(&ns, a(), dst, false).is_ok());
}

#[test]
fn non_zero_code_is_malformed_and_other_types_unsupported() {
    assert_eq!(parse_ns_with(1, 1), Err(Error::Malformed));
    for msg_type in [0u8, 1, 128, 129, 132, 138, 255] {
        assert_eq!(parse_ns_with(0, msg_type), Err(Error::Unsupported));
    }
}

/// Emits `repr` from `src` to `dst` and parses it back with the checksum
/// verified.
fn reparse(repr: NdiscRepr<'_>, src: Ipv6Addr, dst: Ipv6Addr) -> Result<()> {
    let mut buf = [0u8; 64];
    let len = repr.emit(src, dst, &mut buf);
    NdiscRepr::parse(&buf[..len], src, dst, true).map(|_| ())
}

#[test]
fn address_rules_of_rfc4861() {
    let opts = sllao();
    let global: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let unspec = Ipv6Addr::UNSPECIFIED;
    let ns = |target, options| NdiscRepr::NeighborSolicit { target, options };
    // NS: multicast target; DAD (from ::) to a non-solicited-node address or
    // with a source link-layer address.
    assert_eq!(
        reparse(ns(ALL_NODES, &[]), a(), ALL_NODES),
        Err(Error::Malformed)
    );
    assert_eq!(reparse(ns(b(), &[]), unspec, solicited_node(b())), Ok(()));
    assert_eq!(reparse(ns(b(), &[]), unspec, b()), Err(Error::Malformed));
    assert_eq!(
        reparse(ns(b(), &opts), unspec, solicited_node(b())),
        Err(Error::Malformed)
    );
    // RS from :: without the option is fine, with it malformed.
    let rs = |options| NdiscRepr::RouterSolicit { options };
    assert_eq!(reparse(rs(&[]), unspec, ALL_ROUTERS), Ok(()));
    assert_eq!(
        reparse(rs(&opts), unspec, ALL_ROUTERS),
        Err(Error::Malformed)
    );
    // NA: multicast target; solicited flag to a multicast destination.
    let na = |target, solicited_flag| NdiscRepr::NeighborAdvert {
        router_flag: false,
        solicited_flag,
        override_flag: true,
        target,
        options: &[],
    };
    assert_eq!(
        reparse(na(ALL_NODES, false), b(), a()),
        Err(Error::Malformed)
    );
    assert_eq!(
        reparse(na(b(), true), b(), ALL_NODES),
        Err(Error::Malformed)
    );
    // RA from a global address.
    let ra = NdiscRepr::RouterAdvert {
        cur_hop_limit: 0,
        flags: 0,
        router_lifetime: 0,
        reachable_time: 0,
        retrans_timer: 0,
        options: &[],
    };
    assert_eq!(reparse(ra, a(), ALL_NODES), Ok(()));
    assert_eq!(reparse(ra, global, ALL_NODES), Err(Error::Malformed));
    // Redirect: source link-local, destination not multicast, target
    // link-local or the destination itself.
    let redirect = |target, dst| NdiscRepr::Redirect {
        target,
        dst,
        options: &[],
    };
    assert_eq!(reparse(redirect(global, global), a(), b()), Ok(()));
    assert_eq!(
        reparse(redirect(b(), global), global, b()),
        Err(Error::Malformed)
    );
    assert_eq!(
        reparse(redirect(b(), ALL_NODES), a(), b()),
        Err(Error::Malformed)
    );
    let other: Ipv6Addr = "2001:db8::2".parse().unwrap();
    assert_eq!(
        reparse(redirect(other, global), a(), b()),
        Err(Error::Malformed)
    );
}

#[test]
fn solicited_node_and_multicast_mac_helpers() {
    let addr: Ipv6Addr = "2001:db8::abcd:1234:5678".parse().unwrap();
    let group = solicited_node(addr);
    assert_eq!(group, "ff02::1:ff34:5678".parse::<Ipv6Addr>().unwrap());
    assert!(is_solicited_node(group) && !is_solicited_node(addr));
    assert!(!is_solicited_node(ALL_NODES));
    assert_eq!(
        multicast_mac(group),
        MacAddr([0x33, 0x33, 0xff, 0x34, 0x56, 0x78])
    );
    assert_eq!(multicast_mac(ALL_NODES), MacAddr([0x33, 0x33, 0, 0, 0, 1]));
    assert!(multicast_mac(group).is_multicast());
}
