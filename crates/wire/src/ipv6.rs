//! IPv6 fixed header (RFC 8200 §3): a checked view over a received packet,
//! [`Ipv6Packet`], and a plain header for sending, [`Ipv6Repr`].
//!
//! [`Ipv6Packet::new_checked`] validates the version and the payload length
//! once; after that no accessor can panic. The header has no checksum.
//! Extension headers are part of the payload: walk them with
//! [`crate::ipv6_ext::walk_chain`]. Jumbograms (RFC 2675: payload length 0
//! and a Jumbo Payload option) are not supported: a payload length of 0
//! means an empty payload.
//!
//! [`Ipv6Repr::emit`] writes the 40-byte fixed header.

use core::net::Ipv6Addr;

use crate::field::{put_u16, put_u32, u16_at, u32_at};
use crate::{Error, Result};

/// Length in bytes of the fixed IPv6 header (RFC 8200 §3).
pub const HEADER_LEN: usize = 40;
/// Minimum link MTU in bytes every IPv6 link carries (RFC 8200 §5).
pub const MIN_MTU: usize = 1280;

/// Next Header value: Hop-by-Hop Options header (RFC 8200 §4.3).
pub const NEXT_HOP_BY_HOP: u8 = 0;
/// Next Header value: TCP (RFC 9293).
pub const NEXT_TCP: u8 = 6;
/// Next Header value: UDP (RFC 768).
pub const NEXT_UDP: u8 = 17;
/// Next Header value: Routing header (RFC 8200 §4.4).
pub const NEXT_ROUTING: u8 = 43;
/// Next Header value: Fragment header (RFC 8200 §4.5).
pub const NEXT_FRAGMENT: u8 = 44;
/// Next Header value: Encapsulating Security Payload (RFC 4303); ends the
/// chain that can be walked.
pub const NEXT_ESP: u8 = 50;
/// Next Header value: Authentication Header (RFC 4302).
pub const NEXT_AUTH: u8 = 51;
/// Next Header value: ICMPv6 (RFC 4443).
pub const NEXT_ICMPV6: u8 = 58;
/// Next Header value: No Next Header (RFC 8200 §4.7).
pub const NEXT_NO_NEXT_HEADER: u8 = 59;
/// Next Header value: Destination Options header (RFC 8200 §4.6).
pub const NEXT_DST_OPTS: u8 = 60;

/// Byte offset of the Next Header field in the fixed header (the ICMPv6
/// Parameter Problem pointer of an unrecognized first Next Header).
pub const NEXT_HEADER_OFFSET: usize = 6;

/// A checked view of an IPv6 packet in a byte slice.
///
/// Invariants (established by [`new_checked`](Self::new_checked)): the slice
/// holds at least `40 + payload_len` bytes and the version is 6. Bytes past
/// `40 + payload_len` (Ethernet padding) are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv6Packet<'a> {
    /// Checks the version and payload length of `buf` and wraps it.
    ///
    /// Errors: [`Error::Truncated`] if `buf` is shorter than 40 bytes or than
    /// `40 + payload_len`; [`Error::Malformed`] if the version is not 6.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if buf[0] >> 4 != 6 {
            return Err(Error::Malformed);
        }
        if HEADER_LEN + usize::from(u16_at(buf, 4)) > buf.len() {
            return Err(Error::Truncated);
        }
        Ok(Ipv6Packet { buf })
    }

    /// Version field (always 6 in a checked view).
    pub fn version(&self) -> u8 {
        self.buf[0] >> 4
    }

    /// Traffic Class byte (RFC 8200 §7: DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        ((u16_at(self.buf, 0) >> 4) & 0xff) as u8
    }

    /// Flow Label (RFC 8200 §6, RFC 6437), 20 bits.
    pub fn flow_label(&self) -> u32 {
        u32_at(self.buf, 0) & 0x000f_ffff
    }

    /// Payload Length in bytes: everything after the fixed header,
    /// extension headers included.
    pub fn payload_len(&self) -> usize {
        usize::from(u16_at(self.buf, 4))
    }

    /// Next Header: the type of the first extension header or of the
    /// upper-layer header (e.g. [`NEXT_TCP`]).
    pub fn next_header(&self) -> u8 {
        self.buf[NEXT_HEADER_OFFSET]
    }

    /// Hop Limit in hops.
    pub fn hop_limit(&self) -> u8 {
        self.buf[7]
    }

    /// Source address.
    pub fn src(&self) -> Ipv6Addr {
        addr_at(self.buf, 8)
    }

    /// Destination address (with a Routing header, the next one to visit,
    /// not necessarily the final one).
    pub fn dst(&self) -> Ipv6Addr {
        addr_at(self.buf, 24)
    }

    /// The 40-byte fixed header.
    pub fn header(&self) -> &'a [u8] {
        &self.buf[..HEADER_LEN]
    }

    /// The payload: bytes `40..40 + payload_len` (padding excluded).
    pub fn payload(&self) -> &'a [u8] {
        &self.buf[HEADER_LEN..HEADER_LEN + self.payload_len()]
    }

    /// The packet: header and payload, padding excluded.
    pub fn packet(&self) -> &'a [u8] {
        &self.buf[..HEADER_LEN + self.payload_len()]
    }

    /// Every field of the fixed header as an [`Ipv6Repr`].
    pub fn repr(&self) -> Ipv6Repr {
        Ipv6Repr {
            src: self.src(),
            dst: self.dst(),
            next_header: self.next_header(),
            hop_limit: self.hop_limit(),
            traffic_class: self.traffic_class(),
            flow_label: self.flow_label(),
            payload_len: self.payload_len(),
        }
    }
}

/// An IPv6 fixed header to send (RFC 8200 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next Header: first extension header or upper-layer protocol.
    pub next_header: u8,
    /// Hop Limit in hops.
    pub hop_limit: u8,
    /// Traffic Class byte (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// Flow Label, 20 bits (RFC 6437); higher bits are a caller bug and are
    /// dropped by [`emit`](Self::emit).
    pub flow_label: u32,
    /// Payload Length in bytes, extension headers included; at most 65535.
    pub payload_len: usize,
}

impl Ipv6Repr {
    /// Length in bytes of the header [`emit`](Self::emit) writes (40).
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Total length in bytes of the packet this header describes.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the 40-byte fixed header at the start of `buf`.
    ///
    /// Panics if `buf` is shorter than [`HEADER_LEN`]. A `payload_len` above
    /// 65535 or a flow label above 20 bits is a caller bug (debug
    /// assertion); release builds truncate them.
    pub fn emit(&self, buf: &mut [u8]) {
        debug_assert!(self.payload_len <= usize::from(u16::MAX));
        debug_assert!(self.flow_label <= 0x000f_ffff);
        let first =
            (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff);
        put_u32(buf, 0, first);
        put_u16(buf, 4, self.payload_len as u16);
        buf[NEXT_HEADER_OFFSET] = self.next_header;
        buf[7] = self.hop_limit;
        buf[8..24].copy_from_slice(&self.src.octets());
        buf[24..40].copy_from_slice(&self.dst.octets());
    }
}

/// The IPv6 address at `buf[at..at + 16]`.
pub(crate) fn addr_at(buf: &[u8], at: usize) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&buf[at..at + 16]);
    Ipv6Addr::from(octets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_prefixes_truncated;

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src: "2001:db8::1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
            next_header: NEXT_UDP,
            hop_limit: 64,
            traffic_class: 0xb8,
            flow_label: 0x12345,
            payload_len: 4,
        }
    }

    fn packet() -> [u8; 44] {
        let mut buf = [0u8; 44];
        repr().emit(&mut buf);
        buf[40..].copy_from_slice(&[1, 2, 3, 4]);
        buf
    }

    #[test]
    fn repr_emit_then_parse_round_trips() {
        let buf = packet();
        let p = Ipv6Packet::new_checked(&buf).unwrap();
        assert_eq!(p.repr(), repr());
        assert_eq!(p.version(), 6);
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert_eq!(p.header().len(), HEADER_LEN);
        assert_eq!(p.packet(), &buf[..]);
        assert_eq!(repr().buffer_len(), HEADER_LEN);
        assert_eq!(repr().total_len(), 44);
    }

    #[test]
    fn emit_matches_rfc8200_layout() {
        let buf = packet();
        // Version 6, traffic class 0xb8, flow label 0x12345.
        assert_eq!(buf[..8], [0x6b, 0x81, 0x23, 0x45, 0, 4, 17, 64]);
        assert_eq!(
            buf[8..24],
            [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(
            buf[24..40],
            [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]
        );
    }

    #[test]
    fn short_buffer_any_length_is_truncated() {
        let buf = packet();
        assert_prefixes_truncated(&buf, 0..buf.len(), Ipv6Packet::new_checked);
    }

    #[test]
    fn padding_after_payload_is_excluded() {
        let mut buf = [0u8; 64];
        buf[..44].copy_from_slice(&packet());
        let p = Ipv6Packet::new_checked(&buf).unwrap();
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert_eq!(p.packet().len(), 44);
    }

    #[test]
    fn version_other_than_6_is_malformed() {
        for version in [0u8, 4, 5, 7, 15] {
            let mut buf = packet();
            buf[0] = (version << 4) | (buf[0] & 0x0f);
            assert_eq!(Ipv6Packet::new_checked(&buf), Err(Error::Malformed));
        }
    }

    #[test]
    fn payload_len_past_buffer_is_truncated() {
        let mut buf = packet();
        put_u16(&mut buf, 4, 5);
        assert_eq!(Ipv6Packet::new_checked(&buf), Err(Error::Truncated));
        put_u16(&mut buf, 4, 0);
        let p = Ipv6Packet::new_checked(&buf).unwrap();
        assert!(p.payload().is_empty());
    }

    #[test]
    fn flow_label_and_traffic_class_extremes() {
        let r = Ipv6Repr {
            traffic_class: 0xff,
            flow_label: 0xf_ffff,
            ..repr()
        };
        let mut buf = [0u8; 44];
        r.emit(&mut buf);
        assert_eq!(buf[..4], [0x6f, 0xff, 0xff, 0xff]);
        assert_eq!(Ipv6Packet::new_checked(&buf).unwrap().repr(), r);
    }
}
