//! ICMPv6 (RFC 4443): echo request/reply, the four error messages
//! (destination unreachable, packet too big, time exceeded, parameter
//! problem), and every other message (Neighbor Discovery among them, parsed
//! further by [`crate::ndisc`]) as its type, code and body.
//!
//! Every message starts with type, code and a checksum over the IPv6
//! pseudo-header (RFC 8200 §8.1, next header 58) and the whole message
//! (RFC 4443 §2.3), followed by four type-specific bytes. Error messages
//! quote as much of the invoking packet as fits in the minimum MTU (RFC 4443
//! §2.4 (c)): at most [`MAX_ERROR_DATA_LEN`] bytes; the caller cuts it.

use core::net::Ipv6Addr;

use crate::checksum;
use crate::field::{put_u16, u16_at, u32_at};
use crate::icmp::put_fixed;
use crate::ipv6::{self, NEXT_ICMPV6};
use crate::{Error, Result};

pub use crate::icmp::Echo;

/// Length in bytes of the fixed part (type, code, checksum and four
/// type-specific bytes) of every ICMPv6 message corestack parses.
pub const HEADER_LEN: usize = 8;
/// Most bytes of the invoking packet an error message carries: what the
/// minimum MTU (1280) leaves after the IPv6 and ICMPv6 headers (RFC 4443
/// §2.4 (c)).
pub const MAX_ERROR_DATA_LEN: usize = ipv6::MIN_MTU - ipv6::HEADER_LEN - HEADER_LEN;

/// Message type: destination unreachable (RFC 4443 §3.1).
pub const TYPE_DST_UNREACH: u8 = 1;
/// Message type: packet too big (RFC 4443 §3.2).
pub const TYPE_PACKET_TOO_BIG: u8 = 2;
/// Message type: time exceeded (RFC 4443 §3.3).
pub const TYPE_TIME_EXCEEDED: u8 = 3;
/// Message type: parameter problem (RFC 4443 §3.4).
pub const TYPE_PARAM_PROBLEM: u8 = 4;
/// Message type: echo request (RFC 4443 §4.1).
pub const TYPE_ECHO_REQUEST: u8 = 128;
/// Message type: echo reply (RFC 4443 §4.2).
pub const TYPE_ECHO_REPLY: u8 = 129;
/// Message type: Router Solicitation (RFC 4861 §4.1).
pub const TYPE_ROUTER_SOLICIT: u8 = 133;
/// Message type: Router Advertisement (RFC 4861 §4.2).
pub const TYPE_ROUTER_ADVERT: u8 = 134;
/// Message type: Neighbor Solicitation (RFC 4861 §4.3).
pub const TYPE_NEIGHBOR_SOLICIT: u8 = 135;
/// Message type: Neighbor Advertisement (RFC 4861 §4.4).
pub const TYPE_NEIGHBOR_ADVERT: u8 = 136;
/// Message type: Redirect (RFC 4861 §4.5).
pub const TYPE_REDIRECT: u8 = 137;

/// Destination-unreachable code: no route to destination.
pub const DST_UNREACH_NO_ROUTE: u8 = 0;
/// Destination-unreachable code: communication administratively prohibited.
pub const DST_UNREACH_ADMIN_PROHIBITED: u8 = 1;
/// Destination-unreachable code: beyond scope of source address.
pub const DST_UNREACH_BEYOND_SCOPE: u8 = 2;
/// Destination-unreachable code: address unreachable.
pub const DST_UNREACH_ADDR: u8 = 3;
/// Destination-unreachable code: port unreachable.
pub const DST_UNREACH_PORT: u8 = 4;
/// Destination-unreachable code: source address failed ingress/egress policy.
pub const DST_UNREACH_SRC_POLICY: u8 = 5;
/// Destination-unreachable code: reject route to destination.
pub const DST_UNREACH_REJECT_ROUTE: u8 = 6;

/// Time-exceeded code: hop limit exceeded in transit.
pub const TIME_EXCEEDED_HOP_LIMIT: u8 = 0;
/// Time-exceeded code: fragment reassembly time exceeded.
pub const TIME_EXCEEDED_REASSEMBLY: u8 = 1;

/// Parameter-problem code: erroneous header field encountered.
pub const PARAM_PROBLEM_HEADER_FIELD: u8 = 0;
/// Parameter-problem code: unrecognized Next Header type encountered.
pub const PARAM_PROBLEM_NEXT_HEADER: u8 = 1;
/// Parameter-problem code: unrecognized IPv6 option encountered.
pub const PARAM_PROBLEM_OPTION: u8 = 2;

/// Running sum of the pseudo-header of an ICMPv6 message of `len` bytes.
fn pseudo_sum(src: Ipv6Addr, dst: Ipv6Addr, len: usize) -> u32 {
    checksum::pseudo_header_sum_v6(src, dst, NEXT_ICMPV6, len)
}

/// True if the checksum of `message` (the whole ICMPv6 message) verifies
/// with the pseudo-header of `src`/`dst`.
pub fn checksum_valid(message: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> bool {
    checksum::fold(checksum::sum(message, pseudo_sum(src, dst, message.len()))) == 0
}

/// Computes and stores the checksum of `message`, which must be exactly
/// the ICMPv6 message, using the pseudo-header of `src`/`dst`.
///
/// Panics if `message` is shorter than 4 bytes.
pub fn fill_checksum(message: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) {
    put_u16(message, 2, 0);
    let c = checksum::fold(checksum::sum(message, pseudo_sum(src, dst, message.len())));
    put_u16(message, 2, c);
}

/// A checked view of an ICMPv6 message (exactly the upper-layer bytes).
///
/// Invariant (established by [`new_checked`](Self::new_checked)): at least
/// [`HEADER_LEN`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Icmpv6Packet<'a> {
    /// Checks the length of `buf` and wraps it.
    ///
    /// Errors: [`Error::Truncated`] if shorter than 8 bytes.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Icmpv6Packet { buf })
    }

    /// Message type, e.g. [`TYPE_ECHO_REQUEST`].
    pub fn msg_type(&self) -> u8 {
        self.buf[0]
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        self.buf[1]
    }

    /// Checksum field as carried.
    pub fn checksum(&self) -> u16 {
        u16_at(self.buf, 2)
    }

    /// True for an error message (type below 128, RFC 4443 §2.1): never
    /// answered with another error (§2.4 (e.1)).
    pub fn is_error(&self) -> bool {
        self.msg_type() < 128
    }

    /// True if the checksum verifies with the pseudo-header of `src`/`dst`.
    pub fn checksum_valid(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        checksum_valid(self.buf, src, dst)
    }

    /// The whole message.
    pub fn message(&self) -> &'a [u8] {
        self.buf
    }

    /// Every byte after type, code and checksum (type-specific fields and
    /// data).
    pub fn body(&self) -> &'a [u8] {
        &self.buf[4..]
    }
}

/// An ICMPv6 message. For the error messages `data` is the quoted invoking
/// packet, borrowed, not checked (it may be cut anywhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Type 1 (RFC 4443 §3.1).
    DstUnreachable {
        /// Reason, e.g. [`DST_UNREACH_PORT`].
        code: u8,
        /// The invoking packet.
        data: &'a [u8],
    },
    /// Type 2, code 0 (RFC 4443 §3.2; any code accepted).
    PacketTooBig {
        /// MTU of the next-hop link in bytes.
        mtu: u32,
        /// The invoking packet.
        data: &'a [u8],
    },
    /// Type 3 (RFC 4443 §3.3).
    TimeExceeded {
        /// [`TIME_EXCEEDED_HOP_LIMIT`] or [`TIME_EXCEEDED_REASSEMBLY`].
        code: u8,
        /// The invoking packet.
        data: &'a [u8],
    },
    /// Type 4 (RFC 4443 §3.4).
    ParamProblem {
        /// E.g. [`PARAM_PROBLEM_NEXT_HEADER`].
        code: u8,
        /// Offset in bytes, in the invoking packet, of the field in error.
        pointer: u32,
        /// The invoking packet.
        data: &'a [u8],
    },
    /// Type 128, code 0 (RFC 4443 §4.1; any code accepted).
    EchoRequest(Echo<'a>),
    /// Type 129, code 0 (RFC 4443 §4.2; any code accepted).
    EchoReply(Echo<'a>),
    /// Any other type (Neighbor Discovery included), kept whole: valid
    /// (round-trips) when `body` is at least 4 bytes.
    Other {
        /// Message type.
        msg_type: u8,
        /// Message code.
        code: u8,
        /// Every byte after the checksum.
        body: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Parses an ICMPv6 message (exactly the upper-layer bytes) sent from
    /// `src` to `dst`.
    ///
    /// Errors: [`Error::Truncated`] if shorter than 8 bytes;
    /// [`Error::Checksum`] if `verify_checksum` and the checksum does not
    /// verify.
    pub fn parse(
        message: &'a [u8],
        src: Ipv6Addr,
        dst: Ipv6Addr,
        verify_checksum: bool,
    ) -> Result<Icmpv6Repr<'a>> {
        let p = Icmpv6Packet::new_checked(message)?;
        if verify_checksum && !p.checksum_valid(src, dst) {
            return Err(Error::Checksum);
        }
        let (msg_type, code) = (p.msg_type(), p.code());
        let data = &message[HEADER_LEN..];
        Ok(match msg_type {
            TYPE_DST_UNREACH => Icmpv6Repr::DstUnreachable { code, data },
            TYPE_PACKET_TOO_BIG => Icmpv6Repr::PacketTooBig {
                mtu: u32_at(message, 4),
                data,
            },
            TYPE_TIME_EXCEEDED => Icmpv6Repr::TimeExceeded { code, data },
            TYPE_PARAM_PROBLEM => Icmpv6Repr::ParamProblem {
                code,
                pointer: u32_at(message, 4),
                data,
            },
            TYPE_ECHO_REQUEST => Icmpv6Repr::EchoRequest(Echo::parse(message)),
            TYPE_ECHO_REPLY => Icmpv6Repr::EchoReply(Echo::parse(message)),
            _ => Icmpv6Repr::Other {
                msg_type,
                code,
                body: p.body(),
            },
        })
    }

    /// Length in bytes of the message [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. }
            | Icmpv6Repr::EchoRequest(Echo { data, .. })
            | Icmpv6Repr::EchoReply(Echo { data, .. }) => HEADER_LEN + data.len(),
            Icmpv6Repr::Other { body, .. } => 4 + body.len(),
        }
    }

    /// Writes the message from `src` to `dst`, checksum included, at the
    /// start of `buf` and returns its length in bytes
    /// ([`buffer_len`](Self::buffer_len)).
    ///
    /// Panics if `buf` is shorter than `buffer_len()` (a caller bug).
    pub fn emit(&self, src: Ipv6Addr, dst: Ipv6Addr, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        let (msg_type, code, word, data): (u8, u8, u32, &[u8]) = match *self {
            Icmpv6Repr::DstUnreachable { code, data } => (TYPE_DST_UNREACH, code, 0, data),
            Icmpv6Repr::PacketTooBig { mtu, data } => (TYPE_PACKET_TOO_BIG, 0, mtu, data),
            Icmpv6Repr::TimeExceeded { code, data } => (TYPE_TIME_EXCEEDED, code, 0, data),
            Icmpv6Repr::ParamProblem {
                code,
                pointer,
                data,
            } => (TYPE_PARAM_PROBLEM, code, pointer, data),
            Icmpv6Repr::EchoRequest(e) => (TYPE_ECHO_REQUEST, 0, e.word(), e.data),
            Icmpv6Repr::EchoReply(e) => (TYPE_ECHO_REPLY, 0, e.word(), e.data),
            Icmpv6Repr::Other {
                msg_type,
                code,
                body,
            } => {
                buf[0] = msg_type;
                buf[1] = code;
                buf[4..].copy_from_slice(body);
                fill_checksum(buf, src, dst);
                return len;
            }
        };
        put_fixed(buf, msg_type, code, word, data);
        fill_checksum(buf, src, dst);
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src() -> Ipv6Addr {
        "fe80::1".parse().unwrap()
    }

    fn dst() -> Ipv6Addr {
        "fe80::2".parse().unwrap()
    }

    #[test]
    fn echo_request_emit_matches_known_bytes() {
        let repr = Icmpv6Repr::EchoRequest(Echo {
            ident: 0x1234,
            seq_no: 1,
            data: b"ab",
        });
        let mut buf = [0u8; 10];
        assert_eq!(repr.emit(src(), dst(), &mut buf), 10);
        // Pseudo-header: fe80 + 1 + fe80 + 2 + length 10 + next header 58;
        // message: 0x8000 + 0x1234 + 0x0001 + 0x6162.
        let sum: u32 = 0xfe80 + 1 + 0xfe80 + 2 + 10 + 58 + 0x8000 + 0x1234 + 1 + 0x6162;
        let c = !(((sum & 0xffff) + (sum >> 16)) as u16);
        assert_eq!(
            buf,
            [
                128,
                0,
                (c >> 8) as u8,
                c as u8,
                0x12,
                0x34,
                0,
                1,
                b'a',
                b'b'
            ]
        );
        assert!(checksum_valid(&buf, src(), dst()));
    }

    #[test]
    fn every_kind_round_trips() {
        let quoted = [0x60u8; 48];
        let reprs = [
            Icmpv6Repr::DstUnreachable {
                code: DST_UNREACH_PORT,
                data: &quoted,
            },
            Icmpv6Repr::PacketTooBig {
                mtu: 1280,
                data: &quoted,
            },
            Icmpv6Repr::TimeExceeded {
                code: TIME_EXCEEDED_REASSEMBLY,
                data: &quoted,
            },
            Icmpv6Repr::ParamProblem {
                code: PARAM_PROBLEM_NEXT_HEADER,
                pointer: 40,
                data: &quoted,
            },
            Icmpv6Repr::EchoRequest(Echo {
                ident: 1,
                seq_no: 2,
                data: b"hello",
            }),
            Icmpv6Repr::EchoReply(Echo {
                ident: 0xffff,
                seq_no: 0,
                data: &[],
            }),
            Icmpv6Repr::Other {
                msg_type: TYPE_NEIGHBOR_SOLICIT,
                code: 0,
                body: &[0; 20],
            },
        ];
        for repr in reprs {
            let mut buf = [0u8; 64];
            let len = repr.emit(src(), dst(), &mut buf);
            assert_eq!(len, repr.buffer_len());
            assert_eq!(Icmpv6Repr::parse(&buf[..len], src(), dst(), true), Ok(repr));
            let p = Icmpv6Packet::new_checked(&buf[..len]).unwrap();
            assert!(p.checksum_valid(src(), dst()));
            assert_eq!(p.is_error(), p.msg_type() < 128);
            assert_eq!(p.message().len(), len);
            assert_eq!(p.body().len(), len - 4);
        }
    }

    #[test]
    fn packet_too_big_and_param_problem_words() {
        let mut buf = [0u8; 8];
        Icmpv6Repr::PacketTooBig {
            mtu: 1500,
            data: &[],
        }
        .emit(src(), dst(), &mut buf);
        assert_eq!(buf[4..], [0, 0, 0x05, 0xdc]);
        Icmpv6Repr::ParamProblem {
            code: PARAM_PROBLEM_OPTION,
            pointer: 0x0102_0304,
            data: &[],
        }
        .emit(src(), dst(), &mut buf);
        assert_eq!((buf[0], buf[1]), (4, 2));
        assert_eq!(buf[4..], [1, 2, 3, 4]);
    }

    #[test]
    fn short_message_any_length_is_truncated() {
        let mut buf = [0u8; 8];
        Icmpv6Repr::EchoRequest(Echo {
            ident: 1,
            seq_no: 1,
            data: &[],
        })
        .emit(src(), dst(), &mut buf);
        for len in 0..8 {
            for verify in [false, true] {
                let r = Icmpv6Repr::parse(&buf[..len], src(), dst(), verify);
                assert_eq!(r, Err(Error::Truncated));
            }
            assert_eq!(
                Icmpv6Packet::new_checked(&buf[..len]),
                Err(Error::Truncated)
            );
        }
    }

    #[test]
    fn wrong_address_or_data_fails_checksum_only_when_verified() {
        let mut buf = [0u8; 12];
        let repr = Icmpv6Repr::EchoReply(Echo {
            ident: 7,
            seq_no: 9,
            data: b"abcd",
        });
        repr.emit(src(), dst(), &mut buf);
        let other: Ipv6Addr = "fe80::3".parse().unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&buf, src(), other, true),
            Err(Error::Checksum)
        );
        assert_eq!(Icmpv6Repr::parse(&buf, src(), other, false), Ok(repr));
        buf[11] ^= 0x20;
        assert_eq!(
            Icmpv6Repr::parse(&buf, src(), dst(), true),
            Err(Error::Checksum)
        );
    }

    #[test]
    fn max_error_data_fills_the_minimum_mtu() {
        assert_eq!(ipv6::HEADER_LEN + HEADER_LEN + MAX_ERROR_DATA_LEN, 1280);
    }
}
