//! A bounded walk of the IPv6 extension header chain (RFC 8200 §4) to the
//! upper-layer header, doing what RFC 8200 says a receiving host does with
//! each header and nothing more:
//!
//! - Hop-by-Hop Options only immediately after the fixed header (§4.1); met
//!   anywhere else it is an unrecognized Next Header (Parameter Problem
//!   code 1, pointer to the Next Header field that names it).
//! - Options (§4.2): Pad1 and PadN are skipped; corestack recognizes no
//!   other option, so each one is handled by the two top bits of its type:
//!   skipped, or the packet is discarded (with a Parameter Problem code 2
//!   pointing at the option type when the bits say so).
//! - Routing (§4.4): corestack implements no routing type, so a Routing
//!   header with Segments Left 0 is skipped and any other is discarded with
//!   a Parameter Problem code 0 pointing at the Routing Type. A Type 0
//!   header (RFC 5095) is handled like every other unrecognized type.
//! - Fragment (§4.5): the walk stops there and reports the header; what
//!   follows is the fragmentable part, to reassemble (or, for an atomic
//!   fragment, to walk on with [`walk_after_fragment`]).
//! - Authentication Header (RFC 4302) is skipped by its length.
//! - Any other Next Header value (ESP, No Next Header, TCP, UDP, ICMPv6,
//!   unknown) ends the walk as the upper-layer protocol; whether it is
//!   recognized is the caller's decision (Parameter Problem code 1 with the
//!   reported pointer if not).
//!
//! The walk is bounded: at most [`MAX_EXT_HEADERS`] extension headers, and
//! the upper-layer header must start within [`MAX_CHAIN_LEN`] bytes of the
//! payload (a chain that fits the first fragment at the minimum MTU, RFC
//! 8200 §4.5 and RFC 7112).
//!
//! Offsets count bytes from the start of the IPv6 payload (the first byte
//! after the fixed header); Parameter Problem pointers count bytes from the
//! start of the IPv6 packet (RFC 4443 §3.4).

use super::option::{Ipv6OptionIter, OptionAction};
use super::{checked_ext_len, Ipv6FragmentRepr, Ipv6RoutingRepr, ROUTING_TYPE_OFFSET};
use crate::icmpv6::{PARAM_PROBLEM_HEADER_FIELD, PARAM_PROBLEM_NEXT_HEADER, PARAM_PROBLEM_OPTION};
use crate::ipv6::{
    HEADER_LEN, MIN_MTU, NEXT_AUTH, NEXT_DST_OPTS, NEXT_FRAGMENT, NEXT_HEADER_OFFSET,
    NEXT_HOP_BY_HOP, NEXT_ROUTING,
};
use crate::Error;

/// Most extension headers [`walk_chain`] walks before giving up.
pub const MAX_EXT_HEADERS: usize = 8;
/// Largest offset in bytes from the start of the IPv6 payload at which
/// [`walk_chain`] accepts the upper-layer header: 1232, what the minimum
/// MTU leaves after the fixed header.
pub const MAX_CHAIN_LEN: usize = MIN_MTU - HEADER_LEN;

/// Where a successful walk of the chain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6ChainEnd {
    /// At the upper-layer header (or ESP, or No Next Header).
    UpperLayer {
        /// The upper-layer protocol number, e.g. 6 for TCP.
        next_header: u8,
        /// Offset in bytes of the upper-layer header in the payload.
        offset: usize,
        /// Offset in bytes, from the start of the IPv6 packet, of the Next
        /// Header field that named the protocol: the Parameter Problem
        /// (code 1) pointer if the caller does not recognize it.
        pointer: usize,
    },
    /// At a Fragment header; the walk does not look past it.
    Fragment {
        /// Offset in bytes of the Fragment header in the payload; the
        /// fragmentable part starts 8 bytes later.
        offset: usize,
        /// The Fragment header.
        fragment: Ipv6FragmentRepr,
    },
}

/// Why a walk of the chain rejected the packet. The packet is discarded in
/// every case; [`param_problem`](Self::param_problem) says whether an
/// ICMPv6 Parameter Problem goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv6ChainError {
    /// An extension header runs past the payload.
    Truncated,
    /// An option TLV runs past its header.
    Malformed,
    /// More than [`MAX_EXT_HEADERS`] extension headers, or the upper-layer
    /// header past [`MAX_CHAIN_LEN`] bytes.
    TooLong,
    /// A Hop-by-Hop Options header that does not immediately follow the
    /// fixed header (RFC 8200 §4.1).
    HopByHopNotFirst {
        /// Offset in the packet of the Next Header field holding 0.
        pointer: usize,
    },
    /// An unrecognized option whose type's top bits say discard (RFC 8200
    /// §4.2).
    UnrecognizedOption {
        /// The Option Type.
        option_type: u8,
        /// Offset in the packet of the Option Type byte.
        pointer: usize,
    },
    /// A Routing header of an unrecognized type (any, Type 0 included) with
    /// Segments Left not 0 (RFC 8200 §4.4, RFC 5095 §3).
    UnrecognizedRouting {
        /// The Routing Type.
        routing_type: u8,
        /// Offset in the packet of the Routing Type field.
        pointer: usize,
    },
}

impl Ipv6ChainError {
    /// The ICMPv6 Parameter Problem (RFC 4443 §3.4) to send back, as
    /// (code, pointer), or `None` to discard silently. A destination that
    /// was a multicast address gets one only for an option whose type says
    /// so (RFC 4443 §2.4 (e.3), RFC 8200 §4.2).
    pub fn param_problem(&self, dst_is_multicast: bool) -> Option<(u8, u32)> {
        let (code, pointer) = match *self {
            Ipv6ChainError::Truncated | Ipv6ChainError::Malformed | Ipv6ChainError::TooLong => {
                return None
            }
            Ipv6ChainError::HopByHopNotFirst { pointer } => {
                if dst_is_multicast {
                    return None;
                }
                (PARAM_PROBLEM_NEXT_HEADER, pointer)
            }
            Ipv6ChainError::UnrecognizedOption {
                option_type,
                pointer,
            } => {
                if !OptionAction::of_type(option_type).sends_param_problem(dst_is_multicast) {
                    return None;
                }
                (PARAM_PROBLEM_OPTION, pointer)
            }
            Ipv6ChainError::UnrecognizedRouting { pointer, .. } => {
                if dst_is_multicast {
                    return None;
                }
                (PARAM_PROBLEM_HEADER_FIELD, pointer)
            }
        };
        Some((code, u32::try_from(pointer).unwrap_or(u32::MAX)))
    }

    /// True if the packet was rejected for a Type 0 Routing header (RFC 5095).
    pub fn is_type0_routing(&self) -> bool {
        matches!(
            self,
            Ipv6ChainError::UnrecognizedRouting {
                routing_type: super::ROUTING_TYPE0,
                ..
            }
        )
    }
}

impl From<Ipv6ChainError> for Error {
    /// The drop reason: [`Error::Truncated`] or [`Error::Malformed`] for
    /// broken headers (a misplaced Hop-by-Hop header is malformed),
    /// [`Error::Unsupported`] for a chain corestack will not process.
    fn from(e: Ipv6ChainError) -> Error {
        match e {
            Ipv6ChainError::Truncated => Error::Truncated,
            Ipv6ChainError::Malformed | Ipv6ChainError::HopByHopNotFirst { .. } => Error::Malformed,
            Ipv6ChainError::TooLong
            | Ipv6ChainError::UnrecognizedOption { .. }
            | Ipv6ChainError::UnrecognizedRouting { .. } => Error::Unsupported,
        }
    }
}

/// Walks the extension headers of `payload` (the IPv6 payload), starting
/// with `next_header` (the fixed header's Next Header), to the upper-layer
/// header or the first Fragment header. Pure: reads `payload` only.
pub fn walk_chain(next_header: u8, payload: &[u8]) -> Result<Ipv6ChainEnd, Ipv6ChainError> {
    walk(next_header, payload, 0, NEXT_HEADER_OFFSET, 0)
}

/// Walks on past the Fragment header at `offset` in `payload` (as reported
/// by [`Ipv6ChainEnd::Fragment`]), for an atomic fragment (RFC 6946) or a
/// reassembled payload that keeps the Fragment header. A Hop-by-Hop header
/// after it is not first.
pub fn walk_after_fragment(payload: &[u8], offset: usize) -> Result<Ipv6ChainEnd, Ipv6ChainError> {
    let at = payload.get(offset..).ok_or(Ipv6ChainError::Truncated)?;
    let fragment = Ipv6FragmentRepr::parse(at).map_err(|_| Ipv6ChainError::Truncated)?;
    walk(
        fragment.next_header,
        payload,
        offset + fragment.buffer_len(),
        HEADER_LEN + offset,
        1,
    )
}

/// The walk from `at` in `payload`, where `next_header` was read from the
/// field at packet offset `pointer` and `seen` headers were walked before.
fn walk(
    mut next_header: u8,
    payload: &[u8],
    mut at: usize,
    mut pointer: usize,
    mut seen: usize,
) -> Result<Ipv6ChainEnd, Ipv6ChainError> {
    loop {
        if !matches!(
            next_header,
            NEXT_HOP_BY_HOP | NEXT_DST_OPTS | NEXT_ROUTING | NEXT_FRAGMENT | NEXT_AUTH
        ) {
            if at > MAX_CHAIN_LEN {
                return Err(Ipv6ChainError::TooLong);
            }
            return Ok(Ipv6ChainEnd::UpperLayer {
                next_header,
                offset: at,
                pointer,
            });
        }
        if next_header == NEXT_HOP_BY_HOP && seen != 0 {
            return Err(Ipv6ChainError::HopByHopNotFirst { pointer });
        }
        if seen == MAX_EXT_HEADERS || at > MAX_CHAIN_LEN {
            return Err(Ipv6ChainError::TooLong);
        }
        seen += 1;
        let header = payload.get(at..).ok_or(Ipv6ChainError::Truncated)?;
        let len = match next_header {
            NEXT_FRAGMENT => {
                let fragment =
                    Ipv6FragmentRepr::parse(header).map_err(|_| Ipv6ChainError::Truncated)?;
                return Ok(Ipv6ChainEnd::Fragment {
                    offset: at,
                    fragment,
                });
            }
            NEXT_ROUTING => {
                let routing =
                    Ipv6RoutingRepr::parse(header).map_err(|_| Ipv6ChainError::Truncated)?;
                if routing.segments_left != 0 {
                    return Err(Ipv6ChainError::UnrecognizedRouting {
                        routing_type: routing.routing_type,
                        pointer: HEADER_LEN + at + ROUTING_TYPE_OFFSET,
                    });
                }
                routing.buffer_len()
            }
            NEXT_AUTH => {
                // RFC 4302 §2.2: Payload Len counts 4-byte units, minus 2.
                let units = header.get(1).ok_or(Ipv6ChainError::Truncated)?;
                let len = (usize::from(*units) + 2) * 4;
                if len > header.len() {
                    return Err(Ipv6ChainError::Truncated);
                }
                len
            }
            _ => {
                let len = checked_ext_len(header).map_err(|_| Ipv6ChainError::Truncated)?;
                check_options(&header[2..len], HEADER_LEN + at)?;
                len
            }
        };
        next_header = header[0];
        pointer = HEADER_LEN + at;
        at += len;
    }
}

/// Checks the options `area` of a Hop-by-Hop or Destination Options header
/// that starts at packet offset `header_at`, in order: the first option that
/// is malformed or unrecognized with a discard action rejects the packet.
fn check_options(area: &[u8], header_at: usize) -> Result<(), Ipv6ChainError> {
    for opt in Ipv6OptionIter::new(area, 2) {
        let opt = opt.map_err(|_| Ipv6ChainError::Malformed)?;
        if !opt.is_padding() && opt.action() != OptionAction::Skip {
            return Err(Ipv6ChainError::UnrecognizedOption {
                option_type: opt.option_type,
                pointer: header_at + opt.offset,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::{NEXT_ICMPV6, NEXT_NO_NEXT_HEADER, NEXT_TCP, NEXT_UDP};

    /// An 8-byte options header: `next`, length 0, then six option bytes.
    fn opts8(next: u8, area: [u8; 6]) -> [u8; 8] {
        let [a, b, c, d, e, f] = area;
        [next, 0, a, b, c, d, e, f]
    }

    /// PadN over the six-byte options area.
    const PADDED: [u8; 6] = [1, 4, 0, 0, 0, 0];

    fn upper(next_header: u8, offset: usize, pointer: usize) -> Ipv6ChainEnd {
        Ipv6ChainEnd::UpperLayer {
            next_header,
            offset,
            pointer,
        }
    }

    #[test]
    fn no_extension_headers_ends_at_offset_0() {
        assert_eq!(walk_chain(NEXT_TCP, b"tcp"), Ok(upper(NEXT_TCP, 0, 6)));
        assert_eq!(walk_chain(NEXT_UDP, &[]), Ok(upper(NEXT_UDP, 0, 6)));
        assert_eq!(walk_chain(NEXT_NO_NEXT_HEADER, &[]), Ok(upper(59, 0, 6)));
    }

    #[test]
    fn hop_by_hop_dst_opts_routing_then_upper_layer() {
        let mut p = Vec::new();
        p.extend_from_slice(&opts8(NEXT_DST_OPTS, [0x05, 2, 0, 0, 0, 0])); // router alert: skip
        p.extend_from_slice(&opts8(NEXT_ROUTING, [0, 0, 0, 0, 0, 0])); // Pad1 × 6
        p.extend_from_slice(&[NEXT_AUTH, 0, 4, 0, 0, 0, 0, 0]); // segments left 0: skipped
        p.extend_from_slice(&[NEXT_ICMPV6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // AH, 12 bytes
        p.extend_from_slice(b"icmp");
        assert_eq!(
            walk_chain(NEXT_HOP_BY_HOP, &p),
            Ok(upper(NEXT_ICMPV6, 36, 64))
        );
    }

    #[test]
    fn type0_routing_with_segments_left_0_is_skipped() {
        let mut p = vec![NEXT_UDP, 2, 0, 0];
        p.extend_from_slice(&[0; 20]);
        assert_eq!(walk_chain(NEXT_ROUTING, &p), Ok(upper(NEXT_UDP, 24, 40)));
    }

    #[test]
    fn routing_with_segments_left_is_rejected_with_code_0() {
        for routing_type in [0u8, 2, 3, 4, 253] {
            let mut p = opts8(NEXT_ROUTING, PADDED).to_vec(); // hop-by-hop first
            p.extend_from_slice(&[NEXT_UDP, 2, routing_type, 1]);
            p.extend_from_slice(&[0; 20]);
            let e = walk_chain(NEXT_HOP_BY_HOP, &p).unwrap_err();
            assert_eq!(
                e,
                Ipv6ChainError::UnrecognizedRouting {
                    routing_type,
                    pointer: 40 + 8 + 2
                }
            );
            assert_eq!(e.is_type0_routing(), routing_type == 0);
            assert_eq!(e.param_problem(false), Some((0, 50)));
            assert_eq!(e.param_problem(true), None);
            assert_eq!(Error::from(e), Error::Unsupported);
        }
    }

    #[test]
    fn hop_by_hop_not_first_is_rejected_with_code_1() {
        let mut p = opts8(NEXT_HOP_BY_HOP, PADDED).to_vec();
        p.extend_from_slice(&opts8(NEXT_UDP, PADDED));
        let e = walk_chain(NEXT_DST_OPTS, &p).unwrap_err();
        assert_eq!(e, Ipv6ChainError::HopByHopNotFirst { pointer: 40 });
        assert_eq!(e.param_problem(false), Some((1, 40)));
        assert_eq!(e.param_problem(true), None);
        assert_eq!(Error::from(e), Error::Malformed);
        // Two in a row: the second is not first either.
        let p = opts8(NEXT_HOP_BY_HOP, PADDED);
        assert_eq!(
            walk_chain(NEXT_HOP_BY_HOP, &p),
            Err(Ipv6ChainError::HopByHopNotFirst { pointer: 40 })
        );
    }

    #[test]
    fn unknown_option_follows_its_action_bits() {
        for (option_type, unicast, multicast) in [
            (0x3eu8, None, None),                 // 00: skipped, the walk succeeds
            (0x7e, None, None),                   // 01: discard silently
            (0x9e, Some((2, 52)), Some((2, 52))), // 10: always report
            (0xc2, Some((2, 52)), None),          // 11: not to multicast
        ] {
            let mut p = opts8(NEXT_DST_OPTS, PADDED).to_vec();
            p.extend_from_slice(&opts8(NEXT_TCP, [1, 0, option_type, 2, 0xaa, 0xbb]));
            let r = walk_chain(NEXT_HOP_BY_HOP, &p);
            if option_type >> 6 == 0 {
                assert_eq!(r, Ok(upper(NEXT_TCP, 16, 48)));
                continue;
            }
            let e = r.unwrap_err();
            assert_eq!(
                e,
                Ipv6ChainError::UnrecognizedOption {
                    option_type,
                    pointer: 40 + 8 + 4
                }
            );
            assert_eq!(e.param_problem(false), unicast, "{option_type:#x}");
            assert_eq!(e.param_problem(true), multicast, "{option_type:#x}");
            assert_eq!(Error::from(e), Error::Unsupported);
        }
    }

    #[test]
    fn first_bad_option_in_order_wins() {
        // An unknown discard option, then a TLV that overruns the header.
        let p = opts8(NEXT_TCP, [0x80, 0, 0x3e, 9, 0, 0]);
        assert_eq!(
            walk_chain(NEXT_DST_OPTS, &p),
            Err(Ipv6ChainError::UnrecognizedOption {
                option_type: 0x80,
                pointer: 42
            })
        );
        let p = opts8(NEXT_TCP, [0x3e, 9, 0x80, 0, 0, 0]);
        let e = walk_chain(NEXT_DST_OPTS, &p).unwrap_err();
        assert_eq!(e, Ipv6ChainError::Malformed);
        assert_eq!(e.param_problem(false), None);
    }

    #[test]
    fn fragment_header_stops_the_walk() {
        let mut p = opts8(NEXT_FRAGMENT, PADDED).to_vec();
        p.extend_from_slice(&[NEXT_UDP, 0, 0x00, 0x11, 0, 0, 0, 7]); // offset 16, M
        p.extend_from_slice(&[0; 8]);
        let end = walk_chain(NEXT_HOP_BY_HOP, &p).unwrap();
        let fragment = Ipv6FragmentRepr {
            next_header: NEXT_UDP,
            frag_offset: 16,
            more_frags: true,
            ident: 7,
        };
        assert_eq!(
            end,
            Ipv6ChainEnd::Fragment {
                offset: 8,
                fragment
            }
        );
        assert_eq!(walk_after_fragment(&p, 8), Ok(upper(NEXT_UDP, 16, 48)));
        assert_eq!(walk_after_fragment(&p, 20), Err(Ipv6ChainError::Truncated));
        assert_eq!(walk_after_fragment(&p, 99), Err(Ipv6ChainError::Truncated));
        // A Hop-by-Hop header after the Fragment header is not first.
        p[8] = NEXT_HOP_BY_HOP;
        assert_eq!(
            walk_after_fragment(&p, 8),
            Err(Ipv6ChainError::HopByHopNotFirst { pointer: 48 })
        );
    }

    #[test]
    fn truncation_at_every_length_is_reported() {
        let mut p = opts8(NEXT_ROUTING, PADDED).to_vec();
        p.extend_from_slice(&[NEXT_AUTH, 0, 4, 0, 0, 0, 0, 0]);
        p.extend_from_slice(&[NEXT_DST_OPTS, 0, 0, 0, 0, 0, 0, 0]);
        p.extend_from_slice(&opts8(NEXT_FRAGMENT, PADDED));
        p.extend_from_slice(&[NEXT_TCP, 0, 0, 0, 0, 0, 0, 1]);
        assert!(matches!(
            walk_chain(NEXT_HOP_BY_HOP, &p),
            Ok(Ipv6ChainEnd::Fragment { offset: 32, .. })
        ));
        for len in 0..p.len() {
            let e = walk_chain(NEXT_HOP_BY_HOP, &p[..len]).unwrap_err();
            assert_eq!(e, Ipv6ChainError::Truncated, "len {len}");
            assert_eq!(e.param_problem(false), None);
            assert_eq!(Error::from(e), Error::Truncated);
        }
    }

    #[test]
    fn chain_of_more_than_max_headers_is_too_long() {
        let mut p = Vec::new();
        for _ in 0..MAX_EXT_HEADERS {
            p.extend_from_slice(&opts8(NEXT_DST_OPTS, PADDED));
        }
        let last = p.len() - 8;
        p[last] = NEXT_TCP;
        let end = walk_chain(NEXT_DST_OPTS, &p).unwrap();
        assert_eq!(end, upper(NEXT_TCP, 64, 40 + 56));
        p[last] = NEXT_DST_OPTS;
        p.extend_from_slice(&opts8(NEXT_TCP, PADDED));
        let e = walk_chain(NEXT_DST_OPTS, &p).unwrap_err();
        assert_eq!(e, Ipv6ChainError::TooLong);
        assert_eq!(e.param_problem(false), None);
        assert_eq!(Error::from(e), Error::Unsupported);
    }

    #[test]
    fn upper_layer_past_max_chain_len_is_too_long() {
        // One Destination Options header of 2048 bytes (PadN runs).
        let mut p = vec![0u8; 2048];
        p[0] = NEXT_TCP;
        p[1] = 255;
        let mut at = 2;
        while at < p.len() {
            let n = (p.len() - at).min(257);
            crate::ipv6_ext::option::emit_padding(&mut p[at..], n);
            at += n;
        }
        assert_eq!(walk_chain(NEXT_DST_OPTS, &p), Err(Ipv6ChainError::TooLong));
        // MAX_CHAIN_LEN (1232 = 154 × 8) itself is accepted.
        p[1] = 153;
        p[2..1232].fill(0);
        assert_eq!(walk_chain(NEXT_DST_OPTS, &p), Ok(upper(NEXT_TCP, 1232, 40)));
    }
}
