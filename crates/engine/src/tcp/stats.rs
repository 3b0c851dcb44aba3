//! Per-connection counters.

/// Per-connection counters (for `corestack ss` and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcbStats {
    /// Times the MSS went down after ICMP "fragmentation needed" or
    /// "packet too big", or a smaller path MTU another connection learned.
    pub pmtu_reductions: u64,
    /// Times the MSS fell back to the search floor after a full-stop
    /// timeout (RFC 4821 §7.7: a path that drops big packets silently).
    pub pmtu_blackholes: u64,
    /// Path MTU probes sent after a black-hole fallback (RFC 4821 §7.5: a
    /// segment between the MSS that works and the smallest that failed).
    pub pmtu_probes: u64,
    /// Of those, probes that arrived: the MSS went up to their size.
    pub pmtu_probes_ok: u64,
    /// Segments sent again (RTO go-back, fast retransmit, partial ACK, SYN).
    pub retransmits: u64,
    /// Fast retransmits entered (third duplicate ACK).
    pub fast_retransmits: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Retransmission timeouts found spurious (the first ACK after one
    /// echoed a timestamp from before it, RFC 3522) and undone.
    pub spurious_rtos: u64,
    /// Duplicate ACKs received (RFC 5681 §2).
    pub dup_acks: u64,
    /// Out-of-order arrivals reported by the ACK of their batch instead
    /// of a duplicate ACK of their own (Linux's TCPAckCompressed).
    pub acks_compressed: u64,
    /// Out-of-order payload bytes dropped because the queue was full.
    pub ooo_dropped_bytes: u64,
    /// In-order payload bytes dropped because the receive buffer was full
    /// (a segment beyond the window it could take).
    pub rcv_full_dropped_bytes: u64,
    /// Challenge ACKs sent (RFC 5961 / RFC 9293 §3.10.7.4).
    pub challenge_acks: u64,
    /// Segments dropped by PAWS (RFC 7323 §5).
    pub paws_dropped: u64,
    /// Zero-window probes sent (RFC 9293 §3.8.6.1).
    pub window_probes: u64,
    /// SACK-based recoveries entered (RFC 6675; also counted in `fast_retransmits`).
    pub sack_recoveries: u64,
    /// D-SACK blocks received (RFC 2883).
    pub dsacks_received: u64,
    /// D-SACK blocks sent (RFC 2883).
    pub dsacks_sent: u64,
    /// RTOs that found the first unacknowledged segment SACKed: the
    /// receiver discarded SACKed data (RFC 2018 §8) and SACK marks were reset.
    pub sack_reneging: u64,
    /// Retransmissions found spurious by D-SACK.
    pub spurious_retransmits: u64,
    /// Congestion-window reductions undone after D-SACK showed them spurious.
    pub cwnd_undos: u64,
    /// cwnd restarts after an idle period longer than the RTO (RFC 5681 §4.1).
    pub cwnd_restarts: u64,
    /// Segments marked lost by RACK (RFC 8985) time-based detection.
    pub rack_losses: u64,
    /// Tail loss probes sent (RFC 8985 §7), outside recovery.
    pub tlp_probes: u64,
    /// Probes sent in a SACK recovery whose ACK clock stopped (a lost ACK
    /// or a lost last retransmission); see `Tcb::arm_tlp`.
    pub recovery_probes: u64,
    /// Keepalive probes sent (RFC 1122 §4.2.3.6).
    pub keepalive_probes: u64,
    /// Challenge ACKs not sent because of the rate limit (RFC 5961 §7).
    pub challenge_acks_suppressed: u64,
    /// Congestion-window reductions in response to ECN-Echo (RFC 3168).
    pub ecn_reductions: u64,
    /// Data segments received with the CE codepoint.
    pub ce_received: u64,
    /// Segments whose data was not acceptable (a full or zero receive
    /// window) whose ACK field was processed (RFC 9293 §3.10.7.4).
    pub acks_of_unacceptable: u64,
}
