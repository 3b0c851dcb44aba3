//! The system calls of the "Linux tuned" servers that no safe wrapper offers: `SO_BUSY_POLL`
//! and `SO_INCOMING_NAPI_ID` on a kernel socket, `EPIOCSPARAMS` on an epoll set. The only
//! `unsafe` code of the benchmarks; each block says why it is sound.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

/// `SO_BUSY_POLL` (asm-generic/socket.h; x86-64 and arm64): the socket's busy-poll time, µs.
const SO_BUSY_POLL: libc::c_int = 46;
/// `SO_INCOMING_NAPI_ID`: the NAPI instance the socket's last packet came through (0: none).
const SO_INCOMING_NAPI_ID: libc::c_int = 56;

/// Sets `SO_BUSY_POLL` of the socket `fd` to `us` µs: a read that finds nothing polls the
/// device's NAPI queue for up to that long before it sleeps. Errors: the kernel's.
pub fn set_busy_poll(fd: BorrowedFd<'_>, us: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(us).unwrap_or(libc::c_int::MAX);
    // SAFETY: `value` is a live c_int for the whole call and the length passed is its size;
    // the kernel only reads it. `fd` is borrowed, so it stays open during the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_BUSY_POLL,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The NAPI id of the socket `fd` (`SO_INCOMING_NAPI_ID`): 0 when its packets came through
/// no NAPI instance, so that busy polling has nothing to poll. Errors: the kernel's.
pub fn incoming_napi_id(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut value: libc::c_uint = 0;
    let mut len = std::mem::size_of::<libc::c_uint>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and writable for the call, `len` holds the size of
    // `value`, which the kernel writes at most; `fd` is borrowed, so it stays open.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_INCOMING_NAPI_ID,
            (&mut value as *mut libc::c_uint).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// Sets the busy polling of the epoll set `epfd` (`EPIOCSPARAMS`, Linux 6.9 and later):
/// `us` µs of polling the sockets' NAPI queues before epoll_wait sleeps, the kernel's
/// default budget, without preferring busy polling over interrupts. Errors: ENOTTY (or
/// EINVAL) on older kernels, EBADF for a descriptor that is not an epoll set.
pub fn set_epoll_busy_poll(epfd: RawFd, us: u32) -> io::Result<()> {
    let params = libc::epoll_params {
        busy_poll_usecs: us,
        busy_poll_budget: 0,
        prefer_busy_poll: 0,
        __pad: 0,
    };
    // SAFETY: `params` is a live, initialised epoll_params, the struct EPIOCSPARAMS reads
    // (and only reads); an ioctl on a descriptor number that is not open, or not an epoll
    // set, fails with an error and touches no memory of ours.
    let rc = unsafe {
        libc::ioctl(
            epfd,
            libc::EPIOCSPARAMS,
            &params as *const libc::epoll_params,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
