//! A single-producer single-consumer byte ring that can grow: the
//! per-connection RX and TX buffers.
//!
//! ```text
//!   tail (Reader) ──► [ unread bytes ] ◄── head (Writer)
//! ```
//! `head` and `tail` count bytes since creation (u64, never wrap in
//! practice). The writer owns `head`, the free space and the ring's
//! geometry; the reader owns `tail` and the unread bytes. Bytes are
//! published with a release store of `head` and freed with a release store
//! of `tail`.
//!
//! ## Growth
//!
//! A ring reserves `reserved` bytes of memory but uses only its capacity
//! `cap` (a power of two) of them; the pages beyond are never touched. The
//! writer may double `cap` (up to `reserved`) at a switch position S:
//! positions before S keep the old place in memory, positions from S on
//! get the new one, arranged so that the byte at S lies right after the
//! byte at S - 1 in memory, at the start of the half the old capacity never
//! used:
//!
//! ```text
//!   old cap C:   [ .... unread ... S-1 ]                    bytes 0..C
//!   new cap 2C:  [ .... unread ... S-1 | S  S+1 ...        ] bytes 0..2C
//! ```
//! So any run of bytes is still at most two pieces of memory. The byte at
//! position p lies at:
//! - before any growth: `p & (cap - 1)`;
//! - after one, for p >= S: `(p - S + cap/2) & (cap - 1)`; for p < S:
//!   `(p - S) & (cap/2 - 1)` (the byte at S - 1 is the last of the old
//!   capacity).
//!
//! S is the first position at or after `head` that the old mapping puts at
//! byte 0, and must lie inside the old free space. Until the reader passes
//! S the writer may fill only the new half (`S + cap/2`); one growth at a
//! time. The writer publishes the geometry in one word with a release store
//! before any byte at or past S: `log2(cap)` in bits 58..64, a "grown" bit
//! 57, S mod 2^57 in bits 0..57; 0 means "never set": the capacity is the
//! whole reservation. The word alone places every byte the reader has not
//! read yet, so a reader that missed a growth (two happened between its
//! reads) adopts the latest. It adopts a new word only if it grows the
//! capacity and leaves at most the old half unread before S; anything else
//! marks the ring violated.

use crate::region::Region;
use crate::CachePadded;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Bits of the switch position kept in the geometry word.
const SWITCH_BITS: u32 = 57;
const SWITCH_MASK: u64 = (1 << SWITCH_BITS) - 1;
const GROWN_BIT: u64 = 1 << SWITCH_BITS;
const LOG2_SHIFT: u32 = 58;
/// The smallest ring, bytes.
pub const MIN_RING: usize = 64;

mod geometry;
use geometry::*;
mod pages;
use pages::{LocalBuf, WriteGuard};

/// A ring's `head` and the word that excludes a write from a release of
/// the ring's pages, on one cache line.
struct HeadLine {
    head: AtomicU64,
    pages: core::sync::atomic::AtomicU32,
}

/// A ring in the process's own memory (embedded and inline mode).
struct LocalRing {
    /// The writer's line: `head`, and the word a write or a release of the
    /// pages holds (see `pages`), both written with every write.
    head: CachePadded<HeadLine>,
    tail: CachePadded<AtomicU64>,
    /// Read-mostly from here on, one line: the geometry word (written at a
    /// growth), the ends, the release position and the buffer's place.
    geometry: AtomicU64,
    /// Ends (writer, reader) still alive: probes do not count.
    ends: AtomicU64,
    /// `head` when the pages were last given back (nothing written since).
    released_at: AtomicU64,
    /// The ring's bytes, left uninitialised: a byte is read only after the
    /// writer wrote it (the head/tail protocol), so nothing needs zeroing.
    /// Zeroing cost the whole reservation (8 MiB by default) on every new
    /// connection once the allocator reused freed memory: short
    /// connections at 1 400/s instead of 13 600/s, and 2 GiB resident.
    buf: LocalBuf,
}

// SAFETY: the buffer is only reached through `Mem`, whose ring protocol
// keeps the two ends off each other's bytes; the indices are atomics.
unsafe impl Send for LocalRing {}

// SAFETY: the buffer never moves or changes length while the ring lives,
// and ports read only written bytes, with raw copies or through the kernel.
unsafe impl payload::StableMemory for LocalRing {
    fn as_ptr(&self) -> *const u8 {
        self.buf.as_ptr()
    }
    fn len(&self) -> usize {
        self.buf.len()
    }
}
// SAFETY: as above.
unsafe impl Sync for LocalRing {}

/// What keeps a ring's memory alive.
enum Keep {
    Local(Arc<LocalRing>),
    Region(Arc<Region>),
}

/// Where one ring's indices, geometry word and bytes are. The peer may
/// write anything to the words it owns (in a segment shared with another
/// process): every read of them is checked, and each end keeps its own
/// copy of what it owns.
struct Mem {
    head: NonNull<AtomicU64>,
    tail: NonNull<AtomicU64>,
    geometry: NonNull<AtomicU64>,
    base: NonNull<u8>,
    /// Bytes of memory reserved for the buffer (a power of two).
    reserved: usize,
    /// Offset of `base` in the memory `keep` holds.
    base_at: usize,
    keep: Keep,
    /// A ring in a region: the pages word its writer holds for each write
    /// ([`RingAt::pages`]), if any.
    pages: Option<NonNull<core::sync::atomic::AtomicU32>>,
    /// A ring in a region: `head` when this end last gave its pages back.
    released_at: AtomicU64,
}

// SAFETY: the pointers stay valid while `keep` holds the memory; indices are
// atomics, and the writer touches only bytes of free space and the reader
// only unread bytes, ordered by acquire/release on the indices, so the two
// ends never touch the same byte concurrently. (A peer in another process
// that breaks the protocol can only garble bytes of its own ring: every
// offset is computed inside the reservation.)
unsafe impl Send for Mem {}
// SAFETY: as above.
unsafe impl Sync for Mem {}

impl Mem {
    fn head(&self) -> &AtomicU64 {
        // SAFETY: points into memory kept alive by `self.keep`, aligned (checked at construction).
        unsafe { self.head.as_ref() }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as in head().
        unsafe { self.tail.as_ref() }
    }

    fn geometry(&self) -> &AtomicU64 {
        // SAFETY: as in head().
        unsafe { self.geometry.as_ref() }
    }

    /// Copies `src` into the ring starting at position `at`.
    ///
    /// # Safety
    /// The caller owns positions `[at, at + src.len())` (free space it may
    /// write) and `geo` is the geometry in force for them.
    unsafe fn copy_in(&self, geo: &Geometry, at: u64, src: &[u8]) {
        let base = self.base.as_ptr();
        let mut done = 0;
        for (off, len) in geo.pieces(at, src.len()) {
            debug_assert!(off + len <= self.reserved);
            // SAFETY: every piece lies inside the reservation (offsets are
            // masked by a capacity of at most `reserved`) and is owned per
            // the contract.
            unsafe { core::ptr::copy_nonoverlapping(src.as_ptr().add(done), base.add(off), len) };
            done += len;
        }
    }

    /// Copies bytes starting at position `at` into `dst`.
    ///
    /// # Safety
    /// The caller owns positions `[at, at + dst.len())` (unread data it may
    /// read) and `geo` is the geometry in force for them.
    unsafe fn copy_out(&self, geo: &Geometry, at: u64, dst: &mut [u8]) {
        let base = self.base.as_ptr();
        let mut done = 0;
        for (off, len) in geo.pieces(at, dst.len()) {
            debug_assert!(off + len <= self.reserved);
            // SAFETY: as in copy_in, with the roles reversed.
            unsafe {
                core::ptr::copy_nonoverlapping(base.add(off), dst.as_mut_ptr().add(done), len)
            };
            done += len;
        }
    }

    fn is_orphaned(&self) -> bool {
        match &self.keep {
            Keep::Local(a) => a.ends.load(Ordering::Acquire) == 1,
            // The other end lives in another process: its departure is
            // reported by the control channel, not by the ring.
            Keep::Region(_) => false,
        }
    }

    fn local_pair(capacity: usize, reserved: usize) -> (Mem, Mem) {
        let reserved = reserved.max(capacity).max(MIN_RING).next_power_of_two();
        let cap = capacity.max(MIN_RING).next_power_of_two();
        // Not zeroed (see `LocalRing::buf`).
        let buf = LocalBuf::new(reserved);
        let word = if cap == reserved {
            0
        } else {
            Geometry::plain(cap).word()
        };
        let ring = Arc::new(LocalRing {
            head: CachePadded(HeadLine {
                head: AtomicU64::new(0),
                pages: core::sync::atomic::AtomicU32::new(pages::FREE),
            }),
            tail: CachePadded(AtomicU64::new(0)),
            geometry: AtomicU64::new(word),
            ends: AtomicU64::new(2),
            released_at: AtomicU64::new(0),
            buf,
        });
        let mk = |r: &Arc<LocalRing>| Mem {
            head: NonNull::from(&r.head.0.head),
            tail: NonNull::from(&r.tail.0),
            geometry: NonNull::from(&r.geometry),
            base: NonNull::new(r.buf.as_ptr()).expect("non-null allocation"),
            reserved,
            base_at: 0,
            keep: Keep::Local(r.clone()),
            pages: None,
            released_at: AtomicU64::new(0),
        };
        (mk(&ring), mk(&ring))
    }

    fn in_region(region: &Arc<Region>, at: RingAt) -> Option<Mem> {
        if !at.reserved.is_power_of_two() || at.reserved < MIN_RING {
            return None;
        }
        Some(Mem {
            head: region.at::<AtomicU64>(at.head)?,
            tail: region.at::<AtomicU64>(at.tail)?,
            geometry: region.at::<AtomicU64>(at.geometry)?,
            base: region.span(at.buf, at.reserved, 64)?,
            reserved: at.reserved,
            base_at: at.buf,
            keep: Keep::Region(region.clone()),
            pages: match at.pages {
                Some(off) => Some(region.at(off)?),
                None => None,
            },
            released_at: AtomicU64::new(0),
        })
    }

    /// The indices and geometry an end finds when it attaches; `ok` is
    /// false when they make no sense together (a ring written by someone
    /// who broke the protocol).
    fn found(&self) -> Found {
        let head = self.head().load(Ordering::Acquire);
        let tail = self.tail().load(Ordering::Acquire);
        let (geo, word, valid) = self.read_geometry(tail);
        Found {
            head,
            tail,
            geo,
            word,
            ok: valid && geo.consistent(head, tail),
        }
    }

    /// The geometry found in the shared word, taking the switch near
    /// `anchor`; a word that makes no sense gives the whole reservation
    /// (and `false`).
    fn read_geometry(&self, anchor: u64) -> (Geometry, u64, bool) {
        let word = self.geometry().load(Ordering::Acquire);
        match Geometry::from_word(word, self.reserved, anchor) {
            Some(g) => (g, word, true),
            None => (Geometry::plain(self.reserved), word, false),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Keep::Local(a) = &self.mem.keep {
            a.ends.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Keep::Local(a) = &self.mem.keep {
            a.ends.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Where a ring lies inside a [`Region`]: byte offsets of its two indices
/// and of its geometry word (each on its own cache line or at least its
/// own 8 bytes) and of its buffer of `reserved` bytes (a power of two, at
/// least 64), of which the geometry word says how many are in use (0: all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingAt {
    /// Offset of the producer index (u64), bytes.
    pub head: usize,
    /// Offset of the consumer index (u64), bytes.
    pub tail: usize,
    /// Offset of the geometry word (u64), bytes.
    pub geometry: usize,
    /// Offset of the buffer, bytes.
    pub buf: usize,
    /// Bytes reserved for the buffer (a power of two, at least 64).
    pub reserved: usize,
    /// Offset of the pages word (u32) of a ring whose reader gives the
    /// pages of an idle ring back while its writer is in another process
    /// (the writer holds the word for each write, see `pages`); None for a
    /// ring whose pages only its writer gives back.
    pub pages: Option<usize>,
}

/// The geometry word of a fresh ring of `cap` bytes in use out of
/// `reserved` (both powers of two): what whoever sets up a ring in a
/// shared region stores in its geometry word, with its indices at 0.
pub fn initial_geometry(cap: usize, reserved: usize) -> u64 {
    if cap >= reserved {
        0
    } else {
        Geometry::plain(cap.max(MIN_RING).next_power_of_two()).word()
    }
}

/// The producing end of a byte ring. Not Clone: there is one writer.
pub struct Writer {
    mem: Mem,
    /// Our copy of `head` (we own it; the shared copy is only published).
    head: AtomicU64,
    /// The last valid `tail` the reader published.
    tail_seen: AtomicU64,
    /// Our copy of the geometry (we own it).
    geo: Geometry,
    /// The capacity asked for by [`Writer::grow`], bytes.
    want: usize,
    violated: AtomicBool,
}

/// The consuming end of a byte ring. Not Clone: there is one reader.
pub struct Reader {
    mem: Mem,
    /// Our copy of `tail`.
    tail: AtomicU64,
    /// The last valid `head` the writer published.
    head_seen: AtomicU64,
    /// The last valid geometry the writer published.
    geo: GeoCell,
    violated: AtomicBool,
}

/// A ring of `capacity` bytes (rounded up to a power of two, at least 64)
/// in the process's own memory. It cannot grow.
/// The memory is zeroed lazily by the OS, so large rings cost nothing until used.
pub fn ring(capacity: usize) -> (Writer, Reader) {
    growable_ring(capacity, capacity)
}

/// A ring of `capacity` bytes that its writer may grow up to `max` bytes
/// (both rounded up to powers of two, at least 64) in the process's own
/// memory. `max` bytes are reserved; pages beyond the capacity in use are
/// not touched.
pub fn growable_ring(capacity: usize, max: usize) -> (Writer, Reader) {
    let (w, r) = Mem::local_pair(capacity, max);
    (Writer::from_mem(w), Reader::from_mem(r))
}

/// What [`Mem::found`] read: head and tail indices, the geometry and
/// the shared word it came from, and whether they are consistent.
struct Found {
    head: u64,
    tail: u64,
    geo: Geometry,
    word: u64,
    ok: bool,
}

impl Writer {
    fn from_mem(mem: Mem) -> Writer {
        let Found {
            head,
            tail,
            geo,
            ok,
            ..
        } = mem.found();
        Writer {
            head: AtomicU64::new(head),
            tail_seen: AtomicU64::new(if ok { tail } else { head }),
            want: geo.cap,
            geo,
            violated: AtomicBool::new(!ok),
            mem,
        }
    }

    /// The writing end of the ring at `at` inside `region`; None when `at`
    /// does not lie inside it. Starts from the indices and geometry found
    /// there.
    pub fn in_region(region: &Arc<Region>, at: RingAt) -> Option<Writer> {
        Mem::in_region(region, at).map(Writer::from_mem)
    }

    /// Bytes in use (the capacity now), a power of two.
    pub fn capacity(&self) -> usize {
        self.geo.cap
    }

    /// Bytes reserved: the most the ring can grow to.
    pub fn reserved(&self) -> usize {
        self.mem.reserved
    }

    /// The reader's position, checked: an index out of range (behind the
    /// last one seen, or past `head`) marks the ring violated and counts as
    /// no progress.
    fn tail(&self) -> u64 {
        let head = self.head.load(Ordering::Relaxed);
        let seen = self.tail_seen.load(Ordering::Relaxed);
        let tail = self.mem.tail().load(Ordering::Acquire);
        if tail.wrapping_sub(seen) <= head.wrapping_sub(seen) {
            self.tail_seen.store(tail, Ordering::Relaxed);
            tail
        } else {
            self.violated.store(true, Ordering::Relaxed);
            seen
        }
    }

    /// Bytes that can be written now.
    pub fn free(&self) -> usize {
        let head = self.head.load(Ordering::Relaxed);
        let limit = self.geo.limit(self.tail());
        limit.wrapping_sub(head) as usize
    }

    /// Bytes written and not yet consumed by the reader.
    pub fn len(&self) -> usize {
        self.head.load(Ordering::Relaxed).wrapping_sub(self.tail()) as usize
    }

    /// True when the reader has consumed everything.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Asks for a capacity of `cap` bytes (rounded up to a power of two, at
    /// most the reservation). The ring doubles at once if it can, else at a
    /// later write: a growth waits for the reader to finish with the bytes
    /// before the previous one, and for the write position to come within
    /// the free space of the next switch (at most one capacity of writing).
    /// Never shrinks. Returns the capacity in use now.
    pub fn grow(&mut self, cap: usize) -> usize {
        let cap = cap.min(self.mem.reserved).max(MIN_RING).next_power_of_two();
        if cap > self.want {
            self.want = cap;
        }
        self.try_grow();
        self.geo.cap
    }

    /// The capacity asked for so far, bytes (at least the one in use).
    pub fn wanted(&self) -> usize {
        self.want.max(self.geo.cap)
    }

    /// Doubles the capacity towards `want` if the protocol allows it now.
    fn try_grow(&mut self) {
        while self.want > self.geo.cap {
            let head = self.head.load(Ordering::Relaxed);
            let Some(next) = self.geo.grow(head, self.tail(), self.mem.reserved) else {
                return;
            };
            self.geo = next;
            // Before any byte at or past the switch is published.
            self.mem.geometry().store(next.word(), Ordering::Release);
        }
    }

    /// Appends as much of `data` as fits; returns the bytes written.
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.want > self.geo.cap {
            self.try_grow();
        }
        let n = data.len().min(self.free());
        if n == 0 {
            return 0;
        }
        let head = self.head.load(Ordering::Relaxed);
        // No release of the pages while we copy in and publish.
        let _pages = self.mem.pages_word().map(WriteGuard::take);
        // SAFETY: [head, head + n) is free space (n <= free), owned by the
        // single writer until the release store below publishes it, and
        // `geo` is our own geometry.
        unsafe { self.mem.copy_in(&self.geo, head, &data[..n]) };
        let head = head.wrapping_add(n as u64);
        self.head.store(head, Ordering::Relaxed);
        self.mem.head().store(head, Ordering::Release);
        n
    }

    /// Appends all of `data` or nothing; returns whether it was written.
    pub fn write_all(&mut self, data: &[u8]) -> bool {
        if data.len() > self.free() {
            return false;
        }
        self.write(data) == data.len()
    }

    /// True when the reader end has been dropped (rings in this process only).
    pub fn is_orphaned(&self) -> bool {
        self.mem.is_orphaned()
    }

    /// True once the reader published an impossible index.
    pub fn violated(&self) -> bool {
        self.violated.load(Ordering::Relaxed)
    }

    /// A read-only view of the fill level, for readiness checks.
    pub fn probe(&self) -> Probe {
        Probe::of(&self.mem)
    }

    /// Total bytes written, since the ring (or, in a segment, its slot)
    /// was set up; wraps at 2^64. The writer's own copy of `head`.
    pub fn position(&self) -> u64 {
        self.head.load(Ordering::Relaxed)
    }
}

impl Reader {
    fn from_mem(mem: Mem) -> Reader {
        let Found {
            head,
            tail,
            geo,
            word,
            ok,
        } = mem.found();
        Reader {
            tail: AtomicU64::new(tail),
            head_seen: AtomicU64::new(if ok { head } else { tail }),
            geo: GeoCell::new(geo, word),
            violated: AtomicBool::new(!ok),
            mem,
        }
    }

    /// The reading end of the ring at `at` inside `region`; None when `at`
    /// does not lie inside it. Starts from the indices and geometry found
    /// there.
    pub fn in_region(region: &Arc<Region>, at: RingAt) -> Option<Reader> {
        Mem::in_region(region, at).map(Reader::from_mem)
    }

    /// Bytes in use (the capacity now, as the writer last published it).
    pub fn capacity(&self) -> usize {
        self.geo.get().cap
    }

    /// Bytes reserved: the most the ring can grow to.
    pub fn reserved(&self) -> usize {
        self.mem.reserved
    }

    /// The geometry in force: a new one the writer published is adopted if
    /// it is the growth the protocol allows now, else the ring is marked
    /// violated and the old one kept.
    fn geometry(&self, tail: u64) -> Geometry {
        let cur = self.geo.get();
        let word = self.mem.geometry().load(Ordering::Acquire);
        if word == self.geo.word.load(Ordering::Relaxed) {
            return cur;
        }
        match Geometry::from_word(word, self.mem.reserved, tail) {
            Some(next) if cur.allows(&next, tail) => {
                self.geo.set(next, word);
                next
            }
            _ => {
                self.violated.store(true, Ordering::Relaxed);
                cur
            }
        }
    }

    /// Unread bytes and the geometry they lie in. A writer index out of
    /// range (behind the last one seen, or beyond what the ring can hold)
    /// marks the ring violated and counts as no new data.
    fn unread(&self) -> (usize, Geometry) {
        let tail = self.tail.load(Ordering::Relaxed);
        let seen = self.head_seen.load(Ordering::Relaxed);
        let head = self.mem.head().load(Ordering::Acquire);
        let geo = self.geometry(tail);
        let limit = geo.limit(tail);
        let head = if head.wrapping_sub(seen) <= limit.wrapping_sub(seen) {
            self.head_seen.store(head, Ordering::Relaxed);
            head
        } else {
            self.violated.store(true, Ordering::Relaxed);
            seen
        };
        (head.wrapping_sub(tail) as usize, geo)
    }

    /// Unread bytes. A writer index out of range (behind the last one seen,
    /// or beyond what the ring can hold) marks the ring violated and counts
    /// as no new data.
    pub fn len(&self) -> usize {
        self.unread().0
    }

    /// True when there is nothing to read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies up to `dst.len()` unread bytes starting `offset` bytes past the
    /// read position, without consuming them; returns the bytes copied.
    pub fn peek_at(&self, offset: usize, dst: &mut [u8]) -> usize {
        let (avail, geo) = self.unread();
        if offset >= avail {
            return 0;
        }
        let n = dst.len().min(avail - offset);
        let tail = self.tail.load(Ordering::Relaxed);
        // SAFETY: [tail + offset, tail + offset + n) lies inside the unread
        // bytes [tail, head) published by the writer's release store, which
        // the writer does not touch until we release them, in `geo`.
        unsafe {
            self.mem
                .copy_out(&geo, tail.wrapping_add(offset as u64), &mut dst[..n])
        };
        n
    }

    /// The unread bytes `offset..offset + len` past the read position where
    /// they lie, for a port to send without copying them first
    /// (`nic::TxQueue::transmit_gather`); None unless all of them are
    /// unread. They stay unchanged until this end consumes them (a writer
    /// in another process that breaks the ring protocol garbles only its
    /// own bytes).
    pub fn payload(&self, offset: usize, len: usize) -> Option<payload::TxPayload> {
        let (avail, geo) = self.unread();
        if offset > avail || len > avail - offset {
            return None;
        }
        let tail = self.tail.load(Ordering::Relaxed);
        let [(a, an), (b, bn)] = geo.pieces(tail.wrapping_add(offset as u64), len);
        let at = self.mem.base_at;
        let memory: Arc<dyn payload::StableMemory> = match &self.mem.keep {
            Keep::Local(r) => r.clone(),
            Keep::Region(r) => r.clone(),
        };
        payload::TxPayload::new(memory, [(at + a, an), (at + b, bn)])
    }

    /// True when the writer end has been dropped (rings in this process only).
    pub fn is_orphaned(&self) -> bool {
        self.mem.is_orphaned()
    }

    /// True once the writer published an impossible index or geometry.
    pub fn violated(&self) -> bool {
        self.violated.load(Ordering::Relaxed)
    }

    /// Releases `n` bytes (at most `len()`) back to the writer.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len());
        let tail = self.tail.load(Ordering::Relaxed).wrapping_add(n as u64);
        self.tail.store(tail, Ordering::Relaxed);
        self.mem.tail().store(tail, Ordering::Release);
    }

    /// Copies and consumes up to `dst.len()` bytes; returns the bytes read.
    pub fn read(&mut self, dst: &mut [u8]) -> usize {
        let n = self.peek_at(0, dst);
        self.consume(n);
        n
    }

    /// A read-only view of the fill level, for readiness checks.
    pub fn probe(&self) -> Probe {
        Probe::of(&self.mem)
    }

    /// Total bytes consumed, since the ring (or, in a segment, its slot)
    /// was set up; wraps at 2^64. The reader's own copy of `tail`.
    pub fn position(&self) -> u64 {
        self.tail.load(Ordering::Relaxed)
    }
}

/// A read-only view of a ring's fill level (for readiness polling): it can
/// be kept apart from the ring's ends and reads only the two indices and
/// the geometry word.
pub struct Probe {
    head: NonNull<AtomicU64>,
    tail: NonNull<AtomicU64>,
    geometry: NonNull<AtomicU64>,
    reserved: usize,
    _keep: Keep,
}

// SAFETY: reads atomics in memory that `_keep` holds alive.
unsafe impl Send for Probe {}
// SAFETY: as above.
unsafe impl Sync for Probe {}

impl Probe {
    fn of(m: &Mem) -> Probe {
        Probe {
            head: m.head,
            tail: m.tail,
            geometry: m.geometry,
            reserved: m.reserved,
            _keep: match &m.keep {
                Keep::Local(a) => Keep::Local(a.clone()),
                Keep::Region(r) => Keep::Region(r.clone()),
            },
        }
    }

    /// (head, tail, the most the ring holds at that tail).
    fn indices(&self) -> (u64, u64, u64) {
        // SAFETY: all three point into memory `_keep` holds alive, aligned.
        let (head, tail, word) = unsafe {
            (
                self.head.as_ref().load(Ordering::Acquire),
                self.tail.as_ref().load(Ordering::Acquire),
                self.geometry.as_ref().load(Ordering::Acquire),
            )
        };
        let geo = Geometry::from_word(word, self.reserved, tail)
            .unwrap_or(Geometry::plain(self.reserved));
        (head, tail, geo.limit(tail).wrapping_sub(tail))
    }

    /// Unread bytes, clamped to what the ring can hold.
    pub fn len(&self) -> usize {
        let (head, tail, room) = self.indices();
        head.wrapping_sub(tail).min(room) as usize
    }

    /// True when there is nothing to read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free space in bytes.
    pub fn free(&self) -> usize {
        let (head, tail, room) = self.indices();
        room.saturating_sub(head.wrapping_sub(tail)) as usize
    }
}

#[cfg(test)]
mod tests;
