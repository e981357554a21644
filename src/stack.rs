// SPDX-License-Identifier: GPL-2.0

//! The deferred callback's work: find the VMA of every frame of `current` and record the
//! stack as `user_unwind_stack` events, preceded by the `file_cache` events its file
//! cookies need.
//!
//! Keeping it cheap: a VMA is looked up only when a frame leaves the previous one
//! ([`Translator`]), with the per-VMA lock (no `mmap_lock` contention with the task's other
//! threads), and `mmap_lock` only when that fails and only if it is free; the fields needed
//! are copied out and the lock dropped at once; a file's cookie is hashed once, then
//! remembered; a file is held by a reference only when its `file_cache` is due; frames go
//! through a 1 KiB [`Record`] taken from a small pool (not zeroed for every stack): the
//! steady state allocates nothing (only a `file_cache` event needs a path buffer).
//!
//! The callback runs inside the deferred unwinder's SRCU read side, which
//! `unwind_deferred_cancel()` (module unload) waits for: it never sleeps on a lock another
//! task can hold indefinitely. `mmap_lock` is only tried: a writer that keeps it (a
//! `mmap()` waiting for a FUSE server, say) costs the frames it hides their translation
//! (raw addresses, counted as `lookups_contended`), never an unkillable wait.
//!
//! The VMA fields are read through the Rust bindings, which the module checks against C's
//! layout at load (`src/layout.rs`).

use crate::ffi;
use crate::files::{self, HeldFiles, NAME_MAX, NEW_FILES_PER_STACK};
use crate::logic::frames::{
    chunks, name_cookie, AddressSpace, Backing, FileId, Record, Translator, Vma,
};
use crate::logic::memo::CookieMemo;
use crate::logic::offset::Mapping;
use crate::stats::{self, Stat};
use crate::Keys;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::mm::virt::VmaRef;
use kernel::mm::MmWithUser;
use kernel::page::PAGE_SHIFT;

/// A user address as a stack holds it: the kernel's `unsigned long`, or the unwinder's
/// `u64`.
pub(crate) trait Ip: Copy {
    /// The address.
    fn addr(self) -> u64;
}

impl Ip for u64 {
    fn addr(self) -> u64 {
        self
    }
}

impl Ip for usize {
    fn addr(self) -> u64 {
        self as u64
    }
}

/// The file cookies of the files stacks use, under the module's one file key.
pub(crate) static COOKIES: CookieMemo = CookieMemo::new();

/// A file mapping the `.eh_frame` unwinder looked up for this stack, with its file's
/// cookie: the translation uses it rather than look the VMA up again, unless the file's
/// `file_cache` is due (then the VMA's lock is needed to hold the file).
#[derive(Clone, Copy, Default)]
pub(crate) struct KnownVma {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) pgoff: u64,
    pub(crate) cookie: u64,
}

/// The address space of `current`, borrowed for one chunk of a stack.
struct TaskSpace<'a, 'k> {
    mm: &'a MmWithUser,
    keys: &'k Keys,
    /// The file mappings the unwinder already looked up.
    known: &'a [KnownVma],
    /// The files whose `file_cache` is due; `None` when no instance records `file_cache`.
    /// Borrowed, not owned: moving 1.5 KiB of held files into and out of the space cost
    /// more than everything else the steady state does with them.
    held: Option<&'a mut HeldFiles<'k>>,
    /// The page of the last address found in no VMA, for the whole stack: a chain of
    /// frames outside every mapping looks each page up once, not once per frame.
    last_miss: &'a mut Option<u64>,
}

impl TaskSpace<'_, '_> {
    /// Copies what the translation needs out of `vma`, and holds its file if its
    /// `file_cache` is due, or notes its name.
    fn copy_vma(&mut self, vma: &VmaRef) -> Vma {
        let ptr = vma.as_ptr();
        let mut id = FileId::default();
        // SAFETY: By the invariants of `VmaRef`, `ptr` is a valid VMA and its caller holds
        // its read lock or the mmap read lock, under which `vm_pgoff`, `vm_file` and the
        // fields `uu_vma_file_id()` reads do not change; `id` is valid for a write.
        let (pgoff, file) = unsafe { ((*ptr).vm_pgoff, ffi::uu_vma_file_id(ptr.cast(), &mut id)) };
        let backing = if !file.is_null() {
            // SAFETY: As above: the VMA is locked, and maps a file whose identity is `id`.
            unsafe { ffi::uu_vma_memo_note(ptr.cast(), &id) };
            let cookie = COOKIES.cookie(&id, &self.keys.file);
            if let Some(held) = self.held.as_mut() {
                // SAFETY: The VMA holds a reference on its file, and its lock is held.
                unsafe { held.hold(file.cast(), cookie) };
            }
            Backing::File(cookie)
        } else {
            self.name_backing(vma)
        };
        Vma {
            map: Mapping {
                start: vma.start() as u64,
                end: vma.end() as u64,
                pgoff: pgoff as u64,
            },
            backing,
        }
    }

    /// What backs a VMA without a file identity: a special mapping's name, anonymous
    /// memory's name if it has one, else plain anonymous memory.
    fn name_backing(&mut self, vma: &VmaRef) -> Backing {
        let mut name = [0u8; NAME_MAX];
        let mut special = false;
        // SAFETY: The VMA is stabilised by its lock; `name` is valid for `NAME_MAX` bytes.
        let len = unsafe {
            ffi::uu_vma_name(
                vma.as_ptr().cast(),
                name.as_mut_ptr(),
                NAME_MAX as i32,
                &mut special,
            )
        };
        let name = match name.get(..usize::try_from(len).unwrap_or(0)) {
            Some(name) if !name.is_empty() => name,
            _ => return Backing::Anonymous(None),
        };
        let cookie = match self.held.as_mut() {
            Some(held) => held.hold_name(name),
            None => Some(name_cookie(name, &self.keys.name)),
        };
        match cookie {
            Some(cookie) if special => Backing::Special(cookie),
            _ => Backing::Anonymous(cookie),
        }
    }
}

impl TaskSpace<'_, '_> {
    /// A file mapping already known (from the unwinder or the memo), unless its file's
    /// `file_cache` is due: then the VMA's lock is needed to hold the file.
    fn known_file(&self, start: u64, end: u64, pgoff: u64, cookie: u64) -> Option<Vma> {
        self.held
            .as_ref()
            .is_none_or(|held| held.knows(cookie))
            .then_some(Vma {
                map: Mapping { start, end, pgoff },
                backing: Backing::File(cookie),
            })
    }
}

impl AddressSpace for TaskSpace<'_, '_> {
    fn lookup(&mut self, addr: u64) -> Option<Vma> {
        if let Some(k) = self.known.iter().find(|k| k.start <= addr && addr < k.end) {
            if let Some(vma) = self.known_file(k.start, k.end, k.pgoff, k.cookie) {
                return Some(vma);
            }
        }
        let page = addr >> PAGE_SHIFT;
        if *self.last_miss == Some(page) {
            return None;
        }
        // The last stacks' file mappings, as long as the address space did not change.
        let mut r = ffi::UuRegion::default();
        // SAFETY: `r` is valid for a write; task context of `current`, whose mm is
        // `self.mm`, the one the memo checks its entries against.
        if unsafe { ffi::uu_vma_memo_find(addr, &mut r) } == 0 {
            let cookie = COOKIES.cookie(&r.id, &self.keys.file);
            if let Some(vma) = self.known_file(r.start, r.end, r.pgoff, cookie) {
                return Some(vma);
            }
        }
        let addr = usize::try_from(addr).ok()?;
        if let Some(vma) = self.mm.lock_vma_under_rcu(addr) {
            return Some(self.copy_vma(&vma));
        }
        let Some(mmap) = self.mm.mmap_read_trylock() else {
            stats::add(Stat::LookupsContended, 1);
            return None;
        };
        let vma = mmap.vma_lookup(addr).map(|vma| self.copy_vma(vma));
        if vma.is_none() {
            *self.last_miss = Some(page);
        }
        vma
    }
}

/// A record kept for the callbacks, so that a stack does not zero a 1 KiB [`Record`] on its
/// own stack every time (about 200 instructions): a callback takes a free one, clears it
/// (a few words) and gives it back when done.
struct RecordSlot {
    /// Whether a callback holds the slot.
    busy: AtomicBool,
    rec: UnsafeCell<Record>,
}

// SAFETY: `rec` is only accessed through a [`PooledRecord`], which exists only while its
// holder has `busy` (set with acquire ordering, cleared with release ordering when the
// holder is done).
unsafe impl Sync for RecordSlot {}

/// Records in the pool: one per CPU on a small machine; a callback that finds the slots
/// of its CPU and the others busy (more CPUs, or callbacks asleep in a `file_cache`'s file
/// read) builds one on its stack.
const POOLED_RECORDS: usize = 8;

static RECORDS: [RecordSlot; POOLED_RECORDS] = [const {
    RecordSlot {
        busy: AtomicBool::new(false),
        rec: UnsafeCell::new(Record::new()),
    }
}; POOLED_RECORDS];

/// A record taken from the pool, returned when dropped.
///
/// # Invariants
///
/// `slot.busy` is set, by this holder, for as long as it lives.
pub(crate) struct PooledRecord {
    slot: &'static RecordSlot,
}

impl PooledRecord {
    /// A free record of the pool, starting with the slot of the CPU that made the unwind
    /// `cookie` (its low half is the CPU's number plus one, its high half a count), so
    /// that each CPU's callbacks keep using the same memory.
    pub(crate) fn take(cookie: u64) -> Option<Self> {
        let first = (cookie as u32).wrapping_sub(1) as usize;
        (0..POOLED_RECORDS).find_map(|i| {
            let slot = &RECORDS[(first + i) % POOLED_RECORDS];
            let free = !slot.busy.load(Ordering::Relaxed)
                && slot
                    .busy
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok();
            // INVARIANT: `busy` was just set by this holder. (Built only then: a
            // `PooledRecord` dropped unheld would free another holder's slot.)
            free.then(|| PooledRecord { slot })
        })
    }

    /// Whether this holder's slot is still marked busy (it must be, while it lives).
    #[cfg(CONFIG_KUNIT)] // Only the KUnit suite calls it.
    pub(crate) fn is_busy(&self) -> bool {
        self.slot.busy.load(Ordering::Relaxed)
    }

    /// Whether `other` holds the same slot.
    #[cfg(CONFIG_KUNIT)] // Only the KUnit suite calls it.
    pub(crate) fn same_slot(&self, other: &Self) -> bool {
        core::ptr::eq(self.slot, other.slot)
    }

    fn get(&mut self) -> &mut Record {
        // SAFETY: By the type invariant, this holder has `busy`: nobody else accesses the
        // record until it is dropped, and `&mut self` makes the borrow unique here.
        unsafe { &mut *self.slot.rec.get() }
    }
}

impl Drop for PooledRecord {
    fn drop(&mut self) {
        self.slot.busy.store(false, Ordering::Release);
    }
}

/// Writes the record of a stack without frames (the unwinder found none, or the task has no
/// user address space any more): the cookie still gets its stack, so that it cannot be
/// mistaken for a lost event.
fn record_empty(cookie: u64) {
    emit(cookie, 0, 0, &mut Record::new());
    stats::add(Stat::EmptyStacks, 1);
}

/// Records `ips`, the user stack of `current` for the unwind `cookie`, as one
/// `user_unwind_stack` event per [`CHUNK_FRAMES`](crate::logic::frames::CHUNK_FRAMES)
/// frames, or one empty record.
///
/// Context: task context of the unwound task, may sleep.
pub(crate) fn record<T: Ip>(ips: &[T], cookie: u64, keys: &Keys) {
    record_known(ips, cookie, keys, &[]);
}

/// [`record`], with the file mappings the `.eh_frame` unwinder already looked up.
///
/// Context: task context of the unwound task, may sleep.
pub(crate) fn record_known<T: Ip>(ips: &[T], cookie: u64, keys: &Keys, known: &[KnownVma]) {
    stats::add(Stat::Stacks, 1);
    let current = kernel::current!();
    let Some(mm) = current.mm() else {
        return record_empty(cookie);
    };
    if ips.is_empty() {
        return record_empty(cookie);
    }
    let ips = &ips[..ips.len().min(usize::from(u16::MAX))];
    let total = ips.len() as u16;
    let mut pooled = PooledRecord::take(cookie);
    let mut own = None;
    let rec = match pooled.as_mut() {
        Some(pooled) => pooled.get(),
        None => own.insert(Record::new()),
    };
    // Every `file_cache` the stack writes, first sightings, reminders and repeats alike.
    let mut budget = NEW_FILES_PER_STACK;
    let mut last_miss = None;
    let want_files = files::wanted();
    stats::add(Stat::Frames, ips.len() as u64);
    let mut translator = Translator::new(PAGE_SHIFT as u32);

    for (start, len) in chunks(ips.len()) {
        let frames = || ips[start..start + len].iter().map(|&ip| ip.addr());
        // Fresh held files per chunk, and the translator's VMAs of files whose
        // `file_cache` is not known to be in the trace forgotten: every such file of the
        // chunk is looked up again, so each chunk holds the files it reports. The files
        // are released at the end of the block, in place (a `drop()` would move them
        // first).
        let report = {
            let mut held = HeldFiles::new(keys, budget);
            if want_files {
                translator.retain(|cookie| held.knows(cookie));
            }
            let mut space = TaskSpace {
                mm,
                keys,
                known,
                held: want_files.then_some(&mut held),
                last_miss: &mut last_miss,
            };
            rec.clear();
            translator.translate(&mut space, frames(), rec);
            want_files.then(|| held.report(&mut budget))
        };
        emit(cookie, start as u16, total, rec);
        // A reader reset the buffer between the chunk's `file_cache` events (or the
        // sightings that found them written) and its stack: the cache starts anew, so
        // looking the chunk's files up again holds every one the new generation lacks, and
        // their `file_cache` events follow the stack.
        if report.is_some_and(|r| r.needs_repeat()) {
            let mut held = HeldFiles::new(keys, budget);
            let mut space = TaskSpace {
                mm,
                keys,
                known,
                held: Some(&mut held),
                last_miss: &mut last_miss,
            };
            rec.clear();
            Translator::new(PAGE_SHIFT as u32).translate(&mut space, frames(), rec);
            held.report(&mut budget);
        }
    }
}

/// Writes `rec` as one `user_unwind_stack` event.
fn emit(cookie: u64, start: u16, total: u16, rec: &mut Record) {
    let p = rec.pack();
    let hi = p.hi.map_or(core::ptr::null(), |hi| hi.as_ptr());
    // SAFETY: `files` holds `files.len()` cookies, `lo` (and `hi` when not null)
    // `lo.len()` words each; the tracepoint only reads them, within those lengths.
    unsafe {
        ffi::uu_emit_stack(
            cookie,
            start,
            total,
            p.files.as_ptr(),
            p.files.len() as u32,
            p.lo.as_ptr(),
            hi,
            p.idx_bits,
            p.lo.len() as u32,
        )
    };
}
