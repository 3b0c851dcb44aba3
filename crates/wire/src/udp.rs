//! UDP (RFC 768): an 8-byte header (ports, length, checksum) and payload.
//!
//! The length field bounds the datagram: bytes of the IP payload past it are
//! ignored. A checksum of 0 means "none was computed" and is accepted; a
//! computed checksum of 0 is sent as 0xffff (RFC 768).

use crate::checksum::{self, IpAddress};
use crate::field::{checked_len, put_u16, u16_at};
use crate::ipv4::PROTO_UDP;
use crate::{Error, Result};

/// Length of the UDP header in bytes.
pub const HEADER_LEN: usize = 8;

/// A UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes (the length field minus 8).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Parses a UDP datagram; `segment` is the IP payload, `src`/`dst` the
    /// IP addresses for the pseudo-header. Returns the header and the
    /// payload, bounded by the length field.
    ///
    /// Errors: [`Error::Truncated`] if `segment` is shorter than 8 bytes or
    /// than the length field; [`Error::Malformed`] if the length field is
    /// below 8; [`Error::Checksum`] if `verify_checksum`, the checksum field
    /// is not 0 and the checksum does not verify.
    ///
    /// Either family: over IPv6 the checksum is mandatory (RFC 8200 §8.1: a
    /// zero checksum is an error, [`Error::Malformed`]) and covers the IPv6
    /// pseudo-header of `src`/`dst`.
    pub fn parse<A: IpAddress>(
        segment: &[u8],
        src: A,
        dst: A,
        verify_checksum: bool,
    ) -> Result<(UdpRepr, &[u8])> {
        if segment.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = checked_len(usize::from(u16_at(segment, 4)), HEADER_LEN, segment.len())?;
        let datagram = &segment[..len];
        let absent = u16_at(datagram, 6) == 0;
        if absent && !A::UDP_ZERO_CHECKSUM_ALLOWED {
            return Err(Error::Malformed);
        }
        if verify_checksum && !absent {
            let sum = checksum::sum(datagram, src.pseudo_header_sum(dst, PROTO_UDP, len));
            if checksum::fold(sum) != 0 {
                return Err(Error::Checksum);
            }
        }
        Ok(Self::repr_of(datagram))
    }

    /// The header of `datagram` (length already checked) and its payload.
    fn repr_of(datagram: &[u8]) -> (UdpRepr, &[u8]) {
        let len = datagram.len();
        let repr = UdpRepr {
            src_port: u16_at(datagram, 0),
            dst_port: u16_at(datagram, 2),
            payload_len: len - HEADER_LEN,
        };
        (repr, &datagram[HEADER_LEN..])
    }

    /// Writes the 8-byte header (length `8 + payload_len`, checksum 0) at
    /// the start of `buf`. Fill the checksum afterwards with
    /// [`fill_checksum`] once the payload is in place, or leave it 0.
    ///
    /// Panics if `buf` is shorter than 8 bytes. `8 + payload_len` above
    /// 65535 is a caller bug (debug assertion).
    pub fn emit_header(&self, buf: &mut [u8]) {
        debug_assert!(HEADER_LEN + self.payload_len <= usize::from(u16::MAX));
        put_u16(buf, 0, self.src_port);
        put_u16(buf, 2, self.dst_port);
        put_u16(buf, 4, (HEADER_LEN + self.payload_len) as u16);
        put_u16(buf, 6, 0);
    }
}

/// Computes and stores the checksum of `segment`, which must be exactly the
/// UDP datagram (header + payload), using the pseudo-header of `src`/`dst`
/// (IPv4: RFC 768; IPv6: RFC 8200 §8.1). A computed 0 is stored as 0xffff.
///
/// Panics if `segment` is shorter than 8 bytes.
pub fn fill_checksum<A: IpAddress>(segment: &mut [u8], src: A, dst: A) {
    put_u16(segment, 6, 0);
    let sum = checksum::sum(
        segment,
        src.pseudo_header_sum(dst, PROTO_UDP, segment.len()),
    );
    let c = match checksum::fold(sum) {
        0 => 0xffff,
        c => c,
    };
    put_u16(segment, 6, c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

    /// Writes the header of a datagram from `src_port` to `dst_port` with
    /// `payload_len` payload bytes at the start of `buf`.
    fn put_header(buf: &mut [u8], src_port: u16, dst_port: u16, payload_len: usize) {
        UdpRepr {
            src_port,
            dst_port,
            payload_len,
        }
        .emit_header(buf);
    }

    fn datagram() -> [u8; 12] {
        let mut buf = [0u8; 12];
        put_header(&mut buf, 4000, 5000, 4);
        buf[8..].copy_from_slice(b"ping");
        fill_checksum(&mut buf, SRC, DST);
        buf
    }

    #[test]
    fn repr_emit_then_parse_round_trips() {
        let buf = datagram();
        let (repr, payload) = UdpRepr::parse(&buf, SRC, DST, true).unwrap();
        assert_eq!(
            repr,
            UdpRepr {
                src_port: 4000,
                dst_port: 5000,
                payload_len: 4
            }
        );
        assert_eq!(payload, b"ping");
    }

    #[test]
    fn bytes_past_length_field_are_ignored() {
        let mut buf = [0u8; 20];
        buf[..12].copy_from_slice(&datagram());
        buf[12..].fill(0xee);
        let (repr, payload) = UdpRepr::parse(&buf, SRC, DST, true).unwrap();
        assert_eq!(repr.payload_len, 4);
        assert_eq!(payload, b"ping");
    }

    #[test]
    fn short_segment_any_length_is_truncated() {
        let buf = datagram();
        for len in 0..buf.len() {
            assert_eq!(
                UdpRepr::parse(&buf[..len], SRC, DST, true),
                Err(Error::Truncated)
            );
        }
    }

    #[test]
    fn length_field_below_8_is_malformed() {
        let mut buf = datagram();
        put_u16(&mut buf, 4, 7);
        assert_eq!(UdpRepr::parse(&buf, SRC, DST, false), Err(Error::Malformed));
    }

    #[test]
    fn wrong_address_fails_checksum_only_when_verified() {
        let buf = datagram();
        let other = Ipv4Addr::new(10, 99, 0, 3);
        assert_eq!(UdpRepr::parse(&buf, SRC, other, true), Err(Error::Checksum));
        assert!(UdpRepr::parse(&buf, SRC, other, false).is_ok());
    }

    #[test]
    fn zero_checksum_means_none_and_is_accepted() {
        let mut buf = datagram();
        put_u16(&mut buf, 6, 0);
        buf[8] ^= 0xff;
        assert!(UdpRepr::parse(&buf, SRC, DST, true).is_ok());
    }

    #[test]
    fn computed_zero_checksum_is_sent_as_ffff() {
        // Choose the payload so that the checksum computes to 0: start from
        // any datagram, then set a payload word so the complement is 0.
        let mut buf = [0u8; 10];
        put_header(&mut buf, 1, 2, 2);
        let partial = checksum::fold(checksum::sum(
            &buf,
            checksum::pseudo_header_sum(SRC, DST, PROTO_UDP, buf.len()),
        ));
        // Adding the word `partial` makes the sum 0xffff, whose complement is 0.
        put_u16(&mut buf, 8, partial);
        fill_checksum(&mut buf, SRC, DST);
        assert_eq!(u16_at(&buf, 6), 0xffff);
        assert!(UdpRepr::parse(&buf, SRC, DST, true).is_ok());
    }
}

#[cfg(test)]
mod tests_v6 {
    use super::*;
    use crate::test_util::{DST6, SRC6};

    #[test]
    fn v6_checksum_round_trips_and_zero_is_refused() {
        let mut buf = [0u8; 12];
        UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload_len: 4,
        }
        .emit_header(&mut buf);
        buf[8..].copy_from_slice(b"ping");
        fill_checksum(&mut buf, SRC6, DST6);
        let (r, p) = UdpRepr::parse(&buf, SRC6, DST6, true).unwrap();
        assert_eq!((r.src_port, r.dst_port, p), (1, 2, &b"ping"[..]));
        assert_eq!(
            UdpRepr::parse(&buf, DST6, "fd00::3".parse().unwrap(), true).unwrap_err(),
            Error::Checksum
        );
        buf[6..8].fill(0);
        assert_eq!(
            UdpRepr::parse(&buf, SRC6, DST6, true).unwrap_err(),
            Error::Malformed
        );
    }
}
