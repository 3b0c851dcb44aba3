//! Service mode: this process is an application of a `corestack run`
//! daemon. It says hello on the daemon's control socket, receives its
//! segment (memfd) and the engine's doorbell (eventfd), and from then on
//! talks to the engine only through the segment: its requests go as
//! descriptors ([`Desc`]), built directly (see `stack::Request`), which
//! the daemon turns into engine commands once.

use appif::bytes;
use appif::ctl;
use appif::errno;
use appif::region::Region;
use appif::seg::{AppSegment, CmdProducer, Desc};
use appif::socket::{SockId, StatusHandle};
use core::sync::atomic::Ordering;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// The way to one of the daemon's engines: its command ring in the
/// segment and its doorbell.
struct Lane {
    cmds: Mutex<CmdProducer>,
    doorbell: OwnedFd,
}

/// Where a socket is: its association, its slot in that association's
/// segment, and the engine that holds it.
pub(crate) type Place = (u32, u32, usize);

/// In a slot's engine byte: the slot heads a listener on several engines.
const GROUP_HEAD: u8 = 0x80;

/// The application's end of an association.
pub(crate) struct Service {
    pub seg: AppSegment,
    /// One per engine of the daemon, in engine order.
    lanes: Vec<Lane>,
    ctl: UnixStream,
    /// Slots this process holds a handle to (claimed or accepted).
    busy: Mutex<Vec<bool>>,
    /// The engine that holds each slot's socket (an index into `lanes`),
    /// with [`GROUP_HEAD`] set on the slot a listener on several engines
    /// is known by.
    slot_lane: Vec<core::sync::atomic::AtomicU8>,
    /// Listeners on several engines: the slot the application knows the
    /// listener by, and the slots of its members on the other engines.
    groups: Mutex<Vec<(u32, Vec<u32>)>>,
    dead: AtomicBool,
    pub assoc: u32,
    /// Fork tickets handed out ([`Service::next_ticket`]).
    tickets: core::sync::atomic::AtomicU32,
    /// The daemon's control socket.
    path: std::path::PathBuf,
}

/// The parts of a fresh socket in the segment.
pub(crate) struct SlotParts {
    pub id: SockId,
    pub shared: Arc<StatusHandle>,
    pub tx: bytes::Writer,
    pub rx: bytes::Reader,
}

impl Service {
    /// Connects to the daemon at `path`, handing it `wakers` (eventfds this
    /// process's readiness waiters sleep on: the engine writes the ones
    /// armed on a doorbell it rings, see `appif::notify`). Errors: the
    /// connect(2) errno (ENOENT / ECONNREFUSED when no daemon runs there:
    /// the message says so), the daemon's refusal errno, EPROTO for a
    /// malformed answer.
    pub fn connect(
        path: &Path,
        ring_bytes: usize,
        mut wakers: Vec<OwnedFd>,
        (parent, ticket): (u32, u32),
    ) -> io::Result<Service> {
        wakers.truncate(appif::notify::SEGMENT_SLEEPERS.min(ctl::MAX_FDS));
        let ctl = UnixStream::connect(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot reach the corestack daemon at {}: {e} (start it with `corestack run`, or unset CORESTACK_SOCKET)",
                    path.display()
                ),
            )
        })?;
        let name = std::env::args()
            .next()
            .and_then(|a| {
                Path::new(&a)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
            })
            .unwrap_or_default();
        let hello = ctl::Hello {
            nslots: 0,
            ring_bytes: ring_bytes as u32,
            name,
            parent,
            ticket,
        };
        let lent: Vec<_> = wakers.iter().map(|f| f.as_fd()).collect();
        ctl::send_msg(&ctl, &hello.encode(), &lent)?;
        drop(lent);
        let mut buf = [0u8; ctl::WELCOME_LEN];
        let mut fds = Vec::new();
        let n = ctl::recv_msg(&ctl, &mut buf, &mut fds)?;
        let proto = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        if n == 0 {
            return Err(proto("the corestack daemon closed the control connection"));
        }
        let w = ctl::Welcome::decode(&buf[..n]).map_err(io::Error::from)?;
        if w.status != 0 {
            return Err(errno::io(w.status));
        }
        if fds.len() < 2 {
            return Err(proto("the daemon's welcome came without its fds"));
        }
        // The memfd, then one doorbell per engine.
        let mut fds = fds.into_iter();
        let memfd = fds.next().expect("two fds");
        let len = usize::try_from(w.seg_len).map_err(|_| proto("segment too large"))?;
        let region = Arc::new(Region::map_fd(memfd.as_fd(), len)?);
        let (seg, assoc) = AppSegment::open(region).map_err(proto)?;
        let seg = seg.with_sleepers(wakers);
        if fds.len() != seg.layout().engines as usize {
            return Err(proto(
                "the daemon's welcome came without a doorbell per engine",
            ));
        }
        let lanes = fds
            .enumerate()
            .map(|(e, doorbell)| {
                let cmds = CmdProducer::lane(seg.clone(), e as u32).expect("engine of the layout");
                Lane {
                    cmds: Mutex::new(cmds),
                    doorbell,
                }
            })
            .collect();
        let nslots = seg.layout().nslots as usize;
        Ok(Service {
            lanes,
            seg,
            ctl,
            busy: Mutex::new(vec![false; nslots]),
            slot_lane: (0..nslots).map(|_| Default::default()).collect(),
            groups: Mutex::new(Vec::new()),
            dead: AtomicBool::new(false),
            assoc,
            tickets: core::sync::atomic::AtomicU32::new(1),
            path: path.to_path_buf(),
        })
    }

    /// The daemon's engines (1..=255).
    pub fn engines(&self) -> usize {
        self.lanes.len()
    }

    /// Takes a free slot for a new socket held by engine `engine` (its
    /// descriptors go to that engine's ring; 0 past the engines). Errors:
    /// EMFILE when every slot of the segment is in use.
    pub fn new_socket(&self, engine: usize) -> io::Result<SlotParts> {
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        let hint = busy.iter().position(|b| !b).unwrap_or(0) as u32;
        let slot = self
            .seg
            .claim_app_slot(hint, |s| busy.get(s as usize).copied().unwrap_or(true))
            .ok_or_else(|| errno::io(errno::EMFILE))?;
        self.seg.reset_slot(slot);
        busy[slot as usize] = true;
        drop(busy);
        self.set_lane(slot, engine);
        self.parts(slot).ok_or_else(|| errno::io(errno::EINVAL))
    }

    /// The application's views of `slot` (after an accept hands it over);
    /// None for a slot number out of range.
    pub fn parts(&self, slot: u32) -> Option<SlotParts> {
        Some(SlotParts {
            id: u64::from(slot),
            shared: self.seg.shared(slot, false)?,
            tx: self.seg.tx_writer(slot)?,
            rx: self.seg.rx_reader(slot)?,
        })
    }

    /// Records that engine `engine` holds `slot`'s socket.
    fn set_lane(&self, slot: u32, engine: usize) {
        let e = if engine < self.lanes.len() { engine } else { 0 };
        if let Some(l) = self.slot_lane.get(slot as usize) {
            l.store(e as u8, Ordering::Relaxed);
        }
    }

    /// The engine that holds `slot`'s socket, and whether the slot heads
    /// a listener on several engines.
    pub(crate) fn lane_of(&self, slot: u32) -> (usize, bool) {
        let b = self
            .slot_lane
            .get(slot as usize)
            .map_or(0, |l| l.load(Ordering::Relaxed));
        ((b & !GROUP_HEAD) as usize, b & GROUP_HEAD != 0)
    }

    /// Marks a slot that engine `engine` accepted as held by this process.
    pub fn hold(&self, slot: u32, engine: usize) -> bool {
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        match busy.get_mut(slot as usize) {
            Some(b) if !*b => {
                *b = true;
                drop(busy);
                self.set_lane(slot, engine);
                true
            }
            _ => false,
        }
    }

    /// Records that the listener the application knows as `slot` has
    /// `members` on the other engines: what is asked of it is asked of
    /// them too ([`Service::members`]).
    pub fn group(&self, slot: u32, members: Vec<u32>) {
        let mut g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        g.retain(|(s, _)| *s != slot);
        g.push((slot, members));
        if let Some(l) = self.slot_lane.get(slot as usize) {
            l.fetch_or(GROUP_HEAD, Ordering::Relaxed);
        }
    }

    /// The members of the listener on several engines that `slot` heads
    /// (on the other engines); a Close or Abort (`ends`) ends the group.
    fn members(&self, slot: u32, ends: bool) -> Vec<u32> {
        let mut g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        let Some(k) = g.iter().position(|(s, _)| *s == slot) else {
            return Vec::new();
        };
        if !ends {
            return g[k].1.clone();
        }
        if let Some(l) = self.slot_lane.get(slot as usize) {
            l.fetch_and(!GROUP_HEAD, Ordering::Relaxed);
        }
        g.swap_remove(k).1
    }

    /// The engines and slots of the socket this process knows as `slot`:
    /// `slot` on its engine, then, when it heads a listener on several
    /// engines, each member on its engine.
    pub fn copies(&self, slot: u32) -> Vec<(usize, u32)> {
        let (lane, head) = self.lane_of(slot);
        let mut all = vec![(lane, slot)];
        if head {
            all.extend(
                self.members(slot, false)
                    .into_iter()
                    .map(|s| (self.lane_of(s).0, s)),
            );
        }
        all
    }

    /// Sends `d` to every engine (a fork's Forking and Forked: each
    /// engine's host takes its own sockets' references).
    pub fn submit_all(&self, d: Desc) {
        for e in 0..self.lanes.len() {
            self.submit_desc(e, d);
        }
    }

    /// Sends the descriptor `desc(slot)` for one of this process's sockets
    /// (and for each member of a listener on several engines), then lets
    /// go of the slot after a Close or Abort. Waits (yielding) while a
    /// command ring is full; drops it when the daemon is gone.
    pub fn submit(&self, slot: u32, desc: impl Fn(u32) -> Desc) {
        let d = desc(slot);
        let (lane, head) = self.lane_of(slot);
        self.submit_one(lane, d);
        if head {
            let ends = matches!(d, Desc::Close { .. } | Desc::Abort { .. });
            for s in self.members(slot, ends) {
                self.submit_one(self.lane_of(s).0, desc(s));
            }
        }
    }

    /// Sends `d` to engine `engine`; lets go of its slot after a Close or Abort.
    fn submit_one(&self, engine: usize, d: Desc) {
        self.submit_desc(engine, d);
        if let Desc::Close { slot } | Desc::Abort { slot } = d {
            let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(b) = busy.get_mut(slot as usize) {
                *b = false;
            }
        }
    }

    /// Asks the daemon (on a connection of its own) whether a connection
    /// was lent under the open-file key of `fd`, an fd this process
    /// received with SCM_RIGHTS: the lender's segment, and its
    /// association, the connection's slot in it and the engine holding it. None when none was (ENOENT), or
    /// `fd` has no key (it is no eventfd or socket).
    /// Errors: the daemon's other refusals (EPERM), I/O errors, EPROTO
    /// for a malformed answer.
    pub fn borrow(&self, fd: i32) -> io::Result<Option<(AppSegment, Place)>> {
        let Some(key) = ctl::fd_key("self", fd) else {
            return Ok(None);
        };
        let s = UnixStream::connect(&self.path)?;
        let b = ctl::Borrow {
            assoc: self.assoc,
            fd: fd as u32,
            key,
        };
        ctl::send_msg(&s, &b.encode(), &[])?;
        let mut buf = [0u8; ctl::LENT_LEN];
        let mut fds = Vec::new();
        let n = ctl::recv_msg(&s, &mut buf, &mut fds)?;
        let proto = || errno::io(errno::EPROTO);
        let l = ctl::Lent::decode(&buf[..n]).map_err(|_| proto())?;
        match (l.status, fds.pop()) {
            (errno::ENOENT, _) => Ok(None),
            (0, Some(memfd)) => {
                let len = usize::try_from(l.seg_len).map_err(|_| proto())?;
                let region = Arc::new(Region::map_fd(memfd.as_fd(), len)?);
                let (seg, _) = AppSegment::open(region).map_err(|_| proto())?;
                Ok(Some((seg, (l.owner, l.slot, l.engine as usize))))
            }
            (0, None) => Err(proto()),
            (e, _) => Err(errno::io(e)),
        }
    }

    /// The next fork ticket of this association (never 0).
    pub fn next_ticket(&self) -> u32 {
        self.tickets.fetch_add(1, Ordering::Relaxed).max(1)
    }

    /// False once the daemon is gone or dropped this association; then
    /// every socket still held is closed with ECONNRESET (the daemon can no
    /// longer say so itself).
    pub fn alive(&self) -> bool {
        if self.dead.load(Ordering::Acquire) {
            return false;
        }
        let closed = self.seg.closed().load(Ordering::Acquire);
        // The daemon never writes after the welcome: readable means EOF.
        let hup = crate::sys::readable_or_hung_up(self.ctl.as_raw_fd());
        if closed == 0 && !hup {
            return true;
        }
        self.dead.store(true, Ordering::Release);
        let errno = if closed != 0 {
            closed as i32
        } else {
            errno::ECONNRESET
        };
        let busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        for (slot, _) in busy.iter().enumerate().filter(|(_, b)| **b) {
            if let Some(sh) = self.seg.shared(slot as u32, false) {
                if sh.state() != appif::socket::SockState::Closed {
                    sh.set_closed(errno);
                }
            }
        }
        self.seg.notify_app();
        false
    }

    /// The control connection's fd.
    pub fn ctl_fd(&self) -> std::os::fd::RawFd {
        self.ctl.as_raw_fd()
    }

    /// The daemon's process id (SO_PEERCRED on the control connection).
    pub fn daemon_pid(&self) -> Option<u32> {
        ctl::peer_cred(&self.ctl)
            .ok()
            .and_then(|c| u32::try_from(c.pid).ok())
    }

    /// The link MTU the daemon reported, in bytes (1500 when unknown).
    pub fn mtu(&self) -> usize {
        match self.seg.mtu() {
            0 => 1500,
            m => m as usize,
        }
    }
}

impl Service {
    /// Sends a descriptor to engine `engine` (0 past the engines; from
    /// [`Service::submit`], or built by the stack for opening, fork and
    /// lending); spins, then yields, while its command ring is full; drops
    /// it when the daemon is gone. Rings the engine's doorbell only if the
    /// engine sleeps.
    pub fn submit_desc(&self, engine: usize, d: Desc) {
        let lane = self.lanes.get(engine).unwrap_or(&self.lanes[0]);
        let mut q = lane.cmds.lock().unwrap_or_else(|p| p.into_inner());
        let mut tries = 0u32;
        while !q.push(&d) {
            if !self.alive() {
                return;
            }
            tries += 1;
            if tries > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        if q.engine_needs_doorbell() {
            ctl::eventfd_signal(lane.doorbell.as_fd());
        }
    }
}
