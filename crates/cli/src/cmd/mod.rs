//! One module per subcommand.

pub mod bench;
pub mod children;
pub mod demo;
pub mod echo_matrix;
pub mod exec;
pub mod impair;
pub mod matrix;
pub mod nc;
pub mod run;
pub mod serve;
pub mod service_bench;
pub mod stat;
pub mod stream;
pub mod stream_matrix;
