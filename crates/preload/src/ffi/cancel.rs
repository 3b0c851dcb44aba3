//! Threads: pthread_cancel.

use super::*;

/// pthread_cancel(3): the real one, then the shim wakes the thread if it
/// waits in a corestack call, which then ends as glibc's own cancellation
/// point would (see [`crate::cancel`]). Returns what the real one did
/// (0, or ESRCH).
#[no_mangle]
pub unsafe extern "C" fn pthread_cancel(thread: libc::pthread_t) -> c_int {
    // SAFETY: no pointers; `thread` is the caller's to vouch for, as for libc.
    let rc = unsafe { sys::pthread_cancel(thread) };
    if !sys::inside() {
        crate::cancel::cancel(thread, rc);
    }
    rc
}
