//! Errors at the C boundary: one errno per failure, set in `errno` and
//! returned as -1, plus a one-line message per thread for `cs_last_error`.
//!
//! Every exported function runs its body through [`ffi`], which also stops
//! panics at the boundary (a panic unwinding into C is undefined behaviour):
//! a caught panic becomes EIO with a message saying it is a bug. errno is
//! written here, and only here.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A failed call: the errno to report and, when there is more to say than
/// `strerror(errno)`, a message.
#[derive(Debug)]
pub(crate) struct Error {
    pub errno: i32,
    pub msg: Option<String>,
}

/// The result of a call's body.
pub(crate) type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A failure with errno `errno` and the system's text for it.
    pub fn errno(errno: i32) -> Error {
        Error { errno, msg: None }
    }

    /// A failure with errno `errno` and a message saying what to do.
    pub fn msg(errno: i32, msg: impl Into<String>) -> Error {
        Error {
            errno,
            msg: Some(msg.into()),
        }
    }

    fn text(&self) -> String {
        match &self.msg {
            Some(m) => m.clone(),
            None => io::Error::from_raw_os_error(self.errno).to_string(),
        }
    }
}

impl From<io::Error> for Error {
    /// The error's own errno, or the one its kind stands for (the one map,
    /// [`appif::errno::of`]); a message only when the library gave one
    /// (`io::Error::new`).
    fn from(e: io::Error) -> Error {
        let errno = appif::errno::of(&e);
        let msg = match e.raw_os_error() {
            Some(_) => None,
            None if e.get_ref().is_some() => Some(e.to_string()),
            None => None,
        };
        Error { errno, msg }
    }
}

thread_local! {
    /// The message of this thread's last failed call.
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `e` for this thread: errno and the `cs_last_error` text.
fn record(e: &Error) {
    let text = e.text().replace('\0', " ");
    let text = CString::new(text).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = text);
    set_errno(e.errno);
}

/// Sets the calling thread's errno.
fn set_errno(n: i32) {
    // SAFETY: __errno_location returns a valid pointer to the calling
    // thread's errno for the thread's whole lifetime (glibc and musl).
    unsafe {
        *libc::__errno_location() = n;
    }
}

/// This thread's last error message; valid until this thread's next failed
/// call (the buffer is replaced then).
pub(crate) fn last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// Runs an exported function's body: on `Err` sets errno and the message
/// and returns `fail`; a panic is caught and reported as EIO.
pub(crate) fn ffi<T: Copy>(fail: T, body: impl FnOnce() -> Result<T>) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            record(&e);
            fail
        }
        Err(_) => {
            record(&Error::msg(
                libc::EIO,
                "internal error: corestack panicked (a bug: please report it)",
            ));
            fail
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn would_block_without_raw_errno_maps_to_eagain() {
        let e: io::Error = io::ErrorKind::WouldBlock.into();
        assert_eq!(Error::from(e).errno, libc::EAGAIN);
    }

    #[test]
    fn raw_os_error_is_kept_and_has_no_extra_message() {
        let e = Error::from(io::Error::from_raw_os_error(libc::ECONNRESET));
        assert_eq!(e.errno, libc::ECONNRESET);
        assert!(e.msg.is_none());
    }

    #[test]
    fn custom_message_is_kept() {
        let e = Error::from(io::Error::new(io::ErrorKind::NotFound, "no such iface"));
        assert_eq!(e.errno, libc::ENODEV);
        assert_eq!(e.msg.as_deref(), Some("no such iface"));
    }

    #[test]
    fn ffi_panic_returns_fail_value_with_eio() {
        let r = ffi(-1, || -> Result<i32> { panic!("boom") });
        assert_eq!(r, -1);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EIO));
    }
}
