//! What the benchmarks that build their own namespaces share: child processes of this binary
//! (`children`) and the matrix benchmarks' path through the impairment bridge (`matrix`).

pub mod children;
pub mod matrix;
pub mod shim;
