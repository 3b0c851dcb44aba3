//! Helpers shared by the unit tests of several modules.

use core::fmt::Debug;
use core::ops::Range;

use crate::{Error, Result};

/// Asserts that `parse` refuses every prefix of `buf` whose length in bytes
/// lies in `lens` with [`Error::Truncated`] (the message names the length).
pub(crate) fn assert_prefixes_truncated<'a, T: Debug + PartialEq>(
    buf: &'a [u8],
    lens: Range<usize>,
    parse: impl Fn(&'a [u8]) -> Result<T>,
) {
    for len in lens {
        assert_eq!(parse(&buf[..len]), Err(Error::Truncated), "len {len}");
    }
}
