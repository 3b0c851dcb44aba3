//! The control socket of service mode, and the kernel objects passed over it.
//!
//! `corestack run` owns the NIC and listens on a Unix stream socket
//! ([`DEFAULT_SOCKET`], or `CORESTACK_SOCKET`). An application connects and
//! says [`Hello`]; the daemon answers [`Welcome`] and, when it accepts, passes
//! two file descriptors with it by `SCM_RIGHTS`: the memfd that holds the
//! application's context and the engine's doorbell eventfd. From then on the
//! two sides talk only through that shared memory and the doorbells; the
//! socket stays open so that each side sees the other go away (EOF / EPOLLHUP).
//!
//! ```text
//!   app                                  daemon
//!   connect(ctl.sock) ──────────────────► accept, SO_PEERCRED
//!   Hello {nslots, ring_bytes, name} ───►
//!                     ◄──────────────── Welcome {status = 0, assoc, ...}
//!                                         + SCM_RIGHTS [memfd, doorbell]
//!   mmap(memfd) ... shared memory only ...
//! ```
//!
//! Messages are fixed-size and little-endian, each starting with a magic and
//! [`CTL_VERSION`]; decoding checks length, magic and version and never
//! panics. Every fd made or received here is close-on-exec.
//!
//! Everything here is plain blocking-or-not system calls; nothing is meant for
//! the engine's hot path except [`eventfd_signal`] and [`eventfd_drain`].

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Where the daemon listens when neither its configuration nor
/// `CORESTACK_SOCKET` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/corestack/ctl.sock";

/// The environment variable that names the control socket for applications.
pub const SOCKET_ENV: &str = "CORESTACK_SOCKET";

/// The protocol version carried by every message; a peer with another
/// version is refused ([`CtlError::Version`]).
pub const CTL_VERSION: u16 = 2;

/// The longest application name a [`Hello`] carries, in bytes.
pub const NAME_MAX: usize = 31;

/// The control socket named by `CORESTACK_SOCKET`; `None` when it is unset or
/// empty (then use [`DEFAULT_SOCKET`]).
pub fn socket_path_from_env() -> Option<PathBuf> {
    socket_path_from(std::env::var_os(SOCKET_ENV))
}

fn socket_path_from(value: Option<std::ffi::OsString>) -> Option<PathBuf> {
    value.filter(|v| !v.is_empty()).map(PathBuf::from)
}

// The kernel objects of the control path (their system calls live in `sys`).
pub use crate::sys::{
    eventfd, eventfd_drain, eventfd_signal, keep_eventfds, memfd, peer_cred, pidfd_exited,
    pidfd_open, recv_msg, send_msg, supplementary_gids, Epoll, PeerCred, MAX_FDS,
};

// ---------------------------------------------------------------------------
// Control messages
// ---------------------------------------------------------------------------

/// Why a control message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CtlError {
    /// The message was not exactly `expected` bytes long.
    Length {
        /// The message's fixed length, in bytes.
        expected: usize,
        /// The length received, in bytes.
        got: usize,
    },
    /// The first four bytes are not this message's magic.
    Magic(u32),
    /// The peer speaks another protocol version than [`CTL_VERSION`].
    Version(u16),
    /// A [`Welcome`] status that is neither 0 nor a positive errno.
    Status(i32),
}

impl fmt::Display for CtlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CtlError::Length { expected, got } => {
                write!(f, "control message of {got} bytes, expected {expected}")
            }
            CtlError::Magic(m) => write!(f, "not a corestack control message (magic {m:#010x})"),
            CtlError::Version(v) => write!(
                f,
                "control protocol version {v}, this side speaks {CTL_VERSION} \
                 (application and daemon are from different corestack versions)"
            ),
            CtlError::Status(s) => write!(f, "invalid status {s} in welcome"),
        }
    }
}

impl std::error::Error for CtlError {}

impl From<CtlError> for io::Error {
    fn from(e: CtlError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

const HELLO_MAGIC: u32 = u32::from_le_bytes(*b"csHI");
const WELCOME_MAGIC: u32 = u32::from_le_bytes(*b"csWL");

/// The size of an encoded [`Hello`], in bytes.
pub const HELLO_LEN: usize = 56;
/// The size of an encoded [`Welcome`], in bytes.
pub const WELCOME_LEN: usize = 40;

/// Application -> daemon, first message on a new connection: what the
/// application would like. The daemon may grant less (see [`Welcome`]).
///
/// Layout (little-endian): magic u32 @0, version u16 @4, reserved u16 @6,
/// nslots u32 @8, ring_bytes u32 @12, name [u8; 32] @16 (NUL-padded),
/// parent u32 @48, reserved u32 @52.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hello {
    /// Connection slots wanted (how many sockets at once); 0 = the daemon's
    /// default.
    pub nslots: u32,
    /// Size of each connection's RX and TX byte ring, in bytes; 0 = the
    /// daemon's default.
    pub ring_bytes: u32,
    /// A name for the application in logs and `corestack ss`; at most
    /// [`NAME_MAX`] bytes are sent (cut at a character boundary).
    pub name: String,
    /// A forked child's claim: the association of its parent process, whose
    /// listeners it may join (`Desc::JoinListener`); 0 for none. The daemon
    /// checks with `SO_PEERCRED` and `/proc/<pid>/stat` that the parent
    /// process of the connecting one is that association's process, and
    /// refuses the hello with EPERM otherwise.
    pub parent: u32,
    /// With `parent`: the ticket of the fork that made this process (the
    /// parent's `Desc::Forking`), whose references it may take over; 0
    /// for none (then only the `/proc` ancestry check admits it).
    pub ticket: u32,
}

impl Hello {
    /// The wire form.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b: [u8; HELLO_LEN] = with_header(HELLO_MAGIC);
        b[8..12].copy_from_slice(&self.nslots.to_le_bytes());
        b[12..16].copy_from_slice(&self.ring_bytes.to_le_bytes());
        let mut end = self.name.len().min(NAME_MAX);
        while !self.name.is_char_boundary(end) {
            end -= 1;
        }
        b[16..16 + end].copy_from_slice(&self.name.as_bytes()[..end]);
        b[48..52].copy_from_slice(&self.parent.to_le_bytes());
        b[52..56].copy_from_slice(&self.ticket.to_le_bytes());
        b
    }

    /// Parses the wire form. The name ends at the first NUL (or after
    /// [`NAME_MAX`] bytes); invalid UTF-8 in it is replaced, not refused.
    ///
    /// Errors: [`CtlError::Length`] unless `b` is exactly [`HELLO_LEN`] bytes,
    /// [`CtlError::Magic`], [`CtlError::Version`].
    pub fn decode(b: &[u8]) -> Result<Hello, CtlError> {
        let b: &[u8; HELLO_LEN] = framed(b, HELLO_MAGIC)?;
        let field = &b[16..16 + NAME_MAX];
        let end = field.iter().position(|&c| c == 0).unwrap_or(NAME_MAX);
        Ok(Hello {
            nslots: le_u32(b, 8),
            ring_bytes: le_u32(b, 12),
            name: String::from_utf8_lossy(&field[..end]).into_owned(),
            parent: le_u32(b, 48),
            ticket: le_u32(b, 52),
        })
    }
}

/// Daemon -> application, the answer to [`Hello`]. When `status` is 0 it
/// comes with two fds, in this order: the context memfd (`seg_len` bytes, to
/// map shared) and the engine's doorbell eventfd; otherwise with none, and
/// the daemon closes the connection.
///
/// Layout (little-endian): magic u32 @0, version u16 @4, reserved u16 @6,
/// status i32 @8, assoc u32 @12, nslots u32 @16, ring_bytes u32 @20,
/// cmd_slots u32 @24, reserved u32 @28, seg_len u64 @32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Welcome {
    /// 0 = accepted; else a positive errno saying why not (`EMFILE` for
    /// too many applications, `EINVAL` for a bad hello, `EPERM` for a
    /// parent claim that does not check out).
    pub status: i32,
    /// The association id the daemon gave this application.
    pub assoc: u32,
    /// Connection slots granted.
    pub nslots: u32,
    /// Size of each connection's RX and TX byte ring, in bytes.
    pub ring_bytes: u32,
    /// Slots in the command ring (and the event ring).
    pub cmd_slots: u32,
    /// Length of the context memfd, in bytes.
    pub seg_len: u64,
}

impl Welcome {
    /// A refusal carrying `errno` (positive), with every other field 0.
    pub fn refused(errno: i32) -> Welcome {
        Welcome {
            status: errno,
            ..Welcome::default()
        }
    }

    /// The wire form.
    pub fn encode(&self) -> [u8; WELCOME_LEN] {
        let mut b: [u8; WELCOME_LEN] = with_header(WELCOME_MAGIC);
        b[8..12].copy_from_slice(&self.status.to_le_bytes());
        b[12..16].copy_from_slice(&self.assoc.to_le_bytes());
        b[16..20].copy_from_slice(&self.nslots.to_le_bytes());
        b[20..24].copy_from_slice(&self.ring_bytes.to_le_bytes());
        b[24..28].copy_from_slice(&self.cmd_slots.to_le_bytes());
        b[32..40].copy_from_slice(&self.seg_len.to_le_bytes());
        b
    }

    /// Parses the wire form.
    ///
    /// Errors: [`CtlError::Length`] unless `b` is exactly [`WELCOME_LEN`]
    /// bytes, [`CtlError::Magic`], [`CtlError::Version`], and
    /// [`CtlError::Status`] for a negative status.
    pub fn decode(b: &[u8]) -> Result<Welcome, CtlError> {
        let (b, status) = framed_reply::<WELCOME_LEN>(b, WELCOME_MAGIC)?;
        Ok(Welcome {
            status,
            assoc: le_u32(b, 12),
            nslots: le_u32(b, 16),
            ring_bytes: le_u32(b, 20),
            cmd_slots: le_u32(b, 24),
            seg_len: le_u64(b, 32),
        })
    }
}

const BORROW_MAGIC: u32 = u32::from_le_bytes(*b"csBR");
const LENT_MAGIC: u32 = u32::from_le_bytes(*b"csLT");

/// The size of an encoded [`Borrow`], in bytes.
pub const BORROW_LEN: usize = 24;
/// The size of an encoded [`Lent`], in bytes.
pub const LENT_LEN: usize = 32;

/// Application -> daemon, alone on a new connection: association `assoc`
/// received an fd with SCM_RIGHTS whose open file is `key` (an eventfd's
/// `eventfd-id`, else the inode, from `/proc/self/fdinfo`); if another
/// application lent a corestack connection under that key
/// (`Desc::Lend`), the daemon answers with [`Lent`] and the lender's
/// segment, and the receiver may take the connection over
/// (`Desc::Adopt`).
///
/// The daemon checks in `/proc/<pid>/fdinfo/<fd>` (or the fd's link) that
/// the asking process holds an fd with that key: keys are small counters,
/// and naming one proves nothing.
///
/// Layout (little-endian): magic u32 @0, version u16 @4, reserved u16 @6,
/// assoc u32 @8, fd u32 @12, key u64 @16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Borrow {
    /// The receiving application's association.
    pub assoc: u32,
    /// The received fd's number in the receiving process.
    pub fd: u32,
    /// The received fd's open-file key.
    pub key: u64,
}

impl Borrow {
    /// The wire form.
    pub fn encode(&self) -> [u8; BORROW_LEN] {
        let mut b: [u8; BORROW_LEN] = with_header(BORROW_MAGIC);
        b[8..12].copy_from_slice(&self.assoc.to_le_bytes());
        b[12..16].copy_from_slice(&self.fd.to_le_bytes());
        b[16..24].copy_from_slice(&self.key.to_le_bytes());
        b
    }

    /// Parses the wire form. Errors: as [`Welcome::decode`]'s, for
    /// [`BORROW_LEN`] bytes.
    pub fn decode(b: &[u8]) -> Result<Borrow, CtlError> {
        let b: &[u8; BORROW_LEN] = framed(b, BORROW_MAGIC)?;
        Ok(Borrow {
            assoc: le_u32(b, 8),
            fd: le_u32(b, 12),
            key: le_u64(b, 16),
        })
    }
}

/// Daemon -> application, the answer to [`Borrow`]: `status` 0 and the
/// lender's segment memfd (`seg_len` bytes) with it, the connection being
/// slot `slot` of association `owner`; else a positive errno (ENOENT: no
/// connection was lent under that key; EPERM: the asker is not that
/// association's process) and no fd.
///
/// Layout (little-endian): magic u32 @0, version u16 @4, reserved u16 @6,
/// status i32 @8, owner u32 @12, slot u32 @16, engine u32 @20,
/// seg_len u64 @24.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lent {
    /// 0, or a positive errno.
    pub status: i32,
    /// The lender's association.
    pub owner: u32,
    /// The connection's slot in the lender's segment.
    pub slot: u32,
    /// The engine that holds the connection (0 with one engine).
    pub engine: u32,
    /// The length of the lender's segment memfd, bytes.
    pub seg_len: u64,
}

impl Lent {
    /// The wire form.
    pub fn encode(&self) -> [u8; LENT_LEN] {
        let mut b: [u8; LENT_LEN] = with_header(LENT_MAGIC);
        b[8..12].copy_from_slice(&self.status.to_le_bytes());
        b[12..16].copy_from_slice(&self.owner.to_le_bytes());
        b[16..20].copy_from_slice(&self.slot.to_le_bytes());
        b[20..24].copy_from_slice(&self.engine.to_le_bytes());
        b[24..32].copy_from_slice(&self.seg_len.to_le_bytes());
        b
    }

    /// Parses the wire form. Errors: as [`Welcome::decode`]'s, for
    /// [`LENT_LEN`] bytes.
    pub fn decode(b: &[u8]) -> Result<Lent, CtlError> {
        let (b, status) = framed_reply::<LENT_LEN>(b, LENT_MAGIC)?;
        Ok(Lent {
            status,
            owner: le_u32(b, 12),
            slot: le_u32(b, 16),
            engine: le_u32(b, 20),
            seg_len: le_u64(b, 24),
        })
    }
}

/// The open-file key of fd `fd` of process `pid` (`"self"` for this one),
/// the same for every process holding that open file: an eventfd's
/// `eventfd-id` (Linux 6.x; eventfds share one anonymous inode), a
/// socket's inode; None for anything else, or when `/proc` does not say
/// (no such fd, no permission).
pub fn fd_key(pid: &str, fd: i32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let link = link.to_string_lossy();
    if let Some(ino) = link.strip_prefix("socket:[") {
        return ino.trim_end_matches(']').parse().ok();
    }
    if link != "anon_inode:[eventfd]" {
        return None;
    }
    std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("eventfd-id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The little-endian u64 at `off`; callers pass offsets inside fixed arrays.
fn le_u64(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(w)
}

/// A message of `N` bytes, zero but for its header: `magic` and [`CTL_VERSION`].
fn with_header<const N: usize>(magic: u32) -> [u8; N] {
    let mut b = [0u8; N];
    b[0..4].copy_from_slice(&magic.to_le_bytes());
    b[4..6].copy_from_slice(&CTL_VERSION.to_le_bytes());
    b
}

/// `b` as a message of exactly `N` bytes (`N` at least 8) with a good header.
///
/// Errors: [`CtlError::Length`] for another length, then those of [`check_header`].
fn framed<const N: usize>(b: &[u8], magic: u32) -> Result<&[u8; N], CtlError> {
    let b: &[u8; N] = b.try_into().map_err(|_| CtlError::Length {
        expected: N,
        got: b.len(),
    })?;
    check_header(b, magic)?;
    Ok(b)
}

/// `b` as a reply of exactly `N` bytes (`N` at least 12): [`framed`], and its status word
/// at byte 8 (0 or a positive errno).
///
/// Errors: those of [`framed`], and [`CtlError::Status`] for a negative status.
fn framed_reply<const N: usize>(b: &[u8], magic: u32) -> Result<(&[u8; N], i32), CtlError> {
    let b: &[u8; N] = framed(b, magic)?;
    let status = le_u32(b, 8) as i32;
    if status < 0 {
        return Err(CtlError::Status(status));
    }
    Ok((b, status))
}

/// Checks magic and version; `b` is at least 8 bytes (callers pass fixed
/// arrays of [`WELCOME_LEN`] or [`HELLO_LEN`]).
fn check_header(b: &[u8], magic: u32) -> Result<(), CtlError> {
    let m = le_u32(b, 0);
    if m != magic {
        return Err(CtlError::Magic(m));
    }
    let v = u16::from_le_bytes([b[4], b[5]]);
    if v != CTL_VERSION {
        return Err(CtlError::Version(v));
    }
    Ok(())
}

/// The little-endian u32 at `off`; callers pass offsets inside fixed arrays.
fn le_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrow_and_lent_round_trip_and_refuse_each_other() {
        let b = Borrow {
            assoc: 9,
            fd: 19,
            key: 0x1234_5678_9abc,
        };
        assert_eq!(Borrow::decode(&b.encode()), Ok(b));
        let l = Lent {
            status: 0,
            owner: 3,
            slot: 77,
            engine: 2,
            seg_len: 1 << 33,
        };
        assert_eq!(Lent::decode(&l.encode()), Ok(l));
        assert!(matches!(
            Lent::decode(&b.encode()),
            Err(CtlError::Length { .. })
        ));
        let mut wrong = l.encode();
        wrong[0] ^= 1;
        assert!(matches!(Lent::decode(&wrong), Err(CtlError::Magic(_))));
        let refused = Lent {
            status: libc::ENOENT,
            ..l
        };
        assert_eq!(Lent::decode(&refused.encode()), Ok(refused));
        let negative = Lent { status: -5, ..l };
        assert_eq!(Lent::decode(&negative.encode()), Err(CtlError::Status(-5)));
    }

    #[test]
    fn hello_round_trips_and_cuts_long_names_at_a_char_boundary() {
        let h = Hello {
            nslots: 128,
            ring_bytes: 1 << 16,
            name: "memcached".into(),
            parent: 7,
            ticket: 0x1234_5678,
        };
        assert_eq!(Hello::decode(&h.encode()).unwrap(), h);

        // 30 ASCII bytes then a 2-byte char: 32 bytes, cut to 30.
        let long = format!("{}é", "a".repeat(30));
        let d = Hello::decode(
            &Hello {
                name: long,
                ..Hello::default()
            }
            .encode(),
        )
        .unwrap();
        assert_eq!(d.name, "a".repeat(30));
    }

    #[test]
    fn hello_with_invalid_utf8_or_no_nul_decodes_lossily() {
        let mut b = Hello::default().encode();
        b[16..16 + NAME_MAX + 1].fill(0xff);
        let h = Hello::decode(&b).unwrap();
        assert_eq!(h.name.chars().count(), NAME_MAX);
        assert!(h.name.chars().all(|c| c == char::REPLACEMENT_CHARACTER));
    }

    #[test]
    fn welcome_round_trips() {
        let w = Welcome {
            status: 0,
            assoc: u32::MAX,
            nslots: 1024,
            ring_bytes: 1 << 24,
            cmd_slots: 256,
            seg_len: u64::MAX - 1,
        };
        assert_eq!(Welcome::decode(&w.encode()).unwrap(), w);
        let r = Welcome::refused(libc::EMFILE);
        assert_eq!(Welcome::decode(&r.encode()).unwrap(), r);
    }

    #[test]
    fn short_long_or_garbage_messages_are_errors() {
        let w = Welcome::default().encode();
        assert_eq!(
            Welcome::decode(&w[..WELCOME_LEN - 1]),
            Err(CtlError::Length {
                expected: WELCOME_LEN,
                got: WELCOME_LEN - 1
            })
        );
        assert!(matches!(
            Welcome::decode(&[]),
            Err(CtlError::Length { got: 0, .. })
        ));
        let mut longer = w.to_vec();
        longer.push(0);
        assert!(matches!(
            Welcome::decode(&longer),
            Err(CtlError::Length { .. })
        ));
        // A hello is not a welcome, and vice versa, even at the right length.
        let h = Hello::default().encode();
        assert!(matches!(
            Welcome::decode(&h[..WELCOME_LEN]),
            Err(CtlError::Magic(_))
        ));
        let mut wl = [0u8; HELLO_LEN];
        wl[..WELCOME_LEN].copy_from_slice(&w);
        assert!(matches!(Hello::decode(&wl), Err(CtlError::Magic(_))));
        // Other version.
        let mut v = w;
        v[4] = CTL_VERSION as u8 + 1;
        assert_eq!(Welcome::decode(&v), Err(CtlError::Version(CTL_VERSION + 1)));
        // Negative status.
        let mut s = w;
        s[8..12].copy_from_slice(&(-5i32).to_le_bytes());
        assert_eq!(Welcome::decode(&s), Err(CtlError::Status(-5)));
        // Pseudo-random garbage of every length up to 64 never panics and
        // is never accepted (the magic is checked).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..64 {
            let g: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert!(Welcome::decode(&g).is_err());
            assert!(Hello::decode(&g).is_err());
        }
    }

    #[test]
    fn ctl_error_becomes_invalid_data() {
        let e: io::Error = CtlError::Version(9).into();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("version 9"));
    }

    #[test]
    fn socket_path_from_env_ignores_unset_and_empty() {
        // The variable itself is not set here: set_var races with other
        // test threads reading the environment.
        assert_eq!(socket_path_from(None), None);
        assert_eq!(socket_path_from(Some("".into())), None);
        assert_eq!(
            socket_path_from(Some("/tmp/x.sock".into())),
            Some(PathBuf::from("/tmp/x.sock"))
        );
    }
}
