// SPDX-License-Identifier: GPL-2.0
/*
 * libtraceevent plugin for user_unwind's events: trace-cmd report prints each frame of a
 * user_unwind_stack record on its own line as "=> path+0xoffset", the path taken from
 * the file_cache events the report has printed so far (a file cookie stands for the
 * file of the most recent file_cache with it). A cookie not seen yet prints as
 * "[cookie]+0xoffset"; anonymous memory as its raw address.
 *
 * Every byte of a trace.dat is hostile: it may come from another machine. The event
 * formats are the file's too, and libtraceevent's tep_get_field_raw() and
 * tep_get_field_val() check nothing against the record. So every field is read here
 * through uu_val() and uu_array(), which check its offset, size and, for a __data_loc
 * array, its start and length against the record's size first. A record that fails a
 * check returns 1 before anything is printed, and libtraceevent prints it with its own
 * printer. Control bytes and malformed UTF-8 in paths are printed escapes ("\n",
 * "\x1b"), so no path can forge a line or reach the terminal. The cookie table is hashed
 * with SipHash under a key drawn at load, so a trace cannot aim its cookies at one slot.
 *
 * Install: make -C tools/ustack/plugin install (into ~/.local/lib/traceevent/plugins, or
 * $TRACEEVENT_PLUGIN_DIR if set).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include <event-parse.h>
#include <trace-seq.h>

#define COOKIE_NO_VMA	0
#define COOKIE_ANON	1
/* The longest path the module records (the kernel's PATH_MAX, with its NUL). */
#define UU_PATH_MAX	4096

struct uu_file {
	unsigned long long cookie;
	char *path;
};

/* Open addressing, a power-of-two size, never more than half full. */
static struct uu_file *uu_files;
static size_t uu_nr_files, uu_size_files;
/* The SipHash key of the table's slots, drawn when the plugin is loaded. */
static uint64_t uu_key[2];

static inline uint64_t uu_rotl(uint64_t x, int b)
{
	return x << b | x >> (64 - b);
}

static void uu_sipround(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = uu_rotl(v[1], 13) ^ v[0];
	v[0] = uu_rotl(v[0], 32);
	v[2] += v[3];
	v[3] = uu_rotl(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = uu_rotl(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = uu_rotl(v[1], 17) ^ v[2];
	v[2] = uu_rotl(v[2], 32);
}

/* SipHash-2-4 of the 8 bytes of @m (little-endian) under uu_key. */
static uint64_t uu_siphash(uint64_t m)
{
	uint64_t v[4] = {
		uu_key[0] ^ 0x736f6d6570736575ULL, uu_key[1] ^ 0x646f72616e646f6dULL,
		uu_key[0] ^ 0x6c7967656e657261ULL, uu_key[1] ^ 0x7465646279746573ULL,
	};
	uint64_t b = 8ULL << 56;
	int i;

	v[3] ^= m;
	uu_sipround(v);
	uu_sipround(v);
	v[0] ^= m;
	v[3] ^= b;
	uu_sipround(v);
	uu_sipround(v);
	v[0] ^= b;
	v[2] ^= 0xff;
	for (i = 0; i < 4; i++)
		uu_sipround(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* A key no trace can know: the kernel's random bytes, else the clock and the addresses. */
static void uu_draw_key(void)
{
	struct timespec ts;

	if (getrandom(uu_key, sizeof(uu_key), GRND_NONBLOCK) == sizeof(uu_key))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uu_key[0] ^= (uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^ (uintptr_t)&ts;
	uu_key[1] ^= (uintptr_t)uu_draw_key ^ (uintptr_t)&uu_files ^ (uint64_t)ts.tv_nsec;
}

static size_t uu_slot(unsigned long long cookie, size_t size)
{
	size_t i = (size_t)uu_siphash(cookie) & (size - 1);

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

	if (size > SIZE_MAX / 2 / sizeof(*uu_files))
		return -1;
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

/* Remember (or replace) what @cookie stands for: the @len bytes of @path. */
static void uu_remember(unsigned long long cookie, const char *path, size_t len)
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

/*
 * The fixed field @name of @record in @val. Return: 0, or -1 when the event has no such
 * field, it is not a 1-, 2-, 4- or 8-byte number, or the record does not hold all of it.
 */
static int uu_val(struct tep_event *event, struct tep_record *record, const char *name,
		  unsigned long long *val)
{
	struct tep_format_field *f = tep_find_field(event, name);

	if (!f || (f->flags & (TEP_FIELD_IS_ARRAY | TEP_FIELD_IS_DYNAMIC)) ||
	    (f->size != 1 && f->size != 2 && f->size != 4 && f->size != 8))
		return -1;
	if (f->offset < 0 || record->size < f->size || f->offset > record->size - f->size)
		return -1;
	*val = tep_read_number(event->tep, (const char *)record->data + f->offset, f->size);
	return 0;
}

/*
 * The __data_loc (or __rel_loc) array @name of @record: its start in @array and its
 * number of @elem-byte elements in @nr (a partial last element left out).
 * Return: 0; -1 when the event has no such field; -2 when the field is not a __data_loc
 * word the record holds, or the array it locates is not all inside the record.
 */
static int uu_array(struct tep_event *event, struct tep_record *record, const char *name,
		    unsigned int elem, const void **array, unsigned int *nr)
{
	struct tep_format_field *f = tep_find_field(event, name);
	unsigned long long loc, start, len;

	if (!f)
		return -1;
	if (!(f->flags & TEP_FIELD_IS_DYNAMIC) || f->size != 4 || f->offset < 0 ||
	    record->size < 4 || f->offset > record->size - 4)
		return -2;
	loc = tep_read_number(event->tep, (const char *)record->data + f->offset, 4);
	start = loc & 0xffff;
	len = loc >> 16 & 0xffff;
	/* A __rel_loc counts from the end of its own word. */
	if (f->flags & TEP_FIELD_IS_RELATIVE)
		start += (unsigned long long)f->offset + 4;
	if (start > (unsigned long long)record->size ||
	    len > (unsigned long long)record->size - start)
		return -2;
	*array = (const char *)record->data + start;
	*nr = len / elem;
	return 0;
}

/*
 * The @len bytes of @path, escaped: a control character (C0, DEL, or a C1 one in UTF-8)
 * as "\n", "\t", "\r" or "\xNN", a byte of malformed UTF-8 as "\xNN", a backslash as
 * itself. A path cannot split a line or send a terminal a sequence.
 */
static void uu_put_path(struct trace_seq *s, const char *path, size_t len)
{
	const unsigned char *p = (const unsigned char *)path;
	size_t i = 0, n, k;
	unsigned int cp, min;

	while (i < len) {
		unsigned char c = p[i];

		if (c < 0x80) {
			if (c == '\n')
				trace_seq_puts(s, "\\n");
			else if (c == '\t')
				trace_seq_puts(s, "\\t");
			else if (c == '\r')
				trace_seq_puts(s, "\\r");
			else if (c < 0x20 || c == 0x7f)
				trace_seq_printf(s, "\\x%02x", c);
			else
				trace_seq_putc(s, c);
			i++;
			continue;
		}
		if (c < 0xc2 || c > 0xf4) {
			trace_seq_printf(s, "\\x%02x", c);
			i++;
			continue;
		}
		/* A UTF-8 sequence: its length, its first bits and its least code point. */
		n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		cp = c & (0x7f >> n);
		min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
		for (k = 1; k < n && i + k < len && (p[i + k] & 0xc0) == 0x80; k++)
			cp = cp << 6 | (p[i + k] & 0x3f);
		if (k < n || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
			trace_seq_printf(s, "\\x%02x", c);
			i++;
			continue;
		}
		if (cp >= 0x80 && cp <= 0x9f)
			trace_seq_printf(s, "\\x%02x", cp);
		else
			trace_seq_printf(s, "%.*s", (int)n, path + i);
		i += n;
	}
}

static int uu_file_cache(struct trace_seq *s, struct tep_record *record,
			 struct tep_event *event, void *context)
{
	unsigned long long cookie, id_len;
	const unsigned char *id = NULL;
	const void *path, *build_id;
	unsigned int len, id_bytes = 0, i;
	int ret;

	if (uu_val(event, record, "cookie", &cookie) ||
	    uu_val(event, record, "build_id_len", &id_len) ||
	    uu_array(event, record, "path", 1, &path, &len))
		return 1;
	ret = uu_array(event, record, "build_id", 1, &build_id, &id_bytes);
	if (ret == -2)
		return 1;
	if (!ret)
		id = build_id;
	len = strnlen(path, len);
	if (len >= UU_PATH_MAX)
		return 1;
	uu_remember(cookie, path, len);
	trace_seq_printf(s, "cookie=%llx path=", cookie);
	uu_put_path(s, path, len);
	trace_seq_puts(s, " build_id=");
	for (i = 0; i < id_bytes; i++)
		trace_seq_printf(s, "%02x", id[i]);
	trace_seq_printf(s, " build_id_len=%llu", id_len);
	return 0;
}

/*
 * Frame @i of a record of @nr frames: its value and its file's index. A record holds a
 * 32-bit word a frame (two in a wide one: the low halves, then the high halves), its file's
 * index in the top @bits bits of the word (of the second word in a wide record); a trace of
 * the module before that held the indices in a byte array of their own, @idx. The caller
 * has checked that @offs holds @nr words, 2 * @nr in a wide record, and @idx @nr bytes.
 */
static void uu_frame(struct tep_handle *tep, const char *offs, unsigned int nr,
		     unsigned int i, int wide, unsigned int bits, const unsigned char *idx,
		     unsigned long long *value, unsigned int *file)
{
	unsigned long long lo = tep_read_number(tep, offs + 4 * (size_t)i, 4);
	unsigned long long hi = wide ? tep_read_number(tep, offs + 4 * ((size_t)nr + i), 4) : 0;
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
	if (wide && bits)
		*value = (unsigned long long)((long long)(*value << bits) >> bits);
}

static int uu_stack(struct trace_seq *s, struct tep_record *record,
		    struct tep_event *event, void *context)
{
	struct tep_handle *tep = event->tep;
	unsigned long long cookie, start, total, file, value;
	unsigned long long bits = 0, wide_field = 0;
	unsigned int files_len, offs_len, nr, i, fi;
	const void *files, *offs, *idx = NULL;
	const char *path;
	int wide, ret;

	if (uu_val(event, record, "cookie", &cookie) ||
	    uu_val(event, record, "start", &start) ||
	    uu_val(event, record, "total", &total) ||
	    uu_array(event, record, "files", 8, &files, &files_len) ||
	    uu_array(event, record, "offs", 4, &offs, &offs_len))
		return 1;
	ret = uu_array(event, record, "file_idx", 1, &idx, &nr);
	if (ret == -2)
		return 1;
	if (!ret) {
		if (nr > offs_len)
			nr = offs_len;
		wide = nr && offs_len >= 2 * nr;
	} else {
		idx = NULL;
		if (uu_val(event, record, "idx_bits", &bits) ||
		    uu_val(event, record, "wide", &wide_field))
			return 1;
		if (bits >= 32)
			bits = 0;
		wide = wide_field != 0;
		nr = wide ? offs_len / 2 : offs_len;
	}

	trace_seq_printf(s, "cookie=%llx", cookie);
	if (!total)
		trace_seq_puts(s, " (no frames)");
	else if (start || nr != total)
		trace_seq_printf(s, " frames %llu-%llu of %llu", start, start + nr, total);
	for (i = 0; i < nr; i++) {
		uu_frame(tep, offs, nr, i, wide, bits, idx, &value, &fi);
		if (fi >= files_len) {
			trace_seq_printf(s, "\n => ?+0x%llx", value);
			continue;
		}
		file = tep_read_number(tep, (const char *)files + 8 * (size_t)fi, 8);
		path = uu_path(file);
		if (file == COOKIE_NO_VMA || file == COOKIE_ANON) {
			trace_seq_printf(s, "\n => [anon] 0x%llx", value);
		} else if (!path) {
			trace_seq_printf(s, "\n => [%llx]+0x%llx", file, value);
		} else if (!strncmp(path, "[anon:", 6)) {
			trace_seq_puts(s, "\n => ");
			uu_put_path(s, path, strlen(path));
			trace_seq_printf(s, " 0x%llx", value);
		} else {
			trace_seq_puts(s, "\n => ");
			uu_put_path(s, path, strlen(path));
			trace_seq_printf(s, "+0x%llx", value);
		}
	}
	return 0;
}

int TEP_PLUGIN_LOADER(struct tep_handle *tep)
{
	/* Each tep loads the plugin (trace-cmd report -i a -i b): the table's key stays. */
	if (!uu_size_files)
		uu_draw_key();
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
