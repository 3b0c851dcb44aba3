//! How an application thread waits for the engine, in one loop
//! ([`Stack::wait_for`]) that every wait of the library runs, with a
//! [`Policy`] for each kind of caller: inline mode runs engine iterations,
//! embedded and service mode spin for a short while, then sleep on a
//! doorbell (service mode checks the daemon is alive between naps).

use super::owner::{thread_token, Run};
use super::run::{engine_cpu, MAX_NAP};
use super::steps::{spin_round, Step, WaitSteps};
use super::{Mode, Stack};
use appif::errno;
use appif::notify::{Notify, Woke};
use appif::socket::{SockState, StatusBlock};
use core::time::Duration;
use engine::time::Instant;
use std::io;
use std::os::fd::RawFd;

/// How long a waiting application thread spins before it sleeps (embedded mode).
const SPIN: Duration = Duration::from_micros(50);

/// How long a waiter spins before it sleeps: `CORESTACK_SPIN_US` (µs) if
/// set (at most 1 s), else 50 µs. 0 makes every wait block at once (for a thread that
/// shares its core with the engine or with its peers). Without the variable,
/// embedded mode (`shares_engine_cpu`: an engine thread not pinned elsewhere
/// by `CORESTACK_ENGINE_CPU`) on a process allowed a single CPU does not
/// spin: the engine thread needs that very CPU to produce what the waiter
/// waits for, so a spin only delays it (sockperf ping-pong under the shim
/// with server and engine on one CPU: p50 126 -> 22 µs, p99 2030 -> 121 µs).
pub(super) fn spin_time(shares_engine_cpu: bool) -> Duration {
    let env = std::env::var("CORESTACK_SPIN_US")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    match env {
        Some(us) => Duration::from_micros(us.min(1_000_000)),
        None if shares_engine_cpu
            && engine_cpu(&[], 0).is_none()
            && crate::sys::allowed_cpus() == Some(1) =>
        {
            Duration::ZERO
        }
        None => SPIN,
    }
}

/// How long a service-mode waiter sleeps before it checks that the daemon
/// is still there.
const LIVENESS: Duration = Duration::from_millis(100);

/// How long [`Policy::Change`] sleeps once the daemon is gone (service mode).
const DEAD_NAP: Duration = Duration::from_millis(10);

/// How [`Stack::wait_until`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The condition holds.
    Ready,
    /// The timeout passed first.
    TimedOut,
    /// A signal handler ran while the thread slept in the kernel (EINTR),
    /// or while it spun ([`crate::SpinSignals`]).
    /// Without a timeout, embedded and service mode sleep in a futex wait
    /// that the kernel restarts by itself after a handler with SA_RESTART,
    /// so there this means a handler without it; inline mode sleeps in
    /// poll(2), which reports every handler.
    Interrupted,
}

/// What a wait does while its condition does not hold
/// ([`Stack::wait_for`], the one wait loop of the library).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// The library's blocking calls (read, write, accept, a socket
    /// opening): a signal handler runs and the wait goes on. Inline mode
    /// runs the engines (skipping one another thread is running) and naps
    /// on the NIC fd after their idle time; embedded and service mode spin
    /// for [`Stack::spin_time`], then sleep on the doorbell, at most
    /// [`LIVENESS`] at a time without a deadline.
    Call,
    /// [`Stack::poll`] and [`crate::Poller::wait`]: until the condition (a
    /// change since the caller read [`Stack::changes`]) holds, for one
    /// sleep at most: the caller looks again. Inline mode instead runs
    /// engine iterations (waiting for each engine's lock) until one does
    /// some work, and runs one even when the deadline has passed, and the
    /// deadline is looked at after each iteration (`poll(Some(ZERO))` is
    /// how a loop drives the engine).
    Change,
    /// [`Stack::wait_until`]: the steps of [`WaitSteps`], so that a signal
    /// handler ends the wait ([`Waited::Interrupted`]).
    Signal,
    /// While a command ring is full: nothing rings when it has room, so
    /// the wait never sleeps; inline mode runs the engines, the other
    /// modes spin ([`spin_round`]).
    Spin,
}

impl Policy {
    /// Inline mode: the engines run before the deadline is looked at, so
    /// that a zero timeout still runs one iteration; the wait ends after
    /// one that did work, and waits for each engine's lock.
    fn drives(self) -> bool {
        self == Policy::Change
    }

    /// Inline mode, after an iteration (`ran`: this thread ran an engine):
    /// whether it goes to the idle accounting ([`super::run::Idle::after_poll`]: work
    /// is recorded; after an idle spell the waiter naps on the NIC fd).
    fn tracks_idle(self, ran: bool) -> bool {
        match self {
            Policy::Change => true,
            Policy::Call => ran,
            Policy::Signal | Policy::Spin => false,
        }
    }
}

impl Stack {
    /// Inline mode: runs engine iterations until one does some work or
    /// `timeout` passes. Embedded mode: waits until the engine reports a
    /// change to any socket or `timeout` passes. None waits without limit.
    pub fn poll(&self, timeout: Option<Duration>) {
        let seen = self.change_seq();
        self.wait_change(seen, timeout);
    }

    /// Like [`Stack::poll`], but returns at once if a change happened
    /// since `seen` (from [`Stack::change_seq`]) was read.
    pub(crate) fn wait_change(&self, seen: u32, timeout: Option<Duration>) {
        // Inline mode waits for an engine iteration with work instead.
        let changed = || !self.is_inline() && self.change_seq() != seen;
        self.wait_for(self.changes(), timeout, Policy::Change, changed);
    }

    /// The sequence number of socket changes (see [`Stack::poll`]).
    pub(crate) fn change_seq(&self) -> u32 {
        self.changes().seq()
    }

    /// Service mode: hands the sockets the engines pushed to the segment's
    /// ready rings to the pollers watching them (see
    /// `appif::seg::ready`); a no-op in the other modes, whose engines
    /// reach the pollers' ready lists themselves. Public for waiters built
    /// on [`Probe::watch`] (the preload shim's epoll).
    pub fn drain_ready(&self) {
        if let Mode::Service(s) = &self.inner.mode {
            s.seg.drain_ready();
        }
    }

    /// The wait loop, written once for the library: until `ready()` holds
    /// (Ready), `timeout` passes (TimedOut; None: no limit) or, with
    /// [`Policy::Signal`], a signal handler runs (Interrupted). Between
    /// looks it does what `policy` says: runs the engines in inline mode,
    /// spins for [`Stack::spin_time`] in the other modes, then sleeps on
    /// `notify` (the socket's doorbell or the stack's [`Stack::changes`];
    /// a futex wait that publishes the sleeper, so that the engine wakes
    /// it only then): it reads the doorbell's sequence, looks once more,
    /// and sleeps until the sequence moves. In service mode a sleep lasts
    /// at most [`LIVENESS`]: a daemon that died cannot ring (when it is
    /// gone, `alive` closes the sockets, so `ready` holds). Allocates
    /// nothing.
    pub(crate) fn wait_for(
        &self,
        notify: &Notify,
        timeout: Option<Duration>,
        policy: Policy,
        mut ready: impl FnMut() -> bool,
    ) -> Waited {
        // The first look before any clock read: a command ring with room,
        // a read with bytes there, cost nothing more.
        if ready() {
            return Waited::Ready;
        }
        let start = Instant::now();
        let inline = self.is_inline();
        let spin_until = start + self.inner.spin;
        let mut steps = (policy == Policy::Signal).then(|| WaitSteps::new(self, None));
        let drives = inline && policy.drives();
        loop {
            let now = Instant::now();
            let left = timeout.map(|t| t.saturating_sub(now.saturating_since(start)));
            if left == Some(Duration::ZERO) && !drives {
                return Waited::TimedOut;
            }
            let step = match steps.as_mut() {
                Some(steps) => match steps.next(self) {
                    Ok(step) => step,
                    Err(_) => return Waited::Interrupted,
                },
                None if inline => {
                    // The engine locks are released before any sleep.
                    let ran = self.poll_inline(now, drives);
                    if ran.is_none() {
                        // Every engine is another thread's: let it run.
                        spin_round();
                    }
                    let worked = ran.unwrap_or(false);
                    if policy.tracks_idle(ran.is_some()) {
                        // Records the work, or naps after an idle spell.
                        self.inner.idle.after_poll(worked, now, left);
                    }
                    match (drives, worked, left) {
                        (true, true, _) => return Waited::Ready,
                        (true, false, Some(Duration::ZERO)) => return Waited::TimedOut,
                        _ => Step::Look,
                    }
                }
                None if policy == Policy::Spin || now < spin_until => {
                    spin_round();
                    Step::Look
                }
                None => Step::Sleep,
            };
            match step {
                Step::Look => {}
                Step::Nap(mask) => {
                    // Policy::Signal, inline, the engine idle: on the NIC fd.
                    let nap = left.unwrap_or(MAX_NAP).min(MAX_NAP);
                    if let Some(fd) = self.inner.idle.rx_fd {
                        if crate::sys::sleep_readable(fd, nap, mask.as_ref()) {
                            return Waited::Interrupted;
                        }
                    }
                }
                Step::Sleep => {
                    let seen = notify.seq();
                    if ready() {
                        return Waited::Ready;
                    }
                    let nap = match &self.inner.mode {
                        Mode::Service(_) => Some(left.unwrap_or(LIVENESS).min(LIVENESS)),
                        // Policy::Signal: another waiter runs the engine and
                        // may give the role up (Stack::sleep_cap).
                        Mode::Inline(..) => Some(left.unwrap_or(MAX_NAP).min(MAX_NAP)),
                        Mode::Embedded { .. } if policy == Policy::Call => {
                            Some(left.unwrap_or(LIVENESS))
                        }
                        Mode::Embedded { .. } => left,
                    };
                    if let Mode::Service(s) = &self.inner.mode {
                        if !s.alive() {
                            if policy == Policy::Change {
                                // Nothing will change any more: a caller that
                                // loops on errors must not spin.
                                std::thread::sleep(nap.unwrap_or(LIVENESS).min(DEAD_NAP));
                                return Waited::TimedOut;
                            }
                            if ready() {
                                return Waited::Ready;
                            }
                        }
                    }
                    let woke = notify.wait(seen, nap);
                    match (policy, woke) {
                        (Policy::Signal | Policy::Change, Woke::Interrupted) => {
                            return Waited::Interrupted
                        }
                        (Policy::Change, Woke::TimedOut) => return Waited::TimedOut,
                        (Policy::Change, Woke::Changed) => return Waited::Ready,
                        _ => {}
                    }
                }
            }
            if ready() {
                return Waited::Ready;
            }
        }
    }

    /// Inline mode: one iteration of this thread's own engine first (see
    /// [`Stack::claim_engine`]), then of every engine nobody owns that this
    /// thread can lock (`block`: waiting for each lock, else skipping an
    /// engine another thread is running), and of an owned engine whose
    /// owner has not run it for the takeover time (a try_lock). An engine
    /// another thread owns and runs is skipped after one atomic load,
    /// without touching its lock. None when it ran none (or not inline
    /// mode), else whether any did work.
    pub(super) fn poll_inline(&self, now: Instant, block: bool) -> Option<bool> {
        let Mode::Inline(engines, owners) = &self.inner.mode else {
            return None;
        };
        let token = thread_token();
        let now_ns = now.as_nanos();
        let mut ran = None;
        // Two passes: the engines this thread owns, then the others.
        for own in [true, false] {
            for (i, e) in engines.iter().enumerate() {
                let how = owners.may_run(i, token, now_ns);
                if (how == Run::Own) != own || how == Run::Skip {
                    continue;
                }
                let guard = if block && how != Run::Takeover {
                    e.lock().ok()
                } else {
                    e.try_lock().ok()
                };
                if let Some(mut e) = guard {
                    // The clock is read again once the engine is ours: the
                    // wait for its lock (or a lost CPU) may have outlasted
                    // another thread's iteration, and an engine that ran
                    // at a later time must not run at an earlier one.
                    let now = Instant::now().max(now);
                    owners.ran(i, how, now.as_nanos());
                    let worked = e.poll(now);
                    ran = Some(ran.unwrap_or(false) | worked);
                }
            }
        }
        ran
    }

    /// Waits for a socket to leave `Opening` (the engine took its command).
    pub(crate) fn wait_opened(&self, shared: &StatusBlock) -> io::Result<()> {
        let opened = || shared.state() != SockState::Opening;
        self.wait_for(&shared.notify, None, Policy::Call, opened);
        match shared.state() {
            SockState::Closed => Err(errno::io(shared.take_error().max(1))),
            _ => Ok(()),
        }
    }
    /// True in inline mode (no engine thread: waiting threads run the engine).
    pub fn is_inline(&self) -> bool {
        matches!(self.inner.mode, Mode::Inline(..))
    }

    /// Inline mode: one engine iteration, unless another thread is running
    /// one; returns whether it did any work. Other modes: false.
    pub fn drive(&self) -> bool {
        match &self.inner.mode {
            Mode::Inline(..) => {
                let now = Instant::now();
                let worked = self.poll_inline(now, false).unwrap_or(false);
                if worked {
                    self.inner.idle.worked(now);
                }
                worked
            }
            _ => false,
        }
    }

    /// Inline mode: true when the engine has had nothing to do for its spin
    /// budget (at most its idle time; see `stack/spin.rs`), so a waiter may
    /// sleep (at most [`Stack::MAX_INLINE_SLEEP`]) on [`Stack::nic_fd`];
    /// each call counts as a look at an idle engine. Other modes: true.
    pub fn idle(&self) -> bool {
        let Mode::Inline(..) = &self.inner.mode else {
            return true;
        };
        self.inner.idle.may_sleep(Instant::now())
    }

    /// The longest an inline-mode waiter sleeps before it runs the engine
    /// again (its timers): 1 ms.
    pub const MAX_INLINE_SLEEP: Duration = MAX_NAP;

    /// The longest a [`crate::Step::Sleep`] may last: in inline mode
    /// [`Stack::MAX_INLINE_SLEEP`] (the sleeper may have to take over
    /// running the engine from a waiter that went back to its
    /// application); None (the caller's deadline) in other modes.
    pub fn sleep_cap(&self) -> Option<Duration> {
        self.is_inline().then_some(MAX_NAP)
    }

    /// Inline mode: the NIC queue's fd, readable when frames arrive.
    pub fn nic_fd(&self) -> Option<RawFd> {
        match &self.inner.mode {
            Mode::Inline(..) => self.inner.idle.rx_fd,
            _ => None,
        }
    }

    /// How long a waiter spins before it sleeps (`CORESTACK_SPIN_US`).
    pub fn spin_time(&self) -> Duration {
        self.inner.spin
    }

    /// Waits until `ready()` holds, `timeout` passes (None: no limit) or a
    /// signal handler runs, whichever is first, in the steps every waiter
    /// takes ([`crate::WaitSteps`]): spins for [`Stack::spin_time`], then
    /// sleeps in the kernel: on `notify` (the socket's doorbell, a futex
    /// wait) in embedded and service mode, on the NIC fd between engine
    /// iterations in inline mode.
    pub fn wait_until(
        &self,
        notify: &Notify,
        timeout: Option<Duration>,
        ready: impl Fn() -> bool,
    ) -> Waited {
        self.wait_for(notify, timeout, Policy::Signal, ready)
    }
}
