//! ESTABLISHED: data, ACK generation, windows, Nagle, RST and SYN checks.

use wire::tcp::TcpFlags;

use super::*;
use crate::tcp::{CloseReason, State, TcpConfig};

/// A segment from `b` to `a` shaped like `b`'s own output (ports, options).
fn from_b(b: &mut Host, seq: SeqNum, flags: u8, payload: &[u8]) -> Wire {
    let mut w = craft(seq, Some(b.tcb.rcv_nxt()), flags, 1000, payload);
    w.repr.src_port = b.tcb.local().port();
    w.repr.dst_port = b.tcb.remote().port();
    w
}

#[test]
fn established_in_order_segment_acks_after_delayed_ack_timeout() {
    let (mut a, mut b) = established();
    a.write(&[7; 100]);
    let (segs, ev) = exchange(&mut a, &mut b, T0);
    assert_eq!(segs.len(), 1);
    assert!(ev.readable);
    assert_eq!(b.rx.take(), vec![7; 100]);
    // No ACK yet: it waits for the delayed-ACK timer (40 ms).
    assert!(b.output(T0 + ms(1)).is_empty());
    assert_eq!(b.tcb.next_timeout(), Some(T0 + ms(40)));
    b.timer(T0 + ms(39));
    assert!(b.output(T0 + ms(39)).is_empty());
    b.timer(T0 + ms(40));
    let ack = b.output(T0 + ms(40));
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].repr.ack, ISS_A + 101);
    assert_eq!(ack[0].payload.len(), 0);
}

#[test]
fn established_second_full_segment_acks_immediately() {
    let (mut a, mut b) = established();
    let mss = a.tcb.mss();
    a.write(&pattern(2 * mss, 1));
    let segs = a.output(T0);
    assert_eq!(segs.len(), 2);
    b.input(&segs[0], T0);
    assert!(b.output(T0).is_empty());
    b.input(&segs[1], T0);
    let ack = b.output(T0);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].repr.ack, ISS_A + 1 + 2 * mss);
    assert_eq!(b.tcb.next_timeout(), None);
}

#[test]
fn established_out_of_order_segment_sends_dup_ack_and_hole_fill_acks_all() {
    let (mut a, mut b) = established();
    let mss = a.tcb.mss();
    let data = pattern(3 * mss, 2);
    a.write(&data);
    let segs = a.output(T0);
    assert_eq!(segs.len(), 3);
    for s in &segs[1..] {
        let ev = b.input(s, T0);
        assert!(!ev.readable);
        let dup = b.output(T0);
        assert_eq!(dup.len(), 1, "immediate duplicate ACK");
        assert_eq!(dup[0].repr.ack, ISS_A + 1);
    }
    assert_eq!(b.tcb.ooo_intervals(), 1);
    let ev = b.input(&segs[0], T0);
    assert!(ev.readable);
    let ack = b.output(T0);
    assert_eq!(ack.len(), 1, "immediate ACK for filling the hole");
    assert_eq!(ack[0].repr.ack, ISS_A + 1 + 3 * mss);
    assert_eq!(b.rx.take(), data);
    assert_eq!(b.tcb.ooo_intervals(), 0);
}

#[test]
fn established_segment_beyond_window_is_acked_and_dropped() {
    let (mut a, mut b) = established();
    let far = a.tcb.rcv_nxt() + (a.tcb.rcv_wnd() + 10);
    let w = from_b(&mut b, far, 0, &[1; 100]);
    let ev = a.input(&w, T0);
    assert!(!ev.readable);
    assert_eq!(a.rx.unread(), 0);
    let out = a.output(T0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].repr.ack, a.tcb.rcv_nxt());
}

#[test]
fn established_segment_overlapping_left_edge_is_trimmed() {
    let (mut a, mut b) = established();
    let data = pattern(300, 3);
    let rcv = a.tcb.rcv_nxt();
    a.input(&from_b(&mut b, rcv, 0, &data[..100]), T0);
    // A retransmission covering old and new bytes.
    a.input(&from_b(&mut b, rcv + 50, 0, &data[50..300]), T0);
    assert_eq!(a.rx.take(), data);
    assert_eq!(a.tcb.rcv_nxt(), rcv + 300);
}

#[test]
fn established_old_duplicate_segment_is_acked_not_delivered() {
    let (mut a, mut b) = established();
    let rcv = a.tcb.rcv_nxt();
    let w = from_b(&mut b, rcv, 0, b"abc");
    a.input(&w, T0);
    assert_eq!(a.rx.take(), b"abc");
    a.input(&w, T0);
    assert_eq!(a.rx.unread(), 0);
    let out = a.output(T0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].repr.ack, rcv + 3);
}

#[test]
fn established_small_writes_with_nagle_are_coalesced() {
    let (mut a, mut b) = established();
    a.write(b"0123456789");
    let first = a.output(T0);
    assert_eq!(
        first.len(),
        1,
        "nothing in flight: the first small segment goes"
    );
    for _ in 0..5 {
        a.write(b"abcdefghij");
        assert!(
            a.output(T0).is_empty(),
            "Nagle holds small segments while data is unacknowledged"
        );
    }
    assert!(!a.tcb.has_output());
    // b's delayed ACK releases them as one segment.
    b.input(&first[0], T0);
    b.timer(T0 + ms(40));
    let ack = b.output(T0 + ms(40));
    a.input(&ack[0], T0 + ms(40));
    let out = a.output(T0 + ms(40));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].payload, b"abcdefghij".repeat(5));
}

#[test]
fn established_small_writes_with_nodelay_go_out_at_once() {
    let (mut a, _b) = established();
    a.tcb.set_nodelay(true);
    for i in 0..6 {
        a.write(b"abcdefghij");
        let out = a.output(T0);
        assert_eq!(out.len(), 1, "write {i}");
        assert_eq!(out[0].payload, b"abcdefghij");
        assert!(out[0].flags().psh());
    }
}

/// TCP_CORK (tcp(7)): while corked, no segment shorter than the MSS goes,
/// not even with nothing in flight and TCP_NODELAY; full segments do; the
/// uncork or a FIN sends the rest.
#[test]
fn established_corked_sends_only_full_segments_until_uncork_or_fin() {
    let (mut a, _b) = established();
    a.tcb.set_nodelay(true);
    a.tcb.set_corked(true);
    let mss = a.tcb.mss();
    a.write(b"ab");
    a.write(b"cd");
    assert!(
        a.output(T0).is_empty(),
        "a partial segment waits for the uncork"
    );
    a.write(&pattern(mss, 1));
    let out = a.output(T0);
    assert_eq!(out.len(), 1, "one full segment goes");
    assert_eq!(out[0].payload.len(), mss);
    assert_eq!(&out[0].payload[..4], b"abcd");
    a.tcb.set_corked(false);
    let out = a.output(T0);
    assert_eq!(out.len(), 1, "the uncork sends the rest");
    assert_eq!(out[0].payload.len(), 4);
    a.tcb.set_corked(true);
    a.write(b"tail");
    assert!(a.output(T0).is_empty());
    a.tcb.close();
    let out = a.output(T0);
    assert_eq!(out.len(), 1, "a FIN takes the corked tail with it");
    assert_eq!(out[0].payload, b"tail");
    assert!(out[0].flags().fin());
}

/// An established pair whose receiver `b` has an 8192-byte buffer that
/// does not grow.
fn small_receiver() -> (Host, Host) {
    let cfg_b = TcpConfig {
        rcv_buf: 8192,
        rcv_buf_max: 8192,
        ..TcpConfig::default()
    };
    established_with(&TcpConfig::default(), &cfg_b)
}

/// `a` sends `small_receiver`'s 8192 bytes (`pattern(8192, salt)`) and
/// `b`, not reading, ends up offering a zero window.
fn fill_receiver(a: &mut Host, b: &mut Host, salt: u8) {
    a.write(&pattern(8192, salt));
    for _ in 0..5 {
        exchange(a, b, T0);
        b.timer(T0 + ms(40));
        exchange(b, a, T0 + ms(40));
    }
    assert_eq!(b.tcb.rcv_wnd(), 0);
}

/// Exchanges from T0, 100 ms a step, until b's 8 KiB buffer is full (its
/// application does not read) and a sees b's window shut; returns when.
fn shut_window(a: &mut Host, b: &mut Host) -> Instant {
    let mut now = T0;
    for _ in 0..50 {
        a.timer(now);
        b.timer(now);
        exchange(a, b, now);
        exchange(b, a, now);
        if b.rx.unread() == 8192 && a.tcb.snd_wnd() == 0 {
            break;
        }
        now = now + ms(100);
    }
    now
}

#[test]
fn established_zero_window_probes_with_backoff_then_resumes() {
    let (mut a, mut b) = small_receiver();
    let data = pattern(20_000, 4);
    a.write(&data);
    // Fill b's buffer; its application does not read.
    let mut now = shut_window(&mut a, &mut b);
    assert_eq!(b.rx.unread(), 8192);
    assert_eq!(a.tcb.snd_wnd(), 0);
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    // Only the persist timer runs; each probe is one byte beyond the window.
    let mut probe_times = Vec::new();
    for _ in 0..4 {
        let t = a.tcb.next_timeout().expect("persist timer");
        now = t;
        a.timer(now);
        let probe = a.output(now);
        assert_eq!(probe.len(), 1);
        assert_eq!(probe[0].payload.len(), 1);
        assert_eq!(probe[0].repr.seq, a.tcb.snd_una());
        probe_times.push(now);
        b.input(&probe[0], now);
        assert_eq!(b.rx.unread(), 8192, "the probe byte does not fit");
        let ack = b.output(now);
        assert_eq!(ack.len(), 1);
        assert_eq!(ack[0].repr.window, 0);
        a.input(&ack[0], now);
        assert_eq!(a.tcb.state(), State::Established);
    }
    let gaps: Vec<_> = probe_times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps[1] == gaps[0] * 2 && gaps[2] == gaps[1] * 2,
        "probe backoff {gaps:?}"
    );
    assert_eq!(a.tcb.stats().window_probes, 4);
    // The application reads: a window update reopens the flow.
    let mut got = b.rx.take();
    assert!(b.tcb.on_app_read(b.rx.free()));
    assert!(b.tcb.has_output());
    for _ in 0..200 {
        exchange(&mut b, &mut a, now);
        exchange(&mut a, &mut b, now);
        got.extend(b.rx.take());
        b.tcb.on_app_read(b.rx.free());
        if got.len() == data.len() {
            break;
        }
        now = now + ms(10);
        a.timer(now);
        b.timer(now);
    }
    assert_eq!(got, data);
}

/// A peer that keeps its window shut past the user timeout (RFC 5482) is
/// given up, as Linux gives up a zero-window peer: its answers to the
/// probes still say window 0. The probe timer is clamped to the user
/// timeout's end. Without a user timeout the probes go on.
#[test]
fn zero_window_past_the_user_timeout_ends_the_connection() {
    for user_ms in [0u64, 3000] {
        let (mut a, mut b) = small_receiver();
        a.tcb.set_user_timeout(ms(user_ms));
        a.write(&pattern(20_000, 5));
        shut_window(&mut a, &mut b);
        assert_eq!(a.tcb.snd_wnd(), 0);
        let mut now;
        let shut_at = a.tcb.next_timeout().expect("persist timer");
        let mut closed_at = None;
        for _ in 0..12 {
            let Some(t) = a.tcb.next_timeout() else { break };
            now = t;
            if a.timer(now).closed == Some(CloseReason::TimedOut) {
                closed_at = Some(now);
                break;
            }
            for probe in a.output(now) {
                b.input(&probe, now);
            }
            exchange(&mut b, &mut a, now);
        }
        if user_ms == 0 {
            assert_eq!(closed_at, None, "no user timeout: probing goes on");
            assert_eq!(a.tcb.state(), State::Established);
        } else {
            // The first probe's timer starts the episode; the expiry that
            // gives up falls exactly 3 s later.
            assert_eq!(closed_at.map(|t| t - shut_at), Some(ms(user_ms)));
            assert_eq!(a.tcb.state(), State::Closed);
        }
    }
}

/// Both ends' receive windows full (b's application is blocked writing
/// into its full TX ring, so it does not read): a's data at b's rcv_nxt
/// is not acceptable, but the ACK it carries is, or b's own flight is
/// never released (RFC 9293 §3.10.7.4 "special allowance should be made
/// to accept valid ACKs").
#[test]
fn established_zero_window_data_segment_ack_is_processed_data_dropped() {
    let (mut a, mut b) = small_receiver();
    // Fill b's receive buffer; b acknowledges with a zero window.
    fill_receiver(&mut a, &mut b, 6);
    assert_eq!(b.rx.unread(), 8192);
    // b sends data of its own; a receives it (its ACK is still to come).
    let sent = 2 * b.tcb.mss();
    b.write(&pattern(sent, 7));
    let from_b = b.output(T0 + ms(50));
    assert!(!from_b.is_empty());
    for s in &from_b {
        a.input(s, T0 + ms(50));
    }
    let una = b.tcb.snd_una();
    assert_eq!(b.tcb.bytes_in_flight(), sent);
    // a's next segment carries data at b's rcv_nxt (beyond b's zero
    // window) and the ACK of b's 3000 bytes.
    let mut seg = craft(b.tcb.rcv_nxt(), Some(a.tcb.rcv_nxt()), 0, 1000, &[9; 100]);
    seg.repr.src_port = a.tcb.local().port();
    seg.repr.dst_port = a.tcb.remote().port();
    let ev = b.input(&seg, T0 + ms(60));
    assert_eq!(b.tcb.snd_una(), una + sent, "the ACK was not processed");
    assert!(ev.writable);
    assert_eq!(b.rx.unread(), 8192, "data beyond a zero window was taken");
    assert_eq!(b.tcb.stats().acks_of_unacceptable, 1);
    // b answers with an ACK that still advertises a zero window.
    let ack = b.output(T0 + ms(60));
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].repr.ack, seg.repr.seq);
    assert_eq!(ack[0].repr.window, 0);
}

/// An old duplicate that ends before our last ACK is ignored whole, ACK
/// field included, as Linux's tcp_sequence does.
#[test]
fn established_old_duplicate_ack_field_is_ignored() {
    let (mut a, mut b) = established();
    b.write(&[5; 500]);
    let from_b = b.output(T0);
    let rcv = a.tcb.rcv_nxt();
    a.input(&from_b[0], T0);
    a.output(T0);
    let una = b.tcb.snd_una();
    // An old segment of a's (already acknowledged by b) claiming an ACK.
    let mut old = craft(b.tcb.rcv_nxt() - 10, Some(una + 500), 0, 1000, &[1; 5]);
    old.repr.src_port = a.tcb.local().port();
    old.repr.dst_port = a.tcb.remote().port();
    b.input(&old, T0);
    assert_eq!(b.tcb.snd_una(), una);
    assert_eq!(a.tcb.rcv_nxt(), rcv + 500);
}

/// A segment whose SEQ is older than the last window update (a
/// retransmission sent after a pure ACK, whose SEQ is SND.MAX) but whose
/// ACK moves snd_una carries the window relative to that ACK: taking the
/// ACK but keeping the old window would move the right edge past what the
/// peer offered (as Linux, tcp_may_update_window).
#[test]
fn established_new_ack_with_older_seq_updates_window() {
    let (mut a, mut b) = established();
    // a has 2000 bytes in flight.
    a.write(&pattern(2000, 8));
    for s in a.output(T0) {
        b.input(&s, T0);
    }
    let una = a.tcb.snd_una();
    let seq_hi = b.tcb.snd_nxt() + 5000;
    // A pure ACK from b with SEQ far ahead (it has sent 5000 bytes a has
    // not seen), acknowledging nothing new, window field 4000.
    let shift = a.tcb.window_scale().map_or(0, |(snd, _)| snd);
    let w1 = craft(seq_hi, Some(una), 0, 4000, &[]);
    a.input(&w1, T0);
    assert_eq!(a.tcb.snd_wnd(), 4000 << shift);
    // Then b's retransmission (older SEQ) acknowledging 1000 more bytes,
    // with a window 1000 bytes smaller: the same right edge.
    let smaller = 4000 - (1000 >> shift) as u16;
    let w2 = craft(b.tcb.snd_nxt(), Some(una + 1000), 0, smaller, &[]);
    a.input(&w2, T0);
    assert_eq!(a.tcb.snd_una(), una + 1000);
    assert_eq!(
        a.tcb.snd_wnd(),
        usize::from(smaller) << shift,
        "right edge moved past the offer"
    );
}

#[test]
fn established_small_app_read_does_not_open_window() {
    let (mut a, mut b) = small_receiver();
    fill_receiver(&mut a, &mut b, 5);
    // RFC 9293 §3.8.6.2.2: 100 bytes freed is below min(rcv_buf/2, MSS).
    b.rx.take_n(100);
    assert!(!b.tcb.on_app_read(b.rx.free()));
    assert!(!b.tcb.has_output());
    b.rx.take_n(2000);
    assert!(b.tcb.on_app_read(b.rx.free()));
    let upd = b.output(T0 + ms(50));
    assert_eq!(upd.len(), 1);
    // No window scaling for an 8 KiB buffer: the field is the byte count.
    assert_eq!(upd[0].repr.window, 2100);
}

/// The right edge never moves left (RFC 9293 §3.8.6.2.2): a window that
/// is no multiple of the scale unit is rounded up (RFC 7323 §2.4); a new
/// window leaves one unit of the buffer for that. Only a buffer that cannot
/// hold the rounded edge (passed here to pin the rule; the engine's rings
/// keep the unit) sees it rounded down, at most a unit to the left.
#[test]
fn established_unaligned_window_rounds_up_within_the_buffer() {
    let (mut a, mut b) = established();
    let shift = b.tcb.window_scale().map_or(0, |(_, rcv)| rcv);
    let unit = 1usize << shift;
    a.write(&[1; 1000]);
    exchange(&mut a, &mut b, T0);
    b.timer(T0 + ms(40));
    let cur = b.tcb.rcv_wnd();
    assert_ne!(cur % unit, 0, "1000 bytes left the promise unaligned");
    let edge = b.tcb.rcv_nxt() + cur;
    let ack = |b: &mut Host, free: usize| {
        let tx = TxBuf::new(0);
        let mut out = Vec::new();
        b.tcb
            .poll_output(T0 + ms(40), &tx, free, 10, &mut |s| out.push(*s));
        assert_eq!(out.len(), 1);
        b.tcb.rcv_nxt() + ((out[0].repr.window as usize) << shift)
    };
    // The slack the reservation keeps: rounded up, in the buffer.
    let free = cur + unit - 1;
    let advertised = ack(&mut b, free);
    assert!(advertised >= edge, "right edge moved left");
    assert!(advertised <= b.tcb.rcv_nxt() + free, "beyond the buffer");
    // No slack at all: rounded down.
    let free = advertised - b.tcb.rcv_nxt() - 1;
    b.window_force_ack();
    let tight = ack(&mut b, free);
    assert!(tight <= b.tcb.rcv_nxt() + free, "beyond the buffer");
    assert!(tight + unit >= advertised, "more than a unit to the left");
}

#[test]
fn established_syn_gets_challenge_ack() {
    let (mut a, mut b) = established();
    let w = from_b(&mut b, a.tcb.rcv_nxt(), TcpFlags::SYN, &[]);
    let ev = a.input(&w, T0);
    assert_eq!(ev.closed, None);
    assert_eq!(a.tcb.state(), State::Established);
    let out = a.output(T0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].flags(), TcpFlags(TcpFlags::ACK));
    assert_eq!(a.tcb.stats().challenge_acks, 1);
}

#[test]
fn established_rst_at_rcv_nxt_resets() {
    let (mut a, mut b) = established();
    let w = from_b(&mut b, a.tcb.rcv_nxt(), TcpFlags::RST, &[]);
    assert_eq!(a.input(&w, T0).closed, Some(CloseReason::Reset));
    assert_eq!(a.tcb.state(), State::Closed);
}

#[test]
fn established_rst_in_window_not_exact_sends_challenge_ack() {
    let (mut a, mut b) = established();
    let w = from_b(&mut b, a.tcb.rcv_nxt() + 10, TcpFlags::RST, &[]);
    assert_eq!(a.input(&w, T0).closed, None);
    assert_eq!(a.tcb.state(), State::Established);
    assert_eq!(a.output(T0).len(), 1);
    assert_eq!(a.tcb.stats().challenge_acks, 1);
}

#[test]
fn established_rst_outside_window_is_ignored() {
    let (mut a, mut b) = established();
    let w = from_b(&mut b, a.tcb.rcv_nxt() - 5000, TcpFlags::RST, &[]);
    assert_eq!(a.input(&w, T0).closed, None);
    assert_eq!(a.tcb.state(), State::Established);
    assert!(a.output(T0).is_empty());
}

#[test]
fn established_ack_of_unsent_data_is_acked_and_dropped() {
    let (mut a, mut b) = established();
    let mut w = from_b(&mut b, a.tcb.rcv_nxt(), 0, b"xyz");
    w.repr.ack = a.tcb.snd_nxt() + 1000;
    a.input(&w, T0);
    assert_eq!(a.rx.unread(), 0);
    assert_eq!(a.tcb.snd_una(), ISS_A + 1);
    assert_eq!(a.output(T0).len(), 1);
}

#[test]
fn established_segment_without_ack_flag_is_dropped() {
    let (mut a, mut b) = established();
    let mut w = from_b(&mut b, a.tcb.rcv_nxt(), 0, b"xyz");
    w.repr.flags = TcpFlags(0);
    a.input(&w, T0);
    assert_eq!(a.rx.unread(), 0);
}

#[test]
fn established_ack_echoes_peer_tsval() {
    let (mut a, mut b) = established();
    let mss = a.tcb.mss();
    a.write(&pattern(2 * mss, 6));
    let segs = a.output(T0 + ms(5));
    for s in &segs {
        b.input(s, T0 + ms(6));
    }
    let ack = b.output(T0 + ms(6));
    let tsval = segs[1].repr.options.timestamps.unwrap().0;
    assert_eq!(ack[0].repr.options.timestamps.unwrap().1, tsval);
}

#[test]
fn established_old_timestamp_is_dropped_by_paws() {
    let (mut a, mut b) = established();
    b.write(b"new");
    let seg = b.output(T0 + ms(100)).remove(0);
    a.input(&seg, T0 + ms(100));
    assert_eq!(a.rx.take(), b"new");
    let mut old = seg.clone();
    old.repr.seq = a.tcb.rcv_nxt();
    old.repr.options.timestamps =
        Some((seg.repr.options.timestamps.unwrap().0.wrapping_sub(50), 0));
    old.payload = b"old".to_vec();
    old.repr.payload_len = 3;
    a.input(&old, T0 + ms(101));
    assert_eq!(a.rx.unread(), 0);
    assert_eq!(a.tcb.stats().paws_dropped, 1);
}

#[test]
fn established_out_of_order_beyond_bound_is_dropped() {
    let cfg_b = TcpConfig {
        ooo_max_segments: 2,
        ..TcpConfig::default()
    };
    let (mut a, mut b) = established_with(&TcpConfig::default(), &cfg_b);
    let mss = a.tcb.mss();
    let data = pattern(8 * mss, 7);
    a.write(&data);
    let segs = a.output(T0);
    assert_eq!(segs.len(), 8);
    // Holes at 0, 2, 4, 6: three separate intervals, one too many.
    for i in [1, 3, 5] {
        b.input(&segs[i], T0);
    }
    assert_eq!(b.tcb.ooo_intervals(), 2);
    assert_eq!(b.tcb.stats().ooo_dropped_bytes, mss as u64);
    b.input(&segs[7], T0);
    assert_eq!(b.tcb.stats().ooo_dropped_bytes, 2 * mss as u64);
    // Everything still arrives once retransmitted.
    for s in &segs {
        b.input(s, T0);
    }
    assert_eq!(b.rx.take(), data);
}
