//! What the ICMPv6 and Neighbor Discovery targets share: the parse of the
//! fuzzed bytes with the checksum ignored and then verified, which must
//! agree.

use std::fmt::Debug;
use std::net::Ipv6Addr;

/// An ICMPv6 parser: message, IPv6 source and destination of the
/// pseudo-header, verify checksum.
pub type Parse<'a, R> = fn(&'a [u8], Ipv6Addr, Ipv6Addr, bool) -> wire::Result<R>;

/// Parses `data` from `src` to `dst` with the checksum verified and ignored;
/// asserts that verification refuses whatever the unchecked parse refuses
/// and that both give the same repr when both succeed. Returns the repr of
/// the unchecked parse, if it succeeded.
pub fn parse_agreeing<'a, R: PartialEq + Debug>(
    data: &'a [u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    parse: Parse<'a, R>,
) -> Option<R> {
    let verified = parse(data, src, dst, true);
    let Ok(repr) = parse(data, src, dst, false) else {
        assert!(verified.is_err());
        return None;
    };
    if let Ok(v) = verified {
        assert_eq!(v, repr);
    }
    Some(repr)
}
