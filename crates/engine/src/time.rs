//! Engine time: a monotonic instant in nanoseconds, read once per loop
//! iteration by the caller and passed down; the engine never reads the clock.

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point on the monotonic clock, in nanoseconds since an arbitrary origin
/// (CLOCK_MONOTONIC for a real engine, 0 for simulations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub u64);

impl Instant {
    /// The current CLOCK_MONOTONIC time.
    pub fn now() -> Instant {
        use std::sync::OnceLock;
        static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
        let origin = *ORIGIN.get_or_init(std::time::Instant::now);
        // Start at 1 s so that "0" can mean "never" in counters and tests.
        Instant(origin.elapsed().as_nanos() as u64 + 1_000_000_000)
    }

    /// Nanoseconds since the origin.
    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.as_nanos() as u64))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.as_nanos() as u64))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}
