//! The unsafe half of the AF_XDP driver: bpf(2) commands, the XSK socket
//! options, and the memory shared with the kernel (UMEM and the four rings).
//!
//! Shared-memory rules: the kernel writes the producer index of the rx and
//! completion rings and the consumer index of the fill and tx rings; we write
//! the other two. We read the kernel's index with `Acquire` (so descriptors
//! it published are visible) and publish ours with `Release` (so descriptors
//! we wrote are visible before the index). Descriptor contents read from a
//! ring are copied out by value and then validated by the caller.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

// bpf(2) commands (linux/bpf.h).
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;
/// `BPF_MAP_TYPE_XSKMAP`.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_PROG_TYPE_XDP`.
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` attach type.
const BPF_XDP: u32 = 37;

/// `SO_BUSY_POLL` (asm-generic/socket.h).
pub const SO_BUSY_POLL: libc::c_int = 46;
/// `SO_PREFER_BUSY_POLL`.
pub const SO_PREFER_BUSY_POLL: libc::c_int = 69;
/// `SO_BUSY_POLL_BUDGET`.
pub const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpfInsn {
    /// Opcode.
    pub code: u8,
    /// dst_reg in the low nibble, src_reg in the high nibble.
    pub regs: u8,
    /// Signed offset (jumps: in instructions, from the next one).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a `#[repr(C)]` prefix of `union bpf_attr` for `cmd`,
    // exclusively borrowed, and its size is passed; the kernel reads (and
    // for some commands writes) only those bytes. Pointers inside it point
    // to buffers the caller keeps alive across this call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

fn fd_from(rc: libc::c_long) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned `fd` as a new descriptor owned by us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates an XSKMAP with `max_entries` entries (key: queue id, value: XSK fd).
pub fn create_xskmap(max_entries: u32) -> io::Result<OwnedFd> {
    let mut name = [0u8; 16];
    name[..8].copy_from_slice(b"cs_xsks\0");
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries,
        map_name: name,
        ..MapCreateAttr::default()
    };
    fd_from(bpf(BPF_MAP_CREATE, &mut attr)?)
}

/// Sets `map[key] = value` in a map with 4-byte keys and values.
pub fn map_update_u32(map: &OwnedFd, key: u32, value: u32) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..MapElemAttr::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Loads an XDP program; on failure the verifier log (if any) is written
/// into `log` (NUL-terminated).
pub fn load_xdp_prog(insns: &[BpfInsn], log: &mut [u8]) -> io::Result<OwnedFd> {
    const LICENSE: &[u8] = b"Dual MIT/GPL\0";
    let mut name = [0u8; 16];
    name[..9].copy_from_slice(b"cs_steer\0");
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        prog_name: name,
        expected_attach_type: BPF_XDP,
        ..ProgLoadAttr::default()
    };
    if !log.is_empty() {
        attr.log_level = 1;
        attr.log_size = log.len() as u32;
        attr.log_buf = log.as_mut_ptr() as u64;
    }
    fd_from(bpf(BPF_PROG_LOAD, &mut attr)?)
}

/// Attaches an XDP program to `ifindex` as a bpf link (detached when the
/// link fd is closed). `flags`: XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE.
pub fn link_xdp(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    fd_from(bpf(BPF_LINK_CREATE, &mut attr)?)
}

/// A new AF_XDP socket.
pub fn xsk_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Registers `umem` as the UMEM of `xsk`, in chunks of `chunk_size` bytes.
pub fn umem_reg(xsk: &OwnedFd, umem: &Mmap, chunk_size: u32) -> io::Result<()> {
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr.as_ptr() as u64,
        len: umem.len as u64,
        chunk_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    crate::sys::setsockopt_raw(xsk.as_raw_fd(), libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
}

/// Reads the `SOL_XDP` socket option `opt` of `xsk` into `out`, a plain-data
/// `#[repr(C)]` kernel struct; returns the length in bytes the kernel wrote
/// (an older kernel may write a shorter layout).
///
/// Errors: the `getsockopt` error.
fn xdp_getsockopt<T>(xsk: &OwnedFd, opt: libc::c_int, out: &mut T) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` is exclusively borrowed and writable for `len` bytes, a
    // plain-data struct for which any bytes the kernel writes are valid;
    // `len` is a valid pointer.
    let rc = unsafe {
        libc::getsockopt(
            xsk.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (out as *mut T).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len as usize)
}

/// The ring mmap offsets of `xsk` (XDP_MMAP_OFFSETS).
pub fn mmap_offsets(xsk: &OwnedFd) -> io::Result<libc::xdp_mmap_offsets> {
    // SAFETY: plain data; all-zero bytes are valid.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let len = xdp_getsockopt(xsk, libc::XDP_MMAP_OFFSETS, &mut off)?;
    if len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
        // Pre-5.4 layout without the flags field: need-wakeup unsupported.
        return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
    }
    Ok(off)
}

/// The kernel's counters of `xsk` (XDP_STATISTICS): frames dropped because
/// the rx ring was full or the fill ring empty, and invalid descriptors.
pub fn xdp_statistics(xsk: &OwnedFd) -> io::Result<libc::xdp_statistics> {
    // SAFETY: plain data; all-zero bytes are valid.
    let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    xdp_getsockopt(xsk, libc::XDP_STATISTICS, &mut st)?;
    Ok(st)
}

/// XDP_ZEROCOPY, XDP_USE_NEED_WAKEUP).
pub fn xsk_bind(xsk: &OwnedFd, ifindex: u32, queue_id: u32, flags: u16) -> io::Result<()> {
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue_id,
        sxdp_shared_umem_fd: 0,
    };
    crate::sys::bind_addr(xsk, &sxdp)
}

/// Asks the kernel to process the tx ring (`sendto`, MSG_DONTWAIT).
pub fn kick_tx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send with a null buffer and no address; the
    // kernel reads no user memory.
    let rc = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to refill from the fill ring (`recvfrom`, MSG_DONTWAIT).
pub fn kick_rx(fd: RawFd) {
    // SAFETY: a zero-length receive with a null buffer and no address; the
    // kernel writes no user memory.
    let _ = unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// A memory mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory not tied to a thread; access to its
// contents is governed by the ring protocol, not by thread identity.
unsafe impl Send for Mmap {}
// SAFETY: as above; shared references only read through atomics or through
// disjoint frame areas.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// `len` bytes of zeroed anonymous memory, populated now.
    pub fn anonymous(len: usize) -> io::Result<Mmap> {
        Mmap::map(
            -1,
            len,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            0,
        )
    }

    /// `len` bytes of `fd` at page offset `offset` (a ring of an XSK).
    pub fn ring(fd: &OwnedFd, len: usize, offset: u64) -> io::Result<Mmap> {
        Mmap::map(
            fd.as_raw_fd(),
            len,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            offset as libc::off_t,
        )
    }

    fn map(fd: RawFd, len: usize, flags: libc::c_int, offset: libc::off_t) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping chosen by the kernel (no fixed address), so
        // it aliases no Rust object; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast()).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        Ok(Mmap { ptr, len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping we created and still own;
        // every borrower (`Ring`, `FrameArea`) holds it alive through
        // ownership or an `Arc`, so none outlives this.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One AF_XDP ring mapped from the socket: producer, consumer, flags and
/// `size` descriptors of type `T` (u64 addresses or `libc::xdp_desc`).
#[derive(Debug)]
pub struct Ring<T: Copy> {
    /// Keeps the ring mapped; unmapped on drop.
    _map: Mmap,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    mask: u32,
}

// SAFETY: see `Mmap`; the ring is used by one thread at a time (`&mut self`
// for writes) and the kernel side is synchronised through the atomics.
unsafe impl<T: Copy> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps a ring of `size` entries (a power of two) at `pgoff` using the
    /// kernel's offsets `off`.
    pub fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
    ) -> io::Result<Ring<T>> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mmap::ring(fd, len, pgoff)?;
        let fits = |o: u64, n: usize| (o as usize).checked_add(n).is_some_and(|end| end <= len);
        if !size.is_power_of_two()
            || !fits(off.producer, 4)
            || !fits(off.consumer, 4)
            || !fits(off.flags, 4)
            || off.producer & 3 != 0
            || off.consumer & 3 != 0
            || off.flags & 3 != 0
            || off.desc as usize & (std::mem::align_of::<T>() - 1) != 0
        {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let base = map.ptr.as_ptr();
        // SAFETY: every offset was checked above to lie inside the mapping
        // with room for its type and suitable alignment (the mapping is
        // page-aligned), so the derived pointers are in bounds and non-null.
        unsafe {
            Ok(Ring {
                producer: NonNull::new_unchecked(base.add(off.producer as usize).cast()),
                consumer: NonNull::new_unchecked(base.add(off.consumer as usize).cast()),
                flags: NonNull::new_unchecked(base.add(off.flags as usize).cast()),
                descs: NonNull::new_unchecked(base.add(off.desc as usize).cast()),
                mask: size - 1,
                _map: map,
            })
        }
    }

    /// Number of entries.
    pub fn size(&self) -> u32 {
        self.mask + 1
    }

    fn atomic(&self, p: NonNull<AtomicU32>) -> &AtomicU32 {
        // SAFETY: `p` points into `self.map`, aligned, alive as long as
        // `self`; the kernel accesses it atomically too.
        unsafe { p.as_ref() }
    }

    /// The producer index (Acquire: descriptors before it are visible).
    pub fn load_producer(&self) -> u32 {
        self.atomic(self.producer).load(Ordering::Acquire)
    }

    /// The consumer index (Acquire: the kernel is done with entries before it).
    pub fn load_consumer(&self) -> u32 {
        self.atomic(self.consumer).load(Ordering::Acquire)
    }

    /// Publishes our producer index (Release: descriptors written first).
    pub fn store_producer(&mut self, v: u32) {
        self.atomic(self.producer).store(v, Ordering::Release);
    }

    /// Publishes our consumer index (Release: descriptors read first).
    pub fn store_consumer(&mut self, v: u32) {
        self.atomic(self.consumer).store(v, Ordering::Release);
    }

    /// Whether the kernel set XDP_RING_NEED_WAKEUP. Preceded by a full
    /// fence so that our last index store is ordered before this load.
    pub fn needs_wakeup(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.atomic(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Copies out the descriptor at index `idx` (wrapped).
    pub fn read(&self, idx: u32) -> T {
        // SAFETY: `idx & mask` < size, inside the descriptor array; `T` is
        // plain data valid for any bit pattern; volatile because the kernel
        // shares this memory.
        unsafe {
            self.descs
                .as_ptr()
                .add((idx & self.mask) as usize)
                .read_volatile()
        }
    }

    /// Writes the descriptor at index `idx` (wrapped).
    pub fn write(&mut self, idx: u32, v: T) {
        // SAFETY: as in `read`; we own this entry until we publish it.
        unsafe {
            self.descs
                .as_ptr()
                .add((idx & self.mask) as usize)
                .write_volatile(v)
        }
    }
}

/// A contiguous part of the UMEM (the rx half or the tx half), addressed by
/// UMEM offsets in `base..base + len`.
#[derive(Debug)]
pub struct FrameArea {
    umem: Arc<Mmap>,
    base: usize,
    len: usize,
}

// SAFETY: holds the mapping alive through an `Arc`; contents are accessed
// through `&self`/`&mut self` of the one owner of this (disjoint) area.
unsafe impl Send for FrameArea {}

impl FrameArea {
    /// Splits `umem` at byte `split` into two disjoint areas.
    pub fn split(umem: Arc<Mmap>, split: usize) -> (FrameArea, FrameArea) {
        let split = split.min(umem.len);
        let len = umem.len;
        (
            FrameArea {
                umem: umem.clone(),
                base: 0,
                len: split,
            },
            FrameArea {
                umem,
                base: split,
                len: len - split,
            },
        )
    }

    /// The first UMEM offset of the area.
    pub fn base(&self) -> u64 {
        self.base as u64
    }

    /// Whether `addr..addr + len` (UMEM offsets) lies inside the area.
    pub fn contains(&self, addr: u64, len: usize) -> bool {
        let Ok(addr) = usize::try_from(addr) else {
            return false;
        };
        addr >= self.base
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.base + self.len)
    }

    /// The bytes at UMEM offsets `addr..addr + len`, or None if outside.
    pub fn slice(&self, addr: u64, len: usize) -> Option<&[u8]> {
        if !self.contains(addr, len) {
            return None;
        }
        // SAFETY: the range is inside this area (checked), which no other
        // `FrameArea` overlaps; the frame belongs to us (the kernel handed it
        // over through the rx ring and does not write it until we give it
        // back through the fill ring, after this borrow ends).
        Some(unsafe { std::slice::from_raw_parts(self.umem.ptr.as_ptr().add(addr as usize), len) })
    }

    /// The bytes at UMEM offsets `addr..addr + len`, mutably, or None.
    pub fn slice_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        if !self.contains(addr, len) {
            return None;
        }
        // SAFETY: as in `slice`; the frame is on our free list, so the
        // kernel does not read it until we post it on the tx ring, and
        // `&mut self` excludes any other borrow of this area.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.umem.ptr.as_ptr().add(addr as usize), len)
        })
    }
}
