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
/// hold, one `rt_sigpending` a round, one `rt_sigprocmask` to release.
pub struct SpinSignals {
    /// The thread's mask before the hold; Some while holding.
    saved: Option<libc::sigset_t>,
    /// The mask the call runs under (ppoll's or epoll_pwait's), if not
    /// the thread's own.
    during: Option<libc::sigset_t>,
}

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
            saved: None,
            during: mask.copied(),
        }
    }

    /// Holds the asynchronous signals (once; again after a delivery).
    pub fn hold(&mut self) {
        if self.saved.is_some() {
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
    }

    /// While holding: delivers the pending signals the call's mask lets
    /// through (their handlers run now) and stops holding. Returns
    /// Some(restart) when one of them interrupts the call as on Linux
    /// (`restart`: every such handler has SA_RESTART); None otherwise.
    pub fn check(&mut self) -> Option<bool> {
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
        hit
    }

    /// The mask for a sleep in the kernel that keeps holding (an inline
    /// waiter's short naps between engine runs): the call's mask (or the
    /// thread's own) while holding, which ppoll/epoll_pwait set atomically
    /// for the sleep alone, so no signal slips in between the last check
    /// and the sleep. None when not holding (the sleep uses the call's
    /// own mask, if any).
    pub fn sleep_mask(&self) -> Option<libc::sigset_t> {
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
        r
    }
}

impl Drop for SpinSignals {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            set_mask(libc::SIG_SETMASK, &saved, None);
        }
    }
}
