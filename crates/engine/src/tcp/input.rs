//! Segment arrival (RFC 9293 §3.10.7.3 SYN-SENT, §3.10.7.4 other states).
//!
//! Nothing is sent from here: replies are queued (`ack_now`, `pending_rst`,
//! `rexmit_one`) and go out on the next `poll_output`.

use wire::tcp::TcpRepr;
use wire::SeqNum;

use crate::time::Instant;

use super::api::{CloseReason, Events, RecvBuffer, SendBuffer, State};
use super::recovery::AckEvent;
use super::rst::PendingRst;
use super::tcb::{Tcb, MAX_ACK_POINTS, MAX_DUPACKS_OWED};

/// The part of an acceptable segment that lies in the receive window.
#[derive(Debug, Clone, Copy)]
struct Accepted {
    /// Sequence number of the first payload byte kept.
    seq: SeqNum,
    /// Kept payload range within the segment's payload.
    start: usize,
    end: usize,
    fin: bool,
}

/// RFC 7323 §5.3 modular timestamp comparison: `a` older than `b`.
pub(super) fn ts_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl Tcb {
    /// Processes one arriving segment with its `payload`. In-order bytes go to
    /// `rx`; acknowledged bytes are consumed from `tx`. Replies (ACK, RST,
    /// retransmissions) are queued for the next `poll_output`. Never panics on
    /// malformed or hostile input; does not allocate.
    pub fn input(
        &mut self,
        seg: &TcpRepr,
        payload: &[u8],
        now: Instant,
        tx: &mut impl SendBuffer,
        rx: &mut impl RecvBuffer,
    ) -> Events {
        let mut ev = Events::default();
        let ce = core::mem::take(&mut self.ecn.rx_ce);
        self.rcv.last_seen = now;
        // Anything from the peer answers the keepalive probes.
        self.ka.probes = 0;
        self.ka.deadline = None;
        match self.state {
            State::Established | State::FinWait1 | State::FinWait2 => {
                self.ecn_receive(ce, seg.flags.cwr(), !payload.is_empty());
            }
            _ => {}
        }
        match self.state {
            State::Closed | State::Listen => {}
            State::SynSent => self.input_syn_sent(seg, payload, now, rx, &mut ev),
            _ => self.input_synchronized(seg, payload, now, tx, rx, &mut ev),
        }
        self.snd.buffered = tx.len();
        self.update_keepalive();
        self.update_fin_wait2(now);
        // A window that just closed (or data now stuck behind it) starts the
        // persist timer even if the engine has nothing else to send.
        self.update_persist(now, self.snd.buffered);
        ev
    }

    /// RFC 9293 §3.10.7.3.
    fn input_syn_sent(
        &mut self,
        seg: &TcpRepr,
        payload: &[u8],
        now: Instant,
        rx: &mut impl RecvBuffer,
        ev: &mut Events,
    ) {
        let f = seg.flags;
        // First: an ACK must acknowledge our SYN and nothing beyond it;
        // otherwise answer <SEQ=SEG.ACK><CTL=RST> (unless it is an RST).
        if f.ack() && (seg.ack <= self.snd.iss || seg.ack > self.snd.max) {
            if !f.rst() {
                self.pending_rst = Some(PendingRst {
                    seq: seg.ack,
                    ack: None,
                });
            }
            return;
        }
        // Second: RST with an acceptable ACK means "connection refused";
        // without an ACK it is dropped.
        if f.rst() {
            if f.ack() {
                self.enter_closed();
                ev.closed = Some(CloseReason::Refused);
            }
            return;
        }
        // Fourth: the SYN.
        if !f.syn() {
            return;
        }
        self.rcv.irs = seg.seq;
        self.rcv.nxt = seg.seq + 1;
        self.rcv.last_ack_sent = self.rcv.nxt;
        self.negotiate(&seg.options);
        // RFC 3168 §6.1.1: an ECN-setup SYN-ACK has ECE and not CWR.
        self.ecn.ok = self.ecn_offered() && f.ece() && !f.cwr();
        self.rcv.adv = self.rcv.nxt + self.rcv.syn_window;
        // The window of a SYN is never scaled (RFC 7323 §2.2).
        self.snd.wnd = usize::from(seg.window);
        self.snd.max_wnd = self.snd.wnd;
        self.snd.wl1 = seg.seq;
        self.snd.wl2 = seg.ack;
        if f.ack() {
            // Our SYN is acknowledged: ESTABLISHED, and ACK the SYN-ACK.
            self.snd.una = seg.ack;
            if self.snd.nxt < self.snd.una {
                self.snd.nxt = self.snd.una;
            }
            self.take_rtt_sample(seg, now);
            self.timers.rto_deadline = None;
            self.establish(ev);
            self.ack.now = true;
            // Data or FIN on the SYN-ACK: continue at the sixth step.
            let data_seq = seg.seq + 1;
            let fin = f.fin();
            self.input_text(data_seq, payload, fin, now, rx, ev);
        } else {
            // Simultaneous open: SYN-RECEIVED; our SYN goes out again as a
            // SYN-ACK <SEQ=ISS><ACK=RCV.NXT>. Data on the SYN is not kept.
            self.state = State::SynReceived;
            self.snd.nxt = self.snd.iss;
            self.timers.rto_deadline = None;
        }
    }

    /// RFC 9293 §3.10.7.4: SYN-RECEIVED and every synchronized state.
    fn input_synchronized(
        &mut self,
        seg: &TcpRepr,
        payload: &[u8],
        now: Instant,
        tx: &mut impl SendBuffer,
        rx: &mut impl RecvBuffer,
        ev: &mut Events,
    ) {
        let mut f = seg.flags;
        // Simultaneous open (§3.5 figure 8): the peer's SYN-ACK repeats the SYN
        // we already took. If it acknowledges our SYN, treat it as that ACK
        // (as Linux does) rather than as an old duplicate.
        let synack_copy;
        let seg = if self.state == State::SynReceived
            && self.active_open
            && f.syn()
            && f.ack()
            && !f.rst()
            && seg.seq == self.rcv.irs
            && seg.ack > self.snd.una
            && seg.ack <= self.snd.max
        {
            synack_copy = TcpRepr {
                seq: self.rcv.irs + 1,
                flags: wire::tcp::TcpFlags(f.0 & !wire::tcp::TcpFlags::SYN),
                ..*seg
            };
            f = synack_copy.flags;
            &synack_copy
        } else {
            seg
        };
        // A retransmitted SYN in SYN-RECEIVED: our SYN-ACK was lost, send it again.
        if self.state == State::SynReceived
            && f.syn()
            && !f.ack()
            && !f.rst()
            && seg.seq == self.rcv.irs
        {
            self.snd.nxt = self.snd.iss;
            return;
        }
        let tsval = if self.opts.ts {
            seg.options.timestamps.map(|(val, _)| val)
        } else {
            None
        };
        // RFC 7323 §5.3 PAWS: a non-RST segment whose TSval is older than
        // TS.Recent is an old duplicate: ACK and drop.
        if let Some(val) = tsval {
            if !f.rst() && ts_before(val, self.opts.ts_recent) {
                self.stats.paws_dropped += 1;
                self.ack.now = true;
                return;
            }
        }
        // First check: sequence number acceptability, trimmed to the window.
        let Some(acc) = self.acceptable(seg, payload.len()) else {
            // Not acceptable: ACK (unless RST) and drop. In TIME-WAIT a
            // retransmitted FIN also restarts the 2*MSL timer.
            if !f.rst() {
                self.ack.now = true;
                let end = seg.seq + payload.len();
                if !payload.is_empty() && end <= self.rcv.nxt {
                    // RFC 2883: report the duplicate.
                    self.note_duplicate(seg.seq, end);
                }
                if self.state == State::TimeWait && f.fin() {
                    self.timers.time_wait_deadline = Some(now + self.cfg.time_wait);
                }
                if !f.syn() && f.ack() && self.ack_acceptable(seg, payload.len()) {
                    // RFC 9293 §3.10.7.4: "If the RCV.WND is zero, no
                    // segments will be acceptable, but special allowance
                    // should be made to accept valid ACKs". The data is
                    // dropped; the ACK, window and SACK blocks count, as
                    // on Linux (tcp_sequence), or two ends whose receive
                    // windows are full would each drop the ACKs the other
                    // needs to free its own.
                    self.stats.acks_of_unacceptable += 1;
                    self.input_ack(seg, payload.len(), now, tx, ev);
                }
            }
            return;
        };
        // RFC 7323 §4.3: TS.Recent = SEG.TSval if SEG.TSval >= TS.Recent and
        // SEG.SEQ =< Last.ACK.sent.
        if let Some(val) = tsval {
            if !ts_before(val, self.opts.ts_recent) && seg.seq <= self.rcv.last_ack_sent {
                self.opts.ts_recent = val;
            }
            // A full-sized in-order segment echoes one of our timestamps:
            // the receiver's RTT, for receive-buffer auto-tuning.
            if let (Some((_, ecr)), true) = (
                seg.options.timestamps,
                payload.len() >= self.snd.mss && seg.seq == self.rcv.nxt,
            ) {
                self.rcv_rtt_sample(ecr, now);
            }
        }
        // Second check: RST.
        if f.rst() {
            self.input_rst(seg, ev);
            return;
        }
        // Fourth check: a SYN in a synchronized state gets a challenge ACK
        // and is dropped (RFC 9293 §3.10.7.4, RFC 5961 §4).
        if f.syn() {
            self.challenge_ack();
            return;
        }
        // Fifth check: segments without ACK are dropped.
        if !f.ack() {
            return;
        }
        if !self.input_ack(seg, payload.len(), now, tx, ev) {
            return;
        }
        if acc.start > 0 && !f.syn() {
            // The front of the segment was already received (RFC 2883).
            self.note_duplicate(seg.seq, seg.seq + acc.start);
        }
        // RFC 1122 §4.2.2.13: new data for an application that has closed
        // its socket (an orphan in FIN-WAIT-1 or -2) can never be read: the
        // connection is reset, <SEQ=SEG.ACK><CTL=RST>, as Linux does
        // (TCPAbortOnData).
        if self.orphaned
            && acc.end > acc.start
            && matches!(self.state, State::FinWait1 | State::FinWait2)
        {
            self.pending_rst = Some(PendingRst {
                seq: seg.ack,
                ack: None,
            });
            self.enter_closed();
            ev.closed = Some(CloseReason::Reset);
            return;
        }
        // Seventh and eighth: text and FIN.
        let data = payload.get(acc.start..acc.end).unwrap_or(&[]);
        self.input_text(acc.seq, data, acc.fin, now, rx, ev);
    }

    /// First check of §3.10.7.4: is any part of the segment inside
    /// [RCV.NXT, RCV.NXT+RCV.WND)? Returns the part to keep, trimmed at both
    /// ends. A zero-length segment is acceptable at RCV.NXT even with a zero
    /// window; so is a bare FIN at RCV.NXT (as Linux does).
    fn acceptable(&self, seg: &TcpRepr, plen: usize) -> Option<Accepted> {
        let rcv_wnd = self.rcv_wnd();
        let syn = seg.flags.syn();
        let fin = seg.flags.fin();
        let seg_len = plen + usize::from(syn) + usize::from(fin);
        let rcv_nxt = self.rcv.nxt;
        let in_window = |s: SeqNum| s >= rcv_nxt && s - rcv_nxt < rcv_wnd;
        let ok = match (seg_len, rcv_wnd) {
            (0, 0) => seg.seq == rcv_nxt,
            (0, _) => in_window(seg.seq),
            (_, 0) => seg.seq == rcv_nxt && plen == 0 && !syn,
            _ => in_window(seg.seq) || in_window(seg.seq + (seg_len - 1)),
        };
        if !ok {
            return None;
        }
        let mut seq = seg.seq;
        let mut start = 0;
        let mut end = plen;
        let mut fin = fin;
        if syn {
            seq += 1;
        }
        if seq < rcv_nxt {
            let skip = (rcv_nxt - seq).min(end);
            start = skip;
            seq += skip;
        }
        let right = rcv_nxt + rcv_wnd;
        let kept = end - start;
        if kept > 0 && seq + kept > right {
            // Trim what lies beyond the window; a FIN behind it goes too.
            let over = (seq + kept) - right;
            end -= over.min(kept);
            fin = false;
        }
        Some(Accepted {
            seq,
            start,
            end,
            fin,
        })
    }

    /// Whether the ACK field of a segment that is not acceptable for its
    /// data may still be processed (RFC 9293 §3.10.7.4, zero window): in a
    /// synchronized state after SYN-RECEIVED, when the segment does not
    /// start beyond the right edge of the window we advertised and does
    /// not end before the last ACK we sent (Linux's `tcp_sequence`, with
    /// Last.ACK.sent for its `rcv_wup`). An old duplicate from before that
    /// ACK or a segment beyond the window is ignored whole.
    fn ack_acceptable(&self, seg: &TcpRepr, plen: usize) -> bool {
        if !matches!(
            self.state,
            State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
                | State::Closing
                | State::LastAck
        ) {
            return false;
        }
        let seg_len = plen + usize::from(seg.flags.fin());
        seg.seq <= self.rcv.nxt + self.rcv_wnd() && seg.seq + seg_len >= self.rcv.last_ack_sent
    }

    /// Second check of §3.10.7.4 (with RFC 5961 §3): an RST resets the
    /// connection only if SEG.SEQ = RCV.NXT exactly; any other in-window RST
    /// gets a challenge ACK.
    fn input_rst(&mut self, seg: &TcpRepr, ev: &mut Events) {
        if seg.seq != self.rcv.nxt {
            self.challenge_ack();
            return;
        }
        let reason = match self.state {
            // From an active open (simultaneous open): refused; from a
            // passive open the listener simply forgets this attempt.
            State::SynReceived if self.active_open => CloseReason::Refused,
            State::SynReceived
            | State::Established
            | State::FinWait1
            | State::FinWait2
            | State::CloseWait => CloseReason::Reset,
            _ => CloseReason::Normal,
        };
        self.enter_closed();
        ev.closed = Some(reason);
    }

    /// Fifth check of §3.10.7.4: the ACK field. Returns false if the segment
    /// must be dropped here.
    fn input_ack(
        &mut self,
        seg: &TcpRepr,
        plen: usize,
        now: Instant,
        tx: &mut impl SendBuffer,
        ev: &mut Events,
    ) -> bool {
        let ack = seg.ack;
        if self.state == State::SynReceived {
            // SND.UNA < SEG.ACK =< SND.NXT: ESTABLISHED; otherwise
            // <SEQ=SEG.ACK><CTL=RST>.
            if !(ack > self.snd.una && ack <= self.snd.max) {
                self.pending_rst = Some(PendingRst {
                    seq: ack,
                    ack: None,
                });
                return false;
            }
            self.establish(ev);
            self.snd.wnd = usize::from(seg.window) << self.snd.wscale;
            self.snd.max_wnd = self.snd.max_wnd.max(self.snd.wnd);
            self.snd.wl1 = seg.seq;
            self.snd.wl2 = ack;
        }
        if ack > self.snd.max {
            // ACKs something not yet sent: ACK and drop.
            self.ack.now = true;
            return false;
        }
        if ack < self.snd.una && self.snd.una - ack > self.snd.max_wnd.max(self.snd.mss) {
            // RFC 5961 §5.2: an ACK older than the largest window is suspect:
            // challenge ACK and drop.
            self.challenge_ack();
            return false;
        }
        let wnd = usize::from(seg.window) << self.snd.wscale;
        let una_before = self.snd.una;
        let (sacked, dsack_tlp) = self.process_sack(seg, now);
        let mut aev = AckEvent {
            sacked,
            ece: self.ecn.ok && seg.flags.ece(),
            dsack_tlp,
            ..AckEvent::default()
        };
        if ack > self.snd.una {
            aev.new_ack = true;
            aev.acked = self.ack_new_data(seg, now, tx, ev);
        } else if ack == self.snd.una
            && plen == 0
            && !seg.flags.fin()
            && self.snd.nxt > self.snd.una
            && ((wnd == self.snd.wnd && wnd != 0) || sacked > 0)
        {
            // RFC 5681 §2: outstanding data, no payload, no SYN/FIN, ACK =
            // snd_una, unchanged window: a duplicate ACK; with SACK, one
            // that carries new SACK information counts too (RFC 6675 §2).
            aev.dup = true;
        }
        if aev.new_ack || aev.dup || sacked > 0 || aev.ece {
            self.on_ack_recovery(aev, now);
        }
        // Window update (§3.10.7.4): if SND.UNA =< SEG.ACK =< SND.NXT and
        // (SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and SND.WL2 =< SEG.ACK)),
        // and also whenever SEG.ACK moves SND.UNA (as Linux's
        // tcp_may_update_window): the window is relative to SEG.ACK, so
        // keeping the old one while SND.UNA moves would move the right edge
        // past what the peer offered. That happens whenever a segment with
        // an older SEG.SEQ acknowledges more, e.g. a retransmission sent
        // after a pure ACK (whose SEQ is SND.MAX).
        if ack >= una_before
            && (ack > una_before
                || self.snd.wl1 < seg.seq
                || (self.snd.wl1 == seg.seq && self.snd.wl2 <= ack))
        {
            self.snd.wnd = wnd;
            self.snd.max_wnd = self.snd.max_wnd.max(wnd);
            self.snd.wl1 = seg.seq;
            self.snd.wl2 = ack;
            if wnd > 0 {
                // The window opened: no more probing, and a probing
                // episode (nothing in flight) is answered.
                if self.snd.nxt == self.snd.una {
                    self.timers.unanswered_since = None;
                }
                self.timers.persist_deadline = None;
                self.timers.probe_pending = false;
                self.timers.persist_shift = 0;
            }
        }
        let fin_acked = self.snd.fin_seq.is_some_and(|f| self.snd.una > f);
        match self.state {
            State::FinWait1 if fin_acked => self.state = State::FinWait2,
            State::Closing if fin_acked => {
                self.enter_time_wait(now);
                return false;
            }
            State::LastAck if fin_acked => {
                self.enter_closed();
                ev.closed = Some(CloseReason::Normal);
                return false;
            }
            _ => {}
        }
        true
    }

    /// SND.UNA < SEG.ACK =< SND.MAX: consume acknowledged bytes, sample the
    /// RTT, update the congestion window and the retransmission timer.
    /// Returns the data bytes newly acknowledged.
    fn ack_new_data(
        &mut self,
        seg: &TcpRepr,
        now: Instant,
        tx: &mut impl SendBuffer,
        ev: &mut Events,
    ) -> usize {
        let ack = seg.ack;
        let data_end = self.snd.base + tx.len();
        let acked_data = if ack > self.snd.base {
            ack.min(data_end) - self.snd.base
        } else {
            0
        };
        if acked_data > 0 {
            tx.consume(acked_data);
            self.snd.base += acked_data;
            ev.writable = true;
        }
        self.snd.una = ack;
        if self.snd.nxt < ack {
            self.snd.nxt = ack;
        }
        self.timers.retries = 0;
        self.timers.unanswered_since = None;
        self.check_spurious_rto(seg);
        self.take_rtt_sample(seg, now);
        self.scoreboard_ack(seg, now);
        // RFC 6298 §5.2/5.3: stop the timer when nothing is outstanding,
        // restart it otherwise.
        self.timers.rto_deadline = (self.snd.nxt > self.snd.una).then(|| self.rto_from(now));
        self.timers.persist_shift = 0;
        acked_data
    }

    /// RTT measurement for an ACK of new data: the timed segment (Karn's
    /// algorithm, RFC 6298 §3) if it is covered; else, when a retransmission
    /// voided the timing and timestamps are in use, RTTM from TSecr (RFC 7323 §4).
    fn take_rtt_sample(&mut self, seg: &TcpRepr, now: Instant) {
        if let Some((end, sent)) = self.timers.rtt_timing {
            if seg.ack >= end {
                self.timers.rto.sample(now - sent);
                self.timers.rtt_timing = None;
                self.timers.karn_blocked = false;
            }
            return;
        }
        if self.timers.karn_blocked && self.opts.ts {
            if let Some((_, tsecr)) = seg.options.timestamps {
                let ms = self.ts_val(now).wrapping_sub(tsecr);
                if ms < 600_000 {
                    self.timers
                        .rto
                        .sample(core::time::Duration::from_millis(u64::from(ms)));
                    self.timers.karn_blocked = false;
                }
            }
        }
    }

    /// Seventh and eighth steps of §3.10.7.4: payload and FIN. `seq` is the
    /// sequence number of `data[0]` (or of the FIN if `data` is empty).
    fn input_text(
        &mut self,
        seq: SeqNum,
        data: &[u8],
        fin: bool,
        now: Instant,
        rx: &mut impl RecvBuffer,
        ev: &mut Events,
    ) {
        let takes_data = matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        );
        let mut fin = fin;
        if takes_data && !data.is_empty() {
            if seq == self.rcv.nxt {
                let had_hole = !self.rcv.ooo.is_empty();
                let n = rx.write(data);
                self.rcv.nxt += n;
                self.ack.unreported |= n > 0;
                if n < data.len() {
                    // The receive buffer is full: the rest is dropped, and the FIN with it.
                    // (Never within the window we advertised: see `advertise`.)
                    self.stats.rcv_full_dropped_bytes += (data.len() - n) as u64;
                    fin = false;
                    self.ack.now = true;
                }
                if had_hole {
                    self.rcv.ooo.pop_contiguous(&mut self.rcv.nxt, rx);
                    // RFC 5681 §4.2: ACK at once a segment that fills a hole.
                    self.ack.now = true;
                }
                self.note_ack_point(had_hole);
                if self.rcv.nxt != seq {
                    self.rcv_space_adjust(now);
                    ev.readable = true;
                    // The cumulative ACK now says more than any owed duplicate.
                    self.ack.dupacks_owed = 0;
                }
                if self.rcv.nxt - self.rcv.last_ack_sent >= 2 * self.snd.mss {
                    // RFC 5681 §4.2: ACK at least every second full-sized segment.
                    self.ack.now = true;
                } else if self.ack.delack_deadline.is_none() {
                    self.ack.delack_deadline = Some(now + self.cfg.delayed_ack);
                }
            } else if seq > self.rcv.nxt {
                if self.rcv.ooo.covers(self.rcv.nxt, seq, seq + data.len()) {
                    // Already held: a duplicate above rcv_nxt (RFC 2883 §4.2).
                    self.note_duplicate(seq, seq + data.len());
                }
                let before = self.ack_view();
                let stored = self.rcv.ooo.insert(self.rcv.nxt, seq, data);
                if stored > 0 {
                    self.note_ooo_arrival(seq, &before);
                }
                self.stats.ooo_dropped_bytes += (data.len() - stored) as u64;
                if stored < data.len() {
                    fin = false;
                }
                // RFC 5681 §4.2: each out-of-order segment gets an immediate
                // duplicate ACK (the first three per rcv_nxt; `dupacks_due`).
                self.ack.dupacks_owed = (self.ack.dupacks_owed + 1).min(MAX_DUPACKS_OWED);
            }
        }
        let fin_seq = seq + data.len();
        if fin {
            if fin_seq == self.rcv.nxt {
                self.input_fin(now, ev);
            } else if fin_seq > self.rcv.nxt && takes_data {
                self.rcv.ooo_fin = Some(fin_seq);
                self.ack.now = true;
            }
        } else if let Some(f) = self.rcv.ooo_fin {
            if f == self.rcv.nxt {
                self.input_fin(now, ev);
            }
        }
    }

    /// Receiver: in-order data just moved rcv_nxt. If an ACK falls due
    /// here (`filled_hole`, or two full-sized segments since the last ACK
    /// or ACK point: RFC 5681 §4.2), remember rcv_nxt as an ACK point, so
    /// that a batch of segments processed before the next `poll_output`
    /// is acknowledged as Linux does, one ACK per due point, rather than by
    /// a single stretch ACK whose loss would leave the sender without any
    /// feedback (in loss recovery, with no probe armed, until its RTO).
    /// With SACK, none while out-of-order data is still held above the
    /// point: its ACK would go out without the blocks of ranges that came
    /// in before it (an older ACK with today's blocks reports a hole that
    /// was not there), and a SACK sender takes a cumulative ACK of its
    /// retransmission without them for the loss of what it sent before
    /// that retransmission (Linux's RACK). The batch's ACK, with its
    /// blocks, and its duplicates (`dupacks_due`) go instead.
    fn note_ack_point(&mut self, filled_hole: bool) {
        if self.opts.sack && !self.rcv.ooo.is_empty() {
            // Held data means this segment filled a hole: its caller has
            // made the ACK due already.
            return;
        }
        let last = match self.ack.points_len {
            0 => self.rcv.last_ack_sent,
            n => self.ack.points[n - 1],
        };
        if self.rcv.nxt <= last || !(filled_hole || self.rcv.nxt - last >= 2 * self.snd.mss) {
            return;
        }
        if self.ack.points_len == MAX_ACK_POINTS {
            // Keep the earliest points; the latest is replaced (the ACK of
            // the batch covers it anyway).
            self.ack.points[MAX_ACK_POINTS - 1] = self.rcv.nxt;
        } else {
            self.ack.points[self.ack.points_len] = self.rcv.nxt;
            self.ack.points_len += 1;
        }
        self.ack.now = true;
    }

    /// Eighth step of §3.10.7.4: the FIN at RCV.NXT.
    fn input_fin(&mut self, now: Instant, ev: &mut Events) {
        if !self.state.is_synchronized() {
            return;
        }
        self.rcv.nxt += 1;
        self.rcv.ooo_fin = None;
        self.ack.now = true;
        ev.peer_fin = true;
        ev.readable = true;
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            // Our FIN is not yet acknowledged (else we would be in FIN-WAIT-2).
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            State::TimeWait => self.timers.time_wait_deadline = Some(now + self.cfg.time_wait),
            _ => {}
        }
    }
}
