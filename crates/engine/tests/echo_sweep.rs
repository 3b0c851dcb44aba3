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

use appif::bytes;
use appif::socket::{AcceptQueue, Accepted, Command, SharedSlot, SockState, FLAG_RX_FIN};
use appif::spsc;
use common::{dump, engine, next_event, pattern, push, End, A_IP, B_IP, STEP_NS};
use engine::stats::Stats;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::Ordering;

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
}

impl Rings {
    /// Rings of `n` bytes that do not grow.
    fn fixed(n: usize) -> Rings {
        Rings { init: n, max: n }
    }

    fn config(self) -> EngineConfig {
        EngineConfig {
            ring_bytes: self.init,
            ring_max_bytes: self.max,
            ..EngineConfig::default()
        }
    }
}

/// A echoes `total` bytes through B over a wire with `imp` each way.
/// Err: the run stalled or ran out of time; the message has the seed and
/// both ends' state.
fn run(seed: u64, imp: Impairments, total: usize, rings: Rings) -> Result<Outcome, String> {
    let (mut pa, mut pb) = mem::pair_with_capacity(imp, imp, seed, WIRE_FRAMES);
    let (clock, ns) = MemClock::manual();
    pa.set_clock(clock.clone());
    pb.set_clock(clock);
    let start = 1_000_000_000u64;
    let mut t = start;
    ns.store(t, Ordering::Release);
    let (mut ea, mut ca) = engine(pa, A_IP, rings.config(), Instant(t));
    let (mut eb, mut cb) = engine(pb, B_IP, rings.config(), Instant(t));

    let (acc_tx, mut acc_rx) = spsc::channel::<Accepted>(16);
    push(
        &mut cb,
        Command::Listen {
            id: 1,
            shared: SharedSlot::local(),
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT),
            accept: AcceptQueue::Local(acc_tx),
        },
    );
    let a_shared = SharedSlot::local();
    let (a_tx, eng_tx) = bytes::growable_ring(rings.init, rings.max);
    let (eng_rx, a_rx) = bytes::growable_ring(rings.init, rings.max);
    push(
        &mut ca,
        Command::Connect {
            id: 1,
            shared: a_shared.clone(),
            local_port: 0,
            remote: SocketAddrV4::new(B_IP, PORT),
            tx: eng_tx,
            rx: eng_rx,
            nodelay: false,
        },
    );
    let mut a = End {
        id: 1,
        shared: a_shared,
        tx: a_tx,
        rx: a_rx,
    };
    let mut b: Option<End> = None;
    let (mut sent, mut received, mut echoed) = (0usize, 0usize, 0usize);
    let (mut a_shut, mut b_shut) = (false, false);
    let mut chunk = vec![0u8; 8192];
    let mut last_progress = t;
    let fail = |what: &str, t: u64, ea: &Engine<MemPort>, eb: &Engine<MemPort>, s, r, e| {
        format!(
            "seed {seed:#x}: {what} at virtual {} ms: A sent {s} received {r}, B echoed {e} \
             of {total}\n{}",
            (t - start) / 1_000_000,
            dump(ea, eb)
        )
    };
    loop {
        ns.store(t, Ordering::Release);
        let busy_a = ea.poll(Instant(t));
        let busy_b = eb.poll(Instant(t));
        let mut moved = false;
        for (name, sh) in [("A", &a.shared), ("B", &b.as_ref().unwrap_or(&a).shared)] {
            if sh.error() != 0 {
                return Err(fail(
                    &format!("{name} failed with errno {}", sh.error()),
                    t,
                    &ea,
                    &eb,
                    sent,
                    received,
                    echoed,
                ));
            }
        }
        // A: write the stream, read and check the echo.
        if a.shared.state() == SockState::Open {
            while sent < total {
                let n = chunk.len().min(total - sent);
                for (k, c) in chunk[..n].iter_mut().enumerate() {
                    *c = pattern(sent + k);
                }
                let w = a.write(&chunk[..n], &mut ca);
                sent += w;
                moved |= w > 0;
                if w < n {
                    break;
                }
            }
            if sent == total && !a_shut {
                a_shut = true;
                push(&mut ca, Command::Shutdown { id: a.id });
            }
            loop {
                let n = a.read(&mut chunk, &mut ca);
                if n == 0 {
                    break;
                }
                for (k, c) in chunk[..n].iter().enumerate() {
                    if *c != pattern(received + k) {
                        return Err(fail(
                            &format!("echo byte {} differs", received + k),
                            t,
                            &ea,
                            &eb,
                            sent,
                            received,
                            echoed,
                        ));
                    }
                }
                received += n;
                moved = true;
            }
        }
        // B: echo what its TX ring can take.
        if b.is_none() {
            b = acc_rx.pop().map(|acc| End {
                id: acc.id,
                shared: acc.shared,
                tx: acc.tx,
                rx: acc.rx,
            });
        }
        if let Some(b) = b.as_mut() {
            loop {
                let room = b.tx.free().min(chunk.len());
                if room == 0 {
                    break;
                }
                let n = b.read(&mut chunk[..room], &mut cb);
                if n == 0 {
                    break;
                }
                let w = b.write(&chunk[..n], &mut cb);
                assert_eq!(w, n, "the TX ring had room");
                echoed += n;
                moved = true;
            }
            if !b_shut && b.shared.has_flags(FLAG_RX_FIN) && b.rx.is_empty() {
                b_shut = true;
                push(&mut cb, Command::Shutdown { id: b.id });
            }
        }
        if received == total && a.shared.has_flags(FLAG_RX_FIN) {
            let (sa, sb) = (ea.stats(), eb.stats());
            if sa.tcp_rcv_full_dropped_bytes + sb.tcp_rcv_full_dropped_bytes > 0 {
                return Err(fail(
                    "a receive buffer dropped bytes inside the window it advertised",
                    t,
                    &ea,
                    &eb,
                    sent,
                    received,
                    echoed,
                ));
            }
            return Ok(Outcome {
                a: ea.stats(),
                b: eb.stats(),
                elapsed_ns: t - start,
            });
        }
        if moved {
            last_progress = t;
        } else if t - last_progress > STALL_NS {
            return Err(fail("stalled", t, &ea, &eb, sent, received, echoed));
        }
        if t - start > RUN_LIMIT_NS {
            return Err(fail("out of time", t, &ea, &eb, sent, received, echoed));
        }
        t = if busy_a || busy_b || moved {
            t + STEP_NS
        } else {
            // Nothing to do until a frame falls due or a timer fires.
            next_event(&ea, &eb, t)
        };
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
        },
    );
}
