//! Tests of the application segment: descriptors (both families, hostile bytes), the
//! command ring, the layout, slots and accept queues.

use super::layout::CMD_HEAD;
use super::*;
use crate::cc::CcKind;

fn seg() -> AppSegment {
    let layout = Layout {
        nslots: 4,
        ring_bytes: 4096,
        ring_max_bytes: 4096,
        cmd_slots: 16,
        engines: 1,
    };
    let r = Arc::new(Region::anon(layout.total_len()).unwrap());
    AppSegment::init(r, layout, 7).unwrap()
}

#[test]
fn descriptors_round_trip_and_garbage_is_refused() {
    let all = [
        Desc::Connect {
            slot: 3,
            remote: "10.0.0.1:80".parse().unwrap(),
            local_port: 0,
            nodelay: true,
        },
        Desc::Listen {
            slot: 1,
            local: "0.0.0.0:7".parse().unwrap(),
            backlog: 128,
            v6only: false,
            reuseport: None,
        },
        Desc::UdpBind {
            slot: 2,
            local: "10.0.0.2:53".parse().unwrap(),
            v6only: false,
        },
        Desc::Connect {
            slot: 3,
            remote: "[fd00:77::1]:443".parse().unwrap(),
            local_port: 40000,
            nodelay: false,
        },
        Desc::Listen {
            slot: 1,
            local: "[::]:7".parse().unwrap(),
            backlog: 128,
            v6only: true,
            reuseport: Some(crate::socket::ReusePort { home: true }),
        },
        Desc::Listen {
            slot: 1,
            local: "[::]:8".parse().unwrap(),
            backlog: 1,
            v6only: false,
            reuseport: Some(crate::socket::ReusePort { home: false }),
        },
        Desc::UdpBind {
            slot: 2,
            local: "[fd00:77::2]:53".parse().unwrap(),
            v6only: true,
        },
        Desc::Send { slot: 9 },
        Desc::Recvd { slot: 9 },
        Desc::Shutdown { slot: 9 },
        Desc::Close { slot: 9 },
        Desc::SetNodelay { slot: 1, on: false },
        Desc::SetKeepalive { slot: 1, on: true },
        Desc::SetCongestion {
            slot: 1,
            cc: CcKind::Dctcp,
        },
        Desc::SetBuffers {
            slot: 5,
            rcv: 1 << 20,
            snd: 65536,
        },
        Desc::JoinListener {
            slot: 2,
            parent_slot: 6,
            backlog: 511,
            owner: 12,
        },
        Desc::Forking { ticket: 0xdead },
        Desc::Forked {
            ticket: 0xdead,
            pid: 4_194_304,
        },
        Desc::Adopt {
            slot: 8,
            parent_slot: 3,
            owner: 0,
        },
        Desc::Lend {
            slot: 6,
            key: 0xfeed_0000_beef,
        },
        Desc::SetUserTimeout {
            slot: 6,
            ms: 30_000,
        },
        Desc::Abort { slot: 3 },
        Desc::SetKeepaliveParams {
            slot: 4,
            idle_s: 7200,
            interval_s: 75,
            count: 9,
        },
        Desc::SetIpv6Header {
            slot: 4,
            tclass: 0xb8,
            hop_limit: 255,
        },
    ];
    for d in all {
        assert_eq!(Desc::decode(&d.encode()), Ok(d));
    }
    let mut b = [0u8; 64];
    assert_eq!(Desc::decode(&b), Err(DescError::BadOpcode(0)));
    b[0] = 8;
    b[1] = 2;
    assert_eq!(Desc::decode(&b), Err(DescError::BadFlag));
    b[0] = 10;
    b[1] = 4;
    assert_eq!(Desc::decode(&b), Err(DescError::BadCc(4)));
    // A listen whose SO_REUSEPORT byte is neither 0, 1 nor 3.
    let mut l = all[1].encode();
    l[1] = 2;
    assert_eq!(Desc::decode(&l), Err(DescError::BadFlag));
}

#[test]
fn ipv6_descriptors_keep_their_family_and_a_bad_family_is_refused() {
    use desc_layout::{ADDR_V4, ADDR_V6, FAMILY, V6ONLY};
    let v6 = Desc::Listen {
        slot: 2,
        local: "[fd00:77::2]:8080".parse().unwrap(),
        backlog: 16,
        v6only: true,
        reuseport: None,
    };
    let b = v6.encode();
    assert_eq!(b[FAMILY], FAMILY_V6);
    assert_eq!(b[V6ONLY], 1);
    assert_eq!(&b[ADDR_V4..ADDR_V4 + 4], &[0; 4], "no IPv4 bytes");
    assert_eq!(b[ADDR_V6], 0xfd);
    // An IPv4-mapped address stays IPv6 in the descriptor.
    let mapped = Desc::Connect {
        slot: 0,
        remote: "[::ffff:10.0.0.1]:80".parse().unwrap(),
        local_port: 0,
        nodelay: false,
    };
    assert_eq!(Desc::decode(&mapped.encode()), Ok(mapped));
    // A hostile application's bytes: every family but 4 and 6 is refused
    // in the three descriptors that carry an address, ignored elsewhere.
    for op in [1u8, 2, 3] {
        for fam in [0u8, 5, 10, 0xff] {
            let mut h = v6.encode();
            h[0] = op;
            h[FAMILY] = fam;
            assert_eq!(
                Desc::decode(&h),
                Err(DescError::BadFamily(fam)),
                "{op} {fam}"
            );
        }
    }
    let mut h = Desc::Send { slot: 1 }.encode();
    h[FAMILY] = 0xff;
    assert_eq!(Desc::decode(&h), Ok(Desc::Send { slot: 1 }));
    let mut h = b;
    h[V6ONLY] = 2;
    assert_eq!(Desc::decode(&h), Err(DescError::BadFlag));
}

#[test]
fn the_daemons_ipv6_address_reaches_the_application() {
    let s = seg();
    assert_eq!(s.net6(), None, "a fresh segment: no IPv6");
    let net = ("fd00:77::2".parse().unwrap(), 64);
    s.set_net6(Some(net));
    let (s2, _) = AppSegment::open(s.region().clone()).unwrap();
    assert_eq!(s2.net6(), Some(net));
    s.set_net6(None);
    assert_eq!(s2.net6(), None);
}

#[test]
fn command_ring_carries_descriptors_and_catches_a_bad_head() {
    let s = seg();
    let (s2, assoc) = AppSegment::open(s.region().clone()).unwrap();
    assert_eq!(assoc, 7);
    assert_eq!(s2.layout(), s.layout());
    let mut p = CmdProducer::new(s2);
    let mut c = CmdConsumer::new(s.clone());
    for i in 0..16 {
        assert!(p.push(&Desc::Send { slot: i }));
    }
    assert!(!p.push(&Desc::Send { slot: 99 }));
    for i in 0..16 {
        assert_eq!(c.pop(), Some(Ok(Desc::Send { slot: i })));
    }
    assert_eq!(c.pop(), None);
    s.word64(CMD_HEAD).store(1000, Ordering::Release);
    assert!(matches!(c.pop(), Some(Err(CmdError::BadIndex { .. }))));
}

#[test]
fn layout_offsets_are_the_words_both_ends_use() {
    let s = seg();
    // The slot words a raw writer would poke, seen through the typed ends.
    let l = s.layout();
    assert_eq!(l.slot_offset(0) % PAGE, 0, "the slots start on a page");
    let slot = l.slot_offset(2);
    assert_eq!(slot, l.slot_offset(0) + 2 * SLOT_BYTES);
    let r = s.tx_reader(2).unwrap();
    s.word64(slot + SLOT_TX_HEAD).store(100, Ordering::Release);
    assert_eq!(r.len(), 100);
    assert!(!r.violated());
    s.word64(slot + SLOT_TX_GEOMETRY)
        .store(u64::MAX, Ordering::Release);
    let _ = r.len();
    assert!(r.violated(), "a garbage geometry word is a violation");
    s.word32(slot + SLOT_OWNER)
        .store(OWNER_BOTH, Ordering::Release);
    assert_eq!(s.owner(2).unwrap().load(Ordering::Acquire), OWNER_BOTH);
    let reset = crate::errno::ECONNRESET as u32;
    s.word32(CLOSED).store(reset, Ordering::Release);
    assert_eq!(s.closed().load(Ordering::Acquire), reset);
    s.word32(ENGINE_SLEEPING).store(1, Ordering::Release);
    assert_eq!(s.engine_sleeping().load(Ordering::Acquire), 1);
}

#[test]
fn bad_segments_are_refused() {
    let r = Arc::new(Region::anon(8192).unwrap());
    assert!(AppSegment::open(r.clone()).is_err());
    let layout = Layout {
        nslots: 0,
        ring_bytes: 4096,
        ring_max_bytes: 4096,
        cmd_slots: 16,
        engines: 1,
    };
    assert!(AppSegment::init(r, layout, 1).is_err());
}

#[test]
fn engine_slots_wake_the_app_and_free_themselves() {
    let s = seg();
    let l = s.claim_app_slot(0, |_| false).unwrap();
    assert_eq!(l, 0);
    let mut acc = AppSegmentAccept::new(s.clone(), 7, l, 8).unwrap();
    let c = acc.claim().unwrap();
    assert_eq!(c.slot, 1);
    assert_eq!(service_owner(c.id), Some((7, 1)));
    let seen = s.app_wake().seq();
    c.shared.wake();
    assert_ne!(s.app_wake().seq(), seen);
    assert!(!acc.has_accepted(), "nothing handed over yet");
    // Only an id of this queue's association is handed over.
    assert!(!acc.hand_over(service_id(8, c.slot), &c.shared));
    assert!(
        !acc.hand_over(u64::from(c.slot), &c.shared),
        "no service id"
    );
    assert!(acc.hand_over(c.id, &c.shared));
    assert!(!acc.has_accepted(), "handed over, not taken");
    let mut q = s.rx_reader(l).unwrap();
    let mut b = [0u8; 4];
    assert_eq!(q.read(&mut b), 4);
    assert_eq!(u32::from_le_bytes(b), 1);
    assert!(acc.has_accepted(), "the application took one");
    // A readiness waiter armed on the app's wake-up point marks it
    // waiting until the next notification.
    assert!(!acc.app_waiting());
    let efd = crate::ctl::eventfd().unwrap();
    {
        use std::os::fd::AsRawFd;
        let _armed = s.app_wake().arm(efd.as_raw_fd()).unwrap();
        assert!(acc.app_waiting());
        s.notify_app();
        assert!(!acc.app_waiting(), "woken: no longer waiting");
    }
    assert_eq!(s.owner(1).unwrap().load(Ordering::Acquire), OWNER_BOTH);
    drop(c);
    assert_eq!(s.owner(1).unwrap().load(Ordering::Acquire), OWNER_APP);
    AppSegmentAccept::app_closed(&s, 1);
    assert_eq!(s.owner(1).unwrap().load(Ordering::Acquire), OWNER_FREE);
    // Not handed over: the engine frees both bits.
    let c = acc.claim().unwrap();
    let slot = c.slot;
    drop(c);
    assert_eq!(s.owner(slot).unwrap().load(Ordering::Acquire), OWNER_FREE);
}

#[test]
fn each_engine_has_its_own_command_ring_and_one_engine_is_laid_out_as_before() {
    let one = seg().layout();
    assert_eq!(one.lane(0).map(|l| l.ring), Some(CMD_RING));
    assert_eq!(one.lane(1), None);
    // One engine: its ready ring follows the one command ring on the next
    // page, the slots follow the ready ring on the next.
    let ready0 = page_align(CMD_RING + 16 * DESC_BYTES);
    assert_eq!(one.ready_lane(0).map(|l| l.head), Some(ready0));
    assert_eq!(
        one.slot_offset(0),
        page_align(ready0 + 192 + 4 * one.ready_cap() as usize)
    );
    let three = Layout { engines: 3, ..one };
    let r = Arc::new(Region::anon(three.total_len()).unwrap());
    let s = AppSegment::init(r, three, 9).unwrap();
    let (app, _) = AppSegment::open(s.region().clone()).unwrap();
    assert_eq!(app.layout().engines, 3, "the engines are in the header");
    // Every lane's words and ring lie apart from each other's and before the slots.
    let mut spans: Vec<(usize, usize)> = (0..3)
        .flat_map(|e| {
            let l = three.lane(e).unwrap();
            [
                (l.sleeping, 4),
                (l.head, 8),
                (l.tail, 8),
                (l.ring, 16 * DESC_BYTES),
            ]
        })
        .chain((0..3).flat_map(|e| {
            let r = three.ready_lane(e).unwrap();
            [
                (r.head, 8),
                (r.tail, 8),
                (r.overflow, 4),
                (r.ring, 4 * three.ready_cap() as usize),
            ]
        }))
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "overlap: {w:?}");
    }
    assert!(spans.last().map(|(a, n)| a + n) <= Some(three.slot_offset(0)));
    assert_eq!(three.lane(3), None);
    assert_eq!(three.ready_lane(3), None);
    // Descriptors pushed on engine 1's ring reach engine 1's consumer only.
    let mut p1 = CmdProducer::lane(app.clone(), 1).unwrap();
    let mut c0 = CmdConsumer::lane(s.clone(), 0).unwrap();
    let mut c1 = CmdConsumer::lane(s.clone(), 1).unwrap();
    assert!(p1.push(&Desc::Send { slot: 3 }));
    assert_eq!(c0.pop(), None);
    assert_eq!(c1.pop(), Some(Ok(Desc::Send { slot: 3 })));
    // Each engine's notify flag is its own.
    s.lane_sleeping(1).unwrap().store(1, Ordering::SeqCst);
    assert!(p1.engine_needs_doorbell());
    assert!(!CmdProducer::lane(app.clone(), 2)
        .unwrap()
        .engine_needs_doorbell());
    assert_eq!(s.engine_sleeping().load(Ordering::SeqCst), 0);
    assert!(CmdProducer::lane(app, 3).is_none());
    assert!(Layout { engines: 0, ..one }.validate().is_err());
}

#[path = "ready_tests.rs"]
mod ready_tests;
