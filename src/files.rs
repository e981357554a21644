// SPDX-License-Identifier: GPL-2.0

//! `file_cache` events: what each file cookie stands for, written before the first stack
//! that uses it and again whenever the `struct file` behind it may have changed.

use crate::ffi;
use crate::logic::buildid::{find_build_id, ReadAt, ReadError};
use crate::logic::frames::{file_cookie, name_cookie, CHUNK_FRAMES};
use crate::logic::seen::{FirstSight, Sighting};
use crate::logic::siphash::SipKey;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::fs::file::File;
use kernel::prelude::*;
use kernel::sync::aref::ARef;

/// Which files already have their `file_cache` in the trace.
static SEEN: FirstSight = FirstSight::new();

/// Whether the top-level instance was recording at the last stack.
static RECORDING: AtomicBool = AtomicBool::new(false);

/// When a reader last may have started (`ktime_get_mono_fast_ns()`): tracing switched on, or
/// `file_cache` enabled.
static READER_START: AtomicU64 = AtomicU64::new(0);

/// For this long after a reader may have started, every stack writes the `file_cache` of
/// every file it uses: a reader that starts clears the buffer around that moment
/// (`trace-cmd record` enables the events, switches tracing on and resets the buffers), and
/// what was written before the clear is gone.
const READER_START_GRACE_NS: u64 = 200_000_000;

fn now_ns() -> u64 {
    // SAFETY: A plain C function without preconditions, callable in any context.
    unsafe { ffi::uu_now_ns() }
}

/// A reader may be starting: forget every file.
fn reader_start() {
    READER_START.store(now_ns(), Ordering::Relaxed);
    SEEN.clear();
}

/// Whether a `file_cache` written now is known to stay in the trace, so that the file may
/// be remembered. While tracing is off events are dropped; when it comes back on, a reader
/// may be starting.
fn durable() -> bool {
    // SAFETY: A plain C function without preconditions.
    let on = unsafe { ffi::uu_tracing_on() };
    if RECORDING.swap(on, Ordering::Relaxed) != on && on {
        reader_start();
    }
    on && now_ns().wrapping_sub(READER_START.load(Ordering::Relaxed)) > READER_START_GRACE_NS
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

/// Files looked up for one chunk of a stack, each held by a reference until the chunk's
/// events are written, so none can be freed (and its address reused for another file) in
/// between; and the names of the file-less mappings the chunk uses. On the stack: nothing
/// is allocated, and nothing can fail to be held.
pub(crate) struct HeldFiles<'k> {
    key: &'k SipKey,
    /// One lookup per frame at most, so a chunk never needs more.
    files: [Option<ARef<File>>; CHUNK_FRAMES],
    nr_files: usize,
    names: [Option<Named>; MAX_NAMES],
}

impl<'k> HeldFiles<'k> {
    pub(crate) fn new(key: &'k SipKey) -> Self {
        HeldFiles {
            key,
            files: [const { None }; CHUNK_FRAMES],
            nr_files: 0,
            names: [None; MAX_NAMES],
        }
    }

    /// Notes the name of a mapping without a file; returns its cookie, or `None` when the
    /// chunk holds as many names as it can.
    pub(crate) fn hold_name(&mut self, name: &[u8]) -> Option<u64> {
        let cookie = name_cookie(name, self.key);
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
    pub(crate) unsafe fn hold(&mut self, file: *mut kernel::bindings::file) {
        if self.files.iter().flatten().any(|f| f.as_ptr() == file) {
            return;
        }
        let Some(slot) = self.files.get_mut(self.nr_files) else {
            // More lookups than frames in a chunk: impossible by construction.
            kernel::warn_on!(true);
            return;
        };
        // SAFETY: The caller guarantees `file` is valid with a positive refcount for now;
        // `ARef::from` takes a reference of our own before the VMA lock is dropped. The
        // module never calls `fdget_pos` on it.
        *slot = Some(ARef::from(unsafe { File::from_raw_file(file) }));
        self.nr_files += 1;
    }

    /// Writes a `file_cache` event for every held file and name that needs one, before the
    /// chunk's stack. Returns whether they are durable; if not, call [`Self::repeat`] after
    /// the stack.
    ///
    /// Context: task, may sleep.
    pub(crate) fn report(&self) -> bool {
        let durable = durable();
        self.emit_all(|key| SEEN.sighting(key), durable);
        durable
    }

    /// Writes the `file_cache` of every held file and name again, after the chunk's stack.
    /// A reader that clears the buffer while a stack's events are being written keeps the
    /// stack but loses what came before it; during the reader-start grace these copies
    /// explain the cookies of such a stack right after it.
    ///
    /// Context: task, may sleep.
    pub(crate) fn repeat(&self) {
        self.emit_all(|_| Sighting::Reminder, false);
    }

    /// Writes the `file_cache` of each held name and file that `sighting(key)` does not
    /// call known (the key is a name's cookie or a file's pointer value), and, when the
    /// events are `durable`, remembers the new ones: only after their event is written, so
    /// that whoever finds them in the cache writes its stack after that event.
    fn emit_all(&self, mut sighting: impl FnMut(u64) -> Sighting, durable: bool) {
        let remember = |key, seen| {
            if seen == Sighting::New && durable {
                SEEN.record(key);
            }
        };
        // A name is its own identity: its cookie is the cache key, never forgotten but by
        // eviction, clearing or a reminder.
        for named in self.names.iter().flatten() {
            let seen = sighting(named.cookie);
            if seen == Sighting::Known {
                continue;
            }
            // SAFETY: `name` is NUL-terminated within its `NAME_MAX` bytes.
            unsafe {
                ffi::uu_emit_file_cache(named.cookie, named.name.as_ptr(), [0u8; 0].as_ptr(), 0)
            };
            remember(named.cookie, seen);
        }
        let mut path: Option<KVec<u8>> = None;
        // Without memory for a full path, a short one (shortened visibly) still explains
        // the cookie.
        let mut short_path = [0u8; SHORT_PATH_BUF];
        for file in self.files.iter().flatten() {
            let ptr = file.as_ptr() as usize as u64;
            let seen = sighting(ptr);
            if seen == Sighting::Known {
                continue;
            }
            if path.is_none() {
                path = KVec::from_elem(0u8, PATH_BUF, GFP_KERNEL).ok();
            }
            let buf = path.as_deref_mut().unwrap_or(&mut short_path[..]);
            emit(file, file_cookie(ptr, self.key), buf);
            remember(ptr, seen);
        }
    }
}

/// A held file read through `kernel_read()`.
struct FileReader<'a>(&'a File);

impl ReadAt for FileReader<'_> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, ReadError> {
        // SAFETY: The file is held by `self.0`; `buf` is valid for `buf.len()` bytes.
        let n = unsafe {
            ffi::uu_file_read(self.0.as_ptr().cast(), offset, buf.as_mut_ptr(), buf.len())
        };
        usize::try_from(n).map_err(|_| ReadError)
    }
}

fn emit(file: &File, cookie: u64, buf: &mut [u8]) {
    let build_id = find_build_id(&mut FileReader(file));
    let id = build_id.as_ref().map_or(&[][..], |id| id.as_bytes());
    // SAFETY: The file is held; `buf` is valid for `buf.len()` bytes and the returned path
    // is a NUL-terminated string inside it, valid while `buf` is.
    unsafe {
        let path = ffi::uu_file_path(file.as_ptr().cast(), buf.as_mut_ptr(), buf.len() as i32);
        ffi::uu_emit_file_cache(cookie, path, id.as_ptr(), id.len() as u32);
    }
}

/// `__fput()` is about to free the `struct file` at `file`.
///
/// Context: task or workqueue, never NMI.
#[no_mangle]
pub(crate) extern "C" fn uu_rust_file_freed(file: usize) {
    SEEN.forget(file as u64);
}

/// A new reader may be starting: every cookie gets a new `file_cache`.
#[no_mangle]
pub(crate) extern "C" fn uu_rust_files_reset() {
    reader_start();
}
