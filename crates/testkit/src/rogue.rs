//! A misbehaving application: a test that joins a corestack daemon over its control socket the
//! way `corestack::Stack` does, maps its segment, and then writes into it whatever it likes —
//! garbage descriptors, impossible ring indices, bad geometry words — through the memfd (with
//! `pwrite`, so without `unsafe`), at the offsets `appif::seg::layout` names.
//!
//! Used by the namespace tests of `corestack run` (`crates/cli/tests/service_isolation.rs`) and
//! by the root-free tests of the `service` crate (`crates/service/tests`), so both break the
//! protocol the same way.

use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use appif::ctl::{self, Hello, Welcome};
use appif::region::Region;
use appif::seg::{layout, AppSegment, CmdProducer, Desc};

/// The errno a dropped association leaves in its segment's closed word.
pub const ECONNRESET: u32 = appif::errno::ECONNRESET as u32;

/// Sends `hello` (any bytes) on a new control connection to `sock` and returns the daemon's
/// answer and the fds that came with it; panics when there is none within 5 s.
pub fn hello(sock: &Path, hello: &[u8]) -> (UnixStream, Welcome, Vec<OwnedFd>) {
    let ctl = UnixStream::connect(sock).expect("connecting to the control socket");
    ctl.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    ctl::send_msg(&ctl, hello, &[]).expect("sending the hello");
    let mut buf = [0u8; ctl::WELCOME_LEN];
    let mut fds = Vec::new();
    let n = ctl::recv_msg(&ctl, &mut buf, &mut fds).expect("receiving the answer to a hello");
    let welcome = Welcome::decode(&buf[..n]).expect("a well-formed welcome");
    (ctl, welcome, fds)
}

/// This test as an application: the control connection, the mapped segment and the memfd
/// behind it.
pub struct RogueApp {
    /// The control connection.
    pub ctl: UnixStream,
    /// The memfd behind the segment, for writing into it.
    pub mem: File,
    /// The segment, mapped.
    pub seg: AppSegment,
    /// The daemon's welcome.
    pub welcome: Welcome,
    _doorbell: OwnedFd,
}

impl RogueApp {
    /// Says hello as `name`, asking for 4 slots of 4 KiB rings; panics unless welcomed.
    pub fn join(sock: &Path, name: &str) -> RogueApp {
        let h = Hello {
            nslots: 4,
            ring_bytes: 4096,
            name: name.to_string(),
            parent: 0,
            ticket: 0,
        };
        let (ctl, welcome, mut fds) = hello(sock, &h.encode());
        assert_eq!(welcome.status, 0, "the daemon refused {name}: {welcome:?}");
        assert_eq!(
            fds.len(),
            2,
            "the welcome came with {} fds, not 2",
            fds.len()
        );
        let doorbell = fds.pop().expect("doorbell");
        let memfd = fds.pop().expect("memfd");
        let region = Region::map_fd(memfd.as_fd(), welcome.seg_len as usize).expect("mmap");
        let (seg, assoc) = AppSegment::open(Arc::new(region)).expect("a valid segment");
        assert_eq!(assoc, welcome.assoc);
        RogueApp {
            ctl,
            mem: File::from(memfd),
            seg,
            welcome,
            _doorbell: doorbell,
        }
    }

    /// The association the daemon gave this application.
    pub fn assoc(&self) -> u32 {
        self.welcome.assoc
    }

    /// Writes `bytes` at byte offset `off` of the segment.
    pub fn poke(&self, off: usize, bytes: &[u8]) {
        self.mem
            .write_all_at(bytes, off as u64)
            .expect("writing into the segment");
    }

    /// Byte offset of socket slot `slot`'s header.
    pub fn slot_off(&self, slot: u32) -> usize {
        self.seg.layout().slot_offset(slot)
    }

    /// Writes a descriptor that decodes to nothing (opcode 0xee) at the head of the command
    /// ring and publishes it.
    pub fn push_bad_opcode(&self) {
        let mut d = [0u8; layout::DESC_BYTES];
        d[0] = 0xee;
        self.poke(layout::CMD_RING, &d);
        self.poke(layout::CMD_HEAD, &1u64.to_le_bytes());
    }

    /// Writes a listen descriptor for `[::]:port` in slot 0 whose address
    /// family byte is `family` (anything but 4 and 6 is garbage) and
    /// publishes it.
    pub fn push_bad_family(&self, port: u16, family: u8) {
        let mut d = Desc::Listen {
            slot: 0,
            local: SocketAddr::from(([0u16; 8], port)),
            backlog: 8,
            v6only: false,
            reuseport: None,
        }
        .encode();
        d[appif::seg::desc_layout::FAMILY] = family;
        self.poke(layout::CMD_RING, &d);
        self.poke(layout::CMD_HEAD, &1u64.to_le_bytes());
    }

    /// Moves the command ring's head a long way past anything written.
    pub fn push_head_far_ahead(&self) {
        self.poke(layout::CMD_HEAD, &(1u64 << 40).to_le_bytes());
    }

    /// Enqueues `d` as a well-behaved application would.
    pub fn push(&self, d: Desc) {
        let mut p = CmdProducer::new(self.seg.clone());
        assert!(p.push(&d), "command ring full");
    }

    /// The u64 at byte offset `off` of the segment.
    pub fn peek(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        self.mem
            .read_exact_at(&mut b, off as u64)
            .expect("reading the segment");
        u64::from_le_bytes(b)
    }

    /// Waits up to `bound` until the daemon has taken every descriptor pushed (the command
    /// ring's tail reached its head); false if it did not.
    pub fn taken(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        while self.peek(layout::CMD_TAIL) != self.peek(layout::CMD_HEAD) {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Takes a free socket slot the way the client library does (owner bits set, the slot's
    /// rings and status reset).
    pub fn claim(&self) -> u32 {
        let slot = self.seg.claim_app_slot(0, |_| false).expect("a free slot");
        self.seg.reset_slot(slot);
        slot
    }

    /// Claims a fresh slot ([`claim`](Self::claim)) and enqueues the
    /// command `desc` makes for it; returns the slot.
    fn claim_for(&self, desc: impl FnOnce(u32) -> Desc) -> u32 {
        let slot = self.claim();
        self.push(desc(slot));
        slot
    }

    /// Opens a TCP connection from a fresh slot to `remote`; returns the slot.
    pub fn connect(&self, remote: impl Into<SocketAddr>) -> u32 {
        self.claim_for(|slot| Desc::Connect {
            slot,
            remote: remote.into(),
            local_port: 0,
            nodelay: false,
        })
    }

    /// Binds a UDP socket in a fresh slot to `local`; returns the slot.
    pub fn udp_bind(&self, local: impl Into<SocketAddr>) -> u32 {
        self.claim_for(|slot| Desc::UdpBind {
            slot,
            local: local.into(),
            v6only: false,
        })
    }

    /// Waits up to `bound` for the daemon to drop this association: ECONNRESET in the
    /// segment's closed word and end of file on the control socket.
    pub fn dropped(&mut self, bound: Duration) -> Result<(), String> {
        let deadline = Instant::now() + bound;
        while self.seg.closed().load(Ordering::Acquire) == 0 {
            if Instant::now() >= deadline {
                return Err("the segment's closed word stayed 0".into());
            }
            thread::sleep(Duration::from_millis(5));
        }
        let closed = self.seg.closed().load(Ordering::Acquire);
        if closed != ECONNRESET {
            return Err(format!("closed word {closed}, not ECONNRESET"));
        }
        let mut b = [0u8; 1];
        match self.ctl.read(&mut b) {
            // Reset: the daemon closed it with our junk unread.
            Ok(0) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
            Ok(_) => Err("the daemon wrote on the control socket".into()),
            Err(e) => Err(format!("control socket still open: {e}")),
        }
    }
}
