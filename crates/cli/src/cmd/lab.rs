//! `bench` and `demo`: handed over to `corestack-lab`, the binary of crate `bench` that sits next
//! to this one (`cargo build --release` builds both into `target/release/`), so that the product
//! carries neither the benchmarks nor plotters and the font of their plots.
//!
//! The hand-over is an `exec` of the lab with the arguments as they were typed (`bench ...` or
//! `demo ...`, unparsed) and this process's `argv[0]`, so that the lab's help and errors say
//! `corestack`. The process stays the same (id, environment, file descriptors, network
//! namespace, CPU affinity), and what its parent sees is the lab's output and exit status. The
//! benchmarks start their hidden clients and servers as `corestack bench ...` too, and these
//! come back to the lab the same way.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{anyhow, Context, Result};

/// The lab binary's file name, next to `corestack`.
const LAB: &str = "corestack-lab";

/// The lab's part of a command line, everything after `argv[0]`, when it is the lab's: `bench
/// ...`, `demo ...`, `help bench ...` or `help demo`; `None` for any other, which is this
/// binary's to parse. `main` hands these to the lab before clap parses anything, so that they
/// reach it as they were typed (clap would take a leading `--`, for one).
pub fn lab_args(args: &[OsString]) -> Option<&[OsString]> {
    let lab = |a: &OsString| a == "bench" || a == "demo";
    match args {
        [_, first, ..] if lab(first) => Some(&args[1..]),
        [_, help, what, ..] if help == "help" && lab(what) => Some(&args[1..]),
        _ => None,
    }
}

/// Execs the lab with `args` (after `argv[0]`); returns only when it cannot be run, with why:
/// the lab is not next to this binary (naming the file and the command that builds it), or the
/// exec failed.
pub fn exec_lab(args: &[OsString]) -> anyhow::Error {
    let lab = match lab_path() {
        Ok(lab) => lab,
        Err(e) => return e,
    };
    let argv0 = std::env::args_os()
        .next()
        .unwrap_or_else(|| OsString::from("corestack"));
    let err = Command::new(&lab).arg0(argv0).args(args).exec();
    if err.kind() == std::io::ErrorKind::NotFound {
        let build = if cfg!(debug_assertions) {
            "cargo build -p bench"
        } else {
            "cargo build --release -p bench"
        };
        return anyhow!(
            "{} not found: `corestack bench` and `corestack demo` run it; build it with `{build}` (the workspace build puts it next to corestack)",
            lab.display()
        );
    }
    anyhow::Error::new(err).context(format!("running {}", lab.display()))
}

/// `corestack-lab` in this executable's directory.
fn lab_path() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding the corestack executable")?;
    Ok(exe.with_file_name(LAB))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn bench_demo_and_their_help_go_to_the_lab_as_typed_and_the_rest_stays() {
        for line in [
            &["corestack", "bench", "pingpong", "--help"][..],
            &["corestack", "bench", "--", "pingpong"],
            &["corestack", "bench"],
            &["corestack", "demo", "--rounds", "1"],
            &["corestack", "help", "bench", "pingpong"],
            &["corestack", "help", "demo"],
        ] {
            let args = os(line);
            assert_eq!(lab_args(&args), Some(&args[1..]), "{line:?}");
        }
        for line in [
            &["corestack", "help"][..],
            &["corestack", "help", "serve"],
            &["corestack", "serve", "echo", "bench"],
            &["corestack", "--help", "bench"],
            &["corestack"],
        ] {
            assert_eq!(lab_args(&os(line)), None, "{line:?}");
        }
    }
}
