//! UDP sockets, shaped like `std::net::UdpSocket`.

use crate::stack::{Parts, Policy, Request, Stack};
use appif::bytes;
use appif::errno::{self, EMSGSIZE};
use appif::socket::{SockId, SockState, StatusHandle, UdpHeader};
use core::net::SocketAddr;
use std::io;
use std::sync::Arc;

/// A bound UDP socket.
pub struct UdpSocket {
    stack: Stack,
    id: SockId,
    shared: Arc<StatusHandle>,
    tx: bytes::Writer,
    rx: bytes::Reader,
    nonblocking: bool,
    view: crate::poll::View,
}

impl UdpSocket {
    /// A socket of `stack` over a socket's parts, non-blocking when
    /// `nonblocking`.
    fn from_parts(stack: &Stack, p: Parts, nonblocking: bool) -> UdpSocket {
        UdpSocket {
            stack: stack.clone(),
            id: p.id,
            shared: p.shared,
            tx: p.tx,
            rx: p.rx,
            nonblocking,
            view: Default::default(),
        }
    }

    /// Sends `r` to the socket's engine.
    fn request(&self, r: crate::stack::Request) {
        self.stack.request(self.id, r);
    }
}

impl UdpSocket {
    /// Binds to `addr` (0.0.0.0 or the stack's address; port 0 picks an
    /// ephemeral port).
    ///
    /// Errors: EADDRINUSE when the port is taken, EADDRNOTAVAIL for an
    /// address that is not the stack's.
    pub fn bind(stack: &Stack, addr: impl Into<SocketAddr>) -> io::Result<UdpSocket> {
        UdpSocket::bind_with(stack, addr, false)
    }

    /// Like [`UdpSocket::bind`], with IPV6_V6ONLY `v6only` for an IPv6
    /// `addr` (RFC 3493 §5.3): when false (Linux's default) a socket on
    /// `[::]` also receives IPv4 datagrams, their sources seen as
    /// `[::ffff:a.b.c.d]`, and may send to such addresses. IPv6 addresses
    /// need a stack with IPv6 ([`crate::StackBuilder::ip6`]).
    pub fn bind_with(
        stack: &Stack,
        addr: impl Into<SocketAddr>,
        v6only: bool,
    ) -> io::Result<UdpSocket> {
        let p = stack.open_udp(addr.into(), v6only)?;
        stack.wait_opened(&p.shared)?;
        Ok(UdpSocket::from_parts(stack, p, false))
    }

    /// Sends one datagram to `addr`.
    ///
    /// Errors: EMSGSIZE when it does not fit in one frame (no
    /// fragmentation); `WouldBlock` when non-blocking and the ring is full;
    /// once the socket is closed, the errno that closed it (ENETDOWN after a
    /// forked child took it over), EBADF if none.
    pub fn send_to(&mut self, buf: &[u8], addr: impl Into<SocketAddr>) -> io::Result<usize> {
        let addr = addr.into();
        // IPv4 and UDP headers, or IPv6's 40 and UDP's 8.
        let headers = match appif::socket::from_mapped(addr) {
            SocketAddr::V4(_) => 28,
            SocketAddr::V6(_) => 48,
        };
        if buf.len() + headers > self.stack.mtu() {
            return Err(errno::io(EMSGSIZE));
        }
        let h = UdpHeader {
            addr,
            len: buf.len() as u16,
        };
        let need = UdpHeader::LEN + buf.len();
        loop {
            // A closed socket's ring is no longer read (a moved socket's is
            // the child's now): nothing more goes into it.
            self.closed()?;
            if self.tx.free() >= need {
                self.tx.write(&h.encode());
                self.tx.write(buf);
                self.stack.request(self.id, Request::Send);
                return Ok(buf.len());
            }
            if self.nonblocking {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let (tx, sh) = (&self.tx, &self.shared);
            self.stack.wait_for(&sh.notify, None, Policy::Call, || {
                tx.free() >= need || sh.state() == SockState::Closed
            });
        }
    }

    /// Ok while the socket is open; once closed, the errno that closed it
    /// (ENETDOWN when moved to a forked child), EBADF if none was given.
    fn closed(&self) -> io::Result<()> {
        match (self.shared.state(), self.shared.error()) {
            (SockState::Closed, 0) => Err(errno::io(errno::EBADF)),
            (SockState::Closed, e) => Err(errno::io(e)),
            _ => Ok(()),
        }
    }

    /// Receives one datagram; a datagram longer than `buf` is truncated
    /// (the rest is discarded, as on Linux). Returns its length and source.
    pub fn recv_from(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        if self.shared.has_flags(appif::socket::FLAG_MOVED) {
            return Err(errno::io(errno::ENETDOWN));
        }
        loop {
            let mut hb = [0u8; UdpHeader::LEN];
            if self.rx.peek_at(0, &mut hb) == UdpHeader::LEN {
                let h = UdpHeader::decode(&hb);
                let len = usize::from(h.len);
                if self.rx.len() >= UdpHeader::LEN + len {
                    let n = len.min(buf.len());
                    self.rx.peek_at(UdpHeader::LEN, &mut buf[..n]);
                    self.rx.consume(UdpHeader::LEN + len);
                    return Ok((n, h.addr));
                }
            }
            self.closed()?;
            if self.nonblocking {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // A close (a move to a forked child, the daemon leaving) ends
            // the wait too: no datagram may ever come.
            let (rx, sh) = (&self.rx, &self.shared);
            self.stack.wait_for(&sh.notify, None, Policy::Call, || {
                rx.len() >= UdpHeader::LEN || sh.state() == SockState::Closed
            });
        }
    }

    /// Non-blocking sends and receives return `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.nonblocking = on;
        Ok(())
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.shared.local())
    }
}

impl crate::poll::Source for UdpSocket {
    fn probe(&self) -> crate::poll::Probe {
        crate::poll::Probe::udp(self.shared.clone(), &self.rx, &self.tx)
    }

    fn kept_probe(&self) -> Option<&crate::poll::Probe> {
        Some(self.view.probe(|| self.probe()))
    }
}

close_on_drop!(UdpSocket);
ipv6_header!(UdpSocket);

impl UdpSocket {
    /// Receives (or with `peek`, copies without consuming) the next
    /// datagram without waiting: `Some((copied, length, source))`, where
    /// `length` is the datagram's full length (more than `copied` when it
    /// was truncated to `buf`, as MSG_TRUNC reports it); None when none is
    /// waiting.
    pub fn try_recv(&mut self, buf: &mut [u8], peek: bool) -> Option<(usize, usize, SocketAddr)> {
        let mut hb = [0u8; UdpHeader::LEN];
        if self.rx.peek_at(0, &mut hb) != UdpHeader::LEN {
            return None;
        }
        let h = UdpHeader::decode(&hb);
        let len = usize::from(h.len);
        if self.rx.len() < UdpHeader::LEN + len {
            return None;
        }
        let n = len.min(buf.len());
        self.rx.peek_at(UdpHeader::LEN, &mut buf[..n]);
        if !peek {
            self.rx.consume(UdpHeader::LEN + len);
        }
        Some((n, len, h.addr))
    }

    /// The largest payload one datagram can carry, bytes (MTU less the IPv4
    /// and UDP headers, 28 bytes, or for a socket on an IPv6 address the
    /// IPv6 and UDP headers, 48 bytes; no fragmentation).
    pub fn max_payload(&self) -> usize {
        let headers = if self.shared.local().is_ipv6() {
            48
        } else {
            28
        };
        self.stack.mtu().saturating_sub(headers)
    }
}

impl UdpSocket {
    /// Edge marks for readiness reporting (EPOLLET): the total bytes
    /// (datagrams with their record headers) the engine ever put into the
    /// RX ring, and the total the engine ever took from the TX ring.
    pub fn edge_marks(&self) -> (u64, u64) {
        (
            self.rx.position().wrapping_add(self.rx.len() as u64),
            self.tx.position().wrapping_sub(self.tx.len() as u64),
        )
    }

    /// Service mode, in a forked child: takes over `inherited`, a UDP
    /// socket this process inherited from its parent, as a socket of
    /// `stack` (the child's own association), as
    /// [`crate::TcpStream::adopt`] does for a connection: its datagrams
    /// stay in the rings they were in, the parent's copy answers ENETDOWN.
    ///
    /// Errors: as [`crate::TcpStream::adopt`].
    pub fn adopt(stack: &Stack, inherited: &UdpSocket) -> io::Result<UdpSocket> {
        let (at, (tx, rx)) = inherited.stack.inherited(inherited.id)?;
        let (id, shared) = stack.adopt(at)?;
        let parts = Parts { id, shared, tx, rx };
        let s = UdpSocket::from_parts(stack, parts, inherited.nonblocking);
        stack.wait_opened(&s.shared)?;
        Ok(s)
    }
}
