//! The checks every port passes, generic over `Port`. `pump` runs whatever
//! drives the far end (a simulated peer for mem; nothing for Linux).

use std::time::{Duration, Instant};

use nic::{Port, TxQueue};

use super::alloc::count_allocs;
use super::{arp_reply_from, arp_request, test_frame};

/// The MAC is a unicast address, not zero; the MTU is plausible.
pub fn check_identity<P: Port>(port: &P, expect_mtu: usize) {
    let mac = port.mac();
    assert_ne!(mac, [0; 6], "mac() is zero");
    assert_eq!(mac[0] & 1, 0, "mac() {mac:02x?} is a multicast address");
    assert_eq!(port.mtu(), expect_mtu, "mtu()");
}

/// Sends an ARP request for `peer_ip` (resent every 200 ms) until the reply
/// arrives through `rx_burst`, for at most 3 s; returns the peer's MAC.
pub fn arp_request_gets_reply<P: Port>(
    port: &mut P,
    my_ip: [u8; 4],
    peer_ip: [u8; 4],
    pump: &mut dyn FnMut(),
) -> [u8; 6] {
    let mac = port.mac();
    let start = Instant::now();
    let mut last_sent: Option<Instant> = None;
    let mut found = None;
    while start.elapsed() < Duration::from_secs(3) && found.is_none() {
        if !matches!(last_sent, Some(t) if t.elapsed() <= Duration::from_millis(200)) {
            let tx = port.tx();
            assert!(
                tx.transmit(64, |buf| arp_request(buf, mac, my_ip, peer_ip)),
                "transmit refused the ARP request: no free tx buffer on an idle port"
            );
            tx.flush();
            last_sent = Some(Instant::now());
        }
        pump();
        port.rx_burst(32, |frame, _| {
            if let Some(m) = arp_reply_from(frame, peer_ip, mac) {
                found = Some(m);
            }
        });
        std::thread::sleep(Duration::from_micros(100));
    }
    found.unwrap_or_else(|| panic!("no ARP reply from {peer_ip:?} within 3 s"))
}

/// Sends `total` test frames (`len` bytes each) to `dst` in bursts of
/// `burst`, flushing after each burst; a refused transmit is retried after
/// a flush (at most 2000 times, 100 µs apart). Panics if tx buffers never
/// come back. Returns the allocations made by transmit and flush.
pub fn send_test_frames<P: Port>(
    port: &mut P,
    dst: [u8; 6],
    total: u32,
    burst: u32,
    len: usize,
    pump: &mut dyn FnMut(),
) -> u64 {
    let src = port.mac();
    let mut allocs = 0;
    let mut seq = 0;
    while seq < total {
        let end = (seq + burst).min(total);
        let (_, n) = count_allocs(|| {
            while seq < end {
                if port
                    .tx()
                    .transmit(len, |buf| test_frame(buf, dst, src, seq, len))
                {
                    seq += 1;
                    continue;
                }
                break;
            }
            port.tx().flush();
        });
        allocs += n;
        if seq < end {
            // Refused: wait for completions.
            let mut tries = 0;
            loop {
                pump();
                let (ok, n) = count_allocs(|| {
                    port.tx().flush();
                    port.tx()
                        .transmit(len, |buf| test_frame(buf, dst, src, seq, len))
                });
                allocs += n;
                if ok {
                    seq += 1;
                    break;
                }
                tries += 1;
                assert!(
                    tries < 2000,
                    "tx buffers not recycled: transmit refused frame {seq} for 200 ms"
                );
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        pump();
    }
    allocs
}

/// Calls `rx_burst` until `want` frames matched `pred` or `timeout` passed;
/// returns the number matched and the allocations made by `rx_burst`.
pub fn receive_matching<P: Port>(
    port: &mut P,
    want: usize,
    timeout: Duration,
    pump: &mut dyn FnMut(),
    mut pred: impl FnMut(&[u8]) -> bool,
) -> (usize, u64) {
    let start = Instant::now();
    let mut matched = 0;
    let mut allocs = 0;
    while matched < want && start.elapsed() < timeout {
        pump();
        let (_, n) = count_allocs(|| {
            port.rx_burst(64, |frame, _| {
                if pred(frame) {
                    matched += 1;
                }
            })
        });
        allocs += n;
        std::thread::sleep(Duration::from_micros(100));
    }
    (matched, allocs)
}
