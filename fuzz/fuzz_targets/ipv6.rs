//! IPv6: check arbitrary bytes as a packet (every accessor of a checked view
//! is safe to call; the repr re-emits to a 40-byte header that parses back to
//! the same repr and payload) and walk the extension header chain of its
//! payload; then walk the bytes themselves as a payload (first byte: the
//! Next Header), which reaches deep chains without a valid fixed header.
//! Every walk stays inside the payload and its pointers inside the packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::ipv6::{Ipv6Packet, HEADER_LEN, NEXT_HEADER_OFFSET};
use wire::ipv6_ext::{
    walk_after_fragment, walk_chain, Ipv6ChainEnd, Ipv6FragmentRepr, MAX_CHAIN_LEN,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let _ = (
            p.version(),
            p.traffic_class(),
            p.flow_label(),
            p.hop_limit(),
        );
        assert_eq!(p.payload().len(), p.payload_len());
        let repr = p.repr();
        let mut buf = vec![0u8; repr.total_len()];
        repr.emit(&mut buf);
        buf[HEADER_LEN..].copy_from_slice(p.payload());
        let q = Ipv6Packet::new_checked(&buf).expect("re-parse of emitted packet");
        assert_eq!(q.repr(), repr);
        assert_eq!(q.packet(), p.packet());
        walk(p.next_header(), p.payload());
    }
    if let Some((&next_header, payload)) = data.split_first() {
        walk(next_header, payload);
    }
});

fn walk(next_header: u8, payload: &[u8]) {
    match walk_chain(next_header, payload) {
        Ok(Ipv6ChainEnd::UpperLayer {
            offset, pointer, ..
        }) => {
            assert!(offset <= payload.len() && offset <= MAX_CHAIN_LEN);
            assert!(pointer == NEXT_HEADER_OFFSET || pointer < HEADER_LEN + offset);
        }
        Ok(Ipv6ChainEnd::Fragment { offset, fragment }) => {
            let mut buf = [0u8; 8];
            fragment.emit(&mut buf);
            assert_eq!(Ipv6FragmentRepr::parse(&buf), Ok(fragment));
            assert_eq!(
                Ipv6FragmentRepr::parse(&payload[offset..]).map(|f| f.next_header),
                Ok(fragment.next_header)
            );
            let _ = walk_after_fragment(payload, offset);
        }
        Err(e) => {
            for multicast in [false, true] {
                if let Some((_, pointer)) = e.param_problem(multicast) {
                    assert!((pointer as usize) < HEADER_LEN + payload.len());
                }
            }
            let _ = (e.is_type0_routing(), wire::Error::from(e));
        }
    }
}
