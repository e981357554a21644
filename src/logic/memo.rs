// SPDX-License-Identifier: GPL-2.0

//! A memo of file cookies, so that a stack does not hash the files every stack uses.
//!
//! A file cookie is SipHash-2-4 of a `struct file` pointer value under the module's key
//! ([`file_cookie`]): about 200 instructions, three times a stack for a program, its library
//! and libc, a tenth of what the module spent on a 32-frame stack
//! (Documentation/performance.rst). The cookie is a pure function of the pointer while the
//! key lives, so a remembered one is never stale: a file freed and another opened at the
//! same address has the same cookie, and telling the two apart is the first-sight cache's
//! business, not this one's. The memo only has to hand out a cookie together with the
//! pointer it was computed for, never one torn between two writers.
//!
//! A direct-mapped table of [`MEMO_SLOTS`] slots (24 KiB), each a sequence word, a pointer
//! and a cookie: a reader that finds the word odd or changed, or another pointer, hashes;
//! a writer that finds the slot busy does not store. Nothing is locked or allocated, and a
//! lookup in steady state only reads.
#![forbid(unsafe_code)]

use super::frames::file_cookie;
use super::siphash::SipKey;
use core::sync::atomic::{fence, AtomicU64, Ordering};

/// log2 of the number of slots.
pub const MEMO_BITS: u32 = 10;
/// Number of slots.
pub const MEMO_SLOTS: usize = 1 << MEMO_BITS;

struct Slot {
    /// Odd while a writer stores, bumped by 2 for every store.
    seq: AtomicU64,
    file: AtomicU64,
    cookie: AtomicU64,
}

/// The memo. One key for its whole life: the module has one, drawn before any stack.
pub struct CookieMemo {
    slots: [Slot; MEMO_SLOTS],
}

impl Default for CookieMemo {
    fn default() -> Self {
        Self::new()
    }
}

impl CookieMemo {
    /// An empty memo.
    pub const fn new() -> Self {
        CookieMemo {
            slots: [const {
                Slot {
                    seq: AtomicU64::new(0),
                    file: AtomicU64::new(0),
                    cookie: AtomicU64::new(0),
                }
            }; MEMO_SLOTS],
        }
    }

    fn slot(&self, file: u64) -> &Slot {
        // Fibonacci hashing of the pointer without its always-zero low bits.
        let i = (file >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - MEMO_BITS);
        &self.slots[i as usize % MEMO_SLOTS]
    }

    /// [`file_cookie`]`(file, key)`, remembered. `key` must be the same in every call.
    pub fn cookie(&self, file: u64, key: &SipKey) -> u64 {
        let slot = self.slot(file);
        let seq = slot.seq.load(Ordering::Acquire);
        if seq & 1 == 0 {
            let (f, cookie) = (
                slot.file.load(Ordering::Relaxed),
                slot.cookie.load(Ordering::Relaxed),
            );
            fence(Ordering::Acquire);
            if f == file && cookie != 0 && slot.seq.load(Ordering::Relaxed) == seq {
                return cookie;
            }
        }
        let cookie = file_cookie(file, key);
        if seq & 1 == 0
            && slot
                .seq
                .compare_exchange(seq, seq + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // The odd word is visible before the new pointer and cookie are: a reader that
            // loads either of them then sees the word changed.
            fence(Ordering::Release);
            slot.file.store(file, Ordering::Relaxed);
            slot.cookie.store(cookie, Ordering::Relaxed);
            slot.seq.store(seq + 2, Ordering::Release);
        }
        cookie
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::logic::siphash::TEST_KEY;
    use std::boxed::Box;
    use std::sync::Arc;
    use std::vec::Vec;

    const P: u64 = 0xffff_8881_0123_4500;

    /// `n` pointers from `P` on that share `P`'s slot, `P` first.
    fn sharing_slot(m: &CookieMemo, n: usize) -> Vec<u64> {
        let same: Vec<u64> = (0..1 << 20)
            .map(|i| P + (i << 4))
            .filter(|&f| core::ptr::eq(m.slot(f), m.slot(P)))
            .take(n)
            .collect();
        assert_eq!(same.len(), n);
        same
    }

    #[test]
    fn a_remembered_cookie_is_the_hash() {
        let m = Box::new(CookieMemo::new());
        for _ in 0..3 {
            assert_eq!(m.cookie(P, &TEST_KEY), file_cookie(P, &TEST_KEY));
        }
        let s = m.slot(P);
        assert_eq!(
            (
                s.seq.load(Ordering::Relaxed),
                s.file.load(Ordering::Relaxed)
            ),
            (2, P)
        );
    }

    #[test]
    fn colliding_files_each_get_their_own_cookie() {
        let m = Box::new(CookieMemo::new());
        let same = sharing_slot(&m, 5);
        for round in 0..3 {
            for &f in &same {
                assert_eq!(
                    m.cookie(f, &TEST_KEY),
                    file_cookie(f, &TEST_KEY),
                    "round {round}"
                );
            }
        }
    }

    #[test]
    fn racing_threads_never_get_another_files_cookie() {
        let m = Arc::new(CookieMemo::new());
        // Pointers that share one slot, so that the threads keep replacing each other's.
        let files = sharing_slot(&m, 8);
        let want: Vec<u64> = files.iter().map(|&f| file_cookie(f, &TEST_KEY)).collect();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (m, files, want) = (m.clone(), files.clone(), want.clone());
                std::thread::spawn(move || {
                    for n in 0..50_000usize {
                        let i = (n * 7 + t * 13) % files.len();
                        assert_eq!(m.cookie(files[i], &TEST_KEY), want[i]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
