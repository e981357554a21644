// SPDX-License-Identifier: GPL-2.0

//! `file_cache` events: what each file cookie stands for, written before the first stack
//! that uses it and again whenever the `struct file` behind it may have changed or a reader
//! may have lost it.

use crate::ffi;
use crate::logic::buildid::{find_build_id, ReadAt, ReadError};
use crate::logic::frames::{name_cookie, CHUNK_FRAMES};
use crate::logic::seen::{CachedId, FirstSight, Sighting};
use crate::stack::COOKIES;
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

/// Prepares the `file_cache` events of one chunk: clears the cache when the `__fput` probe
/// may have missed a file's end, then captures the generation, then samples whether a
/// `file_cache` written now lands (the event is enabled and the top-level instance records;
/// one written while either is off is dropped).
fn begin() -> Report {
    // SAFETY: A plain C function without preconditions, called in task context.
    let missed = unsafe { ffi::uu_files_check() };
    if missed {
        reader_start();
    }
    let generation = SEEN.generation();
    // SAFETY: A plain C function without preconditions.
    let on = unsafe { ffi::uu_file_cache_durable() };
    Report {
        generation,
        durable: on && !missed,
    }
}

/// What [`HeldFiles::report`] found: the generation its `file_cache` events were written
/// in (captured before they were, and before the state of the buffer was sampled), and
/// whether they may be remembered.
#[derive(Clone, Copy)]
pub(crate) struct Report {
    generation: u64,
    durable: bool,
}

impl Report {
    /// Whether the `file_cache` events written before the stack may be gone from the trace
    /// now that the stack is written (a reader reset the buffer or switched tracing back on
    /// in between): then [`HeldFiles::repeat`] them after it. Without the ring-buffer probes
    /// nothing says so, and every stack not known durable repeats them.
    pub(crate) fn needs_repeat(&self) -> bool {
        // SAFETY: A plain C function without preconditions.
        let probed = unsafe { ffi::uu_files_resets_probed() };
        SEEN.generation() != self.generation || (!self.durable && !probed)
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

/// Files looked up for one chunk of a stack, each held by a reference until the chunk's
/// events are written, so none can be freed (and its address reused for another file) in
/// between; and the names of the file-less mappings the chunk uses. On the stack: nothing
/// is allocated, and nothing can fail to be held.
///
/// # Invariants
///
/// The first `nr_files` slots of `files` are initialised; the others are not.
pub(crate) struct HeldFiles<'k> {
    keys: &'k Keys,
    /// One lookup per frame at most, so a chunk never needs more. Left uninitialised and
    /// dropped only as far as it is used: a stack holds a handful of files, and zeroing and
    /// dropping 64 slots cost more than the references themselves (Documentation/
    /// performance.rst).
    files: [MaybeUninit<FileRef>; CHUNK_FRAMES],
    nr_files: usize,
    names: [Option<Named>; MAX_NAMES],
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
    pub(crate) fn new(keys: &'k Keys) -> Self {
        HeldFiles {
            keys,
            files: [const { MaybeUninit::uninit() }; CHUNK_FRAMES],
            nr_files: 0,
            names: [None; MAX_NAMES],
        }
    }

    /// The files held so far (the slots after them are empty).
    fn held(&self) -> impl Iterator<Item = &FileRef> {
        self.files[..self.nr_files].iter().map(|file| {
            // SAFETY: By the type invariant the first `nr_files` slots are initialised.
            unsafe { file.assume_init_ref() }
        })
    }

    /// Notes the name of a mapping without a file; returns its cookie, or `None` when the
    /// chunk holds as many names as it can.
    pub(crate) fn hold_name(&mut self, name: &[u8]) -> Option<u64> {
        let cookie = name_cookie(name, &self.keys.name);
        for slot in self.names.iter_mut() {
            match slot {
                Some(named) if named.cookie == cookie => return Some(cookie),
                Some(_) => continue,
                None => {
                    let mut named = Named {
                        cookie,
                        name: [0; NAME_MAX],
                    };
                    let len = name.len().min(NAME_MAX - 1);
                    named.name[..len].copy_from_slice(&name[..len]);
                    *slot = Some(named);
                    return Some(cookie);
                }
            }
        }
        None
    }

    /// Holds `file` (a `vm_file` value read under the VMA's lock) if not held yet.
    ///
    /// # Safety
    ///
    /// `file` must point at a `struct file` with a positive refcount: the caller holds the
    /// lock of a VMA whose `vm_file` it is.
    pub(crate) unsafe fn hold(&mut self, file: *mut bindings::file) {
        let Some(file) = NonNull::new(file) else {
            return;
        };
        if self.held().any(|f| f.0 == file) {
            return;
        }
        let Some(slot) = self.files.get_mut(self.nr_files) else {
            // More lookups than frames in a chunk: impossible by construction.
            kernel::warn_on!(true);
            return;
        };
        // SAFETY: The caller guarantees `file` is valid with a positive refcount for now; the
        // reference of our own is taken before the VMA lock is dropped.
        slot.write(unsafe { FileRef::get(file) });
        // INVARIANT: The slot just written is the one after the initialised ones.
        self.nr_files += 1;
    }

    /// Writes a `file_cache` event for every held file and name that needs one, before the
    /// chunk's stack, at most `budget` of them new (the budget is decreased). Call
    /// [`Self::repeat`] after the stack if the returned [`Report`] says so.
    ///
    /// Context: task, may sleep.
    pub(crate) fn report(&self, budget: &mut usize) -> Report {
        let report = begin();
        let Report {
            generation,
            durable,
        } = report;
        let now = now_ns();
        self.emit_all(
            |key| match SEEN.sighting(key, now) {
                Sighting::Known => Action::Skip,
                // A reminder also refreshes the slot: a build-id not readable at first
                // sight (pages not cached) is read again.
                Sighting::Reminder if durable => Action::WriteAndRecord,
                Sighting::Reminder => Action::Write,
                Sighting::New if *budget == 0 => {
                    stats::add(Stat::FileCacheDeferred, 1);
                    Action::Skip
                }
                Sighting::New => {
                    *budget -= 1;
                    if durable {
                        Action::WriteAndRecord
                    } else {
                        Action::Write
                    }
                }
            },
            |key, id| {
                SEEN.record(key, id, now, generation);
            },
        );
        report
    }

    /// Writes the `file_cache` of every held file and name again, after the chunk's stack.
    /// A reader that resets the buffer while a stack's events are being written keeps the
    /// stack but loses what came before it; these copies explain the stack's cookies right
    /// after it.
    ///
    /// Context: task, may sleep.
    pub(crate) fn repeat(&self) {
        self.emit_all(|_| Action::Write, |_, _| {});
    }

    /// Writes the `file_cache` of each held name and file for which `decide(key)` says so
    /// (the key is a name's cookie or a file's pointer value), and calls `record(key, id)`
    /// right after the event of each one it says to remember, with the build-id the event
    /// carried: only after the event is written, so that whoever finds the key in the cache
    /// writes its stack after that event.
    fn emit_all(
        &self,
        mut decide: impl FnMut(u64) -> Action,
        mut record: impl FnMut(u64, &CachedId),
    ) {
        // A name is its own identity: its cookie is the cache key, never forgotten but by
        // eviction, clearing or a reminder.
        for named in self.names.iter().flatten() {
            let action = decide(named.cookie);
            if action == Action::Skip {
                continue;
            }
            // SAFETY: `name` is NUL-terminated within its `NAME_MAX` bytes.
            unsafe {
                ffi::uu_emit_file_cache(named.cookie, named.name.as_ptr(), [0u8; 0].as_ptr(), 0)
            };
            stats::add(Stat::FileCache, 1);
            if action == Action::WriteAndRecord {
                record(named.cookie, &CachedId::None);
            }
        }
        let mut path: Option<KVec<u8>> = None;
        // Without memory for a full path, a short one (shortened visibly) still explains
        // the cookie.
        let mut short_path = [0u8; SHORT_PATH_BUF];
        for file in self.held() {
            let ptr = file.as_ptr() as usize as u64;
            let action = decide(ptr);
            if action == Action::Skip {
                continue;
            }
            if path.is_none() {
                path = KVec::from_elem(0u8, PATH_BUF, GFP_KERNEL).ok();
            }
            let buf = path.as_deref_mut().unwrap_or(&mut short_path[..]);
            let id = emit(
                file,
                COOKIES.cookie(ptr, &self.keys.file),
                buf,
                SEEN.build_id(ptr),
            );
            if action == Action::WriteAndRecord {
                record(ptr, &id);
            }
        }
    }
}

/// What to do with one held file or name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Nothing: its `file_cache` is in the trace, or the budget is spent.
    Skip,
    /// Write its `file_cache`.
    Write,
    /// Write its `file_cache`, then remember that it is in the trace.
    WriteAndRecord,
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
/// the cache.
fn emit(file: &FileRef, cookie: u64, buf: &mut [u8], cached: CachedId) -> CachedId {
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
    unsafe {
        let path = ffi::uu_file_path(file.as_ptr().cast(), buf.as_mut_ptr(), buf.len() as i32);
        ffi::uu_emit_file_cache(cookie, path, bytes.as_ptr(), bytes.len() as u32);
    }
    stats::add(Stat::FileCache, 1);
    id
}

/// `__fput()` is about to free the `struct file` at `file`.
///
/// Context: task or workqueue, never NMI.
#[no_mangle]
pub(crate) extern "C" fn uu_rust_file_freed(file: usize) {
    SEEN.forget(file as u64);
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

/// Whether `name` (`len` bytes, not NUL-terminated) is `__fput` or a clone of it.
///
/// # Safety
///
/// `name` must be valid for reads of `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn uu_is_fput_symbol(name: *const u8, len: usize) -> bool {
    // SAFETY: The caller guarantees `name` is valid for `len` bytes.
    let name = unsafe { core::slice::from_raw_parts(name, len) };
    crate::logic::ksym::is_fput_symbol(name)
}
