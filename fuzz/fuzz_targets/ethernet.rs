//! Ethernet II: parse arbitrary bytes; a parsed header re-emits to the same
//! 14 bytes and parses back to the same repr and payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::ethernet::{EthernetRepr, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok((repr, payload)) = EthernetRepr::parse(data) else {
        return;
    };
    assert_eq!(payload, &data[HEADER_LEN..]);
    let _ = (
        repr.dst.is_broadcast(),
        repr.dst.is_multicast(),
        repr.src.is_unicast(),
    );
    let mut buf = data.to_vec();
    buf[..HEADER_LEN].fill(0);
    repr.emit(&mut buf);
    assert_eq!(buf, data, "emit(parse(frame)) != frame");
    let (again, payload2) = EthernetRepr::parse(&buf).expect("re-parse");
    assert_eq!((again, payload2), (repr, payload));
});
