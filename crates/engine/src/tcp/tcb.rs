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

use super::congestion::NewReno;
use super::reassembly::Reassembly;
use super::rto::RtoEstimator;

/// Bytes of the timestamps option in every segment once negotiated
/// (10 bytes + 2 NOPs, RFC 7323 Appendix A layout).
pub(super) const TS_OPTION_LEN: usize = 12;
/// Send MSS assumed when the peer's SYN carries no MSS option (RFC 9293 §3.7.1).
pub(super) const DEFAULT_MSS: usize = 536;
/// Floor of the effective send MSS, so that a bogus peer MSS (0, 1) cannot
/// make segments empty.
pub(super) const MIN_MSS: usize = 64;
/// Most duplicate ACKs owed at once (out-of-order arrivals in one batch).
pub(super) const MAX_DUPACKS_OWED: u32 = 32;
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
    /// Receive buffer in bytes (the application's RX ring capacity). The
    /// window scale is chosen from it and the out-of-order store has this size.
    /// Default 256 KiB.
    pub rcv_buf: usize,
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
}

/// Per-connection counters (for `corestack ss` and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcbStats {
    /// Segments sent again (RTO go-back, fast retransmit, partial ACK, SYN).
    pub retransmits: u64,
    /// Fast retransmits entered (third duplicate ACK).
    pub fast_retransmits: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Duplicate ACKs received (RFC 5681 §2).
    pub dup_acks: u64,
    /// Out-of-order payload bytes dropped because the queue was full.
    pub ooo_dropped_bytes: u64,
    /// Challenge ACKs sent (RFC 5961 / RFC 9293 §3.10.7.4).
    pub challenge_acks: u64,
    /// Segments dropped by PAWS (RFC 7323 §5).
    pub paws_dropped: u64,
    /// Zero-window probes sent (RFC 9293 §3.8.6.1).
    pub window_probes: u64,
}

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
    pub(super) delack_deadline: Option<Instant>,
    pub(super) window_update: bool,

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

    // Congestion control.
    pub(super) cc: NewReno,
    pub(super) rexmit_one: bool,
    pub(super) syn_retransmitted: bool,

    pub(super) pending_rst: Option<PendingRst>,
    /// SendBuffer length at the last call that saw it (for `has_output`).
    pub(super) tx_len_seen: usize,
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
            delack_deadline: None,
            window_update: false,
            rto: RtoEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max),
            rto_deadline: None,
            retries: 0,
            rtt_timing: None,
            karn_blocked: false,
            persist_deadline: None,
            persist_shift: 0,
            probe_pending: false,
            time_wait_deadline: None,
            cc: NewReno::new(eff_mss, iss),
            rexmit_one: false,
            syn_retransmitted: false,
            pending_rst: None,
            tx_len_seen: 0,
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
        _now: Instant,
    ) -> Tcb {
        let mut tcb = Tcb::new(cfg, local, remote, iss, State::SynSent);
        tcb.rcv_wscale = if cfg.window_scaling {
            wscale_for(cfg.rcv_buf)
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
        _now: Instant,
    ) -> Option<Tcb> {
        let f = syn.flags;
        if !f.syn() || f.rst() || f.ack() || f.fin() {
            return None;
        }
        let mut tcb = Tcb::new(cfg, local, remote, iss, State::SynReceived);
        tcb.irs = syn.seq;
        tcb.rcv_nxt = syn.seq + 1;
        tcb.rcv_adv = tcb.rcv_nxt;
        tcb.last_ack_sent = tcb.rcv_nxt;
        tcb.negotiate(&syn.options);
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
            self.rcv_wscale = wscale_for(self.cfg.rcv_buf);
        } else {
            self.snd_wscale = 0;
            self.rcv_wscale = 0;
        }
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
        self.cc = NewReno::new(iw, self.iss);
        self.retries = 0;
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
        self.window_update = false;
    }

    /// Queues an ACK in answer to an unacceptable or suspicious segment
    /// (RFC 9293 §3.10.7.4 "challenge ACK", RFC 5961).
    pub(super) fn challenge_ack(&mut self) {
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

    /// True while in NewReno fast recovery.
    pub fn in_recovery(&self) -> bool {
        self.cc.in_recovery()
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

    /// Counters.
    pub fn stats(&self) -> &TcbStats {
        &self.stats
    }
}
