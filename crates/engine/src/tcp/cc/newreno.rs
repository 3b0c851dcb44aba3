//! NewReno window arithmetic (RFC 5681 §3.1): slow start, congestion
//! avoidance with byte counting (RFC 3465), halving on congestion. The
//! RFC 6582 recovery rules (partial ACKs, `recover`) live in the Tcb.

use super::{AckInfo, CongestionControl, CongestionEvent};

/// NewReno state. Windows in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewReno {
    pub(super) cwnd: usize,
    pub(super) ssthresh: usize,
    /// Bytes acknowledged towards the next congestion-avoidance increase.
    bytes_acked: usize,
}

impl NewReno {
    /// `iw` bytes (RFC 6928 IW, or 1 MSS after a lost SYN per RFC 5681
    /// §3.1); ssthresh starts arbitrarily high (§3.1).
    pub(crate) fn new(iw: usize) -> Self {
        NewReno {
            cwnd: iw,
            ssthresh: usize::MAX,
            bytes_acked: 0,
        }
    }

    /// Slow start (RFC 5681 §3.1) counting acknowledged bytes (RFC 3465)
    /// without a per-ACK limit, as Linux does (stretch ACKs would starve a
    /// min(N, SMSS) rule); then congestion avoidance, one SMSS per cwnd of
    /// acknowledged data.
    pub(crate) fn grow(&mut self, acked: usize, mss: usize) {
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.saturating_add(acked).min(self.ssthresh);
        } else {
            self.bytes_acked += acked;
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        self.cwnd
    }
    fn ssthresh(&self) -> usize {
        self.ssthresh
    }
    fn set_cwnd(&mut self, cwnd: usize) {
        self.cwnd = cwnd;
    }
    fn on_ack(&mut self, ack: &AckInfo) {
        self.grow(ack.acked, ack.mss);
    }
    /// RFC 5681 §3.1 eq. 4 / §3.2 step 2: ssthresh = max(FlightSize/2,
    /// 2*SMSS); cwnd = ssthresh (recovery adds its inflation), or 1 SMSS
    /// (the loss window) after an RTO.
    fn on_congestion_event(&mut self, kind: CongestionEvent, flight: usize, mss: usize) {
        self.ssthresh = (flight / 2).max(2 * mss);
        self.cwnd = match kind {
            CongestionEvent::Rto => mss,
            CongestionEvent::FastRecovery | CongestionEvent::Ecn => self.ssthresh,
        };
        self.bytes_acked = 0;
    }
}
