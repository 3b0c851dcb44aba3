//! ICMPv4 (RFC 792): echo request/reply, destination unreachable, and every
//! other message as its type and code only.
//!
//! Every message starts with type, code and a checksum over the whole
//! message (header and data), followed by four type-specific bytes:
//! identifier and sequence number for echo, unused + next-hop MTU (RFC 1191)
//! for destination unreachable.

use crate::checksum;
use crate::field::{put_u16, put_u32, u16_at};
use crate::{Error, Result};

/// Length in bytes of the fixed part of every ICMP message.
pub const HEADER_LEN: usize = 8;

/// Message type: echo reply.
pub const TYPE_ECHO_REPLY: u8 = 0;
/// Message type: destination unreachable.
pub const TYPE_DST_UNREACH: u8 = 3;
/// Message type: echo request.
pub const TYPE_ECHO_REQUEST: u8 = 8;

/// Destination-unreachable code: protocol unreachable.
pub const DST_UNREACH_PROTOCOL: u8 = 2;
/// Destination-unreachable code: port unreachable.
pub const DST_UNREACH_PORT: u8 = 3;
/// Destination-unreachable code: fragmentation needed and DF set (RFC 1191).
pub const DST_UNREACH_FRAG_NEEDED: u8 = 4;

/// The body of an echo request or reply, alike in ICMPv4 (RFC 792) and
/// ICMPv6 (RFC 4443 §4.1-§4.2): identifier and sequence number in the four
/// type-specific bytes, then the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo<'a> {
    /// Identifier.
    pub ident: u16,
    /// Sequence number.
    pub seq_no: u16,
    /// Echo data, returned unchanged in the reply.
    pub data: &'a [u8],
}

impl<'a> Echo<'a> {
    /// The echo fields of `message`, a whole ICMP or ICMPv6 message of at
    /// least [`HEADER_LEN`] bytes (the caller checked).
    pub(crate) fn parse(message: &'a [u8]) -> Echo<'a> {
        Echo {
            ident: u16_at(message, 4),
            seq_no: u16_at(message, 6),
            data: &message[HEADER_LEN..],
        }
    }

    /// Identifier and sequence number as the 32-bit word they fill.
    pub(crate) fn word(&self) -> u32 {
        (u32::from(self.ident) << 16) | u32::from(self.seq_no)
    }
}

/// Writes the fixed part of an ICMP or ICMPv6 message (type, code, a zero
/// checksum, the 32-bit type-specific `word`) and `data` after it into
/// `buf`, exactly `HEADER_LEN + data.len()` bytes; the caller fills the
/// checksum.
pub(crate) fn put_fixed(buf: &mut [u8], msg_type: u8, code: u8, word: u32, data: &[u8]) {
    buf[0] = msg_type;
    buf[1] = code;
    put_u16(buf, 2, 0);
    put_u32(buf, 4, word);
    buf[HEADER_LEN..].copy_from_slice(data);
}

/// An ICMPv4 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Type 8 (code 0 sent; any code accepted).
    EchoRequest(Echo<'a>),
    /// Type 0 (code 0 sent; any code accepted).
    EchoReply(Echo<'a>),
    /// Type 3; `data` = the original IP header + at least 8 bytes of its
    /// payload (RFC 792; RFC 1812 allows more). Parsing does not check that
    /// `data` holds a valid header: the quoted datagram may be cut short
    /// (RFC 792 only promises 8 bytes past the header), so its total length
    /// may exceed `data`. `next_hop_mtu` in bytes is
    /// meaningful for [`DST_UNREACH_FRAG_NEEDED`] only (RFC 1191).
    DstUnreachable {
        /// Reason, e.g. [`DST_UNREACH_PORT`].
        code: u8,
        /// Next-hop MTU in bytes (RFC 1191), 0 if not given.
        next_hop_mtu: u16,
        /// The quoted original datagram.
        data: &'a [u8],
    },
    /// Any other type; its body is not kept, and it is emitted as an 8-byte
    /// message with the four type-specific bytes zero.
    Other {
        /// Message type.
        msg_type: u8,
        /// Message code.
        code: u8,
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Parses an ICMP message (exactly the IP payload).
    ///
    /// Errors: [`Error::Truncated`] if shorter than 8 bytes;
    /// [`Error::Checksum`] if `verify_checksum` and the checksum over the
    /// whole message does not verify.
    pub fn parse(packet: &'a [u8], verify_checksum: bool) -> Result<Icmpv4Repr<'a>> {
        if packet.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if verify_checksum && checksum::checksum(packet) != 0 {
            return Err(Error::Checksum);
        }
        let (msg_type, code) = (packet[0], packet[1]);
        let data = &packet[HEADER_LEN..];
        Ok(match msg_type {
            TYPE_ECHO_REQUEST => Icmpv4Repr::EchoRequest(Echo::parse(packet)),
            TYPE_ECHO_REPLY => Icmpv4Repr::EchoReply(Echo::parse(packet)),
            TYPE_DST_UNREACH => Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu: u16_at(packet, 6),
                data,
            },
            _ => Icmpv4Repr::Other { msg_type, code },
        })
    }

    /// Length in bytes of the message [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest(Echo { data, .. })
            | Icmpv4Repr::EchoReply(Echo { data, .. })
            | Icmpv4Repr::DstUnreachable { data, .. } => HEADER_LEN + data.len(),
            Icmpv4Repr::Other { .. } => HEADER_LEN,
        }
    }

    /// Writes the message, checksum included, at the start of `buf` and
    /// returns its length in bytes ([`buffer_len`](Self::buffer_len)).
    ///
    /// Panics if `buf` is shorter than `buffer_len()` (a caller bug).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        let (msg_type, code, word, data): (u8, u8, u32, &[u8]) = match *self {
            Icmpv4Repr::EchoRequest(e) => (TYPE_ECHO_REQUEST, 0, e.word(), e.data),
            Icmpv4Repr::EchoReply(e) => (TYPE_ECHO_REPLY, 0, e.word(), e.data),
            Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu,
                data,
            } => (TYPE_DST_UNREACH, code, u32::from(next_hop_mtu), data),
            Icmpv4Repr::Other { msg_type, code } => (msg_type, code, 0, &[]),
        };
        put_fixed(buf, msg_type, code, word, data);
        let c = checksum::checksum(buf);
        put_u16(buf, 2, c);
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request_emit_matches_known_bytes() {
        let repr = Icmpv4Repr::EchoRequest(Echo {
            ident: 0x1234,
            seq_no: 1,
            data: b"ab",
        });
        let mut buf = [0u8; 10];
        assert_eq!(repr.emit(&mut buf), 10);
        let c = !(0x0800u16 + 0x1234 + 0x0001 + 0x6162);
        assert_eq!(
            buf,
            [8, 0, (c >> 8) as u8, c as u8, 0x12, 0x34, 0, 1, b'a', b'b']
        );
    }

    #[test]
    fn every_kind_round_trips() {
        let quoted = [0x45u8; 28];
        let reprs = [
            Icmpv4Repr::EchoRequest(Echo {
                ident: 1,
                seq_no: 2,
                data: b"hello",
            }),
            Icmpv4Repr::EchoReply(Echo {
                ident: 0xffff,
                seq_no: 0,
                data: &[],
            }),
            Icmpv4Repr::DstUnreachable {
                code: DST_UNREACH_PORT,
                next_hop_mtu: 0,
                data: &quoted,
            },
            Icmpv4Repr::DstUnreachable {
                code: DST_UNREACH_FRAG_NEEDED,
                next_hop_mtu: 1400,
                data: &quoted,
            },
            Icmpv4Repr::Other {
                msg_type: 11,
                code: 0,
            },
        ];
        for repr in reprs {
            let mut buf = [0u8; 64];
            let len = repr.emit(&mut buf);
            assert_eq!(len, repr.buffer_len());
            assert_eq!(Icmpv4Repr::parse(&buf[..len], true), Ok(repr));
        }
    }

    #[test]
    fn short_message_any_length_is_truncated() {
        let mut buf = [0u8; 8];
        Icmpv4Repr::EchoRequest(Echo {
            ident: 1,
            seq_no: 1,
            data: &[],
        })
        .emit(&mut buf);
        for len in 0..8 {
            assert_eq!(Icmpv4Repr::parse(&buf[..len], true), Err(Error::Truncated));
            assert_eq!(Icmpv4Repr::parse(&buf[..len], false), Err(Error::Truncated));
        }
    }

    #[test]
    fn corrupted_data_fails_checksum_only_when_verified() {
        let mut buf = [0u8; 12];
        Icmpv4Repr::EchoReply(Echo {
            ident: 7,
            seq_no: 9,
            data: b"abcd",
        })
        .emit(&mut buf);
        buf[11] ^= 0x20;
        assert_eq!(Icmpv4Repr::parse(&buf, true), Err(Error::Checksum));
        assert_eq!(
            Icmpv4Repr::parse(&buf, false),
            Ok(Icmpv4Repr::EchoReply(Echo {
                ident: 7,
                seq_no: 9,
                data: b"abcD"
            }))
        );
    }
}
