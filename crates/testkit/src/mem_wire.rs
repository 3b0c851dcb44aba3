//! Two stacks joined by a clean `mem` wire, in one process: for the tests that run both ends
//! (the CLI's `trace` and `capture`, the client's `mem_api` and `trace_mem`).

use corestack::{ListenOptions, Stack};
use nic::impair::Impairments;
use nic::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4};

/// Stack a's address (10.0.0.1/24).
pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Stack b's address (10.0.0.2/24).
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Stack a's IPv6 address (fd00:1::1/64, a unique local address).
pub const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
/// Stack b's IPv6 address (fd00:1::2/64).
pub const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 2);

/// Dual-stack stacks a (at [`A`] and [`A6`]) and b (at [`B`] and [`B6`])
/// on a clean `mem` wire, inline or embedded.
pub fn stacks_v6(inline: bool) -> (Stack, Stack) {
    clean_pair(inline, true)
}

/// Stacks a (at [`A`]) and b (at [`B`]) on a clean `mem` wire, both inline
/// (the engine runs in the threads that call into them) or both with an
/// engine thread of their own.
pub fn stacks(inline: bool) -> (Stack, Stack) {
    clean_pair(inline, false)
}

/// Stacks a and b on a clean `mem` wire, with their IPv6 addresses when `v6`.
fn clean_pair(inline: bool, v6: bool) -> (Stack, Stack) {
    let (pa, pb) = mem::pair(Impairments::none(), Impairments::none(), 1);
    let start = |port, ip, ip6| {
        let mut b = Stack::builder().mem_port(port).ip(ip, 24).inline(inline);
        if v6 {
            b = b.ip6(ip6, 64);
        }
        b.start().unwrap()
    };
    (start(pa, A, A6), start(pb, B, B6))
}

/// Stacks a (at [`A`], `a_engines` engines) and b (at [`B`], `b_engines`
/// engines) on a clean multi-queue `mem` wire: a's NIC spreads the frames
/// it receives by the engines' hash (a NIC that steers), b's at random per
/// frame (one that cannot), so b's engines hand most frames over.
pub fn stacks_with_engines(inline: bool, a_engines: usize, b_engines: usize) -> (Stack, Stack) {
    stacks_with_engines_then(inline, a_engines, b_engines, || {})
}

/// [`stacks_with_engines`], calling `between` once stack a has started and
/// before stack b starts: to point `CORESTACK_STATS_DIR` elsewhere, say, so
/// that b's published segments (`corestack stat`, `ss`) are b's alone (the
/// two stacks of one process would otherwise replace each other's).
pub fn stacks_with_engines_then(
    inline: bool,
    a_engines: usize,
    b_engines: usize,
    between: impl FnOnce(),
) -> (Stack, Stack) {
    let steer_a = mem::Steer::Hash(std::sync::Arc::new(nic::rss::Steering::new(a_engines)));
    let (qa, qb) = mem::multi_pair(
        Impairments::none(),
        Impairments::none(),
        1,
        a_engines,
        b_engines,
        steer_a,
        mem::Steer::RandomPerFrame,
    );
    let a = Stack::builder()
        .mem_ports(qa)
        .ip(A, 24)
        .inline(inline)
        .start()
        .unwrap();
    between();
    let b = Stack::builder()
        .mem_ports(qb)
        .ip(B, 24)
        .inline(inline)
        .start()
        .unwrap();
    (a, b)
}

/// Listener options with SO_REUSEPORT set.
pub fn reuseport() -> ListenOptions {
    ListenOptions {
        reuseport: true,
        ..ListenOptions::default()
    }
}

/// The IPv4 wildcard address with `port`.
pub fn any(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)
}
