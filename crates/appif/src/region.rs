//! A mapped memory region that rings and status blocks can live in: an
//! application's segment (a memfd shared with the engine) or anonymous
//! memory. Everything inside is reached by offset, never by pointer, and
//! every offset is checked against the region before it is used.

use core::ptr::NonNull;
use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// A region of shared memory, mapped read-write for as long as it lives.
/// Hold it in an `Arc`: views into it keep it mapped.
pub struct Region {
    map: memmap2::MmapRaw,
}

impl core::fmt::Debug for Region {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Region({} bytes)", self.len())
    }
}

impl Region {
    /// Maps the first `len` bytes of the file behind `fd` (a memfd) shared.
    /// Errors: the mmap(2) errno; EINVAL when the file is shorter than `len`.
    pub fn map_fd(fd: BorrowedFd<'_>, len: usize) -> io::Result<Region> {
        let dup = fd.try_clone_to_owned()?;
        let file = File::from(dup);
        if file.metadata()?.len() < len as u64 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let map = memmap2::MmapOptions::new().len(len).map_raw(&file)?;
        Ok(Region { map })
    }

    /// Anonymous zeroed memory of `len` bytes (pages are allocated on first touch).
    pub fn anon(len: usize) -> io::Result<Region> {
        let map = memmap2::MmapOptions::new().len(len.max(1)).map_anon()?;
        Ok(Region { map: map.into() })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True for an empty region (never, in practice).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A pointer to a `T` at byte offset `off`, if `[off, off + size_of::<T>())`
    /// lies inside the region and `off` is aligned for `T`.
    pub fn at<T>(&self, off: usize) -> Option<NonNull<T>> {
        self.span(off, core::mem::size_of::<T>(), core::mem::align_of::<T>())
            .map(NonNull::cast)
    }

    /// The `T` at byte offset `off` as a shared reference that lives as
    /// long as the region is borrowed; `None` when it does not lie inside
    /// the region or `off` is misaligned for `T`.
    pub fn get<T: AtomicOnly>(&self, off: usize) -> Option<&T> {
        let p = self.at::<T>(off)?;
        // SAFETY: aligned and in bounds (checked by `at`), mapped for as
        // long as `self` is borrowed; `T: AtomicOnly` makes any bytes a valid
        // `T` that is only ever shared.
        Some(unsafe { p.as_ref() })
    }

    /// A pointer to `len` bytes at `off`, if they lie inside the region and
    /// `off` is a multiple of `align` (a power of two).
    pub fn span(&self, off: usize, len: usize, align: usize) -> Option<NonNull<u8>> {
        let end = off.checked_add(len)?;
        if end > self.len() || off & (align.max(1) - 1) != 0 {
            return None;
        }
        // The mapping's base is page aligned, so alignment of `off` is
        // alignment of the address.
        NonNull::new(self.map.as_mut_ptr().wrapping_add(off))
    }
}

impl Region {
    /// Gives the memory of bytes `[off, off + len)` back to the system
    /// (madvise MADV_REMOVE on a shared mapping, MADV_DONTNEED on an
    /// anonymous one); they read as zero afterwards, and cost memory again
    /// only when written. Only whole pages inside the range are released.
    /// Returns the bytes released. Best effort: a range outside the region,
    /// or an madvise error, releases nothing (0). The caller must own the
    /// bytes (nobody else may be using them, in this process or another).
    pub fn release(&self, off: usize, len: usize) -> usize {
        let page = 4096;
        let start = off.next_multiple_of(page);
        let end = off.saturating_add(len).min(self.len()) & !(page - 1);
        if start >= end {
            return 0;
        }
        let Some(ptr) = self.span(start, end - start, page) else {
            return 0;
        };
        for advice in [libc::MADV_REMOVE, libc::MADV_DONTNEED] {
            // SAFETY: [start, end) lies inside our mapping (checked by
            // `span`); the caller owns those bytes, so nothing reads them
            // while their pages are replaced by zero pages.
            let r = unsafe { libc::madvise(ptr.as_ptr().cast(), end - start, advice) };
            if r == 0 {
                return end - start;
            }
        }
        0
    }
}

pub use crate::words::AtomicOnly;

/// A shared reference to a `T` that keeps its memory alive: a `T` at a
/// checked offset of a [`Region`], or one of its own on the heap. Derefs
/// to `&T`; costs one pointer read like a plain reference.
pub struct View<T: AtomicOnly> {
    ptr: NonNull<T>,
    _keep: Keep<T>,
}

enum Keep<T> {
    Heap(#[allow(dead_code)] Box<T>),
    Region(#[allow(dead_code)] Arc<Region>),
}

impl<T: AtomicOnly> View<T> {
    /// `value` on the heap (embedded and inline mode).
    pub fn boxed(value: T) -> View<T> {
        let b = Box::new(value);
        View {
            ptr: NonNull::from(&*b),
            _keep: Keep::Heap(b),
        }
    }

    /// The `T` at byte offset `off` of `region`; `None` when it does not lie
    /// inside the region or `off` is misaligned for `T`.
    pub fn in_region(region: &Arc<Region>, off: usize) -> Option<View<T>> {
        Some(View {
            ptr: region.at::<T>(off)?,
            _keep: Keep::Region(region.clone()),
        })
    }
}

impl<T: AtomicOnly> core::ops::Deref for View<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `ptr` is aligned and in bounds (checked by `Region::at`,
        // or a live Box), `_keep` keeps the memory mapped or allocated for
        // as long as the view lives, and `T: AtomicOnly` makes any bytes a
        // valid `T` that is only ever shared.
        unsafe { self.ptr.as_ref() }
    }
}

// SAFETY: a View only hands out `&T`, and `T: AtomicOnly` is `Sync`; the
// memory it keeps alive (a Box or an `Arc<Region>`) may move between threads.
unsafe impl<T: AtomicOnly> Send for View<T> {}
// SAFETY: as above.
unsafe impl<T: AtomicOnly> Sync for View<T> {}

// SAFETY: the mapping stays at the same address with the same length until
// the region is dropped (it is never remapped or shrunk: the memfd's size is
// sealed by its creator); ports read it only with raw copies or through the
// kernel.
unsafe impl payload::StableMemory for Region {
    fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }
    fn len(&self) -> usize {
        self.map.len()
    }
}

// SAFETY: the region is plain shared memory; everything placed in it is
// accessed through atomics or under the ring protocols' ownership rules.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_outside_or_misaligned_are_refused() {
        let r = Region::anon(4096).unwrap();
        assert!(r.at::<u64>(0).is_some());
        assert!(r.at::<u64>(4088).is_some());
        assert!(r.at::<u64>(4089).is_none());
        assert!(r.at::<u64>(4096).is_none());
        assert!(r.at::<u64>(usize::MAX - 3).is_none());
        assert!(r.at::<u64>(4).is_none());
        assert!(r.span(4000, 96, 1).is_some());
        assert!(r.span(4000, 97, 1).is_none());
    }
}
