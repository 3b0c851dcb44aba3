//! Sockets shared across fork(2): the references Linux counts per open
//! file, kept by the daemon for the sockets of its applications.
//!
//! An application about to fork says so (`Desc::Forking`, with a ticket):
//! every socket it holds at that moment (its TCP connections and
//! listeners, and what it inherited itself and has not taken over) gets
//! one more reference, held for the child that presents the ticket in its
//! hello. The parent then names the child's pid (`Desc::Forked`), which
//! the daemon watches with a pidfd. A reference ends when its holder
//! closes the socket, when the child takes the socket over (a connection
//! by `Desc::Adopt`, after which it answers to the child's slot; a
//! listener by `Desc::JoinListener`, after which the child is a member of
//! its own), or when its holder ends (a child that never joined: its
//! pidfd). The engine closes a shared socket when its last reference
//! ends, so a fork-per-connection server's parent may close its copy of a
//! connection before or after its child starts using it, and a
//! daemonizing parent may exit before its child uses the listeners.
//!
//! Only sockets that were ever shared are tracked; all others close on
//! their owner's close as before. Nothing here is on the data path: it
//! runs per fork, per close of a shared socket, and once per control pass.

use appif::socket::SockId;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};

/// One shared socket.
struct Share {
    /// References: its owner's, and one per holder that has not let go.
    refs: u32,
    /// The id it had when it was first shared (the parent's).
    origin: SockId,
    /// The id the engine knows it by now (the adopter's after an adopt);
    /// None once that id named another socket (the slot was reused).
    cur: Option<SockId>,
}

/// The references held for the child of one fork.
struct Hold {
    /// The forking association.
    parent: u32,
    /// The ticket of the fork.
    ticket: u32,
    /// The child's pid, once the parent said it.
    pid: Option<i32>,
    /// Readable when the child has exited.
    pidfd: Option<OwnedFd>,
    /// The child's association, once it joined.
    child: Option<u32>,
    /// The shares it holds a reference to.
    shares: Vec<u32>,
    /// A lend (`Desc::Lend`, SCM_RIGHTS): the passed fd's open-file key,
    /// and when it was lent (unclaimed lends end after [`LEND_FOR`]).
    lend: Option<(u64, std::time::Instant)>,
}

/// How long a lent connection waits for its receiver to claim it.
pub const LEND_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// The daemon's table of shared sockets and the holds on them.
#[derive(Default)]
pub(crate) struct Forks {
    shares: HashMap<u32, Share>,
    /// Every id that holds a reference to a share (the owner's, the
    /// adopter's), to the share.
    by_id: HashMap<SockId, u32>,
    holds: Vec<Hold>,
    next: u32,
}

impl Forks {
    /// `Desc::Forking`: association `parent`, which holds `ids` now (its
    /// own sockets), is about to fork its child of `ticket`; the child's
    /// hold also covers what the parent holds for itself as a child of an
    /// earlier fork and has not taken over.
    pub fn forking(&mut self, parent: u32, ticket: u32, ids: &[SockId]) {
        let mut shares: Vec<u32> = Vec::with_capacity(ids.len());
        for &id in ids {
            // Shared before and closed by `parent` since (the engine still
            // has it for the others): not the parent's to share.
            if let Some(k) = self.share_of(id) {
                shares.push(k);
            }
        }
        for h in self.holds.iter().filter(|h| h.child == Some(parent)) {
            for &k in &h.shares {
                if !shares.contains(&k) {
                    shares.push(k);
                }
            }
        }
        self.hold(parent, ticket, shares, None);
    }

    /// `Desc::Lend`: association `owner` passes its connection `id` to
    /// another process with SCM_RIGHTS, as the fd whose open-file key is
    /// `key`: one more reference, held for whoever claims `key`
    /// ([`Forks::borrow`]) within [`LEND_FOR`].
    pub fn lend(&mut self, owner: u32, id: SockId, key: u64, now: std::time::Instant) {
        let shares = self.share_of(id).into_iter().collect();
        self.hold(owner, 0, shares, Some((key, now)));
    }

    /// The share of `id`, made when it was never shared; None when `id`
    /// was shared and its owner closed it since.
    fn share_of(&mut self, id: SockId) -> Option<u32> {
        if let Some(&k) = self.by_id.get(&id) {
            return Some(k);
        }
        if self.shares.values().any(|s| s.cur == Some(id)) {
            return None;
        }
        let k = self.next;
        self.next = self.next.wrapping_add(1);
        self.shares.insert(
            k,
            Share {
                refs: 1,
                origin: id,
                cur: Some(id),
            },
        );
        self.by_id.insert(id, k);
        Some(k)
    }

    /// A new hold of `parent`'s on `shares` (one reference more on each).
    fn hold(
        &mut self,
        parent: u32,
        ticket: u32,
        shares: Vec<u32>,
        lend: Option<(u64, std::time::Instant)>,
    ) {
        for k in &shares {
            if let Some(s) = self.shares.get_mut(k) {
                s.refs += 1;
            }
        }
        self.holds.push(Hold {
            parent,
            ticket,
            pid: None,
            pidfd: None,
            child: None,
            shares,
            lend,
        });
    }

    /// `ctl::Borrow`: association `assoc` received the fd of `key`. The
    /// lender and the id its connection had, when one was lent under
    /// `key` and not claimed yet; the hold is `assoc`'s from now on.
    pub fn borrow(&mut self, assoc: u32, key: u64) -> Option<(u32, SockId)> {
        let h = self
            .holds
            .iter_mut()
            .find(|h| h.child.is_none() && h.lend.is_some_and(|(k, _)| k == key))?;
        h.child = Some(assoc);
        let share = self.shares.get(h.shares.first()?)?;
        Some((h.parent, share.origin))
    }

    /// `Desc::Forked`: the child of `parent`'s `ticket` is process `pid`
    /// (0: the fork failed). Returns the ids the engine must close now
    /// (their last reference went with a failed fork or a child already
    /// gone without joining).
    pub fn forked(&mut self, parent: u32, ticket: u32, pid: u32) -> Vec<SockId> {
        let Some(k) = self.hold_of(parent, ticket) else {
            return Vec::new();
        };
        let pidfd = match i32::try_from(pid) {
            Ok(p) if p > 0 => appif::ctl::pidfd_open(p).ok().map(|fd| (p, fd)),
            _ => None,
        };
        match pidfd {
            Some((p, fd)) => {
                let h = &mut self.holds[k];
                h.pid = Some(p);
                h.pidfd = Some(fd);
                Vec::new()
            }
            None if self.holds[k].child.is_some() => Vec::new(),
            None => self.release(k),
        }
    }

    /// True when process `pid` is the child of `parent`'s fork `ticket`
    /// and has not joined yet (its hello may name `parent` even after the
    /// parent exited).
    pub fn is_child(&self, parent: u32, ticket: u32, pid: i32) -> bool {
        self.hold_of(parent, ticket).is_some_and(|k| {
            let h = &self.holds[k];
            h.child.is_none() && h.pid == Some(pid)
        })
    }

    /// Association `child` joined as the child of `parent`'s fork
    /// `ticket` (checked by [`Forks::is_child`] or by its ancestry): the
    /// hold is its from now on.
    pub fn joined(&mut self, parent: u32, ticket: u32, child: u32) {
        if let Some(k) = self.hold_of(parent, ticket) {
            if self.holds[k].child.is_none() {
                self.holds[k].child = Some(child);
            }
        }
    }

    /// `Desc::Adopt`: association `child` takes over the connection whose
    /// id was `origin` when it was shared; from now on it is `id`. Returns
    /// the id the engine knows it by (the `from` of `Command::Adopt`), or
    /// None when `child` holds no reference to it or another process took
    /// it over first.
    pub fn adopt(&mut self, child: u32, origin: SockId, id: SockId) -> Option<SockId> {
        let (h, pos, key) = self.held(child, origin)?;
        let share = self.shares.get_mut(&key)?;
        if share.cur != Some(origin) {
            return None;
        }
        self.holds[h].shares.swap_remove(pos);
        share.cur = Some(id);
        self.by_id.insert(id, key);
        Some(origin)
    }

    /// `Desc::JoinListener` of association `child` on the listener whose
    /// id was `origin`: None when `child` holds no reference to it; else
    /// the reference ends (the child's member is a listener of its own)
    /// and the result says which id the engine must close now, if that
    /// was the last reference.
    pub fn join_listener(&mut self, child: u32, origin: SockId) -> Option<Option<SockId>> {
        let (h, pos, key) = self.held(child, origin)?;
        self.holds[h].shares.swap_remove(pos);
        Some(self.unref(key))
    }

    /// A close of `id` by its holder: None when other references remain
    /// (the engine must not close it), else the id the engine closes
    /// (`id` itself for a socket never shared; the adopter's id when the
    /// parent's close of its copy was the last reference).
    pub fn close(&mut self, id: SockId) -> Option<SockId> {
        match self.by_id.remove(&id) {
            None => Some(id),
            Some(key) => self.unref(key),
        }
    }

    /// A socket was opened under `id`: any share still naming it names a
    /// socket that is gone (its slot was free to reuse).
    pub fn opened(&mut self, id: SockId) {
        if self.shares.is_empty() {
            return;
        }
        self.by_id.remove(&id);
        for s in self.shares.values_mut().filter(|s| s.cur == Some(id)) {
            s.cur = None;
        }
    }

    /// Association `assoc` ends, holding `ids` in the engine. Returns the
    /// ids among them to keep (others still hold them) and the ids of
    /// other associations' sockets whose last reference went with it.
    pub fn ending(&mut self, assoc: u32, ids: &[SockId]) -> (Vec<SockId>, Vec<SockId>) {
        let mut close = Vec::new();
        let named: Vec<SockId> = self
            .by_id
            .keys()
            .copied()
            .filter(|&id| appif::seg::service_owner(id).is_some_and(|(a, _)| a == assoc))
            .collect();
        for id in named {
            match self.close(id) {
                Some(cur) if cur != id => close.push(cur),
                _ => {}
            }
        }
        // Its own holds end; a fork whose pid it never said cannot be
        // watched: those end too.
        let mut k = 0;
        while k < self.holds.len() {
            let h = &self.holds[k];
            if h.child == Some(assoc) || (h.parent == assoc && h.pid.is_none() && h.lend.is_none())
            {
                close.extend(self.release(k));
            } else {
                k += 1;
            }
        }
        // What others still hold stays in the engine, under its id.
        let keep = ids
            .iter()
            .copied()
            .filter(|&id| self.shares.values().any(|s| s.cur == Some(id)))
            .collect();
        (keep, close)
    }

    /// The holds of children that exited without joining end, and lends
    /// nobody claimed within [`LEND_FOR`]. Returns the ids the engine must
    /// close now.
    pub fn reap(&mut self, now: std::time::Instant) -> Vec<SockId> {
        let mut close = Vec::new();
        let mut k = 0;
        while k < self.holds.len() {
            let h = &self.holds[k];
            let expired = h
                .lend
                .is_some_and(|(_, at)| now.saturating_duration_since(at) > LEND_FOR);
            let gone = h.child.is_none()
                && (expired
                    || h.pidfd
                        .as_ref()
                        .is_some_and(|fd| appif::ctl::pidfd_exited(fd.as_fd())));
            if gone {
                close.extend(self.release(k));
            } else {
                k += 1;
            }
        }
        close
    }

    /// Holds not yet ended (for the tests and the log).
    pub fn holds(&self) -> usize {
        self.holds.len()
    }

    fn hold_of(&self, parent: u32, ticket: u32) -> Option<usize> {
        self.holds
            .iter()
            .position(|h| h.parent == parent && h.ticket == ticket)
    }

    /// The hold of `child` with a reference to the share first shared as
    /// `origin`: (hold, position in it, share).
    fn held(&self, child: u32, origin: SockId) -> Option<(usize, usize, u32)> {
        self.holds.iter().enumerate().find_map(|(h, hold)| {
            if hold.child != Some(child) {
                return None;
            }
            hold.shares
                .iter()
                .enumerate()
                .find_map(|(pos, k)| (self.shares.get(k)?.origin == origin).then_some((h, pos, *k)))
        })
    }

    /// Ends hold `k` and its references; returns the ids to close.
    fn release(&mut self, k: usize) -> Vec<SockId> {
        let h = self.holds.swap_remove(k);
        h.shares.into_iter().filter_map(|s| self.unref(s)).collect()
    }

    /// One reference to share `key` ends: the id the engine must close
    /// when it was the last.
    fn unref(&mut self, key: u32) -> Option<SockId> {
        let s = self.shares.get_mut(&key)?;
        s.refs = s.refs.saturating_sub(1);
        if s.refs > 0 {
            return None;
        }
        let s = self.shares.remove(&key)?;
        self.by_id.retain(|_, k| *k != key);
        s.cur
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use appif::seg::service_id;

    const P: u32 = 1;
    const C: u32 = 2;

    fn me() -> u32 {
        std::process::id()
    }

    /// `parent` forks this process as the child of `ticket`, holding `ids`,
    /// and the child joins as association `child`.
    fn fork(f: &mut Forks, (parent, ticket): (u32, u32), ids: &[SockId], child: u32) {
        f.forking(parent, ticket, ids);
        assert!(f.forked(parent, ticket, me()).is_empty());
        f.joined(parent, ticket, child);
    }

    /// P forks its connection 3 to C, which adopts it under its own id
    /// `service_id(C, index)`: the forks, P's id and C's id.
    fn adopted(index: u32) -> (Forks, SockId, SockId) {
        let mut f = Forks::default();
        let conn = service_id(P, 3);
        fork(&mut f, (P, 1), &[conn], C);
        let mine = service_id(C, index);
        assert_eq!(f.adopt(C, conn, mine), Some(conn));
        (f, conn, mine)
    }

    #[test]
    fn a_connection_closed_by_the_parent_before_the_child_adopts_lives_until_the_child_closes() {
        let mut f = Forks::default();
        let conn = service_id(P, 3);
        f.forking(P, 9, &[conn]);
        assert!(f.forked(P, 9, me()).is_empty());
        assert!(f.is_child(P, 9, me() as i32));
        f.joined(P, 9, C);
        assert_eq!(f.close(conn), None, "the child's reference keeps it open");
        let mine = service_id(C, 0);
        assert_eq!(f.adopt(C, conn, mine), Some(conn));
        assert_eq!(f.close(mine), Some(mine), "the last reference closes it");
        assert_eq!(f.holds(), 1, "the hold lives until the child ends");
        let (keep, close) = f.ending(C, &[]);
        assert!(keep.is_empty() && close.is_empty());
        assert_eq!(f.holds(), 0);
    }

    #[test]
    fn the_parents_close_after_the_adopt_is_the_last_reference_and_closes_the_childs_id() {
        let (mut f, conn, mine) = adopted(5);
        assert_eq!(f.close(mine), None, "the parent still holds its copy");
        assert_eq!(f.close(conn), Some(mine));
    }

    #[test]
    fn an_adopter_that_closes_and_exits_leaves_the_connection_to_the_parents_reference() {
        let (mut f, conn, mine) = adopted(0);
        assert_eq!(f.close(mine), None);
        let (keep, close) = f.ending(C, &[mine]);
        assert_eq!(keep, vec![mine], "reset while the parent holds it");
        assert!(close.is_empty());
        assert_eq!(f.close(conn), Some(mine), "the parent's close ends it");
    }

    #[test]
    fn a_connection_the_parent_closed_is_not_shared_with_its_next_child() {
        let mut f = Forks::default();
        let (listener, first) = (service_id(P, 0), service_id(P, 1));
        f.forking(P, 1, &[listener, first]);
        f.forked(P, 1, me());
        assert_eq!(f.close(first), None, "the first child holds it");
        // The engine still knows the first connection by the parent's id.
        f.forking(P, 2, &[listener, first]);
        f.forked(P, 2, me());
        f.joined(P, 1, C);
        f.joined(P, 2, C + 1);
        assert_eq!(
            f.adopt(C + 1, first, service_id(C + 1, 0)),
            None,
            "not the second's"
        );
        let mine = service_id(C, 0);
        assert_eq!(f.adopt(C, first, mine), Some(first));
        assert_eq!(f.close(mine), Some(mine), "no other reference to it");
    }

    #[test]
    fn a_lent_connection_is_the_claimers_and_an_unclaimed_lend_expires() {
        let mut f = Forks::default();
        let (conn, other) = (service_id(P, 3), service_id(P, 4));
        let t0 = std::time::Instant::now();
        f.lend(P, conn, 77, t0);
        f.lend(P, other, 78, t0);
        assert_eq!(f.borrow(C, 99), None, "no lend under that key");
        assert_eq!(f.borrow(C, 77), Some((P, conn)));
        assert_eq!(f.borrow(C + 1, 77), None, "claimed once");
        assert_eq!(f.close(conn), None, "the receiver holds it");
        let mine = service_id(C, 0);
        assert_eq!(f.adopt(C, conn, mine), Some(conn));
        assert_eq!(f.close(mine), Some(mine));
        assert!(f.reap(t0 + LEND_FOR / 2).is_empty());
        assert_eq!(f.close(other), None);
        assert_eq!(f.reap(t0 + LEND_FOR * 2), vec![other], "expired");
    }

    #[test]
    fn only_the_child_of_the_ticket_adopts_and_only_once() {
        let mut f = Forks::default();
        let conn = service_id(P, 3);
        f.forking(P, 1, &[conn]);
        f.forking(P, 2, &[conn]);
        f.forked(P, 1, me());
        assert!(!f.is_child(P, 2, me() as i32), "fork 2 named no pid yet");
        assert!(!f.is_child(P, 1, 1), "pid 1 is not the child of fork 1");
        f.joined(P, 1, C);
        f.joined(P, 2, C + 1);
        assert_eq!(f.adopt(C + 7, conn, service_id(C + 7, 0)), None, "no hold");
        assert_eq!(f.adopt(C, conn, service_id(C, 0)), Some(conn));
        assert_eq!(
            f.adopt(C + 1, conn, service_id(C + 1, 0)),
            None,
            "taken over already"
        );
        assert_eq!(f.adopt(C, conn, service_id(C, 1)), None, "adopted once");
    }

    #[test]
    fn a_failed_fork_or_a_child_that_never_joined_gives_its_references_back() {
        let mut f = Forks::default();
        let conn = service_id(P, 3);
        f.forking(P, 1, &[conn]);
        assert!(f.forked(P, 1, 0).is_empty(), "the owner still holds it");
        assert_eq!(f.close(conn), Some(conn), "the owner's is the last");

        let mut f = Forks::default();
        f.forking(P, 1, &[conn]);
        assert_eq!(f.close(conn), None);
        // A process that has surely exited: pidfd_open fails (ESRCH) or
        // the pidfd polls readable; either way the hold ends.
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait");
        let mut closed = f.forked(P, 1, pid);
        closed.extend(f.reap(std::time::Instant::now()));
        assert_eq!(closed, vec![conn]);
        assert_eq!(f.holds(), 0);
    }

    #[test]
    fn a_daemonizing_parents_listener_outlives_it_until_the_child_joins_it() {
        let mut f = Forks::default();
        let listener = service_id(P, 0);
        f.forking(P, 4, &[listener]);
        f.forked(P, 4, me());
        let (keep, close) = f.ending(P, &[listener]);
        assert_eq!(keep, vec![listener], "the child holds it");
        assert!(close.is_empty());
        assert!(
            f.is_child(P, 4, me() as i32),
            "admitted after the parent left"
        );
        f.joined(P, 4, C);
        assert_eq!(f.join_listener(C, listener), Some(Some(listener)));
        assert_eq!(f.join_listener(C, listener), None, "once");
    }

    #[test]
    fn a_grandchild_inherits_what_its_parent_holds_and_has_not_taken_over() {
        let mut f = Forks::default();
        let listener = service_id(P, 0);
        fork(&mut f, (P, 1), &[listener], C);
        f.ending(P, &[listener]);
        let g = C + 1;
        fork(&mut f, (C, 1), &[], g);
        assert_eq!(f.join_listener(g, listener), Some(None), "C still holds it");
        let (keep, close) = f.ending(C, &[]);
        assert!(keep.is_empty());
        assert_eq!(close, vec![listener], "C's was the last reference");
    }

    #[test]
    fn a_reused_id_is_never_closed_for_the_share_that_named_it() {
        let (mut f, conn, mine) = adopted(0);
        assert_eq!(f.close(mine), None);
        f.opened(mine);
        assert_eq!(f.close(conn), None, "its id names a new socket now");
    }
}
