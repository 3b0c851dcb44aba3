//! What the two-engine `mem` wire tests share: an application's end of a
//! connection that behaves as the client library's `TcpStream` does (when
//! it tells the engine, how it grows its TX ring), engines on a manual
//! clock, skipping idle virtual time, and a dump of both ends' control
//! blocks for failure messages.

#![allow(dead_code)]

use appif::bytes;
use appif::notify::Notify;
use appif::socket::{Command, SharedSlot};
use appif::spsc;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::mem::MemPort;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::Arc;

pub const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Virtual time per busy iteration, ns.
pub const STEP_NS: u64 = 20_000;

/// The byte at stream offset `i` of a test stream.
pub fn pattern(i: usize) -> u8 {
    let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 29) as u8
}

pub fn push(cmds: &mut spsc::Sender<Command>, c: Command) {
    assert!(cmds.push(c).is_ok(), "command ring full");
}

/// An engine on `port` with `cfg` (its address set to `ip`), and the
/// sending end of its command ring.
pub fn engine(
    port: MemPort,
    ip: Ipv4Addr,
    mut cfg: EngineConfig,
    now: Instant,
) -> (Engine<MemPort>, spsc::Sender<Command>) {
    let (tx, rx) = spsc::channel(1024);
    cfg.ip = ip;
    cfg.prefix_len = 24;
    (
        Engine::new(port, cfg, rx, Arc::new(Notify::default()), now),
        tx,
    )
}

/// An application's end of one connection.
pub struct End {
    pub id: u64,
    pub shared: Arc<SharedSlot>,
    pub tx: bytes::Writer,
    pub rx: bytes::Reader,
}

impl End {
    /// Reads up to `dst.len()` bytes and tells the engine when the read
    /// opened the window past half the ring, as the client library does.
    pub fn read(&mut self, dst: &mut [u8], cmds: &mut spsc::Sender<Command>) -> usize {
        let cap = self.rx.capacity();
        let before = self.rx.len();
        let n = self.rx.read(dst);
        if n > 0 && cap - before < cap / 2 && cap - (before - n) >= cap / 2 {
            push(cmds, Command::Recvd { id: self.id });
        }
        n
    }

    /// Writes what fits, first growing the TX ring to what the engine
    /// offers, and tells the engine when the ring was empty, as the client
    /// library does.
    pub fn write(&mut self, src: &[u8], cmds: &mut spsc::Sender<Command>) -> usize {
        let grant = self.shared.tx_grant();
        if grant > self.tx.wanted() {
            self.tx.grow(grant);
        }
        let was_empty = self.tx.is_empty();
        let n = self.tx.write(src);
        if n > 0 && was_empty {
            push(cmds, Command::Send { id: self.id });
        }
        n
    }
}

/// The next virtual time (ns) after `t` at which anything happens on the
/// wire of `a` and `b`: a frame falls due or a timer fires.
pub fn next_event(a: &Engine<MemPort>, b: &Engine<MemPort>, t: u64) -> u64 {
    [
        Some(a.next_deadline().0),
        Some(b.next_deadline().0),
        a.port().next_rx_due_ns(),
        b.port().next_rx_due_ns(),
    ]
    .into_iter()
    .flatten()
    .min()
    .map_or(t + STEP_NS, |next| next.max(t + STEP_NS))
}

/// Both engines' connections, for a failure message.
pub fn dump(ea: &Engine<MemPort>, eb: &Engine<MemPort>) -> String {
    let mut s = String::new();
    for (name, e) in [("A", ea), ("B", eb)] {
        e.for_each_tcb(|t| {
            let _ = writeln!(
                s,
                "{name}: {:?} snd_una {:?} snd_nxt {:?} snd_wnd {} rcv_nxt {:?} rcv_wnd {} \
                 cwnd {} ssthresh {} in_flight {} rto {:?} retries {} recovery {} sacked {} \
                 ooo {}\n   {:?}",
                t.state(),
                t.snd_una(),
                t.snd_nxt(),
                t.snd_wnd(),
                t.rcv_nxt(),
                t.rcv_wnd(),
                t.cwnd(),
                t.ssthresh(),
                t.bytes_in_flight(),
                t.rto(),
                t.retries(),
                t.in_recovery(),
                t.sacked_bytes(),
                t.ooo_intervals(),
                t.stats()
            );
        });
    }
    s
}
