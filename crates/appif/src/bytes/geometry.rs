//! A ring's geometry: its capacity and where the last growth switched
//! capacities, packed in one word that both ends read (see the parent
//! module's growth protocol), and the cell that holds it.

use super::*;

/// `a` comes before `b` (positions compared modulo 2^64).
pub(super) fn before(a: u64, b: u64) -> bool {
    (b.wrapping_sub(a) as i64) > 0
}

/// Where the bytes of a ring are: its capacity and, after a growth, the
/// switch position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Geometry {
    /// Bytes in use, a power of two.
    pub(super) cap: usize,
    /// Set once the ring has grown: positions before `switch_at` lie in
    /// the old capacity `cap / 2`.
    pub(super) grown: bool,
    pub(super) switch_at: u64,
}

impl Geometry {
    pub(super) fn plain(cap: usize) -> Geometry {
        Geometry {
            cap,
            grown: false,
            switch_at: 0,
        }
    }

    /// The geometry a published `word` describes, with the switch position
    /// taken as the one in `[anchor, anchor + 2^57)`; None when the word
    /// is impossible for a ring of `reserved` bytes.
    pub(super) fn from_word(word: u64, reserved: usize, anchor: u64) -> Option<Geometry> {
        if word == 0 {
            return Some(Geometry::plain(reserved));
        }
        let log2 = (word >> LOG2_SHIFT) as u32;
        if log2 >= usize::BITS || (1usize << log2) > reserved || (1usize << log2) < MIN_RING {
            return None;
        }
        let cap = 1usize << log2;
        let grown = word & GROWN_BIT != 0;
        let switch_at =
            anchor.wrapping_add((word & SWITCH_MASK).wrapping_sub(anchor) & SWITCH_MASK);
        if grown && cap < 2 * MIN_RING {
            return None;
        }
        Some(Geometry {
            cap,
            grown,
            switch_at: if grown { switch_at } else { 0 },
        })
    }

    pub(super) fn word(&self) -> u64 {
        let log2 = u64::from(self.cap.trailing_zeros()) << LOG2_SHIFT;
        if self.grown {
            log2 | GROWN_BIT | (self.switch_at & SWITCH_MASK)
        } else {
            log2
        }
    }

    /// True while positions before the switch are still unread at `tail`.
    pub(super) fn pending(&self, tail: u64) -> bool {
        self.grown && before(tail, self.switch_at)
    }

    /// One past the last position the writer may fill when the reader is
    /// at `tail`.
    pub(super) fn limit(&self, tail: u64) -> u64 {
        if self.pending(tail) {
            self.switch_at.wrapping_add(self.cap as u64 / 2)
        } else {
            tail.wrapping_add(self.cap as u64)
        }
    }

    /// Byte offset in the buffer of position `p`, and the capacity whose
    /// wrap applies there.
    pub(super) fn locate(&self, p: u64) -> (usize, usize) {
        if !self.grown {
            return ((p as usize) & (self.cap - 1), self.cap);
        }
        let half = self.cap / 2;
        if before(p, self.switch_at) {
            ((p.wrapping_sub(self.switch_at) as usize) & (half - 1), half)
        } else {
            let at = p.wrapping_sub(self.switch_at).wrapping_add(half as u64);
            ((at as usize) & (self.cap - 1), self.cap)
        }
    }

    /// The bytes of positions `[p, p + n)` as at most two (offset, length)
    /// pieces of the buffer, in order. `n` is at most what the ring holds.
    pub(super) fn pieces(&self, p: u64, n: usize) -> [(usize, usize); 2] {
        let (start, wrap) = self.locate(p);
        let end = p.wrapping_add(n as u64);
        if self.grown && before(p, self.switch_at) && before(self.switch_at, end) {
            // Across the switch: the old part ends at the old capacity and
            // the new part starts right there.
            return [(start, n), (0, 0)];
        }
        let first = n.min(wrap - start);
        [(start, first), (0, n - first)]
    }

    /// The growth to double capacity with the writer at `head` and the
    /// reader at `tail`, if the protocol allows it now.
    pub(super) fn grow(&self, head: u64, tail: u64, reserved: usize) -> Option<Geometry> {
        if self.pending(tail) || self.cap * 2 > reserved {
            return None;
        }
        let (at, _) = self.locate(head);
        let switch_at = head.wrapping_add(((self.cap - at) & (self.cap - 1)) as u64);
        if switch_at.wrapping_sub(tail) > self.cap as u64 {
            return None;
        }
        Some(Geometry {
            cap: self.cap * 2,
            grown: true,
            switch_at,
        })
    }

    /// Whether indices `head` and `tail` are possible in this geometry:
    /// `tail <= head <= limit(tail)`, and unread bytes before a switch fit
    /// the old capacity.
    pub(super) fn consistent(&self, head: u64, tail: u64) -> bool {
        !before(head, tail)
            && !before(self.limit(tail), head)
            && (!self.pending(tail) || self.switch_at.wrapping_sub(tail) <= self.cap as u64 / 2)
    }

    /// Whether the reader at `tail` may adopt `next` in place of `self`:
    /// a larger capacity, after a growth whose unread bytes before the
    /// switch fit its old half. The word alone tells where every byte at or
    /// after `tail` lies (each growth started at the previous capacity's
    /// byte 0, and the writer grows again only after the reader passed the
    /// previous switch), so a reader that missed a growth (it read nothing
    /// between two) adopts the latest one directly.
    pub(super) fn allows(&self, next: &Geometry, tail: u64) -> bool {
        next.grown
            && next.cap > self.cap
            && next.switch_at.wrapping_sub(tail) <= next.cap as u64 / 2
    }
}

/// A geometry kept in atomics, so that an end's `&self` methods can adopt
/// a new one.
#[derive(Debug)]
pub(super) struct GeoCell {
    pub(super) word: AtomicU64,
    pub(super) cap: AtomicUsize,
    pub(super) grown: AtomicBool,
    pub(super) switch_at: AtomicU64,
}

impl GeoCell {
    pub(super) fn new(g: Geometry, word: u64) -> GeoCell {
        GeoCell {
            word: AtomicU64::new(word),
            cap: AtomicUsize::new(g.cap),
            grown: AtomicBool::new(g.grown),
            switch_at: AtomicU64::new(g.switch_at),
        }
    }

    pub(super) fn get(&self) -> Geometry {
        Geometry {
            cap: self.cap.load(Ordering::Relaxed),
            grown: self.grown.load(Ordering::Relaxed),
            switch_at: self.switch_at.load(Ordering::Relaxed),
        }
    }

    pub(super) fn set(&self, g: Geometry, word: u64) {
        self.word.store(word, Ordering::Relaxed);
        self.cap.store(g.cap, Ordering::Relaxed);
        self.grown.store(g.grown, Ordering::Relaxed);
        self.switch_at.store(g.switch_at, Ordering::Relaxed);
    }
}
