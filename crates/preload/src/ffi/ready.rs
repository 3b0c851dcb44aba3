//! Readiness: poll, select, epoll.

use super::*;

pub(super) unsafe fn poll_impl(
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
pub unsafe extern "C-unwind" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    crate::cancel::point(|| {
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
    })
}

pub(super) fn ts_deadline(ts: *const timespec) -> R<Deadline> {
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
pub unsafe extern "C-unwind" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    crate::cancel::point(|| {
        let Ok(deadline) = ts_deadline(ts) else {
            // SAFETY: passed through (the kernel reports the bad timespec).
            return unsafe { sys::ppoll(fds, n, ts, mask) };
        };
        // SAFETY: the caller's pollfds, passed on.
        unsafe { poll_impl(fds, n, deadline, mask, || sys::ppoll(fds, n, ts, mask)) }
    })
}

/// __poll_chk: poll with glibc's fortify check of the array size.
#[no_mangle]
pub unsafe extern "C-unwind" fn __poll_chk(
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
pub unsafe extern "C-unwind" fn __ppoll_chk(
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

pub(super) unsafe fn set_words<'a>(s: *mut fd_set) -> Option<&'a mut [u64; 16]> {
    if s.is_null() {
        return None;
    }
    // SAFETY: glibc's fd_set is 1024 bits in 16 64-bit words, 8-aligned;
    // the caller promises it is writable.
    Some(unsafe { &mut *(s as *mut [u64; 16]) })
}

/// True when the shim serves a select on the first `n` fds of `sets`: the
/// call is the application's, `n` is 0..=1024, and a set holds a corestack
/// socket. Otherwise the call is libc's.
///
/// # Safety
/// Each of `sets` is null or a writable fd_set.
pub(super) unsafe fn select_served(n: c_int, sets: [*mut fd_set; 3]) -> bool {
    if sys::inside() || !(0..=1024).contains(&n) {
        return false;
    }
    let n = n as usize;
    for s in sets {
        // SAFETY: as set_words.
        if let Some(w) = unsafe { set_words(s) } {
            for fd in 0..n {
                if w[fd / 64] >> (fd % 64) & 1 == 1 && obj::sock(fd as c_int).is_some() {
                    return true;
                }
            }
        }
    }
    false
}

/// [`mux::select`] over the read, write and error sets (`sets`, each null
/// or an fd_set) of fds 0..`n` until `deadline`, with signal mask `mask`
/// while asleep: the count of ready bits left set.
///
/// # Safety
/// As [`select_served`], with `n` in 0..=1024.
unsafe fn select_sets(
    n: c_int,
    [r, w, e]: [*mut fd_set; 3],
    deadline: Deadline,
    mask: Option<&sigset_t>,
) -> R<c_int> {
    // SAFETY: the caller's sets.
    let (r, w, e) = unsafe { (set_words(r), set_words(w), set_words(e)) };
    mux::select(n as usize, r, w, e, deadline, mask).map(|c| c as c_int)
}

/// select(2) over kernel fds and corestack sockets; the timeout is updated
/// with the time left, as Linux does.
#[no_mangle]
pub unsafe extern "C-unwind" fn select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    tv: *mut timeval,
) -> c_int {
    crate::cancel::point(|| {
        // SAFETY: the caller's sets.
        if !unsafe { select_served(n, [r, w, e]) } {
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
            let res = unsafe { select_sets(n, [r, w, e], deadline, None) };
            if !tv.is_null() {
                let left = deadline.left().unwrap_or_default();
                // SAFETY: as above, writable.
                unsafe {
                    (*tv).tv_sec = left.as_secs() as libc::time_t;
                    (*tv).tv_usec = left.subsec_micros() as libc::suseconds_t;
                }
            }
            res
        })
    })
}

/// pselect(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn pselect(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    crate::cancel::point(|| {
        // SAFETY: the caller's sets.
        if !unsafe { select_served(n, [r, w, e]) } {
            // SAFETY: passed through.
            return unsafe { sys::pselect(n, r, w, e, ts, mask) };
        }
        run(|| {
            let deadline = ts_deadline(ts)?;
            // SAFETY: null or a readable sigset.
            let mask = unsafe { mask.as_ref() };
            // SAFETY: the caller's sets.
            unsafe { select_sets(n, [r, w, e], deadline, mask) }
        })
    })
}

/// __fdelt_chk: glibc's FD_SET bounds check (the fds are kernel numbers,
/// so the real one applies as is).
#[no_mangle]
pub unsafe extern "C" fn __fdelt_chk(d: c_long) -> c_long {
    // SAFETY: no pointers.
    unsafe { sys::__fdelt_chk(d) }
}

pub(super) fn new_epoll(fd: c_int) -> c_int {
    if fd >= 0 {
        drop(obj::forget(fd));
        if !sys::inside() && stack::active() {
            let ep = Epoll::default();
            ep.add_fd(fd);
            if let Ok(old) = obj::install(fd, Arc::new(Obj::Epoll(ep))) {
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
        return kernel_epoll_ctl(epfd, op, unsafe { sys::epoll_ctl(epfd, op, fd, ev) });
    };
    let ep = ours(epfd);
    match (&*target, ep.as_deref()) {
        (Obj::Sock(s), Some(Obj::Epoll(e))) => run_quiet(|| {
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
        _ => kernel_epoll_ctl(epfd, op, unsafe { sys::epoll_ctl(epfd, op, fd, ev) }),
    }
}

/// After the kernel's epoll_ctl(2) `op` on `epfd` returned `r`: counts the
/// registration in the shim's epoll (if `epfd` is one) when it succeeded,
/// so that its waits know whether the kernel side holds anything of the
/// application's ([`crate::epoll::Epoll::kernel_ctl`]). Returns `r`.
fn kernel_epoll_ctl(epfd: c_int, op: c_int, r: c_int) -> c_int {
    if r == 0 && (op == libc::EPOLL_CTL_ADD || op == libc::EPOLL_CTL_DEL) {
        let errno = sys::errno();
        if let Some(o) = ours(epfd) {
            if let Obj::Epoll(e) = &*o {
                e.kernel_ctl(op);
            }
        }
        sys::set_errno(errno);
    }
    r
}

pub(super) unsafe fn epoll_wait_impl(
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
pub unsafe extern "C-unwind" fn epoll_wait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    crate::cancel::point(|| {
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
    })
}

/// epoll_pwait(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_pwait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    crate::cancel::point(|| {
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
    })
}

/// epoll_pwait2(2).
#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_pwait2(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    crate::cancel::point(|| {
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
    })
}
