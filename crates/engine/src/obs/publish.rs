//! An engine's counters and sockets published for observers in other
//! processes: `corestack stat` reads the counters, `corestack ss` the
//! connection table, from shared-memory segments under /dev/shm
//! (`/dev/shm/corestack-<pid>.stats` and `.conns` for engine 0, the only
//! one of most processes; `.stats.e<N>` and `.conns.e<N>` for engine N of
//! several, [`observe::stats_shm::engine_kind`]; the format is
//! `observe::stats_shm`'s). Each connection row names its engine.
//!
//! It also attaches the engine to the process's trace and capture segments
//! (`observe::trace`, `observe::capture`), which observers switch on.
//!
//! Whoever runs the engine loop wraps the engine in a [`Published`] and
//! calls [`Published::publish`] once per iteration: the embedded engine
//! thread and inline waiters of the application library, and the
//! `corestack run` daemon. It writes at most every [`STATS_EVERY`] and
//! allocates nothing once started. Single-threaded, like the engine;
//! readers go through each segment's sequence lock.

use crate::obs::stats::Stats;
use crate::time::Instant;
use crate::Engine;
use core::time::Duration;
use nic::Port;
use observe::stats_shm::{comm_bytes, engine_kind, StatsWriter, COMM_LEN, CONNS, ROW_WORDS, STATS};

/// How often the counters and sockets are published.
pub const STATS_EVERY: Duration = Duration::from_millis(10);

/// Rows of the published connection table (more connections are left out).
pub const CONN_ROWS: usize = 1024;

/// Socket slots one publication looks at for the connection table,
/// resuming where the last one stopped: publishing costs the same at any
/// number of sockets. With more slots than this, each publication shows
/// the sockets of the next window, and the whole table is seen within
/// `slots / CONN_SLOTS_PER_PUBLISH` publications.
pub const CONN_SLOTS_PER_PUBLISH: usize = CONN_ROWS;

/// How often the connection table is published, as the counters (the
/// shim's TCP_INFO reads it too).
pub const CONNS_EVERY: Duration = STATS_EVERY;

/// An engine that publishes its counters and sockets for `corestack stat`
/// and `corestack ss` (shared-memory segments under /dev/shm), at most
/// every [`STATS_EVERY`].
pub struct Published<P: Port> {
    /// The engine.
    pub engine: Engine<P>,
    /// The counters' segment; None without /dev/shm.
    segment: Option<StatsWriter>,
    /// The connection table for `corestack ss`; None without /dev/shm.
    conns: Option<StatsWriter>,
    /// Scratch for the table's rows, reserved once.
    rows: Vec<u64>,
    last: Instant,
    /// The process of the sockets without an owner (this one) and its name.
    own: (u32, [u8; COMM_LEN]),
    /// Service mode: the process of each owner (association), and its name.
    owners: Vec<(u32, u32, [u8; COMM_LEN])>,
    /// The slot the next connection table starts at.
    cursor: usize,
    /// When the connection table was last published.
    conns_last: Instant,
    /// The engine's index among the process's engines (its segments' and
    /// rows' engine), taken at [`Published::new`].
    index: usize,
}

impl<P: Port> Published<P> {
    /// Wraps `engine`; without /dev/shm (or without write access to it) it
    /// runs unpublished. The segments are those of the engine's index
    /// ([`Engine::index`]): join the engine to its handoff mesh first.
    pub fn new(mut engine: Engine<P>) -> Self {
        let index = engine.index();
        // The process's trace segment, for `corestack trace`.
        engine.set_tracer(observe::trace::Tracer::process());
        // And its capture segment, for `corestack capture`; frames say
        // which engine saw them.
        engine.set_capturer(observe::capture::Capturer::process().for_engine(index));
        // The segments are an observability aid: without /dev/shm the stack
        // still runs, it just cannot be watched from outside.
        let count = Stats::default().iter().count();
        Published {
            engine,
            segment: StatsWriter::create(&engine_kind(STATS, index), count).ok(),
            conns: StatsWriter::create(&engine_kind(CONNS, index), 1 + CONN_ROWS * ROW_WORDS).ok(),
            rows: Vec::with_capacity(CONN_ROWS * ROW_WORDS),
            last: Instant(0),
            own: (
                std::process::id(),
                comm_bytes(
                    std::fs::read_to_string("/proc/self/comm")
                        .unwrap_or_default()
                        .trim_end(),
                ),
            ),
            owners: Vec::new(),
            cursor: 0,
            conns_last: Instant(0),
            index,
        }
    }

    /// The engine's index among the process's engines (0 when alone): the
    /// engine its segments and connection rows name.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Service mode: the process id and name of each owner of sockets (an
    /// association id, as in [`observe::stats_shm::ConnRow::owner`]), shown
    /// with its sockets. Called when applications come and go.
    pub fn set_owners(&mut self, owners: impl Iterator<Item = (u32, u32, [u8; COMM_LEN])>) {
        self.owners.clear();
        self.owners.extend(owners);
    }

    /// Publishes counters and sockets if [`STATS_EVERY`] passed since the
    /// last time (or `force`); returns the counters when it did. O(1):
    /// the counters are kept current as the engine runs, and the
    /// connection table covers at most [`CONN_SLOTS_PER_PUBLISH`] slots.
    pub fn publish(&mut self, now: Instant, force: bool) -> Option<Stats> {
        if !force && now.saturating_since(self.last) < STATS_EVERY {
            return None;
        }
        self.last = now;
        let stats = self.engine.stats();
        if let Some(w) = self.segment.as_mut() {
            w.publish(stats.iter().map(|(_, v)| v));
        }
        let conns_due = force || now.saturating_since(self.conns_last) >= CONNS_EVERY;
        if let Some(w) = self.conns.as_mut().filter(|_| conns_due) {
            self.conns_last = now;
            // `rows` keeps the capacity reserved at start: no allocation here.
            let rows = &mut self.rows;
            let (own, owners) = (&self.own, &self.owners);
            let engine = u32::try_from(self.index).unwrap_or(u32::MAX);
            rows.clear();
            self.cursor =
                self.engine
                    .for_each_socket_from(self.cursor, CONN_SLOTS_PER_PUBLISH, |mut r| {
                        if rows.len() < CONN_ROWS * ROW_WORDS {
                            r.engine = engine;
                            (r.pid, r.comm) = match r.owner {
                                0 => *own,
                                o => owners
                                    .iter()
                                    .find(|(a, _, _)| *a == o)
                                    .map_or((0, [0; COMM_LEN]), |(_, p, c)| (*p, *c)),
                            };
                            rows.extend_from_slice(&r.encode());
                        }
                    });
            let n = (rows.len() / ROW_WORDS) as u64;
            w.publish(core::iter::once(n).chain(rows.iter().copied()));
        }
        Some(stats)
    }
}
