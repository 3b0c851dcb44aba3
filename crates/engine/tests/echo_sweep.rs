//! Echo under impairment, both directions loaded at once: two engines on
//! the `mem` wire, A writes a stream while it reads the echo back, B echoes
//! every byte it reads but reads only what its TX ring can take, as a
//! blocking echo server does. Rings are small, so B's receive window closes
//! whenever its sending side is held back (loss recovery, a closed window),
//! which is the case request/response servers live in and the one-way
//! transfers of `mem_wire.rs` never reach.
//!
//! Every case of the impairment matrix runs over many seeds on a manual
//! clock that skips idle time, so a run is deterministic and takes
//! milliseconds. A run that makes no progress for `STALL_NS` of virtual
//! time fails and prints its seed and both ends' control blocks.
//!
//! The stall this caught (B: zero receive window, cwnd one MSS, RTO backed
//! off; A: a flight beyond B's window), from two faults, either enough:
//! - A took the ACK of a segment whose SEQ was older than its last window
//!   update (B's retransmission after a pure ACK) without its window, so
//!   A's right edge moved past B's offer and A sent beyond B's window;
//! - B dropped such segments whole, ACK field included, although RFC 9293
//!   §3.10.7.4 asks to accept the ACK of a segment that a zero window
//!   keeps out: A's ACKs of B's flight never counted, and both ends waited
//!   for each other with their RTOs backed off.

mod common;

use appif::command::Command;
use appif::socket::{SockState, FLAG_RX_FIN};
use common::{dump, push, End, Wire};
use engine::stats::Stats;
use engine::tcp::CcKind;
use engine::EngineConfig;
use nic::impair::Impairments;

const PORT: u16 = 7;
/// No byte moved for this long (virtual ns): a stall.
const STALL_NS: u64 = 10_000_000_000;
/// Virtual time a run may take at most, ns.
const RUN_LIMIT_NS: u64 = 600_000_000_000;
/// Frames the wire holds per direction: room for the largest windows
/// in flight, so that the impairments are the only losses.
const WIRE_FRAMES: usize = 16384;

/// One impairment case: both directions get the same settings, each with
/// its own seeded stream.
#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    imp: Impairments,
}

/// The cases of the echo matrix (issue: loss, delay with loss, reordering
/// with delay, duplication, corruption, everything at once).
fn cases() -> Vec<Case> {
    let none = Impairments::default();
    let ms = 1_000_000;
    vec![
        Case {
            name: "clean",
            imp: none,
        },
        Case {
            name: "loss 0.1%",
            imp: Impairments::loss(0.001),
        },
        Case {
            name: "loss 1%",
            imp: Impairments::loss(0.01),
        },
        Case {
            name: "loss 5%",
            imp: Impairments::loss(0.05),
        },
        Case {
            name: "10 ms + loss 1%",
            imp: Impairments {
                loss: 0.01,
                delay_ns: 10 * ms,
                ..none
            },
        },
        Case {
            name: "2 ms + reorder 5%",
            imp: Impairments {
                reorder: 0.05,
                delay_ns: 2 * ms,
                ..none
            },
        },
        Case {
            name: "duplicate 1%",
            imp: Impairments {
                duplicate: 0.01,
                ..none
            },
        },
        Case {
            name: "corrupt 0.1%",
            imp: Impairments {
                corrupt: 0.001,
                ..none
            },
        },
        Case {
            name: "all at once",
            imp: Impairments {
                loss: 0.01,
                reorder: 0.05,
                duplicate: 0.01,
                corrupt: 0.001,
                delay_ns: 10 * ms,
                jitter_ns: 0,
            },
        },
    ]
}

/// What a finished run measured.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    a: Stats,
    b: Stats,
    /// Virtual time from the connect to the echo's FIN, ns.
    elapsed_ns: u64,
}

/// Every socket ring's size when it starts and the most it may grow to,
/// bytes.
#[derive(Debug, Clone, Copy)]
struct Rings {
    init: usize,
    max: usize,
    /// Congestion control of both ends.
    cc: CcKind,
}

impl Rings {
    /// Rings of `n` bytes that do not grow.
    fn fixed(n: usize) -> Rings {
        Rings {
            init: n,
            max: n,
            cc: CcKind::Cubic,
        }
    }

    fn config(self) -> EngineConfig {
        let mut cfg = EngineConfig {
            ring_bytes: self.init,
            ring_max_bytes: self.max,
            ..EngineConfig::default()
        };
        cfg.tcp.cc = self.cc;
        cfg
    }
}

/// A echoes `total` bytes through B over a wire with `imp` each way.
/// Err: the run stalled or ran out of time; the message has the seed and
/// both ends' state.
fn run(seed: u64, imp: Impairments, total: usize, rings: Rings) -> Result<Outcome, String> {
    let mut w = Wire::connect(imp, seed, WIRE_FRAMES, rings.config(), PORT, (0, 0), |_| {});
    let mut b: Option<End> = None;
    let (mut sent, mut received, mut echoed) = (0usize, 0usize, 0usize);
    let (mut a_shut, mut b_shut) = (false, false);
    let mut chunk = vec![0u8; 8192];
    let mut last_progress = w.t;
    let fail = |what: &str, w: &Wire, s, r, e| {
        format!(
            "seed {seed:#x}: {what} at virtual {} ms: A sent {s} received {r}, B echoed {e} \
             of {total}\n{}",
            w.elapsed_ns() / 1_000_000,
            dump(&w.a, &w.b)
        )
    };
    loop {
        let busy = w.poll();
        let mut moved = false;
        let b_shared = b.as_ref().map(|b| b.shared.clone());
        for (name, sh) in [("A", Some(w.end_a.shared.clone())), ("B", b_shared)] {
            if let Some(e) = sh.map(|sh| sh.error()).filter(|&e| e != 0) {
                let what = format!("{name} failed with errno {e}");
                return Err(fail(&what, &w, sent, received, echoed));
            }
        }
        // A: write the stream, read and check the echo.
        if w.end_a.shared.state() == SockState::Open {
            moved |= w.end_a.send_stream(&mut sent, total, &mut w.ca) > 0;
            if sent == total && !a_shut {
                a_shut = true;
                push(&mut w.ca, Command::Shutdown { id: w.end_a.id });
            }
            match w.end_a.recv_stream(&mut received, &mut w.ca) {
                Ok(n) => moved |= n > 0,
                Err(at) => {
                    let what = format!("echo byte {at} differs");
                    return Err(fail(&what, &w, sent, received, echoed));
                }
            }
        }
        // B: echo what its TX ring can take.
        if b.is_none() {
            b = w.accept();
        }
        if let Some(b) = b.as_mut() {
            loop {
                let room = b.tx.free().min(chunk.len());
                if room == 0 {
                    break;
                }
                let n = b.read(&mut chunk[..room], &mut w.cb);
                if n == 0 {
                    break;
                }
                let wrote = b.write(&chunk[..n], &mut w.cb);
                assert_eq!(wrote, n, "the TX ring had room");
                echoed += n;
                moved = true;
            }
            if !b_shut && b.shared.has_flags(FLAG_RX_FIN) && b.rx.is_empty() {
                b_shut = true;
                push(&mut w.cb, Command::Shutdown { id: b.id });
            }
        }
        if received == total && w.end_a.shared.has_flags(FLAG_RX_FIN) {
            let (sa, sb) = (w.a.stats(), w.b.stats());
            if sa.tcp_rcv_full_dropped_bytes + sb.tcp_rcv_full_dropped_bytes > 0 {
                let what = "a receive buffer dropped bytes inside the window it advertised";
                return Err(fail(what, &w, sent, received, echoed));
            }
            return Ok(Outcome {
                a: sa,
                b: sb,
                elapsed_ns: w.elapsed_ns(),
            });
        }
        if moved {
            last_progress = w.t;
        } else if w.t - last_progress > STALL_NS {
            return Err(fail("stalled", &w, sent, received, echoed));
        }
        if w.elapsed_ns() > RUN_LIMIT_NS {
            return Err(fail("out of time", &w, sent, received, echoed));
        }
        // Nothing to do until a frame falls due or a timer fires: skip there.
        w.advance(busy || moved);
    }
}

/// Runs every case over `seeds` and fails with every stalled run's dump.
/// Prints, per case, the median and worst virtual time and the RTOs.
fn sweep(seeds: std::ops::Range<u64>, total: usize, rings: Rings) {
    let mut failures = Vec::new();
    for (ci, case) in cases().into_iter().enumerate() {
        let wall = std::time::Instant::now();
        let mut times = Vec::new();
        let mut rtos = 0;
        for s in seeds.clone() {
            let seed = 0xec40_0000 + ((ci as u64) << 12) + s;
            match run(seed, case.imp, total, rings) {
                Ok(o) => {
                    times.push(o.elapsed_ns);
                    rtos += o.a.tcp_rto_timeouts + o.b.tcp_rto_timeouts;
                }
                Err(e) => failures.push(format!("{}: {e}", case.name)),
            }
        }
        times.sort_unstable();
        let med = times.get(times.len() / 2).copied().unwrap_or(0);
        let worst = times.last().copied().unwrap_or(0);
        println!(
            "{:<20} {} runs of {} KiB: median {:>7.1} ms, worst {:>7.1} ms virtual, \
             median goodput {:>6.2} MB/s, RTOs {rtos}; wall {} ms",
            case.name,
            times.len(),
            total >> 10,
            med as f64 / 1e6,
            worst as f64 / 1e6,
            if med > 0 {
                total as f64 / (med as f64 / 1e9) / 1e6
            } else {
                0.0
            },
            wall.elapsed().as_millis()
        );
    }
    assert!(
        failures.is_empty(),
        "{} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn echo_with_small_rings_never_stalls_in_any_case_and_seed() {
    sweep(0..100, 256 * 1024, Rings::fixed(16 * 1024));
}

#[test]
fn echo_runs_deterministic() {
    let case = cases()[8];
    let first = run(0xec40_d00d, case.imp, 256 * 1024, Rings::fixed(16 * 1024));
    let again = run(0xec40_d00d, case.imp, 256 * 1024, Rings::fixed(16 * 1024));
    assert_eq!(first, again, "same seed, same run");
}

/// Rings of the engine's default size that grow (auto-tuning), longer
/// transfers, fewer seeds.
#[test]
fn echo_with_default_growing_rings_never_stalls_in_any_case() {
    let d = EngineConfig::default();
    sweep(
        0..10,
        4 << 20,
        Rings {
            init: d.ring_bytes,
            max: d.ring_max_bytes,
            cc: CcKind::Cubic,
        },
    );
}

/// The same sweeps with BBR at both ends (it keeps cwnd up through loss
/// and paces): fewer seeds.
#[test]
fn echo_with_bbr_never_stalls_in_any_case() {
    sweep(
        0..40,
        256 * 1024,
        Rings {
            cc: CcKind::Bbr,
            ..Rings::fixed(16 * 1024)
        },
    );
    let d = EngineConfig::default();
    sweep(
        0..5,
        4 << 20,
        Rings {
            init: d.ring_bytes,
            max: d.ring_max_bytes,
            cc: CcKind::Bbr,
        },
    );
}
