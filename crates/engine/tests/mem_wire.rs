//! Two engines joined by the `mem` wire with seeded loss, reordering,
//! duplication and corruption: 16 MiB each way must arrive byte-exact, and
//! two runs with the same seed must behave identically.

use appif::bytes;
use appif::notify::Notify;
use appif::socket::{AcceptQueue, Accepted, Command, SharedSlot, SockState};
use appif::spsc;
use engine::stats::Stats;
use engine::tcp::CcKind;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 5000;
/// Virtual time per iteration.
const STEP_NS: u64 = 20_000;

/// The byte at stream offset `i` of the stream sent by side `side`.
fn pattern(side: u8, i: usize) -> u8 {
    let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(side) << 56;
    (x >> 29) as u8
}

/// One side's application: its end of a connection and its progress.
struct Endpoint {
    side: u8,
    tx: bytes::Writer,
    rx: bytes::Reader,
    shared: Arc<SharedSlot>,
    id: u64,
    sent: usize,
    received: usize,
    shut: bool,
}

impl Endpoint {
    /// Moves bytes; returns a command for the engine if one is due.
    fn pump(&mut self, total: usize, cmds: &mut spsc::Sender<Command>) {
        let mut chunk = [0u8; 4096];
        while self.sent < total && self.tx.free() > 0 {
            let n = chunk.len().min(total - self.sent).min(self.tx.free());
            for (k, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(self.side, self.sent + k);
            }
            let was_empty = self.tx.is_empty();
            self.tx.write(&chunk[..n]);
            self.sent += n;
            if was_empty {
                push(cmds, Command::Send { id: self.id });
            }
        }
        if self.sent == total && !self.shut {
            self.shut = true;
            push(cmds, Command::Shutdown { id: self.id });
        }
        let mut got = 0;
        loop {
            let n = self.rx.read(&mut chunk);
            if n == 0 {
                break;
            }
            for (k, b) in chunk[..n].iter().enumerate() {
                assert_eq!(
                    *b,
                    pattern(1 - self.side, self.received + k),
                    "byte {} from side {}",
                    self.received + k,
                    1 - self.side
                );
            }
            self.received += n;
            got += n;
        }
        if got > 0 {
            push(cmds, Command::Recvd { id: self.id });
        }
    }
}

fn push(cmds: &mut spsc::Sender<Command>, c: Command) {
    assert!(cmds.push(c).is_ok(), "command ring full");
}

fn engine(
    port: MemPort,
    ip: Ipv4Addr,
    cc: CcKind,
    timestamps: bool,
    now: Instant,
) -> (Engine<MemPort>, spsc::Sender<Command>) {
    let (tx, rx) = spsc::channel(1024);
    let mut tcp = engine::tcp::TcpConfig {
        cc,
        timestamps,
        ..Default::default()
    };
    tcp.ecn = cc == CcKind::Dctcp;
    let cfg = EngineConfig {
        ip,
        prefix_len: 24,
        ring_bytes: 256 * 1024,
        tcp,
        ..EngineConfig::default()
    };
    (
        Engine::new(port, cfg, rx, Arc::new(Notify::default()), now),
        tx,
    )
}

/// Transfers `total` bytes each way; returns both engines' counters and
/// the virtual time it took.
fn run(seed: u64, imp: Impairments, cc: CcKind, total: usize) -> (Stats, Stats, u64) {
    run_tso(seed, imp, cc, total, Offload::None)
}

/// What the mem ports do for the engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offload {
    None,
    /// Segmentation offload; payloads copied into the frames.
    Tso,
    /// Segmentation offload; payloads lent from the TX rings and read at
    /// flush time, as the packet socket port does.
    TsoGather,
}

/// [`run`], with segmentation offload on both ports if `tso`.
fn run_tso(
    seed: u64,
    imp: Impairments,
    cc: CcKind,
    total: usize,
    offload: Offload,
) -> (Stats, Stats, u64) {
    run_with(seed, imp, cc, total, offload, true)
}

/// [`run_tso`], with TCP timestamps on both ends if `timestamps`.
fn run_with(
    seed: u64,
    imp: Impairments,
    cc: CcKind,
    total: usize,
    offload: Offload,
    timestamps: bool,
) -> (Stats, Stats, u64) {
    let (mut pa, mut pb) = mem::pair(imp, imp, seed);
    for p in [&mut pa, &mut pb] {
        p.set_tso(offload != Offload::None);
        p.set_gather(offload == Offload::TsoGather);
    }
    let (clock, ns) = MemClock::manual();
    pa.set_clock(clock.clone());
    pb.set_clock(clock);
    let mut t = 1_000_000_000u64;
    ns.store(t, Ordering::Release);
    let (mut ea, mut ca) = engine(pa, A_IP, cc, timestamps, Instant(t));
    let (mut eb, mut cb) = engine(pb, B_IP, cc, timestamps, Instant(t));

    let lshared = SharedSlot::local();
    let (acc_tx, mut acc_rx) = spsc::channel::<Accepted>(16);
    push(
        &mut cb,
        Command::Listen {
            id: 1,
            shared: lshared.clone(),
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT),
            accept: AcceptQueue::Local(acc_tx),
        },
    );
    let cshared = SharedSlot::local();
    let (app_tx, eng_tx) = bytes::ring(256 * 1024);
    let (eng_rx, app_rx) = bytes::ring(256 * 1024);
    push(
        &mut ca,
        Command::Connect {
            id: 1,
            shared: cshared.clone(),
            local_port: 0,
            remote: SocketAddrV4::new(B_IP, PORT),
            tx: eng_tx,
            rx: eng_rx,
            nodelay: false,
        },
    );
    let mut a = Endpoint {
        side: 0,
        tx: app_tx,
        rx: app_rx,
        shared: cshared,
        id: 1,
        sent: 0,
        received: 0,
        shut: false,
    };
    let mut b: Option<Endpoint> = None;

    let max_iters = 20_000_000u64;
    let mut iters = 0;
    loop {
        iters += 1;
        assert!(
            iters < max_iters,
            "transfer did not finish (seed {seed}): a {}/{} b {:?}",
            a.sent,
            a.received,
            b.as_ref().map(|b| (b.sent, b.received))
        );
        t += STEP_NS;
        ns.store(t, Ordering::Release);
        ea.poll(Instant(t));
        eb.poll(Instant(t));
        if b.is_none() {
            if let Some(acc) = acc_rx.pop() {
                b = Some(Endpoint {
                    side: 1,
                    tx: acc.tx,
                    rx: acc.rx,
                    shared: acc.shared,
                    id: acc.id,
                    sent: 0,
                    received: 0,
                    shut: false,
                });
            }
        }
        if a.shared.state() == SockState::Open {
            a.pump(total, &mut ca);
        }
        assert_ne!(a.shared.error(), 104, "connection reset (seed {seed})");
        if let Some(b) = b.as_mut() {
            b.pump(total, &mut cb);
            assert_eq!(b.shared.error(), 0, "accepted side failed (seed {seed})");
            let fin = appif::socket::FLAG_RX_FIN;
            if a.received == total
                && b.received == total
                && a.shared.has_flags(fin)
                && b.shared.has_flags(fin)
            {
                break;
            }
        }
    }
    (ea.stats(), eb.stats(), t - 1_000_000_000)
}

fn impaired() -> Impairments {
    Impairments {
        loss: 0.01,
        duplicate: 0.01,
        corrupt: 0.01,
        reorder: 0.01,
        ..Impairments::default()
    }
}

#[test]
fn lossy_wire_16mib_each_way_arrives_byte_exact_and_runs_deterministic() {
    let seed = 0x5eed_0001;
    println!("seed {seed:#x}");
    let total = 16 << 20;
    let (a1, b1, t1) = run(seed, impaired(), CcKind::Cubic, total);
    println!("virtual time {} ms\nA:\n{a1}\nB:\n{b1}", t1 / 1_000_000);
    assert!(
        a1.drop_tcp_checksum + b1.drop_tcp_checksum + a1.drop_eth_other_mac + b1.drop_eth_other_mac
            > 0,
        "corruption was seen and dropped"
    );
    let (a2, b2, t2) = run(seed, impaired(), CcKind::Cubic, total);
    assert_eq!((a1, b1, t1), (a2, b2, t2), "same seed, same run");
}

/// The impairment matrix of the loss-recovery work, one direction's settings
/// (both directions get the same, with independent seeded streams).
fn matrix() -> Vec<(&'static str, Impairments)> {
    let none = Impairments::default();
    vec![
        (
            "loss 0.1%",
            Impairments {
                loss: 0.001,
                ..none
            },
        ),
        ("loss 1%", Impairments { loss: 0.01, ..none }),
        ("loss 5%", Impairments { loss: 0.05, ..none }),
        (
            "delay 10 ms + loss 1%",
            Impairments {
                loss: 0.01,
                delay_ns: 5_000_000,
                ..none
            },
        ),
        (
            "reorder 5%",
            Impairments {
                reorder: 0.05,
                ..none
            },
        ),
        (
            "duplicate 1%",
            Impairments {
                duplicate: 0.01,
                ..none
            },
        ),
        (
            "corrupt 0.1%",
            Impairments {
                corrupt: 0.001,
                ..none
            },
        ),
    ]
}

#[test]
fn impairment_matrix_each_cc_64mib_each_way_arrives_byte_exact() {
    for cc in [CcKind::NewReno, CcKind::Cubic, CcKind::Dctcp] {
        for (i, (name, imp)) in matrix().into_iter().enumerate() {
            let seed = 0x3a7_0000 + i as u64;
            let start = std::time::Instant::now();
            let (a, b, t) = run(seed, imp, cc, 64 << 20);
            println!(
                "{cc:?} {name:<24} seed {seed:#x}: virtual {:>6} ms, wall {:>5} ms, segments {}+{}",
                t / 1_000_000,
                start.elapsed().as_millis(),
                a.tcp_tx_segments,
                b.tcp_tx_segments
            );
        }
    }
}

/// The same matrix with segmentation offload on both ports (CUBIC): the
/// engines hand the ports TSO segments, the ports cut them as
/// `tcp_gso_segment` does and complete the TCP checksums. The ports read
/// the payloads from the TX rings at flush time (lent, as the packet
/// socket port does), so a ring byte released or rewritten before the
/// flush would break the byte-exact check.
#[test]
fn impairment_matrix_with_tso_64mib_each_way_arrives_byte_exact() {
    for (i, (name, imp)) in matrix().into_iter().enumerate() {
        let seed = 0x750_0000 + i as u64;
        let start = std::time::Instant::now();
        let (a, b, t) = run_tso(seed, imp, CcKind::Cubic, 64 << 20, Offload::TsoGather);
        println!(
            "TSO {name:<24} seed {seed:#x}: virtual {:>6} ms, wall {:>5} ms, segments {}+{} in {}+{} TSO sends",
            t / 1_000_000,
            start.elapsed().as_millis(),
            a.tcp_tx_segments,
            b.tcp_tx_segments,
            a.tcp_tso_sends,
            b.tcp_tso_sends
        );
        assert!(
            a.tcp_tso_sends > 0 && b.tcp_tso_sends > 0,
            "{name}: TSO unused"
        );
        assert!(
            a.tcp_tx_segments > 4 * a.tcp_tso_sends,
            "{name}: TSO segments carry few MSS"
        );
    }
}

#[test]
fn lossy_wire_with_tso_runs_deterministic() {
    let seed = 0x5eed_0002;
    let total = 16 << 20;
    let (a1, b1, t1) = run_tso(seed, impaired(), CcKind::Cubic, total, Offload::Tso);
    println!("virtual time {} ms\nA:\n{a1}\nB:\n{b1}", t1 / 1_000_000);
    assert!(a1.tcp_tso_sends > 0);
    let (a2, b2, t2) = run_tso(seed, impaired(), CcKind::Cubic, total, Offload::Tso);
    assert_eq!((&a1, &b1, t1), (&a2, &b2, t2), "same seed, same run");
    // Lending the payloads instead of copying them changes nothing on the
    // wire: the same frames at the same times.
    let lent = run_tso(seed, impaired(), CcKind::Cubic, total, Offload::TsoGather);
    assert_eq!((a1, b1, t1), lent, "lent payloads, same run");
}

/// Segments too short for a minimum Ethernet frame (a few payload bytes,
/// no TCP options) need padding, which a lent payload cannot carry: they
/// are copied, and the transfer completes without a drop.
#[test]
fn tiny_segments_on_a_lending_port_are_copied_and_arrive() {
    for total in [1, 5, 6, 7] {
        let (a, b, _) = run_with(
            9,
            Impairments::none(),
            CcKind::Cubic,
            total,
            Offload::TsoGather,
            false,
        );
        assert_eq!(a.tx_no_buffer + b.tx_no_buffer, 0, "{total} bytes: dropped");
        assert_eq!(
            a.tcp_retransmits + b.tcp_retransmits,
            0,
            "{total} bytes: retransmitted"
        );
    }
}

#[test]
fn clean_wire_transfer_completes_without_drops() {
    let (a, b, _) = run(7, Impairments::none(), CcKind::Cubic, 1 << 20);
    assert_eq!(a.drop_tcp_checksum + b.drop_tcp_checksum, 0);
    assert_eq!(a.tcp_resets + b.tcp_resets, 0);
}
