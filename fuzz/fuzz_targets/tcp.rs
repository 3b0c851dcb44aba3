//! TCP: parse arbitrary bytes (options included) with and without checksum
//! verification; a parsed segment re-emits with a valid checksum and parses
//! back to the same repr, except that SACK blocks that do not fit after the
//! other options are left out (documented in `wire::tcp`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use transport::{parse_both_ways, DST, SRC};
use wire::tcp::{self, TcpRepr};

mod transport;

fuzz_target!(|data: &[u8]| {
    let Some((repr, payload)) = parse_both_ways(data, TcpRepr::parse) else {
        return;
    };
    assert_eq!(payload.len(), repr.payload_len);
    let _ = (repr.segment_len(), repr.options.sack_blocks());
    let hlen = repr.header_len();
    assert!((20..=60).contains(&hlen) && hlen % 4 == 0);
    let mut buf = vec![0u8; hlen + payload.len()];
    assert_eq!(repr.emit_header(&mut buf), hlen);
    buf[hlen..].copy_from_slice(payload);
    tcp::fill_checksum(&mut buf, SRC, DST);
    let (again, payload2) = TcpRepr::parse(&buf, SRC, DST, true).expect("re-parse");
    assert_eq!(payload2, payload);
    let kept = again.options.sack_blocks();
    let all = repr.options.sack_blocks();
    assert_eq!(kept, &all[..kept.len()], "emitted SACK blocks are a prefix");
    if kept.len() < all.len() {
        // Left out only when the next block does not fit in 60 bytes.
        let next = if kept.is_empty() { 12 } else { 8 };
        assert!(hlen + next > 60, "SACK block dropped though it fit");
    }
    let mut expect = repr;
    expect.options.sack = again.options.sack;
    expect.options.sack_len = again.options.sack_len;
    assert_eq!(again, expect);
});
