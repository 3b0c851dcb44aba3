//! IPv4 fragment reassembly (RFC 791 §3.2, hole tracking per RFC 815).
//!
//! A [`Reassembler`] has a fixed number of contexts, each with one buffer
//! for the largest datagram (65535 bytes, header included), all allocated
//! by [`Reassembler::new`]: nothing allocates per fragment. A context is
//! keyed by (source, destination, protocol, identification) (RFC 791) and
//! tracks the bytes still missing as a list of holes (RFC 815 §3); a
//! fragment is accepted only if it falls entirely inside one hole.
//!
//! Decisions, following Linux (`net/ipv4/ip_fragment.c`):
//! - an exact repeat of bytes already received (same offsets, same bytes)
//!   is ignored; any other overlap, a fragment past the end fixed by the
//!   last fragment, or two different ends, drops the whole datagram
//!   (RFC 5722 reasoning, as Linux does for IPv4 since 2018);
//! - a datagram not completed [`FRAG_TIMEOUT`] (30 s, `ipfrag_time`) after
//!   its first fragment arrived is dropped;
//! - when every context is busy, the oldest datagram is evicted;
//! - a datagram longer than 65535 bytes is dropped (RFC 791 total length).
//!
//! The reassembled datagram carries the header of the fragment at offset 0
//! (RFC 791: options copied or not, as that fragment had them) with the
//! total length patched, the fragment fields cleared and the checksum
//! recomputed, so the caller handles it like any unfragmented packet.
//!
//! Threading: owned by one engine core, like every other engine table.

use crate::ip::reasm::{Contexts, FragCounters};
use crate::obs::stats::Stats;
use crate::time::Instant;
use core::net::Ipv4Addr;
use core::time::Duration;
use wire::ipv4::{self, Ipv4Packet};

/// Reassembly contexts of an engine (datagrams in reassembly at once).
pub const FRAG_CONTEXTS: usize = 16;
/// How long a datagram may take to reassemble, from its first fragment
/// (Linux `net.ipv4.ipfrag_time`, 30 s; RFC 791 suggests 15 s as a lower bound).
pub const FRAG_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest reassembled datagram in bytes, header included (the 16-bit
/// total length field).
pub const MAX_DATAGRAM: usize = 65535;
pub use crate::ip::reasm::MAX_HOLES;

/// Largest payload in bytes: the datagram minus the smallest header.
const MAX_PAYLOAD: usize = MAX_DATAGRAM - ipv4::HEADER_LEN;
/// Room kept before the payload for the header of the fragment at offset 0.
const HEADER_ROOM: usize = ipv4::MAX_HEADER_LEN;

/// Identifies the datagram a fragment belongs to (RFC 791 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    ident: u16,
}

/// The reassembly table of one engine: [`FRAG_CONTEXTS`] contexts of
/// [`MAX_DATAGRAM`] bytes each, allocated at construction.
pub struct Reassembler {
    contexts: Contexts<Key>,
}

impl Default for Reassembler {
    /// A reassembler with no context (drops every fragment); allocates nothing.
    fn default() -> Self {
        Reassembler::new(0)
    }
}

/// IPv4's counters in `stats`, for the shared table.
fn counters(stats: &mut Stats) -> FragCounters<'_> {
    FragCounters {
        duplicate: &mut stats.frag_duplicate,
        overlap: &mut stats.drop_frag_overlap,
        malformed: &mut stats.drop_frag_malformed,
        timeout: &mut stats.drop_frag_timeout,
        no_context: &mut stats.drop_frag_no_context,
    }
}

impl Reassembler {
    /// A reassembler with `contexts` contexts, each with its buffer
    /// (about 64 KiB each).
    pub fn new(contexts: usize) -> Reassembler {
        Reassembler {
            contexts: Contexts::new(contexts, HEADER_ROOM, MAX_PAYLOAD, FRAG_TIMEOUT),
        }
    }

    /// Datagrams in reassembly now.
    pub fn in_progress(&self) -> usize {
        self.contexts.in_progress()
    }

    /// Takes one fragment (`ip.is_fragment()`, header already validated by
    /// the caller: checksum, destination) received at `now`. Returns the
    /// whole datagram when this fragment completed it: a packet with the
    /// header of the first fragment, no fragment fields, a valid checksum,
    /// borrowed from the context until the next call.
    ///
    /// Counts in `stats`: `frag_rx` for every fragment, then
    /// `frag_reassembled`, `frag_duplicate`, `drop_frag_malformed`,
    /// `drop_frag_overlap`, `drop_frag_too_big`, `drop_frag_timeout` (a
    /// stale context met on the way) or `drop_frag_no_context` (the oldest
    /// datagram evicted to make room).
    pub fn push(
        &mut self,
        now: Instant,
        ip: &Ipv4Packet<'_>,
        stats: &mut Stats,
    ) -> Option<Ipv4Packet<'_>> {
        stats.frag_rx += 1;
        let start = ip.frag_offset();
        let data = ip.payload();
        let end = start + data.len();
        let last = !ip.more_frags();
        // RFC 791: every fragment but the last carries a multiple of 8
        // bytes; an empty fragment carries nothing (Linux drops both).
        if data.is_empty() || (!last && data.len() & 7 != 0) {
            stats.drop_frag_malformed += 1;
            return None;
        }
        let key = Key {
            src: ip.src(),
            dst: ip.dst(),
            protocol: ip.protocol(),
            ident: ip.ident(),
        };
        if end > MAX_PAYLOAD {
            // RFC 791: no datagram exceeds 65535 bytes (the ping of death).
            stats.drop_frag_too_big += 1;
            self.contexts.forget(key);
            return None;
        }
        let i = self
            .contexts
            .store(key, now, start, data, last, &mut counters(stats))?;
        if start == 0 {
            self.contexts.keep_header(i, ip.header(), 0);
        }
        // Complete: every byte from 0 to the end of the last fragment.
        let (hl, plen) = self.contexts.finish(i)?;
        if hl == 0 || hl + plen > MAX_DATAGRAM {
            stats.drop_frag_too_big += 1;
            return None;
        }
        let ctx = self.contexts.get(i);
        let at = HEADER_ROOM - hl;
        let header = &mut ctx.buf[at..HEADER_ROOM];
        header.copy_from_slice(&ctx.header[..hl]);
        header[2..4].copy_from_slice(&((hl + plen) as u16).to_be_bytes());
        // Keep DF if the first fragment had it; clear MF and the offset.
        header[6] &= 0x40;
        header[7] = 0;
        ipv4::fill_header_checksum(header);
        let whole = Ipv4Packet::new_checked(&ctx.buf[at..HEADER_ROOM + plen]).ok()?;
        stats.frag_reassembled += 1;
        Some(whole)
    }

    /// Drops every datagram older than [`FRAG_TIMEOUT`] at `now`, counting
    /// each under `drop_frag_timeout` (RFC 791: the reassembly timer).
    /// No ICMP time exceeded is sent (RFC 1122 §3.3.2 makes it a SHOULD).
    pub fn expire(&mut self, now: Instant, stats: &mut Stats) {
        self.contexts.expire(now, &mut stats.drop_frag_timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ipv4::{Ipv4Repr, PROTO_UDP};

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn payload(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// A fragment of datagram `ident` carrying `data` at byte `offset`.
    fn fragment(ident: u16, offset: usize, data: &[u8], more: bool) -> Vec<u8> {
        let mut buf = vec![0u8; 20 + data.len()];
        Ipv4Repr {
            src: SRC,
            dst: DST,
            protocol: PROTO_UDP,
            ttl: 64,
            ident,
            dont_frag: false,
            payload_len: data.len(),
        }
        .emit(&mut buf);
        let field = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
        buf[6..8].copy_from_slice(&field.to_be_bytes());
        ipv4::fill_header_checksum(&mut buf[..20]);
        buf[20..].copy_from_slice(data);
        buf
    }

    /// Splits `data` into fragments of `size` bytes (a multiple of 8).
    fn split(ident: u16, data: &[u8], size: usize) -> Vec<Vec<u8>> {
        data.chunks(size)
            .enumerate()
            .map(|(k, c)| fragment(ident, k * size, c, (k + 1) * size < data.len()))
            .collect()
    }

    /// Pushes `frag`; returns the reassembled payload if it completed one.
    fn push(r: &mut Reassembler, now: Instant, frag: &[u8], stats: &mut Stats) -> Option<Vec<u8>> {
        let ip = Ipv4Packet::new_checked(frag).unwrap();
        let whole = r.push(now, &ip, stats)?;
        assert!(whole.checksum_valid());
        assert!(!whole.is_fragment());
        assert_eq!(
            (whole.src(), whole.dst(), whole.protocol()),
            (SRC, DST, PROTO_UDP)
        );
        Some(whole.payload().to_vec())
    }

    /// A reassembler of 4 contexts, its counters, and datagram `ident`:
    /// 3 000 bytes of payload in three fragments of up to 1 480.
    fn three_fragments(ident: u16) -> (Reassembler, Stats, Vec<u8>, Vec<Vec<u8>>) {
        let data = payload(3000);
        let frags = split(ident, &data, 1480);
        (Reassembler::new(4), Stats::default(), data, frags)
    }

    fn t(secs: u64) -> Instant {
        Instant(1_000_000_000 + secs * 1_000_000_000)
    }

    #[test]
    fn empty_fragments_in_order_reassemble_whole_payload() {
        let (mut r, mut s) = (Reassembler::new(4), Stats::default());
        let data = payload(4000);
        let frags = split(1, &data, 1480);
        assert_eq!(frags.len(), 3);
        assert_eq!(push(&mut r, t(0), &frags[0], &mut s), None);
        assert_eq!(push(&mut r, t(0), &frags[1], &mut s), None);
        assert_eq!(push(&mut r, t(0), &frags[2], &mut s), Some(data));
        assert_eq!((s.frag_rx, s.frag_reassembled), (3, 1));
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn empty_fragments_reversed_reassemble_whole_payload() {
        let (mut r, mut s) = (Reassembler::new(4), Stats::default());
        let data = payload(10_001);
        let frags = split(2, &data, 1024);
        let n = frags.len();
        for f in frags[1..].iter().rev() {
            assert_eq!(push(&mut r, t(0), f, &mut s), None);
        }
        assert_eq!(push(&mut r, t(0), &frags[0], &mut s), Some(data));
        assert_eq!(s.frag_rx, n as u64);
        assert_eq!(s.frag_reassembled, 1);
    }

    #[test]
    fn empty_fragments_shuffled_reassemble_whole_payload() {
        let (mut r, mut s) = (Reassembler::new(4), Stats::default());
        let data = payload(65_000);
        let frags = split(3, &data, 1000 / 8 * 8);
        let order: Vec<usize> = (0..frags.len()).map(|k| (k * 37) % frags.len()).collect();
        let mut got = None;
        for (n, &k) in order.iter().enumerate() {
            got = push(&mut r, t(0), &frags[k], &mut s);
            assert_eq!(got.is_some(), n + 1 == frags.len());
        }
        assert_eq!(got, Some(data));
    }

    #[test]
    fn partial_exact_duplicate_is_ignored_and_datagram_completes() {
        let (mut r, mut s, data, frags) = three_fragments(4);
        push(&mut r, t(0), &frags[0], &mut s);
        push(&mut r, t(0), &frags[0], &mut s);
        push(&mut r, t(0), &frags[1], &mut s);
        assert_eq!(push(&mut r, t(0), &frags[2], &mut s), Some(data));
        assert_eq!((s.frag_duplicate, s.drop_frag_overlap), (1, 0));
    }

    #[test]
    fn partial_duplicate_with_other_bytes_drops_datagram() {
        let (mut r, mut s, _, frags) = three_fragments(5);
        push(&mut r, t(0), &frags[1], &mut s);
        let mut evil = frags[1].clone();
        evil[30] ^= 0xff;
        assert_eq!(push(&mut r, t(0), &evil, &mut s), None);
        assert_eq!(s.drop_frag_overlap, 1);
        assert_eq!(r.in_progress(), 0);
        // The rest starts a new datagram that lacks the middle.
        push(&mut r, t(0), &frags[0], &mut s);
        assert_eq!(push(&mut r, t(0), &frags[2], &mut s), None);
        assert_eq!(s.frag_reassembled, 0);
    }

    /// A fragment that overlaps bytes already received drops the whole
    /// datagram (RFC 5722 §4 applied to IPv4, as Linux does), even where the
    /// overlapping bytes are identical.
    #[test]
    fn partial_overlaps_drop_datagram() {
        let data = payload(2000);
        // Two fragments each, as (first byte, end, more fragments).
        let cases = [
            (
                "bytes 992..2000 after 0..1000: the first 8 overlap identical data",
                [(0, 1000, true), (992, 2000, false)],
            ),
            (
                "a fragment at 1504 after a last one that ends at 1500",
                [(1000, 1500, false), (1504, 1600, true)],
            ),
            (
                "a last fragment ending before bytes already received",
                [(800, 1000, true), (0, 400, false)],
            ),
        ];
        for (ident, (what, frags)) in (6..).zip(cases) {
            let (mut r, mut s) = (Reassembler::new(4), Stats::default());
            for (first, end, more) in frags {
                let frag = fragment(ident, first, &data[first..end], more);
                assert_eq!(push(&mut r, t(0), &frag, &mut s), None, "{what}");
            }
            assert_eq!(s.drop_frag_overlap, 1, "{what}");
            assert_eq!(r.in_progress(), 0, "{what}");
        }
    }

    #[test]
    fn partial_missing_piece_times_out_after_30s() {
        let (mut r, mut s, _, frags) = three_fragments(9);
        push(&mut r, t(0), &frags[0], &mut s);
        push(&mut r, t(0), &frags[2], &mut s);
        r.expire(t(29), &mut s);
        assert_eq!((r.in_progress(), s.drop_frag_timeout), (1, 0));
        r.expire(t(30), &mut s);
        assert_eq!((r.in_progress(), s.drop_frag_timeout), (0, 1));
        // The missing piece arrives too late: a new, incomplete datagram.
        assert_eq!(push(&mut r, t(31), &frags[1], &mut s), None);
        assert_eq!(s.frag_reassembled, 0);
    }

    #[test]
    fn partial_stale_context_is_not_joined_even_without_expire() {
        let (mut r, mut s, _, frags) = three_fragments(10);
        push(&mut r, t(0), &frags[0], &mut s);
        push(&mut r, t(0), &frags[1], &mut s);
        assert_eq!(push(&mut r, t(40), &frags[2], &mut s), None);
        assert_eq!(s.drop_frag_timeout, 1);
    }

    #[test]
    fn empty_datagram_over_65535_bytes_is_dropped() {
        let (mut r, mut s) = (Reassembler::new(4), Stats::default());
        let data = payload(1000);
        // Offset 65528 (the largest) + 1000 bytes: the ping of death.
        assert_eq!(
            push(&mut r, t(0), &fragment(11, 65528, &data, false), &mut s),
            None
        );
        assert_eq!(s.drop_frag_too_big, 1);
        // Exactly 65535 with a 20-byte header is fine.
        let data = payload(MAX_PAYLOAD);
        let frags = split(12, &data, 1480);
        let mut got = None;
        for f in &frags {
            got = push(&mut r, t(0), f, &mut s);
        }
        assert_eq!(got, Some(data));
    }

    #[test]
    fn empty_malformed_fragments_are_dropped_alone() {
        let (mut r, mut s) = (Reassembler::new(4), Stats::default());
        let data = payload(100);
        push(&mut r, t(0), &fragment(13, 0, &data[..12], true), &mut s);
        push(&mut r, t(0), &fragment(13, 8, &[], false), &mut s);
        assert_eq!(s.drop_frag_malformed, 2);
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn full_table_new_datagram_evicts_oldest() {
        let (mut r, mut s) = (Reassembler::new(FRAG_CONTEXTS), Stats::default());
        let data = payload(3000);
        for id in 0..FRAG_CONTEXTS as u16 {
            push(&mut r, t(u64::from(id)), &split(id, &data, 1480)[0], &mut s);
        }
        assert_eq!(r.in_progress(), FRAG_CONTEXTS);
        assert_eq!(s.drop_frag_no_context, 0);
        let newcomer = split(100, &data, 1480);
        push(&mut r, t(20), &newcomer[0], &mut s);
        assert_eq!(s.drop_frag_no_context, 1);
        assert_eq!(r.in_progress(), FRAG_CONTEXTS);
        // Datagram 0 (the oldest) was evicted: its rest does not complete it.
        let old = split(0, &data, 1480);
        push(&mut r, t(20), &old[1], &mut s);
        assert_eq!(push(&mut r, t(20), &old[2], &mut s), None);
        // Datagram 5 survived, and so did the newcomer.
        let kept = split(5, &data, 1480);
        push(&mut r, t(20), &kept[1], &mut s);
        assert_eq!(push(&mut r, t(20), &kept[2], &mut s), Some(data.clone()));
        push(&mut r, t(20), &newcomer[2], &mut s);
        assert_eq!(push(&mut r, t(20), &newcomer[1], &mut s), Some(data));
    }

    #[test]
    fn empty_no_contexts_drops_every_fragment() {
        let (mut r, mut s) = (Reassembler::default(), Stats::default());
        let frags = split(1, &payload(2000), 1480);
        assert_eq!(push(&mut r, t(0), &frags[0], &mut s), None);
        assert_eq!(s.drop_frag_no_context, 1);
    }

    #[test]
    fn partial_too_many_holes_drops_datagram() {
        let (mut r, mut s) = (Reassembler::new(1), Stats::default());
        let data = payload(8);
        // Every other 8-byte block from the far end: each adds a hole.
        let mut k = 0;
        while s.drop_frag_malformed == 0 && k < 1000 {
            push(
                &mut r,
                t(0),
                &fragment(1, 16 * (1000 - k), &data, true),
                &mut s,
            );
            k += 1;
        }
        assert_eq!(k, MAX_HOLES, "holes before the drop");
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn empty_first_fragment_options_are_kept_in_reassembled_header() {
        let (mut r, mut s) = (Reassembler::new(1), Stats::default());
        let data = payload(64);
        let mut first = vec![0u8; 24 + 32];
        first[..20].copy_from_slice(&fragment(3, 0, &data[..32], true)[..20]);
        first[0] = 0x46;
        first[2..4].copy_from_slice(&56u16.to_be_bytes());
        first[20..24].copy_from_slice(&[1, 1, 1, 0]);
        first[24..].copy_from_slice(&data[..32]);
        ipv4::fill_header_checksum(&mut first[..24]);
        push(&mut r, t(0), &first, &mut s);
        let second = fragment(3, 32, &data[32..], false);
        let ip = Ipv4Packet::new_checked(&second).unwrap();
        let whole = r.push(t(0), &ip, &mut s).unwrap();
        assert_eq!(whole.header_len(), 24);
        assert_eq!(whole.total_len(), 24 + 64);
        assert_eq!(&whole.header()[20..], &[1, 1, 1, 0]);
        assert_eq!(whole.payload(), &data[..]);
        assert!(whole.checksum_valid());
    }
}
