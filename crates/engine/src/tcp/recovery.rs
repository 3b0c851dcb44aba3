//! Loss detection and recovery on the sender (the SACK blocks the receiver
//! sends are in `sack_tx`).
//!
//! - Without SACK: NewReno (RFC 5681 §3.2 fast retransmit / fast recovery
//!   with window inflation, RFC 6582 partial ACKs).
//! - With SACK: the scoreboard (RFC 6675): IsLost with DupThresh = 3, pipe,
//!   NextSeg rule 1 then new data; RACK (RFC 8985 §6) marks segments lost by
//!   time, including lost retransmissions; the tail loss probe (§7) repairs a
//!   lost tail without waiting for the RTO.
//! - D-SACK (RFC 2883) reports of our retransmissions count as spurious and,
//!   when every retransmission of an episode was, undo its cwnd reduction.
//! - ECN-Echo (RFC 3168 §6.1.2) reduces cwnd once per window; DCTCP
//!   (RFC 8257) also gets the marked-byte feedback for its alpha.
//!
//! Nothing here allocates; the scans are bounded by the scoreboard capacity.

use core::time::Duration;

use wire::tcp::{SackBlock, TcpRepr};
use wire::SeqNum;

use crate::time::Instant;

use super::cc::{AckInfo, Cc, CcKind, CongestionControl, CongestionEvent, RateCtx};
use super::scoreboard::{TxSeg, EVER_RETRANS, SACKED};
use super::tcb::Tcb;

/// RFC 8985 §7.2 WCDelAckT: the longest a peer may delay an ACK (200 ms).
const WC_DEL_ACK: Duration = Duration::from_millis(200);

/// RFC 6675 DupThresh.
pub(super) const DUP_THRESH: usize = 3;

/// Where an ACK's TSecr can be compared with our transmit times: the ACK's
/// TSecr and our timestamp clock offset.
#[derive(Debug, Clone, Copy)]
pub(super) struct TsEcho {
    tsecr: Option<u32>,
    offset: u32,
    /// A retransmission delivered sooner than this after it was sent is
    /// taken for its original (besides min_rtt).
    ambiguous_below: Duration,
}

/// RFC 8985 §6.2 step 2: a delivered segment updates the RACK state unless
/// it was retransmitted and the ACK may be for the original: the RTT is
/// shorter than min_rtt, or the ACK echoes a timestamp older than the
/// retransmission's (`ts`; cumulative ACKs only, see `process_sack`).
fn rack_update(rack: &mut Rack, s: &TxSeg, now: Instant, ts: TsEcho) {
    let rtt = now - s.xmit;
    if s.has(EVER_RETRANS) {
        if rack.min_rtt.is_some_and(|m| rtt < m) || rtt < ts.ambiguous_below {
            return;
        }
        let sent_ts = ((s.xmit.as_nanos() / 1_000_000) as u32).wrapping_add(ts.offset);
        if ts
            .tsecr
            .is_some_and(|e| (e.wrapping_sub(sent_ts) as i32) < 0)
        {
            return;
        }
    }
    // A zero RTT only comes from a stale clock (see `Rate::on_delivered`):
    // it would shrink the reordering window to nothing.
    if !s.has(EVER_RETRANS) && rtt > Duration::ZERO {
        rack.min_rtt = Some(rack.min_rtt.map_or(rtt, |m| m.min(rtt)));
    }
    let newer = match rack.xmit {
        None => true,
        Some(x) => s.xmit > x || (s.xmit == x && s.end > rack.end),
    };
    if newer {
        rack.xmit = Some(s.xmit);
        rack.end = s.end;
        rack.rtt = rtt;
    }
}

/// Proportional Rate Reduction (RFC 9937, which obsoletes RFC 6937): how much a SACK recovery may
/// send, so that by its end about ssthresh is in flight, sent in step with
/// what the receiver reports delivered rather than in one burst or not at
/// all (plain `pipe < cwnd` stays silent until pipe falls below the reduced
/// cwnd, so a lost retransmission can then only be found by the RTO).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Prr {
    /// `RecoverFS`: bytes in flight when recovery began.
    recover_fs: usize,
    /// `prr_delivered`: bytes the receiver reported delivered since then.
    delivered: usize,
    /// `prr_out`: bytes sent (new or again) since then.
    out: usize,
    /// `sndcnt`: bytes that may go out now.
    sndcnt: usize,
}

/// What the ACK-processing code tells the recovery machine about one ACK.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct AckEvent {
    /// SEG.ACK advanced snd_una.
    pub(super) new_ack: bool,
    /// Data bytes newly acknowledged cumulatively.
    pub(super) acked: usize,
    /// Bytes newly SACKed.
    pub(super) sacked: usize,
    /// A duplicate ACK (RFC 5681 §2, or one carrying new SACK information).
    pub(super) dup: bool,
    /// The ACK had ECN-Echo.
    pub(super) ece: bool,
    /// A D-SACK on this ACK covered the tail loss probe.
    pub(super) dsack_tlp: bool,
}

/// Saved congestion state for undoing a spurious reduction (RFC 2883 §5,
/// Linux's undo): the state before it, snd_una when it happened, and the
/// retransmissions since that no D-SACK has yet shown spurious.
#[derive(Debug, Clone, Copy)]
pub(super) struct Undo {
    pub(super) saved: Cc,
    pub(super) marker: SeqNum,
    pub(super) retrans: u32,
}

/// RACK state (RFC 8985 §5.2).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rack {
    /// Transmit time and end of the most recently sent segment delivered.
    pub(super) xmit: Option<Instant>,
    pub(super) end: SeqNum,
    /// RTT of that segment.
    pub(super) rtt: Duration,
    /// Smallest RTT seen.
    pub(super) min_rtt: Option<Duration>,
    /// Reordering timer (§6.2 step 5).
    pub(super) deadline: Option<Instant>,
    /// Reordering window multiplier (§6.2 step 4; 0 counts as 1).
    pub(super) reo_mult: u32,
    /// snd_max when the multiplier last grew (one step per round trip).
    pub(super) dsack_round: Option<SeqNum>,
    /// Recoveries left before the multiplier resets.
    pub(super) reo_persist: u32,
}

/// Tail loss probe state (RFC 8985 §7).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tlp {
    /// The probe timeout.
    pub(super) deadline: Option<Instant>,
    /// The probe timer fired: send a probe on the next `poll_output`.
    pub(super) pending: bool,
    /// snd_max when a probe retransmission went out (§7.4 TLP.end_seq).
    pub(super) high: Option<SeqNum>,
}

impl Tcb {
    /// Sender: reads the SACK blocks of an ACK (RFC 2018 §3, with the RFC
    /// 2883 §4 rule for a D-SACK first block). Returns the bytes newly
    /// SACKed and whether a D-SACK covered the tail loss probe.
    pub(super) fn process_sack(&mut self, seg: &TcpRepr, now: Instant) -> (usize, bool) {
        if !self.opts.sack {
            return (0, false);
        }
        let blocks = seg.options.sack_blocks();
        let mut newly = 0;
        let mut dsack_tlp = false;
        let floor = self.snd.una.max(seg.ack);
        // No TSecr test for SACKed segments (Linux's tcp_sacktag_one does
        // none either): the receiver echoes the TSval of the last segment
        // that advanced rcv_nxt (RFC 7323 §4.3), older than any
        // retransmission above a hole, so the test would keep every
        // SACKed retransmission out of RACK, and a lost retransmission
        // sent before it would wait for the RTO. Instead a SACKed
        // retransmission counts only when it comes back at least half a
        // smoothed RTT after it was sent: min_rtt alone (Linux's test) is
        // far below the RTT of a queue that has built up, and the late
        // original of a spurious retransmission, taken for the
        // retransmission, made RACK deem everything sent before it lost
        // (hundreds of spurious retransmissions per run at 5 % loss).
        let ts = TsEcho {
            tsecr: None,
            offset: self.opts.ts_offset,
            ambiguous_below: self.timers.rto.srtt().unwrap_or(Duration::ZERO) / 2,
        };
        for (n, b) in blocks.iter().enumerate() {
            // Ignore nonsense: empty or inverted blocks, or beyond what was sent.
            if b.right <= b.left || b.right > self.snd.max {
                continue;
            }
            let dsack = n == 0
                && (b.right <= seg.ack
                    || blocks
                        .get(1)
                        .is_some_and(|b2| b2.left <= b.left && b.right <= b2.right));
            if dsack {
                dsack_tlp |= self.on_dsack(*b);
                continue;
            }
            if b.right <= floor {
                continue;
            }
            let rack = &mut self.rec.rack;
            let rate = &mut self.rate;
            newly += self.rec.sb.sack(b.left, b.right, |s| {
                rack_update(rack, s, now, ts);
                rate.on_delivered(s.stamp, s.xmit, s.has(EVER_RETRANS), now);
            });
        }
        (newly, dsack_tlp)
    }

    /// A D-SACK block: a retransmission of the current undo episode was not
    /// needed. When all of them were, the cwnd reduction is undone.
    /// Returns true if it covers the tail loss probe.
    fn on_dsack(&mut self, b: SackBlock) -> bool {
        self.stats.dsacks_received += 1;
        // RFC 8985 §6.2 step 4: widen the reordering window by min_rtt/4 per
        // round trip in which D-SACKs arrive; keep it for 16 recoveries.
        if self.rec.rack.dsack_round.is_none_or(|r| self.snd.una >= r) {
            self.rec.rack.dsack_round = Some(self.snd.max);
            self.rec.rack.reo_mult = self.rec.rack.reo_mult.max(1).saturating_add(1);
            self.rec.rack.reo_persist = 16;
        }
        if let Some(u) = self.rec.undo.as_mut() {
            if b.left >= u.marker && u.retrans > 0 {
                u.retrans -= 1;
                self.stats.spurious_retransmits += 1;
                if u.retrans == 0 {
                    let saved = u.saved;
                    self.rec.undo = None;
                    self.cc.undo(saved);
                    self.stats.cwnd_undos += 1;
                }
            }
        }
        // The probe was the last segment: its duplicate ends at TLP.end_seq.
        self.rec.tlp.high.is_some_and(|h| b.right == h)
    }

    /// Sender: the cumulative ACK moved to `ack`: drop acknowledged entries,
    /// feeding RACK with what they say about delivery.
    pub(super) fn scoreboard_ack(&mut self, seg: &TcpRepr, now: Instant) {
        let ts = self.ts_echo(seg);
        let rack = &mut self.rec.rack;
        let rate = &mut self.rate;
        self.rec.sb.ack(seg.ack, |s| {
            rack_update(rack, s, now, ts);
            rate.on_delivered(s.stamp, s.xmit, s.has(EVER_RETRANS), now);
        });
    }

    fn ts_echo(&self, seg: &TcpRepr) -> TsEcho {
        TsEcho {
            tsecr: if self.opts.ts {
                seg.options.timestamps.map(|(_, e)| e)
            } else {
                None
            },
            offset: self.opts.ts_offset,
            ambiguous_below: Duration::ZERO,
        }
    }

    /// Bytes in flight as RFC 6675 `pipe` (equal to snd_nxt - snd_una when
    /// nothing is SACKed or lost).
    pub(super) fn pipe(&self) -> usize {
        self.rec.sb.pipe(self.snd.nxt - self.snd.una)
    }

    /// The recovery state machine, after an acceptable ACK was processed.
    pub(super) fn on_ack_recovery(&mut self, ev: AckEvent, now: Instant) {
        let mss = self.snd.mss;
        // RFC 9937 DeliveredData: the change in snd_una plus the change in
        // SACKed bytes (negative when the cumulative ACK covers SACKed data).
        let sacked = self.rec.sb.sacked_bytes();
        let delivered = (ev.acked + sacked).saturating_sub(self.rec.sacked_prev);
        self.rec.sacked_prev = sacked;
        if ev.dup {
            self.stats.dup_acks += 1;
            if self.rec.active {
                if !self.opts.sack {
                    // RFC 5681 §3.2 step 4: inflate by one SMSS per dupack.
                    let c = self.cc.cwnd().saturating_add(mss);
                    self.cc.set_cwnd(c);
                }
            } else {
                self.rec.dupacks += 1;
            }
        }
        let flight = self.snd.max - self.snd.una;
        if ev.new_ack {
            self.rec.dupacks = 0;
            if self.rec.active {
                if self.snd.una >= self.rec.recover {
                    // Full ACK: recovery ends (RFC 6582 §3.2 step 4, RFC 6675 §5).
                    self.rec.active = false;
                    if self.rec.prr.take().is_some() {
                        // PRR (RFC 9937) has brought pipe to
                        // about ssthresh: cwnd = ssthresh, as Linux does.
                        // RFC 6582's min(ssthresh, FlightSize + SMSS) would
                        // leave 2 SMSS whenever the full ACK covers all in
                        // flight, which a receiver compressing SACKs makes
                        // the rule: then a lone segment waits for the
                        // peer's delayed ACK. A D-SACK undo during the
                        // recovery has restored the cwnd before it (and
                        // perhaps an infinite ssthresh): it stays.
                        let c = self.cc.cwnd().min(self.cc.ssthresh()).max(mss);
                        self.cc.set_cwnd(c);
                    } else {
                        self.cc.on_recovery_exit(flight, mss);
                    }
                } else if self.opts.sack {
                    if self.rec.sb.sacked_bytes() == 0
                        && self.rec.sb.peek_owed().is_none()
                        && self.head_sent_before_delivered()
                    {
                        // A partial ACK and no SACK information at all (the
                        // receiver keeps no out-of-order data), and the
                        // segment at snd_una was sent before one that was
                        // delivered (a retransmission): the next hole is at
                        // snd_una, as NewReno would infer (RFC 6582). Not
                        // when it was sent after everything delivered: then
                        // the partial ACK only shows the flight coming in
                        // (after a recovery that reordering started, every
                        // ACK of the window is partial), and RACK decides.
                        self.rec.sb.mark_lost(0);
                        self.rec.rexmit_one = true;
                    }
                } else {
                    // RFC 6582 §3.2 step 5 (partial ACK): deflate by the
                    // amount acked, add back one SMSS if at least one SMSS
                    // was acked, retransmit the next hole at once.
                    let mut c = self.cc.cwnd().saturating_sub(ev.acked);
                    if ev.acked >= mss {
                        c += mss;
                    }
                    self.cc.set_cwnd(c.max(mss));
                    self.rec.sb.mark_lost(0);
                    self.rec.rexmit_one = true;
                }
            } else if !(self.ecn.ok && ev.ece && self.snd.una > self.ecn.recover)
                && self.cwnd_used()
            {
                // No growth on the ACK that brings an ECN reduction, nor
                // while the sender does not use its cwnd.
                let srtt = self.timers.rto.srtt().unwrap_or(Duration::ZERO);
                self.cc.on_ack(&AckInfo {
                    acked: ev.acked,
                    srtt,
                    now,
                    flight,
                    mss,
                });
            }
            self.tlp_on_ack(ev);
        }
        if self.ecn.ok && (ev.new_ack || ev.dup) {
            self.cc
                .on_ecn_feedback(ev.acked, ev.ece, self.snd.una, self.snd.nxt);
        }
        if self.opts.sack {
            if ev.sacked > 0 {
                self.rec.sb.mark_lost_by_sack(DUP_THRESH, mss);
            }
            if self.cfg.rack_tlp && (ev.sacked > 0 || ev.new_ack) {
                self.rack_detect(now);
            }
        }
        if !self.probe_check() {
            self.maybe_enter_recovery();
        }
        if self.rec.active && (ev.new_ack || ev.dup) {
            self.prr_on_ack(delivered);
            if delivered > 0 {
                // The ACK clock runs: the recovery probe waits a PTO from here.
                self.rec.tlp.deadline = None;
            }
        }
        if self.ecn.ok && ev.ece && self.snd.una > self.ecn.recover {
            // RFC 3168 §6.1.2: at most one reduction per window (ECE for data
            // sent before the last one, up to ecn_recover, is ignored); none on top
            // of a loss reduction in the same window, but CWR still goes out.
            if !self.rec.active {
                let flight = self.snd.max - self.snd.una;
                self.cc
                    .on_congestion_event(CongestionEvent::Ecn, flight, mss);
                self.stats.ecn_reductions += 1;
            }
            self.ecn.recover = self.snd.max;
            self.ecn.cwr_pending = true;
        }
        let rs = self.rate.sample(delivered, now);
        if let Some(rs) = rs.filter(|_| self.cc.model_based()) {
            let ctx = RateCtx {
                now,
                mss,
                pipe: self.pipe(),
                in_recovery: self.rec.active || self.snd.una < self.rec.recover,
                lost_total: self.rec.sb.lost_total(),
            };
            self.cc.on_rate_sample(&rs, &ctx);
        }
        self.arm_tlp(now);
    }

    /// Enters fast recovery on the third duplicate ACK (RFC 5681 §3.2) or,
    /// with SACK, once a segment is deemed lost (RFC 6675 §5, RFC 8985), but
    /// not for data sent before an earlier recovery or RTO (RFC 6582 §3.2
    /// step 2).
    pub(super) fn maybe_enter_recovery(&mut self) {
        if self.rec.active
            || self.snd.una < self.rec.recover
            || !(self.rec.dupacks >= DUP_THRESH as u32
                || (self.opts.sack && self.rec.sb.owed() > 0))
            || self.rec.sb.is_empty()
        {
            return;
        }
        let mss = self.snd.mss;
        let flight = self.snd.max - self.snd.una;
        self.rec.undo = Some(Undo {
            saved: self.cc,
            marker: self.snd.una,
            retrans: 0,
        });
        self.cc
            .on_congestion_event(CongestionEvent::FastRecovery, flight, mss);
        self.rec.recover = self.snd.max;
        self.rec.active = true;
        self.rec.dupacks = 0;
        self.stats.fast_retransmits += 1;
        if self.rec.rack.reo_persist > 0 {
            self.rec.rack.reo_persist -= 1;
            if self.rec.rack.reo_persist == 0 {
                self.rec.rack.reo_mult = 1;
            }
        }
        if self.cc.model_based() {
            // BBR sets cwnd itself through the recovery (packet conservation).
            if self.opts.sack {
                self.stats.sack_recoveries += 1;
            }
        } else if self.opts.sack {
            self.stats.sack_recoveries += 1;
            self.rec.prr = Some(Prr {
                recover_fs: flight,
                ..Prr::default()
            });
        } else {
            // RFC 5681 §3.2 step 3: cwnd = ssthresh + 3*SMSS.
            let c = self.cc.ssthresh() + 3 * mss;
            self.cc.set_cwnd(c);
        }
        // The first unacknowledged segment goes out at once, outside the
        // window (RFC 5681 §3.2 step 3, RFC 6675 §5 step 4.3).
        if self.rec.sb.peek_owed().is_none() {
            self.rec.sb.mark_lost(0);
        }
        self.rec.rexmit_one = true;
        self.rec.tlp.deadline = None;
        self.rec.tlp.pending = false;
    }

    /// True if the first unacknowledged segment was (last) sent before the
    /// most recently sent segment known delivered (RACK's order, RFC 8985
    /// §6.2: send time, then sequence).
    fn head_sent_before_delivered(&self) -> bool {
        let (Some(head), Some(x)) = (self.rec.sb.get(0), self.rec.rack.xmit) else {
            return false;
        };
        head.xmit < x || (head.xmit == x && head.end <= self.rec.rack.end)
    }

    /// PRR (RFC 9937), on an ACK during (or starting) a SACK recovery: counts
    /// `delivered` bytes and sets how much may be sent now. While pipe is
    /// above ssthresh, proportionally: sndcnt = ⌈prr_delivered · ssthresh /
    /// RecoverFS⌉ − prr_out; below it, slow start up to ssthresh, at most one
    /// SMSS beyond what was delivered (PRR-SSRB).
    fn prr_on_ack(&mut self, delivered: usize) {
        let pipe = self.pipe();
        let ssthresh = self.cc.ssthresh();
        let mss = self.snd.mss;
        let Some(p) = self.rec.prr.as_mut() else {
            return;
        };
        p.delivered += delivered;
        p.sndcnt = if pipe > ssthresh {
            let target =
                (p.delivered as u64 * ssthresh as u64).div_ceil(p.recover_fs.max(1) as u64);
            (target as usize).saturating_sub(p.out)
        } else {
            let limit = p.delivered.saturating_sub(p.out).max(delivered) + mss;
            (ssthresh - pipe).min(limit)
        };
    }

    /// Bytes that may be sent now: in a SACK recovery what PRR allows, else
    /// what cwnd leaves above pipe.
    pub(super) fn send_room(&self) -> usize {
        match (&self.rec.prr, self.rec.active) {
            (Some(p), true) => p.sndcnt,
            _ => self.cc.cwnd().saturating_sub(self.pipe()),
        }
    }

    /// Counts `len` bytes just sent (new or again) against PRR's allowance.
    pub(super) fn prr_on_send(&mut self, len: usize) {
        if let (Some(p), true) = (self.rec.prr.as_mut(), self.rec.active) {
            p.out += len;
            p.sndcnt = p.sndcnt.saturating_sub(len);
        }
    }

    /// RACK loss detection (RFC 8985 §6.2): the reordering window is
    /// min_rtt / 4 (§6.2 step 4), capped at SRTT.
    pub(super) fn rack_detect(&mut self, now: Instant) {
        let Some(xmit) = self.rec.rack.xmit else {
            return;
        };
        let min_rtt = self.rec.rack.min_rtt.unwrap_or(self.rec.rack.rtt);
        let mut reo = min_rtt / 4 * self.rec.rack.reo_mult.max(1);
        if let Some(srtt) = self.timers.rto.srtt() {
            reo = reo.min(srtt);
        }
        let before = self.rec.sb.owed();
        let timeout =
            self.rec
                .sb
                .rack_detect(xmit, self.rec.rack.end, self.rec.rack.rtt + reo, now);
        let after = self.rec.sb.owed();
        self.stats.rack_losses += after.saturating_sub(before) as u64;
        self.rec.rack.deadline = timeout.map(|t| now + t);
    }

    /// The RACK reordering timer fired (RFC 8985 §6.2 step 5).
    pub(super) fn on_rack_timer(&mut self, now: Instant) {
        self.rec.rack.deadline = None;
        if self.opts.sack && self.cfg.rack_tlp {
            self.rack_detect(now);
            if !self.probe_check() {
                self.maybe_enter_recovery();
            }
        }
    }

    /// RTO (RFC 6675 §5.1, RFC 8985 §6.3): every un-SACKed segment is lost;
    /// cwnd = 1 SMSS; recovery ends and `recover` = snd_max (RFC 6582 §4).
    pub(super) fn rto_recovery(&mut self, now: Instant) {
        let mss = self.snd.mss;
        if self.opts.ts && self.timers.rto_tsval.is_none() {
            self.timers.rto_tsval = Some(self.ts_val(now));
        }
        if self.rec.active && !self.opts.sack {
            // Without the inflation of NewReno recovery.
            let c = self.cc.cwnd().min(self.cc.ssthresh());
            self.cc.set_cwnd(c);
        }
        self.rec.undo = Some(Undo {
            saved: self.cc,
            marker: self.snd.una,
            retrans: 0,
        });
        let flight = self.snd.max - self.snd.una;
        self.cc
            .on_congestion_event(CongestionEvent::Rto, flight, mss);
        self.rec.active = false;
        self.rec.prr = None;
        self.rec.dupacks = 0;
        self.rec.recover = self.snd.max;
        if self.rec.sb.get(0).is_some_and(|s| s.has(SACKED)) {
            // RFC 2018 §8: the receiver discarded SACKed data (reneging);
            // the segment at snd_una must go again, so SACK marks are void.
            self.rec.sb.clear_sacked();
            self.stats.sack_reneging += 1;
        }
        self.rec.sb.mark_all_lost();
        // Anything sent beyond the scoreboard is sent again as new data.
        let tracked = self.rec.sb.end().unwrap_or(self.snd.una).max(self.snd.una);
        if self.snd.nxt > tracked {
            self.snd.nxt = tracked;
        }
        self.rec.tlp = Default::default();
        self.rec.rack.deadline = None;
    }

    /// The first ACK of new data after an RTO: if it echoes a timestamp
    /// older than the RTO, the original transmission reached the peer and
    /// only its ACK was late (RFC 3522 Eifel detection, as Linux's
    /// `tcp_try_undo_loss`): the cwnd reduction is undone and segments not
    /// yet sent again are no longer deemed lost. Decided once per episode.
    pub(super) fn check_spurious_rto(&mut self, seg: &TcpRepr) {
        let Some(rto_ts) = self.timers.rto_tsval.take() else {
            return;
        };
        let Some((_, tsecr)) = seg.options.timestamps else {
            return;
        };
        if tsecr == 0 || (tsecr.wrapping_sub(rto_ts) as i32) >= 0 {
            return;
        }
        if let Some(u) = self.rec.undo.take() {
            self.cc.undo(u.saved);
        }
        self.rec.sb.clear_owed();
        self.rec.recover = self.snd.una;
        self.stats.spurious_rtos += 1;
    }

    /// RFC 8985 §7.2: arm the probe timeout when SACK and RACK-TLP are in use,
    /// data is in flight and no probe is outstanding.
    /// PTO = 2*SRTT, plus the peer's delayed-ACK time when one segment is in
    /// flight; 1 s without an RTT sample; at least 1 ms; only if it is
    /// earlier than the RTO.
    ///
    /// Unlike §7.2, the timer also runs during a SACK recovery, restarted by
    /// every ACK that reports delivery and by every transmission. A recovery
    /// whose ACK clock stops otherwise waits for the RTO (at least 200 ms):
    /// when a receiver that compresses SACKs (Linux does) answers the
    /// retransmission of the last hole with a single cumulative ACK and that
    /// ACK is lost, or when the last retransmission is lost with nothing sent
    /// after it for RACK to compare with. The probe (§7.3) draws an ACK that
    /// ends or continues the recovery; it never reduces cwnd (§7.4 applies
    /// outside recovery only).
    pub(super) fn arm_tlp(&mut self, now: Instant) {
        let ok = self.opts.sack
            && self.cfg.rack_tlp
            && self.rec.tlp.high.is_none()
            && self.snd.nxt > self.snd.una
            && !self.rec.sb.is_empty()
            && self.sends_data();
        if !ok {
            self.rec.tlp.deadline = None;
            return;
        }
        if self.rec.tlp.deadline.is_some() || self.rec.tlp.pending {
            return;
        }
        let srtt = self.timers.rto.srtt();
        let mut pto = srtt.map_or(Duration::from_secs(1), |s| s * 2);
        if self.rec.sb.len() == 1 {
            // RFC 8985 §7.2: one segment in flight may wait for the peer's
            // delayed ACK, at worst WCDelAckT (Linux: 1.5 SRTT plus
            // TCP_DELACK_MAX). A request/response server whose client is
            // slow to answer otherwise probes its replies spuriously.
            let s = srtt.unwrap_or(Duration::ZERO);
            pto = pto.max(s + s / 2 + WC_DEL_ACK);
        }
        let mut at = now + pto.max(Duration::from_millis(1));
        // Never after the RTO: the probe goes then instead (Linux's
        // tcp_schedule_loss_probe; `on_timer` lets it win the tie).
        if let Some(rto) = self.timers.rto_deadline {
            at = at.min(rto);
        }
        self.rec.tlp.deadline = Some(at);
    }

    /// RFC 8985 §7.4: after a probe retransmission, an ACK beyond it means
    /// the probe repaired a loss: reduce cwnd once. A D-SACK for the probe
    /// means there was none.
    fn tlp_on_ack(&mut self, ev: AckEvent) {
        // New data acked: the probe timer restarts (§7.2).
        self.rec.tlp.deadline = None;
        let Some(high) = self.rec.tlp.high else {
            return;
        };
        if ev.dsack_tlp {
            self.rec.tlp.high = None;
            return;
        }
        if self.snd.una > high || (self.snd.una == high && self.snd.max == high) {
            self.rec.tlp.high = None;
            if !self.rec.active {
                let mss = self.snd.mss;
                let flight = self.snd.max - self.snd.una;
                self.cc
                    .on_congestion_event(CongestionEvent::FastRecovery, flight, mss);
            }
        }
    }

    /// The probe timer fired: a probe goes out on the next `poll_output`.
    pub(super) fn on_tlp_timer(&mut self) {
        self.rec.tlp.deadline = None;
        if self.opts.sack && self.snd.nxt > self.snd.una {
            self.rec.tlp.pending = true;
        }
    }

    /// Receiver ECN (RFC 3168 §6.1.3, RFC 8257 §3.2) for one arriving data
    /// segment: classic ECN sets ECE from a CE mark until a CWR arrives;
    /// DCTCP echoes exactly the CE state of the latest segment, ACKing at
    /// once when it changes.
    pub(super) fn ecn_receive(&mut self, ce: bool, cwr: bool, has_data: bool) {
        if !self.ecn.ok {
            return;
        }
        if ce {
            self.stats.ce_received += 1;
        }
        if self.cc.kind() == CcKind::Dctcp {
            if has_data && ce != self.ecn.ece {
                self.ecn.ece = ce;
                self.ack.now = true;
            }
            return;
        }
        if cwr {
            self.ecn.ece = false;
        }
        if ce && has_data {
            self.ecn.ece = true;
        }
    }
}
