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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_builds_each_name_once_and_gives_its_first_path_after() {
        let mut calls = 0;
        let a = once("testkit-cc-once", || {
            calls += 1;
            PathBuf::from("/first")
        });
        let b = once("testkit-cc-once", || {
            calls += 1;
            PathBuf::from("/second")
        });
        let c = once("testkit-cc-other", || {
            calls += 1;
            PathBuf::from("/other")
        });
        assert_eq!(a, PathBuf::from("/first"));
        assert_eq!(b, PathBuf::from("/first"));
        assert_eq!(c, PathBuf::from("/other"));
        assert_eq!(calls, 2);
    }

    #[test]
    #[should_panic(expected = "no/such/file.c failed (hint)")]
    fn compile_fails_naming_the_source_and_the_hint_when_cc_fails() {
        // `false` stands in for a cc that fails (exit status 1), so no compiler is needed.
        let src = Path::new("/no/such/file.c");
        compile(&mut Command::new("false"), src, " (hint)");
    }
}
