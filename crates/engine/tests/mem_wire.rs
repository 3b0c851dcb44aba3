//! Two engines joined by the `mem` wire with seeded loss, reordering,
//! duplication and corruption: 16 MiB each way must arrive byte-exact, and
//! two runs with the same seed must behave identically.

mod common;

use appif::command::Command;
use appif::socket::{SockState, FLAG_RX_FIN};
use common::{push, End, Wire};
use engine::stats::Stats;
use engine::tcp::CcKind;
use engine::EngineConfig;
use nic::impair::Impairments;
use nic::mem::MEM_WIRE_FRAMES;

const PORT: u16 = 5000;

/// One side's progress in both directions.
#[derive(Debug, Default)]
struct Side {
    sent: usize,
    received: usize,
    shut: bool,
}

impl Side {
    /// Writes the stream up to `total` through `end` (then shuts down),
    /// reads and checks what arrived; returns whether any byte moved.
    fn pump(
        &mut self,
        end: &mut End,
        total: usize,
        cmds: &mut appif::spsc::Sender<Command>,
        seed: u64,
    ) -> bool {
        let wrote = end.send_stream(&mut self.sent, total, cmds);
        if self.sent == total && !self.shut {
            self.shut = true;
            push(cmds, Command::Shutdown { id: end.id });
        }
        match end.recv_stream(&mut self.received, cmds) {
            Ok(read) => wrote + read > 0,
            Err(at) => panic!("seed {seed:#x}: byte {at} differs"),
        }
    }

    /// Received everything and the peer's FIN.
    fn done(&self, end: &End, total: usize) -> bool {
        self.received == total && end.shared.has_flags(FLAG_RX_FIN)
    }
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
    let mut cfg = EngineConfig::default();
    cfg.tcp.cc = cc;
    cfg.tcp.timestamps = timestamps;
    cfg.tcp.ecn = cc == CcKind::Dctcp;
    let mut w = Wire::connect(imp, seed, MEM_WIRE_FRAMES, cfg, PORT, (0, 0), |p| {
        p.set_tso(offload != Offload::None);
        p.set_gather(offload == Offload::TsoGather);
    });
    let (mut a, mut b) = (Side::default(), Side::default());
    let mut end_b: Option<End> = None;
    for _ in 0..20_000_000u64 {
        let busy = w.poll();
        let mut moved = false;
        if w.end_a.shared.state() == SockState::Open {
            moved |= a.pump(&mut w.end_a, total, &mut w.ca, seed);
        }
        assert_ne!(
            w.end_a.shared.error(),
            104,
            "connection reset (seed {seed:#x})"
        );
        if end_b.is_none() {
            end_b = w.accept();
        }
        if let Some(eb) = end_b.as_mut() {
            moved |= b.pump(eb, total, &mut w.cb, seed);
            assert_eq!(
                eb.shared.error(),
                0,
                "accepted side failed (seed {seed:#x})"
            );
            if a.done(&w.end_a, total) && b.done(eb, total) {
                return (w.a.stats(), w.b.stats(), w.elapsed_ns());
            }
        }
        w.advance(busy || moved);
    }
    panic!("transfer did not finish (seed {seed:#x}): a {a:?} b {b:?}");
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
    for cc in [CcKind::NewReno, CcKind::Cubic, CcKind::Dctcp, CcKind::Bbr] {
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
