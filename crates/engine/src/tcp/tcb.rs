//! The transmission control block (RFC 9293 §3.3.1): the per-connection
//! variables, in parts that match the files that change them, socket
//! options and accessors. Opening is in `handshake`, segment arrival in
//! `input`, sending in `output`, timers in `timer`, closing in `teardown`;
//! settings in `config`, the engine contract in `api`, counters in `stats`.

use core::time::Duration;
use std::net::SocketAddr;

use wire::tcp::SackBlock;
use wire::SeqNum;

use crate::time::Instant;

use super::api::State;
use super::cc::{Cc, CcKind, CongestionControl};
use super::config::TcpConfig;
use super::reassembly::Reassembly;
use super::recovery::{Rack, Tlp, Undo};
use super::rst::PendingRst;
use super::rto::RtoEstimator;
use super::scoreboard::Scoreboard;
use super::stats::TcbStats;

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
/// Duplicate ACKs sent per rcv_nxt value, one per out-of-order arrival
/// (the sender's dupack threshold, RFC 5681 §3.2); later arrivals of one
/// batch share one ACK (see `TcpConfig::sack_compress`).
pub(super) const DUPACKS_IMMEDIATE: u32 = 3;
/// Most intermediate ACKs owed at once (see `Tcb::ack_points`).
pub(super) const MAX_ACK_POINTS: usize = 4;
/// Largest window scale shift (RFC 7323 §2.3).
pub(super) const MAX_WSCALE: u8 = 14;

/// Most SACK blocks remembered for the next ACKs (RFC 2018 §4): the
/// ranges of the out-of-order arrivals of one batch that the ACKs after it
/// report (three blocks an ACK with timestamps).
pub(super) const SACK_RECENT: usize = 8;
/// Most ACKs of earlier states of one batch owed at once (see
/// `AckState::snaps`).
pub(super) const MAX_ACK_SNAPS: usize = 6;

/// What one ACK reports: its acknowledgment number and SACK blocks (no
/// D-SACK), as the receiver would have sent it at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct AckView {
    pub(super) ack: SeqNum,
    pub(super) blocks: [SackBlock; 4],
    pub(super) len: u8,
}

impl AckView {
    /// The blocks.
    pub(super) fn blocks(&self) -> &[SackBlock] {
        &self.blocks[..usize::from(self.len)]
    }

    /// True if `later` reports everything this one does: each block lies
    /// below its acknowledgment number or within one of its blocks.
    pub(super) fn covered_by(&self, later: &AckView) -> bool {
        later.ack >= self.ack
            && self.blocks().iter().all(|b| {
                b.right <= later.ack
                    || later
                        .blocks()
                        .iter()
                        .any(|l| l.left <= b.left && b.right <= l.right)
            })
    }
}

/// One TCP connection (RFC 9293 §3.3.1 variables plus timers and congestion
/// state), in parts that match the files that change them.
#[derive(Debug)]
pub struct Tcb {
    pub(super) state: State,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
    pub(super) cfg: TcpConfig,
    /// Opened by connect (SYN-SENT), not by a listener.
    pub(super) active_open: bool,
    /// Send sequence space (RFC 9293 §3.3.1): moved by ACKs (`input`) and
    /// by sending (`output`).
    pub(super) snd: SndSeq,
    /// Receive sequence space: moved by arriving segments (`input`) and by
    /// the windows we advertise (`output`).
    pub(super) rcv: RcvSeq,
    /// Options both SYNs agreed on (`handshake`).
    pub(super) opts: Negotiated,
    /// The ACKs we owe the peer and what they report (`input` decides,
    /// `output` sends; SACK blocks in `recovery`).
    pub(super) ack: AckState,
    /// Retransmission, persist, TIME-WAIT and FIN-WAIT-2 timers (`timer`,
    /// `rto`, `output`).
    pub(super) timers: Timers,
    /// Congestion control (`cc`).
    pub(super) cc: Cc,
    /// Delivery rate estimation (`rate`): feeds BBR.
    pub(super) rate: super::rate::Rate,
    /// Pacing of data segments at BBR's pacing rate (`output`).
    pub(super) pace: Pace,
    /// Whether cwnd limits sending (congestion-window validation, `output`).
    pub(super) cwv: CwndUse,
    /// Loss detection and recovery (`recovery`, `scoreboard`).
    pub(super) rec: Recovery,
    /// ECN (RFC 3168, RFC 8257; `recovery`).
    pub(super) ecn: Ecn,
    /// Keepalive probes (RFC 1122 §4.2.3.6; `timer`).
    pub(super) ka: Keepalive,
    /// The budget of challenge ACKs (RFC 5961 §7).
    pub(super) challenge: ChallengeAcks,
    /// Buffer auto-tuning (`autotune`).
    pub(super) tune: Autotune,
    /// The application has let go of the connection (see `orphan`).
    pub(super) orphaned: bool,
    /// An RST to send on the next `poll_output`.
    pub(super) pending_rst: Option<PendingRst>,
    /// Black-hole detection for path MTU discovery (`plpmtud`).
    pub(super) blackhole: super::plpmtud::Blackhole,
    pub(super) stats: TcbStats,
}

/// Send sequence space (RFC 9293 §3.3.1) and what is sent from it.
#[derive(Debug)]
pub(crate) struct SndSeq {
    pub(super) iss: SeqNum,
    /// SND.UNA: oldest unacknowledged sequence number.
    pub(super) una: SeqNum,
    /// SND.NXT: next sequence number to send (moves back on an RTO).
    pub(super) nxt: SeqNum,
    /// One past the highest sequence number ever sent.
    pub(super) max: SeqNum,
    /// SND.WND: the peer's window, bytes (already scaled).
    pub(super) wnd: usize,
    /// The largest window the peer offered, bytes.
    pub(super) max_wnd: usize,
    /// SND.WL1 / SND.WL2: segment sequence and acknowledgment numbers of
    /// the last window update.
    pub(super) wl1: SeqNum,
    pub(super) wl2: SeqNum,
    /// The peer's window scale shift (RFC 7323).
    pub(super) wscale: u8,
    /// Sequence number of SendBuffer offset 0.
    pub(super) base: SeqNum,
    /// The application closed its sending side: FIN after the SendBuffer's bytes.
    pub(super) fin_queued: bool,
    /// Sequence number of our FIN once sent.
    pub(super) fin_seq: Option<SeqNum>,
    /// Effective send MSS: payload bytes per segment (RFC 9293 §3.7.1).
    pub(super) mss: usize,
    /// SendBuffer length at the last call that saw it (for `has_output`).
    pub(super) buffered: usize,
    /// When a data segment (new or retransmitted) last went out: the start
    /// of an idle period (Linux's `lsndtime`).
    pub(super) last_data_sent: Option<Instant>,
    /// Largest payload of one new-data segment handed to the port for
    /// segmentation (bytes; 0 or at most the MSS: no TSO). Set by the
    /// engine before `poll_output` ([`Tcb::set_gso_max`]).
    pub(super) gso_max: usize,
    /// The application corked the connection (TCP_CORK): no segment
    /// shorter than the MSS but before a FIN ([`Tcb::set_corked`]).
    pub(super) corked: bool,
}

/// Receive sequence space (RFC 9293 §3.3.1) and what waits in it.
#[derive(Debug)]
pub(super) struct RcvSeq {
    pub(super) irs: SeqNum,
    /// RCV.NXT: the next sequence number expected.
    pub(super) nxt: SeqNum,
    /// Right edge of the window we advertised last (never moves left).
    pub(super) adv: SeqNum,
    /// Our window scale shift (RFC 7323).
    pub(super) wscale: u8,
    /// Window offered in our SYN (unscaled), to set `adv` once `nxt` is known.
    pub(super) syn_window: usize,
    /// Last.ACK.sent (RFC 7323): RCV.NXT in the last ACK we sent.
    pub(super) last_ack_sent: SeqNum,
    /// Out-of-order bytes, bounded.
    pub(super) ooo: Reassembly,
    /// A FIN seen beyond `nxt`, processed when `nxt` reaches it.
    pub(super) ooo_fin: Option<SeqNum>,
    /// When the last segment arrived (or the Tcb was created).
    pub(super) last_seen: Instant,
}

/// What both SYNs agreed on (RFC 7323, RFC 2018).
#[derive(Debug)]
pub(super) struct Negotiated {
    /// Window scaling in use.
    pub(super) ws: bool,
    /// Timestamps in use.
    pub(super) ts: bool,
    /// TS.Recent (RFC 7323 §4.3).
    pub(super) ts_recent: u32,
    /// Our timestamp clock's offset (RFC 7323 §5.4).
    pub(super) ts_offset: u32,
    /// SACK in use (both SYNs carried SACK-permitted).
    pub(super) sack: bool,
}

/// ACKs owed to the peer and what they report.
#[derive(Debug)]
pub(super) struct AckState {
    /// An ACK goes out on the next `poll_output`.
    pub(super) now: bool,
    /// Duplicate ACKs owed, one per out-of-order segment since rcv.nxt last
    /// moved, so that a batch of arrivals still yields one dupack each.
    pub(super) dupacks_owed: u32,
    /// The rcv.nxt the duplicate ACKs counted in `dupacks_sent` repeated.
    pub(super) dupacks_at: SeqNum,
    /// Duplicate ACKs sent for `dupacks_at`, up to `DUPACKS_IMMEDIATE`.
    pub(super) dupacks_sent: u32,
    /// The rcv.nxt values at which an ACK fell due while one batch of
    /// segments was processed (a filled hole, every second full-sized
    /// segment: RFC 5681 §4.2), oldest first. Each goes out as its own ACK
    /// before the one for the whole batch, as a receiver that ACKs segment
    /// by segment would send them, so that one lost ACK does not hide the
    /// batch from the sender.
    pub(super) points: [SeqNum; MAX_ACK_POINTS],
    pub(super) points_len: usize,
    /// The delayed-ACK timer (RFC 9293 §3.8.6.3).
    pub(super) delack_deadline: Option<Instant>,
    /// A window update is owed (the application read).
    pub(super) window_update: bool,
    /// Sequence numbers of recently received out-of-order segments, most
    /// recent first, to build SACK blocks.
    pub(super) sack_recent: [SeqNum; SACK_RECENT],
    pub(super) sack_recent_len: usize,
    /// ACKs of earlier moments of the batch being processed, oldest first:
    /// each the ACK a receiver that ACKs segment by segment sent just
    /// before an out-of-order arrival pushed one of its blocks out of the
    /// ACK's room (`note_ooo_arrival`). They go out before the batch's own
    /// ACK (`emit_due_ack`), each with the acknowledgment number and blocks
    /// of its moment: blocks of a later state beside an earlier ACK number,
    /// or the batch's ACK number beside older blocks, would report a
    /// segment delivered (a retransmission that filled a hole) without the
    /// ranges that arrived before it, which a sender's RACK then takes for
    /// lost and sends again (RFC 8985 §6.2).
    pub(super) snaps: [AckView; MAX_ACK_SNAPS],
    pub(super) snaps_len: usize,
    /// Segments arrived since the last ACK went out: the state then is not
    /// yet reported.
    pub(super) unreported: bool,
    /// A duplicate to report in the next ACK's first block (RFC 2883).
    pub(super) dsack: Option<(SeqNum, SeqNum)>,
}

/// Retransmission (RFC 6298), persist (RFC 9293 §3.8.6.1) and closing timers.
#[derive(Debug)]
pub(super) struct Timers {
    /// SRTT, RTTVAR and the RTO with its backoff.
    pub(super) rto: RtoEstimator,
    pub(super) rto_deadline: Option<Instant>,
    /// Consecutive retransmissions of the current segment.
    pub(super) retries: u32,
    /// Since when the peer has left the current episode unanswered: the
    /// start of the retransmission timer that first expired (the oldest
    /// unacknowledged data's send, or the last ACK that advanced), or the
    /// first zero-window probe's timer. The user timeout (RFC 5482) counts
    /// from there; an ACK that advances snd_una, or a window that opens,
    /// ends the episode.
    pub(super) unanswered_since: Option<Instant>,
    /// The one segment being timed (Karn): (end sequence, send time).
    pub(super) rtt_timing: Option<(SeqNum, Instant)>,
    /// A retransmission invalidated timing; a timestamp sample may replace it.
    pub(super) karn_blocked: bool,
    /// Our timestamp clock when the first RTO of the current episode
    /// fired: an ACK echoing an older TSval answers an original
    /// transmission, so the RTO was spurious (RFC 3522, Linux's
    /// `retrans_stamp`).
    pub(super) rto_tsval: Option<u32>,
    /// Our SYN had to be sent again (the initial window is then 1 MSS).
    pub(super) syn_retransmitted: bool,
    pub(super) persist_deadline: Option<Instant>,
    /// Persist timer backoff (doublings).
    pub(super) persist_shift: u32,
    /// The persist timer fired: a probe goes out on the next `poll_output`.
    pub(super) probe_pending: bool,
    pub(super) time_wait_deadline: Option<Instant>,
    /// How long an orphan may stay in FIN-WAIT-2.
    pub(super) fin_wait2_deadline: Option<Instant>,
}

/// Congestion-window validation (RFC 9438 §5.8, Linux's
/// `tcp_cwnd_validate`): whether cwnd limited sending in the window of data
/// that ends at `usage_end`, and the largest flight (bytes) seen in it.
/// cwnd grows on ACKs only while it is used (see `Tcb::cwnd_used`).
#[derive(Debug)]
pub(super) struct CwndUse {
    pub(super) limited: bool,
    pub(super) max_flight: usize,
    pub(super) usage_end: SeqNum,
}

/// Loss detection and recovery (RFC 5681, RFC 6582, RFC 6675, RFC 8985).
#[derive(Debug)]
pub(super) struct Recovery {
    /// Duplicate ACKs in a row (RFC 5681 §2), outside recovery.
    pub(super) dupacks: u32,
    /// In fast recovery (RFC 5681 §3.2 / RFC 6675 §5) until `recover` is acked.
    pub(super) active: bool,
    /// Proportional Rate Reduction state of the SACK recovery in progress
    /// (RFC 9937), None outside one.
    pub(super) prr: Option<super::recovery::Prr>,
    /// SACKed bytes after the previous ACK (for RFC 9937 DeliveredData).
    pub(super) sacked_prev: usize,
    /// RFC 6582 `recover`: snd.max when recovery (or an RTO) began.
    pub(super) recover: SeqNum,
    /// Retransmission queue and SACK scoreboard.
    pub(super) sb: Scoreboard,
    /// The congestion state before a reduction that may prove spurious.
    pub(super) undo: Option<Undo>,
    pub(super) rack: Rack,
    pub(super) tlp: Tlp,
    /// The first unacknowledged segment goes out at once, outside the window.
    pub(super) rexmit_one: bool,
}

/// ECN state (RFC 3168, RFC 8257).
#[derive(Debug)]
pub(super) struct Ecn {
    /// ECN negotiated.
    pub(super) ok: bool,
    /// The IP header of the segment passed to the next `input` had CE.
    pub(super) rx_ce: bool,
    /// Receiver: set ECE on our ACKs (classic: until CWR; DCTCP: CE state).
    pub(super) ece: bool,
    /// Sender: set CWR on the next new data segment.
    pub(super) cwr_pending: bool,
    /// Sender: no new ECN reduction until snd.una passes this.
    pub(super) recover: SeqNum,
}

/// Keepalive probes (RFC 1122 §4.2.3.6).
#[derive(Debug)]
pub(super) struct Keepalive {
    pub(super) deadline: Option<Instant>,
    /// Probes sent without an answer.
    pub(super) probes: u32,
    /// A probe goes out on the next `poll_output`.
    pub(super) pending: bool,
}

/// Challenge ACKs sent in the current one-second budget (RFC 5961 §7).
#[derive(Debug)]
pub(super) struct ChallengeAcks {
    /// Start of the current one-second budget.
    pub(super) window: Instant,
    pub(super) count: u32,
}

/// Pacing (`output`): when the congestion controller asks for a pacing
/// rate (BBR), each data segment of `len` bytes moves the earliest
/// departure time of the next one by `len / rate`, as Linux's internal
/// pacing does. Segments go in bursts of about 1 ms of data (the engine's
/// timer tick), so the timer only runs when no ACK comes to clock them.
#[derive(Debug, Default)]
pub(super) struct Pace {
    /// Earliest departure of the next data segment.
    pub(super) next: Instant,
    /// Data waits for `next`: the pacing timer.
    pub(super) deadline: Option<Instant>,
}

/// Buffer auto-tuning (see `autotune`).
#[derive(Debug)]
pub(super) struct Autotune {
    /// Bytes delivered in order in the best round trip measured so far.
    pub(super) rcv_space: usize,
    /// rcv.nxt and the time when the current measurement began.
    pub(super) rcv_space_seq: SeqNum,
    pub(super) rcv_space_time: Instant,
    /// The receiver's RTT estimate from echoed timestamps, if any.
    pub(super) rcv_rtt: Option<Duration>,
    /// The receive buffer auto-tuning asks for, bytes.
    pub(super) rcv_buf_want: usize,
    /// The send buffer was set (SO_SNDBUF): it no longer follows cwnd.
    pub(super) snd_buf_locked: bool,
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
    pub(super) fn new(
        cfg: &TcpConfig,
        local: SocketAddr,
        remote: SocketAddr,
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
            snd: SndSeq {
                iss,
                una: iss,
                nxt: iss,
                max: iss,
                wnd: 0,
                max_wnd: 0,
                wl1: SeqNum(0),
                wl2: iss,
                wscale: 0,
                base: iss + 1,
                fin_queued: false,
                fin_seq: None,
                mss: eff_mss,
                buffered: 0,
                corked: false,
                last_data_sent: None,
                gso_max: 0,
            },
            rcv: RcvSeq {
                irs: SeqNum(0),
                nxt: SeqNum(0),
                adv: SeqNum(0),
                wscale: 0,
                syn_window: 0,
                last_ack_sent: SeqNum(0),
                ooo: Reassembly::new(cfg.rcv_buf, cfg.ooo_max_segments),
                ooo_fin: None,
                last_seen: now,
            },
            opts: Negotiated {
                ws: false,
                ts: false,
                ts_recent: 0,
                // RFC 7323 §5.4 recommends a per-connection random offset; the ISN is one.
                ts_offset: iss.0,
                sack: false,
            },
            ack: AckState {
                now: false,
                dupacks_owed: 0,
                dupacks_at: SeqNum(0),
                dupacks_sent: 0,
                points: [SeqNum(0); MAX_ACK_POINTS],
                points_len: 0,
                delack_deadline: None,
                window_update: false,
                sack_recent: [SeqNum(0); SACK_RECENT],
                sack_recent_len: 0,
                snaps: [AckView::default(); MAX_ACK_SNAPS],
                snaps_len: 0,
                unreported: false,
                dsack: None,
            },
            timers: Timers {
                rto: RtoEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max),
                rto_deadline: None,
                retries: 0,
                unanswered_since: None,
                rtt_timing: None,
                karn_blocked: false,
                rto_tsval: None,
                syn_retransmitted: false,
                persist_deadline: None,
                persist_shift: 0,
                probe_pending: false,
                time_wait_deadline: None,
                fin_wait2_deadline: None,
            },
            cc: Cc::new(cfg.cc, eff_mss),
            rate: Default::default(),
            pace: Pace::default(),
            cwv: CwndUse {
                limited: false,
                max_flight: 0,
                usage_end: iss,
            },
            rec: Recovery {
                dupacks: 0,
                active: false,
                prr: None,
                sacked_prev: 0,
                recover: iss,
                sb: Scoreboard::new(cfg.max_segments_in_flight),
                undo: None,
                rack: Rack::default(),
                tlp: Tlp::default(),
                rexmit_one: false,
            },
            ecn: Ecn {
                ok: false,
                rx_ce: false,
                ece: false,
                cwr_pending: false,
                recover: iss,
            },
            ka: Keepalive {
                deadline: None,
                probes: 0,
                pending: false,
            },
            challenge: ChallengeAcks {
                window: now,
                count: 0,
            },
            tune: Autotune {
                rcv_space: 0,
                rcv_space_seq: SeqNum(0),
                rcv_space_time: now,
                rcv_rtt: None,
                rcv_buf_want: cfg.rcv_buf,
                snd_buf_locked: false,
            },
            orphaned: false,
            pending_rst: None,
            blackhole: Default::default(),
            stats: TcbStats::default(),
        }
    }

    /// Queues an ACK in answer to an unacceptable or suspicious segment
    /// (RFC 9293 §3.10.7.4 "challenge ACK", RFC 5961), at most
    /// `challenge_ack_limit` per second (RFC 5961 §7); beyond it the
    /// segment is dropped silently.
    pub(super) fn challenge_ack(&mut self) {
        let now = self.rcv.last_seen;
        if now - self.challenge.window >= Duration::from_secs(1) {
            self.challenge.window = now;
            self.challenge.count = 0;
        }
        let limit = self.cfg.challenge_ack_limit;
        if limit != 0 && self.challenge.count >= limit {
            self.stats.challenge_acks_suppressed += 1;
            return;
        }
        self.challenge.count += 1;
        self.stats.challenge_acks += 1;
        self.ack.now = true;
    }

    /// Timestamp clock (RFC 7323 §5.4): 1 ms ticks plus a per-connection offset.
    pub(super) fn ts_val(&self, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.opts.ts_offset)
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
        self.rec.undo = None;
    }

    /// The congestion-control algorithm in use.
    pub fn cc(&self) -> CcKind {
        self.cc.kind()
    }

    /// BBR's model when BBR is in use: the bottleneck bandwidth estimate
    /// (bytes/s), the propagation RTT estimate and the pacing rate it asks
    /// for (bytes/s; not enforced, see `cc::bbr`).
    pub fn bbr_model(&self) -> Option<(u64, Option<Duration>, u64)> {
        self.cc
            .bbr()
            .map(|b| (b.btl_bw(), b.min_rtt(), b.pacing_rate()))
    }

    /// Bytes delivered to the peer so far (cumulatively acknowledged or
    /// SACKed), as Linux's `tcpi_delivered` in bytes.
    pub fn delivered_bytes(&self) -> u64 {
        self.rate.delivered()
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
        self.opts.sack
    }

    /// True if ECN (RFC 3168) was negotiated.
    pub fn ecn_enabled(&self) -> bool {
        self.ecn.ok
    }

    /// The IP ECN field of the segment the engine passes to the next
    /// [`input`](Tcb::input) call: `ce` is true for Congestion Experienced
    /// (0b11). Applies to that one call only; without it a segment counts
    /// as not marked. (RFC 3168 §6.1.3.)
    pub fn input_ecn(&mut self, ce: bool) {
        self.ecn.rx_ce = ce;
    }

    /// The largest payload, bytes, that the port cuts into segments for
    /// this connection (TSO, as `nic::Capabilities::tx_gso_max` for this
    /// path; 0 or at most one MSS: none). The engine sets it before each
    /// `poll_output`, from the port and whether the next hop is resolved.
    pub fn set_gso_max(&mut self, bytes: usize) {
        self.snd.gso_max = bytes;
    }

    /// Turns Nagle's algorithm off (`true`) or on (RFC 9293 §3.7.4).
    pub fn set_nodelay(&mut self, on: bool) {
        self.cfg.nodelay = on;
    }

    /// Corks (TCP_CORK) or uncorks the send side, as the application's
    /// status block says before each output pass.
    pub fn set_corked(&mut self, on: bool) {
        self.snd.corked = on;
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Local address and port.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// Remote address and port.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// Oldest unacknowledged sequence number.
    pub fn snd_una(&self) -> SeqNum {
        self.snd.una
    }

    /// Next sequence number to send.
    pub fn snd_nxt(&self) -> SeqNum {
        self.snd.nxt
    }

    /// Peer's receive window, bytes (scaled).
    pub fn snd_wnd(&self) -> usize {
        self.snd.wnd
    }

    /// Next sequence number expected from the peer.
    pub fn rcv_nxt(&self) -> SeqNum {
        self.rcv.nxt
    }

    /// Receive window currently advertised, bytes.
    pub fn rcv_wnd(&self) -> usize {
        if self.rcv.adv > self.rcv.nxt {
            self.rcv.adv - self.rcv.nxt
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
        self.rec.active
    }

    /// Smoothed RTT in microseconds, 0 before the first sample.
    pub fn srtt_us(&self) -> u64 {
        self.timers.rto.srtt().map_or(0, |d| d.as_micros() as u64)
    }

    /// RTT variation in microseconds.
    pub fn rttvar_us(&self) -> u64 {
        self.timers.rto.rttvar().as_micros() as u64
    }

    /// Current retransmission timeout (including backoff).
    pub fn rto(&self) -> Duration {
        self.timers.rto.rto()
    }

    /// True when every byte of a SendBuffer holding `tx_len` bytes has been
    /// sent (snd_nxt at its end) in a state that sends data: more written
    /// now could leave at once, not on the next ACK.
    pub fn all_sent(&self, tx_len: usize) -> bool {
        self.state.is_synchronized() && self.snd.nxt >= self.snd.base + tx_len
    }

    /// Bytes sent and not yet acknowledged (snd_max - snd_una, SYN/FIN count one).
    pub fn bytes_in_flight(&self) -> usize {
        self.snd.max - self.snd.una
    }

    /// Effective send MSS: payload bytes per full segment.
    pub fn mss(&self) -> usize {
        self.snd.mss
    }

    /// Send and receive window scale shifts, if window scaling is in use.
    pub fn window_scale(&self) -> Option<(u8, u8)> {
        self.opts.ws.then_some((self.snd.wscale, self.rcv.wscale))
    }

    /// True if timestamps (RFC 7323) are in use.
    pub fn timestamps(&self) -> bool {
        self.opts.ts
    }

    /// Consecutive retransmissions of the current segment.
    pub fn retries(&self) -> u32 {
        self.timers.retries
    }

    /// Intervals in the out-of-order queue.
    pub fn ooo_intervals(&self) -> usize {
        self.rcv.ooo.len()
    }

    /// Bytes the peer has SACKed above snd_una (RFC 2018).
    pub fn sacked_bytes(&self) -> usize {
        self.rec.sb.sacked_bytes()
    }

    /// Segments in the retransmission queue (sent, not cumulatively acked).
    pub fn segments_in_flight(&self) -> usize {
        self.rec.sb.len()
    }

    /// Counters.
    pub fn stats(&self) -> &TcbStats {
        &self.stats
    }

    /// When the connection last moved: the later of the last segment
    /// received (or the Tcb's creation) and the last data segment sent.
    pub fn last_activity(&self) -> Instant {
        self.snd
            .last_data_sent
            .map_or(self.rcv.last_seen, |t| t.max(self.rcv.last_seen))
    }

    /// Frees what an idle connection does not use: the retransmission
    /// queue's entries when nothing is in flight, the out-of-order store
    /// when it holds nothing. Each comes back (one allocation) with the
    /// next segment that needs it. Returns the bytes freed.
    pub fn release_idle(&mut self) -> usize {
        self.rec.sb.release() + self.rcv.ooo.release()
    }
}
