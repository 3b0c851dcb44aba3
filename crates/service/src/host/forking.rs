//! The host's part in sockets shared across fork(2) and SCM_RIGHTS (see
//! `crate::forks`), on every engine: each engine's host keeps the
//! [`crate::forks::Forks`] table of the sockets it holds.
//!
//! ```text
//!   Forking, Forked       every engine's ring: each host takes its own
//!                         sockets' references and watches the child's pid
//!   child's hello         judged by engine 0; the others learn the claim
//!                         (parent, ticket) with Msg::Join
//!   JoinListener          one per engine, naming that engine's copy
//!   Adopt                 the ring of the engine that holds the connection
//!   Lend                  the holding engine's ring (the reference) and,
//!                         when that is not engine 0, engine 0's too (the
//!                         key, for the borrow it answers)
//!   borrow                engine 0 claims another engine's lend in that
//!                         engine's mailbox; the engine hands it to the
//!                         borrower at its Adopt
//! ```

use super::Host;
use crate::forks::LEND_FOR;
use crate::mailbox::{lock, Lending, Role};
use crate::translate::ProtocolViolation;
use appif::command::{Command, Owner};
use appif::ctl;
use appif::seg::{self, AppSegmentAccept, Desc};
use appif::socket::SockId;
use engine::time::Instant;
use nic::Port;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use tracing::debug;

/// Lends on other engines that engine 0 keeps the keys of, at most.
const MAX_ELSEWHERE: usize = 1024;
/// How long a borrow waits for another engine to take a lend engine 0 was
/// told of (the lender said Lend on both rings before it sent the fd);
/// engine 0 goes on serving meanwhile.
const LEND_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// What [`Host::shared`] left to do with a descriptor.
pub(super) enum Then {
    /// Nothing: it was handled.
    Done,
    /// Translate and apply it, with this parent association (a listener's
    /// member may join that association's listeners), then close the id
    /// whose last reference it ended, if any.
    Apply(Option<u32>, Option<SockId>),
}

/// A borrow engine 0 answers once another engine takes the lend it names:
/// the asker's control connection, the borrower, the key, the lender and
/// its slot, and when to give up (ENOENT).
pub(super) struct Borrowing {
    s: UnixStream,
    assoc: u32,
    key: u64,
    owner: u32,
    slot: u32,
    until: Instant,
}

/// A lend on another engine that engine 0 was told of (`Desc::Lend` for a
/// connection it does not hold): the key, the lender, its slot, since when.
pub(super) type Elsewhere = (u64, u32, u32, std::time::Instant);

impl<P: Port> Host<P> {
    /// The sharing part of descriptor `d` of application `i`: forks,
    /// takeovers, lends, closes of shared sockets, listener joins.
    /// Errors: a slot out of range.
    pub(super) fn shared(
        &mut self,
        i: usize,
        d: Desc,
        now: Instant,
    ) -> Result<Then, ProtocolViolation> {
        let app = &mut self.apps[i];
        let (assoc, parent) = (app.assoc, app.parent);
        let id = seg::service_id(assoc, d.slot());
        match d {
            Desc::Forking { ticket } => {
                let ids = self.engine.engine.sockets_of(assoc);
                self.forks.forking(assoc, ticket, &ids);
                debug!(
                    assoc,
                    ticket,
                    engine = self.lane,
                    sockets = ids.len(),
                    holds = self.forks.holds(),
                    "application forks"
                );
            }
            Desc::Forked { ticket, pid } => {
                let close = self.forks.forked(assoc, ticket, pid);
                self.close_now(close, now);
            }
            Desc::Adopt {
                slot,
                parent_slot,
                owner,
            } => self.adopt(i, slot, parent_slot, owner, now)?,
            Desc::Lend { slot, key } => self.lend(assoc, slot, key),
            Desc::Close { slot } | Desc::Abort { slot } if slot < app.seg.layout().nslots => {
                match self.forks.close(id) {
                    Some(x) if x == id => return Ok(Then::Apply(parent, None)),
                    other => {
                        // Others hold the socket still, or the last
                        // reference was this copy of a connection a child
                        // took over: that one closes.
                        app.stats.closes += 1;
                        AppSegmentAccept::app_closed(&app.seg, slot);
                        self.close_now(other, now);
                    }
                }
            }
            Desc::JoinListener {
                parent_slot, owner, ..
            } => {
                self.forks.opened(id);
                let of = if owner == 0 { parent } else { Some(owner) };
                let via_fork = of.and_then(|o| {
                    self.forks
                        .join_listener(assoc, seg::service_id(o, parent_slot))
                });
                // A hold from a fork, or the parent checked at hello.
                let parent = if via_fork.is_some() || of == parent {
                    of
                } else {
                    None
                };
                return Ok(Then::Apply(parent, via_fork.flatten()));
            }
            Desc::Connect { .. } | Desc::Listen { .. } | Desc::UdpBind { .. } => {
                self.forks.opened(id);
                return Ok(Then::Apply(parent, None));
            }
            _ => return Ok(Then::Apply(parent, None)),
        }
        Ok(Then::Done)
    }

    /// `Desc::Lend` of association `assoc`'s `slot` under `key`: a
    /// reference for the borrower when this engine holds the connection
    /// (and, on engine e ≥ 1, a note in its mailbox for engine 0); on
    /// engine 0 of several, for a connection another engine holds, the
    /// key, so that the borrow waits for that engine.
    fn lend(&mut self, assoc: u32, slot: u32, key: u64) {
        let id = seg::service_id(assoc, slot);
        let t = std::time::Instant::now();
        // Only a connection the application holds (checked, as everything
        // read from its ring).
        if self.engine.engine.is_open_conn(id) {
            self.forks.lend(assoc, id, key, t);
            if let Role::Other(m) = &self.role {
                let mut lends = lock(&m.lends);
                lends.retain(|l| t.saturating_duration_since(l.at) <= LEND_FOR);
                if lends.len() < MAX_ELSEWHERE {
                    lends.push(Lending {
                        key,
                        owner: assoc,
                        slot,
                        at: t,
                        claimed: None,
                    });
                }
            }
            return;
        }
        if let Role::First(_, others) = &self.role {
            if !others.is_empty() {
                let e = &mut self.elsewhere;
                e.retain(|l| t.saturating_duration_since(l.3) <= LEND_FOR);
                if e.len() < MAX_ELSEWHERE {
                    e.push((key, assoc, slot, t));
                }
            }
        }
    }

    /// Engine 0: claims for `assoc` the lend of `key` by `owner` (its
    /// `slot`) that another engine took from its ring; that engine's index,
    /// or None while no engine has taken it yet (it hands the connection
    /// over at the Adopt).
    fn claim_elsewhere(&self, assoc: u32, key: u64, owner: u32, slot: u32) -> Option<u32> {
        let Role::First(_, others) = &self.role else {
            return None;
        };
        for (e, m) in others.iter().enumerate() {
            let mut lends = lock(&m.lends);
            let found = lends.iter_mut().find(|l| {
                l.key == key
                    && l.owner == owner
                    && l.slot == slot
                    && l.claimed.is_none()
                    && l.at.elapsed() <= LEND_FOR
            });
            if let Some(l) = found {
                l.claimed = Some(assoc);
                return Some(e as u32 + 1);
            }
        }
        None
    }

    /// Engine 0, each iteration while borrows wait: answers those whose
    /// lend the holding engine has taken by now, and with ENOENT those
    /// that waited [`LEND_WAIT`] in vain; the engine loop goes on meanwhile.
    pub(super) fn answer_borrows(&mut self, now: Instant) {
        for k in (0..self.borrows.len()).rev() {
            let b = &self.borrows[k];
            let found = self.claim_elsewhere(b.assoc, b.key, b.owner, b.slot);
            if found.is_none() && now < b.until {
                continue;
            }
            let b = self.borrows.swap_remove(k);
            self.answer_lent(&b.s, found.map(|e| (b.owner, b.slot, e)));
        }
    }

    /// `Desc::Adopt` from application `i`: its `slot` takes over the
    /// connection in `parent_slot` of association `owner` (0: its parent),
    /// if it holds a reference to it from a fork or a lend; else `slot` is
    /// closed with ENETDOWN. Errors: `slot` out of range.
    fn adopt(
        &mut self,
        i: usize,
        slot: u32,
        parent_slot: u32,
        owner: u32,
        now: Instant,
    ) -> Result<(), ProtocolViolation> {
        let app = &mut self.apps[i];
        let shared = app
            .seg
            .shared(slot, true)
            .ok_or(ProtocolViolation::SlotOutOfRange { slot })?;
        app.stats.opens += 1;
        let assoc = app.assoc;
        let id = seg::service_id(assoc, slot);
        self.forks.opened(id);
        let of = if owner == 0 { app.parent } else { Some(owner) };
        let mut from =
            of.and_then(|o| self.forks.adopt(assoc, seg::service_id(o, parent_slot), id));
        if let (None, Some(o), Role::Other(m)) = (from, of, &self.role) {
            // A lend of this engine's that engine 0 claimed for `assoc`.
            let claimed = {
                let mut lends = lock(&m.lends);
                lends
                    .iter()
                    .position(|l| l.claimed == Some(assoc) && l.owner == o && l.slot == parent_slot)
                    .map(|k| lends.swap_remove(k).key)
            };
            if let Some(key) = claimed {
                if self.forks.borrow(assoc, key).is_some() {
                    from = self.forks.adopt(assoc, seg::service_id(o, parent_slot), id);
                }
            }
        }
        let app = &mut self.apps[i];
        match from {
            Some(from) => self.engine.engine.submit(
                Command::Adopt {
                    id,
                    owner: Owner::association(assoc),
                    shared,
                    from,
                },
                now,
            ),
            None => {
                app.stats.refused += 1;
                shared.set_closed(appif::errno::ENETDOWN);
            }
        }
        Ok(())
    }

    /// Closes, in the engine, the shared sockets whose last reference went.
    pub(super) fn close_now(&mut self, ids: impl IntoIterator<Item = SockId>, now: Instant) {
        for id in ids {
            self.engine.engine.submit(Command::Close { id }, now);
        }
    }

    /// Engine e ≥ 1: the association it was just given (last in its
    /// table) is the child of `parent`'s fork `ticket` (engine 0 judged
    /// the claim): the parent's Forking and Forked are taken from this
    /// engine's ring first, then the child's hold is its.
    pub(super) fn joined(&mut self, (parent, ticket): (u32, u32), now: Instant) {
        let Some(child) = self.apps.last().map(|a| a.assoc) else {
            return;
        };
        if parent == 0 {
            return;
        }
        if let Some(p) = self.apps.iter().position(|a| a.assoc == parent) {
            self.drain(p, now);
        }
        self.forks.joined(parent, ticket, child);
    }

    /// Answers a `ctl::Borrow` on control connection `s`: the lender's
    /// segment memfd, the lent connection's slot and the engine holding
    /// it, when the asker is the process of the association it names,
    /// holds the fd it names with the key it names (`/proc`), and a
    /// connection was lent under that key (the rings are taken first: the
    /// lender said `Lend` before it sent the fd); else ENOENT or EPERM
    /// (ENOBUFS while [`super::MAX_WAITING`] borrows wait already). A lend
    /// on another engine that engine has not taken yet is answered later,
    /// from the loop ([`Host::answer_borrows`]).
    pub(super) fn lent(&mut self, s: UnixStream, msg: &[u8], now: Instant) {
        let answer = |status: i32| ctl::Lent {
            status,
            ..ctl::Lent::default()
        };
        let Ok(b) = ctl::Borrow::decode(msg) else {
            let _ = ctl::send_msg(&s, &answer(appif::errno::EINVAL).encode(), &[]);
            return;
        };
        // The asker is the process of the association it names, and holds
        // an fd with that key (keys are counters: naming one proves nothing).
        let me = ctl::peer_cred(&s).ok().map(|c| c.pid);
        let holds = me.is_some_and(|pid| ctl::fd_key(&pid.to_string(), b.fd as i32) == Some(b.key));
        if !holds
            || !self
                .apps
                .iter()
                .any(|a| a.assoc == b.assoc && Some(a.cred.pid) == me)
        {
            let _ = ctl::send_msg(&s, &answer(appif::errno::EPERM).encode(), &[]);
            return;
        }
        for i in (0..self.apps.len()).rev() {
            self.drain(i, now);
        }
        let found = match self.forks.borrow(b.assoc, b.key) {
            Some((owner, id)) => seg::service_owner(id).map(|(_, slot)| (owner, slot, 0)),
            None => {
                // Lent on another engine: claimed now if that engine took the
                // lend, else answered from the loop once it does (the lender
                // said Lend on both rings before it sent the fd).
                let Some(k) = self.elsewhere.iter().position(|l| l.0 == b.key) else {
                    return self.answer_lent(&s, None);
                };
                let (_, owner, slot, _) = self.elsewhere.swap_remove(k);
                match self.claim_elsewhere(b.assoc, b.key, owner, slot) {
                    Some(e) => Some((owner, slot, e)),
                    None if self.borrows.len() < super::MAX_WAITING => {
                        self.borrows.push(Borrowing {
                            s,
                            assoc: b.assoc,
                            key: b.key,
                            owner,
                            slot,
                            until: now + LEND_WAIT,
                        });
                        return;
                    }
                    None => {
                        let _ = ctl::send_msg(&s, &answer(appif::errno::ENOBUFS).encode(), &[]);
                        return;
                    }
                }
            }
        };
        self.answer_lent(&s, found);
    }

    /// Sends a borrower its answer: the lender's segment memfd with the
    /// lender's association, the connection's slot and engine, or ENOENT
    /// (none found, or the lender is gone).
    fn answer_lent(&self, s: &UnixStream, found: Option<(u32, u32, u32)>) {
        let found = found.and_then(|(owner, slot, engine)| {
            let app = self.apps.iter().find(|a| a.assoc == owner)?;
            Some((owner, slot, engine, app))
        });
        match found {
            Some((owner, slot, engine, app)) => {
                let l = ctl::Lent {
                    status: 0,
                    owner,
                    slot,
                    engine,
                    seg_len: app.seg.layout().total_len() as u64,
                };
                let _ = ctl::send_msg(s, &l.encode(), &[app.memfd.as_fd()]);
            }
            None => {
                let none = ctl::Lent {
                    status: appif::errno::ENOENT,
                    ..ctl::Lent::default()
                };
                let _ = ctl::send_msg(s, &none.encode(), &[]);
            }
        }
    }
}
