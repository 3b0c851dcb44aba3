//! The daemon with two engines (`cores = 2`), without root: each engine on its own queue of a
//! `mem` wire whose frames land on a queue drawn at random per flow (so the handoff rings
//! carry the flows that land on the engine that does not own them). An application in service
//! mode reaches both engines: its listener exists on each, its connections are on the engine
//! their hash picks, its active opens go to either, and when it leaves both engines drop its
//! sockets, and when it breaks the protocol on one engine's ring every engine ends it. A
//! forked child takes over its parent's connections and listener on both engines, and a
//! connection on either engine is lent to another application. The
//! same end to end over a multi-queue TAP, as root, in
//! `crates/cli/tests/service_engines.rs`.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::thread;
use std::time::{Duration, Instant};

use appif::ctl;
use appif::region::Region;
use appif::seg::{AppSegment, CmdProducer, Desc};
use common::*;
use corestack::{TcpListener, TcpStream};
use nic::rss::Steering;
use testkit::rogue;

/// Connections of the server test.
const CONNS: usize = 64;
/// Bytes each connection echoes.
const BYTES: usize = 4096;

/// The bytes connection `k` sends.
fn pattern(k: usize) -> Vec<u8> {
    (0..BYTES).map(|i| ((i * 31 + k * 7) % 251) as u8).collect()
}

/// The engine of two that owns the flow between `a` and `b` (the daemon's hash).
fn owner(a: SocketAddr, b: SocketAddr) -> usize {
    owner_of(2, a, b)
}

/// The engine of `engines` that owns the flow between `a` and `b` (the daemon's hash).
fn owner_of(engines: usize, a: SocketAddr, b: SocketAddr) -> usize {
    match (a, b) {
        (SocketAddr::V4(a), SocketAddr::V4(b)) => {
            Steering::new(engines).owner_v4(*a.ip(), *b.ip(), a.port(), b.port())
        }
        _ => panic!("IPv4 expected"),
    }
}

/// `n` connections from the peer to `port`, accepted by the application behind `l` (`what`
/// and the index name each in messages), each seen by the application from the peer's
/// address: the peer's ends, the application's, and how many of them each of `ENGINES`
/// engines owns (the daemon's hash).
fn connections_on<const ENGINES: usize>(
    d: &Daemon,
    l: &mut TcpListener,
    port: u16,
    n: usize,
    what: &str,
) -> (Vec<TcpStream>, Vec<TcpStream>, [usize; ENGINES]) {
    let (mut peers, mut served) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut owners = [0usize; ENGINES];
    for k in 0..n {
        let (c, s, seen) = d.connect_accept(l, addr(DAEMON_IP, port), &format!("{what} {k}"));
        assert_eq!(
            seen,
            c.local_addr().unwrap(),
            "{what} {k}: the peer's address"
        );
        owners[owner_of(ENGINES, s.local_addr().unwrap(), seen)] += 1;
        peers.push(c);
        served.push(s);
    }
    (peers, served, owners)
}

/// Moves every connection's bytes (peer writes, app echoes, peer reads) until each peer got
/// its pattern back, within [`BOUND`] × 4.
fn echo_all(d: &Daemon, peers: &mut [TcpStream], served: &mut [TcpStream]) {
    let deadline = Instant::now() + BOUND * 4;
    let mut sent = vec![0usize; peers.len()];
    let mut back: Vec<Vec<u8>> = vec![Vec::new(); peers.len()];
    let mut pending: Vec<Vec<u8>> = vec![Vec::new(); served.len()];
    let mut buf = vec![0u8; 16384];
    let nb = |r: std::io::Result<usize>| match r {
        Ok(0) => panic!("end of stream during the echo; log:\n{}", d.log()),
        Ok(k) => k,
        Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
        Err(e) => panic!("{e} during the echo; log:\n{}", d.log()),
    };
    while back.iter().any(|b| b.len() < BYTES) {
        assert!(
            Instant::now() < deadline,
            "echoed {} of {} bytes; log:\n{}",
            back.iter().map(Vec::len).sum::<usize>(),
            BYTES * peers.len(),
            d.log()
        );
        let mut moved = 0;
        for (k, c) in peers.iter_mut().enumerate() {
            let data = pattern(k);
            if sent[k] < BYTES {
                let n = nb(c.write(&data[sent[k]..]));
                sent[k] += n;
                moved += n;
            }
            if back[k].len() < BYTES {
                let n = nb(c.read(&mut buf));
                back[k].extend_from_slice(&buf[..n]);
                moved += n;
            }
        }
        for (s, p) in served.iter_mut().zip(pending.iter_mut()) {
            if p.is_empty() {
                let n = nb(s.read(&mut buf));
                p.extend_from_slice(&buf[..n]);
                moved += n;
            }
            if !p.is_empty() {
                let n = nb(s.write(p));
                p.drain(..n);
                moved += n;
            }
        }
        if moved == 0 {
            thread::sleep(Duration::from_micros(200));
        }
    }
    for (k, b) in back.iter().enumerate() {
        assert!(*b == pattern(k), "connection {k}: the echo differs");
    }
}

#[test]
fn an_application_serves_connections_on_both_engines() {
    let d = Daemon::with("engines-serve", |c| c.cores = 2);
    let app = d.app();
    assert_eq!(
        app.engines(),
        2,
        "the application sees the daemon's two engines"
    );
    let mut l = TcpListener::bind(&app, any(7100)).expect("the app's listen");
    l.set_nonblocking(true).unwrap();
    let (mut peers, mut served, owners) =
        connections_on::<2>(&d, &mut l, 7100, CONNS, "connection");
    assert!(
        owners[0] > 0 && owners[1] > 0,
        "the flows' hash gives both engines connections: {owners:?}"
    );
    echo_all(&d, &mut peers, &mut served);
    // Closing the application's side ends each peer's stream (FIN from the owner engine).
    drop(served);
    for (k, c) in peers.iter_mut().enumerate() {
        assert_eq!(
            read_error(c, &format!("connection {k} after the app closed")),
            ErrorKind::UnexpectedEof
        );
    }
    // The listener still serves after that, and closes on both engines.
    d.assert_echo(&mut l, 7100, 4096, "the listener after 64 connections");
    drop(l);
    let refused = (0..8).all(
        |k| match TcpStream::connect(&d.peer, addr(DAEMON_IP, 7100)) {
            Err(e) => e.kind() == ErrorKind::ConnectionRefused,
            Ok(mut c) => {
                c.set_nonblocking(true).unwrap();
                let e = read_error(&mut c, &format!("connect {k} after the listener closed"));
                e == ErrorKind::ConnectionRefused || e == ErrorKind::ConnectionReset
            }
        },
    );
    assert!(
        refused,
        "every engine refuses the port once the listener closed"
    );
}

/// More engines than one welcome message carried doorbells for before (16 descriptors: the
/// memfd and 15): an application of a 20-engine daemon gets a doorbell and a command ring per
/// engine, and its listener serves connections owned by most of them, byte-exact.
#[test]
fn an_application_of_a_twenty_engine_daemon_serves_on_its_engines() {
    const ENGINES: usize = 20;
    let d = Daemon::with("engines-twenty", |c| c.cores = ENGINES as u32);
    let app = d.app();
    assert_eq!(app.engines(), ENGINES, "the application sees every engine");
    let mut l = TcpListener::bind(&app, any(7300)).expect("the app's listen");
    l.set_nonblocking(true).unwrap();
    let (mut peers, mut served, owners) =
        connections_on::<ENGINES>(&d, &mut l, 7300, CONNS, "connection");
    // 64 flows over 20 engines by hash: about 19 engines get one (fewer than 12 is a
    // one-in-a-million draw).
    let busy = owners.iter().filter(|&&n| n > 0).count();
    assert!(busy >= 12, "connections on {busy} engines: {owners:?}");
    echo_all(&d, &mut peers, &mut served);
}

#[test]
fn active_opens_of_threads_go_to_each_engine_in_turn() {
    let d = Daemon::with("engines-connect", |c| c.cores = 2);
    let mut pl = d.peer_listener(7200);
    let app = d.app();
    // Each thread's first socket goes to the next engine in turn, which picks a local port
    // that hashes to itself.
    let mut opened: Vec<TcpStream> = (0..4)
        .map(|_| {
            let app = app.clone();
            thread::spawn(move || TcpStream::connect(&app, addr(PEER_IP, 7200)).expect("connect"))
                .join()
                .expect("the connecting thread")
        })
        .collect();
    let mut owners = [0usize; 2];
    for (k, c) in opened.iter_mut().enumerate() {
        let mut s = accept_within(&d, &mut pl, k);
        let local = within(
            || format!("connection {k} never opened"),
            || c.local_addr().ok().filter(|a| a.port() != 0),
        );
        assert_eq!(
            s.peer_addr().unwrap(),
            local,
            "connection {k}: the peer's view"
        );
        owners[owner(local, addr(PEER_IP, 7200).into())] += 1;
        s.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b)
            .unwrap_or_else(|e| panic!("connection {k}: {e}"));
        assert_eq!(&b, b"hello");
        c.write_all(b"olleh").unwrap();
        s.set_nonblocking(false).unwrap();
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"olleh");
    }
    assert_eq!(owners, [2, 2], "threads in turn open on engines 0 and 1");
}

/// The peer's next connection on `pl` (nonblocking), within [`BOUND`].
fn accept_within(d: &Daemon, pl: &mut TcpListener, k: usize) -> TcpStream {
    within(
        || format!("the peer accepting connection {k}; log:\n{}", d.log()),
        || match pl.accept() {
            Ok((s, _)) => Some(s),
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => panic!("accept: {e}"),
        },
    )
}

/// An application written against the protocol alone: its welcome brings the segment and a
/// doorbell per engine; it opens connections on the engine it chooses.
struct RawApp {
    control: std::os::unix::net::UnixStream,
    seg: AppSegment,
    mem: std::fs::File,
    assoc: u32,
    doorbells: Vec<std::os::fd::OwnedFd>,
}

impl RawApp {
    fn join(d: &Daemon, name: &str) -> RawApp {
        let h = ctl::Hello {
            nslots: 0,
            ring_bytes: 0,
            name: name.into(),
            parent: 0,
            ticket: 0,
        };
        let (control, welcome, mut fds) = rogue::hello(&d.sock, &h.encode());
        assert_eq!(welcome.status, 0, "welcomed");
        assert_eq!(fds.len(), 3, "the memfd and two doorbells");
        let doorbells = fds.split_off(1);
        let memfd = fds.pop().unwrap();
        let len = welcome.seg_len as usize;
        let region = std::sync::Arc::new(Region::map_fd(memfd.as_fd(), len).expect("mapping"));
        let (seg, assoc) = AppSegment::open(region).expect("the segment");
        assert_eq!(seg.layout().engines, 2);
        RawApp {
            control,
            seg,
            mem: std::fs::File::from(memfd),
            assoc,
            doorbells,
        }
    }

    /// Opens a connection to `remote` on engine `e`'s command ring; its slot.
    fn connect(&self, e: u32, remote: SocketAddr) -> u32 {
        let slot = self.seg.claim_app_slot(e, |_| false).expect("a free slot");
        self.seg.reset_slot(slot);
        let mut p = CmdProducer::lane(self.seg.clone(), e).expect("engine's ring");
        assert!(p.push(&Desc::Connect {
            slot,
            remote,
            local_port: 0,
            nodelay: false,
        }));
        self.ring(e, p);
        slot
    }

    /// Puts `d` on engine `e`'s command ring.
    fn push(&self, e: u32, d: Desc) {
        let mut p = CmdProducer::lane(self.seg.clone(), e).expect("engine's ring");
        assert!(p.push(&d));
        self.ring(e, p);
    }

    /// Rings engine `e`'s doorbell if it naps.
    fn ring(&self, e: u32, p: CmdProducer) {
        if p.engine_needs_doorbell() {
            ctl::eventfd_signal(self.doorbells[e as usize].as_fd());
        }
    }
}

/// Lines of the daemon's log about association `assoc` that contain every one of `needles`.
fn lines_about(d: &Daemon, assoc: u32, needles: &[&str]) -> usize {
    let me = format!("assoc={assoc} ");
    d.log()
        .lines()
        .filter(|l| l.contains(&me) && needles.iter().all(|n| l.contains(n)))
        .count()
}

#[test]
fn an_application_leaving_loses_its_connections_on_every_engine() {
    let d = Daemon::with("engines-leave", |c| c.cores = 2);
    let mut pl = d.peer_listener(7300);
    let app = RawApp::join(&d, "leaver");
    for e in 0..2 {
        app.connect(e, addr(PEER_IP, 7300).into());
    }
    let mut accepted: Vec<TcpStream> = (0..2).map(|k| accept_within(&d, &mut pl, k)).collect();
    let owners: Vec<usize> = accepted
        .iter()
        .map(|s| owner(s.peer_addr().unwrap(), s.local_addr().unwrap()))
        .collect();
    assert!(
        owners.contains(&0) && owners.contains(&1),
        "one connection on each engine: {owners:?}"
    );
    // Gone without a word: only the end of its control connection.
    let assoc = app.assoc;
    drop(app);
    within(
        || {
            format!(
                "both engines reset the application's connection; log:\n{}",
                d.log()
            )
        },
        || (lines_about(&d, assoc, &["application left", "sockets=1"]) == 2).then_some(()),
    );
    for (k, s) in accepted.iter_mut().enumerate() {
        s.set_nonblocking(true).unwrap();
        assert_eq!(
            read_error(s, &format!("connection {k} after the application left")),
            ErrorKind::ConnectionReset
        );
    }
}

#[test]
fn a_violation_on_one_engines_ring_ends_the_association_on_every_engine() {
    use std::os::unix::fs::FileExt;
    let d = Daemon::with("engines-violate", |c| c.cores = 2);
    let mut pl = d.peer_listener(7400);
    let app = RawApp::join(&d, "breaker");
    app.connect(0, addr(PEER_IP, 7400).into());
    let mut s = accept_within(&d, &mut pl, 0);
    assert_eq!(owner(s.peer_addr().unwrap(), s.local_addr().unwrap()), 0);
    // Engine 1's ring: its head a long way past anything written.
    let lane = app.seg.layout().lane(1).expect("engine 1's ring");
    app.mem
        .write_all_at(&(1u64 << 40).to_le_bytes(), lane.head as u64)
        .unwrap();
    ctl::eventfd_signal(app.doorbells[1].as_fd());
    d.expect_line(
        &[
            "application disconnected",
            "command ring head",
            &format!("assoc={} ", app.assoc),
        ],
        "engine 1 finding the bad index",
    );
    d.expect_line(
        &[
            "application disconnected",
            "on another engine",
            &format!("assoc={} ", app.assoc),
        ],
        "engine 0 ending the association",
    );
    // Engine 0's connection was reset, and the application told.
    s.set_nonblocking(true).unwrap();
    assert_eq!(
        read_error(&mut s, "the breaker's connection"),
        ErrorKind::ConnectionReset
    );
    assert_ne!(
        app.seg.closed().load(std::sync::atomic::Ordering::Acquire),
        0
    );
    drop(app.control);
}

/// Connections the peer opens to `port` until the application behind `l` accepted one on each
/// engine (at most 64 tries): the peer's end and the application's, in engine order.
fn one_per_engine(d: &Daemon, l: &mut TcpListener, port: u16) -> Vec<(TcpStream, TcpStream)> {
    let mut got: Vec<Option<(TcpStream, TcpStream)>> = vec![None, None];
    for k in 0..64 {
        if got.iter().all(Option::is_some) {
            break;
        }
        let (c, s, seen) = d.connect_accept(l, addr(DAEMON_IP, port), &format!("connection {k}"));
        let e = owner(s.local_addr().unwrap(), seen);
        if got[e].is_none() {
            got[e] = Some((c, s));
        }
    }
    got.into_iter()
        .map(|p| p.expect("64 connections all on one engine"))
        .collect()
}

#[test]
fn a_forked_child_takes_over_connections_and_the_listener_on_both_engines_after_its_parent_left() {
    let d = Daemon::with("engines-fork", |c| c.cores = 2);
    let parent = d.app();
    let mut l = TcpListener::bind(&parent, any(7500)).expect("the parent's listen");
    let pairs = one_per_engine(&d, &mut l, 7500);

    // The fork, played in this process as in tests/fork.rs.
    let ticket = parent.forking().expect("service mode");
    parent.forked(ticket, std::process::id() as i32);
    let kid = corestack::Stack::builder()
        .service(&d.sock)
        .child_of(parent.association().expect("service mode"))
        .fork_ticket(ticket)
        .start()
        .expect("the child of the fork joins");
    let (mut peers, mut served) = (Vec::new(), Vec::new());
    let mut parents = Vec::new();
    for (e, (c, s)) in pairs.into_iter().enumerate() {
        let mut theirs = TcpStream::adopt(&kid, &s)
            .unwrap_or_else(|err| panic!("the child takes engine {e}'s connection: {err}"));
        theirs.set_nonblocking(true).unwrap();
        peers.push(c);
        served.push(theirs);
        parents.push(s);
    }
    let mut kl = TcpListener::join(&kid, &l, 64).expect("the child joins the listener");

    // The parent closes its copies and leaves: what the child took over lives on, on both
    // engines.
    let assoc = parent.association().expect("service mode");
    drop(parents);
    drop(l);
    drop(parent);
    within(
        || format!("both engines saw the parent leave; log:\n{}", d.log()),
        || (lines_about(&d, assoc, &["application left"]) == 2).then_some(()),
    );
    echo_all(&d, &mut peers, &mut served);

    // New connections land on both engines, and the child accepts them all.
    let (mut peers, mut served, owners) =
        connections_on::<2>(&d, &mut kl, 7500, 16, "the child's connection");
    assert!(
        owners[0] > 0 && owners[1] > 0,
        "the child accepted on both engines: {owners:?}"
    );
    echo_all(&d, &mut peers, &mut served);
}

#[test]
fn a_connection_on_either_engine_is_lent_to_another_application() {
    let d = Daemon::with("engines-lend", |c| c.cores = 2);
    let (primary, worker) = (d.app(), d.app());
    let mut l = TcpListener::bind(&primary, any(7600)).expect("the primary's listen");
    let (mut peers, mut served) = (Vec::new(), Vec::new());
    for (e, (c, lent)) in one_per_engine(&d, &mut l, 7600).into_iter().enumerate() {
        // As the shim does around sendmsg(SCM_RIGHTS) and recvmsg (see tests/fork.rs): an
        // eventfd this process holds stands for the fd passed and received.
        let passed = ctl::eventfd().expect("an eventfd");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&passed);
        lent.lend(ctl::fd_key("self", fd).expect("an eventfd-id"));
        let mut mine = TcpStream::borrow(&worker, fd)
            .unwrap_or_else(|err| panic!("claiming engine {e}'s connection: {err}"))
            .unwrap_or_else(|| panic!("engine {e}'s connection was lent"));
        mine.set_nonblocking(true).unwrap();
        drop(lent);
        peers.push(c);
        served.push(mine);
    }
    echo_all(&d, &mut peers, &mut served);
}

/// A connection lent on engine 1, whose Lend engine 1 takes 100 ms after engine 0's (a busy
/// engine): the borrow waits in engine 0's loop, which serves meanwhile (an echo on another
/// connection completes), and is answered once engine 1 has it. Before, engine 0 stalled for
/// up to 20 ms and then answered ENOENT.
#[test]
fn a_borrow_waits_for_the_engine_holding_the_lend_while_engine_0_serves() {
    let d = Daemon::with("engines-late-lend", |c| c.cores = 2);
    let mut pl = d.peer_listener(7700);
    let lender = RawApp::join(&d, "lender");
    let slot = lender.connect(1, addr(PEER_IP, 7700).into());
    let mut theirs = accept_within(&d, &mut pl, 0);
    assert_eq!(
        owner(theirs.peer_addr().unwrap(), theirs.local_addr().unwrap()),
        1,
        "the lent connection is engine 1's"
    );
    let worker = d.app();
    let passed = ctl::eventfd().expect("an eventfd");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&passed);
    let key = ctl::fd_key("self", fd).expect("an eventfd-id");
    lender.push(0, Desc::Lend { slot, key });
    let borrow = {
        let worker = worker.clone();
        thread::spawn(move || TcpStream::borrow(&worker, fd))
    };
    // Engine 0 serves while the borrow waits for engine 1.
    let (_app, mut l) = d.app_listening(7701);
    d.assert_echo(&mut l, 7701, 4096, "an echo while the borrow waits");
    thread::sleep(Duration::from_millis(100));
    assert!(
        !borrow.is_finished(),
        "the borrow waits for engine 1's Lend"
    );
    lender.push(1, Desc::Lend { slot, key });
    let mut mine = borrow
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("the borrow: {e}; log:\n{}", d.log()))
        .unwrap_or_else(|| panic!("the connection was lent; log:\n{}", d.log()));
    mine.write_all(b"lent").unwrap();
    let mut b = [0u8; 4];
    theirs.set_nonblocking(false).unwrap();
    theirs.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"lent", "the borrower writes on the lent connection");
    drop(passed);
}
