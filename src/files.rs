// SPDX-License-Identifier: GPL-2.0

//! `file_cache` events: what each file cookie stands for, written before the first stack
//! that uses it, again as a reminder, and whenever a reader may have lost it.

use crate::ffi;
use crate::logic::buildid::{find_build_id, ReadAt, ReadError};
use crate::logic::frames::{name_cookie, CHUNK_FRAMES};
use crate::logic::seen::{CachedId, FirstSight, Sighting};
use crate::stats::{self, Stat};
use crate::Keys;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::prelude::*;

/// Which files already have their `file_cache` in the trace.
static SEEN: FirstSight = FirstSight::new();

/// New files one stack reports at most; the others are left to a later stack (counted as
/// `file_cache_deferred`). A stack's frames are the user's to choose (a fake frame-pointer
/// chain), and one file opened many times is many cookies: without a cap one system call
/// could force hundreds of `file_cache` events and their reads, and flush the shared cache.
pub(crate) const NEW_FILES_PER_STACK: usize = 16;

fn now_ns() -> u64 {
    // SAFETY: A plain C function without preconditions, callable in any context.
    unsafe { ffi::uu_now_ns() }
}

/// A reader may be starting, or its buffer was reset: forget every file.
fn reader_start() {
    SEEN.clear();
    stats::add(Stat::CacheResets, 1);
}

/// Whether a `file_cache` written now can land anywhere: some instance enables the event.
/// Without it, a stack neither holds files nor reads them.
pub(crate) fn wanted() -> bool {
    // SAFETY: A plain C function without preconditions, callable in any context.
    unsafe { ffi::uu_file_cache_enabled() }
}

/// What [`HeldFiles::report`] found: the generation its `file_cache` events were written in
/// (captured before they were).
#[derive(Clone, Copy)]
pub(crate) struct Report {
    generation: u64,
}

impl Report {
    /// Whether the `file_cache` events written before the stack, or before this stack's
    /// files were found known, may be gone from the trace now that the stack is written (a
    /// reader reset the buffer or switched tracing back on in between): then the caller
    /// writes the chunk's files again after it.
    pub(crate) fn needs_repeat(&self) -> bool {
        SEEN.generation() != self.generation
    }
}

/// Longest path a `file_cache` event carries, NUL included; longer ones are shortened
/// visibly (`src/files.c`).
const PATH_BUF: usize = 1024;
/// The path buffer when no memory can be had for `PATH_BUF`.
const SHORT_PATH_BUF: usize = 128;

/// Longest name of a mapping without a file, NUL included (`[anon:` + 80 + `]`).
pub(crate) const NAME_MAX: usize = 96;

/// A mapping without a file but with a name, as `file_cache` reports it.
#[derive(Clone, Copy)]
struct Named {
    cookie: u64,
    name: [u8; NAME_MAX],
}

/// Names one chunk can hold; a further named mapping in the same chunk is reported as
/// plain anonymous memory (cookie 1) rather than with a cookie nobody explains.
const MAX_NAMES: usize = 4;

/// A reference of the module's own on a `struct file`.
///
/// Not the kernel crate's `File`: creating one asserts that every `fdget_pos()` active on
/// the file took `f_pos_lock`, which nobody can promise for a file another thread of the
/// task may be reading through an fd (`fdget_pos()` skips the lock when the file count was 1
/// as it began, before a mapping took its reference). The module needs only a pointer kept
/// alive: it passes the file to `d_path()` and reads it through the page cache, neither of
/// which touches `f_pos`.
///
/// # Invariants
///
/// `self.0` points at a `struct file` on which this value owns one reference.
struct FileRef(NonNull<bindings::file>);

impl FileRef {
    /// Takes a reference on `file`.
    ///
    /// # Safety
    ///
    /// `file` must point at a `struct file` whose refcount is positive for the duration of
    /// the call.
    unsafe fn get(file: NonNull<bindings::file>) -> Self {
        // SAFETY: The refcount is positive, so another reference may be taken.
        unsafe { bindings::get_file(file.as_ptr()) };
        // INVARIANT: The reference just taken is this value's.
        FileRef(file)
    }

    fn as_ptr(&self) -> *mut bindings::file {
        self.0.as_ptr()
    }
}

impl Drop for FileRef {
    fn drop(&mut self) {
        // SAFETY: By the type invariant this value owns one reference, dropped once here.
        // Task context: the callback, which may sleep, so a final `fput()` may run.
        unsafe { bindings::fput(self.0.as_ptr()) };
    }
}

/// The files of one chunk of a stack whose `file_cache` is not known to be in the trace,
/// each held by a reference from its lookup until its event is written (the path and the
/// build-id are read from it after the VMA's lock is dropped); and the names of the
/// file-less mappings the chunk uses. A file whose cookie the first-sight cache knows is
/// not held at all: in steady state a stack takes no reference. On the stack: nothing is
/// allocated, and nothing can fail to be held.
///
/// # Invariants
///
/// The first `nr_files` slots of `files` and the first `nr_names` of `names` are
/// initialised; the others are not.
pub(crate) struct HeldFiles<'k> {
    keys: &'k Keys,
    /// One lookup per frame at most, so a chunk never needs more. Left uninitialised and
    /// dropped only as far as it is used: zeroing and dropping 64 slots would cost more
    /// than the few files a stack holds.
    files: [MaybeUninit<(FileRef, u64)>; CHUNK_FRAMES],
    nr_files: usize,
    /// Files this stack may still hold: its remaining `file_cache` budget, less the files
    /// held and not yet written.
    room: usize,
    /// The names noted, left uninitialised beyond the first `nr_names` like `files`.
    names: [MaybeUninit<Named>; MAX_NAMES],
    nr_names: usize,
    now: u64,
}

impl Drop for HeldFiles<'_> {
    fn drop(&mut self) {
        for file in &mut self.files[..self.nr_files] {
            // SAFETY: By the type invariant the first `nr_files` slots are initialised, and
            // each is dropped once, here.
            unsafe { file.assume_init_drop() };
        }
    }
}

impl<'k> HeldFiles<'k> {
    /// An empty set for a stack with `budget` `file_cache` writes left.
    pub(crate) fn new(keys: &'k Keys, budget: usize) -> Self {
        HeldFiles {
            keys,
            files: [const { MaybeUninit::uninit() }; CHUNK_FRAMES],
            nr_files: 0,
            room: budget,
            names: [const { MaybeUninit::uninit() }; MAX_NAMES],
            nr_names: 0,
            now: now_ns(),
        }
    }

    /// Whether the `file_cache` of `cookie` is known to be in the trace: the file need not
    /// be held.
    pub(crate) fn knows(&self, cookie: u64) -> bool {
        SEEN.is_known(cookie, self.now)
    }

    /// The files held so far, with their cookies (the slots after them are empty).
    fn held(&self) -> impl Iterator<Item = (&FileRef, u64)> {
        self.files[..self.nr_files].iter().map(|slot| {
            // SAFETY: By the type invariant the first `nr_files` slots are initialised.
            let (file, cookie) = unsafe { slot.assume_init_ref() };
            (file, *cookie)
        })
    }

    /// Notes the name of a mapping without a file; returns its cookie, or `None` when the
    /// chunk holds as many names as it can.
    pub(crate) fn hold_name(&mut self, name: &[u8]) -> Option<u64> {
        let cookie = name_cookie(name, &self.keys.name);
        if self.named().any(|named| named.cookie == cookie) {
            return Some(cookie);
        }
        let slot = self.names.get_mut(self.nr_names)?;
        let mut named = Named {
            cookie,
            name: [0; NAME_MAX],
        };
        let len = name.len().min(NAME_MAX - 1);
        named.name[..len].copy_from_slice(&name[..len]);
        slot.write(named);
        // INVARIANT: The slot just written is the one after the initialised ones.
        self.nr_names += 1;
        Some(cookie)
    }

    /// The names noted so far.
    fn named(&self) -> impl Iterator<Item = &Named> {
        self.names[..self.nr_names].iter().map(|slot| {
            // SAFETY: By the type invariant the first `nr_names` slots are initialised.
            unsafe { slot.assume_init_ref() }
        })
    }

    /// Holds `file` (a `vm_file` value read under the VMA's lock), whose cookie is
    /// `cookie`, if its `file_cache` may be due and the stack's budget has room for it.
    ///
    /// # Safety
    ///
    /// `file` must point at a `struct file` with a positive refcount: the caller holds the
    /// lock of a VMA whose `vm_file` it is.
    pub(crate) unsafe fn hold(&mut self, file: *mut bindings::file, cookie: u64) {
        let Some(file) = NonNull::new(file) else {
            return;
        };
        if SEEN.is_known(cookie, self.now) || self.held().any(|(_, c)| c == cookie) {
            return;
        }
        if self.room == 0 {
            stats::add(Stat::FileCacheDeferred, 1);
            return;
        }
        let Some(slot) = self.files.get_mut(self.nr_files) else {
            // More lookups than frames in a chunk: impossible by construction.
            kernel::warn_on!(true);
            return;
        };
        // SAFETY: The caller guarantees `file` is valid with a positive refcount for now; the
        // reference of our own is taken before the VMA lock is dropped.
        slot.write((unsafe { FileRef::get(file) }, cookie));
        self.room -= 1;
        // INVARIANT: The slot just written is the one after the initialised ones.
        self.nr_files += 1;
    }

    /// Writes a `file_cache` event for every held file and name that needs one, before the
    /// chunk's stack, at most `budget` of them (the budget is decreased), and remembers
    /// each that a buffer took. Call it again for the files of the chunk after the stack
    /// if the returned [`Report`] says so.
    ///
    /// Context: task, may sleep.
    pub(crate) fn report(&self, budget: &mut usize) -> Report {
        let generation = SEEN.generation();
        let now = self.now;
        // A name is its own identity: its cookie is the cache key, never forgotten but by
        // eviction, clearing or a reminder.
        for named in self.named() {
            if !take(named.cookie, now, budget) {
                continue;
            }
            // SAFETY: `name` is NUL-terminated within its `NAME_MAX` bytes.
            let committed = unsafe {
                ffi::uu_emit_file_cache(named.cookie, named.name.as_ptr(), [0u8; 0].as_ptr(), 0)
            };
            written(named.cookie, committed, &CachedId::None, now, generation);
        }
        let mut path: Option<KVec<u8>> = None;
        // Without memory for a full path, a short one (shortened visibly) still explains
        // the cookie. No direct reclaim: it may wait for I/O (swap, a filesystem's
        // shrinker), which the callback never does.
        let mut short_path = [0u8; SHORT_PATH_BUF];
        for (file, cookie) in self.held() {
            if !take(cookie, now, budget) {
                continue;
            }
            if path.is_none() {
                path = KVec::from_elem(0u8, PATH_BUF, GFP_NOWAIT | __GFP_NOWARN).ok();
            }
            let buf = path.as_deref_mut().unwrap_or(&mut short_path[..]);
            let (id, committed) = emit(file, cookie, buf, SEEN.build_id(cookie));
            written(cookie, committed, &id, now, generation);
        }
        Report { generation }
    }
}

/// Whether the `file_cache` of `cookie` is due (first sight, or a reminder this caller won)
/// and the stack's budget has room for it; takes from the budget if so.
fn take(cookie: u64, now: u64, budget: &mut usize) -> bool {
    if SEEN.sighting(cookie, now) == Sighting::Known {
        return false;
    }
    if *budget == 0 {
        stats::add(Stat::FileCacheDeferred, 1);
        return false;
    }
    *budget -= 1;
    true
}

/// Notes a `file_cache` written for `cookie`: remembered only when a buffer took it, so
/// that a filtered, pid- or CPU-masked, soft-disabled or dropped one is written again by
/// the next stack that needs it.
fn written(cookie: u64, committed: bool, id: &CachedId, now: u64, generation: u64) {
    stats::add(Stat::FileCache, 1);
    if committed {
        SEEN.record(cookie, id, now, generation);
    } else {
        stats::add(Stat::FileCacheDropped, 1);
    }
}

/// A held file read through the page cache (`uu_file_read()`); notes whether a page was
/// not cached.
struct FileReader<'a> {
    file: &'a FileRef,
    uncached: bool,
}

impl ReadAt for FileReader<'_> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, ReadError> {
        // SAFETY: The file is held by `self.file`; `buf` is valid for `buf.len()` bytes.
        let n = unsafe {
            ffi::uu_file_read(
                self.file.as_ptr().cast(),
                offset,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n == EAGAIN.to_errno().into() {
            self.uncached = true;
        }
        usize::try_from(n).map_err(|_| ReadError)
    }
}

/// Writes the `file_cache` of `file`: its path and its build-id, taken from `cached` or,
/// when the cache does not know it, read from the file's cached pages (none when they are
/// not cached; a reminder tries again). Returns what the event said of the build-id, for
/// the cache, and whether a buffer took the event.
fn emit(file: &FileRef, cookie: u64, buf: &mut [u8], cached: CachedId) -> (CachedId, bool) {
    let id = match cached {
        CachedId::Unknown => {
            let mut reader = FileReader {
                file,
                uncached: false,
            };
            match find_build_id(&mut reader) {
                Some(id) => CachedId::Id(id),
                None if reader.uncached => {
                    stats::add(Stat::BuildIdUncached, 1);
                    CachedId::Unknown
                }
                None => CachedId::None,
            }
        }
        known => known,
    };
    let bytes = match &id {
        CachedId::Id(id) => id.as_bytes(),
        CachedId::None | CachedId::Unknown => &[],
    };
    // SAFETY: The file is held; `buf` is valid for `buf.len()` bytes and the returned path
    // is a NUL-terminated string inside it, valid while `buf` is.
    let committed = unsafe {
        let path = ffi::uu_file_path(file.as_ptr().cast(), buf.as_mut_ptr(), buf.len() as i32);
        ffi::uu_emit_file_cache(cookie, path, bytes.as_ptr(), bytes.len() as u32)
    };
    (id, committed)
}

/// A new reader may be starting, or a buffer was reset: every cookie gets a new
/// `file_cache`.
///
/// Context: any, NMI included (the `file_cache` reg callback, the ring-buffer probes, which
/// fire wherever a ring buffer is switched or reset); lock-free.
#[no_mangle]
pub(crate) extern "C" fn uu_rust_files_reset() {
    reader_start();
}
