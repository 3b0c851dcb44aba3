//! Pacing: the gap between data segments the congestion controller's
//! rate asks for (BBR; every other algorithm leaves the rate at 0, and
//! data leaves as the windows allow). `poll_output` asks `pace_ready`
//! and `pace_blocks_data` before each data segment, and `emit_data`
//! reports each one with `pace_sent`.

use core::time::Duration;

use crate::time::Instant;

use super::tcb::Tcb;

/// Lateness of the pacing timer made up for by a short burst: the timer
/// wheel's 1 ms tick and the engine's wake-up after it (measured over
/// veth: half of the paced sends 0.7 ms late, a tenth 2.3 ms). With only
/// the tick made up, BBR sent at about 0.7 of its pacing rate, so its
/// bandwidth probes measured less than the path had (issue 35).
const PACE_SLACK: Duration = Duration::from_millis(3);

impl Tcb {
    /// The pacing rate the congestion controller asks for, bytes/s; 0 =
    /// no pacing (every algorithm but BBR).
    pub(super) fn pacing_rate(&self) -> u64 {
        match self.cc.bbr() {
            Some(b) if self.cfg.pacing => b.pacing_rate(),
            _ => 0,
        }
    }

    /// True if a data segment may leave now under pacing; if not, arms the
    /// pacing timer for when it may.
    pub(super) fn pace_ready(&mut self, now: Instant) -> bool {
        if self.pacing_rate() == 0 || now >= self.pace.next {
            return true;
        }
        self.pace.deadline = Some(self.pace.next);
        false
    }

    /// True if pacing holds back a data segment that could leave now (the
    /// pacing timer is then armed). Checks the clock first, so an unpaced
    /// connection pays no `data_ready` here.
    pub(super) fn pace_blocks_data(&mut self, now: Instant, tx_len: usize) -> bool {
        if self.pacing_rate() == 0 || now >= self.pace.next {
            return false;
        }
        if self.data_ready(tx_len).is_none() {
            return false;
        }
        self.pace.deadline = Some(self.pace.next);
        true
    }

    /// `len` bytes of data just left: the next may leave `len / rate`
    /// later. Up to [`PACE_SLACK`] of lateness is made up for, so the
    /// average rate holds.
    pub(super) fn pace_sent(&mut self, len: usize, now: Instant) {
        let rate = self.pacing_rate();
        if rate == 0 || len == 0 {
            return;
        }
        let gap = Duration::from_nanos((len as u128 * 1_000_000_000 / u128::from(rate)) as u64);
        let from = self.pace.next.max(now - PACE_SLACK);
        self.pace.next = from + gap;
    }
}
