//! The system calls the client makes itself: the only module of the crate
//! with `unsafe` code.
#![allow(unsafe_code)]

use core::time::Duration;
use std::os::fd::RawFd;

/// Sleeps until `fd` is readable or `timeout` passes (poll(2)); errors
/// (EINTR, a closed fd) just end the wait early.
pub fn wait_readable(fd: RawFd, timeout: Duration) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `pfd` is a valid pollfd on our stack for the duration of the
    // call and we pass a count of 1; poll only reads fd/events and writes
    // revents.
    unsafe {
        libc::poll(&mut pfd, 1, ms);
    }
}

/// Sleeps until one of `fds` is readable or `timeout` passes (poll(2));
/// errors just end the wait early. At most 4 fds.
pub fn wait_readable_any(fds: &[RawFd], timeout: Duration) {
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 4];
    let n = fds.len().min(pfds.len());
    for (p, fd) in pfds.iter_mut().zip(&fds[..n]) {
        p.fd = *fd;
    }
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `pfds` is an array on our stack with at least `n` valid
    // entries; poll only reads fd/events and writes revents.
    unsafe {
        libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, ms);
    }
}

/// True when `fd` is readable, hung up or in error right now (poll(2)
/// with a zero timeout: never blocks); false otherwise and on errors.
pub fn readable_or_hung_up(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on our stack; a zero timeout never blocks.
    let r = unsafe { libc::poll(&mut pfd, 1, 0) };
    r > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

/// How many CPUs the calling thread may run on (sched_getaffinity); None
/// when the call fails.
pub fn allowed_cpus() -> Option<usize> {
    // SAFETY: cpu_set_t is plain bits, valid when zeroed; sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it and reports errors
    // by return value; CPU_COUNT only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        if libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(libc::CPU_COUNT(&set) as usize)
    }
}

/// Sleeps until `fd` is readable or `timeout` passes (ppoll(2), at least
/// 1 ms) under signal mask `mask` (None: the thread's); returns true when
/// a signal handler interrupted it (EINTR).
pub fn sleep_readable(fd: RawFd, timeout: Duration, mask: Option<&libc::sigset_t>) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let t = timeout.max(Duration::from_millis(1));
    let ts = libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    };
    let m = mask.map_or(core::ptr::null(), |m| m as *const libc::sigset_t);
    // SAFETY: one valid pollfd, a timespec and a null or live sigset on our
    // stack; ppoll writes only the pollfd's revents.
    let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, m) };
    r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
}

/// Whether the calling thread runs under a real-time policy (SCHED_FIFO or
/// SCHED_RR), where a thread of the same priority waits for this one to
/// yield.
pub fn realtime_policy() -> bool {
    // SAFETY: no pointers; 0 is the calling thread.
    let p = unsafe { libc::sched_getscheduler(0) };
    p == libc::SCHED_FIFO || p == libc::SCHED_RR
}

/// Signals for a waiter that spins in user space (review finding 11).
///
/// A signal handler that runs while a thread spins leaves no trace the
/// spin could see, so the call it interrupted would go on waiting where
/// Linux returns EINTR. So while it spins the thread blocks the signals
/// that can arrive asynchronously ([`SpinSignals::hold`]: every one but
/// SIGKILL, SIGSTOP and the synchronous faults SIGSEGV, SIGBUS, SIGFPE,
/// SIGILL, SIGTRAP, SIGSYS, SIGABRT) and looks at the pending set each
/// round ([`SpinSignals::check`]); before it sleeps in the kernel it puts
/// its mask back ([`SpinSignals::release`]), and the kernel call reports
/// what arrives during the sleep. A pending signal that the call's mask
/// lets through is then delivered at once (the handler runs inside `check`
/// or `release`, under the call's mask). Costs: one `rt_sigprocmask` to
/// hold, one `rt_sigpending` per [`SIGNAL_LOOK_EVERY`] of spinning
/// ([`SpinSignals::check_due`]; a handler runs at most that much later than
/// it would in a kernel sleep), one `rt_sigpending` and one
/// `rt_sigprocmask` to release.
///
/// Where the program's handlers are counted ([`count_handlers_with`]: the
/// shim puts each behind a trampoline that counts it), a wait holds
/// nothing and makes no system call for signals: a handler runs as the
/// signal arrives, and the wait sees the thread's count move
/// ([`SpinSignals::check`]). Only a call with a mask of its own (ppoll,
/// epoll_pwait, pselect) sets it for the spin and puts the thread's back
/// after (two `rt_sigprocmask`), as the kernel does for the call.
pub struct SpinSignals {
    /// Counting: the thread's handler counts when the spin began; Some
    /// while spinning.
    counted: Option<(u64, u64)>,
    /// Counting, for a call with a mask: the thread's mask to put back.
    restore: Option<libc::sigset_t>,
    /// The thread's mask before the hold; Some while holding.
    saved: Option<libc::sigset_t>,
    /// While holding: when [`SpinSignals::check_due`] looks at the pending
    /// set next.
    next_look: Option<std::time::Instant>,
    /// The mask the call runs under (ppoll's or epoll_pwait's), if not
    /// the thread's own.
    during: Option<libc::sigset_t>,
}

/// Where the handlers the calling thread has run are counted: a function
/// that returns (handlers run, those of them without SA_RESTART) for the
/// calling thread; set once ([`count_handlers_with`]).
static HANDLER_COUNT: std::sync::OnceLock<fn() -> (u64, u64)> = std::sync::OnceLock::new();

/// Tells every later wait that `count` counts the handlers the calling
/// thread runs, each of them, as they run (the shim's trampolines): a
/// spinning wait then learns of a handler from the count instead of
/// holding the signals. Only the first call counts. Only for a program
/// where every handler is counted: one that is not ends no spinning wait.
pub fn count_handlers_with(count: fn() -> (u64, u64)) {
    let _ = HANDLER_COUNT.set(count);
}

/// How often a spinning waiter looks at its pending signals
/// ([`SpinSignals::check_due`]): at most this long after a signal arrives
/// its handler runs and the wait ends (EINTR or a restart), where a kernel
/// sleep would have ended at once. A look is a system call
/// (`rt_sigpending`); one per spin round was most of a waiter's system
/// calls (sockperf ping-pong in inline mode: 18.8 per round trip).
pub const SIGNAL_LOOK_EVERY: core::time::Duration = core::time::Duration::from_micros(20);

/// The synchronous fault signals (raised by the faulting thread itself,
/// never what interrupts a sleep): a spinning waiter never holds them
/// (blocking them would turn a fault into a kill), and their handlers do
/// not decide whether a call restarts.
pub const SYNCHRONOUS_SIGNALS: [libc::c_int; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGABRT,
];

fn sigset_empty(s: &libc::sigset_t) -> bool {
    // SAFETY: sigset_t is plain bits; viewing it as bytes reads initialised
    // memory of its own size.
    let b = unsafe {
        core::slice::from_raw_parts(
            (s as *const libc::sigset_t).cast::<u8>(),
            core::mem::size_of::<libc::sigset_t>(),
        )
    };
    b.iter().all(|&x| x == 0)
}

fn empty_sigset() -> libc::sigset_t {
    // SAFETY: sigset_t is plain bits (all zero is the empty set); sigemptyset
    // writes only the set we pass.
    unsafe {
        let mut s: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut s);
        s
    }
}

fn set_mask(how: libc::c_int, set: &libc::sigset_t, old: Option<&mut libc::sigset_t>) {
    let oldp = old.map_or(core::ptr::null_mut(), |o| o as *mut libc::sigset_t);
    // SAFETY: `set` is a live sigset; `oldp` is null or a live, writable one.
    unsafe { libc::pthread_sigmask(how, set, oldp) };
}

/// Whether a handler runs for `sig` now, and whether it has SA_RESTART:
/// None when delivering `sig` does not interrupt a call on Linux (ignored,
/// or a default action that ignores or stops).
fn interrupts(sig: libc::c_int) -> Option<bool> {
    // SAFETY: sigaction with a null new action only writes `old`.
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sigaction(sig, core::ptr::null(), &mut old) } != 0 {
        return None;
    }
    match old.sa_sigaction {
        libc::SIG_IGN | libc::SIG_DFL => None,
        _ => Some(old.sa_flags & libc::SA_RESTART != 0),
    }
}

impl SpinSignals {
    /// For a call that runs under `mask` (None: the thread's own mask).
    /// Holds nothing yet.
    pub fn new(mask: Option<&libc::sigset_t>) -> SpinSignals {
        SpinSignals {
            counted: None,
            restore: None,
            saved: None,
            next_look: None,
            during: mask.copied(),
        }
    }

    /// Holds the asynchronous signals (once; again after a delivery);
    /// where handlers are counted, notes the count instead (and sets the
    /// call's mask, if it has one).
    pub fn hold(&mut self) {
        if self.saved.is_some() || self.counted.is_some() {
            return;
        }
        if let Some(count) = HANDLER_COUNT.get() {
            if let (Some(during), None) = (self.during, self.restore) {
                let mut old = empty_sigset();
                set_mask(libc::SIG_SETMASK, &during, Some(&mut old));
                self.restore = Some(old);
            }
            self.counted = Some(count());
            return;
        }
        // SAFETY: sigset_t is plain bits; the calls write only our sets.
        let held = unsafe {
            let mut s: libc::sigset_t = core::mem::zeroed();
            libc::sigfillset(&mut s);
            for sig in SYNCHRONOUS_SIGNALS {
                libc::sigdelset(&mut s, sig);
            }
            s
        };
        let mut old = empty_sigset();
        set_mask(libc::SIG_BLOCK, &held, Some(&mut old));
        self.saved = Some(old);
        self.next_look = Some(std::time::Instant::now() + SIGNAL_LOOK_EVERY);
    }

    /// [`SpinSignals::check`], if [`SIGNAL_LOOK_EVERY`] has passed since
    /// the hold or the last look (None otherwise, and when not holding):
    /// for each round of a spin, where `check` would make a system call per
    /// round.
    pub fn check_due(&mut self) -> Option<bool> {
        if self.counted.is_some() {
            return self.check();
        }
        let next = self.next_look?;
        let now = std::time::Instant::now();
        if now < next {
            return None;
        }
        self.next_look = Some(now + SIGNAL_LOOK_EVERY);
        self.check()
    }

    /// While holding: delivers the pending signals the call's mask lets
    /// through (their handlers run now) and stops holding. Returns
    /// Some(restart) when one of them interrupts the call as on Linux
    /// (`restart`: every such handler has SA_RESTART); None otherwise.
    pub fn check(&mut self) -> Option<bool> {
        if let (Some((ran0, hard0)), Some(count)) = (self.counted, HANDLER_COUNT.get()) {
            let (ran, hard) = count();
            if ran == ran0 {
                return None;
            }
            // Handlers ran (already, as their signals came): the wait ends.
            self.counted = None;
            return Some(hard == hard0);
        }
        let saved = self.saved?;
        let mut pend = empty_sigset();
        // SAFETY: sigpending writes one sigset into a live one.
        unsafe { libc::sigpending(&mut pend) };
        if sigset_empty(&pend) {
            return None;
        }
        let during = self.during.unwrap_or(saved);
        let mut hit: Option<bool> = None;
        let mut any = false;
        for sig in 1..=64 {
            // SAFETY: sigismember reads valid sigsets.
            let (p, b) = unsafe {
                (
                    libc::sigismember(&pend, sig) == 1,
                    libc::sigismember(&during, sig) == 1,
                )
            };
            if p && !b {
                any = true;
                if let Some(restart) = interrupts(sig) {
                    hit = Some(hit.unwrap_or(true) && restart);
                }
            }
        }
        if !any {
            return None;
        }
        // Deliver under the call's mask, then back to the thread's.
        set_mask(libc::SIG_SETMASK, &during, None);
        set_mask(libc::SIG_SETMASK, &saved, None);
        self.saved = None;
        self.next_look = None;
        hit
    }

    /// The mask for a sleep in the kernel that keeps holding (an inline
    /// waiter's short naps between engine runs): the call's mask (or the
    /// thread's own) while holding, which ppoll/epoll_pwait set atomically
    /// for the sleep alone, so no signal slips in between the last check
    /// and the sleep. None when not holding (the sleep uses the call's
    /// own mask, if any).
    pub fn sleep_mask(&self) -> Option<libc::sigset_t> {
        if self.counted.is_some() {
            return self.during;
        }
        match self.saved {
            Some(saved) => Some(self.during.unwrap_or(saved)),
            None => self.during,
        }
    }

    /// Before a sleep in the kernel: [`SpinSignals::check`], then the
    /// thread's mask back. Returns what `check` found.
    pub fn release(&mut self) -> Option<bool> {
        let r = self.check();
        if let Some(saved) = self.saved.take() {
            set_mask(libc::SIG_SETMASK, &saved, None);
        }
        if let Some(old) = self.restore.take() {
            set_mask(libc::SIG_SETMASK, &old, None);
        }
        self.counted = None;
        self.next_look = None;
        r
    }
}

impl Drop for SpinSignals {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            set_mask(libc::SIG_SETMASK, &saved, None);
        }
        if let Some(old) = self.restore.take() {
            set_mask(libc::SIG_SETMASK, &old, None);
        }
    }
}
