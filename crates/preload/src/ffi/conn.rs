//! Addresses and connections: bind, listen, accept, connect, names, options.

use super::*;

/// bind(2) or connect(2) of the corestack socket `s` at `fd` to the `len`
/// bytes at `addr`: `on_core(s, entry, fd, address, bytes)` for an address
/// corestack parses (IPv4, IPv6), else `kernel(fd, bytes)` (another family:
/// the kernel socket answers); the epoll registrations follow the socket
/// after ([`settle`]). 0, or the errno (EFAULT for a null `addr` with
/// `len` > 0).
///
/// # Safety
/// `addr` is null or readable for `len` bytes.
unsafe fn at_addr(
    o: &Arc<Obj>,
    s: &Sock,
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
    on_core: impl FnOnce(&Sock, &Arc<Obj>, c_int, addr::Sa, &[u8]) -> R<()>,
    kernel: impl FnOnce(c_int, &[u8]) -> R<()>,
) -> R<c_int> {
    // SAFETY: the caller's promise, passed on.
    let raw = unsafe { bytes(addr.cast(), len as usize) }?;
    let r = match addr::parse(raw) {
        Ok(sa) => on_core(s, o, fd, sa, raw),
        Err(_) => kernel(fd, raw),
    };
    settle(s, o);
    r.map(|()| 0)
}

/// bind(2): the decision point for servers (see `sock`).
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    sock_call_quiet(
        fd,
        // SAFETY: passed through.
        || unsafe { sys::bind(fd, addr, len) },
        // SAFETY: the caller promises `len` readable bytes at `addr`.
        |o, s| unsafe { at_addr(o, s, fd, addr, len, Sock::bind, k::bind) },
    )
}

/// listen(2).
#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    sock_call_quiet(
        fd,
        // SAFETY: no pointers.
        || unsafe { sys::listen(fd, backlog) },
        |o, s| {
            let r = s.listen(o, fd, backlog);
            settle(s, o);
            r.map(|()| 0)
        },
    )
}

/// accept4(2): a corestack connection gets an eventfd placeholder fd.
#[no_mangle]
pub unsafe extern "C-unwind" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || fresh(unsafe { sys::accept4(fd, addr, len, flags) }),
            |_, s| {
                if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
                    return Err(libc::EINVAL);
                }
                match s.accept(fd, flags)? {
                    Accepted::Core { fd: nfd, peer } => {
                        let (b, n) = s.encode(peer);
                        // SAFETY: the caller promises `*len` writable bytes at `addr`.
                        unsafe { put_addr(addr, len, &b[..n]) };
                        Ok(nfd)
                    }
                    Accepted::Kernel {
                        fd: nfd,
                        addr: (b, n),
                    } => {
                        // SAFETY: as above.
                        unsafe { put_addr(addr, len, &b[..n]) };
                        Ok(nfd)
                    }
                }
            },
        )
    })
}

/// accept(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn accept(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: same contract.
    unsafe { accept4(fd, addr, len, 0) }
}

/// connect(2): the decision point for clients (see `sock`).
#[no_mangle]
pub unsafe extern "C-unwind" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    crate::cancel::point(|| {
        sock_call(
            fd,
            // SAFETY: passed through.
            || unsafe { sys::connect(fd, addr, len) },
            // SAFETY: the caller promises `len` readable bytes at `addr`.
            |o, s| unsafe { at_addr(o, s, fd, addr, len, Sock::connect, k::connect) },
        )
    })
}

/// shutdown(2).
#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    sock_call_quiet(
        fd,
        // SAFETY: no pointers.
        || unsafe { sys::shutdown(fd, how) },
        |_, s| s.shutdown(fd, how).map(|()| 0),
    )
}

/// getsockname(2).
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let local = ours(fd).and_then(|o| as_sock(&o).map(|s| s.local_addr().map(|a| s.encode(a))));
    match local {
        Some(Some((b, n))) => run_quiet(|| {
            if len.is_null() || addr.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: the caller promises `*len` writable bytes at `addr`.
            unsafe { put_addr(addr, len, &b[..n]) };
            Ok(0)
        }),
        // SAFETY: passed through.
        _ => unsafe { sys::getsockname(fd, addr, len) },
    }
}

/// getpeername(2).
#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    sock_or_kernel(
        fd,
        // SAFETY: passed through.
        || unsafe { sys::getpeername(fd, addr, len) },
        |_, s| {
            match s.peer_addr() {
                Ok(a) => run_quiet(|| {
                    if len.is_null() || addr.is_null() {
                        return Err(libc::EFAULT);
                    }
                    let (b, n) = s.encode(a);
                    // SAFETY: as above.
                    unsafe { put_addr(addr, len, &b[..n]) };
                    Ok(0)
                }),
                Err(Some(e)) => run_quiet(|| -> R<c_int> { Err(e) }),
                // SAFETY: passed through.
                Err(None) => unsafe { sys::getpeername(fd, addr, len) },
            }
        },
    )
}

/// setsockopt(2) (see `opts` for what corestack honours).
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    sock_call_quiet(
        fd,
        // SAFETY: passed through.
        || unsafe { sys::setsockopt(fd, level, name, val, len) },
        |_, s| {
            // SAFETY: the caller promises `len` readable bytes at `val`.
            let v = unsafe { bytes(val, len as usize) }?;
            opts::set(s, fd, level, name, v).map(|()| 0)
        },
    )
}

/// getsockopt(2).
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    sock_call_quiet(
        fd,
        // SAFETY: passed through.
        || unsafe { sys::getsockopt(fd, level, name, val, len) },
        |_, s| {
            if len.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: the caller promises a readable and writable socklen_t.
            let room = unsafe { *len } as i32;
            if room < 0 {
                return Err(libc::EINVAL);
            }
            // SAFETY: and `*len` writable bytes at `val`.
            let out = unsafe { bytes_mut(val, room as usize) }?;
            let n = opts::get(s, fd, level, name, out)?;
            // SAFETY: as above.
            unsafe { *len = n as socklen_t };
            Ok(0)
        },
    )
}
