//! Congestion control: NewReno (RFC 5681 slow start, congestion avoidance,
//! fast retransmit/fast recovery, with the RFC 6582 partial-ACK rules).

use wire::SeqNum;

/// NewReno congestion state. All windows in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewReno {
    cwnd: usize,
    ssthresh: usize,
    dupacks: u32,
    in_recovery: bool,
    /// RFC 6582 `recover`, kept exclusive: one past the highest sequence
    /// number sent when recovery (or an RTO) began.
    recover: SeqNum,
    /// Bytes acknowledged towards the next congestion-avoidance increase.
    bytes_acked: usize,
}

impl NewReno {
    /// `initial_cwnd` bytes (RFC 6928 IW, or 1 MSS after a lost SYN per
    /// RFC 5681 §3.1); ssthresh starts arbitrarily high (§3.1).
    pub(crate) fn new(initial_cwnd: usize, recover: SeqNum) -> Self {
        NewReno {
            cwnd: initial_cwnd,
            ssthresh: usize::MAX,
            dupacks: 0,
            in_recovery: false,
            recover,
            bytes_acked: 0,
        }
    }

    pub(crate) fn cwnd(&self) -> usize {
        self.cwnd
    }

    pub(crate) fn ssthresh(&self) -> usize {
        self.ssthresh
    }

    pub(crate) fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// A cumulative ACK for new data: `ack` is the new snd_una, `acked` the
    /// data bytes it newly covers, `flight` what is still outstanding after it.
    /// Returns true for a partial ACK in recovery, which asks the caller to
    /// retransmit the first unacknowledged segment (RFC 6582 §3.2 step 5).
    pub(crate) fn on_ack(&mut self, ack: SeqNum, acked: usize, flight: usize, mss: usize) -> bool {
        self.dupacks = 0;
        if self.in_recovery {
            if ack >= self.recover {
                // RFC 6582 §3.2 step 4 (full ACK), option 1:
                // cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
                self.cwnd = self.ssthresh.min(flight.max(mss) + mss);
                self.in_recovery = false;
                self.bytes_acked = 0;
                return false;
            }
            // RFC 6582 §3.2 step 5 (partial ACK): deflate by the amount acked,
            // add back one SMSS if at least one SMSS was acked.
            self.cwnd = self.cwnd.saturating_sub(acked);
            if acked >= mss {
                self.cwnd += mss;
            }
            self.cwnd = self.cwnd.max(mss);
            return true;
        }
        if self.cwnd < self.ssthresh {
            // Slow start (RFC 5681 §3.1) counting acknowledged bytes (RFC 3465)
            // without a per-ACK limit, as Linux does: a batching receiver
            // sends stretch ACKs, and min(N, SMSS) per ACK would starve it.
            self.cwnd = self.cwnd.saturating_add(acked).min(self.ssthresh);
        } else {
            // RFC 5681 §3.1 congestion avoidance with byte counting:
            // one SMSS per cwnd of data acknowledged.
            self.bytes_acked += acked;
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
        false
    }

    /// A duplicate ACK (RFC 5681 §2 definition, checked by the caller).
    /// Returns true on the third one, when fast retransmit should happen.
    pub(crate) fn on_dupack(
        &mut self,
        snd_una: SeqNum,
        snd_max: SeqNum,
        flight: usize,
        mss: usize,
    ) -> bool {
        if self.in_recovery {
            // RFC 5681 §3.2 step 4: inflate by one SMSS per further dupack.
            self.cwnd = self.cwnd.saturating_add(mss);
            return false;
        }
        self.dupacks += 1;
        // RFC 6582 §3.2 step 2: only enter recovery when the cumulative ACK
        // covers more than `recover` (no repeated recovery after an RTO).
        if self.dupacks == 3 && snd_una >= self.recover {
            // RFC 5681 §3.2 steps 2-3: ssthresh = max(FlightSize/2, 2*SMSS),
            // cwnd = ssthresh + 3*SMSS; recover = highest sequence sent.
            self.ssthresh = (flight / 2).max(2 * mss);
            self.cwnd = self.ssthresh + 3 * mss;
            self.recover = snd_max;
            self.in_recovery = true;
            return true;
        }
        false
    }

    /// Retransmission timeout: ssthresh = max(FlightSize/2, 2*SMSS) and
    /// cwnd = loss window = 1 SMSS (RFC 5681 §3.1 eq. 4); recovery ends and
    /// `recover` = snd_max, so that dupacks for data sent before the timeout
    /// start no fast retransmit (RFC 6582 §4).
    pub(crate) fn on_rto(&mut self, flight: usize, snd_max: SeqNum, mss: usize) {
        self.ssthresh = (flight / 2).max(2 * mss);
        self.cwnd = mss;
        self.dupacks = 0;
        self.in_recovery = false;
        self.recover = snd_max;
        self.bytes_acked = 0;
    }
}
