// SPDX-License-Identifier: GPL-2.0

//! The user-stack unwinder: from the registers of the task's kernel entry, frame by frame,
//! the rule of each frame's address from the object's `.eh_frame` ([`super::cfi`]), or the
//! frame-pointer rule where no FDE covers it; with the caches that make a stack seen before
//! cost a lookup per frame instead of a CFI parse.
//!
//! # Caches
//!
//! Both are keyed by the cookie of the file's identity (`FileId` hashed, see
//! [`super::frames`]) and hold only what is the same in every process that maps the file,
//! whatever ASLR did: a row is found again only through the same identity, so a file
//! unmapped, `dlclose`d, rewritten in place (a new change time, a new cookie) or replaced
//! by `exec` can never hand out its old rows.
//!
//! What they hold is derived from the file's own content, read by file offset through
//! [`Task::object_read`] (the page cache, in the module), never from the process's
//! mapping: a process may write its private copy-on-write copy of a table, and what every
//! other process is served must not depend on it. Addresses inside the object are its
//! link-time addresses, translated to file offsets through its `PT_LOAD` segments
//! ([`Object`]), so how a process maps the file cannot change what is read either. What
//! was read while the file was being written is used for that frame and not kept
//! ([`Task::object_settled`]).
//!
//! - [`RowCache`], the hot path: per (file, file offset of the address looked up), the row
//!   in force there: [`ROW_SLOTS`] slots of 48 bytes, [`WAYS`]-way set-associative (a file
//!   cookie is a keyed hash, so which rows collide changes with every load of the module).
//!   Only rows without DWARF expressions are kept (a PLT entry's or a signal trampoline's
//!   row is parsed each time).
//! - The files' tables ([`super::ftable`], through [`Task::table`]), behind it: per file,
//!   a copy of its `.eh_frame_hdr` search table (or, without one, the same made from its
//!   `.eh_frame` section, [`super::cfi::walk`]) and every row of each FDE a stack needed
//!   so far, in memory the task's side allocates in the callback and bounds. A row cache
//!   miss bisects them in memory; only an FDE no stack needed before is read from the file
//!   and parsed (all its rows at once, in one run of its program).
//! - [`TableCache`]: per file, its segments, entry point and `.eh_frame_hdr` (or without
//!   one its `.eh_frame` section, or that it has neither): [`TABLE_SLOTS`] slots of 208
//!   bytes, for the files without a table.
//!
//! Each slot of the two static caches is a sequence lock over atomics: a writer that finds
//! the slot being written skips it, a reader that sees it change misses. No lock, no
//! allocation, any context.

#![forbid(unsafe_code)]

use core::sync::atomic::fence;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering;

use super::cfi::cursor::Cursor;
use super::cfi::elf::find_eh_frame;
use super::cfi::elf::read_object;
use super::cfi::elf::Load;
use super::cfi::elf::Object;
use super::cfi::elf::Section;
use super::cfi::elf::MAX_LOADS;
use super::cfi::machine::Row;
use super::cfi::machine::EMPTY_ROW;
use super::cfi::packed::decode_row;
use super::cfi::packed::encode_row;
use super::cfi::packed::Packed;
use super::cfi::packed::OFFSET;
use super::cfi::packed::REGISTER;
use super::cfi::packed::SAME_VALUE;
use super::cfi::packed::UNDEFINED;
use super::cfi::packed::VAL_OFFSET;
use super::cfi::pointer::datarel_sdata4_pair;
use super::cfi::pointer::read_encoded;
use super::cfi::pointer::Bases;
use super::cfi::pointer::DATAREL_SDATA4;
use super::cfi::read_mem;
use super::cfi::read_u64;
use super::cfi::step::apply;
use super::cfi::step::fde_rows;
use super::cfi::step::find_in_fde;
use super::cfi::step::step_fp;
use super::cfi::step::Regs;
use super::cfi::step::Scratch;
use super::cfi::step::Step;
use super::cfi::step::FDE_MAX;
use super::cfi::table::Entry;
use super::cfi::table::Hdr;
use super::cfi::table::TableInfo;
use super::cfi::walk::walk_eh_frame;
use super::cfi::Budget;
use super::cfi::CfiError;
use super::cfi::Memory;
use super::cfi::REG_RA;
use super::cfi::REG_RBP;
use super::cfi::REG_RBX;
use super::cfi::REG_RSP;
use super::ftable;
use super::ftable::Add;
use super::ftable::Rows;
use super::ftable::View;

/// Frames one stack holds at most: the kernel's own limit for a deferred user stack (its
/// unwind cache fills a 4 KiB page).
pub const MAX_FRAMES: usize = 511;
/// Slots of the [`RowCache`].
pub const ROW_SLOTS: usize = 2048;
/// Slots of a [`RowCache`] bucket: the rows that hash alike, up to this many, all stay.
pub const WAYS: usize = 4;
/// Slots of the [`TableCache`].
pub const TABLE_SLOTS: usize = 64;
/// Mappings one stack remembers while it is unwound.
const MEMO: usize = 4;

/// The mapping that holds an address, as the unwinder needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Its first address.
    pub start: u64,
    /// The address after its last one.
    pub end: u64,
    /// The file offset of `start`.
    pub offset: u64,
    /// The cookie of the ELF object it maps (a file's identity, or the vDSO's name), under
    /// which its table and rows are cached; `None` for memory without one (anonymous
    /// memory, JIT code), which only the frame-pointer rule unwinds.
    pub key: Option<u64>,
}

/// The unwound task: its memory and its mappings.
pub trait Task: Memory {
    /// The mapping holding `addr`, if any; [`CfiError::Read`] when it could not be looked
    /// up (a lock was taken), which ends the stack: the frame-pointer rule would make up
    /// frames on code without frame pointers.
    fn region(&mut self, addr: u64) -> Result<Option<Region>, CfiError>;
    /// Opens the object that `region` maps (it holds `addr`) for [`Task::object_read`]:
    /// its content as its file holds it, never the process's private copy of a page.
    /// Fails with [`CfiError::Read`] when it cannot be read or the mapping at `addr` no
    /// longer maps the object of `region.key`, [`CfiError::NoFde`] when its file is not
    /// one to read (no table). [`Task::object_close`] follows a success.
    fn object_open(&mut self, region: &Region, addr: u64) -> Result<(), CfiError>;
    /// Reads the open object's bytes at file offset `offset`: [`CfiError::Malformed`] past
    /// the end of the file, [`CfiError::Read`] when they cannot be read now.
    fn object_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CfiError>;
    /// Whether what was read from the open object so far is its settled content (no
    /// writer had the file open, its identity did not change), which the caches shared by
    /// every process may keep.
    fn object_settled(&mut self) -> bool;
    /// Lets go of the open object.
    fn object_close(&mut self);
    /// The words of the table kept for the file `key` ([`ftable`]), if one is; it stays
    /// the same until the stack's end (a table replaced meanwhile is seen by the next
    /// stack). None by default: no tables kept.
    fn table(&mut self, _key: u64) -> Option<&[AtomicU64]> {
        None
    }
    /// A new table of `words` words, zeroed and seen by no one, for the stack to fill
    /// ([`Task::table_publish`] or the stack's end lets go of it); `None` when it cannot be
    /// had (the memory limit).
    fn table_create(&mut self, _words: usize) -> Option<&[AtomicU64]> {
        None
    }
    /// The table [`Task::table_create`] gave, while it is not published.
    fn table_pending(&mut self) -> Option<&[AtomicU64]> {
        None
    }
    /// Publishes the pending table as the file `key`'s (unless it has one already).
    fn table_publish(&mut self, _key: u64) {}
    /// Runs `write` on the file `key`'s table as it is now, writers excluded; when it asks
    /// for [`Add::Room`], copies the table ([`ftable::grow`]) into a larger one that
    /// replaces it and runs `write` again on that. Once the memory limit refused the larger
    /// one, the file's next writes of the same stack may be dropped.
    fn table_write(&mut self, _key: u64, _write: &mut dyn FnMut(&[AtomicU64]) -> Result<(), Add>) {}
}

/// The open object's bytes by file offset, as [`Memory`].
struct FileOf<'t, T: Task>(&'t mut T);

impl<T: Task> Memory for FileOf<'_, T> {
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.0.object_read(offset, buf)
    }
}

/// The open object's bytes by their link-time address, as [`Memory`]: what its `PT_LOAD`
/// segments load from the file.
struct ObjectOf<'t, T: Task> {
    task: &'t mut T,
    object: &'t Object,
}

impl<T: Task> Memory for ObjectOf<'_, T> {
    #[inline]
    fn read(&mut self, vaddr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        let offset = self
            .object
            .offset(vaddr, buf.len())
            .ok_or(CfiError::Malformed)?;
        self.task.object_read(offset, buf)
    }
}

/// How an unwind ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// At the outermost frame: an undefined or zero return address.
    Complete,
    /// The frame limit (the caller's buffer) is reached.
    Limit,
    /// A table was malformed, unsupported or too long, or the stack's budget was spent.
    Table,
    /// A frame failed a sanity check (the stack pointer not growing, misaligned), or the
    /// frame-pointer rule could not continue where no table helped.
    BadFrame,
    /// The stack could not be read.
    Read,
    /// An instruction pointer is not a user address: it is the last frame.
    NotUser,
}

impl End {
    /// Whether the stack is cut short of its outermost frame.
    pub fn truncated(self) -> bool {
        self != End::Complete
    }
}

/// What one unwind did, for the module's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames unwound with a CFI row.
    pub cfi: u32,
    /// Frames unwound with the frame-pointer rule (no FDE covered them).
    pub fp: u32,
    /// Tables that ended the unwind (malformed, unsupported, too long, budget).
    pub errors: u32,
    /// Rows not found in the cache (parsed from the table).
    pub row_misses: u32,
    /// Frames whose table could not be read (a page not cached on a filesystem the glue
    /// does not read from, a lock taken): the stack ends there.
    pub table_unread: u32,
    /// Tables read while their file was being written (or whose identity changed): used
    /// for the frame, not cached.
    pub unsettled: u32,
    /// Row misses that ran an FDE's program (the others found its rows in the file's
    /// table): first sights, and FDEs whose rows are not kept.
    pub parsed: u32,
    /// File tables made.
    pub tables: u32,
}

/// What a row lookup found.
#[derive(Debug)]
enum Lookup {
    /// The row in force at the address, left in [`Unwind::row`] (a general row is too
    /// large to hand back through the lookup's calls), and whether it was read from the
    /// object's settled content (so the row cache may keep it).
    Row(bool),
    /// The same from the file's table, packed ([`encode_row`]), left in
    /// [`Unwind::packed`].
    Kept(bool),
    /// No FDE covers the address: the frame-pointer rule.
    NoFde,
    /// No FDE covers the address, which is in the object's entry point's first bytes, and
    /// the frame pointer is 0: the outermost frame. The x86-64 ABI has the entry point
    /// clear the frame pointer to mark the deepest frame; ld.so's `_start`, which calls
    /// `_dl_start` and has no FDE, is the root of the loader's stacks before `main`.
    Root,
}

/// What no FDE covering `vaddr` in the object of `info` means, by the ABI's rule for the
/// outermost frame (the x86-64 psABI: "the user code should mark the deepest stack frame
/// by setting the frame pointer to zero"): [`Lookup::Root`] where the frame pointer `bp` is
/// zero in the object's start-up code, else [`Lookup::NoFde`]. The start-up code is the
/// code from the entry point up to the first FDE after it, within [`STARTUP_SPAN`]: ld.so's
/// `_start` and `_dl_start_user` (glibc's RTLD_START), which clears `rbp` before it calls
/// `_dl_init`, the library constructors' caller. `below` is the first address of the last
/// FDE that starts at or below `vaddr` (`None`: none does); an FDE that starts between the
/// entry point and `vaddr` ends the start-up code before `vaddr`. A caller that does not
/// know passes `Some(vaddr)`, which keeps the rule to [`ROOT_SPAN`] of the entry point.
/// So a frame without an FDE and with a zero `rbp` elsewhere (JIT code, or a register
/// that merely holds 0) ends the stack cut short, never complete.
fn no_fde(info: &TableInfo, vaddr: u64, bp: u64, below: Option<u64>) -> Lookup {
    let entry = info.object.entry;
    let past = vaddr.wrapping_sub(entry);
    let startup = past < ROOT_SPAN || (past < STARTUP_SPAN && below.is_none_or(|b| b < entry));
    if bp == 0 && startup {
        Lookup::Root
    } else {
        Lookup::NoFde
    }
}

/// What a file's table says of a row cache miss ([`Unwind::kept`]).
enum Kept {
    /// The row, or that no FDE covers the address.
    Lookup(Lookup),
    /// FDE `i` (its search table entry) covers the address `vaddr` of the file
    /// [`Unwind::info`] describes, if any does, and its rows are not kept: they are to be
    /// parsed (and kept, with `true`: they have not been tried yet).
    Parse(u64, usize, Entry, bool),
    /// Nothing: the file is to be read.
    Unknown,
}

/// What [`Unwind::make_walked`] did.
enum Made {
    /// The table is made.
    Yes,
    /// Not now: what was read is not settled.
    NotNow,
    /// Not from this section: it is not one to make a table from, or the memory limit
    /// refused the table.
    Never,
}

/// The FDE a file's table gives for an address.
enum Indexed {
    /// Its index, search table entry, and whether its rows are yet to be kept.
    Fde(usize, Entry, bool),
    /// No FDE covers the address.
    NoFde,
    /// The file has no table, and none can be made now.
    Untabled,
    /// The file has no table, and none can be made from its `.eh_frame` section (malformed,
    /// too long, refused by the memory limit): it is as a file without one.
    Unmade,
}

/// Bytes from an entry point within which a return address without an FDE, with a zero
/// frame pointer, is a root: ld.so's `_start` calls `_dl_start` within its first 8.
const ROOT_SPAN: u64 = 16;
/// Bytes from an entry point within which the start-up code without an FDE may lie
/// ([`no_fde`]): Debian 12's ld.so (glibc 2.36) calls `_dl_init` 0x2b bytes past its entry
/// point.
const STARTUP_SPAN: u64 = 256;

/// Words of a [`TableCache`] slot: the key, then a [`TableInfo`]'s words.
const TABLE_WORDS: usize = 1 + INFO_WORDS;
/// Words of a [`TableInfo`] ([`info_words`]): a word of flags and sizes, the header's four
/// addresses and count (or, without a header, the `.eh_frame` section's address and size
/// in the second and third), the entry point and three words a segment.
pub const INFO_WORDS: usize = 6 + 3 * MAX_LOADS;

/// `info` as words.
fn info_words(info: &TableInfo) -> [u64; INFO_WORDS] {
    let mut w = [0u64; INFO_WORDS];
    w[0] = (info.object.nr_loads as u64) << 24;
    if let Some(h) = info.hdr {
        w[0] |= 1 | u64::from(h.table_enc) << 8 | u64::from(h.value_size) << 16;
        w[1] = h.addr;
        w[2] = h.eh_frame;
        w[3] = h.table;
        w[4] = h.count;
    } else if let Some(e) = info.eh_frame {
        w[0] |= 2;
        w[2] = e.addr;
        w[3] = e.size;
    }
    w[5] = info.object.entry;
    for (i, l) in info.object.loads.iter().enumerate() {
        let at = 6 + 3 * i;
        w[at] = l.vaddr;
        w[at + 1] = l.offset;
        w[at + 2] = l.filesz;
    }
    w
}

/// The [`TableInfo`] of [`info_words`]' words.
#[inline]
fn info_of(w: &[u64; INFO_WORDS]) -> Option<TableInfo> {
    let meta = w[0];
    let mut object = Object {
        nr_loads: ((meta >> 24) & 0xff) as usize,
        entry: w[5],
        ..Object::default()
    };
    if object.nr_loads > MAX_LOADS {
        return None;
    }
    for (i, l) in object.loads.iter_mut().enumerate() {
        let at = 6 + 3 * i;
        *l = Load {
            vaddr: w[at],
            offset: w[at + 1],
            filesz: w[at + 2],
        };
    }
    let hdr = (meta & 1 != 0).then(|| Hdr {
        addr: w[1],
        eh_frame: w[2],
        table: w[3],
        count: w[4],
        table_enc: (meta >> 8) as u8,
        value_size: (meta >> 16) as u8,
    });
    let eh_frame = (meta & 3 == 2).then(|| Section {
        addr: w[2],
        size: w[3],
    });
    object.eh_frame_hdr = hdr.map(|h| h.addr);
    Some(TableInfo {
        object,
        hdr,
        eh_frame,
    })
}

/// A slot: a sequence count (odd while written) and `W` words, the first of which is the
/// key (0: empty).
struct Slot<const W: usize> {
    seq: AtomicU64,
    words: [AtomicU64; W],
}

impl<const W: usize> Slot<W> {
    const fn empty() -> Self {
        Slot {
            seq: AtomicU64::new(0),
            words: [const { AtomicU64::new(0) }; W],
        }
    }

    /// The words, if the slot was not written while read.
    #[inline(always)]
    fn read(&self) -> Option<[u64; W]> {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 != 0 {
            return None;
        }
        let mut out = [0u64; W];
        for (o, w) in out.iter_mut().zip(self.words.iter()) {
            *o = w.load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == s1).then_some(out)
    }

    /// Whether the first two words are 0 (an empty slot) or `k0` and `k1`, as last
    /// written: a writer's choice of a slot, which [`Slot::write_with`] then takes or skips.
    #[inline(always)]
    fn holds(&self, k0: u64, k1: u64) -> bool {
        let (Some(w0), Some(w1)) = (self.words.first(), self.words.get(1)) else {
            return false;
        };
        let k = w0.load(Ordering::Relaxed);
        k == 0 || (k == k0 && w1.load(Ordering::Relaxed) == k1)
    }

    /// Writes the words, unless another writer is at it.
    fn write(&self, words: [u64; W]) {
        self.write_with(|slot| {
            for (w, &v) in slot.iter().zip(words.iter()) {
                w.store(v, Ordering::Relaxed);
            }
        });
    }

    /// Has `store` write the words (relaxed stores), unless another writer is at it.
    #[inline(always)]
    fn write_with(&self, store: impl FnOnce(&[AtomicU64; W])) {
        let s = self.seq.load(Ordering::Relaxed);
        if s & 1 != 0
            || self
                .seq
                .compare_exchange(s, s.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        fence(Ordering::Release);
        store(&self.words);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    fn clear(&self) {
        self.write([0; W]);
    }
}

impl Slot<5> {
    /// The row after the key and offset, if those are `key` and `offset` and the slot was
    /// not written while read: a probe that misses reads two words, not five; one that
    /// hits reads the row with three loads (a loop over its words stayed rolled, on every
    /// frame of every stack).
    #[inline(always)]
    fn read_row(&self, key: u64, offset: u64) -> Option<Packed> {
        let [k, o, a, b, c] = &self.words;
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 != 0 || k.load(Ordering::Relaxed) != key || o.load(Ordering::Relaxed) != offset {
            return None;
        }
        let row = [
            a.load(Ordering::Relaxed),
            b.load(Ordering::Relaxed),
            c.load(Ordering::Relaxed),
        ];
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == s1).then_some(row)
    }
}

#[inline(always)]
fn mix(a: u64, b: u64) -> u64 {
    (a ^ b.rotate_left(29))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(31)
}

/// Per file: its segments, entry point and `.eh_frame_hdr` (or `.eh_frame` section).
pub struct TableCache {
    slots: [Slot<TABLE_WORDS>; TABLE_SLOTS],
}

impl Default for TableCache {
    fn default() -> Self {
        Self::new()
    }
}

impl TableCache {
    /// An empty cache.
    pub const fn new() -> Self {
        TableCache {
            slots: [const { Slot::empty() }; TABLE_SLOTS],
        }
    }

    fn slot(&self, key: u64) -> &Slot<TABLE_WORDS> {
        &self.slots[(mix(key, 0) as usize) % TABLE_SLOTS]
    }

    fn get(&self, key: u64) -> Option<TableInfo> {
        let w = self.slot(key).read()?;
        if w[0] != key || key == 0 {
            return None;
        }
        let (_, info) = w.split_first()?;
        info_of(info.try_into().ok()?)
    }

    fn put(&self, key: u64, info: &TableInfo) {
        let mut w = [0u64; TABLE_WORDS];
        w[0] = key;
        let info = info_words(info);
        for (d, &v) in w.iter_mut().skip(1).zip(info.iter()) {
            *d = v;
        }
        self.slot(key).write(w);
    }

    /// Forgets everything.
    pub fn clear(&self) {
        self.slots.iter().for_each(Slot::clear);
    }
}

/// Per (file, file offset): the row in force there.
pub struct RowCache {
    slots: [Slot<5>; ROW_SLOTS],
}

impl Default for RowCache {
    fn default() -> Self {
        Self::new()
    }
}

/// The caller's value of a register whose packed rule is (`tag`, `v`) and whose value in
/// this frame is `current`, as [`super::cfi::step::apply`] recovers it; `None` if undefined.
#[inline(always)]
fn packed_value<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    tag: u64,
    v: u32,
    current: u64,
    cfa: u64,
    regs: &Regs,
) -> Result<Option<u64>, CfiError> {
    Ok(Some(match tag {
        UNDEFINED => return Ok(None),
        SAME_VALUE => current,
        OFFSET => read_u64(mem, budget, cfa.wrapping_add_signed(i64::from(v as i32)))?,
        VAL_OFFSET => cfa.wrapping_add_signed(i64::from(v as i32)),
        REGISTER => reg_value(v, regs)?,
        _ => return Err(CfiError::Malformed),
    }))
}

#[inline(always)]
fn reg_value(reg: u32, regs: &Regs) -> Result<u64, CfiError> {
    match u16::try_from(reg).map_err(|_| CfiError::Unsupported)? {
        REG_RSP => Ok(regs.sp),
        REG_RBP => Ok(regs.bp),
        REG_RBX => Ok(regs.bx),
        REG_RA => Ok(regs.ip),
        _ => Err(CfiError::Unsupported),
    }
}

/// What a frame's step did to the registers it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// They are now the caller's.
    Caller,
    /// The frame is the outermost; they are unchanged.
    Outermost,
}

/// Takes a [`Step`] into the registers it steps: the slow paths' result in the hot loop's
/// form.
#[inline(always)]
fn take(step: Step, regs: &mut Regs, exact: &mut bool) -> Next {
    match step {
        Step::Caller { regs: r, exact_ip } => {
            *regs = r;
            *exact = exact_ip;
            Next::Caller
        }
        Step::Outermost => Next::Outermost,
    }
}

/// [`super::cfi::step::apply`] of a packed row: the same checks and results, without
/// building the row, written into `regs` and `exact` in place (the hot path of a stack
/// seen before).
#[inline(always)]
fn apply_packed<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    p: Packed,
    regs: &mut Regs,
    exact: &mut bool,
) -> Result<Next, CfiError> {
    let [a, b, c] = p;
    // The common cases first, without the general dispatch: the CFA from rsp, the return
    // address saved, rbp and rbx unchanged.
    let cfa_reg = a as u8;
    let base = if u16::from(cfa_reg) == REG_RSP {
        regs.sp
    } else {
        reg_value(u32::from(cfa_reg), regs)?
    };
    let cfa = base
        .checked_add_signed(i64::from((a >> 32) as u32 as i32))
        .ok_or(CfiError::BadFrame)?;
    let signal = (a >> 8) & 0xff != 0;
    if !signal && (cfa <= regs.sp || cfa & 7 != 0) {
        return Err(CfiError::BadFrame);
    }
    let ra_tag = (a >> 16) & 0xff;
    if ra_tag == SAME_VALUE {
        return Err(CfiError::BadFrame);
    }
    let ra = if ra_tag == OFFSET {
        read_u64(
            mem,
            budget,
            cfa.wrapping_add_signed(i64::from(b as u32 as i32)),
        )?
    } else {
        match packed_value(mem, budget, ra_tag, b as u32, regs.ip, cfa, regs)? {
            Some(ra) => ra,
            None => return Ok(Next::Outermost),
        }
    };
    if ra == 0 {
        return Ok(Next::Outermost);
    }
    let bp_tag = (a >> 24) & 0xff;
    let bp = if bp_tag == SAME_VALUE {
        regs.bp
    } else {
        packed_value(mem, budget, bp_tag, (b >> 32) as u32, regs.bp, cfa, regs)?.unwrap_or(0)
    };
    let bx_tag = c & 0xff;
    let bx = if bx_tag == SAME_VALUE {
        regs.bx
    } else {
        packed_value(mem, budget, bx_tag, (c >> 32) as u32, regs.bx, cfa, regs)?.unwrap_or(0)
    };
    *regs = Regs {
        ip: ra,
        sp: cfa,
        bp,
        bx,
    };
    *exact = signal;
    Ok(Next::Caller)
}

impl RowCache {
    /// An empty cache.
    pub const fn new() -> Self {
        RowCache {
            slots: [const { Slot::empty() }; ROW_SLOTS],
        }
    }

    /// The [`WAYS`] slots where the row of (`key`, `offset`) may be.
    #[inline(always)]
    fn bucket(&self, key: u64, offset: u64) -> &[Slot<5>] {
        let first = (mix(key, offset) as usize) % (ROW_SLOTS / WAYS) * WAYS;
        self.slots.get(first..first + WAYS).unwrap_or(&[])
    }

    /// The row cached for `offset` in the file `key`.
    pub fn get(&self, key: u64, offset: u64) -> Option<Row> {
        decode_row(self.get_packed(key, offset)?)
    }

    #[inline(always)]
    fn get_packed(&self, key: u64, offset: u64) -> Option<Packed> {
        if key == 0 {
            return None;
        }
        let bucket = self.bucket(key, offset);
        bucket.iter().find_map(|slot| slot.read_row(key, offset))
    }

    /// Caches `row` for `offset` in the file `key`, if it has no expression.
    pub fn put(&self, key: u64, offset: u64, row: &Row) {
        if let Some(p) = encode_row(row) {
            self.put_packed(key, offset, p);
        }
    }

    /// Caches the packed row `p` for `offset` in the file `key`.
    fn put_packed(&self, key: u64, offset: u64, p: Packed) {
        let [a, b, c] = p;
        let bucket = self.bucket(key, offset);
        // The row's own slot or a free one, else one chosen by the offset's low bits.
        let free = bucket.iter().position(|slot| slot.holds(key, offset));
        let way = free.unwrap_or((offset as usize >> 2) % WAYS);
        // Five stores, not a loop over the words (which the compiler keeps rolled).
        if let Some(slot) = bucket.get(way) {
            slot.write_with(|[k, o, wa, wb, wc]| {
                k.store(key, Ordering::Relaxed);
                o.store(offset, Ordering::Relaxed);
                wa.store(a, Ordering::Relaxed);
                wb.store(b, Ordering::Relaxed);
                wc.store(c, Ordering::Relaxed);
            });
        }
    }

    /// Forgets everything.
    pub fn clear(&self) {
        self.slots.iter().for_each(Slot::clear);
    }
}

/// The caches an unwind uses.
pub struct Caches {
    /// Tables per file.
    pub tables: TableCache,
    /// Rows per file offset.
    pub rows: RowCache,
}

impl Caches {
    /// Empty caches: about 100 KiB.
    pub const fn new() -> Self {
        Caches {
            tables: TableCache::new(),
            rows: RowCache::new(),
        }
    }
}

impl Default for Caches {
    fn default() -> Self {
        Self::new()
    }
}

/// A mapping seen during one unwind: its range, file offset and object key (0: none).
#[derive(Clone, Copy, Default)]
struct Seen {
    start: u64,
    end: u64,
    offset: u64,
    key: u64,
}

/// What an unwinder's stacks work in, one stack at a time: the lookups' buffers, and
/// what a stack leaves the next.
pub struct Workspace {
    /// The lookups' buffers.
    pub scratch: Scratch,
    /// The description of the file whose rows the last stack looked up last, with its
    /// key: a file's identity is its content, so its description never changes, and the
    /// next stack through the same file need not decode it again. Kept only when every
    /// read of the stack that used it proved settled.
    pub info: Option<(u64, TableInfo)>,
}

impl Workspace {
    /// Zeroed buffers, nothing kept.
    pub const fn new() -> Workspace {
        Workspace {
            scratch: Scratch::new(),
            info: None,
        }
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// The per-stack state of an unwind. Small, and moved as little as possible: a stack seen
/// before costs per frame a look at the last mapping, a row cache probe and the loads of
/// the row.
struct Unwind<'a, T: Task> {
    task: &'a mut T,
    caches: &'a Caches,
    scratch: &'a mut Scratch,
    budget: Budget,
    /// The mapping the last frame was in (an empty one has `start == end`).
    last: Seen,
    /// The mappings of the stack looked up before, in the order of their lookups.
    memo: [Seen; MEMO],
    /// The last cached row used, with its key and file offset: a recursion finds it again
    /// without probing the cache.
    last_row: (u64, u64, Packed),
    /// The address `last_row` was found for (`u64::MAX`, never an address looked up:
    /// none): a recursion returns to the same address frame after frame, and finds its
    /// row without looking at its mapping.
    last_pc: u64,
    next: usize,
    /// The key of the object open for row misses (0: none).
    open: u64,
    /// The description of the file whose key it holds, from its table or its headers
    /// ([`Workspace::info`]).
    info: &'a mut Option<(u64, TableInfo)>,
    /// The FDE whose rows the lookup parsed to keep in the file's table, if what it read
    /// proves settled: its index, its rows in `scratch.rows` if all are kept (`None`: it
    /// is marked not to keep), the bytes it covers.
    add: Option<(usize, Option<usize>, u64)>,
    /// The row of the last [`Lookup::Row`].
    row: Row,
    /// The row of the last [`Lookup::Kept`].
    packed: Packed,
    /// Whether the stack walked an `.eh_frame` section to make a table
    /// ([`Unwind::make_walked`]): one a stack, made or not (a file being written is not
    /// walked again at each of its frames).
    walked: bool,
    counts: Counts,
}

impl<'a, T: Task> Unwind<'a, T> {
    fn new(task: &'a mut T, caches: &'a Caches, work: &'a mut Workspace) -> Self {
        Unwind {
            task,
            caches,
            scratch: &mut work.scratch,
            info: &mut work.info,
            budget: Budget::DEFAULT,
            last: Seen::default(),
            memo: [Seen::default(); MEMO],
            last_row: (0, 0, [0; 3]),
            last_pc: u64::MAX,
            next: 0,
            open: 0,
            add: None,
            row: EMPTY_ROW,
            packed: [0; 3],
            walked: false,
            counts: Counts::default(),
        }
    }

    /// The mapping holding `pc`, looked up if it is not one of the last.
    #[inline(always)]
    fn seen(&mut self, pc: u64) -> Result<Option<Seen>, CfiError> {
        if self.last.start <= pc && pc < self.last.end {
            return Ok(Some(self.last));
        }
        if let Some(s) = self.memo.iter().find(|s| s.start <= pc && pc < s.end) {
            self.last = *s;
            return Ok(Some(self.last));
        }
        let Some(r) = self.task.region(pc)? else {
            return Ok(None);
        };
        let seen = Seen {
            start: r.start,
            end: r.end,
            offset: r.offset,
            key: r.key.unwrap_or(0),
        };
        if let Some(slot) = self.memo.get_mut(self.next % MEMO) {
            *slot = seen;
        }
        self.next = self.next.wrapping_add(1);
        self.last = seen;
        Ok(Some(seen))
    }

    /// The row of the frame at `pc`, file offset `offset` in the object of `seen`: from
    /// the file's table when it keeps the FDE's rows, else from the object's file (its
    /// table from the table cache, else its headers read); `bp`, the frame's frame
    /// pointer, tells its root (see [`Lookup::Root`]).
    fn lookup(&mut self, seen: &Seen, pc: u64, offset: u64, bp: u64) -> Result<Lookup, CfiError> {
        let fde = match self.kept(seen.key, offset, bp) {
            Kept::Lookup(lookup) => return Ok(lookup),
            Kept::Parse(vaddr, i, entry, keep) => Some((vaddr, (i, entry, keep))),
            Kept::Unknown => None,
        };
        let region = Region {
            start: seen.start,
            end: seen.end,
            offset: seen.offset,
            key: Some(seen.key),
        };
        // The object stays open for the next rows of the stack that miss in it.
        if self.open != seen.key {
            self.close();
            match self.task.object_open(&region, pc) {
                Ok(()) => {
                    self.open = seen.key;
                    // The scratch's last CIE may be another object's (another stack's).
                    self.scratch.last_cie.open(seen.key);
                }
                Err(CfiError::NoFde) => return Ok(Lookup::NoFde),
                Err(e) => return Err(e),
            }
        }
        let found = match fde {
            // The table's search already found the FDE.
            Some((vaddr, fde)) => self
                .parse_fde(seen.key, fde, vaddr, bp)
                .map(|lookup| (lookup, None)),
            None => self.lookup_open(seen.key, offset, bp),
        };
        let settled = self.task.object_settled();
        self.scratch.last_cie.settled(settled);
        let add = self.add.take();
        let (lookup, read) = found?;
        match (read, settled) {
            (Some(info), true) => self.caches.tables.put(seen.key, &info),
            (_, false) => self.counts.unsettled += 1,
            _ => {}
        }
        if let (Some((i, n, len)), true) = (add, settled) {
            let rows = n.and_then(|n| self.scratch.rows.get(..n));
            self.task
                .table_write(seen.key, &mut |w| ftable::add(w, i, rows, len));
        }
        Ok(match lookup {
            Lookup::Row(_) => Lookup::Row(settled),
            Lookup::Kept(_) => Lookup::Kept(settled),
            other => other,
        })
    }

    /// The row at file offset `offset` of the file `key` from its table, when the table
    /// keeps the rows of the FDE that can cover it (or says that no FDE does); else, when
    /// the table has the FDE but not its rows, what it said, for the parse.
    fn kept(&mut self, key: u64, offset: u64, bp: u64) -> Kept {
        let Some(view) = self.task.table(key).and_then(View::new) else {
            return Kept::Unknown;
        };
        if !matches!(*self.info, Some((k, _)) if k == key) {
            *self.info = info_of(&view.info()).map(|info| (key, info));
        }
        let Some((_, info)) = &self.info else {
            return Kept::Unknown;
        };
        let Some(vaddr) = info
            .object
            .vaddr(offset)
            .filter(|&v| v <= u64::from(u32::MAX))
        else {
            return Kept::Unknown;
        };
        let Some(i) = view.search(vaddr) else {
            return Kept::Lookup(no_fde(info, vaddr, bp, None));
        };
        let entry = view.entry(i);
        match view.rows(i) {
            rows @ Rows::Kept { .. } => Kept::Lookup(match view.row(rows, vaddr - entry.initial) {
                Some(p) => {
                    self.packed = p;
                    Lookup::Kept(true)
                }
                None => no_fde(info, vaddr, bp, Some(entry.initial)),
            }),
            rows => Kept::Parse(vaddr, i, entry, rows == Rows::Unseen),
        }
    }

    /// The FDE that can cover `vaddr` in the file `key`'s table, which is made now when
    /// the file has none.
    fn indexed(
        &mut self,
        key: u64,
        info: &TableInfo,
        hdr: &Hdr,
        vaddr: u64,
    ) -> Result<Indexed, CfiError> {
        if vaddr > u64::from(u32::MAX) {
            return Ok(Indexed::Untabled);
        }
        if self.task.table(key).is_none() && !self.make_table(key, info, hdr)? {
            return Ok(Indexed::Untabled);
        }
        let Some(view) = self.task.table(key).and_then(View::new) else {
            return Ok(Indexed::Untabled);
        };
        Ok(match view.search(vaddr) {
            Some(i) => Indexed::Fde(i, view.entry(i), view.rows(i) == Rows::Unseen),
            None => Indexed::NoFde,
        })
    }

    /// Makes the file `key`'s table: its search table copied from the `.eh_frame_hdr`
    /// `hdr`, read from the open object a buffer at a time; published if what was read is
    /// settled. Whether the file has one now (`false`: the memory limit, or a search table
    /// that cannot be kept: unsorted, or addresses past 4 GiB).
    fn make_table(&mut self, key: u64, info: &TableInfo, hdr: &Hdr) -> Result<bool, CfiError> {
        let size = 2 * usize::from(hdr.value_size);
        let Ok(count) = usize::try_from(hdr.count) else {
            return Ok(false);
        };
        let Some(words) = ftable::words(count, ftable::FIRST_ROWS) else {
            return Ok(false);
        };
        if count == 0 || size == 0 {
            return Ok(false);
        }
        let made = self
            .task
            .table_create(words)
            .and_then(|w| ftable::init(w, count, ftable::FIRST_ROWS, &info_words(info)));
        if made.is_none() {
            return Ok(false);
        }
        let bases = Bases {
            data: Some(hdr.addr),
            ..Bases::default()
        };
        // Bounded by the table's size, which the memory limit bounds: not the stack's.
        let mut budget = Budget {
            bytes: u32::MAX,
            insns: 0,
        };
        let mut i = 0;
        while i < count {
            let n = (FDE_MAX / size).min(count - i);
            let at = (i * size) as u64;
            let at = hdr.table.checked_add(at).ok_or(CfiError::Malformed)?;
            let window = self
                .scratch
                .fde
                .get_mut(..n * size)
                .ok_or(CfiError::Malformed)?;
            let mut mem = ObjectOf {
                task: &mut *self.task,
                object: &info.object,
            };
            match read_mem(&mut mem, &mut budget, at, window) {
                Ok(()) => {}
                Err(CfiError::Read) => return Err(CfiError::Read),
                Err(_) => return Ok(false),
            }
            let Some(w) = self.task.table_pending() else {
                return Ok(false);
            };
            if hdr.table_enc == DATAREL_SDATA4 {
                // What every linker writes, decoded without the general decoder: most of
                // a big file's first sight is this loop (clang's libraries: 226,000).
                for (k, at) in (i..i + n).zip((0..).step_by(8)) {
                    let Some(e) = window
                        .get(at..at + 8)
                        .and_then(|e| <&[u8; 8]>::try_from(e).ok())
                    else {
                        return Ok(false);
                    };
                    let (initial, fde) = datarel_sdata4_pair(e, hdr.addr);
                    if ftable::set_entry(w, k, Entry { initial, fde }).is_none() {
                        return Ok(false);
                    }
                }
            } else {
                let mut c = Cursor::new(window, at);
                for k in i..i + n {
                    let initial = read_encoded(&mut c, hdr.table_enc, &bases);
                    let fde = read_encoded(&mut c, hdr.table_enc, &bases);
                    let (Ok(initial), Ok(fde)) = (initial, fde) else {
                        return Ok(false);
                    };
                    if ftable::set_entry(w, k, Entry { initial, fde }).is_none() {
                        return Ok(false);
                    }
                }
            }
            i += n;
        }
        let indexed = self.task.table_pending().is_some_and(|w| {
            View::new(w).is_some_and(|v| ftable::sorted(&v)) && ftable::index(w).is_some()
        });
        if !indexed || !self.task.object_settled() {
            return Ok(false);
        }
        self.task.table_publish(key);
        self.counts.tables += 1;
        Ok(true)
    }

    /// The FDE that can cover `vaddr` in the file `key`'s table, which is made now from
    /// its `.eh_frame` `section` when the file has none.
    fn walked(
        &mut self,
        key: u64,
        info: &TableInfo,
        section: Section,
        vaddr: u64,
    ) -> Result<Indexed, CfiError> {
        if vaddr > u64::from(u32::MAX) {
            return Ok(Indexed::Untabled);
        }
        if self.task.table(key).is_none() {
            if self.walked {
                return Ok(Indexed::Untabled);
            }
            self.walked = true;
            match self.make_walked(key, info, section)? {
                Made::Yes => {}
                Made::NotNow => return Ok(Indexed::Untabled),
                Made::Never => return Ok(Indexed::Unmade),
            }
        }
        let Some(view) = self.task.table(key).and_then(View::new) else {
            return Ok(Indexed::Untabled);
        };
        Ok(match view.search(vaddr) {
            Some(i) => Indexed::Fde(i, view.entry(i), view.rows(i) == Rows::Unseen),
            None => Indexed::NoFde,
        })
    }

    /// Makes the file `key`'s table from its `.eh_frame` `section` ([`walk_eh_frame`]),
    /// for an object without a `.eh_frame_hdr`: the section walked once to count its FDEs,
    /// then again into the new table, whose search table is then sorted in place; published
    /// if what was read is settled. [`CfiError::Read`] when a page could not be read now.
    fn make_walked(
        &mut self,
        key: u64,
        info: &TableInfo,
        section: Section,
    ) -> Result<Made, CfiError> {
        // A walk reads the section about once; a CIE it did not pass, about 64 bytes an
        // FDE at worst. Bounded by the section's size, not by the stack's budget.
        let walk_budget = || Budget {
            bytes: u32::try_from(section.size.saturating_mul(4))
                .unwrap_or(u32::MAX)
                .saturating_add(1 << 16),
            insns: 0,
        };
        let fits = |e: &Entry| e.initial <= u64::from(u32::MAX) && e.fde <= u64::from(u32::MAX);
        let mut mem = ObjectOf {
            task: &mut *self.task,
            object: &info.object,
        };
        let count = match walk_eh_frame(
            &mut mem,
            &mut walk_budget(),
            section,
            &mut self.scratch.fde,
            |_, e| fits(&e),
        ) {
            Ok(count) => count,
            Err(CfiError::Read) => return Err(CfiError::Read),
            Err(_) => return Ok(Made::Never),
        };
        let Some(words) = ftable::words(count, ftable::FIRST_ROWS) else {
            return Ok(Made::Never);
        };
        if count == 0 {
            return Ok(Made::Never);
        }
        // A file not settled now is not worth a table that would be thrown away: making
        // room for it may drop other users' tables (checked again once it is filled).
        if !self.task.object_settled() {
            return Ok(Made::NotNow);
        }
        let made = self
            .task
            .table_create(words)
            .and_then(|w| ftable::init(w, count, ftable::FIRST_ROWS, &info_words(info)));
        if made.is_none() {
            return Ok(Made::Never);
        }
        let mut mem = ObjectOf {
            task: &mut *self.task,
            object: &info.object,
        };
        let mut k = 0;
        let filled = walk_eh_frame(
            &mut mem,
            &mut walk_budget(),
            section,
            &mut self.scratch.fde,
            |m, e| {
                let set = k < count
                    && m.task
                        .table_pending()
                        .and_then(|w| ftable::set_entry(w, k, e))
                        .is_some();
                k += 1;
                set
            },
        );
        match filled {
            Ok(n) if n == count => {}
            Err(CfiError::Read) => return Err(CfiError::Read),
            _ => return Ok(Made::NotNow),
        }
        let indexed = self.task.table_pending().is_some_and(|w| {
            ftable::sort(w).is_some()
                && View::new(w).is_some_and(|v| ftable::sorted(&v))
                && ftable::index(w).is_some()
        });
        if !indexed {
            return Ok(Made::Never);
        }
        if !self.task.object_settled() {
            return Ok(Made::NotNow);
        }
        self.task.table_publish(key);
        self.counts.tables += 1;
        Ok(Made::Yes)
    }

    /// The row at `vaddr` in FDE `i` of the file `key`'s table (`entry`, its search table
    /// entry), from the open object, which [`Unwind::info`] describes: with `keep`, every
    /// row of the FDE is parsed and kept in the table (if the object's content is
    /// settled); [`no_fde`] (`bp`, the frame's frame pointer) when it does not cover
    /// `vaddr`.
    fn parse_fde(
        &mut self,
        key: u64,
        (i, entry, keep): (usize, Entry, bool),
        vaddr: u64,
        bp: u64,
    ) -> Result<Lookup, CfiError> {
        self.counts.parsed += 1;
        let Some((_, info)) = self.info.as_ref().filter(|(k, _)| *k == key) else {
            return Err(CfiError::Malformed);
        };
        let no_fde = no_fde(info, vaddr, bp, Some(entry.initial));
        if keep {
            let mut mem = ObjectOf {
                task: &mut *self.task,
                object: &info.object,
            };
            let (n, len) = match fde_rows(&mut mem, &mut self.budget, entry.fde, self.scratch) {
                Ok((begin, end, n)) => (n.filter(|_| begin == entry.initial), end - begin),
                // Longer than the buffer: not kept, its rows parsed one at a time.
                Err(CfiError::TooLong) => (None, 0),
                Err(CfiError::NoFde) => return Ok(no_fde),
                Err(e) => return Err(e),
            };
            // Kept in the table once the object's content is known to be settled
            // ([`Unwind::lookup`]).
            self.add = Some((i, n, len));
            if let Some(kept) = n.and_then(|n| self.scratch.rows.get(..n)) {
                let off = vaddr - entry.initial;
                if off >= len {
                    return Ok(no_fde);
                }
                let r = kept.iter().rposition(|r| (r[2] >> 8) & 0xff_ffff <= off);
                let Some(&[a, b, c]) = r.and_then(|r| kept.get(r)) else {
                    return Err(CfiError::Malformed);
                };
                self.packed = [a, b, c & !0xffff_ff00];
                return Ok(Lookup::Kept(false));
            }
        }
        let mut mem = ObjectOf {
            task: &mut *self.task,
            object: &info.object,
        };
        match find_in_fde(&mut mem, &mut self.budget, entry.fde, vaddr, self.scratch) {
            Ok(found) => {
                self.row = found.row;
                Ok(Lookup::Row(false))
            }
            Err(CfiError::NoFde) => Ok(no_fde),
            Err(e) => Err(e),
        }
    }

    /// Ends the stack: closes the object, and forgets the description of the file it read
    /// last unless every lookup proved what it read settled.
    fn end(&mut self) {
        self.close();
        if self.counts.unsettled != 0 {
            *self.info = None;
        }
    }

    /// Closes the object open for the stack's row misses, if any.
    fn close(&mut self) {
        if self.open != 0 {
            self.task.object_close();
            self.open = 0;
        }
    }

    /// [`Unwind::lookup`] with the object open; also the table it read, if it was not
    /// cached.
    fn lookup_open(
        &mut self,
        key: u64,
        offset: u64,
        bp: u64,
    ) -> Result<(Lookup, Option<TableInfo>), CfiError> {
        let known = self.caches.tables.get(key).or_else(|| {
            let view = View::new(self.task.table(key)?)?;
            info_of(&view.info())
        });
        let (info, read) = match known {
            Some(info) => (info, None),
            None => match self.read_table()? {
                Some(info) => (info, Some(info)),
                // Headers the unwinder does not read: no table for this lookup, and no
                // description for the caches (the next lookup reads the headers again).
                None => (TableInfo::default(), None),
            },
        };
        let Some(vaddr) = info.object.vaddr(offset) else {
            return Ok((Lookup::NoFde, read));
        };
        let Some(hdr) = info.hdr else {
            let mut read = read;
            if let Some(section) = info.eh_frame {
                match self.walked(key, &info, section, vaddr)? {
                    Indexed::Fde(i, entry, keep) => {
                        *self.info = Some((key, info));
                        let lookup = self.parse_fde(key, (i, entry, keep), vaddr, bp)?;
                        return Ok((lookup, read));
                    }
                    Indexed::NoFde => return Ok((no_fde(&info, vaddr, bp, None), read)),
                    Indexed::Untabled => {}
                    // The table cache forgets the section, so that its next lookups do not
                    // walk it again (a malformed one, or the memory limit, until the slot
                    // is reused).
                    Indexed::Unmade => {
                        read = Some(TableInfo {
                            eh_frame: None,
                            ..info
                        })
                    }
                }
            }
            // No table: whether an FDE starts before `vaddr` is not known.
            return Ok((no_fde(&info, vaddr, bp, Some(vaddr)), read));
        };
        match self.indexed(key, &info, &hdr, vaddr)? {
            Indexed::Fde(i, entry, keep) => {
                *self.info = Some((key, info));
                let lookup = self.parse_fde(key, (i, entry, keep), vaddr, bp)?;
                return Ok((lookup, read));
            }
            Indexed::NoFde => return Ok((no_fde(&info, vaddr, bp, None), read)),
            Indexed::Untabled | Indexed::Unmade => {}
        }
        // No table: the `.eh_frame_hdr` bisected in the file.
        self.counts.parsed += 1;
        let mut mem = ObjectOf {
            task: &mut *self.task,
            object: &info.object,
        };
        let below = match hdr.lookup(&mut mem, &mut self.budget, vaddr) {
            Ok(entry) => entry,
            Err(CfiError::NoFde) => return Ok((no_fde(&info, vaddr, bp, None), read)),
            Err(e) => return Err(e),
        };
        match find_in_fde(&mut mem, &mut self.budget, below.fde, vaddr, self.scratch) {
            Ok(found) => {
                self.row = found.row;
                Ok((Lookup::Row(false), read))
            }
            Err(CfiError::NoFde) => Ok((no_fde(&info, vaddr, bp, Some(below.initial)), read)),
            Err(e) => Err(e),
        }
    }

    /// The open object's segments, entry point and `.eh_frame_hdr`, from its file (without
    /// a usable one, its `.eh_frame` section, from its section headers); an object with
    /// neither has no table; `None` for an object whose
    /// ELF headers the unwinder does not read (not ELF64 x86-64, say, as the 32-bit vDSO
    /// a 64-bit task can map): nothing is known of it, so nothing about it may be cached.
    fn read_table(&mut self) -> Result<Option<TableInfo>, CfiError> {
        let object = match read_object(&mut FileOf(&mut *self.task), &mut self.budget) {
            Ok(object) => object,
            Err(CfiError::Unsupported | CfiError::Malformed) => return Ok(None),
            Err(e) => return Err(e),
        };
        let hdr = match object.eh_frame_hdr {
            Some(at) => {
                let mut mem = ObjectOf {
                    task: &mut *self.task,
                    object: &object,
                };
                match Hdr::parse(&mut mem, &mut self.budget, at) {
                    Ok(hdr) => Some(hdr),
                    Err(CfiError::NoFde | CfiError::Unsupported | CfiError::Malformed) => None,
                    Err(e) => return Err(e),
                }
            }
            None => None,
        };
        let eh_frame = match hdr {
            Some(_) => None,
            // Its own budget: up to 256 section headers, read once per file.
            None => find_eh_frame(
                &mut FileOf(&mut *self.task),
                &mut Budget {
                    bytes: 1 << 16,
                    insns: 0,
                },
                &object,
            )?,
        };
        Ok(Some(TableInfo {
            object,
            hdr,
            eh_frame,
        }))
    }

    /// The frame-pointer rule, where no table covers a frame.
    fn fp(&mut self, regs: &mut Regs, exact: &mut bool) -> Result<Next, CfiError> {
        self.counts.fp += 1;
        Ok(take(
            step_fp(self.task, &mut self.budget, regs)?,
            regs,
            exact,
        ))
    }

    /// One frame: its row (cached, else from its object's table), or the frame-pointer
    /// rule where no table covers it; the caller's registers replace `regs` (and whether
    /// its ip is exact, `exact`).
    #[inline(always)]
    fn step(&mut self, regs: &mut Regs, exact: &mut bool) -> Result<Next, CfiError> {
        let pc = if *exact { regs.ip } else { regs.ip - 1 };
        if pc == self.last_pc {
            self.counts.cfi = self.counts.cfi.wrapping_add(1);
            return apply_packed(self.task, &mut self.budget, self.last_row.2, regs, exact);
        }
        let Some(seen) = self.seen(pc)? else {
            return self.fp(regs, exact);
        };
        if seen.key == 0 {
            return self.fp(regs, exact);
        }
        let offset = (pc - seen.start).wrapping_add(seen.offset);
        let (key, off, p) = self.last_row;
        if key == seen.key && off == offset {
            self.last_pc = pc;
            self.counts.cfi = self.counts.cfi.wrapping_add(1);
            return apply_packed(self.task, &mut self.budget, p, regs, exact);
        }
        if let Some(p) = self.caches.rows.get_packed(seen.key, offset) {
            self.last_row = (seen.key, offset, p);
            self.last_pc = pc;
            self.counts.cfi = self.counts.cfi.wrapping_add(1);
            return apply_packed(self.task, &mut self.budget, p, regs, exact);
        }
        self.counts.row_misses += 1;
        match self.lookup(&seen, pc, offset, regs.bp) {
            Ok(Lookup::Row(settled)) => {
                if settled {
                    self.caches.rows.put(seen.key, offset, &self.row);
                }
                self.counts.cfi += 1;
                let step = apply(self.task, &mut self.budget, &self.row, regs)?;
                Ok(take(step, regs, exact))
            }
            Ok(Lookup::Kept(settled)) => {
                let p = self.packed;
                if settled {
                    self.caches.rows.put_packed(seen.key, offset, p);
                }
                self.counts.cfi += 1;
                apply_packed(self.task, &mut self.budget, p, regs, exact)
            }
            Ok(Lookup::Root) => Ok(Next::Outermost),
            Ok(Lookup::NoFde) => self.fp(regs, exact),
            Err(CfiError::Read) => {
                // The object has a table, or may have: the frame-pointer rule would make
                // frames up on code built without frame pointers.
                self.counts.table_unread += 1;
                Err(CfiError::Read)
            }
            Err(e) => Err(e),
        }
    }
}

/// The row a stack's unwind uses at `pc` in the mapping `region` (with a key) when the
/// row cache has none: from the file's table, else parsed from the file (and kept in its
/// table); `None` where no FDE covers `pc`. For the tests that compare it with an oracle.
pub fn row_at<T: Task>(
    task: &mut T,
    caches: &Caches,
    work: &mut Workspace,
    region: &Region,
    pc: u64,
) -> Result<Option<Row>, CfiError> {
    let mut u = Unwind::new(task, caches, work);
    let seen = Seen {
        start: region.start,
        end: region.end,
        offset: region.offset,
        key: region.key.unwrap_or(0),
    };
    let offset = (pc - seen.start).wrapping_add(seen.offset);
    let row = match u.lookup(&seen, pc, offset, 1) {
        Ok(Lookup::Row(_)) => Ok(Some(u.row)),
        Ok(Lookup::Kept(_)) => Ok(decode_row(u.packed)),
        Ok(Lookup::NoFde | Lookup::Root) => Ok(None),
        Err(e) => Err(e),
    };
    u.end();
    row
}

/// Unwinds the stack whose innermost frame has the registers `regs` into `ips` (at most
/// its length), with user addresses below `user_end` (a return address at or above it is
/// recorded, and ends the stack); returns the frames found, how the unwind ended and what
/// it did.
pub fn unwind<T: Task>(
    task: &mut T,
    regs: Regs,
    user_end: u64,
    caches: &Caches,
    work: &mut Workspace,
    ips: &mut [u64],
) -> (usize, End, Counts) {
    let mut u = Unwind::new(task, caches, work);
    let mut regs = regs;
    let mut exact = true;
    let mut n = 0;
    let end = loop {
        if regs.ip == 0 {
            break End::Complete;
        }
        let Some(slot) = ips.get_mut(n) else {
            break End::Limit;
        };
        *slot = regs.ip;
        n += 1;
        // Recorded as the stack holds it (the translation keeps such a value raw, with file
        // cookie 0), as the kernel's frame-pointer walk does; but not unwound further.
        if regs.ip >= user_end {
            break End::NotUser;
        }
        match u.step(&mut regs, &mut exact) {
            Ok(Next::Outermost) => break End::Complete,
            Ok(Next::Caller) => {}
            Err(CfiError::Read) => break End::Read,
            Err(CfiError::BadFrame | CfiError::NoFde) => break End::BadFrame,
            Err(
                CfiError::Malformed | CfiError::Unsupported | CfiError::TooLong | CfiError::Budget,
            ) => {
                u.counts.errors += 1;
                break End::Table;
            }
        }
    };
    u.end();
    (n, end, u.counts)
}

#[cfg(test)]
mod tests {
    use super::super::cfi::machine::Cfa;
    use super::super::cfi::machine::Expr;
    use super::super::cfi::machine::Rule;
    use super::*;

    #[test]
    fn a_zero_frame_pointer_is_a_root_only_in_the_start_up_code() {
        // Debian 12's ld.so (glibc 2.36): entry point 0x1ab70 (_start), _dl_start_user from
        // 0x1ab78, the return from its call of _dl_init at 0x1aba0; no FDE covers either.
        let mut info = TableInfo::default();
        info.object.entry = 0x1ab70;
        let root = |vaddr, bp, below| matches!(no_fde(&info, vaddr, bp, below), Lookup::Root);
        // _start's call of _dl_start, as before.
        assert!(root(0x1ab78, 0, Some(0x1ab78)));
        // _dl_start_user's call of _dl_init: the last FDE below starts before the entry
        // point, or none does.
        assert!(root(0x1ab9f, 0, Some(0x1a690)));
        assert!(root(0x1ab9f, 0, None));
        // Not a root: a frame pointer that is not zero, an FDE that starts between the
        // entry point and the address (the start-up code ended there), an address before
        // the entry point or past the start-up span, or a table nobody read.
        assert!(!root(0x1ab9f, 0x7ffd_0000, Some(0x1a690)));
        assert!(!root(0x1ab9f, 0, Some(0x1ab90)));
        assert!(!root(0x1ab9f, 0, Some(0x1ab70)));
        assert!(!root(0x1ab60, 0, Some(0x1a690)));
        assert!(!root(0x1ab70 + STARTUP_SPAN, 0, None));
        assert!(!root(0x1ab9f, 0, Some(0x1ab9f)));
    }

    #[test]
    fn rows_round_trip_without_expressions() {
        let c = RowCache::new();
        let row = Row {
            cfa: Cfa::RegOffset {
                reg: 7,
                offset: -24,
            },
            ra: Rule::Offset(-8),
            bp: Rule::ValOffset(-16),
            bx: Rule::Offset(-24),
            signal: true,
        };
        c.put(5, 0x1234, &row);
        assert_eq!(c.get(5, 0x1234), Some(row));
        assert_eq!(c.get(5, 0x1235), None);
        assert_eq!(c.get(6, 0x1234), None);
        for bp in [Rule::Undefined, Rule::SameValue, Rule::Register(3)] {
            let row = Row { bp, ..row };
            c.put(5, 0x1234, &row);
            assert_eq!(c.get(5, 0x1234), Some(row));
        }
        let e = Expr::new(&[0x77, 0x08]).unwrap();
        let expr = Row {
            ra: Rule::Expression(e),
            ..row
        };
        c.put(7, 0x99, &expr);
        assert_eq!(c.get(7, 0x99), None);
        c.clear();
        assert_eq!(c.get(5, 0x1234), None);
        // Rows that hash alike all stay, up to a bucket's ways.
        let mut same = [(0u64, 0u64); WAYS];
        let mut n = 0;
        let want = (mix(1, 0) as usize) % (ROW_SLOTS / WAYS);
        for off in 0..1_000_000u64 {
            if (mix(1, off) as usize) % (ROW_SLOTS / WAYS) == want {
                same[n] = (1, off);
                n += 1;
                if n == WAYS {
                    break;
                }
            }
        }
        assert_eq!(n, WAYS);
        for (k, o) in same {
            c.put(k, o, &row);
        }
        for (k, o) in same {
            assert_eq!(c.get(k, o), Some(row));
        }
    }

    /// The packed hot path gives what `apply` gives, for every kind of cacheable rule.
    #[test]
    fn packed_rows_apply_as_rows() {
        const SP: u64 = 0x7ffc_1000;
        let mut buf = [0u8; 256];
        for (i, w) in buf.chunks_mut(8).enumerate() {
            w.copy_from_slice(&(0x4000 + 8 * i as u64).to_le_bytes());
        }
        let mut m = super::super::cfi::Slice {
            base: SP,
            bytes: &buf,
        };
        let regs = Regs {
            ip: 0x1234,
            sp: SP,
            bp: SP + 0x40,
            bx: 0xb0b0,
        };
        let rules = [
            Rule::Undefined,
            Rule::SameValue,
            Rule::Offset(-8),
            Rule::Offset(-16),
            Rule::ValOffset(-24),
            Rule::Register(7),
            Rule::Register(3),
            Rule::Register(9),
        ];
        let cfas = [
            Cfa::RegOffset { reg: 7, offset: 16 },
            Cfa::RegOffset { reg: 6, offset: 16 },
            Cfa::RegOffset { reg: 3, offset: 24 },
            Cfa::RegOffset { reg: 7, offset: 12 },
            Cfa::RegOffset { reg: 7, offset: 0 },
            Cfa::RegOffset { reg: 12, offset: 8 },
        ];
        let mut n = 0;
        for cfa in cfas {
            for ra in rules {
                for bp in rules {
                    for (bx, signal) in [(Rule::SameValue, false), (Rule::Offset(-32), true)] {
                        let row = Row {
                            cfa,
                            ra,
                            bp,
                            bx,
                            signal,
                        };
                        let [a, b, c] = encode_row(&row).unwrap();
                        let mut b1 = Budget::default();
                        let mut b2 = Budget::default();
                        let (mut r1, mut e1) = (regs, false);
                        let (mut r2, mut e2) = (regs, false);
                        assert_eq!(
                            apply_packed(&mut m, &mut b1, [a, b, c], &mut r1, &mut e1),
                            apply(&mut m, &mut b2, &row, &regs)
                                .map(|step| take(step, &mut r2, &mut e2)),
                            "{row:?}"
                        );
                        assert_eq!((r1, e1), (r2, e2), "{row:?}");
                        assert_eq!(b1, b2);
                        n += 1;
                    }
                }
            }
        }
        assert_eq!(n, 6 * 8 * 8 * 2);
    }

    #[test]
    fn tables_round_trip() {
        let c = TableCache::new();
        let h = Hdr {
            addr: 0x1000,
            eh_frame: 0x1100,
            count: 9,
            table_enc: 0x3b,
            table: 0x100c,
            value_size: 4,
        };
        let mut object = Object {
            nr_loads: MAX_LOADS,
            entry: 0x1040,
            eh_frame_hdr: Some(h.addr),
            ..Object::default()
        };
        for (i, l) in object.loads.iter_mut().enumerate() {
            *l = Load {
                vaddr: 0x1000 * i as u64,
                offset: 0x800 * i as u64,
                filesz: 0x100 + i as u64,
            };
        }
        let with = TableInfo {
            object,
            hdr: Some(h),
            eh_frame: None,
        };
        let without = TableInfo {
            object: Object {
                nr_loads: 1,
                eh_frame_hdr: None,
                ..object
            },
            hdr: None,
            eh_frame: None,
        };
        let walked = TableInfo {
            eh_frame: Some(Section {
                addr: 0x5c_3398,
                size: 0x1_6940,
            }),
            ..without
        };
        c.put(42, &with);
        c.put(43, &without);
        c.put(45, &walked);
        assert_eq!(c.get(42), Some(with));
        assert_eq!(c.get(43), Some(without));
        assert_eq!(c.get(45), Some(walked));
        assert_eq!(c.get(44), None);
        c.clear();
        assert_eq!(c.get(42), None);
    }

    /// A task of anonymous memory only: every frame by the frame-pointer rule.
    struct Anon<'a> {
        base: u64,
        stack: &'a [u8],
    }

    impl Memory for Anon<'_> {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
            super::super::cfi::Slice {
                base: self.base,
                bytes: self.stack,
            }
            .read(addr, buf)
        }
    }

    impl Task for Anon<'_> {
        fn region(&mut self, _addr: u64) -> Result<Option<Region>, CfiError> {
            Ok(None)
        }
        fn object_open(&mut self, _region: &Region, _addr: u64) -> Result<(), CfiError> {
            Err(CfiError::Read)
        }
        fn object_read(&mut self, _offset: u64, _buf: &mut [u8]) -> Result<(), CfiError> {
            Err(CfiError::Read)
        }
        fn object_settled(&mut self) -> bool {
            false
        }
        fn object_close(&mut self) {}
    }

    #[test]
    fn frame_pointer_chain_ends_and_limits() {
        const SP: u64 = 0x7ffc_0000;
        // Frames at SP+0x10 and SP+0x30: (saved rbp, return address) pairs; the last saved
        // return address is 0.
        let mut words = [0u64; 16];
        words[2] = SP + 0x30;
        words[3] = 0x40_1000;
        words[6] = 0;
        words[7] = 0;
        let mut buf = [0u8; 128];
        for (i, w) in words.iter().enumerate() {
            buf[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        let mut t = Anon {
            base: SP,
            stack: &buf,
        };
        let caches = Caches::new();
        let mut work = Workspace::new();
        let regs = Regs {
            ip: 0x40_2000,
            sp: SP,
            bp: SP + 0x10,
            bx: 0,
        };
        let mut ips = [0u64; 8];
        let (n, end, counts) = unwind(&mut t, regs, 1 << 47, &caches, &mut work, &mut ips);
        assert_eq!((n, end), (2, End::Complete));
        assert_eq!(&ips[..2], &[0x40_2000, 0x40_1000]);
        assert_eq!(counts.fp, 2);
        let (n, end, _) = unwind(&mut t, regs, 1 << 47, &caches, &mut work, &mut ips[..1]);
        assert_eq!((n, end), (1, End::Limit));
        let (n, end, _) = unwind(&mut t, regs, 0x40_1800, &caches, &mut work, &mut ips);
        assert_eq!((n, end), (1, End::NotUser));
        assert_eq!(ips[0], 0x40_2000);
        let bad = Regs { bp: SP - 8, ..regs };
        let (n, end, _) = unwind(&mut t, bad, 1 << 47, &caches, &mut work, &mut ips);
        assert_eq!((n, end), (1, End::BadFrame));
    }

    /// A task whose mappings cannot be looked up (a lock taken).
    struct Contended;

    impl Memory for Contended {
        fn read(&mut self, _addr: u64, _buf: &mut [u8]) -> Result<(), CfiError> {
            Ok(())
        }
    }

    impl Task for Contended {
        fn region(&mut self, _addr: u64) -> Result<Option<Region>, CfiError> {
            Err(CfiError::Read)
        }
        fn object_open(&mut self, _region: &Region, _addr: u64) -> Result<(), CfiError> {
            Err(CfiError::Read)
        }
        fn object_read(&mut self, _offset: u64, _buf: &mut [u8]) -> Result<(), CfiError> {
            Err(CfiError::Read)
        }
        fn object_settled(&mut self) -> bool {
            false
        }
        fn object_close(&mut self) {}
    }

    /// A mapping that cannot be looked up ends the stack, cut short: the frame-pointer
    /// rule would make frames up on code built without frame pointers.
    #[test]
    fn a_lookup_that_cannot_be_made_ends_the_stack() {
        let regs = Regs {
            ip: 0x40_2000,
            sp: 0x7ffc_0000,
            bp: 0x7ffc_0010,
            bx: 0,
        };
        let mut ips = [0u64; 8];
        let (n, end, counts) = unwind(
            &mut Contended,
            regs,
            1 << 47,
            &Caches::new(),
            &mut Workspace::new(),
            &mut ips,
        );
        assert_eq!((n, end), (1, End::Read));
        assert_eq!(counts.fp, 0);
    }
}
