// SPDX-License-Identifier: GPL-2.0

//! The deferred callback's work: find the VMA of every frame of `current` and record the
//! stack as `user_unwind_stack` events, preceded by the `file_cache` events its file
//! cookies need.
//!
//! Keeping it cheap: a VMA is looked up only when a frame leaves the previous one
//! ([`Translator`]), with the per-VMA lock first (no `mmap_lock` contention with the task's
//! other threads) and `mmap_lock` only when that fails; the three fields needed are copied
//! out and the lock dropped at once; a file's cookie is hashed once, then remembered; frames
//! go through a 1.1 KiB on-stack [`Record`], and the files a chunk holds in 512 bytes more:
//! the steady state allocates nothing (only a `file_cache` event needs a path buffer).
//!
//! The VMA fields are read through the Rust bindings, which the module checks against C's
//! layout at load (`src/layout.rs`).

use crate::ffi;
use crate::files::{HeldFiles, NAME_MAX, NEW_FILES_PER_STACK};
use crate::logic::frames::{chunks, AddressSpace, Backing, Record, Translator, Vma};
use crate::logic::memo::CookieMemo;
use crate::logic::offset::Mapping;
use crate::logic::siphash::SipKey;
use crate::stats::{self, Stat};
use crate::Keys;
use kernel::ffi::c_ulong;
use kernel::mm::virt::VmaRef;
use kernel::mm::MmWithUser;
use kernel::page::PAGE_SHIFT;

/// The file cookies of the files stacks use, under the module's one file key: the stacks'
/// frames and their `file_cache` events take them from here.
pub(crate) static COOKIES: CookieMemo = CookieMemo::new();

/// The address space of `current`, borrowed for one chunk of a stack.
struct TaskSpace<'a> {
    mm: &'a MmWithUser,
    held: HeldFiles<'a>,
    /// The page of the last address found in no VMA, for the whole stack: a chain of
    /// frames outside every mapping takes `mmap_lock` once per page, not once per frame.
    last_miss: &'a mut Option<u64>,
}

/// Copies what the translation needs out of `vma`, and holds its file or name.
fn copy_vma(vma: &VmaRef, held: &mut HeldFiles<'_>) -> Vma {
    let ptr = vma.as_ptr();
    // SAFETY: By the invariants of `VmaRef`, `ptr` is a valid VMA and its caller holds its
    // read lock or the mmap read lock, under which `vm_pgoff` and `vm_file` do not change.
    let (pgoff, file) = unsafe { ((*ptr).vm_pgoff, (*ptr).vm_file) };
    let backing = if !file.is_null() {
        // SAFETY: The VMA holds a reference on its file, and its lock is held.
        unsafe { held.hold(file) };
        Backing::File(file as usize as u64)
    } else {
        let mut name = [0u8; NAME_MAX];
        let mut special = false;
        // SAFETY: The VMA is stabilised by its lock; `name` is valid for `NAME_MAX` bytes.
        let len = unsafe {
            ffi::uu_vma_name(ptr.cast(), name.as_mut_ptr(), NAME_MAX as i32, &mut special)
        };
        let cookie = match name.get(..usize::try_from(len).unwrap_or(0)) {
            Some(name) if !name.is_empty() => held.hold_name(name),
            _ => None,
        };
        match cookie {
            Some(cookie) if special => Backing::Special(cookie),
            _ => Backing::Anonymous(cookie),
        }
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

impl AddressSpace for TaskSpace<'_> {
    fn lookup(&mut self, addr: u64) -> Option<Vma> {
        let page = addr >> PAGE_SHIFT;
        let addr = usize::try_from(addr).ok()?;
        if let Some(vma) = self.mm.lock_vma_under_rcu(addr) {
            return Some(copy_vma(&vma, &mut self.held));
        }
        if *self.last_miss == Some(page) {
            return None;
        }
        let mmap = self.mm.mmap_read_lock();
        let vma = mmap
            .vma_lookup(addr)
            .map(|vma| copy_vma(vma, &mut self.held));
        if vma.is_none() {
            *self.last_miss = Some(page);
        }
        vma
    }

    fn file_cookie(&self, file: u64, key: &SipKey) -> u64 {
        COOKIES.cookie(file, key)
    }
}

/// Writes the record of a stack without frames (the unwinder found none, or the task has no
/// user address space any more): the cookie still gets its stack, so that it cannot be
/// mistaken for a lost event.
fn record_empty(cookie: u64) {
    emit(cookie, 0, 0, &Record::new());
    stats::add(Stat::EmptyStacks, 1);
}

/// Records `ips`, the user stack of `current` for the unwind `cookie`, as one
/// `user_unwind_stack` event per [`CHUNK_FRAMES`](crate::logic::frames::CHUNK_FRAMES)
/// frames, or one empty record.
///
/// Context: task context of the unwound task, may sleep.
pub(crate) fn record(ips: &[c_ulong], cookie: u64, keys: &Keys) {
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
    let mut rec = Record::new();
    let mut budget = NEW_FILES_PER_STACK;
    let mut last_miss = None;
    stats::add(Stat::Frames, ips.len() as u64);

    for (start, len) in chunks(ips.len()) {
        // A fresh translator per chunk looks every file of the chunk up again, so each
        // chunk holds the files it reports.
        let mut space = TaskSpace {
            mm,
            held: HeldFiles::new(keys),
            last_miss: &mut last_miss,
        };
        let mut translator = Translator::new(&keys.file, PAGE_SHIFT as u32);
        rec.clear();
        let frames = ips[start..start + len].iter().map(|&ip| ip as u64);
        translator.translate(&mut space, frames, &mut rec);
        let report = space.held.report(&mut budget);
        emit(cookie, start as u16, total, &rec);
        if report.needs_repeat() {
            space.held.repeat();
        }
    }
}

/// Writes `rec` as one `user_unwind_stack` event.
fn emit(cookie: u64, start: u16, total: u16, rec: &Record) {
    let files = rec.files();
    let hi = rec.hi().map_or(core::ptr::null(), |hi| hi.as_ptr());
    // SAFETY: `files` holds `files.len()` cookies, `lo`, `idx` (and `hi` when not null)
    // `rec.len()` entries each; the tracepoint only reads them, within those lengths.
    unsafe {
        ffi::uu_emit_stack(
            cookie,
            start,
            total,
            files.as_ptr(),
            files.len() as u32,
            rec.lo().as_ptr(),
            hi,
            rec.idx().as_ptr(),
            rec.len() as u32,
        )
    };
}
