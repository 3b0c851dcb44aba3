//! The daemon in this process, without root: its host(s) (`service::serve`, one engine per
//! queue) on one end of a `mem` wire, run on its
//! own thread with its log collected; on the other end a peer stack (the "network", embedded
//! mode) at 10.0.0.1. Applications join over a control socket in /tmp: well-behaved ones are
//! `corestack::Stack`s in service mode, the misbehaving one is `testkit::rogue::RogueApp` (the
//! same the namespace tests of `corestack run` use), written against `appif` alone.
//!
//! Every wait is bounded; the daemon is stopped and its thread joined on drop. Control sockets
//! are `/tmp/corestack-svcunit-<pid>-<tag>.sock`.
#![allow(dead_code)]

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use corestack::{Stack, TcpListener, TcpStream};
use nic::impair::Impairments;
use nic::mem;
use service::{Config, ControlSocket};

/// The daemon's address.
pub const DAEMON_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The peer's address.
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The daemon's IPv6 address, when [`Daemon::dual_stack`] gave it one (fd00:77::2/64).
pub const DAEMON_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 2);
/// The peer's IPv6 address next to a dual-stack daemon (fd00:77::1/64).
pub const PEER_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 1);
/// Longest wait for anything that should happen at once.
pub const BOUND: Duration = Duration::from_secs(5);

pub fn addr(ip: Ipv4Addr, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip, port)
}

/// Any address, `port`.
pub fn any(port: u16) -> SocketAddrV4 {
    addr(Ipv4Addr::UNSPECIFIED, port)
}

/// What the daemon's thread logs, as text.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A running daemon and the peer stack across the wire.
pub struct Daemon {
    /// The control socket's path.
    pub sock: PathBuf,
    /// The peer: a stack on the other end of the wire, its engine on its own thread.
    pub peer: Stack,
    stop: Arc<AtomicBool>,
    host: Option<JoinHandle<()>>,
    log: Log,
}

impl Daemon {
    /// A daemon with the default configuration.
    pub fn start(tag: &str) -> Daemon {
        Daemon::with(tag, |_| {})
    }

    /// A daemon with an IPv6 address too ([`DAEMON_IP6`]/64), its peer at [`PEER_IP6`].
    pub fn dual_stack(tag: &str) -> Daemon {
        Daemon::with(tag, |c| c.ip.push(format!("{DAEMON_IP6}/64")))
    }

    /// A daemon whose configuration `tweak` changed; waits until it is ready. When the
    /// configuration has an IPv6 address, the peer gets [`PEER_IP6`]/64.
    pub fn with(tag: &str, tweak: impl FnOnce(&mut Config)) -> Daemon {
        let sock = PathBuf::from(format!(
            "/tmp/corestack-svcunit-{}-{tag}.sock",
            std::process::id()
        ));
        let mut cfg = Config {
            iface: Some("mem0".into()),
            ip: vec![format!("{DAEMON_IP}/24")],
            socket: sock.clone(),
            ..Config::default()
        };
        tweak(&mut cfg);
        let cfg = cfg.validate().expect("a valid configuration");
        let ipv6 = cfg.ip6.is_some();
        let control = ControlSocket::bind(&cfg.socket).expect("binding the control socket");
        let cores = cfg.cores as usize;
        let (ours, theirs) = if cores == 1 {
            let (a, b) = mem::pair(Impairments::none(), Impairments::none(), 1);
            (vec![a], b)
        } else {
            // A queue per engine; each flow lands on a queue drawn at random (as a NIC
            // whose RSS is not the engines'), so the handoff rings are in use.
            let (a, mut b) = mem::multi_pair(
                Impairments::none(),
                Impairments::none(),
                1,
                cores,
                1,
                mem::Steer::RandomPerFlow,
                mem::Steer::RandomPerFlow,
            );
            (a, b.remove(0))
        };
        let log = Log::default();
        let stop = Arc::new(AtomicBool::new(false));
        let host = {
            let (log, stop) = (log.clone(), stop.clone());
            thread::Builder::new()
                .name(format!("daemon-{tag}"))
                .spawn(move || {
                    let subscriber = tracing_subscriber::fmt()
                        .with_writer(move || log.clone())
                        .with_ansi(false)
                        .finish();
                    tracing::subscriber::with_default(subscriber, || {
                        service::serve(ours, cfg, control, &stop).expect("setting up the host")
                    })
                })
                .expect("spawning the daemon's thread")
        };
        let mut peer = Stack::builder().mem_port(theirs).ip(PEER_IP, 24);
        if ipv6 {
            peer = peer.ip6(PEER_IP6, 64);
        }
        let peer = peer.inline(false).start().expect("starting the peer stack");
        let d = Daemon {
            sock,
            peer,
            stop,
            host: Some(host),
            log,
        };
        d.expect_line(&["corestack daemon ready"], "the daemon starting");
        d
    }

    /// A well-behaved application of this daemon.
    pub fn app(&self) -> Stack {
        Stack::builder()
            .service(&self.sock)
            .start()
            .expect("joining the daemon")
    }

    /// A well-behaved application of this daemon and its listener on `port` (any address).
    pub fn app_listening(&self, port: u16) -> (Stack, TcpListener) {
        let app = self.app();
        let l = TcpListener::bind(&app, any(port)).expect("the app's listen");
        (app, l)
    }

    /// A nonblocking listener of the peer stack on `port` (any address).
    pub fn peer_listener(&self, port: u16) -> TcpListener {
        let mut l = TcpListener::bind(&self.peer, any(port)).expect("the peer's listen");
        l.set_nonblocking(true).expect("nonblocking");
        l
    }

    /// Everything the daemon logged so far.
    pub fn log(&self) -> String {
        let bytes = self.log.0.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Waits up to [`BOUND`] for a log line containing every one of `needles`; panics with the
    /// log (and `what`) when none came.
    pub fn expect_line(&self, needles: &[&str], what: &str) -> String {
        within(
            || format!("{what}: the daemon logged no line with {needles:?}"),
            || {
                let log = self.log();
                let line = log.lines().find(|l| needles.iter().all(|n| l.contains(n)));
                line.map(str::to_string)
            },
        )
    }

    /// Stops the daemon (as SIGTERM does) and returns its log.
    pub fn stop(&mut self) -> String {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.host.take() {
            h.join().expect("the daemon's thread panicked");
        }
        self.log()
    }

    /// Accepts one connection on `listener` (nonblocking), within [`BOUND`]; the stream is
    /// nonblocking too.
    pub fn accept(&self, listener: &mut TcpListener, what: &str) -> TcpStream {
        self.accept_from(listener, what).0
    }

    /// Like [`Daemon::accept`], with the peer's address as accept returned it.
    pub fn accept_from(&self, listener: &mut TcpListener, what: &str) -> (TcpStream, SocketAddr) {
        listener.set_nonblocking(true).expect("nonblocking");
        let (mut s, peer) = within(
            || format!("{what}: no connection to accept; log:\n{}", self.log()),
            || match listener.accept() {
                Ok(sp) => Some(sp),
                Err(e) if e.kind() == ErrorKind::WouldBlock => None,
                Err(e) => panic!("{what}: accept failed: {e}; log:\n{}", self.log()),
            },
        );
        s.set_nonblocking(true).expect("nonblocking");
        (s, peer)
    }

    /// The peer connects to `target` and the application behind `listener` accepts; `what`
    /// names the connection in messages. The peer's end and the application's, both
    /// nonblocking, and the peer's address as the application saw it at accept.
    pub fn connect_accept(
        &self,
        listener: &mut TcpListener,
        target: impl Into<SocketAddr>,
        what: &str,
    ) -> (TcpStream, TcpStream, SocketAddr) {
        let mut c = TcpStream::connect(&self.peer, target.into())
            .unwrap_or_else(|e| panic!("{what}: the peer's connect failed: {e}"));
        c.set_nonblocking(true).expect("nonblocking");
        let (s, seen) = self.accept_from(listener, what);
        (c, s, seen)
    }

    /// The peer connects to `port` on the daemon's address, the application behind `listener`
    /// accepts and echoes `n` bytes, and the peer checks them. Panics (with the log) on any
    /// error or after [`BOUND`].
    pub fn assert_echo(&self, listener: &mut TcpListener, port: u16, n: usize, what: &str) {
        self.assert_echo_to(listener, addr(DAEMON_IP, port).into(), n, what);
    }

    /// Like [`Daemon::assert_echo`], the peer connecting to `target` (IPv4 or IPv6); returns
    /// the peer's address as the application saw it at accept.
    pub fn assert_echo_to(
        &self,
        listener: &mut TcpListener,
        target: SocketAddr,
        n: usize,
        what: &str,
    ) -> SocketAddr {
        let (mut c, mut s, seen) = self.connect_accept(listener, target, what);
        self.assert_echoes(&mut c, &mut s, n, what);
        let _ = c.shutdown(Shutdown::Both);
        seen
    }

    /// `c` writes `n` bytes, `s` echoes them and `c` checks them, both nonblocking (either may
    /// be the application's end or the peer's). Panics (with the log) on any error or after
    /// [`BOUND`].
    pub fn assert_echoes(&self, c: &mut TcpStream, s: &mut TcpStream, n: usize, what: &str) {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        let (mut sent, mut back) = (0, Vec::with_capacity(n));
        let mut pending = Vec::new();
        let mut buf = vec![0u8; 16384];
        let deadline = Instant::now() + BOUND;
        while back.len() < n {
            assert!(
                Instant::now() < deadline,
                "{what}: echoed {} of {n} bytes within {BOUND:?}; log:\n{}",
                back.len(),
                self.log()
            );
            let mut moved = false;
            if sent < n {
                if let Some(k) = step(c.write(&data[sent..(sent + 8192).min(n)]), what) {
                    sent += k;
                    moved = true;
                }
            }
            if pending.is_empty() {
                if let Some(k) = step(s.read(&mut buf), what) {
                    pending.extend_from_slice(&buf[..k]);
                    moved = true;
                }
            }
            if !pending.is_empty() {
                if let Some(k) = step(s.write(&pending), what) {
                    pending.drain(..k);
                    moved = true;
                }
            }
            if let Some(k) = step(c.read(&mut buf), what) {
                back.extend_from_slice(&buf[..k]);
                moved = true;
            }
            if !moved {
                thread::sleep(Duration::from_micros(200));
            }
        }
        assert!(back == data, "{what}: the echo differs from what was sent");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.host.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_file(&self.sock);
    }
}

/// Bytes moved by a nonblocking call: None when it would block; panics on an error.
fn step(r: io::Result<usize>, what: &str) -> Option<usize> {
    match r {
        Ok(0) => panic!("{what}: end of stream during the echo"),
        Ok(k) => Some(k),
        Err(e) if e.kind() == ErrorKind::WouldBlock => None,
        Err(e) => panic!("{what}: {e} during the echo"),
    }
}

/// Waits up to [`BOUND`] for `read` on nonblocking `s` to fail, and returns the error kind (end
/// of stream is `UnexpectedEof`).
pub fn read_error(s: &mut impl Read, what: &str) -> ErrorKind {
    let mut buf = [0u8; 4096];
    within(
        || format!("{what}: reads still succeed"),
        || match s.read(&mut buf) {
            Ok(0) => Some(ErrorKind::UnexpectedEof),
            Ok(_) => None,
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => Some(e.kind()),
        },
    )
}

/// Calls `f` every millisecond until it returns something, for at most [`BOUND`]; then panics
/// with `failure()` and the bound.
pub fn within<T>(failure: impl Fn() -> String, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{} (waited {BOUND:?})",
            failure()
        );
        thread::sleep(Duration::from_millis(1));
    }
}
