//! Path MTU Discovery (RFC 8201 for IPv6, RFC 1191 for IPv4): a bounded
//! per-destination table of path MTUs learned from ICMPv6 Packet Too Big
//! and ICMP Fragmentation Needed messages, one per family.
//!
//! - An estimate never goes below the family's floor: the IPv6 minimum
//!   link MTU, 1280 (RFC 8201 §4, RFC 8200 §5), or [`MIN_PMTU_V4`] (552,
//!   Linux's `min_pmtu`; RFC 1191 §3 allows down to 68), and a report never
//!   raises one (RFC 8201 §4, RFC 1191 §3).
//! - An estimate expires [`PMTU_LIFETIME`] (10 minutes, §4's suggestion)
//!   after it was lowered, and the link MTU is tried again.
//! - [`PMTU_ENTRIES`] destinations at most, allocated at start; a full
//!   table replaces the entry closest to expiry.
//! - Every lowering bumps the table's [`PmtuTable::generation`]: a
//!   connection compares it with the one it last saw before it sends, so
//!   every connection to a destination takes a lowered estimate at its next
//!   segment (RFC 8201 §5.2, RFC 1191 §6.3), without a table look-up per
//!   segment.

use crate::time::Instant;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::time::Duration;

/// Destinations with a learned path MTU at once.
pub const PMTU_ENTRIES: usize = 64;
/// How long a lowered estimate holds (RFC 8201 §4: at least 5 minutes,
/// 10 recommended).
pub const PMTU_LIFETIME: Duration = Duration::from_secs(600);

/// The smallest IPv4 path MTU an ICMP report can set, bytes: Linux's
/// `net.ipv4.route.min_pmtu`. Below it the estimate stays at 552 (packets
/// keep DF set; RFC 1191 §3's 68-byte floor is not honoured).
pub const MIN_PMTU_V4: usize = 552;

/// An address family's floor for path MTU estimates, bytes.
pub trait PmtuFloor: Copy + PartialEq {
    /// The smallest estimate a report can set.
    const MIN_PMTU: usize;
}

impl PmtuFloor for Ipv6Addr {
    const MIN_PMTU: usize = wire::ipv6::MIN_MTU;
}

impl PmtuFloor for Ipv4Addr {
    const MIN_PMTU: usize = MIN_PMTU_V4;
}

#[derive(Debug, Clone, Copy)]
struct Entry<A> {
    dst: A,
    mtu: usize,
    expires: Instant,
}

/// The path MTU table of one engine for one address family (`A`:
/// [`Ipv4Addr`] or [`Ipv6Addr`]).
#[derive(Debug, Clone)]
pub struct PmtuTable<A> {
    entries: Vec<Entry<A>>,
    capacity: usize,
    generation: u32,
}

impl<A: PmtuFloor> PmtuTable<A> {
    /// Room for `capacity` destinations.
    pub fn new(capacity: usize) -> PmtuTable<A> {
        PmtuTable {
            entries: Vec::with_capacity(capacity),
            capacity,
            generation: 0,
        }
    }

    /// How many times an estimate went down (wrapping): a connection that
    /// saw this value before needs no look-up (see the module's notes).
    #[inline]
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The learned path MTU to `dst` at `now`, if any (at least
    /// `A::MIN_PMTU`). O(entries).
    pub fn get(&self, dst: A, now: Instant) -> Option<usize> {
        self.entries
            .iter()
            .find(|e| e.dst == dst && e.expires > now)
            .map(|e| e.mtu)
    }

    /// The path MTU toward `dst` at `now` over a link of `link_mtu`
    /// bytes: the learned estimate, else the link MTU. O(entries).
    pub fn path_mtu(&self, dst: A, now: Instant, link_mtu: usize) -> usize {
        self.get(dst, now).map_or(link_mtu, |m| m.min(link_mtu))
    }

    /// A Packet Too Big or Fragmentation Needed reported `mtu` toward
    /// `dst`, whose path MTU is `current` now: lowers the estimate to
    /// `mtu`, raised to `A::MIN_PMTU`. Returns the new estimate when it
    /// went down, None when the report changed nothing (not below
    /// `current`).
    pub fn lower(&mut self, dst: A, mtu: usize, current: usize, now: Instant) -> Option<usize> {
        let mtu = mtu.max(A::MIN_PMTU);
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
        self.generation = self.generation.wrapping_add(1);
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
        assert_eq!(p.generation(), 1);
        assert_eq!(p.lower(DST, 1450, 1400, t), None, "never raised");
        assert_eq!(p.generation(), 1, "nothing changed");
        assert_eq!(p.lower(DST, 500, 1400, t), Some(1280));
        assert_eq!(p.generation(), 2);
        assert_eq!(p.get(DST, t), Some(1280));
        assert_eq!(p.get(DST, t + PMTU_LIFETIME), None, "expired");
    }

    #[test]
    fn ipv4_estimates_stop_at_552() {
        let mut p = PmtuTable::<Ipv4Addr>::new(2);
        let dst = Ipv4Addr::new(10, 0, 0, 1);
        assert_eq!(p.lower(dst, 1000, 1500, Instant(1)), Some(1000));
        assert_eq!(p.lower(dst, 68, 1000, Instant(1)), Some(MIN_PMTU_V4));
        assert_eq!(p.get(dst, Instant(1)), Some(552));
        assert_eq!(p.get(Ipv4Addr::new(10, 0, 0, 2), Instant(1)), None);
    }

    #[test]
    fn full_table_replaces_entry_closest_to_expiry() {
        let mut p = PmtuTable::<Ipv6Addr>::new(2);
        let a = |n| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, n);
        p.lower(a(1), 1300, 1500, Instant(1));
        p.lower(a(2), 1300, 1500, Instant(2));
        p.lower(a(3), 1300, 1500, Instant(3));
        assert_eq!(p.get(a(1), Instant(3)), None);
        assert_eq!(p.get(a(3), Instant(3)), Some(1300));
    }
}
