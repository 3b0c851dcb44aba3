//! NewReno window arithmetic (RFC 5681 §3.1): slow start, congestion
//! avoidance with byte counting (RFC 3465), halving on congestion. The
//! RFC 6582 recovery rules (partial ACKs, `recover`) live in the Tcb.

use super::{AckInfo, CongestionControl, CongestionEvent, Window};

/// NewReno state. Windows in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewReno {
    pub(super) win: Window,
    /// Bytes acknowledged towards the next congestion-avoidance increase.
    bytes_acked: usize,
}

impl NewReno {
    /// An initial window of `iw` bytes ([`Window::new`]).
    pub(crate) fn new(iw: usize) -> Self {
        NewReno {
            win: Window::new(iw),
            bytes_acked: 0,
        }
    }

    /// Slow start ([`Window::slow_start`]), then congestion avoidance
    /// (RFC 5681 §3.1): one SMSS per cwnd of acknowledged data.
    pub(crate) fn grow(&mut self, acked: usize, mss: usize) {
        if self.win.slow_start(acked) {
            return;
        }
        self.bytes_acked += acked;
        if self.bytes_acked >= self.win.cwnd {
            self.bytes_acked -= self.win.cwnd;
            self.win.cwnd = self.win.cwnd.saturating_add(mss);
        }
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        self.win.cwnd
    }
    fn ssthresh(&self) -> usize {
        self.win.ssthresh
    }
    fn set_cwnd(&mut self, cwnd: usize) {
        self.win.cwnd = cwnd;
    }
    fn on_ack(&mut self, ack: &AckInfo) {
        self.grow(ack.acked, ack.mss);
    }
    /// RFC 5681 §3.1 eq. 4 / §3.2 step 2: ssthresh = max(FlightSize/2,
    /// 2*SMSS); cwnd = ssthresh (recovery adds its inflation), or 1 SMSS
    /// (the loss window) after an RTO.
    fn on_congestion_event(&mut self, kind: CongestionEvent, flight: usize, mss: usize) {
        self.win.reduce(kind, flight / 2, mss);
        self.bytes_acked = 0;
    }
}
