//! corestack for applications: `TcpListener`, `TcpStream` and `UdpSocket`
//! with the shape of `std::net`, served by a corestack engine.
//!
//! ```no_run
//! use corestack::{Driver, Stack, TcpListener};
//! use std::io::{Read, Write};
//! let stack = Stack::builder()
//!     .driver(Driver::AfXdp)
//!     .iface("veth1")
//!     .ip("10.77.1.2".parse().unwrap(), 24)
//!     .ip6("fd00:77::2".parse().unwrap(), 64)
//!     .start()?;
//! // `[::]` without IPV6_V6ONLY: IPv6 and IPv4 clients (the latter seen as
//! // `[::ffff:a.b.c.d]`). Addresses are `SocketAddr` (or `SocketAddrV4`/`V6`).
//! let addr: std::net::SocketAddr = "[::]:7".parse().unwrap();
//! let mut listener = TcpListener::bind(&stack, addr)?;
//! let (mut conn, _peer) = listener.accept()?;
//! let mut buf = [0u8; 4096];
//! let n = conn.read(&mut buf)?;
//! conn.write_all(&buf[..n])?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Modes (chosen by the builder):
//! - **embedded** (default): the engine runs on its own thread and polls
//!   the NIC without pause; application threads talk to it through rings,
//!   spin briefly when they wait, then sleep until the engine wakes them.
//! - **inline**: no engine thread; whichever application thread waits (or
//!   calls [`Stack::poll`]) runs engine iterations itself, as in a library
//!   OS. No cross-core wake-ups: the lowest latency with few threads.
//!
//! Errors are `std::io::Error` carrying Linux errno values (ECONNREFUSED,
//! ECONNRESET, ETIMEDOUT, EADDRINUSE, EAGAIN as `WouldBlock`, EPIPE, ...).
//!
//! `unsafe` code lives only in `sys` (poll(2), thread affinity); the shared
//! memory itself is reached through `appif`'s safe types.
#![deny(missing_docs)]
#![deny(unsafe_code)]

/// `Drop` for a socket type with a `request` method that has nothing to
/// do at drop but tell the engine to close it (`Request::Close`).
macro_rules! close_on_drop {
    ($t:ty) => {
        impl Drop for $t {
            fn drop(&mut self) {
                self.request($crate::stack::Request::Close);
            }
        }
    };
}

/// `set_ipv6_header` for a socket type with a `request` method.
macro_rules! ipv6_header {
    ($t:ty) => {
        impl $t {
            /// IPV6_TCLASS and IPV6_UNICAST_HOPS (RFC 3542 §6.5, RFC 3493
            /// §5.1): the Traffic Class (its two ECN bits stay the
            /// engine's) and Hop Limit (0: the default, 64) of this
            /// socket's IPv6 packets from now on; on a listener, of the
            /// connections it accepts from then on. IPv4 packets keep TOS 0
            /// and TTL 64.
            pub fn set_ipv6_header(&self, tclass: u8, hop_limit: u8) -> std::io::Result<()> {
                self.request($crate::stack::Request::SetIpv6Header { tclass, hop_limit });
                Ok(())
            }
        }
    };
}

mod config;
mod poll;
mod service;
mod stack;
mod sys;
mod tcp;
mod trace;
mod udp;

pub use appif::notify::{Armed, Notify};
pub use config::{ConfigError, StackConfig, IDLE_US_DEFAULT};
pub use engine::stats::Stats;
pub use engine::tcp::CcKind;
pub use engine::EngineConfig;

/// The engine's IPv6 link-local address for an interface of MAC `mac`:
/// fe80::/64 with the modified EUI-64 interface identifier (RFC 4291
/// §2.5.1 and appendix A).
pub fn link_local_from_mac(mac: [u8; 6]) -> std::net::Ipv6Addr {
    engine::link_local_from_mac(wire::MacAddr(mac))
}
pub use engine::PollPolicy;
pub use nic::af_xdp::TxPath;
pub use poll::{Event, Interest, Poller, Probe, Source, Status};
pub use stack::{
    parse_cpu_list, spin_round, Driver, EngineClaim, Stack, StackBuilder, Step, StepInterrupted,
    WaitSteps, Waited,
};
pub use sys::{count_handlers_with, SpinSignals, SIGNAL_LOOK_EVERY, SYNCHRONOUS_SIGNALS};
pub use tcp::{ListenOptions, TcpListener, TcpStream};
pub use udp::UdpSocket;
