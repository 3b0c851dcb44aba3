//! The contract between the engine and applications.
//!
//! Everything here is single-producer single-consumer: each index has one
//! writer, and producer and consumer indices sit on separate cache lines.
//!
//! ```text
//!   application                      engine
//!   TxWriter ──► byte ring (TX) ──► TxReader   (engine consumes on ACK)
//!   RxReader ◄── byte ring (RX) ◄── RxWriter   (engine produces in order)
//!   Sender<Command> ──► command ring ──► Receiver<Command>
//!   Notify: the engine bumps it after every change the app may wait for
//! ```
//!
//! In embedded and inline mode these live in the process's own memory.

#![deny(missing_docs)]
#![deny(unsafe_code)]

// Shared memory: raw views of mapped memory and atomics on it (every block
// with its `// SAFETY:`).
#[allow(unsafe_code)]
pub mod bytes;
#[allow(unsafe_code)]
pub mod notify;
#[allow(unsafe_code)]
pub mod region;
#[allow(unsafe_code)]
pub mod seg;
#[allow(unsafe_code)]
pub mod socket;
#[allow(unsafe_code)]
pub mod spsc;
#[allow(unsafe_code)]
pub mod stats_shm;
// System calls (memfd, eventfd, SCM_RIGHTS, SO_PEERCRED, epoll).
#[allow(unsafe_code)]
mod sys;

// No unsafe code.
pub mod cc;
pub mod ctl;
pub mod errno;

/// Pads and aligns `T` to a 64-byte cache line so that it shares it with
/// nothing written by the other side.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct CachePadded<T>(pub T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

const _: () = assert!(core::mem::size_of::<CachePadded<u64>>() == 64);
