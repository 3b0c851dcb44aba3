//! The building blocks: out-of-order queue, RTO estimator, ISN,
//! replies for segments to no connection.

use std::net::{Ipv4Addr, SocketAddrV4};

use wire::tcp::TcpFlags;
use wire::SeqNum;

use super::*;
use crate::tcp::reassembly::Reassembly;
use crate::tcp::rto::RtoEstimator;
use crate::tcp::{reply_rst, IsnGenerator};

#[test]
fn reassembly_adjacent_pieces_merge_and_pop_in_order() {
    let mut q = Reassembly::new(64, 4);
    let base = SeqNum(u32::MAX - 10); // wraps inside the buffer
    let data = pattern(40, 9);
    assert_eq!(q.insert(base, base + 30, &data[30..40]), 10);
    assert_eq!(q.insert(base, base + 10, &data[10..20]), 10);
    assert_eq!(q.insert(base, base + 20, &data[20..30]), 10);
    assert_eq!(q.len(), 1, "10..40 is one interval");
    let mut rx = RxBuf::new(1000);
    let mut rcv_nxt = base;
    assert_eq!(
        q.pop_contiguous(&mut rcv_nxt, &mut rx),
        0,
        "hole at the front"
    );
    rx.write(&data[..10]);
    rcv_nxt += 10;
    assert_eq!(q.pop_contiguous(&mut rcv_nxt, &mut rx), 30);
    assert_eq!(rx.take(), data);
    assert!(q.is_empty());
}

#[test]
fn reassembly_full_bound_drops_rightmost_or_new() {
    let mut q = Reassembly::new(1000, 2);
    let b = SeqNum(0);
    assert_eq!(q.insert(b, b + 100, &[1; 10]), 10);
    assert_eq!(q.insert(b, b + 300, &[3; 10]), 10);
    // Beyond every interval and over the bound: dropped.
    assert_eq!(q.insert(b, b + 500, &[5; 10]), 0);
    // Left of the rightmost: the rightmost is evicted instead.
    assert_eq!(q.insert(b, b + 200, &[2; 10]), 10);
    assert_eq!(q.len(), 2);
    // Beyond the buffer: dropped; partly beyond: trimmed.
    assert_eq!(q.insert(b, b + 1000, &[9; 10]), 0);
    assert_eq!(q.insert(b, b + 205, &[2; 10]), 10);
    let mut rx = RxBuf::new(10_000);
    let mut rcv_nxt = b + 100;
    assert_eq!(q.pop_contiguous(&mut rcv_nxt, &mut rx), 10);
    assert_eq!(rcv_nxt, b + 110);
    assert_eq!(q.len(), 1);
}

#[test]
fn reassembly_full_receive_buffer_keeps_the_rest() {
    let mut q = Reassembly::new(100, 4);
    let b = SeqNum(7);
    q.insert(b, b + 1, &[4; 50]);
    let mut rx = RxBuf::new(20);
    let mut rcv_nxt = b + 1;
    assert_eq!(q.pop_contiguous(&mut rcv_nxt, &mut rx), 20);
    assert_eq!(q.len(), 1);
    rx.take();
    let mut rx2 = RxBuf::new(100);
    assert_eq!(q.pop_contiguous(&mut rcv_nxt, &mut rx2), 30);
    assert_eq!(rcv_nxt, b + 51);
}

#[test]
fn reassembly_grown_buffer_keeps_wrapped_pieces_and_takes_more() {
    let mut q = Reassembly::new(64, 4);
    let mut rcv_nxt = SeqNum(u32::MAX - 5);
    let data = pattern(300, 3);
    // Move the base so that stored pieces wrap around the 64-byte buffer.
    q.insert(rcv_nxt, rcv_nxt + 1, &data[1..40]);
    let mut rx = RxBuf::new(10_000);
    rx.write(&data[..1]);
    rcv_nxt += 1;
    assert_eq!(q.pop_contiguous(&mut rcv_nxt, &mut rx), 39);
    assert_eq!(
        q.insert(rcv_nxt, rcv_nxt + 10, &data[50..250]),
        54,
        "cut at 64"
    );
    assert_eq!(q.insert(rcv_nxt, rcv_nxt + 2, &data[42..46]), 4);
    q.ensure_capacity(256);
    assert_eq!(q.capacity(), 256);
    // The grown buffer holds what the old one could not.
    assert_eq!(q.insert(rcv_nxt, rcv_nxt + 10, &data[50..250]), 200);
    rx.write(&data[40..42]);
    rcv_nxt += 2;
    assert_eq!(q.pop_contiguous(&mut rcv_nxt, &mut rx), 4);
    rx.write(&data[46..50]);
    rcv_nxt += 4;
    assert_eq!(q.pop_contiguous(&mut rcv_nxt, &mut rx), 200);
    assert_eq!(rx.take(), data[..250].to_vec());
}

#[test]
fn rto_samples_follow_rfc6298_and_backoff_caps() {
    let mut r = RtoEstimator::new(ms(1000), ms(200), ms(60_000));
    assert_eq!(r.rto(), ms(1000));
    r.sample(ms(100));
    assert_eq!((r.srtt(), r.rttvar()), (Some(ms(100)), ms(50)));
    assert_eq!(r.rto(), ms(300));
    r.sample(ms(200));
    // RTTVAR = 3/4*50 + 1/4*100 = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5
    assert_eq!(r.srtt(), Some(core::time::Duration::from_micros(112_500)));
    assert_eq!(r.rttvar(), core::time::Duration::from_micros(62_500));
    assert_eq!(r.rto(), core::time::Duration::from_micros(362_500));
    for _ in 0..20 {
        r.backoff();
    }
    assert_eq!(r.rto(), ms(60_000), "rto_max bound");
    r.sample(ms(100));
    assert!(
        r.rto() < ms(1000),
        "a new sample replaces the backed-off RTO"
    );
    let mut fresh = RtoEstimator::new(ms(1000), ms(200), ms(60_000));
    fresh.sample(ms(1));
    assert_eq!(fresh.rto(), ms(200), "rto_min bound");
}

#[test]
fn isn_depends_on_tuple_and_advances_every_4us() {
    let g = IsnGenerator::new();
    let a = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 1000);
    let b = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80);
    let c = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 81);
    let i1 = g.isn(a, b, T0);
    assert_eq!(g.isn(a, b, T0), i1);
    assert_ne!(g.isn(a, c, T0), i1);
    assert_eq!(
        g.isn(a, b, T0 + core::time::Duration::from_micros(400)),
        i1 + 100
    );
    assert_ne!(IsnGenerator::new().isn(a, b, T0), i1, "a fresh secret");
}

#[test]
fn closed_syn_reply_rst_acks_the_syn() {
    let syn = craft(SeqNum(500), None, TcpFlags::SYN, 1000, &[]);
    let r = reply_rst(&syn.repr).unwrap();
    assert_eq!(r.flags, TcpFlags(TcpFlags::RST | TcpFlags::ACK));
    assert_eq!((r.seq, r.ack), (SeqNum(0), SeqNum(501)));
    assert_eq!(
        (r.src_port, r.dst_port),
        (syn.repr.dst_port, syn.repr.src_port)
    );
    let data_fin = craft(SeqNum(500), None, TcpFlags::FIN, 1000, &[1; 10]);
    assert_eq!(reply_rst(&data_fin.repr).unwrap().ack, SeqNum(511));
}

#[test]
fn closed_ack_reply_rst_uses_the_ack_as_seq() {
    let seg = craft(SeqNum(500), Some(SeqNum(9000)), 0, 1000, b"hi");
    let r = reply_rst(&seg.repr).unwrap();
    assert_eq!(r.flags, TcpFlags(TcpFlags::RST));
    assert_eq!(r.seq, SeqNum(9000));
}

#[test]
fn closed_rst_reply_rst_is_none() {
    let seg = craft(SeqNum(500), Some(SeqNum(9000)), TcpFlags::RST, 0, &[]);
    assert_eq!(reply_rst(&seg.repr), None);
}
