//! `corestack serve echo`: TCP and UDP echo on one port, on corestack or on the kernel stack.
//!
//! corestack (and `--kernel --spin`): one thread, nonblocking sockets, any number of
//! connections; a pass accepts, echoes what each connection has, answers queued datagrams; after
//! a pass with nothing to do it waits in `Stack::poll` (inline mode: that runs the engine) or, on
//! the kernel with `--spin`, spins. On corestack a pass looks only at the sockets its `Poller`
//! reports (those the engine changed, or that are still ready); on the kernel it tries every
//! connection. `--kernel` without `--spin`: blocking sockets, one thread per
//! connection plus one for UDP. Prints `listening on ADDR` when ready, stops on SIGINT/SIGTERM and
//! prints corestack's statistics.

mod sink;

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use cmdline::{bind_error, set_kernel_cc, stop_flag, Datagram, Listener, StackOpts, Stream};

/// Size of the per-pass receive buffer and of each connection's pending-echo buffer, bytes.
const BUF_BYTES: usize = 64 * 1024;
/// Connections waiting to be accepted at most (nginx and Linux's somaxconn use 4096).
const LISTEN_BACKLOG: usize = 4096;
/// Datagrams answered per pass at most, so TCP connections are not starved.
const UDP_BURST: usize = 64;

/// Servers.
#[derive(Subcommand, Debug)]
pub enum Serve {
    /// TCP and UDP echo on --port until SIGINT/SIGTERM.
    Echo(Echo),
    /// TCP sink: read and discard, report bytes and goodput (the server of `bench stream`).
    Sink(sink::Sink),
}

impl Serve {
    pub fn run(self) -> Result<()> {
        match self {
            Serve::Echo(e) => e.run(),
            Serve::Sink(s) => s.run(),
        }
    }
}

/// `serve echo` options.
#[derive(Args, Debug)]
pub struct Echo {
    #[command(flatten)]
    stack: StackOpts,
    /// TCP and UDP port to echo on.
    #[arg(long)]
    port: u16,
    /// Use the Linux kernel stack (std::net) instead of corestack; --ip is then the bind address (an IPv4 and an IPv6 --ip: `[::]`, both families).
    #[arg(long, conflicts_with = "iface")]
    kernel: bool,
    /// Kernel stack: one thread busy-polling nonblocking sockets (otherwise blocking sockets).
    #[arg(long, requires = "kernel")]
    spin: bool,
    /// Kernel stack: the congestion control of the accepted connections (TCP_CONGESTION on
    /// the listener), e.g. cubic; default: the system's.
    #[arg(long, requires = "kernel", value_name = "NAME")]
    kernel_cc: Option<String>,
}

impl Echo {
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        if self.kernel {
            return kernel_echo(
                cmdline::kernel_listen_addr(&self.stack, self.port),
                self.spin,
                self.kernel_cc.as_deref(),
                &stop,
            );
        }
        let stack = self.stack.start()?;
        // Every configured address: with an IPv6 address (--ip, or in
        // service mode the daemon's), [::] without IPV6_V6ONLY serves IPv6
        // and IPv4 on one socket each for TCP and UDP (RFC 3493 §3.7); else
        // the IPv4 address.
        let addr = match (stack.ip6(), self.stack.ip4()) {
            (Some(_), _) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), self.port),
            (None, c) => SocketAddr::new(
                IpAddr::V4(c.map_or(Ipv4Addr::UNSPECIFIED, |c| c.addr)),
                self.port,
            ),
        };
        let mut listener = corestack::TcpListener::bind_with_backlog(&stack, addr, LISTEN_BACKLOG)
            .map_err(|e| bind_error(e, "TCP", addr))?;
        listener.set_nonblocking(true)?;
        let mut udp =
            corestack::UdpSocket::bind(&stack, addr).map_err(|e| bind_error(e, "UDP", addr))?;
        udp.set_nonblocking(true)?;
        announce(addr, &self.stack.describe());
        let waiter = self.stack.waiter(&stack);
        let served = echo_polled(&stack, &mut listener, &mut udp, &stop, |progress| {
            if progress {
                waiter.spin()
            } else {
                waiter.wait(Duration::from_millis(10))
            }
        })?;
        println!(
            "stopped: {} connections, {} datagrams",
            served.connections, served.datagrams
        );
        println!("corestack statistics:");
        println!("{}", stack.stats());
        Ok(())
    }
}

fn announce(addr: impl std::fmt::Display, what: &str) {
    println!("listening on {addr} (tcp, udp), {what}");
    let _ = io::stdout().flush();
}

/// What an echo loop served, for the exit line.
#[derive(Debug, Default)]
struct Served {
    connections: u64,
    datagrams: u64,
}

/// One accepted connection and the echo bytes it could not take yet.
struct Conn<S> {
    stream: S,
    pending: Vec<u8>,
    sent: usize,
}

/// Accepts every connection waiting on `listener`, each nonblocking with Nagle off, handing
/// it to `take`; returns how many. Errors: the listener is gone (the engine or the daemon
/// stopped: nothing more will arrive, so the server stops rather than spin on the error),
/// or what `take` returns.
fn accept_all<L: Listener>(
    listener: &mut L,
    mut take: impl FnMut(L::Stream) -> Result<()>,
) -> Result<u64> {
    let mut n = 0;
    loop {
        match listener.accept_one() {
            Ok((mut stream, _peer)) => {
                stream.nonblocking(true)?;
                let _ = stream.nodelay();
                take(stream)?;
                n += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(n),
            Err(e) => return Err(e).context("accepting a connection"),
        }
    }
}

/// Answers up to [`UDP_BURST`] queued datagrams; returns how many.
fn answer_datagrams<U: Datagram>(udp: &mut U, buf: &mut [u8]) -> Result<u64> {
    let mut n = 0;
    for _ in 0..UDP_BURST {
        match udp.recv_one(buf) {
            Ok((len, from)) => {
                // A full send queue drops the echo, as a UDP server may.
                let _ = udp.send_one(&buf[..len], from);
                n += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => break,
            Err(e) => return Err(e).context("receiving a datagram"),
        }
    }
    Ok(n)
}

/// [`echo_conn`] with a failed connection counted as closed: (something moved, still open).
fn echo_step<S: Stream>(c: &mut Conn<S>, buf: &mut [u8]) -> (bool, bool) {
    echo_conn(c, buf).unwrap_or((true, false))
}

/// What a pass's wait returned: an interrupted wait is no error.
fn waited(r: io::Result<()>) -> Result<()> {
    match r {
        Err(e) if e.kind() != io::ErrorKind::Interrupted => {
            Err(e).context("waiting for socket events")
        }
        _ => Ok(()),
    }
}

/// A connection just accepted, with nothing to echo yet.
fn fresh<S>(stream: S) -> Conn<S> {
    Conn {
        stream,
        pending: Vec::new(),
        sent: 0,
    }
}

/// Serves until `stop`; `idle(progress)` runs after every pass (`progress` = something moved).
fn echo_loop<L: Listener, U: Datagram>(
    listener: &mut L,
    udp: &mut U,
    stop: &AtomicBool,
    mut idle: impl FnMut(bool) -> io::Result<()>,
) -> Result<Served> {
    let mut conns: Vec<Conn<L::Stream>> = Vec::new();
    let mut buf = vec![0u8; BUF_BYTES];
    let mut served = Served::default();
    while !stop.load(Ordering::Relaxed) {
        let accepted = accept_all(listener, |stream| {
            conns.push(fresh(stream));
            Ok(())
        })?;
        let mut progress = accepted > 0;
        served.connections += accepted;
        conns.retain_mut(|c| {
            let (moved, open) = echo_step(c, &mut buf);
            progress |= moved;
            open
        });
        let datagrams = answer_datagrams(udp, &mut buf)?;
        served.datagrams += datagrams;
        progress |= datagrams > 0;
        waited(idle(progress))?;
    }
    Ok(served)
}

/// Poller tokens of the listener and the UDP socket; connections take the rest.
const LISTENER: u64 = 0;
const UDP: u64 = 1;
const FIRST_CONN: u64 = 2;

/// [`echo_loop`] on corestack: a pass moves only what the poller reports ready (the
/// engine queues the sockets it changed), so its cost follows the connections that
/// have work, not the connections open.
fn echo_polled(
    stack: &corestack::Stack,
    listener: &mut corestack::TcpListener,
    udp: &mut corestack::UdpSocket,
    stop: &AtomicBool,
    mut idle: impl FnMut(bool) -> io::Result<()>,
) -> Result<Served> {
    use corestack::{Interest, Poller};
    let mut poller = Poller::new(stack);
    poller.register(listener, LISTENER, Interest::READABLE)?;
    poller.register(udp, UDP, Interest::READABLE)?;
    // Connections by token - FIRST_CONN; freed slots are reused.
    let mut conns: Vec<Option<Conn<corestack::TcpStream>>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut events = Vec::with_capacity(1024);
    let mut buf = vec![0u8; BUF_BYTES];
    let mut served = Served::default();
    while !stop.load(Ordering::Relaxed) {
        let mut progress = false;
        poller.wait(&mut events, 1024, Some(Duration::ZERO))?;
        for ev in &events {
            match ev.token {
                LISTENER => {
                    let accepted = accept_all(listener, |stream| {
                        let i = free.pop().unwrap_or_else(|| {
                            conns.push(None);
                            conns.len() - 1
                        });
                        poller.register(&stream, FIRST_CONN + i as u64, Interest::READABLE)?;
                        conns[i] = Some(fresh(stream));
                        Ok(())
                    })?;
                    served.connections += accepted;
                    progress |= accepted > 0;
                }
                UDP => {
                    let datagrams = answer_datagrams(udp, &mut buf)?;
                    served.datagrams += datagrams;
                    progress |= datagrams > 0;
                }
                token => {
                    let i = (token - FIRST_CONN) as usize;
                    let Some(c) = conns.get_mut(i).and_then(Option::as_mut) else {
                        continue;
                    };
                    let (moved, open) = echo_step(c, &mut buf);
                    progress |= moved;
                    if open {
                        // Wait for room while echo bytes wait, else for data.
                        let want = if c.sent < c.pending.len() {
                            Interest::BOTH
                        } else {
                            Interest::READABLE
                        };
                        poller.reregister(token, want)?;
                    } else {
                        poller.deregister(token)?;
                        conns[i] = None;
                        free.push(i);
                    }
                }
            }
        }
        waited(idle(progress))?;
    }
    Ok(served)
}

/// Moves what one connection has; returns (something moved, connection still open).
fn echo_conn<S: Stream>(c: &mut Conn<S>, buf: &mut [u8]) -> io::Result<(bool, bool)> {
    let mut moved = false;
    if c.sent < c.pending.len() {
        match c.stream.write(&c.pending[c.sent..]) {
            Ok(n) => {
                c.sent += n;
                moved = n > 0;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((false, true)),
            Err(e) => return Err(e),
        }
        if c.sent < c.pending.len() {
            return Ok((moved, true));
        }
        c.pending.clear();
        c.sent = 0;
    }
    match c.stream.read(buf) {
        Ok(0) => {
            let _ = c.stream.shutdown_write();
            Ok((true, false))
        }
        Ok(n) => {
            let wrote = match c.stream.write(&buf[..n]) {
                Ok(w) => w,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e),
            };
            if wrote < n {
                c.pending.extend_from_slice(&buf[wrote..n]);
            }
            Ok((true, true))
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok((moved, true)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok((moved, true)),
        Err(e) => Err(e),
    }
}

/// The Linux side of the comparisons: the same echo on std::net; `cc`: the accepted
/// connections' congestion control.
fn kernel_echo(addr: SocketAddr, spin: bool, cc: Option<&str>, stop: &AtomicBool) -> Result<()> {
    let mut listener = std::net::TcpListener::bind(addr).map_err(|e| bind_error(e, "TCP", addr))?;
    if let Some(cc) = cc {
        set_kernel_cc(&listener, cc)?;
    }
    let mut udp = std::net::UdpSocket::bind(addr).map_err(|e| bind_error(e, "UDP", addr))?;
    if spin {
        listener.set_nonblocking(true)?;
        udp.set_nonblocking(true)?;
        announce(addr, "kernel, spinning");
        let served = echo_loop(&mut listener, &mut udp, stop, |_| {
            std::hint::spin_loop();
            Ok(())
        })?;
        println!(
            "stopped: {} connections, {} datagrams",
            served.connections, served.datagrams
        );
        return Ok(());
    }
    announce(addr, "kernel, blocking");
    thread::spawn(move || {
        let mut buf = vec![0u8; BUF_BYTES];
        while let Ok((n, from)) = udp.recv_from(&mut buf) {
            let _ = udp.send_to(&buf[..n], from);
        }
    });
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_nodelay(true);
            thread::spawn(move || {
                let mut buf = vec![0u8; BUF_BYTES];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if stream.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = stream.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    // Blocked threads end with the process.
    while !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(20));
    }
    println!("stopped");
    Ok(())
}
