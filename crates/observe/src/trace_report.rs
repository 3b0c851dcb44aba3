//! The stage table of `corestack trace` from trace records
//! (`crate::trace`): records of the engine and of the application are
//! joined per connection, differences become stages, and each stage gets
//! its p50, p99 and mean in ns and its share of the stack's total.
//!
//! Joins: an engine `Rx` record goes with the application `Read` that
//! returned its last byte (same connection key, RX ring positions); an
//! engine `Tx` record goes with the last `Write` on the connection that was
//! called before the engine took the command. A round trip is a `Write`
//! whose `Tx` was traced followed by the next traced `Rx` on the connection
//! and its `Read`: write called → the reply's read returns; the time
//! between the frame on the NIC ring and the next frame taken from it is
//! outside the stack (the wire and the peer).

use crate::trace::{Kind, Record};
use std::collections::HashMap;
use std::fmt::Write as _;

/// The stages, in path order.
pub const STAGES: [&str; 8] = [
    "rx  NIC ring -> frame parsed",
    "rx  parsed -> TCP input done",
    "rx  TCP input -> in socket ring",
    "rx  socket ring -> app woken",
    "rx  app woken -> read returns",
    "tx  write called -> engine took it",
    "tx  command -> TCP output done",
    "tx  TCP output -> frame on NIC ring",
];

/// Figures of one stage (or of a round-trip line), ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Samples.
    pub n: usize,
    /// Smallest.
    pub min_ns: i64,
    /// Median.
    pub p50_ns: i64,
    /// 99th percentile.
    pub p99_ns: i64,
    /// Mean.
    pub mean_ns: f64,
}

impl Figures {
    /// The figures of `v` (sorted in place); all zero when empty.
    pub fn of(v: &mut [i64]) -> Figures {
        if v.is_empty() {
            return Figures::default();
        }
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Figures {
            n: v.len(),
            min_ns: v[0],
            p50_ns: at(0.50),
            p99_ns: at(0.99),
            mean_ns: v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64,
        }
    }
}

/// The round-trip view: what one end of a ping-pong sees.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RoundTrips {
    /// Write called → the next reply's read returns.
    pub round_trip: Figures,
    /// Frame on the NIC ring → the reply's frame taken from it: the wire
    /// and the peer.
    pub outside: Figures,
}

/// The breakdown of one trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Breakdown {
    /// One entry per [`STAGES`] line.
    pub stages: [Figures; 8],
    /// Round trips, when the trace holds write → reply chains.
    pub round_trips: Option<RoundTrips>,
}

/// Reads before the bytes' arrival in the ring that may still be theirs
/// (a read that saw them at the same tick).
const READ_LOOKBACK: usize = 8;
/// Reads looked at from there.
const READ_SCAN: usize = 256;

impl Breakdown {
    /// Joins `records` (any order, any processes) with TSC ticks converted
    /// at `ticks_per_ns`, keeping only connections whose key `keep` accepts.
    pub fn of(records: &[Record], ticks_per_ns: f64, keep: impl Fn(u32) -> bool) -> Breakdown {
        let ns = |a: u64, b: u64| ((b as i128 - a as i128) as f64 / ticks_per_ns).round() as i64;
        let mut by_key: HashMap<u32, Vec<&Record>> = HashMap::new();
        for r in records.iter().filter(|r| keep(r.key)) {
            by_key.entry(r.key).or_default().push(r);
        }
        let mut stages: [Vec<i64>; 8] = Default::default();
        let (mut rtt, mut outside) = (Vec::new(), Vec::new());
        for recs in by_key.values_mut() {
            recs.sort_by_key(|r| r.t[0]);
            let reads: Vec<&Record> = recs
                .iter()
                .copied()
                .filter(|r| r.kind == Kind::Read)
                .collect();
            let writes: Vec<&Record> = recs
                .iter()
                .copied()
                .filter(|r| r.kind == Kind::Write)
                .collect();
            // The read that returned these bytes: among the reads (sorted by
            // when they saw their bytes) from just before the bytes reached
            // the ring on, the first that covers them. Bounded, so a long
            // trace costs O(n log n), not O(n^2).
            let read_of = |rx: &Record| {
                let from = reads
                    .partition_point(|rd| rd.t[0] < rx.t[3])
                    .saturating_sub(READ_LOOKBACK);
                reads[from..].iter().take(READ_SCAN).copied().find(|rd| {
                    rd.pos >= rx.pos
                        && rd.pos.wrapping_sub(u64::from(rd.bytes)) < rx.pos
                        && rd.t[1] >= rx.t[3]
                })
            };
            let mut last_tx: Option<(&Record, Option<&Record>)> = None;
            for r in recs.iter().copied() {
                match r.kind {
                    Kind::Rx => {
                        for (i, stage) in stages.iter_mut().take(3).enumerate() {
                            stage.push(ns(r.t[i], r.t[i + 1]));
                        }
                        let read = read_of(r);
                        if let Some(rd) = read {
                            stages[3].push(ns(r.t[3], rd.t[0]));
                            stages[4].push(ns(rd.t[0], rd.t[1]));
                        }
                        if let Some((tx, wr)) = last_tx.take() {
                            outside.push(ns(tx.t[2], r.t[0]));
                            if let (Some(wr), Some(rd)) = (wr, read) {
                                rtt.push(ns(wr.t[0], rd.t[1]));
                            }
                        }
                    }
                    Kind::Tx => {
                        let wr = writes
                            .partition_point(|w| w.t[0] <= r.t[0])
                            .checked_sub(1)
                            .map(|i| writes[i]);
                        if let Some(w) = wr {
                            stages[5].push(ns(w.t[0], r.t[0]));
                        }
                        stages[6].push(ns(r.t[0], r.t[1]));
                        stages[7].push(ns(r.t[1], r.t[2]));
                        last_tx = Some((r, wr));
                    }
                    Kind::Read | Kind::Write => {}
                }
            }
        }
        let mut out = Breakdown::default();
        for (f, v) in out.stages.iter_mut().zip(stages.iter_mut()) {
            *f = Figures::of(v);
        }
        if !outside.is_empty() {
            out.round_trips = Some(RoundTrips {
                round_trip: Figures::of(&mut rtt),
                outside: Figures::of(&mut outside),
            });
        }
        out
    }

    /// The sum of the stages' means, ns: the stack's share of a round trip
    /// at this end.
    pub fn stack_mean_ns(&self) -> f64 {
        self.stages.iter().map(|f| f.mean_ns).sum()
    }

    /// The sum of the stages' medians, ns.
    pub fn stack_p50_ns(&self) -> i64 {
        self.stages.iter().map(|f| f.p50_ns).sum()
    }

    /// Whether every stage has samples.
    pub fn complete(&self) -> bool {
        self.stages.iter().all(|f| f.n > 0)
    }

    /// The table: one row per stage (samples, p50, p99, mean, share of the
    /// stack's total), the total, and the round-trip view.
    pub fn render(&self) -> String {
        let total = self.stack_mean_ns();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<38} {:>8} {:>9} {:>9} {:>9} {:>6}",
            "stage", "samples", "p50 ns", "p99 ns", "mean ns", "share"
        );
        for (name, f) in STAGES.iter().zip(self.stages.iter()) {
            let share = if total > 0.0 {
                100.0 * f.mean_ns / total
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "{:<38} {:>8} {:>9} {:>9} {:>9.0} {:>5.1}%",
                name, f.n, f.p50_ns, f.p99_ns, f.mean_ns, share
            );
        }
        let _ = writeln!(
            s,
            "{:<38} {:>8} {:>9} {:>9} {:>9.0} {:>5.1}%",
            "stack total (this end)",
            "",
            self.stack_p50_ns(),
            "",
            total,
            100.0
        );
        if let Some(rt) = &self.round_trips {
            let _ = writeln!(s);
            let _ = writeln!(
                s,
                "round trip at this end (write called -> reply read returns): {} samples, p50 {} ns, p99 {} ns, mean {:.0} ns",
                rt.round_trip.n, rt.round_trip.p50_ns, rt.round_trip.p99_ns, rt.round_trip.mean_ns
            );
            let _ = writeln!(
                s,
                "  stack stages at this end (sum of means): {total:.0} ns"
            );
            let _ = writeln!(
                s,
                "  outside the stack (frame on NIC ring -> reply frame taken: wire + peer): p50 {} ns, p99 {} ns, mean {:.0} ns",
                rt.outside.p50_ns, rt.outside.p99_ns, rt.outside.mean_ns
            );
        }
        s
    }
}

/// What [`collect`] gathered.
pub struct Collected {
    /// The records, as taken from the ring.
    pub records: Vec<Record>,
    /// Records the writers could not place (ring full) meanwhile.
    pub dropped: u64,
    /// TSC ticks per ns over the collection.
    pub ticks_per_ns: f64,
}

/// Switches tracing on in every segment of `controls` (sampling every
/// `every`th message), drains them while `busy` runs (it returns when the
/// traced work is over, e.g. after a duration; it is called repeatedly
/// with the time since the start until it returns false), switches tracing
/// off and takes what is left. The TSC is calibrated over the same time.
pub fn collect(
    controls: &[crate::trace::TraceControl],
    every: u64,
    mut busy: impl FnMut(std::time::Duration) -> bool,
) -> Collected {
    use crate::trace::clock;
    let dropped0: u64 = controls.iter().map(|c| c.dropped()).sum();
    let mut records = Vec::new();
    for c in controls {
        c.drain(&mut Vec::new()); // stale records of an earlier session
    }
    let (c0, t0) = (clock(), std::time::Instant::now());
    for c in controls {
        c.set_every(every.max(1));
    }
    while busy(t0.elapsed()) {
        for c in controls {
            c.drain(&mut records);
        }
    }
    for c in controls {
        c.set_every(0);
    }
    // Hooks that saw tracing on just before finish their records.
    std::thread::sleep(std::time::Duration::from_millis(5));
    for c in controls {
        c.drain(&mut records);
    }
    let (c1, t1) = (clock(), std::time::Instant::now());
    let ns = t1.duration_since(t0).as_nanos().max(1) as f64;
    Collected {
        records,
        dropped: controls.iter().map(|c| c.dropped()).sum::<u64>() - dropped0,
        ticks_per_ns: c1.wrapping_sub(c0) as f64 / ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(kind: Kind, key: u32, bytes: u32, pos: u64, t: [u64; 5]) -> Record {
        Record {
            kind,
            key,
            bytes,
            pos,
            t,
        }
    }

    #[test]
    fn write_tx_rx_read_chain_gives_every_stage_and_the_round_trip() {
        // Ticks at 2 per ns: write at 0, engine sends by 300, the reply
        // arrives at 1300 and is read at 1500.
        let recs = [
            r(Kind::Write, 9, 64, 64, [0, 20, 0, 0, 0]),
            r(Kind::Tx, 9, 0, 0, [100, 200, 300, 0, 0]),
            r(Kind::Rx, 9, 0, 64, [1300, 1320, 1360, 1380, 0]),
            r(Kind::Read, 9, 64, 64, [1400, 1500, 0, 0, 0]),
            // Another connection, filtered out.
            r(Kind::Rx, 5, 0, 64, [0, 1, 2, 3, 0]),
        ];
        let b = Breakdown::of(&recs, 2.0, |k| k == 9);
        let p50: Vec<i64> = b.stages.iter().map(|f| f.p50_ns).collect();
        assert_eq!(p50, vec![10, 20, 10, 10, 50, 50, 50, 50]);
        assert!(b.complete());
        let rt = b.round_trips.unwrap();
        assert_eq!(rt.round_trip.p50_ns, 750);
        assert_eq!(rt.outside.p50_ns, 500);
        assert_eq!(b.stack_p50_ns() + rt.outside.p50_ns, rt.round_trip.p50_ns);
        assert!(b.render().contains("rx  NIC ring -> frame parsed"));
    }

    #[test]
    fn rx_without_its_read_leaves_app_stages_empty() {
        let recs = [
            r(Kind::Rx, 1, 0, 64, [0, 1, 2, 3, 0]),
            r(Kind::Read, 1, 64, 200, [10, 11, 0, 0, 0]),
        ];
        let b = Breakdown::of(&recs, 1.0, |_| true);
        assert_eq!(b.stages[0].n, 1);
        assert_eq!(b.stages[3].n, 0);
        assert!(!b.complete());
        assert!(b.round_trips.is_none());
    }
}
