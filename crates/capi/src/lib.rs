//! The corestack C API: `libcorestack.so` behind `include/corestack.h`.
//!
//! Socket-like calls on small integer descriptors (`cs_socket`, `cs_bind`,
//! `cs_listen`, `cs_accept`, `cs_connect`, `cs_send`, `cs_recv`, ...) and
//! an epoll-like readiness API (`cs_poller_*`), over the Rust library
//! (`corestack`: `TcpListener`, `TcpStream`, `UdpSocket`, `Poller`).
//!
//! Contract, for every exported function:
//! - failure returns -1 (or a null/void where documented) and sets `errno`
//!   to one value from the function's doc; `cs_last_error()` gives a
//!   one-line message on it;
//! - a null pointer where one is needed is EFAULT, an unknown descriptor
//!   EBADF, a call before `cs_init` ENETDOWN (EBADF for descriptor calls);
//! - no panic crosses into C: a caught one is EIO;
//! - calls are thread-safe; signals do not interrupt them (no EINTR).
//!
//! One stack per process, started by `cs_init` from the environment
//! (see [`init`]). Descriptors are not kernel fds.
//!
//! The header's constants are checked against the ones here by a test.
#![deny(missing_docs)]

mod error;
mod ffi;
pub mod init;
pub mod poll;
pub mod socket;
mod table;

pub use ffi::CsEvent;
pub use table::MAX_DESCRIPTORS;

use std::ffi::c_int;

/// `cs_socket` type: TCP (equal to Linux SOCK_STREAM).
pub const CS_SOCK_STREAM: c_int = 1;
/// `cs_socket` type: UDP (equal to Linux SOCK_DGRAM).
pub const CS_SOCK_DGRAM: c_int = 2;

/// Send/receive flag: do not wait (equal to Linux MSG_DONTWAIT).
pub const CS_MSG_DONTWAIT: c_int = 0x40;
/// Send flag accepted for portability; the library never raises SIGPIPE
/// (equal to Linux MSG_NOSIGNAL).
pub const CS_MSG_NOSIGNAL: c_int = 0x4000;

/// `cs_shutdown`: the read side (equal to SHUT_RD).
pub const CS_SHUT_RD: c_int = 0;
/// `cs_shutdown`: the write side, sends FIN (equal to SHUT_WR).
pub const CS_SHUT_WR: c_int = 1;
/// `cs_shutdown`: both sides (equal to SHUT_RDWR).
pub const CS_SHUT_RDWR: c_int = 2;

/// Readiness: readable (equal to EPOLLIN).
pub const CS_POLLIN: u32 = 0x001;
/// Readiness: writable (equal to EPOLLOUT).
pub const CS_POLLOUT: u32 = 0x004;
/// Readiness: the connection is closed (equal to EPOLLHUP).
pub const CS_POLLHUP: u32 = 0x010;

/// `cs_poller_ctl`: start watching (equal to EPOLL_CTL_ADD).
pub const CS_POLL_ADD: c_int = 1;
/// `cs_poller_ctl`: stop watching (equal to EPOLL_CTL_DEL).
pub const CS_POLL_DEL: c_int = 2;
/// `cs_poller_ctl`: change what is watched (equal to EPOLL_CTL_MOD).
pub const CS_POLL_MOD: c_int = 3;

#[cfg(test)]
mod tests;
