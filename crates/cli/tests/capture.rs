//! `corestack capture` on a known exchange: two stacks on a clean `mem` wire in this process
//! send five UDP datagrams of known sizes; `corestack capture --pid <this process>` (the real
//! binary) writes what the engines copied to a pcap file, which `tcpdump -r` must read and which
//! must hold exactly those frames (each seen leaving one engine and entering the other): count
//! and bytes. No root, no namespaces.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddrV4;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corestack::UdpSocket;

use testkit::mem_wire::{stacks, A, B};

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

    let pcap = std::env::temp_dir().join(format!(
        "corestack-capture-test-{}.pcap",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&pcap);
    let mut child = Command::new(env!("CARGO_BIN_EXE_corestack"))
        .args(["capture", "--pid", &std::process::id().to_string(), "-w"])
        .arg(&pcap)
        .args(["-c", "10", "--seconds", "20", "udp", "and", "port", "9999"])
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

    for (i, &n) in SIZES.iter().enumerate() {
        // A datagram to another port between them: filtered out in the engine.
        ua.send_to(&[1u8; 64], SocketAddrV4::new(B, 8888)).unwrap();
        recv_within(&mut other, &mut buf);
        ua.send_to(&vec![i as u8; n], SocketAddrV4::new(B, 9999))
            .unwrap();
        assert_eq!(recv_within(&mut ub, &mut buf), n);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("corestack capture did not stop after 10 frames");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "corestack capture failed: {rest}");
    assert!(rest.contains("10 frames captured"), "{rest}");

    // The file, record by record: five datagrams out of a, five into b.
    let bytes = std::fs::read(&pcap).unwrap();
    let mut at = 24;
    let mut lens = Vec::new();
    while at + 16 <= bytes.len() {
        let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let orig = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap()) as usize;
        assert_eq!(incl, orig, "frame cut");
        lens.push(incl);
        at += 16 + incl;
    }
    assert_eq!(at, bytes.len(), "trailing bytes in the pcap file");
    let mut want: Vec<usize> = SIZES
        .iter()
        .flat_map(|n| [HEADERS + n, HEADERS + n])
        .collect();
    let mut got = lens.clone();
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
