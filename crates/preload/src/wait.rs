//! Sleeping in the kernel until corestack or kernel fds are ready.
//!
//! Every thread that waits on more than one thing (poll, select, a blocking
//! call on a socket with a kernel side too) owns an eventfd (created on its
//! first wait, above the application's numbers and reserved, and given
//! back to a pool when the thread exits, never closed: a late wake-up
//! written by the engine can only reach a pooled eventfd). In service mode
//! the pool starts with the eventfds handed to the daemon ([`add_wakers`]),
//! the only ones its engine can write; they are taken first, and epoll
//! sets take their wake eventfd from the pool too ([`take`], [`give_back`]). The thread arms
//! a doorbell with it ([`corestack::Notify::arm`]), re-checks, then sleeps
//! in `poll(2)` with the eventfd among the fds: the engine writes it only
//! when the thread is armed (the notify-flag protocol).
//!
//! Signals: poll(2) and epoll_wait(2) return EINTR for every handler, as
//! Linux's own poll, select and epoll_wait do. A blocking socket call that
//! sleeps here restarts after a handler when [`crate::sys::restart_after_signal`]
//! says Linux would.
#![forbid(unsafe_code)]

use crate::cancel::Quiet;
use crate::sys;
use core::ffi::c_int;
use core::time::Duration;
use libc::{pollfd, sigset_t};
use std::cell::Cell;
use std::sync::Mutex;
use std::time::Instant;

/// Pooled eventfds: the daemon's (service mode) at the end, taken first.
static POOL: Mutex<Vec<c_int>> = Mutex::new(Vec::new());
/// The eventfds the daemon knows (service mode).
static WAKERS: Mutex<Vec<c_int>> = Mutex::new(Vec::new());

/// Service mode: `fds` (handed to the daemon) join the pool, first in line.
pub fn add_wakers(fds: &[c_int]) {
    WAKERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend_from_slice(fds);
    POOL.lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend_from_slice(fds);
}

/// Service mode, in a forked child that joined the daemon on its own:
/// `fds` (handed to the daemon by the child) replace the parent's in the
/// pool, and this thread's eventfd is given up if it was one of the
/// parent's (the daemon writes those only for the parent's waiters). The
/// parent's stay open, unused.
pub fn replace_wakers(fds: &[c_int]) {
    let old: Vec<c_int> = std::mem::replace(
        &mut *WAKERS.lock().unwrap_or_else(|p| p.into_inner()),
        fds.to_vec(),
    );
    {
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        pool.retain(|fd| !old.contains(fd));
        pool.extend_from_slice(fds);
    }
    let _ = MINE.try_with(|m| {
        if old.contains(&m.0.get()) {
            m.0.set(-1);
        }
    });
}

/// An eventfd from the pool, or a new one. Errors: the errno of eventfd.
pub fn take() -> Result<c_int, c_int> {
    let pooled = POOL.lock().unwrap_or_else(|p| p.into_inner()).pop();
    match pooled {
        Some(fd) => Ok(fd),
        None => crate::table::internal_eventfd(),
    }
}

/// Gives `fd` (from [`take`]) back, drained: the daemon's to the end of
/// the pool (taken first), others to the front.
pub fn give_back(fd: c_int) {
    sys::eventfd_drain(fd);
    let known = WAKERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&fd);
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if known {
        pool.push(fd);
    } else {
        pool.insert(0, fd);
    }
}

struct ThreadFd(Cell<c_int>);

impl Drop for ThreadFd {
    fn drop(&mut self) {
        let fd = self.0.get();
        if fd >= 0 {
            give_back(fd);
        }
    }
}

thread_local! {
    static MINE: ThreadFd = const { ThreadFd(Cell::new(-1)) };
}

/// This thread's wake-up eventfd. Errors: the errno of eventfd (EMFILE).
pub fn thread_eventfd() -> Result<c_int, c_int> {
    let cur = MINE.try_with(|m| m.0.get()).unwrap_or(-1);
    if cur >= 0 {
        return Ok(cur);
    }
    let fd = take()?;
    if MINE.try_with(|m| m.0.set(fd)).is_err() {
        // The thread is exiting: lend it back at once.
        give_back(fd);
    }
    Ok(fd)
}

/// A deadline from a timeout (None: no limit).
#[derive(Debug, Clone, Copy)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// `timeout` from now.
    pub fn after(timeout: Option<Duration>) -> Deadline {
        Deadline(timeout.map(|t| Instant::now() + t))
    }

    /// From a poll-style timeout in ms (negative: no limit).
    pub fn from_ms(ms: i64) -> Deadline {
        Deadline::after(u64::try_from(ms).ok().map(Duration::from_millis))
    }

    /// Time left (None: no limit).
    pub fn left(&self) -> Option<Duration> {
        self.0.map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// True once passed.
    pub fn passed(&self) -> bool {
        self.left() == Some(Duration::ZERO)
    }

    /// How a readiness wait (poll, select, epoll_wait) whose last look
    /// found nothing ends now: `Some(Ok(0))` once passed (the timeout,
    /// reported before a cancel), else `Some(Err(PENDING))` when a cancel
    /// of the thread is due ([`Quiet::due`]), else None: it goes on.
    pub fn nothing_ready(&self, quiet: &Quiet) -> Option<Result<usize, c_int>> {
        if self.passed() {
            Some(Ok(0))
        } else if quiet.due() {
            Some(Err(crate::cancel::PENDING))
        } else {
            None
        }
    }

    /// Time left in ms for poll(2), rounded up (-1: no limit).
    pub fn poll_ms(&self) -> i64 {
        match self.left() {
            None => -1,
            Some(d) => {
                let ms = d.as_micros().div_ceil(1000);
                ms.min(i32::MAX as u128) as i64
            }
        }
    }

    /// The poll(2) timeout of a sleep on `stack`: [`Deadline::poll_ms`]
    /// when the doorbell is `armed`; else (no room to arm it) a nap of at
    /// most 1 ms, after which the caller looks again; at most
    /// [`corestack::Stack::sleep_cap`] either way.
    pub fn sleep_ms(&self, stack: &corestack::Stack, armed: bool) -> i64 {
        let mut d = self.poll_ms();
        if let Some(cap) = stack.sleep_cap() {
            let cap = cap.as_millis().max(1) as i64;
            d = if d < 0 { cap } else { d.min(cap) };
        }
        match (armed, d) {
            (true, _) => d,
            (false, d) if d < 0 => 1,
            (false, d) => d.min(1),
        }
    }
}

/// [`corestack::Step::Nap`] of a shim wait: inline mode with the engine
/// idle sleeps in ppoll on `kernel` (the waiter's kernel fds) and the NIC
/// queue's fd, at most [`corestack::Stack::MAX_INLINE_SLEEP`] (the engine's
/// timers), under `mask` (the held signals let through for the nap alone).
/// Errors: poll's errno (EINTR: a handler ran).
pub fn nap(
    stack: &corestack::Stack,
    kernel: &[pollfd],
    deadline: Deadline,
    mask: Option<&sigset_t>,
) -> Result<(), c_int> {
    let mut set = kernel.to_vec();
    if let Some(nic) = stack.nic_fd() {
        set.push(pollfd {
            fd: nic,
            events: libc::POLLIN,
            revents: 0,
        });
    }
    let cap = corestack::Stack::MAX_INLINE_SLEEP.as_millis().max(1) as i64;
    let ms = deadline.poll_ms();
    sys::poll_fds(&mut set, if ms < 0 { cap } else { ms.min(cap) }, mask).map(drop)
}

/// [`corestack::Step::Sleep`] of a shim wait, the arm → look again → sleep
/// written once: this thread's eventfd, published for a canceller
/// (`quiet`) and, with `doorbell`, armed on that notify word of the stack
/// (without one, only the kernel can wake it); `recheck` looks once more
/// (Some: done without sleeping; a cancel due also skips the sleep); then
/// poll(2) on `kernel` and the eventfd until one is ready, the deadline
/// passes or a signal comes (under `mask`); the eventfd is drained. Ok(None)
/// after a sleep: the caller looks again. Errors: the eventfd's or poll's
/// errno (EINTR: a handler ran), or `recheck`'s.
pub fn sleep_on<T>(
    doorbell: Option<(&corestack::Stack, &corestack::Notify)>,
    quiet: &Quiet,
    kernel: &[pollfd],
    deadline: Deadline,
    mask: Option<&sigset_t>,
    recheck: impl FnOnce() -> Result<Option<T>, c_int>,
) -> Result<Option<T>, c_int> {
    let efd = thread_eventfd()?;
    let asleep = quiet.asleep_eventfd(efd);
    let armed = doorbell.and_then(|(s, n)| s.arm(n, efd));
    if let Some(v) = recheck()? {
        return Ok(Some(v));
    }
    if quiet.due() {
        return Ok(None);
    }
    let mut set = kernel.to_vec();
    set.push(pollfd {
        fd: efd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ms = match doorbell {
        // Armed: the engine rings; not armed (no room): nap and look again.
        Some((s, _)) => deadline.sleep_ms(s, armed.is_some()),
        None => deadline.poll_ms(),
    };
    let r = sys::poll_fds(&mut set, ms, mask);
    drop(armed);
    drop(asleep);
    if set.last().is_some_and(|p| p.revents != 0) {
        sys::eventfd_drain(efd);
    }
    r.map(|_| None)
}
