//! One module per subcommand: `run` (the daemon, on crate `service`), `serve` (`serve echo`;
//! `serve sink` is `bench::sink`), `nc`, `impair`, `stat`, `ss`, and `metrics` (Prometheus exposition for `stat --prometheus` and
//! `run --metrics-listen`). `bench` and `demo` are
//! crate `bench`'s, called from `main.rs`.

pub mod capture;
pub mod exec;
pub mod impair;
pub mod metrics;
pub mod nc;
pub mod run;
pub mod serve;
pub mod ss;
pub mod stat;
pub mod trace;
