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
