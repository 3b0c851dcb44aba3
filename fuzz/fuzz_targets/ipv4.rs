//! IPv4: check arbitrary bytes; every accessor of a checked view is safe to
//! call; the repr re-emits to a 20-byte header with a valid checksum that
//! parses back to the same repr and payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::ipv4::{Ipv4Packet, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.tos(),
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.is_fragment(),
        p.checksum(),
        p.checksum_valid(),
    );
    assert!(p.header_len() >= HEADER_LEN && p.header_len() <= p.total_len());
    assert_eq!(p.header().len() + p.payload().len(), p.total_len());
    let repr = p.repr();
    let mut buf = vec![0u8; repr.total_len()];
    repr.emit(&mut buf);
    buf[HEADER_LEN..].copy_from_slice(p.payload());
    let q = Ipv4Packet::new_checked(&buf).expect("re-parse of emitted packet");
    assert!(q.checksum_valid());
    assert_eq!(q.repr(), repr);
    assert_eq!(q.payload(), p.payload());
    assert!(!q.more_frags() && q.frag_offset() == 0);
});
