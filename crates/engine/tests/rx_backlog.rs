//! The engine works through a backlog of received frames (several full
//! receive bursts in one iteration, as after it lost its CPU for a few ms)
//! and answers burst by burst, as a kernel answers segment by segment: a
//! raw peer with SACK sends 200 segments with every 8th lost, 175 frames
//! queued at once, and every out-of-order range they form is reported in
//! some SACK block. Answered only at the end of the iteration, the backlog
//! got one batch of ACKs, which reported the first ranges and the last few
//! only; a SACK sender's RACK (Linux's) took the rest for lost and sent
//! them again (issue 35: hundreds of spurious retransmissions of a Linux
//! client at 5 % loss on a loaded machine).

use appif::command::Command;
use appif::seg::Accepted;
use appif::socket::StatusHandle;
use appif::spsc;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::mem::MemPort;
use nic::{Port, TxQueue};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wire::arp::ArpRepr;
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use wire::ipv4::{Ipv4Packet, Ipv4Repr, PROTO_TCP};
use wire::tcp::{TcpFlags, TcpRepr};
use wire::{MacAddr, SeqNum};

mod common;
use common::RawWire;

const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

struct Peer {
    peer: MemPort,
    host: Engine<MemPort>,
    _cmds: spsc::Sender<Command>,
    accepted: spsc::Receiver<Accepted>,
    ns: Arc<AtomicU64>,
    t: u64,
    peer_mac: MacAddr,
    host_mac: MacAddr,
}

impl Peer {
    fn new() -> Peer {
        let cfg = EngineConfig {
            ip: HOST,
            prefix_len: 24,
            ..EngineConfig::default()
        };
        let RawWire {
            peer,
            engine: host,
            mut cmds,
            ns,
            t,
        } = common::raw_wire(35, 8192, cfg);
        let peer_mac = MacAddr(peer.mac());
        let host_mac = MacAddr(host.port().mac());
        let (acc_tx, accepted) = spsc::channel::<Accepted>(4);
        let local = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80);
        common::push(
            &mut cmds,
            common::listen(1, StatusHandle::local(), local, false, acc_tx),
        );
        let mut p = Peer {
            peer,
            host,
            _cmds: cmds,
            accepted,
            ns,
            t,
            peer_mac,
            host_mac,
        };
        p.step();
        let mut arp = vec![0u8; 42];
        EthernetRepr {
            dst: MacAddr::BROADCAST,
            src: peer_mac,
            ethertype: ETHERTYPE_ARP,
        }
        .emit(&mut arp);
        ArpRepr::request(peer_mac, PEER, HOST).emit(&mut arp[14..]);
        p.send(&arp);
        p.step();
        p.received();
        p
    }

    fn step(&mut self) {
        self.t += 10_000;
        self.ns.store(self.t, Ordering::Release);
        self.host.poll(Instant(self.t));
    }

    fn send(&mut self, frame: &[u8]) {
        assert!(self.peer.tx().transmit(frame.len(), |b| {
            b[..frame.len()].copy_from_slice(frame);
            frame.len()
        }));
        self.peer.tx().flush();
    }

    fn send_tcp(&mut self, seg: &TcpRepr, payload: &[u8]) {
        let hl = seg.header_len();
        let mut f = vec![0u8; 34 + hl + payload.len()];
        EthernetRepr {
            dst: self.host_mac,
            src: self.peer_mac,
            ethertype: ETHERTYPE_IPV4,
        }
        .emit(&mut f);
        Ipv4Repr {
            src: PEER,
            dst: HOST,
            protocol: PROTO_TCP,
            ttl: 64,
            ident: 1,
            dont_frag: true,
            payload_len: hl + payload.len(),
        }
        .emit(&mut f[14..]);
        seg.emit_header(&mut f[34..34 + hl]);
        f[34 + hl..].copy_from_slice(payload);
        wire::tcp::fill_checksum(&mut f[34..], PEER, HOST);
        self.send(&f);
    }

    /// Every TCP segment the host sent since the last call.
    fn received(&mut self) -> Vec<TcpRepr> {
        let mut out = Vec::new();
        while self.peer.rx_burst(256, |frame, _| {
            let Ok((eth, payload)) = EthernetRepr::parse(frame) else {
                return;
            };
            if eth.ethertype != ETHERTYPE_IPV4 {
                return;
            }
            let ip = Ipv4Packet::new_checked(payload).unwrap();
            if ip.protocol() == PROTO_TCP {
                out.push(
                    TcpRepr::parse(ip.payload(), ip.src(), ip.dst(), true)
                        .unwrap()
                        .0,
                );
            }
        }) > 0
        {}
        out
    }
}

fn segment(seq: u32, ack: SeqNum, flags: u8, len: usize) -> TcpRepr {
    TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: SeqNum(seq),
        ack,
        flags: TcpFlags(flags),
        window: 65535,
        payload_len: len,
        ..TcpRepr::default()
    }
}

#[test]
fn established_backlog_of_bursts_reports_every_out_of_order_range() {
    const ISN: u32 = 7000;
    const LEN: usize = 300;
    const SEGS: usize = 200;
    let mut p = Peer::new();
    let mut syn = segment(ISN, SeqNum(0), TcpFlags::SYN, 0);
    syn.options.mss = Some(1460);
    syn.options.sack_permitted = true;
    syn.options.window_scale = Some(7);
    p.send_tcp(&syn, &[]);
    p.step();
    let synack = p
        .received()
        .into_iter()
        .find(|s| s.flags.syn())
        .expect("SYN-ACK");
    assert!(synack.options.sack_permitted);
    let ack = synack.seq + 1usize;
    p.send_tcp(&segment(ISN + 1, ack, TcpFlags::ACK, 0), &[]);
    p.step();
    let _acc = p.accepted.pop().expect("accepted");
    p.received();
    // Segment 0 and every 8th are lost: 25 ranges of 7 segments, 175
    // frames, all queued before the host's next iteration.
    let seq = |i: usize| SeqNum(ISN + 1) + i * LEN;
    let payload = [0x35u8; LEN];
    for i in (0..SEGS).filter(|i| i % 8 != 0) {
        let s = segment(ISN + 1 + (i * LEN) as u32, ack, TcpFlags::ACK, LEN);
        p.send_tcp(&s, &payload);
    }
    p.step();
    let acks = p.received();
    let ranges: Vec<(SeqNum, SeqNum)> = (0..SEGS / 8)
        .map(|k| (seq(8 * k + 1), seq(8 * k + 8)))
        .collect();
    let unreported: Vec<usize> = (0..ranges.len())
        .filter(|&k| {
            !acks.iter().any(|a| {
                a.options
                    .sack_blocks()
                    .iter()
                    .any(|b| b.left == ranges[k].0 && b.right == ranges[k].1)
            })
        })
        .collect();
    assert!(
        acks.iter().all(|a| a.ack == seq(0)),
        "nothing is in order yet"
    );
    assert_eq!(
        unreported,
        Vec::<usize>::new(),
        "ranges never reported ({} ACKs)",
        acks.len()
    );
}
