//! Collecting an epoll set's ready corestack sockets: each registration's
//! readiness through its socket's view, filtered by its events, with
//! edge-triggered and one-shot registrations, merged with the kernel's
//! events for wildcard sockets.

use super::*;

impl Epoll {
    /// What a collection's result depends on besides the sockets' own
    /// state: the engine's change count for this process, the local
    /// changes and this epoll's registrations (sums of counters that only
    /// grow, so any bump moves the key). None in a forked child.
    pub(super) fn quiet_key(&self) -> Option<u64> {
        let stack = crate::stack::started()?;
        let engine = u64::from(stack.changes().seq());
        let local = LOCAL_CHANGES
            .load(Ordering::Acquire)
            .wrapping_add(self.gen.load(Ordering::Acquire));
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

    /// Looks at every registered socket (see [`Epoll::collect`]); returns
    /// how many events it wrote, and whether an undecided socket had to be
    /// asked of the kernel.
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
        found
    }

    /// [`Epoll::collect_all`] with its lists.
    pub(super) fn collect_with(&self, out: &mut [epoll_event], sc: &mut Scratch) -> (usize, bool) {
        let Scratch { snap, gone, ready } = sc;
        // Snapshot under the lock; readiness is read without it (a socket's
        // state lock is never taken while the interest list is held).
        {
            let regs = lock(&self.regs);
            snap.extend(
                regs.iter()
                    .filter(|(_, r)| r.enabled)
                    .map(|(fd, r)| (*fd, r.obj.upgrade(), r.events)),
            );
        }
        if snap.is_empty() {
            return (0, false);
        }
        let start = self.cursor.fetch_add(1, Ordering::Relaxed) % snap.len();
        let mut n = 0;
        let mut undecided = false;
        for k in 0..snap.len() {
            let (fd, obj, events) = &snap[(start + k) % snap.len()];
            let Some(obj) = obj else {
                gone.push(*fd);
                continue;
            };
            let Obj::Sock(s) = &**obj else { continue };
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
        let mut last = false;
        for &fd in gone.iter() {
            if regs.remove(&fd).is_some() {
                last |= self.ncore.fetch_sub(1, Ordering::AcqRel) == 1;
            }
        }
        if last {
            if let Some(epfd) = self.any_fd() {
                self.core_gone(epfd);
            }
        }
        for &(fd, bits, marks) in ready.iter() {
            if n == out.len() {
                break;
            }
            let Some(r) = regs.get_mut(&fd) else { continue };
            if !r.enabled {
                continue;
            }
            let bits = bits & (r.events | ALWAYS);
            if bits == 0 {
                continue;
            }
            if r.events & libc::EPOLLET as u32 != 0 {
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
            if r.events & libc::EPOLLONESHOT as u32 != 0 {
                r.enabled = false;
            }
            out[n] = epoll_event {
                events: bits,
                u64: r.data,
            };
            n += 1;
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
