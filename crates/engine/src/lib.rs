//! The corestack engine: one run-to-completion loop per core.
//!
//! Each call to [`Engine::poll`] does one iteration: receive a burst from
//! the port and process it (Ethernet, ARP, IPv4, ICMP, UDP, TCP), take the
//! applications' commands, run due timers, emit TCP output for every
//! connection that has some, and flush the port's tx queue once. The caller
//! reads the clock once per iteration and passes it in.
//!
//! Threading: an engine is owned by one thread. Applications reach it only
//! through the command ring and the per-socket byte rings of `appif`.
//!
//! Layers, a folder each (its `mod.rs` says what it owns), in the order a
//! frame meets them:
//! - receive: `ip::rx` (Ethernet, ARP into `link`, IPv4 with reassembly
//!   in `ip::frag`; IPv6 in `ip::rx6` with `ip::frag6`, ICMPv6 in
//!   `ip::icmpv6`, Neighbor Discovery in `link::nd`) → `ip::icmp` | `udp` |
//!   `tcp::demux` → the Tcb (`tcp`: the state machine, sans I/O) or
//!   `tcp::listen` (passive open, `tcp::syncookie`) → `app::rings` (the
//!   application's byte rings as TCP sees them) → `app::events` (what TCP
//!   reports reaches the application's status block and accept queue);
//! - send: `app::commands` (what applications ask) → `tcp::tx` (TCP output
//!   to frames, its payload from `app::rings`; either family, over
//!   `ip::family::TcpEgress`) →
//!   `ip::egress` (IPv4 and Ethernet headers, next hop from `link::arp`;
//!   IPv6 in `ip::egress6` with `link::neighbor` and `ip::pmtu`) → the port;
//! - around them: `sockets` (the socket and flow tables, where every layer
//!   finds its socket), `steer` (flows among several engines), `obs`
//!   (counters, what `corestack stat`, `ss`, `trace` and `capture` read),
//!   `wheel` (timers), `config`, `time`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod app;
mod config;
mod ip;
mod link;
mod obs;
mod sockets;
pub mod steer;
pub mod tcp;
pub mod time;
mod udp;
pub mod wheel;

pub use config::{link_local_from_mac, EngineConfig, Ipv6Config, PollPolicy};
// The layers' public modules, under the paths other crates name them by.
pub use ip::{egress, egress6, frag, frag6, pmtu};
pub use link::{arp, neighbor};
pub use obs::{publish, stats};
pub use tcp::syncookie;

use crate::ip::egress::Egress;
use crate::obs::stats::Stats;
use crate::sockets::{Conn, Socket, Sockets};
use crate::tcp::IsnGenerator;
use crate::time::Instant;
use crate::wheel::TimerWheel;
use appif::command::{Command, Owner};
use appif::errno;
use appif::notify::Notify;
use appif::seg::AcceptQueue;
use appif::spsc;
use core::time::Duration;
use nic::{Port, TxQueue};
use std::sync::Arc;
use wire::MacAddr;

/// Commands taken per iteration.
pub(crate) const CMD_BURST: usize = 64;
/// Receive bursts one iteration takes at most, while they come back full
/// (2048 frames at the default burst): a backlog in the NIC's rx ring, such
/// as one message from each of 20 000 connections at once, moves into the
/// connections' rings before the ring overflows.
pub const RX_BURSTS: usize = 32;
/// Interval of the slow housekeeping pass (ARP and Neighbor Discovery
/// retries, Duplicate Address Detection, orphan sweep).
const HOUSEKEEPING: Duration = Duration::from_millis(100);
/// Socket slots one housekeeping pass looks at, resuming where the last
/// stopped: the pass costs the same at any number of sockets, and a
/// vanished application is found within `slots / HOUSEKEEPING_SLOTS`
/// passes (10 s at 100 000 sockets).
const HOUSEKEEPING_SLOTS: usize = 1024;
/// How long a connection stays still before housekeeping gives back what
/// it does not use (empty rings' pages, an empty retransmission queue):
/// long enough that a connection exchanging messages keeps its memory.
const IDLE_RELEASE: Duration = Duration::from_secs(1);

/// One engine: a port and the protocol state behind it.
pub struct Engine<P: Port> {
    port: P,
    protocols: Protocols,
    /// Where frames go while `corestack capture` has capture on.
    capture: observe::capture::Capturer,
}

/// Everything except the port, so that the port's rx burst can lend its
/// tx side to the protocols while it reads. Its methods are the layers':
/// each file with an `impl Protocols` names in its doc the fields it touches.
pub(crate) struct Protocols {
    pub cfg: EngineConfig,
    pub egress: Egress,
    pub stats: Stats,
    pub sockets: Sockets,
    /// IPv4 reassembly contexts, allocated at start.
    pub frag: ip::frag::Reassembler,
    /// IPv6: addresses, neighbors, path MTUs; None while IPv6 is off.
    pub ip6: Option<ip::egress6::Egress6>,
    /// IPv6 reassembly contexts, allocated at start when IPv6 is on.
    pub frag6: ip::frag6::Reassembler6,
    timers: TimerWheel,
    expired: Vec<(Instant, u32)>,
    dirty: Vec<u32>,
    dirty_scratch: Vec<u32>,
    commands: spsc::Receiver<Command>,
    /// Bumped once per iteration in which any socket changed.
    wake: Arc<Notify>,
    pub woke: bool,
    isn: IsnGenerator,
    cookies: tcp::syncookie::SynCookies,
    last_housekeeping: Instant,
    /// The slot the next housekeeping pass starts at.
    housekeeping_cursor: usize,
    icmp_tokens: u32,
    icmp_refill: Instant,
    pub now: Instant,
    /// Service-mode associations whose application broke a ring's indices
    /// (found by housekeeping), not yet taken by the daemon.
    violations: Vec<u32>,
    /// Stage timestamps for `corestack trace` (off unless switched on).
    pub(crate) trace: obs::trace::EngineTrace,
    /// This engine's place among several ([`Engine::join`]); None: the
    /// only engine, which owns every flow.
    pub(crate) handoff: Option<steer::Handoff>,
    /// One handoff record at a time, while it is handled.
    handoff_scratch: Vec<u8>,
    /// The link-layer source of the IPv4 TCP segment being handled when
    /// it came from on-link, else ZERO (for `tcp::demux`'s `glean_syn`).
    rx_link_src: MacAddr,
}

impl<P: Port> Engine<P> {
    /// An engine on `port` taking commands from `commands`; `wake` is
    /// notified after every iteration that changed a socket.
    pub fn new(
        port: P,
        mut cfg: EngineConfig,
        commands: spsc::Receiver<Command>,
        wake: Arc<Notify>,
        now: Instant,
    ) -> Self {
        let mtu = port.mtu();
        cfg.tcp.mss = cfg.tcp.mss.min((mtu - 40) as u16);
        let mut egress = Egress::new(
            MacAddr(port.mac()),
            cfg.ip,
            cfg.prefix_len,
            cfg.gateway,
            mtu,
            link::arp::ArpCache::new(cfg.arp_entries, cfg.arp_waiting),
        );
        let mut ip6 = cfg
            .ipv6
            .as_ref()
            .map(|c| ip::egress6::Egress6::new(MacAddr(port.mac()), c, mtu));
        let frag6 = if ip6.is_some() {
            ip::frag6::Reassembler6::new(ip::frag6::FRAG6_CONTEXTS)
        } else {
            ip::frag6::Reassembler6::default()
        };
        let caps = port.capabilities();
        if caps.rx_checksum {
            cfg.verify_checksums = false;
        }
        // A port that cuts segments completes their checksums too.
        egress.tcp_checksum_offload = caps.tx_tcp_checksum || caps.tx_gso_max > 0;
        egress.offloads = ip::family::TcpOffloads {
            gso_max: caps.tx_gso_max,
            gather: caps.tx_gather && egress.tcp_checksum_offload,
        };
        if let Some(e6) = ip6.as_mut() {
            e6.offloads = egress.offloads;
        }
        let max = cfg.max_sockets;
        let mut sockets = Sockets::new(max);
        sockets.growth_limit = cfg.buffer_growth_limit;
        let (lo, hi) = cfg.ephemeral_ports;
        if 0 < lo && lo <= hi {
            sockets.ephemeral = (lo, hi);
        }
        Engine {
            port,
            capture: observe::capture::Capturer::off(),
            protocols: Protocols {
                egress,
                stats: Stats::default(),
                sockets,
                frag: ip::frag::Reassembler::new(ip::frag::FRAG_CONTEXTS),
                ip6,
                frag6,
                timers: TimerWheel::new(now, 64),
                // Lists that grow with the live load, from a start that
                // serves small servers without reallocating.
                expired: Vec::with_capacity(max.clamp(64, sockets::INITIAL_SLOTS)),
                dirty: Vec::with_capacity(max.min(sockets::INITIAL_SLOTS)),
                dirty_scratch: Vec::with_capacity(max.min(sockets::INITIAL_SLOTS)),
                commands,
                wake,
                woke: false,
                isn: IsnGenerator::new(),
                cookies: tcp::syncookie::SynCookies::new(),
                last_housekeeping: now,
                housekeeping_cursor: 0,
                icmp_tokens: cfg.icmp_errors_per_sec,
                icmp_refill: now,
                now,
                violations: Vec::new(),
                trace: obs::trace::EngineTrace::new(observe::trace::Tracer::off()),
                handoff: None,
                handoff_scratch: Vec::new(),
                rx_link_src: MacAddr::ZERO,
                cfg,
            },
        }
    }

    /// One iteration at time `now`. Returns true if it did any work.
    /// A `now` earlier than the last iteration's is taken as that one's
    /// (counted in `clock_backwards`): the engine's time never goes back.
    ///
    /// It receives bursts of `rx_burst` frames while they come back full,
    /// up to [`RX_BURSTS`] of them: a backlog in the NIC's rx ring moves
    /// into the connections' rings (bounded by their windows) instead of
    /// overflowing the NIC ring while the application takes its turn.
    pub fn poll(&mut self, now: Instant) -> bool {
        let Engine {
            port,
            protocols,
            capture,
        } = self;
        protocols.set_now(now);
        let burst = protocols.cfg.rx_burst;
        if capture.on() {
            // `corestack capture`: frames in are copied as they are taken,
            // frames out as they are handed to the port.
            let rx = drain_rx(port, burst, |rx, tx| {
                let tx = &mut obs::capture::Captured {
                    inner: tx,
                    cap: capture,
                };
                match rx {
                    Rx::Frame(frame) => {
                        tx.cap.frame(observe::capture::Direction::In, frame, None);
                        protocols.handle_frame(frame, tx)
                    }
                    Rx::More => protocols.between_bursts(tx),
                }
            });
            let tx = &mut obs::capture::Captured {
                inner: port.tx(),
                cap: capture,
            };
            let handed = protocols.take_handoff(tx);
            protocols.after_rx(rx + handed, tx)
        } else {
            let rx = drain_rx(port, burst, |rx, tx| match rx {
                Rx::Frame(frame) => protocols.handle_frame(frame, tx),
                Rx::More => protocols.between_bursts(tx),
            });
            let handed = protocols.take_handoff(port.tx());
            protocols.after_rx(rx + handed, port.tx())
        }
    }

    /// Makes this engine one of several ([`steer::handoff_mesh`] gives
    /// each its `handoff`): it then keeps only the flows it owns, hands
    /// every other frame to its owner, picks local ports of active opens
    /// that hash to itself, and numbers the sockets it creates with its
    /// index ([`appif::socket::with_engine`]). Call before the first poll.
    pub fn join(&mut self, handoff: steer::Handoff) {
        let me = handoff.me();
        self.protocols.sockets.set_engine_index(me);
        self.protocols.handoff = Some(handoff);
    }

    /// This engine's index among several (0 when it is the only one).
    pub fn index(&self) -> usize {
        self.protocols.handoff.as_ref().map_or(0, |h| h.me())
    }

    /// Sends this engine's frames to `capturer` while `corestack capture`
    /// has it on; an engine starts with an unshared capturer that stays off.
    pub fn set_capturer(&mut self, capturer: observe::capture::Capturer) {
        self.capture = capturer;
    }

    /// Sends this engine's trace records to `tracer` (`corestack trace`
    /// switches them on through its segment); an engine starts with an
    /// unshared tracer that stays off.
    pub fn set_tracer(&mut self, tracer: observe::trace::Tracer) {
        self.protocols.trace = obs::trace::EngineTrace::new(tracer);
    }

    /// The tracer this engine's records go to.
    pub fn tracer(&self) -> &observe::trace::Tracer {
        self.protocols.trace.tracer()
    }

    /// Applies one application command now, at time `now` (the daemon's
    /// path: it reads commands from application segments itself, so the
    /// order between a Close and a slot's next use is exact).
    pub fn submit(&mut self, cmd: Command, now: Instant) {
        self.protocols.set_now(now);
        let tx = self.port.tx();
        if self.capture.on() {
            let tx = &mut obs::capture::Captured {
                inner: tx,
                cap: &self.capture,
            };
            self.protocols.command(cmd, tx);
        } else {
            self.protocols.command(cmd, tx);
        }
    }

    /// True when application commands wait to be taken, or frames other
    /// engines handed over: what an engine about to nap looks at once more.
    pub fn has_commands(&self) -> bool {
        !self.protocols.commands.is_empty()
            || self
                .protocols
                .handoff
                .as_ref()
                .is_some_and(|h| h.has_records())
    }

    /// The port's receive fd, to sleep on while idle (None for ports without one).
    pub fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        self.port.rx_fd()
    }

    /// The port the engine drives.
    pub fn port(&self) -> &P {
        &self.port
    }

    /// When the engine next has timed work: the earliest TCP timer held
    /// (RTO, delayed ACK, probes, TIME-WAIT, ...; possibly one no longer
    /// wanted), the first TIME-WAIT record's expiry or the next
    /// housekeeping pass. A simulation on a manual clock may skip
    /// straight to it while nothing else happens. O(timer entries).
    pub fn next_deadline(&self) -> Instant {
        let s = &self.protocols.sockets;
        let housekeeping = self.protocols.last_housekeeping + HOUSEKEEPING;
        [
            self.protocols.timers.next_deadline(),
            s.tw.next_deadline(),
            s.tw6.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .fold(housekeeping, Instant::min)
    }

    /// Calls `f` with every TCP connection's control block (for tests and
    /// diagnostics, e.g. to print both ends of a stalled connection).
    pub fn for_each_tcb(&self, mut f: impl FnMut(&tcp::Tcb)) {
        for sock in self.protocols.sockets.slots.iter().flatten() {
            if let Socket::Tcp(c) = sock {
                f(&c.tcb);
            }
        }
    }

    /// The link MTU in bytes.
    pub fn mtu(&self) -> usize {
        self.port.mtu()
    }

    /// The path MTU toward IPv6 destination `dst` in bytes (RFC 8201):
    /// what a Packet Too Big taught, never below 1280, for 10 minutes;
    /// else the link MTU (also while IPv6 is off). For TCP's MSS once it
    /// runs over IPv6. O(`pmtu::PMTU_ENTRIES`).
    pub fn pmtu_v6(&self, dst: core::net::Ipv6Addr) -> usize {
        self.protocols.pmtu_v6(dst)
    }

    /// The IPv6 interface (addresses and their DAD state, neighbor cache,
    /// path MTUs); None while IPv6 is off.
    pub fn ipv6(&self) -> Option<&ip::egress6::Egress6> {
        self.protocols.ip6.as_ref()
    }

    /// Counters so far, the TCP counters of open connections included
    /// (folded into the engine's as each connection runs), and the port's
    /// receive drops (one system call on AF_XDP). O(1).
    pub fn stats(&self) -> Stats {
        let mut s = self.protocols.stats.clone();
        let drops = self.port.rx_drops();
        s.rx_ring_full = drops.ring_full;
        s.rx_fill_empty = drops.fill_empty;
        s.rx_port_dropped = drops.other;
        s
    }

    /// Calls `f` with a row for every socket: TCP connections with their
    /// windows and timers, listeners and UDP sockets, and the TIME-WAIT
    /// records (for `corestack ss`). O(sockets); allocates nothing.
    pub fn for_each_socket(&self, mut f: impl FnMut(observe::stats_shm::ConnRow)) {
        let s = &self.protocols.sockets;
        for sock in s.slots.iter().flatten() {
            f(obs::rows::socket_row(sock));
        }
        (0..s.time_wait_positions()).for_each(|i| s.time_wait_row(i).map_or((), &mut f));
    }

    /// [`Engine::for_each_socket`] over at most `visit` slots from slot
    /// `start` on, wrapping around the table; returns the slot to resume
    /// at. O(`visit`) whatever the number of sockets: what a periodic
    /// publication can afford.
    pub fn for_each_socket_from(
        &mut self,
        start: usize,
        visit: usize,
        mut f: impl FnMut(observe::stats_shm::ConnRow),
    ) -> usize {
        // Positions: the slots, then the TIME-WAIT records'.
        let s = &self.protocols.sockets;
        let slots = &s.slots;
        let len = slots.len() + s.time_wait_positions();
        let visit = visit.min(len);
        let start = if start < len { start } else { 0 };
        for k in 0..visit {
            let i = (start + k) % len;
            if let Some(sock) = slots.get(i) {
                if let Some(sock) = sock {
                    f(obs::rows::socket_row(sock));
                }
            } else if let Some(row) = s.time_wait_row(i - slots.len()) {
                f(row);
            }
        }
        self.protocols.stats.published_slots += visit as u64;
        (start + visit) % len.max(1)
    }

    /// Drops every socket of service-mode association `assoc` (its
    /// application died, broke the protocol, or the daemon is stopping)
    /// but those `keep` names (another process holds them too: a forked
    /// child's inherited connections and listeners): connections are reset
    /// (RST to each peer) and every socket is closed with `errno` and
    /// removed, which frees the association's slots and, with the last of
    /// them, the engine's mapping of its segment. A connection the
    /// application had closed already is not reset: it delivers what it
    /// holds and ends as TCP ends it, as Linux's do after their process
    /// exits. O(sockets). Returns the number of sockets dropped.
    pub fn drop_owner(
        &mut self,
        assoc: u32,
        errno: i32,
        now: Instant,
        keep: impl Fn(appif::socket::SockId) -> bool,
    ) -> usize {
        self.protocols.set_now(now);
        let n = self.reset_where(
            |s| {
                s.owner() == Owner::association(assoc)
                    && !keep(s.id())
                    && !matches!(s, Socket::Tcp(c) if c.app_closed)
            },
            errno,
        );
        self.protocols.violations.retain(|&a| a != assoc);
        n
    }

    /// Marks the listeners among `ids` orphaned (their application is gone;
    /// they stay for the processes that share their port, see
    /// `Listener::orphaned` in the socket table) and resets the connections waiting
    /// in their accept queues, which nobody will accept. O(sockets).
    pub fn orphan_listeners(&mut self, ids: &[appif::socket::SockId], now: Instant) {
        self.protocols.set_now(now);
        for &id in ids {
            let Some(&slot) = self.protocols.sockets.ids.get(&id) else {
                continue;
            };
            match self.protocols.sockets.slots.get_mut(slot as usize) {
                Some(Some(Socket::Listener(l))) => l.orphaned = true,
                _ => continue,
            }
            for s in 0..self.protocols.sockets.slots.len() as u32 {
                if let Some(c) = self.protocols.sockets.conn(s) {
                    if c.listener == Some(slot) {
                        c.listener = None;
                        c.app_closed = true;
                        c.tcb.abort();
                        self.protocols.mark_dirty(s);
                    }
                }
            }
        }
    }

    /// True when `id` names a TCP connection handed to its application and
    /// not closed by it (what a `Desc::Lend` may pass). O(1).
    pub fn is_open_conn(&self, id: appif::socket::SockId) -> bool {
        let sockets = &self.protocols.sockets;
        sockets
            .ids
            .get(&id)
            .and_then(|&slot| sockets.slots.get(slot as usize)?.as_ref())
            .is_some_and(|s| matches!(s, Socket::Tcp(c) if !c.app_closed && !c.unaccepted()))
    }

    /// The ids of the sockets of service-mode association `assoc` that a
    /// fork shares with the child: TCP connections handed to it and not
    /// closed, listeners and UDP sockets. O(sockets).
    pub fn sockets_of(&self, assoc: u32) -> Vec<appif::socket::SockId> {
        self.protocols
            .sockets
            .slots
            .iter()
            .flatten()
            .filter(|s| s.owner() == Owner::association(assoc))
            .filter(|s| match s {
                Socket::Tcp(c) => !c.app_closed && !c.unaccepted(),
                Socket::Listener(_) | Socket::Udp(_) => true,
            })
            .map(Socket::id)
            .collect()
    }

    /// Closes with `errno`, resets (RST to the peer) and removes every
    /// socket `chosen` picks. Returns how many.
    fn reset_where(&mut self, chosen: impl Fn(&Socket) -> bool, errno: i32) -> usize {
        let protocols = &mut self.protocols;
        let picked = |s: &Option<Socket>| s.as_ref().is_some_and(&chosen);
        let mut n = 0;
        for slot in 0..protocols.sockets.slots.len() as u32 {
            if !picked(&protocols.sockets.slots[slot as usize]) {
                continue;
            }
            // Told first: sending the RST may already remove a connection.
            if let Some(s) = protocols.sockets.slots[slot as usize].as_ref() {
                s.shared().set_closed(errno);
                n += 1;
            }
            if let Some(c) = protocols.sockets.conn(slot) {
                c.app_closed = true;
                c.tcb.abort();
            }
            protocols.mark_dirty(slot);
        }
        let tx = self.port.tx();
        protocols.flush_output(tx);
        tx.flush();
        for slot in 0..protocols.sockets.slots.len() as u32 {
            if !picked(&protocols.sockets.slots[slot as usize]) {
                continue;
            }
            protocols.leave_group(slot);
            if let Some(Socket::Tcp(mut c)) = protocols.sockets.remove(slot) {
                protocols.stats.fold_tcb(c.tcb.stats(), &mut c.counted);
            }
        }
        n
    }

    /// Moves the associations found breaking their rings since the last
    /// call into `out`.
    pub fn take_violations(&mut self, out: &mut Vec<u32>) {
        out.append(&mut self.protocols.violations);
    }

    /// Resets every connection (RST to each peer) and closes every socket:
    /// what a stopping engine owes its peers and applications.
    pub fn shutdown(&mut self, now: Instant) {
        // Take what the applications asked for last (a close becomes a FIN).
        self.poll(now);
        self.protocols.set_now(now);
        self.reset_where(|_| true, errno::ECONNRESET);
        self.protocols.wake.notify();
    }
}

/// What [`drain_rx`] hands its handler: a frame, or the end of a full
/// burst with more to come.
enum Rx<'a> {
    Frame(&'a [u8]),
    More,
}

/// Bursts of `burst` frames from `port` to `handle` while they come back
/// full, up to [`RX_BURSTS`]; after each full burst `handle` gets
/// [`Rx::More`] (the output of the connections it touched goes out then,
/// `Protocols::between_bursts`). Returns the frames taken.
fn drain_rx<P: Port>(
    port: &mut P,
    burst: usize,
    mut handle: impl FnMut(Rx<'_>, &mut P::Tx),
) -> usize {
    let mut rx = 0;
    for _ in 0..RX_BURSTS {
        let n = port.rx_burst(burst, |frame, tx| handle(Rx::Frame(frame), tx));
        rx += n;
        if n < burst {
            break;
        }
        handle(Rx::More, port.tx());
    }
    rx
}

impl Protocols {
    /// Moves the engine's clock to `now`, never back: an earlier `now` (a
    /// caller that read the clock before it waited for the engine) leaves
    /// it where it is and counts in `clock_backwards`.
    fn set_now(&mut self, now: Instant) {
        if now < self.now {
            self.stats.clock_backwards += 1;
        } else {
            self.now = now;
        }
    }

    /// Between two full receive bursts of one iteration: the connections
    /// the burst touched send their ACKs (and what else is due) now, and
    /// the port gets them, as a kernel answers segment by segment while it
    /// works through a backlog. Deferred to the end of the iteration, a
    /// backlog of up to [`RX_BURSTS`] bursts (after the engine lost its CPU
    /// for a few ms) got one batch of ACKs, which can report only so many
    /// of the out-of-order ranges it brought: a SACK sender's RACK took
    /// the ranges left out for lost and sent them again (issue 35).
    fn between_bursts<T: TxQueue>(&mut self, tx: &mut T) {
        self.flush_output(tx);
        tx.flush();
    }

    /// The rest of an iteration after the receive burst (`rx` frames):
    /// commands, timers, housekeeping, output, one flush, one wake-up.
    fn after_rx<T: TxQueue>(&mut self, rx: usize, tx: &mut T) -> bool {
        let now = self.now;
        let cmds = self.take_commands(tx);
        self.run_timers();
        if now.saturating_since(self.last_housekeeping) >= HOUSEKEEPING {
            self.last_housekeeping = now;
            self.housekeeping(tx);
        }
        let out = self.flush_output(tx);
        tx.flush();
        self.trace.flushed();
        if let Some(h) = self.handoff.as_mut() {
            h.ring();
        }
        if self.woke {
            self.woke = false;
            self.wake.notify();
        }
        rx > 0 || cmds > 0 || out > 0
    }

    pub(crate) fn mark_dirty(&mut self, slot: u32) {
        if let Some(c) = self.sockets.conn(slot) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(slot);
            }
        }
    }

    /// Asks the wheel to call back `slot` by the TCB's next deadline.
    pub(crate) fn arm_timer(&mut self, slot: u32) {
        let Some(c) = self.sockets.conn(slot) else {
            return;
        };
        let Some(at) = c.tcb.next_timeout() else {
            return;
        };
        match c.timer_at {
            Some(cur) if cur <= at && cur > self.now => {}
            _ => {
                c.timer_at = Some(at);
                self.timers.schedule(slot, at);
            }
        }
    }

    /// Fires due timers.
    fn run_timers(&mut self) {
        let mut expired = core::mem::take(&mut self.expired);
        self.stats.timer_entries_scanned += self.timers.expire(self.now, &mut expired) as u64;
        for &(at, slot) in &expired {
            let now = self.now;
            let Some(c) = self.sockets.conn(slot) else {
                continue;
            };
            if c.timer_at != Some(at) {
                continue; // superseded
            }
            c.timer_at = None;
            self.stats.timers_fired += 1;
            let Conn { tcb, tx, .. } = &mut *c;
            let ev = tcb.on_timer(now, &*tx);
            self.after_tcp(slot, ev);
        }
        expired.clear();
        self.expired = expired;
        self.expire_time_waits();
    }

    /// ARP retries, and connections whose application vanished without
    /// closing them (its ends of the rings were dropped) or that idled for
    /// [`IDLE_RELEASE`] (their unused memory is given back), looked for in
    /// the next [`HOUSEKEEPING_SLOTS`] slots.
    fn housekeeping<T: TxQueue>(&mut self, tx: &mut T) {
        let now = self.now;
        self.egress.poll_arp(tx, &mut self.stats, now);
        self.frag.expire(now, &mut self.stats);
        if let Some(e6) = self.ip6.as_mut() {
            e6.poll_nd(tx, &mut self.stats, now);
            self.frag6.expire(now, &mut self.stats);
        }
        let len = self.sockets.slots.len();
        let visit = len.min(HOUSEKEEPING_SLOTS);
        let start = if self.housekeeping_cursor < len {
            self.housekeeping_cursor
        } else {
            0
        };
        self.housekeeping_cursor = (start + visit) % len.max(1);
        self.stats.housekeeping_slots += visit as u64;
        for k in 0..visit {
            let slot = ((start + k) % len) as u32;
            if let Some(Socket::Tcp(c)) = self.sockets.slots[slot as usize].as_mut() {
                if c.app_ends.is_none()
                    && now.saturating_since(c.tcb.last_activity()) >= IDLE_RELEASE
                {
                    let freed = c.tcb.release_idle() + c.tx.release_pages() + c.rx.release_pages();
                    self.stats.idle_bytes_released += freed as u64;
                }
            }
            let orphan = match self.sockets.slots[slot as usize].as_ref() {
                Some(Socket::Tcp(c)) => {
                    !c.app_closed
                        && c.app_ends.is_none()
                        && c.listener.is_none()
                        && c.tx.is_orphaned()
                }
                Some(Socket::Listener(l)) => l.accept.is_disconnected(),
                Some(Socket::Udp(u)) => u.rx.is_orphaned(),
                None => false,
            };
            // Rings of service-mode applications: an impossible index is a
            // protocol violation that costs the application its association.
            let violated = match self.sockets.slots[slot as usize].as_ref() {
                Some(Socket::Tcp(c)) => (c.tx.violated() || c.rx.violated()).then_some(c.owner),
                Some(Socket::Udp(u)) => (u.tx.violated() || u.rx.violated()).then_some(u.owner),
                Some(Socket::Listener(l)) => match &l.accept {
                    AcceptQueue::AppSegment(q) => q.violated().then_some(l.owner),
                    AcceptQueue::Local(_) => None,
                },
                None => None,
            };
            if let Some(assoc) = violated.and_then(Owner::assoc) {
                if !self.violations.contains(&assoc) {
                    self.violations.push(assoc);
                }
            }
            if orphan {
                self.close(slot);
            }
        }
    }
}
