//! Black-hole detection for path MTU discovery (RFC 4821 §7.7, RFC 8899
//! §4.3): where a router drops packets that are too big without saying so
//! (its ICMP filtered or never sent), the segments of full size vanish
//! while an RTO-sized silence is all the sender sees.
//!
//! - A "full-stop timeout" (RFC 4821 §7.7) is the [`FULL_STOP_RTOS`]-th
//!   consecutive RTO expiry (Linux's `tcp_retries1`) with the segment at
//!   `snd_una` larger than the family's search floor (RFC 4821 §7.2: a
//!   path MTU of 1024 bytes for IPv4, 1280 for IPv6). Then the MSS drops
//!   to that floor, and the retransmission that follows goes in pieces.
//! - The full MSS is tried again [`RETRY_AFTER`] later (RFC 4821 §7.7 and
//!   RFC 8201 §4 suggest 10 minutes): if the path still drops it, the next
//!   full-stop timeout falls back again. There is no search in between
//!   (RFC 4821 §7.5's probes of sizes between the floor and the MSS).
//! - Random loss rarely makes three consecutive RTOs of the same segment;
//!   when it does, the cost is a smaller MSS for a while, never a stall.

use super::tcb::{Tcb, TS_OPTION_LEN};
use crate::time::Instant;
use core::time::Duration;

/// Consecutive RTO expiries of one segment that count as a full stop.
pub(super) const FULL_STOP_RTOS: u32 = 3;
/// How long a black-hole fallback holds before the full MSS is tried again.
pub(super) const RETRY_AFTER: Duration = Duration::from_secs(600);
/// RFC 4821 §7.2's search floor for IPv4, bytes of IP packet.
const SEARCH_LOW_V4: usize = 1024;
/// The IPv6 minimum link MTU (RFC 8200 §5), the floor for IPv6.
const SEARCH_LOW_V6: usize = wire::ipv6::MIN_MTU;

/// A connection's black-hole state: the MSS it had before a fallback, and
/// when to try it again.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Blackhole {
    saved_mss: usize,
    retry_at: Option<Instant>,
}

impl Tcb {
    /// The MSS of a packet of the family's search floor, bytes (less the
    /// timestamp option when it is on).
    fn search_low_mss(&self) -> usize {
        let opt_len = if self.opts.ts { TS_OPTION_LEN } else { 0 };
        let (mtu, headers) = if self.remote.is_ipv6() {
            (SEARCH_LOW_V6, 60)
        } else {
            (SEARCH_LOW_V4, 40)
        };
        mtu - headers - opt_len
    }

    /// After an RTO expiry at `now` (counted in `timers.retries`): on a
    /// full-stop timeout of a segment bigger than the search floor, the MSS
    /// falls back to the floor. Returns true when it did.
    pub(super) fn blackhole_check(&mut self, now: Instant) -> bool {
        let low = self.search_low_mss();
        let big = self.rec.sb.get(0).is_some_and(|s| s.data_len() > low);
        if self.timers.retries != FULL_STOP_RTOS || !big || self.snd.mss <= low {
            return false;
        }
        if self.blackhole.retry_at.is_none() {
            self.blackhole.saved_mss = self.snd.mss;
        }
        self.blackhole.retry_at = Some(now + RETRY_AFTER);
        self.snd.mss = low;
        self.rec.sb.mark_oversized_lost(low);
        self.stats.pmtu_blackholes += 1;
        true
    }

    /// Before sending at `now`: once a fallback has held for
    /// [`RETRY_AFTER`], the MSS it replaced is tried again.
    #[inline]
    pub(super) fn blackhole_retry(&mut self, now: Instant) {
        if self.blackhole.retry_at.is_some_and(|t| now >= t) {
            self.blackhole.retry_at = None;
            self.snd.mss = self.snd.mss.max(self.blackhole.saved_mss);
        }
    }

    /// The path MTU was learned from ICMP (RFC 1191, RFC 8201): that
    /// estimate rules, and no fallback is undone later.
    pub(super) fn blackhole_forget(&mut self) {
        self.blackhole.retry_at = None;
    }
}
