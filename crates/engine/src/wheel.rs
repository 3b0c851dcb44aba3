//! A hierarchical timer wheel (Varghese & Lauck, scheme 7), keyed by socket
//! slot.
//!
//! - Level 0: [`SLOTS`] buckets of one tick (1 ms), holding the deadlines of
//!   the next [`SLOTS`] ticks; each bucket holds exactly one tick's entries,
//!   so a bucket reached is due whole.
//! - Level 1: [`SLOTS`] buckets of [`SLOTS`] ticks (about 1.05 s each,
//!   17.9 min in all). When the cursor enters a level-1 bucket's span, the
//!   bucket is cascaded into level 0.
//! - Overflow: deadlines further out than level 1 reaches, placed again each
//!   time level 1 turns over (every 17.9 min).
//!
//! An entry is looked at when it is placed, at most twice more when it
//! cascades, and when it fires: its cost does not grow with how far out it
//! is, or with how many other timers wait (a single hashed wheel rescans a
//! 60 s timer every turn). Entries are never removed early: the owner
//! ignores a firing whose deadline it no longer wants, which makes
//! rescheduling O(1).

use crate::time::Instant;

/// Buckets per level.
const SLOTS: usize = 1024;
/// log2(`SLOTS`): a tick's level-1 index is `tick >> LEVEL_SHIFT`.
const LEVEL_SHIFT: u32 = 10;
/// Granularity: 1 ms in ns.
const TICK_NS: u64 = 1_000_000;

/// One scheduled entry: (deadline, key).
type Entry = (Instant, u32);

/// Timer wheel keyed by `u32` (a socket slot).
pub struct TimerWheel {
    /// Level 0, by tick.
    near: Vec<Vec<Entry>>,
    /// Level 1, by `tick >> LEVEL_SHIFT`.
    far: Vec<Vec<Entry>>,
    /// Beyond level 1.
    overflow: Vec<Entry>,
    /// The next tick to process.
    cursor: u64,
    len: usize,
}

/// Where an entry due at `tick` goes while the cursor is at `cursor`.
enum Place {
    Near(usize),
    Far(usize),
    Overflow,
}

fn place(tick: u64, cursor: u64) -> Place {
    if tick - cursor < SLOTS as u64 {
        Place::Near((tick % SLOTS as u64) as usize)
    } else if (tick >> LEVEL_SHIFT) - (cursor >> LEVEL_SHIFT) < SLOTS as u64 {
        Place::Far(((tick >> LEVEL_SHIFT) % SLOTS as u64) as usize)
    } else {
        Place::Overflow
    }
}

/// The tick an entry is due at: its deadline rounded up to a tick, never
/// before `cursor`.
fn tick_of(at: Instant, cursor: u64) -> u64 {
    at.0.div_ceil(TICK_NS).max(cursor)
}

impl TimerWheel {
    /// An empty wheel starting at `now`; each level-0 bucket preallocates
    /// `per_slot` entries.
    pub fn new(now: Instant, per_slot: usize) -> TimerWheel {
        TimerWheel {
            near: (0..SLOTS).map(|_| Vec::with_capacity(per_slot)).collect(),
            far: (0..SLOTS).map(|_| Vec::new()).collect(),
            overflow: Vec::new(),
            cursor: now.0 / TICK_NS,
            len: 0,
        }
    }

    /// Entries held, including ones their owner no longer wants.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedules `key` at `deadline` (rounded up to the next tick; a
    /// deadline already past fires at the next [`TimerWheel::expire`]).
    pub fn schedule(&mut self, key: u32, deadline: Instant) {
        self.insert((deadline, key));
        self.len += 1;
    }

    /// Puts `e` where it belongs for the current cursor (not counted).
    fn insert(&mut self, e: Entry) {
        match place(tick_of(e.0, self.cursor), self.cursor) {
            Place::Near(i) => self.near[i].push(e),
            Place::Far(i) => self.far[i].push(e),
            Place::Overflow => self.overflow.push(e),
        }
    }

    /// The earliest deadline held (including entries their owner no longer
    /// wants), or None when the wheel is empty. O(buckets + entries): for an
    /// idle loop or a simulation that skips ahead, not for every iteration.
    pub fn next_deadline(&self) -> Option<Instant> {
        let all = self.near.iter().chain(&self.far).flatten();
        all.chain(&self.overflow).map(|&(at, _)| at).min()
    }

    /// Moves every entry due at `now` into `out` as (deadline, key).
    /// Returns the entries looked at (due, cascaded or placed again): the
    /// work done.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<Entry>) -> usize {
        let now_tick = now.0 / TICK_NS;
        if now_tick < self.cursor || self.len == 0 {
            self.cursor = self.cursor.max(now_tick);
            return 0;
        }
        if now_tick - self.cursor >= SLOTS as u64 {
            return self.jump(now, out);
        }
        let mut looked = 0;
        while self.cursor <= now_tick {
            let t = self.cursor;
            if t.is_multiple_of(SLOTS as u64) {
                looked += self.cascade(t);
            }
            let bucket = &mut self.near[(t % SLOTS as u64) as usize];
            // Every entry of this bucket is due at tick t <= now_tick.
            looked += bucket.len();
            self.len -= bucket.len();
            out.append(bucket);
            self.cursor += 1;
        }
        looked
    }

    /// The cursor enters level-1 bucket `t >> LEVEL_SHIFT` (t is a multiple
    /// of `SLOTS`): that bucket moves into level 0, after the overflow is
    /// placed again when level 1 turns over. Returns the entries moved.
    fn cascade(&mut self, t: u64) -> usize {
        let mut moved = 0;
        let coarse = t >> LEVEL_SHIFT;
        if coarse.is_multiple_of(SLOTS as u64) && !self.overflow.is_empty() {
            let overflow = core::mem::take(&mut self.overflow);
            moved += overflow.len();
            for e in overflow {
                self.insert(e);
            }
        }
        let i = (coarse % SLOTS as u64) as usize;
        let bucket = core::mem::take(&mut self.far[i]);
        moved += bucket.len();
        for &e in &bucket {
            self.insert(e);
        }
        // Give the (now empty) allocation back to its bucket.
        let mut bucket = bucket;
        bucket.clear();
        self.far[i] = bucket;
        moved
    }

    /// After a pause of a turn or more (a simulation skipping ahead, a
    /// stalled loop): every entry is looked at once; the due ones go to
    /// `out`, the rest are placed again from the new cursor.
    fn jump(&mut self, now: Instant, out: &mut Vec<Entry>) -> usize {
        let mut held = core::mem::take(&mut self.overflow);
        for b in self.near.iter_mut().chain(self.far.iter_mut()) {
            held.append(b);
        }
        let looked = held.len();
        self.cursor = now.0 / TICK_NS + 1;
        for e in held {
            if e.0 <= now {
                out.push(e);
                self.len -= 1;
            } else {
                self.insert(e);
            }
        }
        looked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;

    const MS: u64 = 1_000_000;

    #[test]
    fn due_entries_fire_and_later_ones_wait() {
        let mut w = TimerWheel::new(Instant(0), 4);
        w.schedule(1, Instant(5 * MS));
        w.schedule(2, Instant(3000 * MS)); // beyond level 0
        let mut out = Vec::new();
        w.expire(Instant(4 * MS), &mut out);
        assert!(out.is_empty());
        w.expire(Instant(5 * MS), &mut out);
        assert_eq!(out, vec![(Instant(5 * MS), 1)]);
        out.clear();
        for ms in (6..3000).step_by(7) {
            w.expire(Instant(ms * MS), &mut out);
        }
        w.expire(Instant(2999 * MS), &mut out);
        assert!(out.is_empty());
        w.expire(Instant(3000 * MS), &mut out);
        assert_eq!(out, vec![(Instant(3000 * MS), 2)]);
        assert!(w.is_empty());
    }

    #[test]
    fn long_pause_fires_everything_due() {
        let mut w = TimerWheel::new(Instant(0), 4);
        for k in 0..50 {
            w.schedule(k, Instant(u64::from(k) * 97 * MS));
        }
        w.schedule(99, Instant(20_000 * MS));
        let mut out = Vec::new();
        w.expire(Instant(10_000 * MS), &mut out);
        assert_eq!(out.len(), 50);
        out.clear();
        w.expire(Instant(19_999 * MS), &mut out);
        assert!(out.is_empty());
        w.expire(Instant(20_000 * MS), &mut out);
        assert_eq!(out, vec![(Instant(20_000 * MS), 99)]);
    }

    #[test]
    fn deadline_in_the_past_fires_on_next_expire() {
        let mut w = TimerWheel::new(Instant(100 * MS), 4);
        w.schedule(7, Instant(MS));
        let mut out = Vec::new();
        w.expire(Instant(100 * MS), &mut out);
        assert_eq!(out.len(), 1);
    }

    /// 10 000 timers 60 s out, the wheel expired every millisecond for 61 s:
    /// each entry is looked at a bounded number of times (moved from level
    /// 1, then fired), not once a turn as in a single hashed wheel (which
    /// looks at each about 60 times here).
    #[test]
    fn far_timers_are_looked_at_a_bounded_number_of_times() {
        let n = 10_000u32;
        let mut w = TimerWheel::new(Instant(0), 4);
        for k in 0..n {
            w.schedule(k, Instant(60_000 * MS + u64::from(k) * 1000));
        }
        let mut out = Vec::new();
        let mut looked = 0;
        for ms in 1..=61_000 {
            looked += w.expire(Instant(ms * MS), &mut out);
        }
        assert_eq!(out.len(), n as usize);
        assert!(w.is_empty());
        assert!(
            looked <= 3 * n as usize,
            "{looked} looks for {n} far timers"
        );
    }

    /// Against a reference: random schedules (near, far, beyond level 1,
    /// past) and random steps of time (single ticks, turns, long pauses);
    /// every entry fires exactly once, not before its deadline and no later
    /// than the first expire at or after its deadline's tick.
    #[test]
    fn matches_a_sorted_reference_under_random_steps() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        for _round in 0..20 {
            let start = rng.gen_range(0..5_000_000) * MS;
            let mut now = start;
            let mut w = TimerWheel::new(Instant(now), 4);
            // (the tick it is due at, deadline, key)
            let mut pending: BTreeSet<(u64, u64, u32)> = BTreeSet::new();
            let mut out = Vec::new();
            let mut key = 0u32;
            for _ in 0..4000 {
                for _ in 0..rng.gen_range(0..4) {
                    let span = match rng.gen_range(0..10) {
                        0 => 40_000_000 * MS, // beyond level 1 (about 11 h)
                        1..=2 => 3_000_000 * MS,
                        3..=5 => 5_000 * MS,
                        _ => 1_500 * MS,
                    };
                    let at = (now + rng.gen_range(0..span)).saturating_sub(2 * MS);
                    w.schedule(key, Instant(at));
                    pending.insert((tick_of(Instant(at), w.cursor), at, key));
                    key += 1;
                }
                now += match rng.gen_range(0..20) {
                    0 => rng.gen_range(0..50_000_000) * MS,
                    1..=3 => rng.gen_range(0..3_000) * MS,
                    _ => rng.gen_range(0..3) * MS,
                };
                out.clear();
                w.expire(Instant(now), &mut out);
                for &(at, k) in &out {
                    assert!(
                        at.0 <= now,
                        "fired {k} at {now} before its deadline {}",
                        at.0
                    );
                    let due = pending.iter().find(|p| p.2 == k).copied();
                    assert!(
                        due.is_some_and(|d| pending.remove(&d)),
                        "{k} fired twice or never scheduled"
                    );
                }
                if let Some(&(tick, at, k)) = pending.first() {
                    assert!(
                        tick > now / MS,
                        "{k} (deadline {at}, tick {tick}) still waits at {now}"
                    );
                }
                assert_eq!(w.len(), pending.len());
            }
        }
    }
}
