//! The doorbell: the wake-up protocol (notify flag), written once for every
//! way to sleep and every place a sleeper may be.
//!
//! A consumer about to sleep sets its flag in `sleeping`, re-checks its
//! condition, then sleeps. A producer, after publishing, bumps `seq` and,
//! only if a flag is set, clears the flags and wakes the sleepers: no
//! wake-up is ever sent to a consumer that is running.
//!
//! Two kinds of sleeper share one [`Notify`]:
//! - **futex** ([`Notify::wait`]): sleeps on the `seq` word itself. Works
//!   across processes (the futex calls are not process-private).
//! - **eventfd** ([`Notify::arm`], [`Notify::arm_in`]): records an eventfd
//!   in a table of sleepers ([`Sleepers`]) under the doorbell's key, then
//!   sleeps in the kernel wherever it likes (poll, epoll_wait, read)
//!   together with other fds; the producer writes 1 to every eventfd
//!   recorded under that key ([`Notify::notify`], [`Notify::notify_in`]).
//!
//! Where the eventfd sleepers are recorded decides who can wake them:
//! - **same process** (embedded and inline mode): the process's own table
//!   (static, [`MAX_EVENTFD_SLEEPERS`] entries, filled on demand); a
//!   doorbell's key is its address.
//! - **across processes** (service mode): a table whose keys live in the
//!   application's segment ([`Sleepers::in_region`], [`SEGMENT_SLEEPERS`]
//!   entries); a doorbell's key is its offset in the segment, the same in
//!   both processes. Each entry stands for one eventfd the application
//!   handed to the daemon (`SCM_RIGHTS`) when it joined: the application
//!   knows it by its own number, the daemon by the copy it received, and
//!   each side's [`Sleepers`] holds its own numbers, so the shared memory
//!   holds no fd number anybody would write to. The daemon writes only to
//!   an entry armed with the key of the doorbell it rings.
//!
//! ```text
//!   consumer                              producer
//!   seen = seq()                          publish
//!   arm(efd) / flag in `sleeping`         seq += 1
//!   re-check: changed? -> return          flags = swap(sleeping, 0)
//!   sleep (futex on seq, or poll on efd)  FUTEX  -> futex_wake(seq)
//!   disarm, drain efd                     EVENTFD-> write(efd) for each entry
//!                                                    armed with this key
//! ```

use crate::region::Region;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use core::time::Duration;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// `sleeping` flag: a futex sleeper waits on `seq`.
const FUTEX_SLEEPER: u32 = 1;
/// `sleeping` flag: an eventfd sleeper is armed in a [`Sleepers`] table.
const EVENTFD_SLEEPER: u32 = 2;

pub use crate::words::Notify;

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

    /// True while a waiter is armed here (a futex sleeper, or an eventfd
    /// sleeper recorded in a table) and no notification has reached it
    /// since: the producer's hint that a consumer is idle and waiting (the
    /// engine prefers such a member of a shared listener). A hint only:
    /// the flag is cleared by the next notification and set again when the
    /// waiter goes back to sleep.
    pub fn has_sleepers(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed) != 0
    }

    /// Producer side, same process: records a change and wakes the
    /// sleepers if there are any (futex sleepers by FUTEX_WAKE, eventfd
    /// sleepers of this process's table by writing their eventfd). Costs
    /// one atomic add and one load when nobody sleeps.
    pub fn notify(&self) {
        self.notify_in(None)
    }

    /// Producer side: as [`Notify::notify`], with the eventfd sleepers
    /// recorded in `table` (None: this process's own table). A doorbell
    /// inside an application segment is rung with the segment's table.
    pub fn notify_in(&self, table: Option<&Sleepers>) {
        self.seq.fetch_add(1, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) == 0 {
            return;
        }
        let flags = self.sleeping.swap(0, Ordering::SeqCst);
        if flags & FUTEX_SLEEPER != 0 {
            futex_wake(&self.seq);
        }
        if flags & EVENTFD_SLEEPER != 0 {
            match table {
                None => PROCESS.ring(self.key(0)),
                Some(t) => t.ring(self.key(t.base)),
            }
        }
    }

    /// Wakes the futex sleepers for a reason outside the doorbell's own
    /// (the preload shim waking a thread it cancels): bumps `seq`, so a
    /// sleeper about to sleep returns at once, and wakes those asleep,
    /// leaving the sleepers' flags for the producer's next notification.
    /// Waiters see a change, look again and find nothing new.
    pub fn nudge(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
        futex_wake(&self.seq);
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

    /// Consumer side, eventfd variant, same process: records `eventfd` (a
    /// raw eventfd this process owns and keeps open while the returned
    /// guard lives) in the process's table so that the next
    /// [`Notify::notify`] writes 1 to it. The caller then re-checks its
    /// condition (or compares [`Notify::seq`] with the value it read
    /// before), sleeps in the kernel with the eventfd among the fds it
    /// waits on, and drains the eventfd after waking. Dropping the guard
    /// disarms.
    ///
    /// None when the table ([`MAX_EVENTFD_SLEEPERS`] armed at once) is
    /// full: the caller must then sleep with a short timeout.
    pub fn arm(&self, eventfd: i32) -> Option<Armed<'_>> {
        self.arm_in(None, eventfd)
    }

    /// As [`Notify::arm`], in `table` (None: this process's own). In a
    /// segment's table `eventfd` must be one of the eventfds the table was
    /// made with (the ones the producer knows); several waiters may arm
    /// the same one on the same doorbell (threads sharing an epoll set).
    /// None when the table is full, `eventfd` is not in it, or it is armed
    /// on another doorbell: sleep with a short timeout then.
    pub fn arm_in<'a>(&'a self, table: Option<&'a Sleepers>, eventfd: i32) -> Option<Armed<'a>> {
        let entry = match table {
            None => PROCESS.register(self.key(0), eventfd)?,
            Some(t) => t.register(self.key(t.base), eventfd)?,
        };
        self.sleeping.fetch_or(EVENTFD_SLEEPER, Ordering::SeqCst);
        Some(Armed {
            _notify: self,
            table,
            entry,
        })
    }

    /// This doorbell's key in a table whose memory starts at `base` (0:
    /// addresses, for the process's table).
    fn key(&self, base: usize) -> u64 {
        (self as *const Notify as usize).wrapping_sub(base) as u64
    }
}

/// An eventfd armed on a [`Notify`] (see [`Notify::arm`]); disarmed when
/// dropped. A write that raced with the drop may still reach the eventfd:
/// its owner drains it before it sleeps again.
#[derive(Debug)]
pub struct Armed<'a> {
    _notify: &'a Notify,
    table: Option<&'a Sleepers>,
    entry: usize,
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        match self.table {
            None => PROCESS.unregister(self.entry),
            Some(t) => t.unregister(self.entry),
        }
    }
}

/// How many eventfd sleepers may be armed at once in one process's own table.
pub const MAX_EVENTFD_SLEEPERS: usize = 1024;

/// Entries of a segment's table: eventfds an application hands to the
/// daemon when it joins (at most this many).
pub const SEGMENT_SLEEPERS: usize = 16;

/// Marks an entry of the process's table being filled (never a key: no
/// [`Notify`] sits at address 1).
const FILLING: u64 = 1;

/// A table of eventfd sleepers: per entry the key of the doorbell it is
/// armed on (0: none) and the eventfd's number in this process.
///
/// - The process's own table (static, no allocation): entries are taken
///   on demand, keys are addresses.
/// - A segment's table ([`Sleepers::in_region`]): the keys live in shared
///   memory (the application writes them, the daemon reads them), the fds
///   are fixed at association time and private to each side; keys are
///   offsets in the segment.
pub struct Sleepers {
    keys: KeyCells,
    /// Each entry's eventfd as numbered in this process (-1: none).
    fds: FdCells,
    /// Subtracted from a doorbell's address to get its key.
    base: usize,
    /// Segment tables: how many of this process's waiters armed each
    /// entry (arming and disarming take this lock; they happen only on
    /// the way into and out of a sleep).
    users: Mutex<Vec<u32>>,
    /// One past the highest entry ever used (bounds a producer's scan).
    high: AtomicUsize,
    /// The fds a segment's table owns, and the mapping its keys live in.
    _keep: Option<(Vec<OwnedFd>, Arc<Region>)>,
}

enum KeyCells {
    Static(&'static [AtomicU64]),
    Region(NonNull<AtomicU64>, usize),
}

enum FdCells {
    Static(&'static [AtomicI32]),
    Owned(Vec<AtomicI32>),
}

// SAFETY: the region pointer reaches atomics in the mapping `_keep` holds.
unsafe impl Send for Sleepers {}
// SAFETY: as above; everything else is atomics or behind a Mutex.
unsafe impl Sync for Sleepers {}

impl core::fmt::Debug for Sleepers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Sleepers({} entries)", self.len())
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_KEY: AtomicU64 = AtomicU64::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const NO_FD: AtomicI32 = AtomicI32::new(-1);
static PROCESS_KEYS: [AtomicU64; MAX_EVENTFD_SLEEPERS] = [NO_KEY; MAX_EVENTFD_SLEEPERS];
static PROCESS_FDS: [AtomicI32; MAX_EVENTFD_SLEEPERS] = [NO_FD; MAX_EVENTFD_SLEEPERS];
/// The process's own table.
static PROCESS: Sleepers = Sleepers {
    keys: KeyCells::Static(&PROCESS_KEYS),
    fds: FdCells::Static(&PROCESS_FDS),
    base: 0,
    users: Mutex::new(Vec::new()),
    high: AtomicUsize::new(0),
    _keep: None,
};

impl Sleepers {
    /// A segment's table: `SEGMENT_SLEEPERS` keys (u64) at byte offset
    /// `keys_at` of `region`, and `fds`, this process's numbers of the
    /// entries' eventfds in entry order (the application: its own; the
    /// daemon: the copies it received). Extra fds beyond
    /// [`SEGMENT_SLEEPERS`] are closed. None when the keys lie outside the
    /// region.
    pub fn in_region(
        region: &Arc<Region>,
        keys_at: usize,
        mut fds: Vec<OwnedFd>,
    ) -> Option<Sleepers> {
        let keys = region.at::<[AtomicU64; SEGMENT_SLEEPERS]>(keys_at)?;
        let base = region.span(0, 1, 1)?.as_ptr() as usize;
        fds.truncate(SEGMENT_SLEEPERS);
        let raw = fds
            .iter()
            .map(|f| AtomicI32::new(f.as_raw_fd()))
            .collect::<Vec<_>>();
        Some(Sleepers {
            keys: KeyCells::Region(keys.cast(), SEGMENT_SLEEPERS),
            high: AtomicUsize::new(raw.len()),
            users: Mutex::new(vec![0; raw.len()]),
            fds: FdCells::Owned(raw),
            base,
            _keep: Some((fds, region.clone())),
        })
    }

    /// The eventfds of a segment's table, as numbered in this process.
    pub fn eventfds(&self) -> Vec<i32> {
        self.fd_cells()
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect()
    }

    fn len(&self) -> usize {
        match &self.keys {
            KeyCells::Static(k) => k.len(),
            KeyCells::Region(_, n) => *n,
        }
    }

    fn key_cells(&self) -> &[AtomicU64] {
        match &self.keys {
            KeyCells::Static(k) => k,
            // SAFETY: `n` aligned AtomicU64 inside the mapping `_keep`
            // holds; atomics accept any bit pattern and shared access.
            KeyCells::Region(p, n) => unsafe { core::slice::from_raw_parts(p.as_ptr(), *n) },
        }
    }

    fn fd_cells(&self) -> &[AtomicI32] {
        match &self.fds {
            FdCells::Static(f) => f,
            FdCells::Owned(f) => f,
        }
    }

    /// Records `fd` as armed on `key`; the entry's index.
    fn register(&self, key: u64, fd: i32) -> Option<usize> {
        let keys = self.key_cells();
        let fds = self.fd_cells();
        if let FdCells::Static(_) = self.fds {
            for (i, k) in keys.iter().enumerate() {
                if k.load(Ordering::Relaxed) != 0 {
                    continue;
                }
                if k.compare_exchange(0, FILLING, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    fds[i].store(fd, Ordering::SeqCst);
                    self.high.fetch_max(i + 1, Ordering::SeqCst);
                    k.store(key, Ordering::SeqCst);
                    return Some(i);
                }
            }
            return None;
        }
        let i = fds.iter().position(|f| f.load(Ordering::Relaxed) == fd)?;
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        let n = users.get_mut(i)?;
        if *n == 0 {
            keys[i].store(key, Ordering::SeqCst);
        } else if keys[i].load(Ordering::SeqCst) != key {
            return None;
        }
        *n += 1;
        Some(i)
    }

    fn unregister(&self, i: usize) {
        let Some(k) = self.key_cells().get(i) else {
            return;
        };
        if let FdCells::Static(_) = self.fds {
            k.store(0, Ordering::SeqCst);
            return;
        }
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = users.get_mut(i) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                k.store(0, Ordering::SeqCst);
            }
        }
    }

    /// Writes the eventfd of every entry armed on `key`.
    fn ring(&self, key: u64) {
        let keys = self.key_cells();
        let fds = self.fd_cells();
        let high = self
            .high
            .load(Ordering::SeqCst)
            .min(keys.len())
            .min(fds.len());
        for (k, f) in keys[..high].iter().zip(&fds[..high]) {
            if k.load(Ordering::SeqCst) == key {
                eventfd_write(f.load(Ordering::SeqCst));
            }
        }
    }
}

fn eventfd_write(fd: i32) {
    if fd < 0 {
        return;
    }
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live stack array; a bad fd only fails
    // (tables hold fds their owners keep open while armed).
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

    /// Two views of one segment table, as the application and the daemon
    /// hold them: the daemon's fds are duplicates (as SCM_RIGHTS gives it).
    fn two_sides(n: usize) -> (Arc<Region>, Sleepers, Sleepers, Vec<i32>) {
        let region = Arc::new(Region::anon(4096).expect("anonymous memory"));
        let mine: Vec<OwnedFd> = (0..n).map(|_| crate::ctl::eventfd().unwrap()).collect();
        let raw: Vec<i32> = mine.iter().map(|f| f.as_raw_fd()).collect();
        let theirs: Vec<OwnedFd> = mine.iter().map(|f| f.try_clone().unwrap()).collect();
        let app = Sleepers::in_region(&region, 512, mine).expect("keys inside");
        let daemon = Sleepers::in_region(&region, 512, theirs).expect("keys inside");
        (region, app, daemon, raw)
    }

    fn doorbell(region: &Region, at: usize) -> &Notify {
        // SAFETY: an aligned Notify (atomics only) inside the live region.
        unsafe { region.at::<Notify>(at).expect("inside").as_ref() }
    }

    #[test]
    fn segment_sleeper_armed_by_app_is_woken_by_the_daemons_copy() {
        let (region, app, daemon, raw) = two_sides(3);
        let bell = doorbell(&region, 64);
        assert_eq!(app.eventfds(), raw);
        let armed = bell.arm_in(Some(&app), raw[1]).expect("a known eventfd");
        bell.notify_in(Some(&daemon));
        assert!(poll_readable(raw[1], 0), "the armed entry was not written");
        assert!(!poll_readable(raw[0], 0) && !poll_readable(raw[2], 0));
        drop(armed);
    }

    #[test]
    fn segment_sleeper_disarmed_or_on_another_doorbell_is_not_written() {
        let (region, app, daemon, raw) = two_sides(2);
        let (a, b) = (doorbell(&region, 64), doorbell(&region, 128));
        drop(a.arm_in(Some(&app), raw[0]).expect("known"));
        let _on_b = b.arm_in(Some(&app), raw[1]).expect("known");
        a.notify_in(Some(&daemon));
        assert!(!poll_readable(raw[0], 0), "a disarmed entry was written");
        assert!(
            !poll_readable(raw[1], 0),
            "another doorbell's sleeper was written"
        );
    }

    #[test]
    fn segment_table_refuses_unknown_eventfds_and_a_second_doorbell_on_one_entry() {
        let (region, app, _daemon, raw) = two_sides(1);
        let (a, b) = (doorbell(&region, 64), doorbell(&region, 128));
        let other = eventfd();
        assert!(
            a.arm_in(Some(&app), other).is_none(),
            "not one of the table's"
        );
        let first = a.arm_in(Some(&app), raw[0]).expect("known");
        let shared = a.arm_in(Some(&app), raw[0]).expect("same doorbell: shared");
        assert!(
            b.arm_in(Some(&app), raw[0]).is_none(),
            "armed on another doorbell"
        );
        drop(first);
        a.notify_in(Some(&app));
        assert!(poll_readable(raw[0], 0), "still armed by the second waiter");
        drop(shared);
        crate::ctl::eventfd_drain(unsafe_borrow(raw[0]));
        a.notify_in(Some(&app));
        assert!(
            !poll_readable(raw[0], 0),
            "written after the last waiter left"
        );
        close(other);
    }

    fn unsafe_borrow(fd: i32) -> std::os::fd::BorrowedFd<'static> {
        // SAFETY: the test's eventfd stays open until the table is dropped.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
    }
}
