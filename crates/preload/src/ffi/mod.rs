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
use crate::obj::{self, Obj};
use crate::opts;
use crate::sock::{Accepted, Recvd, Sender, Sock, Ty, R};
use crate::stack;
use crate::sys::{self, k};
use crate::table;
use crate::wait::Deadline;
use core::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
use core::time::Duration;
use libc::{
    epoll_event, fd_set, iovec, mmsghdr, msghdr, nfds_t, off64_t, off_t, pid_t, pollfd, sigset_t,
    size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Runs `f`; Err sets errno and gives -1; a panic gives EIO. A wait that
/// ended for a pending cancel ([`crate::cancel::PENDING`]) gives -1 with
/// EINTR and leaves the cancel to the entry point's [`crate::cancel::point`].
fn run<T: TryFrom<i64>>(f: impl FnOnce() -> R<T>) -> T {
    let fail = T::try_from(-1).ok();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(crate::cancel::PENDING)) => {
            crate::cancel::ended_for_cancel();
            sys::set_errno(libc::EINTR);
            fail.unwrap_or_else(|| unreachable_fail())
        }
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

/// As [`run`], for a call that is no cancellation point: cancellation is
/// disabled throughout, so that no glibc call the shim makes for it acts on
/// a pending cancel (the next cancellation point does, as on Linux).
fn run_quiet<T: TryFrom<i64>>(f: impl FnOnce() -> R<T>) -> T {
    let _quiet = crate::cancel::Quiet::new();
    run(f)
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

/// The application's `cnt` iovecs at `iov` (IOV_MAX at most). EINVAL for a
/// bad count, EFAULT for null with cnt > 0.
unsafe fn iovec_array<'a>(iov: *const iovec, cnt: c_int) -> R<&'a [iovec]> {
    let cnt = usize::try_from(cnt).map_err(|_| libc::EINVAL)?;
    if cnt > 1024 {
        return Err(libc::EINVAL);
    }
    if cnt == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller promises `cnt` iovecs at `iov`.
    Ok(unsafe { core::slice::from_raw_parts(iov, cnt) })
}

/// The iovecs at `iov` as writable byte slices (see [`iovec_array`]).
unsafe fn iovecs_mut<'a>(iov: *const iovec, cnt: c_int) -> R<Vec<&'a mut [u8]>> {
    // SAFETY: as the caller promises.
    let v = unsafe { iovec_array(iov, cnt) }?;
    // SAFETY: each iovec describes memory the caller lends us for writing.
    v.iter()
        .map(|e| unsafe { bytes_mut(e.iov_base, e.iov_len) })
        .collect()
}

/// The iovecs at `iov` as readable byte slices (see [`iovec_array`]).
unsafe fn iovecs<'a>(iov: *const iovec, cnt: c_int) -> R<Vec<&'a [u8]>> {
    // SAFETY: as the caller promises.
    let v = unsafe { iovec_array(iov, cnt) }?;
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

unsafe fn put_from(s: &Sock, addr: *mut sockaddr, len: *mut socklen_t, from: &Sender) {
    match from {
        Sender::None => {
            if !len.is_null() && s.ty == Ty::Stream {
                // SAFETY: as in put_addr: TCP reports no source (length 0).
                unsafe { *len = 0 };
            }
        }
        Sender::Core(a) => {
            let (b, n) = s.encode(*a);
            // SAFETY: passed through from our caller.
            unsafe { put_addr(addr, len, &b[..n]) }
        }
        Sender::Kernel((b, n)) => {
            // SAFETY: as above.
            unsafe { put_addr(addr, len, &b[..*n]) }
        }
    }
}

/// The socket at `fd` if it is corestack's and the call is the application's.
#[inline]
fn ours(fd: c_int) -> Option<Arc<Obj>> {
    let o = obj::get(fd)?;
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

/// `on_ours(entry, socket)` for the corestack socket at `fd`, else `kernel()`
/// (libc's own call: `fd` is not corestack's, is an epoll set, or the call is
/// the shim's own).
#[inline]
fn sock_or_kernel<T>(
    fd: c_int,
    kernel: impl FnOnce() -> T,
    on_ours: impl FnOnce(&Arc<Obj>, &Sock) -> T,
) -> T {
    if let Some(o) = ours(fd) {
        if let Some(s) = as_sock(&o) {
            return on_ours(&o, s);
        }
    }
    kernel()
}

/// `on_ours(entry, socket)` under [`run`] (an error becomes errno and -1)
/// once [`alive`] allows it (ENETDOWN in a forked child).
#[inline]
fn run_alive<T: TryFrom<i64>>(
    o: &Arc<Obj>,
    s: &Sock,
    on_ours: impl FnOnce(&Arc<Obj>, &Sock) -> R<T>,
) -> T {
    run(|| {
        alive(s)?;
        on_ours(o, s)
    })
}

/// A call on `fd` that is a cancellation point: libc's own (`kernel()`)
/// unless `fd` is a corestack socket, else `on_ours(entry, socket)` as
/// [`run_alive`] runs it.
#[inline]
fn sock_call<T: TryFrom<i64>>(
    fd: c_int,
    kernel: impl FnOnce() -> T,
    on_ours: impl FnOnce(&Arc<Obj>, &Sock) -> R<T>,
) -> T {
    sock_or_kernel(fd, kernel, |o, s| run_alive(o, s, on_ours))
}

/// As [`sock_call`] with cancellation disabled on the corestack path (as
/// [`run_quiet`]), for a call that is no cancellation point.
#[inline]
fn sock_call_quiet<T: TryFrom<i64>>(
    fd: c_int,
    kernel: impl FnOnce() -> T,
    on_ours: impl FnOnce(&Arc<Obj>, &Sock) -> R<T>,
) -> T {
    sock_or_kernel(fd, kernel, |o, s| {
        let _quiet = crate::cancel::Quiet::new();
        run_alive(o, s, on_ours)
    })
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

extern "C" fn fork_child() {
    stack::after_fork_child();
}

extern "C" fn exit_handler() {
    stack::at_exit(|| drop(obj::take_all()));
}

/// Registers the fork-child and exit handlers (once, from the constructor).
fn register_handlers() {
    // SAFETY: registers plain extern "C" fns with no arguments.
    unsafe {
        libc::pthread_atfork(None, None, Some(fork_child));
        libc::atexit(exit_handler);
    }
}

/// The library's constructor: resolves the real symbols before `main`,
/// reads the configuration (with it, records what the program started
/// with: [`crate::switch::init`]) and registers the fork and exit
/// handlers.
extern "C" fn init() {
    sys::real();
    corestack::count_handlers_with(signal::handlers_run);
    if let Some(cfg) = stack::config() {
        crate::switch::init(cfg);
        stack::when_started(crate::switch::stack_started);
    }
    register_handlers();
}

// SAFETY (link section): a pointer to a `extern "C" fn()` in `.init_array`
// is how the dynamic loader runs a shared object's constructors.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

mod cancel;
mod cmsg;
pub(crate) mod conn;
pub(crate) mod data;
mod fortified;
pub(crate) mod lifecycle;
pub(crate) mod ready;
pub(crate) mod signal;
pub(crate) mod splice;
mod uring;

use lifecycle::*;

use data::*;

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
