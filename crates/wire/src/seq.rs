//! TCP sequence numbers: 32-bit values compared modulo 2^32 (RFC 9293 §3.4).

use core::cmp::Ordering;
use core::ops::{Add, AddAssign, Sub};

/// A TCP sequence number. Ordering is the RFC 9293 §3.4 modular comparison:
/// `a < b` when `(b - a) mod 2^32` lies in `1..2^31`. Only compare numbers
/// known to be within 2^31 of each other (any window is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNum(pub u32);

impl SeqNum {
    /// The larger of two sequence numbers under modular comparison.
    pub fn max(self, other: SeqNum) -> SeqNum {
        if self >= other {
            self
        } else {
            other
        }
    }

    /// The smaller of two sequence numbers under modular comparison.
    pub fn min(self, other: SeqNum) -> SeqNum {
        if self <= other {
            self
        } else {
            other
        }
    }
}

impl Add<usize> for SeqNum {
    type Output = SeqNum;
    fn add(self, rhs: usize) -> SeqNum {
        SeqNum(self.0.wrapping_add(rhs as u32))
    }
}

impl AddAssign<usize> for SeqNum {
    fn add_assign(&mut self, rhs: usize) {
        self.0 = self.0.wrapping_add(rhs as u32);
    }
}

impl Sub<usize> for SeqNum {
    type Output = SeqNum;
    fn sub(self, rhs: usize) -> SeqNum {
        SeqNum(self.0.wrapping_sub(rhs as u32))
    }
}

/// Distance `self - rhs` in bytes. Panics in debug builds never: a negative
/// distance wraps to a huge value, so callers compare first.
impl Sub<SeqNum> for SeqNum {
    type Output = usize;
    fn sub(self, rhs: SeqNum) -> usize {
        self.0.wrapping_sub(rhs.0) as usize
    }
}

impl PartialOrd for SeqNum {
    fn partial_cmp(&self, other: &SeqNum) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SeqNum {
    fn cmp(&self, other: &SeqNum) -> Ordering {
        (self.0.wrapping_sub(other.0) as i32).cmp(&0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_wraps_around_zero() {
        assert!(SeqNum(u32::MAX) < SeqNum(0));
        assert!(SeqNum(5) > SeqNum(u32::MAX - 5));
        assert_eq!(SeqNum(3) - SeqNum(u32::MAX), 4);
        assert_eq!(SeqNum(u32::MAX) + 2usize, SeqNum(1));
    }
}
