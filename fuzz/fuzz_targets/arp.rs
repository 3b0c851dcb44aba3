//! ARP: parse arbitrary bytes; a parsed packet re-emits to the same 28 bytes
//! (every field is either carried or checked by `parse`) and parses back to
//! the same repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::arp::{ArpRepr, PACKET_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(repr) = ArpRepr::parse(data) else {
        return;
    };
    let mut buf = [0u8; PACKET_LEN];
    repr.emit(&mut buf);
    assert_eq!(
        &buf[..],
        &data[..PACKET_LEN],
        "emit(parse(packet)) != packet"
    );
    assert_eq!(ArpRepr::parse(&buf), Ok(repr));
});
