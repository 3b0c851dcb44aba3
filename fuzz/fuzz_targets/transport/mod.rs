//! What the TCP and UDP targets share: the pseudo-header addresses and the
//! parse of the fuzzed bytes both with and without checksum verification.

use std::net::Ipv4Addr;

/// Source address of the pseudo-header.
pub const SRC: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
/// Destination address of the pseudo-header.
pub const DST: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

/// A transport parser: segment, pseudo-header addresses, verify checksum.
pub type Parse<'a, R> = fn(&'a [u8], Ipv4Addr, Ipv4Addr, bool) -> wire::Result<(R, &'a [u8])>;

/// Parses `data` from SRC to DST with the checksum verified (any outcome
/// is fine, it must not panic), then without: the repr and payload of that
/// second parse, if it succeeded.
pub fn parse_both_ways<'a, R>(data: &'a [u8], parse: Parse<'a, R>) -> Option<(R, &'a [u8])> {
    let _ = parse(data, SRC, DST, true);
    parse(data, SRC, DST, false).ok()
}
