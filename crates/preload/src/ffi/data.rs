//! Data: send and receive in every form, sendfile, splice.

use super::*;

pub(super) fn recv_one(
    o: &Arc<Obj>,
    s: &Sock,
    fd: c_int,
    bufs: &mut [&mut [u8]],
    flags: c_int,
) -> R<Recvd> {
    s.recv(o, fd, bufs, flags)
}

pub(super) fn send_bufs(
    o: &Arc<Obj>,
    s: &Sock,
    fd: c_int,
    bufs: &[&[u8]],
    flags: c_int,
    to: Option<&[u8]>,
) -> R<usize> {
    let to = match to {
        Some(raw) => Some((addr::parse(raw)?, raw)),
        None => None,
    };
    let r = s.send(o, fd, bufs, flags, to);
    settle(s, o);
    r
}

/// The length a receive returns: with MSG_TRUNC on a datagram socket the
/// datagram's full length (as Linux), else the bytes copied.
fn returned_len(s: &Sock, r: &Recvd, flags: c_int) -> usize {
    if flags & libc::MSG_TRUNC != 0 && s.ty == Ty::Dgram {
        r.full
    } else {
        r.n
    }
}

/// read(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || unsafe { sys::read(fd, buf, n) },
            |o, s| {
                // SAFETY: the caller promises `n` writable bytes at `buf`.
                let b = unsafe { bytes_mut(buf, n) }?;
                size(recv_one(o, s, fd, &mut [b], 0).map(|r| r.n))
            },
        )
    })
}

/// write(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || unsafe { sys::write(fd, buf, n) },
            |o, s| {
                // SAFETY: the caller promises `n` readable bytes at `buf`.
                let b = unsafe { bytes(buf, n) }?;
                size(send_bufs(o, s, fd, &[b], 0, None))
            },
        )
    })
}

/// readv(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || unsafe { sys::readv(fd, iov, cnt) },
            |o, s| {
                // SAFETY: the caller promises `cnt` iovecs of writable memory.
                let mut b = unsafe { iovecs_mut(iov, cnt) }?;
                size(recv_one(o, s, fd, &mut b, 0).map(|r| r.n))
            },
        )
    })
}

/// writev(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || unsafe { sys::writev(fd, iov, cnt) },
            |o, s| {
                // SAFETY: the caller promises `cnt` iovecs of readable memory.
                let b = unsafe { iovecs(iov, cnt) }?;
                size(send_bufs(o, s, fd, &b, 0, None))
            },
        )
    })
}

/// recv(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn recv(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: same contract as recvfrom with no address.
    unsafe {
        recvfrom(
            fd,
            buf,
            n,
            flags,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        )
    }
}

/// recvfrom(2): MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC.
#[no_mangle]
pub unsafe extern "C-unwind" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || unsafe { sys::recvfrom(fd, buf, n, flags, addr, len) },
            |o, s| {
                // SAFETY: the caller promises `n` writable bytes at `buf`.
                let b = unsafe { bytes_mut(buf, n) }?;
                let r = recv_one(o, s, fd, &mut [b], flags)?;
                // SAFETY: the caller's address buffer, as recvfrom's contract says.
                unsafe { put_from(s, addr, len, &r.from) };
                size(Ok(returned_len(s, &r, flags)))
            },
        )
    })
}

/// recvmsg(2): MSG_TRUNC in msg_flags when a datagram was cut; ancillary
/// data only IPV6_PKTINFO (with IPV6_RECVPKTINFO, on datagrams corestack
/// delivered), else msg_controllen comes back 0.
#[no_mangle]
pub unsafe extern "C-unwind" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    crate::cancel::point(|| {
        let Some(o) = ours(fd) else {
            // SAFETY: passed through.
            let r = unsafe { sys::recvmsg(fd, msg, flags) };
            if r >= 0 {
                // SAFETY: recvmsg filled `msg` (the caller's valid msghdr).
                unsafe { take_passed(msg) };
            }
            return r;
        };
        let Some(s) = as_sock(&o) else {
            // SAFETY: passed through.
            return unsafe { sys::recvmsg(fd, msg, flags) };
        };
        // SAFETY: the caller promises a valid msghdr.
        run_alive(&o, s, |o, s| unsafe { recvmsg_impl(o, s, fd, msg, flags) })
    })
}

pub(super) unsafe fn recvmsg_impl(
    o: &Arc<Obj>,
    s: &Sock,
    fd: c_int,
    msg: *mut msghdr,
    flags: c_int,
) -> R<ssize_t> {
    if msg.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller promises a readable and writable msghdr.
    let m = unsafe { &mut *msg };
    // SAFETY: its iovecs describe writable memory.
    let mut b = unsafe { iovecs_mut(m.msg_iov, m.msg_iovlen as c_int) }?;
    let r = recv_one(o, s, fd, &mut b, flags)?;
    let mut len = m.msg_namelen;
    // SAFETY: msg_name is writable for msg_namelen bytes (or null).
    unsafe { put_from(s, m.msg_name.cast(), &mut len, &r.from) };
    m.msg_namelen = if m.msg_name.is_null() { 0 } else { len };
    m.msg_flags = if r.full > r.n { libc::MSG_TRUNC } else { 0 };
    let pktinfo = match r.from {
        Sender::Core(a)
            if s.opts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .recv_pktinfo =>
        {
            s.pktinfo(a)
        }
        _ => None,
    };
    match pktinfo {
        // SAFETY: msg_control is writable for msg_controllen bytes (or null).
        Some((ip, index)) => unsafe { super::cmsg::put_pktinfo(m, ip, index) },
        None => m.msg_controllen = 0,
    }
    size(Ok(returned_len(s, &r, flags)))
}

/// recvmmsg(2): the first message waits as recvmsg would (unless
/// MSG_DONTWAIT), the rest are taken while available; MSG_WAITFORONE as
/// Linux. The timeout is not supported on corestack sockets (EINVAL when
/// given, said once).
#[no_mangle]
pub unsafe extern "C-unwind" fn recvmmsg(
    fd: c_int,
    vec: *mut mmsghdr,
    vlen: c_uint,
    flags: c_int,
    timeout: *mut timespec,
) -> c_int {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || unsafe { sys::recvmmsg(fd, vec, vlen, flags, timeout) },
            |o, s| {
                if !timeout.is_null() {
                    return Err(libc::EINVAL);
                }
                let one = |i, m: &mut msghdr| {
                    let f = if i > 0 && (flags & libc::MSG_WAITFORONE != 0 || s.ty == Ty::Dgram) {
                        (flags & !libc::MSG_WAITFORONE) | libc::MSG_DONTWAIT
                    } else {
                        flags & !libc::MSG_WAITFORONE
                    };
                    // SAFETY: as recvmsg.
                    unsafe { recvmsg_impl(o, s, fd, m, f) }
                };
                // SAFETY: the caller promises `vlen` mmsghdrs at `vec`.
                unsafe { each_mmsg(vec, vlen, one) }
            },
        )
    })
}

/// The messages of a recvmmsg or sendmmsg batch (`vlen` at `vec`, 1024 at
/// most): `one(index, header)` for each in turn, its result stored in the
/// entry's `msg_len`, until one fails. Returns how many succeeded, or the
/// first one's error when none did; EFAULT for a null `vec` with
/// `vlen` > 0.
///
/// # Safety
/// `vec` is null or points to `vlen` writable mmsghdrs.
unsafe fn each_mmsg(
    vec: *mut mmsghdr,
    vlen: c_uint,
    mut one: impl FnMut(usize, &mut msghdr) -> R<ssize_t>,
) -> R<c_int> {
    if vec.is_null() && vlen > 0 {
        return Err(libc::EFAULT);
    }
    let mut done = 0usize;
    for i in 0..vlen.min(1024) as usize {
        // SAFETY: the caller promises `vlen` mmsghdrs at `vec`.
        let mh = unsafe { &mut *vec.add(i) };
        match one(i, &mut mh.msg_hdr) {
            Ok(n) => {
                mh.msg_len = n as c_uint;
                done += 1;
            }
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done as c_int)
}

/// send(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn send(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: same contract as sendto with no address.
    unsafe { sendto(fd, buf, n, flags, core::ptr::null(), 0) }
}

/// sendto(2): MSG_DONTWAIT, MSG_NOSIGNAL; MSG_MORE accepted (no corking).
#[no_mangle]
pub unsafe extern "C-unwind" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || unsafe { sys::sendto(fd, buf, n, flags, addr, len) },
            |o, s| {
                // SAFETY: the caller promises `n` readable bytes at `buf`.
                let b = unsafe { bytes(buf, n) }?;
                // SAFETY: and `len` readable bytes at `addr` (or null).
                let to = unsafe { send_to(s, addr.cast(), len) }?;
                size(send_bufs(o, s, fd, &[b], flags, to))
            },
        )
    })
}

/// The destination address bytes a send names (`len` bytes at `addr`),
/// None for a null `addr` or a stream socket (sendto(2): the address is
/// ignored on a connected TCP socket).
///
/// # Safety
/// `addr` is null or readable for `len` bytes.
unsafe fn send_to<'a>(s: &Sock, addr: *const c_void, len: socklen_t) -> R<Option<&'a [u8]>> {
    if addr.is_null() || s.ty == Ty::Stream {
        return Ok(None);
    }
    // SAFETY: the caller's promise, passed on.
    unsafe { bytes(addr, len as usize) }.map(Some)
}

pub(super) unsafe fn sendmsg_impl(
    o: &Arc<Obj>,
    s: &Sock,
    fd: c_int,
    msg: *const msghdr,
    flags: c_int,
) -> R<ssize_t> {
    if msg.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller promises a readable msghdr.
    let m = unsafe { &*msg };
    // SAFETY: its iovecs describe readable memory.
    let b = unsafe { iovecs(m.msg_iov, m.msg_iovlen as c_int) }?;
    // SAFETY: msg_name is readable for msg_namelen bytes (or null).
    let to = unsafe { send_to(s, m.msg_name, m.msg_namelen) }?;
    if m.msg_controllen > 0 && !m.msg_control.is_null() {
        let dst = match to {
            Some(raw) => addr::parse(raw)?.core(s.family),
            None => s.peer_addr().ok(),
        };
        // SAFETY: the control buffer is readable for msg_controllen bytes.
        unsafe { super::cmsg::check_send_control(s, m, dst) }?;
    }
    size(send_bufs(o, s, fd, &b, flags, to))
}

/// True when `o` cannot travel to another process as its kernel fd: a
/// socket with a corestack side (the fd is a placeholder or a kernel
/// socket that is not the connection), or an epoll holding corestack
/// registrations (the receiver would get the kernel epoll without them).
pub(super) fn stays_here(o: &Obj) -> bool {
    match o {
        Obj::Sock(s) => s.on_corestack(),
        Obj::Epoll(e) => e.has_core(),
    }
}

/// The first fd among the SCM_RIGHTS fds of `msg` that [`stays_here`]
/// and cannot be lent (None also for the shim's own calls, a null `msg`
/// and no control data). In service mode a corestack connection is lent
/// (`Sock::lend`) for the receiver to take over; anything else on
/// corestack cannot travel.
///
/// # Safety
/// `msg` is null or a readable msghdr whose control buffer is readable
/// for `msg_controllen` bytes (sendmsg's contract).
pub(super) unsafe fn corestack_fd_passed(msg: *const msghdr) -> Option<c_int> {
    let lent = |o: &Obj, fd: c_int| match o {
        Obj::Sock(s) => sys::fd_key(fd).is_some_and(|k| s.lend(k)),
        _ => false,
    };
    let mut refused = None;
    // SAFETY: the caller's promise, passed on.
    unsafe {
        each_passed_fd(msg, |fd| {
            if refused.is_none() && obj::get(fd).is_some_and(|o| stays_here(&o) && !lent(&o, fd)) {
                refused = Some(fd);
            }
        })
    };
    refused
}

/// Every fd another process passed in `msg` (SCM_RIGHTS) drops a stale
/// entry under its number; in service mode one that is a corestack
/// connection another application lent is taken over by this process
/// (`TcpStream::borrow`) and installed as that fd. The others stay what
/// the kernel made them.
///
/// # Safety
/// `msg` is null or a msghdr that recvmsg just filled (its control buffer
/// readable for `msg_controllen` bytes).
pub(super) unsafe fn take_passed(msg: *const msghdr) {
    if stack::config().is_none_or(|c| c.service.is_none()) {
        // SAFETY: the caller's promise, passed on.
        unsafe { each_passed_fd(msg, |fd| drop(obj::forget(fd))) };
        return;
    }
    // SAFETY: the caller's promise, passed on.
    unsafe {
        each_passed_fd(msg, |fd| {
            // The kernel just handed out this number: an entry under it is
            // stale (its socket was closed where the shim could not see,
            // libuv's raw close(2)), and closes now.
            drop(obj::forget(fd));
            if sys::fd_key(fd).is_none() {
                return;
            }
            let Ok(stack) = stack::start() else { return };
            let _inside = sys::Inside::enter();
            match corestack::TcpStream::borrow(stack, fd) {
                Ok(Some(s)) => {
                    if let Ok(Some(old)) = obj::install(fd, Sock::borrowed(s, fd)) {
                        drop(old);
                    }
                }
                Ok(None) => {}
                Err(e) => sys::log_line(&format!(
                    "recvmsg: fd {fd} was passed as a corestack connection, but taking it over failed: {e}"
                )),
            }
        })
    }
}

/// Calls `f` on every fd of the SCM_RIGHTS messages in `msg`'s control
/// data (nothing for the shim's own calls, a null `msg` and no control
/// data); at most 64 control headers are looked at.
///
/// # Safety
/// As [`corestack_fd_passed`].
unsafe fn each_passed_fd(msg: *const msghdr, mut f: impl FnMut(c_int)) {
    if sys::inside() || msg.is_null() {
        return;
    }
    // SAFETY: the caller promises a readable msghdr.
    let m = unsafe { &*msg };
    if m.msg_control.is_null() || m.msg_controllen < core::mem::size_of::<libc::cmsghdr>() {
        return;
    }
    // SAFETY: CMSG_FIRSTHDR reads msg_control/msg_controllen only.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(m) };
    let mut left = 64; // control headers looked at, at most (bounded loop)
    while !c.is_null() && left > 0 {
        left -= 1;
        // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR return headers inside the buffer.
        let h = unsafe { core::ptr::read_unaligned(c) };
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_RIGHTS {
            // SAFETY: CMSG_LEN of 0 is a constant computation.
            let head = unsafe { libc::CMSG_LEN(0) } as usize;
            let n = (h.cmsg_len as usize).saturating_sub(head) / core::mem::size_of::<c_int>();
            // SAFETY: the data of this header follows it within cmsg_len.
            let data = unsafe { libc::CMSG_DATA(c) } as *const c_int;
            for i in 0..n {
                // SAFETY: `i` < the count of ints cmsg_len covers.
                f(unsafe { core::ptr::read_unaligned(data.add(i)) });
            }
        }
        // SAFETY: as CMSG_FIRSTHDR; a header past the buffer comes back null.
        c = unsafe { libc::CMSG_NXTHDR(m, c) };
    }
}

/// EOPNOTSUPP, said on stderr naming `fd`: a corestack fd in SCM_RIGHTS.
pub(super) fn refuse_passing(fd: c_int) -> ssize_t {
    sys::log_line(&format!(
        "sendmsg: fd {fd} is a corestack socket; passing it to another process with SCM_RIGHTS works only for connections in service mode (the receiver would get a bare placeholder): EOPNOTSUPP"
    ));
    sys::set_errno(libc::EOPNOTSUPP);
    -1
}

/// sendmsg(2); on corestack sockets the only ancillary data is
/// IPV6_PKTINFO (see `cmsg`). On other
/// sockets (AF_UNIX): -1 with EOPNOTSUPP, and one line on stderr naming
/// the fd, when SCM_RIGHTS carries a corestack socket (or an epoll
/// holding some), which another process cannot use; nothing is sent.
#[no_mangle]
pub unsafe extern "C-unwind" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    crate::cancel::point(|| {
        let Some(o) = ours(fd) else {
            // SAFETY: the caller promises a valid msghdr (sendmsg's contract).
            if let Some(passed) = unsafe { corestack_fd_passed(msg) } {
                return refuse_passing(passed);
            }
            // SAFETY: passed through.
            return unsafe { sys::sendmsg(fd, msg, flags) };
        };
        let Some(s) = as_sock(&o) else {
            // SAFETY: passed through.
            return unsafe { sys::sendmsg(fd, msg, flags) };
        };
        // SAFETY: the caller promises a valid msghdr.
        run_alive(&o, s, |o, s| unsafe { sendmsg_impl(o, s, fd, msg, flags) })
    })
}

/// sendmmsg(2). On other sockets, EOPNOTSUPP when a message's SCM_RIGHTS
/// carries a corestack socket (as sendmsg; nothing is sent).
#[no_mangle]
pub unsafe extern "C-unwind" fn sendmmsg(
    fd: c_int,
    vec: *mut mmsghdr,
    vlen: c_uint,
    flags: c_int,
) -> c_int {
    crate::cancel::point(|| {
        let Some(o) = ours(fd) else {
            if !vec.is_null() {
                for i in 0..vlen.min(1024) as usize {
                    // SAFETY: the caller promises `vlen` mmsghdrs at `vec`, each
                    // a valid msghdr.
                    if let Some(passed) = unsafe { corestack_fd_passed(&(*vec.add(i)).msg_hdr) } {
                        return refuse_passing(passed) as c_int;
                    }
                }
            }
            // SAFETY: passed through.
            return unsafe { sys::sendmmsg(fd, vec, vlen, flags) };
        };
        let Some(s) = as_sock(&o) else {
            // SAFETY: passed through.
            return unsafe { sys::sendmmsg(fd, vec, vlen, flags) };
        };
        run_alive(&o, s, |o, s| {
            // SAFETY: as sendmsg.
            let one = |_, m: &mut msghdr| unsafe { sendmsg_impl(o, s, fd, m, flags) };
            // SAFETY: the caller promises `vlen` mmsghdrs at `vec`.
            unsafe { each_mmsg(vec, vlen, one) }
        })
    })
}

/// The most sendfile copies per read.
pub(super) const SENDFILE_CHUNK: usize = 256 * 1024;

std::thread_local! {
    /// sendfile's copy buffer, kept between calls (allocated and zeroed
    /// once per thread, at the largest size asked so far).
    static SENDFILE_BUF: core::cell::Cell<Vec<u8>> = const { core::cell::Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's sendfile buffer of at least `len` bytes
/// (`len` at most [`SENDFILE_CHUNK`]): no allocation once the thread has
/// had one that large. A nested call (a signal handler's) or one during
/// thread exit gets a buffer of its own.
pub(super) fn with_sendfile_buf<T>(len: usize, f: impl FnOnce(&mut [u8]) -> T) -> T {
    let mut buf = SENDFILE_BUF.try_with(|b| b.take()).unwrap_or_default();
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let r = f(&mut buf[..len]);
    let _ = SENDFILE_BUF.try_with(|b| {
        let old = b.take();
        // Keep the larger (a nested call may have put its own back).
        b.set(if old.len() > buf.len() { old } else { buf });
    });
    r
}

pub(super) fn sendfile_impl(
    o: &Arc<Obj>,
    s: &Sock,
    out_fd: c_int,
    in_fd: c_int,
    offset: Option<&mut i64>,
    count: usize,
) -> R<usize> {
    with_sendfile_buf(count.min(SENDFILE_CHUNK), |buf| {
        sendfile_with(o, s, out_fd, in_fd, offset, count, buf)
    })
}

/// [`sendfile_impl`] through `buf`.
pub(super) fn sendfile_with(
    o: &Arc<Obj>,
    s: &Sock,
    out_fd: c_int,
    in_fd: c_int,
    offset: Option<&mut i64>,
    count: usize,
    buf: &mut [u8],
) -> R<usize> {
    let mut done = 0usize;
    let mut pos = offset.as_ref().map(|o| **o);
    while done < count {
        let want = (count - done).min(buf.len());
        let n = match pos {
            Some(p) => k::pread(in_fd, &mut buf[..want], p)?,
            None => k::read(in_fd, &mut buf[..want])?,
        };
        if n == 0 {
            break;
        }
        let flags = if done > 0 { libc::MSG_DONTWAIT } else { 0 };
        let w = match send_bufs(o, s, out_fd, &[&buf[..n]], flags, None) {
            Ok(w) => w,
            Err(e) if done == 0 => {
                if pos.is_none() {
                    let _ = k::lseek(in_fd, -(n as i64), libc::SEEK_CUR);
                }
                return Err(e);
            }
            Err(_) => 0,
        };
        done += w;
        if let Some(p) = pos.as_mut() {
            *p += w as i64;
        } else if w < n {
            let _ = k::lseek(in_fd, -((n - w) as i64), libc::SEEK_CUR);
        }
        if w < n {
            break;
        }
    }
    if let (Some(o), Some(p)) = (offset, pos) {
        *o = p;
    }
    Ok(done)
}

/// sendfile(2) to a corestack socket: the file is read and written to the
/// socket's ring (what a later send would do); blocking as the socket is.
#[no_mangle]
pub unsafe extern "C" fn sendfile(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off_t,
    count: size_t,
) -> ssize_t {
    sock_call_quiet(
        out_fd,
        // SAFETY: passed through.
        || unsafe { sys::sendfile(out_fd, in_fd, offset, count) },
        |o, s| {
            let mut off = if offset.is_null() {
                None
            } else {
                // SAFETY: the caller promises a readable and writable off_t.
                Some(unsafe { *offset })
            };
            let r = sendfile_impl(o, s, out_fd, in_fd, off.as_mut(), count);
            if let (Some(v), false) = (off, offset.is_null()) {
                // SAFETY: as above.
                unsafe { *offset = v as off_t };
            }
            size(r)
        },
    )
}

/// sendfile64: as sendfile.
#[no_mangle]
pub unsafe extern "C" fn sendfile64(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off64_t,
    count: size_t,
) -> ssize_t {
    if ours(out_fd).is_none() {
        // SAFETY: passed through.
        return unsafe { sys::sendfile64(out_fd, in_fd, offset, count) };
    }
    // SAFETY: off64_t and off_t are both i64 on 64-bit Linux.
    unsafe { sendfile(out_fd, in_fd, offset as *mut off_t, count) }
}
