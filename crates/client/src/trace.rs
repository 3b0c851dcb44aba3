//! The application library's side of `corestack trace` (`observe::trace`):
//! a read that returned bytes (when the application saw them, when the
//! read returns) and a write that queued bytes (called, returns), one
//! record each, written to the process's trace segment while tracing is
//! on. Off, each call costs one load and one predictable branch.

use core::net::SocketAddr;
use observe::trace::{clock, conn_key, Kind, Record, Tracer};

/// A stamp taken if tracing is on (0 otherwise).
#[inline]
pub(crate) fn stamp(tracer: &Tracer) -> u64 {
    if tracer.on() {
        clock()
    } else {
        0
    }
}

/// Records an application read or write of the connection `local` →
/// `remote` that began (or saw its bytes) at `t0`, moved `bytes` bytes and
/// left its ring at position `pos`.
#[cold]
pub(crate) fn record(
    tracer: &Tracer,
    kind: Kind,
    local: SocketAddr,
    remote: SocketAddr,
    t0: u64,
    bytes: usize,
    pos: u64,
) {
    tracer.record(&Record {
        kind,
        key: conn_key(local.port(), remote.port()),
        bytes: bytes.min(0xff_ffff) as u32,
        pos,
        t: [t0, clock(), 0, 0, 0],
    });
}
