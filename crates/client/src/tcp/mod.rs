//! TCP sockets: a listener and a stream, shaped like `std::net`; `share`:
//! the ones shared with other processes in service mode.

mod share;

use crate::stack::AcceptRx;
use crate::stack::{Parts, Policy, Request, Stack};
use appif::bytes;
use appif::errno::{self, EINVAL, ENOTCONN, EPIPE};
use appif::socket::{SockId, SockState, StatusHandle, FLAG_MOVED, FLAG_RX_FIN};
use core::net::SocketAddr;
use observe::trace::Kind;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;

/// A TCP socket listening for connections.
pub struct TcpListener {
    stack: Stack,
    id: SockId,
    shared: Arc<StatusHandle>,
    accept: AcceptRx,
    nonblocking: bool,
    view: crate::poll::View,
    /// A SO_REUSEPORT listener's claim on its thread's inline engine.
    claim: Option<crate::EngineClaim>,
}

/// How [`TcpListener::bind_opts`] listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenOptions {
    /// Connections accepted but not yet taken, at most (1 to 4096).
    pub backlog: usize,
    /// IPV6_V6ONLY for an IPv6 address (RFC 3493 §5.3), as in
    /// [`TcpListener::bind_with`].
    pub v6only: bool,
    /// SO_REUSEPORT: share the port with this application's other
    /// listeners that set it.
    pub reuseport: bool,
}

impl Default for ListenOptions {
    /// A backlog of 128, dual-stack, no SO_REUSEPORT.
    fn default() -> Self {
        ListenOptions {
            backlog: 128,
            v6only: false,
            reuseport: false,
        }
    }
}

impl TcpListener {
    /// Listens on `addr` (0.0.0.0 or the stack's address; port 0 picks an
    /// ephemeral port) with a backlog of 128.
    ///
    /// Errors: EADDRINUSE when another socket listens on the port,
    /// EADDRNOTAVAIL for an address that is not the stack's.
    pub fn bind(stack: &Stack, addr: impl Into<SocketAddr>) -> io::Result<TcpListener> {
        TcpListener::bind_with(stack, addr, 128, false)
    }

    /// Listens on `addr` with room for `backlog` connections not yet
    /// accepted (at least 1, at most 4096) and IPV6_V6ONLY `v6only` for an
    /// IPv6 `addr` (RFC 3493 §5.3, Linux's semantics): when false (the
    /// default of [`TcpListener::bind`]) a listener on `[::]` also accepts
    /// IPv4 connections, whose peers it sees as `[::ffff:a.b.c.d]`, and
    /// holds the port for both families; when true an IPv4 listener may
    /// share its port. The same in every mode (in service mode the
    /// daemon's engine holds the port, IPv6 needs a daemon with an IPv6
    /// address).
    pub fn bind_with(
        stack: &Stack,
        addr: impl Into<SocketAddr>,
        backlog: usize,
        v6only: bool,
    ) -> io::Result<TcpListener> {
        let opts = ListenOptions {
            backlog,
            v6only,
            reuseport: false,
        };
        TcpListener::bind_opts(stack, addr, opts)
    }

    /// Listens on `addr` as `opts` say (see [`ListenOptions`]). With
    /// `reuseport`, several listeners of this application may listen on one
    /// address and port (SO_REUSEPORT, as Linux): each new connection goes
    /// to one of them, by a hash of the peer's address and port, and with
    /// several engines to one opened by a thread on the engine that owns
    /// the connection's flow when there is one ([`Stack::current_engine`]).
    /// In inline mode with several engines, the opening thread becomes its
    /// engine's only runner while the listener is open, unless another
    /// thread is ([`Stack::claim_engine`]: a listener per thread, an engine
    /// per thread).
    ///
    /// Errors: EADDRINUSE when the port is taken by a listener without
    /// SO_REUSEPORT (or with another address or IPV6_V6ONLY, or another
    /// application's), EADDRNOTAVAIL for an address that is not the
    /// stack's.
    pub fn bind_opts(
        stack: &Stack,
        addr: impl Into<SocketAddr>,
        opts: ListenOptions,
    ) -> io::Result<TcpListener> {
        let backlog = opts.backlog.clamp(1, 4096);
        let opening = stack.open_listener(addr.into(), (backlog, opts.v6only, opts.reuseport))?;
        let mut l = TcpListener::opened(stack, opening)?;
        l.claim = opts.reuseport.then(|| stack.claim_engine()).flatten();
        Ok(l)
    }

    /// The listener whose open (`opening`: its id, status block and accept
    /// queue) was just asked of `stack`, once the engine took it. Errors:
    /// the errno the engine closed it with.
    fn opened(
        stack: &Stack,
        (id, shared, accept): (SockId, Arc<StatusHandle>, AcceptRx),
    ) -> io::Result<TcpListener> {
        stack.wait_opened(&shared)?;
        Ok(TcpListener {
            stack: stack.clone(),
            id,
            shared,
            accept,
            nonblocking: false,
            view: Default::default(),
            claim: None,
        })
    }

    /// Takes the next established connection; blocks unless non-blocking
    /// (then `WouldBlock` when none is waiting).
    pub fn accept(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
        loop {
            if let Some(a) = self.stack.pop_accepted(&mut self.accept) {
                let peer = a.shared.remote();
                return Ok((TcpStream::from_parts(&self.stack, a.into(), false), peer));
            }
            if self.shared.state() == SockState::Closed {
                // Why the listener closed (ECONNRESET when the daemon
                // stopped), else EINVAL as for a socket not listening.
                return Err(errno::io(match self.shared.error() {
                    0 => EINVAL,
                    e => e,
                }));
            }
            if self.nonblocking {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let (q, sh) = (&self.accept, &self.shared);
            let n = match q.on_several() {
                true => self.stack.changes(),
                false => &sh.notify,
            };
            let accepted = || !q.is_empty() || sh.state() == SockState::Closed;
            self.stack.wait_for(n, None, Policy::Call, accepted);
        }
    }

    /// Switches `accept` between blocking and returning `WouldBlock`.
    pub fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.nonblocking = on;
        Ok(())
    }

    /// SO_RCVBUF and SO_SNDBUF, in bytes (0 leaves one as it is), for the
    /// connections accepted from now on: their receive window grows no
    /// further than `rcv` (auto-tuning off) and their send buffer is `snd`,
    /// as on Linux where accepted sockets inherit the listener's.
    pub fn set_buffer_sizes(&self, rcv: usize, snd: usize) -> io::Result<()> {
        self.request(Request::SetBuffers { rcv, snd });
        Ok(())
    }

    /// Sends `r` to the listener's copy on every engine.
    fn request(&self, r: Request) {
        self.stack.request_every_engine(self.id, r);
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.shared.local())
    }
}

impl crate::poll::Source for TcpListener {
    fn probe(&self) -> crate::poll::Probe {
        let queue = match &self.accept {
            AcceptRx::Local(qs, _) => {
                crate::poll::QueueProbe::Local(qs.iter().map(|q| q.probe()).collect())
            }
            AcceptRx::AppSegment(qs, _) => crate::poll::QueueProbe::AppSegment(
                qs.iter().map(|(q, _)| q.probe()).collect(),
                self.stack
                    .service_segment()
                    .filter(|_| self.accept.on_several()),
            ),
        };
        crate::poll::Probe::listener(self.shared.clone(), queue)
    }

    fn kept_probe(&self) -> Option<&crate::poll::Probe> {
        Some(self.view.probe(|| self.probe()))
    }
}

impl crate::poll::Source for TcpStream {
    fn probe(&self) -> crate::poll::Probe {
        crate::poll::Probe::stream(self.shared.clone(), &self.rx, &self.tx)
    }

    fn kept_probe(&self) -> Option<&crate::poll::Probe> {
        Some(self.view.probe(|| self.probe()))
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.request(Request::Close);
        if let Some(c) = self.claim.take() {
            self.stack.release_claim(c);
        }
    }
}
ipv6_header!(TcpListener);
ipv6_header!(TcpStream);

/// A TCP connection. Implements `Read` and `Write`.
pub struct TcpStream {
    stack: Stack,
    id: SockId,
    shared: Arc<StatusHandle>,
    tx: bytes::Writer,
    rx: bytes::Reader,
    nonblocking: bool,
    wr_shut: bool,
    /// Close with RST instead of FIN (SO_LINGER with a zero timeout).
    abort_on_drop: bool,
    /// TCP_CORK: writes do not kick the engine (see [`TcpStream::set_cork`]).
    cork: bool,
    view: crate::poll::View,
}

impl TcpStream {
    /// A stream of `stack` over a connection's parts, non-blocking when
    /// `nonblocking`, with every option off (no TCP_CORK, a FIN at drop).
    fn from_parts(stack: &Stack, p: Parts, nonblocking: bool) -> TcpStream {
        TcpStream {
            stack: stack.clone(),
            id: p.id,
            shared: p.shared,
            tx: p.tx,
            rx: p.rx,
            nonblocking,
            wr_shut: false,
            abort_on_drop: false,
            cork: false,
            view: Default::default(),
        }
    }

    /// The engine holding the connection (0 with one engine).
    pub fn engine(&self) -> usize {
        self.stack.engine_of(self.id)
    }

    /// Sends `r` to the connection's engine.
    fn request(&self, r: Request) {
        self.stack.request(self.id, r);
    }
}

impl TcpStream {
    /// Opens a connection to `addr` and waits for the handshake.
    ///
    /// Errors: ECONNREFUSED when the peer answers with RST, ETIMEDOUT when
    /// it never answers (after the SYN retries), ENETUNREACH without a
    /// route, EADDRNOTAVAIL when ephemeral ports run out.
    pub fn connect(stack: &Stack, addr: impl Into<SocketAddr>) -> io::Result<TcpStream> {
        let p = stack.open_stream(addr.into())?;
        let s = TcpStream::from_parts(stack, p, false);
        let sh = &s.shared;
        s.stack.wait_for(&sh.notify, None, Policy::Call, || {
            matches!(sh.state(), SockState::Open | SockState::Closed)
        });
        match s.shared.state() {
            SockState::Open => Ok(s),
            _ => Err(errno::io(s.shared.take_error().max(1))),
        }
    }

    /// Disables (true) or enables Nagle's algorithm (RFC 9293 §3.7.4).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.stack.request(self.id, Request::SetNodelay(on));
        Ok(())
    }

    /// Non-blocking reads and writes return `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.nonblocking = on;
        Ok(())
    }

    /// Corks (true) or uncorks the send path, like TCP_CORK (tcp(7)).
    ///
    /// While corked, a write queues its bytes in the TX ring without
    /// telling the engine (no Send command), unless half the ring is
    /// queued or the ring is full: then the engine is told, as it must
    /// drain the ring for the writer to go on. The engine sends no segment
    /// shorter than the MSS while corked ([`appif::socket::FLAG_TX_CORK`]),
    /// so a response written in pieces leaves in full segments, with other
    /// output of the connection (an ACK) or when told; the rest waits.
    /// Uncorking tells the engine about every byte queued (the flush).
    /// Linux's 200 ms ceiling on a cork is not kept: a partial segment
    /// waits for the uncork, a shutdown or the close.
    pub fn set_cork(&mut self, on: bool) {
        self.shared.set_tx_cork(on);
        let was = core::mem::replace(&mut self.cork, on);
        if was && !on && !self.tx.is_empty() {
            self.stack.request(self.id, Request::Send);
        }
    }

    /// True while corked ([`TcpStream::set_cork`]).
    pub fn corked(&self) -> bool {
        self.cork
    }

    /// Turns keepalive probes on or off (like SO_KEEPALIVE; idle 2 h,
    /// interval 75 s, 9 probes, then ETIMEDOUT).
    pub fn set_keepalive(&self, on: bool) -> io::Result<()> {
        self.stack.request(self.id, Request::SetKeepalive(on));
        Ok(())
    }

    /// Sets the receive buffer, in bytes (like SO_RCVBUF): the receive
    /// window grows no further than `bytes` and auto-tuning stops. The RX
    /// ring grows to hold it, up to its reservation (`ring_max_bytes`);
    /// the window scale chosen at the handshake stays (set it on the
    /// listener, or before much data flows, for large windows).
    pub fn set_recv_buffer_size(&self, bytes: usize) -> io::Result<()> {
        self.set_buffers(bytes, 0)
    }

    /// Sets the send buffer, in bytes (like SO_SNDBUF): the TX ring offered
    /// is `bytes` (up to its reservation) whatever the congestion window.
    pub fn set_send_buffer_size(&self, bytes: usize) -> io::Result<()> {
        self.set_buffers(0, bytes)
    }

    /// Asks the engine for receive and send buffers of `rcv` and `snd`
    /// bytes (0: unchanged). Errors: EINVAL when both are 0 (a size of 0
    /// asked for).
    fn set_buffers(&self, rcv: usize, snd: usize) -> io::Result<()> {
        if rcv == 0 && snd == 0 {
            return Err(errno::io(EINVAL));
        }
        self.stack
            .request(self.id, Request::SetBuffers { rcv, snd });
        Ok(())
    }

    /// The RX ring's capacity now, bytes (grows with auto-tuning).
    pub fn recv_buffer_size(&self) -> usize {
        self.rx.capacity()
    }

    /// The TX ring's capacity now, bytes (grows as the engine offers more).
    pub fn send_buffer_size(&self) -> usize {
        self.tx.capacity()
    }

    /// Chooses this connection's congestion control (like TCP_CONGESTION).
    pub fn set_congestion(&self, cc: engine::tcp::CcKind) -> io::Result<()> {
        self.stack.request(self.id, Request::SetCongestion(cc));
        Ok(())
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.shared.remote())
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.shared.local())
    }

    /// Shuts down the write half (FIN after the queued bytes); the read
    /// half is only marked (later reads return 0 once the ring is empty).
    pub fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        if matches!(how, Shutdown::Write | Shutdown::Both) && !self.wr_shut {
            self.wr_shut = true;
            self.stack.request(self.id, Request::Shutdown);
        }
        Ok(())
    }

    /// Bytes waiting to be read.
    pub fn available(&self) -> usize {
        self.rx.len()
    }

    /// Bytes a write takes now without waiting: the send ring's free space
    /// (a lower bound: the ring may grow when the engine offers more). 0
    /// after a write shutdown.
    pub fn send_room(&self) -> usize {
        if self.wr_shut {
            0
        } else {
            self.tx.free()
        }
    }

    /// Records a traced read or write (`kind`) of `n` bytes that began at
    /// `t0` and left its ring at position `pos` (see [`observe::trace`]).
    #[inline]
    fn trace(&self, kind: Kind, t0: u64, n: usize, pos: u64) {
        let (local, remote) = (self.shared.local(), self.shared.remote());
        crate::trace::record(&self.stack.inner.tracer, kind, local, remote, t0, n, pos);
    }

    fn closed_error(&self) -> Option<io::Error> {
        match self.shared.error() {
            0 => None,
            e => Some(errno::io(e)),
        }
    }
}

impl Read for TcpStream {
    /// Reads available bytes; 0 at end of stream (peer FIN).
    ///
    /// Errors: ECONNRESET / ETIMEDOUT when the connection died;
    /// `WouldBlock` when non-blocking and nothing is there.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // When the bytes were seen: this call, or the end of its wait.
        let mut seen = crate::trace::stamp(&self.stack.inner.tracer);
        if self.shared.has_flags(FLAG_MOVED) {
            return Err(errno::io(errno::ENETDOWN));
        }
        loop {
            let before = self.rx.len();
            // After len(), which adopts a geometry the engine grew the ring
            // to: read before it, the capacity can be below `before`
            // (subtracting it panicked). Saturating below, as a ring the
            // engine broke must not panic either.
            let cap = self.rx.capacity();
            let n = self.rx.read(buf);
            if n > 0 {
                // The window was nearly closed: tell the engine it opened.
                // (`n` can exceed `before`: bytes that came in meanwhile.)
                let after = before.saturating_sub(n);
                if cap.saturating_sub(before) < cap / 2 && cap.saturating_sub(after) >= cap / 2 {
                    self.stack.request(self.id, Request::Recvd);
                }
                if seen != 0 {
                    self.trace(Kind::Read, seen, n, self.rx.position());
                }
                return Ok(n);
            }
            if self.shared.has_flags(FLAG_RX_FIN) && self.rx.is_empty() {
                return Ok(0);
            }
            if self.shared.state() == SockState::Closed && self.rx.is_empty() {
                return match self.closed_error() {
                    Some(e) => Err(e),
                    None => Ok(0),
                };
            }
            if self.nonblocking {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let (rx, sh) = (&self.rx, &self.shared);
            self.stack.wait_for(&sh.notify, None, Policy::Call, || {
                !rx.is_empty() || sh.has_flags(FLAG_RX_FIN) || sh.state() == SockState::Closed
            });
            seen = crate::trace::stamp(&self.stack.inner.tracer);
        }
    }
}

impl Write for TcpStream {
    /// Queues bytes for sending; returns how many fit in the TX ring.
    ///
    /// Errors: EPIPE after shutdown(Write) or close, ECONNRESET /
    /// ETIMEDOUT when the connection died, ENOTCONN before it opened,
    /// `WouldBlock` when non-blocking and the ring is full.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.wr_shut {
            return Err(errno::io(EPIPE));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let called = crate::trace::stamp(&self.stack.inner.tracer);
        loop {
            match self.shared.state() {
                SockState::Closed => {
                    return Err(self.closed_error().unwrap_or_else(|| errno::io(EPIPE)))
                }
                SockState::Opening | SockState::Connecting => return Err(errno::io(ENOTCONN)),
                SockState::Open => {}
            }
            // The engine offers a larger TX ring once cwnd needs it.
            let grant = self.shared.tx_grant();
            if grant > self.tx.wanted() {
                self.tx.grow(grant);
            }
            let was_empty = self.tx.is_empty();
            let n = self.tx.write(buf);
            if n > 0 {
                // Kick the engine when it may have stopped looking at the
                // ring: it was empty, or the engine took everything before
                // these bytes while they were being written (it acknowledged
                // the rest and went idle without seeing them), or it had
                // sent everything before them and waits for an ACK to look
                // again (FLAG_TX_IDLE; with TCP_NODELAY the bytes may leave
                // now, not after the peer's delayed ACK). Otherwise it is
                // still sending and reads the ring again by itself.
                // Corked: the engine is told only once the ring is half
                // full or full (the writer would otherwise wait for room
                // the engine never makes); the idle flag stays for the
                // uncork's kick.
                let corked = self.cork
                    && n == buf.len()
                    && self.tx.free() > 0
                    && self.tx.len() < self.tx.capacity() / 2;
                let kick = !corked
                    && (was_empty || self.tx.len() == n || {
                        // The bytes are in the ring before the flag is read
                        // (the engine sets it, then reads the ring's length).
                        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
                        self.shared.take_tx_idle()
                    });
                if kick {
                    self.stack.request(self.id, Request::Send);
                }
                if called != 0 {
                    self.trace(Kind::Write, called, n, self.tx.position());
                }
                return Ok(n);
            }
            if self.nonblocking {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let (tx, sh) = (&self.tx, &self.shared);
            self.stack.wait_for(&sh.notify, None, Policy::Call, || {
                tx.free() > 0 || sh.state() == SockState::Closed
            });
        }
    }

    /// Nothing to do: bytes leave as soon as TCP allows.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        if self.abort_on_drop {
            self.stack.request(self.id, Request::Abort);
        } else {
            self.stack.request(self.id, Request::Close);
        }
    }
}

/// Calls for a sockets layer above this one (the `LD_PRELOAD` shim): a
/// connect that does not wait, peeking, the pending error, reset on close.
impl TcpStream {
    /// Starts a connection to `remote` from local port `local_port` (0: an
    /// ephemeral port) and returns at once, in the connecting state; the
    /// outcome shows in [`crate::Probe::status`] (writable once open, an
    /// error and closed when it failed) and in [`TcpStream::take_error`].
    ///
    /// Errors: EMFILE when the service segment has no free slot; the
    /// handshake's own errors come later (ECONNREFUSED, ETIMEDOUT,
    /// ENETUNREACH, EADDRINUSE for a local port already connected to
    /// `remote`, EADDRNOTAVAIL without an ephemeral port).
    pub fn start_connect(
        stack: &Stack,
        remote: impl Into<SocketAddr>,
        local_port: u16,
        nodelay: bool,
    ) -> io::Result<TcpStream> {
        let p = stack.open_stream_from(remote.into(), local_port, nodelay)?;
        Ok(TcpStream::from_parts(stack, p, true))
    }

    /// Copies up to `buf.len()` received bytes without consuming them
    /// (MSG_PEEK); returns how many (0 when none is waiting).
    pub fn peek(&self, buf: &mut [u8]) -> usize {
        self.rx.peek_at(0, buf)
    }

    /// Takes the pending error (like SO_ERROR): a positive errno, or 0.
    pub fn take_error(&self) -> i32 {
        self.shared.take_error()
    }

    /// True while the handshake is under way.
    pub fn is_connecting(&self) -> bool {
        matches!(
            self.shared.state(),
            SockState::Opening | SockState::Connecting
        )
    }

    /// SO_LINGER with a zero timeout: when dropped, the connection is reset
    /// (RST to the peer, unsent bytes discarded) instead of closed with FIN.
    pub fn set_reset_on_close(&mut self, on: bool) {
        self.abort_on_drop = on;
    }

    /// Keepalive timing (TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT): idle
    /// time before the first probe and between probes (whole seconds, at
    /// least 1), and the unanswered probes before ETIMEDOUT (at least 1).
    /// Every mode (service mode through its own descriptor).
    pub fn set_keepalive_params(
        &self,
        idle: core::time::Duration,
        interval: core::time::Duration,
        count: u32,
    ) {
        let secs = |d: core::time::Duration| d.as_secs().clamp(1, u64::from(u32::MAX)) as u32;
        self.stack.request(
            self.id,
            Request::SetKeepaliveParams {
                idle_s: secs(idle),
                interval_s: secs(interval),
                count: count.max(1),
            },
        );
    }

    /// TCP_USER_TIMEOUT (RFC 5482): data unacknowledged for `t` after the
    /// first retransmission timeout ends the connection with ETIMEDOUT, at
    /// the next timeout (whole milliseconds; zero: the retry limit alone).
    /// Every mode.
    pub fn set_user_timeout(&self, t: core::time::Duration) {
        let ms = t.as_millis().min(u128::from(u32::MAX)) as u32;
        self.stack.request(self.id, Request::SetUserTimeout(ms));
    }
}

impl TcpListener {
    /// Like [`TcpListener::bind`], with room for `backlog` connections not
    /// yet accepted (at least 1, at most 4096).
    ///
    /// Errors: EADDRINUSE when another socket listens on the port,
    /// EADDRNOTAVAIL for an address that is not the stack's.
    pub fn bind_with_backlog(
        stack: &Stack,
        addr: impl Into<SocketAddr>,
        backlog: usize,
    ) -> io::Result<TcpListener> {
        TcpListener::bind_with(stack, addr, backlog, false)
    }
}

impl TcpStream {
    /// Edge marks for readiness reporting (EPOLLET): the total bytes the
    /// engine ever put into the RX ring, and the total bytes the peer ever
    /// acknowledged from the TX ring; each only grows (wrapping at 2^64).
    pub fn edge_marks(&self) -> (u64, u64) {
        (
            self.rx.position().wrapping_add(self.rx.len() as u64),
            self.tx.position().wrapping_sub(self.tx.len() as u64),
        )
    }
}
