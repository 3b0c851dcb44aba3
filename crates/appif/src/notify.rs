//! The doorbell: the wake-up protocol (notify flag) with two ways to sleep.
//!
//! A consumer about to sleep sets its flag in `sleeping`, re-checks its
//! condition, then sleeps. A producer, after publishing, bumps `seq` and,
//! only if a flag is set, clears the flags and wakes the sleepers: no
//! wake-up is ever sent to a consumer that is running.
//!
//! Two kinds of sleeper share one [`Notify`]:
//! - **futex** ([`Notify::wait`]): sleeps on the `seq` word itself. Works
//!   across processes (the futex calls are not process-private).
//! - **eventfd** ([`Notify::arm`]): registers an eventfd, then sleeps in the
//!   kernel wherever the caller likes (poll, epoll_wait, read) together with
//!   other fds; the producer writes 1 to every eventfd registered on this
//!   doorbell. The registry is per process, so an eventfd sleeper is woken
//!   only by a producer in the same process (embedded and inline mode).
//!
//! ```text
//!   consumer                              producer
//!   seen = seq()                          publish
//!   arm(efd) / flag in `sleeping`         seq += 1
//!   re-check: changed? -> return          flags = swap(sleeping, 0)
//!   sleep (futex on seq, or poll on efd)  FUTEX  -> futex_wake(seq)
//!   disarm, drain efd                     EVENTFD-> write(efd) for each armed
//! ```

use core::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};
use core::time::Duration;

/// `sleeping` flag: a futex sleeper waits on `seq`.
const FUTEX_SLEEPER: u32 = 1;
/// `sleeping` flag: an eventfd sleeper is registered in [`WAITERS`].
const EVENTFD_SLEEPER: u32 = 2;

/// A wake-up point shared by one producer and its waiters. `repr(C)` and
/// made of atomics only, so it can live in memory shared between processes.
#[derive(Debug, Default)]
#[repr(C)]
pub struct Notify {
    seq: AtomicU32,
    /// Flags of the kinds of sleeper waiting ([`FUTEX_SLEEPER`], [`EVENTFD_SLEEPER`]).
    sleeping: AtomicU32,
}

/// How a futex wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// `seq` moved (or the futex woke us; the caller re-checks anyway).
    Changed,
    /// The timeout passed.
    TimedOut,
    /// A signal handler ran (EINTR). Without a timeout the kernel restarts
    /// the wait by itself when the handler has SA_RESTART, so this is seen
    /// only for handlers without it, and for every handler when a timeout
    /// was given (as for sockets with SO_RCVTIMEO on Linux).
    Interrupted,
}

impl Notify {
    /// The current sequence; pass it to [`Notify::wait`] (or compare after
    /// an [`Notify::arm`]) after checking the condition, so that a change
    /// in between is not missed.
    pub fn seq(&self) -> u32 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Producer side: records a change and wakes the sleepers if there are
    /// any (futex sleepers by FUTEX_WAKE, eventfd sleepers by writing their
    /// eventfd). Costs one atomic add and one load when nobody sleeps.
    pub fn notify(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) == 0 {
            return;
        }
        let flags = self.sleeping.swap(0, Ordering::SeqCst);
        if flags & FUTEX_SLEEPER != 0 {
            futex_wake(&self.seq);
        }
        if flags & EVENTFD_SLEEPER != 0 {
            ring_waiters(self.key());
        }
    }

    /// Consumer side, futex variant: sleeps until `seq` moves past `seen`,
    /// `timeout` passes (None = no limit) or a signal handler runs. Returns
    /// at once if it already moved.
    pub fn wait(&self, seen: u32, timeout: Option<Duration>) -> Woke {
        self.sleeping.fetch_or(FUTEX_SLEEPER, Ordering::SeqCst);
        if self.seq.load(Ordering::SeqCst) != seen {
            return Woke::Changed;
        }
        futex_wait(&self.seq, seen, timeout)
    }

    /// Consumer side, eventfd variant: registers `eventfd` (a raw eventfd
    /// this process owns and keeps open while the returned guard lives) so
    /// that the next [`Notify::notify`] writes 1 to it. The caller then
    /// re-checks its condition (or compares [`Notify::seq`] with the value
    /// it read before), sleeps in the kernel with the eventfd among the fds
    /// it waits on, and drains the eventfd after waking. Dropping the guard
    /// unregisters.
    ///
    /// None when the process-wide registry ([`MAX_EVENTFD_SLEEPERS`] armed
    /// at once) is full: the caller must then sleep with a short timeout.
    pub fn arm(&self, eventfd: i32) -> Option<Armed<'_>> {
        let slot = register(self.key(), eventfd)?;
        self.sleeping.fetch_or(EVENTFD_SLEEPER, Ordering::SeqCst);
        Some(Armed {
            _notify: self,
            slot,
        })
    }

    fn key(&self) -> usize {
        self as *const Notify as usize
    }
}

/// An eventfd registered on a [`Notify`] (see [`Notify::arm`]); unregistered
/// when dropped. A write that raced with the drop may still reach the
/// eventfd: its owner drains it before it sleeps again.
#[derive(Debug)]
pub struct Armed<'a> {
    _notify: &'a Notify,
    slot: usize,
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        if let Some(w) = WAITERS.get(self.slot) {
            w.key.store(0, Ordering::SeqCst);
        }
    }
}

/// How many eventfd sleepers may be armed at once in one process.
pub const MAX_EVENTFD_SLEEPERS: usize = 1024;

/// One registered eventfd sleeper: the address of the [`Notify`] it waits
/// on (0 = free, 1 = being filled) and its eventfd.
struct Waiter {
    key: AtomicUsize,
    fd: AtomicI32,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Waiter = Waiter {
    key: AtomicUsize::new(0),
    fd: AtomicI32::new(-1),
};

/// The process's eventfd sleepers. Static (no allocation), scanned by
/// producers only up to [`HIGH`] and only when a sleeper flag is set.
static WAITERS: [Waiter; MAX_EVENTFD_SLEEPERS] = [FREE; MAX_EVENTFD_SLEEPERS];
/// One past the highest slot ever used.
static HIGH: AtomicUsize = AtomicUsize::new(0);
/// Marks a slot being filled (not a valid [`Notify`] address).
const FILLING: usize = 1;

fn register(key: usize, fd: i32) -> Option<usize> {
    for (i, w) in WAITERS.iter().enumerate() {
        if w.key.load(Ordering::Relaxed) != 0 {
            continue;
        }
        if w.key
            .compare_exchange(0, FILLING, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            w.fd.store(fd, Ordering::SeqCst);
            HIGH.fetch_max(i + 1, Ordering::SeqCst);
            w.key.store(key, Ordering::SeqCst);
            return Some(i);
        }
    }
    None
}

fn ring_waiters(key: usize) {
    let high = HIGH.load(Ordering::SeqCst).min(MAX_EVENTFD_SLEEPERS);
    for w in &WAITERS[..high] {
        if w.key.load(Ordering::SeqCst) == key {
            eventfd_write(w.fd.load(Ordering::SeqCst));
        }
    }
}

fn eventfd_write(fd: i32) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live stack array; a bad fd only fails
    // (the registry holds fds their owners keep open while armed).
    unsafe {
        libc::syscall(libc::SYS_write, fd, one.as_ptr(), one.len());
    }
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> Woke {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT reads the aligned u32 behind `word`, which lives for
    // the call; `ts_ptr` is null or points to a timespec on our stack.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
        )
    };
    if r == 0 {
        return Woke::Changed;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EINTR) => Woke::Interrupted,
        Some(libc::ETIMEDOUT) => Woke::TimedOut,
        _ => Woke::Changed,
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn sleeping_waiter_is_woken_by_notify() {
        let n = Arc::new(Notify::default());
        let seen = n.seq();
        let n2 = n.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            n2.notify();
        });
        let start = std::time::Instant::now();
        n.wait(seen, Some(Duration::from_secs(5)));
        assert!(start.elapsed() < Duration::from_secs(4));
        assert_ne!(n.seq(), seen);
        t.join().unwrap();
    }

    #[test]
    fn wait_with_stale_seq_returns_at_once() {
        let n = Notify::default();
        let seen = n.seq();
        n.notify();
        let start = std::time::Instant::now();
        assert_eq!(n.wait(seen, Some(Duration::from_secs(5))), Woke::Changed);
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn futex_wait_without_change_times_out() {
        let n = Notify::default();
        let seen = n.seq();
        assert_eq!(
            n.wait(seen, Some(Duration::from_millis(10))),
            Woke::TimedOut
        );
    }

    fn eventfd() -> i32 {
        // SAFETY: no pointers; the fd is closed by the test.
        unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) }
    }

    fn poll_readable(fd: i32, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on our stack.
        unsafe { libc::poll(&mut p, 1, ms) == 1 }
    }

    fn close(fd: i32) {
        // SAFETY: closes an fd the test created.
        unsafe { libc::close(fd) };
    }

    #[test]
    fn armed_eventfd_sleeper_is_woken_by_notify_from_another_thread() {
        let n = Arc::new(Notify::default());
        let efd = eventfd();
        assert!(efd >= 0);
        let seen = n.seq();
        let armed = n.arm(efd).expect("registry has room");
        assert_eq!(n.seq(), seen, "nothing changed yet");
        let n2 = n.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            n2.notify();
        });
        assert!(poll_readable(efd, 5000), "the eventfd was not written");
        drop(armed);
        t.join().unwrap();
        close(efd);
    }

    #[test]
    fn notify_without_armed_sleeper_writes_no_eventfd() {
        let n = Notify::default();
        let efd = eventfd();
        let armed = n.arm(efd).expect("registry has room");
        drop(armed);
        n.notify();
        assert!(!poll_readable(efd, 0), "a disarmed eventfd was written");
        close(efd);
    }

    #[test]
    fn notify_wakes_only_sleepers_of_its_own_doorbell() {
        let a = Notify::default();
        let b = Notify::default();
        let (ea, eb) = (eventfd(), eventfd());
        let _ga = a.arm(ea).expect("room");
        let _gb = b.arm(eb).expect("room");
        a.notify();
        assert!(poll_readable(ea, 0));
        assert!(!poll_readable(eb, 0));
        close(ea);
        close(eb);
    }
}
