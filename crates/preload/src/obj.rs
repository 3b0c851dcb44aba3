//! The objects behind the fds of ours: [`Obj`], a socket ([`Sock`]) or an
//! epoll instance ([`Epoll`]), and the one table of them (a
//! [`table::Slots`]; the fd states and their rules are `table`'s).
#![forbid(unsafe_code)]

use crate::epoll::Epoll;
use crate::sock::Sock;
use crate::table::{Handle, Slots};
use core::ffi::c_int;
use std::sync::Arc;

/// What an fd of ours refers to.
pub type Obj = Handle<Sock, Epoll>;

static OBJS: Slots<Obj> = Slots::new();

/// The object behind `fd` if it is ours (the fast path: one load for a
/// kernel fd).
#[inline]
pub fn get(fd: c_int) -> Option<Arc<Obj>> {
    OBJS.get(fd)
}

/// The socket behind `fd`, if `fd` is one of ours.
pub fn sock(fd: c_int) -> Option<Arc<Obj>> {
    OBJS.sock(fd)
}

/// Makes `fd` refer to `obj` (see [`Slots::install`]). Errors: EMFILE when
/// `fd` is beyond the table.
pub fn install(fd: c_int, obj: Arc<Obj>) -> Result<Option<Arc<Obj>>, c_int> {
    OBJS.install(fd, obj)
}

/// Takes `fd`'s object out before its real close (see
/// [`Slots::begin_close`]; `table::end_close` after it).
pub fn begin_close(fd: c_int) -> Option<Arc<Obj>> {
    OBJS.begin_close(fd)
}

/// Drops `fd`'s entry if it is `obj`'s (see [`Slots::release`]).
pub fn release(fd: c_int, obj: &Arc<Obj>) -> Option<Arc<Obj>> {
    OBJS.release(fd, obj)
}

/// Forgets a stale entry at `fd` (see [`Slots::forget`]).
pub fn forget(fd: c_int) -> Option<Arc<Obj>> {
    OBJS.forget(fd)
}

/// Takes every entry out of the table (see [`Slots::take_all`]).
pub fn take_all() -> Vec<Arc<Obj>> {
    OBJS.take_all()
}
