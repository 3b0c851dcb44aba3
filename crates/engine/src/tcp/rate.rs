//! Delivery rate estimation (draft-cheng-iccrg-delivery-rate-estimation-02,
//! as Linux's `tcp_rate.c` does it): every segment remembers, when it is
//! (re)sent, how many bytes the connection had delivered by then and when;
//! an ACK that delivers it turns the difference into a rate sample
//! `delivered bytes / interval`, the interval being the longer of the send
//! phase and the ACK phase so that ACK compression cannot inflate it.
//! BBR's bandwidth filter is fed from these samples.
//!
//! ```text
//!   send seg:     seg.stamp = { delivered, delivered_time, first_sent, app_limited }
//!   ACK of segs:  newest delivered seg P -> prior = P.stamp, first_sent = P.xmit
//!   end of ACK:   delivered += newly delivered bytes; delivered_time = now
//!                 sample = (delivered - P.delivered) /
//!                          max(P.xmit - P.first_sent, now - P.delivered_time)
//! ```
//!
//! A sample taken while the application had too little to send is marked
//! app-limited (§3.4): it says less than the path can carry, and BBR only
//! uses it when it exceeds its current estimate.

use core::time::Duration;

use crate::time::Instant;

/// What a segment remembers of the connection's delivery when it is sent
/// (the draft's P.delivered, P.delivered_time, P.first_sent_time,
/// P.is_app_limited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RateStamp {
    /// Bytes the connection had delivered when the segment was sent.
    pub(crate) delivered: u64,
    /// When that count last moved.
    pub(crate) delivered_time: Instant,
    /// Send time of the segment that started the current send phase.
    pub(crate) first_sent: Instant,
    /// Sent while the sender was application-limited.
    pub(crate) app_limited: bool,
}

/// One rate sample, produced by an ACK that delivered data (§3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RateSample {
    /// Bytes delivered over `interval`.
    pub(crate) delivered: u64,
    /// The longer of the send and the ACK phase of the sample.
    pub(crate) interval: Duration,
    /// The sample's segment was sent while application-limited.
    pub(crate) app_limited: bool,
    /// The connection's delivered count when that segment was sent (BBR
    /// counts round trips by it).
    pub(crate) prior_delivered: u64,
    /// The connection's delivered count after this ACK, bytes.
    pub(crate) delivered_total: u64,
    /// RTT of the newest segment this ACK delivered that was never
    /// retransmitted (Karn), if there is one.
    pub(crate) rtt: Option<Duration>,
    /// Bytes this ACK newly delivered (cumulatively or by SACK).
    pub(crate) acked_sacked: usize,
}

impl RateSample {
    /// The sample's delivery rate in bytes per second, None when the
    /// interval is zero.
    pub(crate) fn bytes_per_sec(&self) -> Option<u64> {
        let ns = self.interval.as_nanos();
        (ns > 0).then(|| (u128::from(self.delivered) * 1_000_000_000 / ns) as u64)
    }
}

/// The newest delivered segment of the ACK being processed.
#[derive(Debug, Clone, Copy)]
struct Prior {
    stamp: RateStamp,
    xmit: Instant,
    rtt: Option<Duration>,
}

/// The connection's delivery counters (§3.1) and the sample being built.
#[derive(Debug, Default)]
pub(crate) struct Rate {
    /// Bytes delivered (cumulatively acknowledged or SACKed) so far.
    delivered: u64,
    /// When `delivered` last moved.
    delivered_time: Instant,
    /// Send time of the newest segment delivered: the start of the send
    /// phase of samples taken from segments sent after it.
    first_sent: Instant,
    /// Non-zero while application-limited: the delivered count beyond
    /// which samples are no longer marked (§3.4, `C.app_limited`).
    app_limited: u64,
    prior: Option<Prior>,
}

impl Rate {
    /// The stamp for a segment sent now; `idle` is true when nothing is in
    /// flight, which starts a new send phase (§3.2).
    pub(crate) fn stamp(&mut self, now: Instant, idle: bool) -> RateStamp {
        if idle {
            self.first_sent = now;
            self.delivered_time = now;
        }
        RateStamp {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent: self.first_sent,
            app_limited: self.app_limited != 0,
        }
    }

    /// A segment newly delivered by the ACK being processed (called for
    /// each one the scoreboard reports, with the stamp it was last sent
    /// with, when, and whether it was ever retransmitted): keeps the most
    /// recently sent.
    pub(crate) fn on_delivered(
        &mut self,
        stamp: RateStamp,
        xmit: Instant,
        retransmitted: bool,
        now: Instant,
    ) {
        let newer = self.prior.is_none_or(|p| {
            stamp.delivered > p.stamp.delivered
                || (stamp.delivered == p.stamp.delivered && xmit >= p.xmit)
        });
        if !newer {
            return;
        }
        // No RTT from a retransmitted segment (Karn), nor from one delivered
        // at the very time it was sent: only a stale clock says that (an
        // engine iteration run at the time of the one that sent it, see
        // `Engine::poll`), and a zero sample would pin BBR's min_rtt, hence
        // its cwnd, at the floor for 10 s.
        let rtt = (!retransmitted && now > xmit).then(|| now.saturating_since(xmit));
        self.prior = Some(Prior { stamp, xmit, rtt });
        self.first_sent = xmit;
    }

    /// Ends the ACK: counts `newly` delivered bytes and returns the rate
    /// sample, if the ACK delivered a tracked segment (§3.3).
    pub(crate) fn sample(&mut self, newly: usize, now: Instant) -> Option<RateSample> {
        if newly > 0 {
            self.delivered += newly as u64;
            self.delivered_time = now;
        }
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let p = self.prior.take()?;
        let send_elapsed = p.xmit.saturating_since(p.stamp.first_sent);
        let ack_elapsed = now.saturating_since(p.stamp.delivered_time);
        Some(RateSample {
            delivered: self.delivered.saturating_sub(p.stamp.delivered),
            interval: send_elapsed.max(ack_elapsed),
            app_limited: p.stamp.app_limited,
            prior_delivered: p.stamp.delivered,
            delivered_total: self.delivered,
            rtt: p.rtt,
            acked_sacked: newly,
        })
    }

    /// The sender has less than a segment to send and room in cwnd (§3.4,
    /// Linux's `tcp_rate_check_app_limited`): samples of what is in flight
    /// now, `pipe` bytes, are app-limited.
    pub(crate) fn mark_app_limited(&mut self, pipe: usize) {
        self.app_limited = (self.delivered + pipe as u64).max(1);
    }

    /// Bytes delivered so far.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::scoreboard::{Scoreboard, EVER_RETRANS};
    use wire::SeqNum;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Ten 1000-byte segments sent 1 ms apart, the first ACKed 10 ms after
    /// it left and one more each 1 ms: the path delivers 1000 bytes per ms.
    #[test]
    fn steady_acks_give_the_delivery_rate() {
        let t0 = Instant(1_000_000_000);
        let mut rate = Rate::default();
        let mut sb = Scoreboard::new(16);
        for i in 0..10u32 {
            let now = t0 + ms(u64::from(i));
            let stamp = rate.stamp(now, sb.is_empty());
            assert!(sb.push(SeqNum(i * 1000), SeqNum(i * 1000 + 1000), false, now));
            sb.stamp_last(stamp);
        }
        let mut last = None;
        for i in 0..10u32 {
            let now = t0 + ms(10 + u64::from(i));
            sb.ack(SeqNum(i * 1000 + 1000), |s| {
                rate.on_delivered(s.stamp, s.xmit, s.has(EVER_RETRANS), now)
            });
            last = rate.sample(1000, now);
            let s = last.expect("every ACK delivers a tracked segment");
            assert_eq!(s.rtt, Some(ms(10)));
            assert_eq!(s.acked_sacked, 1000);
        }
        let s = last.unwrap();
        // The last segment was sent at 9 ms with 0 delivered (the first ACK
        // came at 10 ms): 10 000 bytes over max(9 ms send, 19 ms ack) phases.
        assert_eq!(s.delivered, 10_000);
        assert_eq!(s.interval, ms(19));
        assert_eq!(rate.delivered(), 10_000);
        // A lone segment after the queue drained starts a new send phase:
        // 1000 bytes over its 10 ms round trip.
        let now = t0 + ms(20);
        let stamp = rate.stamp(now, sb.is_empty());
        assert!(sb.push(SeqNum(10_000), SeqNum(11_000), false, now));
        sb.stamp_last(stamp);
        let now = t0 + ms(30);
        sb.ack(SeqNum(11_000), |s| {
            rate.on_delivered(s.stamp, s.xmit, s.has(EVER_RETRANS), now)
        });
        let s = rate.sample(1000, now).unwrap();
        assert_eq!(s.delivered, 1000);
        assert_eq!(s.bytes_per_sec(), Some(100_000));
        assert!(!s.app_limited);
    }

    #[test]
    fn app_limited_marks_samples_until_the_flight_is_delivered() {
        let t0 = Instant(1_000_000_000);
        let mut rate = Rate::default();
        let mut sb = Scoreboard::new(4);
        rate.mark_app_limited(0);
        let stamp = rate.stamp(t0, true);
        assert!(stamp.app_limited);
        assert!(sb.push(SeqNum(0), SeqNum(100), false, t0));
        sb.stamp_last(stamp);
        let now = t0 + ms(5);
        sb.ack(SeqNum(100), |s| {
            rate.on_delivered(s.stamp, s.xmit, s.has(EVER_RETRANS), now)
        });
        let s = rate.sample(100, now).unwrap();
        assert!(s.app_limited);
        // Delivered beyond the mark: the next stamp is not app-limited.
        assert!(!rate.stamp(now, true).app_limited);
        // An ACK that delivers no tracked segment gives no sample.
        assert_eq!(rate.sample(0, now), None);
    }
}
