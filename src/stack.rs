// SPDX-License-Identifier: GPL-2.0

//! The deferred callback's work: find the VMA of every frame of `current` and record the
//! stack as `user_unwind_stack` events, preceded by the `file_cache` events its file
//! cookies need.
//!
//! Keeping it cheap: a VMA is looked up only when a frame leaves the previous one
//! ([`Translator`]), with the per-VMA lock first (no `mmap_lock` contention with the task's
//! other threads) and `mmap_lock` only when that fails; the three fields needed are copied
//! out and the lock dropped at once; the file cookie is hashed once per VMA change; frames
//! go through a 1 KiB on-stack chunk, and the files a chunk holds in 512 bytes more: the
//! steady state allocates nothing (only a `file_cache` event needs a path buffer).
//!
//! The VMA fields are read through the Rust bindings; the KUnit suite checks their offsets
//! against C's, because this kernel's bindings do get `task_struct` wrong (see
//! `uu_current_mm()`).

use crate::ffi;
use crate::files::{HeldFiles, NAME_MAX};
use crate::logic::frames::{chunks, AddressSpace, Backing, Translator, Vma, CHUNK_FRAMES};
use crate::logic::offset::Mapping;
use crate::logic::siphash::SipKey;
use kernel::ffi::c_ulong;
use kernel::mm::virt::VmaRef;
use kernel::mm::MmWithUser;
use kernel::page::PAGE_SHIFT;

/// The address space of `current`, borrowed for one chunk of a stack.
struct TaskSpace<'a> {
    mm: &'a MmWithUser,
    held: HeldFiles<'a>,
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
        // SAFETY: The VMA is stabilised by its lock; `name` is valid for `NAME_MAX` bytes.
        let len = unsafe { ffi::uu_vma_name(ptr.cast(), name.as_mut_ptr(), NAME_MAX as i32) };
        match name.get(..usize::try_from(len).unwrap_or(0)) {
            Some(name) if !name.is_empty() => held
                .hold_name(name)
                .map_or(Backing::Anonymous, Backing::Named),
            _ => Backing::Anonymous,
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
        let addr = usize::try_from(addr).ok()?;
        if let Some(vma) = self.mm.lock_vma_under_rcu(addr) {
            return Some(copy_vma(&vma, &mut self.held));
        }
        let mmap = self.mm.mmap_read_lock();
        mmap.vma_lookup(addr)
            .map(|vma| copy_vma(vma, &mut self.held))
    }
}

/// Records `ips`, the user stack of `current` for the unwind `cookie`, as one
/// `user_unwind_stack` event per [`CHUNK_FRAMES`] frames.
///
/// Context: task context of the unwound task, may sleep.
pub(crate) fn record(ips: &[c_ulong], cookie: u64, key: &SipKey) {
    // Not `kernel::current!().mm()`: see `uu_current_mm()` in src/glue.c.
    // SAFETY: Reading `current->mm` in task context is always allowed.
    let mm = unsafe { ffi::uu_current_mm() };
    if mm.is_null() {
        return;
    }
    // SAFETY: `current->mm` of a task in its own task context is valid, with `mm_users`
    // held by the task, for as long as this callback runs (the task cannot exit under it).
    let mm = unsafe { MmWithUser::from_raw(mm.cast()) };
    let ips = &ips[..ips.len().min(usize::from(u16::MAX))];
    let total = ips.len() as u16;
    let mut offs = [0u64; CHUNK_FRAMES];
    let mut files = [0u64; CHUNK_FRAMES];

    for (start, len) in chunks(ips.len()) {
        // A fresh translator per chunk looks every file of the chunk up again, so each
        // chunk holds the files it reports.
        let mut space = TaskSpace {
            mm,
            held: HeldFiles::new(key),
        };
        let mut translator = Translator::new(key, PAGE_SHIFT as u32);
        let frames = ips[start..start + len].iter().map(|&ip| ip as u64);
        let n = translator.translate(&mut space, frames, &mut offs, &mut files);
        let durable = space.held.report();
        // SAFETY: `offs` and `files` hold `n` initialized entries; the tracepoint copies them.
        unsafe {
            ffi::uu_emit_stack(
                cookie,
                start as u16,
                total,
                offs.as_ptr(),
                files.as_ptr(),
                n as u32,
            )
        };
        if !durable {
            space.held.repeat();
        }
    }
}
