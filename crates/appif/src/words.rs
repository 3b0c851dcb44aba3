//! The words applications and the engine share in memory, at the bottom of
//! the crate: types that may be viewed in shared memory ([`AtomicOnly`]),
//! and the two shared structures made of them, a wake-up point
//! ([`Notify`], whose protocol is in `notify`) and a socket's status block
//! ([`StatusBlock`], whose accessors are in `socket`). This module depends
//! on nothing else in the crate.

use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

/// Bit of [`StatusBlock`]'s family word: the local address is IPv6.
pub(crate) const FAMILY_LOCAL_V6: u32 = 1;
/// Bit of [`StatusBlock`]'s family word: the remote address is IPv6.
pub(crate) const FAMILY_REMOTE_V6: u32 = 2;

/// Types that may be viewed in shared memory through a
/// [`View`](crate::region::View): every bit pattern is a valid value and
/// all mutation goes through atomics behind `&self`, so another process
/// writing the same bytes at any time cannot break Rust's rules.
///
/// # Safety
/// Implement only for `repr(C)` types made of atomics (or of such types).
pub unsafe trait AtomicOnly: Sync {}

// SAFETY: one atomic.
unsafe impl AtomicOnly for AtomicU32 {}
// SAFETY: one atomic.
unsafe impl AtomicOnly for AtomicU64 {}
// SAFETY: an array of atomic-only values is laid out as its elements, with
// no padding or other bytes between them.
unsafe impl<T: AtomicOnly, const N: usize> AtomicOnly for [T; N] {}
// SAFETY: `repr(C)`, two AtomicU32.
unsafe impl AtomicOnly for Notify {}
// SAFETY: `repr(C)`, a Notify and atomics only.
unsafe impl AtomicOnly for StatusBlock {}

/// A wake-up point shared by one producer and its waiters. `repr(C)` and
/// made of atomics only, so it can live in memory shared between processes.
#[derive(Debug, Default)]
#[repr(C)]
pub struct Notify {
    /// Bumped by the producer after every change.
    pub(crate) seq: AtomicU32,
    /// Flags of the kinds of sleeper waiting (`notify::FUTEX_SLEEPER`,
    /// `notify::EVENTFD_SLEEPER`).
    pub(crate) sleeping: AtomicU32,
}

/// The status block of one socket. Written by the engine only (except
/// where a field says otherwise), read by the application. `repr(C)`,
/// 64 bytes (one cache line, the segment slot's), atomics only: it can sit
/// in a segment shared between processes. The addresses are written
/// before the state that publishes them (Release, read after an Acquire
/// of the state).
#[derive(Debug, Default)]
#[repr(C)]
pub struct StatusBlock {
    /// Bumped by the engine after every change an application may wait for
    /// (data, space, state, FIN, error).
    pub notify: Notify,
    pub(crate) state: AtomicU32,
    /// 0 or a positive errno (ECONNREFUSED, ECONNRESET, ETIMEDOUT, ...).
    pub(crate) error: AtomicI32,
    pub(crate) flags: AtomicU32,
    /// The TX ring size the engine offers, bytes (0: none yet): the
    /// application grows its TX ring's capacity towards it
    /// (`bytes::Writer::grow`) when it writes.
    pub(crate) tx_grant: AtomicU32,
    /// Local address: 16 bytes as four big-endian words (an IPv4 address
    /// in the last word, the others 0).
    pub(crate) local_ip: [AtomicU32; 4],
    /// Remote address, as `local_ip`.
    pub(crate) remote_ip: [AtomicU32; 4],
    /// Ports: local << 16 | remote.
    pub(crate) ports: AtomicU32,
    /// Which addresses are IPv6: [`FAMILY_LOCAL_V6`], [`FAMILY_REMOTE_V6`].
    pub(crate) family: AtomicU32,
}
