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
//!   app write ──► SendBuffer ──► Tcb::poll_output ──► Segment { repr, payload_offset, ect }
//!   clock     ──► Tcb::next_timeout / Tcb::on_timer (RTO, RACK, TLP, delayed ACK, persist, keepalive, TIME-WAIT)
//! ```
//!
//! Invariants: offset 0 of the [`SendBuffer`] is the first unacknowledged
//! data byte; the [`RecvBuffer`] only ever receives in-order bytes; after
//! creation, `input`, `poll_output` and `on_timer` allocate only what an
//! idle connection gave back ([`Tcb::release_idle`]): the scoreboard,
//! `max_segments_in_flight` entries, with the first segment sent, and the
//! out-of-order store, `rcv_buf` bytes, with the first out-of-order
//! segment; once each per idle period, never per segment.
//!
//! Threading: a `Tcb` belongs to one engine core; nothing here is shared.
//!
//! Files: `tcb` (the Tcb's parts, options, accessors), `config`
//! (settings), `api` (the engine contract: states, events, the rings as
//! TCP sees them, segments), `stats` (counters), `handshake` (opening,
//! negotiated options), `input` (segment arrival, RFC 9293 §3.10.7),
//! `output` (what to send) with `retransmit` (fast retransmission, TLP,
//! persist probes), `pacing`, `cwv` (congestion window validation) and
//! `window` (receive-window advertisement, SWS avoidance), `plpmtud`
//! (black-hole detection, RFC 4821 §7.7), `timer` (timer expiry, keepalive, FIN-WAIT-2
//! of orphans), `teardown` (close, abort, TIME-WAIT), `rto` (RFC 6298),
//! `cc` (pluggable congestion control: NewReno, CUBIC RFC 9438, DCTCP RFC
//! 8257, BBR v1), `rate` (delivery rate estimation for BBR), `sack_tx` (the SACK blocks we send), `recovery` (loss detection and recovery: NewReno RFC 6582, SACK
//! RFC 2018 / RFC 6675, D-SACK RFC 2883, RACK-TLP RFC 8985, ECN RFC 3168),
//! `scoreboard` (the retransmission queue with SACK marks and transmit
//! times), `reassembly` (bounded out-of-order queue), `autotune`
//! (receive-window and send-buffer auto-tuning), `isn` (RFC 6528), `rst`
//! (replies for segments to no connection, §3.10.7.1).
//!
//! Around the Tcb, the engine's side of TCP, which does handle frames:
//! `demux` (a received segment to its connection, listener or TIME-WAIT
//! record, else a RST), `tx` (each dirty connection's output becomes
//! frames for the IP layer, one algorithm for IPv4 and IPv6 over
//! `ip::family::TcpEgress`), `listen` (passive open, with SYN cookies from
//! `syncookie`), `twtable` and `tw_records` (TIME-WAIT kept as a record
//! without its connection). Each of them serves both families.
//!
//! ECN: the engine reports the IP ECN field of each arriving segment with
//! [`Tcb::input_ecn`] before [`Tcb::input`], and sends a segment with
//! ECT(0) when [`Segment::ect`] is set.

mod api;
mod autotune;
mod cc;
mod config;
mod cwv;
mod handshake;
mod input;
mod isn;
mod output;
mod pacing;
mod plpmtud;
mod rate;
mod reassembly;
mod recovery;
mod retransmit;
mod rst;
mod rto;
mod sack_tx;
mod scoreboard;
mod stats;
mod tcb;
mod teardown;
mod timer;
mod timewait;
mod window;

pub(crate) mod demux;
pub(crate) mod listen;
pub mod syncookie;
pub(crate) mod tw_records;
pub(crate) mod twtable;
pub(crate) mod tx;

#[cfg(test)]
mod tests;

pub use api::{CloseReason, Events, RecvBuffer, Segment, SendBuffer, State};
pub use cc::{AckInfo, CcKind, CongestionControl, CongestionEvent};
pub use config::TcpConfig;
pub use isn::IsnGenerator;
pub use rst::reply_rst;
pub use stats::TcbStats;
pub use tcb::Tcb;
pub use timewait::{TimeWait, TwAction};
