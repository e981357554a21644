// SPDX-License-Identifier: GPL-2.0

//! The first-sight cache: which file cookies already have a `file_cache` event in the trace.
//!
//! A direct-mapped table of [`SLOTS`] slots (48 KiB), indexed by the `struct file` pointer
//! value. A slot holds the pointer whose `file_cache` event was written, and how often it
//! was seen since. Nothing is allocated, nothing is locked: a slot is a pair of atomics, and
//! every race between two writers costs at worst one extra `file_cache` event, never a
//! missing one.
//!
//! Identity is the lifetime of the `struct file`, not the pointer value: the module calls
//! [`FirstSight::forget`] when a file is freed (a probe on `__fput`), before its memory can be
//! reused for another file. The callback holds a reference on every file it reports, so a
//! file cannot be freed between its sighting and the events that use it. A pointer found in
//! its slot is therefore the same open file whose `file_cache` is in the trace.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// log2 of the number of slots.
pub const SLOT_BITS: u32 = 12;
/// Number of slots; the cache never holds more files than this.
pub const SLOTS: usize = 1 << SLOT_BITS;
/// A reminder `file_cache` is written at every this-many-th sighting of a file, so that a
/// reader who starts late finds one within this many stacks that use the cookie. A power of
/// two.
pub const REMIND_EVERY: u32 = 1024;
const _: () = assert!(REMIND_EVERY.is_power_of_two());

/// What to do about one sighting of a file in a stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sighting {
    /// Not in the cache: write a `file_cache` event, then [`FirstSight::record`] it.
    New,
    /// In the cache, but due for a reminder: write a `file_cache` event again.
    Reminder,
    /// In the cache: nothing to do.
    Known,
}

/// The first-sight cache.
pub struct FirstSight {
    files: [AtomicU64; SLOTS],
    seen: [AtomicU32; SLOTS],
}

impl Default for FirstSight {
    fn default() -> Self {
        Self::new()
    }
}

impl FirstSight {
    /// An empty cache.
    pub const fn new() -> Self {
        FirstSight {
            files: [const { AtomicU64::new(0) }; SLOTS],
            seen: [const { AtomicU32::new(0) }; SLOTS],
        }
    }

    fn slot(file: u64) -> usize {
        // Fibonacci hashing of the pointer without its always-zero low bits.
        ((file >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOT_BITS)) as usize
    }

    /// Classifies a sighting of `file` (a non-zero `struct file` pointer value).
    pub fn sighting(&self, file: u64) -> Sighting {
        let slot = Self::slot(file);
        if self.files[slot].load(Ordering::Acquire) != file {
            return Sighting::New;
        }
        let n = self.seen[slot]
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        if n & (REMIND_EVERY - 1) == 0 {
            Sighting::Reminder
        } else {
            Sighting::Known
        }
    }

    /// Records that the `file_cache` event of `file` is in the trace. Call it after the
    /// event is written, so that whoever then finds `file` here writes its stack after it.
    pub fn record(&self, file: u64) {
        let slot = Self::slot(file);
        self.seen[slot].store(0, Ordering::Relaxed);
        self.files[slot].store(file, Ordering::Release);
    }

    /// Forgets `file`: it is being freed and its address may be reused by another file.
    pub fn forget(&self, file: u64) {
        let slot = Self::slot(file);
        let _ = self.files[slot].compare_exchange(file, 0, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// Forgets every file, so that every cookie gets a new `file_cache` event.
    pub fn clear(&self) {
        for f in &self.files {
            f.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::boxed::Box;

    const P: u64 = 0xffff_8881_0123_4500;
    const Q: u64 = 0xffff_8881_0765_4300;

    #[test]
    fn first_sight_then_known() {
        let c = Box::new(FirstSight::new());
        assert_eq!(c.sighting(P), Sighting::New);
        c.record(P);
        assert_eq!(c.sighting(P), Sighting::Known);
        assert_eq!(c.sighting(Q), Sighting::New);
    }

    #[test]
    fn a_freed_file_is_new_again_at_the_same_address() {
        let c = Box::new(FirstSight::new());
        c.record(P);
        c.forget(P);
        assert_eq!(
            c.sighting(P),
            Sighting::New,
            "reused address must get a new file_cache"
        );
    }

    #[test]
    fn forgetting_another_file_keeps_the_slot() {
        let c = Box::new(FirstSight::new());
        c.record(P);
        c.forget(Q);
        assert_eq!(c.sighting(P), Sighting::Known);
    }

    #[test]
    fn reminder_every_n_sightings() {
        let c = Box::new(FirstSight::new());
        c.record(P);
        let reminders = (0..3 * REMIND_EVERY)
            .filter(|_| c.sighting(P) == Sighting::Reminder)
            .count();
        assert_eq!(reminders, 3);
    }

    #[test]
    fn bounded_eviction_and_clear() {
        let c = Box::new(FirstSight::new());
        // Two files in one slot evict each other; both stay correct, one is re-emitted.
        let slot = FirstSight::slot(P);
        let other = (1u64..)
            .map(|i| P + (i << 4))
            .find(|&f| FirstSight::slot(f) == slot)
            .unwrap();
        c.record(P);
        c.record(other);
        assert_eq!(c.sighting(P), Sighting::New);
        assert_eq!(c.sighting(other), Sighting::Known);
        c.clear();
        assert_eq!(c.sighting(other), Sighting::New);
    }
}
