//! What to send: SYN / SYN-ACK, data within min(cwnd, snd_wnd) under Nagle
//! and sender SWS avoidance, FIN, pure ACKs and window updates, RST after
//! abort. `poll_output` is the one entry point; it draws on `retransmit`
//! (fast retransmission, tail loss probe, zero-window probe), `pacing`,
//! `cwv` (whether cwnd is used, restart after idle) and `window` (the
//! advertised receive window).

use wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use wire::SeqNum;

use crate::time::Instant;

use super::api::{Segment, SendBuffer, State};
use super::rst::PendingRst;
use super::tcb::{Tcb, DUPACKS_IMMEDIATE};

impl Tcb {
    /// Emits every segment due now, at most `max_segments`, through `emit`,
    /// and returns how many were emitted. `rcv_free` is the RecvBuffer's free
    /// space in bytes now (it sets the advertised window). Covers: RST after
    /// `abort`, SYN / SYN-ACK (and their retransmission), the fast or
    /// partial-ACK retransmission, new data and go-back-N retransmission after
    /// an RTO within min(cwnd, snd_wnd), FIN, a zero-window probe, then a pure
    /// ACK or window update if nothing else carried it. Does not allocate.
    pub fn poll_output(
        &mut self,
        now: Instant,
        tx: &impl SendBuffer,
        rcv_free: usize,
        max_segments: usize,
        emit: &mut impl FnMut(&Segment),
    ) -> usize {
        let tx_len = tx.len();
        self.snd.buffered = tx_len;
        let mut sent = 0;
        if max_segments == 0 {
            return 0;
        }
        self.grow_scoreboard(max_segments);
        self.blackhole_retry(now);
        if self.pace.deadline.is_some_and(|t| now >= t) {
            self.pace.deadline = None;
        }
        if let Some(rst) = self.pending_rst.take() {
            emit(&self.rst_segment(rst));
            sent += 1;
        }
        match self.state {
            State::Closed | State::Listen => return sent,
            State::SynSent | State::SynReceived => {
                if sent < max_segments && self.snd.nxt == self.snd.iss {
                    emit(&self.syn_segment(now, rcv_free));
                    sent += 1;
                } else if sent < max_segments && self.ack.now && self.state == State::SynReceived {
                    emit(&self.ack_segment(now, rcv_free));
                    sent += 1;
                }
                return sent;
            }
            _ => {}
        }
        let sent_before_data = sent;
        let mut dupacks = self.dupacks_due();
        if self.opts.sack && (!self.rcv.ooo.is_empty() || self.ack.dsack.is_some()) {
            // RFC 2018 §4: an ACK should carry the SACK blocks while
            // out-of-order data is held. The data segments below carry
            // none (their MSS leaves no room), so the ACK that reports the
            // blocks goes out first: a sender that took a data segment's
            // cumulative ACK without them (of a retransmission sent after
            // segments it has not seen SACKed yet) would deem those lost
            // and send them again (Linux's RACK does).
            sent += self.emit_due_ack(now, max_segments - sent, rcv_free, &mut dupacks, emit);
        }
        if self.rec.rexmit_one && sent < max_segments {
            self.rec.rexmit_one = false;
            if let Some(seg) = self.retransmit_first(now, tx_len, rcv_free) {
                emit(&seg);
                sent += 1;
            }
        }
        // Segments deemed lost (RFC 6675 NextSeg rule 1) while pipe < cwnd.
        while sent < max_segments && self.owed_ready(tx_len) && self.pace_ready(now) {
            match self.retransmit_owed(now, tx_len, rcv_free) {
                Some(seg) => {
                    emit(&seg);
                    sent += 1;
                }
                None => break,
            }
        }
        if self.rec.tlp.pending && sent < max_segments {
            self.rec.tlp.pending = false;
            let before = self.snd.max;
            if let Some(seg) = self.probe_tail(now, tx_len, rcv_free) {
                emit(&seg);
                sent += 1;
                // A probe of one full segment of new data gets a second one
                // when there is one: a receiver ACKs every second full-sized
                // segment at once (RFC 5681 §4.2), but may hold the ACK of a
                // lone in-order segment for its delayed-ACK time (40 ms on
                // Linux), and the probe exists to draw an ACK quickly.
                if self.snd.max - before == self.snd.mss && sent < max_segments {
                    if let Some(seg) = self.probe_new_data(now, tx_len, rcv_free, true) {
                        emit(&seg);
                        sent += 1;
                    }
                }
            }
        }
        let snd_max_before = self.snd.max;
        if self.snd.una == self.snd.max && self.snd.base + tx_len > self.snd.nxt {
            self.restart_after_idle(now);
        }
        while sent < max_segments {
            if self.pace_blocks_data(now, tx_len) {
                break;
            }
            match self.data_segment(now, tx_len, rcv_free, max_segments - sent) {
                Some(seg) => {
                    emit(&seg);
                    sent += seg.segments();
                }
                None => break,
            }
        }
        self.validate_cwnd(tx_len, self.snd.max > snd_max_before);
        self.check_app_limited(tx_len);
        if self.timers.probe_pending && sent < max_segments {
            self.timers.probe_pending = false;
            if let Some(seg) = self.probe_segment(now, tx_len, rcv_free) {
                emit(&seg);
                sent += 1;
            }
        }
        if self.snd.max > snd_max_before || (self.rec.active && sent > sent_before_data) {
            // New data went out, or a recovery sent anything: (re)start the
            // probe timeout (RFC 8985 §7.2; `arm_tlp` on recovery).
            self.rec.tlp.deadline = None;
            self.arm_tlp(now);
        }
        if self.ka.pending && sent < max_segments {
            // RFC 1122 §4.2.3.6: SEG.SEQ = SND.NXT - 1 and no data, which
            // the peer must answer with an ACK.
            self.ka.pending = false;
            self.stats.keepalive_probes += 1;
            let mut repr = self.base_repr(self.snd.max - 1, TcpFlags::ACK, now);
            repr.window = self.advertise(rcv_free);
            emit(&Segment::bare(repr));
            sent += 1;
        }
        sent += self.emit_due_ack(now, max_segments - sent, rcv_free, &mut dupacks, emit);
        // One duplicate ACK per out-of-order segment (RFC 5681 §4.2), even
        // when a batch of them is processed before this call.
        while sent < max_segments && dupacks > 0 {
            emit(&self.ack_segment(now, rcv_free));
            sent += 1;
            dupacks -= 1;
        }
        if dupacks > 0 {
            self.ack.now = true; // out of budget: one more on the next call
        }
        self.update_persist(now, tx_len);
        self.update_keepalive();
        sent
    }

    /// True if `poll_output` would emit something now. Data the application
    /// wrote since the last `input` / `poll_output` / `on_timer` is not seen:
    /// call `poll_output` after the application writes.
    pub fn has_output(&self) -> bool {
        if self.pending_rst.is_some() {
            return true;
        }
        match self.state {
            State::Closed | State::Listen => false,
            State::SynSent => self.snd.nxt == self.snd.iss,
            State::SynReceived => self.snd.nxt == self.snd.iss || self.ack.now,
            _ => {
                if self.ack.now
                    || self.ack.dupacks_owed > 0
                    || self.ack.window_update
                    || self.rec.rexmit_one
                    || self.timers.probe_pending
                    || self.rec.tlp.pending
                    || self.ka.pending
                    || self.ack.dsack.is_some()
                {
                    return true;
                }
                self.owed_ready(self.snd.buffered) || self.data_ready(self.snd.buffered).is_some()
            }
        }
    }

    /// States in which data and FIN may be (re)sent.
    #[inline]
    pub(super) fn sends_data(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        )
    }

    /// Bytes that min(cwnd, snd_wnd) still allows beyond snd_nxt; what is in
    /// flight is RFC 6675 `pipe`.
    pub(super) fn usable_window(&self) -> usize {
        let right = self.snd.una + self.snd.wnd;
        let snd_room = if right > self.snd.nxt {
            right - self.snd.nxt
        } else {
            0
        };
        snd_room.min(self.send_room())
    }

    pub(super) fn base_repr(&self, seq: SeqNum, flags: u8, now: Instant) -> TcpRepr {
        let mut flags = flags;
        if self.ecn.ok && self.ecn.ece && flags & TcpFlags::ACK != 0 && flags & TcpFlags::SYN == 0 {
            // RFC 3168 §6.1.3 / RFC 8257 §3.2: echo congestion on ACKs.
            flags |= TcpFlags::ECE;
        }
        let timestamps = self
            .opts
            .ts
            .then(|| (self.ts_val(now), self.opts.ts_recent));
        TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq,
            ack: if flags & TcpFlags::ACK != 0 {
                self.rcv.nxt
            } else {
                SeqNum(0)
            },
            flags: TcpFlags(flags),
            options: TcpOptions {
                timestamps,
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        }
    }

    /// Emits (at most `max_segments`) the intermediate ACKs of the batch,
    /// in the order of their acknowledgment numbers, and returns how many:
    /// the `ack_points` that lie between the last ACK sent and rcv_nxt
    /// (they carry no SACK or D-SACK blocks, which go on the ACK that
    /// follows them), and the ACKs of earlier moments of the batch
    /// (`AckState::snaps`), each with its own acknowledgment number and
    /// blocks. Their window keeps the right edge already advertised (it
    /// never moves left, RFC 9293 §3.8.6.2.2). Each snapshot whose
    /// acknowledgment number is rcv_nxt counts against `dupacks`.
    fn emit_ack_points(
        &mut self,
        now: Instant,
        max_segments: usize,
        rcv_free: usize,
        dupacks: &mut u32,
        emit: &mut impl FnMut(&Segment),
    ) -> usize {
        let mut sent = 0;
        let n = core::mem::take(&mut self.ack.points_len);
        let m = core::mem::take(&mut self.ack.snaps_len);
        let (mut k, mut j) = (0, 0);
        while k < n || j < m {
            let snap = j < m && (k == n || self.ack.snaps[j].ack <= self.ack.points[k]);
            if snap {
                let view = self.ack.snaps[j];
                j += 1;
                if sent >= max_segments {
                    continue;
                }
                let field = self.window_field(view.ack, 0, rcv_free);
                let mut repr = self.base_repr(self.snd.max, TcpFlags::ACK, now);
                repr.ack = view.ack;
                repr.window = field as u16;
                repr.options.sack[..view.blocks().len()].copy_from_slice(view.blocks());
                repr.options.sack_len = view.len;
                if view.ack == self.rcv.nxt {
                    *dupacks = dupacks.saturating_sub(1);
                }
                emit(&Segment::bare(repr));
                sent += 1;
                continue;
            }
            let ack = self.ack.points[k];
            k += 1;
            if sent >= max_segments || ack <= self.rcv.last_ack_sent || ack >= self.rcv.nxt {
                continue;
            }
            let field = self.window_field(ack, 0, rcv_free);
            let mut repr = self.base_repr(self.snd.max, TcpFlags::ACK, now);
            repr.ack = ack;
            repr.window = field as u16;
            // No SACK blocks: the point's ACK number is older than rcv_nxt,
            // so any block (all lie above rcv_nxt) would report
            // [ack, rcv_nxt) as a hole the sender's RACK or dupack count
            // takes for a loss. The batch's own ACK carries them.
            emit(&Segment::bare(repr));
            sent += 1;
        }
        sent
    }

    /// The ACK due now, if one is (an ACK owed, a window update, a D-SACK
    /// or a duplicate ACK), after the intermediate ACKs of the batch
    /// (`emit_ack_points`), within `max_segments`; counts it against
    /// `dupacks`. Returns the segments emitted.
    fn emit_due_ack(
        &mut self,
        now: Instant,
        max_segments: usize,
        rcv_free: usize,
        dupacks: &mut u32,
        emit: &mut impl FnMut(&Segment),
    ) -> usize {
        let due =
            self.ack.now || self.ack.window_update || self.ack.dsack.is_some() || *dupacks > 0;
        if max_segments == 0 || !due {
            return 0;
        }
        let sent = self.emit_ack_points(now, max_segments - 1, rcv_free, dupacks, emit);
        emit(&self.ack_segment(now, rcv_free));
        *dupacks = dupacks.saturating_sub(1);
        sent + 1
    }

    fn rst_segment(&self, rst: PendingRst) -> Segment {
        let mut flags = TcpFlags::RST;
        if rst.ack.is_some() {
            flags |= TcpFlags::ACK;
        }
        Segment::bare(TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq: rst.seq,
            ack: rst.ack.unwrap_or(SeqNum(0)),
            flags: TcpFlags(flags),
            ..TcpRepr::default()
        })
    }

    /// SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED), first or retransmitted. The
    /// window of a SYN is not scaled (RFC 7323 §2.2); options: MSS, window
    /// scale and timestamps as configured (SYN) or negotiated (SYN-ACK).
    fn syn_segment(&mut self, now: Instant, rcv_free: usize) -> Segment {
        let synack = self.state == State::SynReceived;
        let flags = if synack {
            TcpFlags::SYN | TcpFlags::ACK
        } else {
            TcpFlags::SYN
        };
        let mut flags = flags;
        if synack && self.ecn.ok {
            flags |= TcpFlags::ECE; // RFC 3168 §6.1.1: ECN-setup SYN-ACK
        } else if !synack && self.ecn_offered() {
            flags |= TcpFlags::ECE | TcpFlags::CWR; // ECN-setup SYN
        }
        let mut repr = self.base_repr(self.snd.iss, flags, now);
        repr.options.mss = Some(self.cfg.mss);
        repr.options.sack_permitted = if synack {
            self.opts.sack
        } else {
            self.cfg.sack
        };
        let window = rcv_free.min(0xffff);
        repr.window = window as u16;
        if synack {
            if self.opts.ws {
                repr.options.window_scale = Some(self.rcv.wscale);
            }
            let edge = self.rcv.nxt + window;
            if edge > self.rcv.adv {
                self.rcv.adv = edge;
            }
            self.rcv.last_ack_sent = self.rcv.nxt;
            self.ack.now = false;
        } else {
            if self.cfg.window_scaling {
                repr.options.window_scale = Some(self.rcv.wscale);
            }
            if self.cfg.timestamps {
                repr.options.timestamps = Some((self.ts_val(now), 0));
            }
            self.rcv.syn_window = window;
        }
        if self.snd.max == self.snd.iss {
            self.timers.rtt_timing = Some((self.snd.iss + 1, now));
        } else {
            self.stats.retransmits += 1;
            self.timers.rtt_timing = None;
        }
        self.snd.nxt = self.snd.iss + 1;
        if self.snd.nxt > self.snd.max {
            self.snd.max = self.snd.nxt;
        }
        if self.timers.rto_deadline.is_none() {
            self.timers.rto_deadline = Some(self.rto_from(now));
        }
        Segment::bare(repr)
    }

    /// A pure ACK (or window update). Its sequence number is snd_max, the
    /// next new octet, even while retransmitting (as BSD does), so that it
    /// stays acceptable to the peer.
    fn ack_segment(&mut self, now: Instant, rcv_free: usize) -> Segment {
        let mut repr = self.base_repr(self.snd.max, TcpFlags::ACK, now);
        repr.window = self.advertise(rcv_free);
        self.fill_sack(&mut repr.options);
        Segment::bare(repr)
    }

    /// How many duplicate ACKs go out now for the out-of-order arrivals
    /// of the batch just processed: one each for the first
    /// `DUPACKS_IMMEDIATE` per rcv_nxt value, enough for the sender's
    /// duplicate-ACK threshold (RFC 5681 §3.2; a SACK sender counts SACKed
    /// segments, not ACKs), and one for the rest of the batch, whose SACK
    /// blocks report them all (Linux's `tcp_comp_sack` compresses the same
    /// way over min(1 ms, RTT/20)). Without SACK, or with `sack_compress`
    /// off, every arrival gets its duplicate ACK (RFC 5681 §4.2).
    fn dupacks_due(&mut self) -> u32 {
        let owed = core::mem::take(&mut self.ack.dupacks_owed);
        if owed == 0 || !self.opts.sack || !self.cfg.sack_compress {
            return owed;
        }
        if self.ack.dupacks_at != self.rcv.nxt {
            self.ack.dupacks_at = self.rcv.nxt;
            self.ack.dupacks_sent = 0;
        }
        let immediate = owed.min(DUPACKS_IMMEDIATE.saturating_sub(self.ack.dupacks_sent));
        self.ack.dupacks_sent += immediate;
        let n = immediate.max(1);
        self.stats.acks_compressed += u64::from(owed - n);
        n
    }

    /// Length and FIN flag of the next data segment from snd_nxt, if the
    /// windows, Nagle and sender SWS avoidance allow one now.
    pub(super) fn data_ready(&self, tx_len: usize) -> Option<(usize, bool)> {
        if !self.sends_data() || self.pace.deadline.is_some() {
            return None;
        }
        let data_end = self.snd.base + tx_len;
        if self.snd.nxt > data_end {
            return None; // only our FIN lies beyond the data, and it was sent
        }
        if self.rec.sb.is_full() {
            return None; // the most segments in flight already are
        }
        let unsent = data_end - self.snd.nxt;
        let flight = self.snd.nxt - self.snd.una;
        let usable = self.usable_window();
        let mut len = unsent.min(usable).min(self.snd.mss);
        if len == self.snd.mss {
            // A path MTU search probe instead, when one is due (plpmtud).
            len = self.probe_len(unsent, usable).unwrap_or(len);
        }
        let fin = self.snd.fin_queued && len == unsent;
        if len == 0 && !fin {
            return None;
        }
        if len > 0 && len < self.snd.mss && !fin {
            if self.snd.corked {
                return None; // TCP_CORK: only full segments, or the last before FIN
            }
            // RFC 9293 §3.8.6.2.1 (sender SWS avoidance) with Nagle (§3.7.4):
            // a short segment goes only if it carries all queued data or at
            // least half the largest window seen, and (Nagle) nothing is
            // unacknowledged unless nodelay is set.
            let all_queued = len == unsent;
            let half_window = self.snd.max_wnd > 0 && len >= self.snd.max_wnd / 2;
            let nagle_ok = self.cfg.nodelay || flight == 0;
            if !(nagle_ok && (all_queued || half_window)) {
                return None;
            }
        }
        Some((len, fin))
    }

    /// The next data segment (and/or FIN) from snd_nxt, if `data_ready`
    /// allows. With `gso_max` set, new data goes as up to `max_segments`
    /// whole MSS-sized segments in one TSO segment, as far as the data, the
    /// windows and the retransmission queue allow; each is tracked on its
    /// own, so loss recovery sees exactly the segments of the wire.
    fn data_segment(
        &mut self,
        now: Instant,
        tx_len: usize,
        rcv_free: usize,
        max_segments: usize,
    ) -> Option<Segment> {
        let (mut len, fin) = self.data_ready(tx_len)?;
        let mss = self.snd.mss;
        if len > mss {
            // A search probe (plpmtud): one segment, so one retransmission
            // queue entry and no TSO (`emit_data` asks `probe_piece`).
            let seq = self.snd.nxt;
            self.probe_sent(seq, seq + len);
            return Some(self.emit_data(seq, len, false, now, rcv_free, true));
        }
        if !fin && len == mss && self.snd.gso_max >= 2 * mss && self.snd.nxt == self.snd.max {
            let unsent = (self.snd.base + tx_len) - self.snd.nxt;
            let room = unsent.min(self.usable_window()).min(self.snd.gso_max);
            let mut segs = (room / mss)
                .min(self.rec.sb.room())
                .min(max_segments)
                .max(1);
            let rate = self.pacing_rate();
            if rate > 0 {
                // Paced: bursts of about 1 ms of data, at least 2 segments
                // (Linux's TSO autosizing).
                let per_ms = (rate / 1000) as usize / mss;
                segs = segs.min(per_ms.max(2));
            }
            len = segs * mss;
        }
        Some(self.emit_data(self.snd.nxt, len, fin, now, rcv_free, true))
    }

    /// Builds a segment of `len` bytes at `seq` (plus FIN), advancing snd_nxt
    /// if `advance`, and arming the retransmission timer.
    pub(super) fn emit_data(
        &mut self,
        seq: SeqNum,
        len: usize,
        fin: bool,
        now: Instant,
        rcv_free: usize,
        advance: bool,
    ) -> Segment {
        let data_end = self.snd.base + self.snd.buffered;
        let mut flags = TcpFlags::ACK;
        if len > 0 && seq + len == data_end {
            flags |= TcpFlags::PSH;
        }
        if fin {
            flags |= TcpFlags::FIN;
        }
        let new_data = seq >= self.snd.max;
        if new_data && len > 0 && self.ecn.cwr_pending {
            // RFC 3168 §6.1.2: the first new data after a reduction has CWR.
            flags |= TcpFlags::CWR;
            self.ecn.cwr_pending = false;
        }
        let mut repr = self.base_repr(seq, flags, now);
        repr.payload_len = len;
        repr.window = self.advertise(rcv_free);
        let end = seq + len + usize::from(fin);
        if new_data {
            if len > 0 && self.timers.rtt_timing.is_none() {
                self.timers.rtt_timing = Some((seq + len, now));
            }
        } else {
            self.stats.retransmits += 1;
        }
        // The wire's segment size: the MSS, or a path MTU probe's whole length.
        let piece = self.probe_piece(seq, len).unwrap_or(self.snd.mss);
        if advance && self.rec.sb.end().is_none_or(|e| seq >= e) && end > seq {
            // A segment beyond the tracked ones: into the retransmission
            // queue, piece by piece for a TSO segment.
            let stamp = self.rate.stamp(now, self.rec.sb.is_empty());
            let from = self.rec.sb.len();
            let mut at = seq;
            while at + piece < seq + len {
                self.rec.sb.push(at, at + piece, false, now);
                at += piece;
            }
            self.rec.sb.push(at, end, fin, now);
            self.rec.sb.stamp_from(from, stamp);
        }
        if fin {
            self.snd.fin_seq = Some(seq + len);
        }
        if advance && end > self.snd.nxt {
            self.snd.nxt = end;
        }
        if len > 0 {
            self.snd.last_data_sent = Some(now);
        }
        if end > self.snd.max {
            self.snd.max = end;
        }
        if self.timers.rto_deadline.is_none() {
            self.timers.rto_deadline = Some(self.rto_from(now));
        }
        self.timers.persist_deadline = None;
        self.prr_on_send(len);
        self.pace_sent(len, now);
        Segment {
            repr,
            payload_offset: seq - self.snd.base,
            // RFC 3168 §6.1.5: never ECT on retransmissions (or probes).
            ect: self.ecn.ok && new_data && len > 0 && advance,
            gso_size: if len > piece { piece } else { 0 },
        }
    }
}
