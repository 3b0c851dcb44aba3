//! A listener's opening on every engine (embedded and inline mode: a copy
//! per engine; service mode: a slot per engine of the daemon), a forked
//! child's joining of an inherited listener, and taking accepted
//! connections from whichever engine queued them.

use super::*;

impl Stack {
    /// A new listener on `local` with room for `backlog` connections not
    /// yet accepted. Errors: EMFILE when the service segment has no free slot.
    pub(crate) fn open_listener(
        &self,
        local: SocketAddr,
        (backlog, v6only, reuseport): (usize, bool, bool),
    ) -> io::Result<(SockId, Arc<StatusHandle>, AcceptRx)> {
        // SO_REUSEPORT: each engine's copy says whether it is on the
        // opening thread's engine.
        let home = self.thread_engine();
        let reuseport = move |e: usize| reuseport.then_some(ReusePort { home: e == home });
        if let Mode::Service(s) = &self.inner.mode {
            return self.open_listener_service(s, local, (backlog, v6only), reuseport);
        }
        // The listener exists on every engine, each with its own queue
        // (and its own id, naming the engine); engine 0 picks the port
        // when none is given, the others take the same.
        let base = self.next_id();
        let shared = StatusHandle::local();
        let mut queues = Vec::with_capacity(self.inner.lanes.len());
        let mut local = local;
        for e in 0..self.inner.lanes.len() {
            let (tx, rx) = spsc::channel(backlog);
            self.command(Command::Listen {
                id: appif::socket::with_engine(base, e),
                owner: Owner::LOCAL,
                shared: shared.clone(),
                local,
                v6only,
                accept: AcceptQueue::Local(tx),
                reuseport: reuseport(e),
            });
            queues.push(rx);
            if e == 0 && self.inner.lanes.len() > 1 {
                self.wait_opened(&shared)?;
                local.set_port(shared.local().port());
            }
        }
        Ok((base, shared, AcceptRx::Local(queues, 0)))
    }

    /// Service mode: a listener on every engine of the daemon, each with
    /// its own slot (whose RX ring is that engine's accept queue); the
    /// application knows it by engine 0's slot, which picks the port when
    /// none is given (the others take the same). It returns once every
    /// engine listens (a connection may land on any). Errors: EMFILE when
    /// the segment has no free slot, an engine's refusal (EADDRINUSE,
    /// EACCES).
    pub(super) fn open_listener_service(
        &self,
        s: &crate::service::Service,
        mut local: SocketAddr,
        (backlog, v6only): (usize, bool),
        reuseport: impl Fn(usize) -> Option<ReusePort>,
    ) -> io::Result<(SockId, Arc<StatusHandle>, AcceptRx)> {
        let listen = |e: usize, local: SocketAddr| -> io::Result<crate::service::SlotParts> {
            let p = s.new_socket(e)?;
            let slot = p.id as u32;
            s.submit_desc(
                e,
                Desc::Listen {
                    slot,
                    local,
                    backlog: backlog as u32,
                    v6only,
                    reuseport: reuseport(e),
                },
            );
            Ok(p)
        };
        let first = listen(0, local)?;
        if s.engines() > 1 {
            self.wait_opened(&first.shared)?;
            local.set_port(first.shared.local().port());
        }
        let rest: Vec<usize> = (1..s.engines()).collect();
        self.listener_members(s, (first, 0), &rest, |k| listen(rest[k], local))
    }

    /// Service mode: the listener on several engines whose first slot is
    /// `first` (on engine `e0`, open), with a member on each engine of
    /// `rest`, the k-th opened by `open(k)`: waits until each is open,
    /// then records the group. Errors: a member's; the members opened
    /// and the first are closed then.
    pub(super) fn listener_members(
        &self,
        s: &crate::service::Service,
        (first, e0): (crate::service::SlotParts, usize),
        rest: &[usize],
        open: impl Fn(usize) -> io::Result<crate::service::SlotParts>,
    ) -> io::Result<(SockId, Arc<StatusHandle>, AcceptRx)> {
        let mut queues = Vec::with_capacity(rest.len() + 1);
        queues.push((first.rx, e0));
        let mut members = Vec::with_capacity(rest.len());
        for (k, &e) in rest.iter().enumerate() {
            let opened = open(k).and_then(|p| {
                members.push(p.id as u32);
                self.wait_opened(&p.shared)?;
                Ok(p)
            });
            match opened {
                Ok(p) => queues.push((p.rx, e)),
                Err(err) => {
                    s.group(first.id as u32, members);
                    s.submit(first.id as u32, |slot| Desc::Close { slot });
                    return Err(err);
                }
            }
        }
        if !rest.is_empty() {
            s.group(first.id as u32, members);
        }
        Ok((first.id, first.shared, AcceptRx::AppSegment(queues, 0)))
    }

    /// Service mode: a new member of the listener of association `owner`
    /// (0: the parent's, see [`StackBuilder::child_of`]) whose copies are
    /// `copies` (engine, slot in the owner's segment; the first is the
    /// slot the owner knows it by): one member per copy, on that copy's
    /// engine, accepting from all of them. Errors: EOPNOTSUPP outside
    /// service mode, EMFILE when the segment has no free slot, an engine's
    /// refusal (EPERM, EINVAL) of a member after the first.
    pub(crate) fn join_listener(
        &self,
        owner: u32,
        copies: &[(usize, u32)],
        backlog: usize,
    ) -> io::Result<(SockId, Arc<StatusHandle>, AcceptRx)> {
        let s = self.service()?;
        let join = |(e, parent_slot): (usize, u32)| -> io::Result<crate::service::SlotParts> {
            let p = s.new_socket(e)?;
            s.submit_desc(
                e,
                Desc::JoinListener {
                    slot: p.id as u32,
                    parent_slot,
                    backlog: backlog as u32,
                    owner,
                },
            );
            Ok(p)
        };
        let (&head, rest) = copies
            .split_first()
            .ok_or_else(|| errno::io(errno::EINVAL))?;
        let first = join(head)?;
        if !rest.is_empty() {
            self.wait_opened(&first.shared)?;
        }
        let engines: Vec<usize> = rest.iter().map(|c| c.0).collect();
        self.listener_members(s, (first, head.0), &engines, |k| join(rest[k]))
    }

    /// Service mode, for this stack inherited across fork: the copies of
    /// listener `id` (engine, slot), the one the application knows first;
    /// and this association. Errors: EOPNOTSUPP outside service mode.
    pub(crate) fn inherited_listener(&self, id: SockId) -> io::Result<(u32, Vec<(usize, u32)>)> {
        let s = self.service()?;
        Ok((s.assoc, s.copies(id as u32)))
    }

    /// The next accepted connection waiting in `q`, if any.
    pub(crate) fn pop_accepted(&self, q: &mut AcceptRx) -> Option<Accepted> {
        match q {
            AcceptRx::Local(qs, next) => {
                let n = qs.len();
                for k in 0..n {
                    let i = (*next + k) % n;
                    if let Some(a) = qs[i].pop() {
                        *next = (i + 1) % n;
                        return Some(a);
                    }
                }
                None
            }
            AcceptRx::AppSegment(rs, next) => {
                let Mode::Service(s) = &self.inner.mode else {
                    return None;
                };
                let n = rs.len();
                for k in 0..n {
                    let i = (*next + k) % n;
                    let (r, engine) = &mut rs[i];
                    // Bounded by the queue's length: each record is 4 bytes.
                    while r.len() >= 4 {
                        let mut b = [0u8; 4];
                        r.read(&mut b);
                        let slot = u32::from_le_bytes(b);
                        if !s.hold(slot, *engine) {
                            continue;
                        }
                        if let Some(p) = s.parts(slot) {
                            *next = (i + 1) % n;
                            return Some(Accepted {
                                id: p.id,
                                shared: p.shared,
                                tx: p.tx,
                                rx: p.rx,
                            });
                        }
                    }
                }
                None
            }
        }
    }
}
