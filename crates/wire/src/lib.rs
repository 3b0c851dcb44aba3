//! Wire formats of corestack: checked zero-copy views and plain
//! representations of Ethernet II, ARP, IPv4, ICMPv4, UDP and TCP; IPv6
//! ([`ipv6`], RFC 8200) with its extension headers and a bounded walk of
//! their chain ([`ipv6_ext`]), ICMPv6 ([`icmpv6`], RFC 4443) and Neighbor
//! Discovery ([`ndisc`], RFC 4861); plus the Internet checksum. No I/O, no
//! allocation, no unsafe.
//!
//! # Contract
//!
//! - Every `parse` / `new_checked` takes bytes straight from the network and
//!   never panics: malformed input is an [`Error`]. After a view has been
//!   checked, none of its accessors can panic.
//! - Every `emit*` writes into a buffer the caller owns and sized with the
//!   matching `*_len` function or `HEADER_LEN` constant; a buffer that is too
//!   short is a bug in the caller and panics (it is never network input).
//! - Reprs are plain `Copy` values: `parse(emit(repr)) == repr` for every
//!   valid repr (see each module for what "valid" means).
//! - Layers do not call each other: the caller peels Ethernet, then IPv4 (or
//!   IPv6 and its extension headers, with [`ipv6_ext::walk_chain`]), then the
//!   transport, passing the payload slice of one layer to the next. Transport
//!   checksums need the IP source and destination for the pseudo-header
//!   ([`checksum::pseudo_header_sum`], [`checksum::pseudo_header_sum_v6`]);
//!   ICMPv6 and ND messages take them in `parse` and `emit`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6_ext;
pub mod ndisc;
pub mod seq;
pub mod tcp;
pub mod udp;

pub use ethernet::MacAddr;
pub use seq::SeqNum;

use core::fmt;

/// Why a packet was rejected. Each variant is a drop reason the engine counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than a header or a length field says it is.
    Truncated,
    /// A field has a value the RFC forbids (bad version, header length,
    /// option length, length field smaller than the header).
    Malformed,
    /// The checksum does not verify.
    Checksum,
    /// Well-formed but not handled by corestack (e.g. ARP for another
    /// hardware/protocol type, an unknown ARP operation).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "bad checksum",
            Error::Unsupported => "unsupported packet",
        })
    }
}

impl std::error::Error for Error {}

/// Result of parsing a packet.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod test_util;

/// Big-endian field access on slices whose length the caller has checked.
pub(crate) mod field {
    #[inline]
    pub fn u16_at(buf: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([buf[at], buf[at + 1]])
    }

    #[inline]
    pub fn u32_at(buf: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
    }

    #[inline]
    pub fn put_u16(buf: &mut [u8], at: usize, value: u16) {
        buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
    }

    #[inline]
    pub fn put_u32(buf: &mut [u8], at: usize, value: u32) {
        buf[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }

    /// Checks a length `len` taken from a header: [`super::Error::Malformed`]
    /// below `min` (what the header itself takes), else
    /// [`super::Error::Truncated`] past the `available` bytes; else `len`.
    #[inline]
    pub fn checked_len(len: usize, min: usize, available: usize) -> super::Result<usize> {
        if len < min {
            return Err(super::Error::Malformed);
        }
        if len > available {
            return Err(super::Error::Truncated);
        }
        Ok(len)
    }
}
