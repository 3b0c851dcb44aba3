//! BBR (version 1: Cardwell et al., "BBR: Congestion-Based Congestion
//! Control", ACM Queue 2016; draft-cardwell-iccrg-bbr-congestion-control-00),
//! the algorithm of Linux's `bbr` module. Instead of reading loss as
//! congestion it models the path: the bottleneck bandwidth `btl_bw` (the
//! largest delivery rate sampled over the last 10 round trips) and the
//! round-trip propagation time `min_rtt` (the smallest RTT seen over 10 s),
//! and keeps cwnd at `cwnd_gain * btl_bw * min_rtt` (twice the
//! bandwidth-delay product, plus a few segments for ACK aggregation).
//!
//! ```text
//!   STARTUP   gain 2/ln2 until btl_bw grows < 25 % in 3 rounds (not
//!             counting rounds in recovery from a loss under 2 %)
//!     └► DRAIN     pacing gain ln2/2 until inflight <= BDP
//!          └► PROBE_BW  pacing gain cycles 5/4, 3/4, 1 x 6, one min_rtt each
//!   any ──► PROBE_RTT   cwnd 4 segments for 200 ms and a round trip, when
//!                       min_rtt was not refreshed for 10 s
//! ```
//!
//! One departure from Linux's v1: a STARTUP round spent recovering from a
//! light loss (under 2 % of what the round delivered) does not count towards
//! the full pipe, since packet conservation, not the path, held its rate
//! (Linux counts it, and leaves STARTUP early on a path with random loss).
//! A heavier loss counts as usual: a queue overflowing under STARTUP's gain
//! still ends it.
//!
//! Loss changes cwnd only briefly: on entering recovery cwnd is cut to what
//! is in flight plus what the ACK delivered (packet conservation, for one
//! round trip), and when recovery ends the cwnd before it comes back. An
//! RTO leaves one segment, from which cwnd grows by the bytes each ACK
//! delivers. ECN is ignored (as in Linux's BBR v1).
//!
//! The Tcb paces data at [`Bbr::pacing_rate`] (`tcp::pacing`, unless
//! `TcpConfig::pacing` is off) and hands BBR a delivery-rate sample on every
//! ACK that delivers data (`tcp::rate`).

use core::time::Duration;

use super::{AckInfo, CongestionControl, CongestionEvent};
use crate::tcp::rate::RateSample;
use crate::time::Instant;

/// STARTUP's pacing and cwnd gain, 2/ln 2, ×1000.
const HIGH_GAIN: u64 = 2885;
/// DRAIN's pacing gain, ln 2/2, ×1000.
const DRAIN_GAIN: u64 = 1000 * 1000 / 2885;
/// PROBE_BW's cwnd gain, ×1000.
const CWND_GAIN: u64 = 2000;
/// PROBE_BW's pacing gain cycle, ×1000, one phase per min_rtt.
const CYCLE: [u64; 8] = [1250, 750, 1000, 1000, 1000, 1000, 1000, 1000];
/// Round trips the bandwidth filter remembers.
const BW_ROUNDS: u64 = 10;
/// How long a min_rtt sample stays valid.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// How long PROBE_RTT holds cwnd at its floor (at least one round trip too).
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// cwnd floor, segments (and PROBE_RTT's cwnd).
const MIN_CWND_SEGMENTS: usize = 4;
/// Bandwidth growth, ×1000, below which a round counts towards "full".
const FULL_BW_GROWTH: u64 = 1250;
/// Rounds without such growth after which the pipe is deemed full.
const FULL_BW_ROUNDS: u8 = 3;
/// Loss rate of a round, ×1000, below which a STARTUP round in loss
/// recovery does not count towards a full pipe (BBRv2's `bbr_loss_thresh`).
const STARTUP_LOSS_THRESH: u128 = 20;

/// The state machine's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// What the Tcb tells BBR along with a rate sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateCtx {
    pub(crate) now: Instant,
    pub(crate) mss: usize,
    /// Bytes in flight after the ACK (RFC 6675 pipe).
    pub(crate) pipe: usize,
    /// A loss recovery (fast recovery, or the aftermath of an RTO) is in
    /// progress.
    pub(crate) in_recovery: bool,
    /// Bytes deemed lost since the connection began (cumulative).
    pub(crate) lost_total: u64,
}

/// A windowed maximum over round trips (Kathleen Nichols' three-sample
/// scheme, as Linux's `win_minmax`): the best, second and third best
/// samples of the window, each with the round it was taken in.
#[derive(Debug, Clone, Copy, Default)]
struct MaxFilter {
    s: [(u64, u64); 3],
}

impl MaxFilter {
    fn get(&self) -> u64 {
        self.s[0].1
    }

    /// Adds `value` measured in round `round`, over a window of `win` rounds.
    fn update(&mut self, round: u64, value: u64, win: u64) {
        let v = (round, value);
        if value >= self.s[0].1 || round.saturating_sub(self.s[2].0) > win {
            self.s = [v; 3];
            return;
        }
        if value >= self.s[1].1 {
            self.s[2] = v;
            self.s[1] = v;
        } else if value >= self.s[2].1 {
            self.s[2] = v;
        }
        // Age out the best samples that left the window.
        let dt = round.saturating_sub(self.s[0].0);
        if dt > win {
            self.s = [self.s[1], self.s[2], v];
            if round.saturating_sub(self.s[0].0) > win {
                self.s = [self.s[1], self.s[2], v];
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[2] = v;
            self.s[1] = v;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = v;
        }
    }
}

/// BBR state. Windows in bytes, rates in bytes per second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bbr {
    cwnd: usize,
    iw: usize,
    mode: Mode,
    btl_bw: MaxFilter,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    /// Round trips counted so far, and the delivered count that ends the
    /// current one.
    rounds: u64,
    next_round_delivered: u64,
    round_start: bool,
    full_bw: u64,
    full_bw_count: u8,
    full_bw_reached: bool,
    /// `lost_total` and the delivered count when the current round began
    /// (the round's loss rate, for the full-pipe check).
    round_lost_start: u64,
    round_delivered_start: u64,
    cycle_idx: usize,
    cycle_stamp: Instant,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    /// cwnd before the recovery or PROBE_RTT, restored after it.
    prior_cwnd: usize,
    in_recovery: bool,
    /// Packet conservation: the first round trip of a recovery.
    conservation: bool,
    /// The recovery began since the last sample.
    recovery_start: bool,
    pacing_rate: u64,
}

impl Bbr {
    /// Starts in STARTUP with a cwnd of `iw` bytes.
    pub(crate) fn new(iw: usize) -> Self {
        Bbr {
            cwnd: iw,
            iw,
            mode: Mode::Startup,
            btl_bw: MaxFilter::default(),
            min_rtt: None,
            min_rtt_stamp: Instant(0),
            rounds: 0,
            next_round_delivered: 0,
            round_start: false,
            full_bw: 0,
            full_bw_count: 0,
            full_bw_reached: false,
            round_lost_start: 0,
            round_delivered_start: 0,
            cycle_idx: 0,
            cycle_stamp: Instant(0),
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            prior_cwnd: 0,
            in_recovery: false,
            conservation: false,
            recovery_start: false,
            pacing_rate: 0,
        }
    }

    /// The mode the state machine is in.
    #[cfg(test)]
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck bandwidth estimate, bytes per second (0 before any
    /// sample).
    pub(crate) fn btl_bw(&self) -> u64 {
        self.btl_bw.get()
    }

    /// The propagation RTT estimate.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The pacing rate the model asks for, bytes per second (0 before any
    /// bandwidth sample).
    pub(crate) fn pacing_rate(&self) -> u64 {
        self.pacing_rate
    }

    fn pacing_gain(&self) -> u64 {
        match self.mode {
            Mode::Startup => HIGH_GAIN,
            Mode::Drain => DRAIN_GAIN,
            Mode::ProbeBw => CYCLE[self.cycle_idx],
            Mode::ProbeRtt => 1000,
        }
    }

    fn cwnd_gain(&self) -> u64 {
        match self.mode {
            Mode::Startup | Mode::Drain => HIGH_GAIN,
            Mode::ProbeBw | Mode::ProbeRtt => CWND_GAIN,
        }
    }

    /// `gain`/1000 of the bandwidth-delay product, bytes; None before the
    /// model has both a bandwidth and an RTT.
    fn bdp(&self, gain: u64) -> Option<usize> {
        let bw = self.btl_bw.get();
        let rtt = self.min_rtt?;
        if bw == 0 {
            return None;
        }
        let bytes = u128::from(bw) * rtt.as_nanos() / 1_000_000_000;
        Some((bytes * u128::from(gain) / 1000).min(usize::MAX as u128 / 2) as usize)
    }

    /// The cwnd the model aims at: `gain` of the BDP plus room for three
    /// send bursts (GSO batches of up to 64 KiB, at least 2 segments) and,
    /// while probing for more bandwidth, 2 segments more.
    fn target_cwnd(&self, gain: u64, mss: usize) -> usize {
        let Some(bdp) = self.bdp(gain) else {
            return self.iw;
        };
        let burst = (self.pacing_rate / 1000).clamp(2 * mss as u64, 64 * 1024) as usize;
        let mut t = bdp + 3 * burst;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            t += 2 * mss;
        }
        t
    }

    /// One ACK that delivered data (Linux's `bbr_main`): update the model,
    /// then the mode, pacing rate and cwnd.
    pub(crate) fn on_rate_sample(&mut self, rs: &RateSample, ctx: &RateCtx) {
        self.update_bw(rs);
        self.update_cycle_phase(ctx);
        self.check_full_bw_reached(rs, ctx);
        self.check_drain(ctx);
        self.update_min_rtt(rs, ctx);
        self.set_pacing_rate();
        self.set_cwnd(rs, ctx);
    }

    fn update_bw(&mut self, rs: &RateSample) {
        self.round_start = false;
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = rs.delivered_total;
            self.rounds += 1;
            self.round_start = true;
            self.conservation = false;
        }
        let Some(bw) = rs.bytes_per_sec() else {
            return;
        };
        // An interval shorter than the path's RTT comes from ACK
        // compression or a stretched send phase: not a rate the path had.
        if self.min_rtt.is_some_and(|m| rs.interval < m) {
            return;
        }
        if !rs.app_limited || bw >= self.btl_bw.get() {
            self.btl_bw.update(self.rounds, bw, BW_ROUNDS);
        }
    }

    fn update_cycle_phase(&mut self, ctx: &RateCtx) {
        if self.mode != Mode::ProbeBw {
            return;
        }
        let Some(min_rtt) = self.min_rtt else { return };
        let full_length = ctx.now.saturating_since(self.cycle_stamp) > min_rtt;
        let gain = self.pacing_gain();
        let next = match gain {
            1000 => full_length,
            g if g > 1000 => full_length && self.bdp(g).is_some_and(|b| ctx.pipe >= b),
            _ => full_length || self.bdp(1000).is_some_and(|b| ctx.pipe <= b),
        };
        if next {
            self.cycle_idx = (self.cycle_idx + 1) % CYCLE.len();
            self.cycle_stamp = ctx.now;
        }
    }

    fn check_full_bw_reached(&mut self, rs: &RateSample, ctx: &RateCtx) {
        if self.full_bw_reached || !self.round_start {
            return;
        }
        // The round that just ended: its losses against what it delivered.
        let lost = ctx.lost_total.wrapping_sub(self.round_lost_start);
        let delivered = rs
            .prior_delivered
            .saturating_sub(self.round_delivered_start);
        self.round_lost_start = ctx.lost_total;
        self.round_delivered_start = rs.prior_delivered;
        if rs.app_limited {
            return;
        }
        // A round spent in loss recovery sends what packet conservation
        // allows, not what the path takes: its plateau says nothing of a
        // full pipe, unless the loss itself was heavy enough to be a queue
        // overflowing (BBRv2's 2 % loss threshold).
        let light_loss = u128::from(lost) * 1000 < u128::from(delivered) * STARTUP_LOSS_THRESH;
        if (ctx.in_recovery || lost > 0) && light_loss {
            return;
        }
        let bw = self.btl_bw.get();
        if u128::from(bw) * 1000 >= u128::from(self.full_bw) * u128::from(FULL_BW_GROWTH) {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_reached = self.full_bw_count >= FULL_BW_ROUNDS;
    }

    fn check_drain(&mut self, ctx: &RateCtx) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && self.bdp(1000).is_none_or(|b| ctx.pipe <= b) {
            self.enter_probe_bw(ctx.now);
        }
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = Mode::ProbeBw;
        // Start anywhere but in the draining phase (as Linux, which picks
        // at random); the time's low bits spread connections.
        self.cycle_idx = 2 + (now.as_nanos() / 1000 % 6) as usize;
        self.cycle_stamp = now;
    }

    fn update_min_rtt(&mut self, rs: &RateSample, ctx: &RateCtx) {
        let expired = ctx.now.saturating_since(self.min_rtt_stamp) > MIN_RTT_WINDOW;
        if let Some(rtt) = rs.rtt {
            if self.min_rtt.is_none_or(|m| rtt < m || expired) {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = ctx.now;
            }
        }
        if expired && self.mode != Mode::ProbeRtt && self.min_rtt.is_some() {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd();
            self.probe_rtt_done = None;
        }
        if self.mode != Mode::ProbeRtt {
            return;
        }
        match self.probe_rtt_done {
            None if ctx.pipe <= MIN_CWND_SEGMENTS * ctx.mss => {
                self.probe_rtt_done = Some(ctx.now + PROBE_RTT_TIME);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = rs.delivered_total;
            }
            None => {}
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && ctx.now >= done {
                    self.min_rtt_stamp = ctx.now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    if self.full_bw_reached {
                        self.enter_probe_bw(ctx.now);
                    } else {
                        self.mode = Mode::Startup;
                    }
                }
            }
        }
    }

    fn set_pacing_rate(&mut self) {
        let bw = self.btl_bw.get();
        if bw == 0 {
            return;
        }
        // 1 % below the estimate, as Linux, so queues do not build.
        let rate = (u128::from(bw) * u128::from(self.pacing_gain()) / 1000 * 99 / 100) as u64;
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd = if self.in_recovery || self.mode == Mode::ProbeRtt {
            self.prior_cwnd.max(self.cwnd)
        } else {
            self.cwnd
        };
    }

    fn set_cwnd(&mut self, rs: &RateSample, ctx: &RateCtx) {
        let acked = rs.acked_sacked;
        let floor = MIN_CWND_SEGMENTS * ctx.mss;
        if self.in_recovery && !ctx.in_recovery {
            // Recovery is over: the cwnd before it comes back.
            self.in_recovery = false;
            self.conservation = false;
            self.cwnd = self.cwnd.max(self.prior_cwnd);
        }
        let mut cwnd = self.cwnd;
        if self.recovery_start {
            // Packet conservation for the first round of the recovery: send
            // one segment per segment delivered.
            self.recovery_start = false;
            self.conservation = true;
            self.next_round_delivered = rs.delivered_total;
            cwnd = ctx.pipe + acked;
        } else if self.conservation {
            cwnd = cwnd.max(ctx.pipe + acked);
        } else {
            let target = self.target_cwnd(self.cwnd_gain(), ctx.mss);
            if self.full_bw_reached {
                cwnd = (cwnd + acked).min(target);
            } else if cwnd < target || rs.delivered_total < self.iw as u64 {
                cwnd += acked;
            }
        }
        cwnd = cwnd.max(floor);
        if self.mode == Mode::ProbeRtt {
            cwnd = cwnd.min(floor);
        }
        self.cwnd = cwnd;
    }

    /// A reduction proved spurious (D-SACK or timestamps): the cwnd before
    /// it comes back; the model is kept (it was never reduced).
    pub(crate) fn undo(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
        self.in_recovery = false;
        self.conservation = false;
        self.recovery_start = false;
    }
}

impl CongestionControl for Bbr {
    fn cwnd(&self) -> usize {
        self.cwnd
    }
    /// BBR has no slow-start threshold: always "infinite".
    fn ssthresh(&self) -> usize {
        usize::MAX
    }
    fn set_cwnd(&mut self, cwnd: usize) {
        self.cwnd = cwnd;
    }
    /// Growth comes from rate samples (`on_rate_sample`), not from here.
    fn on_ack(&mut self, _ack: &AckInfo) {}
    fn on_congestion_event(&mut self, kind: CongestionEvent, _flight: usize, mss: usize) {
        match kind {
            CongestionEvent::FastRecovery => {
                self.save_cwnd();
                self.in_recovery = true;
                self.recovery_start = true;
            }
            CongestionEvent::Rto => {
                self.save_cwnd();
                self.in_recovery = true;
                self.recovery_start = false;
                self.conservation = false;
                self.cwnd = mss;
                // As Linux: the RTO ends a round, and full-pipe detection
                // starts over.
                self.full_bw = 0;
                self.round_start = true;
            }
            CongestionEvent::Ecn => {}
        }
    }
    fn on_recovery_exit(&mut self, _flight: usize, _mss: usize) {
        self.in_recovery = false;
        self.conservation = false;
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    fn sample(prior: u64, total: u64, interval_ms: u64, rtt_ms: u64, acked: usize) -> RateSample {
        RateSample {
            delivered: total - prior,
            interval: Duration::from_millis(interval_ms),
            app_limited: false,
            prior_delivered: prior,
            delivered_total: total,
            rtt: Some(Duration::from_millis(rtt_ms)),
            acked_sacked: acked,
        }
    }

    /// Drives BBR with one window per 10 ms round trip on a path of 1 MB/s
    /// (10 000 bytes per round): it leaves STARTUP, drains and settles in
    /// PROBE_BW with cwnd near twice the BDP.
    #[test]
    fn settles_at_twice_the_bdp_of_the_path() {
        let mut b = Bbr::new(10 * MSS);
        let mut delivered = 0u64;
        let mut now = Instant(1_000_000_000);
        for _round in 0..40 {
            // One ACK per round: the path delivers 10 000 bytes in 10 ms.
            let prior = delivered;
            delivered += 10_000;
            now = now + Duration::from_millis(10);
            let rs = sample(prior, delivered, 10, 10, 10_000);
            let pipe = b.cwnd().min(10_000);
            b.on_rate_sample(
                &rs,
                &RateCtx {
                    now,
                    mss: MSS,
                    pipe,
                    in_recovery: false,
                    lost_total: 0,
                },
            );
        }
        assert_eq!(b.btl_bw(), 1_000_000);
        assert_eq!(b.min_rtt(), Some(Duration::from_millis(10)));
        assert!(b.full_bw_reached);
        assert_eq!(b.mode(), Mode::ProbeBw);
        // 2 x 10 000 bytes BDP plus three 2-segment bursts (and 2 segments
        // in the probing phase).
        let c = b.cwnd();
        assert!((26_000..=28_000).contains(&c), "cwnd {c}");
    }

    /// Two rounds of growth, then ten of a bandwidth plateau at 1 MB/s, in
    /// loss recovery when `recovering`, with `loss_per_mille` of each
    /// round's bytes lost; returns the mode after them.
    fn plateau(recovering: bool, loss_per_mille: u64) -> Mode {
        let mut b = Bbr::new(10 * MSS);
        let (mut delivered, mut lost) = (0u64, 0u64);
        let mut now = Instant(1_000_000_000);
        for round in 0..12 {
            let prior = delivered;
            delivered += 10_000;
            now = now + Duration::from_millis(10);
            let mut rs = sample(prior, delivered, 10, 10, 10_000);
            rs.delivered = 5_000 * (round + 1).min(2);
            lost += 10_000 * loss_per_mille / 1000;
            b.on_rate_sample(
                &rs,
                &RateCtx {
                    now,
                    mss: MSS,
                    pipe: 10_000,
                    in_recovery: recovering && round >= 2,
                    lost_total: lost,
                },
            );
        }
        b.mode()
    }

    /// A plateau while recovering from light loss (1 %) is packet
    /// conservation at work, not a full pipe: STARTUP goes on; with heavy
    /// loss (5 %, a queue overflowing) the same plateau ends it, and
    /// without loss or recovery it ends it as in Linux.
    #[test]
    fn startup_ignores_a_plateau_in_recovery_from_light_loss_only() {
        assert_eq!(plateau(true, 10), Mode::Startup);
        assert_ne!(plateau(true, 50), Mode::Startup);
        assert_ne!(plateau(false, 0), Mode::Startup);
    }

    #[test]
    fn loss_recovery_conserves_then_restores_the_cwnd() {
        let mut b = Bbr::new(10 * MSS);
        b.cwnd = 50 * MSS;
        let now = Instant(1_000_000_000);
        b.on_congestion_event(CongestionEvent::FastRecovery, 50 * MSS, MSS);
        let ctx = |pipe, in_recovery| RateCtx {
            now,
            mss: MSS,
            pipe,
            in_recovery,
            lost_total: 0,
        };
        b.on_rate_sample(
            &sample(0, 2 * MSS as u64, 10, 10, 2 * MSS),
            &ctx(30 * MSS, true),
        );
        assert_eq!(b.cwnd(), 32 * MSS, "in flight plus delivered");
        b.on_rate_sample(
            &sample(0, 3 * MSS as u64, 10, 10, MSS),
            &ctx(20 * MSS, true),
        );
        assert_eq!(b.cwnd(), 32 * MSS, "conservation never shrinks it further");
        b.on_rate_sample(
            &sample(0, 4 * MSS as u64, 10, 10, MSS),
            &ctx(20 * MSS, false),
        );
        // Restored when recovery ends, then grown by the ACK (fewer bytes
        // than the initial window have been delivered yet).
        assert_eq!(b.cwnd(), 51 * MSS);
        // An RTO leaves one segment (the floor of 4 applies at the next ACK).
        b.on_congestion_event(CongestionEvent::Rto, 50 * MSS, MSS);
        assert_eq!(b.cwnd(), MSS);
        assert_eq!(b.ssthresh(), usize::MAX);
    }

    #[test]
    fn max_filter_forgets_old_rounds() {
        let mut f = MaxFilter::default();
        f.update(1, 100, 10);
        f.update(2, 50, 10);
        assert_eq!(f.get(), 100);
        for r in 3..=12 {
            f.update(r, 50, 10);
        }
        assert_eq!(f.get(), 50, "the round-1 sample left the 10-round window");
    }
}
