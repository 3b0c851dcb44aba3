//! TCP (RFC 9293): a sans-IO connection state machine.
//!
//! A [`Tcb`] holds one connection. It never touches frames, the clock or any
//! I/O: the engine loop hands it parsed headers ([`wire::tcp::TcpRepr`]) with
//! their payload, the current [`Instant`](crate::time::Instant), and the
//! application's byte rings seen through [`SendBuffer`] and [`RecvBuffer`].
//! Out come [`Events`] for the application and [`Segment`]s to send, whose
//! payload the engine copies straight from the send ring (one copy).
//!
//! ```text
//!   engine rx ──► Tcb::input ──► RecvBuffer (in-order bytes), Events
//!   app write ──► SendBuffer ──► Tcb::poll_output ──► Segment { repr, payload_offset }
//!   clock     ──► Tcb::next_timeout / Tcb::on_timer (RTO, delayed ACK, persist, TIME-WAIT)
//! ```
//!
//! Invariants: offset 0 of the [`SendBuffer`] is the first unacknowledged
//! data byte; the [`RecvBuffer`] only ever receives in-order bytes; after
//! creation, `input`, `poll_output` and `on_timer` never allocate (the
//! out-of-order store is allocated once, `rcv_buf` bytes).
//!
//! Threading: a `Tcb` belongs to one engine core; nothing here is shared.
//!
//! Files: `tcb` (state, config, contract types), `input` (segment arrival,
//! RFC 9293 §3.10.7), `output` (what to send), `timer` (timer expiry),
//! `rto` (RFC 6298), `congestion` (NewReno, RFC 5681 + RFC 6582),
//! `reassembly` (bounded out-of-order queue), `isn` (RFC 6528), `rst`
//! (replies for segments to no connection, §3.10.7.1).

mod congestion;
mod input;
mod isn;
mod output;
mod reassembly;
mod rst;
mod rto;
mod tcb;
mod timer;

#[cfg(test)]
mod tests;

pub use isn::IsnGenerator;
pub use rst::reply_rst;
pub use tcb::{
    CloseReason, Events, RecvBuffer, Segment, SendBuffer, State, Tcb, TcbStats, TcpConfig,
};
