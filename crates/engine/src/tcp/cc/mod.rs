//! Pluggable congestion control (RFC 5681 framework).
//!
//! An algorithm owns `cwnd` and `ssthresh` (bytes) and decides how they grow
//! on ACKs and shrink on congestion events. Loss recovery itself (duplicate
//! ACKs, SACK scoreboard, RACK, window inflation during NewReno recovery) is
//! the Tcb's job; it calls the hooks of [`CongestionControl`]:
//!
//! ```text
//!   new data acked, not in recovery ─► on_ack(AckInfo)
//!   loss / RTO / ECN-Echo           ─► on_congestion_event(kind)
//!   recovery ends                   ─► on_recovery_exit
//!   every ACK when ECN is in use    ─► on_ecn_feedback (DCTCP's alpha)
//! ```
//!
//! BBR (`bbr`) is model-based: it also takes a delivery-rate sample on
//! every ACK that delivers data (`Cc::on_rate_sample`), sets cwnd itself
//! during recovery (no PRR), and ignores ECN.
//!
//! Dispatch is static: [`Cc`] is an enum over the algorithms, so no virtual
//! call happens per packet, and the whole state is `Copy`, which makes the
//! "undo" of a spurious reduction (D-SACK) a plain saved copy.

mod bbr;
mod cubic;
mod dctcp;
mod newreno;
mod window;

use core::time::Duration;

use wire::SeqNum;

use crate::time::Instant;

use super::rate::RateSample;

pub(crate) use bbr::{Bbr, RateCtx};
pub(crate) use cubic::Cubic;
pub(crate) use dctcp::Dctcp;
pub(crate) use newreno::NewReno;
pub(crate) use window::Window;

pub use appif::cc::CcKind;

/// Why the congestion window is being reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CongestionEvent {
    /// Loss detected by duplicate ACKs, SACK or RACK: fast recovery begins
    /// (RFC 5681 §3.2, RFC 6675 §5).
    FastRecovery,
    /// The retransmission timer expired (RFC 5681 §3.1 eq. 4): cwnd = 1 SMSS.
    Rto,
    /// An ECN-Echo arrived (RFC 3168 §6.1.2), once per window of data.
    Ecn,
}

/// What an ACK of new data tells the algorithm.
#[derive(Debug, Clone, Copy)]
pub struct AckInfo {
    /// Bytes newly acknowledged (cumulatively or by SACK).
    pub acked: usize,
    /// Smoothed RTT (RFC 6298), zero before the first sample.
    pub srtt: Duration,
    /// The current time.
    pub now: Instant,
    /// Bytes still in flight after this ACK.
    pub flight: usize,
    /// Sender MSS in bytes.
    pub mss: usize,
}

/// The hooks every algorithm implements. Windows are in bytes.
pub trait CongestionControl {
    /// Congestion window, bytes.
    fn cwnd(&self) -> usize;
    /// Slow-start threshold, bytes (`usize::MAX` until the first reduction).
    fn ssthresh(&self) -> usize;
    /// Overrides cwnd (loss recovery: NewReno inflation/deflation, undo).
    fn set_cwnd(&mut self, cwnd: usize);
    /// New data was acknowledged outside loss recovery: grow cwnd.
    fn on_ack(&mut self, ack: &AckInfo);
    /// Congestion: set ssthresh and cwnd for `kind`. `flight` is the
    /// FlightSize in bytes.
    fn on_congestion_event(&mut self, kind: CongestionEvent, flight: usize, mss: usize);
    /// Fast recovery ended with a full ACK: RFC 6582 §3.2 step 4 option 1,
    /// cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
    fn on_recovery_exit(&mut self, flight: usize, mss: usize) {
        let cwnd = self.ssthresh().min(flight.max(mss) + mss);
        self.set_cwnd(cwnd.max(mss));
    }
    /// New data leaves after `idle` without any data sent (nothing was in
    /// flight). Default: nothing.
    fn on_tx_start(&mut self, _now: Instant, _idle: Duration) {}
    /// ECN feedback on an ACK (RFC 8257 §3.3): `acked` bytes newly
    /// acknowledged, `ece` the ACK's ECN-Echo flag; `snd_una` after the ACK
    /// and `snd_nxt` delimit observation windows. Default: nothing.
    fn on_ecn_feedback(&mut self, _acked: usize, _ece: bool, _snd_una: SeqNum, _snd_nxt: SeqNum) {}
}

/// The algorithm of one connection, dispatched by `match`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cc {
    NewReno(NewReno),
    Cubic(Cubic),
    Dctcp(Dctcp),
    Bbr(Bbr),
}

impl Cc {
    /// A fresh algorithm of `kind` with an initial window of `iw` bytes.
    pub(crate) fn new(kind: CcKind, iw: usize) -> Cc {
        match kind {
            CcKind::NewReno => Cc::NewReno(NewReno::new(iw)),
            CcKind::Cubic => Cc::Cubic(Cubic::new(iw)),
            CcKind::Dctcp => Cc::Dctcp(Dctcp::new(iw)),
            CcKind::Bbr => Cc::Bbr(Bbr::new(iw)),
        }
    }

    /// The algorithm in use.
    pub(crate) fn kind(&self) -> CcKind {
        match self {
            Cc::NewReno(_) => CcKind::NewReno,
            Cc::Cubic(_) => CcKind::Cubic,
            Cc::Dctcp(_) => CcKind::Dctcp,
            Cc::Bbr(_) => CcKind::Bbr,
        }
    }

    /// Sets ssthresh (bytes), for switching algorithms.
    pub(crate) fn set_ssthresh(&mut self, ssthresh: usize) {
        match self {
            Cc::NewReno(c) => c.win.ssthresh = ssthresh,
            Cc::Cubic(c) => c.win.ssthresh = ssthresh,
            Cc::Dctcp(c) => c.reno.win.ssthresh = ssthresh,
            Cc::Bbr(_) => {}
        }
    }

    /// Model-based (BBR): sets cwnd itself on every ACK, also in recovery,
    /// so PRR and the RFC 5681 recovery window do not apply.
    pub(crate) fn model_based(&self) -> bool {
        matches!(self, Cc::Bbr(_))
    }

    /// A delivery-rate sample from an ACK that delivered data; used by BBR.
    pub(crate) fn on_rate_sample(&mut self, rs: &RateSample, ctx: &RateCtx) {
        if let Cc::Bbr(b) = self {
            b.on_rate_sample(rs, ctx);
        }
    }

    /// BBR's state, when BBR is in use.
    pub(crate) fn bbr(&self) -> Option<&Bbr> {
        match self {
            Cc::Bbr(b) => Some(b),
            _ => None,
        }
    }

    /// Undo of a spurious reduction (RFC 2883 §5 / Linux's undo): go back to
    /// the state saved before it, keeping a cwnd that grew since.
    pub(crate) fn undo(&mut self, saved: Cc) {
        if let Cc::Bbr(b) = self {
            // BBR never lowered its model: only the cwnd comes back.
            b.undo();
            return;
        }
        let cwnd = self.cwnd().max(saved.cwnd());
        let ssthresh = self.ssthresh().max(saved.ssthresh());
        *self = saved;
        self.set_cwnd(cwnd);
        self.set_ssthresh(ssthresh);
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Cc::NewReno($c) => $e,
            Cc::Cubic($c) => $e,
            Cc::Dctcp($c) => $e,
            Cc::Bbr($c) => $e,
        }
    };
}

impl CongestionControl for Cc {
    fn cwnd(&self) -> usize {
        dispatch!(self, c => c.cwnd())
    }
    fn ssthresh(&self) -> usize {
        dispatch!(self, c => c.ssthresh())
    }
    fn set_cwnd(&mut self, cwnd: usize) {
        dispatch!(self, c => c.set_cwnd(cwnd))
    }
    fn on_ack(&mut self, ack: &AckInfo) {
        dispatch!(self, c => c.on_ack(ack))
    }
    fn on_congestion_event(&mut self, kind: CongestionEvent, flight: usize, mss: usize) {
        dispatch!(self, c => c.on_congestion_event(kind, flight, mss))
    }
    fn on_recovery_exit(&mut self, flight: usize, mss: usize) {
        dispatch!(self, c => c.on_recovery_exit(flight, mss))
    }
    fn on_tx_start(&mut self, now: Instant, idle: Duration) {
        dispatch!(self, c => c.on_tx_start(now, idle))
    }
    fn on_ecn_feedback(&mut self, acked: usize, ece: bool, snd_una: SeqNum, snd_nxt: SeqNum) {
        dispatch!(self, c => c.on_ecn_feedback(acked, ece, snd_una, snd_nxt))
    }
}

#[cfg(test)]
mod tests;
