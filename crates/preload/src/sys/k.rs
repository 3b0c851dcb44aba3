//! Safe wrappers over the real calls on kernel sockets, for the socket
//! logic (slices in, errno out).

use super::*;

fn cvt(r: c_int) -> Result<c_int, c_int> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: ssize_t) -> Result<usize, c_int> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// A socket address buffer and its length.
pub type AddrBuf = ([u8; 128], usize);

/// bind(2) to the address bytes `addr`.
pub fn bind(fd: c_int, addr: &[u8]) -> Result<(), c_int> {
    // SAFETY: `addr` is a live byte slice of the length passed.
    cvt(unsafe { super::bind(fd, addr.as_ptr().cast(), addr.len() as socklen_t) }).map(drop)
}

/// connect(2) to the address bytes `addr`.
pub fn connect(fd: c_int, addr: &[u8]) -> Result<(), c_int> {
    // SAFETY: as above.
    cvt(unsafe { super::connect(fd, addr.as_ptr().cast(), addr.len() as socklen_t) }).map(drop)
}

/// listen(2).
pub fn listen(fd: c_int, backlog: c_int) -> Result<(), c_int> {
    // SAFETY: no pointers.
    cvt(unsafe { super::listen(fd, backlog) }).map(drop)
}

/// accept4(2): the new fd and the peer's address bytes.
pub fn accept4(fd: c_int, flags: c_int) -> Result<(c_int, AddrBuf), c_int> {
    let mut b = [0u8; 128];
    let mut len = b.len() as socklen_t;
    // SAFETY: `b` is writable for `len` bytes; accept4 writes at most that.
    let r = cvt(unsafe { super::accept4(fd, b.as_mut_ptr().cast(), &mut len, flags) })?;
    Ok((r, (b, (len as usize).min(128))))
}

/// getsockname(2): the address bytes.
pub fn getsockname(fd: c_int) -> Result<AddrBuf, c_int> {
    let mut b = [0u8; 128];
    let mut len = b.len() as socklen_t;
    // SAFETY: as above.
    cvt(unsafe { super::getsockname(fd, b.as_mut_ptr().cast(), &mut len) })?;
    Ok((b, (len as usize).min(128)))
}

/// shutdown(2).
pub fn shutdown(fd: c_int, how: c_int) -> Result<(), c_int> {
    // SAFETY: no pointers.
    cvt(unsafe { super::shutdown(fd, how) }).map(drop)
}

/// recvfrom(2) into `buf`: the length (the datagram's full length with
/// MSG_TRUNC) and the source's address bytes.
pub fn recvfrom(fd: c_int, buf: &mut [u8], flags: c_int) -> Result<(usize, AddrBuf), c_int> {
    let mut b = [0u8; 128];
    let mut len = b.len() as socklen_t;
    // SAFETY: `buf` and `b` are live and writable for the lengths passed.
    let n = cvt_size(unsafe {
        super::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            flags,
            b.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    Ok((n, (b, (len as usize).min(128))))
}

/// sendto(2) of `buf` to `addr` (None: the connected peer).
pub fn sendto(fd: c_int, buf: &[u8], flags: c_int, addr: Option<&[u8]>) -> Result<usize, c_int> {
    let (p, l) = addr.map_or((core::ptr::null(), 0), |a| (a.as_ptr(), a.len()));
    // SAFETY: `buf` and `addr` are live slices of the lengths passed.
    cvt_size(unsafe {
        super::sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            flags,
            p.cast(),
            l as socklen_t,
        )
    })
}

/// setsockopt(2) with the option bytes `val`.
pub fn setsockopt(fd: c_int, level: c_int, name: c_int, val: &[u8]) -> Result<(), c_int> {
    // SAFETY: `val` is a live slice of the length passed.
    cvt(unsafe { super::setsockopt(fd, level, name, val.as_ptr().cast(), val.len() as socklen_t) })
        .map(drop)
}

/// getsockopt(2) into `val`; returns the length written.
pub fn getsockopt(fd: c_int, level: c_int, name: c_int, val: &mut [u8]) -> Result<usize, c_int> {
    let mut len = val.len() as socklen_t;
    // SAFETY: `val` is writable for `len` bytes.
    cvt(unsafe { super::getsockopt(fd, level, name, val.as_mut_ptr().cast(), &mut len) })?;
    Ok((len as usize).min(val.len()))
}

/// fcntl(2) with an integer argument.
pub fn fcntl_int(fd: c_int, cmd: c_int, arg: c_int) -> Result<c_int, c_int> {
    // SAFETY: `cmd` takes an integer argument (the callers pass F_GETFL,
    // F_SETFL, F_GETFD, F_SETFD, F_DUPFD*).
    cvt(unsafe { super::fcntl(fd, cmd, arg as c_ulong) })
}

/// Sets or clears O_NONBLOCK on `fd`.
pub fn set_nonblocking(fd: c_int, on: bool) -> Result<(), c_int> {
    let fl = fcntl_int(fd, libc::F_GETFL, 0)?;
    let fl = if on {
        fl | libc::O_NONBLOCK
    } else {
        fl & !libc::O_NONBLOCK
    };
    fcntl_int(fd, libc::F_SETFL, fl).map(drop)
}

/// A placeholder fd for an accepted connection: an eventfd with
/// EFD_CLOEXEC / EFD_NONBLOCK as accept4's SOCK_CLOEXEC / SOCK_NONBLOCK ask.
pub fn placeholder(flags: c_int) -> Result<c_int, c_int> {
    let mut f = 0;
    if flags & libc::SOCK_CLOEXEC != 0 {
        f |= libc::EFD_CLOEXEC;
    }
    if flags & libc::SOCK_NONBLOCK != 0 {
        f |= libc::EFD_NONBLOCK;
    }
    // SAFETY: eventfd takes no pointers.
    cvt(unsafe { libc::eventfd(0, f) })
}

/// close(2) of an fd the shim owns (a placeholder it failed to hand out).
pub fn close_fd(fd: c_int) {
    // SAFETY: closes an fd the caller owns.
    unsafe { super::close(fd) };
}

/// Readiness of kernel fd `fd` now (poll with a zero timeout): revents.
pub fn poll_now(fd: c_int, events: i16) -> i16 {
    let mut p = [pollfd {
        fd,
        events,
        revents: 0,
    }];
    match poll_fds(&mut p, 0, None) {
        Ok(_) => p[0].revents,
        Err(_) => 0,
    }
}

/// read(2) into `buf` (a file, for sendfile).
pub fn read(fd: c_int, buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: `buf` is writable for its length.
    cvt_size(unsafe { super::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// pread(2) into `buf` at `offset` (a file, for sendfile).
pub fn pread(fd: c_int, buf: &mut [u8], offset: i64) -> Result<usize, c_int> {
    // SAFETY: as above.
    cvt_size(unsafe { super::pread(fd, buf.as_mut_ptr().cast(), buf.len(), offset as off_t) })
}

/// lseek(2) (sendfile without an offset advances the file position).
pub fn lseek(fd: c_int, offset: i64, whence: c_int) -> Result<i64, c_int> {
    // SAFETY: no pointers.
    let r = unsafe { libc::lseek(fd, offset as off_t, whence) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as i64)
    }
}
