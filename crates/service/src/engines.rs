//! The daemon with several engines (`cores = N`): one [`Host`] per engine,
//! each on its own thread with its own NIC queue(s), joined by the handoff
//! rings of embedded mode (`engine::steer`: a flow belongs to the engine its
//! symmetric Toeplitz hash picks; a frame that lands elsewhere is handed
//! over).
//!
//! ```text
//!   engine 0's host (the caller's thread): the control socket, hellos,
//!       departures, borrows; posts Join(view, fork claim) / End(assoc)
//!       to the others
//!   engine e's host (thread corestack-engine-e): the views it was given,
//!       the fork references of its own sockets (see `host::forking`);
//!       reports the associations that broke the protocol on its ring
//! ```
//! Every application has one segment, with a command ring and a doorbell
//! per engine (`appif::seg::Layout::lane`): engine e's host takes only ring
//! e, and writes only the slots of the sockets it holds. The association
//! (its [`appif::command::Owner`]) is the same on every engine; when it
//! ends, every engine drops its sockets.

use crate::config::Validated;
use crate::control::ControlSocket;
use crate::host::{Host, SetupError};
use crate::mailbox::{Mailbox, Role};
use appif::doorbell::Doorbell;
use appif::notify::Notify;
use engine::time::Instant;
use engine::Engine;
use nic::Port;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tracing::warn;

/// Serves applications on `control` with one engine per port of `ports`
/// until `stop` is set: with one port exactly as [`Host::run`]; with
/// several, engine e on `ports[e]` (one queue or a group of queues) on a
/// thread of its own, steered and joined as in embedded mode.
///
/// Errors: a host could not be set up (nothing was served then).
pub fn serve<P: Port + Send + 'static>(
    ports: Vec<P>,
    cfg: Validated,
    control: ControlSocket,
    stop: &AtomicBool,
) -> Result<(), SetupError> {
    let n = ports.len();
    // Engine e's thread on `cpus` entry e (cycling), when a list is given.
    let cpus = cfg.cpus.clone();
    let pin = &move |e: usize| {
        if let Some(&c) = cpus.get(e % cpus.len().max(1)) {
            appif::pin_current_thread(c);
        }
    };
    if n <= 1 {
        let Some(port) = ports.into_iter().next() else {
            return Ok(());
        };
        pin(0);
        Host::new(port, cfg, control)?.run(stop);
        return Ok(());
    }
    let steering = Arc::new(nic::rss::Steering::new(n));
    let mut mesh = engine::steer::handoff_mesh(steering, engine::steer::HANDOFF_RING_BYTES);
    let bells: Vec<Option<Arc<Doorbell>>> = (0..n).map(|_| Doorbell::new().ok()).collect();
    let boxes: Vec<Arc<Mailbox>> = (1..n)
        .map(|e| {
            Arc::new(Mailbox {
                bell: bells[e].clone(),
                ..Mailbox::default()
            })
        })
        .collect();
    let mut hosts = Vec::with_capacity(n);
    let mut control = Some(control);
    for (e, port) in ports.into_iter().enumerate() {
        // The daemon takes commands from application segments, not from this channel.
        let (_unused, rx) = appif::spsc::channel(1);
        let mut engine = Engine::new(
            port,
            cfg.engine_config(),
            rx,
            Arc::new(Notify::default()),
            Instant::now(),
        );
        let mut handoff = mesh.remove(0);
        handoff.set_doorbells(bells.clone());
        engine.join(handoff);
        let role = match control.take() {
            Some(c) => Role::First(c, boxes.clone()),
            None => Role::Other(boxes[e - 1].clone()),
        };
        hosts.push(Host::with_engine(
            engine,
            cfg.clone(),
            role,
            bells[e].clone(),
        )?);
    }
    let mut hosts = hosts.into_iter();
    let first = hosts.next();
    // The other engines log where this thread does.
    let log = tracing::dispatcher::get_default(|d| d.clone());
    std::thread::scope(|s| {
        for (e, mut h) in hosts.enumerate() {
            let log = log.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("corestack-engine-{}", e + 1))
                .spawn_scoped(s, move || {
                    pin(e + 1);
                    tracing::dispatcher::with_default(&log, || h.run(stop))
                });
            if let Err(err) = spawned {
                warn!("starting engine {}: {err}", e + 1);
            }
        }
        if let Some(mut h) = first {
            pin(0);
            h.run(stop);
        }
    });
    Ok(())
}
