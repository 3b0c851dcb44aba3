//! AF_XDP ports: one XSK socket per NIC queue, driven from user space; one
//! XDP program and one XSKMAP per interface.
//!
//! Set-up ([`AfXdpPort::open`] for one queue, [`AfXdpPort::open_queues`] for
//! queues `0..n`, one port per queue, module `queues`): per queue a socket
//! with its own UMEM of `frame_count` chunks of `frame_size` bytes (the
//! first half for rx, the second half for tx) and its four rings, bound to
//! that queue; then, once per interface, an XSKMAP holding each socket at
//! key = its queue id and our own XDP program (module `prog`: redirect by
//! `rx_queue_index` when the frame is for `steer_ip`, else pass) attached
//! through a bpf link. The ports of one open share the link, program and
//! map, so the program is detached when the last of them is dropped or the
//! process exits. A frame is received by the port of the queue the NIC (or,
//! on veth, the sender's tx queue) put it on; XDP cannot move it to another
//! queue's socket.
//!
//! ```text
//!            we produce ─► fill ring ─► kernel fills chunk ─► rx ring ─► we consume
//! rx half:   (chunk addrs)                                  (addr, len)   then refill
//!            we produce ─► tx ring ─► kernel sends ─► completion ring ─► we reap
//! tx half:   (addr, len)                                (chunk addrs)    to free list
//! ```
//!
//! Every rx chunk is always in exactly one place: the fill ring, the kernel,
//! the rx ring, or (briefly) our refill stash; so the fill ring, sized at
//! least as large as the rx half, never overflows. Every tx chunk is in the
//! free list, the tx ring, the kernel or the completion ring.
//!
//! Hot path: `rx_burst`, `transmit` and `flush` allocate nothing; their only
//! system calls are the `recvfrom`/`sendto` wake-ups the kernel asks for.
//! Threading: a port is `Send`, used by one thread at a time; the ports of
//! one [`AfXdpPort::open_queues`] are independent (one per engine thread).

#![deny(unsafe_code)]

mod prog;
mod queues;
#[allow(unsafe_code)]
mod sys;
mod tx;

pub use queues::rx_queues;
pub use tx::AfXdpTx;

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::packet_tx::{PacketTx, PacketTxStats};
use crate::{Capabilities, Port};
use queues::Steering;
use sys::{FrameArea, Mmap, Ring};

/// Bytes the kernel reserves in front of each received frame
/// (`XDP_PACKET_HEADROOM`).
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native (driver) mode, else generic mode.
    #[default]
    Auto,
    /// Native (driver) mode only: XDP_FLAGS_DRV_MODE.
    Native,
    /// Generic (skb) mode only: XDP_FLAGS_SKB_MODE; works on any interface,
    /// slower.
    Generic,
}

/// How an [`AfXdpPort`] transmits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TxPath {
    /// The socket's tx ring in zero-copy mode, else [`TxPath::Packet`].
    #[default]
    Auto,
    /// The AF_XDP tx ring (one kernel skb per frame in copy mode).
    Xsk,
    /// An AF_PACKET socket on the same interface with virtio-net headers,
    /// merging consecutive TCP segments into GSO frames
    /// ([`crate::packet_tx::PacketTx`]); received frames still come through
    /// AF_XDP.
    Packet,
}

impl TxPath {
    /// `CORESTACK_AF_XDP_TX` (auto, xsk or packet) if set, else Auto.
    ///
    /// # Errors
    /// "unknown AF_XDP transmit path ...: use auto, xsk or packet".
    pub fn from_env() -> Result<TxPath, Error> {
        match std::env::var("CORESTACK_AF_XDP_TX") {
            Ok(v) => v.parse(),
            Err(_) => Ok(TxPath::Auto),
        }
    }
}

impl std::str::FromStr for TxPath {
    type Err = Error;

    /// "auto", "xsk" or "packet".
    fn from_str(s: &str) -> Result<TxPath, Error> {
        match s {
            "auto" => Ok(TxPath::Auto),
            "xsk" => Ok(TxPath::Xsk),
            "packet" => Ok(TxPath::Packet),
            _ => Err(Error::config(format!(
                "unknown AF_XDP transmit path {s:?}: use auto, xsk or packet"
            ))),
        }
    }
}

/// Configuration of an [`AfXdpPort`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// The interface, e.g. "eth0".
    pub ifname: String,
    /// The NIC queue [`AfXdpPort::open`] binds (default 0);
    /// [`AfXdpPort::open_queues`] binds queues `0..n` instead.
    pub queue_id: u32,
    /// UMEM chunk size in bytes: a power of two from 2048 to 4096
    /// (default 2048). Received frames start 256 bytes into a chunk.
    pub frame_size: u32,
    /// Number of UMEM chunks (default 16384: 32 MiB of 2 KiB chunks), half
    /// for rx, half for tx.
    pub frame_count: u32,
    /// Entries of each of the four rings, a power of two (default 8192).
    /// The rx side holds what arrives while the engine is busy: a burst of
    /// one segment from each of 10 000 connections overflowed 2048
    /// (`rx_fill_empty`), and every lost segment cost an RTO.
    pub ring_size: u32,
    /// Attach mode of the XDP program (default Auto).
    pub mode: XdpMode,
    /// Redirect only ARP and IPv4 to this address to the socket, passing the
    /// rest to the kernel; None redirects every frame.
    pub steer_ip: Option<Ipv4Addr>,
    /// With `steer_ip`, also redirect IPv6 frames to one of these addresses
    /// or to the solicited-node group of one (Neighbor Solicitations for
    /// it); every other IPv6 frame passes to the kernel. Empty (the
    /// default): IPv6 passes to the kernel.
    pub steer_ip6: Vec<Ipv6Addr>,
    /// Set SO_PREFER_BUSY_POLL, SO_BUSY_POLL (20 µs) and
    /// SO_BUSY_POLL_BUDGET (64) on the socket.
    pub busy_poll: bool,
    /// How frames are transmitted (default Auto).
    pub tx_path: TxPath,
}

impl Default for AfXdpConfig {
    fn default() -> AfXdpConfig {
        AfXdpConfig {
            ifname: String::new(),
            queue_id: 0,
            frame_size: 2048,
            frame_count: 16384,
            ring_size: 8192,
            mode: XdpMode::Auto,
            steer_ip: None,
            steer_ip6: Vec::new(),
            busy_poll: false,
            tx_path: TxPath::Auto,
        }
    }
}

/// Counters of an AF_XDP port, in descriptors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AfXdpStats {
    /// Frames received.
    pub rx_frames: u64,
    /// Rx descriptors outside the rx half of the UMEM (dropped).
    pub rx_invalid: u64,
    /// Frames posted on the tx ring.
    pub tx_frames: u64,
    /// Completion addresses outside the tx half of the UMEM (dropped).
    pub tx_invalid: u64,
    /// `sendto` wake-ups issued.
    pub tx_kicks: u64,
    /// `sendto` wake-ups that failed with an error other than EAGAIN/EBUSY.
    pub tx_kick_errors: u64,
    /// `recvfrom` wake-ups issued.
    pub rx_kicks: u64,
    /// With [`TxPath::Packet`]: the packet socket's counters (frames queued
    /// count in `tx_frames` too).
    pub packet: Option<PacketTxStats>,
}

/// The receive half: rx and fill rings over the rx half of the UMEM.
#[derive(Debug)]
struct RxSide {
    rx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    area: FrameArea,
    /// Our consumer index of the rx ring.
    rx_cons: u32,
    /// Our producer index of the fill ring.
    fill_prod: u32,
    /// Chunks waiting to go back to the fill ring (capacity: rx frames).
    stash: Vec<u64>,
    chunk_mask: u64,
    fd: RawFd,
    invalid: u64,
    frames: u64,
    kicks: u64,
}

impl RxSide {
    /// Moves stashed chunks to the fill ring, as many as fit.
    fn refill(&mut self) {
        if self.stash.is_empty() {
            return;
        }
        let used = self.fill_prod.wrapping_sub(self.fill.load_consumer());
        let free = self.fill.size().saturating_sub(used) as usize;
        let n = free.min(self.stash.len());
        for _ in 0..n {
            if let Some(addr) = self.stash.pop() {
                self.fill.write(self.fill_prod, addr);
                self.fill_prod = self.fill_prod.wrapping_add(1);
            }
        }
        if n > 0 {
            self.fill.store_producer(self.fill_prod);
        }
    }

    /// Takes back the chunk of a received descriptor.
    fn recycle(&mut self, addr: u64) {
        let chunk = addr & self.chunk_mask;
        if self.area.contains(chunk, 1) && self.stash.len() < self.stash.capacity() {
            self.stash.push(chunk);
        }
    }
}

/// An AF_XDP port on one queue of one interface.
#[derive(Debug)]
pub struct AfXdpPort {
    rx: RxSide,
    tx: AfXdpTx,
    ifname: String,
    ifindex: u32,
    queue_id: u32,
    zero_copy: bool,
    mac: [u8; 6],
    mtu: usize,
    xsk: Arc<OwnedFd>,
    /// The interface's program, XSKMAP and link, shared by the ports of one
    /// open: the program is detached when the last of them is dropped.
    steering: Arc<Steering>,
}

fn permission_or(what: &str, e: io::Error, other: impl FnOnce(io::Error) -> Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            Error::permission(what, "run as root or with CAP_NET_ADMIN and CAP_BPF", e)
        }
        _ => other(e),
    }
}

fn attach_refused(ifname: &str, reason: &str, e: io::Error) -> Error {
    Error::with_source(
        ErrorKind::XdpAttach,
        format!("XDP attach refused on {ifname}: {reason}; use --driver tap"),
        e,
    )
}

fn check_config(cfg: &AfXdpConfig) -> Result<(), Error> {
    if !(cfg.frame_size.is_power_of_two() && (2048..=4096).contains(&cfg.frame_size)) {
        return Err(Error::config(format!(
            "AF_XDP frame_size {} is invalid: use a power of two from 2048 to 4096 bytes",
            cfg.frame_size
        )));
    }
    if !(cfg.ring_size.is_power_of_two() && (64..=65536).contains(&cfg.ring_size)) {
        return Err(Error::config(format!(
            "AF_XDP ring_size {} is invalid: use a power of two from 64 to 65536",
            cfg.ring_size
        )));
    }
    if !(4..=1 << 20).contains(&cfg.frame_count) {
        return Err(Error::config(format!(
            "AF_XDP frame_count {} is invalid: use 4 to 1048576 frames",
            cfg.frame_count
        )));
    }
    if cfg.queue_id >= 1024 {
        return Err(Error::config(format!(
            "AF_XDP queue_id {} is invalid: use a queue below 1024 (see `ethtool -l`)",
            cfg.queue_id
        )));
    }
    Ok(())
}

/// Binds in copy mode. A socket closed just before on the same queue
/// releases its UMEM asynchronously, so EBUSY is retried for up to 1 s.
fn bind_copy(xsk: &OwnedFd, ifindex: u32, queue_id: u32, flags: u16) -> io::Result<()> {
    let mut tries = 0;
    loop {
        match sys::xsk_bind(xsk, ifindex, queue_id, flags | libc::XDP_COPY) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// One bound AF_XDP socket with its UMEM and rings, before it becomes a port.
struct Xsk {
    rx: RxSide,
    tx: AfXdpTx,
    queue_id: u32,
    zero_copy: bool,
    xsk: Arc<OwnedFd>,
}

impl Xsk {
    /// Creates a socket with its own UMEM and four rings (sizes from `cfg`)
    /// and binds it to queue `queue_id` of `ifindex`: zero-copy if the
    /// driver offers it, else copy mode. `mtu`: the largest frame the
    /// packet socket of [`TxPath::Packet`] sends, less the 14-byte header.
    fn open(cfg: &AfXdpConfig, ifindex: u32, queue_id: u32, mtu: usize) -> Result<Xsk, Error> {
        let ifname = cfg.ifname.as_str();
        let xsk = sys::xsk_socket().map_err(|e| {
            permission_or("opening AF_XDP socket", e, |e| {
                if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
                    Error::with_source(
                        ErrorKind::Io,
                        "AF_XDP is not supported by this kernel: use --driver tap".into(),
                        e,
                    )
                } else {
                    Error::io("opening AF_XDP socket", e)
                }
            })
        })?;

        // UMEM: rx half then tx half, each no larger than its rings.
        let frame_size = cfg.frame_size as usize;
        let ring = cfg.ring_size;
        let rx_frames = (cfg.frame_count / 2).min(ring);
        let tx_frames = (cfg.frame_count - cfg.frame_count / 2).min(ring);
        let total = (rx_frames + tx_frames) as usize;
        let umem = Arc::new(
            Mmap::anonymous(total * frame_size)
                .map_err(|e| Error::io("allocating the AF_XDP UMEM", e))?,
        );
        sys::umem_reg(&xsk, &umem, cfg.frame_size).map_err(|e| {
            permission_or("registering the AF_XDP UMEM", e, |e| {
                Error::io("registering the AF_XDP UMEM (XDP_UMEM_REG)", e)
            })
        })?;
        let fd = xsk.as_raw_fd();
        for opt in [
            libc::XDP_UMEM_FILL_RING,
            libc::XDP_UMEM_COMPLETION_RING,
            libc::XDP_RX_RING,
            libc::XDP_TX_RING,
        ] {
            crate::sys::setsockopt_int(fd, libc::SOL_XDP, opt, ring as libc::c_int)
                .map_err(|e| Error::io("sizing the AF_XDP rings", e))?;
        }
        let off = sys::mmap_offsets(&xsk).map_err(|e| Error::io("reading XDP_MMAP_OFFSETS", e))?;
        let map_err = |e| Error::io("mapping the AF_XDP rings", e);
        let mut fill: Ring<u64> =
            Ring::map(&xsk, &off.fr, ring, libc::XDP_UMEM_PGOFF_FILL_RING).map_err(map_err)?;
        let comp: Ring<u64> = Ring::map(&xsk, &off.cr, ring, libc::XDP_UMEM_PGOFF_COMPLETION_RING)
            .map_err(map_err)?;
        let rx: Ring<libc::xdp_desc> =
            Ring::map(&xsk, &off.rx, ring, libc::XDP_PGOFF_RX_RING as u64).map_err(map_err)?;
        let tx: Ring<libc::xdp_desc> =
            Ring::map(&xsk, &off.tx, ring, libc::XDP_PGOFF_TX_RING as u64).map_err(map_err)?;

        let (rx_area, tx_area) = FrameArea::split(umem, rx_frames as usize * frame_size);
        // Every rx chunk starts in the fill ring.
        for i in 0..rx_frames {
            fill.write(i, rx_area.base() + u64::from(i) * frame_size as u64);
        }
        fill.store_producer(rx_frames);
        let free: Vec<u64> = (0..tx_frames)
            .rev()
            .map(|i| tx_area.base() + u64::from(i) * frame_size as u64)
            .collect();

        // Bind: zero-copy if the driver offers it, else copy mode.
        let need_wakeup = libc::XDP_USE_NEED_WAKEUP;
        let zero_copy =
            sys::xsk_bind(&xsk, ifindex, queue_id, need_wakeup | libc::XDP_ZEROCOPY).is_ok();
        if !zero_copy {
            bind_copy(&xsk, ifindex, queue_id, need_wakeup).map_err(|e| {
                permission_or("binding the AF_XDP socket", e, |e| {
                    attach_refused(
                        ifname,
                        &format!("AF_XDP bind to queue {queue_id} failed ({e})"),
                        e,
                    )
                })
            })?;
        }

        if cfg.busy_poll {
            for (opt, val) in [
                (sys::SO_PREFER_BUSY_POLL, 1),
                (sys::SO_BUSY_POLL, 20),
                (sys::SO_BUSY_POLL_BUDGET, 64),
            ] {
                if let Err(e) = crate::sys::setsockopt_int(fd, libc::SOL_SOCKET, opt, val) {
                    match e.raw_os_error() {
                        Some(libc::EINVAL) | Some(libc::ENOPROTOOPT) | Some(libc::EOPNOTSUPP) => {}
                        _ => {
                            return Err(permission_or("enabling busy polling", e, |e| {
                                Error::io("enabling busy polling on the AF_XDP socket", e)
                            }))
                        }
                    }
                }
            }
        }

        let xsk = Arc::new(xsk);
        let packet = match (cfg.tx_path, zero_copy) {
            (TxPath::Packet, _) | (TxPath::Auto, false) => Some(PacketTx::open(ifindex, mtu + 14)?),
            (TxPath::Xsk, _) | (TxPath::Auto, true) => None,
        };
        Ok(Xsk {
            rx: RxSide {
                rx,
                fill,
                area: rx_area,
                rx_cons: 0,
                fill_prod: rx_frames,
                stash: Vec::with_capacity(rx_frames as usize),
                chunk_mask: !(frame_size as u64 - 1),
                fd,
                invalid: 0,
                frames: 0,
                kicks: 0,
            },
            tx: AfXdpTx {
                tx,
                comp,
                area: tx_area,
                free,
                frame_size,
                tx_prod: 0,
                tx_published: 0,
                comp_cons: 0,
                always_kick: !zero_copy,
                xsk: xsk.clone(),
                packet,
                frames: 0,
                invalid: 0,
                kicks: 0,
                kick_errors: 0,
            },
            queue_id,
            zero_copy,
            xsk,
        })
    }
}

impl AfXdpPort {
    /// Opens an AF_XDP socket on `cfg.ifname` queue `cfg.queue_id`, loads
    /// and attaches the steering program (with an XSKMAP of its own holding
    /// only this socket). To drive several queues of one interface, use
    /// [`AfXdpPort::open_queues`]: a second `open` on the same interface
    /// fails to attach ("another XDP program is attached").
    ///
    /// # Errors
    /// - "interface X not found (check `ip link`)";
    /// - "permission denied opening AF_XDP socket: run as root or with
    ///   CAP_NET_ADMIN and CAP_BPF" (also for the map and program);
    /// - "AF_XDP on X needs N queues but it has M: ..." (InvalidConfig) when
    ///   `queue_id` is not below the queue count the driver reports;
    /// - "XDP attach refused on X: &lt;reason&gt;; use --driver tap" when the
    ///   program cannot be loaded or attached in the requested mode (EBUSY or
    ///   EEXIST: another program is attached; EOPNOTSUPP: no such mode;
    ///   ENOSPC: a veth with fewer rx queues than its peer's tx queues), or
    ///   the socket cannot be bound to the queue;
    /// - an invalid configuration value, or another system call failure.
    pub fn open(cfg: &AfXdpConfig) -> Result<AfXdpPort, Error> {
        check_config(cfg)?;
        let map_entries = cfg.queue_id.max(63) + 1;
        queues::open_on(cfg, &[cfg.queue_id], map_entries)?
            .pop()
            .ok_or_else(|| Error::config("AF_XDP: no queue to open".into()))
    }

    /// Builds the port from a bound socket and the interface's program.
    fn assemble(
        xsk: Xsk,
        cfg: &AfXdpConfig,
        ifindex: u32,
        mac: [u8; 6],
        mtu: usize,
        steering: Arc<Steering>,
    ) -> AfXdpPort {
        AfXdpPort {
            rx: xsk.rx,
            tx: xsk.tx,
            ifname: cfg.ifname.clone(),
            ifindex,
            queue_id: xsk.queue_id,
            zero_copy: xsk.zero_copy,
            mac,
            mtu,
            xsk: xsk.xsk,
            steering,
        }
    }

    /// The NIC queue the socket is bound to.
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// The mode the XDP program was attached in: Native or Generic (never
    /// Auto). Generic after an Auto fallback: the caller should warn. The
    /// same for every port of one [`AfXdpPort::open_queues`] call.
    pub fn xdp_mode(&self) -> XdpMode {
        self.steering.mode
    }

    /// Whether the socket is bound in zero-copy mode (else copy mode).
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The transmit path in use: Xsk or Packet (never Auto).
    pub fn tx_path(&self) -> TxPath {
        if self.tx.packet.is_some() {
            TxPath::Packet
        } else {
            TxPath::Xsk
        }
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Counters so far.
    pub fn stats(&self) -> AfXdpStats {
        AfXdpStats {
            rx_frames: self.rx.frames,
            rx_invalid: self.rx.invalid,
            tx_frames: self.tx.frames + self.tx.packet.as_ref().map_or(0, |p| p.stats().frames),
            tx_invalid: self.tx.invalid,
            tx_kicks: self.tx.kicks,
            tx_kick_errors: self.tx.kick_errors,
            rx_kicks: self.rx.kicks,
            packet: self.tx.packet.as_ref().map(PacketTx::stats),
        }
    }
}

impl Port for AfXdpPort {
    type Tx = AfXdpTx;

    fn rx_burst<F: FnMut(&[u8], &mut AfXdpTx)>(&mut self, max: usize, mut handle: F) -> usize {
        let AfXdpPort { rx, tx, .. } = self;
        rx.refill();
        let avail = rx
            .rx
            .load_producer()
            .wrapping_sub(rx.rx_cons)
            .min(rx.rx.size());
        let n = avail.min(u32::try_from(max).unwrap_or(u32::MAX));
        for i in 0..n {
            let desc = rx.rx.read(rx.rx_cons.wrapping_add(i));
            match rx.area.slice(desc.addr, desc.len as usize) {
                Some(frame) => {
                    rx.frames += 1;
                    handle(frame, tx);
                }
                None => rx.invalid += 1,
            }
            rx.recycle(desc.addr);
        }
        if n > 0 {
            rx.rx_cons = rx.rx_cons.wrapping_add(n);
            rx.rx.store_consumer(rx.rx_cons);
            rx.refill();
        }
        if rx.fill.needs_wakeup() {
            rx.kicks += 1;
            sys::kick_rx(rx.fd);
        }
        n as usize
    }

    fn tx(&mut self) -> &mut AfXdpTx {
        &mut self.tx
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The interface MTU, capped so a full frame fits a UMEM chunk after the
    /// 256-byte rx headroom (1774 bytes for 2048-byte chunks).
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            rx_checksum: false,
            // The packet socket asks the kernel (or the NIC) for it.
            tx_tcp_checksum: self.tx.packet.is_some(),
            tx_gso_max: self.tx.packet.as_ref().map_or(0, PacketTx::gso_max),
            tx_gather: self.tx.packet.is_some(),
        }
    }

    fn rx_drops(&self) -> crate::RxDrops {
        match sys::xdp_statistics(&self.xsk) {
            Ok(st) => crate::RxDrops {
                ring_full: st.rx_ring_full,
                fill_empty: st.rx_fill_ring_empty_descs,
                other: st.rx_dropped,
            },
            Err(_) => crate::RxDrops::default(),
        }
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.xsk.as_raw_fd())
    }
}
