//! Per-stage timestamps of the critical path, for `corestack trace`.
//!
//! The engine and the application library stamp the moments a sampled
//! message passes (frame taken from the NIC ring, parsed, TCP input done,
//! bytes in the socket ring, application woken, read returned; write
//! called, command seen by the engine, TCP output, frame on the NIC ring)
//! with the TSC ([`clock`]: `rdtsc`, 11 ns a read on the development VM
//! against 27 ns for `clock_gettime(CLOCK_MONOTONIC_RAW)` through the vDSO)
//! and append them as [`Record`]s to a bounded ring in a shared segment,
//! `corestack-<pid>.trace` under /dev/shm, one per process (every engine
//! and socket of the process writes to it).
//!
//! With several engines (`--cores N`) the engines and the application's
//! threads write at once: each claims its slot with a compare-and-swap on
//! `head` and publishes it with the slot's own sequence word, so no two
//! writers share a slot and the observer takes only finished ones. Records
//! are per process: one does not say which engine wrote it. The report
//! joins records by connection ([`conn_key`]), and a connection lives on
//! one engine all its life (`corestack ss` names it).
//!
//! ```text
//! 0    magic "CSTRACE1" | segment length: u64
//! 64   every: u64   0 = off (the default), N = sample every Nth message  (observer writes)
//! 128  head: u64    records claimed so far                              (writers, CAS)
//! 192  tail: u64    records taken by the observer                       (observer)
//! 256  dropped: u64 records not written because the ring was full       (writers)
//! 320  RECORDS × 64-byte records: seq (claim index + 1, stored last, release),
//!      kind << 56 | bytes << 32 | key, position, t0..t4 (TSC ticks)
//! ```
//!
//! Off, each hook costs one load of `every` and one predictable branch.
//! On, the engine samples every Nth received data segment and every Nth
//! Send command; the application library records every read that returns
//! bytes and every write that queues some (the report joins them to the
//! engine's samples and ignores the rest).
//! Writers never wait: a full ring counts a drop. The observer (the CLI)
//! switches tracing on by writing `every`, drains the ring, and switches it
//! off; timestamps are converted with [`ticks_per_ns`], calibrated by the
//! observer against the monotonic clock (the TSC is invariant and shared by
//! all cores here: `constant_tsc`, `nonstop_tsc`).

use crate::observer_shm::{ObserverShm, Ring};
use core::sync::atomic::Ordering;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

/// The trace segment's kind (`corestack-<pid>.trace`).
pub const TRACE: &str = "trace";
const MAGIC: &[u8; 8] = b"CSTRACE1";
const EVERY_OFF: usize = 64;
const HEAD_OFF: usize = 128;
const TAIL_OFF: usize = 192;
const DROPS_OFF: usize = 256;
const RECS_OFF: usize = 320;
const REC_BYTES: usize = 64;
/// Records the ring holds.
pub const RECORDS: usize = 32768;
const SEG_BYTES: usize = RECS_OFF + RECORDS * REC_BYTES;
const RING: Ring = Ring {
    head: HEAD_OFF,
    tail: TAIL_OFF,
    drops: DROPS_OFF,
    slots_off: RECS_OFF,
    slots: RECORDS,
    slot_bytes: REC_BYTES,
};

/// The cheap clock: the TSC, in ticks (see [`ticks_per_ns`]).
#[inline]
pub fn clock() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        crate::tsc::rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// TSC ticks per nanosecond, measured against the monotonic clock over
/// `over` (20 ms gives 4 significant digits). 1.0 where [`clock`] counts ns.
pub fn ticks_per_ns(over: std::time::Duration) -> f64 {
    let (c0, t0) = (clock(), std::time::Instant::now());
    std::thread::sleep(over);
    let (c1, t1) = (clock(), std::time::Instant::now());
    let ns = t1.duration_since(t0).as_nanos().max(1) as f64;
    (c1.wrapping_sub(c0)) as f64 / ns
}

/// What a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Engine, a received TCP segment with data: t0 frame taken from the
    /// NIC ring, t1 headers parsed and connection found, t2 TCP input done
    /// (bytes about to be copied into the socket's RX ring), t3 bytes in
    /// the RX ring and the socket's status updated. `pos`: the RX ring's
    /// write position after them.
    Rx = 1,
    /// Application, a read that returned bytes: t0 the application saw them
    /// (the read call that found them began, or its wait ended), t1 the
    /// read returns. `pos`: the RX ring's read position after it; `bytes`:
    /// how many it returned.
    Read = 2,
    /// Application, a write that queued bytes: t0 the write is called, t1
    /// it returns. `pos`: the TX ring's write position after it; `bytes`:
    /// how many it queued.
    Write = 3,
    /// Engine, a send: t0 the engine took the application's Send command,
    /// t1 TCP output emitted its segments, t2 the frames are on the NIC's
    /// TX ring (the port flushed and kicked).
    Tx = 4,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Rx),
            2 => Some(Kind::Read),
            3 => Some(Kind::Write),
            4 => Some(Kind::Tx),
            _ => None,
        }
    }
}

/// One record. `key` names the connection the same way in the engine and
/// the application ([`conn_key`]); timestamps are [`clock`] ticks (0: not
/// taken).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// What was traced.
    pub kind: Kind,
    /// The connection ([`conn_key`]).
    pub key: u32,
    /// Bytes read or written (24 bits kept).
    pub bytes: u32,
    /// A ring position, as the record's [`Kind`] says.
    pub pos: u64,
    /// Stage timestamps t0..t4, as the record's [`Kind`] says.
    pub t: [u64; 5],
}

/// A connection's name in records: its local port in the high 16 bits,
/// the remote port in the low 16 (unique enough for the connections one
/// process traces at a time).
pub fn conn_key(local_port: u16, remote_port: u16) -> u32 {
    (u32::from(local_port) << 16) | u32::from(remote_port)
}

/// The writing end, cheap to clone: every engine and socket of a process
/// holds one to the process's segment ([`Tracer::process`]), or to an
/// unshared one that stays off ([`Tracer::off`]).
#[derive(Clone)]
pub struct Tracer(Arc<ObserverShm>);

static PROCESS: Mutex<Weak<ObserverShm>> = Mutex::new(Weak::new());

impl Tracer {
    /// A tracer nobody can switch on (no segment file).
    pub fn off() -> Tracer {
        Tracer(Arc::new(ObserverShm::anonymous(RECS_OFF, MAGIC)))
    }

    /// The process's tracer: its `corestack-<pid>.trace` segment, created
    /// by the first caller and removed when the last holder drops it; an
    /// unshared one (always off) without /dev/shm.
    pub fn process() -> Tracer {
        ObserverShm::process_shared(&PROCESS, TRACE, SEG_BYTES, MAGIC)
            .map_or_else(Tracer::off, Tracer)
    }

    /// 0 when tracing is off, else the sampling interval N (every Nth
    /// message is traced). One load; the hooks' only cost when off.
    #[inline]
    pub fn every(&self) -> u64 {
        self.0.word(EVERY_OFF).load(Ordering::Relaxed)
    }

    /// Whether tracing is on.
    #[inline]
    pub fn on(&self) -> bool {
        self.every() != 0
    }

    /// Appends `r`; counts a drop when the ring is full (or the segment is
    /// the unshared stand-in). Never waits, never allocates.
    pub fn record(&self, r: &Record) {
        let seg = &*self.0;
        if seg.len() < SEG_BYTES {
            return;
        }
        let Some((at, claimed)) = RING.claim(seg) else {
            return;
        };
        let w1 = (r.kind as u64) << 56 | u64::from(r.bytes & 0xff_ffff) << 32 | u64::from(r.key);
        seg.word(at + 8).store(w1, Ordering::Relaxed);
        seg.word(at + 16).store(r.pos, Ordering::Relaxed);
        for (i, t) in r.t.iter().enumerate() {
            seg.word(at + 24 + 8 * i).store(*t, Ordering::Relaxed);
        }
        RING.publish(seg, at, claimed);
    }

    /// The segment file's path (None for an unshared tracer).
    pub fn path(&self) -> Option<std::path::PathBuf> {
        self.0.path()
    }

    /// The observer's view of this process's segment (for tests and the
    /// in-process benchmark).
    pub fn control(&self) -> TraceControl {
        TraceControl {
            seg: Arc::clone(&self.0),
        }
    }
}

/// The observer's end: switches tracing on and off and drains records.
pub struct TraceControl {
    seg: Arc<ObserverShm>,
}

impl TraceControl {
    /// Opens the trace segment at `path` (another process's).
    ///
    /// Errors: those of opening or mapping it (EACCES: run as the engine's
    /// user or root); `InvalidData` when it is not a trace segment.
    pub fn open(path: &Path) -> io::Result<TraceControl> {
        let seg = ObserverShm::open_exact(path, MAGIC, SEG_BYTES, "trace")?;
        Ok(TraceControl { seg: Arc::new(seg) })
    }

    /// Switches tracing on, sampling every `every`th message (0 switches it
    /// off).
    pub fn set_every(&self, every: u64) {
        self.seg.word(EVERY_OFF).store(every, Ordering::Release);
    }

    /// The current sampling interval (0: off).
    pub fn every(&self) -> u64 {
        self.seg.word(EVERY_OFF).load(Ordering::Acquire)
    }

    /// Records dropped because the ring was full, since the segment was made.
    pub fn dropped(&self) -> u64 {
        RING.dropped(&self.seg)
    }

    /// Moves every finished record to `out` and frees its slot; returns how
    /// many. Records with an unknown kind are skipped (counted in the
    /// return value all the same).
    pub fn drain(&self, out: &mut Vec<Record>) -> usize {
        let seg = &*self.seg;
        if seg.len() < SEG_BYTES {
            return 0;
        }
        RING.drain(seg, |at| {
            let w1 = seg.word(at + 8).load(Ordering::Relaxed);
            let pos = seg.word(at + 16).load(Ordering::Relaxed);
            let mut ts = [0u64; 5];
            for (i, v) in ts.iter_mut().enumerate() {
                *v = seg.word(at + 24 + 8 * i).load(Ordering::Relaxed);
            }
            if let Some(kind) = Kind::from_u8((w1 >> 56) as u8) {
                out.push(Record {
                    kind,
                    key: w1 as u32,
                    bytes: ((w1 >> 32) & 0xff_ffff) as u32,
                    pos,
                    t: ts,
                });
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: u32, t0: u64) -> Record {
        Record {
            kind: Kind::Read,
            key,
            bytes: 64,
            pos: 128,
            t: [t0, t0 + 5, 0, 0, 0],
        }
    }

    #[test]
    fn tracer_off_by_default_records_round_trip_and_full_ring_counts_drops() {
        // In the temporary directory: other tests of this crate change
        // CORESTACK_STATS_DIR meanwhile.
        let path =
            std::env::temp_dir().join(format!("corestack-{}.trace-test", std::process::id()));
        let tracer = Tracer(Arc::new(
            ObserverShm::create_at(path.clone(), SEG_BYTES, MAGIC).unwrap(),
        ));
        let ctl = TraceControl::open(&path).unwrap();
        assert!(!tracer.on());
        ctl.set_every(3);
        assert_eq!(tracer.every(), 3);
        tracer.record(&rec(7, 100));
        let mut out = Vec::new();
        assert_eq!(ctl.drain(&mut out), 1);
        assert_eq!(out, vec![rec(7, 100)]);
        for i in 0..RECORDS as u64 + 10 {
            tracer.record(&rec(1, i));
        }
        assert_eq!(ctl.dropped(), 10);
        out.clear();
        assert_eq!(ctl.drain(&mut out), RECORDS);
        assert_eq!(out.last().unwrap().t[0], RECORDS as u64 - 1);
        ctl.set_every(0);
        assert!(!tracer.on());
        // Another holder keeps the segment; the last one removes it.
        let again = tracer.clone();
        drop(tracer);
        assert!(path.exists());
        drop((again, ctl));
        assert!(!path.exists());
    }

    #[test]
    fn calibration_is_positive() {
        assert!(ticks_per_ns(std::time::Duration::from_millis(5)) > 0.0);
    }
}
