//! Receive-window advertisement: the window field of every segment that
//! carries an ACK, with receiver SWS avoidance (RFC 9293 §3.8.6.2.2), a
//! right edge that never moves left (RFC 7323 §2.4, Appendix F), and the
//! window update after the application reads.

use wire::SeqNum;

use super::api::State;
use super::tcb::Tcb;

impl Tcb {
    /// The application consumed bytes from the RecvBuffer, which now has
    /// `rcv_free` free bytes. Returns true if a window update should be sent
    /// now (then `has_output` is true): the window would grow by at least
    /// min(rcv_buf/2, MSS) (receiver SWS avoidance, RFC 9293 §3.8.6.2.2) and
    /// at least double, as Linux does.
    pub fn on_app_read(&mut self, rcv_free: usize) -> bool {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            return false;
        }
        let cur = self.rcv_wnd();
        let wnd = self.window_for(rcv_free);
        let update = wnd > cur && wnd - cur >= self.sws_threshold() && wnd >= 2 * cur;
        if update {
            self.ack.window_update = true;
        }
        update
    }

    /// The window `rcv_free` free bytes of receive buffer allow: at most
    /// the window clamp and what the scaled field holds, and one scale unit
    /// less than the free space, so that rounding it up later to keep the
    /// right edge in place still fits the buffer.
    pub(super) fn window_for(&self, rcv_free: usize) -> usize {
        let unit = 1usize << self.rcv.wscale;
        rcv_free
            .saturating_sub(unit - 1)
            .min(0xffff << self.rcv.wscale)
            .min(self.window_clamp())
    }

    /// The scaled window field of an ACK of `ack` that offers `want`
    /// bytes, and the right edge it sets (rcv_adv moves up to it).
    /// RFC 9293 §3.8.6.2.2: the right edge never moves left, so a window
    /// that is not a multiple of the scale unit is rounded up (RFC 7323
    /// §2.4) - unless the rounded edge would pass what the receive buffer
    /// (`rcv_free` bytes past rcv_nxt) can take: then it is rounded down,
    /// and the edge may move left by at most one unit (RFC 7323
    /// Appendix F; the bytes offered before stay acceptable). So no
    /// advertised edge ever lies beyond the buffer.
    pub(super) fn window_field(&mut self, ack: SeqNum, want: usize, rcv_free: usize) -> usize {
        let unit = 1usize << self.rcv.wscale;
        let limit = self.rcv.nxt + rcv_free;
        let room = if limit > ack { limit - ack } else { 0 };
        let promised = if self.rcv.adv > ack {
            self.rcv.adv - ack
        } else {
            0
        };
        // A new window is rounded down; what was promised is kept (up).
        let mut field = (want / unit).max(promised.div_ceil(unit));
        if field * unit > room {
            field = room / unit;
        }
        let field = field.min(0xffff);
        let edge = ack + field * unit;
        if edge > self.rcv.adv {
            self.rcv.adv = edge;
        }
        field
    }

    /// Receiver SWS threshold: min(Fr * RCV.BUFF, Eff.snd.MSS), Fr = 1/2.
    pub(super) fn sws_threshold(&self) -> usize {
        (self.cfg.rcv_buf / 2).min(self.snd.mss).max(1)
    }

    /// The window field for a segment carrying ACK, and the bookkeeping of
    /// an ACK going out. RFC 9293 §3.8.6.2.2: the right edge only moves right
    /// by at least the SWS threshold and never moves left (rounding up to the
    /// scale unit if needed).
    pub(super) fn advertise(&mut self, rcv_free: usize) -> u16 {
        let cur = self.rcv_wnd();
        let mut wnd = self.window_for(rcv_free);
        if wnd > cur && wnd - cur < self.sws_threshold() {
            wnd = cur;
        }
        if wnd > self.rcv.ooo.capacity() {
            // The window grew (auto-tuning): out-of-order data within it
            // must fit too. Allocates, a few times per connection.
            self.rcv.ooo.ensure_capacity(wnd.next_power_of_two());
        }
        let field = self.window_field(self.rcv.nxt, wnd, rcv_free);
        self.rcv.last_ack_sent = self.rcv.nxt;
        self.ack.now = false;
        self.ack.window_update = false;
        self.ack.delack_deadline = None;
        // This segment acknowledges rcv_nxt: the points below it are moot
        // unless `emit_ack_points` sent them first.
        self.ack.points_len = 0;
        self.ack.snaps_len = 0;
        self.ack.unreported = false;
        field as u16
    }
}
