//! A single-producer single-consumer byte ring: the per-connection RX and TX
//! buffers.
//!
//! ```text
//!   tail (Reader) ──► [ unread bytes ] ◄── head (Writer)
//! ```
//! `head` and `tail` count bytes since creation (u64, never wrap in practice);
//! the position in the buffer is `index & (capacity - 1)`. The writer owns
//! `head` and the free space; the reader owns `tail` and the unread bytes.
//! Bytes are published with a release store of `head` and freed with a
//! release store of `tail`.

use crate::region::Region;
use crate::CachePadded;
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A ring in the process's own memory (embedded and inline mode).
struct LocalRing {
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
    /// Ends (writer, reader) still alive: probes do not count.
    ends: AtomicU64,
    buf: Box<[UnsafeCell<u8>]>,
}

// SAFETY: the buffer is only reached through `Mem`, whose ring protocol
// keeps the two ends off each other's bytes; the indices are atomics.
unsafe impl Send for LocalRing {}

// SAFETY: the boxed buffer never moves or changes length while the ring
// lives; `UnsafeCell<u8>` has the layout of `u8`, and ports read the bytes
// only with raw copies or through the kernel.
unsafe impl nic::StableMemory for LocalRing {
    fn as_ptr(&self) -> *const u8 {
        UnsafeCell::raw_get(self.buf.as_ptr()) as *const u8
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

/// Where one ring's indices and bytes are. The peer may write anything to
/// the index it owns (in a segment shared with another process): every
/// read of it is checked, and each end keeps its own copy of the index it owns.
struct Mem {
    head: NonNull<AtomicU64>,
    tail: NonNull<AtomicU64>,
    base: NonNull<u8>,
    cap: usize,
    /// Offset of `base` in the memory `keep` holds.
    base_at: usize,
    keep: Keep,
}

// SAFETY: the pointers stay valid while `keep` holds the memory; indices are
// atomics, and the writer touches only bytes in [head, tail + cap) and the
// reader only bytes in [tail, head), ordered by acquire/release on the
// indices, so the two ends never touch the same byte concurrently. (A peer
// in another process that breaks the protocol can only garble bytes of its
// own ring: positions are always masked into the buffer.)
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

    /// Copies `src` into the ring starting at absolute index `at`.
    ///
    /// # Safety
    /// The caller owns bytes `[at, at + src.len())` (they are free space it
    /// may write), and `src.len() <= cap`.
    unsafe fn copy_in(&self, at: u64, src: &[u8]) {
        let cap = self.cap;
        let start = (at as usize) & (cap - 1);
        let first = src.len().min(cap - start);
        let base = self.base.as_ptr();
        // SAFETY: start + first <= cap and the rest wraps to index 0 with
        // len - first <= start bytes; the range is owned per the contract.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), base.add(start), first);
            core::ptr::copy_nonoverlapping(src.as_ptr().add(first), base, src.len() - first);
        }
    }

    /// Copies bytes starting at absolute index `at` into `dst`.
    ///
    /// # Safety
    /// The caller owns bytes `[at, at + dst.len())` (they are unread data it
    /// may read), and `dst.len() <= cap`.
    unsafe fn copy_out(&self, at: u64, dst: &mut [u8]) {
        let cap = self.cap;
        let start = (at as usize) & (cap - 1);
        let first = dst.len().min(cap - start);
        let base = self.base.as_ptr();
        // SAFETY: as in copy_in, with the roles reversed.
        unsafe {
            core::ptr::copy_nonoverlapping(base.add(start), dst.as_mut_ptr(), first);
            core::ptr::copy_nonoverlapping(base, dst.as_mut_ptr().add(first), dst.len() - first);
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

    fn local_pair(capacity: usize) -> (Mem, Mem) {
        let cap = capacity.max(64).next_power_of_two();
        let bytes: Box<[u8]> = vec![0u8; cap].into_boxed_slice();
        // SAFETY: UnsafeCell<u8> is repr(transparent) over u8, so the slice has
        // the same layout; ownership moves from one Box to the other.
        let buf = unsafe { Box::from_raw(Box::into_raw(bytes) as *mut [UnsafeCell<u8>]) };
        let ring = Arc::new(LocalRing {
            head: CachePadded(AtomicU64::new(0)),
            tail: CachePadded(AtomicU64::new(0)),
            ends: AtomicU64::new(2),
            buf,
        });
        let mk = |r: &Arc<LocalRing>| Mem {
            head: NonNull::from(&r.head.0),
            tail: NonNull::from(&r.tail.0),
            // UnsafeCell<u8> has the layout of u8 and permits writes through
            // a shared reference.
            base: NonNull::new(UnsafeCell::raw_get(r.buf.as_ptr())).expect("non-null box"),
            cap,
            base_at: 0,
            keep: Keep::Local(r.clone()),
        };
        (mk(&ring), mk(&ring))
    }

    fn in_region(region: &Arc<Region>, at: RingAt) -> Option<Mem> {
        if !at.cap.is_power_of_two() || at.cap < 64 {
            return None;
        }
        Some(Mem {
            head: region.at::<AtomicU64>(at.head)?,
            tail: region.at::<AtomicU64>(at.tail)?,
            base: region.span(at.buf, at.cap, 64)?,
            cap: at.cap,
            base_at: at.buf,
            keep: Keep::Region(region.clone()),
        })
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
/// (each on its own cache line) and of its buffer of `cap` bytes (a power of
/// two, at least 64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingAt {
    pub head: usize,
    pub tail: usize,
    pub buf: usize,
    pub cap: usize,
}

/// The producing end of a byte ring. Not Clone: there is one writer.
pub struct Writer {
    mem: Mem,
    /// Our copy of `head` (we own it; the shared copy is only published).
    head: AtomicU64,
    /// The last valid `tail` the reader published.
    tail_seen: AtomicU64,
    violated: AtomicBool,
}

/// The consuming end of a byte ring. Not Clone: there is one reader.
pub struct Reader {
    mem: Mem,
    /// Our copy of `tail`.
    tail: AtomicU64,
    /// The last valid `head` the writer published.
    head_seen: AtomicU64,
    violated: AtomicBool,
}

/// A ring of `capacity` bytes (rounded up to a power of two, at least 64)
/// in the process's own memory.
/// The memory is zeroed lazily by the OS, so large rings cost nothing until used.
pub fn ring(capacity: usize) -> (Writer, Reader) {
    let (w, r) = Mem::local_pair(capacity);
    (Writer::from_mem(w), Reader::from_mem(r))
}

impl Writer {
    fn from_mem(mem: Mem) -> Writer {
        let head = mem.head().load(Ordering::Acquire);
        let tail = mem.tail().load(Ordering::Acquire);
        let ok = head.wrapping_sub(tail) <= mem.cap as u64;
        Writer {
            head: AtomicU64::new(head),
            tail_seen: AtomicU64::new(if ok { tail } else { head }),
            violated: AtomicBool::new(!ok),
            mem,
        }
    }

    /// The writing end of the ring at `at` inside `region`; None when `at`
    /// does not lie inside it. Starts from the indices found there.
    pub fn in_region(region: &Arc<Region>, at: RingAt) -> Option<Writer> {
        Mem::in_region(region, at).map(Writer::from_mem)
    }

    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.mem.cap
    }

    /// Bytes that can be written now. A reader index out of range (behind
    /// the last one seen, or past `head`) marks the ring violated and counts
    /// as no progress.
    pub fn free(&self) -> usize {
        let head = self.head.load(Ordering::Relaxed);
        let seen = self.tail_seen.load(Ordering::Relaxed);
        let tail = self.mem.tail().load(Ordering::Acquire);
        let tail = if tail.wrapping_sub(seen) <= head.wrapping_sub(seen) {
            self.tail_seen.store(tail, Ordering::Relaxed);
            tail
        } else {
            self.violated.store(true, Ordering::Relaxed);
            seen
        };
        self.mem.cap - head.wrapping_sub(tail) as usize
    }

    /// Bytes written and not yet consumed by the reader.
    pub fn len(&self) -> usize {
        self.mem.cap - self.free()
    }

    /// True when the reader has consumed everything.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends as much of `data` as fits; returns the bytes written.
    pub fn write(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.free());
        if n == 0 {
            return 0;
        }
        let head = self.head.load(Ordering::Relaxed);
        // SAFETY: [head, head + n) is free space (n <= free), owned by the
        // single writer until the release store below publishes it.
        unsafe { self.mem.copy_in(head, &data[..n]) };
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
        let head = mem.head().load(Ordering::Acquire);
        let tail = mem.tail().load(Ordering::Acquire);
        let ok = head.wrapping_sub(tail) <= mem.cap as u64;
        Reader {
            tail: AtomicU64::new(tail),
            head_seen: AtomicU64::new(if ok { head } else { tail }),
            violated: AtomicBool::new(!ok),
            mem,
        }
    }

    /// The reading end of the ring at `at` inside `region`; None when `at`
    /// does not lie inside it. Starts from the indices found there.
    pub fn in_region(region: &Arc<Region>, at: RingAt) -> Option<Reader> {
        Mem::in_region(region, at).map(Reader::from_mem)
    }

    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.mem.cap
    }

    /// Unread bytes. A writer index out of range (behind the last one seen,
    /// or more than a ring ahead of `tail`) marks the ring violated and
    /// counts as no new data.
    pub fn len(&self) -> usize {
        let tail = self.tail.load(Ordering::Relaxed);
        let seen = self.head_seen.load(Ordering::Relaxed);
        let head = self.mem.head().load(Ordering::Acquire);
        let head = if head.wrapping_sub(seen) <= (tail + self.mem.cap as u64).wrapping_sub(seen) {
            self.head_seen.store(head, Ordering::Relaxed);
            head
        } else {
            self.violated.store(true, Ordering::Relaxed);
            seen
        };
        head.wrapping_sub(tail) as usize
    }

    /// True when there is nothing to read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies up to `dst.len()` unread bytes starting `offset` bytes past the
    /// read position, without consuming them; returns the bytes copied.
    pub fn peek_at(&self, offset: usize, dst: &mut [u8]) -> usize {
        let avail = self.len();
        if offset >= avail {
            return 0;
        }
        let n = dst.len().min(avail - offset);
        let tail = self.tail.load(Ordering::Relaxed);
        // SAFETY: [tail + offset, tail + offset + n) lies inside the unread
        // bytes [tail, head) published by the writer's release store, which
        // the writer does not touch until we release them; n <= cap.
        unsafe {
            self.mem
                .copy_out(tail.wrapping_add(offset as u64), &mut dst[..n])
        };
        n
    }

    /// The unread bytes `offset..offset + len` past the read position where
    /// they lie, for a port to send without copying them first
    /// ([`nic::TxQueue::transmit_gather`]); None unless all of them are
    /// unread. They stay unchanged until this end consumes them (a writer
    /// in another process that breaks the ring protocol garbles only its
    /// own bytes).
    pub fn payload(&self, offset: usize, len: usize) -> Option<nic::TxPayload> {
        let avail = self.len();
        if offset > avail || len > avail - offset {
            return None;
        }
        let cap = self.mem.cap;
        let tail = self.tail.load(Ordering::Relaxed);
        let start = (tail.wrapping_add(offset as u64) as usize) & (cap - 1);
        let first = len.min(cap - start);
        let at = self.mem.base_at;
        let memory: Arc<dyn nic::StableMemory> = match &self.mem.keep {
            Keep::Local(r) => r.clone(),
            Keep::Region(r) => r.clone(),
        };
        nic::TxPayload::new(memory, [(at + start, first), (at, len - first)])
    }

    /// True when the writer end has been dropped (rings in this process only).
    pub fn is_orphaned(&self) -> bool {
        self.mem.is_orphaned()
    }

    /// True once the writer published an impossible index.
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
/// be kept apart from the ring's ends and reads only the two indices.
pub struct Probe {
    head: NonNull<AtomicU64>,
    tail: NonNull<AtomicU64>,
    cap: usize,
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
            cap: m.cap,
            _keep: match &m.keep {
                Keep::Local(a) => Keep::Local(a.clone()),
                Keep::Region(r) => Keep::Region(r.clone()),
            },
        }
    }

    /// Unread bytes, clamped to the ring size.
    pub fn len(&self) -> usize {
        // SAFETY: both point into memory `_keep` holds alive, aligned.
        let (head, tail) = unsafe {
            (
                self.head.as_ref().load(Ordering::Acquire),
                self.tail.as_ref().load(Ordering::Acquire),
            )
        };
        (head.wrapping_sub(tail)).min(self.cap as u64) as usize
    }

    /// True when there is nothing to read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free space in bytes.
    pub fn free(&self) -> usize {
        self.cap - self.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_write_reads_back_in_order() {
        let (mut w, mut r) = ring(64);
        let mut out = [0u8; 64];
        assert_eq!(w.write(&[1; 50]), 50);
        assert_eq!(r.read(&mut out[..40]), 40);
        let data: Vec<u8> = (0..54).collect();
        assert_eq!(w.write(&data), 54);
        assert_eq!(w.free(), 0);
        assert_eq!(w.write(&[9]), 0);
        assert_eq!(r.read(&mut out[..10]), 10);
        assert_eq!(r.read(&mut out), 54);
        assert_eq!(&out[..54], &data[..]);
    }

    #[test]
    fn peek_at_offset_past_len_copies_nothing() {
        let (mut w, mut r) = ring(64);
        w.write(b"hello");
        let mut b = [0u8; 8];
        assert_eq!(r.peek_at(5, &mut b), 0);
        assert_eq!(r.peek_at(2, &mut b), 3);
        assert_eq!(&b[..3], b"llo");
        r.consume(100);
        assert!(r.is_empty());
    }

    /// The bytes of a lent payload, and the payload's memory still readable
    /// after both ends of its ring are gone.
    fn lent(r: &Reader, offset: usize, len: usize) -> Option<Vec<u8>> {
        let p = r.payload(offset, len)?;
        let mut v = vec![0u8; p.len()];
        assert_eq!(p.copy_to(&mut v), len);
        Some(v)
    }

    #[test]
    fn a_lent_payload_is_the_bytes_peek_at_copies_across_the_wrap() {
        let region = Arc::new(Region::anon(8192).unwrap());
        let at = RingAt {
            head: 0,
            tail: 64,
            buf: 4096,
            cap: 256,
        };
        let mut rings: Vec<(Writer, Reader)> = vec![ring(256)];
        rings.push((
            Writer::in_region(&region, at).unwrap(),
            Reader::in_region(&region, at).unwrap(),
        ));
        for (w, r) in &mut rings {
            assert_eq!(w.write(&[1; 200]), 200);
            r.consume(150);
            let data: Vec<u8> = (0..180).collect();
            assert_eq!(w.write(&data), 180);
            // Unread: 50 ones, then 0..180, wrapping at ring byte 256.
            let mut want = vec![0u8; 130];
            assert_eq!(r.peek_at(40, &mut want), 130);
            assert_eq!(lent(r, 40, 130), Some(want));
            assert_eq!(lent(r, 0, 230).map(|v| v[..50] == [1; 50]), Some(true));
            assert_eq!(lent(r, 230, 0), Some(vec![]));
            assert!(r.payload(200, 31).is_none(), "past the unread bytes");
            assert!(r.payload(231, 0).is_none());
        }
        // The payload keeps a local ring's memory alive.
        let (mut w, r) = ring(64);
        w.write(b"kept");
        let p = r.payload(1, 3).unwrap();
        drop((w, r));
        let mut v = [0u8; 3];
        p.copy_to(&mut v);
        assert_eq!(&v, b"ept");
    }

    #[test]
    fn impossible_peer_indices_are_flagged_and_ignored() {
        let region = Arc::new(Region::anon(8192).unwrap());
        let at = RingAt {
            head: 0,
            tail: 64,
            buf: 4096,
            cap: 4096,
        };
        let mut w = Writer::in_region(&region, at).unwrap();
        let r = Reader::in_region(&region, at).unwrap();
        assert_eq!(w.write(&[7; 100]), 100);
        assert_eq!(r.len(), 100);
        // A writer (in another process) jumps head past a whole ring.
        let head = region.at::<AtomicU64>(0).unwrap();
        // SAFETY: inside the live region, aligned.
        unsafe { head.as_ref() }.store(100 + 5000, Ordering::Release);
        assert_eq!(r.len(), 100);
        assert!(r.violated());
        // Moves it backwards: still flagged, still the last valid value.
        // SAFETY: as above.
        unsafe { head.as_ref() }.store(10, Ordering::Release);
        assert_eq!(r.len(), 100);
        // A reader moves tail past head: the writer sees no progress.
        let tail = region.at::<AtomicU64>(64).unwrap();
        // SAFETY: as above.
        unsafe { tail.as_ref() }.store(1000, Ordering::Release);
        assert_eq!(w.free(), 4096 - 100);
        assert!(w.violated());
        let mut b = [0u8; 8];
        assert_eq!(r.peek_at(0, &mut b), 8);
        assert!(Writer::in_region(&region, RingAt { buf: 4097, ..at }).is_none());
        assert!(Writer::in_region(&region, RingAt { cap: 8192, ..at }).is_none());
    }

    #[test]
    fn two_threads_stream_is_byte_exact() {
        let (mut w, mut r) = ring(4096);
        let total = 4 << 20;
        let t = std::thread::spawn(move || {
            let mut sent = 0usize;
            let mut chunk = [0u8; 1000];
            while sent < total {
                let n = (total - sent).min(chunk.len());
                for (i, b) in chunk[..n].iter_mut().enumerate() {
                    *b = ((sent + i) % 251) as u8;
                }
                let k = w.write(&chunk[..n]);
                sent += k;
            }
        });
        let mut got = 0usize;
        let mut buf = [0u8; 777];
        while got < total {
            let n = r.read(&mut buf);
            for (i, b) in buf[..n].iter().enumerate() {
                assert_eq!(*b, ((got + i) % 251) as u8);
            }
            got += n;
        }
        t.join().unwrap();
    }
}
