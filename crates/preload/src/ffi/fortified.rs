//! Fortified variants and process calls.

use super::*;

/// __read_chk: read with glibc's fortify check.
#[no_mangle]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
) -> ssize_t {
    if n > buflen || ours(fd).is_none() {
        // SAFETY: the real one checks (and aborts on overflow) or reads.
        return unsafe { sys::__read_chk(fd, buf, n, buflen) };
    }
    // SAFETY: as read.
    unsafe { read(fd, buf, n) }
}

/// __recv_chk: recv with the fortify check.
#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
) -> ssize_t {
    if n > buflen || ours(fd).is_none() {
        // SAFETY: as above.
        return unsafe { sys::__recv_chk(fd, buf, n, buflen, flags) };
    }
    // SAFETY: as recv.
    unsafe { recv(fd, buf, n, flags) }
}

/// __recvfrom_chk: recvfrom with the fortify check.
#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    if n > buflen || ours(fd).is_none() {
        // SAFETY: as above.
        return unsafe { sys::__recvfrom_chk(fd, buf, n, buflen, flags, addr, len) };
    }
    // SAFETY: as recvfrom.
    unsafe { recvfrom(fd, buf, n, flags, addr, len) }
}

/// vfork: made a fork, so that the child cannot write the parent's table.
#[no_mangle]
pub unsafe extern "C" fn vfork() -> pid_t {
    // SAFETY: fork takes no arguments; the atfork handlers run.
    unsafe { sys::fork() }
}
