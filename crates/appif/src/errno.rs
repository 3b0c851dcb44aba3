//! The errno values corestack reports to applications, and the one map
//! between them and `std::io::Error`.
//!
//! The engine writes them into a socket's status block (the error word read
//! by [`crate::socket::StatusBlock::take_error`]) and the daemon into a
//! refused [`crate::ctl::Welcome`]; the client turns them into
//! `std::io::Error` with [`io()`], and the C API and the shim turn an
//! `io::Error` back into an errno with [`of`]. They are Linux's values
//! (asm-generic/errno.h, taken from `libc`), with the meaning the Linux
//! socket calls give them, so an application sees what it would see on the
//! kernel stack. Each constant's doc says who reports it and when.
//!
//! The C API and the shim also return errnos that are decided at the call
//! (`EINVAL` for a bad argument, `ENOPROTOOPT` for an unknown option): those
//! follow the Linux man page of the call and are written there.

use std::io::{self, ErrorKind};

/// An errno value, as Linux numbers it (a C `int`; 0 is no error).
pub type Errno = i32;

/// Declares each errno as a constant (Linux's value, from `libc`) and lists
/// them all in [`ALL`] with their names.
macro_rules! errnos {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        $($(#[$doc])* pub const $name: Errno = libc::$name;)*

        /// Every errno of this module with its name, in alphabetical order.
        pub const ALL: &[(Errno, &str)] = &[$(($name, stringify!($name))),*];
    };
}

errnos! {
    /// `EACCES`: the daemon does not allow this application the port (its
    /// `[ports]` configuration), or refuses its user.
    EACCES,
    /// `EADDRINUSE`: another socket already has the local port (or the
    /// 4-tuple), or no ephemeral port is free for a bind.
    EADDRINUSE,
    /// `EADDRNOTAVAIL`: the local address is not the stack's, or no ephemeral
    /// port is free for a connect (as on Linux).
    EADDRNOTAVAIL,
    /// `EAGAIN` (= `EWOULDBLOCK`): a nonblocking call would have to wait
    /// (`ErrorKind::WouldBlock`, which the client returns without an errno).
    EAGAIN,
    /// `EBADF`: the socket id is in use already, or a UDP socket was closed.
    EBADF,
    /// `ECONNABORTED`: [`of`]'s errno for `ErrorKind::ConnectionAborted`; the
    /// stack itself reports a connection it ended as [`ECONNRESET`].
    ECONNABORTED,
    /// `ECONNREFUSED`: the peer answered the SYN with a RST (RFC 9293 §3.10.7.3).
    ECONNREFUSED,
    /// `ECONNRESET`: the peer reset the connection, or the stack did (its
    /// application's association was dropped, the engine or daemon shut down).
    ECONNRESET,
    /// `EEXIST`: the source is already registered with this poller.
    EEXIST,
    /// `EINTR`: a blocking call was interrupted by a signal
    /// (`ErrorKind::Interrupted`).
    EINTR,
    /// `EINVAL`: an argument the call cannot take (a bad hello, a zero-length
    /// request, an option out of range; `ErrorKind::InvalidInput`, such as a
    /// stack builder without an address).
    EINVAL,
    /// `EIO`: a failure with no errno of its own (any `ErrorKind` that [`of`]
    /// does not name); at the C API also a caught panic.
    EIO,
    /// `EMFILE`: no free socket slot in the application's segment, or the
    /// daemon has no room for another application.
    EMFILE,
    /// `EMSGSIZE`: a UDP datagram larger than fits in one IPv4 packet on the
    /// link's MTU (no fragmentation on send).
    EMSGSIZE,
    /// `ENETDOWN`: the socket belongs to a stack this process cannot use (a
    /// forked child's copy of a connection another process took over, a stack
    /// that is not a service-mode one), or the shim could not start its stack.
    ENETDOWN,
    /// `ENETUNREACH`: the destination is neither on the link nor behind a
    /// configured gateway.
    ENETUNREACH,
    /// `ENOBUFS`: the engine's socket table is full.
    ENOBUFS,
    /// `ENODEV`: the network interface to run on does not exist (the NIC
    /// reports it as `ErrorKind::NotFound`; Linux says ENODEV for a missing
    /// device, e.g. `SO_BINDTODEVICE`).
    ENODEV,
    /// `ENOENT`: the source is not registered with this poller, or the daemon
    /// holds no connection lent under an fd's key.
    ENOENT,
    /// `ENOMEM`: out of memory (`ErrorKind::OutOfMemory`).
    ENOMEM,
    /// `ENOTCONN`: the stream is not connected (yet).
    ENOTCONN,
    /// `EOPNOTSUPP`: the call needs another mode of the stack (taking over a
    /// lent connection outside service mode; `ErrorKind::Unsupported`).
    EOPNOTSUPP,
    /// `EPERM`: a forked child's claim on its parent's association (hello) or
    /// listener (join) does not check out. Also [`of`]'s errno for
    /// `ErrorKind::PermissionDenied` (no rights to the interface).
    EPERM,
    /// `EPIPE`: writing after `shutdown(Write)` or after the connection closed.
    EPIPE,
    /// `EPROTO`: the daemon's answer or a shared segment does not decode
    /// (`ErrorKind::InvalidData`, such as a truncated control message).
    EPROTO,
    /// `ETIMEDOUT`: retransmissions or keepalive probes went unanswered
    /// (RFC 9293 §3.8.3 R2, RFC 1122 §4.2.3.6).
    ETIMEDOUT,
}

/// The name of errno `e` (`"ECONNRESET"`), for those of this module.
pub fn name(e: Errno) -> Option<&'static str> {
    ALL.iter().find(|(n, _)| *n == e).map(|(_, s)| *s)
}

/// The `io::Error` std returns for errno `e` (its `raw_os_error()` is `e`).
pub fn io(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// The errno an `io::Error` stands for: its raw OS error when it carries
/// one (the client library's errors do, made with [`io()`]), else the errno
/// of its kind ([`of_kind`]).
pub fn of(e: &io::Error) -> Errno {
    e.raw_os_error().unwrap_or_else(|| of_kind(e.kind()))
}

/// The errno an `io::ErrorKind` stands for, for an error that carries no
/// errno of its own: mostly the errno std derives the kind from, turned
/// back; [`EIO`] for a kind not named here. Three kinds say what they mean
/// in the stack rather than in std: `NotFound` is a missing interface
/// (ENODEV, not std's ENOENT), `Unsupported` an operation the socket does
/// not do (EOPNOTSUPP, as Linux's socket calls say, not std's ENOSYS), and
/// `InvalidData`, for which std has no errno, a malformed answer (EPROTO).
pub fn of_kind(kind: ErrorKind) -> Errno {
    match kind {
        ErrorKind::WouldBlock => EAGAIN,
        ErrorKind::InvalidInput => EINVAL,
        ErrorKind::NotFound => ENODEV,
        ErrorKind::PermissionDenied => EPERM,
        ErrorKind::InvalidData => EPROTO,
        ErrorKind::AddrInUse => EADDRINUSE,
        ErrorKind::AddrNotAvailable => EADDRNOTAVAIL,
        ErrorKind::ConnectionRefused => ECONNREFUSED,
        ErrorKind::ConnectionReset => ECONNRESET,
        ErrorKind::ConnectionAborted => ECONNABORTED,
        ErrorKind::NotConnected => ENOTCONN,
        ErrorKind::BrokenPipe => EPIPE,
        ErrorKind::TimedOut => ETIMEDOUT,
        ErrorKind::Interrupted => EINTR,
        ErrorKind::Unsupported => EOPNOTSUPP,
        ErrorKind::OutOfMemory => ENOMEM,
        _ => EIO,
    }
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
        assert_eq!((EAGAIN, EINTR, EIO, EPROTO), (11, 4, 5, 71));
        assert_eq!((ENODEV, ENOMEM, EOPNOTSUPP, ENETDOWN), (19, 12, 95, 100));
        assert_eq!(io(ECONNRESET).kind(), ErrorKind::ConnectionReset);
    }

    #[test]
    fn names_are_the_constants_names() {
        assert_eq!(name(ECONNREFUSED), Some("ECONNREFUSED"));
        assert_eq!(name(EAGAIN), Some("EAGAIN"));
        assert_eq!(name(libc::ENOSPC), None);
        assert!(
            ALL.windows(2).all(|w| w[0].1 < w[1].1),
            "in alphabetical order"
        );
        let mut values: Vec<Errno> = ALL.iter().map(|(e, _)| *e).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), ALL.len(), "no two names for one value");
    }

    #[test]
    fn io_error_with_errno_keeps_it() {
        assert_eq!(of(&io(ECONNRESET)), ECONNRESET);
        // The raw errno wins over its kind's.
        assert_eq!(of(&io(EACCES)), EACCES);
    }

    #[test]
    fn io_error_without_errno_maps_its_kind() {
        assert_eq!(of(&ErrorKind::WouldBlock.into()), EAGAIN);
        assert_eq!(of(&io::Error::new(ErrorKind::NotFound, "no eth9")), ENODEV);
        assert_eq!(of(&ErrorKind::InvalidData.into()), EPROTO);
        assert_eq!(of(&io::Error::other("?")), EIO);
    }

    #[test]
    fn every_kind_std_gives_an_errno_maps_back_to_it() {
        // Round trip through std's errno-to-kind map, for the kinds std
        // derives from exactly one errno.
        for e in [
            EAGAIN,
            EINVAL,
            EPERM,
            EADDRINUSE,
            EADDRNOTAVAIL,
            ECONNREFUSED,
            ECONNRESET,
            ECONNABORTED,
            ENOTCONN,
            EPIPE,
            ETIMEDOUT,
            EINTR,
            ENOMEM,
        ] {
            assert_eq!(of_kind(io(e).kind()), e, "errno {e}");
        }
    }
}
