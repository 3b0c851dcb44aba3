//! CLOSED, LISTEN, SYN-SENT, SYN-RECEIVED.

use wire::tcp::{TcpFlags, TcpOptions};
use wire::SeqNum;

use super::*;
use crate::tcp::{CloseReason, State, Tcb, TcpConfig};

/// A host that actively opened with ISS_A and sent its SYN at T0.
fn syn_sent() -> Host {
    let mut a = Host::connect(&TcpConfig::default(), ISS_A);
    a.output(T0);
    a
}

/// A host in SYN-RECEIVED (ISS_B) after the SYN of a `Host::connect`ed
/// peer (ISS_A), both with `cfg`; returns the SYN too. The SYN-ACK is not
/// polled yet.
fn syn_received(cfg: &TcpConfig) -> (Host, Wire) {
    let mut a = Host::connect(cfg, ISS_A);
    let syn = a.output(T0).remove(0);
    (Host::accept(cfg, &syn, ISS_B), syn)
}

/// What `h` sends now is one RST with sequence number `seq`.
fn assert_sends_rst_only(h: &mut Host, seq: SeqNum) {
    let out = h.output(T0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].repr.flags, TcpFlags(TcpFlags::RST));
    assert_eq!(out[0].repr.seq, seq);
}

#[test]
fn closed_connect_emits_syn_with_options() {
    let mut a = Host::connect(&TcpConfig::default(), ISS_A);
    assert_eq!(a.tcb.state(), State::SynSent);
    assert!(a.tcb.has_output());
    let out = a.output(T0);
    assert_eq!(out.len(), 1);
    let syn = &out[0].repr;
    assert_eq!(syn.flags, TcpFlags(TcpFlags::SYN));
    assert_eq!(syn.seq, ISS_A);
    assert_eq!(syn.options.mss, Some(1460));
    // The window may grow to 6 MiB (auto-tuning): shift 7, as Linux's
    // default tcp_rmem[2] gives.
    assert_eq!(syn.options.window_scale, Some(7));
    assert_eq!(syn.options.timestamps.map(|t| t.1), Some(0));
    assert_eq!(syn.window, 0xffff);
    assert!(!a.tcb.has_output());
    assert_eq!(a.tcb.next_timeout(), Some(T0 + ms(1000)));
}

#[test]
fn closed_connect_with_fixed_buffer_scales_for_the_buffer_only() {
    let cfg = TcpConfig {
        rcv_buf_max: 0,
        ..TcpConfig::default()
    };
    let mut a = Host::connect(&cfg, ISS_A);
    let out = a.output(T0);
    // 256 KiB needs shift 3 to fit in 16 bits; it will not grow.
    assert_eq!(out[0].repr.options.window_scale, Some(3));
}

#[test]
fn listen_syn_accept_emits_syn_ack_with_negotiated_options() {
    let (mut b, syn) = syn_received(&TcpConfig::default());
    assert_eq!(b.tcb.state(), State::SynReceived);
    let out = b.output(T0);
    assert_eq!(out.len(), 1);
    let sa = &out[0].repr;
    assert_eq!(sa.flags, TcpFlags(TcpFlags::SYN | TcpFlags::ACK));
    assert_eq!((sa.seq, sa.ack), (ISS_B, ISS_A + 1));
    assert_eq!(sa.options.mss, Some(1460));
    assert_eq!(sa.options.window_scale, Some(7));
    let a_tsval = syn.repr.options.timestamps.unwrap().0;
    assert_eq!(sa.options.timestamps.map(|t| t.1), Some(a_tsval));
}

#[test]
fn listen_non_plain_syn_accept_returns_none() {
    let cfg = TcpConfig::default();
    for flags in [
        TcpFlags::ACK,
        TcpFlags::SYN | TcpFlags::ACK,
        TcpFlags::SYN | TcpFlags::RST,
        TcpFlags::SYN | TcpFlags::FIN,
        TcpFlags::RST,
    ] {
        let w = craft(SeqNum(7), None, flags, 1000, &[]);
        assert!(
            Tcb::accept(&cfg, addr_b(), addr_a(), &w.repr, ISS_B, T0).is_none(),
            "flags {flags:#x}"
        );
    }
}

#[test]
fn syn_sent_syn_ack_establishes_and_acks() {
    let (a, b) = established();
    assert_eq!(a.tcb.window_scale(), Some((7, 7)));
    assert!(a.tcb.timestamps() && b.tcb.timestamps());
    // min(1460, 1460) - 12 bytes of timestamps.
    assert_eq!(a.tcb.mss(), 1448);
    assert_eq!(a.tcb.snd_una(), ISS_A + 1);
    assert_eq!(a.tcb.rcv_nxt(), ISS_B + 1);
    assert_eq!(b.tcb.rcv_nxt(), ISS_A + 1);
    assert_eq!(a.tcb.cwnd(), 10 * 1448);
    assert_eq!(a.tcb.next_timeout(), None);
}

#[test]
fn syn_sent_syn_ack_without_options_uses_defaults() {
    let mut a = syn_sent();
    let sa = craft(ISS_B, Some(ISS_A + 1), TcpFlags::SYN, 5000, &[]);
    let ev = a.input(&sa, T0);
    assert!(ev.connected);
    assert_eq!(a.tcb.mss(), 536);
    assert_eq!(a.tcb.window_scale(), None);
    assert!(!a.tcb.timestamps());
    assert_eq!(a.tcb.snd_wnd(), 5000);
    let ack = a.output(T0);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].repr.options, TcpOptions::default());
    assert_eq!(ack[0].repr.ack, ISS_B + 1);
    // Without scaling our window field is the plain byte count, capped at 65535.
    assert_eq!(ack[0].repr.window, 0xffff);
}

#[test]
fn syn_sent_rst_with_acceptable_ack_is_refused() {
    let mut a = syn_sent();
    let rst = craft(SeqNum(0), Some(ISS_A + 1), TcpFlags::RST, 0, &[]);
    let ev = a.input(&rst, T0);
    assert_eq!(ev.closed, Some(CloseReason::Refused));
    assert_eq!(a.tcb.state(), State::Closed);
    assert_eq!(a.tcb.next_timeout(), None);
    assert!(a.output(T0).is_empty());
}

#[test]
fn syn_sent_rst_without_ack_is_ignored() {
    let mut a = syn_sent();
    let ev = a.input(&craft(SeqNum(0), None, TcpFlags::RST, 0, &[]), T0);
    assert_eq!(ev.closed, None);
    assert_eq!(a.tcb.state(), State::SynSent);
}

#[test]
fn syn_sent_unacceptable_ack_sends_rst() {
    let mut a = syn_sent();
    let bad = craft(ISS_B, Some(ISS_A + 5), TcpFlags::SYN, 5000, &[]);
    let ev = a.input(&bad, T0);
    assert_eq!(ev, Events::default());
    assert_eq!(a.tcb.state(), State::SynSent);
    assert_sends_rst_only(&mut a, ISS_A + 5);
}

#[test]
fn syn_sent_syn_simultaneous_open_establishes_both() {
    let cfg = TcpConfig::default();
    let mut a = Host::connect(&cfg, ISS_A);
    let mut b = Host::with_tcb(&cfg, Tcb::connect(&cfg, addr_b(), addr_a(), ISS_B, T0));
    let syn_a = a.output(T0).remove(0);
    let syn_b = b.output(T0).remove(0);
    // The SYNs cross.
    assert_eq!(a.input(&syn_b, T0), Events::default());
    assert_eq!(b.input(&syn_a, T0), Events::default());
    assert_eq!(a.tcb.state(), State::SynReceived);
    assert_eq!(b.tcb.state(), State::SynReceived);
    let sa_a = a.output(T0);
    let sa_b = b.output(T0);
    assert_eq!(sa_a.len(), 1);
    assert_eq!(sa_a[0].flags(), TcpFlags(TcpFlags::SYN | TcpFlags::ACK));
    assert_eq!((sa_a[0].repr.seq, sa_a[0].repr.ack), (ISS_A, ISS_B + 1));
    assert!(a.input(&sa_b[0], T0).connected);
    assert!(b.input(&sa_a[0], T0).connected);
    assert_eq!(a.tcb.state(), State::Established);
    assert_eq!(b.tcb.state(), State::Established);
    // And data flows.
    a.write(b"hello");
    exchange(&mut a, &mut b, T0);
    assert_eq!(b.rx.take(), b"hello");
}

#[test]
fn syn_sent_no_answer_backs_off_then_times_out() {
    let cfg = TcpConfig::default();
    let mut a = Host::connect(&cfg, ISS_A);
    a.output(T0);
    let (intervals, closed) = a.expire_unanswered(T0, 20, |out| {
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].repr.seq, ISS_A);
        assert!(out[0].flags().syn());
    });
    assert_eq!(closed, Some(CloseReason::TimedOut));
    // Six retransmissions, then the seventh expiry gives up; the backoff is
    // capped at rto_max (60 s).
    let secs: Vec<u64> = intervals.iter().map(|d| d.as_secs()).collect();
    assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 60]);
    assert_eq!(a.tcb.state(), State::Closed);
    assert_eq!(a.tcb.stats().retransmits, 6);
}

#[test]
fn syn_sent_lost_syn_starts_with_one_mss_window() {
    let cfg = TcpConfig::default();
    let mut a = Host::connect(&cfg, ISS_A);
    let syn = a.output(T0).remove(0);
    let t1 = a.tcb.next_timeout().unwrap();
    a.timer(t1);
    assert_eq!(a.output(t1).len(), 1);
    let mut b = Host::accept(&cfg, &syn, ISS_B);
    exchange(&mut b, &mut a, t1);
    assert_eq!(a.tcb.state(), State::Established);
    // RFC 5681 §3.1: the initial window is one segment after a lost SYN.
    assert_eq!(a.tcb.cwnd(), a.tcb.mss());
    // Karn: no RTT sample from the retransmitted SYN, the backed-off RTO stays.
    assert_eq!(a.tcb.srtt_us(), 0);
    assert_eq!(a.tcb.rto(), ms(2000));
}

#[test]
fn syn_received_ack_too_high_sends_rst() {
    let (mut b, syn) = syn_received(&TcpConfig::default());
    b.output(T0);
    let bad = Wire {
        repr: wire::tcp::TcpRepr {
            seq: ISS_A + 1,
            ack: ISS_B + 100,
            flags: TcpFlags(TcpFlags::ACK),
            window: 1000,
            ..syn.repr
        },
        payload: Vec::new(),
    };
    let ev = b.input(&bad, T0);
    assert!(!ev.connected);
    assert_eq!(b.tcb.state(), State::SynReceived);
    assert_sends_rst_only(&mut b, ISS_B + 100);
}

#[test]
fn syn_received_rst_closes_with_reset() {
    let (mut b, syn) = syn_received(&TcpConfig::default());
    b.output(T0);
    let mut rst = syn.clone();
    rst.repr.seq = ISS_A + 1;
    rst.repr.flags = TcpFlags(TcpFlags::RST);
    let ev = b.input(&rst, T0);
    assert_eq!(ev.closed, Some(CloseReason::Reset));
    assert_eq!(b.tcb.state(), State::Closed);
}

#[test]
fn syn_received_retransmitted_syn_resends_syn_ack() {
    let (mut b, syn) = syn_received(&TcpConfig::default());
    let first = b.output(T0);
    b.input(&syn, T0 + ms(1000));
    let again = b.output(T0 + ms(1000));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].flags(), first[0].flags());
    assert_eq!((again[0].repr.seq, again[0].repr.ack), (ISS_B, ISS_A + 1));
}

#[test]
fn syn_received_no_ack_times_out() {
    let cfg = TcpConfig {
        syn_retries: 2,
        ..TcpConfig::default()
    };
    let (mut b, _) = syn_received(&cfg);
    b.output(T0);
    let mut sent = 0;
    let (_, closed) = b.expire_unanswered(T0, 10, |out| {
        assert!(out[0].flags().syn() && out[0].flags().ack());
        sent += out.len();
    });
    assert_eq!((sent, closed), (2, Some(CloseReason::TimedOut)));
}
