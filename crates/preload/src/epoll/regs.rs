//! An epoll set's interest list and what tells a collection which of its
//! corestack sockets to look at: the sockets' tokens on the set's ready
//! list ([`appif::ready`]), the registrations found ready before, and the
//! sockets whose changes cannot reach the list (looked at every time).

use super::*;
use std::collections::{HashSet, VecDeque};

/// The corestack registrations of an epoll set.
#[derive(Default)]
pub(super) struct Regs {
    /// By fd.
    pub(super) map: HashMap<c_int, Reg>,
    /// Registrations to look at on the next collection: their socket
    /// changed, or they were ready at the last look (level-triggered: a
    /// socket stays reported while it is ready). Each once (`Reg::pending`).
    pub(super) pending: VecDeque<c_int>,
    /// Per socket ([`Sock::epoll_token`]): its registered fds and whether
    /// its status block reports to this set's ready list.
    pub(super) socks: HashMap<u64, Tok>,
    /// Tokens of the sockets not watched: looked at on every collection
    /// (undecided sockets, sockets another epoll set watches).
    pub(super) unwatched: HashSet<u64>,
    /// The next collection looks at every registration (a socket moved to
    /// the kernel or got a kernel side).
    pub(super) full: bool,
}

/// One socket's registrations in a set.
#[derive(Default)]
pub(super) struct Tok {
    pub(super) fds: Vec<c_int>,
    pub(super) watched: bool,
}

impl Regs {
    /// Adds `reg` at `fd` (its socket's token is `reg.token`): watched
    /// already (another fd of the socket), it is looked at next time;
    /// otherwise the collections look at it until they can watch it.
    pub(super) fn insert(&mut self, fd: c_int, reg: Reg) {
        let t = self.socks.entry(reg.token).or_default();
        t.fds.push(fd);
        let watched = t.watched;
        if !watched {
            self.unwatched.insert(reg.token);
        }
        self.map.insert(fd, reg);
        if watched {
            self.mark(fd);
        }
    }

    /// Looks at `fd` on the next collection (if it is watched: the others
    /// are looked at anyway).
    pub(super) fn mark(&mut self, fd: c_int) {
        let Some(r) = self.map.get_mut(&fd) else {
            return;
        };
        if !r.pending && self.socks.get(&r.token).is_some_and(|t| t.watched) {
            r.pending = true;
            self.pending.push_back(fd);
        }
    }

    /// Marks every fd of socket `token` (its token came out of the list).
    pub(super) fn mark_token(&mut self, token: u64) {
        let n = self.socks.get(&token).map_or(0, |t| t.fds.len());
        for k in 0..n {
            let fd = self.socks[&token].fds[k];
            self.mark(fd);
        }
    }

    /// Removes the registration at `fd`. Returns it, and whether it was
    /// the last of a watched socket (whose watch the caller ends, if the
    /// socket is still there).
    pub(super) fn remove(&mut self, fd: c_int) -> Option<(Reg, bool)> {
        let r = self.map.remove(&fd)?;
        let mut last_watched = false;
        if let Some(t) = self.socks.get_mut(&r.token) {
            t.fds.retain(|&f| f != fd);
            if t.fds.is_empty() {
                last_watched = t.watched;
                self.socks.remove(&r.token);
                self.unwatched.remove(&r.token);
            }
        }
        // A stale fd left in `pending` is skipped (no registration, or one
        // not marked pending).
        Some((r, last_watched))
    }

    /// Socket `token` reports to the set's list from now on.
    pub(super) fn watched(&mut self, token: u64) {
        if let Some(t) = self.socks.get_mut(&token) {
            t.watched = true;
            self.unwatched.remove(&token);
        }
    }
}

/// Ends socket `obj`'s watch by `list` (its last registration in the set
/// went).
pub(super) fn unwatch(obj: &Weak<Obj>, list: &Arc<ReadyList>) {
    if let Some(o) = obj.upgrade() {
        if let Obj::Sock(s) = &*o {
            s.with_block(|p| p.unwatch(list));
        }
    }
}

/// Socket `token`, with registrations in the epoll sets `epolls`, changed
/// without the engine (bind, listen, connect, shutdown) or was dropped:
/// each set looks at its registrations of it on the next collection (and
/// finds them changed or gone), and at no other for it.
///
/// The caller may hold the socket's state lock: a set whose last fd another
/// thread closed meanwhile is not dropped here (its drop ends its watches,
/// which takes that lock) but kept for [`drop_deferred`].
pub fn nudge(token: u64, epolls: &Mutex<Vec<Weak<Obj>>>) {
    let eps = epolls.lock().unwrap_or_else(|p| p.into_inner());
    for ep in eps.iter().filter_map(Weak::upgrade) {
        if let Obj::Epoll(e) = &*ep {
            lock(&e.nudged).push(token);
            e.gen.fetch_add(1, Ordering::AcqRel);
            // A sleeping wait may have armed only the set's own doorbell,
            // which a change made here (not by the engine) does not ring.
            e.poke();
        }
        if let Some(last) = Arc::into_inner(ep) {
            lock(&DEFERRED).push(last);
            HAS_DEFERRED.store(true, Ordering::Release);
        }
    }
}

/// Epoll sets whose last reference [`nudge`] held, to be dropped where no
/// socket lock is held.
static DEFERRED: Mutex<Vec<Obj>> = Mutex::new(Vec::new());
/// [`DEFERRED`] holds something.
static HAS_DEFERRED: AtomicBool = AtomicBool::new(false);

/// Drops the epoll sets [`nudge`] kept; the caller holds no socket's lock
/// (an epoll_ctl or epoll_wait entry). One atomic load when there are none.
pub(super) fn drop_deferred() {
    if HAS_DEFERRED.swap(false, Ordering::AcqRel) {
        let sets = std::mem::take(&mut *lock(&DEFERRED));
        drop(sets);
    }
}
