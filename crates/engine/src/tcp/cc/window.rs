//! The window a loss-based algorithm keeps (RFC 5681 §3.1): cwnd and
//! ssthresh, the slow start below ssthresh and the reduction on a
//! congestion event, which NewReno (and DCTCP through it) and CUBIC
//! share; they differ in congestion avoidance and in the new ssthresh.

use super::CongestionEvent;

/// cwnd and ssthresh, bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) cwnd: usize,
    pub(crate) ssthresh: usize,
}

impl Window {
    /// An initial window of `iw` bytes (RFC 6928 IW, or 1 MSS after a lost
    /// SYN per RFC 5681 §3.1); ssthresh starts arbitrarily high (§3.1).
    pub(crate) fn new(iw: usize) -> Self {
        Window {
            cwnd: iw,
            ssthresh: usize::MAX,
        }
    }

    /// Slow start (RFC 5681 §3.1) counting acknowledged bytes (RFC 3465)
    /// without a per-ACK limit, as Linux does (stretch ACKs would starve a
    /// min(N, SMSS) rule): below ssthresh, cwnd grows by the `acked` bytes,
    /// up to ssthresh. False, and nothing changes, at or above ssthresh
    /// (congestion avoidance, the algorithm's own).
    #[inline]
    pub(crate) fn slow_start(&mut self, acked: usize) -> bool {
        if self.cwnd >= self.ssthresh {
            return false;
        }
        self.cwnd = self.cwnd.saturating_add(acked).min(self.ssthresh);
        true
    }

    /// A reduction for `kind` (RFC 5681 §3.1 eq. 4 and §3.2 step 2, RFC
    /// 9438 §4.6): ssthresh = `ssthresh` bytes, at least 2 SMSS (`mss`
    /// bytes); cwnd = ssthresh, or the loss window of 1 SMSS after an RTO.
    pub(crate) fn reduce(&mut self, kind: CongestionEvent, ssthresh: usize, mss: usize) {
        self.ssthresh = ssthresh.max(2 * mss);
        self.cwnd = match kind {
            CongestionEvent::Rto => mss,
            CongestionEvent::FastRecovery | CongestionEvent::Ecn => self.ssthresh,
        };
    }
}
