//! FIN-WAIT-1/2, CLOSING, TIME-WAIT, CLOSE-WAIT, LAST-ACK, abort.

use wire::tcp::TcpFlags;

use super::*;
use crate::tcp::{CloseReason, State, TcpConfig};

/// `a` closed; its FIN delivered to `b` (CLOSE-WAIT); b's ACK not yet delivered.
fn a_closed_b_close_wait() -> (Host, Host, Vec<Wire>) {
    let (mut a, mut b) = established();
    a.tcb.close();
    let (_, ev) = exchange(&mut a, &mut b, T0);
    assert!(ev.peer_fin && ev.readable);
    assert_eq!(b.tcb.state(), State::CloseWait);
    let ack = b.output(T0);
    (a, b, ack)
}

/// `a_closed_b_close_wait` with `a` past the ACK of its FIN (FIN-WAIT-2)
/// and `b` closed too (its FIN queued, not yet polled).
fn a_fin_wait_2_b_closed() -> (Host, Host) {
    let (mut a, mut b, ack) = a_closed_b_close_wait();
    a.input(&ack[0], T0);
    b.tcb.close();
    (a, b)
}

#[test]
fn established_close_sends_fin_and_enters_fin_wait_1() {
    let (mut a, _b) = established();
    a.tcb.close();
    assert_eq!(a.tcb.state(), State::FinWait1);
    let out = a.output(T0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].flags(), TcpFlags(TcpFlags::FIN | TcpFlags::ACK));
    assert_eq!(out[0].repr.seq, ISS_A + 1);
    assert!(
        a.tcb.next_timeout().is_some(),
        "the FIN is retransmitted if lost"
    );
}

#[test]
fn established_close_with_queued_data_sends_fin_after_data() {
    let (mut a, mut b) = established();
    let data = pattern(3000, 1);
    a.write(&data);
    a.tcb.close();
    let (segs, ev) = exchange(&mut a, &mut b, T0);
    assert!(ev.peer_fin);
    let last = segs.last().unwrap();
    assert!(last.flags().fin());
    assert_eq!(last.repr.seq + last.payload.len(), ISS_A + 1 + 3000);
    assert!(segs[..segs.len() - 1].iter().all(|s| !s.flags().fin()));
    assert_eq!(b.rx.take(), data);
}

#[test]
fn established_fin_enters_close_wait_and_acks_at_once() {
    let (_a, b, ack) = a_closed_b_close_wait();
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].repr.ack, ISS_A + 2);
    assert_eq!(b.tcb.rcv_nxt(), ISS_A + 2);
}

#[test]
fn fin_wait_1_ack_of_fin_enters_fin_wait_2() {
    let (mut a, _b, ack) = a_closed_b_close_wait();
    a.input(&ack[0], T0);
    assert_eq!(a.tcb.state(), State::FinWait2);
    assert_eq!(a.tcb.next_timeout(), None);
}

#[test]
fn close_wait_close_sends_fin_and_enters_last_ack() {
    let (_a, mut b, _ack) = a_closed_b_close_wait();
    b.tcb.close();
    assert_eq!(b.tcb.state(), State::LastAck);
    let out = b.output(T0);
    assert_eq!(out.len(), 1);
    assert!(out[0].flags().fin());
}

#[test]
fn fin_wait_2_fin_enters_time_wait_and_expiry_closes_normally() {
    let (mut a, mut b) = a_fin_wait_2_b_closed();
    let (_, ev) = exchange(&mut b, &mut a, T0 + ms(1));
    assert!(ev.peer_fin);
    assert_eq!(a.tcb.state(), State::TimeWait);
    let last_ack = a.output(T0 + ms(1));
    assert_eq!(last_ack.len(), 1);
    assert_eq!(a.tcb.next_timeout(), Some(T0 + ms(1) + ms(60_000)));
    // b: LAST-ACK -> CLOSED on the ACK of its FIN.
    assert_eq!(
        b.input(&last_ack[0], T0 + ms(2)).closed,
        Some(CloseReason::Normal)
    );
    assert_eq!(b.tcb.state(), State::Closed);
    // a: TIME-WAIT lasts 2*MSL.
    assert_eq!(a.timer(T0 + ms(60_000)).closed, None);
    assert_eq!(a.timer(T0 + ms(60_001)).closed, Some(CloseReason::Normal));
    assert_eq!(a.tcb.state(), State::Closed);
}

#[test]
fn last_ack_lost_ack_retransmits_fin() {
    let (mut a, mut b) = a_fin_wait_2_b_closed();
    let fin = b.output(T0);
    // The FIN is lost: b retransmits it after the RTO; a in FIN-WAIT-2 takes it.
    let t = b.tcb.next_timeout().unwrap();
    b.timer(t);
    let again = b.output(t);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].repr.seq, fin[0].repr.seq);
    assert!(again[0].flags().fin());
    a.input(&again[0], t);
    assert_eq!(a.tcb.state(), State::TimeWait);
}

#[test]
fn time_wait_retransmitted_fin_is_acked_and_restarts_timer() {
    let (mut a, mut b) = a_fin_wait_2_b_closed();
    let fin = b.output(T0);
    a.input(&fin[0], T0);
    a.output(T0);
    assert_eq!(a.tcb.state(), State::TimeWait);
    let later = T0 + ms(5000);
    a.input(&fin[0], later);
    let re_ack = a.output(later);
    assert_eq!(re_ack.len(), 1);
    assert_eq!(re_ack[0].repr.ack, fin[0].repr.seq + 1);
    assert_eq!(a.tcb.next_timeout(), Some(later + ms(60_000)));
}

#[test]
fn fin_wait_1_fin_simultaneous_close_enters_closing_then_time_wait() {
    let (mut a, mut b) = established();
    a.tcb.close();
    b.tcb.close();
    let fin_a = a.output(T0);
    let fin_b = b.output(T0);
    // The FINs cross: neither acknowledges the other's FIN.
    let ev_a = a.input(&fin_b[0], T0);
    let ev_b = b.input(&fin_a[0], T0);
    assert!(ev_a.peer_fin && ev_b.peer_fin);
    assert_eq!(a.tcb.state(), State::Closing);
    assert_eq!(b.tcb.state(), State::Closing);
    let ack_a = a.output(T0);
    let ack_b = b.output(T0);
    a.input(&ack_b[0], T0);
    b.input(&ack_a[0], T0);
    assert_eq!(a.tcb.state(), State::TimeWait);
    assert_eq!(b.tcb.state(), State::TimeWait);
    let t = a.tcb.next_timeout().unwrap();
    assert_eq!(a.timer(t).closed, Some(CloseReason::Normal));
}

#[test]
fn fin_wait_1_fin_with_ack_enters_time_wait() {
    let (mut a, mut b) = established();
    a.tcb.close();
    let fin_a = a.output(T0);
    b.input(&fin_a[0], T0);
    b.tcb.close();
    // b's ACK of a's FIN and its own FIN travel in one segment.
    let fin_ack = b.output(T0);
    assert_eq!(fin_ack.len(), 1);
    assert!(fin_ack[0].flags().fin() && fin_ack[0].repr.ack == ISS_A + 2);
    a.input(&fin_ack[0], T0);
    assert_eq!(a.tcb.state(), State::TimeWait);
}

#[test]
fn established_abort_sends_rst_and_peer_is_reset() {
    let (mut a, mut b) = established();
    a.write(b"unsent data is discarded");
    a.tcb.abort();
    assert_eq!(a.tcb.state(), State::Closed);
    assert!(a.tcb.has_output());
    let out = a.output(T0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].flags(), TcpFlags(TcpFlags::RST | TcpFlags::ACK));
    assert_eq!(b.input(&out[0], T0).closed, Some(CloseReason::Reset));
    assert!(!a.tcb.has_output());
    assert!(a.output(T0).is_empty());
}

#[test]
fn syn_sent_close_sends_fin_after_handshake() {
    let cfg = TcpConfig::default();
    let mut a = Host::connect(&cfg, ISS_A);
    let syn = a.output(T0).remove(0);
    a.write(b"req");
    a.tcb.close();
    let mut b = Host::accept(&cfg, &syn, ISS_B);
    let (_, ev) = exchange(&mut b, &mut a, T0);
    assert!(ev.connected);
    assert_eq!(a.tcb.state(), State::FinWait1);
    let (_, ev) = exchange(&mut a, &mut b, T0);
    assert!(ev.connected && ev.peer_fin);
    assert_eq!(b.rx.take(), b"req");
}
