//! The transmission control block (RFC 9293 §3.3.1): configuration, the
//! connection states, the types of the engine contract, and the per-connection
//! variables. Segment arrival is in `input`, sending in `output`, timers in
//! `timer`.

use core::time::Duration;
use std::net::SocketAddrV4;

use wire::tcp::TcpOptions;
use wire::tcp::TcpRepr;
use wire::SeqNum;

use crate::time::Instant;

use super::cc::{Cc, CcKind, CongestionControl};
use super::reassembly::Reassembly;
use super::rto::RtoEstimator;
use super::scoreboard::Scoreboard;

/// Bytes of the timestamps option in every segment once negotiated
/// (10 bytes + 2 NOPs, RFC 7323 Appendix A layout).
pub(super) const TS_OPTION_LEN: usize = 12;
/// Send MSS assumed when the peer's SYN carries no MSS option (RFC 9293 §3.7.1).
pub(super) const DEFAULT_MSS: usize = 536;
/// Floor of the effective send MSS, so that a bogus peer MSS (0, 1) cannot
/// make segments empty.
pub(super) const MIN_MSS: usize = 64;
/// The smallest MSS a path MTU report can set: Linux's min_pmtu (552) less
/// 40 bytes of headers.
const PMTU_MIN_MSS: usize = 512;
/// Most duplicate ACKs owed at once (out-of-order arrivals in one batch).
pub(super) const MAX_DUPACKS_OWED: u32 = 32;
/// Most intermediate ACKs owed at once (see `Tcb::ack_points`).
pub(super) const MAX_ACK_POINTS: usize = 4;
/// Largest window scale shift (RFC 7323 §2.3).
pub(super) const MAX_WSCALE: u8 = 14;

/// Per-connection TCP settings. `Default` gives Linux-like values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpConfig {
    /// Our MSS to advertise, bytes (link MTU - 40). Also caps the send MSS. Default 1460.
    pub mss: u16,
    /// Disable Nagle's algorithm (RFC 9293 §3.7.4) when true. Default false.
    pub nodelay: bool,
    /// Offer window scaling (RFC 7323 §2). Default true.
    pub window_scaling: bool,
    /// Offer timestamps (RFC 7323 §3). Default true.
    pub timestamps: bool,
    /// Delayed-ACK timeout (RFC 9293 §3.8.6.3, RFC 5681 §4.2: < 500 ms). Default 40 ms.
    pub delayed_ack: Duration,
    /// RTO before any RTT sample (RFC 6298 §2.1). Default 1 s.
    pub rto_initial: Duration,
    /// Lower bound of the RTO (RFC 6298 §2.4). Default 200 ms (Linux).
    pub rto_min: Duration,
    /// Upper bound of the RTO and of its backoff (RFC 6298 §2.5). Default 60 s.
    pub rto_max: Duration,
    /// SYN / SYN-ACK retransmissions before giving up with `TimedOut`. Default 6.
    pub syn_retries: u32,
    /// Data retransmissions of one segment before giving up with `TimedOut`. Default 15.
    pub data_retries: u32,
    /// Duration of TIME-WAIT, 2*MSL (RFC 9293 §3.4.2). Default 60 s.
    pub time_wait: Duration,
    /// Initial congestion window in segments (RFC 6928). Default 10.
    pub initial_cwnd_segments: u32,
    /// Most intervals the out-of-order queue keeps; more are dropped. Default 64.
    pub ooo_max_segments: usize,
    /// Receive buffer in bytes when the connection starts (the
    /// application's RX ring capacity then); the out-of-order store starts
    /// with this size. Default 256 KiB.
    pub rcv_buf: usize,
    /// The most the receive buffer grows to by auto-tuning, bytes (dynamic
    /// right-sizing, as Linux's `tcp_rcv_space_adjust` up to
    /// `tcp_rmem[2]`; see [`Tcb::rcv_buf_wanted`]). The advertised window
    /// never exceeds it and the window scale (RFC 7323 §2.3) is chosen for
    /// it. At most `rcv_buf`: the buffer stays as it is (as after SO_RCVBUF
    /// on Linux). Default 6 MiB (Linux's default `tcp_rmem[2]`).
    pub rcv_buf_max: usize,
    /// The most the send buffer grows to, bytes: the application is
    /// offered a TX ring of about twice the congestion window, up to this
    /// (as Linux's `tcp_sndbuf_expand` up to `tcp_wmem[2]`; see
    /// [`Tcb::snd_buf_wanted`]). Default 4 MiB (Linux's default).
    pub snd_buf_max: usize,
    /// Congestion control algorithm (a socket option, see [`Tcb::set_cc`]).
    /// Default CUBIC, as Linux.
    pub cc: CcKind,
    /// Offer SACK (RFC 2018) and, once negotiated, recover from losses with
    /// the scoreboard (RFC 6675) and RACK-TLP (RFC 8985). Default true.
    pub sack: bool,
    /// Use RACK-TLP (RFC 8985) time-based loss detection and tail loss
    /// probes when SACK is in use. Default true.
    pub rack_tlp: bool,
    /// Offer ECN (RFC 3168). Default false; always offered when `cc` is DCTCP.
    pub ecn: bool,
    /// Capacity of the retransmission queue / scoreboard in segments when
    /// the connection starts (allocated when the Tcb is created, 24 bytes
    /// each). It grows, a few times at most, when a larger send buffer
    /// needs more: up to `snd_buf_max` bytes of full segments. Default 1024.
    pub max_segments_in_flight: usize,
    /// Restart cwnd after an idle period longer than the RTO (RFC 5681
    /// §4.1, as Linux's `tcp_slow_start_after_idle`): cwnd is halved once
    /// per RTO of idleness, down to min(IW, cwnd), and ssthresh keeps at
    /// least 3/4 of the old cwnd. Default true.
    pub slow_start_after_idle: bool,
    /// Send keepalive probes on an idle connection (RFC 1122 §4.2.3.6,
    /// SO_KEEPALIVE). Default false.
    pub keepalive: bool,
    /// Idle time before the first keepalive probe. Default 7200 s (Linux
    /// tcp_keepalive_time).
    pub keepalive_idle: Duration,
    /// Time between unanswered probes. Default 75 s (tcp_keepalive_intvl).
    pub keepalive_interval: Duration,
    /// Unanswered probes before the connection is given up with
    /// `TimedOut`. Default 9 (tcp_keepalive_probes).
    pub keepalive_count: u32,
    /// Most challenge ACKs per second (RFC 5961 §7); 0 means no limit.
    /// Default 1000 (Linux tcp_challenge_ack_limit, here per connection).
    pub challenge_ack_limit: u32,
    /// How long an orphaned connection (see [`Tcb::orphan`]) may stay in
    /// FIN-WAIT-2. Default 60 s (Linux tcp_fin_timeout).
    pub fin_wait2_timeout: Duration,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            nodelay: false,
            window_scaling: true,
            timestamps: true,
            delayed_ack: Duration::from_millis(40),
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(60),
            syn_retries: 6,
            data_retries: 15,
            time_wait: Duration::from_secs(60),
            initial_cwnd_segments: 10,
            ooo_max_segments: 64,
            rcv_buf: 256 * 1024,
            rcv_buf_max: 6 << 20,
            snd_buf_max: 4 << 20,
            cc: CcKind::Cubic,
            sack: true,
            rack_tlp: true,
            ecn: false,
            max_segments_in_flight: 1024,
            slow_start_after_idle: true,
            keepalive: false,
            keepalive_idle: Duration::from_secs(7200),
            keepalive_interval: Duration::from_secs(75),
            keepalive_count: 9,
            challenge_ack_limit: 1000,
            fin_wait2_timeout: Duration::from_secs(60),
        }
    }
}

/// Connection states (RFC 9293 §3.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection (initial, or after the end).
    Closed,
    /// Waiting for a SYN (used by listeners; a Tcb never is in it).
    Listen,
    /// Our SYN sent, waiting for the peer's SYN.
    SynSent,
    /// SYNs exchanged, waiting for the ACK of ours.
    SynReceived,
    /// Open; data flows both ways.
    Established,
    /// We closed; our FIN not yet acknowledged.
    FinWait1,
    /// We closed and our FIN is acknowledged; waiting for the peer's FIN.
    FinWait2,
    /// The peer closed; waiting for our application to close.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both FINs acknowledged; waiting 2*MSL for stray segments.
    TimeWait,
}

impl State {
    /// True once both ISNs are known and acknowledged by us (every state
    /// after SYN-SENT except CLOSED).
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::Listen | State::SynSent)
    }
}

/// Why a connection ended; the engine maps it to one errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Orderly close (LAST-ACK acked, TIME-WAIT expired, RST while closing).
    Normal,
    /// The peer reset an established connection (ECONNRESET).
    Reset,
    /// RST in answer to our SYN (ECONNREFUSED).
    Refused,
    /// Retransmissions exhausted (ETIMEDOUT).
    TimedOut,
}

/// What happened to the connection during one call, for the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Events {
    /// The handshake completed (now ESTABLISHED or beyond).
    pub connected: bool,
    /// New bytes (or the FIN) are readable in the RecvBuffer.
    pub readable: bool,
    /// Acknowledged bytes were consumed from the SendBuffer (space freed).
    pub writable: bool,
    /// The peer's FIN arrived in order: no more data will come.
    pub peer_fin: bool,
    /// The connection is over; the Tcb is CLOSED and can be freed.
    pub closed: Option<CloseReason>,
}

/// The application's TX byte ring as TCP sees it: offset 0 is the first
/// unacknowledged data byte (snd_una once the SYN is acknowledged).
pub trait SendBuffer {
    /// Bytes written by the application and not yet acknowledged.
    fn len(&self) -> usize;
    /// Copies bytes starting `offset` bytes after the start into `dst`;
    /// returns how many were copied.
    fn read_at(&self, offset: usize, dst: &mut [u8]) -> usize;
    /// Drops the first `n` bytes (they were acknowledged).
    fn consume(&mut self, n: usize);
    /// Bytes `offset..offset + len` where they lie, for a port that sends
    /// them without copying ([`nic::TxQueue::transmit_gather`]); None when
    /// the buffer cannot lend them (the caller copies with `read_at`).
    fn payload(&self, offset: usize, len: usize) -> Option<nic::TxPayload> {
        let _ = (offset, len);
        None
    }
    /// True if nothing is buffered.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The application's RX byte ring as TCP sees it: only in-order bytes go here.
pub trait RecvBuffer {
    /// Free space in bytes.
    fn free(&self) -> usize;
    /// Appends up to `data.len()` bytes; returns how many were taken.
    fn write(&mut self, data: &[u8]) -> usize;
}

/// One segment to send. The engine writes the headers from `repr` and copies
/// `repr.payload_len` bytes from the SendBuffer starting at `payload_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Header fields and options; `payload_len` is the payload size in bytes.
    pub repr: TcpRepr,
    /// Offset of the payload in the SendBuffer, bytes (0 when there is none).
    pub payload_offset: usize,
    /// Send with the IP ECN field ECT(0) (RFC 3168 §6.1.1: new data of a
    /// connection that negotiated ECN; never SYNs, pure ACKs or
    /// retransmissions). When false the field is Not-ECT (0).
    pub ect: bool,
    /// 0 for one segment; else the MSS in bytes: the payload is several
    /// MSS-sized segments that the port cuts apart (TSO/GSO), each with
    /// this header and its own sequence number.
    pub gso_size: usize,
}

impl Segment {
    /// A segment of headers only (no payload, Not-ECT, one segment).
    pub(crate) fn bare(repr: TcpRepr) -> Segment {
        Segment {
            repr,
            payload_offset: 0,
            ect: false,
            gso_size: 0,
        }
    }

    /// Segments on the wire: 1, or the payload in `gso_size` pieces.
    pub fn segments(&self) -> usize {
        if self.gso_size == 0 {
            1
        } else {
            self.repr.payload_len.div_ceil(self.gso_size)
        }
    }
}

/// Per-connection counters (for `corestack ss` and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcbStats {
    /// Times the MSS went down after ICMP "fragmentation needed".
    pub pmtu_reductions: u64,
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

/// Saved congestion state for undoing a spurious reduction (RFC 2883 §5,
/// Linux's undo): the state before it, snd_una when it happened, and the
/// retransmissions since that no D-SACK has yet shown spurious.
#[derive(Debug, Clone, Copy)]
pub(super) struct Undo {
    pub(super) saved: Cc,
    pub(super) marker: SeqNum,
    pub(super) retrans: u32,
}

/// RACK state (RFC 8985 §5.2).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rack {
    /// Transmit time and end of the most recently sent segment delivered.
    pub(super) xmit: Option<Instant>,
    pub(super) end: SeqNum,
    /// RTT of that segment.
    pub(super) rtt: Duration,
    /// Smallest RTT seen.
    pub(super) min_rtt: Option<Duration>,
    /// Reordering timer (§6.2 step 5).
    pub(super) deadline: Option<Instant>,
    /// Reordering window multiplier (§6.2 step 4; 0 counts as 1).
    pub(super) reo_mult: u32,
    /// snd_max when the multiplier last grew (one step per round trip).
    pub(super) dsack_round: Option<SeqNum>,
    /// Recoveries left before the multiplier resets.
    pub(super) reo_persist: u32,
}

/// Tail loss probe state (RFC 8985 §7).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tlp {
    /// The probe timeout.
    pub(super) deadline: Option<Instant>,
    /// The probe timer fired: send a probe on the next `poll_output`.
    pub(super) pending: bool,
    /// snd_max when a probe retransmission went out (§7.4 TLP.end_seq).
    pub(super) high: Option<SeqNum>,
}

/// Most SACK blocks remembered for the next ACKs (RFC 2018 §4).
pub(super) const SACK_RECENT: usize = 4;

/// An RST queued for the next `poll_output`: `<SEQ=seq>[<ACK=ack>]<CTL=RST>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PendingRst {
    pub(super) seq: SeqNum,
    pub(super) ack: Option<SeqNum>,
}

/// One TCP connection (RFC 9293 §3.3.1 variables plus timers and congestion state).
#[derive(Debug)]
pub struct Tcb {
    pub(super) state: State,
    pub(super) local: SocketAddrV4,
    pub(super) remote: SocketAddrV4,
    pub(super) cfg: TcpConfig,
    pub(super) active_open: bool,

    // Send sequence space.
    pub(super) iss: SeqNum,
    pub(super) snd_una: SeqNum,
    /// Next sequence number to send (moves back to snd_una on RTO).
    pub(super) snd_nxt: SeqNum,
    /// One past the highest sequence number ever sent.
    pub(super) snd_max: SeqNum,
    /// Peer's window, bytes (already scaled).
    pub(super) snd_wnd: usize,
    pub(super) max_snd_wnd: usize,
    pub(super) snd_wl1: SeqNum,
    pub(super) snd_wl2: SeqNum,
    pub(super) snd_wscale: u8,
    /// Sequence number of SendBuffer offset 0.
    pub(super) tx_base: SeqNum,
    /// The application closed its sending side: FIN after the SendBuffer's bytes.
    pub(super) fin_queued: bool,
    /// Sequence number of our FIN once sent.
    pub(super) fin_seq: Option<SeqNum>,
    /// Effective send MSS: payload bytes per segment (RFC 9293 §3.7.1).
    pub(super) eff_mss: usize,

    // Receive sequence space.
    pub(super) irs: SeqNum,
    pub(super) rcv_nxt: SeqNum,
    /// Right edge of the window we advertised last (never moves left).
    pub(super) rcv_adv: SeqNum,
    pub(super) rcv_wscale: u8,
    /// Window offered in our SYN (unscaled), to set rcv_adv once rcv_nxt is known.
    pub(super) syn_window: usize,
    pub(super) last_ack_sent: SeqNum,
    pub(super) ooo: Reassembly,
    /// A FIN seen beyond rcv_nxt, processed when rcv_nxt reaches it.
    pub(super) ooo_fin: Option<SeqNum>,

    // Options (RFC 7323).
    pub(super) ws_enabled: bool,
    pub(super) ts_enabled: bool,
    pub(super) ts_recent: u32,
    pub(super) ts_offset: u32,

    // ACK generation.
    pub(super) ack_now: bool,
    /// Duplicate ACKs owed, one per out-of-order segment since rcv_nxt last
    /// moved, so that a batch of arrivals still yields one dupack each.
    pub(super) dupacks_owed: u32,
    /// Receiver: the rcv_nxt values at which an ACK fell due while one
    /// batch of segments was processed (a filled hole, every second
    /// full-sized segment: RFC 5681 §4.2), oldest first. Each goes out as
    /// its own ACK before the one for the whole batch, as a receiver that
    /// ACKs segment by segment would send them, so that one lost ACK does
    /// not hide the batch from the sender.
    pub(super) ack_points: [SeqNum; MAX_ACK_POINTS],
    pub(super) ack_points_len: usize,
    pub(super) delack_deadline: Option<Instant>,
    pub(super) window_update: bool,

    // Buffer auto-tuning (see `autotune`).
    /// Bytes delivered in order in the best round trip measured so far.
    pub(super) rcv_space: usize,
    /// rcv_nxt and the time when the current measurement began.
    pub(super) rcv_space_seq: SeqNum,
    pub(super) rcv_space_time: Instant,
    /// The receiver's RTT estimate from echoed timestamps, if any.
    pub(super) rcv_rtt: Option<Duration>,
    /// The receive buffer auto-tuning asks for, bytes.
    pub(super) rcv_buf_want: usize,
    /// The send buffer was set (SO_SNDBUF): it no longer follows cwnd.
    pub(super) snd_buf_locked: bool,

    // Timers and retransmission.
    pub(super) rto: RtoEstimator,
    pub(super) rto_deadline: Option<Instant>,
    pub(super) retries: u32,
    /// The one segment being timed (Karn): (end sequence, send time).
    pub(super) rtt_timing: Option<(SeqNum, Instant)>,
    /// A retransmission invalidated timing; a timestamp sample may replace it.
    pub(super) karn_blocked: bool,
    pub(super) persist_deadline: Option<Instant>,
    pub(super) persist_shift: u32,
    pub(super) probe_pending: bool,
    pub(super) time_wait_deadline: Option<Instant>,

    // Congestion control and loss recovery.
    pub(super) cc: Cc,
    /// Congestion-window validation (RFC 9438 §5.8, Linux's
    /// `tcp_cwnd_validate`): whether cwnd limited sending in the window of
    /// data that ends at `cwnd_usage_end`, and the largest flight (bytes)
    /// seen in it. cwnd grows on ACKs only while it is used (see
    /// `Tcb::cwnd_used`).
    pub(super) cwnd_limited: bool,
    pub(super) max_flight: usize,
    pub(super) cwnd_usage_end: SeqNum,
    /// Duplicate ACKs in a row (RFC 5681 §2), outside recovery.
    pub(super) dupacks: u32,
    /// In fast recovery (RFC 5681 §3.2 / RFC 6675 §5) until `recover` is acked.
    pub(super) in_recovery: bool,
    /// Proportional Rate Reduction state of the SACK recovery in progress
    /// (RFC 6937), None outside one.
    pub(super) prr: Option<super::recovery::Prr>,
    /// SACKed bytes after the previous ACK (for RFC 6937 DeliveredData).
    pub(super) sacked_prev: usize,
    /// RFC 6582 `recover`: snd_max when recovery (or an RTO) began.
    pub(super) recover: SeqNum,
    /// Retransmission queue and SACK scoreboard.
    pub(super) sb: Scoreboard,
    /// SACK negotiated (both SYNs carried SACK-permitted).
    pub(super) sack_ok: bool,
    pub(super) undo: Option<Undo>,
    /// Our timestamp clock when the first RTO of the current episode
    /// fired: an ACK echoing an older TSval answers an original
    /// transmission, so the RTO was spurious (RFC 3522, Linux's
    /// `retrans_stamp`).
    pub(super) rto_tsval: Option<u32>,
    pub(super) rack: Rack,
    pub(super) tlp: Tlp,
    /// Receiver: sequence numbers of recently received out-of-order
    /// segments, most recent first, to build SACK blocks.
    pub(super) sack_recent: [SeqNum; SACK_RECENT],
    pub(super) sack_recent_len: usize,
    /// Receiver: a duplicate to report in the next ACK's first block (RFC 2883).
    pub(super) dsack: Option<(SeqNum, SeqNum)>,
    // ECN (RFC 3168, RFC 8257).
    pub(super) ecn_ok: bool,
    /// The IP header of the segment passed to the next `input` had CE.
    pub(super) rx_ce: bool,
    /// Receiver: set ECE on our ACKs (classic: until CWR; DCTCP: CE state).
    pub(super) ece: bool,
    /// Sender: set CWR on the next new data segment.
    pub(super) cwr_pending: bool,
    /// Sender: no new ECN reduction until snd_una passes this.
    pub(super) ecn_recover: SeqNum,
    pub(super) rexmit_one: bool,
    pub(super) syn_retransmitted: bool,

    // Keepalive, challenge-ACK limit, orphan timeout.
    /// When the last segment arrived (or the Tcb was created).
    pub(super) rcv_time: Instant,
    pub(super) ka_deadline: Option<Instant>,
    pub(super) ka_probes: u32,
    pub(super) ka_pending: bool,
    /// Start of the current one-second challenge-ACK budget and its use.
    pub(super) ca_window: Instant,
    pub(super) ca_count: u32,
    /// The application has let go of the connection (see `orphan`).
    pub(super) orphaned: bool,
    pub(super) fin_wait2_deadline: Option<Instant>,

    pub(super) pending_rst: Option<PendingRst>,
    /// SendBuffer length at the last call that saw it (for `has_output`).
    pub(super) tx_len_seen: usize,
    /// When a data segment (new or retransmitted) last went out: the start
    /// of an idle period (Linux's `lsndtime`).
    pub(super) last_data_sent: Option<Instant>,
    /// Largest payload of one new-data segment handed to the port for
    /// segmentation (bytes; 0 or at most the MSS: no TSO). Set by the
    /// engine before `poll_output`.
    pub(crate) gso_max: usize,
    pub(super) stats: TcbStats,
}

/// Smallest shift that lets the 16-bit window field cover `buf` bytes (RFC 7323 §2.3).
pub(super) fn wscale_for(buf: usize) -> u8 {
    let mut shift = 0;
    while shift < MAX_WSCALE && (buf >> shift) > 0xffff {
        shift += 1;
    }
    shift
}

impl Tcb {
    fn new(
        cfg: &TcpConfig,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNum,
        state: State,
        now: Instant,
    ) -> Tcb {
        let eff_mss = usize::from(cfg.mss).clamp(MIN_MSS, DEFAULT_MSS);
        Tcb {
            state,
            local,
            remote,
            cfg: cfg.clone(),
            active_open: state == State::SynSent,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNum(0),
            snd_wl2: iss,
            snd_wscale: 0,
            tx_base: iss + 1,
            fin_queued: false,
            fin_seq: None,
            eff_mss,
            irs: SeqNum(0),
            rcv_nxt: SeqNum(0),
            rcv_adv: SeqNum(0),
            rcv_wscale: 0,
            syn_window: 0,
            last_ack_sent: SeqNum(0),
            ooo: Reassembly::new(cfg.rcv_buf, cfg.ooo_max_segments),
            ooo_fin: None,
            ws_enabled: false,
            ts_enabled: false,
            ts_recent: 0,
            // RFC 7323 §5.4 recommends a per-connection random offset; the ISN is one.
            ts_offset: iss.0,
            ack_now: false,
            dupacks_owed: 0,
            ack_points: [SeqNum(0); MAX_ACK_POINTS],
            ack_points_len: 0,
            delack_deadline: None,
            window_update: false,
            rcv_space: 0,
            rcv_space_seq: SeqNum(0),
            rcv_space_time: now,
            rcv_rtt: None,
            rcv_buf_want: cfg.rcv_buf,
            snd_buf_locked: false,
            rto: RtoEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max),
            rto_deadline: None,
            retries: 0,
            rtt_timing: None,
            karn_blocked: false,
            persist_deadline: None,
            persist_shift: 0,
            probe_pending: false,
            time_wait_deadline: None,
            cc: Cc::new(cfg.cc, eff_mss),
            cwnd_limited: false,
            max_flight: 0,
            last_data_sent: None,
            cwnd_usage_end: iss,
            dupacks: 0,
            in_recovery: false,
            prr: None,
            sacked_prev: 0,
            recover: iss,
            sb: Scoreboard::new(cfg.max_segments_in_flight),
            sack_ok: false,
            undo: None,
            rto_tsval: None,
            rack: Rack::default(),
            tlp: Tlp::default(),
            sack_recent: [SeqNum(0); SACK_RECENT],
            sack_recent_len: 0,
            dsack: None,
            ecn_ok: false,
            rx_ce: false,
            ece: false,
            cwr_pending: false,
            ecn_recover: iss,
            rexmit_one: false,
            syn_retransmitted: false,
            rcv_time: now,
            ka_deadline: None,
            ka_probes: 0,
            ka_pending: false,
            ca_window: now,
            ca_count: 0,
            orphaned: false,
            fin_wait2_deadline: None,
            pending_rst: None,
            tx_len_seen: 0,
            gso_max: 0,
            stats: TcbStats::default(),
        }
    }

    /// Active open (RFC 9293 §3.10.1): a Tcb in SYN-SENT; the SYN goes out on
    /// the next `poll_output`. `iss` from [`IsnGenerator`](super::IsnGenerator).
    /// Allocates the out-of-order store (`cfg.rcv_buf` bytes).
    pub fn connect(
        cfg: &TcpConfig,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNum,
        now: Instant,
    ) -> Tcb {
        let mut tcb = Tcb::new(cfg, local, remote, iss, State::SynSent, now);
        tcb.rcv_wscale = if cfg.window_scaling {
            wscale_for(cfg.rcv_buf.max(cfg.rcv_buf_max))
        } else {
            0
        };
        tcb
    }

    /// Passive open: a SYN arrived on a listening port (RFC 9293 §3.10.7.2).
    /// Returns a Tcb in SYN-RECEIVED whose SYN-ACK goes out on the next
    /// `poll_output`, or `None` if `syn` is not a plain SYN (RST, ACK or FIN
    /// set; the caller answers an ACK with [`reply_rst`](super::reply_rst)).
    /// Data carried on the SYN is not accepted (the peer retransmits it).
    pub fn accept(
        cfg: &TcpConfig,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        syn: &TcpRepr,
        iss: SeqNum,
        now: Instant,
    ) -> Option<Tcb> {
        let f = syn.flags;
        if !f.syn() || f.rst() || f.ack() || f.fin() {
            return None;
        }
        let mut tcb = Tcb::new(cfg, local, remote, iss, State::SynReceived, now);
        tcb.irs = syn.seq;
        tcb.rcv_nxt = syn.seq + 1;
        tcb.rcv_adv = tcb.rcv_nxt;
        tcb.last_ack_sent = tcb.rcv_nxt;
        tcb.negotiate(&syn.options);
        // RFC 3168 §6.1.1: an ECN-setup SYN has ECE and CWR.
        tcb.ecn_ok = tcb.ecn_offered() && f.ece() && f.cwr();
        // The window of a SYN is never scaled (RFC 7323 §2.2).
        tcb.snd_wnd = usize::from(syn.window);
        tcb.max_snd_wnd = tcb.snd_wnd;
        tcb.snd_wl1 = syn.seq;
        tcb.snd_wl2 = iss;
        Some(tcb)
    }

    /// Applies the options of the peer's SYN: MSS (RFC 9293 §3.7.1: default
    /// 536, effective MSS = min(peer, ours) minus option bytes), window scale
    /// and timestamps (RFC 7323: in use only if both SYNs carry them).
    pub(super) fn negotiate(&mut self, opts: &TcpOptions) {
        let peer_mss = opts.mss.map_or(DEFAULT_MSS, usize::from);
        self.ws_enabled = self.cfg.window_scaling && opts.window_scale.is_some();
        if self.ws_enabled {
            self.snd_wscale = opts.window_scale.unwrap_or(0).min(MAX_WSCALE);
            self.rcv_wscale = wscale_for(self.cfg.rcv_buf.max(self.cfg.rcv_buf_max));
        } else {
            self.snd_wscale = 0;
            self.rcv_wscale = 0;
        }
        self.sack_ok = self.cfg.sack && opts.sack_permitted;
        self.ts_enabled = false;
        if let (true, Some((tsval, _))) = (self.cfg.timestamps, opts.timestamps) {
            self.ts_enabled = true;
            self.ts_recent = tsval;
        }
        let opt_len = if self.ts_enabled { TS_OPTION_LEN } else { 0 };
        self.eff_mss = peer_mss
            .min(usize::from(self.cfg.mss))
            .saturating_sub(opt_len)
            .max(MIN_MSS);
    }

    /// Enters ESTABLISHED (or FIN-WAIT-1 if the app already closed) and sets
    /// the initial window: RFC 6928 IW, or 1 MSS if the SYN had to be
    /// retransmitted (RFC 5681 §3.1).
    pub(super) fn establish(&mut self, ev: &mut super::Events) {
        self.state = if self.fin_queued {
            State::FinWait1
        } else {
            State::Established
        };
        let iw = if self.syn_retransmitted {
            self.eff_mss
        } else {
            self.eff_mss * self.cfg.initial_cwnd_segments.max(1) as usize
        };
        self.cc = Cc::new(self.cfg.cc, iw);
        self.recover = self.iss;
        self.ecn_recover = self.iss;
        self.retries = 0;
        self.start_rcv_space();
        ev.connected = true;
        ev.writable = true;
    }

    /// Enters TIME-WAIT for 2*MSL (RFC 9293 §3.10.7.4); other timers stop.
    pub(super) fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.rto_deadline = None;
        self.persist_deadline = None;
        self.probe_pending = false;
        self.rexmit_one = false;
        self.stop_loss_timers();
        self.time_wait_deadline = Some(now + self.cfg.time_wait);
    }

    /// Enters CLOSED: every timer stops; a pending RST still goes out.
    pub(super) fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.rto_deadline = None;
        self.delack_deadline = None;
        self.persist_deadline = None;
        self.time_wait_deadline = None;
        self.probe_pending = false;
        self.rexmit_one = false;
        self.ack_now = false;
        self.dupacks_owed = 0;
        self.ack_points_len = 0;
        self.window_update = false;
        self.stop_loss_timers();
    }

    /// Stops RACK, TLP, keepalive and FIN-WAIT-2 timers (CLOSED, TIME-WAIT).
    fn stop_loss_timers(&mut self) {
        self.rack.deadline = None;
        self.tlp = Tlp::default();
        self.ka_deadline = None;
        self.ka_pending = false;
        self.fin_wait2_deadline = None;
    }

    /// Queues an ACK in answer to an unacceptable or suspicious segment
    /// (RFC 9293 §3.10.7.4 "challenge ACK", RFC 5961), at most
    /// `challenge_ack_limit` per second (RFC 5961 §7); beyond it the
    /// segment is dropped silently.
    pub(super) fn challenge_ack(&mut self) {
        let now = self.rcv_time;
        if now - self.ca_window >= Duration::from_secs(1) {
            self.ca_window = now;
            self.ca_count = 0;
        }
        let limit = self.cfg.challenge_ack_limit;
        if limit != 0 && self.ca_count >= limit {
            self.stats.challenge_acks_suppressed += 1;
            return;
        }
        self.ca_count += 1;
        self.stats.challenge_acks += 1;
        self.ack_now = true;
    }

    /// Timestamp clock (RFC 7323 §5.4): 1 ms ticks plus a per-connection offset.
    pub(super) fn ts_val(&self, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }

    /// The application closed its sending side (shutdown(Write) or close):
    /// a FIN follows every byte now in the SendBuffer, whose length is final
    /// from here on (RFC 9293 §3.10.4). ESTABLISHED → FIN-WAIT-1,
    /// CLOSE-WAIT → LAST-ACK; in SYN-SENT / SYN-RECEIVED the FIN waits for
    /// the handshake; LISTEN → CLOSED; otherwise nothing changes.
    pub fn close(&mut self) {
        match self.state {
            State::Listen => self.enter_closed(),
            State::SynSent | State::SynReceived => self.fin_queued = true,
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Abort (RFC 9293 §3.10.5): in SYN-RECEIVED, ESTABLISHED, FIN-WAIT-1/2
    /// and CLOSE-WAIT an RST `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK>` goes out
    /// on the next `poll_output`; the Tcb is CLOSED at once.
    pub fn abort(&mut self) {
        if matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
        ) {
            self.pending_rst = Some(PendingRst {
                seq: self.snd_max,
                ack: Some(self.rcv_nxt),
            });
        }
        self.enter_closed();
    }

    /// True if this end offers ECN: configured, or DCTCP (RFC 8257 §3).
    pub(super) fn ecn_offered(&self) -> bool {
        self.cfg.ecn || self.cfg.cc == CcKind::Dctcp
    }

    /// Selects the congestion-control algorithm (socket option, like Linux's
    /// `TCP_CONGESTION`). Before the handshake completes this only changes
    /// the configuration (choose DCTCP before the SYN goes out to offer
    /// ECN). Later, the new algorithm starts from the current cwnd and
    /// ssthresh with fresh internal state; recovery in progress continues.
    /// DCTCP without negotiated ECN reacts to loss only, as NewReno.
    pub fn set_cc(&mut self, kind: CcKind) {
        self.cfg.cc = kind;
        if self.cc.kind() == kind {
            return;
        }
        let (cwnd, ssthresh) = (self.cc.cwnd(), self.cc.ssthresh());
        self.cc = Cc::new(kind, cwnd);
        self.cc.set_ssthresh(ssthresh);
        self.undo = None;
    }

    /// The congestion-control algorithm in use.
    pub fn cc(&self) -> CcKind {
        self.cc.kind()
    }

    /// DCTCP's alpha (RFC 8257 §3.3), the estimated fraction of marked
    /// bytes scaled by 1024, when DCTCP is in use.
    pub fn dctcp_alpha(&self) -> Option<u32> {
        match &self.cc {
            Cc::Dctcp(d) => Some(d.alpha()),
            _ => None,
        }
    }

    /// True if SACK (RFC 2018) was negotiated.
    pub fn sack_enabled(&self) -> bool {
        self.sack_ok
    }

    /// True if ECN (RFC 3168) was negotiated.
    pub fn ecn_enabled(&self) -> bool {
        self.ecn_ok
    }

    /// The IP ECN field of the segment the engine passes to the next
    /// [`input`](Tcb::input) call: `ce` is true for Congestion Experienced
    /// (0b11). Applies to that one call only; without it a segment counts
    /// as not marked. (RFC 3168 §6.1.3.)
    pub fn input_ecn(&mut self, ce: bool) {
        self.rx_ce = ce;
    }

    /// Turns keepalive probes on or off (SO_KEEPALIVE); the idle time,
    /// interval and count come from the configuration (RFC 1122 §4.2.3.6).
    pub fn set_keepalive(&mut self, on: bool) {
        self.cfg.keepalive = on;
        self.ka_probes = 0;
        self.ka_deadline = None;
        self.update_keepalive();
    }

    /// Sets the keepalive idle time, probe interval and probe count
    /// (TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT).
    pub fn set_keepalive_params(&mut self, idle: Duration, interval: Duration, count: u32) {
        self.cfg.keepalive_idle = idle;
        self.cfg.keepalive_interval = interval;
        self.cfg.keepalive_count = count;
        self.ka_deadline = None;
        self.update_keepalive();
    }

    /// The application closed the socket and will not read or write it
    /// again (call after `close`). An orphan in FIN-WAIT-2 waits at most
    /// `fin_wait2_timeout` for the peer's FIN, then is CLOSED (Linux
    /// tcp_fin_timeout; RFC 9293 leaves FIN-WAIT-2 unbounded).
    pub fn orphan(&mut self, now: Instant) {
        self.orphaned = true;
        self.update_fin_wait2(now);
    }

    /// ICMP "fragmentation needed" (RFC 1191) reported a next-hop MTU of
    /// `mtu` bytes for a segment of ours starting at `seq`. Accepted only
    /// when `seq` lies in `[snd_una, snd_max)` (RFC 5927 §4.1, against blind
    /// injection); then the MSS drops to fit (not below
    /// 512 bytes, Linux's min_pmtu of 552 less headers) and segments in flight that
    /// no longer fit are retransmitted in pieces. Not a congestion signal:
    /// cwnd is unchanged. Returns true when the MSS went down.
    pub fn on_path_mtu(&mut self, mtu: usize, seq: SeqNum) -> bool {
        if !self.state.is_synchronized() || seq < self.snd_una || seq >= self.snd_max {
            return false;
        }
        let opt_len = if self.ts_enabled { TS_OPTION_LEN } else { 0 };
        let mss = mtu.saturating_sub(40 + opt_len).max(PMTU_MIN_MSS);
        if mss >= self.eff_mss {
            return false;
        }
        self.eff_mss = mss;
        self.stats.pmtu_reductions += 1;
        self.sb.mark_oversized_lost(mss);
        true
    }

    /// Per-connection offset of the timestamp clock (RFC 7323 §5.4), for
    /// example from [`IsnGenerator::ts_offset`](super::IsnGenerator::ts_offset).
    /// Call right after `connect` / `accept`, before the first `poll_output`;
    /// without it the offset is the ISS.
    pub fn set_ts_offset(&mut self, offset: u32) {
        if self.snd_max == self.iss {
            self.ts_offset = offset;
        }
    }

    /// Turns Nagle's algorithm off (`true`) or on (RFC 9293 §3.7.4).
    pub fn set_nodelay(&mut self, on: bool) {
        self.cfg.nodelay = on;
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Local address and port.
    pub fn local(&self) -> SocketAddrV4 {
        self.local
    }

    /// Remote address and port.
    pub fn remote(&self) -> SocketAddrV4 {
        self.remote
    }

    /// Oldest unacknowledged sequence number.
    pub fn snd_una(&self) -> SeqNum {
        self.snd_una
    }

    /// Next sequence number to send.
    pub fn snd_nxt(&self) -> SeqNum {
        self.snd_nxt
    }

    /// Peer's receive window, bytes (scaled).
    pub fn snd_wnd(&self) -> usize {
        self.snd_wnd
    }

    /// Next sequence number expected from the peer.
    pub fn rcv_nxt(&self) -> SeqNum {
        self.rcv_nxt
    }

    /// Receive window currently advertised, bytes.
    pub fn rcv_wnd(&self) -> usize {
        if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv - self.rcv_nxt
        } else {
            0
        }
    }

    /// Congestion window, bytes.
    pub fn cwnd(&self) -> usize {
        self.cc.cwnd()
    }

    /// Slow-start threshold, bytes (`usize::MAX` until the first loss).
    pub fn ssthresh(&self) -> usize {
        self.cc.ssthresh()
    }

    /// True while in fast recovery (NewReno, or SACK-based per RFC 6675).
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// Smoothed RTT in microseconds, 0 before the first sample.
    pub fn srtt_us(&self) -> u64 {
        self.rto.srtt().map_or(0, |d| d.as_micros() as u64)
    }

    /// RTT variation in microseconds.
    pub fn rttvar_us(&self) -> u64 {
        self.rto.rttvar().as_micros() as u64
    }

    /// Current retransmission timeout (including backoff).
    pub fn rto(&self) -> Duration {
        self.rto.rto()
    }

    /// Bytes sent and not yet acknowledged (snd_max - snd_una, SYN/FIN count one).
    pub fn bytes_in_flight(&self) -> usize {
        self.snd_max - self.snd_una
    }

    /// Effective send MSS: payload bytes per full segment.
    pub fn mss(&self) -> usize {
        self.eff_mss
    }

    /// Send and receive window scale shifts, if window scaling is in use.
    pub fn window_scale(&self) -> Option<(u8, u8)> {
        self.ws_enabled
            .then_some((self.snd_wscale, self.rcv_wscale))
    }

    /// True if timestamps (RFC 7323) are in use.
    pub fn timestamps(&self) -> bool {
        self.ts_enabled
    }

    /// Consecutive retransmissions of the current segment.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Intervals in the out-of-order queue.
    pub fn ooo_intervals(&self) -> usize {
        self.ooo.len()
    }

    /// Bytes the peer has SACKed above snd_una (RFC 2018).
    pub fn sacked_bytes(&self) -> usize {
        self.sb.sacked_bytes()
    }

    /// Segments in the retransmission queue (sent, not cumulatively acked).
    pub fn segments_in_flight(&self) -> usize {
        self.sb.len()
    }

    /// Counters.
    pub fn stats(&self) -> &TcbStats {
        &self.stats
    }
}
