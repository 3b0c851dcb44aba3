//! The unsafe half of the TAP driver: opening `/dev/net/tun` and TUNSETIFF.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use crate::error::{Error, ErrorKind};

/// Opens `/dev/net/tun` non-blocking and attaches it to the TAP device
/// `ifname` (IFF_TAP | IFF_NO_PI), creating the device if it does not exist;
/// with `multi_queue`, as one more queue of a multi-queue device
/// (IFF_MULTI_QUEUE).
pub fn open_tap(ifname: &str, multi_queue: bool) -> Result<OwnedFd, Error> {
    let name = crate::sys::ifname_c(ifname)?;
    // SAFETY: the path is a NUL-terminated literal; the result is checked.
    let fd = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => Error::with_source(
                ErrorKind::NoTunDevice,
                "/dev/net/tun: no such device: load the tun module or use --driver af_xdp".into(),
                e,
            ),
            Some(libc::EPERM) | Some(libc::EACCES) => Error::permission(
                "opening /dev/net/tun",
                "run as root or with CAP_NET_ADMIN",
                e,
            ),
            _ => Error::io("opening /dev/net/tun", e),
        });
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let tun = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifreq` is plain data; all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name = name;
    let mq = if multi_queue {
        libc::IFF_MULTI_QUEUE
    } else {
        0
    };
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI | mq) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes only the ifreq we pass, which is
    // valid and exclusively borrowed for the call.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&tun),
            libc::TUNSETIFF as _,
            &mut req as *mut libc::ifreq,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Error::permission(
                &format!("attaching to tap device {ifname}"),
                "run as root or with CAP_NET_ADMIN, or create it with `ip tuntap add dev IF mode tap user $USER`",
                e,
            ),
            Some(libc::EBUSY) => Error::with_source(
                ErrorKind::Io,
                format!("tap device {ifname} is busy: another process has it open (close it or use another name)"),
                e,
            ),
            Some(libc::EINVAL) if multi_queue => Error::with_source(
                ErrorKind::InvalidConfig,
                format!("{ifname} exists but is not a multi-queue tap device with IFF_NO_PI: several engines need one (`ip tuntap add dev {ifname} mode tap multi_queue`), or use --cores 1"),
                e,
            ),
            Some(libc::EINVAL) => Error::with_source(
                ErrorKind::InvalidConfig,
                format!("{ifname} exists but is not a tap device with IFF_NO_PI (check `ip -d link show {ifname}`)"),
                e,
            ),
            _ => Error::io(&format!("TUNSETIFF on {ifname}"), e),
        });
    }
    Ok(tun)
}
