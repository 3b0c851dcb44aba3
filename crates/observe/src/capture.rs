//! Frames a running engine receives and sends, for `corestack capture`.
//!
//! While an observer has capture on, the engine copies each frame that
//! passes the observer's filter (evaluated in the engine) into a bounded
//! ring in a shared segment, `corestack-<pid>.capture` under /dev/shm, one
//! per process: every engine of the process writes to it (the slots are
//! claimed with a compare-and-swap, so writers never share one), and each
//! frame says which engine saw it ([`Frame::engine`]):
//!
//! ```text
//! 0     magic "CSCAPTR1" | segment length: u64
//! 64    on: u64 (0 off, the default; 1 on)                       (observer)
//! 128   filter: length, then up to FILTER_OPS postfix ops        (observer, before `on`)
//! 320   head: u64  frames claimed so far                         (writers, CAS)
//! 384   tail: u64  frames taken by the observer                  (observer)
//! 448   dropped: u64  frames that passed the filter, ring full   (writers)
//! 512   SLOTS × SLOT_BYTES slots: seq (claim index + 1, stored last, release),
//!       wall-clock time ns, direction << 32 | original length, captured length,
//!       engine (its index in the process), then up to SNAP_LEN frame bytes at
//!       slot offset 64
//! ```
//!
//! Off, the cost is one load and one branch per engine iteration. The
//! filter is a postfix program of [`FilterOp`]s (host, port, protocol, and,
//! or, not); a malformed program matches nothing. Each op is one word, but
//! an IPv6 host, three (its 16 bytes over 7 + 7 + 2 bytes of argument).

use crate::observer_shm::{ObserverShm, Ring};
use core::sync::atomic::Ordering;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

/// The capture segment's kind (`corestack-<pid>.capture`).
pub const CAPTURE: &str = "capture";
const MAGIC: &[u8; 8] = b"CSCAPTR1";
const ON_OFF: usize = 64;
const FILTER_OFF: usize = 128;
/// Most words in a filter program (an op is one word, [`FilterOp::Host6`]
/// three: [`FilterOp::words`]).
pub const FILTER_OPS: usize = 23;
const HEAD_OFF: usize = 320;
const TAIL_OFF: usize = 384;
const DROPS_OFF: usize = 448;
const SLOTS_OFF: usize = 512;
const SLOT_HDR: usize = 64;
const SLOT_BYTES: usize = 2048;
/// Frame bytes kept per frame (longer frames, e.g. GSO super-frames, are cut;
/// their original length is kept).
pub const SNAP_LEN: usize = SLOT_BYTES - SLOT_HDR;
/// Frames the ring holds.
pub const SLOTS: usize = 1024;
const SEG_BYTES: usize = SLOTS_OFF + SLOTS * SLOT_BYTES;
const RING: Ring = Ring {
    head: HEAD_OFF,
    tail: TAIL_OFF,
    drops: DROPS_OFF,
    slots_off: SLOTS_OFF,
    slots: SLOTS,
    slot_bytes: SLOT_BYTES,
};

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received from the NIC.
    In = 0,
    /// Handed to the NIC.
    Out = 1,
}

/// One op of a filter program (postfix: operands push a truth value,
/// `And`/`Or` pop two, `Not` one; the frame matches when one value is
/// left and it is true).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterOp {
    /// IPv4 source or destination (ARP: sender or target) is this address.
    Host(core::net::Ipv4Addr),
    /// IPv6 source or destination is this address (three words).
    Host6(core::net::Ipv6Addr),
    /// The frame carries ICMPv6 (IPv6 next header 58, after any
    /// extension headers the filter walks).
    Icmp6,
    /// TCP or UDP source or destination port.
    Port(u16),
    /// The frame carries TCP.
    Tcp,
    /// The frame carries UDP.
    Udp,
    /// The frame carries ICMP.
    Icmp,
    /// The frame is ARP.
    Arp,
    /// Both of the two operands before it hold.
    And,
    /// Either of the two operands before it holds.
    Or,
    /// The operand before it does not hold.
    Not,
}

/// Opcode of the words after an IPv6 host's first: 7 (then 2) more of its
/// bytes.
const HOST6_MORE: u64 = 11;
/// IPv6 extension headers the filter steps over to find TCP, UDP or ICMPv6
/// (RFC 8200 §4), at most this many.
const EXT_HEADERS: usize = 4;

impl FilterOp {
    /// Words this op takes in a program (1; 3 for [`FilterOp::Host6`]).
    pub fn words(self) -> usize {
        match self {
            FilterOp::Host6(_) => 3,
            _ => 1,
        }
    }

    /// Writes its words to the start of `out` (at least [`FilterOp::words`]
    /// long); returns how many.
    fn encode_into(self, out: &mut [u64]) -> usize {
        if let FilterOp::Host6(a) = self {
            let b = a.octets();
            let word = |op: u64, bytes: &[u8]| {
                op << 56 | bytes.iter().fold(0, |w, &x| w << 8 | u64::from(x))
            };
            // 7 + 7 + 2 bytes; the last word's value is 16 bits wide.
            out[0] = word(10, &b[0..7]);
            out[1] = word(HOST6_MORE, &b[7..14]);
            out[2] = word(HOST6_MORE, &b[14..16]);
            return 3;
        }
        out[0] = self.encode();
        1
    }

    fn encode(self) -> u64 {
        match self {
            FilterOp::Host(a) => 1 << 56 | u64::from(u32::from(a)),
            FilterOp::Host6(_) => 10 << 56, // whole only through encode_into
            FilterOp::Icmp6 => 12 << 56,
            FilterOp::Port(p) => 2 << 56 | u64::from(p),
            FilterOp::Tcp => 3 << 56,
            FilterOp::Udp => 4 << 56,
            FilterOp::Icmp => 5 << 56,
            FilterOp::Arp => 6 << 56,
            FilterOp::And => 7 << 56,
            FilterOp::Or => 8 << 56,
            FilterOp::Not => 9 << 56,
        }
    }
}

/// What the filter looks at, taken from a frame without trusting it.
#[derive(Default)]
struct Fields {
    arp: bool,
    /// IPv4's protocol, or IPv6's upper-layer next header.
    proto: Option<u8>,
    /// IPv4 (or ARP) source and destination.
    hosts: [u32; 2],
    /// IPv6 source and destination, for an IPv6 frame.
    hosts6: Option<[u128; 2]>,
    ports: Option<[u16; 2]>,
}

fn fields(frame: &[u8]) -> Fields {
    let be16 = |o: usize| {
        frame
            .get(o..o + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let be32 = |o: usize| {
        frame
            .get(o..o + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut f = Fields::default();
    match be16(12) {
        Some(0x0806) => {
            f.arp = true;
            f.hosts = [be32(28).unwrap_or(0), be32(38).unwrap_or(0)];
        }
        Some(0x0800) => {
            let Some(&vihl) = frame.get(14) else { return f };
            let ihl = usize::from(vihl & 0x0f) * 4;
            f.proto = frame.get(23).copied();
            f.hosts = [be32(26).unwrap_or(0), be32(30).unwrap_or(0)];
            let first_fragment = be16(20).is_some_and(|v| v & 0x1fff == 0);
            if matches!(f.proto, Some(6 | 17)) && first_fragment {
                if let (Some(s), Some(d)) = (be16(14 + ihl), be16(16 + ihl)) {
                    f.ports = Some([s, d]);
                }
            }
        }
        Some(0x86dd) => ipv6_fields(frame, &mut f),
        _ => {}
    }
    f
}

/// The IPv6 frame's addresses, its upper-layer protocol (past at most
/// [`EXT_HEADERS`] Hop-by-Hop, Routing, Destination Options or Fragment
/// headers) and, in a first fragment, TCP's or UDP's ports.
fn ipv6_fields(frame: &[u8], f: &mut Fields) {
    let addr = |o: usize| {
        frame
            .get(o..o + 16)
            .and_then(|b| <[u8; 16]>::try_from(b).ok())
            .map(u128::from_be_bytes)
    };
    let (Some(src), Some(dst)) = (addr(22), addr(38)) else {
        return;
    };
    f.hosts6 = Some([src, dst]);
    let Some(mut next) = frame.get(20).copied() else {
        return;
    };
    let mut at = 54;
    let mut first_fragment = true;
    for _ in 0..EXT_HEADERS {
        let len = match next {
            0 | 43 | 60 => match frame.get(at + 1) {
                Some(&l) => (usize::from(l) + 1) * 8,
                None => return,
            },
            44 => {
                let Some(off) = frame.get(at + 2..at + 4) else {
                    return;
                };
                first_fragment = u16::from_be_bytes([off[0], off[1]]) & 0xfff8 == 0;
                8
            }
            _ => break,
        };
        let Some(&n) = frame.get(at) else { return };
        next = n;
        at += len;
    }
    f.proto = Some(next);
    if matches!(next, 6 | 17) && first_fragment {
        if let Some(p) = frame.get(at..at + 4) {
            f.ports = Some([
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            ]);
        }
    }
}

/// Whether `frame` passes the program `ops` (encoded words); an empty
/// program passes everything, a malformed one nothing. Bounded by the
/// program's length; allocates nothing.
fn passes(ops: &[u64], frame: &[u8]) -> bool {
    if ops.is_empty() {
        return true;
    }
    let f = fields(frame);
    let mut stack = [false; FILTER_OPS];
    let mut n = 0usize;
    let mut i = 0usize;
    while i < ops.len() {
        let op = ops[i];
        i += 1;
        let arg = op & ((1 << 56) - 1);
        let v = match op >> 56 {
            1 => {
                (f.arp || f.proto.is_some())
                    && f.hosts6.is_none()
                    && f.hosts.contains(&(arg as u32))
            }
            10 => {
                let (Some(&b), Some(&c)) = (ops.get(i), ops.get(i + 1)) else {
                    return false;
                };
                if b >> 56 != HOST6_MORE || c >> 56 != HOST6_MORE {
                    return false;
                }
                i += 2;
                let mask = (1u128 << 56) - 1;
                let a =
                    u128::from(arg) << 72 | (u128::from(b) & mask) << 16 | (u128::from(c) & 0xffff);
                f.hosts6.is_some_and(|h| h.contains(&a))
            }
            12 => f.hosts6.is_some() && f.proto == Some(58),
            2 => f.ports.is_some_and(|p| p.contains(&(arg as u16))),
            3 => f.proto == Some(6),
            4 => f.proto == Some(17),
            5 => f.proto == Some(1),
            6 => f.arp,
            7 | 8 => {
                if n < 2 {
                    return false;
                }
                n -= 2;
                if op >> 56 == 7 {
                    stack[n] && stack[n + 1]
                } else {
                    stack[n] || stack[n + 1]
                }
            }
            9 => {
                if n < 1 {
                    return false;
                }
                n -= 1;
                !stack[n]
            }
            _ => return false,
        };
        if n == FILTER_OPS {
            return false;
        }
        stack[n] = v;
        n += 1;
    }
    n == 1 && stack[0]
}

/// The writing end: every engine of a process holds one to the process's
/// segment ([`Capturer::process`]), or an unshared one that stays off; it
/// marks its frames with its engine ([`Capturer::for_engine`]).
#[derive(Clone)]
pub struct Capturer(Arc<ObserverShm>, u32);

static PROCESS: Mutex<Weak<ObserverShm>> = Mutex::new(Weak::new());

impl Capturer {
    /// A capturer nobody can switch on.
    pub fn off() -> Capturer {
        Capturer(Arc::new(ObserverShm::anonymous(SLOTS_OFF, MAGIC)), 0)
    }

    /// The process's capturer: its `corestack-<pid>.capture` segment,
    /// created by the first caller, removed with the last holder; an
    /// unshared one (always off) without /dev/shm.
    pub fn process() -> Capturer {
        ObserverShm::process_shared(&PROCESS, CAPTURE, SEG_BYTES, MAGIC)
            .map_or_else(Capturer::off, |seg| Capturer(seg, 0))
    }

    /// This capturer for engine `engine` (its index in the process): the
    /// frames it copies say so ([`Frame::engine`]). Engine 0 unless set.
    pub fn for_engine(self, engine: usize) -> Capturer {
        Capturer(self.0, u32::try_from(engine).unwrap_or(u32::MAX))
    }

    /// Whether capture is on (one load).
    #[inline]
    pub fn on(&self) -> bool {
        self.0.word(ON_OFF).load(Ordering::Relaxed) != 0
    }

    /// Copies `frame` (and `tail`, the rest of a frame sent from two
    /// places: headers, then a payload) into the ring if it passes the
    /// filter; counts a drop when the ring is full. Never waits; allocates
    /// nothing.
    pub fn frame(&self, dir: Direction, frame: &[u8], tail: Option<&payload::TxPayload>) {
        let seg = &*self.0;
        if seg.len() < SEG_BYTES {
            return;
        }
        let mut ops = [0u64; FILTER_OPS];
        let len = (seg.word(FILTER_OFF).load(Ordering::Acquire) as usize).min(FILTER_OPS);
        for (i, op) in ops.iter_mut().enumerate().take(len) {
            *op = seg.word(FILTER_OFF + 8 + 8 * i).load(Ordering::Relaxed);
        }
        if !passes(&ops[..len], frame) {
            return;
        }
        let Some((at, claimed)) = RING.claim(seg) else {
            return;
        };
        let first = frame.len().min(SNAP_LEN);
        seg.write_bytes(at + SLOT_HDR, &frame[..first]);
        let mut cap = first;
        let mut orig = frame.len();
        if let Some(p) = tail {
            orig += p.len();
            if cap < SNAP_LEN && !p.is_empty() {
                let mut chunk = [0u8; SNAP_LEN];
                let room = SNAP_LEN - cap;
                let n = p.copy_to(&mut chunk[..room.min(p.len())]);
                seg.write_bytes(at + SLOT_HDR + cap, &chunk[..n]);
                cap += n;
            }
        }
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        seg.word(at + 8).store(wall, Ordering::Relaxed);
        seg.word(at + 16).store(
            (dir as u64) << 32 | orig as u64 & 0xffff_ffff,
            Ordering::Relaxed,
        );
        seg.word(at + 24).store(cap as u64, Ordering::Relaxed);
        seg.word(at + 32)
            .store(u64::from(self.1), Ordering::Relaxed);
        RING.publish(seg, at, claimed);
    }
}

/// A captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Wall-clock time, ns since the Unix epoch.
    pub time_ns: u64,
    /// Received or sent.
    pub dir: Direction,
    /// The frame's length on the wire (before cutting to [`SNAP_LEN`]).
    pub orig_len: usize,
    /// The bytes kept.
    pub data: Vec<u8>,
    /// The engine that received it from its NIC queue or sent it (its index
    /// in the process; 0 for a process's only engine).
    pub engine: u32,
}

/// The observer's end: sets the filter, switches capture on and off,
/// drains frames.
pub struct CaptureControl {
    seg: ObserverShm,
}

impl CaptureControl {
    /// Opens the capture segment at `path` (another process's, or this one's).
    ///
    /// Errors: those of opening or mapping it (EACCES: run as the engine's
    /// user or root); `InvalidData` when it is not a capture segment.
    pub fn open(path: &Path) -> io::Result<CaptureControl> {
        let seg = ObserverShm::open_exact(path, MAGIC, SEG_BYTES, "capture")?;
        Ok(CaptureControl { seg })
    }

    /// Sets the filter (empty: every frame) and switches capture on.
    ///
    /// Errors: `InvalidInput` for more than [`FILTER_OPS`] words
    /// ([`FilterOp::words`]).
    pub fn start(&self, filter: &[FilterOp]) -> io::Result<()> {
        let words = program(filter)?;
        self.seg.word(ON_OFF).store(0, Ordering::Release);
        for (i, &w) in words.iter().enumerate() {
            self.seg
                .word(FILTER_OFF + 8 + 8 * i)
                .store(w, Ordering::Relaxed);
        }
        self.seg
            .word(FILTER_OFF)
            .store(words.len() as u64, Ordering::Release);
        self.seg.word(ON_OFF).store(1, Ordering::Release);
        Ok(())
    }

    /// Switches capture off.
    pub fn stop(&self) {
        self.seg.word(ON_OFF).store(0, Ordering::Release);
    }

    /// Frames that passed the filter but found the ring full, since the
    /// segment was made.
    pub fn dropped(&self) -> u64 {
        RING.dropped(&self.seg)
    }

    /// Moves every finished frame to `out`; returns how many.
    pub fn drain(&self, out: &mut Vec<Frame>) -> usize {
        let seg = &self.seg;
        RING.drain(seg, |at| {
            let time_ns = seg.word(at + 8).load(Ordering::Relaxed);
            let w = seg.word(at + 16).load(Ordering::Relaxed);
            let cap = (seg.word(at + 24).load(Ordering::Relaxed) as usize).min(SNAP_LEN);
            let engine = seg.word(at + 32).load(Ordering::Relaxed) as u32;
            let mut data = vec![0u8; cap];
            seg.read_bytes(at + SLOT_HDR, &mut data);
            out.push(Frame {
                time_ns,
                dir: if w >> 32 == 1 {
                    Direction::Out
                } else {
                    Direction::In
                },
                orig_len: (w & 0xffff_ffff) as usize,
                data,
                engine,
            });
        })
    }
}

/// The program's words for `filter`.
///
/// Errors: `InvalidInput` for more than [`FILTER_OPS`] words.
fn program(filter: &[FilterOp]) -> io::Result<Vec<u64>> {
    let len: usize = filter.iter().map(|op| op.words()).sum();
    if len > FILTER_OPS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a filter of at most {FILTER_OPS} words (an IPv6 host takes 3)"),
        ));
    }
    let mut words = vec![0u64; len];
    let mut at = 0;
    for op in filter {
        at += op.encode_into(&mut words[at..]);
    }
    Ok(words)
}

/// Writes `frames` as a pcap file (nanosecond timestamps, Ethernet links)
/// that tcpdump, tshark and Wireshark read.
pub fn write_pcap(out: &mut impl io::Write, frames: &[Frame]) -> io::Result<()> {
    // Magic a1b23c4d: nanosecond resolution; version 2.4; snaplen; LINKTYPE_ETHERNET.
    let mut hdr = Vec::with_capacity(24);
    hdr.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    hdr.extend_from_slice(&2u16.to_le_bytes());
    hdr.extend_from_slice(&4u16.to_le_bytes());
    hdr.extend_from_slice(&0i32.to_le_bytes());
    hdr.extend_from_slice(&0u32.to_le_bytes());
    hdr.extend_from_slice(&65535u32.to_le_bytes());
    hdr.extend_from_slice(&1u32.to_le_bytes());
    out.write_all(&hdr)?;
    for f in frames {
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&((f.time_ns / 1_000_000_000) as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&((f.time_ns % 1_000_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&(f.data.len() as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&(f.orig_len.max(f.data.len()) as u32).to_le_bytes());
        out.write_all(&rec)?;
        out.write_all(&f.data)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// An Ethernet + IPv4 + UDP frame from 10.0.0.1:1000 to 10.0.0.2:2000.
    fn udp_frame() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&2000u16.to_be_bytes());
        f
    }

    fn prog(ops: &[FilterOp]) -> Vec<u64> {
        program(ops).unwrap()
    }

    /// An Ethernet + IPv6 (+ `ext`, a Destination Options header when set) +
    /// TCP frame from [fd00::1]:1000 to [fd00::2]:2000.
    fn tcp6_frame(ext: bool) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + if ext { 8 } else { 0 } + 20];
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        f[14] = 0x60;
        f[20] = if ext { 60 } else { 6 };
        f[22..38].copy_from_slice(&"fd00::1".parse::<Ipv6Addr>().unwrap().octets());
        f[38..54].copy_from_slice(&"fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        let l4 = if ext {
            f[54] = 6; // next header; length 0: 8 bytes
            62
        } else {
            54
        };
        f[l4..l4 + 2].copy_from_slice(&1000u16.to_be_bytes());
        f[l4 + 2..l4 + 4].copy_from_slice(&2000u16.to_be_bytes());
        f
    }

    #[test]
    fn filter_matches_ipv6_hosts_ports_and_icmp6() {
        use FilterOp::*;
        let a: Ipv6Addr = "fd00::2".parse().unwrap();
        let other: Ipv6Addr = "fd00::2:0:0:0".parse().unwrap();
        let low: Ipv6Addr = "fd00::1:2".parse().unwrap();
        for ext in [false, true] {
            let f = tcp6_frame(ext);
            assert!(passes(&prog(&[Host6(a)]), &f));
            assert!(passes(&prog(&[Host6(a), Port(1000), And, Tcp, And]), &f));
            assert!(!passes(&prog(&[Host6(other)]), &f));
            assert!(!passes(&prog(&[Host6(low)]), &f));
            assert!(!passes(&prog(&[Udp]), &f));
            assert!(!passes(&prog(&[Icmp6]), &f));
            // An IPv4 host never matches an IPv6 frame, 0.0.0.0 included.
            assert!(!passes(&prog(&[Host(Ipv4Addr::UNSPECIFIED)]), &f));
            assert!(passes(&prog(&[Host(Ipv4Addr::UNSPECIFIED), Not]), &f));
        }
        let mut icmp = tcp6_frame(false);
        icmp[20] = 58;
        assert!(passes(&prog(&[Icmp6, Host6(a), And]), &icmp));
        assert!(!passes(&prog(&[Icmp6]), &udp_frame()));
        assert!(!passes(&prog(&[Host6(a)]), &udp_frame()));
        // A cut or torn IPv6 host matches nothing; so does a frame cut short.
        let w = prog(&[Host6(a)]);
        assert!(!passes(&w[..2], &tcp6_frame(false)));
        assert!(!passes(&[w[0], w[1], 1 << 56], &tcp6_frame(false)));
        assert!(!passes(&w[1..], &tcp6_frame(false)));
        assert!(!passes(&w, &tcp6_frame(false)[..50]));
        // Seven IPv6 hosts take 21 words; eight would take 24.
        assert_eq!(program(&[Host6(a); 7]).unwrap().len(), 21);
        assert!(program(&[Host6(a); 8]).is_err());
    }

    #[test]
    fn filter_matches_host_port_protocol_and_or_not() {
        use FilterOp::*;
        let f = udp_frame();
        let a = Ipv4Addr::new(10, 0, 0, 1);
        assert!(passes(&[], &f));
        assert!(passes(&prog(&[Udp]), &f));
        assert!(!passes(&prog(&[Tcp]), &f));
        assert!(passes(&prog(&[Host(a), Port(2000), And]), &f));
        assert!(!passes(&prog(&[Host(a), Port(22), And]), &f));
        assert!(passes(&prog(&[Tcp, Port(1000), Or]), &f));
        assert!(passes(&prog(&[Arp, Not]), &f));
        // Malformed programs match nothing; a cut frame nothing it lacks.
        assert!(!passes(&prog(&[And]), &f));
        assert!(!passes(&prog(&[Udp, Tcp]), &f));
        assert!(!passes(&[0xff << 56], &f));
        assert!(!passes(&prog(&[Port(2000)]), &f[..36]));
    }

    #[test]
    fn captured_frames_drain_in_order_and_write_pcap() {
        // In the temporary directory: other tests of this crate change
        // CORESTACK_STATS_DIR meanwhile.
        let path =
            std::env::temp_dir().join(format!("corestack-{}.capture-test", std::process::id()));
        let cap = Capturer(
            Arc::new(ObserverShm::create_at(path.clone(), SEG_BYTES, MAGIC).unwrap()),
            0,
        );
        // Engine 3's capturer shares the segment and marks its frames.
        let cap3 = cap.clone().for_engine(3);
        let ctl = CaptureControl::open(&path).unwrap();
        let f = udp_frame();
        cap.frame(Direction::In, &f, None);
        let mut out = Vec::new();
        assert_eq!(
            ctl.drain(&mut out),
            1,
            "the engine checks `on` before calling"
        );
        out.clear();
        ctl.start(&[FilterOp::Tcp]).unwrap();
        assert!(cap.on());
        cap.frame(Direction::In, &f, None);
        ctl.start(&[FilterOp::Udp]).unwrap();
        cap.frame(Direction::Out, &f, None);
        cap3.frame(Direction::In, &f, None);
        ctl.stop();
        assert!(!cap.on());
        assert_eq!(ctl.drain(&mut out), 2);
        assert_eq!(out[0].dir, Direction::Out);
        assert_eq!(out[0].data, f);
        assert_eq!((out[0].engine, out[1].engine), (0, 3));
        out.truncate(1);
        let mut pcap = Vec::new();
        write_pcap(&mut pcap, &out).unwrap();
        assert_eq!(pcap.len(), 24 + 16 + f.len());
        assert_eq!(&pcap[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        drop((cap, cap3, ctl));
        assert!(!path.exists(), "the segment goes with its writer");
    }
}
