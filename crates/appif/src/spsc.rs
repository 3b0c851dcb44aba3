//! A bounded single-producer single-consumer queue of values.
//!
//! ```text
//!  head (written by the Sender) ─┐        ┌─ tail (written by the Receiver)
//!  slots: [ . . x x x x . . ]  tail ≤ i < head are full
//! ```
//! The sender publishes a slot with a release store of `head`; the receiver
//! reads `head` with acquire, takes the value, then releases the slot with a
//! release store of `tail`.

use crate::CachePadded;
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Inner<T> {
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
    mask: usize,
    /// Ends (sender, receiver) still alive: probes do not count.
    ends: AtomicUsize,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: a slot is accessed by the sender only while it is outside
// [tail, head) and by the receiver only while inside; the atomics order those
// accesses, so values of a Send type move across threads safely.
unsafe impl<T: Send> Sync for Inner<T> {}
// SAFETY: as above; Inner owns the values it holds.
unsafe impl<T: Send> Send for Inner<T> {}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        let head = *self.head.0.get_mut();
        let mut i = *self.tail.0.get_mut();
        while i != head {
            // SAFETY: slots in [tail, head) hold initialised values that were
            // never taken; we are the last owner.
            unsafe { self.slots[i & self.mask].get_mut().assume_init_drop() };
            i = i.wrapping_add(1);
        }
    }
}

/// The producing end; not Clone, so there is one producer.
pub struct Sender<T>(Arc<Inner<T>>);
/// The consuming end; not Clone, so there is one consumer.
pub struct Receiver<T>(Arc<Inner<T>>);

/// A queue holding up to `capacity` values (rounded up to a power of two).
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let cap = capacity.max(1).next_power_of_two();
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let inner = Arc::new(Inner {
        head: CachePadded(AtomicUsize::new(0)),
        tail: CachePadded(AtomicUsize::new(0)),
        mask: cap - 1,
        ends: AtomicUsize::new(2),
        slots,
    });
    (Sender(inner.clone()), Receiver(inner))
}

impl<T> Sender<T> {
    /// Enqueues `value`, or gives it back when the queue is full.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let q = &*self.0;
        let head = q.head.load(Ordering::Relaxed);
        let tail = q.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) > q.mask {
            return Err(value);
        }
        // SAFETY: the slot at head is outside [tail, head): only the single
        // sender touches it until the release store below publishes it.
        unsafe { (*q.slots[head & q.mask].get()).write(value) };
        q.head.store(head.wrapping_add(1), Ordering::Release);
        Ok(())
    }

    /// True when the receiver has been dropped.
    pub fn is_disconnected(&self) -> bool {
        self.0.ends.load(Ordering::Acquire) == 1
    }

    /// Values the queue holds when full.
    pub fn capacity(&self) -> usize {
        self.0.mask + 1
    }

    /// Values queued and not yet taken (at most: the receiver may be taking
    /// some now).
    pub fn len(&self) -> usize {
        let q = &*self.0;
        q.head
            .load(Ordering::Relaxed)
            .wrapping_sub(q.tail.load(Ordering::Acquire))
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Receiver<T> {
    /// Dequeues the oldest value, if any.
    pub fn pop(&mut self) -> Option<T> {
        let q = &*self.0;
        let tail = q.tail.load(Ordering::Relaxed);
        let head = q.head.load(Ordering::Acquire);
        if tail == head {
            return None;
        }
        // SAFETY: the slot at tail is inside [tail, head), initialised by the
        // sender and published by its release store of head; only the single
        // receiver reads it, once, before releasing it.
        let value = unsafe { (*q.slots[tail & q.mask].get()).assume_init_read() };
        q.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(value)
    }

    /// Number of queued values.
    pub fn len(&self) -> usize {
        let q = &*self.0;
        q.head
            .load(Ordering::Acquire)
            .wrapping_sub(q.tail.load(Ordering::Relaxed))
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the sender has been dropped.
    pub fn is_disconnected(&self) -> bool {
        self.0.ends.load(Ordering::Acquire) == 1
    }

    /// A read-only view of the queue length, for readiness checks.
    pub fn probe(&self) -> Probe<T> {
        Probe(self.0.clone())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.0.ends.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.0.ends.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A read-only view of a queue's length; keeps the queue's memory alive.
pub struct Probe<T>(Arc<Inner<T>>);

impl<T> Probe<T> {
    /// Number of queued values.
    pub fn len(&self) -> usize {
        let q = &*self.0;
        q.head
            .load(Ordering::Acquire)
            .wrapping_sub(q.tail.load(Ordering::Acquire))
            .min(q.mask + 1)
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_queue_push_returns_value() {
        let (mut tx, mut rx) = channel(2);
        assert!(tx.push(1).is_ok());
        assert!(tx.push(2).is_ok());
        assert_eq!(tx.push(3), Err(3));
        assert_eq!(rx.pop(), Some(1));
        assert!(tx.push(3).is_ok());
        assert_eq!(rx.pop(), Some(2));
        assert_eq!(rx.pop(), Some(3));
        assert_eq!(rx.pop(), None);
    }

    #[test]
    fn two_threads_values_arrive_in_order() {
        let (mut tx, mut rx) = channel(64);
        let n = 200_000u64;
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < n {
                if tx.push(i).is_ok() {
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut expect = 0;
        while expect < n {
            if let Some(v) = rx.pop() {
                assert_eq!(v, expect);
                expect += 1;
            }
        }
        t.join().unwrap();
    }

    #[test]
    fn dropped_with_values_inside_frees_them() {
        let (mut tx, rx) = channel(4);
        let v = Arc::new(());
        tx.push(v.clone()).unwrap();
        tx.push(v.clone()).unwrap();
        drop((tx, rx));
        assert_eq!(Arc::strong_count(&v), 1);
    }
}
