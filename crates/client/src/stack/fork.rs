//! Sockets shared with other processes (service mode): a forked child's
//! take-over of an inherited connection, the fork's announcement to every
//! engine, and lending a connection over SCM_RIGHTS.

use super::*;

impl Stack {
    /// Service mode: a slot of this association takes over connection
    /// `parent_slot` of association `owner`, held by engine `engine` (see
    /// [`crate::TcpStream::adopt`]): the new slot's id and status block
    /// (the engine fills it in). Errors: EOPNOTSUPP outside service mode,
    /// EMFILE when the segment has no free slot.
    pub(crate) fn adopt(
        &self,
        (owner, parent_slot, engine): (u32, u32, usize),
    ) -> io::Result<(SockId, Arc<StatusHandle>)> {
        let s = self.service()?;
        let p = s.new_socket(engine)?;
        s.submit_desc(
            engine,
            Desc::Adopt {
                slot: p.id as u32,
                parent_slot,
                owner,
            },
        );
        Ok((p.id, p.shared))
    }

    /// Service mode: this process is about to fork(2). Every socket it
    /// holds gets a reference for the child until the child takes it over
    /// or ends, so that closing the parent's copy does not close the
    /// child's (as on Linux). Returns the fork's ticket, for the child's
    /// [`StackBuilder::fork_ticket`] and for [`Stack::forked`]; None
    /// outside service mode.
    pub fn forking(&self) -> Option<u32> {
        let s = self.service().ok()?;
        let ticket = s.next_ticket();
        s.submit_all(Desc::Forking { ticket });
        Some(ticket)
    }

    /// Service mode: fork(2) returned `pid` in the parent for the fork of
    /// `ticket` (-1 or 0: it failed). The daemon watches the child, so the
    /// references it holds end when it exits without joining.
    pub fn forked(&self, ticket: u32, pid: i32) {
        if let Ok(s) = self.service() {
            s.submit_all(Desc::Forked {
                ticket,
                pid: u32::try_from(pid).unwrap_or(0),
            });
        }
    }

    /// Service mode: this process passes connection `slot` of its segment
    /// to another process with SCM_RIGHTS as the fd of open-file `key`
    /// (see [`crate::TcpStream::borrow`]). No-op in other modes.
    pub(crate) fn lend(&self, slot: u32, key: u64) {
        if let Ok(s) = self.service() {
            // To the engine that holds it, which keeps the reference; with
            // several engines engine 0 (which answers the borrow) learns
            // of it too.
            let e = s.lane_of(slot).0;
            s.submit_desc(e, Desc::Lend { slot, key });
            if e != 0 {
                s.submit_desc(0, Desc::Lend { slot, key });
            }
        }
    }

    /// Service mode: the lender's segment, association and slot of the
    /// connection lent as this process's `fd`, if any (see
    /// [`crate::TcpStream::borrow`]). Errors: EOPNOTSUPP in other modes, the
    /// daemon's refusal, I/O errors.
    pub(crate) fn borrow(
        &self,
        fd: i32,
    ) -> io::Result<Option<(appif::seg::AppSegment, crate::service::Place)>> {
        self.service()?.borrow(fd)
    }

    /// The service-mode association. Errors: EOPNOTSUPP in other modes.
    pub(super) fn service(&self) -> io::Result<&crate::service::Service> {
        match &self.inner.mode {
            Mode::Service(s) => Ok(s),
            _ => Err(errno::io(errno::EOPNOTSUPP)),
        }
    }

    /// Service mode, for this stack inherited across fork (another
    /// process's: its segment is mapped here too): where socket `id` is
    /// (this association, its slot, the engine that holds it) and views of
    /// its rings, for the process that takes it over. Errors: ENETDOWN outside service mode
    /// or for a slot out of range.
    pub(crate) fn inherited(
        &self,
        id: SockId,
    ) -> io::Result<(crate::service::Place, (bytes::Writer, bytes::Reader))> {
        let down = || errno::io(errno::ENETDOWN);
        let s = self.service().map_err(|_| down())?;
        let slot = id as u32;
        let rings = (s.seg.tx_writer(slot), s.seg.rx_reader(slot));
        match rings {
            (Some(tx), Some(rx)) => Ok(((s.assoc, slot, s.lane_of(slot).0), (tx, rx))),
            _ => Err(down()),
        }
    }
}
