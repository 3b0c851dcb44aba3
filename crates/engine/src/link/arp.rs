//! ARP (RFC 826): a cache of IPv4 → MAC with expiry, and a bounded queue of
//! frames waiting for a next hop to be resolved.

use crate::time::Instant;
use core::net::Ipv4Addr;
use core::time::Duration;
use std::collections::HashMap;
use wire::MacAddr;

/// How long a learned entry is used before it is requested again.
pub const ENTRY_LIFETIME: Duration = Duration::from_secs(300);
/// Interval between ARP requests for one address.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// Requests sent before the waiting frames are dropped.
pub const MAX_TRIES: u32 = 3;
/// Bytes per waiting frame.
pub const FRAME_CAP: usize = 2048;
/// How long an entry gleaned from a SYN ([`ArpCache::glean`]) is used
/// unconfirmed, 4 s: the [`MAX_TRIES`] requests that confirm it are given
/// up [`MAX_TRIES`] × [`RETRY_INTERVAL`] after the first, and one more
/// interval passes before it expires. Unless an ARP packet from the address
/// confirms it, the address is then resolved as usual.
pub const GLEAN_LIFETIME: Duration =
    Duration::from_secs(RETRY_INTERVAL.as_secs() * (MAX_TRIES as u64 + 1));

struct Entry {
    mac: MacAddr,
    expires: Instant,
    /// Learned from an ARP packet (RFC 826), not gleaned from a SYN: only
    /// a confirmed entry is refreshed by the address's IP traffic.
    confirmed: bool,
}

struct Request {
    last_sent: Instant,
    tries: u32,
}

struct Waiting<K> {
    next_hop: K,
    len: usize,
    buf: Box<[u8]>,
}

/// Frames waiting for their next hop's link-layer address, keyed by the
/// next hop (an IPv4 address for ARP, an IPv6 one for Neighbor
/// Discovery): a fixed number of [`FRAME_CAP`]-byte buffers allocated at
/// start, none per frame.
pub(crate) struct WaitQueue<K> {
    waiting: Vec<Waiting<K>>,
    /// Indices into `waiting` that are free.
    free: Vec<usize>,
    used: Vec<usize>,
}

impl<K: Copy + PartialEq> WaitQueue<K> {
    /// Room for `n` frames; `none` fills the unused keys.
    pub(crate) fn new(n: usize, none: K) -> WaitQueue<K> {
        WaitQueue {
            waiting: (0..n)
                .map(|_| Waiting {
                    next_hop: none,
                    len: 0,
                    buf: vec![0u8; FRAME_CAP].into_boxed_slice(),
                })
                .collect(),
            free: (0..n).rev().collect(),
            used: Vec::with_capacity(n),
        }
    }

    /// Queues a frame for `next_hop`: `fill` writes it into a buffer of
    /// [`FRAME_CAP`] bytes and returns its length. False when full.
    pub(crate) fn push(&mut self, next_hop: K, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        let Some(i) = self.free.pop() else {
            return false;
        };
        let w = &mut self.waiting[i];
        w.next_hop = next_hop;
        w.len = fill(&mut w.buf).min(FRAME_CAP);
        self.used.push(i);
        true
    }

    /// True when frames wait for `next_hop`.
    pub(crate) fn any(&self, next_hop: K) -> bool {
        self.used
            .iter()
            .any(|&i| self.waiting[i].next_hop == next_hop)
    }

    /// Hands every frame waiting for `next_hop` to `send(frame)` and frees it.
    pub(crate) fn take(&mut self, next_hop: K, mut send: impl FnMut(&mut [u8])) {
        let mut k = 0;
        while k < self.used.len() {
            let i = self.used[k];
            if self.waiting[i].next_hop == next_hop {
                let w = &mut self.waiting[i];
                send(&mut w.buf[..w.len]);
                self.used.swap_remove(k);
                self.free.push(i);
            } else {
                k += 1;
            }
        }
    }
}

/// The ARP cache and the frames waiting on it. All storage is allocated
/// up front; `capacity` bounds both the cache and the waiting queue.
pub struct ArpCache {
    entries: HashMap<Ipv4Addr, Entry>,
    requests: HashMap<Ipv4Addr, Request>,
    waiting: WaitQueue<Ipv4Addr>,
    capacity: usize,
}

/// What the caller should do after [`ArpCache::poll`].
pub enum ArpAction {
    /// Send a request for this address.
    Request(Ipv4Addr),
    /// Frames for this address were dropped (no answer); the count.
    Unresolved(usize),
}

impl ArpCache {
    /// A cache for `capacity` addresses and `waiting` queued frames.
    pub fn new(capacity: usize, waiting: usize) -> ArpCache {
        ArpCache {
            entries: HashMap::with_capacity(capacity),
            requests: HashMap::with_capacity(capacity),
            waiting: WaitQueue::new(waiting, Ipv4Addr::UNSPECIFIED),
            capacity,
        }
    }

    /// The MAC of `ip` if known and fresh.
    pub fn lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<MacAddr> {
        self.entries
            .get(&ip)
            .filter(|e| e.expires > now)
            .map(|e| e.mac)
    }

    /// Records `ip` at `mac` from an ARP packet (RFC 826: update an
    /// existing entry; add when the packet was for us or a reply we asked
    /// for); the entry is confirmed for [`ENTRY_LIFETIME`]. Returns true if
    /// frames are waiting for it (call [`ArpCache::take_waiting`]).
    pub fn learn(&mut self, ip: Ipv4Addr, mac: MacAddr, add: bool, now: Instant) -> bool {
        let expires = now + ENTRY_LIFETIME;
        if let Some(e) = self.entries.get_mut(&ip) {
            e.mac = mac;
            e.expires = expires;
            e.confirmed = true;
        } else if add || self.requests.contains_key(&ip) {
            self.insert(ip, mac, expires, true);
        } else {
            return false;
        }
        self.requests.remove(&ip);
        self.waiting.any(ip)
    }

    /// Refreshes `ip`'s entry from the link-layer source `mac` of its IP
    /// traffic (RFC 1122 §2.3.2.1 allows such hints), as
    /// [`ArpCache::learn`] without adding (so only while a request is out
    /// when there is no entry), but never a fresh gleaned entry: that one
    /// only an ARP packet confirms. Returns true if frames are waiting for
    /// it.
    pub fn refresh(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant) -> bool {
        match self.entries.get(&ip) {
            Some(e) if !e.confirmed && e.expires > now => false,
            _ => self.learn(ip, mac, false, now),
        }
    }

    /// Gleans `ip` at `mac`, the link-layer source of a SYN from on-link
    /// `ip` to one of our listeners, when the cache has no fresh entry for
    /// it (as RFC 4861 §7.2.3 creates a STALE entry from a solicitation):
    /// the SYN-ACK goes out at once instead of waiting an ARP round trip,
    /// which a lost request or reply makes 1 s ([`RETRY_INTERVAL`]) longer.
    /// The entry lasts [`GLEAN_LIFETIME`], is not refreshed by traffic
    /// ([`ArpCache::refresh`]), and an ARP reply confirms or corrects it
    /// ([`ArpCache::learn`]): its request, the one resolving the SYN-ACK's
    /// next hop would have sent, goes out at the next [`ArpCache::poll`]
    /// (after the SYN-ACK, as RFC 4861 §7.3.3 probes a STALE entry once it
    /// is used) and is retried as usual. Bounded by the cache's capacity,
    /// like any entry. Returns true when it gleaned.
    pub fn glean(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant) -> bool {
        if self.lookup(ip, now).is_some() {
            return false;
        }
        self.insert(ip, mac, now + GLEAN_LIFETIME, false);
        if !self.requests.contains_key(&ip) && self.requests.len() < self.capacity {
            // Due at once: the next poll sends the first of MAX_TRIES.
            let due = now - RETRY_INTERVAL;
            self.requests.insert(
                ip,
                Request {
                    last_sent: due,
                    tries: 0,
                },
            );
        }
        true
    }

    /// Adds or replaces `ip`'s entry, evicting the one closest to expiry
    /// when the cache is full (bounded, and rare).
    fn insert(&mut self, ip: Ipv4Addr, mac: MacAddr, expires: Instant, confirmed: bool) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&ip) {
            if let Some(old) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.expires)
                .map(|(k, _)| *k)
            {
                self.entries.remove(&old);
            }
        }
        self.entries.insert(
            ip,
            Entry {
                mac,
                expires,
                confirmed,
            },
        );
    }

    /// Queues a frame for `next_hop`: `fill` writes it into a buffer of
    /// [`FRAME_CAP`] bytes and returns its length. Returns Some(true) when a
    /// request should be sent now, Some(false) when one is already out, None
    /// when the queue is full (the caller counts the drop).
    pub fn enqueue(
        &mut self,
        next_hop: Ipv4Addr,
        now: Instant,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Option<bool> {
        if !self.waiting.push(next_hop, fill) {
            return None;
        }
        if self.requests.contains_key(&next_hop) {
            return Some(false);
        }
        if self.requests.len() >= self.capacity {
            return Some(false);
        }
        self.requests.insert(
            next_hop,
            Request {
                last_sent: now,
                tries: 1,
            },
        );
        Some(true)
    }

    /// Hands every frame waiting for `ip` to `send(frame)` and frees it.
    pub fn take_waiting(&mut self, ip: Ipv4Addr, send: impl FnMut(&mut [u8])) {
        self.waiting.take(ip, send);
    }

    /// Retries outstanding requests and gives up on silent addresses; call
    /// about once per retry interval. Bounded by the request table size.
    pub fn poll(&mut self, now: Instant, mut act: impl FnMut(ArpAction)) {
        let mut gone: [Ipv4Addr; 8] = [Ipv4Addr::UNSPECIFIED; 8];
        let mut n_gone = 0;
        for (ip, r) in self.requests.iter_mut() {
            if now.saturating_since(r.last_sent) < RETRY_INTERVAL {
                continue;
            }
            if r.tries >= MAX_TRIES {
                if n_gone < gone.len() {
                    gone[n_gone] = *ip;
                    n_gone += 1;
                }
            } else {
                r.tries += 1;
                r.last_sent = now;
                act(ArpAction::Request(*ip));
            }
        }
        for ip in &gone[..n_gone] {
            self.requests.remove(ip);
            let mut dropped = 0;
            self.take_waiting(*ip, |_| dropped += 1);
            act(ArpAction::Unresolved(dropped));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 9]);

    #[test]
    fn unknown_address_enqueue_requests_once_then_flushes_on_reply() {
        let mut c = ArpCache::new(4, 2);
        let t = Instant(1_000_000_000);
        assert_eq!(
            c.enqueue(IP, t, |b| {
                b[0] = 1;
                10
            }),
            Some(true)
        );
        assert_eq!(
            c.enqueue(IP, t, |b| {
                b[0] = 2;
                20
            }),
            Some(false)
        );
        assert_eq!(c.enqueue(IP, t, |_| 1), None, "queue bound");
        assert!(c.learn(IP, MAC, false, t));
        let mut lens = Vec::new();
        c.take_waiting(IP, |f| lens.push(f.len()));
        lens.sort();
        assert_eq!(lens, vec![10, 20]);
        assert_eq!(c.lookup(IP, t), Some(MAC));
        assert_eq!(c.lookup(IP, t + ENTRY_LIFETIME), None, "expired");
    }

    #[test]
    fn silent_address_is_retried_then_dropped() {
        let mut c = ArpCache::new(4, 2);
        let mut t = Instant(1_000_000_000);
        c.enqueue(IP, t, |_| 10);
        let (mut reqs, mut dropped) = (0, 0);
        for _ in 0..5 {
            t = t + RETRY_INTERVAL;
            c.poll(t, |a| match a {
                ArpAction::Request(_) => reqs += 1,
                ArpAction::Unresolved(n) => dropped += n,
            });
        }
        assert_eq!(reqs, MAX_TRIES - 1);
        assert_eq!(dropped, 1);
    }

    /// Requests `poll` asks for between `from` and `to` (every 100 ms, as
    /// housekeeping calls it), and frames it drops.
    fn poll_until(c: &mut ArpCache, from: Instant, to: Instant) -> (u32, usize) {
        let (mut reqs, mut dropped, mut t) = (0, 0, from);
        while t <= to {
            c.poll(t, |a| match a {
                ArpAction::Request(_) => reqs += 1,
                ArpAction::Unresolved(n) => dropped += n,
            });
            t = t + Duration::from_millis(100);
        }
        (reqs, dropped)
    }

    #[test]
    fn gleaned_entry_is_used_at_once_confirmed_by_a_reply_to_the_next_poll_request() {
        let mut c = ArpCache::new(4, 2);
        let t = Instant(1_000_000_000);
        assert!(c.glean(IP, MAC, t));
        assert_eq!(c.lookup(IP, t), Some(MAC), "usable before any ARP");
        assert!(!c.glean(IP, MAC, t), "a fresh entry is not gleaned again");
        // The confirming request goes out at the next poll, after the SYN-ACK.
        assert_eq!(poll_until(&mut c, t, t), (1, 0));
        let other = MacAddr([2, 0, 0, 0, 0, 10]);
        assert!(!c.learn(IP, other, false, t + Duration::from_millis(1)));
        assert_eq!(
            c.lookup(IP, t + GLEAN_LIFETIME),
            Some(other),
            "corrected, confirmed"
        );
        assert_eq!(
            poll_until(&mut c, t, t + GLEAN_LIFETIME),
            (0, 0),
            "no request left"
        );
    }

    #[test]
    fn unconfirmed_gleaned_entry_is_not_refreshed_by_traffic_and_expires() {
        let mut c = ArpCache::new(4, 2);
        let t = Instant(1_000_000_000);
        assert!(c.glean(IP, MAC, t));
        // Traffic from the address does not extend it; the requests stop
        // at MAX_TRIES, one per RETRY_INTERVAL.
        let end = t + GLEAN_LIFETIME - Duration::from_millis(1);
        assert!(!c.refresh(IP, MAC, end));
        assert_eq!(poll_until(&mut c, t, end), (MAX_TRIES, 0));
        assert_eq!(c.lookup(IP, end), Some(MAC));
        assert_eq!(
            c.lookup(IP, t + GLEAN_LIFETIME),
            None,
            "expired unconfirmed"
        );
        // Then it is resolved as usual: a queued frame asks again.
        assert_eq!(c.enqueue(IP, t + GLEAN_LIFETIME, |_| 10), Some(true));
    }

    #[test]
    fn refresh_extends_a_confirmed_entry_only() {
        let mut c = ArpCache::new(4, 2);
        let t = Instant(1);
        assert!(!c.refresh(IP, MAC, t));
        assert_eq!(c.lookup(IP, t), None, "traffic adds no entry");
        // ... unless a request for it is out: then it answers it.
        let mut d = ArpCache::new(4, 2);
        d.enqueue(IP, t, |_| 10);
        assert!(d.refresh(IP, MAC, t), "the waiting frame can go");
        assert_eq!(d.lookup(IP, t), Some(MAC));
        c.learn(IP, MAC, true, t);
        let later = t + ENTRY_LIFETIME - Duration::from_secs(1);
        c.refresh(IP, MAC, later);
        assert_eq!(c.lookup(IP, t + ENTRY_LIFETIME), Some(MAC), "refreshed");
    }

    #[test]
    fn unsolicited_reply_from_stranger_is_not_cached() {
        let mut c = ArpCache::new(4, 2);
        let t = Instant(1);
        assert!(!c.learn(IP, MAC, false, t));
        assert_eq!(c.lookup(IP, t), None);
    }
}
