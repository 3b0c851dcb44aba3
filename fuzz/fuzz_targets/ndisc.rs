//! Neighbor Discovery: the first byte picks the IPv6 source and destination
//! (link-local or unspecified source; unicast, all-nodes or solicited-node
//! destination), the rest is the ICMPv6 message. Parse it (checksum ignored,
//! then verified); a parsed message re-emits with a valid checksum and
//! parses back to the same repr, and so does each of its options.
#![no_main]

use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use wire::ndisc::{self, NdiscOptionIter, NdiscRepr};

mod checked;

const LINK_LOCAL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 1);
const PEER: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 2);

fuzz_target!(|data: &[u8]| {
    let Some((&pick, message)) = data.split_first() else {
        return;
    };
    let src = if pick & 1 == 0 {
        LINK_LOCAL
    } else {
        Ipv6Addr::UNSPECIFIED
    };
    let dst = match (pick >> 1) & 3 {
        0 => PEER,
        1 => ndisc::ALL_NODES,
        2 => ndisc::ALL_ROUTERS,
        _ => ndisc::solicited_node(PEER),
    };
    for opt in NdiscOptionIter::new(message).flatten() {
        let mut buf = vec![0u8; opt.buffer_len()];
        assert_eq!(opt.emit(&mut buf), buf.len());
        let again: Vec<_> = NdiscOptionIter::new(&buf).collect();
        // Variable-length options of a length that is not whole 8-byte
        // units cannot come out of the iterator, so every one round-trips.
        assert_eq!(again, [Ok(opt)]);
    }
    let Some(repr) = checked::parse_agreeing(message, src, dst, NdiscRepr::parse) else {
        return;
    };
    let _ = (repr.source_lladdr(), repr.target_lladdr(), repr.msg_type());
    let mut buf = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit(src, dst, &mut buf), buf.len());
    assert_eq!(NdiscRepr::parse(&buf, src, dst, true), Ok(repr));
});
