//! The contract between the engine and applications.
//!
//! Everything here is single-producer single-consumer: each index has one
//! writer, and producer and consumer indices sit on separate cache lines.
//!
//! ```text
//!   application                               engine
//!   bytes::Writer ──► byte ring (TX) ──► bytes::Reader   (consumed on ACK)
//!   bytes::Reader ◄── byte ring (RX) ◄── bytes::Writer   (produced in order)
//!   socket::StatusBlock ◄── state, error, addresses, flags (engine writes)
//!   Notify: the engine bumps it after every change the app may wait for
//!
//!   embedded / inline:  spsc::Sender<Command> ──► spsc::Receiver<Command>
//!   service mode:       seg::CmdProducer (Desc) ──► seg::CmdConsumer ──► daemon
//! ```
//!
//! In embedded and inline mode these live in the process's own memory:
//! commands are [`command::Command`] values on an [`spsc`] channel and each
//! socket's status block is on the heap. In service mode (`corestack run`)
//! they live in one shared segment per application ([`seg`], a memfd mapped
//! through [`region`]): fixed slots of status block and byte rings, and a
//! ring of 64-byte [`seg::Desc`] descriptors that the daemon checks and
//! turns into commands; the application gets the segment and the engine's
//! doorbell over the control socket ([`ctl`]). [`cc`] and [`errno`] are
//! the vocabulary both sides share: the congestion-control choice and the
//! errno values the stack reports. What observers read (the stats, trace
//! and capture segments) is crate `observe`'s, not part of this contract.
//!
//! Read bottom-up; each module uses only those above it in this list:
//! [`words`] (the shared atomic words: [`words::AtomicOnly`],
//! [`notify::Notify`], [`socket::StatusBlock`]; depends on nothing),
//! [`region`], [`bytes`], [`notify`], [`spsc`], [`ready`], [`socket`]
//! (ids, status blocks), [`seg`] (the application segment, its command ring
//! and accept queues), [`command`]; beside them [`ctl`] over `sys`.
//!
//! `unsafe` code lives in `sys` (system calls, reached through [`ctl`])
//! and in the shared-memory modules (`words`, `region` with its safe
//! [`region::View`], `bytes`, `notify`, `spsc`); the rest of the crate
//! denies it.

#![deny(unsafe_code)]
#![deny(missing_docs)]

// Shared memory: raw views of mapped memory and atomics on it (every block
// with its `// SAFETY:`).
#[allow(unsafe_code)]
pub mod bytes;
#[allow(unsafe_code)]
pub mod notify;
#[allow(unsafe_code)]
pub mod region;
#[allow(unsafe_code)]
pub mod spsc;
#[allow(unsafe_code)]
pub mod words;
// System calls (memfd, eventfd, SCM_RIGHTS, SO_PEERCRED, epoll).
#[allow(unsafe_code)]
mod sys;
pub use sys::{parse_cpu_list, pin_current_thread};

// No unsafe code.
pub mod cc;
pub mod command;
pub mod ctl;
pub mod doorbell;
pub mod errno;
pub mod ready;
pub mod seg;
pub mod socket;

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
