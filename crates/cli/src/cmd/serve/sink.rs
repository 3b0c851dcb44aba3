//! `corestack serve sink`: the receiving end of `bench stream` (see `stream.rs` for the
//! protocol), on either stack. It reads and discards; at a client's FIN it answers one line,
//! `sink: BYTES bytes NANOS ns\n` (what it received and how long from accept to FIN), and
//! closes. It prints one line per connection and, at exit (SIGINT/SIGTERM), its totals and
//! corestack's counters.
//!
//! corestack: one thread, nonblocking sockets, the inline engine run by the waits (it spins).
//! Kernel: one blocking thread per connection.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;

use cmdline::sink::{mbit_per_s, report_line, would_block, CHUNK_BYTES};
use cmdline::{bind_error, stop_flag, Listener, StackOpts, Stream, Waiter};

/// `serve sink` options.
#[derive(Args, Debug)]
pub struct Sink {
    #[command(flatten)]
    stack: StackOpts,
    /// TCP port to listen on.
    #[arg(long)]
    port: u16,
    /// Use the Linux kernel stack (std::net) instead of corestack; --ip is then the bind address.
    #[arg(long, conflicts_with = "iface")]
    kernel: bool,
}

/// One connection being drained.
struct Drain<S> {
    stream: S,
    peer: SocketAddr,
    bytes: u64,
    since: Instant,
    /// The report not yet written (after the peer's FIN).
    answer: Option<(Vec<u8>, usize)>,
}

/// Totals for the exit line.
#[derive(Default)]
struct Totals {
    connections: u64,
    bytes: u64,
    busy: Duration,
}

impl Totals {
    fn done(&mut self, peer: SocketAddr, bytes: u64, elapsed: Duration) {
        self.connections += 1;
        self.bytes += bytes;
        self.busy += elapsed;
        let secs = elapsed.as_secs_f64();
        println!(
            "connection from {peer}: {bytes} bytes in {secs:.3} s ({:.1} Mbit/s)",
            mbit_per_s(bytes, secs)
        );
        let _ = io::stdout().flush();
    }

    fn print(&self) {
        let secs = self.busy.as_secs_f64();
        println!(
            "stopped: {} connections, {} bytes received, {:.1} Mbit/s goodput while receiving",
            self.connections,
            self.bytes,
            mbit_per_s(self.bytes, secs)
        );
    }
}

impl Sink {
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        if self.kernel {
            return kernel_sink(cmdline::kernel_listen_addr(&self.stack, self.port), &stop);
        }
        // With an IPv6 --ip, [::] (IPv6 and IPv4 on one socket, RFC 3493 §3.7); else the
        // IPv4 address.
        let addr = match (self.stack.ip6(), self.stack.ip4()) {
            (Some(_), _) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), self.port),
            (None, c) => SocketAddr::new(
                IpAddr::V4(c.map_or(Ipv4Addr::UNSPECIFIED, |c| c.addr)),
                self.port,
            ),
        };
        let stack = self.stack.start()?;
        let mut listener =
            corestack::TcpListener::bind(&stack, addr).map_err(|e| bind_error(e, "TCP", addr))?;
        listener.set_nonblocking(true)?;
        println!("listening on {addr} (tcp sink), {}", self.stack.describe());
        let _ = io::stdout().flush();
        let waiter = self.stack.waiter(&stack);
        let totals = core_sink(&mut listener, &waiter, &stop)?;
        totals.print();
        println!("corestack statistics:");
        println!("{}", stack.stats());
        Ok(())
    }
}

/// The corestack sink: one thread, every connection nonblocking.
fn core_sink<L: Listener>(listener: &mut L, waiter: &Waiter, stop: &AtomicBool) -> Result<Totals> {
    let mut conns: Vec<Drain<L::Stream>> = Vec::new();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut totals = Totals::default();
    while !stop.load(Ordering::Relaxed) {
        let mut progress = false;
        loop {
            match listener.accept_one() {
                Ok((mut stream, peer)) => {
                    stream.nonblocking(true)?;
                    conns.push(Drain {
                        stream,
                        peer,
                        bytes: 0,
                        since: Instant::now(),
                        answer: None,
                    });
                    progress = true;
                }
                Err(e) if would_block(&e) => break,
                Err(e) => {
                    eprintln!("accept: {e}");
                    break;
                }
            }
        }
        conns.retain_mut(|c| {
            let (moved, open) = drain_step(c, &mut buf, &mut totals);
            progress |= moved;
            open
        });
        if progress {
            waiter.spin()?;
        } else {
            waiter.wait(Duration::from_millis(10))?;
        }
    }
    Ok(totals)
}

/// Reads what one connection has (or writes its report); returns (moved, still open).
fn drain_step<S: Stream>(c: &mut Drain<S>, buf: &mut [u8], totals: &mut Totals) -> (bool, bool) {
    if let Some((line, off)) = &mut c.answer {
        return match c.stream.write(&line[*off..]) {
            Ok(n) => {
                *off += n;
                if *off < line.len() {
                    (n > 0, true)
                } else {
                    let _ = c.stream.shutdown_write();
                    (true, false)
                }
            }
            Err(e) if would_block(&e) => (false, true),
            Err(_) => (true, false),
        };
    }
    let mut moved = false;
    // A bounded number of reads per pass, so one connection does not starve the others.
    for _ in 0..16 {
        match c.stream.read(buf) {
            Ok(0) => {
                let elapsed = c.since.elapsed();
                totals.done(c.peer, c.bytes, elapsed);
                c.answer = Some((report_line(c.bytes, elapsed).into_bytes(), 0));
                return (true, true);
            }
            Ok(n) => {
                c.bytes += n as u64;
                moved = true;
            }
            Err(e) if would_block(&e) => return (moved, true),
            Err(e) => {
                eprintln!("connection from {}: {e}", c.peer);
                return (true, false);
            }
        }
    }
    (moved, true)
}

/// The Linux sink: a blocking thread per connection.
fn kernel_sink(addr: SocketAddr, stop: &AtomicBool) -> Result<()> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| bind_error(e, "TCP", addr))?;
    listener.set_nonblocking(true)?;
    println!("listening on {addr} (tcp sink), kernel, blocking");
    let _ = io::stdout().flush();
    let totals = std::sync::Arc::new(std::sync::Mutex::new(Totals::default()));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                let totals = std::sync::Arc::clone(&totals);
                stream.set_nonblocking(false)?;
                thread::spawn(move || {
                    let since = Instant::now();
                    let mut buf = vec![0u8; CHUNK_BYTES];
                    let mut bytes = 0u64;
                    loop {
                        match stream.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => bytes += n as u64,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(_) => return,
                        }
                    }
                    let elapsed = since.elapsed();
                    if let Ok(mut t) = totals.lock() {
                        t.done(peer, bytes, elapsed);
                    }
                    let _ = stream.write_all(report_line(bytes, elapsed).as_bytes());
                    let _ = stream.shutdown(std::net::Shutdown::Write);
                });
            }
            Err(e) if would_block(&e) => thread::sleep(Duration::from_millis(5)),
            Err(e) => eprintln!("accept: {e}"),
        }
    }
    if let Ok(t) = totals.lock() {
        t.print();
    }
    Ok(())
}
