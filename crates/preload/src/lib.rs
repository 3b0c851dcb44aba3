//! `libcorestack_preload.so`: runs unmodified Linux programs on corestack
//! by interposing the socket calls of libc (`LD_PRELOAD`, see `corestack
//! exec`).
//!
//! - Every socket keeps a real kernel fd number: `socket(2)` makes the
//!   kernel socket first, an accepted corestack connection gets an eventfd
//!   placeholder. An fd that is not corestack's costs one table load
//!   ([`table`]) and goes to libc ([`sys`]).
//! - The decision to use corestack or stay in the kernel is made at bind,
//!   listen, connect or the first sendto ([`sock`]): AF_INET and AF_INET6
//!   TCP and UDP on corestack's addresses or the wildcard go to corestack
//!   (an AF_INET6 socket's IPv4 peers as `::ffff:a.b.c.d`, [`addr`]);
//!   loopback, other addresses, AF_UNIX, netlink, raw sockets stay in the
//!   kernel. A wildcard server listens on both.
//! - poll, select and epoll take mixed sets ([`mux`], [`epoll`]); waiters
//!   sleep in the kernel and the engine wakes them through an eventfd with
//!   the notify-flag protocol ([`wait`]).
//! - Options: [`opts`] (the table of what is honoured); TCP_INFO: [`tcp_info`].
//! - The process's stack (configuration from the environment, start on
//!   first use, fork, exec and exit): [`stack`].
//!
//! Threading: any thread may use any socket; a call that waits holds no
//! lock while it sleeps, and `pthread_cancel` ends it as glibc's own call
//! would ([`cancel`]). Unsafe code lives in [`sys`] (libc), [`ffi`] (the
//! exported C functions and the application's pointers) and [`cancel`]
//! (glibc's cancellation state) only.

mod addr;
mod cancel;
mod epoll;
mod ffi;
mod mux;
mod obj;
mod opts;
mod sock;
mod stack;
mod switch;
mod sys;
mod table;
mod tcp_info;
#[cfg(test)]
mod tests;
mod wait;
