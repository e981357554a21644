// SPDX-License-Identifier: GPL-2.0
/*
 * The user_unwind trace events, and the one-frame-per-line output of
 * user_unwind_stack in the trace file.
 */
#include <linux/trace_events.h>

#define CREATE_TRACE_POINTS
#include "events.h"

void uu_emit_stack(u64 cookie, u16 start, u16 total, const u64 *files,
		   u32 nr_files, const u32 *lo, const u32 *hi, const u8 *idx, u32 nr)
{
	trace_user_unwind_stack(cookie, start, total, files, nr_files, lo, hi, idx, nr);
}

void uu_emit_file_cache(u64 cookie, const char *path, const u8 *build_id,
			u32 build_id_len)
{
	trace_file_cache(cookie, path, build_id, build_id_len);
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

/*
 * Whether a file_cache written now lands in the trace: the event is enabled and the
 * top-level instance records. One written while either is off is lost, so the first-sight
 * cache must not remember it (the option switches the events on and off one by one, and a
 * user may do it in any order).
 */
bool uu_file_cache_durable(void)
{
	return trace_file_cache_enabled() && tracing_is_on();
}

/* Context: any, including NMI. */
bool uu_is_own_event(unsigned short type)
{
	return type == event_user_unwind_cookie.event.type ||
	       type == event_user_unwind_stack.event.type ||
	       type == event_file_cache.event.type;
}

/* Context: any, including NMI. */
bool uu_is_cookie_event(unsigned short type)
{
	return type == event_user_unwind_cookie.event.type;
}

static const void *uu_dynamic_array(const void *entry, u32 data_loc, u32 *len)
{
	*len = data_loc >> 16;
	return entry + (data_loc & 0xffff);
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
	const u8 *idx;
	u32 nr, nr_files, nr_offs, i;

	files = uu_dynamic_array(field, field->__data_loc_files, &nr_files);
	offs = uu_dynamic_array(field, field->__data_loc_offs, &nr_offs);
	idx = uu_dynamic_array(field, field->__data_loc_file_idx, &nr);
	nr_files /= sizeof(u64);
	nr_offs /= sizeof(u32);
	nr = min(nr, nr_offs);

	trace_seq_printf(s, "user_unwind_stack: cookie=%llx", field->cookie);
	if (!field->total)
		trace_seq_puts(s, " (no frames)");
	else if (field->start || nr != field->total)
		trace_seq_printf(s, " frames %u-%u of %u", field->start,
				 field->start + nr, field->total);
	trace_seq_putc(s, '\n');
	for (i = 0; i < nr && !trace_seq_has_overflowed(s); i++) {
		u64 value = offs[i];

		if (nr_offs >= 2 * nr)
			value |= (u64)offs[nr + i] << 32;
		if (idx[i] < nr_files)
			trace_seq_printf(s, " => <%016llx> : 0x%016llx\n", value,
					 files[idx[i]]);
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
 * print it with them (until then the format's TP_printk prints it).
 */
void uu_events_init(void)
{
	uu_stack_funcs.raw = event_user_unwind_stack.event.funcs->raw;
	uu_stack_funcs.hex = event_user_unwind_stack.event.funcs->hex;
	uu_stack_funcs.binary = event_user_unwind_stack.event.funcs->binary;
	WRITE_ONCE(event_user_unwind_stack.event.funcs, &uu_stack_funcs);
}
