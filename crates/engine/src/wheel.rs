//! A hashed timer wheel (Varghese & Lauck): `SLOTS` buckets of `TICK`, each
//! holding (deadline, key) entries. Deadlines beyond one turn stay in their
//! bucket until a later turn reaches them. Entries are never removed early:
//! the owner ignores a firing whose deadline it no longer wants, which makes
//! rescheduling O(1).

use crate::time::Instant;

const SLOTS: usize = 1024;
/// Granularity: 1 ms in ns.
const TICK_NS: u64 = 1_000_000;

/// Timer wheel keyed by `u32` (a socket slot).
pub struct TimerWheel {
    slots: Vec<Vec<(Instant, u32)>>,
    /// The next tick to process.
    cursor: u64,
    len: usize,
}

impl TimerWheel {
    /// An empty wheel starting at `now`; each bucket preallocates `per_slot` entries.
    pub fn new(now: Instant, per_slot: usize) -> TimerWheel {
        TimerWheel {
            slots: (0..SLOTS).map(|_| Vec::with_capacity(per_slot)).collect(),
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

    /// Schedules `key` at `deadline` (rounded up to the next tick).
    pub fn schedule(&mut self, key: u32, deadline: Instant) {
        let tick = deadline.0.div_ceil(TICK_NS).max(self.cursor);
        self.slots[(tick as usize) % SLOTS].push((deadline, key));
        self.len += 1;
    }

    /// The earliest deadline held (including entries their owner no longer
    /// wants), or None when the wheel is empty. O(buckets + entries): for an
    /// idle loop or a simulation that skips ahead, not for every iteration.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.slots.iter().flatten().map(|&(at, _)| at).min()
    }

    /// Moves every entry due at `now` into `out` as (deadline, key).
    /// Returns the entries looked at (due or not): the work done.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<(Instant, u32)>) -> usize {
        let now_tick = now.0 / TICK_NS;
        if now_tick < self.cursor || self.len == 0 {
            self.cursor = self.cursor.max(now_tick);
            return 0;
        }
        let mut scanned = 0;
        // After a long pause one turn covers every bucket.
        let ticks = (now_tick - self.cursor + 1).min(SLOTS as u64);
        for t in 0..ticks {
            let slot = &mut self.slots[((self.cursor + t) as usize) % SLOTS];
            scanned += slot.len();
            let mut i = 0;
            while i < slot.len() {
                if slot[i].0 <= now {
                    out.push(slot.swap_remove(i));
                    self.len -= 1;
                } else {
                    i += 1;
                }
            }
        }
        self.cursor = now_tick + 1;
        scanned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn due_entries_fire_and_later_ones_wait() {
        let mut w = TimerWheel::new(Instant(0), 4);
        w.schedule(1, Instant(5 * MS));
        w.schedule(2, Instant(3000 * MS)); // beyond one turn
        let mut out = Vec::new();
        w.expire(Instant(4 * MS), &mut out);
        assert!(out.is_empty());
        w.expire(Instant(5 * MS), &mut out);
        assert_eq!(out, vec![(Instant(5 * MS), 1)]);
        out.clear();
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
        let mut out = Vec::new();
        w.expire(Instant(10_000 * MS), &mut out);
        assert_eq!(out.len(), 50);
    }

    #[test]
    fn deadline_in_the_past_fires_on_next_expire() {
        let mut w = TimerWheel::new(Instant(100 * MS), 4);
        w.schedule(7, Instant(MS));
        let mut out = Vec::new();
        w.expire(Instant(100 * MS), &mut out);
        assert_eq!(out.len(), 1);
    }
}
