//! Sockets as the application and the engine share them: a status block the
//! engine writes, the commands the application sends, and what a listener
//! hands over on accept.

use crate::notify::Notify;
use crate::ready::{ReadyList, Routed, SlotReady, Watch};
use crate::region::{Region, View};
use crate::words::{FAMILY_LOCAL_V6, FAMILY_REMOTE_V6};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use core::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Identifies a socket in commands. Applications number their own sockets
/// from 1; the engine numbers the ones it creates on accept with the top bit
/// set, so the two never collide.
pub type SockId = u64;

/// The top bit of engine-assigned socket ids.
pub const ENGINE_ID_BIT: u64 = 1 << 63;

/// Set in the ids of sockets of service-mode applications (see
/// [`crate::seg::service_id`]).
pub const SERVICE_ID_BIT: u64 = 1 << 62;

/// The lowest bit of the engine index in the ids of sockets of embedded
/// and inline mode: bits 52..60 name the engine that owns the socket, so a
/// command finds its engine from the id alone ([`engine_of`]).
pub const ENGINE_INDEX_SHIFT: u32 = 52;

/// Engines one stack may run, at most (the engine index is 8 bits).
pub const MAX_ENGINES: usize = 255;

/// `id` marked as owned by engine `engine` (0..[`MAX_ENGINES`]).
pub fn with_engine(id: SockId, engine: usize) -> SockId {
    (id & !(0xff << ENGINE_INDEX_SHIFT)) | ((engine as u64 & 0xff) << ENGINE_INDEX_SHIFT)
}

/// The engine that owns socket `id`: 0 for service-mode ids (the client
/// keeps which engine holds each slot of its segment; a daemon engine
/// knows only its own sockets) and for ids without an index.
pub fn engine_of(id: SockId) -> usize {
    if id & SERVICE_ID_BIT != 0 && id & ENGINE_ID_BIT == 0 {
        return 0;
    }
    ((id >> ENGINE_INDEX_SHIFT) & 0xff) as usize
}

/// Socket states as the application sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SockState {
    /// Created; the engine has not taken the command yet.
    Opening = 0,
    /// TCP handshake in progress.
    Connecting = 1,
    /// Data can flow (TCP established or later, UDP bound, listener listening).
    Open = 2,
    /// Finished; `error()` tells why if it was not a normal close.
    Closed = 3,
}

pub use crate::words::StatusBlock;

/// SO_REUSEPORT on a listener, as Linux: listeners of one application on
/// the same address and port that all set it form a group, and each new
/// connection goes to one member, picked by a hash of the peer's address
/// and port (so a retransmitted SYN finds the same member). With several
/// engines a listener exists on each, and `home` marks the copy on the
/// engine of the thread that opened it: an engine gives its connections to
/// its home members when it has any, so that a server with a listener per
/// thread, each thread on its own engine, takes every connection on the
/// engine that owns its flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReusePort {
    /// This copy is on the engine of the thread that opened the listener.
    pub home: bool,
}

/// The peer sent FIN; every byte before it is in the RX ring.
pub const FLAG_RX_FIN: u32 = 1;
/// The engine has sent every byte of the TX ring it last looked at and will
/// not look again until an ACK, a timer or a kick: a writer that takes this
/// flag ([`StatusBlock::take_tx_idle`]) must kick it (a Send command).
/// Set without a wake-up: nobody sleeps on it.
pub const FLAG_TX_IDLE: u32 = 2;
/// The connection moved to another status block (a forked child took it
/// over): its rings are not this block's reader's any more, and reads
/// answer ENETDOWN even with bytes in them.
pub const FLAG_MOVED: u32 = 4;
/// Set by the application while the connection is corked (TCP_CORK,
/// tcp(7)): the engine sends no segment shorter than the MSS but the last
/// one before a FIN; full segments still go. Bytes are in the TX ring only
/// after the flag is set, so an engine that sees them sees the cork too.
pub const FLAG_TX_CORK: u32 = 8;

/// `a`'s address as the four words of a status block (IPv4 in the last).
fn ip_words(a: IpAddr) -> [u32; 4] {
    match a {
        IpAddr::V4(v4) => [0, 0, 0, u32::from(v4)],
        IpAddr::V6(v6) => {
            let x = u128::from(v6);
            [
                (x >> 96) as u32,
                (x >> 64) as u32,
                (x >> 32) as u32,
                x as u32,
            ]
        }
    }
}

/// The address of the four words `w`, IPv6 when `v6`.
fn ip_of(w: [u32; 4], v6: bool) -> IpAddr {
    if v6 {
        let x = (u128::from(w[0]) << 96)
            | (u128::from(w[1]) << 64)
            | (u128::from(w[2]) << 32)
            | u128::from(w[3]);
        IpAddr::V6(Ipv6Addr::from(x))
    } else {
        IpAddr::V4(Ipv4Addr::from(w[3]))
    }
}

/// The unspecified address of `a`'s family, port 0 (a listener's or an
/// unconnected socket's remote address).
pub fn unspecified_like(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(_) => SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0)),
    }
}

/// `a` as the application of an IPv6 socket sees it: an IPv4 address as
/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2, RFC 3493 §3.7),
/// an IPv6 one unchanged.
pub fn to_mapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v4) => {
            SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0))
        }
        v6 => v6,
    }
}

/// `a` with an IPv4-mapped IPv6 address turned into the IPv4 address it
/// maps (what goes on the wire); anything else unchanged.
pub fn from_mapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, v6.port())),
            None => a,
        },
        v4 => v4,
    }
}

impl StatusBlock {
    /// Back to a fresh socket's fields (the notify sequence keeps counting).
    pub(crate) fn clear(&self) {
        self.state.store(0, Ordering::Relaxed);
        self.error.store(0, Ordering::Relaxed);
        self.flags.store(0, Ordering::Relaxed);
        self.tx_grant.store(0, Ordering::Relaxed);
        for w in self.local_ip.iter().chain(&self.remote_ip) {
            w.store(0, Ordering::Relaxed);
        }
        self.ports.store(0, Ordering::Relaxed);
        self.family.store(0, Ordering::Relaxed);
    }

    /// Engine: makes this block say what `from` says (addresses, flags,
    /// error, TX grant, then the state, which publishes them): a socket
    /// moving to another status block (a forked child taking over a
    /// connection, `Command::Adopt`). Wakes nobody (see
    /// [`StatusHandle::copy_from`]).
    pub fn copy_from(&self, from: &StatusBlock) {
        for (to, w) in self.local_ip.iter().zip(&from.local_ip) {
            to.store(w.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for (to, w) in self.remote_ip.iter().zip(&from.remote_ip) {
            to.store(w.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let word = |w: &AtomicU32| w.load(Ordering::Acquire);
        self.family.store(word(&from.family), Ordering::Relaxed);
        self.ports.store(word(&from.ports), Ordering::Relaxed);
        self.flags.store(word(&from.flags), Ordering::Relaxed);
        self.tx_grant.store(word(&from.tx_grant), Ordering::Relaxed);
        self.error
            .store(from.error.load(Ordering::Acquire), Ordering::Relaxed);
        self.state.store(word(&from.state), Ordering::Release);
    }

    /// Current state.
    pub fn state(&self) -> SockState {
        match self.state.load(Ordering::Acquire) {
            0 => SockState::Opening,
            1 => SockState::Connecting,
            2 => SockState::Open,
            _ => SockState::Closed,
        }
    }

    /// Engine: moves to `state` (after the fields it publishes) and notifies.
    pub fn set_state(&self, state: SockState) {
        self.state.store(state as u32, Ordering::Release);
        self.notify.notify();
    }

    /// Engine: closes with `errno` (0 for a normal close) and notifies.
    pub fn set_closed(&self, errno: i32) {
        if errno != 0 {
            self.error.store(errno, Ordering::Release);
        }
        self.set_state(SockState::Closed);
    }

    /// The errno that closed the socket, 0 if none.
    pub fn error(&self) -> i32 {
        self.error.load(Ordering::Acquire)
    }

    /// Takes the pending error (like SO_ERROR): returns it and clears it.
    pub fn take_error(&self) -> i32 {
        self.error.swap(0, Ordering::AcqRel)
    }

    /// Engine: sets flag bits and notifies.
    pub fn set_flags(&self, bits: u32) {
        self.flags.fetch_or(bits, Ordering::Release);
        self.notify.notify();
    }

    /// Engine: every byte in the TX ring has been sent (see
    /// [`FLAG_TX_IDLE`]). Sets the flag (one load when it is set already)
    /// and returns true when it set it now: the engine must then look at
    /// the ring's length again, after a SeqCst fence, and send what a writer
    /// added meanwhile itself (taking the flag back) — the notify-flag
    /// protocol, as for sleepers. When it was set already, a writer since
    /// then sees it and kicks: nothing to re-check.
    pub fn set_tx_idle(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & FLAG_TX_IDLE == 0
            && self.flags.fetch_or(FLAG_TX_IDLE, Ordering::SeqCst) & FLAG_TX_IDLE == 0
    }

    /// Writer (after adding bytes to the TX ring and a SeqCst fence), or the
    /// engine taking it back: true when [`FLAG_TX_IDLE`] was set, and clears
    /// it; whoever gets true makes sure the new bytes are sent (the writer
    /// by a Send command).
    pub fn take_tx_idle(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & FLAG_TX_IDLE != 0
            && self.flags.fetch_and(!FLAG_TX_IDLE, Ordering::SeqCst) & FLAG_TX_IDLE != 0
    }

    /// Application: corks (sets [`FLAG_TX_CORK`]) or uncorks the send path;
    /// no wake-up (the engine reads it when it sends).
    pub fn set_tx_cork(&self, on: bool) {
        if on {
            self.flags.fetch_or(FLAG_TX_CORK, Ordering::Release);
        } else {
            self.flags.fetch_and(!FLAG_TX_CORK, Ordering::Release);
        }
    }

    /// True when all of `bits` are set.
    pub fn has_flags(&self, bits: u32) -> bool {
        self.flags.load(Ordering::Acquire) & bits == bits
    }

    /// Engine: offers a TX ring of `bytes` (the connection can use that
    /// much send buffer; the application grows its ring on its next write).
    pub fn set_tx_grant(&self, bytes: usize) {
        self.tx_grant
            .store(bytes.min(u32::MAX as usize) as u32, Ordering::Relaxed);
    }

    /// The TX ring size the engine offers, bytes (0: none).
    pub fn tx_grant(&self) -> usize {
        self.tx_grant.load(Ordering::Relaxed) as usize
    }

    /// Sets the local and remote addresses (whoever creates the socket;
    /// before the state that publishes them). Flow information and scope
    /// ids are not kept.
    pub fn set_addrs(&self, local: impl Into<SocketAddr>, remote: impl Into<SocketAddr>) {
        let (local, remote) = (local.into(), remote.into());
        for (words, a) in [(&self.local_ip, local), (&self.remote_ip, remote)] {
            for (w, v) in words.iter().zip(ip_words(a.ip())) {
                w.store(v, Ordering::Relaxed);
            }
        }
        let family = if local.is_ipv6() { FAMILY_LOCAL_V6 } else { 0 }
            | if remote.is_ipv6() {
                FAMILY_REMOTE_V6
            } else {
                0
            };
        self.family.store(family, Ordering::Relaxed);
        let ports = (u32::from(local.port()) << 16) | u32::from(remote.port());
        self.ports.store(ports, Ordering::Release);
    }

    fn addr_of(&self, words: &[AtomicU32; 4], bit: u32, port: u16) -> SocketAddr {
        let v6 = self.family.load(Ordering::Acquire) & bit != 0;
        let w = [0, 1, 2, 3].map(|i| words[i].load(Ordering::Relaxed));
        SocketAddr::new(ip_of(w, v6), port)
    }

    /// Local address (0.0.0.0:0 until known).
    pub fn local(&self) -> SocketAddr {
        let port = (self.ports.load(Ordering::Acquire) >> 16) as u16;
        self.addr_of(&self.local_ip, FAMILY_LOCAL_V6, port)
    }

    /// Remote address (0.0.0.0:0 if none).
    pub fn remote(&self) -> SocketAddr {
        let port = self.ports.load(Ordering::Acquire) as u16;
        self.addr_of(&self.remote_ip, FAMILY_REMOTE_V6, port)
    }
}

const _: () = assert!(core::mem::size_of::<StatusBlock>() <= 64);

/// A socket's status block where it lives (in this process's heap or in an
/// application segment), plus what the engine must do besides: wake the
/// application as a whole when the socket changes, and give the segment
/// slot back when the engine lets go of the socket. Dereferences to
/// [`StatusBlock`]; its `set_*` and [`StatusHandle::wake`] are the ones the
/// engine calls.
pub struct StatusHandle {
    block: View<StatusBlock>,
    /// The application-wide wake-up point (its readiness waiters sleep there).
    app_wake: Option<View<Notify>>,
    /// The slot's owner word, and the bits to clear in it when this handle
    /// is dropped.
    release: Option<View<AtomicU32>>,
    release_bits: AtomicU32,
    /// Where the eventfd sleepers of this block's doorbells are recorded
    /// (a segment's table; None: this process's own).
    sleepers: Option<Arc<crate::notify::Sleepers>>,
    /// The block is in this process's heap, shared with the engine that
    /// writes it (embedded and inline mode): a [`Watch`] on it is seen.
    local: bool,
    /// The readiness waiter this socket reports its changes to, if any.
    watch: std::sync::OnceLock<Watch>,
    /// A block in an application segment: its slot's place in the ready
    /// rings (see [`crate::seg::ready`]).
    ready: Option<SlotReady>,
}

impl core::fmt::Debug for StatusHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

impl core::ops::Deref for StatusHandle {
    type Target = StatusBlock;
    fn deref(&self) -> &StatusBlock {
        &self.block
    }
}

impl Drop for StatusHandle {
    fn drop(&mut self) {
        if let Some(owner) = &self.release {
            let bits = self.release_bits.load(Ordering::Relaxed);
            owner.fetch_and(!bits, Ordering::AcqRel);
        }
    }
}

impl StatusHandle {
    /// A status block in this process's heap (embedded and inline mode).
    pub fn local() -> Arc<StatusHandle> {
        Arc::new(StatusHandle {
            block: View::boxed(StatusBlock::default()),
            app_wake: None,
            release: None,
            release_bits: AtomicU32::new(0),
            sleepers: None,
            local: true,
            watch: std::sync::OnceLock::new(),
            ready: None,
        })
    }

    /// The status block at byte offset `at` of `region`; `app_wake` the
    /// offset of the application's wake-up point, `release` that of an owner
    /// word and the bits to clear in it on drop. None when an offset lies
    /// outside the region.
    pub fn in_region(
        region: &Arc<Region>,
        at: usize,
        app_wake: Option<usize>,
        release: Option<(usize, u32)>,
    ) -> Option<Arc<StatusHandle>> {
        let block = View::in_region(region, at)?;
        let app_wake = match app_wake {
            Some(o) => Some(View::in_region(region, o)?),
            None => None,
        };
        let (release, bits) = match release {
            Some((o, bits)) => (Some(View::in_region(region, o)?), bits),
            None => (None, 0),
        };
        Some(Arc::new(StatusHandle {
            block,
            app_wake,
            release,
            release_bits: AtomicU32::new(bits),
            sleepers: None,
            local: false,
            watch: std::sync::OnceLock::new(),
            ready: None,
        }))
    }

    /// The same block, ringing the eventfd sleepers of `sleepers` (a
    /// segment's table) instead of this process's. Only before the handle
    /// is shared (a fresh `Arc`); otherwise unchanged.
    pub fn with_sleepers(
        mut self: Arc<Self>,
        sleepers: Option<Arc<crate::notify::Sleepers>>,
    ) -> Arc<Self> {
        if let Some(me) = Arc::get_mut(&mut self) {
            me.sleepers = sleepers;
        }
        self
    }

    /// The same block with its slot's place in the ready rings. Only
    /// before the handle is shared (a fresh `Arc`); otherwise unchanged.
    pub(crate) fn with_ready(mut self: Arc<Self>, ready: SlotReady) -> Arc<Self> {
        if let Some(me) = Arc::get_mut(&mut self) {
            me.ready = Some(ready);
        }
        self
    }

    /// Rings `n` with this block's sleepers.
    fn ring(&self, n: &Notify) {
        n.notify_in(self.sleepers.as_deref());
    }

    /// Changes the owner bits cleared on drop (after a hand-over the
    /// application's bit is the application's to clear).
    pub fn set_release_bits(&self, bits: u32) {
        self.release_bits.store(bits, Ordering::Relaxed);
    }

    fn wake_app(&self) {
        if let Some(w) = &self.app_wake {
            self.ring(w);
        }
    }

    /// Engine: something the application may wait for changed (data, space).
    pub fn wake(&self) {
        if let Some(w) = self.watch.get() {
            w.signal();
        }
        if let Some(r) = &self.ready {
            r.signal();
        }
        self.ring(&self.notify);
        self.wake_app();
    }

    /// Application: reports this socket's changes to `list` under `token`
    /// from now on. A block in an application segment (service mode) is
    /// routed there through the segment's ready rings, which the waiter
    /// drains ([`crate::seg::AppSegment::drain_ready`]). False when its
    /// changes cannot reach `list` (a segment block without ready rings,
    /// or from the parent of a forked child; a block that reports to
    /// another list already): the waiter must look at it itself.
    pub fn watch(self: &Arc<Self>, list: &Arc<ReadyList>, token: u64) -> bool {
        let seg = match (&self.ready, self.local) {
            (_, true) => None,
            (Some(r), false) => match &r.router {
                Some(router) if router.is_current() => Some((r, router)),
                _ => return false,
            },
            (None, false) => return false,
        };
        let w = self.watch.get_or_init(|| Watch::new(list, token));
        if !w.is_for(list) {
            return false;
        }
        w.activate(token);
        if let Some((r, router)) = seg {
            let to = Arc::downgrade(self);
            router.route(r.slot, to);
            // Changes from now on are pushed; the waiter looks after this.
            r.rearm();
        }
        true
    }

    /// Application: stops reporting to `list` (no-op for another list's).
    pub fn unwatch(&self, list: &Arc<ReadyList>) {
        if let Some(w) = self.watch.get().filter(|w| w.is_for(list)) {
            w.deactivate();
        }
    }

    /// Application, having taken this socket's token from `list`: the next
    /// change queues it again. Call before looking at the socket.
    pub fn rearm_watch(&self, list: &Arc<ReadyList>) {
        if let Some(w) = self.watch.get().filter(|w| w.is_for(list)) {
            w.rearm();
        }
    }

    /// Engine: moves to `state` (after the fields it publishes) and notifies.
    pub fn set_state(&self, state: SockState) {
        self.state.store(state as u32, Ordering::Release);
        self.wake();
    }

    /// Engine: closes with `errno` (0 for a normal close) and notifies.
    pub fn set_closed(&self, errno: i32) {
        if errno != 0 {
            self.error.store(errno, Ordering::Release);
        }
        self.set_state(SockState::Closed);
    }

    /// Engine: sets flag bits and notifies.
    pub fn set_flags(&self, bits: u32) {
        self.flags.fetch_or(bits, Ordering::Release);
        self.wake();
    }

    /// Engine: takes over what `from` says ([`StatusBlock::copy_from`])
    /// and notifies this block's waiters.
    pub fn copy_from(&self, from: &StatusBlock) {
        self.block.copy_from(from);
        self.wake();
    }
}
/// The record header of a UDP datagram in a byte ring: [`UdpHeader::LEN`]
/// bytes, then `len` bytes of payload. `addr` is the peer (source on RX,
/// destination on TX), IPv4 or IPv6.
///
/// Layout: the address in 16 bytes (IPv4 in the first 4), the port and
/// the length big-endian, a family byte (4 or 6), 3 bytes of zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// The peer: source on RX, destination on TX.
    pub addr: SocketAddr,
    /// Payload length in bytes.
    pub len: u16,
}

impl UdpHeader {
    /// Encoded size in bytes.
    pub const LEN: usize = 24;

    /// Encodes into [`UdpHeader::LEN`] bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        match self.addr.ip() {
            IpAddr::V4(v4) => {
                b[..4].copy_from_slice(&v4.octets());
                b[20] = 4;
            }
            IpAddr::V6(v6) => {
                b[..16].copy_from_slice(&v6.octets());
                b[20] = 6;
            }
        }
        b[16..18].copy_from_slice(&self.addr.port().to_be_bytes());
        b[18..20].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// True when the family byte of encoded header `b` is 4 or 6: the
    /// engine checks each record an application wrote (untrusted shared
    /// memory in service mode) before it sends it.
    pub fn family_ok(b: &[u8; Self::LEN]) -> bool {
        matches!(b[20], 4 | 6)
    }

    /// Decodes [`UdpHeader::LEN`] bytes (any family byte but 6 is IPv4;
    /// see [`UdpHeader::family_ok`]).
    pub fn decode(b: &[u8; Self::LEN]) -> UdpHeader {
        let port = u16::from_be_bytes([b[16], b[17]]);
        let ip = if b[20] == 6 {
            let mut o = [0u8; 16];
            o.copy_from_slice(&b[..16]);
            IpAddr::V6(Ipv6Addr::from(o))
        } else {
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        };
        UdpHeader {
            addr: SocketAddr::new(ip, port),
            len: u16::from_be_bytes([b[18], b[19]]),
        }
    }
}

/// The ready rings' drain (application): the engine pushed this block's
/// slot. If a waiter watches it: clears the slot's `queued` word (the next
/// change pushes it again), then queues the waiter's token, so the waiter
/// looks at the socket after the clear. `rearm` false: the word is left
/// alone (a forked child's look).
impl Routed for StatusHandle {
    fn seg_signal(&self, rearm: bool) {
        if let (Some(r), Some(w)) = (&self.ready, self.watch.get()) {
            if w.is_active() {
                if rearm {
                    r.rearm();
                }
                w.signal();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_header_round_trips() {
        let h = UdpHeader {
            addr: "10.1.2.3:4567".parse().unwrap(),
            len: 1472,
        };
        assert_eq!(UdpHeader::decode(&h.encode()), h);
        let h6 = UdpHeader {
            addr: "[fd00::1:2]:4567".parse().unwrap(),
            len: 1452,
        };
        assert_eq!(UdpHeader::decode(&h6.encode()), h6);
        assert!(UdpHeader::family_ok(&h.encode()) && UdpHeader::family_ok(&h6.encode()));
        let mut bad = h6.encode();
        for f in [0u8, 5, 0xff] {
            bad[20] = f;
            assert!(!UdpHeader::family_ok(&bad), "family {f}");
        }
    }

    #[test]
    fn status_block_holds_both_families() {
        let s = StatusBlock::default();
        let (l, r): (SocketAddr, SocketAddr) = (
            "[fd00::2]:80".parse().unwrap(),
            "[fd00::1:ffff:1]:40000".parse().unwrap(),
        );
        s.set_addrs(l, r);
        assert_eq!((s.local(), s.remote()), (l, r));
        let (l4, r4): (SocketAddr, SocketAddr) = (
            "10.0.0.2:80".parse().unwrap(),
            "10.0.0.1:1234".parse().unwrap(),
        );
        s.set_addrs(l4, r4);
        assert_eq!((s.local(), s.remote()), (l4, r4));
        assert_eq!(to_mapped(r4).to_string(), "[::ffff:10.0.0.1]:1234");
        assert_eq!(from_mapped(to_mapped(r4)), r4);
        assert_eq!(core::mem::size_of::<StatusBlock>(), 64);
    }

    #[test]
    fn closed_with_errno_reports_it_once() {
        let s = StatusBlock::default();
        s.set_closed(crate::errno::ECONNREFUSED);
        assert_eq!(s.state(), SockState::Closed);
        assert_eq!(s.take_error(), crate::errno::ECONNREFUSED);
        assert_eq!(s.take_error(), 0);
    }
}
