//! A packetdrill interpreter (the script language of Google's packetdrill, the subset in
//! [`parse`]) that runs one engine on virtual time over a `mem` wire: the script plays the
//! peer, writing the segments it sends and naming the ones the engine must send, and drives
//! the engine's application side with socket calls.
//!
//! - The engine is at 10.0.0.2 (port 8080 for `listen`); the peer is 10.0.0.1, port 40000.
//!   Active opens (`connect`) go to the peer's port 40000.
//! - Sequence numbers in the script are relative: the peer's to its ISN (1 000 000 000 here),
//!   the engine's to the ISN of its first SYN (learned from it). TSvals of the engine are
//!   relative to its first one (so an inbound `ecr 0` echoes it); its own TSvals are not
//!   compared; an outbound `ecr` is compared as written (the peer's TSvals are absolute).
//! - An outbound packet must come within the script's tolerance of its time (4 ms unless
//!   the header says otherwise) and match: flags exactly, sequence, length, ack; `win` and
//!   `<options>` when written (options by kind and value, nop and eol ignored). A packet the
//!   engine sends while the script expects none, before another kind of event, fails the
//!   script ("unexpected"), as in packetdrill.
//! - The peer answers the engine's ARP requests (its cache ages out over a long script), and
//!   segments other than TCP and ARP are not shown to the script.
//! - The engine never reads the clock itself: between events the runner jumps to the
//!   engine's next deadline or the event's time, whichever is first.
//!
//! Files: `parse` (the language), `calls` (socket calls), `info` (assertions); this one runs
//! the events against the engine.
//!
//! `%{ }%` assertions read the one connection's TCB with Linux's TCP_INFO names:
//! `tcpi_state` (Linux's numbers), `tcpi_snd_cwnd` and `tcpi_snd_ssthresh` (segments),
//! `tcpi_snd_mss`, `tcpi_rto` (µs), `tcpi_rtt` (µs), `tcpi_retransmits` (consecutive RTOs),
//! `tcpi_total_retrans`, `tcpi_unacked` (bytes in flight / mss), `tcpi_snd_wnd` (bytes),
//! `tcpi_rcv_wnd`, `tcpi_connections` (TCBs); and `stat.NAME` an engine counter.

mod calls;
mod info;
pub mod parse;

use appif::bytes;
use appif::command::{Command, Owner};
use appif::notify::Notify;
use appif::seg::{AcceptQueue, Accepted};
use appif::socket::{SockState, StatusHandle, FLAG_RX_FIN};
use appif::spsc;
use engine::tcp::{State, Tcb};
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort};
use nic::{Port, TxQueue};
use parse::{Assertion, Call, Event, Header, Kind, Opt, Packet, Time};
use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wire::arp::ArpRepr;
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use wire::ipv4::{Ipv4Packet, Ipv4Repr, PROTO_ICMP, PROTO_TCP};
use wire::tcp::{SackBlock, TcpFlags, TcpOptions, TcpRepr};
use wire::{MacAddr, SeqNum};

/// The engine's address.
pub const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The script's (the peer's) address.
pub const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The port `listen` binds.
pub const LOCAL_PORT: u16 = 8080;
/// The peer's port.
pub const REMOTE_PORT: u16 = 40000;
/// The peer's ISN: script sequence numbers of inbound segments are relative to it.
const REMOTE_ISN: u32 = 1_000_000_000;
/// Where virtual time starts, ns.
const T0: u64 = 1_000_000_000;
/// Bytes of each socket's rings.
const RING: usize = 256 << 10;

/// What a run found: Ok, or the line that failed and why.
pub type Outcome = Result<(), String>;

/// Parses and runs `script` with the engine configured by `cfg` (its address is set to
/// [`LOCAL`]). Returns the header and the outcome; a script that does not parse is an error
/// of its own.
pub fn run(script: &str, cfg: EngineConfig) -> Result<(Header, Outcome), parse::ParseError> {
    let (header, events) = parse::parse(script)?;
    let mut r = Runner::new(cfg, header.tolerance_us);
    let outcome = r.run(&events);
    Ok((header, outcome))
}

/// A socket of the script's application.
#[allow(clippy::large_enum_variant)] // a handful per script
enum Fd {
    /// Made by `socket`, not yet listening or connected.
    Fresh { nodelay: bool },
    /// A listener and its accept queue.
    Listener { accepted: spsc::Receiver<Accepted> },
    /// A connection: its id, status and the application's ends of its rings.
    Conn {
        id: u64,
        shared: Arc<StatusHandle>,
        tx: bytes::Writer,
        rx: bytes::Reader,
    },
}

/// A socket's options the script set that shape later commands.
struct SockOpts {
    keepidle: u32,
    keepintvl: u32,
    keepcnt: u32,
    /// SO_LINGER with a zero timeout: close resets.
    abort: bool,
}

impl Default for SockOpts {
    /// Linux's keepalive defaults.
    fn default() -> SockOpts {
        SockOpts {
            keepidle: 7200,
            keepintvl: 75,
            keepcnt: 9,
            abort: false,
        }
    }
}

/// A frame the engine sent, parsed.
struct Sent {
    at: u64,
    repr: TcpRepr,
}

struct Runner {
    peer: MemPort,
    engine: Engine<MemPort>,
    cmds: spsc::Sender<Command>,
    clock: Arc<AtomicU64>,
    now: u64,
    peer_mac: MacAddr,
    host_mac: MacAddr,
    tolerance_ns: u64,
    fds: HashMap<i64, Fd>,
    opts: HashMap<i64, SockOpts>,
    out: VecDeque<Sent>,
    /// The engine's ISN, once its first SYN showed it.
    local_isn: Option<SeqNum>,
    /// The engine's first TSval.
    local_ts: Option<u32>,
    /// The engine's port (8080, or an active open's ephemeral port).
    local_port: u16,
    /// The IPv4 packet of each data segment the engine sent, by relative start (for ICMP
    /// quotes).
    sent_ip: HashMap<u32, Vec<u8>>,
}

fn ms(t: u64) -> String {
    format!("{:.3}", (t.saturating_sub(T0)) as f64 / 1e9)
}

impl Runner {
    fn new(mut cfg: EngineConfig, tolerance_us: u64) -> Runner {
        cfg.ip = LOCAL;
        cfg.prefix_len = 24;
        let none = Impairments::none();
        let (mut peer, port) = mem::pair_with_capacity(none, none, 1, 4096);
        let (clock, ns) = MemClock::manual();
        peer.set_clock(clock);
        ns.store(T0, Ordering::Release);
        let (cmds, rx) = spsc::channel(256);
        let engine = Engine::new(port, cfg, rx, Arc::new(Notify::default()), Instant(T0));
        let peer_mac = MacAddr(peer.mac());
        let host_mac = MacAddr(engine.port().mac());
        let mut r = Runner {
            peer,
            engine,
            cmds,
            clock: ns,
            now: T0,
            peer_mac,
            host_mac,
            tolerance_ns: tolerance_us * 1000,
            fds: HashMap::new(),
            opts: HashMap::new(),
            out: VecDeque::new(),
            local_isn: None,
            local_ts: None,
            local_port: LOCAL_PORT,
            sent_ip: HashMap::new(),
        };
        // The engine learns the peer's MAC from an ARP request for its address.
        let arp = r.arp_frame(
            MacAddr::BROADCAST,
            ArpRepr::request(peer_mac, REMOTE, LOCAL),
        );
        r.send_frame(&arp);
        r.poll();
        r.out.clear();
        r
    }

    fn run(&mut self, events: &[Event]) -> Outcome {
        let mut last = T0;
        for ev in events {
            let at = match ev.time {
                Time::Absolute(s) => T0 + (s * 1e9).round() as u64,
                Time::Relative(s) => last + (s * 1e9).round() as u64,
                Time::Any => last,
            };
            let line = ev.line;
            let r = match &ev.kind {
                Kind::Outbound(p) => self.expect(p, at, ev.time == Time::Any),
                other => self.advance(at).and_then(|()| self.act(other)),
            };
            r.map_err(|e| format!("line {line}: {e}"))?;
            // An outbound packet's time is when it came (packetdrill's live timing).
            last = if matches!(ev.kind, Kind::Outbound(_)) {
                self.now
            } else {
                at
            };
        }
        Ok(())
    }

    /// Moves virtual time to `at`, polling the engine at each of its deadlines on the way;
    /// a segment it sends meanwhile is unexpected.
    fn advance(&mut self, at: u64) -> Outcome {
        if at < self.now {
            // Events never go back in time: an earlier one ran late (outbound tolerance).
            return Ok(());
        }
        loop {
            if let Some(s) = self.out.front() {
                return Err(format!(
                    "unexpected packet at {}: {}",
                    ms(s.at),
                    self.describe(&s.repr)
                ));
            }
            if self.now >= at {
                return Ok(());
            }
            let deadline = self.engine.next_deadline().0;
            self.now = deadline.clamp(self.now + 1, at);
            self.poll();
        }
    }

    /// Waits (in virtual time) for the engine's next segment and checks it against `p`,
    /// which must come within the tolerance of `at` (any time when `any`).
    fn expect(&mut self, p: &Packet, at: u64, any: bool) -> Outcome {
        let tol = self.tolerance_ns;
        let latest = if any {
            self.now + 600_000_000_000
        } else {
            at + tol
        };
        loop {
            if let Some(s) = self.out.pop_front() {
                if !any && s.at + tol < at {
                    return Err(format!(
                        "{} came at {}, expected at {} (tolerance {} µs)",
                        self.describe(&s.repr),
                        ms(s.at),
                        ms(at),
                        tol / 1000
                    ));
                }
                return self.matches(p, &s.repr);
            }
            if self.now >= latest {
                return Err(format!(
                    "expected {} at {}; nothing was sent by {}",
                    show(p),
                    ms(at),
                    ms(self.now)
                ));
            }
            let deadline = self.engine.next_deadline().0;
            self.now = deadline.clamp(self.now + 1, latest);
            self.poll();
        }
    }

    /// Polls the engine at `now` until it has nothing left to do, and collects what it sent.
    fn poll(&mut self) {
        self.clock.store(self.now, Ordering::Release);
        for _ in 0..64 {
            if !self.engine.poll(Instant(self.now)) {
                break;
            }
        }
        let now = self.now;
        let mut got = Vec::new();
        let mut arp_asked = false;
        self.peer.rx_burst(4096, |frame, _| {
            let Ok((eth, payload)) = EthernetRepr::parse(frame) else {
                return;
            };
            if eth.ethertype == ETHERTYPE_ARP {
                // The engine's ARP cache ages out: the peer answers as a host does.
                arp_asked |= ArpRepr::parse(payload)
                    .is_ok_and(|a| a.op == wire::arp::ArpOp::Request && a.target_ip == REMOTE);
                return;
            }
            if eth.ethertype != ETHERTYPE_IPV4 {
                return;
            }
            let Ok(ip) = Ipv4Packet::new_checked(payload) else {
                return;
            };
            if ip.protocol() == PROTO_TCP {
                if let Ok((repr, _)) = TcpRepr::parse(ip.payload(), ip.src(), ip.dst(), true) {
                    got.push((repr, payload[..ip.total_len()].to_vec()));
                }
            }
        });
        for (repr, ip) in got {
            if repr.flags.syn() && self.local_isn.is_none() {
                self.local_isn = Some(repr.seq);
                self.local_port = repr.src_port;
            }
            if let (None, Some((val, _))) = (self.local_ts, repr.options.timestamps) {
                self.local_ts = Some(val);
            }
            if repr.payload_len > 0 {
                let rel = self.rel_local(repr.seq);
                self.sent_ip.insert(rel, ip);
            }
            self.out.push_back(Sent { at: now, repr });
        }
        if arp_asked {
            let reply = ArpRepr {
                op: wire::arp::ArpOp::Reply,
                sender_mac: self.peer_mac,
                sender_ip: REMOTE,
                target_mac: self.host_mac,
                target_ip: LOCAL,
            };
            let arp = self.arp_frame(self.host_mac, reply);
            self.send_frame(&arp);
            self.poll();
        }
    }

    fn rel_local(&self, s: SeqNum) -> u32 {
        s.0.wrapping_sub(self.local_isn.map_or(0, |i| i.0))
    }

    fn describe(&self, r: &TcpRepr) -> String {
        let ack = r.flags.ack().then(|| r.ack.0.wrapping_sub(REMOTE_ISN));
        let rel = self.rel_local(r.seq);
        let p = Packet {
            flags: r.flags.0,
            seq: rel,
            len: r.payload_len as u32,
            ack,
            win: Some(r.window),
            options: Some(self.options_of(&r.options)),
        };
        show(&p)
    }

    /// `o` as a script writes it (TSval relative to the engine's first, SACK blocks to the
    /// peer's ISN).
    fn options_of(&self, o: &TcpOptions) -> Vec<Opt> {
        let mut v = Vec::new();
        if let Some(m) = o.mss {
            v.push(Opt::Mss(m));
        }
        if o.sack_permitted {
            v.push(Opt::SackOk);
        }
        if let Some((val, ecr)) = o.timestamps {
            v.push(Opt::Ts(
                val.wrapping_sub(self.local_ts.unwrap_or(val)),
                Some(ecr),
            ));
        }
        if let Some(w) = o.window_scale {
            v.push(Opt::WScale(w));
        }
        if o.sack_len > 0 {
            let mut b = [(0, 0); 4];
            for (i, s) in o.sack_blocks().iter().enumerate() {
                b[i] = (
                    s.left.0.wrapping_sub(REMOTE_ISN),
                    s.right.0.wrapping_sub(REMOTE_ISN),
                );
            }
            v.push(Opt::Sack(b, o.sack_len));
        }
        v
    }

    fn matches(&self, p: &Packet, r: &TcpRepr) -> Outcome {
        let got = self.describe(r);
        let bad = |what: &str| Err(format!("{what}: expected {}, got {got}", show(p)));
        if r.flags.0 != p.flags {
            return bad("flags");
        }
        if self.rel_local(r.seq) != p.seq || r.payload_len as u32 != p.len {
            return bad("sequence or length");
        }
        if let Some(a) = p.ack {
            if r.ack.0.wrapping_sub(REMOTE_ISN) != a {
                return bad("ack");
            }
        }
        if p.win.is_some_and(|w| w != r.window) {
            return bad("window");
        }
        if let Some(want) = &p.options {
            let have = self.options_of(&r.options);
            let want: Vec<Opt> = want
                .iter()
                .copied()
                .filter(|o| !matches!(o, Opt::Nop | Opt::Eol))
                .collect();
            let same = want.len() == have.len()
                && want.iter().all(|w| {
                    have.iter().any(|h| match (w, h) {
                        // The engine's TSval is not compared; the echo is, when written.
                        (Opt::Ts(_, we), Opt::Ts(_, he)) => we.is_none() || we == he,
                        _ => w == h,
                    })
                });
            if !same {
                return bad("options");
            }
        }
        Ok(())
    }

    /// An Ethernet frame from the peer to `dst` carrying `arp`.
    fn arp_frame(&self, dst: MacAddr, arp: ArpRepr) -> Vec<u8> {
        let mut f = vec![0u8; 42];
        EthernetRepr {
            dst,
            src: self.peer_mac,
            ethertype: ETHERTYPE_ARP,
        }
        .emit(&mut f);
        arp.emit(&mut f[14..]);
        f
    }

    fn send_frame(&mut self, frame: &[u8]) {
        let tx = self.peer.tx();
        let sent = tx.transmit(frame.len(), |b| {
            b[..frame.len()].copy_from_slice(frame);
            frame.len()
        });
        assert!(sent, "the mem wire took no frame");
        tx.flush();
    }

    /// An IPv4 frame from the peer carrying `l4` of `protocol`.
    fn ipv4_frame(&self, protocol: u8, l4: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 34 + l4.len()];
        EthernetRepr {
            dst: self.host_mac,
            src: self.peer_mac,
            ethertype: ETHERTYPE_IPV4,
        }
        .emit(&mut f);
        Ipv4Repr {
            src: REMOTE,
            dst: LOCAL,
            protocol,
            ttl: 64,
            ident: 1,
            dont_frag: true,
            payload_len: l4.len(),
        }
        .emit(&mut f[14..]);
        f[34..].copy_from_slice(l4);
        f
    }

    fn inbound(&mut self, p: &Packet) -> Outcome {
        let mut o = TcpOptions::default();
        for opt in p.options.iter().flatten() {
            match *opt {
                Opt::Mss(m) => o.mss = Some(m),
                Opt::WScale(w) => o.window_scale = Some(w),
                Opt::SackOk => o.sack_permitted = true,
                Opt::Ts(val, ecr) => {
                    let base = self.local_ts.unwrap_or(0);
                    o.timestamps = Some((val, base.wrapping_add(ecr.unwrap_or(0))));
                }
                Opt::Sack(b, n) => {
                    let isn = self.local_isn.ok_or("a SACK before the engine's SYN")?;
                    for (i, (l, r)) in b.iter().take(usize::from(n)).enumerate() {
                        o.sack[i] = SackBlock {
                            left: isn + *l as usize,
                            right: isn + *r as usize,
                        };
                    }
                    o.sack_len = n;
                }
                Opt::Nop | Opt::Eol => {}
            }
        }
        let ack = match p.ack {
            // Before the engine sent a SYN (a segment to a closed port), as written.
            Some(a) => SeqNum(self.local_isn.map_or(0, |i| i.0).wrapping_add(a)),
            None => SeqNum(0),
        };
        let repr = TcpRepr {
            src_port: REMOTE_PORT,
            dst_port: self.local_port,
            seq: SeqNum(REMOTE_ISN.wrapping_add(p.seq)),
            ack,
            flags: TcpFlags(p.flags),
            window: p.win.unwrap_or(65535),
            urgent: 0,
            options: o,
            payload_len: p.len as usize,
        };
        let hl = repr.header_len();
        let mut l4 = vec![0u8; hl + p.len as usize];
        repr.emit_header(&mut l4[..hl]);
        for (i, b) in l4[hl..].iter_mut().enumerate() {
            *b = pattern(p.seq as usize + i);
        }
        wire::tcp::fill_checksum(&mut l4, REMOTE, LOCAL);
        let f = self.ipv4_frame(PROTO_TCP, &l4);
        self.send_frame(&f);
        self.poll();
        Ok(())
    }

    fn frag_needed(&mut self, mtu: u16, quoted: &Packet) -> Outcome {
        let ip = self
            .sent_ip
            .get(&quoted.seq)
            .ok_or_else(|| format!("the engine sent no segment at {}", quoted.seq))?;
        let msg = wire::icmp::Icmpv4Repr::DstUnreachable {
            code: wire::icmp::DST_UNREACH_FRAG_NEEDED,
            next_hop_mtu: mtu,
            data: &ip[..28.min(ip.len())],
        };
        let mut l4 = vec![0u8; msg.buffer_len()];
        msg.emit(&mut l4);
        let f = self.ipv4_frame(PROTO_ICMP, &l4);
        self.send_frame(&f);
        self.poll();
        Ok(())
    }

    fn act(&mut self, kind: &Kind) -> Outcome {
        match kind {
            Kind::Inbound(p) => self.inbound(p),
            Kind::FragNeeded { mtu, quoted } => self.frag_needed(*mtu, quoted),
            Kind::Call(c) => self.call(c),
            Kind::Assert(a) => self.assert(a),
            Kind::Outbound(_) => unreachable!("outbound packets are expected, not acted"),
        }
    }

    fn push(&mut self, c: Command) -> Outcome {
        self.cmds.push(c).map_err(|_| "the command ring is full")?;
        self.poll();
        Ok(())
    }
}

/// The byte at stream offset `i` of the data the script's peer and application send.
pub fn pattern(i: usize) -> u8 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes()[3]
}

/// `p` as a script line writes it.
pub fn show(p: &Packet) -> String {
    let mut f = String::new();
    for (bit, c) in [
        (0x02, 'S'),
        (0x01, 'F'),
        (0x04, 'R'),
        (0x08, 'P'),
        (0x20, 'U'),
        (0x40, 'E'),
        (0x80, 'W'),
        (0x10, '.'),
    ] {
        if p.flags & bit != 0 {
            f.push(c);
        }
    }
    let mut s = format!("{f} {}:{}({})", p.seq, p.seq.wrapping_add(p.len), p.len);
    if let Some(a) = p.ack {
        s += &format!(" ack {a}");
    }
    if let Some(w) = p.win {
        s += &format!(" win {w}");
    }
    if let Some(o) = &p.options {
        let parts: Vec<String> = o
            .iter()
            .map(|o| match o {
                Opt::Mss(m) => format!("mss {m}"),
                Opt::WScale(w) => format!("wscale {w}"),
                Opt::SackOk => "sackOK".into(),
                Opt::Ts(v, e) => match e {
                    Some(e) => format!("TS val {v} ecr {e}"),
                    None => format!("TS val {v} ecr *"),
                },
                Opt::Sack(b, n) => {
                    let bs: Vec<String> = b[..usize::from(*n)]
                        .iter()
                        .map(|(l, r)| format!("{l}:{r}"))
                        .collect();
                    format!("sack {}", bs.join(" "))
                }
                Opt::Nop => "nop".into(),
                Opt::Eol => "eol".into(),
            })
            .collect();
        s += &format!(" <{}>", parts.join(","));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: &str = "// RFC 9293 §3.5: x\n\
        0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n\
        +0 listen(3, 1) = 0\n\
        +0 < S 0:0(0) win 65535 <mss 1460>\n";

    fn outcome(body: &str) -> Outcome {
        let (_, o) = run(&format!("{OPEN}{body}"), EngineConfig::default()).expect("parses");
        o
    }

    #[test]
    fn a_matching_script_passes() {
        assert_eq!(outcome("+0 > S. 0:0(0) ack 1 <mss 1460>\n"), Ok(()));
    }

    #[test]
    fn each_kind_of_mismatch_fails_naming_its_line() {
        let cases = [
            ("+0 > R. 0:0(0) ack 1 <mss 1460>\n", "line 5: flags"),
            ("+0 > S. 0:0(0) ack 2 <mss 1460>\n", "line 5: ack"),
            ("+0 > S. 0:0(0) ack 1 win 100\n", "line 5: window"),
            ("+0 > S. 0:0(0) ack 1 <mss 1000>\n", "line 5: options"),
            ("+0 > S. 0:1(1) ack 1\n", "line 5: sequence or length"),
            (
                "+.5 > S. 0:0(0) ack 1\n",
                "came at 0.000, expected at 0.500",
            ),
            (
                "+0 listen(3, 1) = 0\n",
                "line 5: unexpected packet at 0.000: S.",
            ),
            (
                "+0 > S. 0:0(0) ack 1\n+0 > . 1:1(0) ack 1\n",
                "line 6: expected . 1:1(0) ack 1 at 0.000; nothing was sent",
            ),
            (
                "+0 > S. 0:0(0) ack 1\n+0 %{ assert tcpi_state == TCP_ESTABLISHED }%\n",
                "failed: it is 3",
            ),
            (
                "+0 > S. 0:0(0) ack 1\n+0 frob(3) = 0\n",
                "no socket call \"frob\"",
            ),
        ];
        for (body, want) in cases {
            let e = outcome(body).expect_err(body);
            assert!(e.contains(want), "{body}: {e}");
        }
    }
}
