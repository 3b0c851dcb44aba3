//! IPv6 Path MTU Discovery (RFC 8201): a bounded per-destination table
//! of path MTUs learned from Packet Too Big messages.
//!
//! - An estimate never goes below the IPv6 minimum link MTU, 1280 (RFC
//!   8201 §4, RFC 8200 §5), and a Packet Too Big never raises one (§4).
//! - An estimate expires [`PMTU_LIFETIME`] (10 minutes, §4's suggestion)
//!   after it was lowered, and the link MTU is tried again.
//! - [`PMTU_ENTRIES`] destinations at most, allocated at start; a full
//!   table replaces the entry closest to expiry.

use crate::time::Instant;
use core::net::Ipv6Addr;
use core::time::Duration;
use wire::ipv6::MIN_MTU;

/// Destinations with a learned path MTU at once.
pub const PMTU_ENTRIES: usize = 64;
/// How long a lowered estimate holds (RFC 8201 §4: at least 5 minutes,
/// 10 recommended).
pub const PMTU_LIFETIME: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
struct Entry {
    dst: Ipv6Addr,
    mtu: usize,
    expires: Instant,
}

/// The path MTU table of one engine.
#[derive(Debug, Clone)]
pub struct PmtuTable {
    entries: Vec<Entry>,
    capacity: usize,
}

impl PmtuTable {
    /// Room for `capacity` destinations.
    pub fn new(capacity: usize) -> PmtuTable {
        PmtuTable {
            entries: Vec::with_capacity(capacity),
            capacity,
        }
    }

    /// The learned path MTU to `dst` at `now`, if any (at least 1280).
    pub fn get(&self, dst: Ipv6Addr, now: Instant) -> Option<usize> {
        self.entries
            .iter()
            .find(|e| e.dst == dst && e.expires > now)
            .map(|e| e.mtu)
    }

    /// A Packet Too Big reported `mtu` toward `dst`, whose path MTU is
    /// `current` now: lowers the estimate to `mtu`, raised to 1280.
    /// Returns the new estimate when it went down, None when the report
    /// changed nothing (not below `current`).
    pub fn lower(
        &mut self,
        dst: Ipv6Addr,
        mtu: usize,
        current: usize,
        now: Instant,
    ) -> Option<usize> {
        let mtu = mtu.max(MIN_MTU);
        if mtu >= current {
            return None;
        }
        let entry = Entry {
            dst,
            mtu,
            expires: now + PMTU_LIFETIME,
        };
        if let Some(e) = self.entries.iter_mut().find(|e| e.dst == dst) {
            *e = entry;
        } else if self.entries.len() < self.capacity {
            self.entries.push(entry);
        } else if let Some(e) = self.entries.iter_mut().min_by_key(|e| e.expires) {
            *e = entry;
        } else {
            return None;
        }
        Some(mtu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

    #[test]
    fn lowers_never_below_1280_never_raises_and_expires() {
        let mut p = PmtuTable::new(2);
        let t = Instant(1);
        assert_eq!(p.lower(DST, 1400, 1500, t), Some(1400));
        assert_eq!(p.lower(DST, 1450, 1400, t), None, "never raised");
        assert_eq!(p.lower(DST, 500, 1400, t), Some(1280));
        assert_eq!(p.get(DST, t), Some(1280));
        assert_eq!(p.get(DST, t + PMTU_LIFETIME), None, "expired");
    }

    #[test]
    fn full_table_replaces_entry_closest_to_expiry() {
        let mut p = PmtuTable::new(2);
        let a = |n| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, n);
        p.lower(a(1), 1300, 1500, Instant(1));
        p.lower(a(2), 1300, 1500, Instant(2));
        p.lower(a(3), 1300, 1500, Instant(3));
        assert_eq!(p.get(a(1), Instant(3)), None);
        assert_eq!(p.get(a(3), Instant(3)), Some(1300));
    }
}
