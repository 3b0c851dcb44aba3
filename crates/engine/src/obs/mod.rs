//! What observers see of an engine: its counters (`stats`: every drop
//! under its reason, like `nstat`), the counters and the connection table
//! published to shared memory for `corestack stat` and `corestack ss`
//! (`publish`, with the table's rows from `rows`), and the hooks that
//! `corestack trace` (`trace`: stage stamps of sampled segments) and
//! `corestack capture` (`capture`: a copy of every frame in and out)
//! switch on. The formats are the `observe` crate's. State owned here: the
//! engine's `Stats` and `EngineTrace` (`Protocols::stats`,
//! `Protocols::trace`) and its capturer (`Engine::capture`).

pub(crate) mod capture;
pub mod publish;
pub(crate) mod rows;
pub mod stats;
pub(crate) mod trace;
