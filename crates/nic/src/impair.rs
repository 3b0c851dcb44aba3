//! Seeded link impairments: loss, duplication, corruption, reordering,
//! delay and jitter, applied one frame at a time.
//!
//! Shared by the in-memory wire ([`crate::mem`]) and the AF_PACKET bridge
//! ([`crate::bridge`]), in the role `tc netem` plays for Linux. Given the same
//! seed, the same frames pushed at the same times come out the same way: the
//! only randomness is a `Pcg64` seeded by the caller.
//!
//! Frames live in a pool of fixed slots allocated by [`Impairer::new`]; push
//! and pop copy bytes but never allocate. When every slot is in use a pushed
//! frame is dropped and counted (`queue_full`).
//!
//! Per pushed frame, in this order: loss (drop it), corruption (flip one
//! random bit of one random byte), duplication (queue it twice), reordering
//! (hold it back until the next frame has been queued, or until one delay
//! (at least 1 ms) has passed). Each queued copy is due `delay_ns` plus a
//! uniform `0..=jitter_ns` after the push; frames leave in queue order (jitter
//! delays but never reorders; use `reorder` for that).

#![forbid(unsafe_code)]

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// The largest frame an [`Impairer`] built by [`Impairer::new`] holds, in bytes.
pub const DEFAULT_MAX_FRAME: usize = 2048;
/// The number of frame slots of an [`Impairer`] built by [`Impairer::new`].
pub const DEFAULT_SLOTS: usize = 1024;

/// The impairments of one direction of a link. Probabilities are in `0..=1`
/// (values outside are clamped); the default impairs nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Impairments {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that one bit of a frame is flipped.
    pub corrupt: f64,
    /// Probability that a frame is held back behind the next one.
    pub reorder: f64,
    /// Fixed one-way delay, in ns.
    pub delay_ns: u64,
    /// Extra delay drawn uniformly from `0..=jitter_ns`, in ns.
    pub jitter_ns: u64,
}

impl Impairments {
    /// No impairment at all.
    pub fn none() -> Impairments {
        Impairments::default()
    }

    /// Only loss, with probability `p`.
    pub fn loss(p: f64) -> Impairments {
        Impairments {
            loss: p,
            ..Impairments::default()
        }
    }
}

/// Counters of what an [`Impairer`] did, in frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImpairStats {
    /// Frames pushed.
    pub pushed: u64,
    /// Frames (copies included) handed out by `pop_due`.
    pub delivered: u64,
    /// Frames dropped by `loss`.
    pub lost: u64,
    /// Frames queued a second time by `duplicate`.
    pub duplicated: u64,
    /// Frames with one bit flipped by `corrupt`.
    pub corrupted: u64,
    /// Frames held back behind the next one by `reorder`.
    pub reordered: u64,
    /// Frames (or copies) dropped because every slot was in use.
    pub queue_full: u64,
    /// Frames dropped because they were longer than a slot.
    pub oversize: u64,
}

/// One queued copy of a frame.
#[derive(Debug, Clone, Copy)]
struct Entry {
    slot: usize,
    len: usize,
    due_ns: u64,
}

/// A seeded impairment queue for one direction of a link.
#[derive(Debug)]
pub struct Impairer {
    imp: Impairments,
    rng: Pcg64,
    max_frame: usize,
    /// `slots * max_frame` bytes of frame storage.
    storage: Vec<u8>,
    free: Vec<usize>,
    queue: VecDeque<Entry>,
    /// A frame held back by `reorder`, and when it was held (ns).
    held: Option<(Entry, u64)>,
    /// The slot handed out by the last `pop_due`, freed at the next call.
    lent: Option<usize>,
    last_due_ns: u64,
    stats: ImpairStats,
}

fn clamp01(p: f64) -> f64 {
    if p.is_nan() {
        0.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

impl Impairer {
    /// An impairer with [`DEFAULT_SLOTS`] slots of [`DEFAULT_MAX_FRAME`] bytes.
    pub fn new(imp: Impairments, seed: u64) -> Impairer {
        Impairer::with_capacity(imp, seed, DEFAULT_SLOTS, DEFAULT_MAX_FRAME)
    }

    /// An impairer holding at most `slots` frames of at most `max_frame`
    /// bytes each (both at least 1); allocates all storage now.
    pub fn with_capacity(imp: Impairments, seed: u64, slots: usize, max_frame: usize) -> Impairer {
        let slots = slots.max(1);
        let max_frame = max_frame.max(1);
        let imp = Impairments {
            loss: clamp01(imp.loss),
            duplicate: clamp01(imp.duplicate),
            corrupt: clamp01(imp.corrupt),
            reorder: clamp01(imp.reorder),
            ..imp
        };
        Impairer {
            imp,
            rng: Pcg64::seed_from_u64(seed),
            max_frame,
            storage: vec![0; slots * max_frame],
            free: (0..slots).rev().collect(),
            queue: VecDeque::with_capacity(slots),
            held: None,
            lent: None,
            last_due_ns: 0,
            stats: ImpairStats::default(),
        }
    }

    /// The impairments in effect (probabilities clamped to `0..=1`).
    pub fn impairments(&self) -> Impairments {
        self.imp
    }

    /// The largest frame accepted, in bytes.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// What has been done so far.
    pub fn stats(&self) -> ImpairStats {
        self.stats
    }

    /// Frames waiting (queued or held back), copies included.
    pub fn len(&self) -> usize {
        self.queue.len() + usize::from(self.held.is_some())
    }

    /// Whether no frame is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn release_lent(&mut self) {
        if let Some(slot) = self.lent.take() {
            self.free.push(slot);
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        // One draw per decision whatever `p` is, so that the random sequence
        // depends only on the frame sequence.
        let x: f64 = self.rng.gen();
        x < p
    }

    fn due(&mut self, now_ns: u64) -> u64 {
        let jitter = if self.imp.jitter_ns > 0 {
            self.rng.gen_range(0..=self.imp.jitter_ns)
        } else {
            0
        };
        let due = now_ns
            .saturating_add(self.imp.delay_ns)
            .saturating_add(jitter)
            .max(self.last_due_ns);
        self.last_due_ns = due;
        due
    }

    /// Stores `frame` in a free slot; None (counted) when none is free.
    fn store(&mut self, frame: &[u8]) -> Option<usize> {
        let Some(slot) = self.free.pop() else {
            self.stats.queue_full += 1;
            return None;
        };
        let start = slot * self.max_frame;
        self.storage[start..start + frame.len()].copy_from_slice(frame);
        Some(slot)
    }

    /// Offers one frame to the link at time `now_ns` (ns, any monotonic
    /// clock shared with `pop_due`). The frame is copied; it may be dropped,
    /// corrupted, duplicated or held back as configured.
    pub fn push(&mut self, now_ns: u64, frame: &[u8]) {
        self.release_lent();
        self.stats.pushed += 1;
        if frame.len() > self.max_frame {
            self.stats.oversize += 1;
            return;
        }
        let lose = self.chance(self.imp.loss);
        let corrupt = self.chance(self.imp.corrupt);
        let duplicate = self.chance(self.imp.duplicate);
        let reorder = self.chance(self.imp.reorder);
        if lose {
            self.stats.lost += 1;
            return;
        }
        let Some(slot) = self.store(frame) else {
            return;
        };
        if corrupt && !frame.is_empty() {
            let byte = self.rng.gen_range(0..frame.len());
            let bit: u32 = self.rng.gen_range(0..8);
            self.storage[slot * self.max_frame + byte] ^= 1 << bit;
            self.stats.corrupted += 1;
        }
        let entry = Entry {
            slot,
            len: frame.len(),
            due_ns: 0,
        };
        if reorder && self.held.is_none() {
            self.stats.reordered += 1;
            self.held = Some((entry, now_ns));
            if duplicate {
                self.enqueue_copy(now_ns, entry);
            }
            return;
        }
        self.enqueue(now_ns, entry);
        if duplicate {
            self.enqueue_copy(now_ns, entry);
        }
        // A held frame goes out behind the frame that followed it.
        if let Some((held, _)) = self.held.take() {
            self.enqueue(now_ns, held);
        }
    }

    fn enqueue(&mut self, now_ns: u64, mut entry: Entry) {
        entry.due_ns = self.due(now_ns);
        self.queue.push_back(entry);
    }

    fn enqueue_copy(&mut self, now_ns: u64, entry: Entry) {
        let start = entry.slot * self.max_frame;
        let Some(slot) = self.free.pop() else {
            self.stats.queue_full += 1;
            return;
        };
        self.storage
            .copy_within(start..start + entry.len, slot * self.max_frame);
        self.stats.duplicated += 1;
        self.enqueue(now_ns, Entry { slot, ..entry });
    }

    /// The next frame due at `now_ns`, if any; the slice stays valid until
    /// the next call on this impairer.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<&[u8]> {
        self.release_lent();
        if let Some((held, since)) = self.held {
            let hold_ns = self.imp.delay_ns.max(1_000_000);
            if now_ns.saturating_sub(since) >= hold_ns {
                self.held = None;
                self.enqueue(now_ns, held);
            }
        }
        let head = self.queue.front()?;
        if head.due_ns > now_ns {
            return None;
        }
        let entry = self.queue.pop_front()?;
        self.lent = Some(entry.slot);
        self.stats.delivered += 1;
        let start = entry.slot * self.max_frame;
        Some(&self.storage[start..start + entry.len])
    }

    /// When the next frame falls due (ns), if one is waiting.
    pub fn next_due_ns(&self) -> Option<u64> {
        let queued = self.queue.front().map(|e| e.due_ns);
        let held = self
            .held
            .map(|(_, since)| since.saturating_add(self.imp.delay_ns.max(1_000_000)));
        match (queued, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An impairer seeded with `seed` with only what `set` sets.
    fn impairer(set: impl FnOnce(&mut Impairments), seed: u64) -> Impairer {
        let mut imp = Impairments::none();
        set(&mut imp);
        Impairer::new(imp, seed)
    }

    #[test]
    fn no_impairment_push_pops_same_frame() {
        let mut imp = Impairer::new(Impairments::none(), 1);
        imp.push(0, b"abc");
        assert_eq!(imp.pop_due(0), Some(&b"abc"[..]));
        assert_eq!(imp.pop_due(0), None);
    }

    #[test]
    fn delay_frame_not_due_before_delay() {
        let mut imp = impairer(|i| i.delay_ns = 1000, 1);
        imp.push(10, b"x");
        assert_eq!(imp.pop_due(1009), None);
        assert_eq!(imp.next_due_ns(), Some(1010));
        assert_eq!(imp.pop_due(1010), Some(&b"x"[..]));
    }

    #[test]
    fn full_queue_push_counts_drop() {
        let mut imp = Impairer::with_capacity(Impairments::none(), 1, 2, 16);
        for _ in 0..3 {
            imp.push(0, b"x");
        }
        assert_eq!(imp.stats().queue_full, 1);
        assert_eq!(imp.len(), 2);
    }

    #[test]
    fn oversize_frame_dropped_and_counted() {
        let mut imp = Impairer::with_capacity(Impairments::none(), 1, 2, 4);
        imp.push(0, b"12345");
        assert_eq!(imp.stats().oversize, 1);
        assert!(imp.is_empty());
    }

    #[test]
    fn reorder_always_second_frame_first() {
        let mut imp = impairer(|i| i.reorder = 1.0, 1);
        imp.push(0, b"1");
        imp.push(0, b"2");
        assert_eq!(imp.pop_due(0), Some(&b"2"[..]));
        assert_eq!(imp.pop_due(0), Some(&b"1"[..]));
    }

    #[test]
    fn reorder_held_frame_released_after_timeout() {
        let mut imp = impairer(|i| i.reorder = 1.0, 1);
        imp.push(0, b"1");
        assert_eq!(imp.pop_due(999_999), None);
        assert_eq!(imp.pop_due(1_000_000), Some(&b"1"[..]));
    }

    #[test]
    fn corrupt_always_flips_exactly_one_bit() {
        let mut imp = impairer(|i| i.corrupt = 1.0, 7);
        let frame = [0u8; 64];
        imp.push(0, &frame);
        let out = imp.pop_due(0).expect("frame");
        let ones: u32 = out.iter().map(|b| b.count_ones()).sum();
        assert_eq!(ones, 1);
    }

    #[test]
    fn duplicate_always_delivers_twice() {
        let mut imp = impairer(|i| i.duplicate = 1.0, 1);
        imp.push(0, b"d");
        assert_eq!(imp.pop_due(0), Some(&b"d"[..]));
        assert_eq!(imp.pop_due(0), Some(&b"d"[..]));
        assert_eq!(imp.pop_due(0), None);
    }
}
