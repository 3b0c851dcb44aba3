//! Bounded out-of-order queue: payload received beyond `rcv_nxt`, kept until
//! the hole before it is filled.
//!
//! The bytes live in one buffer of `rcv_buf` bytes, allocated when the first
//! out-of-order segment arrives (most connections never see one), addressed
//! circularly by sequence number relative to a moving base; the
//! received intervals are a sorted list of at most `max_ranges` disjoint,
//! non-adjacent ranges. What does not fit is dropped (the sender retransmits).

use core::fmt;

use wire::SeqNum;

use super::api::RecvBuffer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    start: SeqNum,
    end: SeqNum,
}

pub(crate) struct Reassembly {
    /// Empty until the first out-of-order segment; then `cap` bytes.
    buf: Vec<u8>,
    /// Bytes it holds beyond `rcv_nxt` (the buffer's size once allocated).
    cap: usize,
    ranges: Vec<Range>,
    max_ranges: usize,
    /// A sequence number at or before every stored byte, and its buffer index.
    base: SeqNum,
    base_pos: usize,
}

impl fmt::Debug for Reassembly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reassembly")
            .field("capacity", &self.cap)
            .field("ranges", &self.ranges)
            .finish()
    }
}

impl Reassembly {
    /// Room for `capacity` bytes and `max_ranges` intervals, both allocated
    /// with the first out-of-order segment (nothing if `max_ranges` is 0:
    /// out-of-order data is then dropped).
    pub(crate) fn new(capacity: usize, max_ranges: usize) -> Self {
        let capacity = if max_ranges == 0 { 0 } else { capacity };
        Reassembly {
            buf: Vec::new(),
            cap: capacity,
            ranges: Vec::new(),
            max_ranges,
            base: SeqNum(0),
            base_pos: 0,
        }
    }

    /// Bytes it can hold beyond `rcv_nxt`.
    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// Grows the buffer to at least `capacity` bytes (the receive window
    /// grew), keeping what is stored. Allocates: called only when the
    /// window grows past the buffer, a few times per connection at most.
    pub(crate) fn ensure_capacity(&mut self, capacity: usize) {
        if self.max_ranges == 0 || capacity <= self.cap {
            return;
        }
        self.cap = capacity;
        if self.buf.is_empty() {
            return;
        }
        let mut buf = vec![0u8; capacity];
        let old = self.buf.len();
        for r in &self.ranges {
            // Every range lies within one old buffer past `base`.
            let (n, to) = (r.end - r.start, r.start - self.base);
            if r.start < self.base || to + n > old {
                continue;
            }
            let from = (self.base_pos + to) % old;
            let first = n.min(old - from);
            buf[to..to + first].copy_from_slice(&self.buf[from..from + first]);
            buf[to + first..to + n].copy_from_slice(&self.buf[..n - first]);
        }
        self.buf = buf;
        self.base_pos = 0;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Frees the buffer and the intervals when nothing is stored (an idle
    /// connection); the next out-of-order segment allocates them again.
    /// Returns the bytes freed.
    pub(crate) fn release(&mut self) -> usize {
        if !self.ranges.is_empty() || self.buf.is_empty() {
            return 0;
        }
        let bytes = self.buf.len() + self.ranges.capacity() * core::mem::size_of::<Range>();
        self.buf = Vec::new();
        self.ranges = Vec::new();
        bytes
    }

    /// Number of stored intervals.
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Moves the base to `rcv_nxt`. Everything stored is at or after `rcv_nxt`
    /// (and within the buffer), so positions stay consistent.
    fn rebase(&mut self, rcv_nxt: SeqNum) {
        if self.ranges.is_empty() || self.buf.is_empty() {
            self.base = rcv_nxt;
            self.base_pos = 0;
            return;
        }
        if rcv_nxt > self.base {
            self.base_pos = (self.base_pos + (rcv_nxt - self.base)) % self.buf.len();
            self.base = rcv_nxt;
        }
    }

    fn pos(&self, seq: SeqNum) -> usize {
        (self.base_pos + (seq - self.base)) % self.buf.len()
    }

    /// Stores `data` starting at `seq` (> `rcv_nxt`). Returns the number of
    /// bytes stored: 0 when the data lies beyond the buffer or would need an
    /// interval more than the bound allows (then the rightmost interval is
    /// evicted if the new one lies left of it, else the new one is dropped).
    pub(crate) fn insert(&mut self, rcv_nxt: SeqNum, seq: SeqNum, data: &[u8]) -> usize {
        let cap = self.cap;
        if self.max_ranges == 0 || cap == 0 || data.is_empty() || seq <= rcv_nxt {
            return 0;
        }
        if self.buf.is_empty() {
            // The first out-of-order segment (since creation or the last
            // release): nothing is stored yet.
            self.buf = vec![0u8; cap];
            self.ranges.reserve_exact(self.max_ranges);
        }
        self.drop_below(rcv_nxt);
        self.rebase(rcv_nxt);
        let off = seq - rcv_nxt;
        if off >= cap {
            return 0;
        }
        let len = data.len().min(cap - off);
        let (s, e) = (seq, seq + len);
        let i = self
            .ranges
            .iter()
            .position(|r| r.end >= s)
            .unwrap_or(self.ranges.len());
        let j = self.ranges[i..]
            .iter()
            .position(|r| r.start > e)
            .map_or(self.ranges.len(), |p| i + p);
        if i == j {
            if self.ranges.len() >= self.max_ranges {
                if i >= self.ranges.len() {
                    return 0;
                }
                self.ranges.pop();
            }
            self.ranges.insert(i, Range { start: s, end: e });
        } else {
            let start = s.min(self.ranges[i].start);
            let end = e.max(self.ranges[j - 1].end);
            self.ranges[i] = Range { start, end };
            self.ranges.drain(i + 1..j);
        }
        let p = self.pos(s);
        let first = len.min(cap - p);
        self.buf[p..p + first].copy_from_slice(&data[..first]);
        self.buf[..len - first].copy_from_slice(&data[first..len]);
        len
    }

    /// The stored interval holding `seq`, if any (intervals below `rcv_nxt`
    /// are stale and ignored).
    pub(crate) fn containing(&self, rcv_nxt: SeqNum, seq: SeqNum) -> Option<(SeqNum, SeqNum)> {
        self.ranges
            .iter()
            .find(|r| r.end > rcv_nxt && r.start <= seq && seq < r.end)
            .map(|r| (r.start.max(rcv_nxt), r.end))
    }

    /// True if `[start, end)` is already wholly stored.
    pub(crate) fn covers(&self, rcv_nxt: SeqNum, start: SeqNum, end: SeqNum) -> bool {
        self.containing(rcv_nxt, start)
            .is_some_and(|(_, e)| end <= e)
    }

    fn drop_below(&mut self, rcv_nxt: SeqNum) {
        self.ranges.retain(|r| r.end > rcv_nxt);
    }

    /// Moves every byte contiguous with `*rcv_nxt` into `rx`, advancing
    /// `*rcv_nxt`. Returns the number of bytes moved.
    pub(crate) fn pop_contiguous(
        &mut self,
        rcv_nxt: &mut SeqNum,
        rx: &mut impl RecvBuffer,
    ) -> usize {
        self.drop_below(*rcv_nxt);
        self.rebase(*rcv_nxt);
        let cap = self.buf.len();
        let mut moved = 0;
        while let Some(first) = self.ranges.first().copied() {
            if first.start > *rcv_nxt {
                break;
            }
            let n = first.end - *rcv_nxt;
            let p = self.pos(*rcv_nxt);
            let a = n.min(cap - p);
            let mut w = rx.write(&self.buf[p..p + a]);
            if w == a && a < n {
                w += rx.write(&self.buf[..n - a]);
            }
            *rcv_nxt += w;
            moved += w;
            if w < n {
                self.ranges[0].start = *rcv_nxt;
                break;
            }
            self.ranges.remove(0);
        }
        self.rebase(*rcv_nxt);
        moved
    }
}
