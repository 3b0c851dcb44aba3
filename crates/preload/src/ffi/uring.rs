//! io_uring, refused: the shim makes the program see a kernel without it.
//!
//! An io_uring program's accepts, reads and writes never pass through
//! libc's socket calls, so the shim cannot serve them: a listener on
//! `0.0.0.0` would be corestack's and the kernel's, the ring would only
//! ever see the kernel's side, and corestack's handshakes would queue
//! unanswered. So while the shim serves this process
//! ([`stack::active`]), creating a ring fails at once with ENOSYS, as on
//! a kernel built without io_uring, and one line on stderr says why (once
//! per process). Programs that probe for io_uring (libuv, many servers)
//! then fall back to epoll, which the shim serves.
//!
//! Covered: glibc's `syscall()` with `SYS_io_uring_setup` (every other
//! number goes to the real `syscall` unchanged), and liburing's exported
//! entry points that create a ring when liburing is a shared library
//! (Debian's makes its system calls inline, so interposing these is the
//! only way to see it). Not covered: a liburing linked into the
//! executable (`corestack exec` refuses such a program, see its
//! `cmd/exec.rs`) or any other inline `syscall` instruction.
//!
//! `syscall` is variadic in C; it is defined here with six `long`
//! arguments after the number, which is where x86-64 and AArch64 Linux
//! callers put a variadic call's integer arguments (unused ones are
//! whatever the registers or stack slot held, and are passed on as such,
//! as libc's own `syscall` does).

use super::*;
use core::sync::atomic::AtomicBool;

/// Said once per process, the first time a ring is refused.
const REFUSED: &str = "io_uring is not served by corestack: creating a ring fails with ENOSYS, as on a kernel without io_uring (use epoll or poll, or run the program without the shim)";

static SAID: AtomicBool = AtomicBool::new(false);

/// True when this process's rings are refused: the shim serves its sockets
/// and the call is the application's. Says so once when it is.
fn refuse() -> bool {
    let serving = catch_unwind(|| !sys::inside() && stack::active()).unwrap_or(true);
    if serving {
        sys::log_once(&SAID, REFUSED);
    }
    serving
}

/// The interposed `syscall(number, ...)`: `SYS_io_uring_setup` is refused
/// while the shim serves the process (returns -1, errno ENOSYS); every
/// other number, and io_uring_setup of a process the shim does not serve,
/// goes to the real `syscall` with the same arguments (-1 and errno on
/// failure, as `syscall(2)` says).
///
/// # Safety
/// As for libc's `syscall` with this number: the caller vouches for the
/// arguments the system call reads.
#[no_mangle]
pub unsafe extern "C" fn syscall(
    number: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    if number == libc::SYS_io_uring_setup && refuse() {
        sys::set_errno(libc::ENOSYS);
        return -1;
    }
    match sys::real_syscall() {
        // SAFETY: the caller upholds the system call's contract; the real
        // `syscall` reads as many of the six arguments as `number` takes.
        Some(f) => unsafe { f(number, a1, a2, a3, a4, a5, a6) },
        // SAFETY: as above, made directly (before the real symbols are
        // resolved, or while they are).
        None => unsafe { direct(number, [a1, a2, a3, a4, a5, a6]) },
    }
}

/// System call `number` with `a`, made with the instruction itself:
/// -1 and errno on failure, as libc's `syscall`.
///
/// # Safety
/// As for the system call `number` with these arguments.
unsafe fn direct(number: c_long, a: [c_long; 6]) -> c_long {
    // SAFETY: passed through from our caller.
    let r = unsafe { raw(number, a) };
    if (-4095..0).contains(&r) {
        sys::set_errno(-r as c_int);
        -1
    } else {
        r
    }
}

/// The bare system call: the kernel's return value (-errno on failure).
#[cfg(target_arch = "x86_64")]
unsafe fn raw(number: c_long, a: [c_long; 6]) -> c_long {
    let r: c_long;
    // SAFETY: the x86-64 Linux system call convention: number in rax,
    // arguments in rdi, rsi, rdx, r10, r8, r9; the kernel clobbers rcx and
    // r11 and touches no user stack. What the call does with the
    // arguments is the caller's contract.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") number => r,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    r
}

/// The bare system call: the kernel's return value (-errno on failure).
#[cfg(target_arch = "aarch64")]
unsafe fn raw(number: c_long, a: [c_long; 6]) -> c_long {
    let r: c_long;
    // SAFETY: the AArch64 Linux system call convention: number in x8,
    // arguments in x0..x5, the result in x0; `svc 0` touches no user
    // stack. What the call does with the arguments is the caller's
    // contract.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") a[0] => r,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            options(nostack),
        );
    }
    r
}

/// Elsewhere there is no direct path: ENOSYS (the shim is built for
/// x86-64 and AArch64 Linux).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn raw(_number: c_long, _a: [c_long; 6]) -> c_long {
    -(libc::ENOSYS as c_long)
}

/// liburing's answer for a refused ring: `-ENOSYS` (liburing returns
/// `-errno` rather than setting errno; errno is set too, for callers that
/// read it anyway).
fn refused_ring() -> c_int {
    sys::set_errno(libc::ENOSYS);
    -libc::ENOSYS
}

/// A liburing call that creates a ring: [`refused_ring`] while the shim
/// serves the process ([`refuse`]) or when liburing lacks the function,
/// else `call` with the real function that `real` picks from liburing's.
fn ring_call<F>(
    real: impl FnOnce(&sys::Liburing) -> Option<F>,
    call: impl FnOnce(F) -> c_int,
) -> c_int {
    if refuse() {
        return refused_ring();
    }
    match real(sys::liburing()) {
        Some(f) => call(f),
        None => refused_ring(),
    }
}

/// liburing's `io_uring_queue_init(entries, ring, flags)`: 0, or `-errno`
/// (here `-ENOSYS` while the shim serves the process).
///
/// # Safety
/// As for liburing's function: `ring` is a writable `struct io_uring`.
#[no_mangle]
pub unsafe extern "C" fn io_uring_queue_init(
    entries: c_uint,
    ring: *mut c_void,
    flags: c_uint,
) -> c_int {
    // SAFETY: the caller upholds liburing's contract.
    ring_call(|l| l.queue_init, |f| unsafe { f(entries, ring, flags) })
}

/// liburing's `io_uring_queue_init_params(entries, ring, params)`: 0, or
/// `-errno` (here `-ENOSYS` while the shim serves the process).
///
/// # Safety
/// As for liburing's function.
#[no_mangle]
pub unsafe extern "C" fn io_uring_queue_init_params(
    entries: c_uint,
    ring: *mut c_void,
    params: *mut c_void,
) -> c_int {
    // SAFETY: the caller upholds liburing's contract.
    ring_call(
        |l| l.queue_init_params,
        |f| unsafe { f(entries, ring, params) },
    )
}

/// liburing's `io_uring_queue_init_mem(entries, ring, params, buf,
/// buf_size)` (2.5 and later): the bytes of `buf` used, or `-errno` (here
/// `-ENOSYS` while the shim serves the process).
///
/// # Safety
/// As for liburing's function.
#[no_mangle]
pub unsafe extern "C" fn io_uring_queue_init_mem(
    entries: c_uint,
    ring: *mut c_void,
    params: *mut c_void,
    buf: *mut c_void,
    buf_size: size_t,
) -> c_int {
    // SAFETY: the caller upholds liburing's contract.
    ring_call(
        |l| l.queue_init_mem,
        |f| unsafe { f(entries, ring, params, buf, buf_size) },
    )
}

/// liburing's `io_uring_setup(entries, params)` (2.3 and later): the ring's
/// fd, or `-errno` (here `-ENOSYS` while the shim serves the process).
///
/// # Safety
/// As for liburing's function.
#[no_mangle]
pub unsafe extern "C" fn io_uring_setup(entries: c_uint, params: *mut c_void) -> c_int {
    // SAFETY: the caller upholds liburing's contract.
    ring_call(|l| l.setup, |f| unsafe { f(entries, params) })
}

/// liburing's `io_uring_get_probe()`: the opcodes a ring supports, or null
/// when no ring can be made (here always null while the shim serves the
/// process: liburing makes its probe ring with inline system calls).
///
/// # Safety
/// As for liburing's function.
#[no_mangle]
pub unsafe extern "C" fn io_uring_get_probe() -> *mut c_void {
    if refuse() {
        sys::set_errno(libc::ENOSYS);
        return core::ptr::null_mut();
    }
    match sys::liburing().get_probe {
        // SAFETY: the caller upholds liburing's contract.
        Some(f) => unsafe { f() },
        None => core::ptr::null_mut(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct path gives what libc's `syscall` gives: a result, or -1
    /// with errno.
    #[test]
    fn direct_system_calls_answer_as_libc_syscall() {
        // SAFETY: getpid takes no arguments.
        let pid = unsafe { direct(libc::SYS_getpid, [0; 6]) };
        assert_eq!(pid, c_long::from(std::process::id() as i32));
        sys::set_errno(0);
        // SAFETY: close of an fd that cannot be open.
        let r = unsafe { direct(libc::SYS_close, [-1, 0, 0, 0, 0, 0]) };
        assert_eq!((r, sys::errno()), (-1, libc::EBADF));
    }

    /// The interposed `syscall` passes other numbers through, arguments
    /// included (a pipe's two fds come back through the pointer), and does
    /// not refuse io_uring in a process the shim does not serve (no
    /// CORESTACK_* variables in a test run): the kernel's answer comes back,
    /// a ring fd or an errno other than the shim's refusal.
    #[test]
    fn other_numbers_and_unserved_processes_pass_through() {
        let mut fds = [-1 as c_int; 2];
        // SAFETY: pipe2 writes two ints into `fds`.
        let r = unsafe {
            syscall(
                libc::SYS_pipe2,
                fds.as_mut_ptr() as c_long,
                libc::O_CLOEXEC as c_long,
                0,
                0,
                0,
                0,
            )
        };
        assert_eq!(r, 0);
        assert!(fds[0] >= 0 && fds[1] >= 0 && fds[0] != fds[1]);
        // SAFETY: closes the two fds just made.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert!(
            stack::config().is_none(),
            "run the tests without CORESTACK_* variables"
        );
        let mut params = [0u8; 120];
        // SAFETY: io_uring_setup reads and writes a 120-byte io_uring_params.
        let fd = unsafe {
            syscall(
                libc::SYS_io_uring_setup,
                4,
                params.as_mut_ptr() as c_long,
                0,
                0,
                0,
                0,
            )
        };
        if fd >= 0 {
            // SAFETY: closes the ring just made.
            unsafe { libc::close(fd as c_int) };
        }
        assert!(
            !SAID.load(core::sync::atomic::Ordering::Relaxed),
            "refused in an unserved process"
        );
    }
}
