//! The readiness API: register sockets with a [`Poller`], then wait for any
//! of them to become readable or writable, as with epoll or mio. One thread
//! can serve thousands of connections this way.
//!
//! Readiness is level-triggered: a socket is reported on every wait while it
//! stays ready. A wait looks at the sockets that changed or were ready
//! before (see [`Poller`]) and, when none is ready, sleeps on the stack's
//! change counter: in
//! embedded mode the engine bumps it after every iteration that changed a
//! socket, in service mode after every change to one of this application's
//! sockets, and in inline mode the wait runs the engine itself.

use crate::stack::Stack;
use appif::bytes;
use appif::errno;
use appif::ready::ReadyList;
use appif::seg::Accepted;
use appif::socket::{SockState, StatusHandle, FLAG_RX_FIN};
use appif::spsc;
use core::time::Duration;
use engine::time::Instant;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;

/// What a registration waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    /// Data (or a connection to accept, or EOF, or an error) is waiting.
    pub readable: bool,
    /// The TX ring has room.
    pub writable: bool,
}

impl Interest {
    /// Readable only.
    pub const READABLE: Interest = Interest {
        readable: true,
        writable: false,
    };
    /// Writable only.
    pub const WRITABLE: Interest = Interest {
        readable: false,
        writable: true,
    };
    /// Both.
    pub const BOTH: Interest = Interest {
        readable: true,
        writable: true,
    };
}

/// One ready socket, as [`Poller::wait`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The token given at registration.
    pub token: u64,
    /// A read (or accept) will not block.
    pub readable: bool,
    /// A write will not block.
    pub writable: bool,
    /// The socket is closed (reset, timed out, or finished): reads return
    /// the error or EOF.
    pub closed: bool,
}

/// What a poller keeps of a registered socket: read-only views of its
/// status block and ring levels. It keeps the memory alive, not the socket.
pub struct Probe(Kind);

enum Kind {
    Stream {
        shared: Arc<StatusHandle>,
        rx: bytes::Probe,
        tx: bytes::Probe,
    },
    Listener {
        shared: Arc<StatusHandle>,
        queue: QueueProbe,
    },
    Udp {
        shared: Arc<StatusHandle>,
        rx: bytes::Probe,
        tx: bytes::Probe,
    },
}

pub(crate) enum QueueProbe {
    /// One queue per engine.
    Local(Vec<spsc::Probe<Accepted>>),
    /// Slot numbers, 4 bytes each, one ring per engine of the daemon;
    /// with several, the segment, whose wake-up point every engine
    /// bumps (the doorbell to sleep on).
    AppSegment(Vec<bytes::Probe>, Option<appif::seg::AppSegment>),
}

/// Space a UDP TX ring needs for a largest datagram and its record header.
const UDP_WRITABLE: usize = 8 + 1472;

impl Probe {
    pub(crate) fn stream(
        shared: Arc<StatusHandle>,
        rx: &bytes::Reader,
        tx: &bytes::Writer,
    ) -> Self {
        Probe(Kind::Stream {
            shared,
            rx: rx.probe(),
            tx: tx.probe(),
        })
    }

    pub(crate) fn listener(shared: Arc<StatusHandle>, queue: QueueProbe) -> Self {
        Probe(Kind::Listener { shared, queue })
    }

    pub(crate) fn udp(shared: Arc<StatusHandle>, rx: &bytes::Reader, tx: &bytes::Writer) -> Self {
        Probe(Kind::Udp {
            shared,
            rx: rx.probe(),
            tx: tx.probe(),
        })
    }

    /// The socket's status block.
    fn shared(&self) -> &Arc<StatusHandle> {
        match &self.0 {
            Kind::Stream { shared, .. }
            | Kind::Listener { shared, .. }
            | Kind::Udp { shared, .. } => shared,
        }
    }

    /// Whether a ready list can watch the socket, every change of it
    /// showing in its one status block. Not a service-mode listener on
    /// several engines: each engine's copy has a slot and status block of
    /// its own, and the handle's is engine 0's, so a connection on another
    /// engine would not be reported; a poller looks at it on every wait.
    fn watchable(&self) -> bool {
        !matches!(
            &self.0,
            Kind::Listener {
                queue: QueueProbe::AppSegment(_, Some(_)),
                ..
            }
        )
    }

    /// (readable, writable, closed) now.
    fn readiness(&self) -> (bool, bool, bool) {
        match &self.0 {
            Kind::Stream { shared, rx, tx } => {
                let state = shared.state();
                let closed = state == SockState::Closed;
                let readable = !rx.is_empty() || shared.has_flags(FLAG_RX_FIN) || closed;
                let writable = closed || (state == SockState::Open && tx.free() > 0);
                (readable, writable, closed)
            }
            Kind::Listener { shared, queue } => {
                let closed = shared.state() == SockState::Closed;
                let waiting = match queue {
                    QueueProbe::Local(qs) => qs.iter().any(|q| !q.is_empty()),
                    QueueProbe::AppSegment(qs, _) => qs.iter().any(|q| q.len() >= 4),
                };
                (waiting || closed, false, closed)
            }
            Kind::Udp { shared, rx, tx } => {
                let closed = shared.state() == SockState::Closed;
                (
                    rx.len() >= appif::socket::UdpHeader::LEN || closed,
                    tx.free() >= UDP_WRITABLE || closed,
                    closed,
                )
            }
        }
    }
}

/// A socket a [`Poller`] can watch: `TcpStream`, `TcpListener`, `UdpSocket`.
pub trait Source {
    /// The read-only views the poller keeps.
    fn probe(&self) -> Probe;

    /// Its status now, as [`Probe::status`] of its probe. The sockets keep
    /// one probe for this (made on the first call), so that a readiness
    /// scan over many sockets (the preload shim's epoll) costs no
    /// reference counts per look.
    fn status(&self) -> Status {
        match self.kept_probe() {
            Some(p) => p.status(),
            None => self.probe().status(),
        }
    }

    /// The probe the socket keeps (see [`Source::status`]), if it keeps
    /// one: a waiter that watches many sockets ([`Probe::watch`]) reaches
    /// their status blocks through it without building a probe per look.
    fn kept_probe(&self) -> Option<&Probe> {
        None
    }
}

/// A socket's own [`Probe`], made on first use (see [`Source::status`]).
#[derive(Default)]
pub(crate) struct View(std::sync::OnceLock<Probe>);

impl View {
    /// The kept probe (`make` builds it the first time).
    pub(crate) fn probe(&self, make: impl FnOnce() -> Probe) -> &Probe {
        self.0.get_or_init(make)
    }
}

struct Entry {
    token: u64,
    interest: Interest,
    probe: Probe,
    /// Its changes reach the poller's ready list (else every wait looks
    /// at it).
    watched: bool,
    /// In `pending`.
    pending: bool,
}

/// A set of registered sockets and a way to wait for any of them.
///
/// A wait costs O(sockets that changed or are ready), not O(registered):
/// the engine queues the token of every socket it changes on the poller's
/// ready list ([`appif::ready`]), and the poller looks only at those and at
/// the ones it found ready before (level-triggered: a socket stays
/// reported while it is ready). In service mode the daemon's engine pushes
/// the slot of every socket it changes to a ready ring in the application's
/// segment instead, and a wait first drains those rings into the ready
/// lists ([`appif::seg::ready`]). A socket whose changes cannot reach this
/// poller (registered with another poller already, or a socket a forked
/// child inherited from its parent's segment) is looked at on every wait.
///
/// Inline mode: the engine runs while a wait waits. A loop whose waits
/// always find a socket ready (a writable socket registered for
/// [`Interest::WRITABLE`] with nothing to write) never lets it run: ask
/// for writability only while there is something to write, or call
/// [`Stack::drive`] in the loop.
pub struct Poller {
    stack: Stack,
    entries: Vec<Entry>,
    index: HashMap<u64, usize>,
    /// Where the engine queues the tokens of watched sockets that changed.
    ready: Arc<ReadyList>,
    /// Tokens of watched sockets to look at on the next wait: changed, or
    /// ready when last looked at. Each at most once (`Entry::pending`).
    pending: VecDeque<u64>,
    /// Tokens of sockets that are not watched: looked at on every wait.
    unwatched: Vec<u64>,
    /// Where the next look at `unwatched` starts, so that a busy socket
    /// early in the list cannot starve the others when `max` events are
    /// asked for.
    cursor: usize,
    /// Sockets looked at by waits so far (see [`Poller::looks`]).
    looks: u64,
}

impl Poller {
    /// An empty poller for sockets of `stack`.
    pub fn new(stack: &Stack) -> Poller {
        Poller {
            stack: stack.clone(),
            entries: Vec::new(),
            index: HashMap::new(),
            ready: ReadyList::new(),
            pending: VecDeque::new(),
            unwatched: Vec::new(),
            cursor: 0,
            looks: 0,
        }
    }

    /// Watches `source` under `token`. Errors: EEXIST when `token` is taken.
    pub fn register(
        &mut self,
        source: &impl Source,
        token: u64,
        interest: Interest,
    ) -> io::Result<()> {
        if self.index.contains_key(&token) {
            return Err(errno::io(errno::EEXIST));
        }
        let probe = source.probe();
        let watched = probe.watch(&self.ready, token);
        self.index.insert(token, self.entries.len());
        self.entries.push(Entry {
            token,
            interest,
            probe,
            watched,
            pending: watched,
        });
        if watched {
            // It may be ready already: look at it on the next wait.
            self.pending.push_back(token);
        } else {
            self.unwatched.push(token);
        }
        Ok(())
    }

    /// Changes what `token` waits for. Errors: ENOENT for an unknown token.
    pub fn reregister(&mut self, token: u64, interest: Interest) -> io::Result<()> {
        let i = *self
            .index
            .get(&token)
            .ok_or_else(|| errno::io(errno::ENOENT))?;
        let e = &mut self.entries[i];
        e.interest = interest;
        if e.watched && !e.pending {
            // Ready for what it waits for now, with no change to report it.
            e.pending = true;
            self.pending.push_back(token);
        }
        Ok(())
    }

    /// Stops watching `token`. Errors: ENOENT for an unknown token.
    pub fn deregister(&mut self, token: u64) -> io::Result<()> {
        let i = self
            .index
            .remove(&token)
            .ok_or_else(|| errno::io(errno::ENOENT))?;
        let e = self.entries.swap_remove(i);
        if e.watched {
            // A token left in `pending` or on the ready list is skipped:
            // the index no longer has it.
            e.probe.shared().unwatch(&self.ready);
        } else if let Some(k) = self.unwatched.iter().position(|&t| t == token) {
            self.unwatched.swap_remove(k);
        }
        if let Some(moved) = self.entries.get(i) {
            self.index.insert(moved.token, i);
        }
        Ok(())
    }

    /// Registered sockets.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Fills `events` (cleared first) with up to `max` ready sockets,
    /// waiting up to `timeout` (None: without limit) for the first one.
    /// Returns the number of events; 0 when the timeout passed.
    pub fn wait(
        &mut self,
        events: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        events.clear();
        let max = max.max(1);
        let start = Instant::now();
        loop {
            let seen = self.stack.change_seq();
            self.collect(events, max);
            if !events.is_empty() {
                return Ok(events.len());
            }
            let elapsed = Instant::now().saturating_since(start);
            let left = timeout.map(|t| t.saturating_sub(elapsed));
            if left == Some(Duration::ZERO) {
                return Ok(0);
            }
            self.stack.wait_change(seen, left);
        }
    }

    /// How many times waits looked at a registered socket's readiness, in
    /// all: the poller's work, which follows the sockets that changed or
    /// are ready, not the sockets registered.
    pub fn looks(&self) -> u64 {
        self.looks
    }

    /// The event of entry `i` if it is ready for what it waits for.
    fn event_of(&mut self, i: usize) -> Option<Event> {
        self.looks += 1;
        let e = &self.entries[i];
        let (r, w, closed) = e.probe.readiness();
        let readable = r && e.interest.readable;
        let writable = w && e.interest.writable;
        (readable || writable).then_some(Event {
            token: e.token,
            readable,
            writable,
            closed,
        })
    }

    /// Up to `max` events: from the ready list and the sockets found ready
    /// before, then from the unwatched sockets.
    fn collect(&mut self, events: &mut Vec<Event>, max: usize) {
        // Service mode: the slots the daemon's engines pushed reach the
        // ready lists of the pollers watching them.
        self.stack.drain_ready();
        if self.ready.take_overflow() {
            // Changes were lost: look at every watched socket once.
            for e in self.entries.iter_mut().filter(|e| e.watched) {
                // The one whose token was lost is still marked queued.
                e.probe.shared().rearm_watch(&self.ready);
                if !e.pending {
                    e.pending = true;
                    self.pending.push_back(e.token);
                }
            }
        }
        while let Some(token) = self.ready.pop() {
            let Some(&i) = self.index.get(&token) else {
                continue;
            };
            let e = &mut self.entries[i];
            e.probe.shared().rearm_watch(&self.ready);
            if !e.pending {
                e.pending = true;
                self.pending.push_back(token);
            }
        }
        // Each pending socket once: a ready one goes to the back (it is
        // looked at again next time), one no longer ready leaves.
        for _ in 0..self.pending.len() {
            if events.len() == max {
                break;
            }
            let Some(token) = self.pending.pop_front() else {
                break;
            };
            let Some(&i) = self.index.get(&token) else {
                continue;
            };
            match self.event_of(i) {
                Some(ev) => {
                    events.push(ev);
                    self.pending.push_back(token);
                }
                None => self.entries[i].pending = false,
            }
        }
        let n = self.unwatched.len();
        for k in 0..n {
            if events.len() == max {
                return;
            }
            let at = (self.cursor + k) % n;
            let i = self.index[&self.unwatched[at]];
            if let Some(ev) = self.event_of(i) {
                events.push(ev);
                if events.len() == max {
                    self.cursor = (at + 1) % n;
                }
            }
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        for e in self.entries.iter().filter(|e| e.watched) {
            e.probe.shared().unwatch(&self.ready);
        }
    }
}

/// A socket's readiness in detail, as [`Probe::status`] reads it (lock-free:
/// a few atomic loads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// A read, receive or accept will not block: data, a datagram, a
    /// connection, end of stream or an error is waiting.
    pub readable: bool,
    /// A write or send will not block (room in the TX ring, or the socket
    /// is closed and the send fails at once).
    pub writable: bool,
    /// The peer sent FIN (EPOLLRDHUP on Linux).
    pub rx_fin: bool,
    /// The socket is closed (reset, timed out, refused, or finished).
    pub closed: bool,
    /// The pending error (a positive errno, not taken), 0 if none.
    pub error: i32,
    /// A TCP handshake is under way.
    pub connecting: bool,
    /// Bytes waiting to be read (TCP), or in the RX ring (UDP, with
    /// record headers).
    pub rx_bytes: usize,
    /// Bytes in the TX ring: queued and not yet acknowledged (TCP), or not
    /// yet sent (UDP, with record headers).
    pub tx_pending: usize,
}

impl Probe {
    /// The socket's readiness now.
    pub fn status(&self) -> Status {
        let (readable, writable, closed) = self.readiness();
        let (shared, rx_bytes, tx_pending) = match &self.0 {
            Kind::Stream { shared, rx, tx } | Kind::Udp { shared, rx, tx } => {
                (shared, rx.len(), tx.len())
            }
            Kind::Listener { shared, .. } => (shared, 0, 0),
        };
        Status {
            readable,
            writable,
            rx_fin: shared.has_flags(FLAG_RX_FIN),
            closed,
            error: shared.error(),
            connecting: matches!(shared.state(), SockState::Opening | SockState::Connecting),
            rx_bytes,
            tx_pending,
        }
    }

    /// Reports the socket's changes to `list` under `token` from now on
    /// (see [`appif::ready`]): a waiter of its own, like [`Poller`], takes
    /// the token and then looks at the socket. False when its changes
    /// cannot reach `list` (its status block reports to another list
    /// already, a forked child's socket of the parent's segment, or a
    /// service-mode listener on several engines, which has a status block
    /// per engine): the waiter must look at it on every wait. In service
    /// mode the waiter calls [`Stack::drain_ready`] before taking tokens.
    pub fn watch(&self, list: &Arc<ReadyList>, token: u64) -> bool {
        self.watchable() && self.shared().watch(list, token)
    }

    /// Stops reporting to `list` (no-op when it reports to another).
    pub fn unwatch(&self, list: &Arc<ReadyList>) {
        self.shared().unwatch(list)
    }

    /// Having taken this socket's token from `list`: its next change
    /// queues the token again. Call before looking at the socket, so that
    /// no change is missed.
    pub fn rearm_watch(&self, list: &Arc<ReadyList>) {
        self.shared().rearm_watch(list)
    }

    /// The socket's doorbell: the engine notifies it after every change to
    /// the socket (to sleep on with [`crate::Stack::wait_until`]); for a
    /// service-mode listener on several engines, the application's
    /// wake-up point, which each of them notifies.
    pub fn notify(&self) -> &appif::notify::Notify {
        match &self.0 {
            Kind::Listener {
                queue: QueueProbe::AppSegment(_, Some(seg)),
                ..
            } => seg.app_wake(),
            Kind::Stream { shared, .. }
            | Kind::Udp { shared, .. }
            | Kind::Listener { shared, .. } => &shared.notify,
        }
    }
}
