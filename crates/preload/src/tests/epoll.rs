//! epoll over a set that held no corestack socket, and the shim's own fds
//! (review findings 1 and 2).

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The application's `data` of the epoll registrations.
const SOCK_ADD: u64 = 77;
const SOCK_MOD: u64 = 78;
const PIPE: u64 = 5;

fn epoll_create() -> Fd {
    // SAFETY: no pointers.
    let ep = unsafe { crate::ffi::ready::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0, "epoll_create1: errno {}", errno());
    Fd(ep)
}

fn ctl(ep: c_int, op: c_int, fd: c_int, events: u32, data: u64) -> c_int {
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: `ev` is a live epoll_event.
    unsafe { crate::ffi::ready::epoll_ctl(ep, op, fd, &mut ev) }
}

/// epoll_wait(2) through the shim: the events (or the errno) and how long it took.
fn wait(ep: c_int, ms: c_int) -> (Result<Vec<(u32, u64)>, c_int>, Duration) {
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 8];
    let t0 = Instant::now();
    // SAFETY: `ev` holds 8 writable epoll_events.
    let n = unsafe { crate::ffi::ready::epoll_wait(ep, ev.as_mut_ptr(), 8, ms) };
    let took = t0.elapsed();
    if n < 0 {
        return (Err(errno()), took);
    }
    let got = ev[..n as usize].iter().map(|e| (e.events, e.u64)).collect();
    (Ok(got), took)
}

/// Runs `epoll_wait(ep, 5 s)` on another thread, lets it fall asleep for
/// `asleep`, runs `op` here, and returns what the wait gave and how long
/// it took.
fn wait_across(
    ep: c_int,
    asleep: Duration,
    op: impl FnOnce() -> c_int,
) -> (Result<Vec<(u32, u64)>, c_int>, Duration) {
    let waiter = spawn(move || wait(ep, 5000));
    std::thread::sleep(asleep);
    assert_eq!(op(), 0, "epoll_ctl: errno {}", errno());
    waiter.join().expect("the waiting thread")
}

/// A pipe through the shim: (read end, write end).
fn pipe() -> (Fd, Fd) {
    let mut p = [-1 as c_int; 2];
    // SAFETY: `p` has room for two fds.
    assert_eq!(unsafe { crate::ffi::lifecycle::pipe(p.as_mut_ptr()) }, 0);
    (Fd(p[0]), Fd(p[1]))
}

/// A fresh epoll set holding a fresh pipe's read end for EPOLLIN (data
/// [`PIPE`]): (the set, read end, write end).
fn epoll_with_pipe() -> (Fd, Fd, Fd) {
    let (r, w) = pipe();
    let ep = epoll_create();
    assert_eq!(
        ctl(ep.0, libc::EPOLL_CTL_ADD, r.0, libc::EPOLLIN as u32, PIPE),
        0
    );
    (ep, r, w)
}

/// A connection to the echo with `b"x"`'s echo waiting in it (readable).
fn readable_conn() -> Fd {
    let c = echo_conn();
    assert_eq!(send(c.0, b"x"), 1);
    assert_eq!(poll1(c.0, libc::POLLIN, 3000), (1, libc::POLLIN));
    c
}

/// Finding 1: a thread asleep in `epoll_wait` on a set that holds no
/// corestack socket (only a pipe) wakes when another thread adds a ready
/// corestack socket with EPOLL_CTL_ADD, and again when it re-arms an
/// EPOLLONESHOT registration with EPOLL_CTL_MOD (epoll_wait(2): a newly
/// added ready fd unblocks the wait). Before the fix the first waiter slept
/// in the plain kernel call for its whole 5 s.
#[test]
fn ctl_add_and_mod_from_another_thread_wake_a_sleeping_epoll_wait() {
    let _g = serial();
    let c = readable_conn();
    let (ep, _r, _w) = epoll_with_pipe();
    let oneshot = (libc::EPOLLIN | libc::EPOLLONESHOT) as u32;

    let (got, took) = wait_across(ep.0, Duration::from_millis(300), || {
        ctl(ep.0, libc::EPOLL_CTL_ADD, c.0, oneshot, SOCK_ADD)
    });
    let got = got.expect("epoll_wait");
    assert_eq!(got.len(), 1, "ADD: {got:?} after {took:?}");
    assert_eq!(got[0].1, SOCK_ADD);
    assert_ne!(got[0].0 & libc::EPOLLIN as u32, 0);
    assert!(
        took < Duration::from_millis(1500),
        "ADD woke it only after {took:?}"
    );

    // The ONESHOT registration is disabled now: a look without waiting
    // reports nothing, then a waiter sleeps past the spin and MOD re-arms it.
    assert_eq!(wait(ep.0, 0).0, Ok(vec![]));
    let (got, took) = wait_across(ep.0, SPIN * 2, || {
        ctl(ep.0, libc::EPOLL_CTL_MOD, c.0, oneshot, SOCK_MOD)
    });
    let got = got.expect("epoll_wait");
    assert_eq!(got.len(), 1, "MOD: {got:?} after {took:?}");
    assert_eq!(got[0].1, SOCK_MOD);
    assert!(
        took < SPIN * 2 + Duration::from_millis(1500),
        "MOD woke it only after {took:?}"
    );
}

/// Finding 2: once the last corestack registration is deleted, the
/// shim's own fds in the application's kernel epoll (the wake eventfd,
/// whose data is the shim's token) never come out of `epoll_wait`:
/// neither while traffic moves on the deleted socket, nor while another
/// thread adds and deletes a corestack socket around the waits (each ADD
/// writes the wake eventfd for the sleeping waiter). Only the
/// application's own data comes back, and the pipe is still reported.
#[test]
fn after_the_last_corestack_registration_goes_the_shims_fds_never_come_out() {
    let _g = serial();
    let c = readable_conn();
    let (ep, _r, w) = epoll_with_pipe();
    assert_eq!(
        ctl(
            ep.0,
            libc::EPOLL_CTL_ADD,
            c.0,
            libc::EPOLLIN as u32,
            SOCK_ADD
        ),
        0
    );
    // A waiter that slept with the socket in the set (the wake eventfd armed).
    let (got, _) = wait(ep.0, 1000);
    assert_eq!(
        got.map(|g| g.iter().map(|e| e.1).collect::<Vec<_>>()),
        Ok(vec![SOCK_ADD])
    );
    assert_eq!(ctl(ep.0, libc::EPOLL_CTL_DEL, c.0, 0, 0), 0);

    let foreign = |g: &[(u32, u64)]| g.iter().any(|e| e.1 != SOCK_ADD && e.1 != PIPE);
    let mut b = [0u8; 64];
    // Traffic on the deleted socket, the set holding only the pipe.
    for round in 0..5 {
        let _ = recv(c.0, &mut b, libc::MSG_DONTWAIT);
        assert_eq!(send(c.0, b"y"), 1);
        let (got, _) = wait(ep.0, 100);
        let got = got.expect("epoll_wait");
        assert!(
            got.is_empty(),
            "round {round}: after DEL the wait returned {got:?}"
        );
        let _ = poll1(c.0, libc::POLLIN, 1000);
    }
    let _ = recv(c.0, &mut b, libc::MSG_DONTWAIT);

    // Another thread adds and deletes the (idle) socket while this one
    // waits: its pokes of the wake eventfd must stay inside the shim.
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (stop, ep, c) = (stop.clone(), ep.0, c.0);
        spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 2000 {
                ctl(ep, libc::EPOLL_CTL_ADD, c, libc::EPOLLIN as u32, SOCK_ADD);
                std::thread::sleep(Duration::from_micros(300));
                ctl(ep, libc::EPOLL_CTL_DEL, c, 0, 0);
                std::thread::sleep(Duration::from_micros(300));
                n += 1;
            }
        })
    };
    let mut waits = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(500) {
        let (got, _) = wait(ep.0, 20);
        let got = got.expect("epoll_wait");
        assert!(!foreign(&got), "the shim's own event came out: {got:?}");
        waits += 1;
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().expect("the churning thread");
    assert!(waits > 5);
    // Left deleted (the churn ends with DEL or never added): the pipe alone.
    let _ = ctl(ep.0, libc::EPOLL_CTL_DEL, c.0, 0, 0);
    assert_eq!(write(w.0, b"p"), 1);
    let (got, _) = wait(ep.0, 1000);
    assert_eq!(got, Ok(vec![(libc::EPOLLIN as u32, PIPE)]));
}
