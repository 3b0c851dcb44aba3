//! Inline mode's engine per thread (`Stack::claim_engine`): with a
//! SO_REUSEPORT listener per thread, each thread is its engine's only
//! runner; an owner that stops waiting has its engine run by another waiter
//! after the takeover time; ownership ends with the thread or its listener.
//! A one-engine inline client and a two-engine inline server (whose NIC
//! spreads frames at random, so its engines hand frames over) on a clean
//! `mem` wire.

use corestack::{Stack, TcpListener, TcpStream};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use testkit::mem_wire::{self, reuseport, stacks_with_engines, B};

const PORT: u16 = 80;

fn any() -> SocketAddrV4 {
    mem_wire::any(PORT)
}

/// A serving thread: its engine and what it returns (the engines of the
/// connections it accepted).
type Server = (usize, JoinHandle<Vec<usize>>);

/// Spawns threads on `b` until each engine has one that opened a
/// SO_REUSEPORT listener (and so owns it); each serves echo connections,
/// waiting in `Stack::poll`, until `stop`. The one on engine 0 first sleeps
/// `nap0` in application code (not waiting), then sets `awake0` (ns since
/// `t0`).
fn servers(
    b: &Stack,
    stop: &Arc<AtomicBool>,
    nap0: Duration,
    t0: Instant,
    awake0: &Arc<AtomicU64>,
) -> Vec<Server> {
    let mut by_engine: Vec<Option<Server>> = (0..b.engines()).map(|_| None).collect();
    for _ in 0..32 {
        if by_engine.iter().all(Option::is_some) {
            break;
        }
        let (tx, rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<bool>();
        let (b2, stop, awake0) = (b.clone(), stop.clone(), awake0.clone());
        let h = std::thread::spawn(move || {
            let e = b2.current_engine();
            tx.send(e).unwrap();
            if !go_rx.recv().unwrap() {
                return Vec::new();
            }
            let mut l = TcpListener::bind_opts(&b2, any(), reuseport()).expect("a member");
            assert_eq!(b2.engine_owned(e), Some(true), "thread of engine {e}");
            tx.send(e).unwrap();
            if e == 0 && !nap0.is_zero() {
                std::thread::sleep(nap0);
                awake0.store(t0.elapsed().as_nanos() as u64, Ordering::Release);
            }
            serve(&b2, &mut l, &stop)
        });
        let e = rx.recv().unwrap();
        let go = by_engine[e].is_none();
        go_tx.send(go).unwrap();
        if go {
            rx.recv().expect("the listener opened");
            by_engine[e] = Some((e, h));
        } else {
            h.join().unwrap();
        }
    }
    by_engine
        .into_iter()
        .map(|s| s.expect("a thread per engine"))
        .collect()
}

/// Accepts and echoes until `stop`, waiting in `Stack::poll`; returns the
/// engines of the connections accepted.
fn serve(b: &Stack, l: &mut TcpListener, stop: &AtomicBool) -> Vec<usize> {
    l.set_nonblocking(true).unwrap();
    let mut streams: Vec<TcpStream> = Vec::new();
    let mut engines = Vec::new();
    while !stop.load(Ordering::Acquire) {
        match l.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(true).unwrap();
                engines.push(s.engine());
                streams.push(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("accept: {e}"),
        }
        streams.retain_mut(|s| {
            let mut buf = [0u8; 256];
            match s.read(&mut buf) {
                Ok(0) => false,
                Ok(n) => {
                    s.write_all(&buf[..n]).unwrap();
                    true
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => true,
                Err(_) => false,
            }
        });
        b.poll(Some(Duration::from_millis(1)));
    }
    engines
}

/// `n` connections from `a`, open at once: each sends 64 bytes and reads
/// them back. Returns when every connect returned.
fn clients(a: &Stack, n: usize) -> (Vec<TcpStream>, Instant) {
    let mut cs = Vec::with_capacity(n);
    for i in 0..n {
        let c = TcpStream::connect(a, SocketAddrV4::new(B, PORT))
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        cs.push(c);
    }
    (cs, Instant::now())
}

fn echo(cs: &mut [TcpStream]) {
    for (i, c) in cs.iter_mut().enumerate() {
        c.write_all(&[i as u8; 64]).unwrap();
    }
    for (i, c) in cs.iter_mut().enumerate() {
        let mut buf = [0u8; 64];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(buf, [i as u8; 64], "connection {i}");
    }
}

/// A thread's engine and the engines of the connections it served.
type Served = (usize, Vec<usize>);

/// Two owner threads serve 32 echo connections from a one-engine client
/// (the main thread) with takeover time `takeover`; returns how long the
/// connections and their echoes took, each thread's engine and the
/// engines of the connections it served, and the takeovers per engine.
fn owners_serve(takeover: Duration) -> (Duration, Vec<Served>, Vec<u64>) {
    let (a, b) = stacks_with_engines(true, 1, 2);
    b.set_takeover_after(takeover);
    let stop = Arc::new(AtomicBool::new(false));
    let awake0 = Arc::new(AtomicU64::new(0));
    let servers = servers(&b, &stop, Duration::ZERO, Instant::now(), &awake0);
    let t = Instant::now();
    let (mut cs, _) = clients(&a, 32);
    echo(&mut cs);
    let took = t.elapsed();
    drop(cs);
    let takeovers = b.takeovers();
    stop.store(true, Ordering::Release);
    let served = servers
        .into_iter()
        .map(|(e, h)| (e, h.join().unwrap()))
        .collect();
    // The listeners closed with their threads: nobody owns an engine.
    assert_eq!(b.engine_owned(0), None);
    assert_eq!(b.engine_owned(1), None);
    (took, served, takeovers)
}

#[test]
fn each_engine_is_run_only_by_its_listeners_thread() {
    // The owners wait all along; on a loaded 2-core machine a waiting
    // thread may still lose its CPU for a few ms, which is not what this
    // test is about: a takeover time of 1 s.
    let (_, served, takeovers) = owners_serve(Duration::from_secs(1));
    for (e, engines) in served {
        println!("thread of engine {e} served the connections of engines {engines:?}");
        assert!(!engines.is_empty(), "engine {e}'s thread served nothing");
        assert!(
            engines.iter().all(|&x| x == e),
            "engine {e}'s thread served connections of engines {engines:?}"
        );
    }
    println!("runs of an owned engine by another thread, per engine: {takeovers:?}");
    assert_eq!(takeovers, vec![0, 0], "another thread ran an owned engine");
}

#[test]
fn an_owner_that_stops_waiting_has_its_engine_taken_over() {
    let (a, b) = stacks_with_engines(true, 1, 2);
    b.set_takeover_after(Duration::from_millis(1));
    let stop = Arc::new(AtomicBool::new(false));
    let awake0 = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    // Engine 0's owner sleeps 2.5 s in application code after it listens.
    let servers = servers(&b, &stop, Duration::from_millis(2500), t0, &awake0);
    // Sixteen connections: their flows fall on both engines (all on one:
    // 2^-15), and each needs its engine to run for its handshake.
    let (mut cs, connected) = clients(&a, 16);
    let connected_ns = connected.duration_since(t0).as_nanos() as u64;
    let woke = awake0.load(Ordering::Acquire);
    let takeovers = b.takeovers();
    println!(
        "connected after {:?}, engine 0's owner awake: {}; takeovers {takeovers:?}",
        connected.duration_since(t0),
        woke != 0
    );
    assert!(
        woke == 0 || woke > connected_ns,
        "the connections waited for engine 0's owner"
    );
    assert!(takeovers[0] > 0, "nobody ran engine 0 for its owner");
    // Once awake, the owner serves its connections.
    echo(&mut cs);
    drop(cs);
    stop.store(true, Ordering::Release);
    for (e, h) in servers {
        let engines = h.join().unwrap();
        assert!(!engines.is_empty(), "engine {e}'s thread served nothing");
        assert!(engines.iter().all(|&x| x == e), "engine {e}: {engines:?}");
    }
}

#[test]
fn ownership_ends_with_the_thread_or_its_listener() {
    let (_a, b) = stacks_with_engines(true, 1, 2);
    // An explicit claim, given back when the thread exits.
    let (tx, rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let b2 = b.clone();
    let h = std::thread::spawn(move || {
        let c = b2.claim_engine().expect("an engine nobody owns");
        assert_eq!(c.engine, b2.current_engine());
        assert_eq!(b2.engine_owned(c.engine), Some(true));
        tx.send(c.engine).unwrap();
        done_rx.recv().unwrap();
    });
    let e = rx.recv().unwrap();
    assert_eq!(b.engine_owned(e), Some(false), "another thread owns it");
    done_tx.send(()).unwrap();
    h.join().unwrap();
    assert_eq!(b.engine_owned(e), None, "the thread exited");
    // A listener's claim, given back when the listener closes; the thread
    // keeps a claim of its own until it gives it back.
    let b2 = b.clone();
    std::thread::spawn(move || {
        let e = b2.current_engine();
        let l = TcpListener::bind_opts(&b2, any(), reuseport()).expect("a member");
        assert_eq!(b2.engine_owned(e), Some(true));
        let c = b2.claim_engine().expect("a second hold of its own engine");
        drop(l);
        assert_eq!(b2.engine_owned(e), Some(true), "the explicit claim holds");
        b2.release_claim(c);
        assert_eq!(b2.engine_owned(e), None, "every claim given back");
        let l = TcpListener::bind_opts(&b2, any(), reuseport()).expect("again");
        assert_eq!(b2.engine_owned(e), Some(true));
        drop(l);
        assert_eq!(b2.engine_owned(e), None, "the listener closed");
    })
    .join()
    .unwrap();
    // One engine: no owner (a lock per engine, as before).
    let (one, _) = stacks_with_engines(true, 1, 1);
    assert!(one.claim_engine().is_none());
}
