//! The one system call the client makes itself.

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
