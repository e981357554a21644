// SPDX-License-Identifier: GPL-2.0
/*
 * The user_unwind trace events, and the one-frame-per-line output of
 * user_unwind_stack in the trace file.
 */
#include <linux/capability.h>
#include <linux/percpu.h>
#include <linux/perf_event.h>
#include <linux/preempt.h>
#include <linux/trace_events.h>

#define CREATE_TRACE_POINTS
#include "events.h"

/* file_cache events that reached trace_event_buffer_commit() on this CPU. */
static DEFINE_PER_CPU(unsigned long, uu_file_cache_commits);

void uu_emit_stack(u64 cookie, u16 start, u16 total, const u64 *files,
		   u32 nr_files, const u32 *lo, const u32 *hi, u8 idx_bits, u32 nr)
{
	trace_user_unwind_stack(cookie, start, total, files, nr_files, lo, hi, idx_bits, nr);
}

/* Context: task, the deferred callback. */
void uu_emit_truncated(u64 cookie, u16 frames, u8 reason)
{
	trace_user_unwind_truncated(cookie, frames, reason);
}

/**
 * uu_emit_file_cache - write a file_cache event
 * @cookie: the file or name cookie
 * @path: its path or name, NUL-terminated
 * @build_id: its build-id, @build_id_len bytes
 * @build_id_len: 0 when it has none
 *
 * Whether some instance's buffer took the event is seen through the export (src/hook.c),
 * which trace_event_buffer_commit() calls after the event passed its filter, the pid and
 * CPU masks and soft-disable, and found room in the buffer: only such an event may be
 * remembered as written. (An event of a filtered file sits in the per-CPU buffered event
 * until then, and its copy into a full buffer may still fail after the export: the module
 * then writes the file's next file_cache at its reminder.)
 *
 * Context: task, file_cache events are written nowhere else.
 * Return: true when an instance took the event.
 */
bool uu_emit_file_cache(u64 cookie, const char *path, const u8 *build_id,
			u32 build_id_len)
{
	unsigned long before;

	guard(preempt)();
	before = this_cpu_read(uu_file_cache_commits);
	trace_file_cache(cookie, path, build_id, build_id_len);
	return this_cpu_read(uu_file_cache_commits) != before;
}

/* Context: any, including NMI: the export saw a file_cache event committed on this CPU. */
void uu_file_cache_committed(void)
{
	this_cpu_inc(uu_file_cache_commits);
}

/* Whether any instance enables file_cache: without it no stack does file_cache's work. */
bool uu_file_cache_enabled(void)
{
	return trace_file_cache_enabled();
}

/*
 * A reader that enables file_cache now (trace-cmd record starting, an instance) must see a
 * file_cache for every cookie it will read: forget what earlier readers were told.
 */
int uu_file_cache_reg(void)
{
	uu_rust_files_reset();
	return 0;
}

void uu_file_cache_unreg(void)
{
}

/* Context: any, including NMI. */
bool uu_is_own_event(unsigned short type)
{
	return type == event_user_unwind_cookie.event.type ||
	       type == event_user_unwind_stack.event.type ||
	       type == event_user_unwind_truncated.event.type ||
	       type == event_file_cache.event.type;
}

/* Context: any, including NMI. */
bool uu_is_cookie_event(unsigned short type)
{
	return type == event_user_unwind_cookie.event.type;
}

/* Context: any, including NMI. */
bool uu_is_file_cache_event(unsigned short type)
{
	return type == event_file_cache.event.type;
}

#ifdef CONFIG_PERF_EVENTS
/*
 * perf_event_open() on the module's events runs their reg callbacks, which start requests
 * for every task and clear the first-sight cache, system-wide: only for those who may
 * trace the whole system. An event inherited by a fork of a task an allowed opener traces
 * was allowed with its parent.
 */
static int uu_perf_perm(struct trace_event_call *call, struct perf_event *event)
{
	if (event->parent)
		return 0;
	return perfmon_capable() ? 0 : -EPERM;
}
#endif

/*
 * A dynamic array of an entry of @size bytes, or none when its __data_loc points outside
 * the entry: a persistent ring buffer (reserve_mem) hands back what a previous boot, or a
 * corruption, left there.
 */
static const void *uu_dynamic_array(const void *entry, unsigned int size, u32 data_loc,
				    u32 *len)
{
	u32 off = data_loc & 0xffff;

	*len = data_loc >> 16;
	if (off > size || *len > size - off) {
		*len = 0;
		return entry;
	}
	return entry + off;
}

/*
 * In the seed's spirit, one frame per line with its full file cookie:
 *   user_unwind_stack: cookie=300000004
 *    => <000000000008f687> : 0x5c1d0e9b3a7f4e21
 */
static enum print_line_t uu_stack_output(struct trace_iterator *iter,
					 int flags, struct trace_event *event)
{
	struct trace_event_raw_user_unwind_stack *field = (void *)iter->ent;
	struct trace_seq *s = &iter->seq;
	const u64 *files;
	const u32 *offs;
	u32 nr, nr_files, i, bits, vmask;

	if (iter->ent_size < (int)sizeof(*field))
		return TRACE_TYPE_UNHANDLED;
	files = uu_dynamic_array(field, iter->ent_size, field->__data_loc_files, &nr_files);
	offs = uu_dynamic_array(field, iter->ent_size, field->__data_loc_offs, &nr);
	nr_files /= sizeof(u64);
	nr /= sizeof(u32);
	if (field->wide)
		nr /= 2;
	/* A damaged idx_bits reads as none: every frame then names files[0]. */
	bits = field->idx_bits < 32 ? field->idx_bits : 0;
	vmask = U32_MAX >> bits;

	trace_seq_printf(s, "user_unwind_stack: cookie=%llx", field->cookie);
	if (!field->total)
		trace_seq_puts(s, " (no frames)");
	else if (field->start || nr != field->total)
		trace_seq_printf(s, " frames %u-%u of %u", field->start,
				 field->start + nr, field->total);
	trace_seq_putc(s, '\n');
	for (i = 0; i < nr && !trace_seq_has_overflowed(s); i++) {
		u32 word = field->wide ? offs[nr + i] : offs[i];
		u32 idx = bits ? word >> (32 - bits) : 0;
		u64 value = word & vmask;

		/* A wide value is signed: sign-extended from its low (64 - bits) bits. */
		if (field->wide)
			value = (u64)((s64)((value << 32 | offs[i]) << bits) >> bits);
		if (idx < nr_files)
			trace_seq_printf(s, " => <%016llx> : 0x%016llx\n", value,
					 files[idx]);
		else
			trace_seq_printf(s, " => <%016llx> : ?\n", value);
	}

	return trace_handle_return(s);
}

static struct trace_event_functions uu_stack_funcs = {
	.trace = uu_stack_output,
};

/*
 * The text output of user_unwind_stack: the event's own trace_event_functions are the
 * TRACE_EVENT macro's, so the event points at the module's instead, before any reader can
 * print it with them (until then the format's TP_printk prints it). And perf's permission
 * check on the events (a perf_event_open() racing the load, before this runs, passes with
 * the default check; its reg callback only notes that requests are wanted until init ends).
 */
void uu_events_init(void)
{
#ifdef CONFIG_PERF_EVENTS
	event_user_unwind_cookie.perf_perm = uu_perf_perm;
	event_user_unwind_stack.perf_perm = uu_perf_perm;
	event_file_cache.perf_perm = uu_perf_perm;
	event_user_unwind_truncated.perf_perm = uu_perf_perm;
#endif
	uu_stack_funcs.raw = event_user_unwind_stack.event.funcs->raw;
	uu_stack_funcs.hex = event_user_unwind_stack.event.funcs->hex;
	uu_stack_funcs.binary = event_user_unwind_stack.event.funcs->binary;
	WRITE_ONCE(event_user_unwind_stack.event.funcs, &uu_stack_funcs);
}
