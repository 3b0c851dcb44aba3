//! Retransmission timeout estimator (RFC 6298).

use core::time::Duration;

/// SRTT/RTTVAR smoothing and the current RTO, with exponential backoff.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RtoEstimator {
    srtt_ns: Option<u64>,
    rttvar_ns: u64,
    rto: Duration,
    min: Duration,
    max: Duration,
}

impl RtoEstimator {
    /// RFC 6298 §2.1: before any sample, RTO = the initial value (1 s by default).
    pub(crate) fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        RtoEstimator {
            srtt_ns: None,
            rttvar_ns: 0,
            rto: initial.clamp(min, max.max(min)),
            min,
            max: max.max(min),
        }
    }

    /// Feed one RTT measurement `r` (RFC 6298 §2.2, §2.3; K = 4, α = 1/8,
    /// β = 1/4). The result is clamped to [rto_min, rto_max] (§2.4, §2.5;
    /// rto_min is Linux's 200 ms rather than the RFC's 1 s, which §2.4 allows).
    pub(crate) fn sample(&mut self, r: Duration) {
        let r = r.as_nanos().min(u64::MAX as u128 / 16) as u64;
        match self.srtt_ns {
            None => {
                self.srtt_ns = Some(r);
                self.rttvar_ns = r / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(r);
                self.rttvar_ns = (3 * self.rttvar_ns + err) / 4;
                self.srtt_ns = Some((7 * srtt + r) / 8);
            }
        }
        let srtt = self.srtt_ns.unwrap_or(r);
        // G (clock granularity) is 1 ns here, so max(G, K*RTTVAR) = K*RTTVAR.
        let rto = srtt.saturating_add(4 * self.rttvar_ns.max(1));
        self.rto = Duration::from_nanos(rto).clamp(self.min, self.max);
    }

    /// RFC 6298 §5.5: on expiry, RTO = RTO * 2, bounded by rto_max.
    pub(crate) fn backoff(&mut self) {
        self.rto = self.rto.saturating_mul(2).min(self.max);
    }

    /// The current retransmission timeout.
    pub(crate) fn rto(&self) -> Duration {
        self.rto
    }

    /// The smoothed RTT, if any sample was taken.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt_ns.map(Duration::from_nanos)
    }

    /// The RTT variation.
    pub(crate) fn rttvar(&self) -> Duration {
        Duration::from_nanos(self.rttvar_ns)
    }
}
