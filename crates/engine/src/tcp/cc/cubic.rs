//! CUBIC (RFC 9438): after a reduction the window follows
//! W_cubic(t) = C*(t - K)^3 + W_max (§4.2), concave up to the last maximum
//! W_max and convex beyond it, never slower than the Reno-friendly estimate
//! W_est (§4.3). Multiplicative decrease beta_cubic = 0.7 with fast
//! convergence (§4.6, §4.7). Slow start is standard (HyStart not done).
//!
//! Windows are kept in bytes; the cubic arithmetic is done in segments (as
//! the RFC writes it) with f64, time from the `Instant` the engine passes.

use super::{AckInfo, CongestionControl, CongestionEvent, Window};
use crate::time::Instant;
use core::time::Duration;

/// C (RFC 9438 §5.1), segments / s^3.
pub(crate) const C: f64 = 0.4;
/// beta_cubic (§4.6).
pub(crate) const BETA: f64 = 0.7;
/// alpha_cubic = 3 * (1 - beta) / (1 + beta) (§4.3).
pub(crate) const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// CUBIC state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cubic {
    pub(super) win: Window,
    /// W_max, segments: the window before the last reduction (after fast
    /// convergence).
    w_max: f64,
    /// cwnd_prior, segments: the window just before the last reduction.
    cwnd_prior: f64,
    /// Start of the current congestion-avoidance epoch (§4.2 t = 0).
    epoch_start: Option<Instant>,
    /// K, seconds.
    k: f64,
    /// W_est, segments (§4.3).
    w_est: f64,
    /// Fraction of a byte of growth not yet added to cwnd.
    frac: f64,
}

impl Cubic {
    pub(crate) fn new(iw: usize) -> Self {
        Cubic {
            win: Window::new(iw),
            w_max: 0.0,
            cwnd_prior: 0.0,
            epoch_start: None,
            k: 0.0,
            w_est: 0.0,
            frac: 0.0,
        }
    }

    #[cfg(test)]
    /// W_max in segments.
    pub(crate) fn w_max(&self) -> f64 {
        self.w_max
    }

    #[cfg(test)]
    /// K in seconds.
    pub(crate) fn k(&self) -> f64 {
        self.k
    }

    /// Start of the current epoch, if one is running.
    #[cfg(test)]
    pub(crate) fn epoch_start(&self) -> Option<Instant> {
        self.epoch_start
    }

    /// W_cubic(t), segments (§4.2 eq. 1).
    fn w_cubic(&self, t: f64) -> f64 {
        C * (t - self.k).powi(3) + self.w_max
    }

    fn add_bytes(&mut self, inc: f64) {
        let total = self.frac + inc.max(0.0);
        let whole = total.floor();
        self.frac = total - whole;
        self.win.cwnd = self.win.cwnd.saturating_add(whole as usize);
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> usize {
        self.win.cwnd
    }
    fn ssthresh(&self) -> usize {
        self.win.ssthresh
    }
    fn set_cwnd(&mut self, cwnd: usize) {
        self.win.cwnd = cwnd;
    }
    /// Slow start below ssthresh; else §4.2-§4.4 congestion avoidance: the
    /// target W_cubic(t + RTT), clamped to [cwnd, 1.5*cwnd], is approached by
    /// (target - cwnd)/cwnd segments per segment acknowledged, unless the
    /// Reno-friendly W_est is larger (then cwnd = W_est).
    fn on_ack(&mut self, ack: &AckInfo) {
        if self.win.slow_start(ack.acked) {
            return;
        }
        let mss = ack.mss.max(1) as f64;
        let cwnd = self.win.cwnd as f64 / mss;
        let start = match self.epoch_start {
            Some(s) => s,
            None => {
                // §4.2: a new epoch; K from the window at its start.
                self.epoch_start = Some(ack.now);
                self.w_est = cwnd;
                if self.w_max > cwnd {
                    self.k = ((self.w_max - cwnd) / C).cbrt();
                } else {
                    self.k = 0.0;
                    self.w_max = cwnd;
                }
                ack.now
            }
        };
        let t = (ack.now - start).as_secs_f64();
        let segs_acked = ack.acked as f64 / mss;
        // §4.3: W_est grows alpha_cubic segments per window, 1 once past cwnd_prior.
        let alpha = if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            ALPHA
        };
        self.w_est += alpha * segs_acked / cwnd;
        if self.w_cubic(t) < self.w_est {
            let est = self.w_est * mss;
            if est > self.win.cwnd as f64 {
                self.add_bytes(est - self.win.cwnd as f64);
            }
            return;
        }
        let target = self
            .w_cubic(t + ack.srtt.as_secs_f64())
            .clamp(cwnd, 1.5 * cwnd);
        self.add_bytes((target - cwnd) / cwnd * ack.acked as f64);
    }
    /// RFC 9438 §5.8: t excludes an idle period, so the epoch moves
    /// forward by it (but not past now), as Linux's CA_EVENT_TX_START.
    fn on_tx_start(&mut self, now: Instant, idle: Duration) {
        if let Some(start) = self.epoch_start {
            let moved = start + idle;
            self.epoch_start = Some(if moved > now { now } else { moved });
        }
    }
    /// §4.6-§4.8: W_max (with fast convergence), ssthresh = cwnd * beta_cubic
    /// (at least 2 SMSS), cwnd = ssthresh, or 1 SMSS after an RTO; a new
    /// epoch starts at the next ACK in congestion avoidance.
    fn on_congestion_event(&mut self, kind: CongestionEvent, _flight: usize, mss: usize) {
        let m = mss.max(1) as f64;
        let cwnd = self.win.cwnd as f64 / m;
        self.w_max = if cwnd < self.w_max {
            cwnd * (1.0 + BETA) / 2.0
        } else {
            cwnd
        };
        self.cwnd_prior = cwnd;
        self.epoch_start = None;
        self.frac = 0.0;
        let ssthresh = (self.win.cwnd as f64 * BETA) as usize;
        self.win.reduce(kind, ssthresh, mss);
    }
}
