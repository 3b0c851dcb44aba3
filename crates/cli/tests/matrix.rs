//! The loss/delay matrix: corestack against the Linux stack over veth through the impairment
//! bridge (`corestack impair` in a middle namespace), both directions (Linux `nc` -> corestack
//! `nc -l`, corestack `nc` -> Linux `nc -l`), 64 MiB of seeded data, sha256 equal on arrival.
//!
//! Every impairment applies to both directions of the bridge (data and ACKs alike), with a fixed
//! seed. Delay: `--delay-us 5000` is 5 ms each way, 10 ms of added round-trip time. Each transfer
//! has a time bound and fails saying so when it is exceeded; after it, the bridge's counters must
//! show the impairment really happened. Needs root; runs one test at a time (the lock in
//! `common`). Addresses 10.N.1.1 (Linux) and 10.N.1.2 (corestack), N = 90..=103.
//!
//! Time: the whole matrix took 93 s on 2 cores here; the slowest cells were 10 ms RTT + 1% loss,
//! corestack -> Linux (43 s) and 5% loss, corestack -> Linux (29 s); each bound leaves about 3x.
//! All cells move the full 64 MiB.
//!
//! Then the benchmarks over IPv6, short (about 40 s together): `bench echo-matrix --family 6`
//! (clean and 1 % loss, one seed; every run byte-exact against both servers) and `bench
//! stream-matrix --family 6` (one round of 1 s per pairing, clean and lossy), both read back
//! from their `--json`.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// Bytes per transfer.
const MATRIX_BYTES: u64 = 64 << 20;

/// Which way the data flows.
#[derive(Clone, Copy)]
enum Dir {
    LinuxToCorestack,
    CorestackToLinux,
}

/// Runs one cell: builds the impaired link, moves `bytes` in `dir` within `bound`, returns what
/// the bridge did.
fn cell(
    net: u8,
    port: u16,
    impair: &[&str],
    dir: Dir,
    bytes: u64,
    bound: Duration,
) -> BridgeCounts {
    let mut link = Impaired::new(net, impair);
    let args = link.pair.core_args();
    let t0 = Instant::now();
    match dir {
        Dir::LinuxToCorestack => {
            transfer_linux_to_corestack_bytes(&link.pair, &args, port, bytes, bound)
        }
        Dir::CorestackToLinux => {
            transfer_corestack_to_linux_bytes(&link.pair, &args, port, bytes, bound)
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let counts = link.stop_bridge_counts();
    eprintln!(
        "impair {impair:?}: {bytes} bytes in {secs:.1} s ({:.1} Mbit/s); bridge: {counts:?}",
        bytes as f64 * 8.0 / 1e6 / secs
    );
    counts
}

/// Declares the two tests (one per direction) of one cell.
macro_rules! cells {
    ($($name_in:ident, $name_out:ident, $net:expr, $impair:expr, $bytes:expr, $bound_s:expr, $check:expr;)*) => {$(
        #[test]
        fn $name_in() {
            let _lock = start();
            let c = cell($net, 6000 + $net, $impair, Dir::LinuxToCorestack, $bytes, Duration::from_secs($bound_s));
            let check: fn(&BridgeCounts) -> bool = $check;
            assert!(check(&c), "the link was not impaired as asked: {c:?}");
        }

        #[test]
        fn $name_out() {
            let _lock = start();
            let c = cell($net + 1, 6001 + $net, $impair, Dir::CorestackToLinux, $bytes, Duration::from_secs($bound_s));
            let check: fn(&BridgeCounts) -> bool = $check;
            assert!(check(&c), "the link was not impaired as asked: {c:?}");
        }
    )*};
}

cells! {
    loss_0_1pct_linux_nc_to_corestack_64mib_sha256_equal,
    loss_0_1pct_corestack_nc_to_linux_64mib_sha256_equal,
    90, &["--loss", "0.1", "--seed", "11"], MATRIX_BYTES, 60, |c| c.lost > 10;

    loss_1pct_linux_nc_to_corestack_64mib_sha256_equal,
    loss_1pct_corestack_nc_to_linux_64mib_sha256_equal,
    92, &["--loss", "1", "--seed", "12"], MATRIX_BYTES, 90, |c| c.lost > 100;

    loss_5pct_linux_nc_to_corestack_64mib_sha256_equal,
    loss_5pct_corestack_nc_to_linux_64mib_sha256_equal,
    94, &["--loss", "5", "--seed", "13"], MATRIX_BYTES, 120, |c| c.lost > 500;

    delay_5ms_each_way_loss_1pct_linux_nc_to_corestack_sha256_equal,
    delay_5ms_each_way_loss_1pct_corestack_nc_to_linux_sha256_equal,
    96, &["--delay-us", "5000", "--loss", "1", "--seed", "14"], MATRIX_BYTES, 120, |c| c.lost > 10;

    reorder_5pct_linux_nc_to_corestack_64mib_sha256_equal,
    reorder_5pct_corestack_nc_to_linux_64mib_sha256_equal,
    98, &["--reorder", "5", "--seed", "15"], MATRIX_BYTES, 60, |c| c.reordered > 500;

    duplicate_1pct_linux_nc_to_corestack_64mib_sha256_equal,
    duplicate_1pct_corestack_nc_to_linux_64mib_sha256_equal,
    100, &["--duplicate", "1", "--seed", "16"], MATRIX_BYTES, 60, |c| c.duplicated > 100;

    corrupt_0_1pct_linux_nc_to_corestack_64mib_sha256_equal,
    corrupt_0_1pct_corestack_nc_to_linux_64mib_sha256_equal,
    102, &["--corrupt", "0.1", "--seed", "17"], MATRIX_BYTES, 60, |c| c.corrupted > 10;
}

/// Runs `corestack bench ARGS --json FILE` within `bound`; returns the report.
fn bench_json(args: &[&str], bound: Duration) -> serde_json::Value {
    let json = std::env::temp_dir().join(format!(
        "corestack-matrix-{}-{}.json",
        args[0],
        std::process::id()
    ));
    let _ = std::fs::remove_file(&json);
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("bench").args(args).arg("--json").arg(&json);
    let p = Proc::spawn(args[0], cmd, None, Out::Text);
    let f = p.finish(bound);
    assert!(
        f.status.success(),
        "corestack bench {args:?} failed:\n{}\n{}",
        f.stdout,
        f.stderr
    );
    let text = std::fs::read_to_string(&json).expect("the --json report");
    let _ = std::fs::remove_file(&json);
    serde_json::from_str(&text).expect("the --json report parses")
}

#[test]
fn echo_matrix_over_ipv6_is_byte_exact_on_both_stacks() {
    let _lock = start();
    let v = bench_json(
        &[
            "echo-matrix",
            "--family",
            "6",
            "--cases",
            "clean,loss1",
            "--seeds",
            "5",
            "--mib",
            "4",
        ],
        Duration::from_secs(150),
    );
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 4, "2 cases x 1 seed x 2 servers: {v}");
    for r in runs {
        assert_eq!(r["family"], "ipv6", "{r}");
        assert_eq!(r["outcome"], "ok", "{r}");
        assert_eq!(r["bytes_received"], 4 << 20, "{r}");
        assert!(r["mbytes_per_s"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    }
    let lossy = runs.iter().filter(|r| r["case"] == "loss1");
    for r in lossy {
        assert!(
            r["bridge"]["lost"].as_u64().unwrap_or(0) > 0,
            "no loss: {r}"
        );
    }
    for c in v["cases"].as_array().expect("cases") {
        assert!(c["median_ratio"].as_f64().is_some(), "no ratio: {c}");
    }
}

#[test]
fn stream_matrix_over_ipv6_measures_every_pairing() {
    let _lock = start();
    let v = bench_json(
        &[
            "stream-matrix",
            "--family",
            "6",
            "--rounds",
            "1",
            "--seconds",
            "1",
        ],
        Duration::from_secs(150),
    );
    assert_eq!(v["families"], serde_json::json!(["ipv6"]), "{v}");
    for phase in ["clean", "lossy"] {
        let p = &v[phase][0];
        for k in ["linux", "core_receives", "core_sends", "core_sends_xsk"] {
            let g = p[k][0].as_f64().unwrap_or(0.0);
            assert!(g > 1.0, "{phase} {k}: {g} Mbit/s in {v}");
        }
    }
}
