//! Closing a connection (RFC 9293 §3.6, §3.10.4-5): the application's
//! close and abort, TIME-WAIT, CLOSED, and orphans (the application let go).

use crate::time::Instant;

use super::api::State;
use super::recovery::Tlp;
use super::rst::PendingRst;
use super::tcb::Tcb;
use super::timewait::TimeWait;

impl Tcb {
    /// The application closed its sending side (shutdown(Write) or close):
    /// a FIN follows every byte now in the SendBuffer, whose length is final
    /// from here on (RFC 9293 §3.10.4). ESTABLISHED → FIN-WAIT-1,
    /// CLOSE-WAIT → LAST-ACK; in SYN-SENT / SYN-RECEIVED the FIN waits for
    /// the handshake; LISTEN → CLOSED; otherwise nothing changes.
    pub fn close(&mut self) {
        match self.state {
            State::Listen => self.enter_closed(),
            State::SynSent | State::SynReceived => self.snd.fin_queued = true,
            State::Established => {
                self.snd.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.snd.fin_queued = true;
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
                seq: self.snd.max,
                ack: Some(self.rcv.nxt),
            });
        }
        self.enter_closed();
    }

    /// The application closed the socket and will not read or write it
    /// again (call after `close`). An orphan in FIN-WAIT-2 waits at most
    /// `fin_wait2_timeout` for the peer's FIN, then is CLOSED (Linux
    /// tcp_fin_timeout; RFC 9293 leaves FIN-WAIT-2 unbounded).
    pub fn orphan(&mut self, now: Instant) {
        self.orphaned = true;
        self.update_fin_wait2(now);
    }

    /// Enters TIME-WAIT for 2*MSL (RFC 9293 §3.10.7.4); other timers stop.
    pub(super) fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timers.rto_deadline = None;
        self.timers.persist_deadline = None;
        self.timers.probe_pending = false;
        self.rec.rexmit_one = false;
        self.stop_loss_timers();
        self.timers.time_wait_deadline = Some(now + self.cfg.time_wait);
    }

    /// TIME-WAIT: may a new SYN `syn` for this 4-tuple end it and open a
    /// new connection (RFC 6191 §2, as Linux's TCP_TW_SYN)? Yes when both
    /// ends use timestamps and its TSval is newer than TS.Recent, or
    /// without timestamps when its sequence number lies beyond rcv_nxt.
    pub fn time_wait_accepts_syn(&self, syn: &wire::tcp::TcpRepr) -> bool {
        if self.state != State::TimeWait {
            return false;
        }
        match (self.opts.ts, syn.options.timestamps) {
            (true, Some((val, _))) => (val.wrapping_sub(self.opts.ts_recent) as i32) > 0,
            (true, None) => false,
            (false, _) => syn.seq > self.rcv.nxt,
        }
    }

    /// TIME-WAIT: may an active open from this connection's local port to
    /// the same peer take the 4-tuple now (Linux's `tcp_tw_reuse = 1`)?
    /// Yes when the connection used timestamps, so that the peer's PAWS
    /// tells the new connection's segments from the old ones (RFC 6191),
    /// and it has been in TIME-WAIT for at least a second (the timestamp
    /// clock has moved on).
    pub fn time_wait_reusable(&self, now: Instant) -> bool {
        self.state == State::TimeWait
            && self.opts.ts
            && self.timers.time_wait_deadline.is_some_and(|end| {
                now + self.cfg.time_wait >= end + core::time::Duration::from_secs(1)
            })
    }

    /// The compact record of this connection in TIME-WAIT ([`TimeWait`]):
    /// what TIME-WAIT reads, for the engine to keep instead of the Tcb
    /// once the application let go. None outside TIME-WAIT.
    pub fn time_wait(&self) -> Option<TimeWait> {
        if self.state != State::TimeWait {
            return None;
        }
        let deadline = self.timers.time_wait_deadline?;
        let wnd = self.rcv_wnd();
        Some(TimeWait {
            snd_nxt: self.snd.max,
            rcv_nxt: self.rcv.nxt,
            rcv_wnd: wnd.min(u32::MAX as usize) as u32,
            window: (wnd >> self.rcv.wscale).min(0xffff) as u16,
            ts: self.opts.ts,
            ts_recent: self.opts.ts_recent,
            ts_offset: self.opts.ts_offset,
            tclass: 0,
            deadline,
        })
    }

    /// Enters CLOSED: every timer stops; a pending RST still goes out.
    pub(super) fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.timers.rto_deadline = None;
        self.ack.delack_deadline = None;
        self.timers.persist_deadline = None;
        self.timers.time_wait_deadline = None;
        self.timers.probe_pending = false;
        self.rec.rexmit_one = false;
        self.ack.now = false;
        self.ack.dupacks_owed = 0;
        self.ack.points_len = 0;
        self.ack.snaps_len = 0;
        self.ack.window_update = false;
        self.stop_loss_timers();
    }

    /// Stops RACK, TLP, keepalive and FIN-WAIT-2 timers (CLOSED, TIME-WAIT).
    fn stop_loss_timers(&mut self) {
        self.rec.rack.deadline = None;
        self.rec.tlp = Tlp::default();
        self.ka.deadline = None;
        self.ka.pending = false;
        self.timers.fin_wait2_deadline = None;
    }
}
