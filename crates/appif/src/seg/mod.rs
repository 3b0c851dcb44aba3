//! An application segment (service mode): the memory one application
//! shares with the engine, created by the daemon as a memfd and mapped by
//! both. Everything is found by offset from the start; nothing in it is a
//! pointer.
//!
//! ```text
//!  0      header: magic, version, layout, association, MTU, engines  (daemon, once)
//!  64     app wake-up point (Notify)                        (engine bumps)
//!  128    engine sleeping flag                              (engine sets, app clears)
//!  192    command ring head                                 (app)
//!  256    command ring tail                                 (engine)
//!  320    closed: errno the association ended with          (engine)
//!  328    the stack's IPv6 address (16) and prefix length (1)  (daemon, once)
//!  384    eventfd sleepers: 16 keys (u64), one per eventfd the
//!         application handed over when it joined             (app)
//!  512    command ring: cmd_slots × 64-byte descriptors     (app)
//!  page   engines 1..N (when the daemon runs several): per engine its
//!         notify flag, ring head, ring tail (a cache line each) and its
//!         command ring, one after another (see [`Layout::lane`])
//!  page   ready rings, one per engine: head (app), tail (engine),
//!         overflow (engine sets, app clears), a cache line each, then
//!         `ready_cap` slot numbers (u32) (see [`Layout::ready_lane`], [`ready`])
//!  page   socket slots: nslots × 512 bytes, each
//!           +0 owner word (bit 0 app, bit 1 engine)  +8 ready queued word
//!           (engine sets, app clears)  +64 status block
//!           +128 TX head (app)  +136 TX pages word (app per write, engine per release)
//!           +192 TX tail (engine)  +256 RX head (engine)  +320 RX tail (app)
//!           +384 TX geometry (app)  +448 RX geometry (engine)
//!  page   ring buffers: per slot a TX ring then an RX ring, ring_max_bytes
//!         reserved each, ring_bytes of it in use until the ring grows
//!         (see [`crate::bytes`]; untouched pages cost no memory, and the
//!         engine gives the pages of an idle connection's empty rings back)
//! ```
//! A listener's RX ring carries the slot numbers (u32, little endian) of
//! the connections accepted on it.
//!
//! Every index the engine reads from here is checked (see [`crate::bytes`]
//! and [`CmdConsumer`]); a violation is reported, never trusted.

mod accept;
mod desc;
pub mod ready;

pub use accept::{AcceptQueue, Accepted, AppSegmentAccept, Claimed};
pub use desc::{
    desc_layout, CmdConsumer, CmdError, CmdProducer, Desc, DescError, FAMILY_V4, FAMILY_V6,
};

use crate::bytes::{self, RingAt};
use crate::notify::{Notify, Sleepers};
use crate::region::Region;
use crate::socket::{SockId, StatusHandle};
use core::net::{Ipv4Addr, Ipv6Addr};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// "CSTKSEG1", little endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"CSTKSEG1");
/// Layout version (5: a ready ring per engine and a ready word per slot,
/// issue 23; 4: the TX pages word and a command ring per engine).
pub const VERSION: u32 = 5;
pub use layout::{DESC_BYTES, SLOT_BYTES};

/// Byte offsets of a segment's fixed fields: header words from the start
/// of the segment, socket-slot words from the start of their slot (see
/// [`Layout::slot_offset`]). The diagram at the top of this module shows
/// who writes each. Public so that a test playing a misbehaving application
/// writes exactly where the engine reads, without copies of these numbers.
pub mod layout {
    /// Bytes per command descriptor: one cache line.
    pub const DESC_BYTES: usize = 64;
    /// Bytes per socket slot header.
    pub const SLOT_BYTES: usize = 512;
    /// The page size segments are laid out in, bytes: the socket slots and
    /// the ring buffers start on a page boundary.
    pub const PAGE: usize = 4096;

    /// Header: eight u64 words (magic, version and slots, ring bytes and
    /// command slots, association, address, MTU and gateway,
    /// ring_max_bytes, engines); daemon, once.
    pub const INFO: usize = 0;
    /// Header: the stack's address (u32, host order) and prefix length
    /// (u8, bits 32..40), a u64 (daemon, once).
    pub const NET: usize = INFO + 32;
    /// Header: the link MTU in bytes, a u32 (daemon).
    pub const MTU: usize = INFO + 40;
    /// Header: the stack's gateway (u32, host order; 0: none) (daemon, once).
    pub const GATEWAY: usize = INFO + 44;
    /// The application's wake-up point, a `Notify` (engine bumps it).
    pub const APP_WAKE: usize = 64;
    /// The engine's notify flag, a u32 (engine sets it, the app clears it).
    pub const ENGINE_SLEEPING: usize = 128;
    /// The command ring's head, a u64 descriptor count (application).
    pub const CMD_HEAD: usize = 192;
    /// The command ring's tail, a u64 descriptor count (engine).
    pub const CMD_TAIL: usize = 256;
    /// The errno the association ended with, a u32; 0 while it lives (engine).
    pub const CLOSED: usize = 320;
    /// Header: the stack's global IPv6 address (16 bytes, two u64 words
    /// holding its octets in order; `::`: none) and prefix length (a u64,
    /// bits) (daemon, once, before the welcome; it shares the closed
    /// word's cache line: both are written once).
    pub const NET6: usize = CLOSED + 8;
    /// The eventfd sleepers' keys: [`crate::notify::SEGMENT_SLEEPERS`]
    /// u64 words, entry i armed on the doorbell at that offset (0: none)
    /// (application; see [`crate::notify::Sleepers`]).
    pub const SLEEPERS: usize = 384;
    /// The command ring: `cmd_slots` descriptors of [`DESC_BYTES`] (application).
    pub const CMD_RING: usize = 512;

    /// Slot: the owner word, a u32 (`OWNER_*` bits).
    pub const SLOT_OWNER: usize = 0;
    /// Slot: the ready ring's `queued` word, a u32 on the owner's line:
    /// nonzero while the slot waits in a ready ring (engine sets it,
    /// application clears it; see [`super::ready`]).
    pub const SLOT_READY: usize = SLOT_OWNER + 8;
    /// Slot: the status block (`StatusBlock`).
    pub const SLOT_STATUS: usize = 64;
    /// Slot: the TX ring's head, a u64 byte count (application).
    pub const SLOT_TX_HEAD: usize = 128;
    /// Slot: the TX ring's pages word, a u32 on the head's line: the
    /// application holds it for each write, the engine while it gives the
    /// pages of the idle ring back (see [`crate::bytes`]).
    pub const SLOT_TX_PAGES: usize = SLOT_TX_HEAD + 8;
    /// Slot: the TX ring's tail, a u64 byte count (engine).
    pub const SLOT_TX_TAIL: usize = 192;
    /// Slot: the RX ring's head, a u64 byte count (engine).
    pub const SLOT_RX_HEAD: usize = 256;
    /// Slot: the RX ring's tail, a u64 byte count (application).
    pub const SLOT_RX_TAIL: usize = 320;
    /// Slot: the TX ring's geometry word, a u64 (application; see
    /// [`crate::bytes`]).
    pub const SLOT_TX_GEOMETRY: usize = 384;
    /// Slot: the RX ring's geometry word, a u64 (engine).
    pub const SLOT_RX_GEOMETRY: usize = 448;

    // Every header word on its own cache line, before the command ring;
    // every slot word on its own, inside the slot.
    const _: () = assert!(CLOSED + 64 <= SLEEPERS && MTU + 8 <= APP_WAKE);
    const _: () = assert!(CLOSED + 4 <= NET6 && NET6 + 24 <= CLOSED + 64);
    const _: () = assert!(SLEEPERS + 8 * crate::notify::SEGMENT_SLEEPERS <= CMD_RING);
    const _: () = assert!(SLOT_RX_GEOMETRY + 64 == SLOT_BYTES);
}

use layout::{
    APP_WAKE, CLOSED, CMD_HEAD, CMD_RING, CMD_TAIL, ENGINE_SLEEPING, GATEWAY, INFO, MTU, NET, NET6,
    PAGE, SLEEPERS, SLOT_OWNER, SLOT_READY, SLOT_RX_GEOMETRY, SLOT_RX_HEAD, SLOT_RX_TAIL,
    SLOT_STATUS, SLOT_TX_GEOMETRY, SLOT_TX_HEAD, SLOT_TX_PAGES, SLOT_TX_TAIL,
};

/// Owner word: the slot is free.
///
/// A slot in use has two bits: the application's (cleared by the daemon
/// when it takes the application's Close for the slot, so a Close still in
/// the ring can never hit the slot's next socket) and the engine's (cleared
/// when the engine lets go of its socket, or at once when it refuses to
/// open one). Whoever takes a free slot sets both; it is free again when
/// both are clear.
pub const OWNER_FREE: u32 = 0;
/// Owner bit: the application holds the slot.
pub const OWNER_APP: u32 = 1;
/// Owner bit: the engine holds the slot.
pub const OWNER_ENGINE: u32 = 2;
/// Both bits: a slot just taken.
pub const OWNER_BOTH: u32 = OWNER_APP | OWNER_ENGINE;

fn page_align(n: usize) -> usize {
    (n + PAGE - 1) & !(PAGE - 1)
}

/// The shape of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Socket slots (each socket, listener or connection, takes one).
    pub nslots: u32,
    /// Bytes per RX and per TX ring when a socket starts (power of two,
    /// 4 KiB..16 MiB).
    pub ring_bytes: u32,
    /// Bytes reserved per ring: the most a ring can grow to (power of two,
    /// `ring_bytes`..16 MiB).
    pub ring_max_bytes: u32,
    /// Command descriptors each command ring holds (power of two, 16..65536).
    pub cmd_slots: u32,
    /// Engines serving the application (1..=[`crate::socket::MAX_ENGINES`]):
    /// one command ring, notify flag and doorbell each ([`Layout::lane`]).
    pub engines: u32,
}

/// Where one engine's command ring lives in a segment: byte offsets from
/// its start (see [`Layout::lane`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    /// The engine's notify flag, a u32 (engine sets, application clears).
    pub sleeping: usize,
    /// The ring's head, a u64 descriptor count (application).
    pub head: usize,
    /// The ring's tail, a u64 descriptor count (engine).
    pub tail: usize,
    /// The ring's `cmd_slots` descriptors.
    pub ring: usize,
}

/// Where one engine's ready ring lives in a segment: byte offsets from
/// its start (see [`Layout::ready_lane`] and [`ready`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyLane {
    /// Slots taken, a u64 (application).
    pub head: usize,
    /// Slots pushed, a u64 (engine).
    pub tail: usize,
    /// Nonzero after a push found the ring full, a u32 (engine sets,
    /// application clears).
    pub overflow: usize,
    /// The ring's [`Layout::ready_cap`] slot numbers, u32 each.
    pub ring: usize,
}

impl Layout {
    /// Checks the bounds above. Errors name the field.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.nslots == 0 || self.nslots > 65536 {
            return Err("nslots must be 1..=65536");
        }
        if !self.ring_bytes.is_power_of_two() || !(4096..=16 << 20).contains(&self.ring_bytes) {
            return Err("ring_bytes must be a power of two in 4 KiB..16 MiB");
        }
        if !self.ring_max_bytes.is_power_of_two()
            || !(self.ring_bytes..=16 << 20).contains(&self.ring_max_bytes)
        {
            return Err("ring_max_bytes must be a power of two in ring_bytes..16 MiB");
        }
        if !self.cmd_slots.is_power_of_two() || !(16..=65536).contains(&self.cmd_slots) {
            return Err("cmd_slots must be a power of two in 16..=65536");
        }
        if self.engines == 0 || self.engines as usize > crate::socket::MAX_ENGINES {
            return Err("engines must be 1..=255");
        }
        Ok(())
    }

    /// Bytes of a command ring's descriptors.
    fn ring_len(&self) -> usize {
        self.cmd_slots as usize * DESC_BYTES
    }

    /// Engine `engine`'s command ring (None past [`Layout::engines`]).
    /// Engine 0's words are the header's (`ENGINE_SLEEPING`, `CMD_HEAD`,
    /// `CMD_TAIL`, `CMD_RING`), as with one engine; engine e ≥ 1 has three
    /// cache lines (flag, head, tail) and its ring after engine e − 1's,
    /// from the first page after engine 0's ring.
    pub fn lane(&self, engine: u32) -> Option<Lane> {
        if engine >= self.engines {
            return None;
        }
        if engine == 0 {
            return Some(Lane {
                sleeping: ENGINE_SLEEPING,
                head: CMD_HEAD,
                tail: CMD_TAIL,
                ring: CMD_RING,
            });
        }
        let base = page_align(CMD_RING + self.ring_len())
            + (engine as usize - 1) * (3 * 64 + self.ring_len());
        Some(Lane {
            sleeping: base,
            head: base + 64,
            tail: base + 128,
            ring: base + 192,
        })
    }

    /// Entries of each ready ring: a quarter of the slots (rounded up to a
    /// power of two, at least 16). More slots than that changing between
    /// two drains overflow the ring, and the application then looks at
    /// every watched socket once: a cost of O(slots) paid for at least
    /// slots / 4 changes.
    pub fn ready_cap(&self) -> u32 {
        (self.nslots.max(1).next_power_of_two() / 4).max(16)
    }

    fn ready_lane_len(&self) -> usize {
        3 * 64 + 4 * self.ready_cap() as usize
    }

    fn ready_off(&self) -> usize {
        let extra = (self.engines.max(1) as usize - 1) * (3 * 64 + self.ring_len());
        page_align(page_align(CMD_RING + self.ring_len()) + extra)
    }

    /// Engine `engine`'s ready ring (None past [`Layout::engines`]): from
    /// the first page after the command rings, one after another.
    pub fn ready_lane(&self, engine: u32) -> Option<ReadyLane> {
        if engine >= self.engines {
            return None;
        }
        let base = self.ready_off() + engine as usize * self.ready_lane_len();
        Some(ReadyLane {
            head: base,
            tail: base + 64,
            overflow: base + 128,
            ring: base + 192,
        })
    }

    fn slots_off(&self) -> usize {
        page_align(self.ready_off() + self.engines.max(1) as usize * self.ready_lane_len())
    }

    /// Byte offset of socket slot `slot`'s header from the start of the
    /// segment: the slots start on the first page after the command ring,
    /// [`SLOT_BYTES`] each. The `layout::SLOT_*` offsets are relative to it.
    pub fn slot_offset(&self, slot: u32) -> usize {
        self.slots_off() + slot as usize * SLOT_BYTES
    }

    fn data_off(&self) -> usize {
        page_align(self.slots_off() + self.nslots as usize * SLOT_BYTES)
    }

    /// Total bytes of the segment.
    pub fn total_len(&self) -> usize {
        self.data_off() + 2 * self.nslots as usize * self.ring_max_bytes as usize
    }

    fn tx_ring(&self, slot: u32) -> RingAt {
        let s = self.slot_offset(slot);
        RingAt {
            head: s + SLOT_TX_HEAD,
            tail: s + SLOT_TX_TAIL,
            geometry: s + SLOT_TX_GEOMETRY,
            buf: self.data_off() + 2 * slot as usize * self.ring_max_bytes as usize,
            reserved: self.ring_max_bytes as usize,
            pages: Some(s + SLOT_TX_PAGES),
        }
    }

    fn rx_ring(&self, slot: u32) -> RingAt {
        let s = self.slot_offset(slot);
        RingAt {
            head: s + SLOT_RX_HEAD,
            tail: s + SLOT_RX_TAIL,
            geometry: s + SLOT_RX_GEOMETRY,
            buf: self.data_off() + (2 * slot as usize + 1) * self.ring_max_bytes as usize,
            reserved: self.ring_max_bytes as usize,
            pages: None,
        }
    }
}

/// A mapped segment and its layout; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppSegment {
    region: Arc<Region>,
    layout: Layout,
    /// The eventfd sleepers' table, as this process sees it (see
    /// [`AppSegment::with_sleepers`]).
    sleepers: Option<Arc<Sleepers>>,
    /// Daemon: the ready ring its engine handles push to (see
    /// [`AppSegment::for_lane`]).
    producer: Option<Arc<ready::ReadyProducer>>,
    /// Application: the drain of the ready rings (see [`AppSegment::drain_ready`]).
    router: Option<Arc<ready::ReadyRouter>>,
}

impl AppSegment {
    /// Daemon: lays out a fresh (zeroed) region for association `assoc`.
    /// Errors: the layout is invalid or does not fit the region.
    pub fn init(
        region: Arc<Region>,
        layout: Layout,
        assoc: u32,
    ) -> Result<AppSegment, &'static str> {
        layout.validate()?;
        if region.len() < layout.total_len() {
            return Err("region smaller than the layout");
        }
        let seg = AppSegment {
            region,
            layout,
            sleepers: None,
            producer: None,
            router: None,
        };
        let info = [
            MAGIC,
            u64::from(VERSION) | u64::from(layout.nslots) << 32,
            u64::from(layout.ring_bytes) | u64::from(layout.cmd_slots) << 32,
            u64::from(assoc),
            0,
            0,
            u64::from(layout.ring_max_bytes),
            u64::from(layout.engines),
        ];
        for (i, v) in info.iter().enumerate() {
            seg.word64(INFO + 8 * i).store(*v, Ordering::Relaxed);
        }
        core::sync::atomic::fence(Ordering::Release);
        Ok(seg)
    }

    /// Application: the segment the daemon laid out in `region`.
    /// Errors: bad magic or version, a layout out of bounds or larger than the region.
    pub fn open(region: Arc<Region>) -> Result<(AppSegment, u32), &'static str> {
        let word = |i: usize| -> Option<u64> {
            region
                .get::<AtomicU64>(INFO + 8 * i)
                .map(|w| w.load(Ordering::Acquire))
        };
        let (Some(magic), Some(a), Some(b), Some(assoc), Some(max), Some(engines)) =
            (word(0), word(1), word(2), word(3), word(6), word(7))
        else {
            return Err("segment too small");
        };
        if magic != MAGIC {
            return Err("not a corestack segment (bad magic)");
        }
        if a as u32 != VERSION {
            return Err("segment version mismatch");
        }
        let layout = Layout {
            nslots: (a >> 32) as u32,
            ring_bytes: b as u32,
            ring_max_bytes: max as u32,
            cmd_slots: (b >> 32) as u32,
            engines: u32::try_from(engines).unwrap_or(0),
        };
        layout.validate()?;
        if region.len() < layout.total_len() {
            return Err("segment shorter than its layout");
        }
        Ok((
            AppSegment {
                region,
                layout,
                sleepers: None,
                producer: None,
                router: Some(Arc::new(ready::ReadyRouter::new(
                    layout.engines,
                    layout.nslots,
                ))),
            },
            assoc as u32,
        ))
    }

    /// The segment with its eventfd sleepers' table: `eventfds` are the
    /// eventfds the application handed to the daemon when it joined (at
    /// most [`crate::notify::SEGMENT_SLEEPERS`]), as numbered in this
    /// process. Call it before handing out views: status blocks taken from
    /// [`AppSegment::shared`] afterwards ring these eventfds, and so does
    /// [`AppSegment::notify_app`].
    pub fn with_sleepers(mut self, eventfds: Vec<std::os::fd::OwnedFd>) -> AppSegment {
        self.sleepers = Sleepers::in_region(&self.region, SLEEPERS, eventfds).map(Arc::new);
        self
    }

    /// Daemon: the segment as engine `lane` sees it: the status blocks its
    /// [`AppSegment::shared`] hands out for the engine push their slot to
    /// that engine's ready ring when woken. Call once per engine and
    /// association (each call starts a ring of its own at the tail 0); an
    /// engine past the layout's gets a segment that pushes nowhere.
    pub fn for_lane(&self, lane: u32) -> AppSegment {
        let mut seg = self.clone();
        seg.producer = ready::ReadyProducer::new(self, lane).map(Arc::new);
        seg
    }

    /// Application: takes the slots the engines pushed to the ready rings
    /// and hands each to the readiness waiter watching it (see
    /// [`ready::ReadyRouter::drain`]); nothing in a segment the daemon
    /// laid out or in a forked child of the process that opened it.
    pub fn drain_ready(&self) -> ready::Drained {
        match &self.router {
            Some(r) => r.drain(self),
            None => ready::Drained::default(),
        }
    }

    /// The eventfd sleepers' table (None before [`AppSegment::with_sleepers`]).
    pub fn sleepers(&self) -> Option<&Sleepers> {
        self.sleepers.as_deref()
    }

    /// Wakes the application's readiness waiters (its wake-up point, with
    /// this segment's eventfd sleepers).
    pub fn notify_app(&self) {
        self.app_wake().notify_in(self.sleepers());
    }

    /// The link MTU in bytes (daemon writes it at start; 0 = unknown).
    pub fn mtu(&self) -> u32 {
        self.word32(MTU).load(Ordering::Acquire)
    }

    /// Daemon: records the link MTU in bytes for the application.
    pub fn set_mtu(&self, mtu: u32) {
        self.word32(MTU).store(mtu, Ordering::Release);
    }

    /// Daemon: records the stack's address, subnet prefix and gateway for
    /// the application (which decides by them what goes to corestack).
    pub fn set_net(&self, ip: Ipv4Addr, prefix: u8, gateway: Option<Ipv4Addr>) {
        self.word64(NET).store(
            u64::from(u32::from(ip)) | u64::from(prefix) << 32,
            Ordering::Release,
        );
        self.word32(GATEWAY)
            .store(gateway.map_or(0, u32::from), Ordering::Release);
    }

    /// The stack's address and prefix length as the daemon recorded them
    /// (None: not recorded, or a prefix above 32), and its gateway.
    pub fn net(&self) -> (Option<(Ipv4Addr, u8)>, Option<Ipv4Addr>) {
        let v = self.word64(NET).load(Ordering::Acquire);
        let ip = Ipv4Addr::from(v as u32);
        let prefix = (v >> 32) as u8;
        let net = (!ip.is_unspecified() && prefix <= 32).then_some((ip, prefix));
        let gw = Ipv4Addr::from(self.word32(GATEWAY).load(Ordering::Acquire));
        (net, (!gw.is_unspecified()).then_some(gw))
    }

    /// Daemon: records the stack's global IPv6 address and prefix length
    /// (bits) for the application; None: the stack has no IPv6.
    pub fn set_net6(&self, net: Option<(Ipv6Addr, u8)>) {
        let (ip, prefix) = net.unwrap_or((Ipv6Addr::UNSPECIFIED, 0));
        let o = ip.octets();
        let (hi, lo) = o.split_at(8);
        self.word64(NET6).store(
            u64::from_be_bytes(hi.try_into().expect("8")),
            Ordering::Release,
        );
        self.word64(NET6 + 8).store(
            u64::from_be_bytes(lo.try_into().expect("8")),
            Ordering::Release,
        );
        self.word64(NET6 + 16)
            .store(u64::from(prefix), Ordering::Release);
    }

    /// The stack's global IPv6 address and prefix length as the daemon
    /// recorded them; None: the stack has no IPv6 (`::`), or a prefix
    /// above 128.
    pub fn net6(&self) -> Option<(Ipv6Addr, u8)> {
        let hi = self.word64(NET6).load(Ordering::Acquire);
        let lo = self.word64(NET6 + 8).load(Ordering::Acquire);
        let prefix = self.word64(NET6 + 16).load(Ordering::Acquire);
        let ip = Ipv6Addr::from((u128::from(hi) << 64) | u128::from(lo));
        (!ip.is_unspecified() && prefix <= 128).then_some((ip, prefix as u8))
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The mapped region.
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    fn word64(&self, off: usize) -> &AtomicU64 {
        self.region
            .get(off)
            .expect("header offsets lie inside a validated segment")
    }

    fn word32(&self, off: usize) -> &AtomicU32 {
        self.region
            .get(off)
            .expect("header offsets lie inside a validated segment")
    }

    /// The application's wake-up point: the engine bumps it after changing
    /// any of the application's sockets; readiness waiters sleep on it.
    pub fn app_wake(&self) -> &Notify {
        self.region
            .get(APP_WAKE)
            .expect("header offsets lie inside a validated segment")
    }

    /// The engine's notify flag: set by the engine before it sleeps; an
    /// application that finds it set after enqueueing a command clears it
    /// and rings the engine's doorbell.
    pub fn engine_sleeping(&self) -> &AtomicU32 {
        self.word32(ENGINE_SLEEPING)
    }

    /// Engine `engine`'s notify flag (as [`AppSegment::engine_sleeping`]
    /// for engine 0); None past the layout's engines.
    pub fn lane_sleeping(&self, engine: u32) -> Option<&AtomicU32> {
        Some(self.word32(self.layout.lane(engine)?.sleeping))
    }

    /// 0 while the association lives; the errno it ended with once the
    /// engine dropped it (ECONNRESET when the daemon stops).
    pub fn closed(&self) -> &AtomicU32 {
        self.word32(CLOSED)
    }

    /// The owner word of `slot`; None when out of range.
    pub fn owner(&self, slot: u32) -> Option<&AtomicU32> {
        if slot >= self.layout.nslots {
            return None;
        }
        Some(self.word32(self.layout.slot_offset(slot) + SLOT_OWNER))
    }

    /// Zeroes `slot`'s status block and ring indices and sets its rings
    /// back to `ring_bytes` in use (done by whoever just took the slot,
    /// before anyone else looks at it). The memory of a ring that had grown
    /// beyond that is given back to the system (its pages read as zero).
    pub fn reset_slot(&self, slot: u32) {
        if slot >= self.layout.nslots {
            return;
        }
        let s = self.layout.slot_offset(slot);
        for off in [SLOT_TX_HEAD, SLOT_TX_TAIL, SLOT_RX_HEAD, SLOT_RX_TAIL] {
            self.word64(s + off).store(0, Ordering::Relaxed);
        }
        self.word32(s + SLOT_TX_PAGES).store(0, Ordering::Relaxed);
        self.word32(s + SLOT_READY).store(0, Ordering::Relaxed);
        let init = self.layout.ring_bytes as usize;
        let fresh = bytes::initial_geometry(init, self.layout.ring_max_bytes as usize);
        for (geo, ring) in [
            (SLOT_TX_GEOMETRY, self.layout.tx_ring(slot)),
            (SLOT_RX_GEOMETRY, self.layout.rx_ring(slot)),
        ] {
            let old = self.word64(s + geo).swap(fresh, Ordering::Relaxed);
            if old != fresh && old != 0 {
                // Grown (or garbled): the bytes past the first `init` are
                // not used until it grows again.
                self.region.release(ring.buf + init, ring.reserved - init);
            }
        }
        if let Some(sh) = StatusHandle::in_region(&self.region, s + SLOT_STATUS, None, None) {
            sh.clear();
        }
        core::sync::atomic::fence(Ordering::Release);
    }

    /// Application: takes a free slot, trying from `hint` on, skipping the
    /// ones `busy` says this process still uses. None when all are taken.
    pub fn claim_app_slot(&self, hint: u32, busy: impl Fn(u32) -> bool) -> Option<u32> {
        let n = self.layout.nslots;
        (0..n).map(|i| (hint.wrapping_add(i)) % n).find(|&s| {
            !busy(s)
                && self.owner(s).is_some_and(|o| {
                    o.compare_exchange(OWNER_FREE, OWNER_BOTH, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                })
        })
    }

    /// The status block of `slot`. `engine`: the engine's handle (wakes the
    /// application as a whole on changes, clears the engine's owner bit
    /// when dropped).
    pub fn shared(&self, slot: u32, engine: bool) -> Option<Arc<StatusHandle>> {
        if slot >= self.layout.nslots {
            return None;
        }
        let s = self.layout.slot_offset(slot);
        let (wake, release) = if engine {
            (Some(APP_WAKE), Some((s + SLOT_OWNER, OWNER_ENGINE)))
        } else {
            (None, None)
        };
        let ready = crate::ready::SlotReady {
            slot,
            queued: crate::region::View::in_region(&self.region, s + SLOT_READY)?,
            producer: if engine {
                self.producer
                    .clone()
                    .map(|p| p as Arc<dyn crate::ready::SlotPush>)
            } else {
                None
            },
            router: if engine {
                None
            } else {
                self.router
                    .clone()
                    .map(|r| r as Arc<dyn crate::ready::SlotRoute>)
            },
        };
        StatusHandle::in_region(&self.region, s + SLOT_STATUS, wake, release)
            .map(|sh| sh.with_sleepers(self.sleepers.clone()).with_ready(ready))
    }

    /// The TX ring's writing end (application) of `slot`.
    pub fn tx_writer(&self, slot: u32) -> Option<bytes::Writer> {
        self.ring_end(slot, Layout::tx_ring, bytes::Writer::in_region)
    }

    /// The TX ring's reading end (engine) of `slot`.
    pub fn tx_reader(&self, slot: u32) -> Option<bytes::Reader> {
        self.ring_end(slot, Layout::tx_ring, bytes::Reader::in_region)
    }

    /// The RX ring's writing end (engine) of `slot`.
    pub fn rx_writer(&self, slot: u32) -> Option<bytes::Writer> {
        self.ring_end(slot, Layout::rx_ring, bytes::Writer::in_region)
    }

    /// The RX ring's reading end (application) of `slot`.
    pub fn rx_reader(&self, slot: u32) -> Option<bytes::Reader> {
        self.ring_end(slot, Layout::rx_ring, bytes::Reader::in_region)
    }

    /// One end (`open`) of the ring of `slot` that `ring` places; None for
    /// a slot out of range.
    fn ring_end<E>(
        &self,
        slot: u32,
        ring: fn(&Layout, u32) -> RingAt,
        open: fn(&Arc<Region>, RingAt) -> Option<E>,
    ) -> Option<E> {
        self.in_range(slot)?;
        open(&self.region, ring(&self.layout, slot))
    }

    fn in_range(&self, slot: u32) -> Option<()> {
        (slot < self.layout.nslots).then_some(())
    }

    /// Descriptor `index` (modulo the ring's length) of the command ring
    /// at `ring`, as the words it is copied in and out by.
    fn cmd_at(&self, ring: usize, index: u64) -> &[AtomicU64; DESC_BYTES / 8] {
        let i = (index as usize) & (self.layout.cmd_slots as usize - 1);
        self.region
            .get(ring + i * DESC_BYTES)
            .expect("command ring lies inside a validated segment")
    }
}

/// The engine's id for `slot` of association `assoc`: bit 62 set, the
/// association in bits 32..62, the slot below. Minted and read by the
/// daemon and by the accept queue ([`AppSegmentAccept`]); to the engine it
/// is an opaque key (a socket's owner is the
/// [`Owner`](crate::command::Owner) its opening command named).
pub fn service_id(assoc: u32, slot: u32) -> SockId {
    crate::socket::SERVICE_ID_BIT | (u64::from(assoc) & 0x3fff_ffff) << 32 | u64::from(slot)
}

/// The association and slot of a [`service_id`]; None for other ids.
pub fn service_owner(id: SockId) -> Option<(u32, u32)> {
    if id & crate::socket::SERVICE_ID_BIT == 0 || id & crate::socket::ENGINE_ID_BIT != 0 {
        return None;
    }
    Some((((id >> 32) & 0x3fff_ffff) as u32, id as u32))
}

#[cfg(test)]
mod tests;
