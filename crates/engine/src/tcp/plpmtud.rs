//! Path MTU on a connection: the MSS lowered by ICMP reports (RFC 1191,
//! RFC 8201, believed by RFC 5927's check) or by the destination's estimate,
//! and black-hole detection (RFC 4821 §7.7, RFC 8899 §4.3): where a router drops packets that are too big without saying so
//! (its ICMP filtered or never sent), the segments of full size vanish
//! while an RTO-sized silence is all the sender sees.
//!
//! - A "full-stop timeout" (RFC 4821 §7.7) is the [`FULL_STOP_RTOS`]-th
//!   consecutive RTO expiry (Linux's `tcp_retries1`) with the segment at
//!   `snd_una` larger than the family's search floor (RFC 4821 §7.2: a
//!   path MTU of 1024 bytes for IPv4, 1280 for IPv6). Then the MSS drops
//!   to that floor, and the retransmission that follows goes in pieces.
//! - Then the search (RFC 4821 §7.5, RFC 8899 §5.1.3's SEARCHING): one
//!   probe at a time, a new-data segment halfway between the MSS that
//!   works and the smallest that failed, sent only outside loss recovery
//!   and with nothing owed. A probe delivered (cumulatively or SACKed)
//!   raises the MSS to its size; one deemed lost (RACK, DupThresh or an
//!   RTO) lowers the bound that failed and is sent again in MSS pieces.
//!   The search ends when the two are [`SEARCH_DONE`] bytes apart. A lost
//!   probe still costs the cwnd reduction of an ordinary loss (RFC 4821
//!   §7.6.2 would spare it).
//! - The full MSS is tried again [`RETRY_AFTER`] later (RFC 4821 §7.7 and
//!   RFC 8201 §4 suggest 10 minutes): if the path still drops it, the next
//!   full-stop timeout falls back again.
//! - Random loss rarely makes three consecutive RTOs of the same segment;
//!   when it does, the cost is a smaller MSS for a while, never a stall.

use super::scoreboard::{LOST, SACKED};
use super::tcb::{Tcb, TS_OPTION_LEN};
use crate::time::Instant;
use core::time::Duration;
use wire::SeqNum;

/// The smallest IPv4 path MTU a report can set, bytes: Linux's min_pmtu
/// (`pmtu::MIN_PMTU_V4`); IPv6's is its minimum link MTU, 1280.
const PMTU_MIN_V4: usize = crate::pmtu::MIN_PMTU_V4;

/// Consecutive RTO expiries of one segment that count as a full stop.
pub(super) const FULL_STOP_RTOS: u32 = 3;
/// How long a black-hole fallback holds before the full MSS is tried again.
pub(super) const RETRY_AFTER: Duration = Duration::from_secs(600);
/// RFC 4821 §7.2's search floor for IPv4, bytes of IP packet.
const SEARCH_LOW_V4: usize = 1024;
/// The IPv6 minimum link MTU (RFC 8200 §5), the floor for IPv6.
const SEARCH_LOW_V6: usize = wire::ipv6::MIN_MTU;
/// The search ends when the MSS that works and the smallest that failed
/// are this close, bytes.
pub(super) const SEARCH_DONE: usize = 32;

/// A connection's black-hole state: the MSS it had before a fallback, when
/// to try it again, and the search in between.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Blackhole {
    saved_mss: usize,
    retry_at: Option<Instant>,
    /// The smallest MSS known to fail while a search runs; 0: no search.
    fail: usize,
    /// The probe in flight: its segment's `[start, end)`.
    probe: Option<(SeqNum, SeqNum)>,
}

impl Tcb {
    /// ICMP "fragmentation needed" (RFC 1191) reported a next-hop MTU of
    /// `mtu` bytes for a segment of ours starting at `seq`. Accepted only
    /// when `seq` lies in `[snd_una, snd_max)` (RFC 5927 §4.1, against blind
    /// injection); then the MSS drops to fit a packet of `mtu` bytes (taken
    /// as at least 552, Linux's min_pmtu, over IPv4 and 1280 over IPv6; the
    /// headers and the timestamp option come out of it) and segments in
    /// flight that no longer fit are retransmitted in pieces. Not a congestion signal:
    /// cwnd is unchanged. Returns true when the MSS went down.
    ///
    /// Over IPv6 `mtu` is the path MTU of a Packet Too Big (RFC 8201) and
    /// the headers are 60 bytes (RFC 8200's 40 and TCP's 20).
    pub fn on_path_mtu(&mut self, mtu: usize, seq: SeqNum) -> bool {
        self.seq_in_flight(seq) && self.clamp_path_mtu(mtu)
    }

    /// The path MTU toward the peer is now `mtu` bytes, as another
    /// connection to the same destination learned it (RFC 8201 §5.2, RFC
    /// 1191 §6.3: the estimate is per destination): the MSS drops to fit,
    /// and segments in flight that no longer fit, which the path drops,
    /// are sent again in pieces, as in [`Tcb::on_path_mtu`]. Returns true
    /// when the MSS went down.
    pub fn clamp_path_mtu(&mut self, mtu: usize) -> bool {
        let opt_len = if self.opts.ts { TS_OPTION_LEN } else { 0 };
        let (headers, floor) = if self.remote.is_ipv6() {
            (60, wire::ipv6::MIN_MTU)
        } else {
            (40, PMTU_MIN_V4)
        };
        // The floor is a packet size: the options come out of it too.
        let mss = mtu.max(floor).saturating_sub(headers + opt_len);
        if mss >= self.snd.mss {
            return false;
        }
        self.snd.mss = mss;
        self.stats.pmtu_reductions += 1;
        self.rec.sb.mark_oversized_lost(mss);
        self.blackhole_forget();
        true
    }

    /// True when `seq` lies in `[snd_una, snd_max)` of a synchronized
    /// connection: what an ICMP error quoting our segment must show to be
    /// believed (RFC 5927 §4.1, §5.2).
    pub fn seq_in_flight(&self, seq: SeqNum) -> bool {
        self.state.is_synchronized() && seq >= self.snd.una && seq < self.snd.max
    }

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
        self.blackhole.fail = self.snd.mss;
        self.blackhole.probe = None;
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
            self.blackhole.fail = 0;
            self.blackhole.probe = None;
            self.snd.mss = self.snd.mss.max(self.blackhole.saved_mss);
        }
    }

    /// The path MTU was learned from ICMP (RFC 1191, RFC 8201): that
    /// estimate rules, and no fallback is undone later nor searched.
    pub(super) fn blackhole_forget(&mut self) {
        self.blackhole.retry_at = None;
        self.blackhole.fail = 0;
        self.blackhole.probe = None;
    }

    /// The payload of the next new-data segment when it is to be a search
    /// probe: halfway between the MSS and the smallest that failed, when a
    /// search runs, no probe is in flight, no recovery runs, nothing is
    /// owed, `unsent` holds the probe and DupThresh segments after it (so
    /// that their ACKs, not a timeout, tell of its loss, as Linux's
    /// `tcp_mtu_probe` asks) and the `usable` window the probe and those.
    pub(super) fn probe_len(&self, unsent: usize, usable: usize) -> Option<usize> {
        let b = &self.blackhole;
        if b.fail <= self.snd.mss + SEARCH_DONE
            || b.probe.is_some()
            || self.rec.active
            || self.snd.una < self.rec.recover
            || self.snd.nxt != self.snd.max
            || self.rec.sb.peek_owed().is_some()
        {
            return None;
        }
        let len = (self.snd.mss + b.fail) / 2;
        let after = super::recovery::DUP_THRESH * self.snd.mss;
        (unsent > len + after && usable >= len + after).then_some(len)
    }

    /// A probe of `[start, end)` goes out now, as one segment and one
    /// retransmission-queue entry ([`Tcb::probe_piece`]).
    pub(super) fn probe_sent(&mut self, start: SeqNum, end: SeqNum) {
        self.blackhole.probe = Some((start, end));
        self.stats.pmtu_probes += 1;
    }

    /// `len` bytes at `seq` are the probe in flight: its length, the size
    /// of its one segment on the wire; None for any other data.
    #[inline]
    pub(super) fn probe_piece(&self, seq: SeqNum, len: usize) -> Option<usize> {
        (self.blackhole.probe == Some((seq, seq + len))).then_some(len)
    }

    /// After an ACK's loss detection: a probe delivered raises the MSS to
    /// its size; one deemed lost lowers the bound that failed. The search
    /// ends once the two are [`SEARCH_DONE`] apart.
    ///
    /// Returns true when the probe was just deemed lost and is the only
    /// segment owed a retransmission, outside any recovery: its loss tells
    /// of the path's size, not of congestion (RFC 4821 §7.6.2; RFC 8899 §3:
    /// it SHOULD NOT trigger a congestion control reaction). It goes again in MSS-sized
    /// pieces as cwnd allows (it is owed), and no recovery begins for the
    /// data in flight now (`recover` = snd_max, as Linux's
    /// `tcp_simple_retransmit` leaves it): the caller then does not enter one.
    pub(super) fn probe_check(&mut self) -> bool {
        let Some((start, end)) = self.blackhole.probe else {
            return false;
        };
        let entry = self.rec.sb.find(start).and_then(|i| self.rec.sb.get(i));
        let entry = entry.filter(|s| s.start == start && s.end == end).copied();
        if self.snd.una >= end || entry.is_some_and(|s| s.has(SACKED)) {
            self.snd.mss = self.snd.mss.max(end - start);
            self.stats.pmtu_probes_ok += 1;
            self.probe_end(None);
        } else if entry.is_none_or(|s| s.has(LOST)) {
            self.probe_end(Some(end - start));
            let alone = entry.is_some_and(|s| s.owed()) && self.rec.sb.owed() == 1;
            if alone && !self.rec.active && self.snd.una >= self.rec.recover {
                self.rec.recover = self.snd.max;
                self.rec.dupacks = 0;
                return true;
            }
        }
        false
    }

    /// The probe in flight is done; `failed`: with this size it was lost
    /// (an RTO, or `probe_check`).
    pub(super) fn probe_end(&mut self, failed: Option<usize>) {
        self.blackhole.probe = None;
        if let Some(len) = failed {
            self.blackhole.fail = self.blackhole.fail.min(len);
        }
        if self.blackhole.fail <= self.snd.mss + SEARCH_DONE {
            self.blackhole.fail = 0;
        }
    }

    /// An RTO with a probe in flight: the probe failed.
    pub(super) fn probe_on_rto(&mut self) {
        if let Some((start, end)) = self.blackhole.probe {
            self.probe_end(Some(end - start));
        }
    }
}
