//! Retransmission and probes: the fast or partial-ACK retransmission,
//! segments deemed lost (RFC 6675), the tail loss probe (RFC 8985 §7.3),
//! and the persist timer's zero-window probe (RFC 9293 §3.8.6.1).
//! `poll_output` calls them in that order; each builds its segment with
//! `emit_data`.

use crate::time::Instant;

use super::api::Segment;
use super::scoreboard::TxSeg;
use super::tcb::Tcb;

impl Tcb {
    /// Fast retransmit / NewReno partial ACK: the first segment owed a
    /// retransmission (the first unacknowledged one), once, outside the
    /// congestion window (RFC 5681 §3.2 step 3, RFC 6582 §3.2 step 5,
    /// RFC 6675 §5 step 4.3). Without a tracked segment, the data at snd_una.
    pub(super) fn retransmit_first(
        &mut self,
        now: Instant,
        tx_len: usize,
        rcv_free: usize,
    ) -> Option<Segment> {
        if !self.sends_data() {
            return None;
        }
        if !self.rec.sb.is_empty() {
            if self.rec.sb.peek_owed().is_none() {
                self.rec.sb.mark_lost(0);
            }
            return self.retransmit_owed(now, tx_len, rcv_free);
        }
        let seq = self.snd.una;
        let data_end = self.snd.base + tx_len;
        let len = if data_end > seq && self.snd.max > seq {
            (data_end - seq).min(self.snd.mss).min(self.snd.max - seq)
        } else {
            0
        };
        let fin = self.snd.fin_seq.is_some_and(|f| f == seq + len);
        if len == 0 && !fin {
            return None;
        }
        self.karn_retransmit();
        Some(self.emit_data(seq, len, fin, now, rcv_free, true))
    }

    /// True if a segment is owed a retransmission and pipe leaves room for
    /// it in cwnd (RFC 6675 §5 step (C)).
    pub(super) fn owed_ready(&self, tx_len: usize) -> bool {
        if !self.sends_data() || self.pace.deadline.is_some() {
            return false;
        }
        let Some(s) = self.rec.sb.peek_owed().and_then(|i| self.rec.sb.get(i)) else {
            return false;
        };
        let _ = tx_len;
        // An entry bigger than the MSS (sent before a path MTU drop) goes in
        // MSS-sized pieces (`retransmit_owed`): the first piece must fit.
        let piece = if s.data_len() > self.snd.mss {
            self.snd.mss
        } else {
            s.len()
        };
        piece <= self.send_room()
    }

    /// Retransmits the lowest segment owed a retransmission, with its
    /// original boundaries. Voids the RTT timing (Karn).
    pub(super) fn retransmit_owed(
        &mut self,
        now: Instant,
        tx_len: usize,
        rcv_free: usize,
    ) -> Option<Segment> {
        let i = self.rec.sb.next_owed()?;
        let s = *self.rec.sb.get(i)?;
        if s.start < self.snd.base {
            return None;
        }
        Some(self.resend(i, &s, tx_len, now, rcv_free, true))
    }

    /// Sends scoreboard entry `i` (`s`) again from its original start: the
    /// payload bytes of it still in the SendBuffer (`tx_len` bytes from
    /// snd.base) and its FIN. Marks it retransmitted at `now` with a fresh
    /// delivery-rate stamp, voids the RTT timing (Karn) and, when
    /// `counts_for_undo`, counts it among the retransmissions whose
    /// D-SACKs a pending undo (RFC 2883 §5) waits for.
    ///
    /// After a path MTU drop (RFC 1191, RFC 8201, a black-hole fallback)
    /// an entry may be bigger than the MSS now: it is split, and its first
    /// MSS-sized piece goes (never a segment the path drops, nor a TSO
    /// segment on a port without TSO).
    #[inline]
    fn resend(
        &mut self,
        i: usize,
        s: &TxSeg,
        tx_len: usize,
        now: Instant,
        rcv_free: usize,
        counts_for_undo: bool,
    ) -> Segment {
        let mut s = *s;
        if s.data_len() > self.snd.mss && self.rec.sb.split(i, s.start + self.snd.mss) {
            s = self.rec.sb.get(i).copied().unwrap_or(s);
        }
        let s = &s;
        let data_end = self.snd.base + tx_len;
        let avail = if data_end > s.start {
            data_end - s.start
        } else {
            0
        };
        // A split that found the scoreboard full: the first MSS alone.
        let len = s.data_len().min(avail).min(self.snd.mss);
        let fin = s.has(super::scoreboard::FIN) && s.data_len() <= self.snd.mss;
        let stamp = self.rate.stamp(now, false);
        self.rec.sb.retransmitted(i, now);
        self.rec.sb.stamp(i, stamp);
        if counts_for_undo {
            if let Some(u) = self.rec.undo.as_mut().filter(|u| s.start >= u.marker) {
                u.retrans += 1;
            }
        }
        self.karn_retransmit();
        self.emit_data(s.start, len, fin, now, rcv_free, false)
    }

    /// The tail loss probe (RFC 8985 §7.3): new data if the peer's window
    /// allows (cwnd is not checked), else the last segment sent again (in a
    /// recovery, the last one not SACKed).
    pub(super) fn probe_tail(
        &mut self,
        now: Instant,
        tx_len: usize,
        rcv_free: usize,
    ) -> Option<Segment> {
        if !self.sends_data() {
            return None;
        }
        if let Some(seg) = self.probe_new_data(now, tx_len, rcv_free, false) {
            self.count_probe();
            return Some(seg);
        }
        let mut i = self.rec.sb.len().checked_sub(1)?;
        if self.rec.active {
            while self.rec.sb.get(i)?.has(super::scoreboard::SACKED) {
                i = i.checked_sub(1)?;
            }
        }
        let s = *self.rec.sb.get(i)?;
        if s.has(super::scoreboard::SACKED) || s.start < self.snd.base {
            return None;
        }
        self.rec.tlp.high = Some(self.snd.max);
        self.count_probe();
        // In a recovery, its D-SACK, if it was not needed, must not pass
        // for one of the recovery's own retransmissions and undo the
        // reduction.
        let seg = self.resend(i, &s, tx_len, now, rcv_free, self.rec.active);
        self.timers.rto_deadline = Some(self.rto_from(now));
        Some(seg)
    }

    /// A segment of new data for a probe, if the peer's window allows one
    /// (cwnd is not checked): up to one MSS, or (`full_only`) exactly one.
    pub(super) fn probe_new_data(
        &mut self,
        now: Instant,
        tx_len: usize,
        rcv_free: usize,
        full_only: bool,
    ) -> Option<Segment> {
        let data_end = self.snd.base + tx_len;
        let right = self.snd.una + self.snd.wnd;
        if self.snd.nxt != self.snd.max
            || self.snd.nxt >= data_end
            || right <= self.snd.nxt
            || self.rec.sb.is_full()
        {
            return None;
        }
        let unsent = data_end - self.snd.nxt;
        let len = unsent.min(right - self.snd.nxt).min(self.snd.mss);
        if full_only && len < self.snd.mss {
            return None;
        }
        let fin = self.snd.fin_queued && len == unsent;
        let seg = self.emit_data(self.snd.nxt, len, fin, now, rcv_free, true);
        self.timers.rto_deadline = Some(self.rto_from(now));
        Some(seg)
    }

    pub(super) fn count_probe(&mut self) {
        if self.rec.active {
            self.stats.recovery_probes += 1;
        } else {
            self.stats.tlp_probes += 1;
        }
    }

    /// The persist timer fired (RFC 9293 §3.8.6.1): with a zero window, one
    /// octet of new data beyond it; with a small window held back by SWS
    /// avoidance, what fits (the "override timeout"). A zero-window probe
    /// does not advance snd_nxt, so it never enters the retransmission queue.
    pub(super) fn probe_segment(
        &mut self,
        now: Instant,
        tx_len: usize,
        rcv_free: usize,
    ) -> Option<Segment> {
        if !self.sends_data() {
            return None;
        }
        let data_end = self.snd.base + tx_len;
        if self.snd.nxt >= data_end {
            return None;
        }
        let unsent = data_end - self.snd.nxt;
        let usable = self.usable_window();
        self.timers.persist_shift = self.timers.persist_shift.saturating_add(1);
        if usable > 0 && !self.rec.sb.is_full() {
            let len = unsent.min(usable).min(self.snd.mss);
            let fin = self.snd.fin_queued && len == unsent;
            return Some(self.emit_data(self.snd.nxt, len, fin, now, rcv_free, true));
        }
        self.stats.window_probes += 1;
        let timing = self.timers.rtt_timing;
        let seg = self.emit_data(self.snd.nxt, 1, false, now, rcv_free, false);
        self.timers.rtt_timing = timing;
        // A probe is answered by the peer's window, not retransmitted by the
        // RTO: only the persist timer runs.
        if self.snd.nxt == self.snd.una {
            self.timers.rto_deadline = None;
        }
        Some(seg)
    }

    /// Arms the persist timer when data waits, nothing is in flight and the
    /// window (or SWS avoidance) holds it back; disarms it otherwise.
    pub(super) fn update_persist(&mut self, now: Instant, tx_len: usize) {
        let data_end = self.snd.base + tx_len;
        let waiting = self.sends_data() && self.snd.nxt < data_end && self.snd.nxt == self.snd.una;
        if !waiting {
            self.timers.persist_deadline = None;
            return;
        }
        if self.timers.persist_deadline.is_none() {
            let shift = self.timers.persist_shift.min(16);
            let interval = self
                .timers
                .rto
                .rto()
                .saturating_mul(1 << shift)
                .clamp(self.cfg.rto_min, self.cfg.rto_max.max(self.cfg.rto_min));
            self.timers.persist_deadline = Some(self.until_user_timeout(now, interval));
        }
    }
}
