//! The time-stamp counter, the clock of [`crate::trace`]: the crate's only
//! `unsafe` outside its shared-memory modules.

/// The TSC, in ticks (`rdtsc`).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions (x86_64 always has it); it
    // reads a counter and touches no memory.
    unsafe { core::arch::x86_64::_rdtsc() }
}
