//! Helpers for the C API tests: build the C examples against the
//! libcorestack.so of this build, put them in network namespaces (removed
//! on drop, with every process inside), and talk to them with Linux
//! sockets from threads that entered the other namespace.
//!
//! These tests need root and `cc`. Without root they FAIL saying so;
//! without `cc` they are skipped with a message (CI installs it).
#![allow(dead_code)]

use netns::{ChildGuard, Netns};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use testkit::serial::start;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding the libcorestack.so that `cargo test` built for
/// this run: the profile directory above the test executable (`deps/`).
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let deps = exe.parent().expect("the test executable's directory");
    let profile = deps.parent().expect("the profile directory");
    // The package is a cdylib only (an rlib would collide with the client
    // library's), so `cargo test` does not build the .so for these tests:
    // build it here, into the same target directory and profile.
    let target = profile.parent().expect("the target directory");
    let mut build = Command::new(env!("CARGO"));
    build
        .args(["build", "-p", "corestack-capi", "--lib"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(root());
    if profile.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build
        .status()
        .expect("running cargo to build libcorestack.so");
    assert!(status.success(), "building libcorestack.so failed");
    // Prefer the newest of the uplifted copy and the one in deps/.
    let candidates = [profile.to_path_buf(), deps.to_path_buf()];
    let newest = candidates
        .iter()
        .filter_map(|d| {
            let m = std::fs::metadata(d.join("libcorestack.so")).ok()?;
            Some((m.modified().ok()?, d.clone()))
        })
        .max();
    match newest {
        Some((_, d)) => d,
        None => panic!(
            "libcorestack.so not found in {} or {}: build it with `cargo build -p corestack-capi`",
            profile.display(),
            deps.display()
        ),
    }
}

/// True when a C compiler (`cc`) runs.
pub fn have_cc() -> bool {
    Command::new("cc")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Compiles `examples/c/{name}.c` with `cc -O2 -Wall -Wextra -Werror`
/// against include/ and libcorestack.so (rpath set to its directory), once
/// per test process; returns the binary. None (with a message) without `cc`.
pub fn build_example(name: &str) -> Option<PathBuf> {
    if !have_cc() {
        eprintln!(
            "SKIPPED: `cc` not found: install a C compiler (apt-get install build-essential)"
        );
        return None;
    }
    Some(testkit::cc::once(name, || {
        let lib = lib_dir();
        let out_dir = lib.join("c-examples");
        std::fs::create_dir_all(&out_dir).expect("creating the examples' output directory");
        let out = out_dir.join(name);
        let src = root().join("examples/c").join(format!("{name}.c"));
        testkit::cc::compile(
            Command::new("cc")
                .args(["-O2", "-Wall", "-Wextra", "-Werror"])
                .arg("-I")
                .arg(root().join("include"))
                .arg(&src)
                .arg("-L")
                .arg(&lib)
                .arg("-lcorestack")
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                .arg("-o")
                .arg(&out),
            &src,
            "",
        );
        out
    }))
}

pub use netns::Pair;

/// The C library's environment for a [`Pair`]'s core end.
pub trait EmbeddedEnv {
    /// The environment for an embedded stack on `vc` (AF_XDP).
    fn embedded_env(&self) -> Vec<(String, String)>;
}

impl EmbeddedEnv for Pair {
    fn embedded_env(&self) -> Vec<(String, String)> {
        vec![
            ("CORESTACK_IFACE".into(), "vc".into()),
            ("CORESTACK_IP".into(), format!("{}/24", self.core_ip)),
            ("CORESTACK_DRIVER".into(), "af_xdp".into()),
        ]
    }
}

/// Settings a C program would inherit from the test's own environment
/// (the stack's and the echo example's); removed, so that only what a test
/// passes counts.
const INHERITED_VARS: &[&str] = &[
    "CORESTACK_SOCKET",
    "CORESTACK_IFACE",
    "CORESTACK_IP",
    "CORESTACK_DRIVER",
    "CORESTACK_GATEWAY",
    "CORESTACK_INLINE",
    "ECHO_MAX_CONNS",
];

/// A C program running in a namespace: killed (and reaped) on drop; its
/// stderr goes to a file for failure messages.
pub struct Program {
    pub child: ChildGuard,
    stderr: PathBuf,
}

impl Program {
    /// Runs `bin args` in `ns` with exactly `env` as the stack's settings
    /// (e.g. [`Pair::embedded_env`], or `CORESTACK_SOCKET` for service
    /// mode), stdout read line by line.
    pub fn spawn(ns: &Netns, bin: &Path, args: &[&str], env: &[(String, String)]) -> Program {
        let stderr =
            std::env::temp_dir().join(format!("capi-{}-{}.stderr", std::process::id(), ns.name()));
        let file = File::create(&stderr).expect("creating the stderr file");
        let mut cmd = ns.exec(bin);
        cmd.args(args).stdin(Stdio::null()).stderr(file);
        for v in INHERITED_VARS {
            cmd.env_remove(v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = ChildGuard::spawn_lines(&mut cmd).expect("spawning the C program");
        Program { child, stderr }
    }

    /// What the program wrote on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits for a stdout line containing `needle`; panics with stderr if none comes.
    pub fn wait_line(&mut self, needle: &str, timeout: Duration) -> String {
        match self.child.wait_line(needle, timeout) {
            Ok(l) => l,
            Err(e) => panic!("{e}; stderr:\n{}", self.stderr()),
        }
    }

    /// SIGTERM, then waits up to `timeout` (SIGKILL after). Returns the
    /// exit status (None if it had to be killed) and the remaining stdout.
    pub fn terminate(&mut self, timeout: Duration) -> (Option<ExitStatus>, Vec<String>) {
        let status = self.child.terminate(timeout).expect("stopping the program");
        (status, self.child.remaining_lines(Duration::from_secs(2)))
    }

    /// Waits up to `timeout` for the program to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> (Option<ExitStatus>, Vec<String>) {
        let status = self
            .child
            .wait_timeout(timeout)
            .expect("waiting for the program");
        (status, self.child.remaining_lines(Duration::from_secs(2)))
    }

    /// Asserts that the program exited with success, given what [`Program::terminate`] or
    /// [`Program::wait_exit`] returned (no status: it had to be killed, which the panic says
    /// with `killed`); returns its remaining stdout lines.
    pub fn assert_exited_ok(
        &self,
        exit: (Option<ExitStatus>, Vec<String>),
        killed: &str,
    ) -> Vec<String> {
        let (status, lines) = exit;
        let status = status.unwrap_or_else(|| panic!("{killed}; stderr:\n{}", self.stderr()));
        assert!(
            status.success(),
            "echo exited with {status}; stderr:\n{}",
            self.stderr()
        );
        lines
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.stderr);
    }
}

/// Moves the calling thread into namespace `ns` (setns(2) with
/// CLONE_NEWNET: only this thread's sockets are affected). Call it on a
/// thread of your own.
pub fn enter(ns: &str) -> io::Result<()> {
    let f = File::open(format!("/run/netns/{ns}"))?;
    // SAFETY: setns only reads the descriptor, which `f` keeps open for the
    // call; it changes the network namespace of the calling thread alone.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Seeded pseudo-random bytes (xorshift64*).
pub fn seeded(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Connects to `addr`, retrying for up to `within` (the first SYNs may
/// arrive before the far side is up).
pub fn connect_retry(addr: SocketAddr, within: Duration) -> io::Result<TcpStream> {
    let deadline = Instant::now() + within;
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// From namespace `ns`: connects to `addr`, sends `data` (from a second
/// thread) then FIN, reads everything back until the server's FIN, and
/// returns it. Every step bounded by `timeout`.
pub fn echo_exchange(
    ns: &str,
    addr: SocketAddr,
    data: Vec<u8>,
    timeout: Duration,
) -> io::Result<Vec<u8>> {
    enter(ns)?;
    let mut s = connect_retry(addr, Duration::from_secs(20))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut w = s.try_clone()?;
    let writer = std::thread::spawn(move || -> io::Result<()> {
        for chunk in data.chunks(16 * 1024) {
            w.write_all(chunk)?;
        }
        w.shutdown(Shutdown::Write)
    });
    let mut back = Vec::new();
    let r = s.read_to_end(&mut back);
    let w = writer
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the writer thread panicked")));
    r?;
    w?;
    Ok(back)
}
