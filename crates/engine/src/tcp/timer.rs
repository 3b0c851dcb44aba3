//! Timer expiry: retransmission (RFC 6298 §5), delayed ACK, persist
//! (RFC 9293 §3.8.6.1) and TIME-WAIT. The engine asks `next_timeout` and
//! calls `on_timer` once that instant has passed.

use crate::time::Instant;

use super::tcb::{CloseReason, Events, SendBuffer, State, Tcb};

impl Tcb {
    /// The earliest pending deadline among RTO, delayed ACK, persist and
    /// TIME-WAIT, or `None` if no timer runs.
    pub fn next_timeout(&self) -> Option<Instant> {
        [
            self.rto_deadline,
            self.delack_deadline,
            self.persist_deadline,
            self.time_wait_deadline,
            self.rack.deadline,
            self.tlp.deadline,
            self.ka_deadline,
            self.fin_wait2_deadline,
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
        self.tx_len_seen = tx.len();
        if self.time_wait_deadline.is_some_and(|t| now >= t) {
            self.enter_closed();
            ev.closed = Some(CloseReason::Normal);
            return ev;
        }
        if self.rto_deadline.is_some_and(|t| now >= t) {
            self.rto_deadline = None;
            self.on_rto(now, &mut ev);
            if ev.closed.is_some() {
                return ev;
            }
        }
        if self.rack.deadline.is_some_and(|t| now >= t) {
            self.on_rack_timer(now);
        }
        if self.tlp.deadline.is_some_and(|t| now >= t) {
            self.on_tlp_timer();
        }
        if self.delack_deadline.is_some_and(|t| now >= t) {
            self.delack_deadline = None;
            self.ack_now = true;
        }
        if self.persist_deadline.is_some_and(|t| now >= t) {
            self.persist_deadline = None;
            self.probe_pending = true;
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
                if self.retries >= self.cfg.syn_retries {
                    self.enter_closed();
                    ev.closed = Some(CloseReason::TimedOut);
                    return;
                }
                self.retries += 1;
                self.stats.timeouts += 1;
                self.rto.backoff();
                self.syn_retransmitted = true;
                self.snd_nxt = self.iss;
                self.rtt_timing = None;
            }
            State::Closed | State::Listen | State::TimeWait | State::FinWait2 => {}
            _ => {
                if self.snd_max == self.snd_una {
                    return;
                }
                if self.retries >= self.cfg.data_retries {
                    self.enter_closed();
                    ev.closed = Some(CloseReason::TimedOut);
                    return;
                }
                self.retries += 1;
                self.stats.timeouts += 1;
                self.rto.backoff();
                self.rto_recovery(now);
                self.rtt_timing = None;
                self.karn_blocked = true;
                self.rexmit_one = false;
            }
        }
    }
}

impl Tcb {
    /// Re-arms (or stops) the keepalive timer (RFC 1122 §4.2.3.6): only in
    /// ESTABLISHED / CLOSE-WAIT with nothing in flight or queued; the first
    /// probe after `keepalive_idle` without a segment from the peer, the
    /// next ones every `keepalive_interval`.
    pub(super) fn update_keepalive(&mut self) {
        let idle = self.cfg.keepalive
            && matches!(self.state, State::Established | State::CloseWait)
            && self.snd_max == self.snd_una
            && self.tx_len_seen == 0
            && !self.fin_queued;
        if !idle {
            self.ka_deadline = None;
            self.ka_probes = 0;
            return;
        }
        if self.ka_deadline.is_none() {
            let wait = self.cfg.keepalive_idle + self.cfg.keepalive_interval * self.ka_probes;
            self.ka_deadline = Some(self.rcv_time + wait);
        }
    }

    /// Starts the FIN-WAIT-2 timer of an orphan.
    pub(super) fn update_fin_wait2(&mut self, now: Instant) {
        if self.orphaned && self.state == State::FinWait2 {
            if self.fin_wait2_deadline.is_none() {
                self.fin_wait2_deadline = Some(now + self.cfg.fin_wait2_timeout);
            }
        } else {
            self.fin_wait2_deadline = None;
        }
    }

    /// Keepalive and FIN-WAIT-2 expiry; part of `on_timer`.
    pub(super) fn on_idle_timers(&mut self, now: Instant, ev: &mut Events) {
        if self.fin_wait2_deadline.is_some_and(|t| now >= t) {
            self.fin_wait2_deadline = None;
            if self.state == State::FinWait2 {
                self.enter_closed();
                ev.closed = Some(CloseReason::Normal);
                return;
            }
        }
        if self.ka_deadline.is_some_and(|t| now >= t) {
            self.ka_deadline = None;
            if self.ka_probes >= self.cfg.keepalive_count {
                self.enter_closed();
                ev.closed = Some(CloseReason::TimedOut);
                return;
            }
            self.ka_probes += 1;
            self.ka_pending = true;
            self.update_keepalive();
        }
    }
}
