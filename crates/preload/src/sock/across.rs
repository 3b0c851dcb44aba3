//! A socket across processes: what a forked child does with the sockets
//! it inherited (takes them over in service mode, else they are dead),
//! and connections passed to another process with SCM_RIGHTS (lent, and
//! taken over by the receiver, in service mode).

use super::*;

impl Sock {
    /// True in a forked child for a socket on the parent's corestack
    /// stack: every call on it says ENETDOWN (close is fine). In service
    /// mode the child's own association (joined on first use) first takes
    /// it over: an inherited listener becomes a member of a shared
    /// listener, an inherited connection answers to the child from then
    /// on (`TcpStream::adopt`), an inherited UDP socket likewise
    /// (`UdpSocket::adopt`); then it is alive.
    ///
    /// In embedded and inline mode a dead socket is where a forked server's
    /// child asks to move the program to service mode (`crate::switch`).
    pub fn dead_in_child(&self) -> bool {
        let dead = self.dead_or_taken_over();
        if dead {
            crate::switch::dead_in_child();
        }
        dead
    }

    fn dead_or_taken_over(&self) -> bool {
        let now = stack::generation();
        if self.generation.load(Ordering::Relaxed) == now {
            return false;
        }
        let mut st = lock(&self.state);
        match &mut *st {
            State::Fresh { .. } | State::Kernel => {
                // Undecided or the kernel's: decided from now on by this
                // process's own stack.
                self.generation.store(now, Ordering::Relaxed);
                false
            }
            State::Listener { l, .. } => match stack::start()
                .ok()
                .and_then(|stack| TcpListener::join(stack, l, JOIN_BACKLOG).ok())
            {
                Some(mut joined) => {
                    let _ = joined.set_nonblocking(true);
                    // The parent's listener stays the parent's: never
                    // closed from here.
                    std::mem::forget(std::mem::replace(l, joined));
                    self.generation.store(now, Ordering::Relaxed);
                    false
                }
                None => true,
            },
            State::Stream(inherited) => !self.take_over(inherited, TcpStream::adopt, now),
            State::Udp { u: inherited, .. } => !self.take_over(inherited, UdpSocket::adopt, now),
            _ => true,
        }
    }

    /// Replaces `inherited` (the parent's handle, never dropped here) with
    /// this process's own, taken over by `adopt` on its own association;
    /// false when that fails.
    fn take_over<T>(
        &self,
        inherited: &mut T,
        adopt: fn(&corestack::Stack, &T) -> std::io::Result<T>,
        now: u32,
    ) -> bool {
        let Some(mine) = stack::start()
            .ok()
            .and_then(|stack| adopt(stack, inherited).ok())
        else {
            return false;
        };
        std::mem::forget(std::mem::replace(inherited, mine));
        self.generation.store(now, Ordering::Relaxed);
        true
    }

    /// Service mode: this process passes the socket with SCM_RIGHTS as the
    /// fd of open-file `key` ([`crate::sys::fd_key`]): a connection of this
    /// process's is lent for the receiver to take over
    /// (`TcpStream::lend`). False for anything else (then it cannot travel).
    pub fn lend(&self, key: u64) -> bool {
        if self.generation.load(Ordering::Relaxed) != stack::generation() {
            return false;
        }
        match &*lock(&self.state) {
            State::Stream(s) if s.is_service() => {
                s.lend(key);
                true
            }
            _ => false,
        }
    }

    /// A connection another process passed with SCM_RIGHTS and this one
    /// took over ([`TcpStream::borrow`]), for the fd it arrived as.
    pub fn borrowed(s: TcpStream, fd: c_int) -> Arc<Obj> {
        let family = match s.local_addr() {
            Ok(a) if a.is_ipv6() => libc::AF_INET6,
            _ => libc::AF_INET,
        };
        let sock = Sock::new(
            family,
            Ty::Stream,
            State::Stream(s),
            false,
            Opts::for_family(family),
        );
        sock.add_fd(fd);
        Arc::new(Obj::Sock(sock))
    }
}
