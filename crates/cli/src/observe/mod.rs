//! What the observing commands read and serve, kept out of the command files: the tables running
//! engines publish (`tables`: read by `stat`, `ss` and the renderer), their Prometheus rendering
//! (`prometheus`: `stat --prometheus`, `GET /metrics`) and the metrics HTTP server of
//! `run --metrics-listen` (`http`). The commands import from here, never from each other.
//!
//! ```text
//!  tables      connection and application tables of a running engine; printable names
//!  prometheus  Snapshot of an engine, rendered as text exposition format 0.0.4
//!  http        MetricsServer: GET /metrics from a thread of the daemon
//! ```

pub mod http;
pub mod prometheus;
pub mod tables;
