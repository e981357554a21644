// SPDX-License-Identifier: GPL-2.0

//! KUnit: the pure logic's golden vectors replayed inside the kernel, and the project's
//! SipHash checked against the kernel's own C `siphash()`.

#[kernel::macros::kunit_tests(user_unwind)]
mod tests {
    use crate::ffi;
    use crate::logic::buildid::{find_build_id, vectors};
    use crate::logic::frames::{file_cookie, FileId, COOKIE_NO_FILE};
    use crate::logic::offset::{Mapping, OffsetError};
    use crate::logic::option::parse_option;
    use crate::logic::siphash::{siphash, siphash_1u64, TEST_KEY, TEST_MESSAGE, TEST_VECTORS};

    #[test]
    fn siphash_reference_vectors() {
        for (i, want) in TEST_VECTORS.iter().enumerate() {
            assert_eq!(siphash(&TEST_MESSAGE[..i], &TEST_KEY), *want);
        }
    }

    #[test]
    fn siphash_equals_kernel_c() {
        for i in 0..TEST_MESSAGE.len() {
            // SAFETY: The message and the key are valid for the lengths passed.
            let c =
                unsafe { ffi::uu_kernel_siphash(TEST_MESSAGE.as_ptr(), i, TEST_KEY.0.as_ptr()) };
            assert_eq!(siphash(&TEST_MESSAGE[..i], &TEST_KEY), c);
        }
        for value in [0u64, 1, 0xffff_8881_007e_d428, u64::MAX] {
            // SAFETY: The key is valid for two words.
            let c = unsafe { ffi::uu_kernel_siphash_1u64(value, TEST_KEY.0.as_ptr()) };
            assert_eq!(siphash_1u64(value, &TEST_KEY), c);
        }
    }

    #[test]
    fn file_offsets() {
        let m = Mapping {
            start: 0x7f00_0000_1000,
            end: 0x7f00_0000_3000,
            pgoff: 1,
        };
        assert_eq!(m.file_offset(0x7f00_0000_1010, 12), Ok(0x1010));
        assert_eq!(
            m.file_offset(0x7f00_0000_3000, 12),
            Err(OffsetError::OutsideMapping)
        );
        let huge = Mapping {
            start: 0x1000,
            end: 0x2000,
            pgoff: u64::MAX >> 4,
        };
        assert_eq!(huge.file_offset(0x1000, 12), Err(OffsetError::Overflow));
    }

    #[test]
    fn file_cookies_are_the_kernels_siphash_of_the_identity() {
        let id = FileId {
            ino: 1_318_765,
            ctime_sec: 1_764_633_600,
            dev: 0x0803,
            generation: 0x5e1f_04c2,
            ctime_nsec: 123_456_789,
            pad: 0,
        };
        let bytes = id.to_bytes();
        // SAFETY: The bytes and the key are valid for the lengths passed.
        let c = unsafe { ffi::uu_kernel_siphash(bytes.as_ptr(), bytes.len(), TEST_KEY.0.as_ptr()) };
        let cookie = file_cookie(&id, &TEST_KEY);
        assert!(cookie > COOKIE_NO_FILE);
        assert!(c <= COOKIE_NO_FILE || cookie == c);
    }

    #[test]
    fn option_parsing() {
        assert_eq!(parse_option(b"1\n"), Ok(true));
        assert_eq!(parse_option(b"0"), Ok(false));
        assert!(parse_option(b"bogus").is_err());
    }

    #[test]
    fn build_id_vectors() {
        let mut buf = [0u8; vectors::IMAGE_MAX];
        let n = vectors::elf64_le_align8(&mut buf);
        assert_eq!(
            find_build_id(&mut &buf[..n]).map(|id| id.as_bytes() == vectors::ID),
            Some(true)
        );
        let n = vectors::elf64_le(&mut buf);
        let id = find_build_id(&mut &buf[..n]).map(|id| id.as_bytes().len());
        assert_eq!(id, Some(20));
        let n = vectors::elf32_be(&mut buf);
        assert_eq!(
            find_build_id(&mut &buf[..n]).map(|id| id.as_bytes() == vectors::ID),
            Some(true)
        );
        for len in 0..n {
            assert!(find_build_id(&mut &buf[..len]).is_none());
        }
    }

    /// Every struct field the module and its kernel-crate calls read sits where C has it
    /// (also checked at load, which refuses bindings that disagree).
    #[test]
    fn bindings_layout_is_c_layout() {
        let bad = crate::layout::mismatches().map(|m| m.count());
        assert_eq!(bad, Ok(0));
    }

    /// A callback without frames (here: a kernel thread, without an mm) still writes its
    /// cookie's stack record, with `total` 0. The record itself is checked by the guest
    /// test, which has the events on while this runs at insmod: a probe of the test's own
    /// on the tracepoint would patch its call sites while user tasks run through them,
    /// which QEMU's TCG does not survive (an int3 Oops, as with function_graph).
    #[test]
    fn an_empty_stack_writes_a_record() {
        use crate::stats::{read, Stat};
        let before = read(Stat::EmptyStacks);
        // SAFETY: No frames to read; task context.
        unsafe { crate::uu_rust_stack(core::ptr::null(), 0, 0x3_0000_0007) };
        assert_eq!(read(Stat::EmptyStacks), before + 1);
    }

    /// A record slot of the pool stays its holder's while another callback looks for one:
    /// the second look, which starts at the same slot, must pass it by and leave it busy
    /// (a slot found busy was once freed by the look, and two stacks shared a record).
    #[test]
    fn a_held_record_slot_stays_held() {
        use crate::stack::PooledRecord;
        // Slots other callbacks hold are passed by alike; with all of them held, none.
        let Some(first) = PooledRecord::take(0x5_0000_0001) else {
            return;
        };
        let second = PooledRecord::take(0x5_0000_0001);
        assert!(first.is_busy());
        assert!(!second.as_ref().is_some_and(|s| s.same_slot(&first)));
        assert!(second.as_ref().is_none_or(|s| s.is_busy()));
    }

    /// `src/stats.rs` mirrors C's `enum uu_stat` by hand: each Rust value must be the C
    /// counter of the same name.
    #[test]
    fn rust_counters_are_cs() {
        use crate::stats::Stat;
        use kernel::str::{CStr, CStrExt};
        for (stat, name) in [
            (Stat::Stacks, c"stacks"),
            (Stat::Frames, c"frames"),
            (Stat::EmptyStacks, c"empty_stacks"),
            (Stat::FileCache, c"file_cache"),
            (Stat::FileCacheDeferred, c"file_cache_deferred"),
            (Stat::BuildIdUncached, c"build_id_uncached"),
            (Stat::CacheResets, c"cache_resets"),
            (Stat::FileCacheDropped, c"file_cache_dropped"),
            (Stat::LookupsContended, c"lookups_contended"),
            (Stat::StacksAfterExec, c"stacks_after_exec"),
            (Stat::UnwindStacks, c"unwind_stacks"),
            (Stat::UnwindCfiFrames, c"unwind_cfi_frames"),
            (Stat::UnwindFpFrames, c"unwind_fp_frames"),
            (Stat::UnwindRowMisses, c"unwind_row_misses"),
            (Stat::UnwindCfiErrors, c"unwind_cfi_errors"),
            (Stat::UnwindTruncated, c"unwind_truncated"),
            (Stat::UnwindReadsUnfaulted, c"unwind_reads_unfaulted"),
            (Stat::UnwindTablesUnread, c"unwind_tables_unread"),
            (Stat::UnwindPoolBusy, c"unwind_pool_busy"),
            (Stat::MemoExpired, c"memo_expired"),
            (Stat::UnwindReadsRefused, c"unwind_reads_refused"),
            (Stat::UnwindTablesUnstable, c"unwind_tables_unstable"),
            (Stat::UnwindRowsParsed, c"unwind_rows_parsed"),
            (Stat::UnwindTablesMade, c"unwind_tables_made"),
            (Stat::UnwindTablesDropped, c"unwind_tables_dropped"),
            (Stat::UnwindTablesRefused, c"unwind_tables_refused"),
            (Stat::FetchesQueued, c"fetches_queued"),
            (Stat::FetchesDropped, c"fetches_dropped"),
            (Stat::UnwindTablesEvicted, c"unwind_tables_evicted"),
        ] {
            // SAFETY: C returns a static NUL-terminated string for every value.
            let got = unsafe { CStr::from_char_ptr(ffi::uu_stat_name(stat as u32)) };
            assert_eq!(got, name);
        }
    }

    /// The unexported functions are reached through static calls patched to direct calls
    /// and jumps (no indirect branch for IBT to trap): each points at what kallsyms says,
    /// and its trampoline is a `jmp rel32` there.
    #[test]
    fn static_calls_point_at_the_kernel_functions() {
        // SAFETY: Task context, after module init resolved the symbols.
        assert_eq!(unsafe { ffi::uu_test_static_calls() }, 0);
    }
}
