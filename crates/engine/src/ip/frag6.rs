//! IPv6 fragment reassembly (RFC 8200 §4.5), on the design of `frag`
//! (IPv4) and sharing its context table and hole tracking (`reasm`,
//! RFC 815).
//!
//! A [`Reassembler6`] has a fixed number of contexts, each with one
//! buffer for the largest datagram, all allocated by
//! [`Reassembler6::new`]: nothing allocates per fragment. A context is
//! keyed by (source, destination, identification) (RFC 8200 §4.5).
//!
//! Decisions:
//! - a fragment that overlaps bytes already received with other bytes
//!   drops the whole datagram, and so does a length contradicting the
//!   last fragment (RFC 5722 §4; RFC 8200 §4.5); an exact repeat is
//!   ignored (RFC 8200 §4.5 allows it);
//! - atomic fragments (offset 0, M clear) never come here: the caller
//!   handles them as whole packets (RFC 6946 §4), so they never mix with
//!   a datagram in reassembly;
//! - the first fragment must hold the whole header chain through the
//!   upper-layer header (RFC 7112 §5): else the datagram is dropped, and
//!   the caller may send Parameter Problem code 3;
//! - a fragment with M set whose length is not a multiple of 8, or one
//!   that would make the payload exceed 65535 bytes, is dropped with a
//!   Parameter Problem code 0 for the caller to send (RFC 8200 §4.5);
//! - a datagram not completed [`FRAG6_TIMEOUT`] (60 s) after its first
//!   fragment arrived is dropped; no Time Exceeded is sent (RFC 8200 §4.5
//!   makes it a "should" and would need the first fragment kept whole);
//! - when every context is busy, the oldest datagram is evicted.
//!
//! The reassembled packet keeps the unfragmentable part of the first
//! fragment (RFC 8200 §4.5) and its Fragment header, made atomic (offset
//! 0, M clear), with the Payload Length patched: the caller walks it
//! with `wire::ipv6_ext::walk_chain` like any packet.

use crate::ip::frag::FRAG_CONTEXTS;
use crate::ip::reasm::{Contexts, FragCounters};
use crate::obs::stats::Stats;
use crate::time::Instant;
use core::net::Ipv6Addr;
use core::time::Duration;
use wire::ipv6::{self, Ipv6Packet, NEXT_ICMPV6, NEXT_TCP, NEXT_UDP};
use wire::ipv6_ext::{walk_after_fragment, Ipv6ChainEnd, Ipv6ChainError, Ipv6FragmentRepr};
use wire::ipv6_ext::{FRAGMENT_HEADER_LEN, MAX_CHAIN_LEN};

/// Reassembly contexts of an engine.
pub const FRAG6_CONTEXTS: usize = FRAG_CONTEXTS;
/// How long a datagram may take to reassemble (RFC 8200 §4.5: 60 s).
pub const FRAG6_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest Payload Length (RFC 8200 §3: 16 bits; no jumbograms).
pub const MAX_PAYLOAD6: usize = 65535;
/// ICMPv6 Parameter Problem code 3: first fragment has an incomplete
/// header chain (RFC 7112 §6).
pub const PARAM_PROBLEM_INCOMPLETE_CHAIN: u8 = 3;

/// Room for the unfragmentable part and the Fragment header.
const HEADER_ROOM: usize = ipv6::HEADER_LEN + MAX_CHAIN_LEN + FRAGMENT_HEADER_LEN;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    ident: u32,
}

/// IPv6's counters in `stats`, for the shared table.
fn counters(stats: &mut Stats) -> FragCounters<'_> {
    FragCounters {
        duplicate: &mut stats.ipv6_frag_duplicate,
        overlap: &mut stats.drop_ipv6_frag_overlap,
        malformed: &mut stats.drop_ipv6_frag_malformed,
        timeout: &mut stats.drop_ipv6_frag_timeout,
        no_context: &mut stats.drop_ipv6_frag_no_context,
    }
}

/// What one fragment led to.
#[derive(Debug, PartialEq, Eq)]
pub enum Frag6<'a> {
    /// Stored (or a repeat ignored); the datagram is not complete yet.
    Pending,
    /// The whole packet, borrowed from the context until the next call.
    Whole(&'a [u8]),
    /// Dropped (counted) without an answer.
    Dropped,
    /// Dropped (counted); RFC 8200 §4.5 or RFC 7112 asks for an ICMPv6
    /// Parameter Problem with this code and pointer to the source.
    ParamProblem {
        /// The code: 0 or [`PARAM_PROBLEM_INCOMPLETE_CHAIN`].
        code: u8,
        /// Offset in the fragment of the field in error.
        pointer: u32,
    },
}

/// The IPv6 reassembly table of one engine.
pub struct Reassembler6 {
    contexts: Contexts<Key>,
}

impl Default for Reassembler6 {
    /// A reassembler with no context (drops every fragment); allocates nothing.
    fn default() -> Self {
        Reassembler6::new(0)
    }
}

impl Reassembler6 {
    /// `contexts` contexts of about 66 KiB each.
    pub fn new(contexts: usize) -> Reassembler6 {
        Reassembler6 {
            contexts: Contexts::new(contexts, HEADER_ROOM, MAX_PAYLOAD6, FRAG6_TIMEOUT),
        }
    }

    /// Datagrams in reassembly now.
    pub fn in_progress(&self) -> usize {
        self.contexts.in_progress()
    }

    /// Takes one non-atomic fragment of `ip` (for us), whose Fragment
    /// header `frag` is at offset `frag_at` of the payload, received at
    /// `now`. Counts in `stats` (`ipv6_frag_*`, `drop_ipv6_frag_*`).
    pub fn push(
        &mut self,
        now: Instant,
        ip: &Ipv6Packet<'_>,
        frag_at: usize,
        frag: &Ipv6FragmentRepr,
        stats: &mut Stats,
    ) -> Frag6<'_> {
        stats.ipv6_frag_rx += 1;
        let payload = ip.payload();
        let Some(data) = payload.get(frag_at + FRAGMENT_HEADER_LEN..) else {
            stats.drop_ipv6_frag_malformed += 1;
            return Frag6::Dropped;
        };
        let (start, last) = (frag.frag_offset, !frag.more_frags);
        let end = start + data.len();
        if data.is_empty() {
            stats.drop_ipv6_frag_malformed += 1;
            return Frag6::Dropped;
        }
        if !last && data.len() % 8 != 0 {
            // RFC 8200 §4.5: pointing to the Payload Length field.
            stats.drop_ipv6_frag_malformed += 1;
            return Frag6::ParamProblem {
                code: 0,
                pointer: 4,
            };
        }
        let key = Key {
            src: ip.src(),
            dst: ip.dst(),
            ident: frag.ident,
        };
        // The reassembled Payload Length: the unfragmentable headers and
        // the fragmentable part (RFC 8200 §4.5).
        if frag_at + end > MAX_PAYLOAD6 {
            stats.drop_ipv6_frag_too_big += 1;
            self.contexts.forget(key);
            let pointer = (ipv6::HEADER_LEN + frag_at + 2) as u32;
            return Frag6::ParamProblem { code: 0, pointer };
        }
        if start == 0 && !holds_chain(payload, frag_at) {
            stats.drop_ipv6_frag_incomplete_chain += 1;
            self.contexts.forget(key);
            return Frag6::ParamProblem {
                code: PARAM_PROBLEM_INCOMPLETE_CHAIN,
                pointer: 0,
            };
        }
        let Some(i) = self
            .contexts
            .store(key, now, start, data, last, &mut counters(stats))
        else {
            return Frag6::Dropped;
        };
        if start == 0 {
            let unfragmentable = &ip.packet()[..ipv6::HEADER_LEN + frag_at];
            self.contexts
                .keep_header(i, unfragmentable, frag.next_header);
        }
        let Some((hl, plen)) = self.contexts.finish(i) else {
            return Frag6::Pending;
        };
        let total_payload = hl + FRAGMENT_HEADER_LEN + plen - ipv6::HEADER_LEN;
        if hl == 0 || total_payload > MAX_PAYLOAD6 {
            stats.drop_ipv6_frag_too_big += 1;
            return Frag6::Dropped;
        }
        let ctx = self.contexts.get(i);
        let at = HEADER_ROOM - FRAGMENT_HEADER_LEN - hl;
        ctx.buf[at..at + hl].copy_from_slice(&ctx.header[..hl]);
        ctx.buf[at + 4..at + 6].copy_from_slice(&(total_payload as u16).to_be_bytes());
        Ipv6FragmentRepr {
            next_header: ctx.next_header,
            frag_offset: 0,
            more_frags: false,
            ident: key.ident,
        }
        .emit(&mut ctx.buf[at + hl..HEADER_ROOM]);
        stats.ipv6_frag_reassembled += 1;
        Frag6::Whole(&ctx.buf[at..HEADER_ROOM + plen])
    }

    /// Drops every datagram older than [`FRAG6_TIMEOUT`] at `now`, counting
    /// each under `drop_ipv6_frag_timeout`.
    pub fn expire(&mut self, now: Instant, stats: &mut Stats) {
        self.contexts.expire(now, &mut stats.drop_ipv6_frag_timeout);
    }
}

/// RFC 7112 §5: the first fragment (`payload`, its Fragment header at
/// `frag_at`) holds every extension header and the upper-layer header
/// (its fixed part for TCP, UDP and ICMPv6).
fn holds_chain(payload: &[u8], frag_at: usize) -> bool {
    match walk_after_fragment(payload, frag_at) {
        Ok(Ipv6ChainEnd::UpperLayer {
            next_header,
            offset,
            ..
        }) => {
            let need = match next_header {
                NEXT_TCP => 20,
                NEXT_UDP => 8,
                NEXT_ICMPV6 => wire::icmpv6::HEADER_LEN,
                _ => 0,
            };
            payload.len() >= offset + need
        }
        // A second Fragment header: not a chain we can follow.
        Ok(Ipv6ChainEnd::Fragment { .. }) => false,
        Err(Ipv6ChainError::Truncated) => false,
        // Rejected later, when the whole datagram is walked.
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ipv6::{Ipv6Repr, NEXT_FRAGMENT};

    const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);

    /// A fragment of datagram `ident` carrying `data` at `offset`; the
    /// fragmentable part starts with a UDP header.
    fn fragment(ident: u32, offset: usize, data: &[u8], more: bool) -> Vec<u8> {
        let mut p = vec![0u8; 48 + data.len()];
        Ipv6Repr {
            src: SRC,
            dst: DST,
            next_header: NEXT_FRAGMENT,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 8 + data.len(),
        }
        .emit(&mut p);
        Ipv6FragmentRepr {
            next_header: NEXT_UDP,
            frag_offset: offset,
            more_frags: more,
            ident,
        }
        .emit(&mut p[40..]);
        p[48..].copy_from_slice(data);
        p
    }

    fn push<'a>(r: &'a mut Reassembler6, frag: &[u8], s: &mut Stats, t: u64) -> Frag6<'a> {
        let ip = Ipv6Packet::new_checked(frag).unwrap();
        let f = Ipv6FragmentRepr::parse(&ip.payload()[..8]).unwrap();
        r.push(Instant(t), &ip, 0, &f, s)
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 13) as u8).collect()
    }

    /// The first fragment (offset 0, M flag `more`) of datagram `ident`,
    /// cut after 4 bytes of its UDP header (the payload length says so).
    fn udp_header_cut_at_4(ident: u32, more: bool) -> Vec<u8> {
        let mut f = fragment(ident, 0, &data(8), more);
        f.truncate(48 + 4);
        f[4..6].copy_from_slice(&12u16.to_be_bytes());
        f
    }

    #[test]
    fn three_fragments_out_of_order_reassemble() {
        let (mut r, mut s) = (Reassembler6::new(2), Stats::default());
        let d = data(300);
        assert_eq!(
            push(&mut r, &fragment(7, 200, &d[200..], false), &mut s, 1),
            Frag6::Pending
        );
        assert_eq!(
            push(&mut r, &fragment(7, 0, &d[..96], true), &mut s, 1),
            Frag6::Pending
        );
        let Frag6::Whole(w) = push(&mut r, &fragment(7, 96, &d[96..200], true), &mut s, 1) else {
            panic!("not reassembled");
        };
        let ip = Ipv6Packet::new_checked(w).unwrap();
        assert_eq!(ip.payload_len(), 8 + 300);
        let f = Ipv6FragmentRepr::parse(ip.payload()).unwrap();
        assert!(f.is_atomic());
        assert_eq!(f.next_header, NEXT_UDP);
        assert_eq!(&ip.payload()[8..], &d[..]);
        assert_eq!(s.ipv6_frag_reassembled, 1);
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn overlap_drops_whole_datagram() {
        let (mut r, mut s) = (Reassembler6::new(2), Stats::default());
        let d = data(200);
        push(&mut r, &fragment(1, 0, &d[..96], true), &mut s, 1);
        assert_eq!(
            push(&mut r, &fragment(1, 88, &d[88..], false), &mut s, 1),
            Frag6::Dropped
        );
        assert_eq!(s.drop_ipv6_frag_overlap, 1);
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn tiny_first_fragment_without_upper_header_is_dropped() {
        let (mut r, mut s) = (Reassembler6::new(2), Stats::default());
        // 0 bytes of UDP header would fit, but 8 are needed; 0 < 8.
        let got = push(&mut r, &fragment(1, 0, &[], true), &mut s, 1);
        assert_eq!(got, Frag6::Dropped, "empty fragment");
        // Only 4 bytes of the UDP header: RFC 7112.
        let f = udp_header_cut_at_4(2, true);
        assert_eq!(
            push(&mut r, &f, &mut s, 1),
            Frag6::ParamProblem {
                code: 0,
                pointer: 4
            },
            "4 bytes with M set: not a multiple of 8"
        );
        let mut f = udp_header_cut_at_4(3, false);
        f[42..44].copy_from_slice(&[0, 1]); // M set, offset 0
        let got = push(&mut r, &f, &mut s, 1);
        assert!(matches!(got, Frag6::ParamProblem { code: 0, .. }));
        assert_eq!(s.drop_ipv6_frag_malformed, 3);
    }

    #[test]
    fn first_fragment_cut_inside_upper_header_is_rfc7112_drop() {
        let (mut r, mut s) = (Reassembler6::new(2), Stats::default());
        let mut f = fragment(4, 0, &data(8), true);
        f[40] = 6; // TCP: 20 bytes of header needed, 8 here
        assert_eq!(
            push(&mut r, &f, &mut s, 1),
            Frag6::ParamProblem {
                code: PARAM_PROBLEM_INCOMPLETE_CHAIN,
                pointer: 0
            }
        );
        assert_eq!(s.drop_ipv6_frag_incomplete_chain, 1);
    }

    #[test]
    fn too_big_and_timeout() {
        let (mut r, mut s) = (Reassembler6::new(1), Stats::default());
        let got = push(&mut r, &fragment(5, 65528, &data(16), false), &mut s, 1);
        assert!(matches!(
            got,
            Frag6::ParamProblem {
                code: 0,
                pointer: 42
            }
        ));
        assert_eq!(s.drop_ipv6_frag_too_big, 1);
        push(&mut r, &fragment(6, 0, &data(16), true), &mut s, 1);
        assert_eq!(r.in_progress(), 1);
        r.expire(Instant(1) + FRAG6_TIMEOUT, &mut s);
        assert_eq!((r.in_progress(), s.drop_ipv6_frag_timeout), (0, 1));
    }
}
