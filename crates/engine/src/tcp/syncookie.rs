//! SYN cookies (RFC 4987 §3.6): when a listener's SYN queue is full, the
//! SYN-ACK's initial sequence number encodes what the connection needs, so
//! no state is kept until the client's ACK proves it received the SYN-ACK.
//!
//! Cookie layout (32 bits): `t:5 | mss_index:3 | mac:24`, where `t` counts
//! 64-second periods, `mss_index` picks from [`MSS_TABLE`], and `mac` is a
//! keyed hash of the 4-tuple, `t`, the client's ISN and the index. A cookie
//! is valid for the current and the previous period (64–128 s).
//!
//! Limitation shared with classic cookies: window scaling, SACK and
//! timestamps offered in the SYN are not remembered, so a connection
//! opened by cookie runs without them.

use crate::time::Instant;
use core::hash::BuildHasher;
use core::net::SocketAddr;
use std::collections::hash_map::RandomState;
use wire::SeqNum;

/// MSS values a cookie can carry, bytes (smallest first).
pub const MSS_TABLE: [u16; 8] = [536, 1024, 1200, 1300, 1360, 1400, 1440, 1460];

const PERIOD_NS: u64 = 64_000_000_000;

/// Mints and checks cookies with a per-engine secret.
pub struct SynCookies {
    key: RandomState,
}

impl Default for SynCookies {
    fn default() -> Self {
        SynCookies::new()
    }
}

impl SynCookies {
    /// A cookie jar with a fresh random secret.
    pub fn new() -> SynCookies {
        SynCookies {
            key: RandomState::new(),
        }
    }

    fn mac(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        t: u32,
        client_isn: SeqNum,
        idx: u32,
    ) -> u32 {
        (self.key.hash_one((local, remote, t, client_isn.0, idx)) & 0x00ff_ffff) as u32
    }

    fn period(now: Instant) -> u32 {
        ((now.0 / PERIOD_NS) & 0x1f) as u32
    }

    /// The ISN for a SYN-ACK answering a SYN with sequence `client_isn` and
    /// MSS option `mss` (536 when absent): the largest table entry ≤ mss.
    pub fn mint(
        &self,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        client_isn: SeqNum,
        mss: u16,
        now: Instant,
    ) -> SeqNum {
        let (local, remote) = (local.into(), remote.into());
        let idx = MSS_TABLE.iter().rposition(|&m| m <= mss).unwrap_or(0) as u32;
        let t = Self::period(now);
        SeqNum((t << 27) | (idx << 24) | self.mac(local, remote, t, client_isn, idx))
    }

    /// Checks the ACK of a cookie SYN-ACK: `ack_seq` is the segment's SEQ
    /// (client ISN + 1) and `ack` its ACK (cookie + 1). Returns the MSS the
    /// cookie carries, or None if it is forged or expired.
    pub fn check(
        &self,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        ack_seq: SeqNum,
        ack: SeqNum,
        now: Instant,
    ) -> Option<u16> {
        let (local, remote) = (local.into(), remote.into());
        let cookie = (ack - 1usize).0;
        let client_isn = ack_seq - 1usize;
        let t = cookie >> 27;
        let idx = (cookie >> 24) & 0x7;
        let cur = Self::period(now);
        if t != cur && t != (cur + 31) & 0x1f {
            return None;
        }
        (self.mac(local, remote, t, client_isn, idx) == cookie & 0x00ff_ffff)
            .then(|| MSS_TABLE[idx as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::SocketAddrV4;

    fn addrs() -> (SocketAddrV4, SocketAddrV4) {
        (
            "10.0.0.2:80".parse().unwrap(),
            "10.0.0.1:40000".parse().unwrap(),
        )
    }

    /// A fresh jar, the listener's and the peer's address, and `Instant(ns)`.
    fn jar_at(ns: u64) -> (SynCookies, SocketAddrV4, SocketAddrV4, Instant) {
        let (l, r) = addrs();
        (SynCookies::new(), l, r, Instant(ns))
    }

    #[test]
    fn listen_cookie_ack_within_period_gives_mss() {
        let (j, l, r, now) = jar_at(5 * PERIOD_NS + 7);
        let c = j.mint(l, r, SeqNum(1000), 1460, now);
        assert_eq!(j.check(l, r, SeqNum(1001), c + 1usize, now), Some(1460));
        // Still valid one period later, not two.
        assert_eq!(
            j.check(
                l,
                r,
                SeqNum(1001),
                c + 1usize,
                now + core::time::Duration::from_secs(64)
            ),
            Some(1460)
        );
        assert_eq!(
            j.check(
                l,
                r,
                SeqNum(1001),
                c + 1usize,
                now + core::time::Duration::from_secs(128)
            ),
            None
        );
    }

    #[test]
    fn listen_forged_or_mismatched_ack_is_rejected() {
        let (j, l, r, now) = jar_at(PERIOD_NS);
        let c = j.mint(l, r, SeqNum(1000), 1300, now);
        assert_eq!(j.check(l, r, SeqNum(1001), c + 1usize, now), Some(1300));
        assert_eq!(
            j.check(l, r, SeqNum(1001), c + 2usize, now),
            None,
            "wrong ack"
        );
        assert_eq!(
            j.check(l, r, SeqNum(1002), c + 1usize, now),
            None,
            "wrong client isn"
        );
        let other: SocketAddrV4 = "10.0.0.9:40000".parse().unwrap();
        assert_eq!(
            j.check(l, other, SeqNum(1001), c + 1usize, now),
            None,
            "other peer"
        );
        let mut forged = 0;
        for guess in 0..10_000u32 {
            if j.check(l, r, SeqNum(1001), SeqNum(guess.wrapping_mul(429_497)), now)
                .is_some()
            {
                forged += 1;
            }
        }
        assert!(forged <= 1, "{forged} blind guesses accepted");
    }

    #[test]
    fn listen_v6_cookie_checks_and_binds_the_whole_address() {
        let jar = SynCookies::new();
        let now = Instant(1_000_000_000);
        let local: SocketAddr = "[fd00::2]:80".parse().unwrap();
        let remote: SocketAddr = "[fd00::1]:40000".parse().unwrap();
        let isn = SeqNum(7);
        let c = jar.mint(local, remote, isn, 1440, now);
        assert_eq!(
            jar.check(local, remote, isn + 1usize, c + 1usize, now),
            Some(1440)
        );
        let other: SocketAddr = "[fd00::1:1]:40000".parse().unwrap();
        assert_eq!(jar.check(local, other, isn + 1usize, c + 1usize, now), None);
    }

    #[test]
    fn listen_small_mss_rounds_down_to_table() {
        let (j, l, r, now) = jar_at(PERIOD_NS);
        let c = j.mint(l, r, SeqNum(1), 1450, now);
        assert_eq!(j.check(l, r, SeqNum(2), c + 1usize, now), Some(1440));
        let c = j.mint(l, r, SeqNum(1), 100, now);
        assert_eq!(j.check(l, r, SeqNum(2), c + 1usize, now), Some(536));
    }
}
