//! Steering among several engines: every flow has one owner engine, and a
//! frame that lands on another is handed to its owner. `mesh` says who
//! owns what and holds the handoff rings between each ordered pair of
//! engines; `handoff` is one engine's side of them (whether a packet is
//! another's and handing it over, copies of ARP and Neighbor Discovery to
//! every engine, taking what the others handed over). State owned here:
//! the engine's [`Handoff`] (`Protocols::handoff`); None for an engine
//! that is alone.

mod handoff;
mod mesh;

pub(crate) use mesh::Kind;
pub use mesh::{handoff_mesh, udp_owner, Handoff, HANDOFF_BURST, HANDOFF_RING_BYTES};
