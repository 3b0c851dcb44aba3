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
#![forbid(unsafe_code)]

pub mod arp;
mod commands;
pub mod frag;
mod input;
pub mod link;
pub mod publish;
mod sockets;
pub mod stats;
pub mod syncookie;
pub mod tcp;
pub mod time;
pub mod timer;

use crate::link::{Gso, Link};
use crate::sockets::{apply_events, libc_errno, Conn, Socket, Sockets};
use crate::stats::Stats;
use crate::tcp::{IsnGenerator, State, TcpConfig};
use crate::time::Instant;
use crate::timer::TimerWheel;
use appif::notify::Notify;
use appif::socket::{AcceptQueue, Command, SockState};
use appif::spsc;
use core::net::{Ipv4Addr, SocketAddrV4};
use core::time::Duration;
use nic::{Port, TxQueue};
use std::sync::Arc;
use wire::MacAddr;

pub use sockets::errno_of;

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// Subnet prefix length in bits.
    pub prefix_len: u8,
    /// Next hop for destinations off the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// TCP defaults for every connection.
    pub tcp: TcpConfig,
    /// Sockets of all kinds, including connections in TIME-WAIT.
    pub max_sockets: usize,
    /// RX and TX ring size in bytes of connections the engine accepts,
    /// when they start (embedded and inline mode; service-mode rings come
    /// from the application's segment).
    pub ring_bytes: usize,
    /// The most a ring of a connection the engine accepts may grow to,
    /// bytes (receive-window auto-tuning and send-buffer growth, see
    /// [`TcpConfig::rcv_buf_max`] and [`TcpConfig::snd_buf_max`]); that
    /// much address space is reserved per ring, memory is used only as the
    /// ring grows. Default 8 MiB.
    pub ring_max_bytes: usize,
    /// Ring memory each application may add by growing its connections'
    /// rings beyond their starting sizes, bytes; past it a connection
    /// keeps the rings it has. Default 256 MiB.
    pub buffer_growth_limit: usize,
    /// Frames received per iteration at most.
    pub rx_burst: usize,
    /// ARP cache entries.
    pub arp_entries: usize,
    /// Frames that may wait for ARP resolution.
    pub arp_waiting: usize,
    /// ICMP error messages per second at most (like Linux icmp_ratelimit).
    pub icmp_errors_per_sec: u32,
    /// Verify checksums of received packets in software.
    pub verify_checksums: bool,
    /// Answer SYNs with SYN cookies when a listener's SYN queue is full
    /// (RFC 4987; Linux tcp_syncookies=1) instead of dropping them.
    pub syn_cookies: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            ip: Ipv4Addr::UNSPECIFIED,
            prefix_len: 24,
            gateway: None,
            tcp: TcpConfig::default(),
            max_sockets: 4096,
            ring_bytes: 256 * 1024,
            ring_max_bytes: 8 << 20,
            buffer_growth_limit: 256 << 20,
            rx_burst: 64,
            arp_entries: 256,
            arp_waiting: 64,
            icmp_errors_per_sec: 1000,
            verify_checksums: true,
            syn_cookies: true,
        }
    }
}

/// The ECT(0) codepoint in the IPv4 TOS byte (RFC 3168 §5).
const ECT0: u8 = 0b10;
/// Segments one connection may emit per iteration.
const TCP_BURST: usize = 64;
/// Commands taken per iteration.
pub(crate) const CMD_BURST: usize = 64;
/// Interval of the slow housekeeping pass (ARP retries, orphan sweep).
const HOUSEKEEPING: Duration = Duration::from_millis(100);

/// One engine: a port and the protocol state behind it.
pub struct Engine<P: Port> {
    port: P,
    core: Core,
}

/// Everything except the port, so that the port's rx burst can lend its
/// tx side to the core while it reads.
pub(crate) struct Core {
    pub cfg: EngineConfig,
    pub link: Link,
    pub stats: Stats,
    pub sockets: Sockets,
    /// IPv4 reassembly contexts, allocated at start.
    pub frag: frag::Reassembler,
    timers: TimerWheel,
    expired: Vec<(Instant, u32)>,
    dirty: Vec<u32>,
    dirty_scratch: Vec<u32>,
    commands: spsc::Receiver<Command>,
    /// Bumped once per iteration in which any socket changed.
    wake: Arc<Notify>,
    pub woke: bool,
    isn: IsnGenerator,
    cookies: syncookie::SynCookies,
    last_housekeeping: Instant,
    icmp_tokens: u32,
    icmp_refill: Instant,
    pub now: Instant,
    /// Service-mode associations whose application broke a ring's indices
    /// (found by housekeeping), not yet taken by the daemon.
    violations: Vec<u32>,
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
        let mut link = Link::new(
            MacAddr(port.mac()),
            cfg.ip,
            cfg.prefix_len,
            cfg.gateway,
            mtu,
            arp::ArpCache::new(cfg.arp_entries, cfg.arp_waiting),
        );
        let caps = port.capabilities();
        if caps.rx_checksum {
            cfg.verify_checksums = false;
        }
        // A port that cuts segments completes their checksums too.
        link.tcp_checksum_offload = caps.tx_tcp_checksum || caps.tx_gso_max > 0;
        link.gso_max = caps.tx_gso_max;
        link.gather = caps.tx_gather && link.tcp_checksum_offload;
        let max = cfg.max_sockets;
        let mut sockets = Sockets::new(max);
        sockets.growth_limit = cfg.buffer_growth_limit;
        Engine {
            port,
            core: Core {
                link,
                stats: Stats::default(),
                sockets,
                frag: frag::Reassembler::new(frag::FRAG_CONTEXTS),
                timers: TimerWheel::new(now, 64),
                expired: Vec::with_capacity(max.max(64)),
                dirty: Vec::with_capacity(max),
                dirty_scratch: Vec::with_capacity(max),
                commands,
                wake,
                woke: false,
                isn: IsnGenerator::new(),
                cookies: syncookie::SynCookies::new(),
                last_housekeeping: now,
                icmp_tokens: cfg.icmp_errors_per_sec,
                icmp_refill: now,
                now,
                violations: Vec::new(),
                cfg,
            },
        }
    }

    /// One iteration at time `now`. Returns true if it did any work.
    pub fn poll(&mut self, now: Instant) -> bool {
        let core = &mut self.core;
        core.now = now;
        let burst = core.cfg.rx_burst;
        let rx = self
            .port
            .rx_burst(burst, |frame, tx| core.handle_frame(frame, tx));
        let tx = self.port.tx();
        let cmds = core.take_commands(tx);
        core.run_timers();
        if now.saturating_since(core.last_housekeeping) >= HOUSEKEEPING {
            core.last_housekeeping = now;
            core.housekeeping(tx);
        }
        let out = core.flush_output(tx);
        tx.flush();
        if core.woke {
            core.woke = false;
            core.wake.notify();
        }
        rx > 0 || cmds > 0 || out > 0
    }

    /// Applies one application command now, at time `now` (the daemon's
    /// path: it reads commands from application segments itself, so the
    /// order between a Close and a slot's next use is exact).
    pub fn submit(&mut self, cmd: Command, now: Instant) {
        self.core.now = now;
        let tx = self.port.tx();
        self.core.command(cmd, tx);
    }

    /// True when application commands wait to be taken.
    pub fn has_commands(&self) -> bool {
        !self.core.commands.is_empty()
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
    /// wanted) or the next housekeeping pass. A simulation on a manual
    /// clock may skip straight to it while nothing else happens.
    /// O(timer entries).
    pub fn next_deadline(&self) -> Instant {
        let housekeeping = self.core.last_housekeeping + HOUSEKEEPING;
        self.core
            .timers
            .next_deadline()
            .map_or(housekeeping, |t| t.min(housekeeping))
    }

    /// Calls `f` with every TCP connection's control block (for tests and
    /// diagnostics, e.g. to print both ends of a stalled connection).
    pub fn for_each_tcb(&self, mut f: impl FnMut(&tcp::Tcb)) {
        for sock in self.core.sockets.slots.iter().flatten() {
            if let Socket::Tcp(c) = sock {
                f(&c.tcb);
            }
        }
    }

    /// The link MTU in bytes.
    pub fn mtu(&self) -> usize {
        self.port.mtu()
    }

    /// Counters so far.
    /// The TCP counters of open connections are included (summed into
    /// the engine's when they close). O(sockets).
    pub fn stats(&self) -> Stats {
        let mut s = self.core.stats.clone();
        for sock in self.core.sockets.slots.iter().flatten() {
            if let Socket::Tcp(c) = sock {
                s.add_tcb(c.tcb.stats());
            }
        }
        s
    }

    /// Calls `f` with a row for every socket: TCP connections with their
    /// windows and timers, listeners and UDP sockets (for `corestack ss`).
    /// O(sockets); allocates nothing.
    pub fn for_each_socket(&self, mut f: impl FnMut(appif::stats_shm::ConnRow)) {
        use appif::stats_shm::ConnRow;
        let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        let owner = |id| appif::seg::service_owner(id).map_or(0, |(a, _)| a);
        for sock in self.core.sockets.slots.iter().flatten() {
            let row = match sock {
                Socket::Tcp(c) => {
                    let t = &c.tcb;
                    let clamp = |v: usize| v.min(u32::MAX as usize) as u32;
                    ConnRow {
                        local: t.local(),
                        remote: t.remote(),
                        state: 2 + t.state() as u8,
                        srtt_us: t.srtt_us().min(u64::from(u32::MAX)) as u32,
                        rto_ms: t.rto().as_millis().min(u128::from(u32::MAX)) as u32,
                        cwnd: clamp(t.cwnd()),
                        ssthresh: clamp(t.ssthresh()),
                        in_flight: clamp(t.bytes_in_flight()),
                        snd_wnd: clamp(t.snd_wnd()),
                        rcv_wnd: clamp(t.rcv_wnd()),
                        mss: t.mss().min(usize::from(u16::MAX)) as u16,
                        retransmits: t.stats().retransmits,
                        owner: owner(c.id),
                        bytes_out: c.tx.position(),
                        bytes_in: c.rx.position(),
                    }
                }
                Socket::Listener(l) => ConnRow {
                    local: l.local,
                    remote: any,
                    state: 1,
                    owner: owner(l.id),
                    ..ConnRow::default()
                },
                Socket::Udp(u) => ConnRow {
                    local: u.local,
                    remote: any,
                    state: 0,
                    owner: owner(u.id),
                    bytes_out: u.tx.position(),
                    bytes_in: u.rx.position(),
                    ..ConnRow::default()
                },
            };
            f(row);
        }
    }

    /// Drops every socket of service-mode association `assoc` (its
    /// application died, broke the protocol, or the daemon is stopping):
    /// connections are reset (RST to each peer) and every socket is closed
    /// with `errno` and removed, which frees the association's slots and,
    /// with the last of them, the engine's mapping of its segment.
    /// O(sockets). Returns the number of sockets dropped.
    pub fn drop_owner(&mut self, assoc: u32, errno: i32, now: Instant) -> usize {
        self.core.now = now;
        let n = self.reset_where(
            |id| appif::seg::service_owner(id).is_some_and(|(a, _)| a == assoc),
            errno,
        );
        self.core.violations.retain(|&a| a != assoc);
        n
    }

    /// Closes with `errno`, resets (RST to the peer) and removes every
    /// socket whose id `chosen` picks. Returns how many.
    fn reset_where(&mut self, chosen: impl Fn(appif::socket::SockId) -> bool, errno: i32) -> usize {
        let core = &mut self.core;
        let picked = |s: &Option<Socket>| {
            s.as_ref().is_some_and(|s| {
                chosen(match s {
                    Socket::Tcp(c) => c.id,
                    Socket::Listener(l) => l.id,
                    Socket::Udp(u) => u.id,
                })
            })
        };
        let mut n = 0;
        for slot in 0..core.sockets.slots.len() as u32 {
            if !picked(&core.sockets.slots[slot as usize]) {
                continue;
            }
            // Told first: sending the RST may already remove a connection.
            if let Some(s) = core.sockets.slots[slot as usize].as_ref() {
                s.shared().set_closed(errno);
                n += 1;
            }
            if let Some(c) = core.sockets.conn(slot) {
                c.app_closed = true;
                c.tcb.abort();
            }
            core.mark_dirty(slot);
        }
        let tx = self.port.tx();
        core.flush_output(tx);
        tx.flush();
        for slot in 0..core.sockets.slots.len() as u32 {
            if !picked(&core.sockets.slots[slot as usize]) {
                continue;
            }
            if let Some(Socket::Tcp(c)) = core.sockets.remove(slot) {
                core.stats.add_tcb(c.tcb.stats());
            }
        }
        n
    }

    /// Moves the associations found breaking their rings since the last
    /// call into `out`.
    pub fn take_violations(&mut self, out: &mut Vec<u32>) {
        out.append(&mut self.core.violations);
    }

    /// Resets every connection (RST to each peer) and closes every socket:
    /// what a stopping engine owes its peers and applications.
    pub fn shutdown(&mut self, now: Instant) {
        // Take what the applications asked for last (a close becomes a FIN).
        self.poll(now);
        self.core.now = now;
        self.reset_where(|_| true, libc_errno::ECONNRESET);
        self.core.wake.notify();
    }
}

impl Core {
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

    /// Takes an ICMP error token (token bucket, refilled every second).
    pub(crate) fn icmp_error_allowed(&mut self) -> bool {
        if self.now.saturating_since(self.icmp_refill) >= Duration::from_secs(1) {
            self.icmp_refill = self.now;
            self.icmp_tokens = self.cfg.icmp_errors_per_sec;
        }
        if self.icmp_tokens == 0 {
            self.stats.icmp_rate_limited += 1;
            return false;
        }
        self.icmp_tokens -= 1;
        true
    }

    /// Applies TCP events of the connection in `slot`, removes it when done,
    /// and schedules its output and timer.
    pub(crate) fn after_tcp(&mut self, slot: u32, ev: tcp::Events) {
        let Some(c) = self.sockets.conn(slot) else {
            return;
        };
        if ev.connected || ev.readable || ev.writable || ev.peer_fin || ev.closed.is_some() {
            self.woke = true;
        }
        match ev.closed {
            Some(tcp::CloseReason::Reset) | Some(tcp::CloseReason::Refused) => {
                self.stats.tcp_resets += 1
            }
            Some(tcp::CloseReason::TimedOut) => self.stats.tcp_timeouts += 1,
            _ => {}
        }
        let finished = apply_events(c, &ev);
        if ev.connected {
            if let Some(l) = c.listener {
                self.hand_over(slot, l);
            }
        }
        if finished {
            self.drop_conn(slot);
            return;
        }
        self.tune_buffers(slot);
        self.mark_dirty(slot);
        self.arm_timer(slot);
    }

    /// Grows the rings of the connection in `slot` towards what TCP asks
    /// for (receive-window auto-tuning, a send buffer of twice cwnd), within
    /// its application's budget; a growth past the budget is not made.
    /// Allocates nothing; costs two comparisons when nothing is asked.
    pub(crate) fn tune_buffers(&mut self, slot: u32) {
        let Sockets {
            slots,
            growth_used,
            growth_limit,
            ..
        } = &mut self.sockets;
        let Some(Some(Socket::Tcp(c))) = slots.get_mut(slot as usize) else {
            return;
        };
        let rx_want = c.tcb.rcv_buf_wanted().min(c.rx.reserved());
        let tx_want = c.tcb.snd_buf_wanted().min(c.tx.reserved());
        let rx_have = c.rx.wanted();
        let tx_have = c.growth.tx_grant.max(c.tx.capacity());
        if rx_want <= rx_have && tx_want <= tx_have {
            return;
        }
        let used = growth_used.entry(sockets::owner_of(c.id)).or_insert(0);
        if rx_want > rx_have {
            let target = rx_want.next_power_of_two().min(c.rx.reserved());
            let extra = target.saturating_sub(rx_have);
            if used.saturating_add(extra) <= *growth_limit {
                c.rx.grow(target);
                *used += extra;
                c.growth.counted += extra;
            }
        }
        if tx_want > tx_have {
            let target = tx_want.next_power_of_two().min(c.tx.reserved());
            let extra = target.saturating_sub(tx_have);
            if used.saturating_add(extra) <= *growth_limit {
                c.growth.tx_grant = target;
                c.shared.set_tx_grant(target);
                *used += extra;
                c.growth.counted += extra;
            }
        }
    }

    /// Moves a just-established passive connection to its listener's accept queue.
    fn hand_over(&mut self, slot: u32, listener_slot: u32) {
        let Some(c) = self.sockets.conn(slot) else {
            return;
        };
        c.listener = None;
        let ends = c.app_ends.take();
        c.shared.set_addrs(c.tcb.local(), c.tcb.remote());
        c.shared.set_state(SockState::Open);
        let (id, shared) = (c.id, c.shared.clone());
        let refused = match self.sockets.slots.get_mut(listener_slot as usize) {
            Some(Some(Socket::Listener(l))) => {
                l.pending = l.pending.saturating_sub(1);
                let r = match (&mut l.accept, ends) {
                    (AcceptQueue::Local(q), Some((tx, rx))) => q
                        .push(appif::socket::Accepted { id, shared, tx, rx })
                        .is_err(),
                    (AcceptQueue::Segment(q), None) => {
                        let slot = appif::seg::service_owner(id).map(|(_, s)| s);
                        !slot.is_some_and(|s| q.hand_over(s, &shared))
                    }
                    _ => true,
                };
                l.shared.wake();
                r
            }
            _ => true,
        };
        if refused {
            self.stats.drop_tcp_backlog_full += 1;
            if let Some(c) = self.sockets.conn(slot) {
                c.app_closed = true;
                c.tcb.abort();
            }
        }
    }

    /// Removes a finished connection and releases its listener slot.
    pub(crate) fn drop_conn(&mut self, slot: u32) {
        if let Some(Socket::Tcp(c)) = self.sockets.remove(slot) {
            self.stats.add_tcb(c.tcb.stats());
            if let Some(l) = c.listener {
                if let Some(Some(Socket::Listener(l))) = self.sockets.slots.get_mut(l as usize) {
                    l.pending = l.pending.saturating_sub(1);
                }
            }
        }
    }

    /// Emits TCP output for every dirty connection; those with more to
    /// send (burst limit, window) stay queued for the next iteration.
    fn flush_output<T: TxQueue>(&mut self, tx: &mut T) -> usize {
        core::mem::swap(&mut self.dirty, &mut self.dirty_scratch);
        let mut sent = 0;
        for i in 0..self.dirty_scratch.len() {
            let slot = self.dirty_scratch[i];
            match self.sockets.conn(slot) {
                Some(c) => c.dirty = false,
                None => continue,
            }
            sent += self.output(slot, tx);
            if self.sockets.conn(slot).is_some_and(|c| c.tcb.has_output()) {
                self.mark_dirty(slot);
            }
        }
        self.dirty_scratch.clear();
        sent
    }

    /// Emits up to a burst of segments for the connection in `slot`.
    fn output<T: TxQueue>(&mut self, slot: u32, tx: &mut T) -> usize {
        let Core {
            sockets,
            link,
            stats,
            now,
            ..
        } = self;
        let now = *now;
        let Some(Some(Socket::Tcp(c))) = sockets.slots.get_mut(slot as usize) else {
            return 0;
        };
        let remote = *c.tcb.remote().ip();
        let local = link.ip;
        let offload = link.tcp_checksum_offload;
        // TSO only towards a resolved next hop: a frame waiting for ARP
        // must fit the MTU.
        let next_mac = link.resolved(remote, now);
        c.tcb.gso_max = if link.gso_max > 0 && next_mac.is_some() {
            link.gso_max
        } else {
            0
        };
        // Payloads lent to the port (below) only towards a resolved next
        // hop: a frame waiting for ARP is a copy.
        let lend_to = next_mac.filter(|_| link.gather);
        let Conn {
            tcb, tx: txr, rx, ..
        } = &mut **c;
        let rcv_free = rx.free();
        let n = tcb.poll_output(
            now,
            &*txr,
            rcv_free,
            TCP_BURST,
            &mut |seg: &tcp::Segment| {
                let hlen = seg.repr.header_len();
                let plen = seg.repr.payload_len;
                // RFC 3168 §5: ECT(0) on data of an ECN-capable connection.
                let tos = if seg.ect { ECT0 } else { 0 };
                // The payload goes from the TX ring itself when the port
                // can send it from there (not a frame that needs padding):
                // it stays unchanged until tx is flushed, as ring bytes are
                // released only by ACKs, read before output, and a
                // connection dropped below flushes first.
                let frame_len = link::HEADERS + hlen + plen;
                let lent = match lend_to {
                    Some(mac) if plen > 0 && frame_len >= link::MIN_FRAME => {
                        txr.payload(seg.payload_offset, plen).map(|p| (mac, p))
                    }
                    _ => None,
                };
                if let Some((mac, payload)) = lent {
                    let header = |buf: &mut [u8]| {
                        seg.repr.emit_header(&mut buf[..hlen]);
                    };
                    link.send_tcp_gather(
                        tx,
                        stats,
                        remote,
                        mac,
                        tos,
                        hlen,
                        payload,
                        seg.gso_size,
                        header,
                    );
                } else {
                    let gso = (seg.gso_size > 0).then_some(Gso {
                        size: seg.gso_size,
                        header_len: hlen,
                    });
                    link.send_ipv4_gso(
                        tx,
                        stats,
                        now,
                        remote,
                        wire::ipv4::PROTO_TCP,
                        tos,
                        hlen + plen,
                        gso,
                        |buf| {
                            seg.repr.emit_header(&mut buf[..hlen]);
                            txr.peek_at(seg.payload_offset, &mut buf[hlen..hlen + plen]);
                            Link::tcp_checksum(offload, buf, local, remote);
                        },
                    );
                }
                stats.tcp_tx_segments += seg.segments() as u64;
                if seg.gso_size > 0 {
                    stats.tcp_tso_sends += 1;
                }
            },
        );
        let closed = tcb.state() == State::Closed;
        let gone = closed && (c.app_closed || c.unaccepted());
        if gone {
            // Payloads lent from its TX ring leave before the ring can
            // serve another socket.
            tx.flush();
            self.drop_conn(slot);
        } else {
            self.arm_timer(slot);
        }
        n
    }

    /// Fires due timers.
    fn run_timers(&mut self) {
        let mut expired = core::mem::take(&mut self.expired);
        self.timers.expire(self.now, &mut expired);
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
    }

    /// ARP retries, and connections whose application vanished without
    /// closing them (its ends of the rings were dropped).
    fn housekeeping<T: TxQueue>(&mut self, tx: &mut T) {
        let now = self.now;
        self.link.poll_arp(tx, &mut self.stats, now);
        self.frag.expire(now, &mut self.stats);
        for slot in 0..self.sockets.slots.len() as u32 {
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
                Some(Socket::Tcp(c)) => (c.tx.violated() || c.rx.violated()).then_some(c.id),
                Some(Socket::Udp(u)) => (u.tx.violated() || u.rx.violated()).then_some(u.id),
                Some(Socket::Listener(l)) => match &l.accept {
                    AcceptQueue::Segment(q) => q.violated().then_some(l.id),
                    AcceptQueue::Local(_) => None,
                },
                None => None,
            };
            if let Some((assoc, _)) = violated.and_then(appif::seg::service_owner) {
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
