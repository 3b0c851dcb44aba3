//! Inline mode's engine per thread: a thread that opens a SO_REUSEPORT
//! listener homed on its engine (a program with a listener per thread), or
//! calls [`Stack::claim_engine`], becomes that engine's only runner. The
//! other waiters skip the engine after one atomic load of its owner word,
//! without touching its lock, unless its owner has not run it for the
//! takeover time ([`Stack::set_takeover_after`], 1 ms by default): then any
//! waiter may run it (a try_lock) until the owner comes back, so an owned
//! engine never starves. Ownership ends when the owning thread exits (a
//! thread-local guard) or closes the listeners and claims that made it.
//! Engines nobody owns are run by every waiter that can lock them, as
//! before.

use super::{Mode, Stack};
use core::cell::{Cell, RefCell};
use core::time::Duration;
use engine::time::Instant;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// The default takeover time: an owned engine its owner has not run for
/// this long may be run by any waiter.
pub(super) const TAKEOVER_AFTER: Duration = Duration::from_millis(1);

/// Who runs one inline engine.
#[derive(Default)]
pub(super) struct EngineOwner {
    /// The owning thread's token ([`thread_token`]); 0: nobody.
    owner: AtomicU64,
    /// The owner's claims still open (listeners, [`Stack::claim_engine`]).
    holds: AtomicU32,
    /// When the owner last ran the engine, ns ([`Instant::as_nanos`]).
    last_run: AtomicU64,
    /// Iterations run by a thread other than the owner while it was owned.
    takeovers: AtomicU64,
}

/// Every inline engine's owner, and the takeover time.
pub(super) struct Owners {
    pub(super) engines: Vec<EngineOwner>,
    /// The takeover time, ns.
    takeover_ns: AtomicU64,
}

impl Owners {
    /// `n` engines nobody owns.
    pub(super) fn new(n: usize) -> Arc<Owners> {
        Arc::new(Owners {
            engines: (0..n).map(|_| EngineOwner::default()).collect(),
            takeover_ns: AtomicU64::new(TAKEOVER_AFTER.as_nanos() as u64),
        })
    }

    /// Whether the thread with `token` may run engine `e` at `now_ns`:
    /// `Run::Own` when it owns it, `Run::Free` when nobody does,
    /// `Run::Takeover` when its owner has not run it for the takeover
    /// time, `Run::Skip` otherwise.
    pub(super) fn may_run(&self, e: usize, token: u64, now_ns: u64) -> Run {
        let Some(o) = self.engines.get(e) else {
            return Run::Free;
        };
        match o.owner.load(Ordering::Acquire) {
            0 => Run::Free,
            t if t == token => Run::Own,
            _ => {
                let last = o.last_run.load(Ordering::Relaxed);
                if now_ns.saturating_sub(last) >= self.takeover_ns.load(Ordering::Relaxed) {
                    Run::Takeover
                } else {
                    Run::Skip
                }
            }
        }
    }

    /// Records that engine `e` ran at `now_ns` as `how` said.
    pub(super) fn ran(&self, e: usize, how: Run, now_ns: u64) {
        let Some(o) = self.engines.get(e) else {
            return;
        };
        match how {
            Run::Own => o.last_run.store(now_ns, Ordering::Relaxed),
            Run::Takeover => {
                o.takeovers.fetch_add(1, Ordering::Relaxed);
            }
            Run::Free | Run::Skip => {}
        }
    }

    /// Makes the thread with `token` the owner of engine `e` (one more
    /// hold when it already is); false when another thread owns it.
    fn claim(self: &Arc<Self>, e: usize, token: u64) -> bool {
        let Some(o) = self.engines.get(e) else {
            return false;
        };
        match o
            .owner
            .compare_exchange(0, token, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                o.last_run
                    .store(Instant::now().as_nanos(), Ordering::Relaxed);
                o.holds.store(1, Ordering::Relaxed);
                // Not on any hot path: once per claim; an entry per engine
                // and stack however often the thread claims it again.
                let _ = CLAIMS.try_with(|c| {
                    let mut c = c.borrow_mut();
                    let known = c
                        .0
                        .iter()
                        .any(|(w, k, t)| *k == e && *t == token && w.as_ptr() == Arc::as_ptr(self));
                    if !known {
                        c.0.retain(|(w, _, _)| w.strong_count() > 0);
                        c.0.push((Arc::downgrade(self), e, token));
                    }
                });
                true
            }
            Err(t) if t == token => {
                o.holds.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    /// Gives back one hold of engine `e` by the thread with `token`; the
    /// last one ends the ownership.
    fn release(&self, e: usize, token: u64) {
        let Some(o) = self.engines.get(e) else {
            return;
        };
        if o.owner.load(Ordering::Acquire) != token {
            return;
        }
        if o.holds.fetch_sub(1, Ordering::AcqRel) <= 1 {
            o.holds.store(0, Ordering::Relaxed);
            let _ = o
                .owner
                .compare_exchange(token, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Ends the ownership of engine `e` by the thread with `token`, every
    /// hold at once (the thread exits).
    fn drop_owner(&self, e: usize, token: u64) {
        if let Some(o) = self.engines.get(e) {
            if o.owner
                .compare_exchange(token, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                o.holds.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// What a waiter may do with an engine ([`Owners::may_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    /// The waiter owns it: it runs it first.
    Own,
    /// Nobody owns it: whoever locks it runs it.
    Free,
    /// Its owner has not run it for the takeover time: a try_lock.
    Takeover,
    /// Another thread owns it and runs it.
    Skip,
}

/// The claims of one thread, given back when it exits.
struct Claims(Vec<(Weak<Owners>, usize, u64)>);

impl Drop for Claims {
    fn drop(&mut self) {
        for (owners, e, token) in self.0.drain(..) {
            if let Some(o) = owners.upgrade() {
                o.drop_owner(e, token);
            }
        }
    }
}

thread_local! {
    static TOKEN: Cell<u64> = const { Cell::new(0) };
    static CLAIMS: RefCell<Claims> = const { RefCell::new(Claims(Vec::new())) };
}

/// This thread's token: a number no other thread of the process has, not 0.
pub(super) fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    TOKEN
        .try_with(|t| match t.get() {
            0 => {
                let k = NEXT.fetch_add(1, Ordering::Relaxed);
                t.set(k);
                k
            }
            k => k,
        })
        .unwrap_or(u64::MAX)
}

/// A claim on an inline engine ([`Stack::claim_engine`]): the engine and
/// the claiming thread's token, to give back with [`Stack::release_claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineClaim {
    /// The engine claimed.
    pub engine: usize,
    token: u64,
}

impl Stack {
    /// Inline mode with several engines: makes the calling thread the only
    /// runner of its engine ([`Stack::current_engine`]): the other waiters
    /// skip it while this thread runs it in its waits, and run it only when
    /// this thread has not for the takeover time
    /// ([`Stack::set_takeover_after`]). For a program with a thread per
    /// engine (a SO_REUSEPORT listener opened by a thread claims its engine
    /// this way by itself). The ownership ends when the thread exits, or
    /// when every claim is given back ([`Stack::release_claim`]). None in
    /// other modes, with one engine, or when another thread owns the
    /// engine.
    pub fn claim_engine(&self) -> Option<EngineClaim> {
        let Mode::Inline(engines, owners) = &self.inner.mode else {
            return None;
        };
        if engines.len() < 2 {
            return None;
        }
        let engine = self.current_engine();
        let token = thread_token();
        owners
            .claim(engine, token)
            .then_some(EngineClaim { engine, token })
    }

    /// Gives back a claim from [`Stack::claim_engine`] (from any thread):
    /// the engine's last one ends its ownership.
    pub fn release_claim(&self, claim: EngineClaim) {
        if let Mode::Inline(_, owners) = &self.inner.mode {
            owners.release(claim.engine, claim.token);
        }
    }

    /// Inline mode: whether engine `engine` has an owner (see
    /// [`Stack::claim_engine`]): Some(true) when it is the calling thread,
    /// Some(false) another thread, None nobody (or not inline mode).
    pub fn engine_owned(&self, engine: usize) -> Option<bool> {
        let Mode::Inline(_, owners) = &self.inner.mode else {
            return None;
        };
        match owners.engines.get(engine)?.owner.load(Ordering::Acquire) {
            0 => None,
            t => Some(t == thread_token()),
        }
    }

    /// Inline mode: for each engine, the iterations run by a thread other
    /// than its owner while it had one (takeovers after the owner had not
    /// run it for the takeover time). 0 while every owner waits. Other
    /// modes: none.
    pub fn takeovers(&self) -> Vec<u64> {
        match &self.inner.mode {
            Mode::Inline(_, owners) => owners
                .engines
                .iter()
                .map(|o| o.takeovers.load(Ordering::Relaxed))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Inline mode: how long an owned engine's owner may leave it unrun
    /// before any waiter runs it (default 1 ms; nanosecond resolution).
    pub fn set_takeover_after(&self, after: Duration) {
        if let Mode::Inline(_, owners) = &self.inner.mode {
            owners.takeover_ns.store(
                after.as_nanos().min(u64::MAX as u128) as u64,
                Ordering::Relaxed,
            );
        }
    }
}
