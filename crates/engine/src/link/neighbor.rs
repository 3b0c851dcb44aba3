//! The IPv6 neighbor cache (RFC 4861 §5.1, §7.3): IPv6 → MAC with the
//! Neighbor Unreachability Detection states, and a bounded queue of
//! frames waiting for resolution (shared with ARP: `arp::WaitQueue`).
//!
//! States (RFC 4861 §7.3.2), kept simple but honest:
//! - INCOMPLETE: resolution under way; a multicast Neighbor Solicitation
//!   every [`RETRANS_TIMER`], [`MAX_MULTICAST_SOLICIT`] in all, then the
//!   entry and the frames waiting for it are dropped (§7.2.2);
//! - REACHABLE: confirmed within [`REACHABLE_TIME`] (a solicited
//!   advertisement, or [`NeighborCache::confirm`] from upper layers); it
//!   turns STALE when that time passes;
//! - STALE: usable, unconfirmed; the first packet sent to it moves it to
//!   DELAY (§7.3.3);
//! - DELAY: [`DELAY_FIRST_PROBE_TIME`] for upper layers to confirm, then
//!   PROBE;
//! - PROBE: a unicast Neighbor Solicitation every [`RETRANS_TIMER`],
//!   [`MAX_UNICAST_SOLICIT`] in all, then the entry is deleted.
//!
//! Not done: the randomized ReachableTime (§6.3.2) is the fixed base
//! value, and Router Advertisements do not change it; ICMPv6 address
//! unreachable is not sent for our own packets dropped unresolved.
//!
//! All storage is allocated by [`NeighborCache::new`]; a full cache
//! evicts its stalest entry.

use crate::link::arp::WaitQueue;
use crate::time::Instant;
use core::net::Ipv6Addr;
use core::time::Duration;
use std::collections::HashMap;
use wire::MacAddr;

/// RFC 4861 §10 REACHABLE_TIME: how long a confirmation holds.
pub const REACHABLE_TIME: Duration = Duration::from_secs(30);
/// RFC 4861 §10 RETRANS_TIMER: between solicitations for one neighbor.
pub const RETRANS_TIMER: Duration = Duration::from_secs(1);
/// RFC 4861 §10 DELAY_FIRST_PROBE_TIME.
pub const DELAY_FIRST_PROBE_TIME: Duration = Duration::from_secs(5);
/// RFC 4861 §10 MAX_MULTICAST_SOLICIT: solicitations while INCOMPLETE.
pub const MAX_MULTICAST_SOLICIT: u32 = 3;
/// RFC 4861 §10 MAX_UNICAST_SOLICIT: probes in PROBE.
pub const MAX_UNICAST_SOLICIT: u32 = 3;

/// Reachability state of a neighbor (RFC 4861 §7.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighborState {
    /// Resolution in progress; no link-layer address yet.
    Incomplete,
    /// Known reachable recently.
    Reachable,
    /// Not known reachable; used until traffic asks for a check.
    Stale,
    /// Waiting for upper layers to confirm before probing.
    Delay,
    /// Probed with unicast solicitations.
    Probe,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    state: NeighborState,
    /// Unset (zero) while INCOMPLETE.
    mac: MacAddr,
    /// REACHABLE: when it turns STALE; DELAY: when probing starts;
    /// INCOMPLETE, PROBE: when the last solicitation went out.
    at: Instant,
    /// Solicitations sent in INCOMPLETE or PROBE.
    tries: u32,
    /// Last time the entry changed or was used (eviction order).
    touched: Instant,
}

/// What the caller must do after [`NeighborCache::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdAction {
    /// Send a Neighbor Solicitation for `target`: multicast to its
    /// solicited-node group when `unicast` is None, else to that MAC
    /// (a PROBE, RFC 4861 §7.3.3).
    Solicit {
        /// The address being resolved.
        target: Ipv6Addr,
        /// The MAC of a neighbor being probed.
        unicast: Option<MacAddr>,
    },
    /// Resolution of a neighbor failed: this many waiting frames dropped.
    Unresolved(usize),
}

/// The neighbor cache and the frames waiting on it.
pub struct NeighborCache {
    entries: HashMap<Ipv6Addr, Entry>,
    waiting: WaitQueue<Ipv6Addr>,
    capacity: usize,
}

impl NeighborCache {
    /// A cache of `capacity` neighbors and `waiting` queued frames.
    pub fn new(capacity: usize, waiting: usize) -> NeighborCache {
        let capacity = capacity.max(1);
        NeighborCache {
            entries: HashMap::with_capacity(capacity),
            waiting: WaitQueue::new(waiting, Ipv6Addr::UNSPECIFIED),
            capacity,
        }
    }

    /// The state and MAC of `ip` without using it (the MAC is meaningless
    /// while INCOMPLETE); REACHABLE past its time reads as STALE.
    pub fn peek(&self, ip: Ipv6Addr, now: Instant) -> Option<(NeighborState, MacAddr)> {
        self.entries.get(&ip).map(|e| {
            let state = match e.state {
                NeighborState::Reachable if now >= e.at => NeighborState::Stale,
                s => s,
            };
            (state, e.mac)
        })
    }

    /// The MAC to send a packet to `ip` now, if known: sending to a STALE
    /// entry moves it to DELAY (RFC 4861 §7.3.3).
    pub fn lookup(&mut self, ip: Ipv6Addr, now: Instant) -> Option<MacAddr> {
        let e = self.entries.get_mut(&ip)?;
        if e.state == NeighborState::Reachable && now >= e.at {
            e.state = NeighborState::Stale;
        }
        match e.state {
            NeighborState::Incomplete => None,
            NeighborState::Stale => {
                e.state = NeighborState::Delay;
                e.at = now + DELAY_FIRST_PROBE_TIME;
                e.touched = now;
                Some(e.mac)
            }
            _ => {
                e.touched = now;
                Some(e.mac)
            }
        }
    }

    /// Forward progress from upper layers (RFC 4861 §7.3.1, e.g. new data
    /// acknowledged by TCP): `ip` is REACHABLE again, if it has an entry
    /// with an address.
    pub fn confirm(&mut self, ip: Ipv6Addr, now: Instant) {
        if let Some(e) = self.entries.get_mut(&ip) {
            if e.state != NeighborState::Incomplete {
                e.state = NeighborState::Reachable;
                e.at = now + REACHABLE_TIME;
                e.tries = 0;
                e.touched = now;
            }
        }
    }

    /// Queues a frame for `next_hop` (unresolved: no entry, or INCOMPLETE):
    /// `fill` writes it into a buffer of [`crate::link::arp::FRAME_CAP`] bytes
    /// and returns its length. Returns Some(true) when a solicitation
    /// should go out now (a new INCOMPLETE entry), Some(false) when one is
    /// already out, None when the queue is full (the caller counts the drop).
    pub fn enqueue(
        &mut self,
        next_hop: Ipv6Addr,
        now: Instant,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Option<bool> {
        if !self.waiting.push(next_hop, fill) {
            return None;
        }
        if self.entries.contains_key(&next_hop) {
            return Some(false);
        }
        self.insert(
            next_hop,
            Entry {
                state: NeighborState::Incomplete,
                mac: MacAddr::ZERO,
                at: now,
                tries: 1,
                touched: now,
            },
        );
        Some(true)
    }

    /// A Neighbor Solicitation from `ip` carried Source Link-Layer Address
    /// `mac` (RFC 4861 §7.2.3): the entry is created or, when the address
    /// differs, updated, as STALE; an INCOMPLETE entry gets its address.
    /// Returns true if frames wait for `ip` (call [`Self::take_waiting`]).
    pub fn learn_solicit(&mut self, ip: Ipv6Addr, mac: MacAddr, now: Instant) -> bool {
        match self.entries.get_mut(&ip) {
            Some(e) => {
                if e.state == NeighborState::Incomplete || e.mac != mac {
                    e.state = NeighborState::Stale;
                    e.mac = mac;
                    e.tries = 0;
                }
                e.touched = now;
            }
            None => self.insert(
                ip,
                Entry {
                    state: NeighborState::Stale,
                    mac,
                    at: now,
                    tries: 0,
                    touched: now,
                },
            ),
        }
        self.waiting.any(ip)
    }

    /// A Neighbor Advertisement for `target` (RFC 4861 §7.2.5) with Target
    /// Link-Layer Address `mac` (if carried) and flags S and O. Without an
    /// entry it is ignored (no entry is created). Returns true if frames
    /// wait for `target`.
    pub fn learn_advert(
        &mut self,
        target: Ipv6Addr,
        mac: Option<MacAddr>,
        solicited: bool,
        override_flag: bool,
        now: Instant,
    ) -> bool {
        let Some(e) = self.entries.get_mut(&target) else {
            return false;
        };
        let reachable = |e: &mut Entry| {
            e.state = NeighborState::Reachable;
            e.at = now + REACHABLE_TIME;
            e.tries = 0;
        };
        if e.state == NeighborState::Incomplete {
            // Without an address the advertisement cannot resolve anything.
            let Some(mac) = mac else {
                return false;
            };
            e.mac = mac;
            if solicited {
                reachable(e);
            } else {
                e.state = NeighborState::Stale;
                e.tries = 0;
            }
            e.touched = now;
            return self.waiting.any(target);
        }
        let differs = mac.is_some_and(|m| m != e.mac);
        if !override_flag && differs {
            // Keep the address we know; it is only in doubt now.
            if e.state == NeighborState::Reachable {
                e.state = NeighborState::Stale;
            }
            return false;
        }
        if let Some(m) = mac {
            e.mac = m;
        }
        if solicited {
            reachable(e);
        } else if differs {
            e.state = NeighborState::Stale;
        }
        e.touched = now;
        false
    }

    /// Hands every frame waiting for `ip` to `send(frame)` and frees it.
    pub fn take_waiting(&mut self, ip: Ipv6Addr, send: impl FnMut(&mut [u8])) {
        self.waiting.take(ip, send);
    }

    /// Timers: solicitations to retransmit (INCOMPLETE, PROBE), DELAY
    /// entries that start probing, and neighbors given up on. Call about
    /// every 100 ms; O(entries).
    pub fn poll(&mut self, now: Instant, mut act: impl FnMut(NdAction)) {
        let mut gone = [Ipv6Addr::UNSPECIFIED; 8];
        let mut n_gone = 0;
        for (ip, e) in self.entries.iter_mut() {
            match e.state {
                NeighborState::Incomplete | NeighborState::Probe
                    if now.saturating_since(e.at) >= RETRANS_TIMER =>
                {
                    let max = if e.state == NeighborState::Incomplete {
                        MAX_MULTICAST_SOLICIT
                    } else {
                        MAX_UNICAST_SOLICIT
                    };
                    if e.tries >= max {
                        if n_gone < gone.len() {
                            gone[n_gone] = *ip;
                            n_gone += 1;
                        }
                    } else {
                        e.tries += 1;
                        e.at = now;
                        let unicast = (e.state == NeighborState::Probe).then_some(e.mac);
                        act(NdAction::Solicit {
                            target: *ip,
                            unicast,
                        });
                    }
                }
                NeighborState::Delay if now >= e.at => {
                    e.state = NeighborState::Probe;
                    e.tries = 1;
                    e.at = now;
                    act(NdAction::Solicit {
                        target: *ip,
                        unicast: Some(e.mac),
                    });
                }
                _ => {}
            }
        }
        for ip in &gone[..n_gone] {
            self.entries.remove(ip);
            let mut dropped = 0;
            self.waiting.take(*ip, |_| dropped += 1);
            act(NdAction::Unresolved(dropped));
        }
    }

    /// Adds an entry, evicting the least recently touched one (INCOMPLETE
    /// entries last) when full: bounded, and rare.
    fn insert(&mut self, ip: Ipv6Addr, entry: Entry) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&ip) {
            let victim = self
                .entries
                .iter()
                .min_by_key(|(_, e)| (e.state == NeighborState::Incomplete, e.touched))
                .map(|(k, _)| *k);
            if let Some(old) = victim {
                self.entries.remove(&old);
                self.waiting.take(old, |_| {});
            }
        }
        self.entries.insert(ip, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 9);
    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 9]);
    const OTHER: MacAddr = MacAddr([2, 0, 0, 0, 0, 10]);

    fn t(ms: u64) -> Instant {
        Instant(1_000_000_000 + ms * 1_000_000)
    }

    fn actions(c: &mut NeighborCache, now: Instant) -> Vec<NdAction> {
        let mut v = Vec::new();
        c.poll(now, |a| v.push(a));
        v
    }

    #[test]
    fn incomplete_solicits_three_times_then_drops_waiting() {
        let mut c = NeighborCache::new(4, 2);
        assert_eq!(c.enqueue(IP, t(0), |_| 60), Some(true));
        assert_eq!(c.enqueue(IP, t(0), |_| 60), Some(false));
        assert_eq!(c.enqueue(IP, t(0), |_| 60), None, "queue bound");
        assert_eq!(c.lookup(IP, t(0)), None);
        let solicit = NdAction::Solicit {
            target: IP,
            unicast: None,
        };
        assert_eq!(actions(&mut c, t(1000)), vec![solicit]);
        assert_eq!(actions(&mut c, t(2000)), vec![solicit]);
        assert_eq!(actions(&mut c, t(3000)), vec![NdAction::Unresolved(2)]);
        assert_eq!(c.peek(IP, t(3000)), None);
    }

    #[test]
    fn solicited_advert_resolves_to_reachable_then_stale_delay_probe() {
        let mut c = NeighborCache::new(4, 2);
        c.enqueue(IP, t(0), |_| 60);
        assert!(c.learn_advert(IP, Some(MAC), true, true, t(10)));
        let mut n = 0;
        c.take_waiting(IP, |_| n += 1);
        assert_eq!(n, 1);
        assert_eq!(c.peek(IP, t(10)), Some((NeighborState::Reachable, MAC)));
        let later = t(10) + REACHABLE_TIME;
        assert_eq!(c.peek(IP, later), Some((NeighborState::Stale, MAC)));
        // Used while STALE: DELAY, then PROBE with a unicast solicitation.
        assert_eq!(c.lookup(IP, later), Some(MAC));
        assert_eq!(c.peek(IP, later).unwrap().0, NeighborState::Delay);
        let probe = later + DELAY_FIRST_PROBE_TIME;
        assert_eq!(
            actions(&mut c, probe),
            vec![NdAction::Solicit {
                target: IP,
                unicast: Some(MAC)
            }]
        );
        assert_eq!(c.peek(IP, probe).unwrap().0, NeighborState::Probe);
        // Confirmed by an answer: REACHABLE again.
        c.learn_advert(IP, Some(MAC), true, false, probe);
        assert_eq!(c.peek(IP, probe).unwrap().0, NeighborState::Reachable);
    }

    #[test]
    fn silent_probe_deletes_entry() {
        let mut c = NeighborCache::new(4, 2);
        c.learn_solicit(IP, MAC, t(0));
        c.lookup(IP, t(0));
        let mut now = t(0) + DELAY_FIRST_PROBE_TIME;
        let mut probes = 0;
        for _ in 0..6 {
            for a in actions(&mut c, now) {
                if matches!(a, NdAction::Solicit { .. }) {
                    probes += 1;
                }
            }
            now = now + RETRANS_TIMER;
        }
        assert_eq!(probes, MAX_UNICAST_SOLICIT);
        assert_eq!(c.peek(IP, now), None);
    }

    #[test]
    fn advert_without_override_does_not_replace_known_address() {
        let mut c = NeighborCache::new(4, 2);
        c.enqueue(IP, t(0), |_| 60);
        c.learn_advert(IP, Some(MAC), true, true, t(0));
        c.learn_advert(IP, Some(OTHER), false, false, t(1));
        assert_eq!(c.peek(IP, t(1)), Some((NeighborState::Stale, MAC)));
        c.learn_advert(IP, Some(OTHER), false, true, t(2));
        assert_eq!(c.peek(IP, t(2)), Some((NeighborState::Stale, OTHER)));
    }

    #[test]
    fn unsolicited_advert_from_stranger_is_not_cached() {
        let mut c = NeighborCache::new(4, 2);
        assert!(!c.learn_advert(IP, Some(MAC), false, true, t(0)));
        assert_eq!(c.peek(IP, t(0)), None);
    }

    #[test]
    fn full_cache_evicts_least_recently_touched() {
        let mut c = NeighborCache::new(2, 2);
        let ip = |n| Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, n);
        c.learn_solicit(ip(1), MAC, t(0));
        c.learn_solicit(ip(2), MAC, t(1));
        c.learn_solicit(ip(3), MAC, t(2));
        assert_eq!(c.peek(ip(1), t(2)), None);
        assert!(c.peek(ip(2), t(2)).is_some() && c.peek(ip(3), t(2)).is_some());
    }
}
