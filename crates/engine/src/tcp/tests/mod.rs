//! Unit tests of the TCP state machine, grouped by what they test:
//! handshake, data and windows, ACK points, retransmission (RTO, NewReno),
//! idle and keepalive, teardown; with two Tcbs 10 ms apart (`delayed`):
//! SACK and loss recovery, ECN, the congestion window, TSO; the building
//! blocks (reassembly, RTO, ISN, reply_rst); and two Tcbs on a seeded lossy
//! simulated link (`sim`).
//!
//! Names read `<state>_<input>_<expected>`.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

use wire::tcp::{TcpFlags, TcpRepr};
use wire::SeqNum;

use super::{Events, RecvBuffer, Segment, SendBuffer, Tcb, TcpConfig};
use crate::time::Instant;

mod ack_points;
mod cwnd;
mod data;
mod delayed;
mod ecn;
mod handshake;
mod idle;
mod parts;
mod recovery;
mod retransmission;
mod sim;
mod teardown;
mod tso;

/// Start of test time (1 s, as `Instant::now` starts).
pub(super) const T0: Instant = Instant(1_000_000_000);
pub(super) const ISS_A: SeqNum = SeqNum(1000);
/// Close to 2^32, so every test also crosses sequence-number wraparound.
pub(super) const ISS_B: SeqNum = SeqNum(u32::MAX - 500);

pub(super) fn addr_a() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40000)
}

pub(super) fn addr_b() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80)
}

pub(super) fn ms(n: u64) -> core::time::Duration {
    core::time::Duration::from_millis(n)
}

/// A Vec-backed send ring.
pub(super) struct TxBuf {
    data: VecDeque<u8>,
    cap: usize,
}

impl TxBuf {
    pub(super) fn new(cap: usize) -> Self {
        TxBuf {
            data: VecDeque::with_capacity(cap),
            cap,
        }
    }

    /// Appends what fits; returns the count.
    pub(super) fn push(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.cap - self.data.len());
        self.data.extend(&bytes[..n]);
        n
    }
}

impl SendBuffer for TxBuf {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn read_at(&self, offset: usize, dst: &mut [u8]) -> usize {
        let mut n = 0;
        for (d, s) in dst
            .iter_mut()
            .zip(self.data.range(offset.min(self.data.len())..))
        {
            *d = *s;
            n += 1;
        }
        n
    }

    fn consume(&mut self, n: usize) {
        let n = n.min(self.data.len());
        self.data.drain(..n);
    }
}

/// A Vec-backed receive ring.
pub(super) struct RxBuf {
    data: Vec<u8>,
    cap: usize,
}

impl RxBuf {
    pub(super) fn new(cap: usize) -> Self {
        RxBuf {
            data: Vec::new(),
            cap,
        }
    }

    pub(super) fn take(&mut self) -> Vec<u8> {
        core::mem::take(&mut self.data)
    }

    pub(super) fn take_n(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.data.len());
        self.data.drain(..n).collect()
    }

    pub(super) fn unread(&self) -> usize {
        self.data.len()
    }
}

impl RecvBuffer for RxBuf {
    fn free(&self) -> usize {
        self.cap - self.data.len()
    }

    fn write(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.free());
        self.data.extend_from_slice(&data[..n]);
        n
    }
}

/// A segment on the wire: header plus the payload bytes copied from the sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wire {
    pub(super) repr: TcpRepr,
    pub(super) payload: Vec<u8>,
}

impl Wire {
    pub(super) fn flags(&self) -> TcpFlags {
        self.repr.flags
    }
}

/// What the port makes of `s` with `payload`: the segment itself, or for
/// a TSO segment its MSS-sized pieces as `tcp_gso_segment` cuts them
/// (sequence numbers advance, CWR only on the first, PSH and FIN only on
/// the last).
pub(super) fn cut(s: &Segment, payload: &[u8]) -> Vec<Wire> {
    if s.gso_size == 0 {
        return vec![Wire {
            repr: s.repr,
            payload: payload.to_vec(),
        }];
    }
    let n = payload.len().div_ceil(s.gso_size);
    payload
        .chunks(s.gso_size)
        .enumerate()
        .map(|(i, p)| {
            let mut repr = s.repr;
            repr.seq = s.repr.seq + i * s.gso_size;
            repr.payload_len = p.len();
            let mut f = repr.flags.0;
            if i > 0 {
                f &= !TcpFlags::CWR;
            }
            if i + 1 < n {
                f &= !(TcpFlags::PSH | TcpFlags::FIN);
            }
            repr.flags = TcpFlags(f);
            Wire {
                repr,
                payload: p.to_vec(),
            }
        })
        .collect()
}

/// A crafted segment from the peer (no options).
pub(super) fn craft(
    seq: SeqNum,
    ack: Option<SeqNum>,
    flags: u8,
    window: u16,
    payload: &[u8],
) -> Wire {
    let mut f = flags;
    if ack.is_some() {
        f |= TcpFlags::ACK;
    }
    Wire {
        repr: TcpRepr {
            src_port: addr_b().port(),
            dst_port: addr_a().port(),
            seq,
            ack: ack.unwrap_or(SeqNum(0)),
            flags: TcpFlags(f),
            window,
            payload_len: payload.len(),
            ..TcpRepr::default()
        },
        payload: payload.to_vec(),
    }
}

/// One endpoint: a Tcb with its application rings.
pub(super) struct Host {
    pub(super) tcb: Tcb,
    pub(super) tx: TxBuf,
    pub(super) rx: RxBuf,
}

impl Host {
    pub(super) fn connect(cfg: &TcpConfig, iss: SeqNum) -> Host {
        Host::with_tcb(cfg, Tcb::connect(cfg, addr_a(), addr_b(), iss, T0))
    }

    pub(super) fn accept(cfg: &TcpConfig, syn: &Wire, iss: SeqNum) -> Host {
        let tcb = Tcb::accept(cfg, addr_b(), addr_a(), &syn.repr, iss, T0).expect("acceptable SYN");
        Host::with_tcb(cfg, tcb)
    }

    pub(super) fn with_tcb(cfg: &TcpConfig, tcb: Tcb) -> Host {
        Host {
            tcb,
            tx: TxBuf::new(1 << 20),
            rx: RxBuf::new(cfg.rcv_buf),
        }
    }

    /// Everything `poll_output` emits now, with payload copied out.
    pub(super) fn output(&mut self, now: Instant) -> Vec<Wire> {
        let mut out = Vec::new();
        let tx = &self.tx;
        let free = self.rx.free();
        let n = self
            .tcb
            .poll_output(now, tx, free, 100_000, &mut |s: &Segment| {
                let mut payload = vec![0; s.repr.payload_len];
                let got = tx.read_at(s.payload_offset, &mut payload);
                assert_eq!(got, s.repr.payload_len, "payload beyond the send buffer");
                out.extend(cut(s, &payload));
            });
        assert_eq!(n, out.len());
        out
    }

    /// Like `output`, returning each Segment as emitted (TSO segments whole).
    pub(super) fn output_raw(&mut self, now: Instant) -> Vec<Segment> {
        let mut out = Vec::new();
        let free = self.rx.free();
        self.tcb
            .poll_output(now, &self.tx, free, 100_000, &mut |s: &Segment| {
                out.push(*s)
            });
        out
    }

    /// Like `output`, with each segment's ECT flag.
    pub(super) fn output_ect(&mut self, now: Instant) -> Vec<(Wire, bool)> {
        let mut out = Vec::new();
        let tx = &self.tx;
        let free = self.rx.free();
        self.tcb
            .poll_output(now, tx, free, 100_000, &mut |s: &Segment| {
                let mut payload = vec![0; s.repr.payload_len];
                let got = tx.read_at(s.payload_offset, &mut payload);
                assert_eq!(got, s.repr.payload_len, "payload beyond the send buffer");
                out.extend(cut(s, &payload).into_iter().map(|w| (w, s.ect)));
            });
        out
    }

    pub(super) fn input(&mut self, w: &Wire, now: Instant) -> Events {
        self.tcb
            .input(&w.repr, &w.payload, now, &mut self.tx, &mut self.rx)
    }

    pub(super) fn timer(&mut self, now: Instant) -> Events {
        self.tcb.on_timer(now, &self.tx)
    }

    pub(super) fn write(&mut self, bytes: &[u8]) -> usize {
        self.tx.push(bytes)
    }

    /// Makes the next `poll_output` send an ACK (as a delayed-ACK expiry would).
    pub(super) fn window_force_ack(&mut self) {
        self.tcb.ack.now = true;
    }

    /// Lets the retransmission timer expire with nothing answering, at most
    /// `max` times or until the connection closes; what each expiry sends
    /// goes to `check`. Returns the intervals between expiries (the first
    /// from `start`) and why the connection closed (None if it did not).
    /// Panics if no timer is armed before the connection closes.
    pub(super) fn expire_unanswered(
        &mut self,
        start: Instant,
        max: usize,
        mut check: impl FnMut(&[Wire]),
    ) -> (Vec<core::time::Duration>, Option<super::CloseReason>) {
        let mut now = start;
        let mut intervals = Vec::new();
        for _ in 0..max {
            let t = self.tcb.next_timeout().expect("retransmission timer armed");
            intervals.push(t - now);
            now = t;
            let ev = self.timer(now);
            if ev.closed.is_some() {
                return (intervals, ev.closed);
            }
            check(&self.output(now));
        }
        (intervals, None)
    }
}

/// Ors two event sets (closed: the first one).
pub(super) fn merge(a: Events, b: Events) -> Events {
    Events {
        connected: a.connected || b.connected,
        readable: a.readable || b.readable,
        writable: a.writable || b.writable,
        peer_fin: a.peer_fin || b.peer_fin,
        closed: a.closed.or(b.closed),
    }
}

/// Delivers everything `from` emits now to `to`; returns what was sent and
/// the receiver's events.
pub(super) fn exchange(from: &mut Host, to: &mut Host, now: Instant) -> (Vec<Wire>, Events) {
    let segs = from.output(now);
    let mut ev = Events::default();
    for s in &segs {
        ev = merge(ev, to.input(s, now));
    }
    (segs, ev)
}

/// A connected pair at T0: `a` actively opened with ISS_A, `b` passively with ISS_B.
pub(super) fn established_with(cfg_a: &TcpConfig, cfg_b: &TcpConfig) -> (Host, Host) {
    let mut a = Host::connect(cfg_a, ISS_A);
    let syn = a.output(T0);
    assert_eq!(syn.len(), 1);
    let mut b = Host::accept(cfg_b, &syn[0], ISS_B);
    let (_, ev_a) = exchange(&mut b, &mut a, T0);
    assert!(ev_a.connected);
    let (_, ev_b) = exchange(&mut a, &mut b, T0);
    assert!(ev_b.connected);
    assert_eq!(a.tcb.state(), super::State::Established);
    assert_eq!(b.tcb.state(), super::State::Established);
    (a, b)
}

pub(super) fn established() -> (Host, Host) {
    let cfg = TcpConfig::default();
    established_with(&cfg, &cfg)
}

/// Deterministic test bytes.
pub(super) fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 8) as u8)
        .collect()
}
