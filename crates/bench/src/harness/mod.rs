//! What the benchmarks that build their own namespaces share: child processes of this binary
//! (`children`) and the matrix benchmarks' path through the impairment bridge (`matrix`).

pub mod children;
pub mod matrix;
pub mod shim;

use std::sync::OnceLock;

/// Where the benchmarks pin a party: a `taskset -c` CPU list.
#[derive(Debug, Clone, Copy)]
pub enum Cpus {
    /// Clients and load generators: `--client-cpus`, default CPU 0.
    Client,
    /// Servers (the program, its engine threads, the daemon): `--server-cpus`, default CPU 1.
    Server,
}

static CLIENT_CPUS: OnceLock<String> = OnceLock::new();
static SERVER_CPUS: OnceLock<String> = OnceLock::new();

impl Cpus {
    /// The CPU list, as `taskset -c` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Cpus::Client => CLIENT_CPUS.get().map_or("0", String::as_str),
            Cpus::Server => SERVER_CPUS.get().map_or("1", String::as_str),
        }
    }
}

impl std::fmt::Display for Cpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The CPUs the benchmarks pin their clients to (when they pin; the development VM has two).
pub const CLIENT_CPU: Cpus = Cpus::Client;
/// The CPUs the benchmarks pin their servers to (the program, its engine thread, the daemon).
pub const SERVER_CPU: Cpus = Cpus::Server;

/// Sets the CPU lists (`bench --client-cpus/--server-cpus`) before a benchmark runs; each
/// is validated by `taskset` when a child starts.
pub fn set_cpus(client: Option<String>, server: Option<String>) {
    if let Some(c) = client {
        let _ = CLIENT_CPUS.set(c);
    }
    if let Some(s) = server {
        let _ = SERVER_CPUS.set(s);
    }
}
