// SPDX-License-Identifier: GPL-2.0

//! `user_unwind`: deferred user-space stack traces for ftrace, on kernels that have the
//! deferred unwinder (Linux 6.17+) but not its tracefs half.
//!
//! # Execution contexts
//!
//! - Module init and exit, the option file (`src/option.c`): task context, may sleep.
//! - The request hook (`src/hook.c`): any context a trace event fires in, NMI included, with
//!   preemption disabled. It never allocates, sleeps or faults.
//! - [`uu_rust_stack`]: the deferred-unwind callback, task context on the way back to user
//!   space, inside the unwinder's SRCU read side; may fault and sleep, but never waits for a
//!   lock another task may keep: it takes the per-VMA lock, or tries `mmap_lock` for
//!   reading, one at a time and never across a `file_cache` event (which reads the file).
//!   It faults a page in only under `mmap_lock` (tried), on the VMA it checked under that
//!   lock, and never in `userfaultfd` memory; it reads unwind tables from the files' page
//!   cache, with I/O only on block-backed filesystems.
//! - The exec probe (`src/hook.c`, on `sched_process_exec`): task context, preemption
//!   disabled; it only sets a bit in the task's `unwind_mask`.
//! - [`files::uu_rust_files_reset`]: the `file_cache` reg callback and the ring-buffer
//!   probes, any context, NMI included; lock-free.
//!
//! # Lock order
//!
//! `event_mutex` -> `tracepoints_mutex` -> `uu_hook_lock` -> `ftrace_export_lock`;
//! `uu_option_lock` -> `event_mutex`. The callback takes no lock of the module's.

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::ffi::{c_int, c_ulong};
use kernel::prelude::*;

mod files;
mod layout;
pub mod logic;
mod selftest;
mod stack;
mod stats;
mod unwind;

use logic::siphash::SipKey;

module! {
    type: UserUnwind,
    name: "user_unwind",
    authors: ["The user_unwind authors"],
    description: "Deferred user-space stack traces for ftrace",
    license: "GPL",
    params: {
        enable: bool {
            default: false,
            description: "Switch options/userstacktrace_delay on at load",
        },
    },
}

/// The C half of the module (`include/user_unwind.h`).
mod ffi {
    use crate::logic::frames::FileId;
    use kernel::ffi::{c_int, c_void};

    /// `struct uu_regs`: the user registers of a kernel entry.
    #[repr(C)]
    pub struct UuRegs {
        pub(crate) ip: u64,
        pub(crate) sp: u64,
        pub(crate) bp: u64,
        pub(crate) bx: u64,
    }

    /// `struct uu_region`: a mapping of `current`.
    #[repr(C)]
    #[derive(Default)]
    pub(crate) struct UuRegion {
        pub(crate) start: u64,
        pub(crate) end: u64,
        pub(crate) pgoff: u64,
        pub(crate) id: FileId,
        pub(crate) kind: u32,
        pub(crate) pad: u32,
    }

    /// `struct uu_object`: an object whose unwind table is read.
    #[repr(C)]
    pub(crate) struct UuObject {
        pub(crate) file: *mut c_void,
        pub(crate) folio: *mut c_void,
        pub(crate) start: u64,
        pub(crate) vdso: *const c_void,
        pub(crate) size: u64,
        pub(crate) id: FileId,
        pub(crate) kind: u32,
        pub(crate) writers: u32,
    }

    impl UuObject {
        /// None: what `uu_unwind_object_open()` fills. (Not `Default`: raw pointers have
        /// no `Default` in Debian's Rust 1.85.)
        pub(crate) fn empty() -> Self {
            UuObject {
                file: core::ptr::null_mut(),
                folio: core::ptr::null_mut(),
                start: 0,
                vdso: core::ptr::null(),
                size: 0,
                id: FileId::default(),
                kind: 0,
                writers: 0,
            }
        }
    }

    // The sizes include/user_unwind.h asserts for the same structs: a field added on one
    // side only fails the build, not the unwind.
    const _: () = assert!(
        core::mem::size_of::<UuRegs>() == 32
            && core::mem::size_of::<FileId>() == 32
            && core::mem::size_of::<UuRegion>() == 64
            && core::mem::size_of::<UuObject>() == 80
    );

    /// `UU_REGION_FILE`: a file with an identity.
    pub(crate) const UU_REGION_FILE: u32 = 1;
    /// `UU_REGION_VDSO`: the vDSO.
    pub(crate) const UU_REGION_VDSO: u32 = 2;

    extern "C" {
        pub(crate) fn uu_symbols_init() -> c_int;
        pub(crate) fn uu_hook_init() -> c_int;
        pub(crate) fn uu_hook_exit();
        pub(crate) fn uu_hook_start() -> c_int;
        pub(crate) fn uu_events_init();
        pub(crate) fn uu_option_init(enable: bool) -> c_int;
        pub(crate) fn uu_option_exit();
        pub(crate) fn uu_get_random_key(key: *mut u64) -> c_int;
        pub(crate) fn uu_file_cache_enabled() -> bool;
        pub(crate) fn uu_now_ns() -> u64;
        pub(crate) fn uu_layout(out: *mut usize, n: usize) -> c_int;
        pub(crate) fn uu_stat_add(stat: u32, n: core::ffi::c_ulong);
        #[cfg(CONFIG_KUNIT)] // Only the KUnit suite calls it.
        pub(crate) fn uu_stat_read(stat: u32) -> u64;
        #[cfg(CONFIG_KUNIT)] // Only the KUnit suite calls it.
        pub(crate) fn uu_stat_name(stat: u32) -> *const kernel::ffi::c_char;
        #[cfg(CONFIG_KUNIT)] // Only the KUnit suite calls it.
        pub(crate) fn uu_test_static_calls() -> c_int;
        pub(crate) fn uu_emit_stack(
            cookie: u64,
            start: u16,
            total: u16,
            files: *const u64,
            nr_files: u32,
            lo: *const u32,
            hi: *const u32,
            idx_bits: u8,
            nr: u32,
        );
        pub(crate) fn uu_files_init() -> c_int;
        pub(crate) fn uu_files_exit();
        pub(crate) fn uu_fetch_init() -> c_int;
        pub(crate) fn uu_fetch_exit();
        pub(crate) fn uu_emit_file_cache(
            cookie: u64,
            path: *const u8,
            build_id: *const u8,
            build_id_len: u32,
        ) -> bool;
        pub(crate) fn uu_vma_file_id(
            vma: *mut c_void,
            id: *mut crate::logic::frames::FileId,
        ) -> *mut c_void;
        pub(crate) fn uu_file_path(file: *mut c_void, buf: *mut u8, len: c_int) -> *const u8;
        pub(crate) fn uu_file_read(
            file: *mut c_void,
            offset: u64,
            buf: *mut u8,
            len: usize,
        ) -> core::ffi::c_long;
        pub(crate) fn uu_vma_name(
            vma: *mut c_void,
            buf: *mut u8,
            len: c_int,
            special: *mut bool,
        ) -> c_int;
        pub(crate) fn uu_emit_truncated(cookie: u64, frames: u16, reason: u8);
        pub(crate) fn uu_unwind_user_end() -> u64;
        pub(crate) fn uu_unwind_read(dst: *mut c_void, addr: u64, len: usize) -> c_int;
        pub(crate) fn uu_unwind_region(addr: u64, r: *mut UuRegion) -> c_int;
        pub(crate) fn uu_unwind_ordinary(addr: u64, start: *mut u64, end: *mut u64) -> c_int;
        pub(crate) fn uu_unwind_object_open(addr: u64, o: *mut UuObject) -> c_int;
        pub(crate) fn uu_unwind_object_read(
            o: *mut UuObject,
            offset: u64,
            buf: *mut c_void,
            len: usize,
        ) -> c_int;
        pub(crate) fn uu_unwind_object_settled(o: *mut UuObject) -> bool;
        pub(crate) fn uu_unwind_object_close(o: *mut UuObject);
        pub(crate) fn uu_table_get(
            key: u64,
            words: *mut *mut u64,
            nwords: *mut usize,
        ) -> *mut c_void;
        pub(crate) fn uu_table_put(t: *mut c_void);
        pub(crate) fn uu_table_alloc(nwords: usize, words: *mut *mut u64) -> *mut c_void;
        pub(crate) fn uu_table_publish(t: *mut c_void, key: u64) -> bool;
        pub(crate) fn uu_table_replace(old: *mut c_void, new: *mut c_void);
        pub(crate) fn uu_tables_write_lock();
        pub(crate) fn uu_tables_write_unlock();
        pub(crate) fn uu_tables_retry_at() -> core::ffi::c_ulong;
        pub(crate) fn uu_tables_retry_now(at: core::ffi::c_ulong) -> bool;
        pub(crate) fn uu_vma_memo_find(addr: u64, r: *mut UuRegion) -> c_int;
        pub(crate) fn uu_vma_memo_note(vma: *mut c_void, id: *const crate::logic::frames::FileId);
        #[cfg(CONFIG_KUNIT)] // Only the KUnit suite calls it.
        pub(crate) fn uu_kernel_siphash(data: *const u8, len: usize, key: *const u64) -> u64;
        #[cfg(CONFIG_KUNIT)] // Only the KUnit suite calls it.
        pub(crate) fn uu_kernel_siphash_1u64(value: u64, key: *const u64) -> u64;
    }
}

/// The secret keys of the cookies, drawn from the kernel's random source at load, each
/// on its own. They are not the `%p` key, and never written anywhere user space can read.
static KEYS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// The keys of the two kinds of cookies.
pub(crate) struct Keys {
    /// File cookies: SipHash of a file's identity.
    pub(crate) file: SipKey,
    /// Name cookies: SipHash of the name of a mapping without a file.
    pub(crate) name: SipKey,
}

fn keys() -> Keys {
    let k = |i: usize| KEYS[i].load(Ordering::Relaxed);
    Keys {
        file: SipKey([k(0), k(1)]),
        name: SipKey([k(2), k(3)]),
    }
}

pub(crate) fn to_result(ret: c_int) -> Result {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(())
    }
}

/// A part of the C half, set up at load and torn down on drop.
///
/// # Invariants
///
/// Its `init` succeeded, so calling `exit` once, in task context, is allowed.
struct Part {
    exit: unsafe extern "C" fn(),
}

impl Part {
    /// Sets a part up with `init`, a call into the C half returning 0 or a negative errno.
    ///
    /// # Safety
    ///
    /// `exit` must undo what `init` did, and be callable once in task context after it.
    unsafe fn new(init: impl FnOnce() -> c_int, exit: unsafe extern "C" fn()) -> Result<Self> {
        to_result(init())?;
        // INVARIANT: `init` succeeded.
        Ok(Part { exit })
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `init` succeeded; drop runs once, in task context
        // (module exit or a failed init).
        unsafe { (self.exit)() };
    }
}

struct UserUnwind {
    // Dropped in this order: first no more switching (`options/userstacktrace_delay`
    // removed, events off), then no more requests or callbacks (the deferred-unwind work
    // cancelled, every callback finished), then no more fetching of pages the callbacks
    // missed (src/fetch.c), then no more following of buffer resets (which no callback
    // can need any more).
    _option: Part,
    _hook: Part,
    _fetch: Part,
    _files: Part,
}

impl kernel::Module for UserUnwind {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        layout::check()?;
        // SAFETY: Task context; fills the module's table of resolved symbols once.
        to_result(unsafe { ffi::uu_symbols_init() })?;

        for pair in KEYS.chunks(2) {
            let mut key = [0u64; 2];
            // SAFETY: `key` is valid for two `u64` writes; task context, may sleep.
            to_result(unsafe { ffi::uu_get_random_key(key.as_mut_ptr()) })?;
            for (word, &value) in pair.iter().zip(key.iter()) {
                word.store(value, Ordering::Relaxed);
            }
        }

        // SAFETY: The module's events are registered before its init runs.
        unsafe { ffi::uu_events_init() };

        let enable = module_parameters::enable.value();
        // SAFETY: Each pair is a matching init/exit of the C half, called in task context;
        // `uu_hook_init()` needs the symbols resolved above.
        let (files, fetch, hook) = unsafe {
            let files = Part::new(|| ffi::uu_files_init(), ffi::uu_files_exit)?;
            let fetch = Part::new(|| ffi::uu_fetch_init(), ffi::uu_fetch_exit)?;
            let hook = Part::new(|| ffi::uu_hook_init(), ffi::uu_hook_exit)
                .inspect_err(|e| pr_err!("unwind_deferred_init failed: {:?}\n", e))?;
            (files, fetch, hook)
        };
        // Requests start only now, with everything they use set up, even if the events
        // were enabled while the module was loading (set_event ":mod:user_unwind").
        // SAFETY: Task context, after `uu_hook_init()`; on failure the parts above are
        // dropped, `uu_hook_exit()` among them.
        to_result(unsafe { ffi::uu_hook_start() })?;
        // The tracefs files last: once one exists, an opener holds a reference on the
        // module, and a failed init would free the module under it (do_init_module() does
        // not wait for references). `uu_option_init()` fails only before it created one.
        // SAFETY: A matching init/exit of the C half, called in task context.
        let option = unsafe { Part::new(|| ffi::uu_option_init(enable), ffi::uu_option_exit)? };
        pr_info!("loaded\n");
        Ok(UserUnwind {
            _option: option,
            _hook: hook,
            _fetch: fetch,
            _files: files,
        })
    }
}

/// Parses a write to the option file for `src/option.c`.
///
/// # Safety
///
/// `buf` must be valid for reads of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn uu_rust_parse_option(buf: *const u8, len: usize) -> c_int {
    // SAFETY: The caller guarantees `buf` is valid for `len` bytes.
    let buf = unsafe { core::slice::from_raw_parts(buf, len) };
    match logic::option::parse_option(buf) {
        Ok(on) => c_int::from(on),
        Err(_) => EINVAL.to_errno(),
    }
}

/// Translates and records one deferred stack: the unwind callback's Rust half.
///
/// # Safety
///
/// `ips` must be valid for reads of `nr` entries; called in task context from the deferred
/// unwind callback of `current`.
#[no_mangle]
pub unsafe extern "C" fn uu_rust_stack(ips: *const c_ulong, nr: u32, cookie: u64) {
    let ips = if nr == 0 || ips.is_null() {
        &[][..]
    } else {
        // SAFETY: The caller guarantees `ips` is valid for `nr` entries.
        unsafe { core::slice::from_raw_parts(ips, nr as usize) }
    };
    stack::record(ips, cookie, &keys());
}

/// Unwinds `current`'s user stack with the programs' `.eh_frame` from `regs`, and records
/// it as [`uu_rust_stack`] does; `ips`, the kernel's frame-pointer stack, is recorded when
/// no work buffer is free.
///
/// # Safety
///
/// `regs` must be valid for reads and `ips` for reads of `nr` entries; called in task
/// context from the deferred unwind callback of `current`.
#[no_mangle]
pub unsafe extern "C" fn uu_rust_unwind_stack(
    regs: *const ffi::UuRegs,
    ips: *const c_ulong,
    nr: u32,
    cookie: u64,
) {
    let ips = if nr == 0 || ips.is_null() {
        &[][..]
    } else {
        // SAFETY: The caller guarantees `ips` is valid for `nr` entries.
        unsafe { core::slice::from_raw_parts(ips, nr as usize) }
    };
    // SAFETY: The caller guarantees `regs` is valid for reads.
    let regs = unsafe { &*regs };
    unwind::record(regs, cookie, &keys(), ips);
}
