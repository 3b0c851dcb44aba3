//! What the hosts of several engines tell each other (`engines`): the first
//! engine's host posts every association's view and end to the others'
//! [`Mailbox`]es; each other host reports there the associations that
//! broke the protocol on its ring and the connections it lent. A host's
//! [`Role`] says which side it is on.

use crate::assoc::App;
use crate::control::ControlSocket;
use appif::doorbell::Doorbell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What the first engine's host tells another's.
pub(crate) enum Msg {
    /// A new association: this engine's view of it, and the fork it claims
    /// to be the child of (parent association, ticket; 0s for none),
    /// judged by the first engine.
    Join(Box<App>, (u32, u32)),
    /// The association ended (departed, broke the protocol, or refused).
    End(u32),
}

/// Messages to one host, and the associations it found broken (read by
/// the first engine's host).
#[derive(Default)]
pub(crate) struct Mailbox {
    /// To the host, in order.
    pub to: Mutex<Vec<Msg>>,
    /// Set with each message: the host looks at `to` in its next
    /// iteration (one load per iteration while none came).
    pub mail: AtomicBool,
    /// The host's doorbell, rung after a message (it may nap).
    pub bell: Option<Arc<Doorbell>>,
    /// From the host: associations that broke the protocol on its ring.
    pub broken: Mutex<Vec<u32>>,
    /// From the host: the connections it holds that were lent
    /// (`Desc::Lend`), for the first engine to claim at a borrow.
    pub lends: Mutex<Vec<Lending>>,
}

/// A connection an engine e ≥ 1 holds, lent with SCM_RIGHTS.
pub(crate) struct Lending {
    /// The passed fd's open-file key.
    pub key: u64,
    /// The lender's association.
    pub owner: u32,
    /// The connection's slot in the lender's segment.
    pub slot: u32,
    /// When it was lent.
    pub at: std::time::Instant,
    /// The association the first engine let borrow it (it takes it over
    /// with `Desc::Adopt` on this engine).
    pub claimed: Option<u32>,
}

impl Mailbox {
    /// Posts `m` to the host and wakes it.
    pub fn post(&self, m: Msg) {
        lock(&self.to).push(m);
        self.mail.store(true, Ordering::Release);
        if let Some(b) = &self.bell {
            b.ring();
        }
    }
}

/// A host's place among the engines.
pub(crate) enum Role {
    /// The only engine, or the first of several: serves the control socket,
    /// and tells the others (their mailboxes) of every association.
    First(ControlSocket, Vec<Arc<Mailbox>>),
    /// Engine e ≥ 1: serves the associations its mailbox brings.
    Other(Arc<Mailbox>),
}

/// Locks `m`, a poisoned lock included (its holder panicked; the data is
/// a plain list).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
