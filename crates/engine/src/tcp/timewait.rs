//! The compact TIME-WAIT of a connection its application let go of
//! (RFC 9293 §3.10.7.4 TIME-WAIT, RFC 6191, RFC 7323): what the engine
//! keeps of a [`Tcb`](super::Tcb) once it is in TIME-WAIT, 32
//! bytes instead of the whole connection, and how it answers segments -
//! as the Tcb did in TIME-WAIT.

use super::input::ts_before;
use crate::time::Instant;
use core::time::Duration;
use wire::tcp::{TcpFlags, TcpRepr};
use wire::SeqNum;

/// A connection in TIME-WAIT, reduced to what TIME-WAIT reads: 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWait {
    /// SND.NXT: the sequence number past our FIN (the ACKs' SEQ).
    pub snd_nxt: SeqNum,
    /// RCV.NXT: past the peer's FIN (the ACKs' ACK).
    pub rcv_nxt: SeqNum,
    /// The receive window last advertised, bytes (segment acceptability).
    pub rcv_wnd: u32,
    /// The window field of the ACKs it sends (rcv_wnd >> the window scale).
    pub window: u16,
    /// Both ends use timestamps (RFC 7323).
    pub ts: bool,
    /// TS.Recent: the latest TSval taken from the peer (RFC 7323 §4.3).
    pub ts_recent: u32,
    /// The connection's timestamp clock offset: TSval = now in ms + offset.
    pub ts_offset: u32,
    /// The IPv6 Traffic Class of the ACKs it sends: the socket's
    /// IPV6_TCLASS, its ECN bits clear (RFC 3168 §6.1.1: no ECT on pure
    /// ACKs); 0 over IPv4. Set by the engine; TCP does not read it.
    pub tclass: u8,
    /// When TIME-WAIT ends (2*MSL after it began, or after the last
    /// retransmitted FIN).
    pub deadline: Instant,
}

/// What a segment for a [`TimeWait`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TwAction {
    /// Nothing: the segment is dropped.
    Drop,
    /// Send [`TimeWait::ack`].
    Ack,
    /// Send [`TimeWait::ack`]: a retransmitted FIN restarted 2*MSL, the
    /// record's deadline moved.
    AckRestarted,
    /// An acceptable RST (at RCV.NXT): the record ends (CLOSED).
    Close,
}

impl TimeWait {
    /// The TSval of a segment sent at `now` (RFC 7323 §5.4: 1 ms ticks).
    pub fn ts_val(&self, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }

    /// May a new SYN `syn` for this 4-tuple end TIME-WAIT and open a new
    /// connection (RFC 6191 §2)? As [`Tcb::time_wait_accepts_syn`](super::Tcb::time_wait_accepts_syn).
    pub fn accepts_syn(&self, syn: &TcpRepr) -> bool {
        match (self.ts, syn.options.timestamps) {
            (true, Some((val, _))) => (val.wrapping_sub(self.ts_recent) as i32) > 0,
            (true, None) => false,
            (false, _) => syn.seq > self.rcv_nxt,
        }
    }

    /// May an active open take this 4-tuple at `now` (Linux's
    /// `tcp_tw_reuse = 1`)? With timestamps, once `time_wait` less a
    /// second is left of it, as [`Tcb::time_wait_reusable`](super::Tcb::time_wait_reusable).
    pub fn reusable(&self, now: Instant, time_wait: Duration) -> bool {
        self.ts && now + time_wait >= self.deadline + Duration::from_secs(1)
    }

    /// The ACK it answers with at `now`, from `local_port` to `remote_port`:
    /// `<SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>`, timestamps when in use.
    pub fn ack(&self, local_port: u16, remote_port: u16, now: Instant) -> TcpRepr {
        let mut repr = TcpRepr {
            src_port: local_port,
            dst_port: remote_port,
            seq: self.snd_nxt,
            ack: self.rcv_nxt,
            flags: TcpFlags(TcpFlags::ACK),
            window: self.window,
            ..TcpRepr::default()
        };
        if self.ts {
            repr.options.timestamps = Some((self.ts_val(now), self.ts_recent));
        }
        repr
    }

    /// Processes a segment of `plen` payload bytes that arrived at `now`
    /// as the Tcb does in TIME-WAIT (RFC 9293 §3.10.7.4; RFC 7323 §5.3
    /// PAWS; RFC 5961 for RST and SYN): an old or unacceptable segment is
    /// ACKed (a retransmitted FIN also restarts 2*MSL, `time_wait`); an
    /// RST at RCV.NXT closes, one elsewhere in the window gets a challenge
    /// ACK; a SYN in the window a challenge ACK; anything else is dropped.
    pub fn input(
        &mut self,
        seg: &TcpRepr,
        plen: usize,
        now: Instant,
        time_wait: Duration,
    ) -> TwAction {
        let f = seg.flags;
        let tsval = if self.ts {
            seg.options.timestamps.map(|(val, _)| val)
        } else {
            None
        };
        if let Some(val) = tsval {
            if !f.rst() && ts_before(val, self.ts_recent) {
                return TwAction::Ack;
            }
        }
        let seg_len = plen + usize::from(f.syn()) + usize::from(f.fin());
        let (rcv_nxt, wnd) = (self.rcv_nxt, self.rcv_wnd as usize);
        let in_window = |s: SeqNum| s >= rcv_nxt && s - rcv_nxt < wnd;
        let ok = match (seg_len, wnd) {
            (0, 0) => seg.seq == rcv_nxt,
            (0, _) => in_window(seg.seq),
            (_, 0) => seg.seq == rcv_nxt && plen == 0 && !f.syn(),
            _ => in_window(seg.seq) || in_window(seg.seq + (seg_len - 1)),
        };
        if !ok {
            if f.rst() {
                return TwAction::Drop;
            }
            if f.fin() {
                self.deadline = now + time_wait;
                return TwAction::AckRestarted;
            }
            return TwAction::Ack;
        }
        if let Some(val) = tsval {
            if !ts_before(val, self.ts_recent) && seg.seq <= rcv_nxt {
                self.ts_recent = val;
            }
        }
        if f.rst() {
            return if seg.seq == rcv_nxt {
                TwAction::Close
            } else {
                TwAction::Ack
            };
        }
        if f.syn() {
            return TwAction::Ack;
        }
        TwAction::Drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tw(ts: bool) -> TimeWait {
        TimeWait {
            snd_nxt: SeqNum(1000),
            rcv_nxt: SeqNum(5000),
            rcv_wnd: 4096,
            window: 4096,
            ts,
            ts_recent: 100,
            ts_offset: 7,
            tclass: 0,
            deadline: Instant(60_000_000_000),
        }
    }

    fn seg(seq: u32, flags: u8, tsval: Option<u32>) -> TcpRepr {
        let mut s = TcpRepr {
            src_port: 80,
            dst_port: 40000,
            seq: SeqNum(seq),
            ack: SeqNum(1000),
            flags: TcpFlags(flags),
            ..TcpRepr::default()
        };
        s.options.timestamps = tsval.map(|v| (v, 0));
        s
    }

    #[test]
    fn the_record_is_compact() {
        assert!(core::mem::size_of::<TimeWait>() <= 32);
    }

    #[test]
    fn retransmitted_fin_is_acked_and_restarts_2msl() {
        let mut t = tw(true);
        let now = Instant(5_000_000_000);
        let fin = seg(4999, TcpFlags::FIN | TcpFlags::ACK, Some(150));
        let a = t.input(&fin, 0, now, Duration::from_secs(60));
        assert_eq!(a, TwAction::AckRestarted);
        assert_eq!(t.deadline, Instant(65_000_000_000));
        let ack = t.ack(40000, 80, now);
        assert_eq!((ack.seq, ack.ack), (SeqNum(1000), SeqNum(5000)));
        assert_eq!(ack.options.timestamps, Some((5_007, 100)));
    }

    #[test]
    fn rst_closes_only_at_rcv_nxt_and_old_segments_are_acked() {
        let mut t = tw(true);
        let now = Instant(1);
        let d = Duration::from_secs(60);
        assert_eq!(
            t.input(&seg(5001, TcpFlags::RST, None), 0, now, d),
            TwAction::Ack
        );
        assert_eq!(
            t.input(&seg(5000, TcpFlags::RST, None), 0, now, d),
            TwAction::Close
        );
        // PAWS: an older TSval is ACKed and dropped.
        assert_eq!(
            t.input(&seg(5000, TcpFlags::ACK, Some(50)), 0, now, d),
            TwAction::Ack
        );
        assert_eq!(
            t.input(&seg(5000, TcpFlags::ACK, Some(150)), 0, now, d),
            TwAction::Drop
        );
        assert_eq!(t.ts_recent, 150);
    }

    #[test]
    fn syn_reuse_follows_rfc_6191() {
        let t = tw(true);
        assert!(t.accepts_syn(&seg(1, TcpFlags::SYN, Some(101))));
        assert!(!t.accepts_syn(&seg(9000, TcpFlags::SYN, Some(100))));
        assert!(!t.accepts_syn(&seg(9000, TcpFlags::SYN, None)));
        let t = tw(false);
        assert!(t.accepts_syn(&seg(5001, TcpFlags::SYN, None)));
        assert!(!t.accepts_syn(&seg(4000, TcpFlags::SYN, None)));
        assert!(
            !t.reusable(Instant(1_000_000_000), Duration::from_secs(60)),
            "no timestamps"
        );
        let t = tw(true);
        assert!(!t.reusable(Instant(0), Duration::from_secs(60)));
        assert!(t.reusable(Instant(1_000_000_000), Duration::from_secs(60)));
    }
}
