//! Frame payloads a port may send straight from where they lie: the bytes of
//! an application's TX ring, handed to the kernel as an iovec behind a
//! header-only frame instead of being copied into the frame first
//! (`nic::TxQueue::transmit_gather`).
//!
//! A [`TxPayload`] holds a reference to the memory it points into, so the
//! memory stays mapped for as long as a port keeps the payload queued; what
//! keeps the bytes *unchanged* until the port's next flush is the caller's
//! ring protocol (an engine releases ring bytes only when they are
//! acknowledged, never between queuing a segment and flushing the port).
//!
//! # Why a crate of its own
//!
//! Both sides of a lent payload name these two types: `appif`, whose rings
//! and segments are the [`StableMemory`] and which cuts the [`TxPayload`]s,
//! and `nic`, whose ports read them. Here they sit on a floor below both,
//! so that the shared-memory contract (`appif`) does not depend on the port
//! drivers (`nic`). Not in `wire`: `wire` forbids `unsafe` and is about
//! bytes on the network, while this is about memory that stays mapped (one
//! raw copy, with its `// SAFETY:`). `nic` re-exports both types
//! (`nic::TxPayload`, `nic::StableMemory`), so its users need not name this
//! crate.

#![deny(missing_docs)]

use std::sync::Arc;

/// Memory that stays where it is, mapped and readable, for as long as the
/// value lives: what a [`TxPayload`] points into.
///
/// # Safety
/// `as_ptr()` and `len()` return the same values for the value's whole life,
/// and the `len()` bytes at `as_ptr()` stay mapped and readable until the
/// value is dropped. Other parties may write them meanwhile (shared memory):
/// this crate reads them only with raw copies or through the kernel, never
/// through references.
pub unsafe trait StableMemory: Send + Sync {
    /// Start of the memory.
    fn as_ptr(&self) -> *const u8;
    /// Length of the memory, bytes.
    fn len(&self) -> usize;
    /// True for empty memory.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The payload of one frame: up to two byte ranges (a ring's bytes before
/// and after its wrap) of a [`StableMemory`], which it keeps alive.
/// Cloning and dropping cost one atomic reference count update; nothing
/// allocates.
#[derive(Clone)]
pub struct TxPayload {
    mem: Arc<dyn StableMemory>,
    /// (offset in `mem`, bytes) of each range, in order.
    parts: [(usize, usize); 2],
}

impl core::fmt::Debug for TxPayload {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "TxPayload({:?})", self.parts)
    }
}

impl TxPayload {
    /// The bytes of `parts`, each (offset in `mem`, length in bytes), in
    /// order; None when a range does not lie inside `mem`.
    pub fn new(mem: Arc<dyn StableMemory>, parts: [(usize, usize); 2]) -> Option<TxPayload> {
        let len = mem.len();
        let inside = |(at, n): (usize, usize)| at.checked_add(n).is_some_and(|end| end <= len);
        if !parts.iter().all(|&p| inside(p)) {
            return None;
        }
        Some(TxPayload { mem, parts })
    }

    /// Payload bytes.
    pub fn len(&self) -> usize {
        self.parts[0].1 + self.parts[1].1
    }

    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Segments of `gso_size` bytes the payload makes (1 when `gso_size`
    /// is 0 or the payload is empty).
    pub fn segments(&self, gso_size: usize) -> usize {
        if gso_size == 0 {
            return 1;
        }
        self.len().div_ceil(gso_size).max(1)
    }

    /// Copies the first `dst.len()` bytes (at most [`TxPayload::len`]) into
    /// `dst`; returns how many were copied.
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        let mut n = 0;
        for (ptr, len) in self.raw_parts() {
            let k = len.min(dst.len() - n);
            // SAFETY: `ptr..ptr + len` lies inside the memory (checked in
            // `new`), which `self.mem` keeps mapped and readable
            // (StableMemory's contract); `dst[n..n + k]` is exclusively
            // borrowed and cannot overlap memory we only hold shared. A
            // raw copy makes no reference to bytes another party may write.
            #[allow(unsafe_code)]
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, dst[n..].as_mut_ptr(), k)
            };
            n += k;
        }
        n
    }

    /// (start, bytes) of each non-empty range, for an iovec (a port's
    /// gathered send); the pointers are valid while `self` lives.
    pub fn raw_parts(&self) -> impl Iterator<Item = (*const u8, usize)> + '_ {
        let base = self.mem.as_ptr();
        self.parts
            .iter()
            .filter(|p| p.1 > 0)
            // `wrapping_add` keeps this safe; the offset is inside the
            // memory (checked in `new`), so the pointer is in bounds.
            .map(move |&(at, n)| (base.wrapping_add(at), n))
    }
}

/// Payloads over plain heap memory, for tests (this crate's, and `nic`'s
/// through the `testing` feature).
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use super::*;

    struct Bytes(Box<[u8]>);

    // SAFETY: a boxed slice never moves or shrinks while it lives.
    unsafe impl StableMemory for Bytes {
        fn as_ptr(&self) -> *const u8 {
            self.0.as_ptr()
        }
        fn len(&self) -> usize {
            self.0.len()
        }
    }

    /// Memory holding `bytes`.
    pub fn memory(bytes: &[u8]) -> Arc<dyn StableMemory> {
        Arc::new(Bytes(bytes.into()))
    }

    /// `data` as a payload wrapped like a ring's: the bytes from `split` on
    /// lie at the start of the memory, the ones before it at its end.
    pub fn wrapped(data: &[u8], split: usize) -> TxPayload {
        let (a, b) = data.split_at(split);
        let mut mem = b.to_vec();
        mem.extend_from_slice(&[0xee; 7]);
        let at = mem.len();
        mem.extend_from_slice(a);
        TxPayload::new(memory(&mem), [(at, a.len()), (0, b.len())]).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    fn mem() -> Arc<dyn StableMemory> {
        memory(&(0..100u8).collect::<Vec<u8>>())
    }

    #[test]
    fn a_payload_copies_its_two_ranges_in_order() {
        let p = TxPayload::new(mem(), [(90, 10), (0, 5)]).unwrap();
        assert_eq!(p.len(), 15);
        let mut out = [0u8; 20];
        assert_eq!(p.copy_to(&mut out), 15);
        assert_eq!(
            &out[..15],
            &[90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 0, 1, 2, 3, 4]
        );
        let mut short = [0u8; 12];
        assert_eq!(p.copy_to(&mut short), 12);
        assert_eq!(&short[10..], &[0, 1]);
        let data: Vec<u8> = (0..50).collect();
        let w = wrapped(&data, 20);
        assert_eq!((w.segments(0), w.segments(20), w.segments(49)), (1, 3, 2));
        let mut out = vec![0u8; 50];
        assert_eq!(w.copy_to(&mut out), 50);
        assert_eq!(out, data);
    }

    #[test]
    fn a_range_outside_the_memory_is_refused() {
        assert!(TxPayload::new(mem(), [(95, 6), (0, 0)]).is_none());
        assert!(TxPayload::new(mem(), [(0, 1), (usize::MAX, 2)]).is_none());
        assert!(TxPayload::new(mem(), [(100, 0), (0, 100)]).is_some());
    }
}
