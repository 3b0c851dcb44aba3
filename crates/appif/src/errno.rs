//! The errno values corestack reports to applications, in one place.
//!
//! The engine writes them into a socket's status block (the error word read
//! by [`crate::socket::StatusBlock::take_error`]) and the daemon into a
//! refused [`crate::ctl::Welcome`]; the client turns them into
//! `std::io::Error` with [`io`]. They are Linux's values (asm-generic/errno.h,
//! taken from `libc`), with the meaning the Linux socket calls give them, so
//! an application sees what it would see on the kernel stack.

/// `EACCES`: the daemon does not allow this application the port (its
/// `[ports]` configuration), or refuses its user.
pub const EACCES: i32 = libc::EACCES;
/// `EPERM`: a forked child's claim on its parent's association (hello) or
/// listener (join) does not check out.
pub const EPERM: i32 = libc::EPERM;
/// `EBADF`: the socket id is in use already.
pub const EBADF: i32 = libc::EBADF;
/// `EADDRINUSE`: another socket already has the local port (or the
/// 4-tuple), or no ephemeral port is free for a bind.
pub const EADDRINUSE: i32 = libc::EADDRINUSE;
/// `EADDRNOTAVAIL`: the local address is not the stack's, or no ephemeral
/// port is free for a connect (as on Linux).
pub const EADDRNOTAVAIL: i32 = libc::EADDRNOTAVAIL;
/// `ECONNREFUSED`: the peer answered the SYN with a RST (RFC 9293 §3.10.7.3).
pub const ECONNREFUSED: i32 = libc::ECONNREFUSED;
/// `ECONNRESET`: the peer reset the connection, or the stack did (its
/// application's association was dropped, the engine or daemon shut down).
pub const ECONNRESET: i32 = libc::ECONNRESET;
/// `EEXIST`: the source is already registered with this poller.
pub const EEXIST: i32 = libc::EEXIST;
/// `EINVAL`: an argument the call cannot take (a bad hello, a zero-length
/// request, an option out of range).
pub const EINVAL: i32 = libc::EINVAL;
/// `EMFILE`: no free socket slot in the application's segment, or the
/// daemon has no room for another application.
pub const EMFILE: i32 = libc::EMFILE;
/// `EMSGSIZE`: a UDP datagram larger than fits in one IPv4 packet on the
/// link's MTU (no fragmentation on send).
pub const EMSGSIZE: i32 = libc::EMSGSIZE;
/// `ENETUNREACH`: the destination is neither on the link nor behind a
/// configured gateway.
pub const ENETUNREACH: i32 = libc::ENETUNREACH;
/// `ENETDOWN`: the socket belongs to a stack this process cannot use (a
/// forked child's copy of a connection another process took over).
pub const ENETDOWN: i32 = libc::ENETDOWN;
/// `ENOBUFS`: the engine's socket table is full.
pub const ENOBUFS: i32 = libc::ENOBUFS;
/// `ENOENT`: the source is not registered with this poller.
pub const ENOENT: i32 = libc::ENOENT;
/// `ENOTCONN`: the stream is not connected (yet).
pub const ENOTCONN: i32 = libc::ENOTCONN;
/// `EPIPE`: writing after `shutdown(Write)` or after the connection closed.
pub const EPIPE: i32 = libc::EPIPE;
/// `ETIMEDOUT`: retransmissions or keepalive probes went unanswered
/// (RFC 9293 §3.8.3 R2, RFC 1122 §4.2.3.6).
pub const ETIMEDOUT: i32 = libc::ETIMEDOUT;

/// The `io::Error` std returns for errno `e` (its `raw_os_error()` is `e`).
pub fn io(e: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_linux_asm_generic_ones() {
        // Applications compare against these numbers; they must not drift.
        assert_eq!((ECONNRESET, ECONNREFUSED, ETIMEDOUT), (104, 111, 110));
        assert_eq!(
            (EADDRINUSE, EADDRNOTAVAIL, ENETUNREACH, ENOBUFS),
            (98, 99, 101, 105)
        );
        assert_eq!((EPIPE, ENOTCONN, EINVAL, EMSGSIZE), (32, 107, 22, 90));
        assert_eq!(io(ECONNRESET).kind(), std::io::ErrorKind::ConnectionReset);
    }
}
