//! `corestack capture` on a known exchange: two stacks on a clean `mem` wire in this process
//! send five UDP datagrams of known sizes; `corestack capture --pid <this process>` (the real
//! binary) writes what the engines copied to a pcap file, which `tcpdump -r` must read and which
//! must hold exactly those frames (each seen leaving one engine and entering the other): count
//! and bytes. The same over IPv6 with a `host fd00:1::2` filter, the pcap parsed here. No root,
//! no namespaces. One test at a time: a process has one capture segment, and one filter.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use corestack::UdpSocket;

use testkit::mem_wire::{stacks, stacks_v6, A, A6, B, B6};

/// Held by each test: the process's capture segment has one filter.
static ONE_CAPTURE: Mutex<()> = Mutex::new(());

const SIZES: [usize; 5] = [100, 200, 300, 400, 500];
/// Ethernet, IPv4 and UDP headers.
const HEADERS: usize = 14 + 20 + 8;

fn recv_within(u: &mut UdpSocket, buf: &mut [u8]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match u.recv_from(buf) {
            Ok((n, _)) => return n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "datagram not delivered within 5 s"
                );
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => panic!("recv: {e}"),
        }
    }
}

#[test]
fn capture_of_five_datagrams_reads_in_tcpdump_with_every_frame_and_byte() {
    let _one = ONE_CAPTURE.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b) = stacks(false);
    let mut ua = UdpSocket::bind(&a, SocketAddrV4::new(A, 5555)).unwrap();
    let mut ub = UdpSocket::bind(&b, SocketAddrV4::new(B, 9999)).unwrap();
    let mut other = UdpSocket::bind(&b, SocketAddrV4::new(B, 8888)).unwrap();
    ub.set_nonblocking(true).unwrap();
    other.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    // ARP first, outside the capture.
    ua.send_to(b"hello", SocketAddrV4::new(B, 9999)).unwrap();
    recv_within(&mut ub, &mut buf);

    let (pcap, child, err) = start_capture("test", 10, &["udp", "and", "port", "9999"]);

    for (i, &n) in SIZES.iter().enumerate() {
        // A datagram to another port between them: filtered out in the engine.
        ua.send_to(&[1u8; 64], SocketAddrV4::new(B, 8888)).unwrap();
        recv_within(&mut other, &mut buf);
        ua.send_to(&vec![i as u8; n], SocketAddrV4::new(B, 9999))
            .unwrap();
        assert_eq!(recv_within(&mut ub, &mut buf), n);
    }
    capture_stopped(child, err, 10);

    // The file, record by record: five datagrams out of a, five into b.
    let bytes = std::fs::read(&pcap).unwrap();
    let mut got: Vec<usize> = pcap_records(&bytes).iter().map(|f| f.len()).collect();
    let mut want: Vec<usize> = SIZES
        .iter()
        .flat_map(|n| [HEADERS + n, HEADERS + n])
        .collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "frames captured (count and bytes)");

    let out = Command::new("tcpdump")
        .args(["-n", "-r"])
        .arg(&pcap)
        .output()
        .expect("running tcpdump (scripts/setup.sh installs it)");
    let _ = std::fs::remove_file(&pcap);
    assert!(
        out.status.success(),
        "tcpdump -r: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 10, "tcpdump read:\n{text}");
    for n in SIZES {
        let k = lines
            .iter()
            .filter(|l| {
                l.contains("10.0.0.1.5555 > 10.0.0.2.9999: UDP")
                    && l.ends_with(&format!("length {n}"))
            })
            .count();
        assert_eq!(k, 2, "the {n}-byte datagram out and in, in:\n{text}");
    }
}

/// Starts `corestack capture --pid <this process> -w PCAP -c COUNT FILTER...` into a fresh
/// `corestack-capture-NAME-<pid>.pcap` in the temporary directory and waits until it captures;
/// returns the file's path, the capture and its stderr.
fn start_capture(
    name: &str,
    count: usize,
    filter: &[&str],
) -> (std::path::PathBuf, Child, impl Read) {
    let pcap = std::env::temp_dir().join(format!(
        "corestack-capture-{name}-{}.pcap",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&pcap);
    let mut child = Command::new(env!("CARGO_BIN_EXE_corestack"))
        .args(["capture", "--pid", &std::process::id().to_string(), "-w"])
        .arg(&pcap)
        .args(["-c", &count.to_string(), "--seconds", "20"])
        .args(filter)
        .stderr(Stdio::piped())
        .spawn()
        .expect("running corestack capture");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("capturing from pid"),
        "corestack capture said: {line}"
    );
    (pcap, child, err)
}

/// Waits (20 s at most) for the capture started by [`start_capture`] to stop after `count`
/// frames, and checks that it said so.
fn capture_stopped(mut child: Child, mut err: impl Read, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("corestack capture did not stop after {count} frames");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "corestack capture failed: {rest}");
    assert!(rest.contains(&format!("{count} frames captured")), "{rest}");
}

/// The records of a pcap file (Ethernet frames), each checked whole.
fn pcap_records(bytes: &[u8]) -> Vec<&[u8]> {
    assert_eq!(bytes[..4], [0x4d, 0x3c, 0xb2, 0xa1], "pcap magic (ns)");
    assert_eq!(
        u32::from_le_bytes(bytes[20..24].try_into().unwrap()),
        1,
        "LINKTYPE_ETHERNET"
    );
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= bytes.len() {
        let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let orig = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap()) as usize;
        assert_eq!(incl, orig, "frame cut");
        out.push(&bytes[at + 16..at + 16 + incl]);
        at += 16 + incl;
    }
    assert_eq!(at, bytes.len(), "trailing bytes in the pcap file");
    out
}

#[test]
fn ipv6_capture_with_a_host_filter_holds_only_that_hosts_ipv6_frames() {
    let _one = ONE_CAPTURE.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b) = stacks_v6(false);
    let to6 = |port| SocketAddr::V6(SocketAddrV6::new(B6, port, 0, 0));
    let mut ua = UdpSocket::bind(&a, SocketAddrV6::new(A6, 5555, 0, 0)).unwrap();
    let mut ua4 = UdpSocket::bind(&a, SocketAddrV4::new(A, 5554)).unwrap();
    let mut ub = UdpSocket::bind(&b, SocketAddrV6::new(B6, 9996, 0, 0)).unwrap();
    let mut ub4 = UdpSocket::bind(&b, SocketAddrV4::new(B, 9996)).unwrap();
    ub.set_nonblocking(true).unwrap();
    ub4.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    // Neighbor Discovery and ARP first, outside the capture.
    ua.send_to(b"hello", to6(9996)).unwrap();
    recv_within(&mut ub, &mut buf);
    ua4.send_to(b"hello", SocketAddrV4::new(B, 9996)).unwrap();
    recv_within(&mut ub4, &mut buf);

    let (pcap, child, err) = start_capture("v6-test", 10, &["host", "fd00:1::2", "and", "udp"]);
    for (i, &n) in SIZES.iter().enumerate() {
        // The same port over IPv4 between them: not the IPv6 host, filtered out in the engine.
        ua4.send_to(&[7u8; 64], SocketAddrV4::new(B, 9996)).unwrap();
        assert_eq!(recv_within(&mut ub4, &mut buf), 64);
        ua.send_to(&vec![i as u8; n], to6(9996)).unwrap();
        assert_eq!(recv_within(&mut ub, &mut buf), n);
    }
    capture_stopped(child, err, 10);

    let bytes = std::fs::read(&pcap).unwrap();
    let _ = std::fs::remove_file(&pcap);
    let mut got = Vec::new();
    for f in pcap_records(&bytes) {
        assert_eq!(f[12..14], [0x86, 0xdd], "not an IPv6 frame: {f:02x?}");
        assert_eq!(f[20], 17, "next header: UDP");
        assert_eq!(f[22..38], A6.octets(), "source");
        assert_eq!(f[38..54], B6.octets(), "destination");
        let payload_len = u16::from_be_bytes([f[18], f[19]]) as usize;
        assert_eq!(payload_len, f.len() - 14 - 40, "IPv6 payload length");
        assert_eq!(u16::from_be_bytes([f[54], f[55]]), 5555, "source port");
        assert_eq!(u16::from_be_bytes([f[56], f[57]]), 9996, "destination port");
        got.push(f.len() - 14 - 40 - 8);
    }
    let mut want: Vec<usize> = SIZES.iter().flat_map(|&n| [n, n]).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(
        got, want,
        "each IPv6 datagram out of a and into b, nothing else"
    );
}
