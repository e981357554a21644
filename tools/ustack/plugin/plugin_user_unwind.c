// SPDX-License-Identifier: GPL-2.0
/*
 * libtraceevent plugin for user_unwind's events: trace-cmd report prints each frame of a
 * user_unwind_stack record on its own line as "=> path+0xoffset", the path taken from
 * the file_cache events the report has printed so far (a file cookie stands for the
 * file of the most recent file_cache with it). A cookie not seen yet prints as
 * "[cookie]+0xoffset"; anonymous memory as its raw address.
 *
 * Install: make -C tools/ustack/plugin install (into ~/.local/lib/traceevent/plugins, or
 * $TRACEEVENT_PLUGIN_DIR if set).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>
#include <trace-seq.h>

#define COOKIE_NO_VMA	0
#define COOKIE_ANON	1

struct uu_file {
	unsigned long long cookie;
	char *path;
};

/* Open addressing, a power-of-two size, never more than half full. */
static struct uu_file *uu_files;
static size_t uu_nr_files, uu_size_files;

static size_t uu_slot(unsigned long long cookie, size_t size)
{
	size_t i = (size_t)(cookie * 0x9e3779b97f4a7c15ULL) & (size - 1);

	while (uu_files[i].path && uu_files[i].cookie != cookie)
		i = (i + 1) & (size - 1);
	return i;
}

static const char *uu_path(unsigned long long cookie)
{
	size_t i;

	if (!uu_size_files)
		return NULL;
	i = uu_slot(cookie, uu_size_files);
	return uu_files[i].path;
}

static int uu_grow(void)
{
	struct uu_file *old = uu_files;
	size_t old_size = uu_size_files, i;
	size_t size = old_size ? 2 * old_size : 64;

	uu_files = calloc(size, sizeof(*uu_files));
	if (!uu_files) {
		uu_files = old;
		return -1;
	}
	uu_size_files = size;
	for (i = 0; i < old_size; i++)
		if (old[i].path)
			uu_files[uu_slot(old[i].cookie, size)] = old[i];
	free(old);
	return 0;
}

/* Remember (or replace) what @cookie stands for. */
static void uu_remember(unsigned long long cookie, const char *path, int len)
{
	char *copy = strndup(path, len);
	size_t i;

	if (!copy)
		return;
	if (2 * (uu_nr_files + 1) > uu_size_files && uu_grow()) {
		free(copy);
		return;
	}
	i = uu_slot(cookie, uu_size_files);
	if (uu_files[i].path)
		free(uu_files[i].path);
	else
		uu_nr_files++;
	uu_files[i].cookie = cookie;
	uu_files[i].path = copy;
}

static void *uu_array(struct trace_seq *s, struct tep_event *event,
		      struct tep_record *record, const char *name, int *len)
{
	return tep_get_field_raw(s, event, name, record, len, 0);
}

static int uu_file_cache(struct trace_seq *s, struct tep_record *record,
			 struct tep_event *event, void *context)
{
	unsigned long long cookie, id_len;
	const unsigned char *id;
	const char *path;
	int len, id_bytes, i;

	if (tep_get_field_val(s, event, "cookie", record, &cookie, 1) ||
	    tep_get_field_val(s, event, "build_id_len", record, &id_len, 1))
		return 0;
	path = uu_array(s, event, record, "path", &len);
	id = uu_array(s, event, record, "build_id", &id_bytes);
	if (!path)
		return 0;
	len = strnlen(path, len);
	uu_remember(cookie, path, len);
	trace_seq_printf(s, "cookie=%llx path=%.*s build_id=", cookie, len, path);
	for (i = 0; id && i < id_bytes; i++)
		trace_seq_printf(s, "%02x", id[i]);
	trace_seq_printf(s, " build_id_len=%llu", id_len);
	return 0;
}

/*
 * Frame @i of a record of @nr frames: its value and its file's index. A record holds a
 * 32-bit word a frame (two in a wide one: the low halves, then the high halves), its file's
 * index in the top @bits bits of the word (of the second word in a wide record); a trace of
 * the module before that held the indices in a byte array of their own, @idx.
 */
static void uu_frame(struct tep_handle *tep, const char *offs, int nr, int i, int wide,
		     unsigned int bits, const unsigned char *idx,
		     unsigned long long *value, unsigned int *file)
{
	unsigned long long lo = tep_read_number(tep, offs + 4 * i, 4);
	unsigned long long hi = wide ? tep_read_number(tep, offs + 4 * (nr + i), 4) : 0;
	unsigned long long word = wide ? hi : lo;
	unsigned long long vmask = 0xffffffffULL >> bits;

	if (idx) {
		*file = idx[i];
		*value = hi << 32 | lo;
		return;
	}
	*file = bits ? word >> (32 - bits) : 0;
	*value = wide ? (hi & vmask) << 32 | lo : lo & vmask;
	/* A wide value is signed: sign-extended from its low (64 - bits) bits. */
	if (wide)
		*value = (unsigned long long)((long long)(*value << bits) >> bits);
}

static int uu_stack(struct trace_seq *s, struct tep_record *record,
		    struct tep_event *event, void *context)
{
	struct tep_handle *tep = event->tep;
	unsigned long long cookie, start, total, file, value;
	unsigned long long bits = 0, wide_field = 0;
	int files_len, offs_len, nr, i;
	const unsigned char *idx = NULL;
	const char *files, *offs, *path;
	unsigned int fi;
	int wide;

	if (tep_get_field_val(s, event, "cookie", record, &cookie, 1) ||
	    tep_get_field_val(s, event, "start", record, &start, 1) ||
	    tep_get_field_val(s, event, "total", record, &total, 1))
		return 0;
	files = uu_array(s, event, record, "files", &files_len);
	offs = uu_array(s, event, record, "offs", &offs_len);
	if (!files || !offs)
		return 0;
	files_len /= 8;
	offs_len /= 4;
	if (tep_find_field(event, "file_idx")) {
		idx = uu_array(s, event, record, "file_idx", &nr);
		if (!idx)
			return 0;
		if (nr > offs_len)
			nr = offs_len;
		wide = nr && offs_len >= 2 * nr;
	} else {
		if (tep_get_field_val(s, event, "idx_bits", record, &bits, 1) ||
		    tep_get_field_val(s, event, "wide", record, &wide_field, 1))
			return 0;
		if (bits >= 32)
			bits = 0;
		wide = wide_field != 0;
		nr = wide ? offs_len / 2 : offs_len;
	}

	trace_seq_printf(s, "cookie=%llx", cookie);
	if (!total)
		trace_seq_puts(s, " (no frames)");
	else if (start || (unsigned long long)nr != total)
		trace_seq_printf(s, " frames %llu-%llu of %llu", start, start + nr, total);
	for (i = 0; i < nr; i++) {
		uu_frame(tep, offs, nr, i, wide, bits, idx, &value, &fi);
		if (fi >= (unsigned int)files_len) {
			trace_seq_printf(s, "\n => ?+0x%llx", value);
			continue;
		}
		file = tep_read_number(tep, files + 8 * fi, 8);
		path = uu_path(file);
		if (file == COOKIE_NO_VMA || file == COOKIE_ANON)
			trace_seq_printf(s, "\n => [anon] 0x%llx", value);
		else if (!path)
			trace_seq_printf(s, "\n => [%llx]+0x%llx", file, value);
		else if (!strncmp(path, "[anon:", 6))
			trace_seq_printf(s, "\n => %s 0x%llx", path, value);
		else
			trace_seq_printf(s, "\n => %s+0x%llx", path, value);
	}
	return 0;
}

int TEP_PLUGIN_LOADER(struct tep_handle *tep)
{
	tep_register_event_handler(tep, -1, "user_unwind", "file_cache",
				   uu_file_cache, NULL);
	tep_register_event_handler(tep, -1, "user_unwind", "user_unwind_stack",
				   uu_stack, NULL);
	return 0;
}

void TEP_PLUGIN_UNLOADER(struct tep_handle *tep)
{
	size_t i;

	tep_unregister_event_handler(tep, -1, "user_unwind", "file_cache",
				     uu_file_cache, NULL);
	tep_unregister_event_handler(tep, -1, "user_unwind", "user_unwind_stack",
				     uu_stack, NULL);
	for (i = 0; i < uu_size_files; i++)
		free(uu_files[i].path);
	free(uu_files);
	uu_files = NULL;
	uu_nr_files = uu_size_files = 0;
}
