//! `pthread_cancel` of a thread that waits in a corestack call.
//!
//! glibc's deferred cancellation only marks the target (no signal) unless
//! the target is inside one of glibc's own cancellation points, where it
//! is unwound by a signal. The shim's waits sleep in a futex or in the
//! real poll/epoll_wait inside Rust frames, where such an unwind must not
//! happen (it would cross `catch_unwind` and held locks). So:
//!
//! - A wait runs with cancellation disabled ([`Quiet`]): no glibc call it
//!   makes acts on a cancel.
//! - `pthread_cancel` is interposed ([`cancel`]): the real one marks the
//!   target in glibc, then the shim marks the target's record here
//!   (pending) and wakes it where it sleeps, which the thread published in
//!   its record ([`Quiet::asleep_futex`], [`Quiet::asleep_eventfd`],
//!   [`Quiet::asleep_epoll`]).
//! - A wait sees the mark ([`Quiet::due`]: pending, and cancellation was
//!   enabled when the wait began) and ends with [`PENDING`]; the entry
//!   point ([`point`]) restores nothing (the guard did) and, once every
//!   Rust value of the call is gone, calls `pthread_testcancel`, which
//!   unwinds the thread as glibc's own recv would. A cancel pending when
//!   the call begins acts there, before the shim does anything.
//! - A thread that disabled cancellation keeps waiting; the mark stays
//!   and acts in a later wait once it is enabled again (as the pending
//!   cancel of glibc acts at a later cancellation point).
//!
//! Race: the waiter publishes where it sleeps, then looks at the mark; the
//! canceller sets the mark, then wakes what is published (both under the
//! record's lock), so one of the two sees the other. A futex sleeper is
//! woken with [`appif::notify::Notify::nudge`] (the word moves, so a
//! sleeper about to sleep does not), an eventfd sleeper by a write.
//!
//! Records: one per thread that waited in the shim, made on its first
//! wait and removed when it exits; `pthread_cancel` of a thread with none
//! makes one for it to find (an orphan). glibc reuses a `pthread_t` as
//! soon as its thread is joined, so a record names its thread by the
//! `pthread_t` and the thread's CPU-time clock (`pthread_getcpuclockid`,
//! which encodes the kernel's thread id): a thread never adopts an orphan
//! left for an earlier thread with the same `pthread_t`. At most
//! [`MAX_ORPHANS`] orphans are kept (the oldest go first).
//!
//! Not covered: the asynchronous cancellation type
//! (`PTHREAD_CANCEL_ASYNCHRONOUS`), under which POSIX allows only the
//! async-cancel-safe functions anyway.

use appif::notify::Notify;
use core::ffi::c_int;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, Ordering};
use std::cell::{Cell, OnceCell};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// What a wait returns (as its errno) when it ended for a pending cancel;
/// never reaches the application ([`point`] turns it into the unwind).
pub const PENDING: c_int = -4095;

const PTHREAD_CANCEL_ENABLE: c_int = 0;
const PTHREAD_CANCEL_DISABLE: c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
    fn pthread_getcpuclockid(thread: libc::pthread_t, clock: *mut libc::clockid_t) -> c_int;
}

extern "C-unwind" {
    /// Unwinds the thread when a cancel is pending and enabled.
    fn pthread_testcancel();
}

/// A kernel wait that a canceller can end: what [`Quiet::asleep_epoll`]
/// publishes (`epoll::Epoll`, woken through its wake eventfd).
pub trait Wake: Sync {
    /// Wakes the threads asleep in this wait (fd `fd`).
    fn wake_now(&self, fd: c_int);
}

/// Where a waiting thread sleeps.
#[derive(Clone, Copy)]
enum Sleep {
    Awake,
    Futex(*const Notify),
    Eventfd(c_int),
    /// In the kernel wait of an epoll (its fd), which may have no wake
    /// eventfd yet: the canceller makes it.
    Epoll(*const dyn Wake, c_int),
}

// SAFETY: the pointers are only dereferenced under the record's lock, while
// the sleeper that published them keeps the doorbell or epoll alive (it
// clears them, under the same lock, before its guard's borrow ends).
unsafe impl Send for Sleep {}

/// One thread's cancellation record.
struct Rec {
    thread: libc::pthread_t,
    /// The thread's CPU-time clock: with `thread`, who it is.
    clock: libc::clockid_t,
    /// Made by `pthread_cancel` for a thread that had none yet.
    orphan: AtomicBool,
    pending: AtomicBool,
    sleep: Mutex<Sleep>,
}

/// The most records kept for threads that have not waited in the shim yet.
pub const MAX_ORPHANS: usize = 256;

/// Every record, by thread; the orphans in the order they were made.
#[derive(Default)]
struct Recs {
    by_thread: HashMap<libc::pthread_t, Arc<Rec>>,
    orphans: VecDeque<libc::pthread_t>,
}

static RECS: Mutex<Option<Recs>> = Mutex::new(None);

/// Runs `f` on the records, under their lock.
fn recs<T>(f: impl FnOnce(&mut Recs) -> T) -> T {
    let mut g = RECS.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(Recs::default))
}

/// This thread's record (made on first use), removed at thread exit.
struct Mine(OnceCell<Arc<Rec>>);

impl Drop for Mine {
    fn drop(&mut self) {
        if let Some(r) = self.0.get() {
            recs(|all| {
                if all
                    .by_thread
                    .get(&r.thread)
                    .is_some_and(|x| Arc::ptr_eq(x, r))
                {
                    all.by_thread.remove(&r.thread);
                }
            });
        }
    }
}

thread_local! {
    static MINE: Mine = const { Mine(OnceCell::new()) };
    /// Set by [`ended_for_cancel`], taken by [`point`].
    static DUE: Cell<bool> = const { Cell::new(false) };
}

fn self_id() -> libc::pthread_t {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() }
}

/// The CPU-time clock of `thread` (None: it has ended).
fn clock_of(thread: libc::pthread_t) -> Option<libc::clockid_t> {
    let mut c: libc::clockid_t = 0;
    // SAFETY: writes one clockid_t into a live local; `thread` is a live
    // thread's (ours, or the one the application passed to pthread_cancel).
    (unsafe { pthread_getcpuclockid(thread, &mut c) } == 0).then_some(c)
}

/// The record of `thread` with CPU clock `clock`: the one it has, or a
/// new one (an `orphan`: made by a canceller) replacing any left for an
/// earlier thread with the same `pthread_t`.
fn find_or_make(thread: libc::pthread_t, clock: libc::clockid_t, orphan: bool) -> Arc<Rec> {
    recs(|all| {
        if let Some(r) = all.by_thread.get(&thread) {
            if r.clock == clock {
                if !orphan {
                    r.orphan.store(false, Ordering::Relaxed);
                }
                return r.clone();
            }
        }
        if orphan {
            while all.orphans.len() >= MAX_ORPHANS {
                let Some(old) = all.orphans.pop_front() else {
                    break;
                };
                if all
                    .by_thread
                    .get(&old)
                    .is_some_and(|r| r.orphan.load(Ordering::Relaxed))
                {
                    all.by_thread.remove(&old);
                }
            }
            all.orphans.push_back(thread);
        }
        let r = Arc::new(Rec {
            thread,
            clock,
            orphan: AtomicBool::new(orphan),
            pending: AtomicBool::new(false),
            sleep: Mutex::new(Sleep::Awake),
        });
        all.by_thread.insert(thread, r.clone());
        r
    })
}

fn with_mine<T>(f: impl FnOnce(&Rec) -> T) -> Option<T> {
    MINE.try_with(|m| {
        f(m.0.get_or_init(|| {
            let me = self_id();
            find_or_make(me, clock_of(me).unwrap_or(0), false)
        }))
    })
    .ok()
}

/// Cancellation disabled for a wait; the thread's state comes back when
/// it drops (with the deferred type that never acts: [`point`] does).
pub struct Quiet {
    old: c_int,
}

impl Quiet {
    /// Disables cancellation for this thread (and makes its record).
    pub fn new() -> Quiet {
        let mut old = PTHREAD_CANCEL_ENABLE;
        // SAFETY: writes the old state into a live int.
        unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
        let _ = with_mine(|_| ());
        Quiet { old }
    }

    /// True when the wait should end for a cancel: one was requested for
    /// this thread and cancellation was enabled when the wait began.
    pub fn due(&self) -> bool {
        self.old == PTHREAD_CANCEL_ENABLE
            && with_mine(|r| r.pending.load(Ordering::SeqCst)).unwrap_or(false)
    }

    /// Publishes that this thread sleeps on `n`'s futex until the guard
    /// drops; look at [`Quiet::due`] after this, before sleeping.
    pub fn asleep_futex<'a>(&self, n: &'a Notify) -> Asleep<'a> {
        publish(Sleep::Futex(n))
    }

    /// Publishes that this thread sleeps with eventfd `fd` (one the shim
    /// never closes) among its fds until the guard drops.
    pub fn asleep_eventfd(&self, fd: c_int) -> Asleep<'static> {
        publish(Sleep::Eventfd(fd))
    }

    /// Publishes that this thread sleeps in the kernel wait of epoll `ep`
    /// (fd `epfd`) until the guard drops. A canceller wakes it through the
    /// epoll's wake eventfd, which it puts in the epoll if none is there:
    /// an epoll that never held a corestack socket takes none from the
    /// pool for its waits (in service mode the pool's are the daemon's).
    pub fn asleep_epoll<'a, E: Wake + 'static>(&self, ep: &'a E, epfd: c_int) -> Asleep<'a> {
        let ep: *const dyn Wake = ep;
        publish(Sleep::Epoll(ep, epfd))
    }
}

impl Default for Quiet {
    fn default() -> Self {
        Quiet::new()
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        // SAFETY: no pointers. Restoring ENABLE with the deferred type does
        // not act on a pending cancel.
        unsafe { pthread_setcancelstate(self.old, core::ptr::null_mut()) };
    }
}

fn publish<'a>(s: Sleep) -> Asleep<'a> {
    let _ = with_mine(|r| *r.sleep.lock().unwrap_or_else(|p| p.into_inner()) = s);
    Asleep(PhantomData)
}

/// A published sleep (see [`Quiet::asleep_futex`]); unpublished on drop.
pub struct Asleep<'a>(PhantomData<&'a ()>);

impl Drop for Asleep<'_> {
    fn drop(&mut self) {
        let _ = with_mine(|r| *r.sleep.lock().unwrap_or_else(|p| p.into_inner()) = Sleep::Awake);
    }
}

/// The interposed `pthread_cancel(thread)` after the real one returned
/// `rc` (0: the cancel is requested in glibc): marks the thread's record
/// and wakes it where it sleeps in the shim.
pub fn cancel(thread: libc::pthread_t, rc: c_int) {
    if rc != 0 {
        return;
    }
    // The wake-up below calls write(2): not a cancellation point for us.
    let _q = Quiet::new();
    let Some(clock) = clock_of(thread) else {
        return;
    };
    let r = find_or_make(thread, clock, true);
    r.pending.store(true, Ordering::SeqCst);
    let sleep = r.sleep.lock().unwrap_or_else(|p| p.into_inner());
    match *sleep {
        Sleep::Awake => {}
        // SAFETY: published by a sleeper that keeps the doorbell alive
        // until it clears it under this lock (see `Sleep`).
        Sleep::Futex(n) => unsafe { (*n).nudge() },
        Sleep::Eventfd(fd) => crate::sys::eventfd_signal(fd),
        // SAFETY: as for Futex.
        Sleep::Epoll(ep, epfd) => unsafe { (*ep).wake_now(epfd) },
    }
}

/// Records that the current call ended for a pending cancel ([`PENDING`]):
/// [`point`] acts on it once the call's Rust frames are gone.
pub fn ended_for_cancel() {
    let _ = DUE.try_with(|d| d.set(true));
}

/// Runs an entry point's body `f`, then, when it ended for a pending
/// cancel, clears the mark and calls `pthread_testcancel`, which unwinds
/// the thread (through the caller, which must be `extern "C-unwind"` and
/// hold nothing with a destructor). If glibc has no cancel pending (a
/// stale mark), the call returns what `f` returned (-1, EINTR).
///
/// A cancel already pending acts first, as at the entry of glibc's own
/// cancellation points (`pthread_testcancel`: one load when none is).
#[inline(always)]
pub fn point<T>(f: impl FnOnce() -> T) -> T {
    if !crate::sys::inside() {
        // SAFETY: no pointers; may unwind (C-unwind) through the caller,
        // which holds nothing with a destructor yet.
        unsafe { pthread_testcancel() };
    }
    let r = f();
    if DUE.try_with(|d| d.replace(false)).unwrap_or(false) {
        act();
    }
    r
}

#[cold]
#[inline(never)]
fn act() {
    let _ = with_mine(|r| r.pending.store(false, Ordering::SeqCst));
    // SAFETY: no pointers; may unwind (C-unwind), through frames that hold
    // nothing with a destructor.
    unsafe { pthread_testcancel() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_marks_the_record_and_wakes_a_published_futex_sleeper() {
        let n = Arc::new(Notify::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let n2 = n.clone();
        let h = std::thread::spawn(move || {
            let q = Quiet::new();
            tx.send(self_id()).unwrap();
            let _a = q.asleep_futex(&n2);
            let seen = n2.seq();
            let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !q.due() && std::time::Instant::now() < end {
                n2.wait(seen, Some(std::time::Duration::from_secs(5)));
            }
            let due = q.due();
            drop(_a);
            drop(q);
            due
        });
        let t = rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let before = std::time::Instant::now();
        cancel(t, 0);
        assert!(h.join().unwrap(), "the sleeper did not see the cancel");
        assert!(before.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn a_failed_real_cancel_marks_nothing_and_disabled_cancellation_is_not_due() {
        let h = std::thread::spawn(|| {
            cancel(self_id(), libc::ESRCH);
            let q = Quiet::new();
            let not_marked = !q.due();
            // SAFETY: no pointers.
            unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, core::ptr::null_mut()) };
            cancel(self_id(), 0);
            let q2 = Quiet::new();
            let disabled_not_due = !q2.due();
            drop(q2);
            drop(q);
            // The mark stays for a later wait with cancellation enabled.
            // SAFETY: no pointers (deferred type: does not act).
            unsafe { pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, core::ptr::null_mut()) };
            let q3 = Quiet::new();
            let later_due = q3.due();
            let _ = with_mine(|r| r.pending.store(false, Ordering::SeqCst));
            (not_marked, disabled_not_due, later_due)
        });
        assert_eq!(h.join().unwrap(), (true, true, true));
    }

    /// glibc hands a joined thread's `pthread_t` to the next thread: a mark
    /// left for the first (cancelled before it ever waited in the shim) is
    /// not the second's.
    #[test]
    fn a_reused_pthread_t_does_not_inherit_an_orphans_mark() {
        let mut reused = false;
        for _ in 0..20 {
            let (tx, rx) = std::sync::mpsc::channel();
            let (go, wait) = std::sync::mpsc::channel::<()>();
            let a = std::thread::spawn(move || {
                tx.send(self_id()).unwrap();
                let _ = wait.recv();
            });
            let first = rx.recv().unwrap();
            cancel(first, 0);
            go.send(()).unwrap();
            a.join().unwrap();
            let b = std::thread::spawn(move || {
                let q = Quiet::new();
                (self_id(), q.due())
            });
            let (second, due) = b.join().unwrap();
            if second == first {
                reused = true;
                assert!(!due, "the new thread inherited the old one's cancel");
                break;
            }
        }
        assert!(reused, "glibc never reused a pthread_t in 20 threads");
    }
}
