//! The application's side: what it asks (`commands`: open, bind, listen,
//! send, close, socket options, each checked against the socket table),
//! what it is told (`events`: what TCP reports becomes the socket's status
//! block, a wake-up, a place in the listener's accept queue), and its
//! byte rings as TCP reads and fills them (`rings`). Everything an
//! application reaches goes through `appif`'s command ring, byte rings and
//! status blocks; this layer is the engine's end of them.

pub(crate) mod commands;
pub(crate) mod events;
pub(crate) mod rings;
