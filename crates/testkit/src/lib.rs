//! What the workspace's tests share, as a dev-dependency instead of files included by
//! `#[path]` across crates:
//!
//! ```text
//!  cc        the tests' C programs, built once with the system's cc
//!  serial    the suite lock of the namespace tests (one at a time, root checked)
//!  rogue     a misbehaving application of the daemon, written against appif alone
//!  prom      reading a Prometheus exposition (prometheus-parse)
//!  mem_wire  two stacks on a clean mem wire in one process
//!  packetdrill  the packetdrill script interpreter: one engine on virtual time, the script as its peer
//! ```
//!
//! Only tests depend on this crate; it panics where a test should fail.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
pub mod mem_wire;
pub mod packetdrill;
pub mod prom;
pub mod rogue;
pub mod serial;
