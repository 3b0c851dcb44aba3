//! Timer expiry: retransmission (RFC 6298 §5), delayed ACK, persist
//! (RFC 9293 §3.8.6.1) and TIME-WAIT. The engine asks `next_timeout` and
//! calls `on_timer` once that instant has passed.

use core::time::Duration;

use crate::time::Instant;

use super::api::{CloseReason, Events, SendBuffer, State};
use super::tcb::Tcb;

impl Tcb {
    /// The earliest pending deadline among RTO, delayed ACK, persist and
    /// TIME-WAIT, or `None` if no timer runs.
    pub fn next_timeout(&self) -> Option<Instant> {
        [
            self.timers.rto_deadline,
            self.ack.delack_deadline,
            self.timers.persist_deadline,
            self.timers.time_wait_deadline,
            self.rec.rack.deadline,
            self.rec.tlp.deadline,
            self.ka.deadline,
            self.timers.fin_wait2_deadline,
            self.pace.deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Handles every timer due at `now`. TIME-WAIT expiry reports
    /// `closed: Some(Normal)`; exhausted retransmissions report
    /// `closed: Some(TimedOut)`. What must be sent (retransmission, ACK,
    /// probe) goes out on the next `poll_output`.
    pub fn on_timer(&mut self, now: Instant, tx: &impl SendBuffer) -> Events {
        let mut ev = Events::default();
        self.snd.buffered = tx.len();
        if self.timers.time_wait_deadline.is_some_and(|t| now >= t) {
            self.enter_closed();
            ev.closed = Some(CloseReason::Normal);
            return ev;
        }
        let tlp_first = self
            .rec
            .tlp
            .deadline
            .is_some_and(|p| now >= p && self.timers.rto_deadline.is_some_and(|r| p <= r));
        if tlp_first {
            // The probe falls due with or before the RTO: it goes instead,
            // and the RTO waits one more RTO for its answer (RFC 8985 §7.3).
            self.timers.rto_deadline = Some(self.rto_from(now));
        }
        if self.timers.rto_deadline.is_some_and(|t| now >= t) {
            self.timers.rto_deadline = None;
            self.on_rto(now, &mut ev);
            if ev.closed.is_some() {
                return ev;
            }
        }
        if self.rec.rack.deadline.is_some_and(|t| now >= t) {
            self.on_rack_timer(now);
        }
        if self.pace.deadline.is_some_and(|t| now >= t) {
            // Paced data may leave (on the next `poll_output`).
            self.pace.deadline = None;
        }
        if self.rec.tlp.deadline.is_some_and(|t| now >= t) {
            self.on_tlp_timer();
        }
        if self.ack.delack_deadline.is_some_and(|t| now >= t) {
            self.ack.delack_deadline = None;
            self.ack.now = true;
        }
        if self.timers.persist_deadline.is_some_and(|t| now >= t) {
            self.timers.persist_deadline = None;
            // Zero-window probes count against the user timeout too (as
            // Linux's do): a peer whose window stays shut that long is
            // given up.
            self.timers.unanswered_since.get_or_insert(now);
            if self.user_timed_out(now) {
                self.enter_closed();
                ev.closed = Some(CloseReason::TimedOut);
                return ev;
            }
            self.timers.probe_pending = true;
        }
        self.on_idle_timers(now, &mut ev);
        ev
    }

    /// Retransmission timeout. RFC 6298 §5.4-5.6: retransmit the earliest
    /// unacknowledged segment (here: go back to snd_una and resend from
    /// there, paced by the congestion window), back the RTO off (x2, up to
    /// rto_max) and restart the timer on sending. RFC 5681 §3.1: ssthresh =
    /// max(FlightSize/2, 2*SMSS), cwnd = 1 SMSS. Karn: no RTT sample from
    /// what is retransmitted. After syn_retries / data_retries expiries the
    /// connection is given up with ETIMEDOUT (RFC 9293 §3.8.3 R2).
    fn on_rto(&mut self, now: Instant, ev: &mut Events) {
        match self.state {
            State::SynSent | State::SynReceived => {
                if !self.rto_retry(self.cfg.syn_retries, now, ev) {
                    return;
                }
                self.timers.syn_retransmitted = true;
                self.snd.nxt = self.snd.iss;
                self.timers.rtt_timing = None;
            }
            State::Closed | State::Listen | State::TimeWait | State::FinWait2 => {}
            _ => {
                if self.snd.max == self.snd.una {
                    return;
                }
                if !self.rto_retry(self.cfg.data_retries, now, ev) {
                    return;
                }
                self.probe_on_rto();
                self.blackhole_check(now);
                self.rto_recovery(now);
                self.karn_retransmit();
                self.rec.rexmit_one = false;
            }
        }
    }

    /// True when a user timeout is set (TCP_USER_TIMEOUT, RFC 5482) and
    /// the current unanswered episode has lasted that long at `now`.
    fn user_timed_out(&self, now: Instant) -> bool {
        let user = self.cfg.user_timeout;
        !user.is_zero()
            && self
                .timers
                .unanswered_since
                .is_some_and(|since| now.saturating_since(since) >= user)
    }

    /// `delay` after `now`, but no later than the end of the user timeout
    /// of an unanswered episode (Linux clamps its RTO and zero-window probe
    /// timers so): the expiry that gives up comes when the user timeout
    /// ends, not up to a backed-off RTO later.
    pub(super) fn until_user_timeout(&self, now: Instant, delay: Duration) -> Instant {
        let at = now + delay;
        match self.timers.unanswered_since {
            Some(since) if !self.cfg.user_timeout.is_zero() => {
                at.min((since + self.cfg.user_timeout).max(now))
            }
            _ => at,
        }
    }

    /// The retransmission timer's deadline when it starts at `now`: one
    /// RTO (RFC 6298 §5.1), clamped to the user timeout.
    #[inline]
    pub(super) fn rto_from(&self, now: Instant) -> Instant {
        self.until_user_timeout(now, self.timers.rto.rto())
    }

    /// A retransmission is on its way (Karn's algorithm, RFC 6298 §3):
    /// the RTT sample in progress is void, and none is taken until new
    /// data is acknowledged.
    #[inline]
    pub(super) fn karn_retransmit(&mut self) {
        self.timers.rtt_timing = None;
        self.timers.karn_blocked = true;
    }

    /// One RTO expiry at `now` counted against `limit` retries
    /// (syn_retries or data_retries): past the limit, or past the user
    /// timeout since the timer that first expired was started (RFC 5482:
    /// as Linux, from the oldest unacknowledged data's send), the connection
    /// is closed with ETIMEDOUT (RFC 9293 §3.8.3 R2) and false is
    /// returned; else the retry and the timeout are counted, the RTO backed
    /// off (RFC 6298 §5.5) and true is returned.
    #[inline]
    fn rto_retry(&mut self, limit: u32, now: Instant, ev: &mut Events) -> bool {
        let started = now - self.timers.rto.rto();
        self.timers.unanswered_since.get_or_insert(started);
        if self.timers.retries >= limit || self.user_timed_out(now) {
            self.enter_closed();
            ev.closed = Some(CloseReason::TimedOut);
            return false;
        }
        self.timers.retries += 1;
        self.stats.timeouts += 1;
        self.timers.rto.backoff();
        true
    }
}

impl Tcb {
    /// Turns keepalive probes on or off (SO_KEEPALIVE); the idle time,
    /// interval and count come from the configuration (RFC 1122 §4.2.3.6).
    pub fn set_keepalive(&mut self, on: bool) {
        self.cfg.keepalive = on;
        self.ka.probes = 0;
        self.ka.deadline = None;
        self.update_keepalive();
    }

    /// Sets the keepalive idle time, probe interval and probe count
    /// (TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT).
    pub fn set_keepalive_params(&mut self, idle: Duration, interval: Duration, count: u32) {
        self.cfg.keepalive_idle = idle;
        self.cfg.keepalive_interval = interval;
        self.cfg.keepalive_count = count;
        self.ka.deadline = None;
        self.update_keepalive();
    }

    /// TCP_USER_TIMEOUT (RFC 5482): how long data may stay unacknowledged
    /// since it was sent (or a zero window stay shut) before the connection
    /// is given up with ETIMEDOUT; zero: the retry limit alone.
    pub fn set_user_timeout(&mut self, t: Duration) {
        self.cfg.user_timeout = t;
    }
    /// Re-arms (or stops) the keepalive timer (RFC 1122 §4.2.3.6): only in
    /// ESTABLISHED / CLOSE-WAIT with nothing in flight or queued; the first
    /// probe after `keepalive_idle` without a segment from the peer, the
    /// next ones every `keepalive_interval`.
    pub(super) fn update_keepalive(&mut self) {
        let idle = self.cfg.keepalive
            && matches!(self.state, State::Established | State::CloseWait)
            && self.snd.max == self.snd.una
            && self.snd.buffered == 0
            && !self.snd.fin_queued;
        if !idle {
            self.ka.deadline = None;
            self.ka.probes = 0;
            return;
        }
        if self.ka.deadline.is_none() {
            let wait = self.cfg.keepalive_idle + self.cfg.keepalive_interval * self.ka.probes;
            self.ka.deadline = Some(self.rcv.last_seen + wait);
        }
    }

    /// Starts the FIN-WAIT-2 timer of an orphan.
    pub(super) fn update_fin_wait2(&mut self, now: Instant) {
        if self.orphaned && self.state == State::FinWait2 {
            if self.timers.fin_wait2_deadline.is_none() {
                self.timers.fin_wait2_deadline = Some(now + self.cfg.fin_wait2_timeout);
            }
        } else {
            self.timers.fin_wait2_deadline = None;
        }
    }

    /// Keepalive and FIN-WAIT-2 expiry; part of `on_timer`.
    pub(super) fn on_idle_timers(&mut self, now: Instant, ev: &mut Events) {
        if self.timers.fin_wait2_deadline.is_some_and(|t| now >= t) {
            self.timers.fin_wait2_deadline = None;
            if self.state == State::FinWait2 {
                self.enter_closed();
                ev.closed = Some(CloseReason::Normal);
                return;
            }
        }
        if self.ka.deadline.is_some_and(|t| now >= t) {
            self.ka.deadline = None;
            if self.ka.probes >= self.cfg.keepalive_count {
                self.enter_closed();
                ev.closed = Some(CloseReason::TimedOut);
                return;
            }
            self.ka.probes += 1;
            self.ka.pending = true;
            self.update_keepalive();
        }
    }
}
