//! A TCP socket shared with other processes in service mode: a forked
//! child's join of its parent's listener and take-over of a connection,
//! and a connection lent over SCM_RIGHTS and borrowed by its receiver.

use super::{TcpListener, TcpStream};
use crate::stack::Parts;
use crate::Stack;
use appif::{bytes, errno};
use std::io;

impl TcpListener {
    /// Service mode, in a forked child: joins `inherited`, the listener
    /// this process inherited from its parent (whose stack the child no
    /// longer uses), as a new listener of `stack` (the child's own
    /// association, started with [`crate::StackBuilder::child_of`] the
    /// parent's). Both listen on the same port; the daemon gives each new
    /// connection to one of the listeners that accept. `inherited` is not
    /// touched (the child must not drop it either: it would close the
    /// parent's socket).
    ///
    /// Errors: EOPNOTSUPP outside service mode, EMFILE when the segment
    /// has no free slot, EPERM when `stack` is no verified child, EINVAL
    /// when the parent's listener is gone.
    pub fn join(stack: &Stack, inherited: &TcpListener, backlog: usize) -> io::Result<TcpListener> {
        let (owner, copies) = inherited.stack.inherited_listener(inherited.id)?;
        let opening = stack.join_listener(owner, &copies, backlog.clamp(1, 4096))?;
        TcpListener::opened(stack, opening)
    }
}

impl TcpStream {
    /// Service mode, in a forked child: takes over `inherited`, a
    /// connection this process inherited from its parent (made on the
    /// parent's stack, whose segment the child inherited mapped), as a
    /// stream of `stack` (the child's own association, started with
    /// [`crate::StackBuilder::fork_ticket`]). The connection answers to
    /// the child from now on: its status, wake-ups and commands are the
    /// child's, its bytes stay in the rings they were in. The parent's
    /// copy then answers ENETDOWN, and closing it only drops the parent's
    /// reference (the connection closes with its last one, as on Linux).
    /// `inherited` is not touched (the child must not drop it either: it
    /// would close the parent's socket); waits for the daemon's answer.
    ///
    /// Errors: EOPNOTSUPP outside service mode, EMFILE when the segment
    /// has no free slot, ENETDOWN when the child holds no reference to the
    /// connection (no fork ticket, or another process took it over first)
    /// or it is gone.
    pub fn adopt(stack: &Stack, inherited: &TcpStream) -> io::Result<TcpStream> {
        let (at, rings) = inherited.stack.inherited(inherited.id)?;
        let mut s = TcpStream::take_over(stack, at, rings)?;
        s.nonblocking = inherited.nonblocking;
        s.wr_shut = inherited.wr_shut;
        s.abort_on_drop = inherited.abort_on_drop;
        s.cork = inherited.cork;
        Ok(s)
    }

    /// True for a connection of a service-mode stack (a daemon's
    /// application).
    pub fn is_service(&self) -> bool {
        self.stack.is_service()
    }

    /// Service mode: passes this connection to another process with
    /// SCM_RIGHTS, as an fd whose open-file key is `key`
    /// (`appif::ctl::fd_key`: an eventfd's `eventfd-id` or a socket's
    /// inode): the daemon holds a reference for the process that receives
    /// it and claims it with [`TcpStream::borrow`] within 10 s. Call before
    /// sending the fd. No-op outside service mode.
    pub fn lend(&self, key: u64) {
        self.stack.lend(self.id as u32, key);
    }

    /// Service mode: the connection another application lent
    /// ([`TcpStream::lend`]) as `fd`, an fd this process received with
    /// SCM_RIGHTS, taken over as a stream of `stack` (this process's
    /// association): its status, wake-ups and commands are this process's
    /// from now on, its bytes stay in the lender's rings (the daemon hands
    /// over the lender's segment to map, once it has checked in `/proc`
    /// that this process holds `fd`). None when nothing was lent as `fd`
    /// (it was no corestack connection).
    ///
    /// Errors: EOPNOTSUPP outside service mode, EMFILE when the segment
    /// has no free slot, ENETDOWN when the connection is gone or was taken
    /// by another process, the daemon's refusal (EPERM), I/O errors.
    pub fn borrow(stack: &Stack, fd: i32) -> io::Result<Option<TcpStream>> {
        let Some((seg, at)) = stack.borrow(fd)? else {
            return Ok(None);
        };
        let slot = at.1;
        let (Some(tx), Some(rx)) = (seg.tx_writer(slot), seg.rx_reader(slot)) else {
            return Err(errno::io(errno::EPROTO));
        };
        TcpStream::take_over(stack, at, (tx, rx)).map(Some)
    }

    /// Takes over connection `slot` of association `owner`, held by
    /// engine `engine`, whose rings
    /// `(tx, rx)` this process maps (`Desc::Adopt`), and waits for the
    /// daemon's answer.
    fn take_over(
        stack: &Stack,
        at: (u32, u32, usize),
        (tx, rx): (bytes::Writer, bytes::Reader),
    ) -> io::Result<TcpStream> {
        let (id, shared) = stack.adopt(at)?;
        let s = TcpStream::from_parts(stack, Parts { id, shared, tx, rx }, false);
        stack.wait_opened(&s.shared)?;
        Ok(s)
    }
}
