//! The Internet checksum (RFC 1071): the 16-bit ones'-complement of the
//! ones'-complement sum of the data taken as big-endian 16-bit words, with an
//! odd trailing byte padded with zero.
//!
//! Sums are accumulated with [`sum`] (chain the result of one call into the
//! `initial` of the next; every chunk except the last must have an even
//! length), then [`fold`]ed into the value of the checksum field. A message
//! whose checksum field is correct sums, folded, to 0.
//!
//! Transport checksums (RFC 768, RFC 9293 §3.1) also cover a pseudo-header:
//! start from [`pseudo_header_sum`] over IPv4, from [`pseudo_header_sum_v6`]
//! over IPv6 (RFC 8200 §8.1; ICMPv6 too, RFC 4443 §2.3).

use core::net::{Ipv4Addr, Ipv6Addr};

/// Adds `data` to the running ones'-complement sum `initial` and returns the
/// new running sum (not folded, not complemented). Any `initial` is accepted;
/// the result is congruent to the true sum modulo 0xffff, which is all the
/// checksum depends on. An odd last byte is padded with a zero byte.
pub fn sum(data: &[u8], initial: u32) -> u32 {
    // RFC 1071 §2(B): the sum is byte-order independent, so the data is
    // summed as native-endian 32-bit halves of 64-bit loads (few, wide
    // additions) and the folded result swapped to network order once.
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (v & 0xffff_ffff) + (v >> 32);
    }
    let mut words = chunks.remainder().chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_ne_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(u16::from_ne_bytes([*last, 0]));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    let data_sum = u16::from_be(acc as u16);
    // Add to the running sum without losing a carry out of 32 bits.
    let total = u64::from(initial) + u64::from(data_sum);
    ((total & 0xffff_ffff) + (total >> 32)) as u32
}

/// Folds the carries of a running sum into 16 bits and complements it: the
/// value to store in a checksum field, or 0 when verifying a message that
/// includes a correct checksum field.
pub fn fold(sum: u32) -> u16 {
    let mut s = sum;
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// The Internet checksum of `data`: `fold(sum(data, 0))`.
pub fn checksum(data: &[u8]) -> u16 {
    fold(sum(data, 0))
}

/// Running sum of the IPv4 pseudo-header (RFC 768, RFC 9293 §3.1): source,
/// destination, zero, protocol and the transport length `len` in bytes
/// (header + payload).
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: usize) -> u32 {
    let s = src.octets();
    let d = dst.octets();
    let mut acc = u32::from(u16::from_be_bytes([s[0], s[1]]))
        + u32::from(u16::from_be_bytes([s[2], s[3]]))
        + u32::from(u16::from_be_bytes([d[0], d[1]]))
        + u32::from(u16::from_be_bytes([d[2], d[3]]))
        + u32::from(protocol);
    // The length field of the pseudo-header is 16 bits; longer lengths cannot
    // occur in IPv4 but are summed in full rather than truncated.
    acc += (len as u32 & 0xffff) + ((len as u64 >> 16) as u32 & 0xffff);
    acc
}

/// Running sum of the IPv6 pseudo-header (RFC 8200 §8.1): source,
/// destination, the 32-bit upper-layer packet length `len` in bytes (the
/// upper-layer header + its data, extension headers before it excluded),
/// three zero bytes and `next_header`, the upper-layer protocol number (e.g.
/// 6 for TCP, 58 for ICMPv6; not that of an extension header).
///
/// With a Routing header, `dst` is the final destination (RFC 8200 §8.1);
/// the caller supplies it.
pub fn pseudo_header_sum_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: usize) -> u32 {
    let mut acc: u64 = 0;
    for addr in [src, dst] {
        for w in addr.segments() {
            acc += u64::from(w);
        }
    }
    // The length field is 32 bits: a longer length cannot be carried, the
    // bits above 32 are dropped (a jumbogram is at most 2^32 - 1 bytes).
    let len = len as u64 & 0xffff_ffff;
    acc += (len >> 16) + (len & 0xffff) + u64::from(next_header);
    // 34 words of at most 0xffff cannot reach 2^32, but fold to stay exact.
    while acc > 0xffff_ffff {
        acc = (acc & 0xffff_ffff) + (acc >> 32);
    }
    acc as u32
}

/// An IP address family as the transport checksums see it (IPv4 or IPv6):
/// what `tcp` and `udp` need to parse and fill a checksum for either
/// family with one function, monomorphized (no dispatch per packet).
pub trait IpAddress: Copy + Eq + core::fmt::Debug + 'static {
    /// The address's octets: 4 for IPv4, 16 for IPv6 (network order).
    type Octets: AsRef<[u8]> + Copy;

    /// True when a UDP checksum field of 0 means "no checksum" (IPv4,
    /// RFC 768); false when it is an error (IPv6, RFC 8200 §8.1).
    const UDP_ZERO_CHECKSUM_ALLOWED: bool;

    /// The running sum of this family's pseudo-header from `self` to
    /// `dst` for upper-layer protocol `protocol` and upper-layer length
    /// `len` in bytes: [`pseudo_header_sum`] or [`pseudo_header_sum_v6`].
    fn pseudo_header_sum(self, dst: Self, protocol: u8, len: usize) -> u32;

    /// The address's octets in network order.
    fn octets(self) -> Self::Octets;
}

impl IpAddress for Ipv4Addr {
    type Octets = [u8; 4];
    const UDP_ZERO_CHECKSUM_ALLOWED: bool = true;

    #[inline]
    fn pseudo_header_sum(self, dst: Self, protocol: u8, len: usize) -> u32 {
        pseudo_header_sum(self, dst, protocol, len)
    }

    #[inline]
    fn octets(self) -> [u8; 4] {
        Ipv4Addr::octets(&self)
    }
}

impl IpAddress for Ipv6Addr {
    type Octets = [u8; 16];
    const UDP_ZERO_CHECKSUM_ALLOWED: bool = false;

    #[inline]
    fn pseudo_header_sum(self, dst: Self, protocol: u8, len: usize) -> u32 {
        pseudo_header_sum_v6(self, dst, protocol, len)
    }

    #[inline]
    fn octets(self) -> [u8; 16] {
        Ipv6Addr::octets(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_sums_to_ddf2() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), !0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_last_byte_with_zero() {
        assert_eq!(
            checksum(&[0x12, 0x34, 0x56]),
            checksum(&[0x12, 0x34, 0x56, 0x00])
        );
    }

    #[test]
    fn chunked_sum_equals_whole_sum() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        let whole = checksum(&data);
        let chained = fold(sum(&data[600..], sum(&data[..600], 0)));
        assert_eq!(whole, chained);
    }

    #[test]
    fn message_with_its_checksum_verifies_to_zero() {
        let mut data = [0x45, 0x00, 0x00, 0x1c, 0xab, 0xcd, 0x00, 0x00, 0x12, 0x34];
        let c = checksum(&data);
        data[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(checksum(&data), 0);
    }

    #[test]
    fn huge_input_carries_are_not_lost() {
        // 1 MiB of 0xff sums to 0xffff in ones'-complement arithmetic.
        let data = vec![0xffu8; 1 << 20];
        assert_eq!(checksum(&data), 0);
        assert_eq!(fold(sum(&data, u32::MAX)), 0);
    }

    #[test]
    fn empty_data_checksum_is_ffff() {
        assert_eq!(checksum(&[]), 0xffff);
    }

    #[test]
    fn pseudo_header_matches_explicit_bytes() {
        let src = Ipv4Addr::new(10, 99, 0, 1);
        let dst = Ipv4Addr::new(10, 99, 0, 2);
        let bytes = [10, 99, 0, 1, 10, 99, 0, 2, 0, 6, 0x05, 0xdc];
        assert_eq!(fold(pseudo_header_sum(src, dst, 6, 1500)), checksum(&bytes));
    }

    #[test]
    fn v6_pseudo_header_matches_explicit_bytes() {
        let src: Ipv6Addr = "fe80::1".parse().unwrap();
        let dst: Ipv6Addr = "ff02::1:ff00:2".parse().unwrap();
        // RFC 8200 §8.1 layout: src, dst, 32-bit length, 3 zero bytes, next header.
        let mut bytes = [0u8; 40];
        bytes[..16].copy_from_slice(&src.octets());
        bytes[16..32].copy_from_slice(&dst.octets());
        bytes[32..36].copy_from_slice(&70_000u32.to_be_bytes());
        bytes[39] = 58;
        assert_eq!(
            fold(pseudo_header_sum_v6(src, dst, 58, 70_000)),
            checksum(&bytes)
        );
        let ones = Ipv6Addr::from([0xffffu16; 8]);
        let mut bytes = [0xffu8; 40];
        bytes[32..36].copy_from_slice(&u32::MAX.to_be_bytes());
        bytes[36..39].fill(0);
        bytes[39] = 0xff;
        assert_eq!(
            fold(pseudo_header_sum_v6(ones, ones, 0xff, u32::MAX as usize)),
            checksum(&bytes)
        );
    }

    /// The word-at-a-time definition, for comparison.
    fn reference(data: &[u8], initial: u32) -> u16 {
        let mut acc = u64::from(initial);
        for w in data.chunks(2) {
            acc += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        fold(
            (acc % 0xffff) as u32
                + if acc != 0 && acc % 0xffff == 0 {
                    0xffff
                } else {
                    0
                },
        )
    }

    #[test]
    fn wide_sum_matches_word_sum_for_every_length_and_offset() {
        let data: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..9 {
            for end in start..data.len() {
                for initial in [0u32, 1, 0xffff, 0xdead_beef, u32::MAX] {
                    let d = &data[start..end];
                    assert_eq!(
                        fold(sum(d, initial)),
                        reference(d, initial),
                        "{start}..{end} {initial:#x}"
                    );
                }
            }
        }
    }
}
