//! Observability of a running stack: the shared-memory files observers in
//! other processes read (and, for trace and capture, write back), and the
//! formats of what they hold.
//!
//! ```text
//!   engine / application library               observer (the CLI)
//!   stats_shm::StatsWriter ──► counters, conns, apps ──► StatsReader     (stat, ss, /metrics)
//!   trace::Tracer          ──► records ring          ──► TraceControl    (trace)
//!   capture::Capturer      ──► frames ring, filtered ──► CaptureControl  (capture)
//! ```
//!
//! [`stats_shm`] is the read-only segment `corestack stat` and `ss` read:
//! the engine's counters, its connection table ([`stats_shm::ConnRow`]) and
//! a daemon's application table ([`stats_shm::AppRow`]). [`observer_shm`]
//! is the file [`trace`] and [`capture`] share with their observer, which
//! switches them on and off; [`trace_report`] turns trace records into the
//! per-stage report `corestack trace` prints.
//!
//! Read bottom-up; each module uses only those above it in this list:
//! [`stats_shm`] (its rows in `stats_shm/rows.rs`), [`observer_shm`],
//! [`trace`] (over `tsc`, the clock), [`trace_report`], [`capture`].
//!
//! This crate holds the formats and both ends of each file; what an engine
//! publishes, and when, is the engine's (its `obs/`: `publish`, `trace`,
//! `capture`), and how the CLI reads and prints them is the CLI's
//! (`corestack-cli`'s `observe/`). It depends on [`appif`] only for the
//! longest application name ([`appif::ctl::NAME_MAX`]) and on crate
//! `payload` for the lent payloads a captured frame may end in.
//!
//! `unsafe` code lives in the shared-memory modules (`stats_shm`,
//! `observer_shm`) and in `tsc`; the rest of the crate denies it.

#![deny(unsafe_code)]
#![deny(missing_docs)]

// Shared memory: atomics on mapped files (every block with its `// SAFETY:`).
#[allow(unsafe_code)]
pub mod observer_shm;
#[allow(unsafe_code)]
pub mod stats_shm;
// The time-stamp counter.
#[allow(unsafe_code)]
mod tsc;

// No unsafe code.
pub mod capture;
pub mod trace;
pub mod trace_report;
