//! Read-only shared segments of u64 words, so `corestack stat` and
//! `corestack ss` can read a running engine's counters and connection table
//! without stopping it (like `nstat` and `ss`).
//!
//! A segment is a file (default under /dev/shm, `corestack-<pid>.<kind>`,
//! kind [`STATS`], [`CONNS`] or [`APPS`]) holding:
//!
//! ```text
//! 0    magic "CSSTATS1" | count: u32 | pid: u32          (header line)
//! 64   seq: u64  (odd while the writer updates; the writer's line)
//! 128  count × u64 words: the counters in the engine's declaration order
//!      (STATS); or a row count, then that many rows: connections of
//!      [`ROW_WORDS`] words each ([`ConnRow`], CONNS) or applications of
//!      [`APP_WORDS`] words each ([`AppRow`], APPS, service mode's daemon)
//! ```
//!
//! One writer (the engine side) publishes with a sequence lock; readers
//! retry until they see the same even `seq` before and after copying.
//!
//! A process with several engines (`--cores N`) publishes the counters and
//! connection table of each engine in segments of its own: engine 0 in
//! `corestack-<pid>.stats` and `.conns` (the names of a one-engine
//! process, so one-engine tools read it as before), engine `e` ≥ 1 in
//! `corestack-<pid>.stats.e<e>` and `.conns.e<e>` ([`engine_kind`];
//! [`engine_segments`] finds them all). Each [`ConnRow`] also names its
//! engine. The application table ([`APPS`]), the trace and the capture
//! segments stay one per process.

use core::sync::atomic::{fence, AtomicU64, Ordering};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

mod rows;
pub use rows::{comm_bytes, table_rows, AppRow, ConnRow, ConnState, APP_NAME_MAX, COMM_LEN};

const MAGIC: &[u8; 8] = b"CSSTATS1";
const SEQ_OFF: usize = 64;
const VALUES_OFF: usize = 128;
/// Reader attempts before it gives up on a writer that never settles.
const READ_TRIES: usize = 1000;

/// The directory segments live in: `$CORESTACK_STATS_DIR` or /dev/shm.
pub fn stats_dir() -> PathBuf {
    std::env::var_os("CORESTACK_STATS_DIR").map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// The counters segment.
pub const STATS: &str = "stats";
/// The connection table segment.
pub const CONNS: &str = "conns";
/// The application table segment (written by `corestack run` only).
pub const APPS: &str = "apps";
/// Words per connection row.
pub const ROW_WORDS: usize = 17;
/// Words per application row.
pub const APP_WORDS: usize = 10;

/// The segment path of kind `kind` of process `pid`.
pub fn segment_path(pid: u32, kind: &str) -> PathBuf {
    stats_dir().join(format!("corestack-{pid}.{kind}"))
}

/// The counters segment path of process `pid` (its engine 0's).
pub fn stats_path(pid: u32) -> PathBuf {
    segment_path(pid, STATS)
}

/// The kind of engine `engine`'s segment of kind `kind`: `kind` itself
/// for engine 0, `<kind>.e<engine>` for the others (`stats.e1`, `conns.e3`).
pub fn engine_kind(kind: &str, engine: usize) -> String {
    match engine {
        0 => kind.to_string(),
        e => format!("{kind}.e{e}"),
    }
}

/// The engine a segment file name of process `pid` and kind `kind`
/// belongs to: `corestack-<pid>.<kind>` is engine 0's,
/// `corestack-<pid>.<kind>.e<N>` engine N's (N ≥ 1, written without
/// leading zeros); None for any other name (another kind or process, the
/// `.new<n>` file of a creation).
fn engine_of_name(name: &str, pid: u32, kind: &str) -> Option<usize> {
    let rest = name
        .strip_prefix("corestack-")?
        .strip_prefix(pid.to_string().as_str())?
        .strip_prefix('.')?
        .strip_prefix(kind)?;
    if rest.is_empty() {
        return Some(0);
    }
    let n = rest.strip_prefix(".e")?;
    if n.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// Every engine's segment of kind `kind` of process `pid` in
/// [`stats_dir`]: (engine index, path), by engine; empty when there are
/// none (or the directory cannot be read). A process with one engine has
/// just engine 0's.
pub fn engine_segments(pid: u32, kind: &str) -> Vec<(usize, PathBuf)> {
    let dir = stats_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<(usize, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let engine = engine_of_name(name.to_str()?, pid, kind)?;
            Some((engine, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// Removes, from `dir`, the segment files (`corestack-<pid>.<kind>`, every
/// engine's `corestack-<pid>.<kind>.e<N>`, and the `.new<n>` files a
/// creation left) of processes that no longer exist: a
/// process killed by a signal (SIGKILL, or a crash) never removes its own,
/// and `/dev/shm` is memory. A pid that exists, whoever it is now, keeps its
/// files. Returns how many were removed. (A pid is looked up in this
/// process's `/proc`: processes of another pid namespace sharing the
/// directory look dead.)
pub fn remove_stale_segments(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("corestack-"))
            .and_then(|r| r.split_once('.'))
            .and_then(|(p, _)| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Creates the segment file `path` of `len` bytes with permissions `mode`:
/// built in a new file next to it (`<path>.new<n>`), sized, mapped, filled
/// in by `init` and renamed into place, so a segment another writer of this
/// process still maps is replaced, never truncated under it. Returns the
/// mapping and the file's inode (to remove the path only while it is ours,
/// [`remove_if_ours`]); the new file is removed on failure.
///
/// Errors: those of creating, sizing, mapping or renaming the file.
pub(crate) fn create_renamed(
    path: &Path,
    len: usize,
    mode: u32,
    init: impl FnOnce(&memmap2::MmapRaw),
) -> io::Result<(memmap2::MmapRaw, u64)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    // The first segment this process creates clears those of dead processes.
    SWEPT.call_once(|| {
        if let Some(dir) = path.parent() {
            remove_stale_segments(dir);
        }
    });
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(format!(".new{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    let tmp = PathBuf::from(tmp);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    let built = (|| -> io::Result<memmap2::MmapRaw> {
        file.set_len(len as u64)?;
        let map = memmap2::MmapRaw::map_raw(&file)?;
        init(&map);
        std::fs::rename(&tmp, path)?;
        Ok(map)
    })();
    let map = built.inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    Ok((map, file.metadata()?.ino()))
}

/// Removes the segment file `path` if it is still the one with inode `ino`
/// (another writer of this process may have replaced it since).
pub(crate) fn remove_if_ours(path: &Path, ino: u64) {
    if std::fs::metadata(path).is_ok_and(|m| m.ino() == ino) {
        let _ = std::fs::remove_file(path);
    }
}

/// The word at byte offset `off` of `map`; the callers keep `off` 8-aligned
/// and in bounds (checked at open/create, asserted in debug builds).
#[inline]
pub(crate) fn words(map: &memmap2::MmapRaw, off: usize) -> &AtomicU64 {
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
    /// The segment file's inode: the path is removed only while it is ours.
    ino: u64,
}

impl StatsWriter {
    /// Creates (or replaces) this process's segment of kind `kind` for
    /// `count` words, readable by everyone, writable by its owner.
    ///
    /// The segment is built in a new file and renamed into place, so a
    /// segment another writer of this process still maps (two stacks in one
    /// process) is replaced, never truncated under that writer (its
    /// accesses would fault, SIGBUS).
    ///
    /// Errors: those of creating, sizing, mapping or renaming the file.
    pub fn create(kind: &str, count: usize) -> io::Result<StatsWriter> {
        let path = segment_path(std::process::id(), kind);
        let (map, ino) = create_renamed(&path, VALUES_OFF + 8 * count, 0o644, |map| {
            let mut header = [0u8; 16];
            header[..8].copy_from_slice(MAGIC);
            header[8..12].copy_from_slice(&(count as u32).to_le_bytes());
            header[12..16].copy_from_slice(&std::process::id().to_le_bytes());
            for (i, chunk) in header.chunks(8).enumerate() {
                words(map, i * 8).store(
                    u64::from_le_bytes(chunk.try_into().expect("8 bytes")),
                    Ordering::Relaxed,
                );
            }
        })?;
        Ok(StatsWriter {
            map,
            count,
            path,
            ino,
        })
    }

    /// Words in the segment.
    pub fn capacity(&self) -> usize {
        self.count
    }

    /// Publishes `values` (at most `count` are taken; the rest keep their
    /// old values).
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
        remove_if_ours(&self.path, self.ino);
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
    fn stale_segments_of_dead_processes_are_removed_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("cs-stale-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A pid above the kernel's pid_max (4194304) never exists.
        let dead = 4_194_305u32;
        let me = std::process::id();
        let names = [
            format!("corestack-{dead}.stats"),
            format!("corestack-{dead}.trace.new3"),
            format!("corestack-{dead}.stats.e1"),
            format!("corestack-{dead}.conns.e12.new0"),
            format!("corestack-{me}.stats"),
            format!("corestack-{me}.conns.e1"),
            "corestack-x.stats".to_string(),
            "other-file".to_string(),
        ];
        for n in &names {
            std::fs::write(dir.join(n), b"x").unwrap();
        }
        assert_eq!(remove_stale_segments(&dir), 4);
        let left: Vec<bool> = names.iter().map(|n| dir.join(n).exists()).collect();
        assert_eq!(left, [false, false, false, false, true, true, true, true]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn engine_segment_names_parse_back_and_others_are_refused() {
        assert_eq!(engine_kind(STATS, 0), "stats");
        assert_eq!(engine_kind(CONNS, 3), "conns.e3");
        let of = |n: &str| engine_of_name(n, 42, STATS);
        assert_eq!(of("corestack-42.stats"), Some(0));
        assert_eq!(of("corestack-42.stats.e1"), Some(1));
        assert_eq!(of("corestack-42.stats.e17"), Some(17));
        for bad in [
            "corestack-42.stats.e0",
            "corestack-42.stats.e01",
            "corestack-42.stats.e",
            "corestack-42.stats.e1.new3",
            "corestack-42.stats.new0",
            "corestack-42.statsx",
            "corestack-421.stats",
            "corestack-4.stats",
            "corestack-42.conns.e1",
        ] {
            assert_eq!(of(bad), None, "{bad}");
        }
        for e in [0, 1, 9, 10, 255] {
            let name = format!("corestack-42.{}", engine_kind(STATS, e));
            assert_eq!(of(&name), Some(e));
        }
    }

    #[test]
    fn published_counters_read_back_and_file_goes_with_writer() {
        let dir = std::env::temp_dir().join(format!("cs-stats-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::env::set_var("CORESTACK_STATS_DIR", &dir);
        let path = stats_path(std::process::id());
        {
            let mut w = StatsWriter::create(STATS, 3).unwrap();
            w.publish([7u64, 8, 9].into_iter());
            let r = StatsReader::open(&path).unwrap();
            assert_eq!(r.pid(), std::process::id());
            assert_eq!(r.read(), Some(vec![7, 8, 9]));
            w.publish([1u64].into_iter());
            assert_eq!(r.read(), Some(vec![1, 8, 9]));
        }
        assert!(!path.exists(), "segment removed with its writer");
        // Two writers of one kind in one process (two stacks): the second
        // replaces the segment without truncating the first one's, which
        // keeps publishing; the path goes with the writer that owns it.
        let mut first = StatsWriter::create(STATS, 3).unwrap();
        let mut second = StatsWriter::create(STATS, 3).unwrap();
        first.publish([4u64, 5, 6].into_iter());
        second.publish([1u64, 2, 3].into_iter());
        assert_eq!(
            StatsReader::open(&path).unwrap().read(),
            Some(vec![1, 2, 3])
        );
        drop(first);
        assert!(
            path.exists(),
            "the first writer removed the second's segment"
        );
        drop(second);
        assert!(!path.exists());
        std::fs::write(&path, b"garbage that is long enough to look like a header but is not one at all, really not, no: 128 bytes and more .......").unwrap();
        assert_eq!(
            StatsReader::open(&path).err().map(|e| e.kind()),
            Some(io::ErrorKind::InvalidData)
        );
        // Several engines: each its own segment, found by engine.
        let w0 = StatsWriter::create(STATS, 1).unwrap();
        let w2 = StatsWriter::create(&engine_kind(STATS, 2), 1).unwrap();
        let c1 = StatsWriter::create(&engine_kind(CONNS, 1), 1).unwrap();
        let found = engine_segments(std::process::id(), STATS);
        assert_eq!(
            found,
            [
                (0, path.clone()),
                (2, segment_path(std::process::id(), "stats.e2"))
            ]
        );
        drop((w0, w2, c1));
        assert!(engine_segments(std::process::id(), STATS).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
