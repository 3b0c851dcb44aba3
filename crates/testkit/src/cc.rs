//! The tests' C programs, built with the system's C compiler (`cc` on PATH).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Runs `cc`, its arguments as `cmd` holds them (a `Command::new("cc")`), to build `src`;
/// panics with cc's stderr, and `hint` (what may be missing, or empty), when cc fails or
/// cannot start.
pub fn compile(cmd: &mut Command, src: &Path, hint: &str) {
    let r = cmd.output().expect("running cc");
    assert!(
        r.status.success(),
        "cc {} failed{hint}:\n{}",
        src.display(),
        String::from_utf8_lossy(&r.stderr)
    );
}

/// The program `name` as `build` makes it, built once per test process (the same path on
/// every later call; concurrent callers wait for the first).
pub fn once(name: &str, build: impl FnOnce() -> PathBuf) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(n, _)| n == name) {
        return p.clone();
    }
    let out = build();
    built.push((name.to_string(), out.clone()));
    out
}
