//! What the benchmarks that build their own namespaces share: child processes of `corestack`
//! ([`this_program`], next to this binary) in `children`, the matrix benchmarks' path through
//! the impairment bridge (`matrix`), the rows of unmodified servers under `corestack exec`
//! (`shim`), the "Linux tuned" rows' busy polling (`tuned`, its system calls in `sys`, the
//! crate's only unsafe code), the cost breakdown (`cost`) and the CPU time of servers and
//! of the machine (`cpu`).

pub mod children;
pub mod cost;
pub mod cpu;
pub mod matrix;
pub mod shim;
#[allow(unsafe_code)]
mod sys;
pub mod tuned;

use std::sync::OnceLock;

/// Where the benchmarks pin a party: a `taskset -c` CPU list.
#[derive(Debug, Clone, Copy)]
pub enum Cpus {
    /// Clients and load generators: `--client-cpus`, default CPU 0.
    Client,
    /// Servers (the program, its engine threads, the daemon): `--server-cpus`, default CPU 1.
    Server,
    /// corestack's engine threads in the servers the benchmarks start (`--engine-cpus`);
    /// without it, the server's CPUs.
    Engine,
}

static CLIENT_CPUS: OnceLock<String> = OnceLock::new();
static SERVER_CPUS: OnceLock<String> = OnceLock::new();
static ENGINE_CPUS: OnceLock<String> = OnceLock::new();

impl Cpus {
    /// The CPU list, as `taskset -c` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Cpus::Client => CLIENT_CPUS.get().map_or("0", String::as_str),
            Cpus::Server => SERVER_CPUS.get().map_or("1", String::as_str),
            Cpus::Engine => ENGINE_CPUS
                .get()
                .map_or(Cpus::Server.as_str(), String::as_str),
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

/// The program the benchmarks start again as their clients and servers: `corestack`, next to
/// this binary (`corestack-lab`), the one the user ran as `corestack bench` or `corestack demo`.
/// Servers, daemons, shims and readers (`serve`, `run`, `exec`, `impair`, `stat`, `ss`) are its
/// own commands; the hidden clients and servers of the benchmarks (`bench conn-client` and the
/// like) it hands back to this binary, by exec, as it did the benchmark itself.
///
/// Errors: when the OS does not say where this binary is (`std::env::current_exe`), or
/// `corestack` is not next to it (with the command that builds it).
pub fn this_program() -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    let lab = std::env::current_exe().context("finding this program's path")?;
    let corestack = lab.with_file_name("corestack");
    if !corestack.is_file() {
        let build = if cfg!(debug_assertions) {
            "cargo build -p corestack-cli"
        } else {
            "cargo build --release -p corestack-cli"
        };
        anyhow::bail!(
            "{} not found: the benchmarks run their clients and servers with it; build it with `{build}` (the workspace build puts it next to {})",
            corestack.display(),
            lab.display()
        );
    }
    Ok(corestack)
}

/// True when this machine has two CPUs or more, so that a client and a server can be pinned
/// apart.
pub fn can_pin() -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
}

/// The client's and the server's CPU lists ([`CLIENT_CPU`], [`SERVER_CPU`]) when [`can_pin`],
/// else (None, None): the children run unpinned.
pub fn pinned_cpus() -> (Option<&'static str>, Option<&'static str>) {
    let pin = can_pin();
    (
        pin.then(|| CLIENT_CPU.as_str()),
        pin.then(|| SERVER_CPU.as_str()),
    )
}

/// The CPUs of corestack's engine threads in the servers the benchmarks start: `--engine-cpus`,
/// default the server's CPUs.
pub const ENGINE_CPU: Cpus = Cpus::Engine;

/// Sets the CPU lists (`bench --client-cpus/--server-cpus/--engine-cpus`) before a benchmark
/// runs; the first two are validated by `taskset` when a child starts, the engines' by its
/// parser.
pub fn set_cpus(client: Option<String>, server: Option<String>, engine: Option<String>) {
    if let Some(c) = client {
        let _ = CLIENT_CPUS.set(c);
    }
    if let Some(s) = server {
        let _ = SERVER_CPUS.set(s);
    }
    if let Some(e) = engine {
        let _ = ENGINE_CPUS.set(e);
    }
}

/// `--engine-cpus` when given: every corestack child the benchmarks start gets it as
/// `CORESTACK_ENGINE_CPUS` (engine i on the i-th CPU, cycling), and every daemon as `--cpus`.
pub fn engine_cpus() -> Option<&'static str> {
    ENGINE_CPUS.get().map(String::as_str)
}

/// The arguments that place a daemon's engine threads (`run --cpus LIST`), if `--engine-cpus`
/// was given.
pub fn daemon_cpu_args() -> Vec<&'static str> {
    engine_cpus().map_or_else(Vec::new, |l| vec!["--cpus", l])
}

/// Checks a benchmark's duration option `name` (`--seconds`): `seconds` must be in (0, `max`]
/// seconds.
///
/// Errors: `NAME must be in (0, MAX]` otherwise, NaN included.
pub fn check_seconds(name: &str, seconds: f64, max: f64) -> anyhow::Result<()> {
    if seconds > 0.0 && seconds <= max {
        Ok(())
    } else {
        anyhow::bail!("{name} must be in (0, {max}]")
    }
}

#[cfg(test)]
mod tests {
    use super::{check_seconds, this_program};

    #[test]
    fn this_program_without_corestack_next_to_it_names_the_file_and_the_build() {
        // A test binary sits in `target/*/deps/`, where cargo puts no file named `corestack`.
        let deps = std::env::current_exe().unwrap();
        let e = this_program()
            .expect_err("no corestack in deps/")
            .to_string();
        let missing = deps.with_file_name("corestack");
        assert!(
            e.starts_with(&format!("{} not found", missing.display())),
            "{e}"
        );
        assert!(e.contains("cargo build"), "{e}");
    }

    #[test]
    fn check_seconds_takes_0_exclusive_to_max_inclusive_and_says_the_range_otherwise() {
        for ok in [0.001, 1.0, 60.0] {
            assert!(check_seconds("--seconds", ok, 60.0).is_ok(), "{ok}");
        }
        for bad in [0.0, -1.0, 60.001, f64::NAN, f64::INFINITY] {
            let e = check_seconds("--seconds", bad, 60.0).expect_err("out of range");
            assert_eq!(e.to_string(), "--seconds must be in (0, 60]", "{bad}");
        }
        let e = check_seconds("--mc-sweep-secs", 601.0, 600.0).unwrap_err();
        assert_eq!(e.to_string(), "--mc-sweep-secs must be in (0, 600]");
    }
}
