//! epoll over a mix of kernel fds and corestack sockets.
//!
//! The application's epoll fd is a real kernel epoll: kernel fds (pipes,
//! eventfds, timerfds, kernel sockets, the kernel side of a wildcard
//! socket) are registered in it as usual. corestack sockets live in a
//! user-level interest list here. The first corestack registration puts a
//! wake eventfd into the kernel epoll (its `data` is a random per-process
//! token the wait filters out).
//!
//! `epoll_wait`: collect corestack readiness, then kernel readiness with a
//! zero timeout (the side that goes first alternates, so neither starves
//! when `maxevents` fills); if nothing is ready, spin for the stack's spin
//! time, then arm the stack's doorbell with the wake eventfd, look once
//! more, and sleep in the real epoll_wait: the engine writes the eventfd
//! only while armed (the notify-flag protocol). Inline mode has no engine
//! thread: the NIC queue's fd sits in the epoll instead and the waiter runs
//! the engine between sleeps of at most 1 ms.
//!
//! Semantics as on Linux: level-triggered by default; EPOLLET reports a
//! socket again only after the engine changed it (its doorbell sequence
//! moved); EPOLLONESHOT disables the registration after one report until
//! EPOLL_CTL_MOD; EPOLLRDHUP when the peer sent FIN; EPOLLHUP and EPOLLERR
//! always; the application's `epoll_data` comes back untouched.
//! EPOLLEXCLUSIVE is accepted (EINVAL with EPOLL_CTL_MOD, as Linux) and
//! wakes every waiter, which epoll(7) allows ("one or more").
//! A registration ends when every fd of its socket is closed (as Linux's
//! ends when the open file description goes).
#![forbid(unsafe_code)]

mod collect;
mod regs;

use collect::merge_dups;
pub use regs::nudge;
use regs::Regs;

use crate::cancel::{self, Quiet};
use crate::obj::{self, Obj};
use crate::sock::Sock;
use crate::wait::Deadline;
use appif::ready::ReadyList;
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use libc::epoll_event;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// One corestack socket in an interest list.
struct Reg {
    obj: Weak<Obj>,
    events: u32,
    data: u64,
    /// False after an EPOLLONESHOT report, until EPOLL_CTL_MOD.
    enabled: bool,
    /// EPOLLET: the socket's edge marks and bits at the last report.
    last: Option<Edge>,
    /// The kernel side (a wildcard socket's) is in the kernel epoll.
    kernel_added: bool,
    /// Its socket's [`Sock::epoll_token`].
    token: u64,
    /// In [`Regs::pending`].
    pending: bool,
}

/// What an EPOLLET registration saw at its last report.
#[derive(Clone, Copy)]
struct Edge {
    marks: Option<(u64, u64)>,
    bits: u32,
}

impl Edge {
    /// True when something happened since `self` that Linux would wake an
    /// edge-triggered registration for `events` with: data (or a
    /// connection) arrived for EPOLLIN, TX space was freed for EPOLLOUT, a
    /// readiness bit appeared, or HUP/ERR/RDHUP came.
    fn fired(&self, now: Edge, events: u32) -> bool {
        let appeared = now.bits & !self.bits;
        if appeared & (ALWAYS | libc::EPOLLRDHUP as u32) != 0 {
            return true;
        }
        let inn = events & libc::EPOLLIN as u32 != 0;
        let out = events & libc::EPOLLOUT as u32 != 0;
        if (inn && appeared & libc::EPOLLIN as u32 != 0)
            || (out && appeared & libc::EPOLLOUT as u32 != 0)
        {
            return true;
        }
        match (self.marks, now.marks) {
            (Some((i0, o0)), Some((i1, o1))) => (inn && i1 != i0) || (out && o1 != o0),
            _ => false,
        }
    }
}

/// An epoll instance of the application.
///
/// A collection costs O(sockets that changed or are ready), not
/// O(registered): each registered corestack socket's status block reports
/// its changes to the set's [`ReadyList`] (in service mode through the
/// segment's ready rings, drained by [`corestack::Stack::drain_ready`]),
/// and a collection looks at the sockets whose tokens it takes, at those
/// found ready before (see [`Regs::pending`]) and at those whose changes
/// cannot reach the list (a socket another set watches, an undecided
/// one), and at a socket this process changed itself ([`nudge`]: bind,
/// listen, connect, shutdown; the engine's change count does not see
/// those). It looks at every registration after the list overflowed,
/// after a socket moved to the kernel, and always in a forked child.
pub struct Epoll {
    regs: Mutex<Regs>,
    /// Where the engines queue the tokens of the watched sockets that changed.
    ready: Arc<ReadyList>,
    /// Tokens of sockets this process changed or dropped (see [`nudge`]):
    /// their registrations are looked at next time.
    nudged: Mutex<Vec<u64>>,
    /// Registrations looked at by collections so far (see [`Epoll::looks`]).
    looks: AtomicU64,
    /// The [`crate::stack::generation`] that made it: in a forked child
    /// that inherited it, its ready list hears from no engine, and every
    /// collection looks at every registration.
    generation: u32,
    /// corestack registrations (0: every wait goes straight to the kernel).
    ncore: AtomicUsize,
    /// Registrations in the kernel epoll besides the shim's wake eventfd:
    /// kernel fds added with epoll_ctl(2), corestack sockets' kernel sides,
    /// registrations moved to the kernel ([`Epoll::kernel_ctl`]). A wait
    /// looks at the kernel epoll while it spins only when there is one (a
    /// set of corestack sockets alone spins without an epoll_wait(2)). An
    /// fd closed without EPOLL_CTL_DEL, which the kernel drops by itself,
    /// stays counted: the waits then look as if it were there.
    nkernel: AtomicUsize,
    /// The wake eventfd, in the kernel epoll with [`token`] as data.
    wake: OnceLock<c_int>,
    /// Threads asleep (or about to sleep) in the kernel epoll: an
    /// EPOLL_CTL_ADD or MOD of a corestack socket wakes them through the
    /// wake eventfd ([`Epoll::poke`]).
    sleepers: AtomicUsize,
    /// Where the next collection starts (round robin).
    cursor: AtomicUsize,
    /// Which side the next wait looks at first.
    kernel_first: AtomicBool,
    /// The fds of this epoll (dup), for registrations made from elsewhere.
    fds: Mutex<Vec<c_int>>,
    /// Bumped by every epoll_ctl (a registration added, changed, re-armed)
    /// and every [`nudge`].
    gen: AtomicU32,
    /// 1 + the [`Epoll::quiet_key`] of the last collection that found
    /// nothing to report (0: none). While the key has not moved — no engine
    /// change, no local change, no epoll_ctl — a collection would find
    /// nothing again, so it is skipped: a spinning or often-woken waiter
    /// costs O(1) instead of a probe of every registered socket.
    quiet: AtomicU64,
    /// The buffers of [`Epoll::collect_all`], kept between calls so that a
    /// collection allocates nothing (a second thread collecting at the
    /// same moment uses its own).
    scratch: Mutex<Scratch>,
}

/// A socket's edge marks (see [`Sock::edge_marks`]).
type Marks = Option<(u64, u64)>;

/// A collection's working lists (see [`Epoll::collect_all`]).
#[derive(Default)]
struct Scratch {
    /// The registrations to look at: fd, socket (None: it is gone),
    /// events, enabled, what to do with its watch first.
    snap: Vec<Candidate>,
    /// Tokens taken from the ready list and [`Epoll::nudged`].
    tokens: Vec<u64>,
    /// Tokens of the sockets that started reporting to the list.
    newly: Vec<u64>,
    /// Registrations whose socket is gone.
    gone: Vec<c_int>,
    /// Ready sockets: fd, poll bits, edge marks (EPOLLET only).
    ready: Vec<(c_int, u32, Marks)>,
}

/// A registration to look at: fd, socket (None: it is gone), events,
/// enabled, what to do with its watch first.
type Candidate = (c_int, Option<Arc<Obj>>, u32, bool, Look);

/// What a collection does with a socket's watch before it looks.
#[derive(Clone, Copy)]
enum Look {
    /// Its token was taken (or may have been lost): the next change
    /// queues it again.
    Rearm,
    /// Not watched yet: try to.
    Watch,
}

/// The `data` of the shim's own fds in a kernel epoll: random per process.
pub fn token() -> u64 {
    static T: OnceLock<u64> = OnceLock::new();
    *T.get_or_init(|| {
        let mut b = [0u8; 8];
        let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| {
            use std::io::Read;
            f.read_exact(&mut b)
        });
        let t = u64::from_ne_bytes(b);
        if t == 0 {
            0xc0e5_7ac7_5a1e_0001 ^ u64::from(std::process::id())
        } else {
            t
        }
    })
}

impl Default for Epoll {
    fn default() -> Self {
        Epoll {
            regs: Mutex::new(Regs::default()),
            ready: ReadyList::new(),
            nudged: Mutex::new(Vec::new()),
            looks: AtomicU64::new(0),
            generation: crate::stack::generation(),
            ncore: AtomicUsize::new(0),
            nkernel: AtomicUsize::new(0),
            wake: OnceLock::new(),
            sleepers: AtomicUsize::new(0),
            cursor: AtomicUsize::new(0),
            kernel_first: AtomicBool::new(false),
            fds: Mutex::new(Vec::new()),
            gen: AtomicU32::new(0),
            quiet: AtomicU64::new(0),
            scratch: Mutex::new(Scratch::default()),
        }
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        let own = self.own();
        let regs = self.regs.get_mut().unwrap_or_else(|p| p.into_inner());
        for r in regs.map.values() {
            if own && regs.socks.get(&r.token).is_some_and(|t| t.watched) {
                regs::unwatch(&r.obj, &self.ready);
            }
        }
        if let Some(&fd) = self.wake.get() {
            // A forked child gives it back only to a pool of its own (its
            // own association's, service mode).
            if !crate::stack::forked() || crate::stack::started().is_some() {
                crate::wait::give_back(fd);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn kctl(epfd: c_int, op: c_int, fd: c_int, events: u32, data: u64) -> Result<(), c_int> {
    let mut ev = epoll_event { events, u64: data };
    crate::sys::real_epoll_ctl(epfd, op, fd, &mut ev)
}

const ALWAYS: u32 = (libc::EPOLLHUP | libc::EPOLLERR) as u32;
const FLAGS: u32 =
    (libc::EPOLLET | libc::EPOLLONESHOT | libc::EPOLLEXCLUSIVE | libc::EPOLLWAKEUP) as u32;

impl Epoll {
    /// True in the process (the fork generation) that made it.
    fn own(&self) -> bool {
        self.generation == crate::stack::generation()
    }

    /// Ends socket `obj`'s watch by this set (its last registration went).
    fn unwatch(&self, obj: &Weak<Obj>) {
        if self.own() {
            regs::unwatch(obj, &self.ready);
        }
    }

    /// Records that `fd` refers to this epoll.
    pub fn add_fd(&self, fd: c_int) {
        let mut f = lock(&self.fds);
        if !f.contains(&fd) {
            f.push(fd);
        }
    }

    /// Records that `fd` no longer refers to it.
    pub fn remove_fd(&self, fd: c_int) {
        lock(&self.fds).retain(|&f| f != fd);
    }

    fn any_fd(&self) -> Option<c_int> {
        lock(&self.fds).first().copied()
    }

    /// True while corestack sockets are registered.
    pub fn has_core(&self) -> bool {
        self.ncore.load(Ordering::SeqCst) > 0
    }

    /// Counts a kernel-side registration that epoll_ctl(2) `op` made
    /// (EPOLL_CTL_ADD) or removed (EPOLL_CTL_DEL) in the kernel epoll, the
    /// call having succeeded; other ops change nothing.
    pub fn kernel_ctl(&self, op: c_int) {
        match op {
            libc::EPOLL_CTL_ADD => {
                self.nkernel.fetch_add(1, Ordering::SeqCst);
            }
            libc::EPOLL_CTL_DEL => {
                let _ = self
                    .nkernel
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            }
            _ => {}
        }
    }

    fn wake_fd(&self, epfd: c_int) -> Result<c_int, c_int> {
        if let Some(&fd) = self.wake.get() {
            return Ok(fd);
        }
        let fd = crate::wait::take()?;
        if let Err(e) = kctl(epfd, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, token()) {
            crate::wait::give_back(fd);
            return Err(e);
        }
        if self.wake.set(fd).is_err() {
            // Another thread won: ours goes back (out of our epoll set first).
            let _ = kctl(epfd, libc::EPOLL_CTL_DEL, fd, 0, 0);
            crate::wait::give_back(fd);
        }
        Ok(*self.wake.get().unwrap_or(&fd))
    }

    /// epoll_ctl(2) for corestack socket `s` (`obj`) at `fd`.
    /// Errors: EEXIST, ENOENT, EINVAL as Linux; the kernel's for the kernel side.
    pub fn ctl(
        &self,
        epfd: c_int,
        op: c_int,
        fd: c_int,
        obj: &Arc<Obj>,
        s: &Sock,
        ev: Option<epoll_event>,
    ) -> Result<(), c_int> {
        regs::drop_deferred();
        let (events, data) = match ev {
            Some(e) => (e.events, e.u64),
            None if op == libc::EPOLL_CTL_DEL => (0, 0),
            None => return Err(libc::EFAULT),
        };
        let exclusive = events & libc::EPOLLEXCLUSIVE as u32 != 0;
        self.gen.fetch_add(1, Ordering::AcqRel);
        let mut regs = lock(&self.regs);
        // A registration of a socket since closed (the number reused) is gone.
        if let Some(r) = regs.map.get(&fd) {
            if !r.obj.upgrade().is_some_and(|o| Arc::ptr_eq(&o, obj)) {
                if let Some((r, true)) = regs.remove(fd) {
                    self.unwatch(&r.obj);
                }
                self.ncore.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let (_, kernel_side) = s.poll_bits();
        let dual = kernel_side && s.has_kernel_side();
        match op {
            libc::EPOLL_CTL_ADD => {
                if regs.map.contains_key(&fd) {
                    return Err(libc::EEXIST);
                }
                if exclusive
                    && events & !(FLAGS | ALWAYS | (libc::EPOLLIN | libc::EPOLLOUT) as u32) != 0
                {
                    return Err(libc::EINVAL);
                }
                self.wake_fd(epfd)?;
                let mut kernel_added = false;
                if dual {
                    kctl(epfd, libc::EPOLL_CTL_ADD, fd, events, data)?;
                    self.kernel_ctl(libc::EPOLL_CTL_ADD);
                    kernel_added = true;
                }
                regs.insert(
                    fd,
                    Reg {
                        obj: Arc::downgrade(obj),
                        events,
                        data,
                        enabled: true,
                        last: None,
                        kernel_added,
                        token: s.epoll_token(),
                        pending: false,
                    },
                );
                self.ncore.fetch_add(1, Ordering::SeqCst);
                drop(regs);
                // A waiter asleep in the kernel (one that saw no corestack
                // socket, or none ready) looks again: the socket may be
                // ready now (epoll_wait(2): a newly added ready fd unblocks).
                self.poke();
                let mut eps = s.epolls.lock().unwrap_or_else(|p| p.into_inner());
                eps.retain(|w| w.strong_count() > 0);
                if let Some(me) = obj::get(epfd) {
                    if !eps
                        .iter()
                        .any(|w| w.upgrade().is_some_and(|o| Arc::ptr_eq(&o, &me)))
                    {
                        eps.push(Arc::downgrade(&me));
                    }
                }
                Ok(())
            }
            libc::EPOLL_CTL_MOD => {
                let r = regs.map.get_mut(&fd).ok_or(libc::ENOENT)?;
                if exclusive || r.events & libc::EPOLLEXCLUSIVE as u32 != 0 {
                    return Err(libc::EINVAL);
                }
                if r.kernel_added {
                    kctl(epfd, libc::EPOLL_CTL_MOD, fd, events, data)?;
                }
                r.events = events;
                r.data = data;
                r.enabled = true;
                r.last = None;
                // It may be ready for what it asks for now, with no change
                // to report it: looked at next time.
                regs.mark(fd);
                drop(regs);
                // Re-armed (EPOLLONESHOT) or changed: a sleeping waiter looks again.
                self.poke();
                Ok(())
            }
            libc::EPOLL_CTL_DEL => {
                let (r, last_watched) = regs.remove(fd).ok_or(libc::ENOENT)?;
                if last_watched {
                    self.unwatch(&r.obj);
                }
                self.ncore.fetch_sub(1, Ordering::AcqRel);
                if r.kernel_added && kctl(epfd, libc::EPOLL_CTL_DEL, fd, 0, 0).is_ok() {
                    self.kernel_ctl(libc::EPOLL_CTL_DEL);
                }
                Ok(())
            }
            _ => Err(libc::EINVAL),
        }
    }

    /// Wakes the threads asleep in this epoll's kernel wait, if any (they
    /// collect again). The caller changed the interest list first: a
    /// waiter counts itself in `sleepers` before its last look, so either
    /// that look sees the change or this sees the waiter (both SeqCst).
    fn poke(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            if let Some(&fd) = self.wake.get() {
                crate::sys::eventfd_signal(fd);
            }
        }
    }

    /// epoll_wait(2) on an epoll of the shim, whatever it holds: `real` is
    /// the application's call as it made it, used while no corestack socket
    /// is registered; the shim's own fds never come out. A corestack socket
    /// added (or re-armed) by another thread meanwhile wakes the wait,
    /// which then goes on over both sides until `deadline`.
    pub fn wait_any(
        &self,
        epfd: c_int,
        out: &mut [epoll_event],
        deadline: Deadline,
        mask: Option<&libc::sigset_t>,
        real: impl FnOnce() -> c_int,
    ) -> Result<usize, c_int> {
        regs::drop_deferred();
        if out.is_empty() {
            return Err(libc::EINVAL);
        }
        // No cancellation acts inside; a requested one ends the wait, a
        // sleep in the kernel epoll woken through the wake eventfd (made by
        // the canceller if no corestack socket did).
        let quiet = Quiet::new();
        let first = if self.has_core() {
            None
        } else {
            let asleep = quiet.asleep_epoll(self, epfd);
            if quiet.due() {
                return Err(cancel::PENDING);
            }
            // Counted before the look at the interest list (see `poke`).
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            let first = (!self.has_core()).then(|| (real(), crate::sys::errno()));
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            drop(asleep);
            first
        };
        if let Some((r, e)) = first {
            if r < 0 {
                return Err(e);
            }
            let n = self.filter_own(out, r as usize);
            if n > 0 || deadline.passed() {
                return Ok(n);
            }
        }
        loop {
            if quiet.due() {
                return Err(cancel::PENDING);
            }
            if self.has_core() {
                return self.wait(epfd, out, deadline, mask, &quiet);
            }
            let asleep = quiet.asleep_epoll(self, epfd);
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            let r = if self.has_core() || quiet.due() {
                Ok(0)
            } else {
                kernel_wait(
                    epfd,
                    out,
                    deadline.poll_ms(),
                    mask,
                    self.wake.get().copied(),
                )
            };
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            drop(asleep);
            let n = r?;
            if n > 0 || deadline.passed() {
                return Ok(n);
            }
        }
    }

    /// Removes the shim's own fds' events from `out[..n]` (draining the
    /// wake eventfd); returns how many remain.
    fn filter_own(&self, out: &mut [epoll_event], n: usize) -> usize {
        own_events_out(out, n, self.wake.get().copied())
    }

    /// Moves the registrations of `obj` (handed to the kernel) into the
    /// kernel epoll, or adds its new kernel side (it became a wildcard
    /// listener or UDP socket).
    fn resettle(&self, obj: &Arc<Obj>, s: &Sock) {
        let Some(epfd) = self.any_fd() else { return };
        self.gen.fetch_add(1, Ordering::AcqRel);
        let mut regs = lock(&self.regs);
        regs.full = true;
        let mine: Vec<c_int> = regs
            .map
            .iter()
            .filter(|(_, r)| r.obj.upgrade().is_some_and(|o| Arc::ptr_eq(&o, obj)))
            .map(|(fd, _)| *fd)
            .collect();
        let kernel = !obj::get(*mine.first().unwrap_or(&-1)).is_some_and(|o| Arc::ptr_eq(&o, obj));
        for fd in mine {
            if kernel {
                if let Some((r, last_watched)) = regs.remove(fd) {
                    if last_watched {
                        self.unwatch(&r.obj);
                    }
                    self.ncore.fetch_sub(1, Ordering::AcqRel);
                    let ev = if r.enabled {
                        r.events
                    } else {
                        r.events & !(libc::EPOLLIN | libc::EPOLLOUT) as u32
                    };
                    if kctl(epfd, libc::EPOLL_CTL_ADD, fd, ev, r.data).is_ok() {
                        self.kernel_ctl(libc::EPOLL_CTL_ADD);
                    }
                }
            } else if s.has_kernel_side() {
                if let Some(r) = regs.map.get_mut(&fd) {
                    if !r.kernel_added
                        && kctl(epfd, libc::EPOLL_CTL_ADD, fd, r.events, r.data).is_ok()
                    {
                        self.kernel_ctl(libc::EPOLL_CTL_ADD);
                        r.kernel_added = true;
                    }
                }
            }
        }
    }

    /// epoll_wait(2) / epoll_pwait(2) with corestack sockets registered,
    /// cancellation disabled by `quiet` (a requested cancel: [`cancel::PENDING`]).
    fn wait(
        &self,
        epfd: c_int,
        out: &mut [epoll_event],
        deadline: Deadline,
        mask: Option<&libc::sigset_t>,
        quiet: &Quiet,
    ) -> Result<usize, c_int> {
        let Some(stack) = crate::stack::started() else {
            return kernel_wait(
                epfd,
                out,
                deadline.poll_ms(),
                mask,
                self.wake.get().copied(),
            );
        };
        let mut round = 0u32;
        // The steps every wait takes; a signal during the spin is EINTR
        // (epoll_wait never restarts).
        let mut steps = corestack::WaitSteps::new(stack, mask);
        loop {
            if stack.is_inline() {
                stack.drive();
            }
            let n = self.gather(epfd, out, round.is_multiple_of(16))?;
            if n > 0 {
                return Ok(n);
            }
            if let Some(end) = deadline.nothing_ready(quiet) {
                return end;
            }
            round = round.wrapping_add(1);
            match steps.next(stack).map_err(|_| libc::EINTR)? {
                corestack::Step::Look => continue,
                corestack::Step::Nap(nap_mask) => {
                    // The runner naps on the NIC fd and on the kernel epoll
                    // itself (readable when a kernel fd is): the NIC fd
                    // never joins the application's epoll, where it would
                    // wake every thread sleeping in it at every frame.
                    let kfd = [libc::pollfd {
                        fd: epfd,
                        events: libc::POLLIN,
                        revents: 0,
                    }];
                    crate::wait::nap(stack, &kfd, deadline, nap_mask.as_ref())?;
                    // The next look asks the kernel epoll too.
                    round = 0;
                    continue;
                }
                corestack::Step::Sleep => {}
            }
            let wake = self.wake_fd(epfd)?;
            let asleep = quiet.asleep_eventfd(wake);
            let armed = stack.arm(self.doorbell(stack), wake);
            // Counted before the last look (see `poke`).
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            let n = self.collect(out);
            if n > 0 {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return Ok(n);
            }
            if quiet.due() {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return Err(cancel::PENDING);
            }
            let ms = deadline.sleep_ms(stack, armed.is_some());
            let r = kernel_wait(epfd, out, ms, mask, Some(wake));
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            drop(armed);
            drop(asleep);
            let k = r?;
            if k > 0 {
                return Ok(self.collect_merge(out, k));
            }
        }
    }

    /// One look at both sides without sleeping; `kernel`: look at the
    /// kernel epoll too (rate-limited while spinning), where it holds a
    /// registration of the application's.
    fn gather(&self, epfd: c_int, out: &mut [epoll_event], kernel: bool) -> Result<usize, c_int> {
        let kernel = kernel && self.nkernel.load(Ordering::Relaxed) > 0;
        let kfirst = self.kernel_first.fetch_xor(true, Ordering::Relaxed);
        if kernel && kfirst {
            let k = kernel_wait(epfd, out, 0, None, self.wake.get().copied())?;
            return Ok(self.collect_merge(out, k));
        }
        let n = self.collect(out);
        if !kernel || n == out.len() {
            return Ok(n);
        }
        let k = kernel_wait(epfd, &mut out[n..], 0, None, self.wake.get().copied())?;
        Ok(merge_dups(out, n, n + k))
    }

    /// The doorbell a sleeping wait arms: the set's own ready list when
    /// every corestack socket registered reports there (embedded mode: the
    /// engine runs in this process and pushes to it), so that the wait
    /// sleeps through changes to other sets' sockets (a server's listener
    /// thread through its workers' traffic); else the stack-wide one (service
    /// mode, where the daemon rings the application's doorbell and the
    /// waiter drains the ready rings itself; a socket another set watches; a
    /// forked child's set).
    fn doorbell<'a>(&'a self, stack: &'a corestack::Stack) -> &'a corestack::Notify {
        let own = !stack.is_service()
            && self.generation == crate::stack::generation()
            && lock(&self.regs).unwatched.is_empty();
        if own {
            self.ready.doorbell()
        } else {
            stack.changes()
        }
    }
}

/// The real epoll wait on `epfd` for `ms` (-1: no limit), with the shim's
/// own fds filtered out of the result (a wake-up is drained).
fn kernel_wait(
    epfd: c_int,
    out: &mut [epoll_event],
    ms: i64,
    mask: Option<&libc::sigset_t>,
    wake: Option<c_int>,
) -> Result<usize, c_int> {
    if out.is_empty() {
        return Ok(0);
    }
    let n = crate::sys::real_epoll_wait(epfd, out, ms, mask)?;
    Ok(own_events_out(out, n, wake))
}

/// Removes the events of the shim's own fd (its data is [`token`]) from `out[..n]`, draining `wake` if it was reported;
/// returns how many events remain, moved to the front.
fn own_events_out(out: &mut [epoll_event], n: usize, wake: Option<c_int>) -> usize {
    let t = token();
    let mut w = 0;
    for i in 0..n.min(out.len()) {
        let ev = out[i];
        let d = ev.u64;
        if d == t {
            if let Some(fd) = wake {
                crate::sys::eventfd_drain(fd);
            }
            continue;
        }
        out[w] = ev;
        w += 1;
    }
    w
}

/// After a socket was handed to the kernel or got a kernel side: fixes the
/// registrations of every epoll it is in.
pub fn resettle(s: &Sock, obj: &Arc<Obj>) {
    let eps: Vec<Arc<Obj>> = s
        .epolls
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for ep in eps {
        if let Obj::Epoll(e) = &*ep {
            e.resettle(obj, s);
        }
    }
}

impl cancel::Wake for Epoll {
    /// Wakes the threads asleep in this epoll's kernel wait (fd `epfd`)
    /// through the wake eventfd, put in the epoll first if it has none
    /// (a thread being cancelled, see [`crate::cancel`]).
    fn wake_now(&self, epfd: c_int) {
        if let Ok(fd) = self.wake_fd(epfd) {
            crate::sys::eventfd_signal(fd);
        }
    }
}
