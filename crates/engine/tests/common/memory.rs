//! What the memory tests measure with: an allocator that counts the live
//! heap bytes (a test binary installs it as its `#[global_allocator]`) and
//! the process's resident anonymous memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// The system allocator, counting the bytes live in [`live_heap`].
pub struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

/// Heap bytes live now (allocated through [`Counting`] and not freed).
pub fn live_heap() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

// SAFETY: forwards every call to the system allocator unchanged; it only
// counts the bytes live.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as i64 - l.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

/// Resident anonymous memory of this process, bytes.
pub fn rss_anon() -> i64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: i64 = s
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .expect("RssAnon in /proc/self/status");
    kib * 1024
}
