//! What the benchmarks that build their own namespaces share: child processes of this binary
//! (`children`) and the matrix benchmarks' path through the impairment bridge (`matrix`).

pub mod children;
pub mod matrix;
pub mod shim;

/// The CPU the benchmarks pin their clients to (when they pin; the development VM has two).
pub const CLIENT_CPU: &str = "0";
/// The CPU the benchmarks pin their servers to (the program, its engine thread, the daemon).
pub const SERVER_CPU: &str = "1";
