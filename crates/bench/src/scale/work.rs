//! Work per request, engines against engines and corestack against Linux: everything in one
//! thread, so the thread's CPU time is the work (no spinning, no waiting, no other CPU).
//!
//! corestack: a server stack of N engines and a client stack of one, both inline, joined by a
//! multi-queue `mem` wire; the server's NIC either steers each frame to its flow's owner (the
//! engines' own hash and table, as a NIC with RSS programmed) or spreads frames at random (as
//! veth and TAP do, so most frames are handed between engines). Linux: the same connections
//! and messages over loopback sockets in this thread (its CPU time then holds both stacks'
//! kernel work, as corestack's holds both stacks' engines).

use anyhow::{bail, Context, Result};
use corestack::{Stack, TcpListener, TcpStream};
use nic::impair::Impairments;
use nic::mem::{self, Steer};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 7;

/// CPU time of this thread, ns.
fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// How the server's NIC spreads frames over its engines' queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// By the engines' own hash and table: every frame on its owner's queue.
    Owner,
    /// At random per frame: most frames are handed to their owner.
    Random,
}

/// One measurement: CPU ns per request (a `size`-byte message and its echo).
#[derive(Debug, Clone, Copy)]
pub struct Work {
    /// CPU time per request, ns.
    pub ns_per_request: f64,
    /// Frames the server's engines handed to each other per request.
    pub handoffs_per_request: f64,
}

/// Reads what is there into `buf`; Ok(0) when nothing is.
fn read_some(s: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    match s.read(buf) {
        Ok(0) => bail!("the peer closed"),
        Ok(n) => Ok(n),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Writes all of `msg` (the rings have room for it: one message in flight).
fn write_all(s: &mut impl Write, msg: &[u8], drive: &dyn Fn()) -> Result<()> {
    let mut at = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while at < msg.len() {
        match s.write(&msg[at..]) {
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => drive(),
            Err(e) => return Err(e.into()),
        }
        if Instant::now() > deadline {
            bail!("a write did not complete in 10 s");
        }
    }
    Ok(())
}

/// `rounds` rounds of one `size`-byte message on each of `conns` connections and its echo, the
/// server on `engines` engines spread per `spread`; the CPU time of the measured rounds per
/// request (after one round of warm-up).
pub fn corestack(
    engines: usize,
    spread: Spread,
    conns: usize,
    rounds: usize,
    size: usize,
) -> Result<Work> {
    let steer = match spread {
        Spread::Owner => Steer::Hash(Arc::new(nic::rss::Steering::new(engines))),
        Spread::Random => Steer::RandomPerFrame,
    };
    let none = Impairments::none();
    let (qa, qb) = mem::multi_pair(none, none, 1, 1, engines, Steer::AllToZero, steer);
    let start = |ports, ip| {
        Stack::builder()
            .mem_ports(ports)
            .ip(ip, 24)
            .inline(true)
            .ring_bytes(16 * 1024)
            .start()
            .context("starting a stack on the mem wire")
    };
    let client = start(qa, A)?;
    let server = start(qb, B)?;
    let drive = || {
        client.drive();
        server.drive();
    };
    let mut listener = TcpListener::bind(&server, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT))?;
    listener.set_nonblocking(true)?;
    let mut clients = Vec::with_capacity(conns);
    for _ in 0..conns {
        clients.push(TcpStream::start_connect(
            &client,
            SocketAddrV4::new(B, PORT),
            0,
            true,
        )?);
        drive();
    }
    let mut accepted = Vec::with_capacity(conns);
    let deadline = Instant::now() + Duration::from_secs(30);
    while accepted.len() < conns || clients.iter().any(|c| c.is_connecting()) {
        drive();
        while let Ok((mut s, _)) = listener.accept() {
            s.set_nonblocking(true)?;
            s.set_nodelay(true)?;
            accepted.push(s);
        }
        if Instant::now() > deadline {
            bail!("{} of {conns} connections accepted in 30 s", accepted.len());
        }
    }
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 64 * 1024];
    let mut round = |clients: &mut [TcpStream], accepted: &mut [TcpStream]| {
        echo_round(clients, accepted, &msg, &mut buf, &drive)
    };
    round(&mut clients, &mut accepted)?;
    let handed0 = server.stats().handoff_tx;
    let t0 = thread_cpu_ns();
    for _ in 0..rounds {
        round(&mut clients, &mut accepted)?;
    }
    let cpu = thread_cpu_ns() - t0;
    let requests = (conns * rounds) as f64;
    Ok(Work {
        ns_per_request: cpu as f64 / requests,
        handoffs_per_request: (server.stats().handoff_tx - handed0) as f64 / requests,
    })
}

/// The same over loopback kernel sockets in this thread: CPU ns per request.
pub fn linux(conns: usize, rounds: usize, size: usize) -> Result<f64> {
    use std::net::{TcpListener as KListener, TcpStream as KStream};
    let listener = KListener::bind("127.0.0.1:0").context("binding a loopback listener")?;
    let addr = listener.local_addr()?;
    let mut clients = Vec::with_capacity(conns);
    let mut accepted = Vec::with_capacity(conns);
    for _ in 0..conns {
        let c = KStream::connect(addr)?;
        c.set_nodelay(true)?;
        c.set_nonblocking(true)?;
        clients.push(c);
        let (s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        accepted.push(s);
    }
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 64 * 1024];
    let mut round = |clients: &mut [KStream], accepted: &mut [KStream]| {
        echo_round(clients, accepted, &msg, &mut buf, &|| {})
    };
    round(&mut clients, &mut accepted)?;
    let t0 = thread_cpu_ns();
    for _ in 0..rounds {
        round(&mut clients, &mut accepted)?;
    }
    Ok((thread_cpu_ns() - t0) as f64 / (conns * rounds) as f64)
}

/// One round: every client writes `msg`, every server end echoes what it reads, until every
/// client has its echo; `drive` runs the stacks (corestack inline mode) between looks.
fn echo_round<S: Read + Write>(
    clients: &mut [S],
    accepted: &mut [S],
    msg: &[u8],
    buf: &mut [u8],
    drive: &dyn Fn(),
) -> Result<()> {
    for c in clients.iter_mut() {
        write_all(c, msg, drive)?;
    }
    let mut echoed = vec![0usize; clients.len()];
    let mut done = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while done < clients.len() {
        drive();
        for s in accepted.iter_mut() {
            let n = read_some(s, buf)?;
            if n > 0 {
                write_all(s, &buf[..n], drive)?;
            }
        }
        for (k, c) in clients.iter_mut().enumerate() {
            if echoed[k] < msg.len() {
                echoed[k] += read_some(c, buf)?;
                if echoed[k] >= msg.len() {
                    done += 1;
                }
            }
        }
        if Instant::now() > deadline {
            bail!("{done} of {} echoes in 30 s", clients.len());
        }
    }
    Ok(())
}
