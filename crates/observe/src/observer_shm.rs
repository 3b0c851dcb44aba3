//! Shared-memory files for observers that write back (`corestack trace`
//! and `corestack capture` switch a running engine's tracing or capture on
//! and off): a file `corestack-<pid>.<kind>` in [`stats_dir`], mapped
//! read-write by the process it belongs to and by the observer, accessed
//! only through atomics. The process removes it when it drops its end.

use crate::stats_shm::{create_renamed, remove_if_ours, segment_path, stats_dir, words};
use core::sync::atomic::{AtomicU64, Ordering};
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// A mapped segment of u64 words (file-backed, or anonymous when the file
/// could not be made).
pub(crate) struct ObserverShm {
    map: memmap2::MmapRaw,
    /// The file and its inode while it is ours to remove.
    file: Option<(PathBuf, u64)>,
}

impl ObserverShm {
    /// Creates this process's segment of kind `kind`, `len` bytes, with
    /// `magic` and `len` in its first two words; readable and writable by
    /// its owner (root observers may open it too). Built in a new file and
    /// renamed into place, like `stats_shm`'s.
    ///
    /// Errors: those of creating, sizing, mapping or renaming the file.
    pub(crate) fn create(kind: &str, len: usize, magic: &[u8; 8]) -> io::Result<ObserverShm> {
        ObserverShm::create_at(segment_path(std::process::id(), kind), len, magic)
    }

    /// [`ObserverShm::create`] at `path`.
    pub(crate) fn create_at(path: PathBuf, len: usize, magic: &[u8; 8]) -> io::Result<ObserverShm> {
        let (map, ino) = create_renamed(&path, len, 0o600, |map| {
            word_in(map, 0).store(u64::from_le_bytes(*magic), Ordering::Relaxed);
            word_in(map, 8).store(len as u64, Ordering::Release);
        })?;
        Ok(ObserverShm {
            map,
            file: Some((path, ino)),
        })
    }

    /// An anonymous segment of `len` bytes that nobody else can see (the
    /// stand-in when there is no /dev/shm, and for engines nobody wraps).
    pub(crate) fn anonymous(len: usize, magic: &[u8; 8]) -> ObserverShm {
        let map = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .expect("mapping anonymous memory for a trace/capture segment");
        let seg = ObserverShm {
            map: memmap2::MmapRaw::from(map),
            file: None,
        };
        seg.word(0)
            .store(u64::from_le_bytes(*magic), Ordering::Relaxed);
        seg.word(8).store(len as u64, Ordering::Release);
        seg
    }

    /// The process's one segment of kind `kind` (`len` bytes, `magic`),
    /// kept in `slot`: the one a holder still has, else a new one
    /// ([`ObserverShm::create`]) that goes when its last holder drops it. None
    /// when it cannot be made (no /dev/shm): the caller's stand-in stays off.
    pub(crate) fn process_shared(
        slot: &Mutex<Weak<ObserverShm>>,
        kind: &str,
        len: usize,
        magic: &[u8; 8],
    ) -> Option<Arc<ObserverShm>> {
        let mut cur = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(seg) = cur.upgrade() {
            return Some(seg);
        }
        let seg = Arc::new(ObserverShm::create(kind, len, magic).ok()?);
        *cur = Arc::downgrade(&seg);
        Some(seg)
    }

    /// [`ObserverShm::open`] of a segment that must be exactly `len` bytes
    /// (`what`: its kind, for the error).
    ///
    /// Errors: those of [`ObserverShm::open`]; `InvalidData` ("`what` segment
    /// of another corestack version") when its length differs.
    pub(crate) fn open_exact(
        path: &Path,
        magic: &[u8; 8],
        len: usize,
        what: &str,
    ) -> io::Result<ObserverShm> {
        let seg = ObserverShm::open(path, magic, len)?;
        if seg.len() != len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{what} segment of another corestack version"),
            ));
        }
        Ok(seg)
    }

    /// Opens another process's segment at `path` for reading and writing.
    ///
    /// Errors: those of opening or mapping it (EACCES without the right to
    /// write it: run as its owner or root); `InvalidData` when it does not
    /// start with `magic` or is shorter than it says.
    pub(crate) fn open(path: &Path, magic: &[u8; 8], min_len: usize) -> io::Result<ObserverShm> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len() as usize;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "not a corestack segment");
        if len < min_len.max(16) {
            return Err(bad());
        }
        let map = memmap2::MmapRaw::map_raw(&file)?;
        let seg = ObserverShm { map, file: None };
        if seg.word(0).load(Ordering::Acquire).to_le_bytes() != *magic
            || seg.word(8).load(Ordering::Acquire) != len as u64
        {
            return Err(bad());
        }
        Ok(seg)
    }

    /// The file's path while it is ours.
    pub(crate) fn path(&self) -> Option<PathBuf> {
        self.file.as_ref().map(|(p, _)| p.clone())
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The word at byte offset `off` (8-aligned, in bounds: checked by the
    /// callers' layouts; an offset outside panics, never reads outside).
    #[inline]
    pub(crate) fn word(&self, off: usize) -> &AtomicU64 {
        word_in(&self.map, off)
    }
}

impl ObserverShm {
    /// Copies `src` into the segment at byte offset `off` (bounds asserted).
    /// The readers' side of the bytes is ordered by a word stored with
    /// release after this copy.
    pub(crate) fn write_bytes(&self, off: usize, src: &[u8]) {
        assert!(off <= self.map.len() && src.len() <= self.map.len() - off);
        // SAFETY: the range is inside the mapping (asserted); the bytes are
        // plain data that a reader copies only after it saw the publishing
        // word, and a reader that races a rewrite throws its copy away.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.map.as_mut_ptr().add(off), src.len())
        }
    }

    /// Copies bytes at offset `off` of the segment into `dst` (bounds
    /// asserted).
    pub(crate) fn read_bytes(&self, off: usize, dst: &mut [u8]) {
        assert!(off <= self.map.len() && dst.len() <= self.map.len() - off);
        // SAFETY: the range is inside the mapping (asserted); see
        // `write_bytes` for how the copy is ordered against the writer.
        unsafe {
            core::ptr::copy_nonoverlapping(self.map.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
    }
}

/// Where a bounded ring of fixed-size slots lives in a segment (byte
/// offsets of u64 words): many writers claim slots by CAS on `head`, never
/// wait, and count a drop in `drops` when the ring is full; one observer
/// takes finished slots in order and frees them by advancing `tail`. A
/// slot's first word is its sequence (claim index + 1), stored last with
/// release; its other bytes are the caller's.
pub(crate) struct Ring {
    /// Slots claimed so far (writers, CAS).
    pub head: usize,
    /// Slots taken by the observer.
    pub tail: usize,
    /// Slots not written because the ring was full (writers).
    pub drops: usize,
    /// Where slot 0 starts.
    pub slots_off: usize,
    /// How many slots.
    pub slots: usize,
    /// Bytes a slot (a multiple of 8).
    pub slot_bytes: usize,
}

impl Ring {
    /// Byte offset of the slot for claim index `i`.
    #[inline]
    fn slot(&self, i: u64) -> usize {
        self.slots_off + (i as usize % self.slots) * self.slot_bytes
    }

    /// Claims the next slot of `seg`'s ring: its byte offset and claim
    /// index, to fill and then [`Ring::publish`]; None (a drop counted)
    /// when the ring is full. Never waits, never allocates.
    #[inline]
    pub(crate) fn claim(&self, seg: &ObserverShm) -> Option<(usize, u64)> {
        let head = seg.word(self.head);
        let claimed = loop {
            let h = head.load(Ordering::Relaxed);
            let t = seg.word(self.tail).load(Ordering::Acquire);
            if h.wrapping_sub(t) >= self.slots as u64 {
                seg.word(self.drops).fetch_add(1, Ordering::Relaxed);
                return None;
            }
            if head
                .compare_exchange_weak(h, h + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                break h;
            }
        };
        Some((self.slot(claimed), claimed))
    }

    /// Marks the slot at `at` (claimed as index `claimed`) written: its
    /// sequence word, stored with release after the rest.
    #[inline]
    pub(crate) fn publish(&self, seg: &ObserverShm, at: usize, claimed: u64) {
        seg.word(at).store(claimed + 1, Ordering::Release);
    }

    /// Slots dropped because the ring was full, since the segment was made.
    pub(crate) fn dropped(&self, seg: &ObserverShm) -> u64 {
        seg.word(self.drops).load(Ordering::Relaxed)
    }

    /// Calls `take` with the byte offset of every finished slot, in claim
    /// order, and frees each after it; stops at the first slot claimed but
    /// not yet published. Returns how many it took.
    pub(crate) fn drain(&self, seg: &ObserverShm, mut take: impl FnMut(usize)) -> usize {
        let tail = seg.word(self.tail);
        let mut t = tail.load(Ordering::Relaxed);
        let head = seg.word(self.head).load(Ordering::Acquire);
        let mut n = 0;
        while t < head {
            let at = self.slot(t);
            if seg.word(at).load(Ordering::Acquire) != t + 1 {
                break; // claimed, not yet written
            }
            take(at);
            t += 1;
            tail.store(t, Ordering::Release);
            n += 1;
        }
        n
    }
}

/// The word at byte offset `off` of `map`; panics (never reads outside)
/// when `off` is unaligned or out of bounds.
#[inline]
fn word_in(map: &memmap2::MmapRaw, off: usize) -> &AtomicU64 {
    assert!(off.is_multiple_of(8) && off + 8 <= map.len());
    words(map, off)
}

impl Drop for ObserverShm {
    fn drop(&mut self) {
        if let Some((path, ino)) = &self.file {
            remove_if_ours(path, *ino);
        }
    }
}

/// The segments of kind `kind` in [`stats_dir`]: (pid, path), by pid.
pub fn find_segments(kind: &str) -> Vec<(u32, PathBuf)> {
    let mut out = Vec::new();
    let suffix = format!(".{kind}");
    if let Ok(dir) = std::fs::read_dir(stats_dir()) {
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(pid) = name
                .strip_prefix("corestack-")
                .and_then(|r| r.strip_suffix(suffix.as_str()))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if Path::new(&format!("/proc/{pid}")).exists() {
                out.push((pid, e.path()));
            }
        }
    }
    out.sort();
    out
}
