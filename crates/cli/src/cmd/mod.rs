//! One module per subcommand: `run` (the daemon, on crate `service`), `serve` (`serve echo`,
//! `serve sink`), `nc`, `impair`, `exec`, `stat`, `ss`, `capture`, `trace`; `lab` hands `bench`
//! and `demo` over to the `corestack-lab` binary of crate `bench`, next to this one. What `stat`,
//! `ss` and `run --metrics-listen` read and serve (the published tables, the Prometheus
//! renderer, the metrics HTTP server) is in `crate::observe`; no command imports another.

pub mod capture;
pub mod exec;
pub mod impair;
pub mod lab;
pub mod nc;
pub mod private;
pub mod run;
pub mod serve;
pub mod ss;
pub mod stat;
pub mod trace;
