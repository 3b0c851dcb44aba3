//! What to send: SYN / SYN-ACK, data within min(cwnd, snd_wnd) under Nagle
//! and sender SWS avoidance, fast retransmissions, zero-window probes, FIN,
//! pure ACKs and window updates, RST after abort.

use wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use wire::SeqNum;

use core::time::Duration;

use crate::time::Instant;

use super::api::{Segment, SendBuffer, State};
use super::cc::CongestionControl;
use super::rst::PendingRst;
use super::scoreboard::TxSeg;
use super::tcb::{Tcb, DUPACKS_IMMEDIATE};

/// Lateness of the pacing timer (its tick) made up for by a short burst.
const PACE_SLACK: Duration = Duration::from_millis(1);

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
        let mut dupacks = self.dupacks_due();
        if sent < max_segments
            && (self.ack.now || self.ack.window_update || self.ack.dsack.is_some() || dupacks > 0)
        {
            sent += self.emit_ack_points(now, max_segments - sent - 1, rcv_free, emit);
            emit(&self.ack_segment(now, rcv_free));
            sent += 1;
            dupacks = dupacks.saturating_sub(1);
        }
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

    /// The application consumed bytes from the RecvBuffer, which now has
    /// `rcv_free` free bytes. Returns true if a window update should be sent
    /// now (then `has_output` is true): the window would grow by at least
    /// min(rcv_buf/2, MSS) (receiver SWS avoidance, RFC 9293 §3.8.6.2.2) and
    /// at least double, as Linux does.
    pub fn on_app_read(&mut self, rcv_free: usize) -> bool {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            return false;
        }
        let cur = self.rcv_wnd();
        let wnd = self.window_for(rcv_free);
        let update = wnd > cur && wnd - cur >= self.sws_threshold() && wnd >= 2 * cur;
        if update {
            self.ack.window_update = true;
        }
        update
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
    fn usable_window(&self) -> usize {
        let right = self.snd.una + self.snd.wnd;
        let snd_room = if right > self.snd.nxt {
            right - self.snd.nxt
        } else {
            0
        };
        snd_room.min(self.send_room())
    }

    /// New data is about to leave with nothing in flight: after an idle
    /// period, tell the congestion controller how long it was (CUBIC keeps
    /// it out of its epoch, RFC 9438 §5.8), and if it was longer than the
    /// RTO restart cwnd (RFC 5681 §4.1 in Linux's form, `tcp_cwnd_restart`):
    /// ssthresh keeps at least 3/4 of cwnd, and cwnd is halved once per RTO
    /// of idleness, but not below the restart window min(IW, cwnd).
    fn restart_after_idle(&mut self, now: Instant) {
        let Some(last) = self.snd.last_data_sent else {
            return;
        };
        let idle = now.saturating_since(last);
        // The idle period is accounted for once, even if nothing can leave
        // now (a closed window): a later call counts only from here.
        self.snd.last_data_sent = Some(now);
        self.cc.on_tx_start(now, idle);
        let rto = self.timers.rto.rto();
        if !self.cfg.slow_start_after_idle || self.rec.active || idle <= rto {
            return;
        }
        let cwnd = self.cc.cwnd();
        let iw = self.snd.mss * self.cfg.initial_cwnd_segments.max(1) as usize;
        let restart = iw.min(cwnd);
        let ssthresh = self.cc.ssthresh().max(cwnd / 2 + cwnd / 4);
        self.cc.set_ssthresh(ssthresh);
        let mut reduced = cwnd;
        let mut left = idle;
        while left > rto && reduced > restart {
            reduced /= 2;
            left -= rto;
        }
        self.cc.set_cwnd(reduced.max(restart));
        self.cwv.limited = false;
        self.cwv.max_flight = 0;
        self.stats.cwnd_restarts += 1;
    }

    /// Records how much of cwnd the data just sent used (RFC 9438 §5.8, as
    /// Linux's `tcp_cwnd_validate`): cwnd limited sending if data is
    /// waiting and pipe leaves less than an MSS of it. The mark and the
    /// largest flight hold for a window of data, so that one ACK-clocked
    /// round counts as limited even when the flight dips between ACKs.
    fn validate_cwnd(&mut self, tx_len: usize, sent_new: bool) {
        if !self.sends_data() || self.rec.active {
            return;
        }
        let data_end = self.snd.base + tx_len;
        let waiting = data_end > self.snd.nxt;
        let limited = waiting && self.pipe() + self.snd.mss > self.cc.cwnd();
        if !(sent_new || limited) {
            return;
        }
        let flight = self.snd.nxt - self.snd.una;
        if self.snd.una >= self.cwv.usage_end
            || limited
            || (!self.cwv.limited && flight > self.cwv.max_flight)
        {
            self.cwv.limited = limited;
            self.cwv.max_flight = flight;
            self.cwv.usage_end = self.snd.nxt;
        }
    }

    /// The pacing rate the congestion controller asks for, bytes/s; 0 =
    /// no pacing (every algorithm but BBR).
    pub(super) fn pacing_rate(&self) -> u64 {
        match self.cc.bbr() {
            Some(b) if self.cfg.pacing => b.pacing_rate(),
            _ => 0,
        }
    }

    /// True if a data segment may leave now under pacing; if not, arms the
    /// pacing timer for when it may.
    fn pace_ready(&mut self, now: Instant) -> bool {
        if self.pacing_rate() == 0 || now >= self.pace.next {
            return true;
        }
        self.pace.deadline = Some(self.pace.next);
        false
    }

    /// True if pacing holds back a data segment that could leave now (the
    /// pacing timer is then armed). Checks the clock first, so an unpaced
    /// connection pays no `data_ready` here.
    fn pace_blocks_data(&mut self, now: Instant, tx_len: usize) -> bool {
        if self.pacing_rate() == 0 || now >= self.pace.next {
            return false;
        }
        if self.data_ready(tx_len).is_none() {
            return false;
        }
        self.pace.deadline = Some(self.pace.next);
        true
    }

    /// `len` bytes of data just left: the next may leave `len / rate`
    /// later. Up to 1 ms of lateness (the timer tick) is made up for, so
    /// the average rate holds.
    fn pace_sent(&mut self, len: usize, now: Instant) {
        let rate = self.pacing_rate();
        if rate == 0 || len == 0 {
            return;
        }
        let gap = Duration::from_nanos((len as u128 * 1_000_000_000 / u128::from(rate)) as u64);
        let from = self.pace.next.max(now - PACE_SLACK);
        self.pace.next = from + gap;
    }

    /// Delivery-rate samples of what is in flight now say less than the
    /// path can carry when the sender has less than a segment left to send,
    /// nothing owed a retransmission and room in cwnd (draft-cheng-iccrg-
    /// delivery-rate-estimation §3.4, Linux's `tcp_rate_check_app_limited`).
    fn check_app_limited(&mut self, tx_len: usize) {
        if !self.sends_data() {
            return;
        }
        let data_end = self.snd.base + tx_len;
        let unsent = if data_end > self.snd.nxt {
            data_end - self.snd.nxt
        } else {
            0
        };
        let pipe = self.pipe();
        if unsent < self.snd.mss && self.rec.sb.owed() == 0 && pipe < self.cc.cwnd() {
            self.rate.mark_app_limited(pipe);
        }
    }

    /// Whether an ACK may grow cwnd: cwnd limited sending in the current
    /// window, or, in slow start, cwnd is less than twice the largest
    /// flight of it (Linux's `tcp_is_cwnd_limited`). A sender held back by
    /// the application or by the receiver's window does not grow a cwnd it
    /// does not use (RFC 9438 §5.8), which would otherwise leave a loss
    /// after such a period with no effective reduction.
    pub(super) fn cwnd_used(&self) -> bool {
        let cwnd = self.cc.cwnd();
        self.cwv.limited || (cwnd < self.cc.ssthresh() && cwnd < 2 * self.cwv.max_flight)
    }

    /// The window `rcv_free` free bytes of receive buffer allow: at most
    /// the window clamp and what the scaled field holds, and one scale unit
    /// less than the free space, so that rounding it up later to keep the
    /// right edge in place still fits the buffer.
    fn window_for(&self, rcv_free: usize) -> usize {
        let unit = 1usize << self.rcv.wscale;
        rcv_free
            .saturating_sub(unit - 1)
            .min(0xffff << self.rcv.wscale)
            .min(self.window_clamp())
    }

    /// The scaled window field of an ACK of `ack` that offers `want`
    /// bytes, and the right edge it sets (rcv_adv moves up to it).
    /// RFC 9293 §3.8.6.2.2: the right edge never moves left, so a window
    /// that is not a multiple of the scale unit is rounded up (RFC 7323
    /// §2.4) - unless the rounded edge would pass what the receive buffer
    /// (`rcv_free` bytes past rcv_nxt) can take: then it is rounded down,
    /// and the edge may move left by at most one unit (RFC 7323
    /// Appendix F; the bytes offered before stay acceptable). So no
    /// advertised edge ever lies beyond the buffer.
    fn window_field(&mut self, ack: SeqNum, want: usize, rcv_free: usize) -> usize {
        let unit = 1usize << self.rcv.wscale;
        let limit = self.rcv.nxt + rcv_free;
        let room = if limit > ack { limit - ack } else { 0 };
        let promised = if self.rcv.adv > ack {
            self.rcv.adv - ack
        } else {
            0
        };
        // A new window is rounded down; what was promised is kept (up).
        let mut field = (want / unit).max(promised.div_ceil(unit));
        if field * unit > room {
            field = room / unit;
        }
        let field = field.min(0xffff);
        let edge = ack + field * unit;
        if edge > self.rcv.adv {
            self.rcv.adv = edge;
        }
        field
    }

    /// Receiver SWS threshold: min(Fr * RCV.BUFF, Eff.snd.MSS), Fr = 1/2.
    fn sws_threshold(&self) -> usize {
        (self.cfg.rcv_buf / 2).min(self.snd.mss).max(1)
    }

    fn base_repr(&self, seq: SeqNum, flags: u8, now: Instant) -> TcpRepr {
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

    /// The window field for a segment carrying ACK, and the bookkeeping of
    /// an ACK going out. RFC 9293 §3.8.6.2.2: the right edge only moves right
    /// by at least the SWS threshold and never moves left (rounding up to the
    /// scale unit if needed).
    fn advertise(&mut self, rcv_free: usize) -> u16 {
        let cur = self.rcv_wnd();
        let mut wnd = self.window_for(rcv_free);
        if wnd > cur && wnd - cur < self.sws_threshold() {
            wnd = cur;
        }
        if wnd > self.rcv.ooo.capacity() {
            // The window grew (auto-tuning): out-of-order data within it
            // must fit too. Allocates, a few times per connection.
            self.rcv.ooo.ensure_capacity(wnd.next_power_of_two());
        }
        let field = self.window_field(self.rcv.nxt, wnd, rcv_free);
        self.rcv.last_ack_sent = self.rcv.nxt;
        self.ack.now = false;
        self.ack.window_update = false;
        self.ack.delack_deadline = None;
        // This segment acknowledges rcv_nxt: the points below it are moot
        // unless `emit_ack_points` sent them first.
        self.ack.points_len = 0;
        field as u16
    }

    /// Emits (at most `max_segments`) the intermediate ACKs of
    /// `ack_points` that lie between the last ACK sent and rcv_nxt, oldest
    /// first, and returns how many. Their window keeps the right edge
    /// already advertised (it never moves left, RFC 9293 §3.8.6.2.2); they
    /// carry no SACK or D-SACK blocks, which go on the ACK that follows
    /// them.
    fn emit_ack_points(
        &mut self,
        now: Instant,
        max_segments: usize,
        rcv_free: usize,
        emit: &mut impl FnMut(&Segment),
    ) -> usize {
        let mut sent = 0;
        let n = core::mem::take(&mut self.ack.points_len);
        for k in 0..n {
            let ack = self.ack.points[k];
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
            self.timers.rto_deadline = Some(now + self.timers.rto.rto());
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
    fn data_ready(&self, tx_len: usize) -> Option<(usize, bool)> {
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
        let len = unsent.min(self.usable_window()).min(self.snd.mss);
        let fin = self.snd.fin_queued && len == unsent;
        if len == 0 && !fin {
            return None;
        }
        if len > 0 && len < self.snd.mss && !fin {
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
    fn emit_data(
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
        if advance && self.rec.sb.end().is_none_or(|e| seq >= e) && end > seq {
            // A segment beyond the tracked ones: into the retransmission
            // queue, MSS by MSS for a TSO segment.
            let stamp = self.rate.stamp(now, self.rec.sb.is_empty());
            let from = self.rec.sb.len();
            let mut at = seq;
            while at + self.snd.mss < seq + len {
                self.rec.sb.push(at, at + self.snd.mss, false, now);
                at += self.snd.mss;
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
            self.timers.rto_deadline = Some(now + self.timers.rto.rto());
        }
        self.timers.persist_deadline = None;
        self.prr_on_send(len);
        self.pace_sent(len, now);
        Segment {
            repr,
            payload_offset: seq - self.snd.base,
            // RFC 3168 §6.1.5: never ECT on retransmissions (or probes).
            ect: self.ecn.ok && new_data && len > 0 && advance,
            gso_size: if len > self.snd.mss { self.snd.mss } else { 0 },
        }
    }

    /// Fast retransmit / NewReno partial ACK: the first segment owed a
    /// retransmission (the first unacknowledged one), once, outside the
    /// congestion window (RFC 5681 §3.2 step 3, RFC 6582 §3.2 step 5,
    /// RFC 6675 §5 step 4.3). Without a tracked segment, the data at snd_una.
    fn retransmit_first(
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
        self.timers.rtt_timing = None;
        self.timers.karn_blocked = true;
        Some(self.emit_data(seq, len, fin, now, rcv_free, true))
    }

    /// True if a segment is owed a retransmission and pipe leaves room for
    /// it in cwnd (RFC 6675 §5 step (C)).
    fn owed_ready(&self, tx_len: usize) -> bool {
        if !self.sends_data() || self.pace.deadline.is_some() {
            return false;
        }
        let Some(s) = self.rec.sb.peek_owed().and_then(|i| self.rec.sb.get(i)) else {
            return false;
        };
        let _ = tx_len;
        s.len() <= self.send_room()
    }

    /// Retransmits the lowest segment owed a retransmission, with its
    /// original boundaries. Voids the RTT timing (Karn).
    fn retransmit_owed(&mut self, now: Instant, tx_len: usize, rcv_free: usize) -> Option<Segment> {
        let i = self.rec.sb.next_owed()?;
        let mut s = *self.rec.sb.get(i)?;
        // After a path MTU drop (RFC 1191) a segment may be bigger than the
        // MSS now: resend it in MSS-sized pieces.
        if s.data_len() > self.snd.mss && self.rec.sb.split(i, s.start + self.snd.mss) {
            s = *self.rec.sb.get(i)?;
        }
        let data_end = self.snd.base + tx_len;
        if s.start < self.snd.base {
            return None;
        }
        let (len, fin) = self.mark_resent(i, &s, data_end, now);
        if let Some(u) = self.rec.undo.as_mut() {
            if s.start >= u.marker {
                u.retrans += 1;
            }
        }
        self.timers.rtt_timing = None;
        self.timers.karn_blocked = true;
        Some(self.emit_data(s.start, len, fin, now, rcv_free, false))
    }

    /// Marks scoreboard entry `i` (`s`) retransmitted at `now` with a fresh
    /// delivery-rate stamp, and returns what to resend of it: the payload
    /// bytes still in the SendBuffer (which ends at `data_end`) and whether
    /// it carries the FIN.
    #[inline]
    fn mark_resent(
        &mut self,
        i: usize,
        s: &TxSeg,
        data_end: SeqNum,
        now: Instant,
    ) -> (usize, bool) {
        let avail = if data_end > s.start {
            data_end - s.start
        } else {
            0
        };
        let len = s.data_len().min(avail);
        let fin = s.has(super::scoreboard::FIN);
        let stamp = self.rate.stamp(now, false);
        self.rec.sb.retransmitted(i, now);
        self.rec.sb.stamp(i, stamp);
        (len, fin)
    }

    /// The tail loss probe (RFC 8985 §7.3): new data if the peer's window
    /// allows (cwnd is not checked), else the last segment sent again (in a
    /// recovery, the last one not SACKed).
    fn probe_tail(&mut self, now: Instant, tx_len: usize, rcv_free: usize) -> Option<Segment> {
        if !self.sends_data() {
            return None;
        }
        if let Some(seg) = self.probe_new_data(now, tx_len, rcv_free, false) {
            self.count_probe();
            return Some(seg);
        }
        let data_end = self.snd.base + tx_len;
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
        let (len, fin) = self.mark_resent(i, &s, data_end, now);
        self.rec.tlp.high = Some(self.snd.max);
        if self.rec.active {
            // Its D-SACK, if it was not needed, must not pass for one of
            // the recovery's own retransmissions and undo the reduction.
            if let Some(u) = self.rec.undo.as_mut().filter(|u| s.start >= u.marker) {
                u.retrans += 1;
            }
        }
        self.count_probe();
        self.timers.rtt_timing = None;
        self.timers.karn_blocked = true;
        let seg = self.emit_data(s.start, len, fin, now, rcv_free, false);
        self.timers.rto_deadline = Some(now + self.timers.rto.rto());
        Some(seg)
    }

    /// A segment of new data for a probe, if the peer's window allows one
    /// (cwnd is not checked): up to one MSS, or (`full_only`) exactly one.
    fn probe_new_data(
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
        self.timers.rto_deadline = Some(now + self.timers.rto.rto());
        Some(seg)
    }

    fn count_probe(&mut self) {
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
    fn probe_segment(&mut self, now: Instant, tx_len: usize, rcv_free: usize) -> Option<Segment> {
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
            self.timers.persist_deadline = Some(now + interval);
        }
    }
}
