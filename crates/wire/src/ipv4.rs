//! IPv4 (RFC 791 §3.1): a checked view over a received packet,
//! [`Ipv4Packet`], and a plain header for sending, [`Ipv4Repr`].
//!
//! [`Ipv4Packet::new_checked`] validates the lengths once; after that no
//! accessor can panic. It does not verify the header checksum (call
//! [`Ipv4Packet::checksum_valid`]) and does not reassemble fragments (check
//! [`Ipv4Packet::is_fragment`]). Options are skipped, never interpreted.
//!
//! [`Ipv4Repr::emit`] writes a 20-byte header without options: TOS 0, no
//! fragmentation beyond the DF bit, header checksum filled in.

use core::net::Ipv4Addr;

use crate::checksum;
use crate::field::{checked_len, put_u16, u16_at};
use crate::{Error, Result};

/// Length in bytes of an IPv4 header without options (the minimum).
pub const HEADER_LEN: usize = 20;
/// Largest IPv4 header in bytes (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;
/// Protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// Protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// Protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// Flags field: don't fragment.
const FLAG_DF: u16 = 0x4000;
/// Flags field: more fragments.
const FLAG_MF: u16 = 0x2000;

/// A checked view of an IPv4 packet in a byte slice.
///
/// Invariants (established by [`new_checked`](Self::new_checked)): the slice
/// holds at least `total_len` bytes, and `20 <= header_len <= total_len`.
/// Bytes past `total_len` (Ethernet padding) are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv4Packet<'a> {
    /// Checks the length fields of `buf` and wraps it.
    ///
    /// Errors: [`Error::Truncated`] if `buf` is shorter than 20 bytes, than
    /// the header length or than the total length; [`Error::Malformed`] if
    /// the version is not 4, the IHL is below 5 or the total length is
    /// smaller than the header length.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if buf[0] >> 4 != 4 {
            return Err(Error::Malformed);
        }
        let header_len = checked_len(usize::from(buf[0] & 0x0f) * 4, HEADER_LEN, buf.len())?;
        checked_len(usize::from(u16_at(buf, 2)), header_len, buf.len())?;
        Ok(Ipv4Packet { buf })
    }

    /// Header length in bytes, options included (IHL × 4, 20..=60).
    pub fn header_len(&self) -> usize {
        usize::from(self.buf[0] & 0x0f) * 4
    }

    /// Type of service byte (DSCP << 2 | ECN).
    pub fn tos(&self) -> u8 {
        self.buf[1]
    }

    /// Total length in bytes, header plus payload.
    pub fn total_len(&self) -> usize {
        usize::from(u16_at(self.buf, 2))
    }

    /// Identification field.
    pub fn ident(&self) -> u16 {
        u16_at(self.buf, 4)
    }

    /// The don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        u16_at(self.buf, 6) & FLAG_DF != 0
    }

    /// The more-fragments flag.
    pub fn more_frags(&self) -> bool {
        u16_at(self.buf, 6) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> usize {
        usize::from(u16_at(self.buf, 6) & 0x1fff) * 8
    }

    /// True if this packet is a fragment: MF set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// Time to live in hops.
    pub fn ttl(&self) -> u8 {
        self.buf[8]
    }

    /// Protocol number of the payload, e.g. [`PROTO_TCP`].
    pub fn protocol(&self) -> u8 {
        self.buf[9]
    }

    /// Header checksum field as carried.
    pub fn checksum(&self) -> u16 {
        u16_at(self.buf, 10)
    }

    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.buf[12], self.buf[13], self.buf[14], self.buf[15])
    }

    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.buf[16], self.buf[17], self.buf[18], self.buf[19])
    }

    /// True if the header checksum (over the header including options)
    /// verifies.
    pub fn checksum_valid(&self) -> bool {
        checksum::checksum(self.header()) == 0
    }

    /// The header including options.
    pub fn header(&self) -> &'a [u8] {
        &self.buf[..self.header_len()]
    }

    /// The whole datagram: bytes `0..total_len` (padding excluded).
    pub fn bytes(&self) -> &'a [u8] {
        &self.buf[..self.total_len()]
    }

    /// The payload: bytes `header_len..total_len` (padding excluded).
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[self.header_len()..self.total_len()]
    }

    /// The fields of this header an [`Ipv4Repr`] carries (options, TOS and
    /// fragment fields other than DF are dropped); `payload_len` is
    /// `total_len - header_len`.
    pub fn repr(&self) -> Ipv4Repr {
        Ipv4Repr {
            src: self.src(),
            dst: self.dst(),
            protocol: self.protocol(),
            ttl: self.ttl(),
            ident: self.ident(),
            dont_frag: self.dont_frag(),
            payload_len: self.total_len() - self.header_len(),
        }
    }
}

/// An IPv4 header to send: 20 bytes, no options, TOS 0, not fragmented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number of the payload, e.g. [`PROTO_TCP`].
    pub protocol: u8,
    /// Time to live in hops.
    pub ttl: u8,
    /// Identification field (RFC 6864: only meaningful when fragmenting).
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
    /// Payload length in bytes; `20 + payload_len` must fit in 16 bits.
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// Total length in bytes of the packet this header describes.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the 20-byte header (version 4, IHL 5, TOS 0, total length
    /// `20 + payload_len`, header checksum filled in) at the start of `buf`.
    ///
    /// Panics if `buf` is shorter than [`HEADER_LEN`]. A `payload_len` above
    /// 65515 is a caller bug (debug assertion); release builds truncate the
    /// total length to 16 bits.
    pub fn emit(&self, buf: &mut [u8]) {
        debug_assert!(self.total_len() <= usize::from(u16::MAX));
        buf[0] = 0x45;
        buf[1] = 0;
        put_u16(buf, 2, self.total_len() as u16);
        put_u16(buf, 4, self.ident);
        put_u16(buf, 6, if self.dont_frag { FLAG_DF } else { 0 });
        buf[8] = self.ttl;
        buf[9] = self.protocol;
        put_u16(buf, 10, 0);
        buf[12..16].copy_from_slice(&self.src.octets());
        buf[16..20].copy_from_slice(&self.dst.octets());
        fill_header_checksum(&mut buf[..HEADER_LEN]);
    }
}

/// Recomputes the header checksum of `header` (exactly the IPv4 header,
/// options included) in place, e.g. after changing the TOS or TTL.
///
/// Panics if `header` is shorter than 12 bytes.
pub fn fill_header_checksum(header: &mut [u8]) {
    put_u16(header, 10, 0);
    let c = checksum::checksum(header);
    put_u16(header, 10, c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_prefixes_truncated;

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(10, 99, 0, 1),
            dst: Ipv4Addr::new(10, 99, 0, 2),
            protocol: PROTO_UDP,
            ttl: 64,
            ident: 0x1234,
            dont_frag: true,
            payload_len: 4,
        }
    }

    fn packet() -> [u8; 24] {
        let mut buf = [0u8; 24];
        repr().emit(&mut buf);
        buf[20..].copy_from_slice(&[1, 2, 3, 4]);
        buf
    }

    #[test]
    fn repr_emit_then_parse_round_trips() {
        let buf = packet();
        let p = Ipv4Packet::new_checked(&buf).unwrap();
        assert!(p.checksum_valid());
        assert_eq!(p.repr(), repr());
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 24);
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert!(!p.is_fragment());
        assert_eq!(p.tos(), 0);
    }

    #[test]
    fn emit_matches_known_header_bytes() {
        let buf = packet();
        assert_eq!(
            buf[..20],
            [0x45, 0, 0, 24, 0x12, 0x34, 0x40, 0, 64, 17, 0x13, 0xd9, 10, 99, 0, 1, 10, 99, 0, 2]
        );
    }

    #[test]
    fn short_buffer_any_length_is_truncated() {
        let buf = packet();
        assert_prefixes_truncated(&buf, 0..buf.len(), Ipv4Packet::new_checked);
    }

    #[test]
    fn padding_after_total_len_is_excluded_from_payload() {
        let mut buf = [0u8; 60];
        buf[..24].copy_from_slice(&packet());
        let p = Ipv4Packet::new_checked(&buf).unwrap();
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
    }

    #[test]
    fn version_6_is_malformed() {
        let mut buf = packet();
        buf[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&buf), Err(Error::Malformed));
    }

    #[test]
    fn ihl_below_5_is_malformed() {
        for ihl in 0..5u8 {
            let mut buf = packet();
            buf[0] = 0x40 | ihl;
            assert_eq!(Ipv4Packet::new_checked(&buf), Err(Error::Malformed));
        }
    }

    #[test]
    fn ihl_past_buffer_is_truncated() {
        let mut buf = packet();
        buf[0] = 0x46; // 24-byte header: fits exactly
        assert!(Ipv4Packet::new_checked(&buf).is_ok());
        buf[0] = 0x47; // 28 bytes > 24
        assert_eq!(Ipv4Packet::new_checked(&buf), Err(Error::Truncated));
    }

    #[test]
    fn total_len_past_buffer_is_truncated() {
        let mut buf = packet();
        put_u16(&mut buf, 2, 25);
        assert_eq!(Ipv4Packet::new_checked(&buf), Err(Error::Truncated));
    }

    #[test]
    fn total_len_below_header_len_is_malformed() {
        let mut buf = packet();
        put_u16(&mut buf, 2, 19);
        assert_eq!(Ipv4Packet::new_checked(&buf), Err(Error::Malformed));
    }

    #[test]
    fn flipped_header_bit_fails_checksum() {
        let mut buf = packet();
        buf[8] ^= 0x01;
        assert!(!Ipv4Packet::new_checked(&buf).unwrap().checksum_valid());
    }

    #[test]
    fn options_are_skipped_and_covered_by_checksum() {
        // 24-byte header with a 4-byte option (NOP NOP NOP EOL).
        let mut buf = [0u8; 28];
        repr().emit(&mut buf);
        buf[0] = 0x46;
        put_u16(&mut buf, 2, 28);
        buf[20..24].copy_from_slice(&[1, 1, 1, 0]);
        buf[24..].copy_from_slice(&[9, 9, 9, 9]);
        fill_header_checksum(&mut buf[..24]);
        let p = Ipv4Packet::new_checked(&buf).unwrap();
        assert!(p.checksum_valid());
        assert_eq!(p.header().len(), 24);
        assert_eq!(p.payload(), &[9, 9, 9, 9]);
        buf[21] = 7;
        assert!(!Ipv4Packet::new_checked(&buf).unwrap().checksum_valid());
    }

    #[test]
    fn fragment_fields_decode() {
        let mut buf = packet();
        put_u16(&mut buf, 6, FLAG_MF | 3); // MF, offset 24 bytes
        let p = Ipv4Packet::new_checked(&buf).unwrap();
        assert!(p.more_frags() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 24);
        assert!(p.is_fragment());
        put_u16(&mut buf, 6, 1);
        let p = Ipv4Packet::new_checked(&buf).unwrap();
        assert!(!p.more_frags());
        assert!(p.is_fragment());
    }
}
