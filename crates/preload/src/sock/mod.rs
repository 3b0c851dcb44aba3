//! A socket as the shim keeps it: undecided (a fresh kernel socket), on
//! corestack (a listener, a stream, a UDP socket, possibly with a kernel
//! side for the wildcard), or handed to the kernel.
//!
//! Decisions (made at bind, listen, connect, or the first sendto):
//! - bind to corestack's address (IPv4, or one of its IPv6 addresses):
//!   corestack only;
//! - bind to the wildcard (0.0.0.0, or `::` with its IPV6_V6ONLY; `::` with
//!   IPV6_V6ONLY on a stack without IPv6 is the kernel's alone): both. The
//!   kernel socket is bound to the same address and port (the kernel picks
//!   the port for port 0, and says EADDRINUSE as Linux does), so a server
//!   keeps answering on loopback; accept and readiness report both sides;
//! - bind to anything else, connect or send to an address corestack does
//!   not route (loopback, other subnets without a gateway, multicast): the
//!   kernel, under the same fd; the options set so far are already on the
//!   kernel socket (every setsockopt goes to it as well).
//!
//! Locking: `state` is held only for a non-blocking attempt; a call that
//! must wait releases it and sleeps on the socket's doorbell (or, with a
//! kernel side, on its thread's eventfd and the kernel fd), then tries
//! again. So several threads can use one socket, as with kernel sockets.
//! A thread that closes a socket another thread is blocked on does what
//! Linux does: the blocked call keeps its reference and goes on (it
//! returns when data, a connection, a shutdown or its timeout comes).
#![forbid(unsafe_code)]

mod across;
mod io;
mod open;
mod opts;

use io::*;

use crate::addr::{self, Sa};
use crate::cancel::{self, Quiet};
use crate::obj::{self, Obj};
use crate::stack::{self, Place};
use crate::sys::k;
use crate::table;
use crate::wait::{self, Deadline};
use appif::errno::{self, Errno};
use core::ffi::c_int;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use core::time::Duration;
use corestack::{ListenOptions, Probe, Source, Status, TcpListener, TcpStream, UdpSocket, Waited};
use opts::Opts;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// A result with an errno.
pub type R<T> = Result<T, Errno>;

/// TCP or UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Stream,
    Dgram,
}

/// Where the socket is. Addresses are kept in canonical form (see
/// `addr`): IPv4 traffic as IPv4 also on an AF_INET6 socket.
enum State {
    /// Not decided yet: the kernel socket at the fd is all there is.
    /// `bound`: a TCP bind recorded for corestack (its address, and whether
    /// the kernel socket is bound too: the wildcard).
    Fresh { bound: Option<(SocketAddr, bool)> },
    /// Listening on corestack; `dual`: the kernel socket listens too.
    Listener {
        l: TcpListener,
        local: SocketAddr,
        dual: bool,
    },
    /// A listener after shutdown(SHUT_RD): accept says EINVAL.
    ListenerShut { local: SocketAddr },
    /// A TCP connection (possibly still connecting).
    Stream(TcpStream),
    /// A bound UDP socket; `dual`: the kernel socket is bound to the
    /// wildcard too (an explicit wildcard bind, or an automatic bind);
    /// `peer`: connect(2)'s default destination and filter when corestack
    /// routes it; `kpeer`: connected to a peer only the kernel side
    /// reaches (loopback, another subnet: the kernel socket is connected,
    /// `peer` is None). Only the side of the peer delivers while
    /// connected; the other side's datagrams are dropped, as Linux drops
    /// those from other sources.
    Udp {
        u: UdpSocket,
        local: SocketAddr,
        dual: bool,
        peer: Option<SocketAddr>,
        kpeer: bool,
    },
    /// Handed to the kernel: the fd is a plain kernel socket again.
    Kernel,
}

/// A socket of ours.
pub struct Sock {
    /// AF_INET or AF_INET6.
    pub family: c_int,
    pub ty: Ty,
    state: Mutex<State>,
    nonblocking: AtomicBool,
    /// The options set (see `opts`).
    pub opts: Mutex<Opts>,
    /// The fds that refer to this socket (dup), for a hand-over.
    fds: Mutex<Vec<c_int>>,
    /// The epoll instances it is registered with, for a change of side.
    pub epolls: Mutex<Vec<Weak<Obj>>>,
    rd_shut: AtomicBool,
    wr_shut: AtomicBool,
    /// Which side accept/recv tries first on a dual socket (alternates).
    kernel_first: AtomicBool,
    /// Its epoll registrations need fixing (handed to the kernel, or a
    /// kernel side appeared): see [`Sock::take_resettle`].
    resettle: AtomicBool,
    /// The [`stack::generation`] whose stack its corestack side belongs
    /// to: another one's (the parent's, inherited by fork) is never used
    /// or dropped here.
    generation: AtomicU32,
}

/// What accept returns.
pub enum Accepted {
    /// A corestack connection on a new placeholder fd.
    Core { fd: c_int, peer: SocketAddr },
    /// A kernel connection (from the kernel side of a dual listener).
    Kernel { fd: c_int, addr: k::AddrBuf },
}

/// Who sent a received datagram or segment: what recvfrom/recvmsg write
/// to the caller's `from` address.
pub enum Sender {
    /// No sender to report (a stream socket: recvfrom writes a zero
    /// length).
    None,
    /// A corestack peer.
    Core(SocketAddr),
    /// A kernel socket's peer, as the kernel wrote it.
    Kernel(k::AddrBuf),
}

/// What a receive returned.
pub struct Recvd {
    /// Bytes copied to the buffers.
    pub n: usize,
    /// The datagram's full length (UDP; MSG_TRUNC), else `n`.
    pub full: usize,
    pub from: Sender,
}

/// The backlog of a forked child's member of a shared listener (the
/// parent's backlog is not kept; the daemon caps it at the segment's room).
const JOIN_BACKLOG: usize = 1024;

/// Connections accepted from corestack listeners by this process (either
/// side of a dual listener: a loopback client's too; see
/// `crate::switch`: a server that forks before its first accept is a
/// pre-forking or daemonizing one).
static ACCEPTED: AtomicU64 = AtomicU64::new(0);

/// How many corestack connections this process has accepted.
pub fn accepted() -> u64 {
    ACCEPTED.load(Ordering::Relaxed)
}

/// True when this process holds a corestack TCP listener of its own
/// (this generation's, not one inherited from a parent).
pub fn holds_listener() -> bool {
    let now = stack::generation();
    table::ours_in(0, u32::MAX).0.into_iter().any(|fd| {
        obj::get(fd).is_some_and(|o| match &*o {
            Obj::Sock(s) => s.generation.load(Ordering::Relaxed) == now && s.is_listener(),
            Obj::Epoll(_) => false,
        })
    })
}

/// Takes every socket out of the table with its connections reset (RST,
/// as SO_LINGER {1, 0} closes them), so that their peers learn at once
/// that they are gone; the fds stay open. Used when the process is about
/// to be replaced (`crate::switch`).
pub fn reset_all() {
    for o in obj::take_all() {
        if let Obj::Sock(s) = &*o {
            s.opts.lock().unwrap_or_else(|p| p.into_inner()).linger = Some(0);
        }
        drop(o);
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn would_block(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
}

impl Sock {
    /// A fresh socket (from socket(2)).
    pub fn fresh(family: c_int, ty: Ty, nonblocking: bool) -> Sock {
        Sock::new(
            family,
            ty,
            State::Fresh { bound: None },
            nonblocking,
            Opts::for_family(family),
        )
    }

    fn new(family: c_int, ty: Ty, state: State, nonblocking: bool, opts: Opts) -> Sock {
        Sock {
            family,
            ty,
            state: Mutex::new(state),
            nonblocking: AtomicBool::new(nonblocking),
            opts: Mutex::new(opts),
            fds: Mutex::new(Vec::new()),
            epolls: Mutex::new(Vec::new()),
            rd_shut: AtomicBool::new(false),
            wr_shut: AtomicBool::new(false),
            kernel_first: AtomicBool::new(false),
            resettle: AtomicBool::new(false),
            generation: AtomicU32::new(stack::generation()),
        }
    }

    /// True (once) when the socket's epoll registrations must be fixed
    /// ([`crate::epoll::resettle`]) after the call that changed its side;
    /// the caller does it without holding the socket's lock.
    pub fn take_resettle(&self) -> bool {
        self.resettle.swap(false, Ordering::AcqRel)
    }

    /// Records that `fd` refers to this socket.
    pub fn add_fd(&self, fd: c_int) {
        let mut f = self.fds.lock().unwrap_or_else(|p| p.into_inner());
        if !f.contains(&fd) {
            f.push(fd);
        }
    }

    /// Records that `fd` no longer refers to this socket.
    pub fn remove_fd(&self, fd: c_int) {
        self.fds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&f| f != fd);
    }

    /// O_NONBLOCK as the application set it.
    pub fn nonblocking(&self) -> bool {
        self.nonblocking.load(Ordering::Relaxed)
    }

    /// Sets O_NONBLOCK as the application sees it (the caller also sets it
    /// on the fd, except on a kernel side the shim keeps non-blocking).
    pub fn set_nonblocking(&self, on: bool) {
        self.nonblocking.store(on, Ordering::Relaxed);
    }

    /// True when the fd is a kernel socket the shim keeps non-blocking
    /// (a dual listener or UDP socket): F_SETFL must leave O_NONBLOCK on.
    pub fn has_kernel_side(&self) -> bool {
        matches!(
            &*lock(&self.state),
            State::Listener { dual: true, .. } | State::Udp { dual: true, .. }
        )
    }

    /// The socket went to corestack (`at`: the call that decided): says
    /// which options set while undecided it goes without.
    fn report_unhonoured(&self, at: &str) {
        self.opts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .report_unhonoured(at);
    }

    /// True when the socket has a corestack side (or a bind recorded for
    /// one): its kernel fd alone is not the socket.
    pub fn on_corestack(&self) -> bool {
        !matches!(
            &*lock(&self.state),
            State::Fresh { bound: None } | State::Kernel
        )
    }

    /// True while undecided.
    pub fn is_fresh(&self) -> bool {
        matches!(&*lock(&self.state), State::Fresh { .. })
    }

    /// True when listening (SO_ACCEPTCONN).
    pub fn is_listener(&self) -> bool {
        matches!(&*lock(&self.state), State::Listener { .. })
    }

    fn v6only(&self) -> bool {
        self.opts.lock().unwrap_or_else(|p| p.into_inner()).v6only
    }

    fn rcvtimeo(&self) -> Option<Duration> {
        self.opts.lock().unwrap_or_else(|p| p.into_inner()).rcvtimeo
    }

    fn sndtimeo(&self) -> Option<Duration> {
        self.opts.lock().unwrap_or_else(|p| p.into_inner()).sndtimeo
    }

    /// Hands the socket to the kernel: its fds become plain kernel fds.
    /// The caller holds `state` (set to Kernel here) and `me` is this socket.
    fn go_kernel(&self, state: &mut State, me: &Arc<Obj>) {
        self.local_change();
        *state = State::Kernel;
        let fds: Vec<c_int> = self.fds.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for fd in fds {
            // The entry is dropped after the state lock is released by the
            // caller (it only holds `me`'s Arc clone, not this lock).
            let old = obj::release(fd, me);
            drop(old);
        }
        self.resettle.store(true, Ordering::Release);
    }
}

impl Sock {
    /// Records a shutdown of the read side (`rd`) and the write side (`wr`),
    /// telling the epoll sets that a socket's readiness changed.
    fn mark_shut(&self, rd: bool, wr: bool) {
        for (side, flag) in [(rd, &self.rd_shut), (wr, &self.wr_shut)] {
            if side {
                flag.store(true, Ordering::Relaxed);
                self.local_change();
            }
        }
    }

    /// shutdown(2).
    pub fn shutdown(&self, fd: c_int, how: c_int) -> R<()> {
        if !matches!(how, libc::SHUT_RD | libc::SHUT_WR | libc::SHUT_RDWR) {
            return Err(libc::EINVAL);
        }
        let rd = how == libc::SHUT_RD || how == libc::SHUT_RDWR;
        let wr = how == libc::SHUT_WR || how == libc::SHUT_RDWR;
        let mut st = lock(&self.state);
        let probe = match &mut *st {
            State::Stream(s) => {
                if s.is_connecting() {
                    return Err(libc::ENOTCONN);
                }
                self.mark_shut(rd, wr);
                if wr {
                    let _ = s.shutdown(std::net::Shutdown::Write);
                }
                Some(s.probe())
            }
            State::Listener { l, local, dual } => {
                if !rd {
                    return Ok(());
                }
                let probe = l.probe();
                if *dual {
                    let _ = k::shutdown(fd, how);
                }
                self.local_change();
                *st = State::ListenerShut { local: *local };
                Some(probe)
            }
            State::Udp { u, peer, kpeer, .. } => {
                if peer.is_none() && !*kpeer {
                    return Err(libc::ENOTCONN);
                }
                self.mark_shut(rd, wr);
                Some(u.probe())
            }
            State::ListenerShut { .. } => None,
            State::Fresh { .. } => {
                // Linux records the shutdown even on an unconnected socket
                // (and says ENOTCONN): a later connection starts shut.
                self.mark_shut(rd, wr);
                drop(st);
                return k::shutdown(fd, how);
            }
            State::Kernel => {
                drop(st);
                return k::shutdown(fd, how);
            }
        };
        drop(st);
        // Wake whoever waits on it (a blocked recv or accept re-checks).
        if let Some(p) = probe {
            p.notify().notify();
        }
        if let Some(s) = stack::started() {
            s.changes().notify();
        }
        Ok(())
    }

    /// The local address (getsockname), or None: ask the kernel socket.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match &*lock(&self.state) {
            State::Fresh {
                bound: Some((a, false)),
            } => Some(*a),
            State::Fresh { .. } | State::Kernel => None,
            State::Listener { local, .. } | State::ListenerShut { local } => Some(*local),
            State::Stream(s) => s.local_addr().ok().map(addr::canonical),
            State::Udp { local, .. } => Some(*local),
        }
    }

    /// The peer's address (getpeername). Err(None): ask the kernel socket;
    /// Err(Some(ENOTCONN)) when not connected.
    pub fn peer_addr(&self) -> Result<SocketAddr, Option<Errno>> {
        match &*lock(&self.state) {
            State::Fresh { .. } | State::Kernel => Err(None),
            State::Stream(s) => {
                let status = s.status();
                if status.connecting || (status.closed && status.error != 0) {
                    return Err(Some(libc::ENOTCONN));
                }
                s.peer_addr()
                    .map(addr::canonical)
                    .map_err(|_| Some(libc::ENOTCONN))
            }
            State::Udp { peer: Some(p), .. } => Ok(*p),
            State::Udp { kpeer: true, .. } => Err(None),
            _ => Err(Some(libc::ENOTCONN)),
        }
    }

    /// Encodes `a` as this socket's family reports addresses (a
    /// link-local IPv6 address with the interface's index as scope id).
    pub fn encode(&self, a: SocketAddr) -> ([u8; 28], usize) {
        addr::encode(a, self.family, stack::ifindex())
    }

    /// IPV6_PKTINFO of a datagram from `from` that corestack delivered to
    /// this UDP socket: the local address it was sent to (v4-mapped for
    /// IPv4) and the interface index. The engine's datagram records carry
    /// the source only, so the destination is the address the corestack
    /// socket is bound to, or on a wildcard (also an automatic bind) the
    /// address of ours that the source reaches (the IPv4 one, the
    /// link-local one from a link-local source, else the global one;
    /// corestack delivers no multicast). None: not such a socket.
    pub fn pktinfo(&self, from: SocketAddr) -> Option<(Ipv6Addr, u32)> {
        let local = match &*lock(&self.state) {
            State::Udp { u, local, .. } => u.local_addr().unwrap_or(*local),
            _ => return None,
        };
        let ip = match (local.ip(), addr::canonical(from).ip()) {
            (ip, _) if !ip.is_unspecified() => ip,
            (_, src) => stack::source_for(src),
        };
        let ip6 = match ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        Some((ip6, stack::ifindex()))
    }

    /// The readiness of the corestack side as poll(2) bits (POLLIN,
    /// POLLOUT, POLLRDHUP, POLLHUP, POLLERR, with their RDNORM/WRNORM
    /// twins), as Linux's tcp_poll / datagram_poll compute them; and whether
    /// the kernel fd must be polled as well (a dual socket's kernel side, or
    /// an undecided socket, which only the kernel can answer for).
    pub fn poll_bits(&self) -> (u32, bool) {
        if self.dead_in_child() {
            // Ready, so that the call the application makes next says ENETDOWN.
            return (
                POLLIN_BITS | POLLOUT_BITS | (libc::POLLERR | libc::POLLHUP) as u32,
                false,
            );
        }
        let st = lock(&self.state);
        let (status, kernel) = match &*st {
            State::Fresh { .. } | State::Kernel => return (0, true),
            State::Listener { l, dual, .. } => {
                let s = l.status();
                let bits = if s.readable { POLLIN_BITS } else { 0 };
                return (bits, *dual);
            }
            State::ListenerShut { .. } => return (POLLIN_BITS | libc::POLLRDHUP as u32, false),
            State::Stream(s) => (s.status(), false),
            State::Udp {
                u,
                dual,
                peer,
                kpeer,
                ..
            } => {
                let s = u.status();
                let mut bits = 0;
                if s.readable && !s.closed && !*kpeer {
                    bits |= POLLIN_BITS;
                }
                if s.writable {
                    bits |= POLLOUT_BITS;
                }
                if self.rd_shut.load(Ordering::Relaxed) {
                    bits |= POLLIN_BITS | libc::POLLRDHUP as u32;
                }
                return (bits, *dual && peer.is_none());
            }
        };
        drop(st);
        let mut bits = 0u32;
        if status.error != 0 {
            bits |= libc::POLLERR as u32;
        }
        if status.connecting {
            return (bits, kernel);
        }
        let rcv_shut = status.rx_fin || status.closed || self.rd_shut.load(Ordering::Relaxed);
        let snd_shut = status.closed || self.wr_shut.load(Ordering::Relaxed);
        if status.closed || (rcv_shut && snd_shut) {
            bits |= libc::POLLHUP as u32;
        }
        if rcv_shut {
            bits |= POLLIN_BITS | libc::POLLRDHUP as u32;
        }
        if status.rx_bytes > 0 {
            bits |= POLLIN_BITS;
        }
        if snd_shut || status.writable {
            bits |= POLLOUT_BITS;
        }
        (bits, kernel)
    }

    /// Runs `f` on a view of its corestack socket's status block (the
    /// probe the socket keeps: nothing is built), for an epoll to watch
    /// ([`Probe::watch`]); None while undecided, in the kernel, shut as a
    /// listener, or the parent's in a forked child.
    pub fn with_block<T>(&self, f: impl FnOnce(&Probe) -> T) -> Option<T> {
        if self.dead_in_child() {
            return None;
        }
        let st = lock(&self.state);
        let probe = match &*st {
            State::Listener { l, .. } => l.kept_probe(),
            State::Stream(s) => s.kept_probe(),
            State::Udp { u, .. } => u.kept_probe(),
            _ => None,
        };
        probe.map(f)
    }

    /// Records a readiness change this process made to the socket (bind,
    /// listen, connect, shutdown, a move to the kernel), which the engine
    /// does not report: the epoll sets holding it look at it next time.
    pub(crate) fn local_change(&self) {
        crate::epoll::nudge(self.epoll_token(), &self.epolls);
    }

    /// Its token in the ready lists of epoll sets: its address, which no
    /// other socket has while an epoll holds a reference to it.
    pub fn epoll_token(&self) -> u64 {
        self as *const Sock as usize as u64
    }

    /// Edge marks for EPOLLET: (a mark that moves when data, a datagram
    /// or a connection arrives; one that moves when TX space is freed).
    /// None while undecided or in the kernel.
    pub fn edge_marks(&self) -> Option<(u64, u64)> {
        match &*lock(&self.state) {
            State::Listener { l, .. } => Some((u64::from(l.probe().notify().seq()), 0)),
            State::Stream(s) => Some(s.edge_marks()),
            State::Udp { u, .. } => Some(u.edge_marks()),
            _ => None,
        }
    }

    /// FIONREAD / SIOCINQ: bytes waiting (TCP), or the next datagram's
    /// length (UDP). None: ask the kernel.
    pub fn pending(&self) -> Option<usize> {
        match &mut *lock(&self.state) {
            State::Stream(s) => Some(s.available()),
            State::Udp { u, .. } => {
                let mut none = [0u8; 0];
                Some(u.try_recv(&mut none, true).map_or(0, |(_, len, _)| len))
            }
            State::Listener { .. } | State::ListenerShut { .. } => Some(0),
            _ => None,
        }
    }

    /// SO_ERROR: takes the pending error. None: ask the kernel.
    pub fn take_error(&self) -> Option<i32> {
        match &*lock(&self.state) {
            State::Stream(s) => Some(s.take_error()),
            State::Fresh { .. } | State::Kernel => None,
            _ => Some(0),
        }
    }

    /// SO_RCVBUF / SO_SNDBUF on the corestack side: a stream now, a
    /// listener for the connections it accepts from now on.
    pub fn apply_buffers(&self, o: &Opts) {
        let (rcv, snd) = o.buffer_sizes();
        if rcv == 0 && snd == 0 {
            return;
        }
        match &*lock(&self.state) {
            State::Stream(s) => {
                if rcv > 0 {
                    let _ = s.set_recv_buffer_size(rcv);
                }
                if snd > 0 {
                    let _ = s.set_send_buffer_size(snd);
                }
            }
            State::Listener { l, .. } => {
                let _ = l.set_buffer_sizes(rcv, snd);
            }
            _ => {}
        }
    }

    /// IPV6_TCLASS and IPV6_UNICAST_HOPS (0: the defaults) on whatever
    /// corestack socket this is: a stream or UDP socket from now on, a
    /// listener for the connections it accepts.
    pub fn apply_ip6_header(&self, tclass: u8, hops: u8) {
        let _ = match &*lock(&self.state) {
            State::Stream(s) => s.set_ipv6_header(tclass, hops),
            State::Listener { l, .. } => l.set_ipv6_header(tclass, hops),
            State::Udp { u, .. } => u.set_ipv6_header(tclass, hops),
            _ => Ok(()),
        };
    }

    /// Runs `f` on the stream if this is one (socket options).
    pub fn with_stream<T>(&self, f: impl FnOnce(&mut TcpStream) -> T) -> Option<T> {
        match &mut *lock(&self.state) {
            State::Stream(s) => Some(f(s)),
            _ => None,
        }
    }

    /// Waits until `cond` holds for the corestack side (or `kfd` shows the
    /// poll events asked for), the deadline passes (EAGAIN) or a signal
    /// handler runs (EINTR; without a deadline and with `restartable`, the
    /// wait goes on when Linux would restart the call).
    fn wait(
        &self,
        probe: &Probe,
        kfd: Option<(c_int, i16)>,
        deadline: Deadline,
        restartable: bool,
        cond: impl Fn(&Status) -> bool,
    ) -> R<()> {
        let stack = stack::start()?;
        let restart = |timed: bool| restartable && !timed && crate::sys::restart_after_signal();
        let timed = deadline.left().is_some();
        // With a kernel side, the steps every wait takes (inline: the engine
        // runs between naps; else a spin, then a sleep).
        let mut steps = corestack::WaitSteps::new(stack, None);
        // No cancellation acts inside; a requested one ends the wait.
        let quiet = Quiet::new();
        loop {
            if cond(&probe.status()) {
                return Ok(());
            }
            if quiet.due() {
                return Err(cancel::PENDING);
            }
            let Some((kfd, kev)) = kfd else {
                let asleep = quiet.asleep_futex(probe.notify());
                let w = stack.wait_until(probe.notify(), deadline.left(), || {
                    cond(&probe.status()) || quiet.due()
                });
                drop(asleep);
                match w {
                    // The condition, or a cancel: the loop's top tells.
                    Waited::Ready => continue,
                    Waited::TimedOut => return Err(libc::EAGAIN),
                    Waited::Interrupted if restart(timed) => continue,
                    Waited::Interrupted => return Err(libc::EINTR),
                }
            };
            if k::poll_now(kfd, kev) & kev != 0 {
                return Ok(());
            }
            if deadline.passed() {
                return Err(libc::EAGAIN);
            }
            let kset = [libc::pollfd {
                fd: kfd,
                events: kev,
                revents: 0,
            }];
            let r = match steps.next(stack) {
                Err(_) => Err(libc::EINTR),
                Ok(corestack::Step::Look) => Ok(()),
                Ok(corestack::Step::Nap(mask)) => wait::nap(stack, &kset, deadline, mask.as_ref()),
                Ok(corestack::Step::Sleep) => {
                    let doorbell = Some((stack, probe.notify()));
                    let recheck = || Ok(cond(&probe.status()).then_some(()));
                    wait::sleep_on(doorbell, &quiet, &kset, deadline, None, recheck).map(drop)
                }
            };
            match r {
                Ok(()) => {}
                Err(libc::EINTR) => {
                    // The thread's own mask back before asking which
                    // handlers restart (a held mask blocks them all).
                    let _ = steps.release();
                    if !restart(timed) {
                        return Err(libc::EINTR);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Inline mode: one engine iteration (the application's thread runs the
/// engine whenever it calls in, as in a library OS); nothing otherwise.
pub fn drive_inline() {
    if let Some(s) = stack::started() {
        if s.is_inline() {
            // The engine's glibc calls (a NIC kick) are no place for a cancel.
            let _quiet = Quiet::new();
            s.drive();
        }
    }
}

/// POLLIN | POLLRDNORM.
pub const POLLIN_BITS: u32 = (libc::POLLIN | libc::POLLRDNORM) as u32;
/// POLLOUT | POLLWRNORM.
pub const POLLOUT_BITS: u32 = (libc::POLLOUT | libc::POLLWRNORM) as u32;

impl Drop for Sock {
    fn drop(&mut self) {
        // Its registrations go: the epoll sets look at them next time.
        crate::epoll::nudge(self.epoll_token(), &self.epolls);
        let state = std::mem::replace(
            self.state.get_mut().unwrap_or_else(|p| p.into_inner()),
            State::Kernel,
        );
        if self.generation.load(Ordering::Relaxed) != stack::generation() {
            // The parent's engine serves these; the child must not touch
            // its rings or join its thread.
            std::mem::forget(state);
            return;
        }
        if let State::Stream(mut s) = state {
            let reset = self
                .opts
                .get_mut()
                .map(|o| o.linger == Some(0))
                .unwrap_or(false);
            s.set_reset_on_close(reset);
            let probe = s.probe();
            stack::stream_closed();
            drop(s);
            if !reset {
                stack::linger(probe);
            }
        }
    }
}
