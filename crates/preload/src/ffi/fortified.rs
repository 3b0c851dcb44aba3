//! Fortified variants and process calls.

use super::*;

/// __read_chk: read with glibc's fortify check.
#[no_mangle]
pub unsafe extern "C-unwind" fn __read_chk(
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
pub unsafe extern "C-unwind" fn __recv_chk(
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
pub unsafe extern "C-unwind" fn __recvfrom_chk(
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

/// A corestack socket whose fd is a placeholder (an accepted or received
/// connection's eventfd) reads as a socket (S_IFSOCK), as the kernel's
/// would: libuv and others check the type of an fd they are handed.
fn socket_mode(fd: c_int, mode: &mut libc::mode_t) {
    if obj::get(fd).is_some_and(|o| matches!(&*o, Obj::Sock(s) if s.on_corestack())) {
        *mode = (*mode & !libc::S_IFMT) | libc::S_IFSOCK;
    }
}

/// fstat(2), with [`socket_mode`].
#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, buf: *mut libc::stat) -> c_int {
    // SAFETY: the caller promises a writable stat.
    let r = unsafe { sys::fstat(fd, buf) };
    if r == 0 && !buf.is_null() {
        // SAFETY: the kernel just filled it.
        socket_mode(fd, unsafe { &mut (*buf).st_mode });
    }
    r
}

/// fstat64, with [`socket_mode`].
#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, buf: *mut libc::stat64) -> c_int {
    // SAFETY: the caller promises a writable stat64.
    let r = unsafe { sys::fstat64(fd, buf) };
    if r == 0 && !buf.is_null() {
        // SAFETY: the kernel just filled it.
        socket_mode(fd, unsafe { &mut (*buf).st_mode });
    }
    r
}

/// `__fxstat64`, the fstat of programs built against glibc before 2.33
/// (Node.js's release builds): as fstat64 (`ver` is the x86-64 layout's,
/// the one struct stat64 has).
#[no_mangle]
pub unsafe extern "C" fn __fxstat64(_ver: c_int, fd: c_int, buf: *mut libc::stat64) -> c_int {
    // SAFETY: as fstat64.
    unsafe { fstat64(fd, buf) }
}

/// `__fxstat`: as [`__fxstat64`] (struct stat and stat64 are one layout
/// on x86-64).
#[no_mangle]
pub unsafe extern "C" fn __fxstat(_ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
    // SAFETY: as fstat.
    unsafe { fstat(fd, buf) }
}

/// fork: in service mode the daemon learns of it first, so that the
/// sockets the parent holds get references for the child (closing the
/// parent's copy then leaves the child's open, as on Linux), and the child
/// learns the fork's ticket, with which it joins and takes them over.
///
/// In embedded and inline mode a server that forks before its first accept
/// is moved to service mode instead (see `crate::switch`).
#[no_mangle]
pub unsafe extern "C" fn fork() -> pid_t {
    crate::switch::before_fork();
    // SAFETY: as fork_inner.
    unsafe { fork_inner() }
}

/// fork without the move to service mode (vfork: its child only execs).
///
/// # Safety
/// As fork(2).
unsafe fn fork_inner() -> pid_t {
    let announced = stack::before_fork();
    // SAFETY: fork takes no arguments; the atfork handlers run.
    let pid = unsafe { sys::fork() };
    if pid != 0 {
        stack::after_fork_parent(announced, pid);
    }
    pid
}

/// daemon(3): glibc's forks through its own internal fork, which the shim
/// would not see (no fork announcement in service mode, no move to service
/// mode in embedded mode); done here as glibc does it, with the interposed
/// fork: the parent `_exit`s, the child starts a session, goes to `/`
/// unless `nochdir`, and puts `/dev/null` on stdin, stdout and stderr
/// unless `noclose`.
#[no_mangle]
pub unsafe extern "C" fn daemon(nochdir: c_int, noclose: c_int) -> c_int {
    // SAFETY: as fork.
    match unsafe { fork() } {
        -1 => return -1,
        0 => {}
        // SAFETY: ends the parent at once, as glibc's daemon does.
        _ => unsafe { libc::_exit(0) },
    }
    // SAFETY: no pointers.
    if unsafe { libc::setsid() } < 0 {
        return -1;
    }
    if nochdir == 0 {
        // SAFETY: a NUL-terminated literal.
        unsafe { libc::chdir(c"/".as_ptr()) };
    }
    if noclose == 0 {
        // SAFETY: a NUL-terminated literal; the interposed open.
        let fd = unsafe { open(c"/dev/null".as_ptr(), libc::O_RDWR, 0) };
        if fd < 0 {
            return -1;
        }
        for to in 0..3 {
            // SAFETY: no pointers (the interposed dup2 keeps the table right).
            unsafe { dup2(fd, to) };
        }
        if fd > 2 {
            // SAFETY: our own fd.
            unsafe { close(fd) };
        }
    }
    0
}

/// vfork: made a fork, so that the child cannot write the parent's table.
#[no_mangle]
pub unsafe extern "C" fn vfork() -> pid_t {
    // SAFETY: as fork.
    unsafe { fork_inner() }
}

/// execve: a forked child gives back the references it inherited first
/// (see [`stack::before_exec`]).
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    stack::before_exec();
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { sys::execve(path, argv, envp) }
}

/// execv: as execve.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    stack::before_exec();
    // SAFETY: as execve.
    unsafe { sys::execv(path, argv) }
}

/// execvp: as execve.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    stack::before_exec();
    // SAFETY: as execve.
    unsafe { sys::execvp(file, argv) }
}

/// execvpe: as execve.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    stack::before_exec();
    // SAFETY: as execve.
    unsafe { sys::execvpe(file, argv, envp) }
}

/// fexecve: as execve.
#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    stack::before_exec();
    // SAFETY: as execve.
    unsafe { sys::fexecve(fd, argv, envp) }
}
