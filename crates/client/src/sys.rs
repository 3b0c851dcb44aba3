//! The system calls the client makes itself: the only module of the crate
//! with `unsafe` code.
#![allow(unsafe_code)]

use core::time::Duration;
use std::os::fd::RawFd;

/// Sleeps until `fd` is readable or `timeout` passes (poll(2)); errors
/// (EINTR, a closed fd) just end the wait early.
pub fn wait_readable(fd: RawFd, timeout: Duration) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `pfd` is a valid pollfd on our stack for the duration of the
    // call and we pass a count of 1; poll only reads fd/events and writes
    // revents.
    unsafe {
        libc::poll(&mut pfd, 1, ms);
    }
}

/// Sleeps until one of `fds` is readable or `timeout` passes (poll(2));
/// errors just end the wait early. At most 4 fds.
pub fn wait_readable_any(fds: &[RawFd], timeout: Duration) {
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 4];
    let n = fds.len().min(pfds.len());
    for (p, fd) in pfds.iter_mut().zip(&fds[..n]) {
        p.fd = *fd;
    }
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `pfds` is an array on our stack with at least `n` valid
    // entries; poll only reads fd/events and writes revents.
    unsafe {
        libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, ms);
    }
}

/// True when `fd` is readable, hung up or in error right now (poll(2)
/// with a zero timeout: never blocks); false otherwise and on errors.
pub fn readable_or_hung_up(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on our stack; a zero timeout never blocks.
    let r = unsafe { libc::poll(&mut pfd, 1, 0) };
    r > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

/// Pins the calling thread to `cpu` (sched_setaffinity); a CPU that does
/// not exist or is not allowed leaves the thread as it was.
pub fn pin_current_thread(cpu: usize) {
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: cpu_set_t is plain bits, valid when zeroed; CPU_SET writes
    // inside it (cpu < CPU_SETSIZE checked); sched_setaffinity(0, ..) reads
    // the set for the calling thread and reports errors by return value.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// How many CPUs the calling thread may run on (sched_getaffinity); None
/// when the call fails.
pub fn allowed_cpus() -> Option<usize> {
    // SAFETY: cpu_set_t is plain bits, valid when zeroed; sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it and reports errors
    // by return value; CPU_COUNT only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        if libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(libc::CPU_COUNT(&set) as usize)
    }
}

/// Sleeps until `fd` is readable or `timeout` passes (poll(2), at least
/// 1 ms); returns true when a signal handler interrupted it (EINTR).
pub fn sleep_readable(fd: RawFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd on our stack; poll writes only its revents.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
}
