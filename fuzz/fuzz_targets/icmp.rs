//! ICMPv4: parse arbitrary bytes (checksum ignored, then verified); a parsed
//! message re-emits with a valid checksum and parses back to the same repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::icmp::Icmpv4Repr;

fuzz_target!(|data: &[u8]| {
    let verified = Icmpv4Repr::parse(data, true);
    let Ok(repr) = Icmpv4Repr::parse(data, false) else {
        assert!(verified.is_err());
        return;
    };
    if let Ok(v) = verified {
        assert_eq!(v, repr);
    }
    let mut buf = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit(&mut buf), buf.len());
    assert_eq!(Icmpv4Repr::parse(&buf, true), Ok(repr));
});
