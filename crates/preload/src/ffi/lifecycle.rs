//! Creating and closing: socket, socketpair, close, dup, fcntl, ioctl, and the calls that open files and pipes.

use super::*;

/// socket(2): AF_INET (and AF_INET6) TCP and UDP sockets become corestack
/// candidates; the kernel socket is made first and its number returned.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    // SAFETY: no pointers.
    let fd = unsafe { sys::socket(domain, ty, protocol) };
    if fd < 0 {
        return fd;
    }
    drop(obj::forget(fd));
    if sys::inside() || !stack::active() {
        return fd;
    }
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let kind = match (base, protocol) {
        (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) => Ty::Stream,
        (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP) => Ty::Dgram,
        _ => return fd,
    };
    if domain != libc::AF_INET && domain != libc::AF_INET6 {
        return fd;
    }
    let s = Sock::fresh(domain, kind, ty & libc::SOCK_NONBLOCK != 0);
    s.add_fd(fd);
    if let Ok(old) = obj::install(fd, Arc::new(Obj::Sock(s))) {
        drop(old);
    }
    fd
}

/// socketpair(2): always the kernel's (AF_UNIX).
#[no_mangle]
pub unsafe extern "C" fn socketpair(
    domain: c_int,
    ty: c_int,
    protocol: c_int,
    sv: *mut c_int,
) -> c_int {
    // SAFETY: passed through; the caller promises two writable ints.
    let r = unsafe { sys::socketpair(domain, ty, protocol, sv) };
    if r == 0 && !sv.is_null() {
        // SAFETY: the kernel just wrote two fds there.
        let (a, b) = unsafe { (*sv, *sv.add(1)) };
        drop(obj::forget(a));
        drop(obj::forget(b));
    }
    r
}

/// close(2): the entry leaves the table (CLOSING) before the real close;
/// the socket closes when its last fd does. EBADF for the shim's own fds.
#[no_mangle]
pub unsafe extern "C-unwind" fn close(fd: c_int) -> c_int {
    if sys::inside() {
        // SAFETY: passed through.
        return unsafe { sys::close(fd) };
    }
    if table::is_reserved(fd) {
        sys::set_errno(libc::EBADF);
        return -1;
    }
    let Some(o) = obj::begin_close(fd) else {
        // SAFETY: passed through (a cancellation point, as glibc's).
        return unsafe { sys::close(fd) };
    };
    // The socket's bookkeeping is finished whatever is pending: a cancel
    // acts at the next cancellation point.
    let quiet = crate::cancel::Quiet::new();
    // SAFETY: passed through.
    let r = unsafe { sys::close(fd) };
    let e = sys::errno();
    table::end_close(fd);
    forget_fd(&o, fd);
    drop(o);
    drop(quiet);
    sys::set_errno(e);
    r
}

pub(super) fn forget_fd(o: &Arc<Obj>, fd: c_int) {
    match &**o {
        Obj::Sock(s) => s.remove_fd(fd),
        Obj::Epoll(e) => e.remove_fd(fd),
    }
}

pub(super) fn remember_fd(o: &Arc<Obj>, fd: c_int) {
    match &**o {
        Obj::Sock(s) => s.add_fd(fd),
        Obj::Epoll(e) => e.add_fd(fd),
    }
}

/// close_range(2): the shim's own fds in the range are skipped (the range
/// is split around them); corestack sockets close as with close().
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    if sys::inside() || flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0 || first > last {
        // SAFETY: passed through.
        return unsafe { sys::close_range(first, last, flags) };
    }
    let (ours, reserved) = table::ours_in(first, last);
    let objs: Vec<(c_int, Arc<Obj>)> = ours
        .iter()
        .filter_map(|&fd| obj::begin_close(fd).map(|o| (fd, o)))
        .collect();
    let mut start = first;
    let mut r = 0;
    for &fd in &reserved {
        let fd = fd as c_uint;
        if fd > start {
            // SAFETY: passed through on a sub-range.
            r |= unsafe { sys::close_range(start, fd - 1, flags) };
        }
        start = fd.saturating_add(1);
    }
    if start <= last && (reserved.is_empty() || start != 0) {
        // SAFETY: as above.
        r |= unsafe { sys::close_range(start, last, flags) };
    }
    let e = sys::errno();
    for (fd, o) in objs {
        table::end_close(fd);
        forget_fd(&o, fd);
        drop(o);
    }
    sys::set_errno(e);
    if r < 0 {
        -1
    } else {
        0
    }
}

/// closefrom(3): as close_range(lowfd, ~0U, 0), so that the corestack
/// sockets in the range leave the table (glibc's own closefrom calls the
/// system call directly, which the shim would not see: their numbers would
/// then route later fds to dead sockets). Falls back to libc's closefrom
/// when close_range fails (a kernel without it).
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    let first = c_uint::try_from(low).unwrap_or(0);
    // SAFETY: no pointers.
    if unsafe { close_range(first, c_uint::MAX, 0) } != 0 {
        // SAFETY: no pointers.
        unsafe { sys::closefrom(low) };
    }
}

/// fclose(3): a FILE opened on a corestack socket (fdopen) closes the
/// socket as close(2) would (glibc closes the fd without going through the
/// interposed close).
#[no_mangle]
pub unsafe extern "C" fn fclose(fp: *mut libc::FILE) -> c_int {
    if fp.is_null() || sys::inside() {
        // SAFETY: passed through.
        return unsafe { sys::fclose(fp) };
    }
    // SAFETY: the caller promises a FILE it opened; fileno only reads it.
    let fd = unsafe { libc::fileno(fp) };
    let obj = if fd >= 0 && !table::is_reserved(fd) {
        obj::begin_close(fd)
    } else {
        None
    };
    // SAFETY: passed through.
    let r = unsafe { sys::fclose(fp) };
    if let Some(o) = obj {
        let e = sys::errno();
        table::end_close(fd);
        forget_fd(&o, fd);
        drop(o);
        sys::set_errno(e);
    }
    r
}

/// A number the kernel just handed out (`fd` >= 0) cannot be a corestack
/// socket: an entry there is stale (its fd was closed where the shim could
/// not see it: a raw `syscall(SYS_close)`, say) and is dropped.
pub(super) fn fresh(fd: c_int) -> c_int {
    if fd >= 0 {
        drop(obj::forget(fd));
    }
    fd
}

/// pipe(2); a stale entry at either new number is dropped.
#[no_mangle]
pub unsafe extern "C" fn pipe(fds: *mut c_int) -> c_int {
    // SAFETY: passed through; the caller promises two writable ints.
    let r = unsafe { sys::pipe(fds) };
    if r == 0 && !fds.is_null() {
        // SAFETY: the kernel just wrote two fds there.
        unsafe { (fresh(*fds), fresh(*fds.add(1))) };
    }
    r
}

/// pipe2(2); as pipe.
#[no_mangle]
pub unsafe extern "C" fn pipe2(fds: *mut c_int, flags: c_int) -> c_int {
    // SAFETY: passed through; the caller promises two writable ints.
    let r = unsafe { sys::pipe2(fds, flags) };
    if r == 0 && !fds.is_null() {
        // SAFETY: the kernel just wrote two fds there.
        unsafe { (fresh(*fds), fresh(*fds.add(1))) };
    }
    r
}

/// open(2) (variadic in C: the mode is where a variadic caller puts it);
/// a stale entry at the new number is dropped.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const core::ffi::c_char, flags: c_int, mode: c_uint) -> c_int {
    // SAFETY: passed through.
    fresh(unsafe { sys::open(path, flags, mode) })
}

/// open64: as open.
#[no_mangle]
pub unsafe extern "C" fn open64(
    path: *const core::ffi::c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    // SAFETY: passed through.
    fresh(unsafe { sys::open64(path, flags, mode) })
}

/// openat(2): as open.
#[no_mangle]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const core::ffi::c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    // SAFETY: passed through.
    fresh(unsafe { sys::openat(dirfd, path, flags, mode) })
}

/// openat64: as open.
#[no_mangle]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const core::ffi::c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    // SAFETY: passed through.
    fresh(unsafe { sys::openat64(dirfd, path, flags, mode) })
}

/// eventfd(2): as open.
#[no_mangle]
pub unsafe extern "C" fn eventfd(initval: c_uint, flags: c_int) -> c_int {
    // SAFETY: no pointers.
    fresh(unsafe { sys::eventfd(initval, flags) })
}

pub(super) fn after_dup(old: c_int, new: c_int) {
    if new < 0 {
        return;
    }
    drop(obj::forget(new));
    if let Some(o) = obj::get(old) {
        remember_fd(&o, new);
        if let Ok(prev) = obj::install(new, o) {
            drop(prev);
        }
    }
}

/// dup(2): the new fd refers to the same socket.
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: no pointers.
    let n = unsafe { sys::dup(fd) };
    if !sys::inside() {
        after_dup(fd, n);
    }
    n
}

pub(super) fn dup_onto(old: c_int, new: c_int, call: impl FnOnce() -> c_int) -> c_int {
    if sys::inside() {
        return call();
    }
    if table::is_reserved(new) {
        sys::set_errno(libc::EBADF);
        return -1;
    }
    if old == new {
        return call();
    }
    let prev = obj::begin_close(new);
    let r = call();
    let e = sys::errno();
    table::end_close(new);
    if r >= 0 {
        if let Some(p) = &prev {
            forget_fd(p, new);
        }
        drop(prev);
        after_dup(old, r);
    } else if let Some(p) = prev {
        // The call failed: `new` was not closed.
        let _ = obj::install(new, p);
    }
    sys::set_errno(e);
    r
}

/// dup2(2): an entry at `new` is closed first, as the kernel closes `new`.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    // SAFETY: no pointers.
    dup_onto(old, new, || unsafe { sys::dup2(old, new) })
}

/// dup3(2).
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: no pointers.
    dup_onto(old, new, || unsafe { sys::dup3(old, new, flags) })
}

pub(super) fn fcntl_impl(
    fd: c_int,
    cmd: c_int,
    arg: c_ulong,
    real: impl Fn(c_int, c_int, c_ulong) -> c_int,
) -> c_int {
    let Some(o) = ours(fd) else {
        return real(fd, cmd, arg);
    };
    match cmd {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            let n = real(fd, cmd, arg);
            after_dup(fd, n);
            n
        }
        libc::F_GETFL => {
            let r = real(fd, cmd, arg);
            match as_sock(&o) {
                Some(s) if r >= 0 => {
                    (r & !libc::O_NONBLOCK) | if s.nonblocking() { libc::O_NONBLOCK } else { 0 }
                }
                _ => r,
            }
        }
        libc::F_SETFL => match as_sock(&o) {
            Some(s) => {
                s.set_nonblocking(arg as c_int & libc::O_NONBLOCK != 0);
                let arg = if s.has_kernel_side() {
                    arg | libc::O_NONBLOCK as c_ulong
                } else {
                    arg
                };
                real(fd, cmd, arg)
            }
            None => real(fd, cmd, arg),
        },
        _ => real(fd, cmd, arg),
    }
}

/// fcntl(2): F_GETFL/F_SETFL keep O_NONBLOCK as the application set it;
/// F_DUPFD/F_DUPFD_CLOEXEC map the new fd to the same socket; F_GETFD and
/// F_SETFD are the kernel fd's own.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: passed through with the caller's argument.
    fcntl_impl(fd, cmd, arg, |f, c, a| unsafe { sys::fcntl(f, c, a) })
}

/// fcntl64: as fcntl.
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: as above.
    fcntl_impl(fd, cmd, arg, |f, c, a| unsafe { sys::fcntl64(f, c, a) })
}

/// ioctl(2): FIONBIO and FIONREAD on corestack sockets; the rest goes to
/// the kernel fd.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: c_ulong) -> c_int {
    sock_or_kernel(
        fd,
        // SAFETY: passed through.
        || unsafe { sys::ioctl(fd, request, arg) },
        |_, s| {
            let p = arg as *mut c_int;
            match request {
                libc::FIONBIO => run_quiet(|| {
                    if p.is_null() {
                        return Err(libc::EFAULT);
                    }
                    // SAFETY: FIONBIO's argument is a readable int.
                    let on = unsafe { *p } != 0;
                    s.set_nonblocking(on);
                    if !s.has_kernel_side() {
                        // SAFETY: passed through (the kernel fd keeps the flag too).
                        unsafe { sys::ioctl(fd, request, arg) };
                    }
                    Ok(0)
                }),
                libc::FIONREAD => match s.pending() {
                    Some(n) => run_quiet(|| {
                        if p.is_null() {
                            return Err(libc::EFAULT);
                        }
                        // SAFETY: FIONREAD's argument is a writable int.
                        unsafe { *p = n.min(i32::MAX as usize) as c_int };
                        Ok(0)
                    }),
                    // SAFETY: passed through.
                    None => unsafe { sys::ioctl(fd, request, arg) },
                },
                // SAFETY: passed through.
                _ => unsafe { sys::ioctl(fd, request, arg) },
            }
        },
    )
}
