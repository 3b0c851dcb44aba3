//! ICMPv6: parse arbitrary bytes (checksum ignored, then verified) from a
//! fixed source to a fixed destination; a parsed message re-emits with a
//! valid checksum and parses back to the same repr.
#![no_main]

use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};

mod checked;

const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 2);

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Icmpv6Packet::new_checked(data) {
        let _ = (p.msg_type(), p.code(), p.checksum(), p.is_error(), p.body());
    }
    let Some(repr) = checked::parse_agreeing(data, SRC, DST, Icmpv6Repr::parse) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit(SRC, DST, &mut buf), buf.len());
    assert_eq!(Icmpv6Repr::parse(&buf, SRC, DST, true), Ok(repr));
});
