// SPDX-License-Identifier: GPL-2.0

//! The first-sight cache: which file cookies already have a `file_cache` event in the trace.
//!
//! A direct-mapped table of [`SLOTS`] slots (256 KiB), indexed by the file cookie (or a
//! name's cookie). A slot holds the cookie whose `file_cache` event was written, the
//! generation it was written in, when that event was last written, and the build-id it
//! carried (up to [`ID_CACHED`] bytes), so that
//! reminders and repeats do not read the file again. Nothing is allocated, nothing is
//! locked: a slot is a few atomics, and every race between two writers costs at worst one
//! extra `file_cache` event (or one more read of the file), never a missing one or a wrong
//! one. In steady state a sighting only reads: the slots of the files every stack uses
//! (libc's, the executable's) stay shared in every CPU's cache.
//!
//! A cookie names a file's identity ([`FileId`](super::frames::FileId)), which no other file
//! takes over: nothing needs forgetting when a file is closed or deleted. A cookie in its
//! slot is therefore one whose `file_cache` is in the trace, for the file it names.
//!
//! Readers come and go: [`FirstSight::clear`] starts a new *generation*, in one atomic
//! increment (it runs in any context, NMI included): a slot counts only in the generation
//! it was recorded in. A writer captures the
//! generation before it writes a `file_cache` ([`FirstSight::generation`]) and hands it to
//! [`FirstSight::record`], which keeps the entry only if no clear happened since: a
//! `file_cache` that a reader's buffer reset may have cut is never remembered as written.

#![forbid(unsafe_code)]

use super::buildid::BuildId;
use core::sync::atomic::{fence, AtomicU64, Ordering};

/// log2 of the number of slots.
pub const SLOT_BITS: u32 = 12;
/// Number of slots; the cache never holds more files than this.
pub const SLOTS: usize = 1 << SLOT_BITS;
/// A reminder `file_cache` is written when a file is seen this long (in the caller's clock,
/// nanoseconds) after its last one, so that a reader who starts late finds one within about
/// this long of trace for every file still in use.
pub const REMIND_NS: u64 = 1_000_000_000;

/// Build-ids up to this long are kept in the slot (GNU ld's SHA-1 ones are 20 bytes); a
/// longer one is read from the file again for each reminder.
pub const ID_CACHED: usize = 24;
const ID_WORDS: usize = ID_CACHED / 8;

/// What a slot knows of its file's build-id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachedId {
    /// Nothing: read the file.
    Unknown,
    /// The file has no build-id.
    None,
    /// This build-id.
    Id(BuildId),
}

/// A slot's build-id and the file it belongs to, as a sequence lock made of atomics: the
/// sequence word has bit 0 set while a writer stores, the state in bits 1 to 8 (0 unknown,
/// 1 none, 2 + length an id) and a counter above; a reader that sees it change does not
/// retry, it reads the file. The owner is part of what the lock protects, so an id is never
/// handed out for another file that took the slot meanwhile.
struct IdSlot {
    seq: AtomicU64,
    owner: AtomicU64,
    words: [AtomicU64; ID_WORDS],
}

impl IdSlot {
    const fn new() -> Self {
        IdSlot {
            seq: AtomicU64::new(0),
            owner: AtomicU64::new(0),
            words: [const { AtomicU64::new(0) }; ID_WORDS],
        }
    }

    /// Stores `id` as the build-id of `file`, unless another writer is storing one right
    /// now (then the slot keeps what it had, which a reader only hands out for its own
    /// owner, or says [`CachedId::Unknown`], which only costs a read of the file).
    fn store(&self, file: u64, id: &CachedId) {
        let seq = self.seq.load(Ordering::Relaxed);
        if seq & 1 == 1
            || self
                .seq
                .compare_exchange(seq, seq | 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // The odd word is visible before anything stored below: a reader that loads any of
        // it then sees the word changed. (The exchange's release half orders only what came
        // before it.)
        fence(Ordering::Release);
        self.owner.store(file, Ordering::Relaxed);
        let state = match id {
            CachedId::Id(id) if id.as_bytes().len() <= ID_CACHED => {
                let mut words = [0u64; ID_WORDS];
                for (i, &b) in id.as_bytes().iter().enumerate() {
                    if let Some(w) = words.get_mut(i / 8) {
                        *w |= u64::from(b) << (8 * (i % 8));
                    }
                }
                for (word, &w) in self.words.iter().zip(words.iter()) {
                    word.store(w, Ordering::Relaxed);
                }
                2 + id.as_bytes().len() as u64
            }
            CachedId::None => 1,
            CachedId::Unknown | CachedId::Id(_) => 0,
        };
        self.seq
            .store((((seq >> 9) + 1) << 9) | (state << 1), Ordering::Release);
    }

    /// The build-id stored for `file`.
    fn load(&self, file: u64) -> CachedId {
        let seq = self.seq.load(Ordering::Acquire);
        let state = (seq >> 1) & 0xff;
        if seq & 1 == 1 || state == 0 {
            return CachedId::Unknown;
        }
        let owner = self.owner.load(Ordering::Relaxed);
        let mut words = [0u64; ID_WORDS];
        for (w, word) in words.iter_mut().zip(&self.words) {
            *w = word.load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != seq || owner != file {
            return CachedId::Unknown;
        }
        let mut bytes = [0u8; ID_CACHED];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (words.get(i / 8).copied().unwrap_or(0) >> (8 * (i % 8))) as u8;
        }
        match state {
            1 => CachedId::None,
            n => bytes
                .get(..(n - 2) as usize)
                .and_then(BuildId::from_bytes)
                .map_or(CachedId::Unknown, CachedId::Id),
        }
    }
}

/// What to do about one sighting of a file in a stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sighting {
    /// Not in the cache: write a `file_cache` event, then [`FirstSight::record`] it.
    New,
    /// In the cache, and this caller won the reminder that was due: write a `file_cache`
    /// event again.
    Reminder,
    /// In the cache: nothing to do.
    Known,
}

/// The first-sight cache.
pub struct FirstSight {
    files: [AtomicU64; SLOTS],
    /// The generation each slot was recorded in.
    tags: [AtomicU64; SLOTS],
    /// When the slot's `file_cache` was last written.
    written: [AtomicU64; SLOTS],
    /// The build-id that `file_cache` carried.
    ids: [IdSlot; SLOTS],
    generation: AtomicU64,
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
            tags: [const { AtomicU64::new(0) }; SLOTS],
            written: [const { AtomicU64::new(0) }; SLOTS],
            ids: [const { IdSlot::new() }; SLOTS],
            generation: AtomicU64::new(0),
        }
    }

    fn slot(cookie: u64) -> usize {
        // Cookies are already uniform; the multiplication only keeps a made-up test key
        // from mapping neighbours to one slot.
        (cookie.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOT_BITS)) as usize
    }

    /// The current generation, to capture before writing a `file_cache` event.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Classifies a sighting of `file` (a file or name cookie, never 0) at time `now`. Of the callers that find a reminder due, one gets [`Sighting::Reminder`].
    pub fn sighting(&self, file: u64, now: u64) -> Sighting {
        let slot = Self::slot(file);
        if !self.holds(slot, file) {
            return Sighting::New;
        }
        let last = self.written[slot].load(Ordering::Relaxed);
        if now.wrapping_sub(last) < REMIND_NS {
            return Sighting::Known;
        }
        match self.written[slot].compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => Sighting::Reminder,
            Err(_) => Sighting::Known,
        }
    }

    /// Whether a sighting of `file` at `now` would be [`Sighting::Known`], without claiming
    /// a reminder: only reads.
    pub fn is_known(&self, file: u64, now: u64) -> bool {
        let slot = Self::slot(file);
        self.holds(slot, file)
            && now.wrapping_sub(self.written[slot].load(Ordering::Relaxed)) < REMIND_NS
    }

    /// Whether `slot` holds `file`, recorded in the current generation.
    fn holds(&self, slot: usize, file: u64) -> bool {
        self.files[slot].load(Ordering::Acquire) == file
            && self.tags[slot].load(Ordering::Relaxed) == self.generation()
    }

    /// What the cache knows of the build-id of `file`, if `file` is in it.
    pub fn build_id(&self, file: u64) -> CachedId {
        let slot = Self::slot(file);
        if !self.holds(slot, file) {
            return CachedId::Unknown;
        }
        self.ids[slot].load(file)
    }

    /// Records that the `file_cache` event of `file`, carrying `id`, was written at `now`,
    /// by a writer that captured `generation` before writing it. Call it after the event is
    /// written, so that whoever then finds `file` here writes its stack after it. Returns
    /// whether the entry was kept: not when the cache was cleared since `generation` was
    /// captured.
    pub fn record(&self, file: u64, id: &CachedId, now: u64, generation: u64) -> bool {
        let slot = Self::slot(file);
        if self.generation() != generation {
            return false;
        }
        self.ids[slot].store(file, id);
        self.written[slot].store(now, Ordering::Relaxed);
        self.tags[slot].store(generation, Ordering::Relaxed);
        self.files[slot].store(file, Ordering::SeqCst);
        // A clear that began after the check above leaves the entry tagged with the old
        // generation, which no lookup trusts; take the slot back all the same, so that an
        // entry of another writer's, tagged anew, is not paired with this one's cookie.
        if self.generation() != generation {
            let _ = self.files[slot].compare_exchange(file, 0, Ordering::SeqCst, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Forgets every file and starts a new generation, so that every cookie gets a new
    /// `file_cache` event and no `file_cache` written before is recorded. One atomic
    /// increment: callable in any context.
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::boxed::Box;

    const P: u64 = 0x5c1d_0e9b_3a7f_4e21;
    const Q: u64 = 0x2b6e_91c4_07fa_d853;
    const T0: u64 = 5 * REMIND_NS;

    #[test]
    fn first_sight_then_known() {
        let c = Box::new(FirstSight::new());
        assert!(!c.is_known(P, T0));
        assert_eq!(c.sighting(P, T0), Sighting::New);
        assert!(c.record(P, &CachedId::None, T0, c.generation()));
        assert_eq!(c.sighting(P, T0 + 1), Sighting::Known);
        assert!(c.is_known(P, T0 + 1));
        assert_eq!(c.sighting(Q, T0 + 1), Sighting::New);
        // A reminder due is not known, and asking does not claim it.
        assert!(!c.is_known(P, T0 + REMIND_NS));
        assert_eq!(c.sighting(P, T0 + REMIND_NS), Sighting::Reminder);
    }

    #[test]
    fn one_reminder_per_interval() {
        let c = Box::new(FirstSight::new());
        c.record(P, &CachedId::None, T0, c.generation());
        let mut reminders = 0;
        // A sighting every millisecond for three and a half intervals.
        for ms in 0..3500 {
            if c.sighting(P, T0 + ms * 1_000_000) == Sighting::Reminder {
                reminders += 1;
            }
        }
        assert_eq!(reminders, 3);
    }

    #[test]
    fn a_clear_during_the_write_is_not_recorded() {
        let c = Box::new(FirstSight::new());
        // The writer captures the generation, writes file_cache; a reader clears meanwhile.
        let generation = c.generation();
        assert_eq!(c.sighting(P, T0), Sighting::New);
        c.clear();
        assert!(!c.record(P, &CachedId::None, T0, generation));
        assert_eq!(
            c.sighting(P, T0),
            Sighting::New,
            "the cut file_cache must be rewritten"
        );
        // The next writer, in the new generation, is recorded.
        assert!(c.record(P, &CachedId::None, T0, c.generation()));
        assert_eq!(c.sighting(P, T0), Sighting::Known);
    }

    #[test]
    fn build_ids_are_kept_with_their_file() {
        let c = Box::new(FirstSight::new());
        let id = BuildId::from_bytes(&[0xa0; 20]).unwrap();
        assert_eq!(c.build_id(P), CachedId::Unknown);
        c.record(P, &CachedId::Id(id), T0, c.generation());
        assert_eq!(c.build_id(P), CachedId::Id(id));
        c.record(Q, &CachedId::None, T0, c.generation());
        assert_eq!(c.build_id(Q), CachedId::None);
        // Too long to keep: the file is read again.
        let long = BuildId::from_bytes(&[0xb0; 32]).unwrap();
        c.record(P, &CachedId::Id(long), T0, c.generation());
        assert_eq!(c.build_id(P), CachedId::Unknown);
    }

    #[test]
    fn an_id_slot_answers_only_for_its_owner() {
        let a = BuildId::from_bytes(&[0xaa; 20]).unwrap();
        let b = BuildId::from_bytes(&[0xbb; 20]).unwrap();
        let slot = IdSlot::new();
        // Writer A holds the slot; writer B, for another file that took the cache slot,
        // finds it busy and stores nothing; then A finishes.
        slot.seq.store(1, Ordering::Relaxed);
        slot.store(Q, &CachedId::Id(b));
        slot.seq.store(0, Ordering::Relaxed);
        slot.store(P, &CachedId::Id(a));
        assert_eq!(
            slot.load(Q),
            CachedId::Unknown,
            "A's id handed out for B's file"
        );
        assert_eq!(slot.load(P), CachedId::Id(a));
    }

    #[test]
    fn a_build_id_is_never_paired_with_another_file() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use std::thread;
        // Two files in one slot, recorded over and over with their own build-ids, while
        // readers ask for each: a reader gets the file's own id or Unknown, never the
        // other file's.
        let slot = FirstSight::slot(P);
        let other = (1u64..)
            .map(|i| P + (i << 4))
            .find(|&f| FirstSight::slot(f) == slot)
            .unwrap();
        let ids = [
            (P, BuildId::from_bytes(&[0xaa; 20]).unwrap()),
            (other, BuildId::from_bytes(&[0xbb; 20]).unwrap()),
        ];
        let c = Arc::new(FirstSight::new());
        let stop = Arc::new(AtomicBool::new(false));
        let writers: std::vec::Vec<_> = ids
            .iter()
            .map(|&(file, id)| {
                let (c, stop) = (Arc::clone(&c), Arc::clone(&stop));
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        c.record(file, &CachedId::Id(id), T0, c.generation());
                        thread::yield_now();
                    }
                })
            })
            .collect();
        let mut seen = 0;
        // 200000 rounds, and on until a reader saw an id (the writers may not have run yet
        // on a loaded machine), for ten seconds at most.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut rounds = 0;
        while rounds < 200_000 || (seen == 0 && std::time::Instant::now() < deadline) {
            rounds += 1;
            for &(file, id) in &ids {
                match c.build_id(file) {
                    CachedId::Unknown => {}
                    got => {
                        assert_eq!(got, CachedId::Id(id), "file {file:#x}");
                        seen += 1;
                    }
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        assert!(seen > 0, "no reader ever saw an id");
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
        c.record(P, &CachedId::None, T0, c.generation());
        c.record(other, &CachedId::None, T0, c.generation());
        assert_eq!(c.sighting(P, T0), Sighting::New);
        assert_eq!(c.sighting(other, T0), Sighting::Known);
        c.clear();
        assert_eq!(c.sighting(other, T0), Sighting::New);
    }

    #[test]
    fn clear_racing_record_never_leaves_a_stale_entry() {
        use std::sync::Arc;
        use std::thread;
        // Many writers record under the generation they captured; a reader clears. After
        // each round, an entry in the cache must have been recorded in the current
        // generation, never in one a clear ended.
        let c = Arc::new(FirstSight::new());
        for round in 0..200u64 {
            let generation = c.generation();
            let writers: std::vec::Vec<_> = (0..4u64)
                .map(|t| {
                    let c = Arc::clone(&c);
                    thread::spawn(move || {
                        let file = P + ((round * 4 + t) << 4);
                        c.record(file, &CachedId::None, T0, generation);
                        file
                    })
                })
                .collect();
            c.clear();
            for w in writers {
                let file = w.join().unwrap();
                assert_eq!(c.sighting(file, T0), Sighting::New, "round {round}");
            }
        }
    }
}
