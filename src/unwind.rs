// SPDX-License-Identifier: GPL-2.0

//! The `.eh_frame` unwinder in the deferred callback: the glue between the pure unwinder
//! ([`crate::logic::unwinder`]) and the task (`src/unwind.c`): user memory read without
//! faulting (`copy_from_user_nofault()`; a page not present is faulted in by the fetch
//! thread, `src/fetch.c`, for a later stack), the objects' unwind tables read from their
//! files' page cache (never from the process's copy, which it may have written) or the
//! vDSO's image, mappings looked up with the per-VMA lock, the caches
//! shared by every task, and the buffers the unwind works in.
//!
//! Memory: the row and table caches are static, about 110 KiB; the files' tables
//! (`src/tables.c`) are allocated here, in the callback, and bounded by `table_kib`; the
//! work buffers (the CIE and FDE scratch, the last CIE read, an FDE's rows and its
//! remembered rows, the 511 frames and two 256-byte read blocks, 15.6 KiB each) are a
//! static pool of [`POOL_SLOTS`] (125 KiB): a callback takes a free one without
//! allocating, and when all are in use (as many tasks in the callback at once) it
//! records the kernel's frame-pointer stack instead.

use crate::ffi;
use crate::logic::cfi::step::Regs;
use crate::logic::cfi::{CfiError, Memory};
use crate::logic::frames::vdso_key;
use crate::logic::ftable::{self, Add};
use crate::logic::unwinder::{unwind, Caches, End, Region, Task, Workspace, MAX_FRAMES};
use crate::stack::{self, Ip, KnownVma, COOKIES};
use crate::stats::{self, Stat};
use crate::Keys;
use core::cell::UnsafeCell;
use core::ffi::{c_ulong, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::bindings;
use kernel::page::PAGE_SHIFT;

/// The caches of every unwind: tables per file, rows per file offset.
static CACHES: Caches = Caches::new();

/// Work buffers in the pool.
const POOL_SLOTS: usize = 8;

/// What one unwind works in.
struct Work {
    space: Workspace,
    ips: [u64; MAX_FRAMES],
    block: [u8; BLOCK],
    object_block: [u8; OBJECT_BLOCK],
    /// The file whose table the memory limit last refused to grow (0: none), and when its
    /// rows may be offered again ([`Current::table_write`]).
    refused: (u64, c_ulong),
}

/// A pool slot.
///
/// # Invariants
///
/// `work` is accessed only by the holder of `busy`, through a [`Taken`].
struct PoolSlot {
    busy: AtomicBool,
    work: UnsafeCell<Work>,
}

// SAFETY: By the type invariant, `work` is only accessed by the one holder of `busy`, which
// an atomic swap hands out.
unsafe impl Sync for PoolSlot {}

impl PoolSlot {
    const fn new() -> Self {
        PoolSlot {
            busy: AtomicBool::new(false),
            work: UnsafeCell::new(Work {
                space: Workspace::new(),
                ips: [0; MAX_FRAMES],
                block: [0; BLOCK],
                object_block: [0; OBJECT_BLOCK],
                refused: (0, 0),
            }),
        }
    }
}

static POOL: [PoolSlot; POOL_SLOTS] = [const { PoolSlot::new() }; POOL_SLOTS];

/// A pool slot taken by this callback, released on drop.
///
/// # Invariants
///
/// This value set `slot.busy`, and is the only one that may access `slot.work`.
struct Taken(&'static PoolSlot);

impl Taken {
    fn take() -> Option<Taken> {
        POOL.iter()
            .find(|s| !s.busy.swap(true, Ordering::Acquire))
            // INVARIANT: The swap set `busy`, which was clear.
            .map(Taken)
    }

    fn work(&mut self) -> &mut Work {
        // SAFETY: By the type invariant this value holds the slot; `&mut self` makes the
        // reference unique for its lifetime.
        unsafe { &mut *self.0.work.get() }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// The errors the C side returns, as it returns them: constants, where `to_errno()` of the
/// kernel crate's codes is a call on every mapping's look-up.
const RET_EBUSY: i32 = -(bindings::EBUSY as i32);
const RET_EFAULT: i32 = -(bindings::EFAULT as i32);
const RET_EINVAL: i32 = -(bindings::EINVAL as i32);

/// Bytes of user memory [`Current`] reads at once: an aligned block, inside one page. A
/// stack's frames lie next to each other, upwards from its innermost one: 512 bytes take
/// fewer copies than 256 at every depth (insn-profile: 80 instructions fewer an E stack at
/// depth 8, 460 at 128).
const BLOCK: usize = 512;
/// Bytes of the open object's file [`Current`] copies at once: an aligned block. An FDE is
/// read once, its neighbours mostly not: 512 bytes copied more than they served.
const OBJECT_BLOCK: usize = 256;

/// `current`'s memory and mappings, as the unwinder reads them.
struct Current<'k> {
    keys: &'k Keys,
    /// The last block read, at `block_addr` (`u64::MAX`: none): the frames of a stack lie
    /// next to each other, so one user copy serves several of them.
    block: &'k mut [u8; BLOCK],
    block_addr: u64,
    /// Mappings found to be ordinary memory in this stack (`start..end`; empty: none):
    /// reads elsewhere ask first.
    ordinary: [(u64, u64); ORDINARY],
    next_ordinary: usize,
    /// The object whose table is read, held between `object_open` and `object_close`.
    object: Option<ffi::UuObject>,
    /// The last block of its file read, at file offset `object_block_at` (`u64::MAX`:
    /// none): a table's reads lie close together, and one call into C serves several.
    object_block: &'k mut [u8; OBJECT_BLOCK],
    object_block_at: u64,
    /// What the last check of the open object's content said, while it still says it of
    /// everything read from it: `Some(true)` until the next read from the object (a check
    /// proves what was read before it, so a lookup served by the block already read needs
    /// no other), `Some(false)` until it is closed (a writer seen, or a change time moved,
    /// stays so), `None` before a check.
    proven: Option<bool>,
    /// The file mappings looked up, for the translation.
    known: [KnownVma; KNOWN],
    nr_known: usize,
    /// The files' tables the stack holds, and the next one to let go of for another.
    held: [Held; HELD],
    next_held: usize,
    /// A table being made, not yet published.
    pending: Held,
    /// The file whose table the memory limit refused to grow (0: none), and when: its
    /// other FDEs' rows are not offered to it again, in this stack or the next ones of
    /// this work buffer, before the limit's next scan for idle tables (at most every
    /// 100 ms), which is when a larger table may fit again.
    refused: &'k mut (u64, c_ulong),
}

/// File mappings a stack hands to the translation, at most.
const KNOWN: usize = 8;
/// Files' tables a stack holds at once, at most.
const HELD: usize = 4;

/// A file's table held (`src/tables.c`): its words stay while it is.
///
/// # Invariants
///
/// `t` is null, or a table held by this value (from `uu_table_get()` or
/// `uu_table_alloc()`) whose `n` words are at `words`.
struct Held {
    key: u64,
    t: *mut c_void,
    words: *mut u64,
    n: usize,
}

impl Held {
    const NONE: Held = Held {
        key: 0,
        t: null_mut(),
        words: null_mut(),
        n: 0,
    };

    /// The table of `key`, if the file has one.
    fn get(key: u64) -> Option<Held> {
        let (mut words, mut n) = (null_mut(), 0);
        // SAFETY: `words` and `n` are valid for writes.
        let t = unsafe { ffi::uu_table_get(key, &mut words, &mut n) };
        // INVARIANT: `uu_table_get()` handed us this reference to `t`, of `n` words.
        (!t.is_null()).then(|| Held { key, t, words, n })
    }

    /// A new table of `n` zeroed words, unless the memory limit refuses it.
    fn alloc(n: usize) -> Option<Held> {
        let mut words = null_mut();
        // SAFETY: `words` is valid for a write.
        let t = unsafe { ffi::uu_table_alloc(n, &mut words) };
        // INVARIANT: `uu_table_alloc()` handed us this reference to `t`, of `n` words.
        (!t.is_null()).then(|| Held {
            key: 0,
            t,
            words,
            n,
        })
    }

    fn words(&self) -> Option<&[AtomicU64]> {
        if self.t.is_null() {
            return None;
        }
        // SAFETY: By the type invariant the table is held, so its `n` words stay
        // allocated; they are only accessed atomically (`u64` and `AtomicU64` have the same
        // layout), by the writers of `src/logic/ftable.rs` and its readers.
        Some(unsafe { core::slice::from_raw_parts(self.words.cast::<AtomicU64>(), self.n) })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.t.is_null() {
            // SAFETY: By the type invariant this value holds `t`, and lets go of it once.
            unsafe { ffi::uu_table_put(self.t) };
        }
    }
}
/// Ordinary mappings a stack remembers: its stack, and one more.
const ORDINARY: usize = 2;

/// Reads `buf.len()` bytes of `current`'s memory at `addr`.
fn read_user(addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
    // SAFETY: `buf` is valid for `buf.len()` bytes of writes; `addr` is only read from user
    // space, by `copy_from_user()` and friends; task context of `current`.
    match unsafe { ffi::uu_unwind_read(buf.as_mut_ptr().cast(), addr, buf.len()) } {
        0 => Ok(()),
        _ => Err(CfiError::Read),
    }
}

/// Reads the file of `object`, open, at `offset`, whole.
fn read_object(
    object: &mut Option<ffi::UuObject>,
    offset: u64,
    buf: &mut [u8],
) -> Result<(), CfiError> {
    let object = object.as_mut().ok_or(CfiError::Read)?;
    // SAFETY: `object` was filled by `uu_unwind_object_open()` and not closed; `buf` is
    // valid for `buf.len()` bytes of writes; task context of `current`.
    match unsafe { ffi::uu_unwind_object_read(object, offset, buf.as_mut_ptr().cast(), buf.len()) }
    {
        0 => Ok(()),
        RET_EFAULT => Err(CfiError::Malformed),
        _ => Err(CfiError::Read),
    }
}

impl Current<'_> {
    /// Whether `addr..addr + len` lies in mappings of ordinary memory (asked of the
    /// kernel for a mapping not seen yet in this stack).
    fn is_ordinary(&mut self, addr: u64, len: usize) -> bool {
        let Some(last) = addr.checked_add(len.max(1) as u64 - 1) else {
            return false;
        };
        self.ordinary_at(addr) && self.ordinary_at(last)
    }

    /// Whether the mapping holding `addr` is ordinary memory.
    #[inline(always)]
    fn ordinary_at(&mut self, addr: u64) -> bool {
        if self.ordinary.iter().any(|&(s, e)| s <= addr && addr < e) {
            return true;
        }
        let (mut start, mut end) = (0, 0);
        // SAFETY: `start` and `end` are valid for writes; task context of `current`.
        if unsafe { ffi::uu_unwind_ordinary(addr, &mut start, &mut end) } != 0 {
            return false;
        }
        if let Some(slot) = self.ordinary.get_mut(self.next_ordinary % ORDINARY) {
            *slot = (start, end);
        }
        self.next_ordinary = self.next_ordinary.wrapping_add(1);
        true
    }

    /// Reads the open object's file at `offset`, whole.
    fn read_object(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.unproven();
        read_object(&mut self.object, offset, buf)
    }

    /// Something is read from the open object: a check that proved it settled no longer
    /// covers everything read.
    #[inline(always)]
    fn unproven(&mut self) {
        if self.proven == Some(true) {
            self.proven = None;
        }
    }

    /// Reads `buf.len()` bytes of `current`'s ordinary memory at `addr`.
    fn read_ordinary(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        if !self.is_ordinary(addr, buf.len()) {
            return Err(CfiError::Read);
        }
        read_user(addr, buf)
    }

    /// The bytes `start..end` of the block holding `addr` (`start` its offset there), read
    /// first if it is not the last one read; `None` when it cannot be.
    #[inline(always)]
    fn in_block(&mut self, addr: u64, len: usize) -> Option<&[u8]> {
        let base = addr & !(BLOCK as u64 - 1);
        let start = (addr - base) as usize;
        let end = start.checked_add(len).filter(|&end| end <= BLOCK)?;
        if self.block_addr != base {
            // The block lies in the page of `addr`, so in its mapping.
            self.block_addr = u64::MAX;
            if !self.ordinary_at(base) {
                return None;
            }
            read_user(base, &mut self.block[..]).ok()?;
            self.block_addr = base;
        }
        self.block.get(start..end)
    }
}

impl Memory for Current<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        match self.in_block(addr, buf.len()) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            None => self.read_ordinary(addr, buf),
        }
    }

    #[inline(always)]
    fn read_word(&mut self, addr: u64) -> Result<u64, CfiError> {
        let word = self
            .in_block(addr, 8)
            .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok());
        match word {
            Some(word) => Ok(u64::from_le_bytes(word)),
            None => {
                let mut b = [0u8; 8];
                self.read_ordinary(addr, &mut b)?;
                Ok(u64::from_le_bytes(b))
            }
        }
    }
}

impl Task for Current<'_> {
    fn region(&mut self, addr: u64) -> Result<Option<Region>, CfiError> {
        let mut r = ffi::UuRegion::default();
        // SAFETY: `r` is valid for a write; task context of `current`.
        let ret = unsafe { ffi::uu_unwind_region(addr, &mut r) };
        if ret == RET_EBUSY {
            stats::add(Stat::LookupsContended, 1);
            return Err(CfiError::Read);
        }
        if ret != 0 {
            return Ok(None);
        }
        let key = match r.kind {
            ffi::UU_REGION_FILE => {
                let cookie = COOKIES.cookie(&r.id, &self.keys.file);
                if let Some(slot) = self.known.get_mut(self.nr_known) {
                    *slot = KnownVma {
                        start: r.start,
                        end: r.end,
                        pgoff: r.pgoff,
                        cookie,
                    };
                    self.nr_known += 1;
                }
                Some(cookie)
            }
            ffi::UU_REGION_VDSO => Some(vdso_key(&r.id, &self.keys.name)),
            _ => None,
        };
        Ok(r.pgoff.checked_shl(PAGE_SHIFT as u32).map(|offset| Region {
            start: r.start,
            end: r.end,
            offset,
            key,
        }))
    }

    fn object_open(&mut self, region: &Region, addr: u64) -> Result<(), CfiError> {
        let mut o = ffi::UuObject::empty();
        // SAFETY: `o` is valid for a write; task context of `current`.
        let ret = unsafe { ffi::uu_unwind_object_open(addr, &mut o) };
        if ret == RET_EBUSY {
            stats::add(Stat::LookupsContended, 1);
        }
        if ret == RET_EINVAL {
            // A file that is not one to read: no table.
            return Err(CfiError::NoFde);
        }
        if ret != 0 {
            return Err(CfiError::Read);
        }
        let key = match o.kind {
            ffi::UU_REGION_FILE => COOKIES.cookie(&o.id, &self.keys.file),
            _ => vdso_key(&o.id, &self.keys.name),
        };
        self.object = Some(o);
        self.object_block_at = u64::MAX;
        self.proven = None;
        if Some(key) != region.key {
            // Another object is mapped there now.
            self.object_close();
            return Err(CfiError::Read);
        }
        Ok(())
    }

    #[inline]
    fn object_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        let base = offset & !(OBJECT_BLOCK as u64 - 1);
        let start = (offset - base) as usize;
        let Some(end) = start
            .checked_add(buf.len())
            .filter(|&end| end <= OBJECT_BLOCK)
        else {
            return self.read_object(offset, buf);
        };
        if self.object_block_at != base {
            self.object_block_at = u64::MAX;
            self.unproven();
            if let Err(e) = read_object(&mut self.object, base, &mut self.object_block[..]) {
                // The end of the file may lie inside the block.
                return match e {
                    CfiError::Malformed => self.read_object(offset, buf),
                    e => Err(e),
                };
            }
            self.object_block_at = base;
        }
        let bytes = self.object_block.get(start..end).ok_or(CfiError::Read)?;
        buf.copy_from_slice(bytes);
        Ok(())
    }

    fn object_settled(&mut self) -> bool {
        if let Some(proven) = self.proven {
            return proven;
        }
        let Some(o) = self.object.as_mut() else {
            return false;
        };
        // SAFETY: `o` was filled by `uu_unwind_object_open()` and not closed; task context
        // of `current`.
        let settled = unsafe { ffi::uu_unwind_object_settled(o) };
        self.proven = Some(settled);
        settled
    }

    fn object_close(&mut self) {
        self.proven = None;
        if let Some(mut o) = self.object.take() {
            // SAFETY: `o` was filled by `uu_unwind_object_open()` and is closed once: taken
            // out of `self.object`.
            unsafe { ffi::uu_unwind_object_close(&mut o) }
        }
    }

    #[inline]
    fn table(&mut self, key: u64) -> Option<&[AtomicU64]> {
        let i = match self
            .held
            .iter()
            .position(|h| h.key == key && !h.t.is_null())
        {
            Some(i) => i,
            None => {
                let held = Held::get(key)?;
                let i = self.next_held % HELD;
                self.next_held = self.next_held.wrapping_add(1);
                *self.held.get_mut(i)? = held;
                i
            }
        };
        self.held.get(i)?.words()
    }

    fn table_create(&mut self, words: usize) -> Option<&[AtomicU64]> {
        self.pending = Held::alloc(words)?;
        self.pending.words()
    }

    fn table_pending(&mut self) -> Option<&[AtomicU64]> {
        self.pending.words()
    }

    fn table_publish(&mut self, key: u64) {
        let pending = core::mem::replace(&mut self.pending, Held::NONE);
        if !pending.t.is_null() {
            // SAFETY: `pending.t` is a table from `uu_table_alloc()`, held, never published.
            unsafe { ffi::uu_table_publish(pending.t, key) };
        }
    }

    fn table_write(&mut self, key: u64, write: &mut dyn FnMut(&[AtomicU64]) -> Result<(), Add>) {
        let (refused, at) = *self.refused;
        // SAFETY: A plain C function without preconditions.
        if key == refused && !unsafe { ffi::uu_tables_retry_now(at) } {
            return;
        }
        // SAFETY: A plain C function; task context (the callback), and no lock held.
        unsafe { ffi::uu_tables_write_lock() };
        if let Some(cur) = Held::get(key) {
            if let (Some(words), Some(Err(Add::Room(n)))) =
                (cur.words(), cur.words().map(&mut *write))
            {
                match Held::alloc(n) {
                    Some(new) => {
                        let grown = new.words().and_then(|w| ftable::grow(words, w));
                        if grown.is_some() && new.words().map(&mut *write) == Some(Ok(())) {
                            // SAFETY: `cur` is the file's table and `new`, held, its copy;
                            // the writers' lock is held.
                            unsafe { ffi::uu_table_replace(cur.t, new.t) };
                        }
                    }
                    // SAFETY: A plain C function without preconditions.
                    None => *self.refused = (key, unsafe { ffi::uu_tables_retry_at() }),
                }
            }
        }
        // SAFETY: Taken above, by this callback.
        unsafe { ffi::uu_tables_write_unlock() };
    }
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        // An object left open by an unwind that stopped half-way is let go of.
        self.object_close();
    }
}

/// Unwinds `current`'s user stack from `regs` with the programs' `.eh_frame`, and records
/// it; `fallback`, the kernel's frame-pointer stack, is recorded instead when no work
/// buffer is free.
///
/// Context: the deferred callback, task context of `current`, may fault and sleep.
pub(crate) fn record<T: Ip>(regs: &ffi::UuRegs, cookie: u64, keys: &Keys, fallback: &[T]) {
    let Some(mut taken) = Taken::take() else {
        stats::add(Stat::UnwindPoolBusy, 1);
        return stack::record(fallback, cookie, keys);
    };
    let work = taken.work();
    let mut task = Current {
        keys,
        block: &mut work.block,
        block_addr: u64::MAX,
        ordinary: [(0, 0); ORDINARY],
        next_ordinary: 0,
        object: None,
        object_block: &mut work.object_block,
        object_block_at: u64::MAX,
        proven: None,
        known: [KnownVma::default(); KNOWN],
        nr_known: 0,
        held: [Held::NONE; HELD],
        next_held: 0,
        pending: Held::NONE,
        refused: &mut work.refused,
    };
    let start = Regs {
        ip: regs.ip,
        sp: regs.sp,
        bp: regs.bp,
        bx: regs.bx,
    };
    // SAFETY: A plain C function without preconditions.
    let user_end = unsafe { ffi::uu_unwind_user_end() };
    let (n, end, counts) = unwind(
        &mut task,
        start,
        user_end,
        &CACHES,
        &mut work.space,
        &mut work.ips,
    );
    stats::add(Stat::UnwindStacks, 1);
    // Most are 0 on a warm stack: a call into C each is not free. (Iterated by reference:
    // an array's by-value iterator calls core's out-of-line `IndexRange::len()` for every
    // element in the kernel's build.)
    for &(stat, n) in &[
        (Stat::UnwindCfiFrames, counts.cfi),
        (Stat::UnwindFpFrames, counts.fp),
        (Stat::UnwindRowMisses, counts.row_misses),
        (Stat::UnwindCfiErrors, counts.errors),
        (Stat::UnwindTablesUnread, counts.table_unread),
        (Stat::UnwindTablesUnstable, counts.unsettled),
        (Stat::UnwindRowsParsed, counts.parsed),
        (Stat::UnwindTablesMade, counts.tables),
        (Stat::UnwindTruncated, end.truncated().into()),
    ] {
        if n != 0 {
            stats::add(stat, n.into());
        }
    }
    let known = task.known.get(..task.nr_known).unwrap_or(&[]);
    stack::record_known(&work.ips[..n], cookie, keys, known);
    let reason = match end {
        End::Complete => return,
        End::Limit => 1,
        End::Table => 2,
        End::BadFrame => 3,
        End::Read => 4,
        End::NotUser => 5,
    };
    // SAFETY: A plain C function without preconditions; task context.
    unsafe { ffi::uu_emit_truncated(cookie, n as u16, reason) };
}
