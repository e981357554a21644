/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The user_unwind trace events. Field types and print formats are chosen so that
 * libtraceevent 1.7.1 parses them: literal element sizes, __print_array, no
 * __print_dynamic_array.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM user_unwind

#if !defined(_USER_UNWIND_EVENTS_H) || defined(TRACE_HEADER_MULTI_READ)
#define _USER_UNWIND_EVENTS_H

#include <linux/tracepoint.h>
#include <user_unwind.h>

/* Recorded after every trace event hit by a user task while requests are on. */
TRACE_EVENT_FN(user_unwind_cookie,

	TP_PROTO(u64 cookie),

	TP_ARGS(cookie),

	TP_STRUCT__entry(
		__field(u64, cookie)
	),

	TP_fast_assign(
		__entry->cookie = cookie;
	),

	TP_printk("cookie=%llx", __entry->cookie),

	uu_hook_enable, uu_hook_disable
);

/*
 * The user stack of one kernel entry, or frames [start, start + nr) of it when it is
 * deeper than one record holds. files[] holds the distinct file cookies of the record's
 * frames (0: no mapping, the value is the address; 1: anonymous memory without a name, the
 * value is the address). offs[] holds a 32-bit word a frame (nr words), or, in a wide
 * record, two (2 * nr: the low halves of the values, then the high halves). The top
 * idx_bits bits of a frame's word (its second word in a wide record) are the index i of
 * its file, whose cookie is files[i]; the other bits are its value: an offset in the
 * mapped file, or in a special mapping such as [vdso], or the address in anonymous memory.
 * idx_bits is the fewest that number every file (0 for one); the two u8 fields sit in
 * what would be padding before the __data_loc words.
 */
TRACE_EVENT(user_unwind_stack,

	TP_PROTO(u64 cookie, u16 start, u16 total, const u64 *files, u32 nr_files,
		 const u32 *lo, const u32 *hi, u8 idx_bits, u32 nr),

	TP_ARGS(cookie, start, total, files, nr_files, lo, hi, idx_bits, nr),

	TP_STRUCT__entry(
		__field(u64, cookie)
		__field(u16, start)
		__field(u16, total)
		__field(u8, idx_bits)
		__field(u8, wide)
		__dynamic_array(u64, files, nr_files)
		__dynamic_array(u32, offs, hi ? 2 * nr : nr)
	),

	TP_fast_assign(
		__entry->cookie = cookie;
		__entry->start = start;
		__entry->total = total;
		__entry->idx_bits = idx_bits;
		__entry->wide = !!hi;
		memcpy(__get_dynamic_array(files), files, nr_files * 8);
		memcpy(__get_dynamic_array(offs), lo, nr * 4);
		if (hi)
			memcpy((u32 *)__get_dynamic_array(offs) + nr, hi, nr * 4);
	),

	TP_printk("cookie=%llx start=%u total=%u idx_bits=%u wide=%u files=%s offs=%s",
		  __entry->cookie, __entry->start, __entry->total, __entry->idx_bits,
		  __entry->wide,
		  __print_array(__get_dynamic_array(files),
				__get_dynamic_array_len(files) / 8, 8),
		  __print_array(__get_dynamic_array(offs),
				__get_dynamic_array_len(offs) / 4, 4))
);

/*
 * The .eh_frame unwinder's stack of @cookie ends short of its outermost frame, after
 * @frames frames (its user_unwind_stack records, written just before, hold them all):
 * the frame limit, a malformed, unsupported or over-budget table, a frame that failed a
 * sanity check (or that only the frame-pointer rule could have unwound, and it failed), an
 * unreadable stack, or a return address outside user space. A complete stack, and every
 * stack of the frame-pointer unwinder (unwinder=fp), has none.
 */
TRACE_EVENT(user_unwind_truncated,

	TP_PROTO(u64 cookie, u16 frames, u8 reason),

	TP_ARGS(cookie, frames, reason),

	TP_STRUCT__entry(
		__field(u64, cookie)
		__field(u16, frames)
		__field(u8, reason)
	),

	TP_fast_assign(
		__entry->cookie = cookie;
		__entry->frames = frames;
		__entry->reason = reason;
	),

	TP_printk("cookie=%llx frames=%u reason=%s", __entry->cookie, __entry->frames,
		  __print_symbolic(__entry->reason, { 1, "limit" }, { 2, "table" },
				   { 3, "bad_frame" }, { 4, "read" }, { 5, "not_user" }))
);

/*
 * What a file cookie stands for: the path of the file as the traced task sees it and its
 * GNU build-id (build_id_len 0: none); for a named mapping without a file, its name.
 * Written before the first stack that uses the cookie, again after the file behind the
 * cookie changed, as a periodic reminder, and around every stack for a while after a
 * reader starts (see Documentation/user_unwind.rst).
 */
TRACE_EVENT_FN(file_cache,

	TP_PROTO(u64 cookie, const char *path, const u8 *build_id, u32 build_id_len),

	TP_ARGS(cookie, path, build_id, build_id_len),

	TP_STRUCT__entry(
		__field(u64, cookie)
		__field(u32, build_id_len)
		__string(path, path)
		__dynamic_array(u8, build_id, build_id_len)
	),

	TP_fast_assign(
		__entry->cookie = cookie;
		__entry->build_id_len = build_id_len;
		__assign_str(path);
		memcpy(__get_dynamic_array(build_id), build_id, build_id_len);
	),

	TP_printk("cookie=%llx path=%s build_id=%s build_id_len=%u",
		  __entry->cookie, __get_str(path),
		  __print_hex_str(__get_dynamic_array(build_id),
				  __get_dynamic_array_len(build_id)),
		  __entry->build_id_len),

	uu_file_cache_reg, uu_file_cache_unreg
);

#endif /* _USER_UNWIND_EVENTS_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE events
#include <trace/define_trace.h>
