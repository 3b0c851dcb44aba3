//! DCTCP (RFC 8257): NewReno growth; on ECN-Echo, once per window,
//! cwnd = cwnd * (1 - alpha/2), where alpha is an EWMA (g = 1/16) of the
//! fraction of bytes acknowledged with ECN-Echo per window of data. Loss
//! and RTO halve as NewReno does (§3.5).

use wire::SeqNum;

use super::{AckInfo, CongestionControl, CongestionEvent, NewReno};

/// Fixed-point scale of alpha: 1.0 = 1024 (as Linux's dctcp).
pub(crate) const ALPHA_ONE: u32 = 1024;
/// EWMA gain g = 1/2^G_SHIFT = 1/16 (RFC 8257 §4.2).
const G_SHIFT: u32 = 4;

/// DCTCP state. Windows in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dctcp {
    pub(super) reno: NewReno,
    /// Estimated fraction of marked bytes, scaled by [`ALPHA_ONE`]. Starts at
    /// 1 (RFC 8257 §3.3: conservative until the first window is observed).
    alpha: u32,
    /// End of the current observation window (snd_nxt when it began).
    window_end: Option<SeqNum>,
    /// Bytes acknowledged in this window, and of them with ECN-Echo.
    bytes_acked: u64,
    bytes_marked: u64,
}

impl Dctcp {
    pub(crate) fn new(iw: usize) -> Self {
        Dctcp {
            reno: NewReno::new(iw),
            alpha: ALPHA_ONE,
            window_end: None,
            bytes_acked: 0,
            bytes_marked: 0,
        }
    }

    /// Alpha scaled by [`ALPHA_ONE`] (1024 = every byte marked).
    pub(crate) fn alpha(&self) -> u32 {
        self.alpha
    }
}

impl CongestionControl for Dctcp {
    fn cwnd(&self) -> usize {
        self.reno.win.cwnd
    }
    fn ssthresh(&self) -> usize {
        self.reno.win.ssthresh
    }
    fn set_cwnd(&mut self, cwnd: usize) {
        self.reno.win.cwnd = cwnd;
    }
    fn on_ack(&mut self, ack: &AckInfo) {
        self.reno.grow(ack.acked, ack.mss);
    }
    /// ECN: cwnd = cwnd * (1 - alpha/2) (RFC 8257 §3.3), at least 2 SMSS,
    /// ssthresh = cwnd. Loss and RTO: as NewReno.
    fn on_congestion_event(&mut self, kind: CongestionEvent, flight: usize, mss: usize) {
        match kind {
            CongestionEvent::Ecn => {
                let win = &mut self.reno.win;
                let cut = (win.cwnd as u128 * u128::from(self.alpha)) / (2 * u128::from(ALPHA_ONE));
                win.reduce(kind, win.cwnd - cut as usize, mss);
            }
            _ => self.reno.on_congestion_event(kind, flight, mss),
        }
    }
    /// RFC 8257 §3.3: count acknowledged and marked bytes; when snd_una
    /// passes the window end, alpha = (1 - g) * alpha + g * F.
    fn on_ecn_feedback(&mut self, acked: usize, ece: bool, snd_una: SeqNum, snd_nxt: SeqNum) {
        self.bytes_acked += acked as u64;
        if ece {
            self.bytes_marked += acked as u64;
        }
        let end = *self.window_end.get_or_insert(snd_nxt);
        if snd_una < end || self.bytes_acked == 0 {
            return;
        }
        let f = (self.bytes_marked * u64::from(ALPHA_ONE) / self.bytes_acked) as u32;
        // alpha += g * (F - alpha), in fixed point.
        let a = self.alpha - (self.alpha >> G_SHIFT) + (f >> G_SHIFT);
        self.alpha = a.min(ALPHA_ONE);
        self.bytes_acked = 0;
        self.bytes_marked = 0;
        self.window_end = Some(snd_nxt);
    }
}
