//! Per-connection TCP settings.

use core::time::Duration;

use super::cc::CcKind;

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
    /// With SACK, the out-of-order arrivals of one receive batch beyond
    /// the first three per rcv_nxt share one ACK, whose SACK blocks report
    /// them all, instead of a duplicate ACK each: the batch is the
    /// compression window of Linux's `tcp_comp_sack` (false is its
    /// `tcp_comp_sack_nr = 0`). Default true.
    pub sack_compress: bool,
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
    /// `tcp_rmem[2]`; see [`Tcb::rcv_buf_wanted`](crate::tcp::Tcb::rcv_buf_wanted)). The advertised window
    /// never exceeds it and the window scale (RFC 7323 §2.3) is chosen for
    /// it. At most `rcv_buf`: the buffer stays as it is (as after SO_RCVBUF
    /// on Linux). Default 6 MiB (Linux's default `tcp_rmem[2]`).
    pub rcv_buf_max: usize,
    /// The most the send buffer grows to, bytes: the application is
    /// offered a TX ring of four times the congestion window, up to this
    /// (as Linux's `tcp_sndbuf_expand` up to `tcp_wmem[2]`; see
    /// [`Tcb::snd_buf_wanted`](crate::tcp::Tcb::snd_buf_wanted)). Default 4 MiB (Linux's default).
    pub snd_buf_max: usize,
    /// Congestion control algorithm (a socket option, see [`Tcb::set_cc`](crate::tcp::Tcb::set_cc)).
    /// Default CUBIC, as Linux.
    pub cc: CcKind,
    /// Pace data at the rate the congestion controller asks for (BBR;
    /// the others ask for none), as Linux's internal pacing; off, BBR acts
    /// through its cwnd only. Default on.
    pub pacing: bool,
    /// Offer SACK (RFC 2018) and, once negotiated, recover from losses with
    /// the scoreboard (RFC 6675) and RACK-TLP (RFC 8985). Default true.
    pub sack: bool,
    /// Use RACK-TLP (RFC 8985) time-based loss detection and tail loss
    /// probes when SACK is in use. Default true.
    pub rack_tlp: bool,
    /// Offer ECN (RFC 3168). Default false; always offered when `cc` is DCTCP.
    pub ecn: bool,
    /// Capacity of the retransmission queue / scoreboard in segments when
    /// the connection starts (allocated and written when the Tcb is
    /// created, 56 bytes each). It doubles, a few times at most, when the
    /// flight needs more: up to `snd_buf_max` bytes of full segments.
    /// Default 64 (3 KiB): an idle or request/response connection never
    /// needs more (1024, the old default, made 56 KiB of every connection's
    /// 74 KiB with 4 KiB rings).
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
    /// TCP_USER_TIMEOUT (RFC 5482), as Linux applies it: data left
    /// unacknowledged this long since it was sent (or since the last ACK
    /// that advanced), or a zero window that stays shut this long, gives
    /// the connection up with `TimedOut`, before the retry limit; the
    /// retransmission and probe timers are clamped to its end. Zero (the
    /// default): the retry limit alone.
    pub user_timeout: Duration,
    /// Most challenge ACKs per second (RFC 5961 §7); 0 means no limit.
    /// Default 1000 (Linux tcp_challenge_ack_limit, here per connection).
    pub challenge_ack_limit: u32,
    /// How long an orphaned connection (see [`Tcb::orphan`](crate::tcp::Tcb::orphan)) may stay in
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
            sack_compress: true,
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
            pacing: true,
            sack: true,
            rack_tlp: true,
            ecn: false,
            max_segments_in_flight: 64,
            slow_start_after_idle: true,
            keepalive: false,
            keepalive_idle: Duration::from_secs(7200),
            keepalive_interval: Duration::from_secs(75),
            keepalive_count: 9,
            user_timeout: Duration::ZERO,
            challenge_ack_limit: 1000,
            fin_wait2_timeout: Duration::from_secs(60),
        }
    }
}
