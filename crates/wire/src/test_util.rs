//! Helpers shared by the unit tests of several modules.

use core::fmt::Debug;
use core::net::Ipv6Addr;
use core::ops::Range;

use crate::{Error, Result};

/// The IPv6 source of the unit tests' pseudo-headers (fd00::1).
pub(crate) const SRC6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// The IPv6 destination of the unit tests' pseudo-headers (fd00::2).
pub(crate) const DST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

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
