//! The system underneath: the real (libc's) definitions of every call the
//! shim interposes, found with `dlsym(RTLD_NEXT)`, plus errno, the
//! reentrancy guard and the few raw calls the shim makes for itself.
//!
//! The real symbols are resolved by the library's constructor (an
//! `.init_array` entry in `ffi`, before `main`), or on first use when another
//! library's constructor calls an interposed function earlier. Nothing here
//! allocates. A symbol libc lacks (an older glibc without `epoll_pwait2`,
//! say) makes its call fail with ENOSYS.
//!
//! Calling one of the typed wrappers is unsafe exactly as calling the libc
//! function is: the caller vouches for the pointers.

use core::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
use core::sync::atomic::{AtomicBool, Ordering};
use libc::{
    epoll_event, fd_set, iovec, mmsghdr, msghdr, nfds_t, off64_t, off_t, pid_t, pollfd, sigset_t,
    size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};
use std::cell::Cell;
use std::sync::OnceLock;

/// Looks `name` (NUL-terminated) up in the objects loaded after this one.
fn lookup<F: Copy>(name: &'static str) -> Option<F> {
    // SAFETY: `name` is a NUL-terminated literal; dlsym only reads it.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const c_char) };
    if p.is_null() || core::mem::size_of::<F>() != core::mem::size_of::<*mut c_void>() {
        return None;
    }
    // SAFETY: F is an `unsafe extern "C" fn` pointer type (pointer-sized,
    // checked above) matching the C prototype of `name` in glibc's headers.
    Some(unsafe { core::mem::transmute_copy::<*mut c_void, F>(&p) })
}

macro_rules! real_fns {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// Pointers to the real definitions (None: libc lacks the symbol);
        /// `C-unwind`: glibc's cancellation points among them unwind a
        /// cancelled thread through the interposed entry points.
        #[allow(non_snake_case)]
        pub struct Real {
            $( $name: Option<unsafe extern "C-unwind" fn($($ty),*) -> $ret>, )*
            fcntl: Option<unsafe extern "C" fn(c_int, c_int, ...) -> c_int>,
            read: Option<unsafe extern "C-unwind" fn(c_int, *mut c_void, size_t) -> ssize_t>,
            write: Option<unsafe extern "C-unwind" fn(c_int, *const c_void, size_t) -> ssize_t>,
            close: Option<unsafe extern "C-unwind" fn(c_int) -> c_int>,
            fcntl64: Option<unsafe extern "C" fn(c_int, c_int, ...) -> c_int>,
            ioctl: Option<unsafe extern "C" fn(c_int, c_ulong, ...) -> c_int>,
            syscall: Option<SyscallFn>,
        }

        impl Real {
            fn load() -> Real {
                Real {
                    $( $name: lookup(concat!(stringify!($name), "\0")), )*
                    fcntl: lookup("fcntl\0"),
                    read: lookup("read\0"),
                    write: lookup("write\0"),
                    close: lookup("close\0"),
                    fcntl64: lookup("fcntl64\0"),
                    ioctl: lookup("ioctl\0"),
                    syscall: lookup("syscall\0"),
                }
            }
        }

        $(
            /// The real (libc's) call; ENOSYS and -1 if libc lacks it.
            ///
            /// # Safety
            /// As for the libc function of this name.
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                match real_or_raw().and_then(|r| r.$name) {
                    // SAFETY: the caller upholds the libc function's contract.
                    Some(f) => unsafe { f($($arg),*) },
                    None => {
                        set_errno(libc::ENOSYS);
                        -1 as $ret
                    }
                }
            }
        )*
    };
}

real_fns! {
    socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    socketpair(domain: c_int, ty: c_int, protocol: c_int, sv: *mut c_int) -> c_int;
    bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    listen(fd: c_int, backlog: c_int) -> c_int;
    accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
    connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t;
    writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t;
    recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
    recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
    recvmmsg(fd: c_int, vec: *mut mmsghdr, vlen: c_uint, flags: c_int, timeout: *mut timespec) -> c_int;
    sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
    sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
    sendmmsg(fd: c_int, vec: *mut mmsghdr, vlen: c_uint, flags: c_int) -> c_int;
    sendfile(out_fd: c_int, in_fd: c_int, offset: *mut off_t, count: size_t) -> ssize_t;
    sendfile64(out_fd: c_int, in_fd: c_int, offset: *mut off64_t, count: size_t) -> ssize_t;
    splice(fd_in: c_int, off_in: *mut off64_t, fd_out: c_int, off_out: *mut off64_t, len: size_t, flags: c_uint) -> ssize_t;
    pread(fd: c_int, buf: *mut c_void, n: size_t, offset: off_t) -> ssize_t;
    close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int;
    shutdown(fd: c_int, how: c_int) -> c_int;
    dup(fd: c_int) -> c_int;
    dup2(old: c_int, new: c_int) -> c_int;
    dup3(old: c_int, new: c_int, flags: c_int) -> c_int;
    getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int;
    setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int;
    getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
    ppoll(fds: *mut pollfd, n: nfds_t, ts: *const timespec, mask: *const sigset_t) -> c_int;
    select(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, tv: *mut timeval) -> c_int;
    pselect(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, ts: *const timespec, mask: *const sigset_t) -> c_int;
    epoll_create(size: c_int) -> c_int;
    epoll_create1(flags: c_int) -> c_int;
    epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int;
    epoll_wait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int) -> c_int;
    epoll_pwait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const sigset_t) -> c_int;
    epoll_pwait2(epfd: c_int, ev: *mut epoll_event, max: c_int, ts: *const timespec, mask: *const sigset_t) -> c_int;
    __read_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t;
    __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t;
    __recvfrom_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
    __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, fdslen: size_t) -> c_int;
    __ppoll_chk(fds: *mut pollfd, n: nfds_t, ts: *const timespec, mask: *const sigset_t, fdslen: size_t) -> c_int;
    __fdelt_chk(d: c_long) -> c_long;
    fork() -> pid_t;
    pthread_cancel(thread: libc::pthread_t) -> c_int;
    fstat(fd: c_int, buf: *mut libc::stat) -> c_int;
    fstat64(fd: c_int, buf: *mut libc::stat64) -> c_int;
    execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    execv(path: *const c_char, argv: *const *const c_char) -> c_int;
    execvp(file: *const c_char, argv: *const *const c_char) -> c_int;
    execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    closefrom(low: c_int) -> c_int;
    sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
    fclose(fp: *mut libc::FILE) -> c_int;
    pipe(fds: *mut c_int) -> c_int;
    pipe2(fds: *mut c_int, flags: c_int) -> c_int;
    open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
    open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
    openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
    openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int;
    eventfd(initval: c_uint, flags: c_int) -> c_int;
}

/// The real `fcntl` with an integer or pointer argument.
///
/// # Safety
/// As for libc's `fcntl(fd, cmd, arg)`.
pub unsafe fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    match real_or_raw().and_then(|r| r.fcntl) {
        // SAFETY: the caller upholds fcntl's contract for `cmd` and `arg`.
        Some(f) => unsafe { f(fd, cmd, arg) },
        None => {
            set_errno(libc::ENOSYS);
            -1
        }
    }
}

/// The real `fcntl64` (glibc's name for callers built with 64-bit offsets).
///
/// # Safety
/// As for libc's `fcntl64(fd, cmd, arg)`.
pub unsafe fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    match real_or_raw().and_then(|r| r.fcntl64) {
        // SAFETY: the caller upholds fcntl's contract for `cmd` and `arg`.
        Some(f) => unsafe { f(fd, cmd, arg) },
        // SAFETY: as above (same contract).
        None => unsafe { fcntl(fd, cmd, arg) },
    }
}

/// The real `ioctl` with an integer or pointer argument.
///
/// # Safety
/// As for libc's `ioctl(fd, request, arg)`.
pub unsafe fn ioctl(fd: c_int, request: c_ulong, arg: c_ulong) -> c_int {
    match real_or_raw().and_then(|r| r.ioctl) {
        // SAFETY: the caller upholds ioctl's contract for `request` and `arg`.
        Some(f) => unsafe { f(fd, request, arg) },
        None => {
            set_errno(libc::ENOSYS);
            -1
        }
    }
}

/// libc's `syscall(number, ...)`: variadic, every argument a `long`.
pub type SyscallFn = unsafe extern "C" fn(c_long, ...) -> c_long;

/// The real `syscall` once the real symbols are resolved; None before (or
/// while this thread resolves them, or when libc lacks it). It never
/// starts the resolution itself: the interposed `syscall` carries futex
/// calls, which resolving may have to wait for (then the caller makes the
/// system call directly, as libc's `syscall` would).
pub fn real_syscall() -> Option<SyscallFn> {
    REAL.get().and_then(|r| r.syscall)
}

/// liburing's entry points the shim interposes (`ffi::uring`), looked up
/// on first use rather than by the constructor: a program may `dlopen`
/// liburing later. A field is None when no object after this one defines
/// the symbol (liburing is not loaded, or is too old for it).
pub struct Liburing {
    /// `int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)`.
    pub queue_init: Option<unsafe extern "C" fn(c_uint, *mut c_void, c_uint) -> c_int>,
    /// `int io_uring_queue_init_params(unsigned, struct io_uring *, struct io_uring_params *)`.
    pub queue_init_params: Option<unsafe extern "C" fn(c_uint, *mut c_void, *mut c_void) -> c_int>,
    /// `int io_uring_queue_init_mem(unsigned, struct io_uring *, struct io_uring_params *,
    /// void *buf, size_t buf_size)` (liburing 2.5 and later).
    pub queue_init_mem: Option<
        unsafe extern "C" fn(c_uint, *mut c_void, *mut c_void, *mut c_void, size_t) -> c_int,
    >,
    /// `int io_uring_setup(unsigned entries, struct io_uring_params *p)` (2.3 and later).
    pub setup: Option<unsafe extern "C" fn(c_uint, *mut c_void) -> c_int>,
    /// `struct io_uring_probe *io_uring_get_probe(void)`.
    pub get_probe: Option<unsafe extern "C" fn() -> *mut c_void>,
}

/// liburing's definitions, looked up on first use.
pub fn liburing() -> &'static Liburing {
    static LIBURING: OnceLock<Liburing> = OnceLock::new();
    LIBURING.get_or_init(|| Liburing {
        queue_init: lookup("io_uring_queue_init\0"),
        queue_init_params: lookup("io_uring_queue_init_params\0"),
        queue_init_mem: lookup("io_uring_queue_init_mem\0"),
        setup: lookup("io_uring_setup\0"),
        get_probe: lookup("io_uring_get_probe\0"),
    })
}

static REAL: OnceLock<Real> = OnceLock::new();

thread_local! {
    /// This thread is resolving the real symbols (dlsym may call into an
    /// allocator that reads or writes a file: those calls must not wait for
    /// the resolution they are part of).
    static RESOLVING: Cell<bool> = const { Cell::new(false) };
}

/// The real definitions, resolved on first use.
pub fn real() -> &'static Real {
    REAL.get_or_init(|| {
        RESOLVING.with(|r| r.set(true));
        let real = Real::load();
        RESOLVING.with(|r| r.set(false));
        real
    })
}

/// The real definitions once resolved; None while this very thread is
/// resolving them (then the basic calls go to the kernel directly).
fn real_or_raw() -> Option<&'static Real> {
    if let Some(r) = REAL.get() {
        return Some(r);
    }
    if RESOLVING.with(|r| r.get()) {
        return None;
    }
    Some(real())
}

/// The real `read` (the raw system call while the symbols are being resolved).
///
/// # Safety
/// As for libc's `read`.
pub unsafe fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    match real_or_raw().and_then(|r| r.read) {
        // SAFETY: the caller upholds read's contract.
        Some(f) => unsafe { f(fd, buf, n) },
        // SAFETY: as above, through the kernel directly.
        None => unsafe { libc::syscall(libc::SYS_read, fd, buf, n) as ssize_t },
    }
}

/// The real `write` (the raw system call while the symbols are being resolved).
///
/// # Safety
/// As for libc's `write`.
pub unsafe fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    match real_or_raw().and_then(|r| r.write) {
        // SAFETY: the caller upholds write's contract.
        Some(f) => unsafe { f(fd, buf, n) },
        // SAFETY: as above, through the kernel directly.
        None => unsafe { libc::syscall(libc::SYS_write, fd, buf, n) as ssize_t },
    }
}

/// The real `close` (the raw system call while the symbols are being resolved).
///
/// # Safety
/// As for libc's `close`.
pub unsafe fn close(fd: c_int) -> c_int {
    match real_or_raw().and_then(|r| r.close) {
        // SAFETY: the caller upholds close's contract.
        Some(f) => unsafe { f(fd) },
        // SAFETY: closes the caller's fd through the kernel directly.
        None => unsafe { libc::syscall(libc::SYS_close, fd) as c_int },
    }
}

/// Sets the calling thread's errno.
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's errno.
pub fn errno() -> c_int {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() }
}

thread_local! {
    /// Depth of the shim's own calls on this thread: while above 0, every
    /// interposed function goes straight to libc.
    static INSIDE: Cell<u32> = const { Cell::new(0) };
}

/// True while this thread runs the shim's own code that may call interposed
/// functions (starting the stack): those calls must go to libc.
pub fn inside() -> bool {
    INSIDE.with(|c| c.get() > 0)
}

/// Marks this thread as inside the shim until the guard drops.
pub struct Inside(());

impl Inside {
    /// Enters the shim's own code.
    pub fn enter() -> Inside {
        INSIDE.with(|c| c.set(c.get() + 1));
        Inside(())
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Writes one line to stderr with the real `write` (no allocation, no
/// interposition), prefixed `corestack: `.
pub fn log_line(msg: &str) {
    let mut buf = [0u8; 512];
    let prefix = b"corestack: ";
    let mut n = 0;
    for &b in prefix.iter().chain(msg.as_bytes()).take(buf.len() - 1) {
        buf[n] = b;
        n += 1;
    }
    buf[n] = b'\n';
    n += 1;
    // SAFETY: writes `n` initialised bytes of a live stack buffer to fd 2.
    unsafe { write(2, buf.as_ptr().cast(), n) };
}

/// Writes `msg` once per process for each distinct `flag`.
pub fn log_once(flag: &AtomicBool, msg: &str) {
    if !flag.swap(true, Ordering::Relaxed) {
        log_line(msg);
    }
}

/// Moves `fd`, a fresh fd of the shim's own, to the lowest free number
/// at `base` or above (F_DUPFD_CLOEXEC) and closes the low copy; `fd`
/// itself when that fails.
fn move_above(fd: c_int, base: c_int) -> c_int {
    // SAFETY: F_DUPFD_CLOEXEC on an fd we own, integer argument.
    let high = unsafe { fcntl(fd, libc::F_DUPFD_CLOEXEC, base as c_ulong) };
    if high >= 0 {
        // SAFETY: closes the low copy we just created.
        unsafe { close(fd) };
        high
    } else {
        fd
    }
}

/// A new eventfd (CLOEXEC, NONBLOCK) for the shim's own use, moved to
/// `base` or above (`table::internal_eventfd` reserves it). Errors: the
/// errno of eventfd (EMFILE, ...).
pub fn eventfd_above(base: c_int) -> Result<std::os::fd::OwnedFd, c_int> {
    // SAFETY: eventfd takes no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(errno());
    }
    let fd = move_above(fd, base);
    // SAFETY: `fd` is a fresh eventfd this function's caller now owns alone.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// The open-file key of `fd` as another process sees it too
/// (`appif::ctl::fd_key`), read with the shim's own calls.
pub fn fd_key(fd: c_int) -> Option<u64> {
    let _inside = Inside::enter();
    appif::ctl::fd_key("self", fd)
}

/// Adds 1 to eventfd `fd` (wakes a waiter whose kernel epoll holds it).
/// The system call itself: glibc's `write` is a cancellation point, and
/// this runs in calls that are not (epoll_ctl) or inside the shim's frames.
pub fn eventfd_signal(fd: c_int) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 initialised bytes of a live stack array.
    unsafe { libc::syscall(libc::SYS_write, fd, one.as_ptr(), 8usize) };
}

/// Resets eventfd `fd` (a non-blocking read of its counter), with the
/// system call itself (see [`eventfd_signal`]).
pub fn eventfd_drain(fd: c_int) {
    let mut b = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live stack array.
    unsafe { libc::syscall(libc::SYS_read, fd, b.as_mut_ptr(), 8usize) };
}

/// `poll(2)` on `fds` for `timeout_ms` (-1: no limit), with `mask` as the
/// signal mask while it sleeps when given (ppoll). Returns the count or
/// the errno (EINTR when a handler ran).
pub fn poll_fds(
    fds: &mut [pollfd],
    timeout_ms: i64,
    mask: Option<&sigset_t>,
) -> Result<usize, c_int> {
    let r = match mask {
        None => {
            let ms = timeout_ms.clamp(-1, i64::from(i32::MAX)) as c_int;
            // SAFETY: `fds` is a live slice of pollfds; poll writes revents only.
            unsafe { poll(fds.as_mut_ptr(), fds.len() as nfds_t, ms) }
        }
        Some(m) => {
            let ts = (timeout_ms >= 0).then(|| timespec {
                tv_sec: (timeout_ms / 1000) as libc::time_t,
                tv_nsec: ((timeout_ms % 1000) * 1_000_000) as c_long,
            });
            let tsp = ts
                .as_ref()
                .map_or(core::ptr::null(), |t| t as *const timespec);
            // SAFETY: as above; `tsp` is null or a live timespec, `m` a live sigset.
            unsafe { ppoll(fds.as_mut_ptr(), fds.len() as nfds_t, tsp, m) }
        }
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// The real epoll_ctl (the shim's own registrations).
pub fn real_epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: &mut epoll_event,
) -> Result<(), c_int> {
    // SAFETY: `ev` is a live epoll_event.
    if unsafe { epoll_ctl(epfd, op, fd, ev) } < 0 {
        Err(errno())
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
    let r = unsafe { epoll_pwait(epfd, out.as_mut_ptr(), max, ms, m) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// Sends SIGPIPE to the calling thread (what Linux does on EPIPE without
/// MSG_NOSIGNAL).
pub fn raise_sigpipe() {
    // SAFETY: raise takes a signal number only.
    unsafe { libc::raise(libc::SIGPIPE) };
}

/// True when the calling thread should restart a socket call a signal
/// handler interrupted, as Linux does for handlers with SA_RESTART: every
/// signal that this thread does not block and that has a handler has
/// SA_RESTART. (The shim cannot tell which signal ran; with a mix of
/// handlers it answers EINTR.) Handlers of the synchronous fault signals
/// (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT: raised by
/// the faulting thread itself, never what interrupts its sleep) do not
/// count: Rust's runtime and JVMs install SIGSEGV and SIGBUS handlers
/// without SA_RESTART.
pub fn restart_after_signal() -> bool {
    const SYNCHRONOUS: [c_int; 7] = corestack::SYNCHRONOUS_SIGNALS;
    // SAFETY: sigset_t is plain bits; pthread_sigmask with a null new set
    // only writes the current mask into `blocked`.
    let mut blocked: sigset_t = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, core::ptr::null(), &mut blocked) };
    for sig in 1..libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP || SYNCHRONOUS.contains(&sig) {
            continue;
        }
        // SAFETY: sigismember reads a valid sigset.
        if unsafe { libc::sigismember(&blocked, sig) } == 1 {
            continue;
        }
        // SAFETY: sigaction with a null new action only writes `old`.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::sigaction(sig, core::ptr::null(), &mut old) } != 0 {
            continue;
        }
        let h = old.sa_sigaction;
        if h == libc::SIG_DFL || h == libc::SIG_IGN {
            continue;
        }
        if old.sa_flags & libc::SA_RESTART == 0 {
            return false;
        }
    }
    true
}

/// Safe wrappers over the real calls on kernel sockets (`sys/k.rs`).
pub mod k;

/// Blocks every signal in the calling thread until the guard drops (the
/// old mask comes back): threads spawned meanwhile (the engine's) inherit
/// the full mask, so process-directed signals never run on them.
pub struct SignalsBlocked(sigset_t);

impl SignalsBlocked {
    /// Blocks every signal in this thread.
    pub fn new() -> SignalsBlocked {
        // SAFETY: sigset_t is plain bits; sigfillset and pthread_sigmask write
        // only the sets we pass, which live on our stack.
        unsafe {
            let mut all: sigset_t = core::mem::zeroed();
            let mut old: sigset_t = core::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            SignalsBlocked(old)
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, core::ptr::null_mut()) };
    }
}

/// The signal state a program started with (see [`signal_state`]): the
/// calling thread's mask and which signals were ignored (bit `n - 1` for
/// signal `n`, 1..=64).
#[derive(Clone, Copy)]
pub struct SignalState {
    mask: sigset_t,
    ignored: u64,
}

/// The calling thread's signal mask and the signals ignored (SIG_IGN) now.
pub fn signal_state() -> SignalState {
    // SAFETY: sigset_t is plain bits; pthread_sigmask with a null new set
    // only writes the old mask into ours.
    let mask = unsafe {
        let mut m: sigset_t = core::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, core::ptr::null(), &mut m);
        m
    };
    let mut ignored = 0u64;
    for sig in 1..=64 {
        // SAFETY: a zeroed sigaction is a valid out-parameter; with a null
        // new action, sigaction only reads the disposition into it.
        let ign = unsafe {
            let mut old: libc::sigaction = core::mem::zeroed();
            libc::sigaction(sig, core::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
        };
        if ign {
            ignored |= 1 << (sig - 1);
        }
    }
    SignalState { mask, ignored }
}

/// Puts back `s` before an exec: each signal ignored in `s` is ignored,
/// every other one that is ignored now goes back to SIG_DFL (an exec
/// keeps SIG_IGN and resets handlers), and the calling thread's mask (the
/// one the new image starts with) becomes `s`'s.
pub fn restore_signals(s: &SignalState) {
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let want = if s.ignored & (1 << (sig - 1)) != 0 {
            libc::SIG_IGN
        } else {
            libc::SIG_DFL
        };
        // SAFETY: as in signal_state; the new action is a plain
        // disposition (SIG_IGN or SIG_DFL) with an empty mask, glibc's
        // internal signals refuse it (EINVAL), which is fine.
        unsafe {
            let mut old: libc::sigaction = core::mem::zeroed();
            if libc::sigaction(sig, core::ptr::null(), &mut old) != 0 {
                continue;
            }
            let ignored_now = old.sa_sigaction == libc::SIG_IGN;
            if ignored_now != (want == libc::SIG_IGN) {
                let mut new: libc::sigaction = core::mem::zeroed();
                new.sa_sigaction = want;
                libc::sigaction(sig, &new, core::ptr::null_mut());
            }
        }
    }
    // SAFETY: sets this thread's mask from a valid saved set.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &s.mask, core::ptr::null_mut()) };
}

/// A connected pair of AF_UNIX datagram sockets for the shim's own use
/// (CLOEXEC, both moved to `base` or above, as [`eventfd_above`];
/// `table::internal_dgram_pair` reserves them). Errors: the errno of
/// socketpair.
pub fn dgram_pair_above(
    base: c_int,
) -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), c_int> {
    let mut sv = [0 as c_int; 2];
    // SAFETY: `sv` is a live array of two ints for the kernel to fill.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(errno());
    }
    let high = |fd: c_int| {
        let fd = move_above(fd, base);
        // SAFETY: `fd` is a socket this function created and now hands
        // over to the one OwnedFd.
        unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
    };
    let a = high(sv[0]);
    let b = high(sv[1]);
    Ok((a, b))
}

/// The soft RLIMIT_NOFILE (1024 when unknown).
pub fn nofile_soft_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into a live struct.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    if known {
        r.rlim_cur
    } else {
        1024
    }
}

/// Sets or clears FD_CLOEXEC on `fd`; true when that changed it (errors
/// ignored: a closed fd needs nothing).
pub fn set_cloexec(fd: c_int, on: bool) -> bool {
    // SAFETY: F_GETFD/F_SETFD take and return integers only.
    unsafe {
        let flags = fcntl(fd, libc::F_GETFD, 0);
        if flags < 0 || (flags & libc::FD_CLOEXEC != 0) == on {
            return false;
        }
        let new = if on {
            flags | libc::FD_CLOEXEC
        } else {
            flags & !libc::FD_CLOEXEC
        };
        fcntl(fd, libc::F_SETFD, new as c_ulong) == 0
    }
}

/// execve(2) through libc's own `execve` (not the interposed one): returns
/// only on failure, with its errno.
pub fn exec_image(
    path: &std::ffi::CStr,
    argv: &[std::ffi::CString],
    env: &[std::ffi::CString],
) -> c_int {
    let mut av: Vec<*const c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    av.push(core::ptr::null());
    let mut ev: Vec<*const c_char> = env.iter().map(|a| a.as_ptr()).collect();
    ev.push(core::ptr::null());
    // SAFETY: `path` and every string are NUL-terminated and outlive the
    // call; both arrays end with a null pointer, as execve requires.
    unsafe { execve(path.as_ptr(), av.as_ptr(), ev.as_ptr()) };
    errno()
}

/// Ends the process at once (`_exit`): no atexit handlers, no flushing.
pub fn exit_now(code: c_int) -> ! {
    // SAFETY: _exit takes an integer and never returns.
    unsafe { libc::_exit(code) }
}
