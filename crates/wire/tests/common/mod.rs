//! What the property tests share.

use proptest::test_runner::{Config, RngSeed};

/// 2000 cases from a fixed seed: every run tries the same inputs, so a
/// failure reproduces.
pub fn config() -> Config {
    Config {
        cases: 2000,
        rng_seed: RngSeed::Fixed(0x5eed_c0de),
        ..Config::default()
    }
}
