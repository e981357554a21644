// SPDX-License-Identifier: GPL-2.0

//! A memo of file cookies, so that a stack does not hash the files every stack uses.
//!
//! A file cookie is SipHash-2-4 of a file's 28-byte identity under the module's key
//! ([`file_cookie`]): about 300 instructions, three times a stack for a program, its library
//! and libc. The cookie is a pure function of the identity while the key lives, so a
//! remembered one is never stale: the memo only has to hand out a cookie together with the
//! identity it was computed for, never one torn between two writers.
//!
//! A direct-mapped table of [`MEMO_SLOTS`] slots (48 KiB), each a sequence word, the
//! identity's four words and a cookie: a reader that finds the word odd or changed, or
//! another identity, hashes; a writer that finds the slot busy does not store. Nothing is
//! locked or allocated, and a lookup in steady state only reads.
#![forbid(unsafe_code)]

use super::frames::file_cookie;
use super::frames::FileId;
use super::siphash::SipKey;
use core::sync::atomic::{fence, AtomicU64, Ordering};

/// log2 of the number of slots.
pub const MEMO_BITS: u32 = 10;
/// Number of slots.
pub const MEMO_SLOTS: usize = 1 << MEMO_BITS;

struct Slot {
    /// Odd while a writer stores, bumped by 2 for every store.
    seq: AtomicU64,
    id: [AtomicU64; 4],
    cookie: AtomicU64,
}

/// An identity as the four words a slot keeps.
fn words(id: &FileId) -> [u64; 4] {
    [
        id.ino,
        id.ctime_sec as u64,
        u64::from(id.dev) << 32 | u64::from(id.generation),
        u64::from(id.ctime_nsec),
    ]
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
                    id: [const { AtomicU64::new(0) }; 4],
                    cookie: AtomicU64::new(0),
                }
            }; MEMO_SLOTS],
        }
    }

    fn slot(&self, w: &[u64; 4]) -> &Slot {
        // Fibonacci hashing of the inode number and device: files of one filesystem have
        // neighbouring numbers, which this spreads.
        let i = (w[0] ^ w[2]).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - MEMO_BITS);
        &self.slots[i as usize % MEMO_SLOTS]
    }

    /// [`file_cookie`]`(id, key)`, remembered. `key` must be the same in every call.
    pub fn cookie(&self, id: &FileId, key: &SipKey) -> u64 {
        let w = words(id);
        let slot = self.slot(&w);
        let seq = slot.seq.load(Ordering::Acquire);
        if seq & 1 == 0 {
            // The words' differences folded into one, in registers: not `==` on the arrays
            // (a call to `bcmp`, on every mapping's look-up), nor a loop (the identity
            // spilled to the stack).
            let [s0, s1, s2, s3] = &slot.id;
            let [w0, w1, w2, w3] = w;
            let differ = (s0.load(Ordering::Relaxed) ^ w0)
                | (s1.load(Ordering::Relaxed) ^ w1)
                | (s2.load(Ordering::Relaxed) ^ w2)
                | (s3.load(Ordering::Relaxed) ^ w3);
            let cookie = slot.cookie.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if differ == 0 && cookie != 0 && slot.seq.load(Ordering::Relaxed) == seq {
                return cookie;
            }
        }
        let cookie = file_cookie(id, key);
        if seq & 1 == 0
            && slot
                .seq
                .compare_exchange(seq, seq + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // The odd word is visible before the new identity and cookie are: a reader that
            // loads any of them then sees the word changed.
            fence(Ordering::Release);
            for (word, &v) in slot.id.iter().zip(w.iter()) {
                word.store(v, Ordering::Relaxed);
            }
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

    fn id(ino: u64) -> FileId {
        FileId {
            ino,
            ctime_sec: 1_764_633_600,
            dev: 0x0803,
            generation: 7,
            ctime_nsec: 5,
            pad: 0,
        }
    }

    /// `n` identities that share the slot of `id(1)`, that one first.
    fn sharing_slot(m: &CookieMemo, n: usize) -> Vec<FileId> {
        let first = words(&id(1));
        let same: Vec<FileId> = (1..1 << 20)
            .map(id)
            .filter(|f| core::ptr::eq(m.slot(&words(f)), m.slot(&first)))
            .take(n)
            .collect();
        assert_eq!(same.len(), n);
        same
    }

    #[test]
    fn a_remembered_cookie_is_the_hash() {
        let m = Box::new(CookieMemo::new());
        for _ in 0..3 {
            assert_eq!(m.cookie(&id(1), &TEST_KEY), file_cookie(&id(1), &TEST_KEY));
        }
        let s = m.slot(&words(&id(1)));
        assert_eq!(
            (
                s.seq.load(Ordering::Relaxed),
                s.id[0].load(Ordering::Relaxed)
            ),
            (2, 1)
        );
    }

    #[test]
    fn an_identity_that_differs_in_any_word_gets_its_own_cookie() {
        let m = Box::new(CookieMemo::new());
        let a = id(1);
        m.cookie(&a, &TEST_KEY);
        // Same inode and device (so the same slot), another change time or generation.
        for b in [
            FileId { ctime_nsec: 6, ..a },
            FileId { ctime_sec: 1, ..a },
            FileId { generation: 8, ..a },
        ] {
            assert_eq!(m.cookie(&b, &TEST_KEY), file_cookie(&b, &TEST_KEY));
            assert_ne!(m.cookie(&b, &TEST_KEY), m.cookie(&a, &TEST_KEY));
        }
    }

    #[test]
    fn colliding_files_each_get_their_own_cookie() {
        let m = Box::new(CookieMemo::new());
        let same = sharing_slot(&m, 5);
        for round in 0..3 {
            for f in &same {
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
        // Identities that share one slot, so that the threads keep replacing each other's.
        let files = sharing_slot(&m, 8);
        let want: Vec<u64> = files.iter().map(|f| file_cookie(f, &TEST_KEY)).collect();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (m, files, want) = (m.clone(), files.clone(), want.clone());
                std::thread::spawn(move || {
                    for n in 0..50_000usize {
                        let i = (n * 7 + t * 13) % files.len();
                        assert_eq!(m.cookie(&files[i], &TEST_KEY), want[i]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
