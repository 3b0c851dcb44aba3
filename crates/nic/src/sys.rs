//! System calls shared by the drivers: interface ioctls, non-blocking
//! read/write, poll, AF_PACKET sockets and the monotonic clock.
//!
//! This is one of the few modules of the crate with `unsafe` code; each block
//! says why it is sound. Everything here is set-up code except `read_nb`,
//! `write_nb`, `recv_nb`, `send_nb`, `send_frames` and `monotonic_ns`, which
//! allocate nothing.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::Error;
use payload::TxPayload;

/// Interface names are at most IFNAMSIZ - 1 bytes.
const IFNAMSIZ: usize = libc::IFNAMSIZ;

/// `ETH_P_ALL` (linux/if_ether.h): every protocol.
const ETH_P_ALL: u16 = 0x0003;
/// `PACKET_IGNORE_OUTGOING` (linux/if_packet.h).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `PACKET_ADD_MEMBERSHIP` (linux/if_packet.h).
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
/// `PACKET_MR_PROMISC` (linux/if_packet.h).
const PACKET_MR_PROMISC: libc::c_ushort = 1;

/// `PACKET_VNET_HDR` (linux/if_packet.h): frames carry a virtio-net header.
const PACKET_VNET_HDR: libc::c_int = 15;
/// `PACKET_STATISTICS` (linux/if_packet.h): `struct tpacket_stats`.
const PACKET_STATISTICS: libc::c_int = 6;
/// Receive and send buffer of a bridge's packet socket, bytes: about 2700
/// full-sized frames, so that a sender's burst is not dropped by the socket
/// while the bridge waits to be scheduled (a loss the impairment model
/// would not account for).
const PACKET_BRIDGE_BUF: libc::c_int = 8 << 20;
/// Messages per `sendmmsg` call in [`send_frames`].
const SEND_CHUNK: usize = 64;

/// `struct packet_mreq` (linux/if_packet.h).
#[repr(C)]
struct PacketMreq {
    mr_ifindex: libc::c_int,
    mr_type: libc::c_ushort,
    mr_alen: libc::c_ushort,
    mr_address: [u8; 8],
}

/// Checks an interface name and returns it as a NUL-terminated C array.
pub(crate) fn ifname_c(ifname: &str) -> Result<[libc::c_char; IFNAMSIZ], Error> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= IFNAMSIZ || bytes.contains(&0) {
        return Err(Error::config(format!(
            "invalid interface name {ifname:?}: use 1 to {} bytes without NUL",
            IFNAMSIZ - 1
        )));
    }
    let mut out = [0 as libc::c_char; IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = *b as libc::c_char;
    }
    Ok(out)
}

/// The interface index of `ifname` in the caller's network namespace.
///
/// # Errors
/// "interface X not found (check `ip link`)" when it does not exist.
pub(crate) fn ifindex(ifname: &str) -> Result<u32, Error> {
    let name = ifname_c(ifname)?;
    // SAFETY: `name` is a NUL-terminated array that lives across the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(Error::no_such_interface(ifname));
    }
    Ok(index)
}

/// An AF_INET datagram socket, the handle for interface ioctls.
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A zeroed `ifreq` naming `ifname`.
fn ifreq_for(ifname: &str) -> Result<libc::ifreq, Error> {
    let name = ifname_c(ifname)?;
    // SAFETY: `ifreq` is plain data (integers, arrays, a union of those and
    // a pointer); all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name = name;
    Ok(req)
}

/// Runs one interface ioctl on `req`.
fn if_ioctl(request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    let sock = ioctl_socket()?;
    // SAFETY: `req` is a valid, exclusively borrowed ifreq for the SIOC*
    // requests used in this module, which read and write only that struct,
    // except SIOCETHTOOL, which also reads and writes the `ethtool_*` struct
    // `ifru_data` points to: the caller keeps it alive and exclusively
    // borrowed across this call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, req as *mut libc::ifreq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The hardware address of `ifname` (SIOCGIFHWADDR).
pub(crate) fn if_hwaddr(ifname: &str) -> Result<[u8; 6], Error> {
    let mut req = ifreq_for(ifname)?;
    if_ioctl(libc::SIOCGIFHWADDR, &mut req).map_err(|e| if_error(ifname, "SIOCGIFHWADDR", e))?;
    // SAFETY: SIOCGIFHWADDR succeeded, so the union holds `ifru_hwaddr`.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *m = *b as u8;
    }
    Ok(mac)
}

/// The MTU of `ifname` in bytes (SIOCGIFMTU).
pub(crate) fn if_mtu(ifname: &str) -> Result<u32, Error> {
    let mut req = ifreq_for(ifname)?;
    if_ioctl(libc::SIOCGIFMTU, &mut req).map_err(|e| if_error(ifname, "SIOCGIFMTU", e))?;
    // SAFETY: SIOCGIFMTU succeeded, so the union holds `ifru_mtu`.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(u32::try_from(mtu).unwrap_or(0))
}

/// Brings `ifname` up (SIOCGIFFLAGS, SIOCSIFFLAGS) if it is down; returns
/// whether it had to.
pub(crate) fn if_set_up(ifname: &str) -> Result<bool, Error> {
    let mut req = ifreq_for(ifname)?;
    if_ioctl(libc::SIOCGIFFLAGS, &mut req).map_err(|e| if_error(ifname, "SIOCGIFFLAGS", e))?;
    // SAFETY: SIOCGIFFLAGS succeeded, so the union holds `ifru_flags`.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    if flags & libc::IFF_UP as libc::c_short != 0 {
        return Ok(false);
    }
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    if_ioctl(libc::SIOCSIFFLAGS, &mut req).map_err(|e| {
        if e.raw_os_error() == Some(libc::EPERM) {
            Error::permission(
                &format!("bringing {ifname} up"),
                "run as root or with CAP_NET_ADMIN, or `ip link set dev IF up` first",
                e,
            )
        } else {
            if_error(ifname, "SIOCSIFFLAGS", e)
        }
    })?;
    Ok(true)
}

/// `SIOCETHTOOL` (linux/sockios.h).
const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// `ETHTOOL_GCHANNELS` (linux/ethtool.h).
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// The number of receive queues `ifname` has now: combined plus rx-only
/// channels (`ethtool -l`, ETHTOOL_GCHANNELS). `Ok(None)` when the driver
/// does not report channels (EOPNOTSUPP, e.g. loopback) or reports none.
pub(crate) fn if_rx_queues(ifname: &str) -> Result<Option<u32>, Error> {
    let mut req = ifreq_for(ifname)?;
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    req.ifr_ifru.ifru_data = (&mut ch as *mut EthtoolChannels).cast();
    match if_ioctl(SIOCETHTOOL, &mut req) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(None),
        Err(e) => return Err(if_error(ifname, "ETHTOOL_GCHANNELS", e)),
    }
    let n = ch.combined_count.saturating_add(ch.rx_count);
    Ok((n > 0).then_some(n))
}

/// `ETHTOOL_GRSSH` and `ETHTOOL_SRSSH` (linux/ethtool.h).
const ETHTOOL_GRSSH: u32 = 0x46;
const ETHTOOL_SRSSH: u32 = 0x47;
/// `ETH_RSS_HASH_TOP`: the Toeplitz hash function.
const ETH_RSS_HASH_TOP: u8 = 1;
/// 32-bit words of `struct ethtool_rxfh` before its `rss_config` array
/// (cmd, rss_context, indir_size, key_size, hfunc/input_xfrm/rsvd8[2],
/// rsvd32).
const RXFH_HEADER_WORDS: usize = 6;

/// Runs ETHTOOL_GRSSH or ETHTOOL_SRSSH on `ifname` with the
/// `struct ethtool_rxfh` in `words` (header, then `rss_config`).
fn if_rxfh(ifname: &str, words: &mut [u32]) -> io::Result<()> {
    let mut req = ifreq_for(ifname).map_err(|e| io::Error::other(e.to_string()))?;
    req.ifr_ifru.ifru_data = words.as_mut_ptr().cast();
    if_ioctl(SIOCETHTOOL, &mut req)
}

/// The sizes of `ifname`'s RSS indirection table (entries) and hash key
/// (bytes), from ETHTOOL_GRSSH (`ethtool -x`). Errors: the ioctl's
/// (EOPNOTSUPP when the driver has no programmable RSS, as veth and tap).
pub(crate) fn if_rss_sizes(ifname: &str) -> io::Result<(u32, u32)> {
    let mut words = [0u32; RXFH_HEADER_WORDS];
    words[0] = ETHTOOL_GRSSH;
    if_rxfh(ifname, &mut words)?;
    Ok((words[2], words[3]))
}

/// Programs `ifname`'s RSS (ETHTOOL_SRSSH, `ethtool -X IF hkey … hfunc
/// toeplitz weight …`): the Toeplitz function, `key` (the size
/// [`if_rss_sizes`] gave) and `table` (a queue per indirection entry, as
/// many entries as it gave). Errors: the ioctl's.
pub(crate) fn if_set_rss(ifname: &str, table: &[u32], key: &[u8]) -> io::Result<()> {
    let key_words = key.len().div_ceil(4);
    let mut words = vec![0u32; RXFH_HEADER_WORDS + table.len() + key_words];
    words[0] = ETHTOOL_SRSSH;
    words[2] =
        u32::try_from(table.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    words[3] =
        u32::try_from(key.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    words[4] = u32::from_ne_bytes([ETH_RSS_HASH_TOP, 0, 0, 0]);
    words[RXFH_HEADER_WORDS..RXFH_HEADER_WORDS + table.len()].copy_from_slice(table);
    // The key's bytes follow the table, in memory order.
    for (i, chunk) in key.chunks(4).enumerate() {
        let mut b = [0u8; 4];
        b[..chunk.len()].copy_from_slice(chunk);
        words[RXFH_HEADER_WORDS + table.len() + i] = u32::from_ne_bytes(b);
    }
    if_rxfh(ifname, &mut words)
}

fn if_error(ifname: &str, what: &str, e: io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ENODEV) {
        Error::no_such_interface(ifname)
    } else {
        Error::io(&format!("{what} on {ifname}"), e)
    }
}

/// Reads one datagram/frame without blocking; `Ok(None)` when none is ready.
pub(crate) fn read_nb(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    nb_result(n)
}

/// Writes one frame; `Ok(None)` when the device would block.
pub(crate) fn write_nb(fd: RawFd, buf: &[u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    nb_result(n)
}

/// Receives one frame with MSG_DONTWAIT; `Ok(None)` when none is ready.
pub(crate) fn recv_nb(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    nb_result(n)
}

/// Sends one frame with MSG_DONTWAIT; `Ok(None)` when it would block.
pub(crate) fn send_nb(fd: RawFd, buf: &[u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    nb_result(n)
}

fn nb_result(n: isize) -> io::Result<Option<usize>> {
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
        _ => Err(e),
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; returns a
/// readable flag per fd (at most 2 fds).
pub(crate) fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<[bool; 2]> {
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 2];
    let n = fds.len().min(2);
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = *fd;
        p.events = libc::POLLIN;
    }
    // SAFETY: `pfds` holds `n` initialised pollfd entries, exclusively borrowed.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok([false; 2]);
        }
        return Err(e);
    }
    Ok([pfds[0].revents != 0, pfds[1].revents != 0])
}

/// Sets an integer socket option.
pub(crate) fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    setsockopt_raw(fd, level, name, &value)
}

/// Sets a socket option to the bytes of `value`.
pub(crate) fn setsockopt_raw<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to `size_of::<T>()` readable bytes for the call;
    // callers pass the `#[repr(C)]` struct the option expects.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An AF_PACKET raw socket bound to `ifindex` for every protocol, ignoring
/// its own outgoing frames, with the interface in promiscuous mode and 8 MiB
/// receive and send buffers (forced when privileged, else as large as
/// `rmem_max` / `wmem_max` allow).
pub(crate) fn packet_socket(ifindex: u32) -> io::Result<OwnedFd> {
    let sock = raw_packet_socket()?;
    let raw = sock.as_raw_fd();
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if setsockopt_int(raw, libc::SOL_SOCKET, force, PACKET_BRIDGE_BUF).is_err() {
            setsockopt_int(raw, libc::SOL_SOCKET, plain, PACKET_BRIDGE_BUF)?;
        }
    }
    bind_ll(&sock, ifindex, ETH_P_ALL)?;
    // Kernels before 4.20 lack the option; forwarding still works there,
    // only less efficiently, so an error is ignored.
    let _ = setsockopt_int(
        sock.as_raw_fd(),
        libc::SOL_PACKET,
        PACKET_IGNORE_OUTGOING,
        1,
    );
    let mreq = PacketMreq {
        mr_ifindex: ifindex as libc::c_int,
        mr_type: PACKET_MR_PROMISC,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    setsockopt_raw(
        sock.as_raw_fd(),
        libc::SOL_PACKET,
        PACKET_ADD_MEMBERSHIP,
        &mreq,
    )?;
    Ok(sock)
}

/// Frames the kernel dropped because a packet socket's receive buffer was
/// full, since the last call (`PACKET_STATISTICS`, which resets the counts).
pub(crate) fn packet_drops(fd: RawFd) -> io::Result<u64> {
    #[repr(C)]
    #[derive(Default)]
    struct TpacketStats {
        tp_packets: u32,
        tp_drops: u32,
    }
    let mut st = TpacketStats::default();
    let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
    // SAFETY: `st` is a writable `struct tpacket_stats` of `len` bytes and
    // `len` a valid in/out length for the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            (&mut st as *mut TpacketStats).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from(st.tp_drops))
}

/// An AF_PACKET raw socket that only transmits, on `ifindex`: bound with
/// protocol 0 so nothing is queued to it, every frame preceded by a
/// `struct virtio_net_hdr` (checksum and GSO requests), and a send buffer
/// of `sndbuf` bytes (forced when privileged, else as large as `wmem_max`
/// allows). Not PACKET_QDISC_BYPASS: the direct path drops every frame that
/// needs segmenting in software (`__dev_direct_xmit`).
pub(crate) fn packet_tx_socket(ifindex: u32, sndbuf: usize) -> io::Result<OwnedFd> {
    let sock = raw_packet_socket()?;
    let raw = sock.as_raw_fd();
    setsockopt_int(raw, libc::SOL_PACKET, PACKET_VNET_HDR, 1)?;
    let size = sndbuf.min(i32::MAX as usize) as libc::c_int;
    if setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, size).is_err() {
        setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, size)?;
    }
    // Protocol 0: this socket receives nothing.
    bind_ll(&sock, ifindex, 0)?;
    Ok(sock)
}

/// A non-blocking AF_PACKET raw socket for no protocol yet, so nothing is
/// queued to it before it is bound.
fn raw_packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds a packet socket to `ifindex` for `protocol` (an ETH_P_* value in
/// host order; 0 receives nothing).
fn bind_ll(sock: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: `sockaddr_ll` is plain data; all-zero bytes are valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as libc::c_int;
    bind_addr(sock, &sll)
}

/// A C socket address structure that bind(2) takes whole.
pub(crate) trait SockAddr {}
impl SockAddr for libc::sockaddr_ll {}
impl SockAddr for libc::sockaddr_xdp {}

/// Binds `sock` to `addr` (bind(2) with the structure's own size).
/// Errors: bind(2)'s errno (EINVAL for a wrong family, ENODEV, EBUSY, ...).
pub(crate) fn bind_addr<A: SockAddr>(sock: &OwnedFd, addr: &A) -> io::Result<()> {
    // SAFETY: `addr` points to a whole socket address structure (`SockAddr`
    // is implemented only for those) and the length is that structure's.
    let rc = unsafe {
        libc::bind(
            sock.as_raw_fd(),
            (addr as *const A).cast(),
            std::mem::size_of::<A>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What [`send_frames`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Frames the kernel took.
    pub sent: usize,
    /// Frames it refused (each failed once; the rest still went).
    pub refused: usize,
    /// The errno of the last refusal.
    pub last_errno: Option<i32>,
}

/// Sends every frame with `sendmmsg` (MSG_DONTWAIT), [`SEND_CHUNK`] per
/// call, skipping a frame the kernel refuses. A frame is its bytes and,
/// if given, a payload that follows them (one message of up to three
/// iovecs). Allocates nothing.
pub(crate) fn send_frames<'a>(
    fd: RawFd,
    frames: impl Iterator<Item = (&'a [u8], Option<&'a TxPayload>)>,
) -> Sent {
    let mut out = Sent::default();
    let mut frames = frames.peekable();
    while frames.peek().is_some() {
        // SAFETY: iovec and mmsghdr are plain data; all-zero bytes are valid.
        let mut iov: [[libc::iovec; 3]; SEND_CHUNK] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; SEND_CHUNK] = unsafe { std::mem::zeroed() };
        let mut k = 0;
        while k < SEND_CHUNK {
            let Some((f, payload)) = frames.next() else {
                break;
            };
            let v = &mut iov[k];
            v[0] = libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            };
            let mut n = 1;
            for (ptr, len) in payload.into_iter().flat_map(|p| p.raw_parts()) {
                v[n] = libc::iovec {
                    iov_base: ptr as *mut libc::c_void,
                    iov_len: len,
                };
                n += 1;
            }
            msgs[k].msg_hdr.msg_iovlen = n;
            k += 1;
        }
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()).take(k) {
            m.msg_hdr.msg_iov = v.as_mut_ptr();
        }
        let mut i = 0;
        while i < k {
            // SAFETY: msgs[i..k] are initialised headers whose iovecs point
            // into a frame slice borrowed for this whole call and into the
            // memory of a payload that the same borrow keeps mapped
            // (`TxPayload` holds its `StableMemory`, and `raw_parts` are
            // inside it); the kernel only reads them (it copies the frames
            // before returning) and writes msg_len inside `msgs`.
            let rc = unsafe {
                libc::sendmmsg(
                    fd,
                    msgs[i..].as_mut_ptr(),
                    (k - i) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if rc > 0 {
                i += rc as usize;
                out.sent += rc as usize;
                continue;
            }
            let errno = io::Error::last_os_error().raw_os_error();
            if errno == Some(libc::EINTR) {
                continue;
            }
            out.refused += 1;
            out.last_errno = errno;
            i += 1;
        }
    }
    out
}

/// CLOCK_MONOTONIC in ns.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusively borrowed timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// An epoll instance watching `fds` for input (level-triggered): it polls
/// readable when any of them is, so one fd stands for several queues.
/// Errors: the errno of `epoll_create1` or `epoll_ctl` (EMFILE, ENOMEM, EBADF).
pub(crate) fn epoll_readable(fds: &[RawFd]) -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes no pointers; the result is checked below.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `ep` is a new fd that nothing else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for &fd in fds {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a live epoll_event for the duration of the call.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(ep)
}
