//! A signal that arrives while a call spins in user space (review finding
//! 11, EINTR).

use super::*;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Handler runs.
static HANDLED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_usr1(_: c_int) {
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

/// Installs `on_usr1` for SIGUSR1, with SA_RESTART or without.
fn handle_usr1(restart: bool) {
    // SAFETY: sigaction is plain data; all zero is an empty mask and no flags.
    let mut sa: libc::sigaction = unsafe { core::mem::zeroed() };
    sa.sa_sigaction = on_usr1 as extern "C" fn(c_int) as libc::sighandler_t;
    sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
    // SAFETY: `sa` is a live sigaction whose handler only bumps an atomic.
    let r = unsafe { libc::sigaction(libc::SIGUSR1, &sa, core::ptr::null_mut()) };
    assert_eq!(r, 0);
}

/// How a call ended: its result, errno, and when it returned.
struct Ended {
    r: isize,
    err: c_int,
    at: Instant,
}

/// Runs `call` on a new thread; once the thread is inside it, waits
/// `into_spin` (well inside [`SPIN`]), sends the thread SIGUSR1, and
/// returns how the call ended and when the signal was sent.
fn signal_during(
    into_spin: Duration,
    call: impl FnOnce() -> isize + Send + 'static,
) -> (Ended, Instant) {
    let entered = Arc::new(AtomicBool::new(false));
    let flag = entered.clone();
    let t = spawn(move || {
        flag.store(true, Ordering::SeqCst);
        let r = call();
        Ended {
            r,
            err: errno(),
            at: Instant::now(),
        }
    });
    let t0 = Instant::now();
    while !entered.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::yield_now();
    }
    std::thread::sleep(into_spin);
    let sent = Instant::now();
    // SAFETY: the thread is alive until joined below; SIGUSR1 has a handler.
    let r = unsafe { libc::pthread_kill(t.as_pthread_t(), libc::SIGUSR1) };
    assert_eq!(r, 0);
    (t.join().expect("the waiting thread"), sent)
}

/// Finding 11: SIGUSR1 delivered while `recv`, `poll` and `epoll_wait`
/// spin in user space (the first [`SPIN`] of the wait) makes them return
/// -1 EINTR at once, as the kernel's sleep would, for a handler without
/// SA_RESTART; `poll` and `epoll_wait` never restart, so with it too, and
/// neither does a `recv` on a socket with SO_RCVTIMEO (signal(7)). Before
/// the fix the handler ran, the spin went on, and the call slept its whole
/// timeout (3 s here). Then `recv` without a timeout after a handler with
/// SA_RESTART goes on and returns the data that comes later, also in this
/// process, whose Rust runtime handles SIGSEGV and SIGBUS without
/// SA_RESTART (before `sys::restart_after_signal` left the fault signals
/// out, it answered EINTR).
#[test]
fn a_signal_during_the_spin_interrupts_recv_poll_and_epoll_wait() {
    let _g = serial();
    let c = echo_conn();
    set_rcvtimeo(c.0, 3, 0);
    // SAFETY: no pointers.
    let ep = Fd(unsafe { crate::ffi::ready::epoll_create1(0) });
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 1,
    };
    // SAFETY: `ev` is a live epoll_event.
    let r = unsafe { crate::ffi::ready::epoll_ctl(ep.0, libc::EPOLL_CTL_ADD, c.0, &mut ev) };
    assert_eq!(r, 0);
    let (fd, epfd) = (c.0, ep.0);
    let into_spin = SPIN / 4;
    // Far below the 3 s the calls wait when the signal is lost.
    let quick = Duration::from_secs(1);

    type Call = fn(c_int, c_int) -> isize;
    let calls: [(&str, bool, Call); 4] = [
        ("recv", false, |fd, _| {
            let mut b = [0u8; 8];
            recv(fd, &mut b, 0)
        }),
        ("poll", false, |fd, _| {
            poll1(fd, libc::POLLIN, 3000).0 as isize
        }),
        ("epoll_wait", false, |_, ep| {
            let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
            // SAFETY: `ev` holds 4 writable epoll_events.
            unsafe { crate::ffi::ready::epoll_wait(ep, ev.as_mut_ptr(), 4, 3000) as isize }
        }),
        ("poll with SA_RESTART", true, |fd, _| {
            poll1(fd, libc::POLLIN, 3000).0 as isize
        }),
    ];
    for (name, restart, call) in calls {
        handle_usr1(restart);
        let before = HANDLED.load(Ordering::SeqCst);
        let (e, sent) = signal_during(into_spin, move || call(fd, epfd));
        let after = e.at.saturating_duration_since(sent);
        assert_eq!(
            HANDLED.load(Ordering::SeqCst),
            before + 1,
            "{name}: the handler"
        );
        assert_eq!((e.r, e.err), (-1, libc::EINTR), "{name} after {after:?}");
        assert!(
            after < quick,
            "{name}: EINTR only {after:?} after the signal"
        );
    }

    // With SO_RCVTIMEO set, recv is never restarted (signal(7)).
    handle_usr1(true);
    let (e, sent) = signal_during(into_spin, move || {
        let mut b = [0u8; 8];
        recv(fd, &mut b, 0)
    });
    let after = e.at.saturating_duration_since(sent);
    assert_eq!(
        (e.r, e.err),
        (-1, libc::EINTR),
        "recv with a timeout, SA_RESTART"
    );
    assert!(after < quick, "EINTR only {after:?} after the signal");

    // Without it, after SA_RESTART recv goes on and returns the echo of
    // what is sent later.
    set_rcvtimeo(fd, 0, 0);
    let before = HANDLED.load(Ordering::SeqCst);
    let sender = spawn(move || {
        std::thread::sleep(SPIN);
        send(fd, b"r")
    });
    let (e, _) = signal_during(into_spin, move || {
        let mut b = [0u8; 8];
        recv(fd, &mut b, 0)
    });
    assert_eq!(sender.join().expect("the sending thread"), 1);
    assert_eq!(
        HANDLED.load(Ordering::SeqCst),
        before + 1,
        "restart: the handler"
    );
    assert_eq!(e.r, 1, "recv with SA_RESTART: errno {}", e.err);
}

/// The handler the kernel holds for `sig`, asked past libc (the
/// kernel_sigaction layout starts with the handler).
fn kernel_handler(sig: c_int) -> libc::sighandler_t {
    let mut raw = [0usize; 4];
    // SAFETY: `raw` is larger than the kernel's struct (handler, flags,
    // restorer, an 8-byte mask); a null new action only reads.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            core::ptr::null::<u8>(),
            raw.as_mut_ptr(),
            8,
        )
    };
    assert_eq!(r, 0);
    raw[0]
}

/// The shim's sigaction puts a handler behind its counting trampoline:
/// the kernel holds the trampoline (asked by the raw system call), the
/// application's queries see its own handler and flags, a raised signal
/// runs the handler once and moves the thread's count (without SA_RESTART:
/// both counts), and SIG_DFL takes the handler out again.
#[test]
fn sigaction_counts_handlers_behind_a_trampoline_and_answers_with_the_applications() {
    let _g = serial();
    handle_usr1(false);
    // SAFETY: a zeroed sigaction is a valid out-parameter; a null new
    // action only reads.
    let mut seen: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::sigaction(libc::SIGUSR1, core::ptr::null(), &mut seen) };
    assert_eq!(r, 0);
    assert_eq!(
        seen.sa_sigaction,
        on_usr1 as extern "C" fn(c_int) as libc::sighandler_t
    );
    assert_eq!(seen.sa_flags & (libc::SA_SIGINFO | libc::SA_RESTART), 0);
    assert_ne!(
        kernel_handler(libc::SIGUSR1),
        seen.sa_sigaction,
        "the kernel holds the trampoline"
    );
    let (ran0, hard0) = crate::ffi::signal::handlers_run();
    let before = HANDLED.load(Ordering::SeqCst);
    // SAFETY: SIGUSR1 has a handler that only bumps an atomic.
    assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
    assert_eq!(HANDLED.load(Ordering::SeqCst), before + 1);
    assert_eq!(crate::ffi::signal::handlers_run(), (ran0 + 1, hard0 + 1));
    // signal(3) answers with the application's handler, and SIG_DFL goes
    // to the kernel as it is.
    let prev = crate::ffi::signal::signal(libc::SIGUSR1, libc::SIG_DFL);
    assert_eq!(prev, on_usr1 as extern "C" fn(c_int) as libc::sighandler_t);
    assert_eq!(kernel_handler(libc::SIGUSR1), libc::SIG_DFL);
}
