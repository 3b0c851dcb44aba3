//! The interposed functions: the C ABI of libc's socket calls.
//!
//! Each looks its fd up in the table first: an fd that is not corestack's
//! goes straight to libc (one load). For ours, the pointers the
//! application passed are turned into slices here (the only place besides
//! `sys` that touches raw memory) and the call goes to the safe socket,
//! multiplexing and option logic; a failure sets errno and returns -1.
//!
//! Contract beyond libc's: no panic crosses into C (the logic never
//! panics on input; a bug would abort, not unwind, since the library is
//! built with `panic = "unwind"` but every entry point catches it and
//! answers EIO).
//!
//! `fcntl` and `ioctl` are variadic in C; they are defined here with one
//! `unsigned long` argument, which on x86-64 and AArch64 Linux is where a
//! variadic caller puts its int or pointer argument.

use crate::addr;
use crate::epoll::Epoll;
use crate::mux;
use crate::opts;
use crate::process;
use crate::sock::{Accepted, From, Recvd, Sock, Ty, R};
use crate::sys::{self, k};
use crate::table::{self, Obj};
use crate::wait::Deadline;
use core::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use core::time::Duration;
use libc::{
    epoll_event, fd_set, iovec, mmsghdr, msghdr, nfds_t, off64_t, off_t, pid_t, pollfd, sigset_t,
    size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Runs `f`; Err sets errno and gives -1; a panic gives EIO.
fn run<T: TryFrom<i64>>(f: impl FnOnce() -> R<T>) -> T {
    let fail = T::try_from(-1).ok();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            sys::set_errno(e);
            fail.unwrap_or_else(|| unreachable_fail())
        }
        Err(_) => {
            sys::set_errno(libc::EIO);
            fail.unwrap_or_else(|| unreachable_fail())
        }
    }
}

#[cold]
fn unreachable_fail<T>() -> T {
    // Every T used here (c_int, ssize_t) holds -1.
    std::process::abort()
}

fn size(r: R<usize>) -> R<ssize_t> {
    r.map(|n| n.min(isize::MAX as usize) as ssize_t)
}

/// The application's bytes at `p`, `n` long. EFAULT for null with n > 0.
unsafe fn bytes<'a>(p: *const c_void, n: usize) -> R<&'a [u8]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller (the application, through libc's contract for this
    // call) promises `n` readable bytes at `p`.
    Ok(unsafe { core::slice::from_raw_parts(p as *const u8, n) })
}

/// The application's writable bytes at `p`, `n` long.
unsafe fn bytes_mut<'a>(p: *mut c_void, n: usize) -> R<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller promises `n` writable bytes at `p`, not aliased
    // during the call.
    Ok(unsafe { core::slice::from_raw_parts_mut(p as *mut u8, n) })
}

/// The iovecs at `iov` as byte slices (IOV_MAX at most). EINVAL for a bad count.
unsafe fn iovecs_mut<'a>(iov: *const iovec, cnt: c_int) -> R<Vec<&'a mut [u8]>> {
    let cnt = usize::try_from(cnt).map_err(|_| libc::EINVAL)?;
    if cnt > 1024 {
        return Err(libc::EINVAL);
    }
    if cnt == 0 {
        return Ok(Vec::new());
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller promises `cnt` iovecs at `iov`.
    let v = unsafe { core::slice::from_raw_parts(iov, cnt) };
    // SAFETY: each iovec describes memory the caller lends us for writing.
    v.iter()
        .map(|e| unsafe { bytes_mut(e.iov_base, e.iov_len) })
        .collect()
}

unsafe fn iovecs<'a>(iov: *const iovec, cnt: c_int) -> R<Vec<&'a [u8]>> {
    let cnt = usize::try_from(cnt).map_err(|_| libc::EINVAL)?;
    if cnt > 1024 {
        return Err(libc::EINVAL);
    }
    if cnt == 0 {
        return Ok(Vec::new());
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: as above.
    let v = unsafe { core::slice::from_raw_parts(iov, cnt) };
    // SAFETY: each iovec describes memory the caller lends us for reading.
    v.iter()
        .map(|e| unsafe { bytes(e.iov_base, e.iov_len) })
        .collect()
}

/// Writes address bytes to the application's `addr`/`len` as the kernel
/// does: at most `*len` bytes, then `*len` = the full length.
unsafe fn put_addr(addr: *mut sockaddr, len: *mut socklen_t, b: &[u8]) {
    if addr.is_null() || len.is_null() {
        return;
    }
    // SAFETY: the caller promises a readable and writable socklen_t at `len`
    // and `*len` writable bytes at `addr`.
    unsafe {
        let room = *len as usize;
        let n = room.min(b.len());
        core::ptr::copy_nonoverlapping(b.as_ptr(), addr as *mut u8, n);
        *len = b.len() as socklen_t;
    }
}

unsafe fn put_from(s: &Sock, addr: *mut sockaddr, len: *mut socklen_t, from: &From) {
    match from {
        From::None => {
            if !len.is_null() && s.ty == Ty::Stream {
                // SAFETY: as in put_addr: TCP reports no source (length 0).
                unsafe { *len = 0 };
            }
        }
        From::Core(a) => {
            let (b, n) = s.encode(*a);
            // SAFETY: passed through from our caller.
            unsafe { put_addr(addr, len, &b[..n]) }
        }
        From::Kernel((b, n)) => {
            // SAFETY: as above.
            unsafe { put_addr(addr, len, &b[..*n]) }
        }
    }
}

/// The socket at `fd` if it is corestack's and the call is the application's.
#[inline]
fn ours(fd: c_int) -> Option<Arc<Obj>> {
    let o = table::get(fd)?;
    if sys::inside() {
        return None;
    }
    Some(o)
}

fn as_sock(o: &Arc<Obj>) -> Option<&Sock> {
    match &**o {
        Obj::Sock(s) => Some(s),
        Obj::Epoll(_) => None,
    }
}

/// ENETDOWN for a call on a corestack socket in a forked child (the
/// engine that serves it runs in the parent).
fn alive(s: &Sock) -> R<()> {
    if s.dead_in_child() {
        Err(libc::ENETDOWN)
    } else {
        Ok(())
    }
}

fn settle(s: &Sock, o: &Arc<Obj>) {
    if s.take_resettle() {
        crate::epoll::resettle(s, o);
    }
}

/// The soft RLIMIT_NOFILE, if known.
pub fn nofile_soft_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into a live struct.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some(r.rlim_cur)
}

/// The real epoll_ctl (the shim's own registrations).
pub fn real_epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: &mut epoll_event,
) -> Result<(), c_int> {
    // SAFETY: `ev` is a live epoll_event.
    if unsafe { sys::epoll_ctl(epfd, op, fd, ev) } < 0 {
        Err(sys::errno())
    } else {
        Ok(())
    }
}

/// The real epoll_pwait into `out` for `ms` (-1: no limit) with `mask`.
pub fn real_epoll_wait(
    epfd: c_int,
    out: &mut [epoll_event],
    ms: i64,
    mask: Option<&sigset_t>,
) -> Result<usize, c_int> {
    let max = out.len().min(i32::MAX as usize) as c_int;
    let ms = ms.clamp(-1, i64::from(i32::MAX)) as c_int;
    let m = mask.map_or(core::ptr::null(), |m| m as *const sigset_t);
    // SAFETY: `out` is a live, writable array of `max` epoll_events.
    let r = unsafe { sys::epoll_pwait(epfd, out.as_mut_ptr(), max, ms, m) };
    if r < 0 {
        Err(sys::errno())
    } else {
        Ok(r as usize)
    }
}

extern "C" fn fork_child() {
    process::after_fork_child();
}

extern "C" fn exit_handler() {
    process::at_exit();
}

/// Registers the fork-child and exit handlers (once, from the constructor).
pub fn register_handlers() {
    // SAFETY: registers plain extern "C" fns with no arguments.
    unsafe {
        libc::pthread_atfork(None, None, Some(fork_child));
        libc::atexit(exit_handler);
    }
}

// ---------------------------------------------------------------------------
// Creating and closing
// ---------------------------------------------------------------------------

/// socket(2): AF_INET (and AF_INET6) TCP and UDP sockets become corestack
/// candidates; the kernel socket is made first and its number returned.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    // SAFETY: no pointers.
    let fd = unsafe { sys::socket(domain, ty, protocol) };
    if fd < 0 {
        return fd;
    }
    drop(table::forget(fd));
    if sys::inside() || !process::active() {
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
    if let Ok(old) = table::install(fd, Arc::new(Obj::Sock(s))) {
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
        drop(table::forget(a));
        drop(table::forget(b));
    }
    r
}

/// close(2): the entry leaves the table (CLOSING) before the real close;
/// the socket closes when its last fd does. EBADF for the shim's own fds.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if sys::inside() {
        // SAFETY: passed through.
        return unsafe { sys::close(fd) };
    }
    if table::is_reserved(fd) {
        sys::set_errno(libc::EBADF);
        return -1;
    }
    let obj = table::begin_close(fd);
    // SAFETY: passed through.
    let r = unsafe { sys::close(fd) };
    if let Some(o) = obj {
        let e = sys::errno();
        table::end_close(fd);
        forget_fd(&o, fd);
        drop(o);
        sys::set_errno(e);
    }
    r
}

fn forget_fd(o: &Arc<Obj>, fd: c_int) {
    match &**o {
        Obj::Sock(s) => s.remove_fd(fd),
        Obj::Epoll(e) => e.remove_fd(fd),
    }
}

fn remember_fd(o: &Arc<Obj>, fd: c_int) {
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
        .filter_map(|&fd| table::begin_close(fd).map(|o| (fd, o)))
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
        table::begin_close(fd)
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
fn fresh(fd: c_int) -> c_int {
    if fd >= 0 {
        drop(table::forget(fd));
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

fn after_dup(old: c_int, new: c_int) {
    if new < 0 {
        return;
    }
    drop(table::forget(new));
    if let Some(o) = table::get(old) {
        remember_fd(&o, new);
        if let Ok(prev) = table::install(new, o) {
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

fn dup_onto(old: c_int, new: c_int, call: impl FnOnce() -> c_int) -> c_int {
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
    let prev = table::begin_close(new);
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
        let _ = table::install(new, p);
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

fn fcntl_impl(
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
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::ioctl(fd, request, arg) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::ioctl(fd, request, arg) };
    };
    let p = arg as *mut c_int;
    match request {
        libc::FIONBIO => run(|| {
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
            Some(n) => run(|| {
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
}

// ---------------------------------------------------------------------------
// Addresses and connections
// ---------------------------------------------------------------------------

/// bind(2): the decision point for servers (see `sock`).
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::bind(fd, addr, len) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::bind(fd, addr, len) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `len` readable bytes at `addr`.
        let raw = unsafe { bytes(addr.cast(), len as usize) }?;
        let sa = addr::parse(raw);
        let r = match sa {
            Ok(sa) => s.bind(&o, fd, sa, raw),
            Err(_) => k::bind(fd, raw),
        };
        settle(s, &o);
        r.map(|()| 0)
    })
}

/// listen(2).
#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    match ours(fd) {
        Some(o) => match as_sock(&o) {
            Some(s) => run(|| {
                alive(s)?;
                let r = s.listen(&o, fd, backlog);
                settle(s, &o);
                r.map(|()| 0)
            }),
            // SAFETY: no pointers.
            None => unsafe { sys::listen(fd, backlog) },
        },
        // SAFETY: no pointers.
        None => unsafe { sys::listen(fd, backlog) },
    }
}

/// accept4(2): a corestack connection gets an eventfd placeholder fd.
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return fresh(unsafe { sys::accept4(fd, addr, len, flags) });
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return fresh(unsafe { sys::accept4(fd, addr, len, flags) });
    };
    run(|| {
        alive(s)?;
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
    })
}

/// accept(2).
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: same contract.
    unsafe { accept4(fd, addr, len, 0) }
}

/// connect(2): the decision point for clients (see `sock`).
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::connect(fd, addr, len) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::connect(fd, addr, len) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `len` readable bytes at `addr`.
        let raw = unsafe { bytes(addr.cast(), len as usize) }?;
        let r = match addr::parse(raw) {
            Ok(sa) => s.connect(&o, fd, sa, raw),
            Err(_) => k::connect(fd, raw),
        };
        settle(s, &o);
        r.map(|()| 0)
    })
}

/// shutdown(2).
#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    match ours(fd) {
        Some(o) => match as_sock(&o) {
            Some(s) => run(|| {
                alive(s)?;
                s.shutdown(fd, how).map(|()| 0)
            }),
            // SAFETY: no pointers.
            None => unsafe { sys::shutdown(fd, how) },
        },
        // SAFETY: no pointers.
        None => unsafe { sys::shutdown(fd, how) },
    }
}

/// getsockname(2).
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let local = ours(fd).and_then(|o| {
        as_sock(&o).map(|s| {
            (
                s.local_addr(),
                s.encode(core::net::SocketAddrV4::new(
                    core::net::Ipv4Addr::UNSPECIFIED,
                    0,
                )),
                s.family,
            )
        })
    });
    match local {
        Some((Some(a), _, family)) => run(|| {
            if len.is_null() || addr.is_null() {
                return Err(libc::EFAULT);
            }
            let (b, n) = addr::encode(a, family);
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
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::getpeername(fd, addr, len) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::getpeername(fd, addr, len) };
    };
    match s.peer_addr() {
        Ok(a) => run(|| {
            if len.is_null() || addr.is_null() {
                return Err(libc::EFAULT);
            }
            let (b, n) = s.encode(a);
            // SAFETY: as above.
            unsafe { put_addr(addr, len, &b[..n]) };
            Ok(0)
        }),
        Err(Some(e)) => run(|| -> R<c_int> { Err(e) }),
        // SAFETY: passed through.
        Err(None) => unsafe { sys::getpeername(fd, addr, len) },
    }
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
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::setsockopt(fd, level, name, val, len) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::setsockopt(fd, level, name, val, len) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `len` readable bytes at `val`.
        let v = unsafe { bytes(val, len as usize) }?;
        opts::set(s, fd, level, name, v).map(|()| 0)
    })
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
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::getsockopt(fd, level, name, val, len) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::getsockopt(fd, level, name, val, len) };
    };
    run(|| {
        alive(s)?;
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
    })
}

// ---------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------

fn recv_one(o: &Arc<Obj>, s: &Sock, fd: c_int, bufs: &mut [&mut [u8]], flags: c_int) -> R<Recvd> {
    s.recv(o, fd, bufs, flags)
}

fn send_bufs(
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

/// read(2).
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::read(fd, buf, n) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::read(fd, buf, n) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `n` writable bytes at `buf`.
        let b = unsafe { bytes_mut(buf, n) }?;
        size(recv_one(&o, s, fd, &mut [b], 0).map(|r| r.n))
    })
}

/// write(2).
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::write(fd, buf, n) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::write(fd, buf, n) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `n` readable bytes at `buf`.
        let b = unsafe { bytes(buf, n) }?;
        size(send_bufs(&o, s, fd, &[b], 0, None))
    })
}

/// readv(2).
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::readv(fd, iov, cnt) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::readv(fd, iov, cnt) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `cnt` iovecs of writable memory.
        let mut b = unsafe { iovecs_mut(iov, cnt) }?;
        size(recv_one(&o, s, fd, &mut b, 0).map(|r| r.n))
    })
}

/// writev(2).
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::writev(fd, iov, cnt) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::writev(fd, iov, cnt) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `cnt` iovecs of readable memory.
        let b = unsafe { iovecs(iov, cnt) }?;
        size(send_bufs(&o, s, fd, &b, 0, None))
    })
}

/// recv(2).
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
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
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::recvfrom(fd, buf, n, flags, addr, len) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::recvfrom(fd, buf, n, flags, addr, len) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `n` writable bytes at `buf`.
        let b = unsafe { bytes_mut(buf, n) }?;
        let r = recv_one(&o, s, fd, &mut [b], flags)?;
        // SAFETY: the caller's address buffer, as recvfrom's contract says.
        unsafe { put_from(s, addr, len, &r.from) };
        let n = if flags & libc::MSG_TRUNC != 0 && s.ty == Ty::Dgram {
            r.full
        } else {
            r.n
        };
        size(Ok(n))
    })
}

/// recvmsg(2): no ancillary data (msg_controllen comes back 0); MSG_TRUNC
/// in msg_flags when a datagram was cut.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::recvmsg(fd, msg, flags) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::recvmsg(fd, msg, flags) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises a valid msghdr.
        unsafe { recvmsg_impl(&o, s, fd, msg, flags) }
    })
}

unsafe fn recvmsg_impl(
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
    m.msg_controllen = 0;
    m.msg_flags = if r.full > r.n { libc::MSG_TRUNC } else { 0 };
    let n = if flags & libc::MSG_TRUNC != 0 && s.ty == Ty::Dgram {
        r.full
    } else {
        r.n
    };
    size(Ok(n))
}

/// recvmmsg(2): the first message waits as recvmsg would (unless
/// MSG_DONTWAIT), the rest are taken while available; MSG_WAITFORONE as
/// Linux. The timeout is not supported on corestack sockets (EINVAL when
/// given, said once).
#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    vec: *mut mmsghdr,
    vlen: c_uint,
    flags: c_int,
    timeout: *mut timespec,
) -> c_int {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::recvmmsg(fd, vec, vlen, flags, timeout) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::recvmmsg(fd, vec, vlen, flags, timeout) };
    };
    run(|| {
        alive(s)?;
        if !timeout.is_null() {
            return Err(libc::EINVAL);
        }
        if vec.is_null() && vlen > 0 {
            return Err(libc::EFAULT);
        }
        let vlen = vlen.min(1024) as usize;
        let mut got = 0usize;
        for i in 0..vlen {
            let f = if i > 0 && (flags & libc::MSG_WAITFORONE != 0 || s.ty == Ty::Dgram) {
                (flags & !libc::MSG_WAITFORONE) | libc::MSG_DONTWAIT
            } else {
                flags & !libc::MSG_WAITFORONE
            };
            // SAFETY: the caller promises `vlen` mmsghdrs at `vec`.
            let mh = unsafe { &mut *vec.add(i) };
            // SAFETY: as recvmsg.
            match unsafe { recvmsg_impl(&o, s, fd, &mut mh.msg_hdr, f) } {
                Ok(n) => {
                    mh.msg_len = n as c_uint;
                    got += 1;
                }
                Err(e) if got == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(got as c_int)
    })
}

/// send(2).
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: same contract as sendto with no address.
    unsafe { sendto(fd, buf, n, flags, core::ptr::null(), 0) }
}

/// sendto(2): MSG_DONTWAIT, MSG_NOSIGNAL; MSG_MORE accepted (no corking).
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    let Some(o) = ours(fd) else {
        // SAFETY: passed through.
        return unsafe { sys::sendto(fd, buf, n, flags, addr, len) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::sendto(fd, buf, n, flags, addr, len) };
    };
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises `n` readable bytes at `buf`.
        let b = unsafe { bytes(buf, n) }?;
        let to = if addr.is_null() || s.ty == Ty::Stream {
            None
        } else {
            // SAFETY: and `len` readable bytes at `addr`.
            Some(unsafe { bytes(addr.cast(), len as usize) }?)
        };
        size(send_bufs(&o, s, fd, &[b], flags, to))
    })
}

unsafe fn sendmsg_impl(
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
    if m.msg_controllen > 0 && !m.msg_control.is_null() {
        static SAID: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
        sys::log_once(&SAID, "sendmsg with ancillary data (msg_control) is not supported on corestack sockets: EINVAL");
        return Err(libc::EINVAL);
    }
    // SAFETY: its iovecs describe readable memory.
    let b = unsafe { iovecs(m.msg_iov, m.msg_iovlen as c_int) }?;
    let to = if m.msg_name.is_null() || s.ty == Ty::Stream {
        None
    } else {
        // SAFETY: msg_name is readable for msg_namelen bytes.
        Some(unsafe { bytes(m.msg_name, m.msg_namelen as usize) }?)
    };
    size(send_bufs(o, s, fd, &b, flags, to))
}

/// True when `o` cannot travel to another process as its kernel fd: a
/// socket with a corestack side (the fd is a placeholder or a kernel
/// socket that is not the connection), or an epoll holding corestack
/// registrations (the receiver would get the kernel epoll without them).
fn stays_here(o: &Obj) -> bool {
    match o {
        Obj::Sock(s) => s.on_corestack(),
        Obj::Epoll(e) => e.has_core(),
    }
}

/// The first fd among the SCM_RIGHTS fds of `msg` that [`stays_here`]
/// (None also for the shim's own calls, a null `msg` and no control data).
///
/// # Safety
/// `msg` is null or a readable msghdr whose control buffer is readable
/// for `msg_controllen` bytes (sendmsg's contract).
unsafe fn corestack_fd_passed(msg: *const msghdr) -> Option<c_int> {
    if sys::inside() || msg.is_null() {
        return None;
    }
    // SAFETY: the caller promises a readable msghdr.
    let m = unsafe { &*msg };
    if m.msg_control.is_null() || m.msg_controllen < core::mem::size_of::<libc::cmsghdr>() {
        return None;
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
                let fd = unsafe { core::ptr::read_unaligned(data.add(i)) };
                if table::get(fd).is_some_and(|o| stays_here(&o)) {
                    return Some(fd);
                }
            }
        }
        // SAFETY: as CMSG_FIRSTHDR; a header past the buffer comes back null.
        c = unsafe { libc::CMSG_NXTHDR(m, c) };
    }
    None
}

/// EOPNOTSUPP, said on stderr naming `fd`: a corestack fd in SCM_RIGHTS.
fn refuse_passing(fd: c_int) -> ssize_t {
    sys::log_line(&format!(
        "sendmsg: fd {fd} is a corestack socket; passing it to another process with SCM_RIGHTS is not supported (the receiver would get a bare placeholder): EOPNOTSUPP"
    ));
    sys::set_errno(libc::EOPNOTSUPP);
    -1
}

/// sendmsg(2) without ancillary data on corestack sockets. On other
/// sockets (AF_UNIX): -1 with EOPNOTSUPP, and one line on stderr naming
/// the fd, when SCM_RIGHTS carries a corestack socket (or an epoll
/// holding some), which another process cannot use; nothing is sent.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
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
    run(|| {
        alive(s)?;
        // SAFETY: the caller promises a valid msghdr.
        unsafe { sendmsg_impl(&o, s, fd, msg, flags) }
    })
}

/// sendmmsg(2). On other sockets, EOPNOTSUPP when a message's SCM_RIGHTS
/// carries a corestack socket (as sendmsg; nothing is sent).
#[no_mangle]
pub unsafe extern "C" fn sendmmsg(
    fd: c_int,
    vec: *mut mmsghdr,
    vlen: c_uint,
    flags: c_int,
) -> c_int {
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
    run(|| {
        alive(s)?;
        if vec.is_null() && vlen > 0 {
            return Err(libc::EFAULT);
        }
        let mut sent = 0usize;
        for i in 0..vlen.min(1024) as usize {
            // SAFETY: the caller promises `vlen` mmsghdrs at `vec`.
            let mh = unsafe { &mut *vec.add(i) };
            // SAFETY: as sendmsg.
            match unsafe { sendmsg_impl(&o, s, fd, &mh.msg_hdr, flags) } {
                Ok(n) => {
                    mh.msg_len = n as c_uint;
                    sent += 1;
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent as c_int)
    })
}

/// The most sendfile copies per read.
const SENDFILE_CHUNK: usize = 256 * 1024;

std::thread_local! {
    /// sendfile's copy buffer, kept between calls (allocated and zeroed
    /// once per thread, at the largest size asked so far).
    static SENDFILE_BUF: core::cell::Cell<Vec<u8>> = const { core::cell::Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's sendfile buffer of at least `len` bytes
/// (`len` at most [`SENDFILE_CHUNK`]): no allocation once the thread has
/// had one that large. A nested call (a signal handler's) or one during
/// thread exit gets a buffer of its own.
fn with_sendfile_buf<T>(len: usize, f: impl FnOnce(&mut [u8]) -> T) -> T {
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

fn sendfile_impl(
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
fn sendfile_with(
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
    let Some(o) = ours(out_fd) else {
        // SAFETY: passed through.
        return unsafe { sys::sendfile(out_fd, in_fd, offset, count) };
    };
    let Some(s) = as_sock(&o) else {
        // SAFETY: passed through.
        return unsafe { sys::sendfile(out_fd, in_fd, offset, count) };
    };
    run(|| {
        alive(s)?;
        let mut off = if offset.is_null() {
            None
        } else {
            // SAFETY: the caller promises a readable and writable off_t.
            Some(unsafe { *offset })
        };
        let r = sendfile_impl(&o, s, out_fd, in_fd, off.as_mut(), count);
        if let (Some(v), false) = (off, offset.is_null()) {
            // SAFETY: as above.
            unsafe { *offset = v as off_t };
        }
        size(r)
    })
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

// ---------------------------------------------------------------------------
// Readiness
// ---------------------------------------------------------------------------

unsafe fn poll_impl(
    fds: *mut pollfd,
    n: nfds_t,
    deadline: Deadline,
    mask: *const sigset_t,
    real: impl FnOnce() -> c_int,
) -> c_int {
    if sys::inside() || n == 0 || fds.is_null() || n > 1 << 20 {
        return real();
    }
    // SAFETY: the caller promises `n` pollfds at `fds`.
    let set = unsafe { core::slice::from_raw_parts_mut(fds, n as usize) };
    let ours = mux::ours(set);
    if ours.is_empty() {
        return real();
    }
    // SAFETY: null or a readable sigset.
    let mask = unsafe { mask.as_ref() };
    run(|| mux::poll(set, &ours, deadline, mask).map(|n| n as c_int))
}

/// poll(2) over kernel fds and corestack sockets.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the caller's pollfds, passed on.
    unsafe {
        poll_impl(
            fds,
            n,
            Deadline::from_ms(i64::from(timeout)),
            core::ptr::null(),
            || sys::poll(fds, n, timeout),
        )
    }
}

fn ts_deadline(ts: *const timespec) -> R<Deadline> {
    if ts.is_null() {
        return Ok(Deadline::after(None));
    }
    // SAFETY: the caller promises a readable timespec.
    let t = unsafe { *ts };
    if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(libc::EINVAL);
    }
    Ok(Deadline::after(Some(Duration::new(
        t.tv_sec as u64,
        t.tv_nsec as u32,
    ))))
}

/// ppoll(2).
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    let Ok(deadline) = ts_deadline(ts) else {
        // SAFETY: passed through (the kernel reports the bad timespec).
        return unsafe { sys::ppoll(fds, n, ts, mask) };
    };
    // SAFETY: the caller's pollfds, passed on.
    unsafe { poll_impl(fds, n, deadline, mask, || sys::ppoll(fds, n, ts, mask)) }
}

/// __poll_chk: poll with glibc's fortify check of the array size.
#[no_mangle]
pub unsafe extern "C" fn __poll_chk(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: c_int,
    fdslen: size_t,
) -> c_int {
    if fdslen / core::mem::size_of::<pollfd>() < n as usize {
        // SAFETY: the real check reports the overflow (and aborts).
        return unsafe { sys::__poll_chk(fds, n, timeout, fdslen) };
    }
    // SAFETY: as poll.
    unsafe { poll(fds, n, timeout) }
}

/// __ppoll_chk: ppoll with the fortify check.
#[no_mangle]
pub unsafe extern "C" fn __ppoll_chk(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const timespec,
    mask: *const sigset_t,
    fdslen: size_t,
) -> c_int {
    if fdslen / core::mem::size_of::<pollfd>() < n as usize {
        // SAFETY: the real check reports the overflow (and aborts).
        return unsafe { sys::__ppoll_chk(fds, n, ts, mask, fdslen) };
    }
    // SAFETY: as ppoll.
    unsafe { ppoll(fds, n, ts, mask) }
}

unsafe fn set_words<'a>(s: *mut fd_set) -> Option<&'a mut [u64; 16]> {
    if s.is_null() {
        return None;
    }
    // SAFETY: glibc's fd_set is 1024 bits in 16 64-bit words, 8-aligned;
    // the caller promises it is writable.
    Some(unsafe { &mut *(s as *mut [u64; 16]) })
}

unsafe fn any_ours(n: c_int, sets: [*mut fd_set; 3]) -> bool {
    let n = n.clamp(0, 1024) as usize;
    for s in sets {
        // SAFETY: as set_words.
        if let Some(w) = unsafe { set_words(s) } {
            for fd in 0..n {
                if w[fd / 64] >> (fd % 64) & 1 == 1 && table::sock(fd as c_int).is_some() {
                    return true;
                }
            }
        }
    }
    false
}

/// select(2) over kernel fds and corestack sockets; the timeout is updated
/// with the time left, as Linux does.
#[no_mangle]
pub unsafe extern "C" fn select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    tv: *mut timeval,
) -> c_int {
    // SAFETY: the caller's sets.
    if sys::inside() || !(0..=1024).contains(&n) || !unsafe { any_ours(n, [r, w, e]) } {
        // SAFETY: passed through.
        return unsafe { sys::select(n, r, w, e, tv) };
    }
    run(|| {
        let deadline = if tv.is_null() {
            Deadline::after(None)
        } else {
            // SAFETY: the caller promises a readable timeval.
            let t = unsafe { *tv };
            if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
                return Err(libc::EINVAL);
            }
            Deadline::after(Some(
                Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64),
            ))
        };
        // SAFETY: the caller's sets.
        let res = unsafe {
            mux::select(
                n as usize,
                set_words(r),
                set_words(w),
                set_words(e),
                deadline,
                None,
            )
        };
        if !tv.is_null() {
            let left = deadline.left().unwrap_or_default();
            // SAFETY: as above, writable.
            unsafe {
                (*tv).tv_sec = left.as_secs() as libc::time_t;
                (*tv).tv_usec = left.subsec_micros() as libc::suseconds_t;
            }
        }
        res.map(|c| c as c_int)
    })
}

/// pselect(2).
#[no_mangle]
pub unsafe extern "C" fn pselect(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    // SAFETY: the caller's sets.
    if sys::inside() || !(0..=1024).contains(&n) || !unsafe { any_ours(n, [r, w, e]) } {
        // SAFETY: passed through.
        return unsafe { sys::pselect(n, r, w, e, ts, mask) };
    }
    run(|| {
        let deadline = ts_deadline(ts)?;
        // SAFETY: null or a readable sigset.
        let mask = unsafe { mask.as_ref() };
        // SAFETY: the caller's sets.
        let res = unsafe {
            mux::select(
                n as usize,
                set_words(r),
                set_words(w),
                set_words(e),
                deadline,
                mask,
            )
        };
        res.map(|c| c as c_int)
    })
}

/// __fdelt_chk: glibc's FD_SET bounds check (the fds are kernel numbers,
/// so the real one applies as is).
#[no_mangle]
pub unsafe extern "C" fn __fdelt_chk(d: c_long) -> c_long {
    // SAFETY: no pointers.
    unsafe { sys::__fdelt_chk(d) }
}

fn new_epoll(fd: c_int) -> c_int {
    if fd >= 0 {
        drop(table::forget(fd));
        if !sys::inside() && process::active() {
            let ep = Epoll::default();
            ep.add_fd(fd);
            if let Ok(old) = table::install(fd, Arc::new(Obj::Epoll(ep))) {
                drop(old);
            }
        }
    }
    fd
}

/// epoll_create(2): a real kernel epoll, known to the shim.
#[no_mangle]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    // SAFETY: no pointers.
    new_epoll(unsafe { sys::epoll_create(size) })
}

/// epoll_create1(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    // SAFETY: no pointers.
    new_epoll(unsafe { sys::epoll_create1(flags) })
}

/// epoll_ctl(2): corestack sockets go to the user-level interest list.
/// EINVAL (said once) for an epoll holding corestack sockets added to
/// another epoll.
#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut epoll_event,
) -> c_int {
    let target = ours(fd);
    let Some(target) = target else {
        // SAFETY: passed through.
        return unsafe { sys::epoll_ctl(epfd, op, fd, ev) };
    };
    let ep = ours(epfd);
    match (&*target, ep.as_deref()) {
        (Obj::Sock(s), Some(Obj::Epoll(e))) => run(|| {
            if fd == epfd {
                return Err(libc::EINVAL);
            }
            // SAFETY: null or a readable epoll_event.
            let ev = unsafe { ev.as_ref() }.copied();
            e.ctl(epfd, op, fd, &target, s, ev).map(|()| 0)
        }),
        (Obj::Epoll(inner), _) if inner.has_core() && op == libc::EPOLL_CTL_ADD => {
            static SAID: core::sync::atomic::AtomicBool =
                core::sync::atomic::AtomicBool::new(false);
            sys::log_once(&SAID, "an epoll instance holding corestack sockets cannot be added to another epoll: EINVAL");
            sys::set_errno(libc::EINVAL);
            -1
        }
        (Obj::Sock(_), _) => {
            static SAID: core::sync::atomic::AtomicBool =
                core::sync::atomic::AtomicBool::new(false);
            sys::log_once(&SAID, "a corestack socket can only be added to an epoll instance created under the shim: EINVAL");
            sys::set_errno(libc::EINVAL);
            -1
        }
        // SAFETY: passed through.
        _ => unsafe { sys::epoll_ctl(epfd, op, fd, ev) },
    }
}

unsafe fn epoll_wait_impl(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    deadline: Deadline,
    mask: *const sigset_t,
    real: impl FnOnce() -> c_int,
) -> c_int {
    let Some(o) = ours(epfd) else {
        return real();
    };
    let Obj::Epoll(e) = &*o else {
        return real();
    };
    if max <= 0 || ev.is_null() {
        return real();
    }
    // SAFETY: the caller promises `max` writable epoll_events.
    let out = unsafe { core::slice::from_raw_parts_mut(ev, max as usize) };
    // SAFETY: null or a readable sigset.
    let mask = unsafe { mask.as_ref() };
    // Also with no corestack socket registered: one added by another
    // thread must wake this wait, and the shim's own fds never come out.
    run(|| {
        e.wait_any(epfd, out, deadline, mask, real)
            .map(|n| n as c_int)
    })
}

/// epoll_wait(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's array, passed on.
    unsafe {
        epoll_wait_impl(
            epfd,
            ev,
            max,
            Deadline::from_ms(i64::from(timeout)),
            core::ptr::null(),
            || sys::epoll_wait(epfd, ev, max, timeout),
        )
    }
}

/// epoll_pwait(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    // SAFETY: as epoll_wait.
    unsafe {
        epoll_wait_impl(
            epfd,
            ev,
            max,
            Deadline::from_ms(i64::from(timeout)),
            mask,
            || sys::epoll_pwait(epfd, ev, max, timeout, mask),
        )
    }
}

/// epoll_pwait2(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    let Ok(deadline) = ts_deadline(ts) else {
        // SAFETY: passed through (the kernel reports the bad timespec).
        return unsafe { sys::epoll_pwait2(epfd, ev, max, ts, mask) };
    };
    // SAFETY: as epoll_wait.
    unsafe {
        epoll_wait_impl(epfd, ev, max, deadline, mask, || {
            sys::epoll_pwait2(epfd, ev, max, ts, mask)
        })
    }
}

// ---------------------------------------------------------------------------
// Fortified variants and process calls
// ---------------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    std::thread_local! {
        /// Allocations made by this thread (so parallel tests do not count).
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
    }

    struct Counting;

    // SAFETY: defers every call to the system allocator unchanged; it only
    // counts the calling thread's allocations.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
            // SAFETY: same contract as our caller's.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: same contract as our caller's.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
            // SAFETY: same contract as our caller's.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    fn allocs() -> u64 {
        ALLOCS.with(Cell::get)
    }

    /// sendfile from a file to an undecided (kernel) socket: the second call
    /// allocates nothing (the first sets up the thread's buffer), and the
    /// bytes and offsets are right.
    #[test]
    fn sendfile_allocates_nothing_per_call() {
        let mut path = std::env::temp_dir();
        path.push(format!("corestack-sendfile-{}", std::process::id()));
        let data: Vec<u8> = (0..300 * 1024).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).expect("writing the file");
        let file = std::fs::File::open(&path).expect("opening the file");
        let _ = std::fs::remove_file(&path);
        let in_fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let mut sv = [0 as c_int; 2];
        // SAFETY: `sv` has room for the two fds.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
        assert_eq!(r, 0, "socketpair");
        let o = Arc::new(Obj::Sock(Sock::fresh(
            libc::AF_INET,
            crate::sock::Ty::Stream,
            false,
        )));
        let Obj::Sock(s) = &*o else { unreachable!() };
        let mut got = vec![0u8; 8192];
        let mut off = 0i64;
        for round in 0..2 {
            let before = allocs();
            let n = sendfile_impl(&o, s, sv[0], in_fd, Some(&mut off), 4096).expect("sendfile");
            let during = allocs() - before;
            assert_eq!(n, 4096);
            // SAFETY: reads at most 4096 bytes into `got`.
            let r = unsafe { libc::read(sv[1], got.as_mut_ptr().cast(), 4096) };
            assert_eq!(r, 4096);
            let at = round * 4096;
            assert_eq!(
                &got[..4096],
                &data[at..at + 4096],
                "round {round}: wrong bytes"
            );
            if round == 1 {
                assert_eq!(during, 0, "the second sendfile allocated {during} times");
            }
        }
        assert_eq!(off, 8192);
        // SAFETY: closes the two fds made above.
        unsafe {
            libc::close(sv[0]);
            libc::close(sv[1]);
        }
    }
}
