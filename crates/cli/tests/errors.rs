//! The errors a newcomer meets are one line, say what to do, and exit non-zero. These need no
//! namespaces.

use std::process::Command;

fn corestack(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_corestack"))
        .args(args)
        .output()
        .expect("running corestack");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn serve_echo_with_missing_interface_says_check_ip_link() {
    let (ok, err) = corestack(&[
        "serve",
        "echo",
        "--iface",
        "nosuchif9",
        "--ip",
        "10.99.1.2/24",
        "--port",
        "7",
    ]);
    assert!(!ok);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("nosuchif9") && err.contains("ip link"),
        "{err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "more than one line: {err}"
    );
}

#[test]
fn nc_with_bad_address_is_rejected_with_an_example() {
    let (ok, err) = corestack(&["nc", "--iface", "lo", "--ip", "10.99.1", "-l", "5000"]);
    assert!(!ok);
    assert!(err.contains("10.77.1.2/24"), "{err}");
}

#[test]
fn impair_with_loss_over_100_percent_is_rejected() {
    let (ok, err) = corestack(&["impair", "--a", "lo", "--b", "lo", "--loss", "150"]);
    assert!(!ok);
    assert!(err.contains("percentage"), "{err}");
}

/// A directory of the test's own, removed on drop.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn bench_help_comes_from_the_lab_next_to_corestack_under_corestacks_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_corestack"))
        .args(["bench", "--help"])
        .output()
        .expect("running corestack");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Usage: corestack bench"), "{stdout}");
    assert!(stdout.contains("pingpong"), "{stdout}");
}

#[test]
fn bench_and_demo_without_the_lab_say_which_file_is_missing_and_how_to_build_it() {
    let dir = Scratch(std::env::temp_dir().join(format!("cs-no-lab-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("creating the scratch directory");
    let alone = dir.0.join("corestack");
    std::fs::copy(env!("CARGO_BIN_EXE_corestack"), &alone).expect("copying corestack");
    let lab = dir.0.join("corestack-lab");
    for args in [&["bench", "pingpong", "--help"][..], &["demo"]] {
        let out = Command::new(&alone)
            .args(args)
            .output()
            .expect("running corestack");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.starts_with(&format!("error: {} not found", lab.display())),
            "{args:?}: {err}"
        );
        assert!(err.contains("cargo build"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}
