//! Shared-memory files for observers that write back (`corestack trace`
//! and `corestack capture` switch a running engine's tracing or capture on
//! and off): a file `corestack-<pid>.<kind>` in [`stats_dir`], mapped
//! read-write by the process it belongs to and by the observer, accessed
//! only through atomics. The process removes it when it drops its end.

use crate::stats_shm::{segment_path, stats_dir};
use core::sync::atomic::{AtomicU64, Ordering};
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A mapped segment of u64 words (file-backed, or anonymous when the file
/// could not be made).
pub(crate) struct ObsSeg {
    map: memmap2::MmapRaw,
    /// The file and its inode while it is ours to remove.
    file: Option<(PathBuf, u64)>,
}

impl ObsSeg {
    /// Creates this process's segment of kind `kind`, `len` bytes, with
    /// `magic` and `len` in its first two words; readable and writable by
    /// its owner (root observers may open it too). Built in a new file and
    /// renamed into place, like `stats_shm`'s.
    ///
    /// Errors: those of creating, sizing, mapping or renaming the file.
    pub(crate) fn create(kind: &str, len: usize, magic: &[u8; 8]) -> io::Result<ObsSeg> {
        ObsSeg::create_at(segment_path(std::process::id(), kind), len, magic)
    }

    /// [`ObsSeg::create`] at `path`.
    pub(crate) fn create_at(path: PathBuf, len: usize, magic: &[u8; 8]) -> io::Result<ObsSeg> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut tmp = path.clone().into_os_string();
        tmp.push(format!(".new{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        let tmp = PathBuf::from(tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let built = (|| -> io::Result<memmap2::MmapRaw> {
            file.set_len(len as u64)?;
            let map = memmap2::MmapRaw::map_raw(&file)?;
            word_in(&map, 0).store(u64::from_le_bytes(*magic), Ordering::Relaxed);
            word_in(&map, 8).store(len as u64, Ordering::Release);
            std::fs::rename(&tmp, &path)?;
            Ok(map)
        })();
        let map = built.inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
        let ino = file.metadata()?.ino();
        Ok(ObsSeg {
            map,
            file: Some((path, ino)),
        })
    }

    /// An anonymous segment of `len` bytes that nobody else can see (the
    /// stand-in when there is no /dev/shm, and for engines nobody wraps).
    pub(crate) fn anonymous(len: usize, magic: &[u8; 8]) -> ObsSeg {
        let map = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .expect("mapping anonymous memory for a trace/capture segment");
        let seg = ObsSeg {
            map: memmap2::MmapRaw::from(map),
            file: None,
        };
        seg.word(0)
            .store(u64::from_le_bytes(*magic), Ordering::Relaxed);
        seg.word(8).store(len as u64, Ordering::Release);
        seg
    }

    /// Opens another process's segment at `path` for reading and writing.
    ///
    /// Errors: those of opening or mapping it (EACCES without the right to
    /// write it: run as its owner or root); `InvalidData` when it does not
    /// start with `magic` or is shorter than it says.
    pub(crate) fn open(path: &Path, magic: &[u8; 8], min_len: usize) -> io::Result<ObsSeg> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len() as usize;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "not a corestack segment");
        if len < min_len.max(16) {
            return Err(bad());
        }
        let map = memmap2::MmapRaw::map_raw(&file)?;
        let seg = ObsSeg { map, file: None };
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

impl ObsSeg {
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

/// The word at byte offset `off` of `map`; panics (never reads outside)
/// when `off` is unaligned or out of bounds.
#[inline]
fn word_in(map: &memmap2::MmapRaw, off: usize) -> &AtomicU64 {
    assert!(off.is_multiple_of(8) && off + 8 <= map.len());
    // SAFETY: `off` is 8-aligned in a page-aligned mapping and in bounds
    // (asserted); AtomicU64 has u64's layout, and every access to the
    // shared words goes through atomics.
    unsafe { &*(map.as_ptr().add(off) as *const AtomicU64) }
}

impl Drop for ObsSeg {
    fn drop(&mut self) {
        if let Some((path, ino)) = &self.file {
            if std::fs::metadata(path).is_ok_and(|m| m.ino() == *ino) {
                let _ = std::fs::remove_file(path);
            }
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
