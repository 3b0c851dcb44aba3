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

use crate::CachePadded;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

struct Inner {
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
    buf: Box<[UnsafeCell<u8>]>,
}

// SAFETY: the writer touches only bytes in [head, tail + cap) and the reader
// only bytes in [tail, head); the acquire/release pairs on head and tail order
// those accesses, so the two ends never touch the same byte concurrently.
unsafe impl Sync for Inner {}
// SAFETY: as above.
unsafe impl Send for Inner {}

impl Inner {
    fn cap(&self) -> usize {
        self.buf.len()
    }

    fn base(&self) -> *mut u8 {
        // UnsafeCell<u8> has the layout of u8 and permits writes through a
        // shared reference.
        UnsafeCell::raw_get(self.buf.as_ptr())
    }

    /// Copies `src` into the ring starting at absolute index `at`.
    ///
    /// # Safety
    /// The caller owns bytes `[at, at + src.len())` (they are free space it
    /// may write), and `src.len() <= cap`.
    unsafe fn copy_in(&self, at: u64, src: &[u8]) {
        let cap = self.cap();
        let start = (at as usize) & (cap - 1);
        let first = src.len().min(cap - start);
        // SAFETY: start + first <= cap and the rest wraps to index 0 with
        // len - first <= start bytes; the range is owned per the contract.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.base().add(start), first);
            core::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.base(), src.len() - first);
        }
    }

    /// Copies bytes starting at absolute index `at` into `dst`.
    ///
    /// # Safety
    /// The caller owns bytes `[at, at + dst.len())` (they are unread data it
    /// may read), and `dst.len() <= cap`.
    unsafe fn copy_out(&self, at: u64, dst: &mut [u8]) {
        let cap = self.cap();
        let start = (at as usize) & (cap - 1);
        let first = dst.len().min(cap - start);
        // SAFETY: as in copy_in, with the roles reversed.
        unsafe {
            core::ptr::copy_nonoverlapping(self.base().add(start), dst.as_mut_ptr(), first);
            core::ptr::copy_nonoverlapping(
                self.base(),
                dst.as_mut_ptr().add(first),
                dst.len() - first,
            );
        }
    }
}

/// The producing end of a byte ring. Not Clone: there is one writer.
pub struct Writer(Arc<Inner>);
/// The consuming end of a byte ring. Not Clone: there is one reader.
pub struct Reader(Arc<Inner>);

/// A ring of `capacity` bytes (rounded up to a power of two, at least 64).
/// The memory is zeroed lazily by the OS, so large rings cost nothing until used.
pub fn ring(capacity: usize) -> (Writer, Reader) {
    let cap = capacity.max(64).next_power_of_two();
    let bytes: Box<[u8]> = vec![0u8; cap].into_boxed_slice();
    // SAFETY: UnsafeCell<u8> is repr(transparent) over u8, so the slice has
    // the same layout; ownership moves from one Box to the other.
    let buf = unsafe { Box::from_raw(Box::into_raw(bytes) as *mut [UnsafeCell<u8>]) };
    let inner = Arc::new(Inner {
        head: CachePadded(AtomicU64::new(0)),
        tail: CachePadded(AtomicU64::new(0)),
        buf,
    });
    (Writer(inner.clone()), Reader(inner))
}

impl Writer {
    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.0.cap()
    }

    /// Bytes that can be written now.
    pub fn free(&self) -> usize {
        let head = self.0.head.load(Ordering::Relaxed);
        let tail = self.0.tail.load(Ordering::Acquire);
        self.0.cap() - (head - tail) as usize
    }

    /// Bytes written and not yet consumed by the reader.
    pub fn len(&self) -> usize {
        self.0.cap() - self.free()
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
        let head = self.0.head.load(Ordering::Relaxed);
        // SAFETY: [head, head + n) is free space (n <= free), owned by the
        // single writer until the release store below publishes it.
        unsafe { self.0.copy_in(head, &data[..n]) };
        self.0.head.store(head + n as u64, Ordering::Release);
        n
    }

    /// Appends all of `data` or nothing; returns whether it was written.
    pub fn write_all(&mut self, data: &[u8]) -> bool {
        if data.len() > self.free() {
            return false;
        }
        self.write(data) == data.len()
    }

    /// True when the reader end has been dropped.
    pub fn is_orphaned(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}

impl Reader {
    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.0.cap()
    }

    /// Unread bytes.
    pub fn len(&self) -> usize {
        let tail = self.0.tail.load(Ordering::Relaxed);
        let head = self.0.head.load(Ordering::Acquire);
        (head - tail) as usize
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
        let tail = self.0.tail.load(Ordering::Relaxed);
        // SAFETY: [tail + offset, tail + offset + n) lies inside the unread
        // bytes [tail, head) published by the writer's release store, which
        // the writer does not touch until we release them.
        unsafe { self.0.copy_out(tail + offset as u64, &mut dst[..n]) };
        n
    }

    /// True when the writer end has been dropped.
    pub fn is_orphaned(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }

    /// Releases `n` bytes (at most `len()`) back to the writer.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len());
        let tail = self.0.tail.load(Ordering::Relaxed);
        self.0.tail.store(tail + n as u64, Ordering::Release);
    }

    /// Copies and consumes up to `dst.len()` bytes; returns the bytes read.
    pub fn read(&mut self, dst: &mut [u8]) -> usize {
        let n = self.peek_at(0, dst);
        self.consume(n);
        n
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
