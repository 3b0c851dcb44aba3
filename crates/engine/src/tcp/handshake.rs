//! Opening a connection (RFC 9293 §3.5): active open (SYN-SENT), passive
//! open (SYN-RECEIVED), the options both SYNs agree on, and ESTABLISHED.
//! The SYN's arrival is in `input` (§3.10.7.3), the SYN sent in `output`.

use std::net::SocketAddr;

use wire::tcp::{TcpOptions, TcpRepr};
use wire::SeqNum;

use crate::time::Instant;

use super::api::State;
use super::cc::Cc;
use super::config::TcpConfig;
use super::tcb::{wscale_for, Tcb, DEFAULT_MSS, MAX_WSCALE, MIN_MSS, TS_OPTION_LEN};

impl Tcb {
    /// Active open (RFC 9293 §3.10.1): a Tcb in SYN-SENT; the SYN goes out on
    /// the next `poll_output`. `iss` from [`IsnGenerator`](super::IsnGenerator).
    /// Allocates the out-of-order store (`cfg.rcv_buf` bytes).
    pub fn connect(
        cfg: &TcpConfig,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        iss: SeqNum,
        now: Instant,
    ) -> Tcb {
        let (local, remote) = (local.into(), remote.into());
        let mut tcb = Tcb::new(cfg, local, remote, iss, State::SynSent, now);
        tcb.rcv.wscale = if cfg.window_scaling {
            wscale_for(cfg.rcv_buf.max(cfg.rcv_buf_max))
        } else {
            0
        };
        tcb
    }

    /// Passive open: a SYN arrived on a listening port (RFC 9293 §3.10.7.2).
    /// Returns a Tcb in SYN-RECEIVED whose SYN-ACK goes out on the next
    /// `poll_output`, or `None` if `syn` is not a plain SYN (RST, ACK or FIN
    /// set; the caller answers an ACK with [`reply_rst`](super::reply_rst)).
    /// Data carried on the SYN is not accepted (the peer retransmits it).
    pub fn accept(
        cfg: &TcpConfig,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        syn: &TcpRepr,
        iss: SeqNum,
        now: Instant,
    ) -> Option<Tcb> {
        let f = syn.flags;
        if !f.syn() || f.rst() || f.ack() || f.fin() {
            return None;
        }
        let (local, remote) = (local.into(), remote.into());
        let mut tcb = Tcb::new(cfg, local, remote, iss, State::SynReceived, now);
        tcb.rcv.irs = syn.seq;
        tcb.rcv.nxt = syn.seq + 1;
        tcb.rcv.adv = tcb.rcv.nxt;
        tcb.rcv.last_ack_sent = tcb.rcv.nxt;
        tcb.negotiate(&syn.options);
        // RFC 3168 §6.1.1: an ECN-setup SYN has ECE and CWR.
        tcb.ecn.ok = tcb.ecn_offered() && f.ece() && f.cwr();
        // The window of a SYN is never scaled (RFC 7323 §2.2).
        tcb.snd.wnd = usize::from(syn.window);
        tcb.snd.max_wnd = tcb.snd.wnd;
        tcb.snd.wl1 = syn.seq;
        tcb.snd.wl2 = iss;
        Some(tcb)
    }

    /// Applies the options of the peer's SYN: MSS (RFC 9293 §3.7.1: default
    /// 536, effective MSS = min(peer, ours) minus option bytes), window scale
    /// and timestamps (RFC 7323: in use only if both SYNs carry them).
    pub(super) fn negotiate(&mut self, opts: &TcpOptions) {
        let peer_mss = opts.mss.map_or(DEFAULT_MSS, usize::from);
        self.opts.ws = self.cfg.window_scaling && opts.window_scale.is_some();
        if self.opts.ws {
            self.snd.wscale = opts.window_scale.unwrap_or(0).min(MAX_WSCALE);
            self.rcv.wscale = wscale_for(self.cfg.rcv_buf.max(self.cfg.rcv_buf_max));
        } else {
            self.snd.wscale = 0;
            self.rcv.wscale = 0;
        }
        self.opts.sack = self.cfg.sack && opts.sack_permitted;
        self.opts.ts = false;
        if let (true, Some((tsval, _))) = (self.cfg.timestamps, opts.timestamps) {
            self.opts.ts = true;
            self.opts.ts_recent = tsval;
        }
        let opt_len = if self.opts.ts { TS_OPTION_LEN } else { 0 };
        self.snd.mss = peer_mss
            .min(usize::from(self.cfg.mss))
            .saturating_sub(opt_len)
            .max(MIN_MSS);
    }

    /// Enters ESTABLISHED (or FIN-WAIT-1 if the app already closed) and sets
    /// the initial window: RFC 6928 IW, or 1 MSS if the SYN had to be
    /// retransmitted (RFC 5681 §3.1).
    pub(super) fn establish(&mut self, ev: &mut super::Events) {
        self.state = if self.snd.fin_queued {
            State::FinWait1
        } else {
            State::Established
        };
        let iw = if self.timers.syn_retransmitted {
            self.snd.mss
        } else {
            self.snd.mss * self.cfg.initial_cwnd_segments.max(1) as usize
        };
        self.cc = Cc::new(self.cfg.cc, iw);
        self.rec.recover = self.snd.iss;
        self.ecn.recover = self.snd.iss;
        self.timers.retries = 0;
        self.timers.unanswered_since = None;
        self.start_rcv_space();
        ev.connected = true;
        ev.writable = true;
    }

    /// Per-connection offset of the timestamp clock (RFC 7323 §5.4), for
    /// example from [`IsnGenerator::ts_offset`](super::IsnGenerator::ts_offset).
    /// Call right after `connect` / `accept`, before the first `poll_output`;
    /// without it the offset is the ISS.
    pub fn set_ts_offset(&mut self, offset: u32) {
        if self.snd.max == self.snd.iss {
            self.opts.ts_offset = offset;
        }
    }
}
