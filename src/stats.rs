// SPDX-License-Identifier: GPL-2.0

//! The module's counters, kept per CPU in C (`src/stats.c`) and read in
//! `/sys/kernel/tracing/user_unwind_stats`.

use crate::ffi;

/// A counter: the values of `enum uu_stat` in `include/user_unwind.h`.
#[derive(Clone, Copy)]
#[repr(u32)]
pub(crate) enum Stat {
    Stacks = 6,
    Frames = 7,
    EmptyStacks = 8,
    FileCache = 9,
    FileCacheDeferred = 10,
    BuildIdUncached = 11,
    CacheResets = 12,
    FileCacheDropped = 13,
    LookupsContended = 14,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    StacksAfterExec = 15,
    UnwindStacks = 16,
    UnwindCfiFrames = 17,
    UnwindFpFrames = 18,
    UnwindRowMisses = 19,
    UnwindCfiErrors = 20,
    UnwindTruncated = 21,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    UnwindReadsUnfaulted = 22,
    UnwindTablesUnread = 23,
    UnwindPoolBusy = 24,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    MemoExpired = 26,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    UnwindReadsRefused = 27,
    UnwindTablesUnstable = 28,
    UnwindRowsParsed = 29,
    UnwindTablesMade = 30,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    UnwindTablesDropped = 31,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    UnwindTablesRefused = 32,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    FetchesQueued = 33,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    FetchesDropped = 34,
    // Counted in C; named here for the KUnit check of the names.
    #[cfg_attr(not(CONFIG_KUNIT), allow(dead_code))]
    UnwindTablesEvicted = 35,
}

/// The sum of `stat` over all CPUs.
///
/// Context: any.
#[cfg(CONFIG_KUNIT)]
pub(crate) fn read(stat: Stat) -> u64 {
    // SAFETY: A plain C function without preconditions; `stat` is a valid `enum uu_stat`.
    unsafe { ffi::uu_stat_read(stat as u32) }
}

/// Adds `n` to `stat`.
///
/// Context: any.
pub(crate) fn add(stat: Stat, n: u64) {
    // SAFETY: A plain C function without preconditions; `stat` is a valid `enum uu_stat`
    // (the KUnit suite compares the values with C's names).
    unsafe { ffi::uu_stat_add(stat as u32, n as core::ffi::c_ulong) };
}
