//! `corestack nc`: a minimal netcat on corestack (or, without `--iface`, on the kernel stack).
//!
//! stdin goes to the socket, the socket to stdout. At stdin EOF it half-closes (FIN); at the
//! peer's EOF it exits once stdin is done too. `-l PORT` accepts one connection. Status lines
//! (`listening on ...`, `connected to ...`) go to stderr; stdout carries only data.
//!
//! A thread reads stdin (it blocks) into a small bounded channel; the main thread drives the
//! nonblocking socket and writes stdout.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, TryRecvError};
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use cmdline::{
    bind_error, connect_error, stop_flag, Interrupted, Listener, StackOpts, Stream, Waiter,
};

/// Bytes per stdin read and per socket read.
const CHUNK_BYTES: usize = 64 * 1024;
/// stdin chunks buffered between the reader thread and the socket.
const QUEUED_CHUNKS: usize = 8;

/// `nc` options.
#[derive(Args, Debug)]
pub struct Nc {
    #[command(flatten)]
    stack: StackOpts,
    /// Listen on PORT and serve one connection.
    #[arg(short = 'l', value_name = "PORT", conflicts_with_all = ["host", "port"])]
    listen: Option<u16>,
    /// Print corestack's statistics on stderr at exit.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Host (IPv4 or IPv6 address) to connect to.
    #[arg(required_unless_present = "listen")]
    host: Option<IpAddr>,
    /// Port to connect to.
    #[arg(required_unless_present = "listen")]
    port: Option<u16>,
}

impl Nc {
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        if self.stack.wants_corestack() {
            let stack = self.stack.start()?;
            let waiter = self.stack.waiter(&stack);
            let result = self.session(
                &waiter,
                &stop,
                |addr| corestack::TcpListener::bind(&stack, addr),
                |to| corestack::TcpStream::connect(&stack, to),
            );
            if self.verbose {
                eprintln!("corestack statistics:\n{}", stack.stats());
            }
            return result;
        }
        self.session(&Waiter::Kernel, &stop, std::net::TcpListener::bind, |to| {
            std::net::TcpStream::connect_timeout(&to, Duration::from_secs(10))
        })
    }

    /// `-l PORT`: listens with `bind` and serves one connection; HOST PORT: connects with
    /// `connect`. Either way relays stdin to the socket and the socket to stdout.
    fn session<L: Listener>(
        &self,
        waiter: &Waiter,
        stop: &std::sync::atomic::AtomicBool,
        bind: impl FnOnce(SocketAddr) -> io::Result<L>,
        connect: impl FnOnce(SocketAddr) -> io::Result<L::Stream>,
    ) -> Result<()> {
        // With an IPv6 --ip, -l listens on [::] (IPv6 and IPv4).
        let local_ip = match (self.stack.ip6(), self.stack.ip4()) {
            (Some(_), _) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            (None, c) => IpAddr::V4(c.map_or(Ipv4Addr::UNSPECIFIED, |c| c.addr)),
        };
        match (self.listen, self.host, self.port) {
            (Some(port), _, _) => {
                let addr = SocketAddr::new(local_ip, port);
                let mut l = bind(addr).map_err(|e| bind_error(e, "TCP", addr))?;
                l.nonblocking(true)?;
                let s = accept(&mut l, addr, waiter, stop)?;
                relay(s, waiter, stop)
            }
            (None, Some(host), Some(port)) => {
                let to = SocketAddr::new(host, port);
                let s = connect(to).map_err(|e| connect_error(e, to))?;
                eprintln!("connected to {to}");
                relay(s, waiter, stop)
            }
            _ => bail!("give either -l PORT or HOST PORT"),
        }
    }
}

/// Whether `e` only means "not now" (EWOULDBLOCK, EINTR): try again later.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

fn accept<L: Listener>(
    l: &mut L,
    addr: SocketAddr,
    waiter: &Waiter,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<L::Stream> {
    eprintln!("listening on {addr}");
    loop {
        match l.accept_one() {
            Ok((s, peer)) => {
                eprintln!("connection from {peer}");
                return Ok(s);
            }
            Err(e) if transient(&e) => {}
            Err(e) => return Err(e).context("accepting a connection"),
        }
        if stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        waiter.wait(Duration::from_millis(10))?;
    }
}

fn relay<S: Stream>(mut s: S, waiter: &Waiter, stop: &std::sync::atomic::AtomicBool) -> Result<()> {
    s.nonblocking(true)?;
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(QUEUED_CHUNKS);
    thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        loop {
            let mut buf = vec![0u8; CHUNK_BYTES];
            match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    buf.truncate(n);
                    if tx.send(buf).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
    let mut stdout = io::stdout().lock();
    let mut chunk: Vec<u8> = Vec::new();
    let mut off = 0usize;
    let mut stdin_done = false;
    let mut shut = false;
    let mut net_eof = false;
    let mut inbuf = vec![0u8; CHUNK_BYTES];
    loop {
        let mut progress = false;
        if off == chunk.len() && !stdin_done {
            match rx.try_recv() {
                Ok(c) => {
                    chunk = c;
                    off = 0;
                    progress = true;
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => stdin_done = true,
            }
        }
        if off < chunk.len() {
            match s.write(&chunk[off..]) {
                Ok(n) => {
                    off += n;
                    progress |= n > 0;
                }
                Err(e) if transient(&e) => {}
                Err(e) => return Err(e).context("sending"),
            }
        } else if stdin_done && !shut {
            s.shutdown_write().context("half-closing the connection")?;
            shut = true;
        }
        if !net_eof {
            match s.read(&mut inbuf) {
                Ok(0) => {
                    net_eof = true;
                    stdout.flush().context("writing stdout")?;
                }
                Ok(n) => {
                    stdout.write_all(&inbuf[..n]).context("writing stdout")?;
                    progress = true;
                }
                Err(e) if transient(&e) => {}
                Err(e) => return Err(e).context("receiving"),
            }
        }
        if net_eof && shut {
            return Ok(());
        }
        if stop.load(Ordering::Relaxed) {
            let _ = stdout.flush();
            return Err(Interrupted.into());
        }
        if !progress {
            stdout.flush().context("writing stdout")?;
            waiter.wait(Duration::from_millis(1))?;
        } else if let Waiter::Core { .. } = waiter {
            waiter.spin()?;
        }
    }
}
