//! UDP: parse arbitrary bytes with and without checksum verification; a
//! parsed datagram re-emits (header, payload, checksum) and parses back,
//! verified, to the same repr and payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use transport::{parse_both_ways, DST, SRC};
use wire::udp::{self, UdpRepr, HEADER_LEN};

mod transport;

fuzz_target!(|data: &[u8]| {
    let Some((repr, payload)) = parse_both_ways(data, UdpRepr::parse) else {
        return;
    };
    assert_eq!(payload.len(), repr.payload_len);
    let mut buf = vec![0u8; HEADER_LEN + payload.len()];
    repr.emit_header(&mut buf);
    buf[HEADER_LEN..].copy_from_slice(payload);
    udp::fill_checksum(&mut buf, SRC, DST);
    let (again, payload2) = UdpRepr::parse(&buf, SRC, DST, true).expect("re-parse");
    assert_eq!(again, repr);
    assert_eq!(payload2, payload);
});
