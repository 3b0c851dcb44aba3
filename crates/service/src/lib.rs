//! The corestack daemon as a library (service mode): what `corestack run`
//! does around the engine.
#![forbid(unsafe_code)]

pub mod apps;
pub mod config;
mod host;

pub use host::{bind_control, AppStats, Host};
