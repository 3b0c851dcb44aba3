//! The receiver's SACK blocks (RFC 2018 §4, D-SACK RFC 2883 §4): which
//! out-of-order ranges an ACK reports, most recent arrival first, and the
//! moments of a batch that each of its ACKs reports. Nothing here allocates.

use wire::tcp::{SackBlock, TcpOptions};
use wire::SeqNum;

use super::tcb::{AckView, Tcb, MAX_ACK_SNAPS, SACK_RECENT};

impl Tcb {
    /// Receiver: remembers an out-of-order arrival at `seq` for the SACK
    /// blocks (RFC 2018 §4: the block with the most recent arrival first,
    /// then the most recently reported others). `before` is what an ACK
    /// reported just before this arrival (`ack_view`, taken before the
    /// segment was stored): if the arrival pushed one of its blocks out of
    /// the ACK's room, and it was not sent yet, it is kept to go out as it
    /// was (`AckState::snaps`), as a receiver that ACKs segment by segment
    /// sent it.
    pub(super) fn note_ooo_arrival(&mut self, seq: SeqNum, before: &AckView) {
        if !self.opts.sack {
            return;
        }
        let cur = self.rcv.ooo.containing(self.rcv.nxt, seq);
        let mut out = [SeqNum(0); SACK_RECENT];
        out[0] = seq;
        let mut n = 1;
        for k in 0..self.ack.sack_recent_len {
            let s = self.ack.sack_recent[k];
            let r = self.rcv.ooo.containing(self.rcv.nxt, s);
            if n < SACK_RECENT && r.is_some() && r != cur {
                out[n] = s;
                n += 1;
            }
        }
        self.ack.sack_recent = out;
        self.ack.sack_recent_len = n;
        if self.ack.unreported && !before.covered_by(&self.ack_view()) {
            self.push_snap(*before);
        }
        self.ack.unreported = true;
    }

    /// Keeps `view` to go out before the batch's ACK; when all places are
    /// taken, it replaces the latest (the batch's ACK reports the newest
    /// ranges anyway).
    fn push_snap(&mut self, view: AckView) {
        let n = self.ack.snaps_len;
        if n == MAX_ACK_SNAPS {
            self.ack.snaps[n - 1] = view;
        } else {
            self.ack.snaps[n] = view;
            self.ack.snaps_len += 1;
        }
    }

    /// Receiver: what an ACK sent now reports, D-SACK aside: rcv_nxt and
    /// the out-of-order blocks, most recent first (3 with timestamps, 4
    /// without).
    pub(super) fn ack_view(&self) -> AckView {
        let mut v = AckView {
            ack: self.rcv.nxt,
            ..AckView::default()
        };
        if !self.opts.sack {
            return v;
        }
        let max = if self.opts.ts { 3 } else { 4 };
        let mut n = 0;
        for k in 0..self.ack.sack_recent_len {
            if n >= max {
                break;
            }
            let Some((left, right)) = self
                .rcv
                .ooo
                .containing(self.rcv.nxt, self.ack.sack_recent[k])
            else {
                continue;
            };
            if v.blocks[..n].iter().any(|b| b.left == left) {
                continue;
            }
            v.blocks[n] = SackBlock { left, right };
            n += 1;
        }
        v.len = n as u8;
        v
    }

    /// Receiver: a duplicate segment `[left, right)` arrived; report it in
    /// the next ACK as a D-SACK (RFC 2883 §4).
    pub(super) fn note_duplicate(&mut self, left: SeqNum, right: SeqNum) {
        if self.opts.sack && right > left {
            self.ack.dsack = Some((left, right));
            self.ack.now = true;
        }
    }

    /// Receiver: fills the SACK option of an ACK of rcv_nxt: a pending
    /// D-SACK first, then the out-of-order blocks, most recent first (3
    /// with timestamps, 4 without; `ack_view`).
    pub(super) fn fill_sack(&mut self, opts: &mut TcpOptions) {
        if !self.opts.sack {
            return;
        }
        let max = if self.opts.ts { 3 } else { 4 };
        let mut n = 0;
        if let Some((left, right)) = self.ack.dsack.take() {
            opts.sack[0] = SackBlock { left, right };
            n = 1;
            self.stats.dsacks_sent += 1;
        }
        let view = self.ack_view();
        for b in view.blocks() {
            if n >= max {
                break;
            }
            opts.sack[n] = *b;
            n += 1;
        }
        opts.sack_len = n as u8;
    }
}
