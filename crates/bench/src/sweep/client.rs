//! conn-sweep's hidden commands: `bench conn-client` (the kernel client) and `bench
//! conn-echo` (the Linux server), and what they read of the machine.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;

use super::*;
use crate::harness::tuned;

/// `bench conn-client` (hidden; run by conn-sweep): N connections on the kernel stack, one
/// message in flight on each, waiting in epoll; prints one JSON object.
#[derive(Args, Debug)]
pub struct ConnClient {
    /// The echo server.
    #[arg(long)]
    target: SocketAddrV4,
    /// Connections to open (one after the other, for at most 30 s).
    #[arg(long)]
    conns: u32,
    /// Message size, bytes (at most 4096).
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Measured seconds (after a 0.3 s warm-up).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Source addresses to connect from, in turn, each with ports from 2000 up, at most
    /// 60 000 connections an address (default: the kernel's choice of address and port).
    #[arg(long, value_delimiter = ',')]
    sources: Vec<Ipv4Addr>,
    /// The server's process, whose memory is reported before and with the connections open.
    #[arg(long)]
    server_pid: Option<u32>,
}

/// A connection of the client: when its message left, and how much of the echo is back.
struct Slot {
    stream: mio::net::TcpStream,
    t0: Instant,
    got: usize,
}

/// How long the client may take to open its connections.
const CONNECT_PHASE: Duration = Duration::from_secs(60);

/// The first client port conn-client binds with `--sources` (ports below the ephemeral
/// range, so that nothing else in the client's namespace holds them).
const FIRST_PORT: u16 = 2_000;

/// Resident memory of process `pid` and its children, KiB (VmRSS of /proc/PID/status:
/// the Linux server may be a group of processes).
fn rss_kib(pid: u32) -> Option<u64> {
    let own = |pid: u32| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let children: u64 = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    // Fields after the command's closing parenthesis: state, ppid, ...
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .filter_map(own)
        .sum();
    Some(own(pid)? + children)
}

/// How long [`drain`] waits for the echoes still in flight.
const DRAIN: Duration = Duration::from_secs(5);
/// How long [`settled_rss_kib`] watches an idle server's memory at most.
const SETTLE_MAX: Duration = Duration::from_secs(20);

/// Reads back the echo each connection still has in flight (for at most [`DRAIN`]), so
/// that neither side holds unread bytes: the connections are idle after it.
fn drain(
    poll: &mut mio::Poll,
    events: &mut mio::Events,
    slots: &mut [Slot],
    buf: &mut [u8],
    size: usize,
) -> Result<()> {
    let mut waiting = slots.iter().filter(|s| s.got < size).count();
    let started = Instant::now();
    while waiting > 0 && started.elapsed() < DRAIN {
        match poll.poll(events, Some(Duration::from_millis(50))) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => r.context("epoll_wait")?,
        }
        for ev in events.iter() {
            let Some(s) = slots.get_mut(ev.token().0) else {
                continue;
            };
            while s.got < size {
                match s.stream.read(&mut buf[..size - s.got]) {
                    Ok(0) => bail!("the server closed connection {}", ev.token().0),
                    Ok(n) => {
                        s.got += n;
                        if s.got == size {
                            waiting -= 1;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => bail!("reading: {e}"),
                }
            }
        }
    }
    Ok(())
}

/// Resident memory of idle server `pid` and its children, KiB, once it stops falling:
/// read every 250 ms, until it has fallen by less than 0.5 % over the last 1.5 s (and at
/// least 2 s passed), at most [`SETTLE_MAX`]. A server that gives back what idle
/// connections do not use does so within that time; one that does not reads the same.
fn settled_rss_kib(pid: u32) -> Option<u64> {
    let started = Instant::now();
    let mut readings = vec![rss_kib(pid)?];
    while started.elapsed() < SETTLE_MAX {
        std::thread::sleep(Duration::from_millis(250));
        let now = rss_kib(pid)?;
        readings.push(now);
        let back = readings.len().saturating_sub(7);
        let fell = readings[back].saturating_sub(now);
        if started.elapsed() >= Duration::from_secs(2) && fell * 200 < readings[back] {
            break;
        }
    }
    readings.last().copied()
}

/// The kernel's memory that sockets take, KiB: slab (socket, file, dentry, epoll
/// objects) plus TCP buffer pages (/proc/net/sockstat `mem`). Machine-wide.
fn kernel_kib() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let slab: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("Slab:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let tcp = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let words: Vec<&str> = tcp.split_whitespace().collect();
    let pages: u64 = words
        .iter()
        .position(|w| *w == "mem")
        .and_then(|i| words.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some(slab + pages * 4)
}

impl ConnClient {
    /// The command line (after this program's name) of a conn-client with `conns`
    /// connections to `target`, messages of `size` bytes, measuring `secs` seconds; callers
    /// may append `--sources` and `--server-pid`.
    pub(crate) fn args<'a>(
        target: &'a str,
        conns: &'a str,
        size: &'a str,
        secs: &'a str,
    ) -> Vec<&'a str> {
        vec![
            "bench",
            "conn-client",
            "--target",
            target,
            "--conns",
            conns,
            "--size",
            size,
            "--seconds",
            secs,
        ]
    }

    /// Opens the connections, ping-pongs on all of them, prints one JSON object: `conns`,
    /// `connected`, `round_trips`, `round_trips_per_s`, `p50_us`, `p99_us`, `note` (why fewer
    /// connections opened). Errors: none opened, the server closed one, an echo differed.
    pub fn run(self) -> Result<()> {
        let size = self.size.clamp(1, 4096) as usize;
        let msg: Vec<u8> = (0..size).map(|i| (i as u8).wrapping_mul(7)).collect();
        let mut poll = mio::Poll::new().context("creating epoll")?;
        let mut slots: Vec<Slot> = Vec::new();
        let mut note = None;
        // A descriptor per connection.
        raise_nofile(u64::from(self.conns) + 64);
        let rss_before = self.server_pid.and_then(rss_kib);
        let kernel_before = kernel_kib();
        let started = Instant::now();
        for i in 0..self.conns {
            if started.elapsed() > CONNECT_PHASE {
                note = Some(format!(
                    "only {i} of {} connections opened within {} s",
                    self.conns,
                    CONNECT_PHASE.as_secs()
                ));
                break;
            }
            // Connection i from address i % n, port FIRST_PORT + i / n: distinct 4-tuples.
            let source = (!self.sources.is_empty()).then(|| {
                let n = self.sources.len();
                let port = FIRST_PORT as usize + i as usize / n;
                SocketAddrV4::new(self.sources[i as usize % n], port as u16)
            });
            let s = match connect_from(source, self.target, Duration::from_secs(3)) {
                Ok(s) => s,
                Err(e) => {
                    let why = match e.raw_os_error() {
                        Some(24) => "out of file descriptors (ulimit -n)".to_string(),
                        _ => e.to_string(),
                    };
                    note = Some(format!(
                        "connection {} of {} failed: {why}",
                        i + 1,
                        self.conns
                    ));
                    break;
                }
            };
            s.set_nodelay(true)?;
            s.set_nonblocking(true)?;
            let mut stream = mio::net::TcpStream::from_std(s);
            poll.registry()
                .register(&mut stream, mio::Token(i as usize), mio::Interest::READABLE)
                .context("epoll_ctl")?;
            slots.push(Slot {
                stream,
                t0: Instant::now(),
                got: 0,
            });
        }
        if slots.is_empty() {
            bail!("{}", note.unwrap_or_else(|| "no connection opened".into()));
        }
        let mut hist =
            Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).context("histogram")?;
        for s in slots.iter_mut() {
            send(&mut s.stream, &msg)?;
            s.t0 = Instant::now();
        }
        let mut events = mio::Events::with_capacity(1024);
        let mut buf = vec![0u8; size];
        let warm_end = Instant::now() + Duration::from_millis(300);
        let end = warm_end + Duration::from_secs_f64(self.seconds.clamp(0.1, 60.0));
        let mut measured_from = None;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if now >= warm_end && measured_from.is_none() {
                measured_from = Some(now);
            }
            poll.poll(&mut events, Some(Duration::from_millis(50)))
                .or_else(|e| {
                    if e.kind() == io::ErrorKind::Interrupted {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })?;
            for ev in events.iter() {
                let Some(s) = slots.get_mut(ev.token().0) else {
                    continue;
                };
                loop {
                    match s.stream.read(&mut buf[..size - s.got]) {
                        Ok(0) => bail!("the server closed connection {}", ev.token().0),
                        Ok(n) => {
                            if buf[..n] != msg[s.got..s.got + n] {
                                bail!("the echo differs from what was sent");
                            }
                            s.got += n;
                            if s.got == size {
                                let done = Instant::now();
                                if measured_from.is_some() {
                                    let ns =
                                        u64::try_from((done - s.t0).as_nanos()).unwrap_or(u64::MAX);
                                    hist.saturating_record(ns.max(1));
                                }
                                s.got = 0;
                                send(&mut s.stream, &msg)?;
                                s.t0 = Instant::now();
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => bail!("reading: {e}"),
                    }
                }
            }
        }
        let elapsed = measured_from.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
        // With every connection still open.
        let rss = self.server_pid.and_then(rss_kib);
        let kernel = kernel_kib();
        // A corestack server's counters as the measurement ends: what moves after it (the
        // last echoes acknowledged only by delayed ACKs) is not the measurement's.
        let counters: Option<HashMap<&str, u64>> = self
            .server_pid
            .and_then(engine_counters)
            .map(|c| c.into_iter().filter(|(k, _)| WATCHED.contains(k)).collect());
        // Then idle: every echo still in flight read back, nothing sent, until the
        // server's memory stops falling.
        drain(&mut poll, &mut events, &mut slots, &mut buf, size)?;
        let rss_idle = self.server_pid.and_then(settled_rss_kib);
        let kernel_idle = kernel_kib();
        let hist_pairs: Vec<[u64; 2]> = hist
            .iter_recorded()
            .map(|v| [v.value_iterated_to(), v.count_at_value()])
            .collect();
        let out = serde_json::json!({
            "hist": hist_pairs,
            "server_rss_before_kib": rss_before,
            "server_rss_kib": rss,
            "kernel_before_kib": kernel_before,
            "kernel_kib": kernel,
            "server_rss_idle_kib": rss_idle,
            "kernel_idle_kib": kernel_idle,
            "counters_measured": counters,
            "conns": self.conns,
            "connected": slots.len(),
            "round_trips": hist.len(),
            "round_trips_per_s": if elapsed > 0.0 { hist.len() as f64 / elapsed } else { 0.0 },
            "p50_us": us(0.5),
            "p99_us": us(0.99),
            "client": "blocks (epoll)",
            "note": note,
        });
        println!("{out}");
        Ok(())
    }
}

/// A blocking connect to `target` from `source` (an address and a port of the client's
/// own choosing: each connection of a run has its own), within `timeout`. The port may
/// still be in TIME-WAIT from an earlier run: SO_REUSEADDR and the namespace's
/// tcp_tw_reuse let the connection take it.
fn connect_from(
    source: Option<SocketAddrV4>,
    target: SocketAddrV4,
    timeout: Duration,
) -> io::Result<std::net::TcpStream> {
    let Some(from) = source else {
        return std::net::TcpStream::connect_timeout(&SocketAddr::V4(target), timeout);
    };
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&SocketAddr::V4(from).into())?;
    s.connect_timeout(&SocketAddr::V4(target).into(), timeout)?;
    Ok(s.into())
}

/// Writes `msg` whole on a nonblocking socket with room for it (one small message in flight
/// per connection), retrying briefly when the socket buffer is full.
fn send(s: &mut mio::net::TcpStream, msg: &[u8]) -> Result<()> {
    let mut off = 0;
    let deadline = Instant::now() + Duration::from_secs(2);
    while off < msg.len() {
        match s.write(&msg[off..]) {
            Ok(n) => off += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                if Instant::now() > deadline {
                    bail!("sending: the socket stayed full for 2 s");
                }
                std::thread::yield_now();
            }
            Err(e) => bail!("sending: {e}"),
        }
    }
    Ok(())
}

/// `bench conn-echo` (hidden; conn-sweep's Linux server): TCP echo on the kernel stack, one
/// thread, epoll polled without sleeping, any number of connections; until SIGTERM/SIGINT.
#[derive(Args, Debug)]
pub struct ConnEcho {
    /// The address to listen on.
    #[arg(long)]
    ip: Ipv4Addr,
    /// The TCP port.
    #[arg(long)]
    port: u16,
    /// Processes serving the port together (SO_REUSEPORT), each with its own descriptor
    /// limit: how the Linux server reaches more connections than one process may hold.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    procs: u32,
    /// Busy polling, µs (conn-sweep's Linux tuned): SO_BUSY_POLL on every socket and the
    /// epoll set's busy poll (EPIOCSPARAMS, Linux 6.9+, left out where the kernel lacks it);
    /// 0: off.
    #[arg(long, default_value_t = 0)]
    busy_poll_us: u32,
}

impl ConnEcho {
    /// Serves until SIGTERM/SIGINT. Errors: the address cannot be bound, epoll fails.
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        let addr = SocketAddr::V4(SocketAddrV4::new(self.ip, self.port));
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        sock.set_reuse_address(true)?;
        sock.set_reuse_port(true)?;
        sock.bind(&addr.into())
            .with_context(|| format!("binding {addr}"))?;
        sock.listen(4096)?;
        let busy = self.busy_poll_us;
        if busy > 0 {
            // Accepted sockets inherit it; each is set again below all the same.
            tuned::set_busy_poll(std::os::fd::AsFd::as_fd(&sock), busy).context("SO_BUSY_POLL")?;
        }
        raise_nofile(1 << 20);
        // The other processes of the group: this program again, each dying with this one.
        let mut peers = Vec::new();
        for _ in 1..self.procs {
            let exe = crate::harness::this_program()?;
            let mut cmd = std::process::Command::new(exe);
            cmd.args(["bench", "conn-echo", "--ip", &self.ip.to_string()])
                .args(["--port", &self.port.to_string()])
                .args(["--busy-poll-us", &busy.to_string()])
                .stdout(std::process::Stdio::null());
            // Each asks for SIGKILL when its parent dies (below); dropping the guards at
            // the end kills them too.
            peers.push(netns::ChildGuard::spawn(&mut cmd)?);
        }
        // Dies with whoever started it (the benchmark, or the group's first process).
        let _ =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
        sock.set_nonblocking(true)?;
        let mut listener = mio::net::TcpListener::from_std(sock.into());
        let mut poll = mio::Poll::new()?;
        const LISTENER: mio::Token = mio::Token(usize::MAX);
        poll.registry()
            .register(&mut listener, LISTENER, mio::Interest::READABLE)?;
        if busy > 0 {
            use std::os::fd::AsRawFd;
            let epoll = tuned::epoll_busy_poll(poll.as_raw_fd(), busy);
            eprintln!(
                "conn-echo: SO_BUSY_POLL {busy} µs; epoll busy poll (EPIOCSPARAMS): {}",
                if epoll { "on" } else { "not in this kernel" }
            );
        }
        let mut napi_said = busy == 0;
        println!("listening on {addr} (tcp), kernel, epoll, spinning");
        io::stdout().flush()?;
        let mut conns: Vec<Option<(mio::net::TcpStream, Vec<u8>)>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut events = mio::Events::with_capacity(1024);
        let mut buf = vec![0u8; 64 << 10];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            match poll.poll(&mut events, Some(Duration::ZERO)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
            for ev in events.iter() {
                if ev.token() == LISTENER {
                    loop {
                        match listener.accept() {
                            Ok((mut s, _)) => {
                                let _ = s.set_nodelay(true);
                                if busy > 0 {
                                    let fd = std::os::fd::AsFd::as_fd(&s);
                                    let _ = tuned::set_busy_poll(fd, busy);
                                }
                                let i = free.pop().unwrap_or_else(|| {
                                    conns.push(None);
                                    conns.len() - 1
                                });
                                poll.registry().register(
                                    &mut s,
                                    mio::Token(i),
                                    mio::Interest::READABLE | mio::Interest::WRITABLE,
                                )?;
                                conns[i] = Some((s, Vec::new()));
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            // Out of descriptors and the like: try again on the next event.
                            Err(_) => break,
                        }
                    }
                    continue;
                }
                let i = ev.token().0;
                let Some(Some((s, pending))) = conns.get_mut(i) else {
                    continue;
                };
                let mut closed = false;
                if !napi_said {
                    // After the first packet: the NAPI instance it came through (0: none).
                    if let Ok(id) = tuned::incoming_napi_id(std::os::fd::AsFd::as_fd(&*s)) {
                        eprintln!(
                            "conn-echo: the first connection's NAPI id: {id}{}",
                            if id == 0 {
                                " (none: busy polling has nothing to poll)"
                            } else {
                                ""
                            }
                        );
                        napi_said = true;
                    }
                }
                loop {
                    // Echo what is pending first, then read more.
                    while !pending.is_empty() {
                        match s.write(pending) {
                            Ok(n) => {
                                pending.drain(..n);
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(_) => {
                                closed = true;
                                break;
                            }
                        }
                    }
                    if closed || !pending.is_empty() {
                        break;
                    }
                    match s.read(&mut buf) {
                        Ok(0) => {
                            closed = true;
                            break;
                        }
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            closed = true;
                            break;
                        }
                    }
                }
                if closed {
                    if let Some((mut s, _)) = conns[i].take() {
                        let _ = poll.registry().deregister(&mut s);
                    }
                    free.push(i);
                }
            }
        }
        drop(peers);
        Ok(())
    }
}

/// Raises this process's descriptor limit towards `want` (the soft limit up to the hard
/// one; the hard one too where the process may).
fn raise_nofile(want: u64) {
    if let Ok((soft, hard)) = rlimit::Resource::NOFILE.get() {
        if soft < want && rlimit::Resource::NOFILE.set(want, want.max(hard)).is_err() {
            let _ = rlimit::Resource::NOFILE.set(want.min(hard), hard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// This program's command line, as far as conn-client is concerned.
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        bench: Sub,
    }

    #[derive(clap::Subcommand)]
    enum Sub {
        #[command(subcommand)]
        Bench(crate::Bench),
    }

    #[test]
    fn conn_client_args_parse_back_into_the_options_they_name() {
        let mut args = vec!["corestack"];
        args.extend(ConnClient::args("10.0.0.2:7", "500", "64", "1.5"));
        args.extend(["--sources", "10.0.0.5,10.0.0.6", "--server-pid", "42"]);
        let Sub::Bench(crate::Bench::ConnClient(c)) = Cli::parse_from(args).bench else {
            panic!("not conn-client");
        };
        assert_eq!(c.target, "10.0.0.2:7".parse().unwrap());
        assert_eq!((c.conns, c.size, c.seconds), (500, 64, 1.5));
        assert_eq!(
            c.sources,
            [
                "10.0.0.5".parse::<Ipv4Addr>().unwrap(),
                "10.0.0.6".parse().unwrap()
            ]
        );
        assert_eq!(c.server_pid, Some(42));
    }
}
