//! The steps of a wait, written once for every waiter: the client
//! library's ([`Stack::wait_until`]) and the shim's (a blocking call with a
//! kernel side, poll/select, epoll_wait).
//!
//! A waiter looks at what it waits for, and when nothing is there asks
//! [`WaitSteps::next`] what to do before it looks again:
//! - **inline mode**: run the engine; when the engine has had nothing to do
//!   for its idle time, nap in the kernel ([`Step::Nap`]) on the NIC
//!   queue's fd and the waiter's own kernel fds, at most
//!   [`Stack::MAX_INLINE_SLEEP`], under a mask that lets the held signals
//!   through atomically for the nap alone. One waiter at a time does this
//!   (the runner: the one whose wait began last, or any when nobody has
//!   the role); the others, after one
//!   engine iteration of their own, sleep on their doorbells
//!   ([`Step::Sleep`], at most [`Stack::sleep_cap`]), woken by the engine
//!   the runner runs, so that a server's idle threads neither spin beside
//!   its busy one nor wake at every frame;
//! - **embedded and service mode**: spin for [`Stack::spin_time`], offering
//!   the CPU to other threads each round ([`spin_round`]: a `sched_yield`,
//!   which returns at once when no thread waits for this CPU); then
//!   [`Step::Sleep`]: the waiter arms the doorbell of what it waits for
//!   ([`Stack::arm`] with its eventfd, or a futex wait on the notify word),
//!   looks once more (the engine may have rung before the arm), and sleeps
//!   in the kernel until the engine rings, a kernel fd is ready, the
//!   deadline passes or a signal arrives.
//!
//! While it spins or runs the engine the waiter watches for signal
//! handlers ([`SpinSignals`]: the thread's handler count where the shim
//! counts them, else the signals held and the pending set looked at every
//! [`crate::SIGNAL_LOOK_EVERY`]): a
//! handler that runs then ends the wait as a handler ends a kernel sleep
//! ([`StepInterrupted`]; the caller answers EINTR, or restarts where Linux
//! would restart the call).

use super::Stack;
use crate::sys::SpinSignals;
use core::time::Duration;
use std::time::Instant;

/// One round of a waiter's spin: hands the CPU to any thread waiting for
/// it (a `sched_yield`, which returns at once when none does), at most
/// once per [`YIELD_EVERY_RT`] under a real-time policy and once per
/// [`YIELD_EVERY`] otherwise; the other rounds return at once. The thread
/// that produces what the waiter waits for (the engine thread, the daemon,
/// another thread of the program) may share this CPU at the same
/// priority; under SCHED_FIFO a waiter that never yielded would hold it
/// off until the spin ended (sockperf ping-pong in service mode, daemon
/// and server on one CPU: p50 120 µs, one spin per wait). Under
/// SCHED_OTHER a thread woken on this CPU preempts the spinner anyway.
/// A yield every round was most of a spinning waiter's system calls
/// (sockperf ping-pong, inline mode: 14.8 of 16 per round trip).
pub fn spin_round() {
    thread_local! {
        /// When this thread last yielded; when it last looked at its
        /// policy, and whether that was a real-time one.
        static LAST: core::cell::Cell<Option<(std::time::Instant, std::time::Instant, bool)>> =
            const { core::cell::Cell::new(None) };
    }
    let now = std::time::Instant::now();
    let (yielded, looked, rt) = match LAST.with(|l| l.get()) {
        Some((y, l, rt)) if now.duration_since(l) < POLICY_AGE => (y, l, rt),
        last => (
            last.map_or(now, |(y, _, _)| y),
            now,
            crate::sys::realtime_policy(),
        ),
    };
    let every = if rt { YIELD_EVERY_RT } else { YIELD_EVERY };
    if now.duration_since(yielded) >= every {
        std::thread::yield_now();
        LAST.with(|l| l.set(Some((now, looked, rt))));
    } else {
        LAST.with(|l| l.set(Some((yielded, looked, rt))));
        core::hint::spin_loop();
    }
}

/// The most a spinning waiter under SCHED_FIFO or SCHED_RR keeps a thread
/// of its priority waiting for its CPU ([`spin_round`]).
pub const YIELD_EVERY_RT: Duration = Duration::from_micros(5);
/// How often a spinning waiter under another policy yields ([`spin_round`]).
pub const YIELD_EVERY: Duration = Duration::from_micros(50);
/// How long [`spin_round`] trusts its last look at the thread's policy.
const POLICY_AGE: Duration = Duration::from_millis(100);

/// What a waiter does next ([`WaitSteps::next`]).
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// Look again at once: the spin went a round (or, inline, the engine
    /// did work).
    Look,
    /// Inline mode, the engine idle: nap in the kernel (poll/ppoll or
    /// epoll_pwait) on the NIC queue's fd ([`Stack::nic_fd`]) and the
    /// waiter's kernel fds, for at most [`Stack::MAX_INLINE_SLEEP`], under
    /// this mask (None: the call's own, or the thread's).
    Nap(Option<libc::sigset_t>),
    /// The spin is over and the held signals are back: arm the doorbell,
    /// look once more, then sleep (at most [`Stack::sleep_cap`]).
    Sleep,
}

/// A signal handler ran while the waiter spun or ran the engine: the wait
/// ends as a handler ends a kernel sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepInterrupted {
    /// Every handler that ran has SA_RESTART (where Linux restarts the call).
    pub restart: bool,
}

/// The spin → arm → recheck → sleep protocol of one wait (see the module
/// documentation).
pub struct WaitSteps {
    inline: bool,
    spin_until: Instant,
    sig: SpinSignals,
    /// Inline mode: the stack whose runner this wait is (the waiter that
    /// spins and naps on the NIC fd), given up when the wait ends.
    runner: Option<Stack>,
    /// Inline mode: the wait has slept on its doorbell (another waiter was
    /// the runner); it takes the role again only when nobody has it.
    slept: bool,
}

impl Drop for WaitSteps {
    fn drop(&mut self) {
        if let Some(stack) = self.runner.take() {
            stack.inner.idle.unclaim();
        }
    }
}

impl WaitSteps {
    /// A wait that starts now on `stack`, for a call that runs under
    /// `mask` (ppoll's, epoll_pwait's; None: the thread's own).
    pub fn new(stack: &Stack, mask: Option<&libc::sigset_t>) -> WaitSteps {
        WaitSteps {
            inline: stack.is_inline(),
            spin_until: Instant::now() + stack.spin_time(),
            sig: SpinSignals::new(mask),
            runner: None,
            slept: false,
        }
    }

    /// The next step after a look that found nothing. Errors: a signal
    /// handler ran since the last step.
    pub fn next(&mut self, stack: &Stack) -> Result<Step, StepInterrupted> {
        // A look at the pending signals every SIGNAL_LOOK_EVERY, not every
        // round: before any sleep `release` or the nap's mask reports them.
        if let Some(restart) = self.sig.check_due() {
            return Err(StepInterrupted { restart });
        }
        if self.inline {
            // Held through the naps too (their mask lets them through).
            self.sig.hold();
            if stack.drive() {
                return Ok(Step::Look);
            }
            let idle = &stack.inner.idle;
            let runs = match self.runner {
                // Still the runner, unless a newer wait took the role.
                Some(_) => idle.is_runner(),
                // A wait that just began takes the role; one that slept
                // takes it only when nobody has it.
                None => idle.claim(!self.slept),
            };
            if !runs {
                // Another waiter runs the engine and naps on the NIC fd:
                // sleep on the doorbell, woken by the engine it runs (at
                // most MAX_INLINE_SLEEP: the role may go with a waiter
                // that returned to its application).
                self.runner = None;
                self.slept = true;
                return match self.sig.release() {
                    Some(restart) => Err(StepInterrupted { restart }),
                    None => Ok(Step::Sleep),
                };
            }
            if self.runner.is_none() {
                self.runner = Some(stack.clone());
            }
            if !stack.idle() {
                // Let another thread of this CPU run first (the one the
                // engine's work was for, at the same priority).
                spin_round();
                return Ok(Step::Look);
            }
            self.check()?;
            return Ok(Step::Nap(self.sig.sleep_mask()));
        }
        if Instant::now() < self.spin_until {
            self.sig.hold();
            spin_round();
            return Ok(Step::Look);
        }
        match self.sig.release() {
            Some(restart) => Err(StepInterrupted { restart }),
            None => Ok(Step::Sleep),
        }
    }

    /// Puts the thread's signal mask back (it is held while spinning)
    /// before the caller decides on a restart or returns; what a pending
    /// handler says, as [`WaitSteps::next`] would.
    pub fn release(&mut self) -> Result<(), StepInterrupted> {
        match self.sig.release() {
            Some(restart) => Err(StepInterrupted { restart }),
            None => Ok(()),
        }
    }

    fn check(&mut self) -> Result<(), StepInterrupted> {
        match self.sig.check() {
            Some(restart) => Err(StepInterrupted { restart }),
            None => Ok(()),
        }
    }
}
