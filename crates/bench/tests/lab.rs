//! The `corestack-lab` binary on its own, without namespaces. Being an integration test, this
//! also makes `cargo test` build the binary, which crate `corestack-cli`'s tests of `corestack
//! bench` and `corestack demo` run (through `corestack`, which execs the lab next to it).

use std::os::unix::process::CommandExt;
use std::process::Command;

fn lab_help(arg0: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corestack-lab"));
    if let Some(name) = arg0 {
        cmd.arg0(name);
    }
    let out = cmd.args(args).output().expect("running corestack-lab");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn lab_help_lists_bench_and_demo() {
    let help = lab_help(None, &["--help"]);
    assert!(help.contains("Usage: corestack-lab <COMMAND>"), "{help}");
    for command in ["bench", "demo"] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{command} "))),
            "{command}: {help}"
        );
    }
}

#[test]
fn lab_run_as_corestack_says_corestack_in_its_help() {
    let help = lab_help(Some("corestack"), &["bench", "pingpong", "--help"]);
    assert!(help.contains("Usage: corestack bench pingpong"), "{help}");
    let help = lab_help(Some("/some/dir/corestack"), &["demo", "--help"]);
    assert!(help.contains("Usage: corestack demo"), "{help}");
}
