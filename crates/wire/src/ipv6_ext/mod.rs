//! IPv6 extension headers (RFC 8200 §4): Hop-by-Hop and Destination
//! Options ([`Ipv6OptionsRepr`], with their option TLVs in [`option`]),
//! Routing ([`Ipv6RoutingRepr`]) and Fragment ([`Ipv6FragmentRepr`]), and a
//! bounded walk of the header chain to the upper-layer header
//! ([`walk_chain`], in [`chain`]).
//!
//! Every header but Fragment starts with Next Header and Hdr Ext Len, the
//! length in 8-byte units not counting the first 8 bytes; the Fragment
//! header is always 8 bytes. Each `parse` takes the bytes from the start of
//! the header to the end of the IPv6 payload and reads only the header's own
//! bytes; the next header starts [`buffer_len`](Ipv6OptionsRepr::buffer_len)
//! bytes later.

pub mod chain;
pub mod option;

pub use chain::{
    walk_after_fragment, walk_chain, Ipv6ChainEnd, Ipv6ChainError, MAX_CHAIN_LEN, MAX_EXT_HEADERS,
};
pub use option::{Ipv6Option, Ipv6OptionIter, OptionAction};

use crate::field::{put_u16, put_u32, u16_at, u32_at};
use crate::{Error, Result};

/// Length in bytes of a Fragment header (RFC 8200 §4.5).
pub const FRAGMENT_HEADER_LEN: usize = 8;
/// Routing Type 0 (RFC 8200 §4.4), deprecated by RFC 5095.
pub const ROUTING_TYPE0: u8 = 0;
/// Byte offset of the Routing Type field in a Routing header (the ICMPv6
/// Parameter Problem pointer for an unrecognized routing type).
pub const ROUTING_TYPE_OFFSET: usize = 2;

/// Length in bytes of an extension header with this Hdr Ext Len byte:
/// `8 + 8 × hdr_ext_len` (RFC 8200 §4.3, §4.4, §4.6).
pub fn ext_header_len(hdr_ext_len: u8) -> usize {
    8 + 8 * usize::from(hdr_ext_len)
}

/// Writes the two-byte prefix of an extension header of `len` bytes (a
/// multiple of 8, at most 2048): Next Header and Hdr Ext Len (RFC 8200
/// §4.3-§4.6). Returns the header's `len` bytes of `buf`.
///
/// Panics if `buf` is shorter than `len`; a `len` beyond 2048 is a caller
/// bug (debug assertion).
fn emit_prefix(buf: &mut [u8], next_header: u8, len: usize) -> &mut [u8] {
    debug_assert!(len <= ext_header_len(u8::MAX) && len % 8 == 0);
    let buf = &mut buf[..len];
    buf[0] = next_header;
    buf[1] = (len / 8 - 1) as u8;
    buf
}

/// The length of the generic extension header at the start of `buf`,
/// checked against `buf`: [`Error::Truncated`] if the two-byte prefix or the
/// whole header does not fit.
fn checked_ext_len(buf: &[u8]) -> Result<usize> {
    let len = ext_header_len(*buf.get(1).ok_or(Error::Truncated)?);
    if len > buf.len() {
        return Err(Error::Truncated);
    }
    Ok(len)
}

/// A Hop-by-Hop Options (RFC 8200 §4.3) or Destination Options (§4.6)
/// header; both have the same layout.
///
/// Valid (so that `parse(emit(repr)) == repr`): `2 + options.len()` is a
/// multiple of 8, at most 2048, and `options` is a well-formed TLV list.
/// [`emit`](Self::emit) pads any other length with Pad1/PadN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6OptionsRepr<'a> {
    /// Next Header: the type of the header that follows.
    pub next_header: u8,
    /// The options area: every byte after Next Header and Hdr Ext Len,
    /// padding included.
    pub options: &'a [u8],
}

impl<'a> Ipv6OptionsRepr<'a> {
    /// Parses the options header at the start of `buf` (bytes past its
    /// length are ignored).
    ///
    /// Errors: [`Error::Truncated`] if `buf` is shorter than the header;
    /// [`Error::Malformed`] if an option TLV runs past the header.
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        let len = checked_ext_len(buf)?;
        let repr = Ipv6OptionsRepr {
            next_header: buf[0],
            options: &buf[2..len],
        };
        for opt in repr.options() {
            opt?;
        }
        Ok(repr)
    }

    /// The option TLVs; after a successful [`parse`](Self::parse) none is
    /// an error. Offsets count from the start of the header.
    pub fn options(&self) -> Ipv6OptionIter<'a> {
        Ipv6OptionIter::new(self.options, 2)
    }

    /// Length in bytes of the header [`emit`](Self::emit) writes:
    /// `2 + options.len()` rounded up to a multiple of 8.
    pub fn buffer_len(&self) -> usize {
        (2 + self.options.len()).div_ceil(8) * 8
    }

    /// Writes the header at the start of `buf`, padding the options to a
    /// multiple of 8 bytes, and returns its length in bytes.
    ///
    /// Panics if `buf` is shorter than [`buffer_len`](Self::buffer_len).
    /// Options longer than 2046 bytes are a caller bug (debug assertion).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = emit_prefix(buf, self.next_header, len);
        let end = 2 + self.options.len();
        buf[2..end].copy_from_slice(self.options);
        option::emit_padding(&mut buf[end..], len - end);
        len
    }
}

/// A Routing header (RFC 8200 §4.4). corestack is a host and implements no
/// routing type; [`chain::walk_chain`] skips one whose Segments Left is 0
/// and rejects the others.
///
/// Valid (so that `parse(emit(repr)) == repr`): `4 + data.len()` is a
/// multiple of 8 and at most 2048. [`emit`](Self::emit) pads any other
/// length with zero bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6RoutingRepr<'a> {
    /// Next Header: the type of the header that follows.
    pub next_header: u8,
    /// Routing Type, e.g. [`ROUTING_TYPE0`].
    pub routing_type: u8,
    /// Segments Left: route segments still to visit.
    pub segments_left: u8,
    /// Type-specific data: every byte after the first four.
    pub data: &'a [u8],
}

impl<'a> Ipv6RoutingRepr<'a> {
    /// Parses the Routing header at the start of `buf` (bytes past its
    /// length are ignored).
    ///
    /// Errors: [`Error::Truncated`] if `buf` is shorter than the header.
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        let len = checked_ext_len(buf)?;
        Ok(Ipv6RoutingRepr {
            next_header: buf[0],
            routing_type: buf[ROUTING_TYPE_OFFSET],
            segments_left: buf[3],
            data: &buf[4..len],
        })
    }

    /// True for the deprecated Type 0 Routing header (RFC 5095).
    pub fn is_type0(&self) -> bool {
        self.routing_type == ROUTING_TYPE0
    }

    /// Length in bytes of the header [`emit`](Self::emit) writes:
    /// `4 + data.len()` rounded up to a multiple of 8.
    pub fn buffer_len(&self) -> usize {
        (4 + self.data.len()).div_ceil(8) * 8
    }

    /// Writes the header at the start of `buf`, zero-padding the data to a
    /// multiple of 8 bytes, and returns its length in bytes.
    ///
    /// Panics if `buf` is shorter than [`buffer_len`](Self::buffer_len).
    /// Data longer than 2044 bytes is a caller bug (debug assertion).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = emit_prefix(buf, self.next_header, len);
        buf[ROUTING_TYPE_OFFSET] = self.routing_type;
        buf[3] = self.segments_left;
        let end = 4 + self.data.len();
        buf[4..end].copy_from_slice(self.data);
        buf[end..].fill(0);
        len
    }
}

/// A Fragment header (RFC 8200 §4.5): 8 bytes. Reserved fields are ignored
/// when parsing and sent as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentRepr {
    /// Next Header: the type of the first header of the fragmentable part
    /// (meaningful in the first fragment).
    pub next_header: u8,
    /// Fragment Offset in bytes (the field counts 8-byte units, so a
    /// multiple of 8, at most 65528).
    pub frag_offset: usize,
    /// M flag: more fragments follow.
    pub more_frags: bool,
    /// Identification of the original packet.
    pub ident: u32,
}

impl Ipv6FragmentRepr {
    /// Parses the Fragment header at the start of `buf`.
    ///
    /// Errors: [`Error::Truncated`] if `buf` is shorter than 8 bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        if buf.len() < FRAGMENT_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let word = u16_at(buf, 2);
        Ok(Ipv6FragmentRepr {
            next_header: buf[0],
            frag_offset: usize::from(word >> 3) * 8,
            more_frags: word & 1 != 0,
            ident: u32_at(buf, 4),
        })
    }

    /// True for an atomic fragment (offset 0, M clear; RFC 6946): the whole
    /// packet, to be processed without reassembly.
    pub fn is_atomic(&self) -> bool {
        self.frag_offset == 0 && !self.more_frags
    }

    /// Length in bytes of the header [`emit`](Self::emit) writes (8).
    pub fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// Writes the 8-byte header at the start of `buf`.
    ///
    /// Panics if `buf` is shorter than 8 bytes. An offset that is not a
    /// multiple of 8 or is above 65528 is a caller bug (debug assertion);
    /// release builds drop the low bits and truncate.
    pub fn emit(&self, buf: &mut [u8]) {
        debug_assert!(self.frag_offset % 8 == 0 && self.frag_offset <= 0xfff8);
        buf[0] = self.next_header;
        buf[1] = 0;
        let units = ((self.frag_offset / 8) & 0x1fff) as u16;
        put_u16(buf, 2, (units << 3) | u16::from(self.more_frags));
        put_u32(buf, 4, self.ident);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::{NEXT_TCP, NEXT_UDP};
    use crate::test_util::assert_prefixes_truncated;

    #[test]
    fn options_header_round_trips_and_pads() {
        // Router Alert (RFC 2711) + PadN: 8 bytes in all.
        let opts = [0x05, 0x02, 0x00, 0x00, 0x01, 0x00];
        let repr = Ipv6OptionsRepr {
            next_header: NEXT_UDP,
            options: &opts,
        };
        let mut buf = [0xeeu8; 8];
        assert_eq!(repr.emit(&mut buf), 8);
        assert_eq!(buf, [17, 0, 0x05, 0x02, 0, 0, 0x01, 0]);
        assert_eq!(Ipv6OptionsRepr::parse(&buf), Ok(repr));
        // An option area of 1 byte is padded to 8 with PadN(4 zero bytes).
        let short = Ipv6OptionsRepr {
            next_header: NEXT_TCP,
            options: &[0],
        };
        let mut buf = [0xeeu8; 16];
        assert_eq!(short.emit(&mut buf), 8);
        assert_eq!(buf[..8], [6, 0, 0, 1, 3, 0, 0, 0]);
        let parsed = Ipv6OptionsRepr::parse(&buf[..8]).unwrap();
        assert_eq!(parsed.options().count(), 2);
        assert!(parsed.options().all(|o| o.unwrap().is_padding()));
    }

    #[test]
    fn options_header_truncated_at_every_length() {
        let mut buf = [0u8; 16];
        buf[1] = 1; // 16 bytes
        buf[2] = 1;
        buf[3] = 12; // PadN over the rest
        assert!(Ipv6OptionsRepr::parse(&buf).is_ok());
        assert_prefixes_truncated(&buf, 0..16, Ipv6OptionsRepr::parse);
    }

    #[test]
    fn option_overrunning_its_header_is_malformed() {
        let buf = [17, 0, 0x3e, 5, 0, 0, 0, 0, 0xaa, 0xaa];
        assert_eq!(Ipv6OptionsRepr::parse(&buf), Err(Error::Malformed));
    }

    #[test]
    fn routing_header_round_trips() {
        let data = [0u8; 4];
        let repr = Ipv6RoutingRepr {
            next_header: NEXT_TCP,
            routing_type: 4,
            segments_left: 2,
            data: &data,
        };
        let mut buf = [0u8; 8];
        assert_eq!(repr.emit(&mut buf), 8);
        assert_eq!(buf, [6, 0, 4, 2, 0, 0, 0, 0]);
        let parsed = Ipv6RoutingRepr::parse(&buf).unwrap();
        assert_eq!(parsed, repr);
        assert!(!parsed.is_type0());
        for len in 0..8 {
            assert_eq!(Ipv6RoutingRepr::parse(&buf[..len]), Err(Error::Truncated));
        }
    }

    #[test]
    fn type0_routing_header_is_recognized() {
        // RFC 8200 §4.4 RH0 with one address: Hdr Ext Len 2, 4 reserved bytes.
        let mut buf = [0u8; 24];
        buf[..4].copy_from_slice(&[59, 2, 0, 1]);
        buf[8..24].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
        let r = Ipv6RoutingRepr::parse(&buf).unwrap();
        assert!(r.is_type0());
        assert_eq!((r.segments_left, r.data.len(), r.buffer_len()), (1, 20, 24));
        assert_eq!(Ipv6RoutingRepr::parse(&buf[..23]), Err(Error::Truncated));
    }

    #[test]
    fn fragment_header_matches_rfc8200_layout() {
        let repr = Ipv6FragmentRepr {
            next_header: NEXT_UDP,
            frag_offset: 1448,
            more_frags: true,
            ident: 0xdead_beef,
        };
        let mut buf = [0xffu8; 8];
        repr.emit(&mut buf);
        // Offset 181 units << 3 | M = 0x05a9.
        assert_eq!(buf, [17, 0, 0x05, 0xa9, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Ipv6FragmentRepr::parse(&buf), Ok(repr));
        assert!(!repr.is_atomic());
        assert_eq!(repr.buffer_len(), 8);
        for len in 0..8 {
            assert_eq!(Ipv6FragmentRepr::parse(&buf[..len]), Err(Error::Truncated));
        }
        // Reserved bits (byte 1, bits 1-2 of the offset word) are ignored.
        buf[1] = 0xff;
        buf[3] |= 0x06;
        assert_eq!(Ipv6FragmentRepr::parse(&buf), Ok(repr));
        let atomic = Ipv6FragmentRepr {
            frag_offset: 0,
            more_frags: false,
            ..repr
        };
        assert!(atomic.is_atomic());
    }
}
