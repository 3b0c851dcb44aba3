//! TCP and UDP over IPv6 between two engines on a `mem` wire (issue 25):
//! handshake and byte-exact transfers both ways under loss, RST for a
//! closed port, TIME-WAIT, SYN cookies, a dual-stack listener taking an
//! IPv4 client as ::ffff:a.b.c.d, an IPv4 and a v6-only listener on one
//! port, UDP echo and port unreachable.

mod common;

use appif::bytes;
use appif::command::{Command, Owner};
use appif::seg::Accepted;
use appif::socket::{SockState, StatusHandle, UdpHeader};
use appif::spsc;
use common::*;
use core::net::{Ipv6Addr, SocketAddr};
use engine::{EngineConfig, Ipv6Config};
use nic::impair::Impairments;

const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 2);
const PORT: u16 = 8080;

/// `cfg` with IPv6 on at `addr`/64.
fn v6(mut cfg: EngineConfig, addr: Ipv6Addr) -> EngineConfig {
    cfg.ipv6 = Some(Ipv6Config {
        global: Some((addr, 64)),
        ..Ipv6Config::default()
    });
    cfg
}

fn sa(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::new(ip.into(), port)
}

fn any6(port: u16) -> SocketAddr {
    sa(Ipv6Addr::UNSPECIFIED, port)
}

/// A wire where A connects to `to` and B listens on `listen`.
fn wire(
    imp: Impairments,
    seed: u64,
    cfg: EngineConfig,
    listen: (SocketAddr, bool),
    to: SocketAddr,
) -> Wire {
    let cfgs = (v6(cfg.clone(), A6), v6(cfg, B6));
    Wire::connect_to(imp, seed, 256, cfgs, listen, to, (0, 0), |_| {})
}

/// [`wire`] with no impairments and default configurations, B listening
/// dual-stack on `[::]:PORT`.
fn clean_wire(seed: u64, to: SocketAddr) -> Wire {
    let listen = (any6(PORT), false);
    wire(
        Impairments::none(),
        seed,
        EngineConfig::default(),
        listen,
        to,
    )
}

/// Runs `w` until `done` or `limit_ns` of virtual time.
fn run_until(w: &mut Wire, limit_ns: u64, mut done: impl FnMut(&mut Wire) -> bool) {
    let end = w.t + limit_ns;
    while w.t < end {
        let busy = w.poll();
        if done(w) {
            return;
        }
        w.advance(busy);
    }
}

/// Sends `total` bytes A → B and `total` bytes B → A at once, checking
/// every byte; returns the virtual time it took.
fn both_ways(w: &mut Wire, total: usize) -> u64 {
    let (mut a_sent, mut b_got, mut b_sent, mut a_got) = (0, 0, 0, 0);
    let start = w.t;
    let end = w.t + 120_000_000_000;
    while w.t < end && (b_got < total || a_got < total) {
        let busy = w.poll();
        let moved = w
            .stream_one_way(&mut a_sent, &mut b_got, total)
            .unwrap_or_else(|at| panic!("B read a wrong byte at {at}"));
        let mut moved2 = false;
        if let Some(b) = w.end_b.as_mut() {
            moved2 |= b.send_stream(&mut b_sent, total, &mut w.cb) > 0;
            moved2 |= w
                .end_a
                .recv_stream(&mut a_got, &mut w.ca)
                .unwrap_or_else(|at| panic!("A read a wrong byte at {at}"))
                > 0;
        }
        w.advance(busy || moved || moved2);
    }
    assert_eq!((b_got, a_got), (total, total), "transfer incomplete");
    w.t - start
}

#[test]
fn handshake_addresses_and_clean_transfer_both_ways() {
    let mut w = clean_wire(1, sa(B6, PORT));
    both_ways(&mut w, 1 << 20);
    assert_eq!(w.end_a.shared.remote(), sa(B6, PORT));
    assert_eq!(w.end_a.shared.local().ip(), core::net::IpAddr::V6(A6));
    let b = w.end_b.as_ref().expect("accepted");
    assert_eq!(b.shared.local(), sa(B6, PORT));
    assert_eq!(b.shared.remote(), w.end_a.shared.local());
    let (sa_, sb) = (w.a.stats(), w.b.stats());
    assert!(sa_.tcp_tx_segments > 100 && sb.tcp_tx_segments > 100);
    assert_eq!(sa_.drop_tcp_checksum + sb.drop_tcp_checksum, 0);
    assert_eq!(sa_.drop_ipv6_transport + sb.drop_ipv6_transport, 0);
    // MSS = MTU - 60 (RFC 8200 with TCP's 20 bytes; timestamps take 12 more).
    let mut mss = Vec::new();
    w.a.for_each_tcb(|t| mss.push(t.mss()));
    assert!(mss.iter().all(|&m| m <= 1440), "{mss:?}");
}

#[test]
fn byte_exact_both_ways_under_loss() {
    for seed in [2, 3] {
        let imp = Impairments {
            loss: 0.02,
            duplicate: 0.01,
            reorder: 0.01,
            ..Impairments::none()
        };
        let mut w = wire(
            imp,
            seed,
            EngineConfig::default(),
            (any6(PORT), false),
            sa(B6, PORT),
        );
        both_ways(&mut w, 512 * 1024);
        assert!(w.a.stats().tcp_tx_segments + w.b.stats().tcp_tx_segments > 0);
    }
}

/// With segmentation offload and payloads lent from the TX rings on both
/// ports (the mem port cuts TCPv6 frames as `tcp_gso_segment` does and
/// completes their checksums), clean and under 2 % loss: byte-exact both
/// ways, with most segments sent inside TSO frames.
#[test]
fn tso_and_gather_over_ipv6_byte_exact_both_ways() {
    for (seed, loss) in [(4, 0.0), (5, 0.02)] {
        let imp = Impairments {
            loss,
            ..Impairments::none()
        };
        let cfgs = (
            v6(EngineConfig::default(), A6),
            v6(EngineConfig::default(), B6),
        );
        let listen = (any6(PORT), false);
        let mut w = Wire::connect_to(imp, seed, 256, cfgs, listen, sa(B6, PORT), (0, 0), |p| {
            p.set_tso(true);
            p.set_gather(true);
        });
        both_ways(&mut w, 4 << 20);
        let (a, b) = (w.a.stats(), w.b.stats());
        assert!(
            a.tcp_tso_sends > 0 && b.tcp_tso_sends > 0,
            "loss {loss}: TSO unused over IPv6"
        );
        assert!(
            a.tcp_tx_segments > 4 * a.tcp_tso_sends,
            "loss {loss}: {} segments in {} TSO sends",
            a.tcp_tx_segments,
            a.tcp_tso_sends
        );
        assert_eq!(a.drop_tcp_checksum + b.drop_tcp_checksum, 0);
    }
}

/// A listener bound to our global address does not take a SYN sent to our
/// link-local one (answered with RST, as Linux does); one on `[::]` takes
/// both.
#[test]
fn listener_on_the_global_address_refuses_syns_to_the_link_local_one() {
    let b_link_local = engine::link_local_from_mac(wire::MacAddr(nic::mem::MAC_B));
    for (bound, takes) in [(B6, false), (Ipv6Addr::UNSPECIFIED, true)] {
        let mut w = wire(
            Impairments::none(),
            6,
            EngineConfig::default(),
            (sa(bound, PORT), false),
            sa(b_link_local, PORT),
        );
        run_until(&mut w, 3_000_000_000, |w| {
            matches!(w.end_a.shared.state(), SockState::Open | SockState::Closed)
        });
        let b = w.b.stats();
        if takes {
            assert_eq!(w.end_a.shared.state(), SockState::Open, "bound to {bound}");
            assert_eq!(b.tcp_passive_opens, 1);
        } else {
            assert_eq!(
                w.end_a.shared.error(),
                appif::errno::ECONNREFUSED,
                "bound to {bound}"
            );
            assert_eq!((b.tcp_passive_opens, b.tcp_no_socket), (0, 1));
        }
    }
}

#[test]
fn syn_to_a_closed_port_is_answered_with_rst() {
    let mut w = clean_wire(4, sa(B6, PORT + 1));
    run_until(&mut w, 5_000_000_000, |w| {
        w.end_a.shared.state() == SockState::Closed
    });
    assert_eq!(w.end_a.shared.state(), SockState::Closed);
    assert_eq!(w.end_a.shared.error(), appif::errno::ECONNREFUSED);
    assert_eq!(w.b.stats().tcp_rst_tx, 1);
    assert_eq!(w.b.stats().tcp_no_socket, 1);
}

#[test]
fn active_closer_ends_in_time_wait_then_goes() {
    let mut w = clean_wire(5, sa(B6, PORT));
    both_ways(&mut w, 4096);
    let close = |id: u64, c: &mut spsc::Sender<Command>| push(c, Command::Close { id });
    close(w.end_a.id, &mut w.ca);
    run_until(&mut w, 10_000_000, |_| false);
    let bid = w.end_b.as_ref().expect("accepted").id;
    close(bid, &mut w.cb);
    run_until(&mut w, 10_000_000, |_| false);
    // A compact record, no connection; `ss` lists it with its addresses.
    let mut n = 0;
    w.a.for_each_tcb(|_| n += 1);
    assert_eq!(n, 0, "the connection is freed");
    assert_eq!(w.a.time_wait_records() as u64, 1);
    let mut rows = Vec::new();
    w.a.for_each_socket(|r| rows.push(r));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state, observe::stats_shm::ConnState::TimeWait);
    assert_eq!(
        (rows[0].local.ip(), rows[0].remote),
        (A6.into(), sa(B6, PORT))
    );
    run_until(&mut w, 130_000_000_000, |w| {
        w.a.time_wait_records() as u64 == 0
    });
    assert_eq!(w.a.time_wait_records() as u64, 0, "TIME-WAIT ended");
    let t_end = w.t - w.start;
    assert!(t_end >= 60_000_000_000, "not before 2*MSL: {t_end} ns");
}

#[test]
fn syn_cookies_open_v6_connections_when_the_backlog_is_full() {
    let cfg = EngineConfig {
        syn_cookies: true,
        ..EngineConfig::default()
    };
    let mut w = wire(
        Impairments::none(),
        6,
        cfg,
        (any6(PORT), false),
        sa(B6, PORT),
    );
    // A listener with a backlog of one: SYNs beyond it get cookies.
    let (acc_tx, mut small) = spsc::channel::<Accepted>(1);
    push(
        &mut w.cb,
        listen(4, StatusHandle::local(), any6(PORT + 2), true, acc_tx),
    );
    let mut ends = Vec::new();
    let mut taken = Vec::new();
    for i in 0..8u64 {
        let shared = StatusHandle::local();
        let (a_tx, eng_tx) = bytes::growable_ring(65536, 65536);
        let (eng_rx, a_rx) = bytes::growable_ring(65536, 65536);
        push(
            &mut w.ca,
            common::connect(10 + i, &shared, sa(B6, PORT + 2), (eng_tx, eng_rx), true),
        );
        ends.push((shared, a_tx, a_rx));
    }
    run_until(&mut w, 3_000_000_000, |_| {
        while let Some(a) = small.pop() {
            taken.push(a);
        }
        false
    });
    // The queue of one refuses (resets) what completes while it is full,
    // as Linux does; connections opened by a cookie arrive.
    assert!(!taken.is_empty());
    let s = w.b.stats();
    assert!(
        s.tcp_syncookies_sent > 0 && s.tcp_syncookies_ok > 0,
        "{s:?}"
    );
}

#[test]
fn dual_stack_listener_takes_an_ipv4_client_as_v4_mapped() {
    let to = SocketAddr::new(B_IP.into(), PORT);
    let mut w = clean_wire(7, to);
    both_ways(&mut w, 64 * 1024);
    let b = w.end_b.as_ref().expect("accepted");
    let mapped = |ip: std::net::Ipv4Addr| core::net::IpAddr::V6(ip.to_ipv6_mapped());
    assert_eq!(b.shared.remote().ip(), mapped(A_IP));
    assert_eq!(b.shared.local(), SocketAddr::new(mapped(B_IP), PORT));
    // A, an IPv4 client, sees plain IPv4.
    assert_eq!(w.end_a.shared.remote(), to);
}

#[test]
fn v6only_listener_refuses_ipv4_and_shares_its_port_with_an_ipv4_one() {
    let to = SocketAddr::new(B_IP.into(), PORT);
    let mut w = wire(
        Impairments::none(),
        8,
        EngineConfig::default(),
        (any6(PORT), true),
        to,
    );
    run_until(&mut w, 2_000_000_000, |w| {
        w.end_a.shared.state() == SockState::Closed
    });
    assert_eq!(w.end_a.shared.error(), appif::errno::ECONNREFUSED);
    // An IPv4 listener on the same port is allowed and takes IPv4.
    let (acc_tx, mut accepted) = spsc::channel::<Accepted>(4);
    let l4 = StatusHandle::local();
    push(
        &mut w.cb,
        listen(
            2,
            l4.clone(),
            (std::net::Ipv4Addr::UNSPECIFIED, PORT),
            false,
            acc_tx,
        ),
    );
    // A dual-stack one is not: the port is taken for IPv6.
    let dual = StatusHandle::local();
    let (dual_tx, _dual_rx) = spsc::channel::<Accepted>(4);
    push(
        &mut w.cb,
        listen(3, dual.clone(), any6(PORT), false, dual_tx),
    );
    run_until(&mut w, 1_000_000, |_| false);
    let shared = StatusHandle::local();
    let (_a_tx, eng_tx) = bytes::growable_ring(65536, 65536);
    let (eng_rx, _a_rx) = bytes::growable_ring(65536, 65536);
    push(
        &mut w.ca,
        common::connect(5, &shared, to, (eng_tx, eng_rx), true),
    );
    run_until(&mut w, 2_000_000_000, |_| shared.state() == SockState::Open);
    assert_eq!(shared.error(), 0, "{}", dump(&w.a, &w.b));
    assert_eq!(l4.state(), SockState::Open);
    assert_eq!(dual.state(), SockState::Closed);
    assert_eq!(dual.error(), appif::errno::EADDRINUSE);
    assert_eq!(shared.state(), SockState::Open);
    assert!(accepted.pop().is_some());
}

/// A UDP socket `id` of `cmds`' engine on `local`: its status block and
/// the application's ring ends.
fn udp(
    cmds: &mut spsc::Sender<Command>,
    id: u64,
    local: SocketAddr,
) -> (std::sync::Arc<StatusHandle>, bytes::Writer, bytes::Reader) {
    let shared = StatusHandle::local();
    let (app_tx, eng_tx) = bytes::growable_ring(65536, 65536);
    let (eng_rx, app_rx) = bytes::growable_ring(65536, 65536);
    push(
        cmds,
        Command::UdpBind {
            id,
            owner: Owner::LOCAL,
            shared: shared.clone(),
            local,
            v6only: false,
            tx: eng_tx,
            rx: eng_rx,
        },
    );
    (shared, app_tx, app_rx)
}

fn send_dgram(tx: &mut bytes::Writer, to: SocketAddr, payload: &[u8]) {
    let h = UdpHeader {
        addr: to,
        len: payload.len() as u16,
    };
    tx.write(&h.encode());
    tx.write(payload);
}

fn recv_dgram(rx: &mut bytes::Reader) -> Option<(SocketAddr, Vec<u8>)> {
    let mut hb = [0u8; UdpHeader::LEN];
    if rx.peek_at(0, &mut hb) < UdpHeader::LEN {
        return None;
    }
    let h = UdpHeader::decode(&hb);
    let mut p = vec![0u8; usize::from(h.len)];
    rx.peek_at(UdpHeader::LEN, &mut p);
    rx.consume(UdpHeader::LEN + p.len());
    Some((h.addr, p))
}

#[test]
fn udp_echo_over_ipv6_and_port_unreachable() {
    let mut w = clean_wire(9, sa(B6, PORT));
    let (_sb, mut btx, mut brx) = udp(&mut w.cb, 20, any6(5353));
    let (_sa, mut atx, mut arx) = udp(&mut w.ca, 20, any6(0));
    run_until(&mut w, 1_000_000, |_| false);
    send_dgram(&mut atx, sa(B6, 5353), b"ping over ipv6");
    push(&mut w.ca, Command::Send { id: 20 });
    let mut echoed = None;
    run_until(&mut w, 1_000_000_000, |w| {
        if let Some((from, p)) = recv_dgram(&mut brx) {
            assert_eq!(from.ip(), core::net::IpAddr::V6(A6));
            send_dgram(&mut btx, from, &p);
            push(&mut w.cb, Command::Send { id: 20 });
        }
        echoed = recv_dgram(&mut arx);
        echoed.is_some()
    });
    let (from, p) = echoed.expect("echo came back");
    assert_eq!((from, &p[..]), (sa(B6, 5353), &b"ping over ipv6"[..]));
    // A closed port: ICMPv6 port unreachable back to A.
    send_dgram(&mut atx, sa(B6, 5354), b"nobody");
    push(&mut w.ca, Command::Send { id: 20 });
    run_until(&mut w, 1_000_000_000, |w| w.a.stats().icmpv6_errors_rx > 0);
    assert_eq!(w.b.stats().drop_udp_no_socket, 1);
    assert_eq!(w.b.stats().icmpv6_unreachable_tx, 1);
    assert_eq!(w.a.stats().icmpv6_errors_rx, 1);
    // A dual-stack UDP socket on [::] also takes IPv4, the peer mapped.
    send_dgram(&mut atx, SocketAddr::new(B_IP.into(), 5353), b"v4");
    push(&mut w.ca, Command::Send { id: 20 });
    let mut got = None;
    run_until(&mut w, 1_000_000_000, |_| {
        got = recv_dgram(&mut brx);
        got.is_some()
    });
    let (from, _) = got.expect("IPv4 datagram");
    assert_eq!(from.ip(), core::net::IpAddr::V6(A_IP.to_ipv6_mapped()));
}

/// A UDP socket bound to our global address takes datagrams sent to it,
/// not those sent to our link-local address (counted, answered with port
/// unreachable), as on Linux.
#[test]
fn udp_socket_on_the_global_address_ignores_datagrams_to_the_link_local_one() {
    let b_link_local = engine::link_local_from_mac(wire::MacAddr(nic::mem::MAC_B));
    let mut w = clean_wire(10, sa(B6, PORT));
    let (_sb, _btx, mut brx) = udp(&mut w.cb, 20, sa(B6, 5360));
    let (_sa, mut atx, _arx) = udp(&mut w.ca, 20, any6(0));
    run_until(&mut w, 1_000_000, |_| false);
    send_dgram(
        &mut atx,
        sa(b_link_local, 5360),
        b"to the link-local address",
    );
    send_dgram(&mut atx, sa(B6, 5360), b"to the global address");
    push(&mut w.ca, Command::Send { id: 20 });
    let mut got = Vec::new();
    run_until(&mut w, 1_000_000_000, |w| {
        while let Some((_, p)) = recv_dgram(&mut brx) {
            got.push(p);
        }
        w.a.stats().icmpv6_errors_rx > 0 && !got.is_empty()
    });
    assert_eq!(got, vec![b"to the global address".to_vec()]);
    assert_eq!(w.b.stats().drop_udp_no_socket, 1);
    assert_eq!(w.b.stats().icmpv6_unreachable_tx, 1);
}

#[test]
fn udp_record_with_a_bad_family_byte_is_counted_and_skipped() {
    let mut w = clean_wire(10, sa(B6, PORT));
    let (_sb, _btx, mut brx) = udp(&mut w.cb, 21, any6(5353));
    let (_sa, mut atx, _arx) = udp(&mut w.ca, 21, any6(0));
    run_until(&mut w, 1_000_000, |_| false);
    // A record as a hostile application writes it (family byte 9), then a good one.
    let mut h = UdpHeader {
        addr: sa(B6, 5353),
        len: 3,
    }
    .encode();
    h[20] = 9;
    atx.write(&h);
    atx.write(b"bad");
    send_dgram(&mut atx, sa(B6, 5353), b"good");
    push(&mut w.ca, Command::Send { id: 21 });
    let mut got = None;
    run_until(&mut w, 1_000_000_000, |_| {
        got = recv_dgram(&mut brx);
        got.is_some()
    });
    assert_eq!(got.map(|(_, p)| p), Some(b"good".to_vec()));
    assert_eq!(w.a.stats().drop_udp_tx_malformed, 1);
    assert_eq!(w.a.stats().udp_tx, 1);
}
