//! Collecting an epoll set's ready corestack sockets: each registration's
//! readiness through its socket's view, filtered by its events, with
//! edge-triggered and one-shot registrations, merged with the kernel's
//! events for wildcard sockets.

use super::*;

impl Epoll {
    /// What a collection's result depends on besides the sockets' own
    /// state: the engine's change count for this process, this epoll's
    /// registrations and nudges, and the pushes to its ready list (whose
    /// doorbell a sleeping wait may arm alone, and which the engine rings
    /// before it bumps its change count): counters that only grow, so any
    /// bump moves the key. None in a forked child.
    pub(super) fn quiet_key(&self) -> Option<u64> {
        let stack = crate::stack::started()?;
        let engine = u64::from(stack.changes().seq());
        let local = self
            .gen
            .load(Ordering::Acquire)
            .wrapping_add(self.ready.doorbell().seq());
        Some((engine << 32) | u64::from(local))
    }

    /// Collects ready corestack sockets into `out`; returns how many.
    pub(super) fn collect(&self, out: &mut [epoll_event]) -> usize {
        if out.is_empty() {
            return 0;
        }
        // Read before the sockets are looked at, so that a change made
        // during the look moves the key away from what is recorded below.
        let key = self.quiet_key().map(|k| k.wrapping_add(1)).unwrap_or(0);
        if key != 0 && self.quiet.load(Ordering::Acquire) == key {
            return 0;
        }
        let (n, undecided) = self.collect_all(out);
        // Nothing to report, and nothing looked at that only the kernel can
        // answer for (an undecided socket): the same key finds nothing again.
        self.quiet.store(
            if n == 0 && !undecided { key } else { 0 },
            Ordering::Release,
        );
        n
    }

    /// Registrations looked at by collections so far: the set's work,
    /// which follows the sockets that changed or are ready, not the
    /// sockets registered.
    #[cfg(test)]
    pub(crate) fn looks(&self) -> u64 {
        self.looks.load(Ordering::Relaxed)
    }

    /// Looks at the registered sockets that may be ready (see [`Epoll`]);
    /// returns how many events it wrote, and whether an undecided socket
    /// had to be asked of the kernel.
    pub(super) fn collect_all(&self, out: &mut [epoll_event]) -> (usize, bool) {
        let mut mine = self.scratch.try_lock().ok();
        let mut own = Scratch::default();
        let sc = mine.as_deref_mut().unwrap_or(&mut own);
        let found = self.collect_with(out, sc);
        // Drop the references now: a closed socket's memory goes with its
        // last one.
        sc.snap.clear();
        sc.gone.clear();
        sc.ready.clear();
        sc.tokens.clear();
        sc.newly.clear();
        found
    }

    /// Takes the registrations to look at into `snap` (under the lock):
    /// every enabled one when `full`, else the pending ones (changed, or
    /// ready last time) and those of unwatched sockets.
    fn take_candidates(&self, sc: &mut Scratch, full: bool) {
        let Scratch { snap, tokens, .. } = sc;
        let mut regs = lock(&self.regs);
        if full {
            // Every registration is looked at: the tokens queued so far
            // say nothing more.
            while self.ready.pop().is_some() {}
            lock(&self.nudged).clear();
            regs.full = false;
            regs.pending.clear();
            let Regs { map, socks, .. } = &mut *regs;
            snap.extend(map.iter_mut().map(|(fd, r)| {
                r.pending = false;
                let look = if socks.get(&r.token).is_some_and(|t| t.watched) {
                    // Changes may have been lost (an overflow).
                    Look::Rearm
                } else {
                    Look::Watch
                };
                (*fd, r.obj.upgrade(), r.events, r.enabled, look)
            }));
            return;
        }
        std::mem::swap(tokens, &mut *lock(&self.nudged));
        while let Some(t) = self.ready.pop() {
            tokens.push(t);
        }
        for &t in tokens.iter() {
            // Rearmed before the look, even if disabled (EPOLLONESHOT):
            // else the socket's next change would never queue it again.
            regs.mark_token(t);
        }
        while let Some(fd) = regs.pending.pop_front() {
            let Some(r) = regs.map.get_mut(&fd) else {
                continue;
            };
            if !r.pending {
                continue;
            }
            r.pending = false;
            snap.push((fd, r.obj.upgrade(), r.events, r.enabled, Look::Rearm));
        }
        let Regs {
            map,
            socks,
            unwatched,
            ..
        } = &mut *regs;
        for t in unwatched.iter() {
            for fd in socks.get(t).map_or(&[][..], |t| &t.fds[..]) {
                if let Some(r) = map.get(fd) {
                    snap.push((*fd, r.obj.upgrade(), r.events, r.enabled, Look::Watch));
                }
            }
        }
    }

    /// [`Epoll::collect_all`] with its lists.
    pub(super) fn collect_with(&self, out: &mut [epoll_event], sc: &mut Scratch) -> (usize, bool) {
        let stack = crate::stack::started();
        // Inherited across fork: its list hears from no engine here.
        let child = !self.own();
        if let Some(st) = stack {
            // Service mode: the slots the daemon's engines pushed reach the
            // ready lists of the sets watching them.
            st.drain_ready();
        }
        let full = child || stack.is_none() || self.ready.take_overflow();
        let full = full || lock(&self.regs).full;
        self.take_candidates(sc, full);
        let Scratch {
            snap,
            gone,
            ready,
            newly,
            ..
        } = sc;
        if snap.is_empty() {
            return (0, false);
        }
        self.looks.fetch_add(snap.len() as u64, Ordering::Relaxed);
        let start = self.cursor.fetch_add(1, Ordering::Relaxed) % snap.len();
        let mut n = 0;
        let mut undecided = false;
        for k in 0..snap.len() {
            let (fd, obj, events, enabled, look) = &snap[(start + k) % snap.len()];
            let Some(obj) = obj else {
                gone.push(*fd);
                continue;
            };
            let Obj::Sock(s) = &**obj else { continue };
            if !child {
                // Take the token (or start watching), then look: a change
                // after this queues the token again.
                let started = s.with_block(|p| match look {
                    Look::Rearm => {
                        p.rearm_watch(&self.ready);
                        false
                    }
                    Look::Watch => p.watch(&self.ready, s.epoll_token()),
                });
                if started == Some(true) {
                    newly.push(s.epoll_token());
                }
            }
            if !enabled {
                continue;
            }
            let (mut bits, kernel) = s.poll_bits();
            if kernel && !s.has_kernel_side() {
                // Undecided: the kernel socket answers.
                undecided = true;
                bits |= crate::sys::k::poll_now(*fd, 0x7fff) as u16 as u32;
            }
            // Only what the registration asks for (the interest list is
            // checked again below, under its lock).
            let bits = bits & (events | ALWAYS);
            if bits == 0 {
                continue;
            }
            let marks = if events & libc::EPOLLET as u32 != 0 {
                s.edge_marks()
            } else {
                None
            };
            ready.push((*fd, bits, marks));
        }
        let mut regs = lock(&self.regs);
        for &t in newly.iter() {
            regs.watched(t);
        }
        for &fd in gone.iter() {
            if regs.remove(fd).is_some() {
                self.ncore.fetch_sub(1, Ordering::AcqRel);
            }
        }
        for &(fd, bits, marks) in ready.iter() {
            if n == out.len() {
                // Not reported: looked at again next time.
                regs.mark(fd);
                continue;
            }
            let Some(r) = regs.map.get_mut(&fd) else {
                continue;
            };
            if !r.enabled {
                continue;
            }
            let bits = bits & (r.events | ALWAYS);
            if bits == 0 {
                continue;
            }
            if r.events & libc::EPOLLET as u32 != 0 {
                // Reported again only after a change, which queues its token.
                let now = Edge { marks, bits };
                if let Some(last) = r.last {
                    if !last.fired(now, r.events) {
                        // Keep the bits current, so that a bit that goes and
                        // comes back counts as appearing again.
                        r.last = Some(Edge {
                            marks: last.marks,
                            bits,
                        });
                        continue;
                    }
                }
                r.last = Some(now);
            }
            let level = r.events & (libc::EPOLLET | libc::EPOLLONESHOT) as u32 == 0;
            if r.events & libc::EPOLLONESHOT as u32 != 0 {
                r.enabled = false;
            }
            out[n] = epoll_event {
                events: bits,
                u64: r.data,
            };
            n += 1;
            if level {
                // Level-triggered: reported while it stays ready.
                regs.mark(fd);
            }
        }
        if !regs.pending.is_empty() {
            // A collection that saw nothing meanwhile must not make the
            // next ones skip these (see `quiet`), and a thread asleep in
            // this set looks too (as Linux wakes the other waiters while
            // level-triggered events remain ready).
            self.gen.fetch_add(1, Ordering::AcqRel);
            drop(regs);
            self.poke();
        }
        (n, undecided)
    }

    /// `out[..k]` holds kernel events: adds corestack events after them
    /// (merging a wildcard socket's two sides into one event).
    pub(super) fn collect_merge(&self, out: &mut [epoll_event], k: usize) -> usize {
        let n = self.collect(&mut out[k..]);
        merge_dups(out, k, k + n)
    }
}

/// Merges events in `out[split..end]` whose data equals one in
/// `out[..split]` (a wildcard socket reported by both sides); returns the
/// new end.
pub(super) fn merge_dups(out: &mut [epoll_event], split: usize, end: usize) -> usize {
    let mut w = split;
    for i in split..end {
        let ev = out[i];
        let data = ev.u64;
        if let Some(j) = (0..split).find(|&j| {
            let d = out[j].u64;
            d == data
        }) {
            let merged = out[j].events | ev.events;
            out[j].events = merged;
        } else {
            out[w] = ev;
            w += 1;
        }
    }
    w
}
