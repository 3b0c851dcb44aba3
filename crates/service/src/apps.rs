//! The daemon's application table for `corestack stat`: one [`AppRow`] per
//! association, published every 10 ms in this process's shared segment of
//! kind [`APPS`] (`/dev/shm/corestack-<pid>.apps`), next to the engine's
//! counters and connection table. The row format and its codec live in
//! `observe::stats_shm`, where `corestack stat` reads them too.
//!
//! Single-threaded: the daemon's loop publishes; readers in other processes
//! go through the segment's sequence lock.

use observe::stats_shm::{StatsWriter, APPS, APP_WORDS};

pub use observe::stats_shm::AppRow;

/// Applications the segment has room for (more are left out of it).
pub const APP_ROWS: usize = 256;

/// The writer of the application table.
pub struct AppsPublisher {
    segment: StatsWriter,
    /// Scratch for the encoded rows, reserved once and reused.
    words: Vec<u64>,
}

impl AppsPublisher {
    /// Creates this process's APPS segment (room for [`APP_ROWS`] rows).
    /// None when it cannot be created (no /dev/shm, or not writable): the
    /// daemon runs on, unobserved.
    pub fn new() -> Option<AppsPublisher> {
        let segment = StatsWriter::create(APPS, 1 + APP_ROWS * APP_WORDS).ok()?;
        Some(AppsPublisher {
            segment,
            words: Vec::with_capacity(APP_ROWS * APP_WORDS),
        })
    }

    /// Replaces the published table with `rows` (the first [`APP_ROWS`]).
    /// Allocates nothing once the scratch buffer has grown (it is reserved
    /// for the full table at creation).
    pub fn publish(&mut self, rows: impl Iterator<Item = AppRow>) {
        self.words.clear();
        for row in rows.take(APP_ROWS) {
            self.words.extend_from_slice(&row.encode());
        }
        let n = (self.words.len() / APP_WORDS) as u64;
        self.segment
            .publish(core::iter::once(n).chain(self.words.iter().copied()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use observe::stats_shm::{segment_path, table_rows, StatsReader};

    #[test]
    fn published_apps_read_back_and_segment_goes_with_publisher() {
        // Uses the default directory: setting CORESTACK_STATS_DIR here would
        // race with other tests of this binary.
        // corestack's statistics live in /dev/shm: a machine without a
        // writable one cannot run `stat` either, so this fails there.
        let mut p = AppsPublisher::new().expect("a writable /dev/shm for the apps segment");
        let path = segment_path(std::process::id(), APPS);
        let row = |assoc: u32, name: &str| AppRow {
            assoc,
            pid: 4242,
            uid: 1000,
            name: name.into(),
            commands: 10 * u64::from(assoc),
            opens: 2,
            closes: 1,
            refused: 0,
        };
        p.publish([row(1, "echo"), row(2, "nc")].into_iter());
        let r = StatsReader::open(&path).unwrap();
        let words = r.read().unwrap();
        let back: Vec<AppRow> = table_rows(&words, APP_WORDS).map(AppRow::decode).collect();
        assert_eq!(back, vec![row(1, "echo"), row(2, "nc")]);
        // A shorter table replaces the longer one.
        p.publish([row(2, "nc")].into_iter());
        let words = r.read().unwrap();
        let back: Vec<AppRow> = table_rows(&words, APP_WORDS).map(AppRow::decode).collect();
        assert_eq!(back, vec![row(2, "nc")]);
        // More than fit: the first APP_ROWS are kept.
        p.publish((1..=APP_ROWS as u32 + 5).map(|a| row(a, "many")));
        let words = r.read().unwrap();
        let back: Vec<AppRow> = table_rows(&words, APP_WORDS).map(AppRow::decode).collect();
        assert_eq!(back.len(), APP_ROWS);
        assert_eq!(back[APP_ROWS - 1].assoc, APP_ROWS as u32);
        drop(p);
        assert!(!path.exists(), "segment removed with its publisher");
    }
}
