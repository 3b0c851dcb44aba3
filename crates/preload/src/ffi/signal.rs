//! The application's signal handlers, each behind a trampoline that counts
//! it: sigaction(2), `__sigaction`, signal(3), bsd_signal, sysv_signal and
//! sigset(3) install a handler as the application asked (its mask, its
//! flags, SA_SIGINFO or not), but the kernel calls [`trampoline`], which
//! bumps the thread's count of handlers run ([`handlers_run`]) and then
//! calls the application's handler with the same arguments. A waiter that
//! spins in user space learns that a handler ran from that count, where it
//! would otherwise hold the signals while it spins and look at the pending
//! set (an `rt_sigprocmask` to hold, an `rt_sigpending` per look, two more
//! system calls to release: [`corestack::SpinSignals`]); with the count a
//! wait makes none. A query (a null new action) answers with the
//! application's handler and flags, never the trampoline.
//!
//! Not wrapped (passed to libc as given): SIG_DFL and SIG_IGN, SIGKILL and
//! SIGSTOP, and the synchronous fault signals
//! ([`corestack::SYNCHRONOUS_SIGNALS`]), whose handlers never end a wait and
//! often read the fault's context as the kernel left it (a JVM's SIGSEGV).
//! A handler installed another way (a raw `rt_sigaction` system call)
//! is not counted: a spinning wait does not end for it, as before the
//! shim held the signals (it ends at its deadline or when data comes).

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::cell::Cell;

use crate::sys;

/// Signals 1..=64 (index 0 unused).
const NSIG: usize = 65;

/// The application's handler of each wrapped signal (0: not wrapped).
static HANDLER: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
/// The application's `sa_flags` of each wrapped signal.
static FLAGS: [AtomicI32; NSIG] = [const { AtomicI32::new(0) }; NSIG];

thread_local! {
    /// Handlers this thread ran through a trampoline.
    static RAN: Cell<u64> = const { Cell::new(0) };
    /// Of those, the ones without SA_RESTART.
    static RAN_NO_RESTART: Cell<u64> = const { Cell::new(0) };
}

/// The handlers the calling thread has run so far: (all, those without
/// SA_RESTART). Async-signal-safe; the source of
/// [`corestack::count_handlers_with`].
pub fn handlers_run() -> (u64, u64) {
    (RAN.with(Cell::get), RAN_NO_RESTART.with(Cell::get))
}

/// Whether the handler `h` for `sig` goes behind the trampoline.
fn wraps(sig: c_int, h: libc::sighandler_t) -> bool {
    (1..NSIG as c_int).contains(&sig)
        && sig != libc::SIGKILL
        && sig != libc::SIGSTOP
        && !corestack::SYNCHRONOUS_SIGNALS.contains(&sig)
        && h != libc::SIG_DFL
        && h != libc::SIG_IGN
        && h != tramp()
}

/// [`trampoline`]'s address, as a handler.
fn tramp() -> libc::sighandler_t {
    trampoline as *const () as libc::sighandler_t
}

/// What the kernel calls for a wrapped signal: counts, then runs the
/// application's handler as it was installed.
extern "C" fn trampoline(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let Some(i) = usize::try_from(sig).ok().filter(|&i| i < NSIG) else {
        return;
    };
    let flags = FLAGS[i].load(Ordering::Acquire);
    RAN.with(|c| c.set(c.get().wrapping_add(1)));
    if flags & libc::SA_RESTART == 0 {
        RAN_NO_RESTART.with(|c| c.set(c.get().wrapping_add(1)));
    }
    let h = if flags & libc::SA_RESETHAND != 0 {
        // The kernel put SIG_DFL back as it delivered this one.
        HANDLER[i].swap(0, Ordering::AcqRel)
    } else {
        HANDLER[i].load(Ordering::Acquire)
    };
    if h == 0 || h == libc::SIG_DFL || h == libc::SIG_IGN {
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the application installed `h` with SA_SIGINFO: a
        // `void (*)(int, siginfo_t *, void *)`, called with the kernel's
        // own arguments.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { core::mem::transmute::<usize, _>(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: installed without SA_SIGINFO: a `void (*)(int)`.
        let f: extern "C" fn(c_int) = unsafe { core::mem::transmute::<usize, _>(h) };
        f(sig);
    }
}

/// sigaction(2) with the handler behind [`trampoline`] (module
/// documentation). Errors as libc's (EINVAL for a bad signal number or
/// SIGKILL/SIGSTOP, EFAULT).
///
/// # Safety
/// As for libc's sigaction: `act` and `old` are null or valid.
unsafe fn install(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let i = usize::try_from(sig).ok().filter(|&i| i < NSIG);
    // SAFETY: null or a readable sigaction (the caller's promise).
    let new = unsafe { act.as_ref() }.copied();
    let before = i.map(|i| {
        (
            HANDLER[i].load(Ordering::Acquire),
            FLAGS[i].load(Ordering::Acquire),
        )
    });
    let mut kact = new;
    if let (Some(n), Some(i), Some(k)) = (new, i, kact.as_mut()) {
        if wraps(sig, n.sa_sigaction) {
            FLAGS[i].store(n.sa_flags, Ordering::Release);
            HANDLER[i].store(n.sa_sigaction, Ordering::Release);
            k.sa_sigaction = tramp();
            k.sa_flags |= libc::SA_SIGINFO;
        }
    }
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut kold: libc::sigaction = unsafe { core::mem::zeroed() };
    let kp = kact
        .as_ref()
        .map_or(core::ptr::null(), |k| k as *const libc::sigaction);
    // SAFETY: `kp` is null or our live copy, `kold` a live out-parameter.
    let r = unsafe { sys::sigaction(sig, kp, &mut kold) };
    if let (Some(i), Some((h0, f0))) = (i, before) {
        if r != 0 {
            // Refused: the table goes back to what the kernel still has.
            HANDLER[i].store(h0, Ordering::Release);
            FLAGS[i].store(f0, Ordering::Release);
            return r;
        }
        if let Some(n) = new {
            if !wraps(sig, n.sa_sigaction) {
                HANDLER[i].store(0, Ordering::Release);
            }
        }
        if kold.sa_sigaction == tramp() {
            kold.sa_sigaction = if h0 == 0 { libc::SIG_DFL } else { h0 };
            kold.sa_flags = f0;
        }
    }
    if r == 0 && !old.is_null() {
        // SAFETY: `old` is a writable sigaction (the caller's promise).
        unsafe { *old = kold };
    }
    r
}

/// sigaction(2).
///
/// # Safety
/// As for libc's.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the caller's pointers, passed on.
    unsafe { install(sig, act, old) }
}

/// glibc's `__sigaction`, the same call.
///
/// # Safety
/// As for libc's.
#[no_mangle]
pub unsafe extern "C" fn __sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the caller's pointers, passed on.
    unsafe { install(sig, act, old) }
}

/// A handler set as signal(3) variants do: `flags`, the mask `{sig}`
/// unless SA_NODEFER. Returns the previous handler, or SIG_ERR (errno set).
fn set_handler(sig: c_int, h: libc::sighandler_t, flags: c_int) -> libc::sighandler_t {
    // SAFETY: a zeroed sigaction is valid; sigemptyset/sigaddset write only
    // its mask.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = h;
    act.sa_flags = flags;
    // SAFETY: as above.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        if flags & libc::SA_NODEFER == 0 && sig > 0 {
            libc::sigaddset(&mut act.sa_mask, sig);
        }
    }
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: live copies on our stack.
    if unsafe { install(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// signal(3): BSD semantics, as glibc's (SA_RESTART, the signal blocked
/// in its handler).
#[no_mangle]
pub extern "C" fn signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    set_handler(sig, h, libc::SA_RESTART)
}

/// bsd_signal(3), as signal(3).
#[no_mangle]
pub extern "C" fn bsd_signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    set_handler(sig, h, libc::SA_RESTART)
}

/// sysv_signal(3): System V semantics (reset to SIG_DFL on delivery, not
/// blocked in its handler, no restart).
#[no_mangle]
pub extern "C" fn sysv_signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    set_handler(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER)
}

/// glibc's `__sysv_signal`, as sysv_signal(3).
#[no_mangle]
pub extern "C" fn __sysv_signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    set_handler(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER)
}

/// `SIG_HOLD` of sigset(3).
const SIG_HOLD: libc::sighandler_t = 2;

/// sigset(3): a disposition (flags 0, empty mask) and the signal unblocked,
/// or SIG_HOLD (the signal blocked, its disposition kept). Returns the previous
/// disposition, SIG_HOLD if the signal was blocked, or SIG_ERR.
#[no_mangle]
pub extern "C" fn sigset(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: sigset_t is plain bits; the calls write only our sets.
    let (blocked, set) = unsafe {
        let mut cur: libc::sigset_t = core::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, core::ptr::null(), &mut cur);
        let mut one: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, sig);
        (libc::sigismember(&cur, sig) == 1, one)
    };
    if h == SIG_HOLD {
        // SAFETY: a zeroed sigaction is a valid out-parameter; a null new
        // action only reads the disposition; the mask call adds one signal.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { install(sig, core::ptr::null(), &mut old) } != 0 {
            return libc::SIG_ERR;
        }
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, core::ptr::null_mut()) };
        return if blocked { SIG_HOLD } else { old.sa_sigaction };
    }
    // SAFETY: a zeroed sigaction is valid; sigemptyset writes its mask.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = h;
    // SAFETY: as above.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: live copies on our stack.
    if unsafe { install(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    // SAFETY: unblocks one signal from a valid set.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut()) };
    if blocked {
        SIG_HOLD
    } else {
        old.sa_sigaction
    }
}
