//! The engine loop of embedded and inline mode: one iteration behind a
//! dyn call, inline mode's idle naps on the NIC fd, and embedded mode's
//! engine thread with its doorbell.

use core::time::Duration;
use engine::publish::Published;
use engine::stats::Stats;
use engine::time::Instant;
use nic::Port;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::sync::{Arc, Mutex};

pub(super) use super::spin::SpinBudget;

/// The CPU embedded mode's engine `index` pins itself to: the list given
/// to [`crate::StackBuilder::engine_cpus`] (`cpus`, engine i on entry
/// i mod its length), else `CORESTACK_ENGINE_CPUS` (a list as
/// [`appif::parse_cpu_list`] reads it, likewise), else `CORESTACK_ENGINE_CPU`
/// plus `index` (a first dedicated core), else none.
pub(super) fn engine_cpu(cpus: &[usize], index: usize) -> Option<usize> {
    use appif::parse_cpu_list;
    if let Some(&c) = cpus.get(index % cpus.len().max(1)) {
        return Some(c);
    }
    if let Some(list) = std::env::var("CORESTACK_ENGINE_CPUS")
        .ok()
        .and_then(|v| parse_cpu_list(&v).ok())
    {
        return list.get(index % list.len().max(1)).copied();
    }
    std::env::var("CORESTACK_ENGINE_CPU")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map(|c| c + index)
}

/// An engine of any port type, boxed.
pub(super) type DynEngine = Box<dyn EngineLoop + Send>;

/// The engine of any port type behind one dyn call per loop iteration, not
/// per packet (not to be confused with the readiness [`crate::Poller`]).
pub(super) trait EngineLoop {
    /// One engine iteration at `now`, then publishing; true if it did work.
    fn poll(&mut self, now: Instant) -> bool;
    /// The engine's counters.
    fn stats(&self) -> Stats;
    /// Resets every connection and stops.
    fn shutdown(&mut self, now: Instant);
}

impl<P: Port> EngineLoop for Published<P> {
    fn poll(&mut self, now: Instant) -> bool {
        let worked = self.engine.poll(now);
        self.publish(now, false);
        worked
    }
    fn stats(&self) -> Stats {
        self.engine.stats()
    }
    fn shutdown(&mut self, now: Instant) {
        self.engine.shutdown(now)
    }
}

/// Inline mode's adaptive polling: when the engine has had nothing to do
/// for the spin budget (at most the configured idle time, see
/// [`SpinBudget`]), a waiting thread sleeps on the NIC queue's fd.
pub(super) struct Idle {
    /// None: busy polling, or not inline mode (never sleeps here).
    pub(super) spin: Option<SpinBudget>,
    pub(super) rx_fd: Option<RawFd>,
    /// The thread token ([`super::owner::thread_token`]) of the waiter that
    /// spins and naps on the NIC fd ([`Idle::claim`]; 0: none): the others sleep on their doorbells, woken by the engine it
    /// runs, instead of spinning beside it or waking with it at every
    /// frame.
    pub(super) runner: AtomicU64,
}

impl Idle {
    /// Inline mode: makes this thread the waiter that spins and naps on
    /// the NIC fd: taken from any other when `steal` (a wait that just
    /// began: the thread that waits most recently is the one whose sockets
    /// are busy), else only when nobody has it. True if it is this thread's
    /// now.
    pub(super) fn claim(&self, steal: bool) -> bool {
        let me = super::owner::thread_token();
        if steal {
            self.runner.store(me, Ordering::Release);
            return true;
        }
        match self
            .runner
            .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(cur) => cur == me,
        }
    }

    /// True while this thread has the claim of [`Idle::claim`].
    pub(super) fn is_runner(&self) -> bool {
        self.runner.load(Ordering::Acquire) == super::owner::thread_token()
    }

    /// Gives up the claim of [`Idle::claim`] (the wait that took it ends).
    pub(super) fn unclaim(&self) {
        let _ = self.runner.compare_exchange(
            super::owner::thread_token(),
            0,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    /// Records the outcome of an engine iteration at `now`; after a long
    /// enough idle spell, sleeps until frames arrive or `left` (at most
    /// 1 ms, so timers and other threads' commands are not held up) passes.
    pub(super) fn after_poll(&self, worked: bool, now: Instant, left: Option<Duration>) {
        if worked {
            self.worked(now);
            return;
        }
        if !self.may_sleep(now) {
            return;
        }
        let Some(fd) = self.rx_fd else {
            return;
        };
        let nap = left.unwrap_or(MAX_NAP).min(MAX_NAP);
        if !nap.is_zero() {
            crate::sys::wait_readable(fd, nap);
        }
    }
}

impl Idle {
    /// An engine iteration at `now` did work.
    pub(super) fn worked(&self, now: Instant) {
        if let Some(spin) = &self.spin {
            spin.worked(now.as_nanos());
        }
    }

    /// An engine iteration at `now` found nothing: true when the idle
    /// spell has lasted the spin budget, so a waiter may sleep on the NIC
    /// fd (never with busy polling).
    pub(super) fn may_sleep(&self, now: Instant) -> bool {
        self.rx_fd.is_some() && self.spin.as_ref().is_some_and(|s| s.idle(now.as_nanos()))
    }
}

/// The longest inline-mode sleep on the NIC fd.
pub(super) const MAX_NAP: Duration = Duration::from_millis(1);
/// Default idle time before an inline-mode waiter sleeps.
pub(super) const IDLE_BEFORE_SLEEP: Duration = Duration::from_micros(50);

/// When embedded mode's engine thread sleeps: after `after` without work,
/// on the NIC queue's fd and the doorbell, at most [`MAX_NAP`] at a time.
pub(super) struct EngineNap {
    pub(super) after: Duration,
    pub(super) rx_fd: RawFd,
    pub(super) doorbell: Arc<appif::doorbell::Doorbell>,
}

/// The embedded engine thread: poll until told to stop, napping per `nap`
/// (None: busy polling).
pub(super) fn run_engine<P: Port>(
    mut engine: Published<P>,
    stop: &AtomicBool,
    stats: &Mutex<Stats>,
    nap: Option<EngineNap>,
) {
    let mut last_work = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if engine.engine.poll(now) {
            last_work = now;
        } else if let Some(n) = &nap {
            if now.saturating_since(last_work) >= n.after {
                let db = &n.doorbell;
                db.nap_begin();
                // Re-check after setting the flag: a command (or another
                // engine's handoff) queued before its producer saw the flag
                // would otherwise wait for the nap.
                if !engine.engine.has_commands() {
                    crate::sys::wait_readable_any(&[n.rx_fd, db.fd()], MAX_NAP);
                }
                db.nap_end();
            }
        }
        if let Some(latest) = engine.publish(now, false) {
            if let Ok(mut s) = stats.lock() {
                *s = latest;
            }
        }
    }
    engine.engine.shutdown(Instant::now());
    if let (Some(latest), Ok(mut s)) = (engine.publish(Instant::now(), true), stats.lock()) {
        *s = latest;
    }
}
