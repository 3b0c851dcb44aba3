//! Benchmarks and the demo of the `corestack` binary (`corestack bench ...`, `corestack demo`,
//! `corestack serve sink`), kept out of the product's command modules.

pub mod demo;
pub mod echo_matrix;
mod harness;
pub mod net;
pub mod pingpong;
pub mod service;
pub mod stream;
pub mod stream_matrix;

pub use pingpong::Bench;
