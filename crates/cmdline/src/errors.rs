//! Errors as the commands print them: one line, and the socket errors people meet (address in
//! use, connection refused, timed out) explained.

use std::io;
use std::net::SocketAddr;

use anyhow::anyhow;

/// The error as one line: its context chain joined by ": ", newlines removed.
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

/// Explains a bind error (address in use is the one people meet).
pub fn bind_error(e: io::Error, what: &str, addr: impl Into<SocketAddr>) -> anyhow::Error {
    let addr: SocketAddr = addr.into();
    if e.kind() == io::ErrorKind::AddrInUse {
        anyhow!("{what} {addr} is already in use (is another server running? pick another --port)")
    } else {
        anyhow!("binding {what} {addr}: {e}")
    }
}

/// Explains a connect error.
pub fn connect_error(e: io::Error, addr: impl Into<SocketAddr>) -> anyhow::Error {
    let addr: SocketAddr = addr.into();
    match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            anyhow!(
                "connection refused by {addr} (ECONNREFUSED): is a server listening on that port?"
            )
        }
        io::ErrorKind::TimedOut => {
            anyhow!("connecting to {addr} timed out (ETIMEDOUT): check the address and route")
        }
        _ => anyhow!("connecting to {addr}: {e}"),
    }
}

/// The end of a command: exits with status 130 after "interrupted" when the error is
/// [`crate::Interrupted`] (Ctrl-C), with status 1 after one line `error: ...` on any other
/// error; returns on `Ok`.
pub fn exit_on_error(result: anyhow::Result<()>) {
    if let Err(e) = result {
        if e.downcast_ref::<crate::Interrupted>().is_some() {
            eprintln!("interrupted");
            std::process::exit(130);
        }
        eprintln!("error: {}", one_line(&e));
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_with_context_joins_on_one_line() {
        let e = anyhow!("interface x not found\n(check `ip link`)").context("starting corestack");
        assert_eq!(
            one_line(&e),
            "starting corestack: interface x not found (check `ip link`)"
        );
    }
}
