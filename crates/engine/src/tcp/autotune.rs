//! Buffer auto-tuning: how big the receive and send buffers should be.
//!
//! - Receive (dynamic right-sizing, Fisk & Feng; Linux's
//!   `tcp_rcv_space_adjust`): once per round trip the receiver counts the
//!   bytes delivered in order during it. When that beats the best round
//!   trip so far, the buffer it asks for is about twice the bytes of that
//!   round trip (more while the rate is still growing, as a sender in slow
//!   start doubles it each round trip), up to `rcv_buf_max`. So the
//!   advertised window follows the bandwidth-delay product instead of
//!   capping the flow at `rcv_buf` per RTT. A receiver whose application
//!   does not read sees its window close and asks for nothing more.
//! - Send (after Linux's `tcp_sndbuf_expand`): four times the congestion
//!   window, up to `snd_buf_max`. The ring holds everything from snd_una:
//!   a window in flight, during a recovery the SACKed data above a hole
//!   (up to another window by the time the hole is repaired), and the next
//!   window queued. Twice cwnd (as these bytes once were) filled during
//!   each recovery, so the application stopped writing, and an echoing
//!   one stopped reading and closed its receive window (issue 35). Linux
//!   counts `2 · cwnd` segments at about three times their payload in
//!   buffer memory, so its send buffer holds more payload still. The engine grows the TX ring only
//!   while the bytes in flight fill half of it (the ring then bounds the
//!   flight); a ring that holds mostly unsent data is big enough, and a
//!   bigger one would only cost cache.
//!
//! The Tcb only says what it wants ([`Tcb::rcv_buf_wanted`],
//! [`Tcb::snd_buf_wanted`]); the engine grows the rings, within the memory
//! it allows the application. The advertised window never exceeds what the
//! RX ring can take, nor `rcv_buf_max`.

use core::time::Duration;

use crate::time::Instant;

use super::cc::CongestionControl;
use super::tcb::Tcb;

/// Initial window of the measurement, in segments (Linux: TCP_INIT_CWND).
const INITIAL_SPACE_SEGMENTS: usize = 10;

impl Tcb {
    /// Starts the receive measurement when the connection is established.
    pub(super) fn start_rcv_space(&mut self) {
        self.tune.rcv_space = self.cfg.rcv_buf.min(INITIAL_SPACE_SEGMENTS * self.snd.mss);
        self.tune.rcv_space_seq = self.rcv.nxt;
    }

    /// Receiver: an in-order data segment of full size echoed `tsecr`, one
    /// of our timestamps (RFC 7323 §4.3 measures the RTT this way on the
    /// sender; Linux's `tcp_rcv_rtt_measure_ts` does it on the receiver).
    /// Samples of less than the 1 ms clock tick are not taken (the
    /// handshake's RTT serves then); the estimate is smoothed with gain 1/8.
    pub(super) fn rcv_rtt_sample(&mut self, tsecr: u32, now: Instant) {
        let ms = self.ts_val(now).wrapping_sub(tsecr);
        if ms == 0 || ms > 60_000 {
            return;
        }
        let m = Duration::from_millis(u64::from(ms));
        self.tune.rcv_rtt = Some(match self.tune.rcv_rtt {
            None => m,
            Some(r) => (r * 7 + m) / 8,
        });
    }

    /// Receiver: in-order data moved rcv_nxt at `now`. Once per round trip
    /// (the receiver's RTT estimate, else the smoothed RTT), compares the
    /// bytes delivered in it with the best round trip so far and raises the
    /// receive buffer asked for (Linux's `tcp_rcv_space_adjust`):
    /// 2 · delivered + 16 MSS, plus twice the relative growth of the rate.
    pub(super) fn rcv_space_adjust(&mut self, now: Instant) {
        let Some(rtt) = self.rcv_rtt() else {
            return;
        };
        if now.saturating_since(self.tune.rcv_space_time) < rtt {
            return;
        }
        let copied = self.rcv.nxt - self.tune.rcv_space_seq;
        if copied > self.tune.rcv_space {
            let max = self.cfg.rcv_buf_max;
            if max > self.cfg.rcv_buf {
                let space = self.tune.rcv_space.max(1) as u64;
                let mut win = (2 * copied as u64).saturating_add(16 * self.snd.mss as u64);
                let grow = win.saturating_mul(copied as u64 - space.min(copied as u64)) / space;
                win = win.saturating_add(2 * grow.min(max as u64));
                let want = win.min(max as u64) as usize;
                self.tune.rcv_buf_want = self.tune.rcv_buf_want.max(want);
            }
            self.tune.rcv_space = copied;
        }
        self.tune.rcv_space_seq = self.rcv.nxt;
        self.tune.rcv_space_time = now;
    }

    /// The round trip the receiver measures over: the timestamp-based
    /// estimate once it is above the clock's 1 ms tick and its rounding
    /// (below that it says little: a LAN's RTT is tens of µs, and a buffer
    /// sized for 1 ms would be far larger than the path needs, costing
    /// cache and memory); else the smoothed RTT of our own samples (the
    /// handshake's at least); else the timestamp estimate.
    fn rcv_rtt(&self) -> Option<Duration> {
        let srtt = self.timers.rto.srtt();
        match (self.tune.rcv_rtt, srtt) {
            (Some(ts), _) if ts >= Duration::from_millis(2) => Some(ts),
            (_, Some(s)) => Some(s),
            (ts, None) => ts,
        }
    }

    /// The receive buffer auto-tuning asks for, bytes: at least the one the
    /// connection started with, at most `rcv_buf_max`. The engine grows the
    /// RX ring towards it.
    pub fn rcv_buf_wanted(&self) -> usize {
        self.tune.rcv_buf_want
    }

    /// The send buffer the connection can use, bytes: four times the
    /// congestion window (see the module doc), at most `snd_buf_max`. The
    /// engine offers the application a TX ring that large.
    pub fn snd_buf_wanted(&self) -> usize {
        if self.tune.snd_buf_locked {
            return self.cfg.snd_buf_max;
        }
        (4 * self.cc.cwnd()).min(self.cfg.snd_buf_max)
    }

    /// Sender: before a burst of up to `burst` segments, grows the
    /// retransmission queue (doubling) when it has less room than that
    /// and a send buffer of `snd_buf_max` bytes needs more entries than it
    /// holds (4 MiB is about 2900 full segments). Allocates, a few times per
    /// connection.
    pub(super) fn grow_scoreboard(&mut self, burst: usize) {
        let cap = self.rec.sb.capacity();
        if self.rec.sb.room() >= burst.min(cap) {
            return;
        }
        let need = self.cfg.snd_buf_max / self.snd.mss.max(1) + burst;
        if cap < need && self.rec.sb.len() >= cap / 2 {
            self.rec.sb.grow((2 * cap).min(need.next_power_of_two()));
        }
    }

    /// The most the advertised window may be, bytes: `rcv_buf_max`, or the
    /// starting buffer when that is larger (a fixed buffer).
    pub(super) fn window_clamp(&self) -> usize {
        self.cfg.rcv_buf.max(self.cfg.rcv_buf_max)
    }

    /// Sets the receive buffer the way SO_RCVBUF does on Linux: auto-tuning
    /// stops, and the window grows no further than `bytes` (the RX ring
    /// grows to hold it if it can). Applies from the next advertisement;
    /// the window scale chosen in the SYN stays.
    pub fn set_rcv_buf(&mut self, bytes: usize) {
        let bytes = bytes.max(self.snd.mss);
        self.cfg.rcv_buf_max = bytes;
        self.cfg.rcv_buf = self.cfg.rcv_buf.min(bytes);
        self.tune.rcv_buf_want = bytes;
    }

    /// Sets the send buffer the way SO_SNDBUF does on Linux: the TX ring
    /// offered to the application is `bytes`, whatever cwnd is.
    pub fn set_snd_buf(&mut self, bytes: usize) {
        self.cfg.snd_buf_max = bytes;
        self.tune.snd_buf_locked = true;
    }
}
