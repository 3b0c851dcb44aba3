//! The bytes of a ring in the process's own memory, and how an idle ring
//! gives its pages back.
//!
//! A buffer of at least one page is page-aligned, so that whole pages of
//! it belong to the ring alone. When the ring is empty and its connection
//! idles, an end calls [`Writer::release_pages`] or
//! [`Reader::release_pages`]: the pages the capacity in use covers are
//! handed back to the kernel (`madvise(MADV_DONTNEED)`; resident memory
//! drops at once) and come back, zero-filled, with the next write that
//! touches them. Nothing is lost: the bytes of an empty ring are never
//! read again (the head/tail protocol), and the writer cannot be copying
//! into the pages meanwhile, because a write and a release exclude each
//! other through one word ([`WRITING`] / [`RELEASING`]): the writer takes
//! it for each write (an uncontended compare-and-swap on a line of its
//! own), a release only tries it and gives up if the writer holds it.
//!
//! A ring in a shared segment (service mode) gives its pages back the same
//! way (`madvise(MADV_REMOVE)`: both processes' mappings read zeros after
//! it), from the engine's end only: the engine as reader of an application's
//! TX ring tries the ring's pages word ([`RingAt::pages`]), which the
//! application takes for each write; as the only writer of an RX ring it
//! needs no word. The engine never waits on a word the application writes.

use super::*;
use core::alloc::Layout;
use core::sync::atomic::AtomicU32;

/// Neither end holds the word.
pub(super) const FREE: u32 = 0;
/// The writer is copying into free space and publishing `head`.
pub(super) const WRITING: u32 = 1;
/// An end is giving the pages back.
pub(super) const RELEASING: u32 = 2;

/// The system's page size, bytes (a power of two).
pub(super) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = usize::try_from(p)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096);
    PAGE.store(p, Ordering::Relaxed);
    p
}

/// Buffers up to this size (a page or more) come from [`POOL`]: the heap
/// would lay a page-aligned buffer between fragments that other
/// allocations only partly fill, resident pages of about half a buffer
/// each, a cost as large as the buffer's own page.
const POOL_MAX: usize = 64 * 1024;
/// Bytes the pool takes from the allocator at a time (page-aligned, and
/// above glibc's mmap threshold: pages of its own).
const POOL_CHUNK: usize = 1 << 20;
/// Free buffers of a size class the pool keeps resident; beyond them a
/// returned buffer's pages go back to the kernel first.
const POOL_SPARES: usize = 256;
/// Size classes of the pool: powers of two from 4 KiB up to [`POOL_MAX`]
/// (a system with larger pages uses the classes from its page size).
const CLASSES: usize = (POOL_MAX.trailing_zeros() - 12 + 1) as usize;

/// The free buffers of each size class, by address. Chunks are never given
/// back to the allocator: a buffer returned beyond [`POOL_SPARES`] gives
/// its pages to the kernel instead, so the pool holds address space, not
/// memory. Taken once per ring created or dropped, never per byte.
static POOL: std::sync::Mutex<[Vec<usize>; CLASSES]> =
    std::sync::Mutex::new([const { Vec::new() }; CLASSES]);

fn class_of(len: usize) -> Option<usize> {
    (len >= page_size().max(4096) && len <= POOL_MAX && len.is_power_of_two())
        .then(|| (len.trailing_zeros() - 12) as usize)
}

/// A buffer of `len` bytes (a power of two, a page or more, at most
/// [`POOL_MAX`]) from the pool, page-aligned.
fn pool_take(len: usize, class: usize) -> NonNull<u8> {
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(at) = pool[class].pop() {
        return NonNull::new(at as *mut u8).expect("pooled buffers are not null");
    }
    let layout = Layout::from_size_align(POOL_CHUNK, page_size()).expect("chunk layout");
    // SAFETY: the layout's size is not zero.
    let raw = unsafe { std::alloc::alloc(layout) };
    let Some(chunk) = NonNull::new(raw) else {
        std::alloc::handle_alloc_error(layout)
    };
    // The chunk's other buffers go to the free list, the first to the caller.
    let free = &mut pool[class];
    free.extend((1..POOL_CHUNK / len).map(|i| chunk.as_ptr() as usize + i * len));
    chunk
}

/// Returns a buffer taken with [`pool_take`].
///
/// # Safety
/// `ptr` came from `pool_take(len, class)` and nobody uses it any more.
unsafe fn pool_give(ptr: NonNull<u8>, len: usize, class: usize) {
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if pool[class].len() >= POOL_SPARES {
        // SAFETY: the buffer is ours alone (caller's contract), whole pages.
        unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_DONTNEED) };
    }
    pool[class].push(ptr.as_ptr() as usize);
}

/// A ring's buffer: `len` bytes, page-aligned when `len` is at least a page
/// (then its pages can be given back), left uninitialised. Buffers of a
/// page up to [`POOL_MAX`] come from the pool, others from the allocator.
pub(super) struct LocalBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// The pool's size class, for a buffer from the pool; [`NO_CLASS`] for
    /// one from the allocator.
    class: u8,
    /// Whole pages of the buffer can be given back (it is page-aligned).
    pub(super) releasable: bool,
}

/// [`LocalBuf::class`] of a buffer from the allocator.
const NO_CLASS: u8 = u8::MAX;

impl LocalBuf {
    /// `len` bytes (a power of two, at least 64). Aborts as `Box` does when
    /// the allocator has no memory.
    pub(super) fn new(len: usize) -> LocalBuf {
        let releasable = len >= page_size();
        let class = class_of(len);
        let ptr = match class {
            Some(c) => pool_take(len, c),
            None => {
                let layout = Self::layout(len, releasable);
                // SAFETY: the layout's size is not zero (at least 64 bytes).
                let raw = unsafe { std::alloc::alloc(layout) };
                let Some(ptr) = NonNull::new(raw) else {
                    std::alloc::handle_alloc_error(layout)
                };
                ptr
            }
        };
        LocalBuf {
            ptr,
            len,
            class: class.map_or(NO_CLASS, |c| c as u8),
            releasable,
        }
    }

    /// The layout of a buffer of `len` bytes from the allocator.
    fn layout(len: usize, releasable: bool) -> Layout {
        let align = if releasable { page_size() } else { 64 };
        Layout::from_size_align(len, align).expect("a power-of-two ring size")
    }

    pub(super) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Gives back the pages of the first `bytes` bytes (rounded up to whole
    /// pages, at most the buffer); returns the bytes given back (0 for a
    /// buffer under a page, or when madvise fails).
    ///
    /// # Safety
    /// Nobody reads or writes those bytes concurrently, and their contents
    /// may be lost: they read as zeros afterwards.
    pub(super) unsafe fn discard(&self, bytes: usize) -> usize {
        if !self.releasable || bytes == 0 {
            return 0;
        }
        let page = page_size();
        let n = bytes.div_ceil(page).saturating_mul(page).min(self.len());
        // SAFETY: [ptr, ptr + n) lies inside our own buffer, which is
        // page-aligned and a whole number of pages long, so the range holds
        // no byte of anyone else's (nor the allocator's bookkeeping); the
        // caller guarantees nobody touches it meanwhile. Private anonymous
        // pages given back read as zeros: the buffer is `MaybeUninit`.
        let r = unsafe { libc::madvise(self.ptr.as_ptr().cast(), n, libc::MADV_DONTNEED) };
        if r == 0 {
            n
        } else {
            0
        }
    }
}

impl Drop for LocalBuf {
    fn drop(&mut self) {
        if self.class == NO_CLASS {
            let layout = Self::layout(self.len, self.releasable);
            // SAFETY: allocated in `new` with this very layout, freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        } else {
            // SAFETY: taken from the pool in `new` with this length and
            // class, returned once; the ring that used it is gone.
            unsafe { pool_give(self.ptr, self.len, usize::from(self.class)) };
        }
    }
}

/// The exclusion word of a ring whose pages can be given back, held by the
/// writer for one write.
pub(super) struct WriteGuard<'a>(&'a AtomicU32);

impl<'a> WriteGuard<'a> {
    /// Takes `word` for a write, waiting out a release in progress (one
    /// madvise call: it never waits for anything else).
    pub(super) fn take(word: &'a AtomicU32) -> WriteGuard<'a> {
        let mut spins = 0u32;
        while word
            .compare_exchange_weak(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                core::hint::spin_loop();
            }
        }
        WriteGuard(word)
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.0.store(FREE, Ordering::Release);
    }
}

impl Mem {
    /// The ring's own buffer and exclusion word when its pages can be given
    /// back (a ring of at least a page in this process's memory).
    pub(super) fn releasable(&self) -> Option<&LocalRing> {
        match &self.keep {
            Keep::Local(r) if r.buf.releasable => Some(r),
            _ => None,
        }
    }

    /// The word the writer holds for each write: a releasable ring's own,
    /// or a region ring's [`RingAt::pages`] word.
    pub(super) fn pages_word(&self) -> Option<&AtomicU32> {
        match self.pages {
            // SAFETY: points into the region `keep` holds, aligned (checked
            // at construction).
            Some(word) => Some(unsafe { word.as_ref() }),
            None => self.releasable().map(|r| &r.head.0.pages),
        }
    }

    /// Gives back the pages of an empty ring whose bytes were written since
    /// the last release: takes the exclusion word (or gives up if the
    /// writer holds it), checks that `head` equals `tail`, and discards
    /// the capacity in use. Returns the bytes given back.
    ///
    /// A ring in a region (service mode) is given back by one end only:
    /// the reader of a ring with a [`RingAt::pages`] word (the engine, for
    /// the application's TX ring: it only tries the word, so an application
    /// that keeps it cannot stall the engine), and the writer of one without
    /// (the engine, for an RX ring: it is the only writer, so it needs no
    /// word, and never waits on a word the application can write).
    pub(super) fn release_pages(&self, writer: bool) -> usize {
        if let Keep::Region(region) = &self.keep {
            let word = match self.pages_word() {
                Some(w) if !writer => Some(w),
                None if writer => None,
                _ => return 0,
            };
            return self.holding(word, &self.released_at, |cap| {
                region.release(self.base_at, cap)
            });
        }
        let Some(ring) = self.releasable() else {
            return 0;
        };
        self.holding(Some(&ring.head.0.pages), &ring.released_at, |cap| {
            // SAFETY: the ring is empty, so no end reads its bytes, and the
            // writer cannot write them while we hold the word.
            unsafe { ring.buf.discard(cap) }
        })
    }

    /// Runs `discard` on the capacity in use if the ring is empty and was
    /// written since `released_at`, holding `word` (if any) meanwhile;
    /// gives up (0) when the writer holds it.
    fn holding(
        &self,
        word: Option<&AtomicU32>,
        released_at: &AtomicU64,
        discard: impl FnOnce(usize) -> usize,
    ) -> usize {
        if let Some(w) = word {
            if w.compare_exchange(FREE, RELEASING, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                return 0;
            }
        }
        // The writer publishes `head` before it lets go of the word, and
        // the reader publishes `tail` after its last copy out of the ring.
        let head = self.head().load(Ordering::Acquire);
        let tail = self.tail().load(Ordering::Acquire);
        let mut given = 0;
        if head == tail && released_at.load(Ordering::Relaxed) != head {
            let (geo, _, _) = self.read_geometry(tail);
            given = discard(geo.cap);
            released_at.store(head, Ordering::Relaxed);
        }
        if let Some(w) = word {
            w.store(FREE, Ordering::Release);
        }
        given
    }
}

impl Writer {
    /// Gives the ring's pages back to the kernel if it is empty (the reader
    /// consumed everything) and was written since the last time: for a
    /// connection that idles. The ring stays usable; its next write takes
    /// pages again (zero-filled, one page fault each). Returns the bytes
    /// given back: 0 for a ring under a page, a non-empty one, one in a
    /// shared segment that has a pages word (its reader gives it back), or
    /// when the reader's end is releasing at the same moment.
    pub fn release_pages(&mut self) -> usize {
        self.mem.release_pages(true)
    }
}

impl Reader {
    /// As [`Writer::release_pages`], from the reading end: gives up (0)
    /// when the writer is in the middle of a write, and for a ring in a
    /// shared segment without a pages word (its writer gives it back).
    pub fn release_pages(&mut self) -> usize {
        self.mem.release_pages(false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{growable_ring, ring};
    use super::*;

    /// Pages of `buf`'s first `bytes` that are resident (mincore(2)).
    fn resident_pages(ptr: *mut u8, bytes: usize) -> usize {
        let page = page_size();
        let n = bytes.div_ceil(page);
        let mut vec = vec![0u8; n];
        // SAFETY: [ptr, ptr + n pages) is mapped (a live ring buffer,
        // page-aligned), and `vec` has one byte per page.
        let r = unsafe { libc::mincore(ptr.cast(), n * page, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().filter(|&&v| v & 1 != 0).count()
    }

    fn buf_of(r: &Reader) -> *mut u8 {
        r.mem.releasable().expect("a releasable ring").buf.as_ptr()
    }

    #[test]
    fn an_empty_ring_gives_its_pages_back_and_streams_on() {
        let page = page_size();
        let (mut w, mut r) = ring(4 * page);
        let data: Vec<u8> = (0..3 * page).map(|i| (i % 253) as u8).collect();
        assert_eq!(w.write(&data), data.len());
        assert_eq!(resident_pages(buf_of(&r), 4 * page), 3);
        // Not empty: nothing is given back, from either end.
        assert_eq!(r.release_pages(), 0);
        assert_eq!(w.release_pages(), 0);
        let mut out = vec![0u8; data.len()];
        assert_eq!(r.read(&mut out), data.len());
        assert_eq!(out, data);
        // Empty: the capacity's pages go back, once.
        assert_eq!(r.release_pages(), 4 * page);
        assert_eq!(resident_pages(buf_of(&r), 4 * page), 0);
        assert_eq!(w.release_pages(), 0, "nothing written since");
        // The ring goes on where it was, across the wrap.
        assert_eq!(w.write(&data), data.len());
        assert_eq!(r.read(&mut out), data.len());
        assert_eq!(out, data);
        assert_eq!(w.release_pages(), 4 * page);
    }

    /// A ring's own state is three cache lines: the writer's (`head` and
    /// the exclusion word), the reader's (`tail`), and the read-mostly rest.
    #[test]
    fn a_local_ring_is_three_cache_lines() {
        assert_eq!(core::mem::size_of::<super::super::LocalRing>(), 3 * 64);
    }

    #[test]
    fn small_rings_and_untouched_rings_give_nothing_back() {
        let (mut w, mut r) = ring(64);
        assert_eq!(w.write(b"abc"), 3);
        r.consume(3);
        assert_eq!(r.release_pages(), 0);
        let (mut w, _r) = ring(4 * page_size());
        assert_eq!(w.release_pages(), 0, "never written");
    }

    #[test]
    fn a_grown_ring_gives_back_its_capacity_in_use() {
        let page = page_size();
        let (mut w, mut r) = growable_ring(page, 8 * page);
        assert_eq!(w.grow(2 * page), 2 * page);
        let data = vec![7u8; 2 * page];
        assert_eq!(w.write(&data), data.len());
        r.consume(data.len());
        assert_eq!(r.release_pages(), 2 * page);
    }

    /// The reader gives the pages back as often as it can while the writer
    /// streams: no byte is lost or changed (a release never overlaps a
    /// write, and only an empty ring is released).
    #[test]
    fn releases_racing_a_writer_lose_no_byte() {
        let page = page_size();
        let (mut w, mut r) = ring(2 * page);
        let total = 8 << 20;
        let t = std::thread::spawn(move || {
            let mut sent = 0usize;
            let mut chunk = [0u8; 1500];
            let started = std::time::Instant::now();
            while sent < total && started.elapsed().as_secs() < 60 {
                let n = (total - sent).min(chunk.len());
                for (i, b) in chunk[..n].iter_mut().enumerate() {
                    *b = ((sent + i) % 251) as u8 | 1;
                }
                sent += w.write(&chunk[..n]);
            }
            sent
        });
        let (mut got, mut released) = (0usize, 0usize);
        let mut buf = [0u8; 999];
        let started = std::time::Instant::now();
        while got < total && started.elapsed().as_secs() < 60 {
            let n = r.read(&mut buf);
            for (i, b) in buf[..n].iter().enumerate() {
                assert_eq!(*b, ((got + i) % 251) as u8 | 1, "byte {}", got + i);
            }
            got += n;
            released += usize::from(r.release_pages() > 0);
        }
        assert_eq!(t.join().unwrap(), total);
        assert_eq!(got, total);
        assert!(released > 0, "no release happened during the stream");
    }
}
