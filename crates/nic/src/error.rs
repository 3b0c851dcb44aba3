//! The error type of every port driver.
//!
//! Each error's `Display` is one line that names what to do about it, so the
//! CLI can print it as is (e.g. "interface veth9 not found (check `ip link`)").

use std::fmt;
use std::io;

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The named interface does not exist in this network namespace.
    NoSuchInterface,
    /// The caller lacks a privilege (root, CAP_NET_ADMIN, CAP_BPF).
    PermissionDenied,
    /// The kernel refused to load or attach the XDP program.
    XdpAttach,
    /// `/dev/net/tun` is missing (tun module not loaded).
    NoTunDevice,
    /// A configuration value is out of range.
    InvalidConfig,
    /// Any other system call failure.
    Io,
}

/// A port set-up error with a one-line, actionable message.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<io::Error>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: String) -> Error {
        Error {
            kind,
            message,
            source: None,
        }
    }

    pub(crate) fn with_source(kind: ErrorKind, message: String, source: io::Error) -> Error {
        Error {
            kind,
            message,
            source: Some(source),
        }
    }

    /// "interface X not found (check `ip link`)".
    pub(crate) fn no_such_interface(ifname: &str) -> Error {
        Error::new(
            ErrorKind::NoSuchInterface,
            format!("interface {ifname} not found (check `ip link`)"),
        )
    }

    /// "permission denied <what>: <fix>".
    pub(crate) fn permission(what: &str, fix: &str, source: io::Error) -> Error {
        Error::with_source(
            ErrorKind::PermissionDenied,
            format!("permission denied {what}: {fix}"),
            source,
        )
    }

    /// A failed system call during set-up: "<what>: <os error>".
    pub(crate) fn io(what: &str, source: io::Error) -> Error {
        let message = format!("{what}: {source}");
        Error::with_source(ErrorKind::Io, message, source)
    }

    /// An out-of-range configuration value.
    pub(crate) fn config(message: String) -> Error {
        Error::new(ErrorKind::InvalidConfig, message)
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The closest `std::io::ErrorKind`, for callers that speak `io::Error`.
    pub fn io_kind(&self) -> io::ErrorKind {
        match self.kind {
            ErrorKind::NoSuchInterface | ErrorKind::NoTunDevice => io::ErrorKind::NotFound,
            ErrorKind::PermissionDenied => io::ErrorKind::PermissionDenied,
            ErrorKind::InvalidConfig => io::ErrorKind::InvalidInput,
            ErrorKind::XdpAttach => io::ErrorKind::Unsupported,
            ErrorKind::Io => self
                .source
                .as_ref()
                .map_or(io::ErrorKind::Other, io::Error::kind),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.io_kind(), e.message)
    }
}
