//! The hot path does not allocate: once a connection is up and data flows,
//! engine iterations over the `mem` wire make no heap allocation.

mod common;

use appif::bytes;
use appif::command::Command;
use appif::notify::Notify;
use appif::seg::Accepted;
use appif::socket::{SockState, StatusHandle};
use appif::spsc;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::impair::Impairments;
use nic::mem::{self, MemClock};
use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: defers every call to the system allocator unchanged; it only
// counts allocations while COUNTING is set.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn established_bulk_transfer_iterations_allocate_nothing() {
    let (mut pa, mut pb) = mem::pair(Impairments::none(), Impairments::none(), 3);
    let (clock, ns) = MemClock::manual();
    pa.set_clock(clock.clone());
    pb.set_clock(clock);
    let mut t = 1_000_000_000u64;
    // An engine on 10.0.0.`host`/24 over `port`, taking commands from `rx`.
    let engine = move |port, host, rx| {
        let cfg = EngineConfig {
            ip: Ipv4Addr::new(10, 0, 0, host),
            prefix_len: 24,
            max_sockets: 64,
            ..EngineConfig::default()
        };
        Engine::new(port, cfg, rx, Arc::new(Notify::default()), Instant(t))
    };
    let (mut ca, ra) = spsc::channel(1024);
    let (mut cb, rb) = spsc::channel(1024);
    let mut ea = engine(pa, 1, ra);
    let mut eb = engine(pb, 2, rb);
    let (acc_tx, mut acc_rx) = spsc::channel::<Accepted>(4);
    let local = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9);
    let listen = common::listen(1, StatusHandle::local(), local, false, acc_tx);
    common::push(&mut cb, listen);
    let shared = StatusHandle::local();
    let (mut app_tx, eng_tx) = bytes::ring(64 * 1024);
    let (eng_rx, _app_rx) = bytes::ring(64 * 1024);
    let remote = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9);
    common::push(
        &mut ca,
        common::connect(1, &shared, remote, (eng_tx, eng_rx), true),
    );
    let chunk = [0x5au8; 8192];
    let mut accepted = None;
    // One iteration of both engines and both applications; returns the
    // bytes the receiving application read.
    let mut step = |t: &mut u64, count: bool, accepted: &mut Option<Accepted>| -> usize {
        let mut got = 0;
        *t += 20_000;
        ns.store(*t, Ordering::Release);
        COUNTING.store(count, Ordering::Relaxed);
        ea.poll(Instant(*t));
        eb.poll(Instant(*t));
        if shared.state() == SockState::Open && app_tx.free() >= chunk.len() {
            let was_empty = app_tx.is_empty();
            app_tx.write(&chunk);
            if was_empty {
                let _ = ca.push(Command::Send { id: 1 });
            }
        }
        if let Some(acc) = accepted.as_mut() {
            let mut sink = [0u8; 16384];
            loop {
                let n = acc.rx.read(&mut sink);
                if n == 0 {
                    break;
                }
                got += n;
            }
            let _ = cb.push(Command::Recvd { id: acc.id });
        }
        COUNTING.store(false, Ordering::Relaxed);
        got
    };
    // Warm up: handshake, ARP, slow start, timers armed.
    for _ in 0..20_000 {
        step(&mut t, false, &mut accepted);
        if accepted.is_none() {
            accepted = acc_rx.pop();
        }
    }
    assert!(accepted.is_some(), "connection accepted");
    let mut received = 0;
    for _ in 0..20_000 {
        received += step(&mut t, true, &mut accepted);
    }
    assert!(
        received > 16 << 20,
        "data flowed while counting ({received} bytes)"
    );
    assert_eq!(
        ALLOCS.load(Ordering::Relaxed),
        0,
        "allocations on the hot path"
    );
}
