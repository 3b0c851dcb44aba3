//! The socket calls: `cs_socket`, `cs_bind`, `cs_listen`, `cs_accept`,
//! `cs_connect`, `cs_send`, `cs_recv`, `cs_sendto`, `cs_recvfrom`,
//! `cs_shutdown`, `cs_close`, the options and the address queries.
//!
//! The Rust sockets behind the descriptors are always non-blocking. A call
//! on a blocking descriptor that would block releases the descriptor's
//! lock and waits on a one-socket [`Poller`] (in slices of [`WAIT_SLICE`],
//! so a `cs_close` from another thread ends the wait with EBADF), then
//! tries again. So two threads may use one descriptor at once (one sending
//! while the other receives), as with kernel sockets.

use crate::error::{Error, Result};
use crate::ffi;
use crate::table::{self, Desc, Slot};
use crate::{CS_MSG_DONTWAIT, CS_MSG_NOSIGNAL, CS_SOCK_DGRAM, CS_SOCK_STREAM};
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use corestack::{Interest, Poller, TcpListener, TcpStream, UdpSocket};
use std::ffi::{c_int, c_void};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::time::Duration;

/// The longest a blocked call sleeps before it checks that its descriptor
/// is still open.
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// What one attempt of a possibly blocking call came to.
enum Step<T> {
    Done(T),
    /// It would block until the socket shows this readiness.
    Wait(Interest),
}

/// Runs `attempt` on descriptor `sd` until it is done: a blocking
/// descriptor waits for the readiness the attempt asks for, a non-blocking
/// one (or `dontwait`) fails with EAGAIN. Errors: EBADF when `sd` is not
/// open (or is closed meanwhile), the attempt's own.
fn drive<T>(
    sd: c_int,
    dontwait: bool,
    mut attempt: impl FnMut(&mut Desc) -> Result<Step<T>>,
) -> Result<T> {
    let mut events = Vec::new();
    loop {
        let mut poller = {
            let entry = table::lookup(sd)?;
            let mut d = entry.lock();
            let interest = match attempt(&mut d)? {
                Step::Done(v) => return Ok(v),
                Step::Wait(i) => i,
            };
            if d.nonblocking || dontwait {
                return Err(Error::errno(libc::EAGAIN));
            }
            let mut p = Poller::new(&table::stack()?);
            crate::poll::register(&mut p, &d, 0, interest)?;
            p
        };
        poller.wait(&mut events, 1, Some(WAIT_SLICE))?;
    }
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// The error for a call that needs a socket and got something else.
fn wrong_kind(slot: &Slot) -> Error {
    match slot {
        Slot::Closed => Error::errno(libc::EBADF),
        Slot::Poller(_) => Error::errno(libc::ENOTSOCK),
        _ => Error::errno(libc::ENOTCONN),
    }
}

/// Checks `flags` of a send or receive: CS_MSG_DONTWAIT and
/// CS_MSG_NOSIGNAL (a no-op: the library never raises SIGPIPE) are known.
/// Returns whether CS_MSG_DONTWAIT is set. Errors: EOPNOTSUPP for others.
fn dontwait(flags: c_int) -> Result<bool> {
    if flags & !(CS_MSG_DONTWAIT | CS_MSG_NOSIGNAL) != 0 {
        return Err(Error::msg(
            libc::EOPNOTSUPP,
            "unsupported flags: only CS_MSG_DONTWAIT and CS_MSG_NOSIGNAL are known",
        ));
    }
    Ok(flags & CS_MSG_DONTWAIT != 0)
}

const ANY: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// Creates a socket: `CS_SOCK_STREAM` (TCP) or `CS_SOCK_DGRAM` (UDP), IPv4
/// only, blocking. Returns its descriptor (a small non-negative int that
/// only this library knows; not a kernel fd).
///
/// Errors: EINVAL for another type, ENETDOWN before `cs_init`, EMFILE when
/// 65536 descriptors are open.
#[no_mangle]
pub extern "C" fn cs_socket(kind: c_int) -> c_int {
    crate::error::ffi(-1, || {
        let slot = match kind {
            CS_SOCK_STREAM => Slot::TcpFresh {
                local: None,
                connecting: false,
            },
            CS_SOCK_DGRAM => Slot::UdpFresh,
            _ => {
                return Err(Error::msg(
                    libc::EINVAL,
                    "unknown socket type: use CS_SOCK_STREAM or CS_SOCK_DGRAM",
                ))
            }
        };
        table::insert(Desc::new(slot))
    })
}

/// Gives socket `sd` the local address `*addr` (0.0.0.0 or the stack's
/// address; port 0 picks an ephemeral port). A UDP socket is bound at
/// once; a TCP socket keeps the address for `cs_listen`, which reports
/// EADDRINUSE and EADDRNOTAVAIL. Returns 0.
///
/// Errors: EBADF, ENOTSOCK for a poller, EFAULT when `addr` is null,
/// EAFNOSUPPORT when it is neither AF_INET nor AF_INET6 (a `struct
/// sockaddr_in6`, RFC 3493 §3.3: IPv6 needs a stack with an IPv6 address;
/// `::` listens on both families, IPV6_V6ONLY off), EINVAL when the socket is already
/// bound (or listening, or connected); for UDP also EADDRINUSE (port
/// taken) and EADDRNOTAVAIL (not the stack's address).
///
/// # Safety
/// `addr` must be null or point to a readable `struct sockaddr_in`, or
/// `struct sockaddr_in6` when its family is AF_INET6.
#[no_mangle]
pub unsafe extern "C" fn cs_bind(sd: c_int, addr: *const libc::sockaddr_in) -> c_int {
    crate::error::ffi(-1, || {
        let entry = table::lookup(sd)?;
        // SAFETY: the caller promises a readable sockaddr_in or null.
        let a = unsafe { ffi::read_addr(addr) }?;
        let mut d = entry.lock();
        match &mut d.slot {
            Slot::TcpFresh {
                local: local @ None,
                connecting: false,
            } => *local = Some(a),
            Slot::UdpFresh => {
                let mut u = UdpSocket::bind(&table::stack()?, a)?;
                u.set_nonblocking(true)?;
                d.slot = Slot::Udp(u);
            }
            other @ (Slot::Poller(_) | Slot::Closed) => return Err(wrong_kind(other)),
            _ => return Err(Error::msg(libc::EINVAL, "the socket is already bound")),
        }
        Ok(0)
    })
}

/// Makes TCP socket `sd` listen on the address given to `cs_bind`
/// (0.0.0.0 and an ephemeral port without one). `backlog` is ignored: the
/// stack keeps up to 128 connections waiting. Listening again is a no-op.
/// Returns 0.
///
/// Errors: EBADF, ENOTSOCK for a poller, EOPNOTSUPP for UDP, EINVAL for a
/// connected (or connecting) socket, EADDRINUSE when another socket
/// listens on the port, EADDRNOTAVAIL for an address that is not the
/// stack's.
#[no_mangle]
pub extern "C" fn cs_listen(sd: c_int, backlog: c_int) -> c_int {
    let _ = backlog;
    crate::error::ffi(-1, || {
        let entry = table::lookup(sd)?;
        let mut d = entry.lock();
        let local = match &d.slot {
            Slot::TcpFresh {
                local,
                connecting: false,
            } => local.unwrap_or(ANY),
            Slot::Listener(_) => return Ok(0),
            Slot::UdpFresh | Slot::Udp(_) => return Err(Error::errno(libc::EOPNOTSUPP)),
            other @ (Slot::Poller(_) | Slot::Closed) => return Err(wrong_kind(other)),
            _ => return Err(Error::errno(libc::EINVAL)),
        };
        let mut l = TcpListener::bind(&table::stack()?, local)?;
        l.set_nonblocking(true)?;
        if d.buffers != (0, 0) {
            l.set_buffer_sizes(d.buffers.0, d.buffers.1)?;
        }
        d.slot = Slot::Listener(l);
        Ok(0)
    })
}

/// Takes the next established connection of listening socket `sd`,
/// waiting for one unless `sd` is non-blocking. Writes the peer's address
/// to `*peer` unless `peer` is null. Returns the new descriptor: blocking,
/// with the listener's TCP_NODELAY setting.
///
/// Errors: EBADF, ENOTSOCK for a poller, EINVAL when `sd` is not listening
/// (or its listener failed), EAGAIN when non-blocking and none is waiting,
/// EMFILE when the table is full (the connection is then closed).
///
/// # Safety
/// `peer` must be null or point to a writable `struct sockaddr_in`, or
/// `struct sockaddr_in6` for a listener bound with AF_INET6.
#[no_mangle]
pub unsafe extern "C" fn cs_accept(sd: c_int, peer: *mut libc::sockaddr_in) -> c_int {
    crate::error::ffi(-1, || {
        let (s, from, nodelay) = drive(sd, false, |d| {
            let Slot::Listener(l) = &mut d.slot else {
                return Err(match d.slot {
                    Slot::Closed | Slot::Poller(_) => wrong_kind(&d.slot),
                    _ => Error::msg(libc::EINVAL, "the socket is not listening: call cs_listen"),
                });
            };
            match l.accept() {
                Ok((s, from)) => Ok(Step::Done((s, from, d.nodelay))),
                Err(e) if would_block(&e) => Ok(Step::Wait(Interest::READABLE)),
                Err(e) => Err(e.into()),
            }
        })?;
        let mut s = s;
        s.set_nonblocking(true)?;
        if nodelay {
            s.set_nodelay(true)?;
        }
        let mut desc = Desc::new(Slot::Stream(s));
        desc.nodelay = nodelay;
        let new = table::insert(desc)?;
        // SAFETY: the caller promises a writable sockaddr_in or null.
        unsafe { ffi::write_addr(peer, from) };
        Ok(new)
    })
}

/// Connects TCP socket `sd` to `*addr` and waits for the handshake; this
/// call waits also on a non-blocking descriptor (there is no EINPROGRESS).
/// An address given to `cs_bind` before must have port 0 (the stack picks
/// the local port). Returns 0.
///
/// Errors: EBADF (also when `sd` is closed during the handshake), ENOTSOCK
/// for a poller, EFAULT / EAFNOSUPPORT for `addr`, EOPNOTSUPP for UDP or a
/// bound local port, EISCONN when connected, EALREADY while another
/// thread connects it, EINVAL when listening, ECONNREFUSED (the peer sent
/// RST), ETIMEDOUT (no answer to the SYN retries), ENETUNREACH (no route),
/// EADDRNOTAVAIL (no ephemeral port left).
///
/// # Safety
/// `addr` must be null or point to a readable `struct sockaddr_in`, or
/// `struct sockaddr_in6` when its family is AF_INET6.
#[no_mangle]
pub unsafe extern "C" fn cs_connect(sd: c_int, addr: *const libc::sockaddr_in) -> c_int {
    crate::error::ffi(-1, || {
        let entry = table::lookup(sd)?;
        // SAFETY: the caller promises a readable sockaddr_in or null.
        let to = unsafe { ffi::read_addr(addr) }?;
        {
            let mut d = entry.lock();
            match &mut d.slot {
                Slot::TcpFresh {
                    local,
                    connecting: connecting @ false,
                } => {
                    if local.is_some_and(|l| l.port() != 0) {
                        return Err(Error::msg(
                            libc::EOPNOTSUPP,
                            "connecting from a chosen local port is not supported: bind port 0 or do not bind",
                        ));
                    }
                    *connecting = true;
                }
                Slot::TcpFresh { .. } => return Err(Error::errno(libc::EALREADY)),
                Slot::Stream(_) => return Err(Error::errno(libc::EISCONN)),
                Slot::Listener(_) => return Err(Error::errno(libc::EINVAL)),
                Slot::UdpFresh | Slot::Udp(_) => {
                    return Err(Error::msg(
                        libc::EOPNOTSUPP,
                        "connected UDP sockets are not supported: use cs_sendto",
                    ))
                }
                other @ (Slot::Poller(_) | Slot::Closed) => return Err(wrong_kind(other)),
            }
        }
        // The handshake runs without the descriptor's lock.
        let r = table::stack().and_then(|st| TcpStream::connect(&st, to).map_err(Error::from));
        let mut d = entry.lock();
        let fresh = matches!(d.slot, Slot::TcpFresh { .. });
        match r {
            Ok(mut s) if fresh => {
                s.set_nonblocking(true)?;
                if d.nodelay {
                    s.set_nodelay(true)?;
                }
                apply_buffers(&s, d.buffers)?;
                d.slot = Slot::Stream(s);
                Ok(0)
            }
            // Closed meanwhile: the stream is dropped (closed) here.
            Ok(_) => Err(Error::errno(libc::EBADF)),
            Err(e) => {
                if let Slot::TcpFresh { connecting, .. } = &mut d.slot {
                    *connecting = false;
                }
                Err(e)
            }
        }
    })
}

/// Sends up to `len` bytes of `buf` on connected TCP socket `sd`. A
/// blocking descriptor waits until all of them are queued (returning fewer
/// only if an error comes after some were); a non-blocking one (or
/// CS_MSG_DONTWAIT) queues what fits. Returns the number of bytes queued.
///
/// Errors: EBADF, ENOTSOCK for a poller, EFAULT when `buf` is null and
/// `len` > 0, EOPNOTSUPP for unknown flags, EDESTADDRREQ for UDP (use
/// `cs_sendto`), ENOTCONN when not connected, EAGAIN when non-blocking and
/// the send ring is full, EPIPE after `cs_shutdown` of the write side (no
/// SIGPIPE is ever raised), ECONNRESET / ETIMEDOUT when the connection died.
///
/// # Safety
/// `buf` must be null or valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cs_send(
    sd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
) -> libc::ssize_t {
    crate::error::ffi(-1, || {
        table::lookup(sd)?;
        // SAFETY: the caller promises `len` readable bytes at `buf`.
        let data = unsafe { ffi::bytes(buf, len) }?;
        send(sd, data, dontwait(flags)?)
    })
}

fn send(sd: c_int, data: &[u8], dontwait: bool) -> Result<libc::ssize_t> {
    let mut sent = 0usize;
    drive(sd, dontwait, |d| {
        let nonblocking = d.nonblocking || dontwait;
        let s = match &mut d.slot {
            Slot::Stream(s) => s,
            Slot::UdpFresh | Slot::Udp(_) => return Err(Error::errno(libc::EDESTADDRREQ)),
            other => return Err(wrong_kind(other)),
        };
        loop {
            if sent == data.len() {
                return Ok(Step::Done(sent as libc::ssize_t));
            }
            match s.write(&data[sent..]) {
                Ok(n) => {
                    sent += n;
                    if nonblocking {
                        return Ok(Step::Done(sent as libc::ssize_t));
                    }
                }
                Err(e) if would_block(&e) => {
                    return Ok(if sent > 0 && nonblocking {
                        Step::Done(sent as libc::ssize_t)
                    } else {
                        Step::Wait(Interest::WRITABLE)
                    });
                }
                Err(_) if sent > 0 => return Ok(Step::Done(sent as libc::ssize_t)),
                Err(e) => return Err(e.into()),
            }
        }
    })
}

/// Receives up to `len` bytes into `buf` from connected TCP socket `sd`
/// (or one datagram from UDP socket `sd`, truncated to `len`), waiting for
/// data unless `sd` is non-blocking or CS_MSG_DONTWAIT is given. Returns
/// the number of bytes, 0 at end of stream (the peer shut down its side,
/// or after `cs_shutdown(sd, CS_SHUT_RD)` once the buffered bytes are
/// read).
///
/// Errors: EBADF, ENOTSOCK for a poller, EFAULT when `buf` is null and
/// `len` > 0, EOPNOTSUPP for unknown flags, ENOTCONN when not connected,
/// EINVAL for an unbound UDP socket, EAGAIN when non-blocking and nothing
/// is there, ECONNRESET / ETIMEDOUT when the connection died.
///
/// # Safety
/// `buf` must be null or valid for writes of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cs_recv(
    sd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
) -> libc::ssize_t {
    crate::error::ffi(-1, || {
        table::lookup(sd)?;
        // SAFETY: the caller promises `len` writable bytes at `buf`.
        let out = unsafe { ffi::bytes_mut(buf, len) }?;
        recv(sd, out, dontwait(flags)?).map(|(n, _)| n)
    })
}

/// One receive: the byte count and where they came from.
fn recv(sd: c_int, out: &mut [u8], dontwait: bool) -> Result<(libc::ssize_t, SocketAddr)> {
    drive(sd, dontwait, |d| {
        let rd_shut = d.rd_shut;
        match &mut d.slot {
            Slot::Stream(s) => match s.read(out) {
                Ok(n) => Ok(Step::Done((n as libc::ssize_t, s.peer_addr()?))),
                Err(e) if would_block(&e) && rd_shut => Ok(Step::Done((0, s.peer_addr()?))),
                Err(e) if would_block(&e) => Ok(Step::Wait(Interest::READABLE)),
                Err(e) => Err(e.into()),
            },
            Slot::Udp(u) => match u.recv_from(out) {
                Ok((n, from)) => Ok(Step::Done((n as libc::ssize_t, from))),
                Err(e) if would_block(&e) => Ok(Step::Wait(Interest::READABLE)),
                Err(e) => Err(e.into()),
            },
            Slot::UdpFresh => Err(Error::msg(
                libc::EINVAL,
                "the UDP socket is not bound: call cs_bind first",
            )),
            other => Err(wrong_kind(other)),
        }
    })
}

/// Sends one datagram of `len` bytes to `*to` on UDP socket `sd`, binding
/// it to 0.0.0.0 and an ephemeral port first if it is not bound, waiting
/// for room unless non-blocking or CS_MSG_DONTWAIT. On a connected TCP
/// socket `to` is ignored and this is `cs_send`. Returns `len`.
///
/// Errors: as `cs_send`; EFAULT when `to` is null (UDP), EAFNOSUPPORT when
/// it is not AF_INET, EMSGSIZE when the datagram does not fit in one frame
/// (no fragmentation).
///
/// # Safety
/// `buf` must be null or valid for reads of `len` bytes; `to` must be null
/// or point to a readable `struct sockaddr_in`.
#[no_mangle]
pub unsafe extern "C" fn cs_sendto(
    sd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    to: *const libc::sockaddr_in,
) -> libc::ssize_t {
    crate::error::ffi(-1, || {
        let entry = table::lookup(sd)?;
        // SAFETY: the caller promises `len` readable bytes at `buf`.
        let data = unsafe { ffi::bytes(buf, len) }?;
        let dontwait = dontwait(flags)?;
        {
            let mut d = entry.lock();
            match &d.slot {
                Slot::Stream(_) => {
                    drop(d);
                    return send(sd, data, dontwait);
                }
                Slot::UdpFresh => {
                    let mut u = UdpSocket::bind(&table::stack()?, ANY)?;
                    u.set_nonblocking(true)?;
                    d.slot = Slot::Udp(u);
                }
                Slot::Udp(_) => {}
                other => return Err(wrong_kind(other)),
            }
        }
        // SAFETY: the caller promises a readable sockaddr_in or null.
        let to = unsafe { ffi::read_addr(to) }?;
        drive(sd, dontwait, |d| match &mut d.slot {
            Slot::Udp(u) => match u.send_to(data, to) {
                Ok(n) => Ok(Step::Done(n as libc::ssize_t)),
                Err(e) if would_block(&e) => Ok(Step::Wait(Interest::WRITABLE)),
                Err(e) => Err(e.into()),
            },
            other => Err(wrong_kind(other)),
        })
    })
}

/// Like `cs_recv`, and writes the sender's address (for TCP: the peer's)
/// to `*from` unless `from` is null.
///
/// # Safety
/// `buf` must be null or valid for writes of `len` bytes; `from` must be
/// null or point to a writable `struct sockaddr_in`.
#[no_mangle]
pub unsafe extern "C" fn cs_recvfrom(
    sd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    from: *mut libc::sockaddr_in,
) -> libc::ssize_t {
    crate::error::ffi(-1, || {
        table::lookup(sd)?;
        // SAFETY: the caller promises `len` writable bytes at `buf`.
        let out = unsafe { ffi::bytes_mut(buf, len) }?;
        let (n, addr) = recv(sd, out, dontwait(flags)?)?;
        // SAFETY: the caller promises a writable sockaddr_in or null.
        unsafe { ffi::write_addr(from, addr) };
        Ok(n)
    })
}

/// Shuts down part of connected TCP socket `sd`: CS_SHUT_WR sends FIN
/// after the queued bytes (later sends fail with EPIPE), CS_SHUT_RD makes
/// receives return 0 instead of waiting, CS_SHUT_RDWR both. Returns 0.
///
/// Errors: EBADF, ENOTSOCK for a poller, EINVAL for another `how`,
/// ENOTCONN when not connected.
#[no_mangle]
pub extern "C" fn cs_shutdown(sd: c_int, how: c_int) -> c_int {
    crate::error::ffi(-1, || {
        let (rd, wr) = match how {
            crate::CS_SHUT_RD => (true, false),
            crate::CS_SHUT_WR => (false, true),
            crate::CS_SHUT_RDWR => (true, true),
            _ => return Err(Error::errno(libc::EINVAL)),
        };
        let entry = table::lookup(sd)?;
        let mut d = entry.lock();
        let Slot::Stream(s) = &mut d.slot else {
            return Err(wrong_kind(&d.slot));
        };
        if wr {
            s.shutdown(Shutdown::Write)?;
        }
        if rd {
            d.rd_shut = true;
        }
        Ok(0)
    })
}

/// Closes descriptor `sd` (a socket or a poller) and frees the number. A
/// TCP connection sends its queued bytes, then FIN. A call waiting on `sd`
/// in another thread returns EBADF. Returns 0. Errors: EBADF.
#[no_mangle]
pub extern "C" fn cs_close(sd: c_int) -> c_int {
    crate::error::ffi(-1, || table::close(sd).map(|()| 0))
}

/// Makes calls on `sd` return EAGAIN (`on` != 0) instead of waiting, or
/// wait again (`on` == 0). `cs_connect` waits either way. Returns 0.
/// Errors: EBADF.
#[no_mangle]
pub extern "C" fn cs_set_nonblocking(sd: c_int, on: c_int) -> c_int {
    crate::error::ffi(-1, || {
        let entry = table::lookup(sd)?;
        let mut d = entry.lock();
        if matches!(d.slot, Slot::Closed) {
            return Err(Error::errno(libc::EBADF));
        }
        d.nonblocking = on != 0;
        Ok(0)
    })
}

/// Turns Nagle's algorithm off (`on` != 0, TCP_NODELAY) or on for TCP
/// socket `sd`; set on a listener, accepted connections inherit it.
/// Returns 0. Errors: EBADF, ENOTSOCK for a poller, ENOPROTOOPT for UDP.
#[no_mangle]
pub extern "C" fn cs_set_nodelay(sd: c_int, on: c_int) -> c_int {
    crate::error::ffi(-1, || {
        let entry = table::lookup(sd)?;
        let mut d = entry.lock();
        let on = on != 0;
        match &d.slot {
            Slot::Stream(s) => s.set_nodelay(on)?,
            Slot::TcpFresh { .. } | Slot::Listener(_) => {}
            Slot::UdpFresh | Slot::Udp(_) => return Err(Error::errno(libc::ENOPROTOOPT)),
            other => return Err(wrong_kind(other)),
        }
        d.nodelay = on;
        Ok(0)
    })
}

/// SO_RCVBUF and SO_SNDBUF of a connected stream (0: leave as is).
fn apply_buffers(s: &TcpStream, (rcv, snd): (usize, usize)) -> Result<()> {
    if rcv > 0 {
        s.set_recv_buffer_size(rcv)?;
    }
    if snd > 0 {
        s.set_send_buffer_size(snd)?;
    }
    Ok(())
}

/// Sets the receive and send buffer sizes of TCP socket `sd` in bytes, as
/// SO_RCVBUF and SO_SNDBUF do (0 leaves one as it is): the receive window
/// grows no further than `rcv` and auto-tuning stops; the send buffer is
/// `snd`. Before `cs_connect`/`cs_listen` it applies from then on; on a
/// listener, to the connections it accepts afterwards. Rings grow at most
/// to the stack's `ring_max_bytes` (8 MiB by default). Returns 0.
/// Errors: EBADF, ENOTSOCK for a poller, ENOPROTOOPT for UDP.
#[no_mangle]
pub extern "C" fn cs_set_bufsizes(sd: c_int, rcv: usize, snd: usize) -> c_int {
    crate::error::ffi(-1, || {
        let entry = table::lookup(sd)?;
        let mut d = entry.lock();
        match &d.slot {
            Slot::Stream(s) => apply_buffers(s, (rcv, snd))?,
            Slot::Listener(l) => l.set_buffer_sizes(rcv, snd)?,
            Slot::TcpFresh { .. } => {}
            Slot::UdpFresh | Slot::Udp(_) => return Err(Error::errno(libc::ENOPROTOOPT)),
            other => return Err(wrong_kind(other)),
        }
        if rcv > 0 {
            d.buffers.0 = rcv;
        }
        if snd > 0 {
            d.buffers.1 = snd;
        }
        Ok(0)
    })
}

/// Writes the local address of socket `sd` to `*addr` (0.0.0.0:0 before
/// it is bound). Returns 0.
///
/// Errors: EBADF, ENOTSOCK for a poller, EFAULT when `addr` is null.
///
/// # Safety
/// `addr` must be null or point to a writable `struct sockaddr_in`, or
/// `struct sockaddr_in6` for a socket bound or connected with AF_INET6.
#[no_mangle]
pub unsafe extern "C" fn cs_getsockname(sd: c_int, addr: *mut libc::sockaddr_in) -> c_int {
    // SAFETY: the caller's promise about `addr` is the helper's.
    unsafe {
        write_name(sd, addr, |slot| {
            Ok(match slot {
                Slot::TcpFresh { local, .. } => local.unwrap_or(ANY),
                Slot::Listener(l) => l.local_addr()?,
                Slot::Stream(s) => s.local_addr()?,
                Slot::UdpFresh => ANY,
                Slot::Udp(u) => u.local_addr()?,
                other @ (Slot::Poller(_) | Slot::Closed) => return Err(wrong_kind(other)),
            })
        })
    }
}

/// Writes the remote address of connected TCP socket `sd` to `*addr`.
/// Returns 0.
///
/// Errors: EBADF, ENOTSOCK for a poller, ENOTCONN when not connected,
/// EFAULT when `addr` is null.
///
/// # Safety
/// `addr` must be null or point to a writable `struct sockaddr_in`, or
/// `struct sockaddr_in6` for a socket bound or connected with AF_INET6.
#[no_mangle]
pub unsafe extern "C" fn cs_getpeername(sd: c_int, addr: *mut libc::sockaddr_in) -> c_int {
    // SAFETY: the caller's promise about `addr` is the helper's.
    unsafe {
        write_name(sd, addr, |slot| match slot {
            Slot::Stream(s) => Ok(s.peer_addr()?),
            other => Err(wrong_kind(other)),
        })
    }
}

/// Writes the address `name` gives for socket `sd`'s slot to `*addr`
/// (cs_getsockname, cs_getpeername). Returns 0, or -1 with errno: EBADF
/// for an unknown descriptor, EFAULT when `addr` is null, or `name`'s.
///
/// # Safety
/// `addr` must be null or point to a writable `struct sockaddr_in`, or
/// `struct sockaddr_in6` for a socket bound or connected with AF_INET6.
unsafe fn write_name(
    sd: c_int,
    addr: *mut libc::sockaddr_in,
    name: impl FnOnce(&Slot) -> Result<SocketAddr>,
) -> c_int {
    crate::error::ffi(-1, || {
        let entry = table::lookup(sd)?;
        if addr.is_null() {
            return Err(Error::errno(libc::EFAULT));
        }
        let a = name(&entry.lock().slot)?;
        // SAFETY: non-null, and the caller promises a writable sockaddr_in.
        unsafe { ffi::write_addr(addr, a) };
        Ok(0)
    })
}
