//! Counters in a read-only shared segment, so `corestack stat` can read a
//! running engine's counters without stopping it (like `nstat`).
//!
//! The segment is a file (default under /dev/shm) holding:
//!
//! ```text
//! 0    magic "CSSTATS1" | count: u32 | pid: u32          (header line)
//! 64   seq: u64  (odd while the writer updates; the writer's line)
//! 128  count × u64 counters, in the engine's declaration order
//! ```
//!
//! One writer (the engine side) publishes with a sequence lock; readers
//! retry until they see the same even `seq` before and after copying.

use core::sync::atomic::{fence, AtomicU64, Ordering};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"CSSTATS1";
const SEQ_OFF: usize = 64;
const VALUES_OFF: usize = 128;
/// Reader attempts before it gives up on a writer that never settles.
const READ_TRIES: usize = 1000;

/// The directory segments live in: `$CORESTACK_STATS_DIR` or /dev/shm.
pub fn stats_dir() -> PathBuf {
    std::env::var_os("CORESTACK_STATS_DIR").map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// The segment path of process `pid`.
pub fn stats_path(pid: u32) -> PathBuf {
    stats_dir().join(format!("corestack-{pid}.stats"))
}

fn words(map: &memmap2::MmapRaw, off: usize) -> &AtomicU64 {
    debug_assert!(off.is_multiple_of(8) && off + 8 <= map.len());
    // SAFETY: `off` is 8-aligned (mmap returns page-aligned memory) and in
    // bounds (checked at open/create); AtomicU64 has the layout of u64, and
    // every access to the shared words goes through atomics.
    unsafe { &*(map.as_ptr().add(off) as *const AtomicU64) }
}

/// The writing end: created by the process whose engine it describes,
/// removed when dropped.
pub struct StatsWriter {
    map: memmap2::MmapRaw,
    count: usize,
    path: PathBuf,
}

impl StatsWriter {
    /// Creates (or replaces) the segment of this process for `count`
    /// counters, readable by everyone, writable by its owner.
    ///
    /// Errors: those of creating, sizing or mapping the file.
    pub fn create(count: usize) -> io::Result<StatsWriter> {
        let path = stats_path(std::process::id());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&path)?;
        file.set_len((VALUES_OFF + 8 * count) as u64)?;
        let map = memmap2::MmapRaw::map_raw(&file)?;
        let mut header = [0u8; 16];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&(count as u32).to_le_bytes());
        header[12..16].copy_from_slice(&std::process::id().to_le_bytes());
        for (i, chunk) in header.chunks(8).enumerate() {
            words(&map, i * 8).store(
                u64::from_le_bytes(chunk.try_into().expect("8 bytes")),
                Ordering::Relaxed,
            );
        }
        Ok(StatsWriter { map, count, path })
    }

    /// Publishes `values` (at most `count` are taken; missing ones read 0).
    pub fn publish(&mut self, values: impl Iterator<Item = u64>) {
        let seq = words(&self.map, SEQ_OFF);
        let s = seq.load(Ordering::Relaxed);
        seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (i, v) in values.take(self.count).enumerate() {
            words(&self.map, VALUES_OFF + 8 * i).store(v, Ordering::Relaxed);
        }
        seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

impl Drop for StatsWriter {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A reader of one segment.
pub struct StatsReader {
    map: memmap2::MmapRaw,
    count: usize,
    pid: u32,
}

impl StatsReader {
    /// Opens the segment at `path`.
    ///
    /// Errors: those of opening or mapping it; `InvalidData` when it is not
    /// a corestack statistics segment or is shorter than it says.
    pub fn open(path: &Path) -> io::Result<StatsReader> {
        let file = File::open(path)?;
        let len = file.metadata()?.len() as usize;
        if len < VALUES_OFF {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a corestack statistics segment (too short)",
            ));
        }
        let map = memmap2::MmapOptions::new()
            .len(len)
            .map_raw_read_only(&file)?;
        let h0 = words(&map, 0).load(Ordering::Acquire).to_le_bytes();
        let h1 = words(&map, 8).load(Ordering::Acquire).to_le_bytes();
        let count = u32::from_le_bytes([h1[0], h1[1], h1[2], h1[3]]) as usize;
        let pid = u32::from_le_bytes([h1[4], h1[5], h1[6], h1[7]]);
        if &h0 != MAGIC || VALUES_OFF + 8 * count > len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a corestack statistics segment",
            ));
        }
        Ok(StatsReader { map, count, pid })
    }

    /// Counters in the segment.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The writer's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A consistent copy of the counters, or None if the writer kept
    /// updating through every attempt.
    pub fn read(&self) -> Option<Vec<u64>> {
        let seq = words(&self.map, SEQ_OFF);
        let mut out = vec![0u64; self.count];
        for _ in 0..READ_TRIES {
            let before = seq.load(Ordering::Acquire);
            if !before.is_multiple_of(2) {
                std::hint::spin_loop();
                continue;
            }
            for (i, v) in out.iter_mut().enumerate() {
                *v = words(&self.map, VALUES_OFF + 8 * i).load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == before {
                return Some(out);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_counters_read_back_and_file_goes_with_writer() {
        let dir = std::env::temp_dir().join(format!("cs-stats-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::env::set_var("CORESTACK_STATS_DIR", &dir);
        let path = stats_path(std::process::id());
        {
            let mut w = StatsWriter::create(3).unwrap();
            w.publish([7u64, 8, 9].into_iter());
            let r = StatsReader::open(&path).unwrap();
            assert_eq!(r.pid(), std::process::id());
            assert_eq!(r.read(), Some(vec![7, 8, 9]));
            w.publish([1u64].into_iter());
            assert_eq!(r.read(), Some(vec![1, 8, 9]));
        }
        assert!(!path.exists(), "segment removed with its writer");
        std::fs::write(&path, b"garbage that is long enough to look like a header but is not one at all, really not, no: 128 bytes and more .......").unwrap();
        assert_eq!(
            StatsReader::open(&path).err().map(|e| e.kind()),
            Some(io::ErrorKind::InvalidData)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
