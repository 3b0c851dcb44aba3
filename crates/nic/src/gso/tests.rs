//! The batch against a model of the kernel's GSO (`tcp_gso_segment`).

use super::*;
use rand::{Rng, SeedableRng};

const MSS: usize = 1448;

/// An Ethernet/IPv4/TCP frame with full checksums, as the engine builds
/// it: `opts` are the TCP option bytes (a multiple of 4).
pub(crate) fn tcp_frame(
    seq: u32,
    ident: u16,
    flags: u8,
    payload: &[u8],
    opts: &[u8],
    port: u16,
) -> Vec<u8> {
    let hlen = TCP_AT + 20 + opts.len();
    let mut f = vec![0u8; hlen + payload.len()];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[8, 0]);
    f[14] = 0x45;
    let ip_len = (f.len() - ETH_LEN) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[18..20].copy_from_slice(&ident.to_be_bytes());
    f[20] = 0x40; // DF
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 1, 1, 2]);
    f[30..34].copy_from_slice(&[10, 1, 1, 1]);
    put_tcp(&mut f, TCP_AT, port, seq, flags, opts, payload);
    f
}

/// An Ethernet/IPv6/TCP frame with a full checksum, as the engine builds
/// it, with traffic class 0 and flow label `flow` (20 bits).
pub(crate) fn tcp6_frame(seq: u32, flags: u8, payload: &[u8], opts: &[u8], flow: u32) -> Vec<u8> {
    let hlen = TCP6_AT + 20 + opts.len();
    let mut f = vec![0u8; hlen + payload.len()];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14..18].copy_from_slice(&(0x6000_0000 | (flow & 0xf_ffff)).to_be_bytes());
    let plen = (f.len() - TCP6_AT) as u16;
    f[18..20].copy_from_slice(&plen.to_be_bytes());
    f[20] = 6;
    f[21] = 64;
    f[22..24].copy_from_slice(&[0xfd, 0]);
    f[37] = 2; // fd00::2
    f[38..40].copy_from_slice(&[0xfd, 0]);
    f[53] = 1; // fd00::1
    put_tcp(&mut f, TCP6_AT, 7, seq, flags, opts, payload);
    f
}

/// The TCP header at `t` (source port `port` to 80, ack 777, window 512, `opts`), the
/// `payload` after it to the frame's end, and the checksums.
fn put_tcp(f: &mut [u8], t: usize, port: u16, seq: u32, flags: u8, opts: &[u8], payload: &[u8]) {
    let hlen = t + 20 + opts.len();
    f[t..t + 2].copy_from_slice(&port.to_be_bytes());
    f[t + 2..t + 4].copy_from_slice(&80u16.to_be_bytes());
    f[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
    f[t + 8..t + 12].copy_from_slice(&777u32.to_be_bytes());
    f[t + 12] = (((20 + opts.len()) / 4) as u8) << 4;
    f[t + 13] = flags;
    f[t + 14..t + 16].copy_from_slice(&512u16.to_be_bytes());
    f[t + 20..hlen].copy_from_slice(opts);
    f[hlen..].copy_from_slice(payload);
    checksums(f);
}

/// The model's reading of a frame: (IPv6, offset of the TCP header).
fn model_l3(f: &[u8]) -> (bool, usize) {
    if f[12..14] == [0x86, 0xdd] {
        (true, ETH_LEN + 40)
    } else {
        (false, ETH_LEN + 20)
    }
}

/// The TCP pseudo-header sum of `f` (its segment runs to the end), unfolded.
fn model_pseudo(f: &[u8]) -> u32 {
    let (v6, t) = model_l3(f);
    let tcp_len = (f.len() - t) as u32;
    if v6 {
        sum(&f[22..54], 6 + tcp_len)
    } else {
        sum(&f[26..34], 6 + tcp_len)
    }
}

/// IP length, IPv4 header checksum and TCP checksum of one segment.
fn checksums(f: &mut [u8]) {
    let (v6, t) = model_l3(f);
    let len = f.len();
    if v6 {
        f[18..20].copy_from_slice(&((len - t) as u16).to_be_bytes());
    } else {
        f[16..18].copy_from_slice(&((len - ETH_LEN) as u16).to_be_bytes());
        f[24..26].fill(0);
        let ip = !fold(sum(&f[ETH_LEN..t], 0));
        f[24..26].copy_from_slice(&ip.to_be_bytes());
    }
    f[t + 16..t + 18].fill(0);
    let c = !fold(sum(&f[t..], model_pseudo(f)));
    f[t + 16..t + 18].copy_from_slice(&c.to_be_bytes());
}

/// What the kernel's GSO makes of a frame from the batch: the frame
/// itself without a GSO header; else its segments (tcp_gso_segment).
fn segment(v: &[u8]) -> Vec<Vec<u8>> {
    let (h, f) = v.split_at(VNET_HDR_LEN);
    if h[1] == 0 {
        if h[0] == F_NEEDS_CSUM {
            // The kernel completes the checksum from csum_start on.
            let start = usize::from(u16::from_ne_bytes([h[6], h[7]]));
            let at = start + usize::from(u16::from_ne_bytes([h[8], h[9]]));
            let t = model_l3(f).1;
            assert_eq!((start, at), (t, t + 16));
            let pseudo = fold(model_pseudo(f));
            assert_eq!(be16(f, at), pseudo, "not the pseudo-header sum");
            let mut s = f.to_vec();
            let c = !fold(sum(&s[start..], 0));
            s[at..at + 2].copy_from_slice(&c.to_be_bytes());
            return vec![s];
        }
        assert_eq!(h, &[0; VNET_HDR_LEN], "plain frame with a GSO header");
        return vec![f.to_vec()];
    }
    let (v6, t) = model_l3(f);
    let gso_type = if v6 { GSO_TCPV6 } else { GSO_TCPV4 };
    assert_eq!((h[0], h[1]), (F_NEEDS_CSUM, gso_type));
    let hlen = usize::from(u16::from_ne_bytes([h[2], h[3]]));
    let seg = usize::from(u16::from_ne_bytes([h[4], h[5]]));
    assert_eq!(u16::from_ne_bytes([h[6], h[7]]), t as u16);
    assert_eq!(u16::from_ne_bytes([h[8], h[9]]), 16);
    // The merged frame itself is consistent: IP length (and IPv4 header
    // checksum), and the pseudo-header sum CHECKSUM_PARTIAL expects.
    if v6 {
        assert_eq!(usize::from(be16(f, 18)), f.len() - t);
    } else {
        assert_eq!(usize::from(be16(f, 16)), f.len() - ETH_LEN);
        assert_eq!(fold(sum(&f[ETH_LEN..t], 0)), 0xffff);
    }
    assert_eq!(be16(f, t + 16), fold(model_pseudo(f)));
    let payload = &f[hlen..];
    let count = payload.len().div_ceil(seg);
    assert!(count >= 2);
    let seq = be32(f, t + 4);
    let ident = be16(f, 18);
    (0..count)
        .map(|i| {
            let p = &payload[i * seg..((i + 1) * seg).min(payload.len())];
            let mut s = f[..hlen].to_vec();
            s.extend_from_slice(p);
            if !v6 {
                s[18..20].copy_from_slice(&ident.wrapping_add(i as u16).to_be_bytes());
            }
            s[t + 4..t + 8].copy_from_slice(&seq.wrapping_add((i * seg) as u32).to_be_bytes());
            if i > 0 {
                s[t + 13] &= !CWR;
            }
            if i + 1 < count {
                s[t + 13] &= !(PSH | FIN);
            }
            checksums(&mut s);
            s
        })
        .collect()
}

/// `f` with only the pseudo-header sum in a TCP checksum field.
pub(crate) fn pseudo_only(f: &[u8]) -> Vec<u8> {
    let mut f = f.to_vec();
    let (v6, t) = model_l3(&f);
    if (v6 && f[20] == 6) || (!v6 && f[23] == 6) {
        let pseudo = fold(model_pseudo(&f));
        f[t + 16..t + 18].copy_from_slice(&pseudo.to_be_bytes());
    }
    f
}

fn push_all(b: &mut GsoBatch, frames: &[Vec<u8>]) -> usize {
    let mut queued = 0;
    for f in frames {
        if !b.push(f.len(), |buf| {
            buf[..f.len()].copy_from_slice(f);
            f.len()
        }) {
            break;
        }
        queued += 1;
    }
    b.finish();
    queued
}

fn on_wire(b: &GsoBatch) -> Vec<Vec<u8>> {
    b.frames()
        .flat_map(|(f, payload)| {
            let mut v = f.to_vec();
            if let Some(p) = payload {
                let at = v.len();
                v.resize(at + p.len(), 0);
                assert_eq!(p.copy_to(&mut v[at..]), p.len());
            }
            segment(&v)
        })
        .collect()
}

/// Batches `frames` and asserts that all are queued, that only the first two
/// merge, and that the wire carries `frames` unchanged.
fn assert_only_first_two_merge(frames: &[Vec<u8>]) {
    let mut b = GsoBatch::new(1 << 20, 64, false);
    assert_eq!(push_all(&mut b, frames), frames.len());
    assert_eq!(b.merged(), 1, "only the first two merge");
    assert_eq!(on_wire(&b), frames);
}

pub(crate) fn data(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

const TS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7];

#[test]
fn contiguous_segments_merge_into_one_frame_that_segments_back() {
    let frames: Vec<Vec<u8>> = (0..10u32)
        .map(|i| {
            let last = i == 9;
            let flags = if last { 0x10 | PSH } else { 0x10 };
            let len = if last { 700 } else { MSS };
            tcp_frame(
                1000 + i * MSS as u32,
                5 + i as u16,
                flags,
                &data(len, i as u8),
                &TS,
                4000,
            )
        })
        .collect();
    let mut b = GsoBatch::new(1 << 20, 64, false);
    assert_eq!(push_all(&mut b, &frames), 10);
    assert_eq!(b.len(), 1, "one merged frame");
    assert_eq!(b.merged(), 9);
    let v = b.frames().next().unwrap().0;
    assert_eq!(u16::from_ne_bytes([v[4], v[5]]), MSS as u16, "gso_size");
    assert_eq!(v[VNET_HDR_LEN + TCP_AT + 13], 0x10 | PSH);
    assert_eq!(on_wire(&b), frames);
}

#[test]
fn what_does_not_continue_goes_as_it_is() {
    let seg = |seq: u32, ident: u16, flags: u8, len: usize, port: u16| {
        tcp_frame(seq, ident, flags, &data(len, seq as u8), &TS, port)
    };
    let m = MSS as u32;
    let frames = vec![
        seg(0, 1, 0x10, MSS, 1),
        seg(m, 2, 0x10, MSS, 1),
        seg(5 * m, 3, 0x10, MSS, 1),       // a gap: retransmission order
        seg(6 * m, 4, 0x10, MSS, 2),       // another connection
        seg(7 * m, 5, 0x10, 0, 2),         // pure ACK
        seg(8 * m, 6, 0x10 | CWR, MSS, 1), // CWR never opens
        seg(9 * m, 7, 0x10, MSS, 1),
        seg(10 * m, 9, 0x10, MSS, 1),      // identification skipped
        seg(11 * m, 10, 0x10, MSS + 1, 1), // larger than gso_size
        seg(13 * m, 11, 0x10, 100, 1),     // too short to open
        seg(20 * m, 12, 0x10 | FIN, MSS, 1),
    ];
    assert_only_first_two_merge(&frames);
}

#[test]
fn changed_options_window_or_ack_end_the_frame() {
    let m = MSS as u32;
    let mut ts2 = TS;
    ts2[7] = 10;
    let a = tcp_frame(0, 1, 0x10, &data(MSS, 1), &TS, 1);
    let b2 = tcp_frame(m, 2, 0x10, &data(MSS, 2), &ts2, 1);
    let mut c = tcp_frame(2 * m, 3, 0x10, &data(MSS, 3), &ts2, 1);
    c[TCP_AT + 14] = 9; // window
    checksums(&mut c);
    let mut d = tcp_frame(3 * m, 4, 0x10, &data(MSS, 4), &ts2, 1);
    d[TCP_AT + 8] = 9; // ack
    checksums(&mut d);
    let frames = vec![a, b2, c, d];
    let mut b = GsoBatch::new(1 << 20, 64, false);
    push_all(&mut b, &frames);
    assert_eq!((b.len(), b.merged()), (4, 0));
    assert_eq!(on_wire(&b), frames);
}

#[test]
fn merged_frames_stay_within_the_size_and_segment_limits() {
    let frames: Vec<Vec<u8>> = (0..200u32)
        .map(|i| tcp_frame(i * 536, i as u16, 0x10, &data(536, i as u8), &[], 7))
        .collect();
    let mut b = GsoBatch::new(1 << 20, 64, false);
    assert_eq!(push_all(&mut b, &frames), 200);
    assert!(b
        .frames()
        .all(|(f, _)| f.len() - VNET_HDR_LEN <= MAX_GSO_FRAME));
    let segs: Vec<usize> = b.frames().map(|(f, _)| segment(f).len()).collect();
    assert!(segs.iter().all(|&s| s as u32 <= MAX_GSO_SEGS), "{segs:?}");
    assert_eq!(segs.iter().sum::<usize>(), 200);
    assert_eq!(on_wire(&b), frames);
}

#[test]
fn a_full_batch_refuses_without_calling_fill_and_keeps_what_it_has() {
    let frames: Vec<Vec<u8>> = (0..8u32)
        .map(|i| tcp_frame(i * 9999, i as u16, 0x10, &data(MSS, i as u8), &TS, 1))
        .collect();
    let mut b = GsoBatch::new(1 << 20, 3, false);
    assert_eq!(push_all(&mut b, &frames), 3);
    assert!(!b.push(100, |_| panic!("fill called on a full batch")));
    assert_eq!(on_wire(&b), frames[..3].to_vec());
    // A buffer too small for one more frame refuses too.
    let mut small = GsoBatch::new(MSS + 200, 64, false);
    assert_eq!(push_all(&mut small, &frames), 1);
    small.clear();
    assert!(small.is_empty());
    assert_eq!(push_all(&mut small, &frames[1..2]), 1);
    assert_eq!(on_wire(&small), frames[1..2].to_vec());
}

#[test]
fn a_cancelled_frame_leaves_the_open_frame_intact() {
    let m = MSS as u32;
    let a = tcp_frame(0, 1, 0x10, &data(MSS, 1), &TS, 1);
    let c = tcp_frame(m, 2, 0x10, &data(MSS, 2), &TS, 1);
    let mut b = GsoBatch::new(1 << 20, 64, false);
    assert!(b.push(a.len(), |buf| {
        buf[..a.len()].copy_from_slice(&a);
        a.len()
    }));
    assert!(b.push(2000, |buf| {
        buf[..100].fill(0xee);
        0
    }));
    push_all(&mut b, std::slice::from_ref(&c));
    assert_eq!(b.merged(), 1);
    assert_eq!(on_wire(&b), vec![a, c]);
}

#[test]
fn a_gso_frame_from_the_engine_goes_out_as_its_segments_and_takes_the_next() {
    let m = MSS as u32;
    let payload = data(10 * MSS, 9);
    let big = pseudo_only(&tcp_frame(1000, 40, 0x10, &payload, &TS, 5));
    let wire_segs: Vec<Vec<u8>> = (0..10u32)
        .map(|i| {
            let p = &payload[i as usize * MSS..(i as usize + 1) * MSS];
            tcp_frame(1000 + i * m, 40 + i as u16, 0x10, p, &TS, 5)
        })
        .collect();
    let next = tcp_frame(1000 + 10 * m, 50, 0x10 | PSH, &data(300, 1), &TS, 5);
    let mut b = GsoBatch::new(1 << 20, 64, true);
    assert!(b.push_gso(big.len(), MSS, |buf| {
        buf[..big.len()].copy_from_slice(&big);
        big.len()
    }));
    push_all(&mut b, &[pseudo_only(&next)]);
    assert_eq!(b.len(), 1, "the next segment joined the GSO frame");
    let mut expect = wire_segs.clone();
    expect.push(next);
    assert_eq!(on_wire(&b), expect);
    // With PSH, or a short tail, the frame closes at once.
    let tail = &payload[..3 * MSS + 10];
    let short = pseudo_only(&tcp_frame(7, 1, 0x10 | PSH, tail, &TS, 5));
    let mut b = GsoBatch::new(1 << 20, 64, true);
    assert!(b.push_gso(short.len(), MSS, |buf| {
        buf[..short.len()].copy_from_slice(&short);
        short.len()
    }));
    let after = tcp_frame(7 + tail.len() as u32, 5, 0x10, &data(MSS, 2), &TS, 5);
    push_all(&mut b, &[pseudo_only(&after)]);
    assert_eq!(b.len(), 2);
    let wire = on_wire(&b);
    assert_eq!(wire.len(), 5);
    assert_eq!(wire[4], after);
    assert_eq!(be16(&wire[3], 16) as usize, 20 + 32 + 10);
    assert_eq!(wire[3][TCP_AT + 13], 0x10 | PSH);
    assert!(wire[..3].iter().all(|w| w[TCP_AT + 13] == 0x10));
}

/// Pushes `frame` (pseudo-header sum in its checksum field) with its
/// payload lent as a wrapped [`TxPayload`]; returns what push_gather did.
fn push_lent(b: &mut GsoBatch, frame: &[u8], gso_size: usize) -> bool {
    let t = model_l3(frame).1;
    let hlen = t + usize::from(frame[t + 12] >> 4) * 4;
    let payload = &frame[hlen..];
    let lent = payload::testing::wrapped(payload, payload.len() / 3);
    b.push_gather(hlen, lent, gso_size, |buf| {
        buf.copy_from_slice(&frame[..hlen])
    })
}

#[test]
fn a_lent_payload_goes_out_as_the_copied_frame_would_and_is_never_merged() {
    let m = MSS as u32;
    let payload = data(10 * MSS, 3);
    let big = pseudo_only(&tcp_frame(1000, 40, 0x10, &payload, &TS, 5));
    let next = tcp_frame(1000 + 10 * m, 50, 0x10, &data(MSS, 1), &TS, 5);
    let mut copied = GsoBatch::new(1 << 20, 64, true);
    assert!(copied.push_gso(big.len(), MSS, |buf| {
        buf[..big.len()].copy_from_slice(&big);
        big.len()
    }));
    copied.finish();
    let mut lent = GsoBatch::new(1 << 20, 64, true);
    assert!(push_lent(&mut lent, &big, MSS));
    push_all(&mut lent, &[pseudo_only(&next)]);
    lent.finish();
    assert_eq!(lent.len(), 2, "nothing joins a frame with a lent payload");
    assert_eq!(lent.merged(), 9);
    let mut expect = on_wire(&copied);
    assert_eq!(expect.len(), 10);
    expect.push(next);
    assert_eq!(on_wire(&lent), expect);
    // Only the headers are in the batch.
    let (bytes, p) = lent.frames().next().unwrap();
    assert_eq!(bytes.len(), VNET_HDR_LEN + TCP_AT + 20 + TS.len());
    assert_eq!(p.map(TxPayload::len), Some(10 * MSS));
    // One segment's worth: a checksum request, no GSO.
    let one = pseudo_only(&tcp_frame(5, 6, 0x10 | PSH, &data(700, 2), &TS, 5));
    let mut b = GsoBatch::new(1 << 20, 64, true);
    assert!(push_lent(&mut b, &one, MSS));
    let (bytes, _) = b.frames().next().unwrap();
    assert_eq!(bytes[..2], [F_NEEDS_CSUM, 0]);
    assert_eq!(
        on_wire(&b),
        vec![tcp_frame(5, 6, 0x10 | PSH, &data(700, 2), &TS, 5)]
    );
}

#[test]
fn lent_headers_that_do_not_match_the_payload_queue_nothing() {
    let f = pseudo_only(&tcp_frame(1, 2, 0x10, &data(3 * MSS, 7), &TS, 5));
    let hlen = TCP_AT + 20 + TS.len();
    let lent = || payload::testing::wrapped(&f[hlen..], 10);
    let mut b = GsoBatch::new(1 << 20, 64, true);
    // IP total length one byte short of headers + payload.
    assert!(!b.push_gather(hlen, lent(), MSS, |buf| {
        buf.copy_from_slice(&f[..hlen]);
        buf[17] -= 1;
    }));
    // A header length that is not the TCP data offset.
    assert!(!b.push_gather(hlen - 4, lent(), MSS, |buf| {
        buf.copy_from_slice(&f[..hlen - 4])
    }));
    // Not IPv4.
    assert!(!b.push_gather(hlen, lent(), MSS, |buf| {
        buf.copy_from_slice(&f[..hlen]);
        buf[12] = 0x86;
    }));
    assert!(b.is_empty());
    // A full batch does not call fill.
    let mut full = GsoBatch::new(1 << 20, 1, true);
    assert!(push_lent(&mut full, &f, MSS));
    assert!(!full.push_gather(hlen, lent(), MSS, |_| panic!("fill called")));
    assert_eq!(full.len(), 1);
}

/// Cuts `partial` (pseudo-header sum in its checksum field) into MSS-sized
/// segments with [`write_segment`] and checks them against the kernel model
/// of the same frame sent as one GSO frame of `gso_type`; returns how many.
fn software_against_model(partial: &[u8], gso_type: u8, tcp_at: usize) -> usize {
    let mut merged = vec![0u8; VNET_HDR_LEN];
    merged[0] = F_NEEDS_CSUM;
    merged[1] = gso_type;
    merged[2..4].copy_from_slice(&((tcp_at + 32) as u16).to_ne_bytes());
    merged[4..6].copy_from_slice(&(MSS as u16).to_ne_bytes());
    merged[6..8].copy_from_slice(&(tcp_at as u16).to_ne_bytes());
    merged[8..10].copy_from_slice(&16u16.to_ne_bytes());
    merged.extend_from_slice(partial);
    let expect = segment(&merged);
    let count = segment_count(partial, MSS);
    let mut out = [0u8; 2000];
    let got: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            let n = write_segment(partial, MSS, i, &mut out);
            out[..n].to_vec()
        })
        .collect();
    assert_eq!(got, expect);
    count
}

#[test]
fn the_software_segmenter_matches_the_kernel_model() {
    let payload = data(7 * MSS + 5, 4);
    let f = tcp_frame(99, 7, 0x10 | PSH | CWR, &payload, &TS, 3);
    let partial = pseudo_only(&f);
    assert_eq!(software_against_model(&partial, GSO_TCPV4, TCP_AT), 8);
    let mut out = [0u8; 2000];
    assert_eq!(write_segment(&partial, MSS, 8, &mut out), 0);
    assert_eq!(write_segment(&partial, MSS, 0, &mut out[..100]), 0);
    // One segment: copied, checksum completed; not TCP: copied as it is.
    let one = tcp_frame(5, 1, 0x10, &data(300, 1), &TS, 3);
    let n = write_segment(&pseudo_only(&one), MSS, 0, &mut out);
    assert_eq!(&out[..n], &one[..]);
    // A padded pure ACK keeps its padding, checksum over the datagram.
    let mut ack = tcp_frame(5, 1, 0x10, &[], &[], 3);
    ack.resize(60, 0);
    let n = write_segment(
        &pseudo_only(&ack[..54])
            .iter()
            .chain(&[0; 6])
            .copied()
            .collect::<Vec<u8>>(),
        MSS,
        0,
        &mut out,
    );
    assert_eq!(&out[..n], &ack[..]);
    let mut udp = one.clone();
    udp[23] = 17;
    assert_eq!(segment_count(&udp, MSS), 1);
    let n = write_segment(&udp, MSS, 0, &mut out);
    assert_eq!(&out[..n], &udp[..]);
}

/// A seeded stream of what an engine sends: runs of full segments with
/// short PSH tails, pure ACKs, retransmissions, timestamp ticks, other
/// connections, UDP. Whatever the batch makes of it, the wire carries
/// exactly the original frames in order.
#[test]
fn seeded_engine_like_streams_reach_the_wire_unchanged() {
    let mut merged = 0;
    for seed in 0..200u64 {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let mut frames = Vec::new();
        let mut seq = [rng.gen::<u32>(), rng.gen::<u32>()];
        let mut ident: u16 = rng.gen();
        let mut ts = TS;
        for _ in 0..rng.gen_range(1..150) {
            let c = rng.gen_range(0..2usize);
            ident = ident.wrapping_add(1);
            let f = match rng.gen_range(0..100) {
                0..=74 => {
                    let s = tcp_frame(seq[c], ident, 0x10, &data(MSS, ident as u8), &ts, c as u16);
                    seq[c] = seq[c].wrapping_add(MSS as u32);
                    s
                }
                75..=82 => {
                    let len = rng.gen_range(1..MSS);
                    let s = tcp_frame(seq[c], ident, 0x18, &data(len, 3), &ts, c as u16);
                    seq[c] = seq[c].wrapping_add(len as u32);
                    s
                }
                83..=88 => tcp_frame(seq[c], ident, 0x10, &[], &ts, c as u16),
                89..=92 => {
                    let back = rng.gen_range(1..20u32) * MSS as u32;
                    tcp_frame(
                        seq[c].wrapping_sub(back),
                        ident,
                        0x10,
                        &data(MSS, 4),
                        &ts,
                        c as u16,
                    )
                }
                93..=96 => {
                    ts[11] = ts[11].wrapping_add(1);
                    continue;
                }
                _ => {
                    let mut u = tcp_frame(0, ident, 0, &data(rng.gen_range(0..600), 5), &[], 9);
                    u[23] = 17; // not TCP: never merged
                    u
                }
            };
            frames.push(f);
        }
        // The same stream with the TCP checksums left to the kernel.
        let partial: Vec<Vec<u8>> = frames.iter().map(|f| pseudo_only(f)).collect();
        for (offload, input) in [(false, &frames), (true, &partial)] {
            let mut b = GsoBatch::new(4 << 20, 1024, offload);
            assert_eq!(push_all(&mut b, input), frames.len(), "seed {seed}");
            assert_eq!(on_wire(&b), frames, "seed {seed} offload {offload}");
            merged += b.merged();
        }
    }
    assert!(
        merged > 2000,
        "only {merged} segments merged: the streams test little"
    );
}

/// IPv6 segments `len` bytes each from `seq` (flow label 5), the last with
/// PSH and `last` bytes.
fn v6_stream(seq: u32, count: u32, last: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let end = i + 1 == count;
            let flags = if end { 0x10 | PSH } else { 0x10 };
            let len = if end { last } else { MSS };
            tcp6_frame(seq + i * MSS as u32, flags, &data(len, i as u8), &TS, 5)
        })
        .collect()
}

#[test]
fn ipv6_contiguous_segments_merge_into_a_tcpv6_frame_that_segments_back() {
    let frames = v6_stream(1000, 10, 700);
    let mut b = GsoBatch::new(1 << 20, 64, false);
    assert_eq!(push_all(&mut b, &frames), 10);
    assert_eq!((b.len(), b.merged()), (1, 9), "one merged frame");
    let v = b.frames().next().unwrap().0;
    assert_eq!(v[1], GSO_TCPV6);
    assert_eq!(
        u16::from_ne_bytes([v[6], v[7]]),
        TCP6_AT as u16,
        "csum_start"
    );
    assert_eq!(on_wire(&b), frames);
}

#[test]
fn ipv6_flow_label_hop_limit_family_or_extension_header_end_the_frame() {
    let m = MSS as u32;
    let seg = |i: u32, flow: u32| tcp6_frame(i * m, 0x10, &data(MSS, i as u8), &TS, flow);
    let mut hop = seg(2, 5);
    hop[21] = 63;
    // A Destination Options header (8 bytes of padding) before TCP.
    let mut ext = seg(4, 5);
    ext[20] = 60;
    ext.splice(TCP6_AT..TCP6_AT, [6, 0, 1, 4, 0, 0, 0, 0]);
    let plen = (ext.len() - TCP6_AT) as u16;
    ext[18..20].copy_from_slice(&plen.to_be_bytes());
    // IPv4 with the same ports and the next sequence number.
    let v4 = {
        let mut f = tcp_frame(5 * m, 1, 0x10, &data(MSS, 5), &TS, 7);
        f[TCP_AT + 8..TCP_AT + 12].copy_from_slice(&777u32.to_be_bytes());
        checksums(&mut f);
        f
    };
    let frames = vec![
        seg(0, 5),
        seg(1, 5),
        hop,       // another hop limit
        seg(3, 6), // another flow label
        ext,       // never merged
        v4,        // another family
        seg(6, 5),
    ];
    assert_only_first_two_merge(&frames);
}

#[test]
fn ipv6_gso_and_lent_frames_from_the_engine_go_out_as_their_segments() {
    let payload = data(10 * MSS, 9);
    let big = pseudo_only(&tcp6_frame(1000, 0x10, &payload, &TS, 5));
    let wire: Vec<Vec<u8>> = (0..10)
        .map(|i| {
            let p = &payload[i * MSS..(i + 1) * MSS];
            tcp6_frame(1000 + (i * MSS) as u32, 0x10, p, &TS, 5)
        })
        .collect();
    let next = tcp6_frame(1000 + 10 * MSS as u32, 0x10 | PSH, &data(300, 1), &TS, 5);
    let mut b = GsoBatch::new(1 << 20, 64, false);
    assert!(b.push_gso(big.len(), MSS, |buf| {
        buf[..big.len()].copy_from_slice(&big);
        big.len()
    }));
    push_all(&mut b, std::slice::from_ref(&next));
    assert_eq!(b.len(), 1, "the next segment joined the GSO frame");
    let mut expect = wire.clone();
    expect.push(next);
    assert_eq!(on_wire(&b), expect);
    // The same frame with its payload lent.
    let mut lent = GsoBatch::new(1 << 20, 64, true);
    assert!(push_lent(&mut lent, &big, MSS));
    assert_eq!((lent.len(), lent.merged()), (1, 9));
    assert_eq!(on_wire(&lent), wire);
}

#[test]
fn ipv6_software_segmenter_matches_the_kernel_model() {
    let payload = data(7 * MSS + 5, 4);
    let f = tcp6_frame(99, 0x10 | PSH | CWR, &payload, &TS, 0xabcde);
    let partial = pseudo_only(&f);
    assert_eq!(software_against_model(&partial, GSO_TCPV6, TCP6_AT), 8);
    let mut out = [0u8; 2000];
    write_segment(&partial, MSS, 0, &mut out);
    assert_eq!(out[TCP6_AT + 13], 0x10 | CWR, "CWR on the first only");
    write_segment(&partial, MSS, 7, &mut out);
    assert_eq!(out[TCP6_AT + 13], 0x10 | PSH, "PSH on the last only");
}
