//! Inline mode's spin budget: how long the waiter that runs the engine
//! spins on an idle engine before it naps on the NIC queue's fd, learnt
//! from the idle spells it sees.
//!
//! A spin costs the CPU it burns; a nap costs a sleep and a wake-up (a few
//! µs of CPU, and 15–25 µs of latency when the frame that ends it is
//! delivered from another CPU). Spinning pays off only when the next work
//! reliably comes soon: a ping-pong peer, whose round trips leave idle
//! spells of nearly one length. Under requests from many independent
//! clients (Poisson arrivals: spells exponentially distributed, their mean
//! deviation about ¾ of their mean), the time already spun says nothing
//! about the time left, and a long spin burns on average as much CPU as
//! the mean gap: memcached under the ETC load at 40 000 QPS spent 22.2 µs of
//! CPU per request spinning 50 µs against 15.2 µs spinning 5 µs, with the
//! same p99.
//!
//! So the budget is chosen from the spells seen, as a ski-rental problem
//! with a known distribution: spinning `b` costs `E[min(spell, b)]`, and a
//! spell longer than `b` costs a nap on top, priced at [`NAP_COST`]; the
//! budget is the `b` of least expected cost among ten steps of a tenth of
//! the configured idle time (when it is more than the least step: at
//! least the step that covers 99 % of the spells shorter than the
//! configured time, plus one) (`--idle-us`, `CORESTACK_IDLE_US`: the most it
//! spins; 5 µs steps by default). One spell in [`PROBE_EVERY`] is a probe
//! that spins the whole configured time, so that spells are measured (up
//! to that time) whatever the budget; their lengths go into a histogram of
//! those ten steps and one for longer spells, decayed by 1/64 a probe.
//! With exponential spells of mean `m` this spins the least step when
//! `m` > [`NAP_COST`] and the whole time when `m` < [`NAP_COST`]; with
//! regular spells it spins just past them when they are shorter than
//! [`NAP_COST`] plus the least step. Lock-free; the threads that drive the
//! engine share one budget (races between them only blur the histogram).

use core::time::Duration;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// The price of a nap in a spell longer than the budget, 15 µs: its
/// sleep and wake-up in CPU, and the wake-up's latency (15–25 µs on the
/// development VM when the frame comes from another CPU), counted as
/// spinning time.
pub const NAP_COST: Duration = Duration::from_micros(15);
/// One spell in this many is a probe that spins the configured time.
pub const PROBE_EVERY: u32 = 16;
/// Steps of the budget (and histogram buckets below the configured time).
const STEPS: usize = 10;
/// A probe's weight in the histogram.
const WEIGHT: u64 = 1 << 10;

/// The learnt budget (see the module documentation). Times in ns.
#[derive(Debug)]
pub(super) struct SpinBudget {
    /// The configured time: the most a waiter spins, ns.
    max_ns: u64,
    /// The current budget, ns.
    budget_ns: AtomicU64,
    /// When the current idle spell began (the first idle look after work),
    /// ns; 0 while the engine works.
    idle_since: AtomicU64,
    /// Spells begun, for choosing probes.
    spells: AtomicU32,
    /// 1 when the current spell is a probe.
    probe: AtomicU32,
    /// Decayed counts of probes' spells: bucket k < STEPS holds spells of
    /// k..k+1 steps, the last those longer than the configured time.
    hist: [AtomicU64; STEPS + 1],
}

impl SpinBudget {
    /// A budget of at most `max` that starts at `max` until probes are in.
    pub(super) fn new(max: Duration) -> SpinBudget {
        let max_ns = max.as_nanos().min(u128::from(u64::MAX)) as u64;
        SpinBudget {
            max_ns,
            budget_ns: AtomicU64::new(max_ns),
            idle_since: AtomicU64::new(0),
            spells: AtomicU32::new(0),
            probe: AtomicU32::new(0),
            hist: Default::default(),
        }
    }

    /// An engine iteration found nothing at `now_ns`: true when the
    /// current spell has lasted the budget (the probe's: the configured
    /// time), so the waiter may nap.
    pub(super) fn idle(&self, now_ns: u64) -> bool {
        let since = match self
            .idle_since
            .compare_exchange(0, now_ns.max(1), Relaxed, Relaxed)
        {
            Ok(_) => {
                let n = self.spells.fetch_add(1, Relaxed);
                self.probe
                    .store(u32::from(n.is_multiple_of(PROBE_EVERY)), Relaxed);
                now_ns.max(1)
            }
            Err(since) => since,
        };
        let budget = if self.probe.load(Relaxed) == 1 {
            self.max_ns
        } else {
            self.budget_ns.load(Relaxed)
        };
        now_ns.saturating_sub(since) >= budget
    }

    /// An engine iteration did work at `now_ns`: the idle spell, if one
    /// was under way, ends; a probe's length goes into the histogram.
    pub(super) fn worked(&self, now_ns: u64) {
        if self.idle_since.load(Relaxed) == 0 {
            return;
        }
        let since = self.idle_since.swap(0, Relaxed);
        if since == 0 || self.probe.swap(0, Relaxed) == 0 {
            return;
        }
        self.learn(now_ns.saturating_sub(since));
    }

    /// Takes one probe's spell of `spell_ns` into the histogram and sets
    /// the budget to the step of least expected cost.
    fn learn(&self, spell_ns: u64) {
        let step = (self.max_ns / STEPS as u64).max(1);
        let k = if spell_ns > self.max_ns {
            STEPS
        } else {
            ((spell_ns / step) as usize).min(STEPS - 1)
        };
        let mut h = [0u64; STEPS + 1];
        for (i, (c, out)) in self.hist.iter().zip(h.iter_mut()).enumerate() {
            let old = c.load(Relaxed);
            let new = old - old / 64 + if i == k { WEIGHT } else { 0 };
            c.store(new, Relaxed);
            *out = new;
        }
        let total: u64 = h.iter().sum();
        if total == 0 || self.max_ns == 0 {
            return;
        }
        // Expected cost × total of spinning j+1 steps: the spells that end
        // within it cost their length (a bucket's middle), the others the
        // budget and a nap.
        let nap = NAP_COST.as_nanos() as u64;
        let best = (0..STEPS)
            .map(|j| {
                let b = (j as u64 + 1) * step;
                let cost: u64 = h
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| {
                        if i <= j && i < STEPS {
                            c * (i as u64 * step + step / 2)
                        } else {
                            c * (b + nap)
                        }
                    })
                    .sum();
                (cost, b)
            })
            .min()
            .map_or(step, |(_, b)| b);
        // A budget that follows the spells covers 99 % of those that end
        // within the configured time, and one step more: a nap costs more than its price where it slows the
        // round trip that the next spell waits for.
        let budget = if best > step {
            let within: u64 = h[..STEPS].iter().sum();
            let mut cum = 0;
            let q99 = h[..STEPS]
                .iter()
                .position(|&c| {
                    cum += c;
                    cum * 100 >= within * 99
                })
                .map_or(self.max_ns, |j| (j as u64 + 1) * step);
            best.max(q99) + step
        } else {
            best
        };
        self.budget_ns.store(budget.min(self.max_ns), Relaxed);
    }

    /// The current budget (a probe spins longer).
    #[cfg(test)]
    pub(super) fn budget(&self) -> Duration {
        Duration::from_nanos(self.budget_ns.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// Drives `b` through spells of the lengths `gap` gives (µs), each
    /// looked at every µs until it naps or the work comes.
    fn run(b: &SpinBudget, spells: usize, mut gap: impl FnMut(usize) -> u64) {
        let mut t = 1_000 * US;
        for i in 0..spells {
            let g = gap(i);
            for k in 0..g {
                if b.idle(t + k * US) {
                    break;
                }
            }
            b.worked(t + g * US);
            t += (g + 5) * US;
        }
    }

    #[test]
    fn regular_short_spells_keep_a_budget_just_above_them() {
        let b = SpinBudget::new(Duration::from_micros(50));
        run(&b, 2_000, |i| 8 + (i % 3) as u64);
        let budget = b.budget();
        assert!(
            budget >= Duration::from_micros(9) && budget <= Duration::from_micros(20),
            "{budget:?}"
        );
    }

    /// Exponential spells of mean `mean` µs from a fixed-seed xorshift.
    fn exponential(mean: f64) -> impl FnMut(usize) -> u64 {
        let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
        move |_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            (-(1.0 - u).ln() * mean) as u64 + 1
        }
    }

    #[test]
    fn exponential_spells_longer_than_a_nap_spin_the_least_step() {
        let b = SpinBudget::new(Duration::from_micros(50));
        run(&b, 4_000, exponential(25.0));
        assert_eq!(b.budget(), Duration::from_micros(5));
    }

    #[test]
    fn exponential_spells_shorter_than_a_nap_spin_long() {
        let b = SpinBudget::new(Duration::from_micros(50));
        run(&b, 4_000, exponential(6.0));
        assert!(b.budget() >= Duration::from_micros(30), "{:?}", b.budget());
    }

    #[test]
    fn spells_longer_than_the_configured_time_spin_the_least_step_until_they_shorten() {
        let b = SpinBudget::new(Duration::from_micros(50));
        run(&b, 1_000, |_| 200);
        assert_eq!(b.budget(), Duration::from_micros(5), "the least step");
        run(&b, 2_000, |_| 10);
        assert_eq!(
            b.budget(),
            Duration::from_micros(20),
            "just past the spells"
        );
    }

    #[test]
    fn interrupt_polling_never_spins() {
        let b = SpinBudget::new(Duration::ZERO);
        assert!(b.idle(5 * US), "a zero budget naps at the first idle look");
        run(&b, 100, |_| 3);
        assert_eq!(b.budget(), Duration::ZERO);
    }
}
