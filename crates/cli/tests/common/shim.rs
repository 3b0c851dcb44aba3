//! What the shim tests share: the shim library built once, the programs they need, their
//! scripts.

use super::daemon::SocketPath;
use super::{bin, Pair};
use netns::Netns;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where the corestack binary of this build lives (the shim goes beside it).
pub fn profile_dir() -> PathBuf {
    bin()
        .parent()
        .expect("the binary's directory")
        .to_path_buf()
}

/// Builds `libcorestack_preload.so` beside the corestack binary (once per run).
pub fn preload() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = profile_dir();
            let target = dir.parent().expect("target dir").to_path_buf();
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "-p", "corestack-preload"])
                .env("CARGO_TARGET_DIR", &target)
                .current_dir(workspace());
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().expect("running cargo build for the shim");
            assert!(st.success(), "building libcorestack_preload.so failed");
            let so = dir.join("libcorestack_preload.so");
            assert!(so.is_file(), "{} was not built", so.display());
            so
        })
        .clone()
}

/// Fails with a message naming the package when `tool` is not installed.
pub fn need(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{tool}` is not installed: run scripts/setup.sh (as root) to install the shim tests' programs"
    );
}

/// `tests/shim/NAME`: a script or program source of the shim tests.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/shim/{name}"))
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// memcached's arguments in the shim tests: `-t threads`, TCP on port 11211 only, as root.
pub fn memcached_args(threads: &str) -> Vec<&str> {
    vec!["-u", "root", "-t", threads, "-p", "11211", "-U", "0"]
}

/// The Linux memcached client (`memcached_client.py`) in `linux`: 8 connections set and get
/// 200 keys each on `core_ip`:11211 and check every value; how it ended, within `bound`.
pub fn memcached_client(
    linux: &netns::Netns,
    core_ip: &str,
    bound: std::time::Duration,
) -> super::Finished {
    let py = script("memcached_client.py");
    let client = plain(
        linux,
        "python3",
        &[py.to_str().unwrap(), core_ip, "11211", "8", "200"],
    );
    super::Proc::spawn("memcached client", client, None, super::Out::Text).finish(bound)
}

/// Asserts that the memcached client `c` ([`memcached_client`]) got every value back; the
/// failure message holds its output, what the ended memcached (`server`) wrote on stderr, and
/// `context`.
pub fn assert_memcached_served(c: &super::Finished, server: &super::Finished, context: &str) {
    assert!(
        c.status.success(),
        "{}{}\nmemcached stderr:\n{}{context}",
        c.stdout,
        c.stderr,
        server.stderr
    );
}

/// `n` bytes of xorshift64 from `seed`: a payload in which a lost, doubled or reordered
/// byte shows.
pub fn payload(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `corestack exec --iface vc --ip ADDR... [--inline] -- program args` in the pair's core
/// namespace (embedded mode, inline mode when `inline`): `ips` are the addresses with their
/// prefix length (`10.N.1.2/24`, `fd00:N::2/64`). Builds the shim first.
pub fn shimmed(
    pair: &Pair,
    ips: &[String],
    inline: bool,
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
) -> Command {
    preload();
    let mut cmd = pair.core.exec(bin());
    cmd.args(["exec", "--iface", "vc"]);
    for ip in ips {
        cmd.arg("--ip").arg(ip);
    }
    if inline {
        cmd.arg("--inline");
    }
    cmd.arg("--")
        .arg(program)
        .args(args)
        .env_remove("CORESTACK_SOCKET")
        .env_remove("LD_PRELOAD");
    cmd
}

/// `corestack exec --socket SOCK -- program args` in the pair's core namespace (service mode:
/// the program is an application of the daemon listening on `sock`). Builds the shim first.
pub fn served(pair: &Pair, sock: &SocketPath, program: &str, args: &[&str]) -> Command {
    preload();
    let mut cmd = pair.core.exec(bin());
    cmd.args(["exec", "--socket", &sock.arg(), "--"])
        .arg(program)
        .args(args)
        .env_remove("CORESTACK_IFACE")
        .env_remove("LD_PRELOAD");
    cmd
}

/// `program args` in `ns` on the kernel stack (no shim, whatever the test's environment).
pub fn plain(ns: &Netns, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let mut cmd = ns.exec(program);
    cmd.args(args).env_remove("LD_PRELOAD");
    cmd
}
