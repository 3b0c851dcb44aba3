//! Congestion window validation: whether the sender uses the cwnd it
//! has (RFC 9438 §5.8, Linux's `tcp_cwnd_validate`), the restart after
//! an idle period (RFC 5681 §4.1), and the application-limited mark of
//! delivery-rate samples. `poll_output` calls these around sending data.

use crate::time::Instant;

use super::cc::CongestionControl;
use super::tcb::Tcb;

impl Tcb {
    /// New data is about to leave with nothing in flight: after an idle
    /// period, tell the congestion controller how long it was (CUBIC keeps
    /// it out of its epoch, RFC 9438 §5.8), and if it was longer than the
    /// RTO restart cwnd (RFC 5681 §4.1 in Linux's form, `tcp_cwnd_restart`):
    /// ssthresh keeps at least 3/4 of cwnd, and cwnd is halved once per RTO
    /// of idleness, but not below the restart window min(IW, cwnd).
    pub(super) fn restart_after_idle(&mut self, now: Instant) {
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
    pub(super) fn validate_cwnd(&mut self, tx_len: usize, sent_new: bool) {
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

    /// Delivery-rate samples of what is in flight now say less than the
    /// path can carry when the sender has less than a segment left to send,
    /// nothing owed a retransmission and room in cwnd (draft-cheng-iccrg-
    /// delivery-rate-estimation §3.4, Linux's `tcp_rate_check_app_limited`).
    pub(super) fn check_app_limited(&mut self, tx_len: usize) {
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
}
