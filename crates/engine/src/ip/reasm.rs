//! What IPv4 (`frag`) and IPv6 (`frag6`) reassembly share: the holes of
//! one datagram (RFC 815 §3) and a fixed table of contexts, each with one
//! buffer for the largest datagram, allocated up front (nothing allocates
//! per fragment). A context is found by its family's key: (source,
//! destination, protocol, identification) for IPv4 (RFC 791 §3.2),
//! (source, destination, identification) for IPv6 (RFC 8200 §4.5).
//!
//! Decisions common to both (following Linux, `net/ipv4/ip_fragment.c`,
//! and RFC 5722): an exact repeat of bytes already received is ignored;
//! any other overlap, a fragment past the end fixed by the last fragment,
//! or two different ends, drops the whole datagram; a datagram older than
//! its family's timeout is dropped; when every context is busy, the
//! oldest datagram is evicted.

use crate::time::Instant;
use core::time::Duration;

/// Holes one datagram may have at once; a fragment that would make more
/// drops the datagram. A 64 KiB datagram in 1500-byte fragments has 45
/// fragments, so honest senders stay far below.
pub const MAX_HOLES: usize = 64;

/// End of the hole past the last byte received while the length is unknown.
const INFINITY: usize = usize::MAX;

/// Payload bytes `start..end` not received yet (RFC 815 hole descriptor);
/// `end` is [`INFINITY`] until the last fragment fixes the length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Hole {
    start: usize,
    end: usize,
}

/// The bytes still missing of one datagram's payload (RFC 815 §3): a
/// bounded list of holes and, once the last fragment came, the length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holes {
    /// Payload length in bytes, known once the last fragment (MF clear) arrived.
    payload_len: Option<usize>,
    /// Holes, unordered; the datagram is complete when there is none.
    holes: [Hole; MAX_HOLES],
    /// Holes in use in `holes`.
    n_holes: usize,
}

/// What one fragment did to its datagram ([`Holes::insert`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insert {
    /// Stored.
    Stored,
    /// An exact repeat of bytes already received: ignored.
    Duplicate,
    /// Overlaps bytes received with other bytes, or contradicts the
    /// length fixed by the last fragment: the datagram must be dropped.
    Overlap,
    /// Would make more than [`MAX_HOLES`] holes: the datagram must be dropped.
    TooManyHoles,
}

impl Holes {
    /// Nothing received yet (one hole from 0 to infinity).
    pub(crate) fn new() -> Holes {
        let mut h = Holes {
            payload_len: None,
            holes: [Hole::default(); MAX_HOLES],
            n_holes: 0,
        };
        h.start();
        h
    }

    /// Forgets everything received: one hole from 0 to infinity.
    pub(crate) fn start(&mut self) {
        self.payload_len = None;
        self.holes[0] = Hole {
            start: 0,
            end: INFINITY,
        };
        self.n_holes = 1;
    }

    /// True when every byte up to the last fragment's end is in.
    pub(crate) fn complete(&self) -> bool {
        self.n_holes == 0
    }

    /// The payload length once the last fragment arrived.
    pub(crate) fn payload_len(&self) -> Option<usize> {
        self.payload_len
    }

    fn remove_hole(&mut self, i: usize) {
        self.n_holes -= 1;
        self.holes[i] = self.holes[self.n_holes];
    }

    fn add_hole(&mut self, hole: Hole) -> bool {
        if self.n_holes == MAX_HOLES {
            return false;
        }
        self.holes[self.n_holes] = hole;
        self.n_holes += 1;
        true
    }

    /// Stores payload bytes `start..start + data.len()` into `payload`
    /// (the datagram's payload buffer, long enough) when they fall inside
    /// one hole (RFC 815 §3); `last`: the fragment ends the datagram.
    pub(crate) fn insert(
        &mut self,
        payload: &mut [u8],
        start: usize,
        data: &[u8],
        last: bool,
    ) -> Insert {
        let end = start + data.len();
        // The length, once fixed by a last fragment, must never change, and no
        // fragment may reach past it.
        match self.payload_len {
            Some(len) if end > len || (last && end != len) => return Insert::Overlap,
            None if last => {
                // Bytes already received past this end contradict it: the
                // open-ended hole must start at or before `end`.
                let open = self.holes[..self.n_holes]
                    .iter()
                    .find(|h| h.end == INFINITY)
                    .map_or(INFINITY, |h| h.start);
                if open > end {
                    return Insert::Overlap;
                }
            }
            _ => {}
        }
        let mut hit = None;
        let mut hits = 0;
        for (i, h) in self.holes[..self.n_holes].iter().enumerate() {
            if h.start < end && start < h.end {
                hits += 1;
                hit = Some(i);
            }
        }
        let dst = &mut payload[start..end];
        let Some(i) = hit else {
            // Every byte was received before: a repeat if they are the same.
            return if dst == data {
                Insert::Duplicate
            } else {
                Insert::Overlap
            };
        };
        let h = self.holes[i];
        if hits > 1 || start < h.start || end > h.end {
            // Part new, part old: an overlap (Linux drops the datagram).
            return Insert::Overlap;
        }
        dst.copy_from_slice(data);
        self.remove_hole(i);
        let before = Hole {
            start: h.start,
            end: start,
        };
        let after = Hole {
            start: end,
            end: h.end,
        };
        if last {
            self.payload_len = Some(end);
            // Nothing past the end is missing any more.
            let mut k = 0;
            while k < self.n_holes {
                if self.holes[k].start >= end {
                    self.remove_hole(k);
                } else {
                    k += 1;
                }
            }
        }
        let keep_after = end < h.end && !last;
        if (before.start < before.end && !self.add_hole(before))
            || (keep_after && !self.add_hole(after))
        {
            return Insert::TooManyHoles;
        }
        Insert::Stored
    }
}

/// The counters of one family's reassembly, borrowed from `Stats`.
pub(crate) struct FragCounters<'a> {
    /// Fragments ignored as exact repeats.
    pub duplicate: &'a mut u64,
    /// Datagrams dropped for an overlap or contradicting lengths.
    pub overlap: &'a mut u64,
    /// Fragments or datagrams dropped as malformed (too many holes).
    pub malformed: &'a mut u64,
    /// Datagrams dropped for taking longer than the timeout.
    pub timeout: &'a mut u64,
    /// Datagrams evicted, or fragments dropped, for want of a context.
    pub no_context: &'a mut u64,
}

/// One datagram in reassembly, found by key `K`.
pub(crate) struct Context<K> {
    /// The datagram; None when the context is free.
    pub key: Option<K>,
    /// When its first fragment arrived.
    pub started: Instant,
    /// The header kept from the fragment at offset 0 (`header_len` bytes:
    /// the IPv4 header, or the IPv6 header and the unfragmentable
    /// extension headers).
    pub header: Box<[u8]>,
    /// Length in bytes of `header`; 0 until the fragment at offset 0 arrives.
    pub header_len: usize,
    /// IPv6: the first fragment's Next Header (of the fragmentable part).
    pub next_header: u8,
    /// What is missing of the payload.
    pub holes: Holes,
    /// `header_room` bytes, then the payload at its offset.
    pub buf: Box<[u8]>,
}

/// A fixed table of reassembly contexts keyed by `K`.
pub(crate) struct Contexts<K> {
    contexts: Vec<Context<K>>,
    /// How long a datagram may take, from its first fragment.
    timeout: Duration,
    /// Bytes kept before the payload in each buffer, for the header.
    header_room: usize,
}

impl<K: Copy + Eq> Contexts<K> {
    /// `n` contexts, each with a header of `header_room` bytes at most and
    /// a payload of `max_payload` bytes at most; a datagram expires
    /// `timeout` after its first fragment. `n = 0` allocates nothing.
    pub fn new(n: usize, header_room: usize, max_payload: usize, timeout: Duration) -> Self {
        Contexts {
            contexts: (0..n)
                .map(|_| Context {
                    key: None,
                    started: Instant(0),
                    header: vec![0; header_room].into_boxed_slice(),
                    header_len: 0,
                    next_header: 0,
                    holes: Holes::new(),
                    buf: vec![0; header_room + max_payload].into_boxed_slice(),
                })
                .collect(),
            timeout,
            header_room,
        }
    }

    /// Datagrams in reassembly now.
    pub fn in_progress(&self) -> usize {
        self.contexts.iter().filter(|c| c.key.is_some()).count()
    }

    /// The context in use at index `i`.
    pub fn get(&mut self, i: usize) -> &mut Context<K> {
        &mut self.contexts[i]
    }

    fn expired(&self, c: &Context<K>, now: Instant) -> bool {
        c.key.is_some() && now.saturating_since(c.started) >= self.timeout
    }

    /// Drops every datagram older than the timeout at `now`, each counted
    /// in `timeout`.
    pub fn expire(&mut self, now: Instant, timeout: &mut u64) {
        let limit = self.timeout;
        for c in &mut self.contexts {
            if c.key.is_some() && now.saturating_since(c.started) >= limit {
                c.key = None;
                *timeout += 1;
            }
        }
    }

    /// Drops the datagram `key`, if in reassembly.
    pub fn forget(&mut self, key: K) {
        for c in &mut self.contexts {
            if c.key == Some(key) {
                c.key = None;
            }
        }
    }

    /// Stores fragment bytes `data` at payload offset `start` of datagram
    /// `key` (`last`: the fragment ends it), received at `now`. Returns
    /// the index of its context, or None when the fragment or the whole
    /// datagram was dropped (counted in `n`); an exact repeat is counted
    /// and its context returned.
    pub fn store(
        &mut self,
        key: K,
        now: Instant,
        start: usize,
        data: &[u8],
        last: bool,
        n: &mut FragCounters<'_>,
    ) -> Option<usize> {
        let i = self.context_for(key, now, n)?;
        let room = self.header_room;
        let ctx = &mut self.contexts[i];
        match ctx.holes.insert(&mut ctx.buf[room..], start, data, last) {
            Insert::Stored => {}
            Insert::Duplicate => *n.duplicate += 1,
            Insert::Overlap => {
                *n.overlap += 1;
                ctx.key = None;
                return None;
            }
            Insert::TooManyHoles => {
                *n.malformed += 1;
                ctx.key = None;
                return None;
            }
        }
        Some(i)
    }

    /// Keeps `header` (and `next_header`) as context `i`'s header unless
    /// one is kept already: the caller passes the fragment at offset 0's.
    pub fn keep_header(&mut self, i: usize, header: &[u8], next_header: u8) {
        let ctx = &mut self.contexts[i];
        if ctx.header_len == 0 {
            ctx.header[..header.len()].copy_from_slice(header);
            ctx.header_len = header.len();
            ctx.next_header = next_header;
        }
    }

    /// When context `i`'s datagram is complete: frees the context and
    /// returns (header length, payload length); the bytes stay in its
    /// buffer until the next fragment. None while bytes are missing.
    pub fn finish(&mut self, i: usize) -> Option<(usize, usize)> {
        let ctx = &mut self.contexts[i];
        if !ctx.holes.complete() {
            return None;
        }
        ctx.key = None;
        Some((ctx.header_len, ctx.holes.payload_len().unwrap_or(0)))
    }

    /// The context of `key`, started if new: a free one, else the oldest
    /// is evicted. Stale contexts met on the way are dropped. None if the
    /// table has no context at all.
    fn context_for(&mut self, key: K, now: Instant, n: &mut FragCounters<'_>) -> Option<usize> {
        let mut free = None;
        let mut oldest: Option<(Instant, usize)> = None;
        for i in 0..self.contexts.len() {
            if self.expired(&self.contexts[i], now) {
                self.contexts[i].key = None;
                *n.timeout += 1;
            }
            let c = &self.contexts[i];
            match c.key {
                Some(k) if k == key => return Some(i),
                Some(_) => match oldest {
                    Some((at, _)) if at <= c.started => {}
                    _ => oldest = Some((c.started, i)),
                },
                None => {
                    free.get_or_insert(i);
                }
            }
        }
        let i = match (free, oldest) {
            (Some(i), _) => i,
            (None, Some((_, i))) => {
                *n.no_context += 1;
                i
            }
            (None, None) => {
                *n.no_context += 1;
                return None;
            }
        };
        let c = &mut self.contexts[i];
        c.key = Some(key);
        c.started = now;
        c.header_len = 0;
        c.holes.start();
        Some(i)
    }
}
