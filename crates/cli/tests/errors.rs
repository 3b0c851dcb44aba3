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
