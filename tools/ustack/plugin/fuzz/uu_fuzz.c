// SPDX-License-Identifier: GPL-2.0
/*
 * The trace-cmd plugin's handlers under AddressSanitizer and UndefinedBehaviorSanitizer,
 * fed records of the committed fixtures, mutated. The plugin's source is compiled in
 * (with the sanitizers) and registers its handlers with libtraceevent as trace-cmd loads
 * it; the fixtures are read with libtracecmd, their event formats parsed by libtraceevent
 * from the fixture's own text (and from hostile variants of it).
 *
 *   uu_fuzz [-n INPUTS] [-s SEED] FIXTURE.dat...
 *	Directed checks, then INPUTS mutated records. One "ok - " or "not ok - " line a
 *	check; exit status 0 when all pass.
 *   uu_fuzz --craft IN OUT EVENT FIELD [off=N] [len=N] [str=S]
 *	A copy of the uncompressed trace.dat IN with the __data_loc word FIELD of every
 *	EVENT record given offset N and/or length N, or the bytes of its array S (as many
 *	as fit before its last byte): a crafted trace for trace-cmd report.
 *
 * Every mutated record is laid against a PROT_NONE page (after its end, or before its
 * start, in turn), so a read outside it faults even in uninstrumented libtraceevent.
 * What a handler printed is checked: nothing at all when it returned 1 (the record goes
 * to libtraceevent's own printer), else valid UTF-8 without control characters and every
 * newline the start of a " => " frame line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <event-parse.h>
#include <trace-cmd.h>
#include <trace-seq.h>

#ifndef PLUGIN_C
#define PLUGIN_C "../plugin_user_unwind.c"
#endif
#include PLUGIN_C

#define MAX_RECORDS	4096
#define MAX_FORMAT	8192
#define PAGE		4096

struct rec {
	int fmt;			/* index in formats[] */
	int size;
	unsigned char *data;
};

struct format {
	const char *name;		/* the event */
	char text[MAX_FORMAT];
	struct tep_handle *tep;
	struct tep_event *event;
};

/* The stack record as the module writes it now (src/events.h): packed file indices. */
static const char packed_stack_format[] =
	"name: user_unwind_stack\n"
	"ID: 385\n"
	"format:\n"
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
	"\n"
	"\tfield:u64 cookie;\toffset:8;\tsize:8;\tsigned:0;\n"
	"\tfield:u16 start;\toffset:16;\tsize:2;\tsigned:0;\n"
	"\tfield:u16 total;\toffset:18;\tsize:2;\tsigned:0;\n"
	"\tfield:u8 idx_bits;\toffset:20;\tsize:1;\tsigned:0;\n"
	"\tfield:u8 wide;\toffset:21;\tsize:1;\tsigned:0;\n"
	"\tfield:__data_loc u64[] files;\toffset:24;\tsize:4;\tsigned:0;\n"
	"\tfield:__data_loc u32[] offs;\toffset:28;\tsize:4;\tsigned:0;\n"
	"\n"
	"print fmt: \"cookie=%llx\", REC->cookie\n";

static struct format formats[3];
static int nr_formats;
static struct rec recs[MAX_RECORDS];
static int nr_recs;
static int failures;
static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dULL;
}

static unsigned int below(unsigned int n)
{
	return n ? rnd() % n : 0;
}

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		failures++;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		perror("malloc");
		exit(2);
	}
	return p;
}

/* A tep with @text parsed and the plugin's handlers registered; NULL if libtraceevent refuses it. */
static struct tep_handle *new_tep(const char *text, const char *name, struct tep_event **event)
{
	struct tep_handle *tep = tep_alloc();

	if (!tep)
		exit(2);
	tep_set_file_bigendian(tep, tep_is_bigendian() ? TEP_BIG_ENDIAN : TEP_LITTLE_ENDIAN);
	tep_set_long_size(tep, 8);
	tep_parse_event(tep, text, strlen(text), "user_unwind");
	*event = tep_find_event_by_name(tep, "user_unwind", name);
	if (!*event) {
		tep_free(tep);
		return NULL;
	}
	TEP_PLUGIN_LOADER(tep);
	return tep;
}

/* The format text of @name in the file @bytes, if stored uncompressed. */
static int format_text(const char *bytes, size_t n, const char *name, char *out)
{
	char key[64];
	const char *p, *fmt, *end;

	snprintf(key, sizeof(key), "name: %s\nID:", name);
	p = memmem(bytes, n, key, strlen(key));
	if (!p)
		return -1;
	fmt = memmem(p, bytes + n - p, "\nprint fmt:", 11);
	if (!fmt)
		return -1;
	end = memchr(fmt + 1, '\n', bytes + n - fmt - 1);
	if (!end || end + 1 - p >= MAX_FORMAT)
		return -1;
	memcpy(out, p, end + 1 - p);
	out[end + 1 - p] = 0;
	return 0;
}

static char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long len;

	len = f && !fseek(f, 0, SEEK_END) ? ftell(f) : -1;
	if (len < 0 || fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "uu_fuzz: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	buf = xmalloc(len + 1);
	if (fread(buf, 1, len, f) != (size_t)len)
		exit(2);
	fclose(f);
	buf[len] = 0;
	*n = len;
	return buf;
}

struct collect {
	struct tep_handle *tep;
	int (*keep)(struct tep_event *event, struct tep_record *record, void *arg);
	void *arg;
};

static int collect_cb(struct tracecmd_input *handle, struct tep_record *record, int cpu,
		      void *data)
{
	struct collect *c = data;
	struct tep_event *event = tep_find_event_by_record(c->tep, record);

	if (!event || strcmp(event->system, "user_unwind"))
		return 0;
	return c->keep(event, record, c->arg);
}

/* Calls @keep on every user_unwind record of @path. */
static void each_record(const char *path,
			int (*keep)(struct tep_event *, struct tep_record *, void *),
			void *arg)
{
	struct tracecmd_input *h = tracecmd_open(path, TRACECMD_FL_LOAD_NO_PLUGINS);
	struct collect c = { .keep = keep, .arg = arg };

	if (!h) {
		fprintf(stderr, "uu_fuzz: %s: not a trace.dat libtracecmd opens\n", path);
		exit(2);
	}
	c.tep = tracecmd_get_tep(h);
	tracecmd_iterate_events(h, NULL, 0, collect_cb, &c);
	tracecmd_close(h);
}

static int fmt_index(const char *name, int packed)
{
	int i;

	for (i = 0; i < nr_formats; i++)
		if (!strcmp(formats[i].name, name) &&
		    !!tep_find_field(formats[i].event, "idx_bits") == packed)
			return i;
	return -1;
}

static void add_rec(int fmt, const void *data, int size)
{
	if (nr_recs == MAX_RECORDS || fmt < 0)
		return;
	recs[nr_recs].fmt = fmt;
	recs[nr_recs].size = size;
	recs[nr_recs].data = xmalloc(size);
	memcpy(recs[nr_recs].data, data, size);
	nr_recs++;
}

/* The offset and (in @len) length of the __data_loc word @name of @size bytes @d; 0 if none. */
static unsigned int loc_of(struct tep_event *e, const unsigned char *d, int size,
			   const char *name, unsigned int *len)
{
	struct tep_format_field *f = tep_find_field(e, name);
	uint32_t loc;

	*len = 0;
	if (!f || f->offset < 0 || f->offset > size - 4)
		return 0;
	memcpy(&loc, d + f->offset, 4);
	*len = loc >> 16;
	return loc & 0xffff;
}

/*
 * A stack record of the fixtures' format (file_idx[]) as the module writes it now: the
 * same files and values, each frame's file index in the top idx_bits bits of its word.
 */
static void add_packed(struct tep_event *e, const unsigned char *d, int size)
{
	unsigned int foff, flen, ooff, olen, ioff, ilen, nr, bits = 0, i, wide;
	unsigned char out[PAGE];
	uint32_t loc, w;

	foff = loc_of(e, d, size, "files", &flen);
	ooff = loc_of(e, d, size, "offs", &olen);
	ioff = loc_of(e, d, size, "file_idx", &ilen);
	if (foff + flen > (unsigned int)size || ooff + olen > (unsigned int)size ||
	    ioff + ilen > (unsigned int)size)
		return;
	nr = ilen;
	wide = nr && olen / 4 >= 2 * nr;
	while ((1U << bits) < flen / 8)
		bits++;
	if (32 + flen + 4 * (wide ? 2 * nr : nr) > sizeof(out))
		return;
	memset(out, 0, 32);
	memcpy(out, d, 20);			/* common fields, cookie, start, total */
	out[20] = bits;
	out[21] = wide;
	memcpy(out + 32, d + foff, flen);
	loc = flen << 16 | 32;
	memcpy(out + 24, &loc, 4);
	for (i = 0; i < nr; i++) {
		unsigned int word = wide ? nr + i : i;

		memcpy(&w, d + ooff + 4 * word, 4);
		if (bits)
			w = (w & (0xffffffffU >> bits)) | (uint32_t)d[ioff + i] << (32 - bits);
		memcpy(out + 32 + flen + 4 * word, &w, 4);
		if (wide)
			memcpy(out + 32 + flen + 4 * i, d + ooff + 4 * i, 4);
	}
	loc = 4 * (wide ? 2 * nr : nr) << 16 | (32 + flen);
	memcpy(out + 28, &loc, 4);
	add_rec(fmt_index("user_unwind_stack", 1), out, 32 + flen + 4 * (wide ? 2 * nr : nr));
}

static int keep_rec(struct tep_event *event, struct tep_record *record, void *arg)
{
	int fmt = fmt_index(event->name, !!tep_find_field(event, "idx_bits"));

	if (fmt < 0)
		return 0;
	add_rec(fmt, record->data, record->size);
	if (!strcmp(event->name, "user_unwind_stack") && tep_find_field(event, "file_idx"))
		add_packed(event, record->data, record->size);
	return 0;
}

/* A record of @size bytes in fresh pages, flush against a PROT_NONE page. */
struct guarded {
	unsigned char *map;
	size_t len;
	unsigned char *data;
};

static void guard(struct guarded *g, const void *data, int size, int at_start)
{
	size_t pages = (size + PAGE - 1) / PAGE;

	g->len = (pages + 2) * PAGE;
	g->map = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->map == MAP_FAILED)
		exit(2);
	mprotect(g->map, PAGE, PROT_NONE);
	mprotect(g->map + (pages + 1) * PAGE, PAGE, PROT_NONE);
	g->data = at_start ? g->map + PAGE : g->map + (pages + 1) * PAGE - size;
	memcpy(g->data, data, size);
}

static void unguard(struct guarded *g)
{
	munmap(g->map, g->len);
}

/* What a handler may print: UTF-8 without control characters, lines of frames. */
static const char *bad_output(const unsigned char *p, unsigned int n)
{
	unsigned int i = 0, k, len;

	while (i < n) {
		unsigned char c = p[i];

		if (c == '\n') {
			if (n - i < 5 || memcmp(p + i, "\n => ", 5))
				return "a newline that does not start a frame line";
			i++;
			continue;
		}
		if (c < 0x20 || c == 0x7f)
			return "a control byte";
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c < 0xc2 || c > 0xf4)
			return "malformed UTF-8";
		len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		if (n - i < len)
			return "malformed UTF-8";
		for (k = 1; k < len; k++)
			if ((p[i + k] & 0xc0) != 0x80)
				return "malformed UTF-8";
		if (c == 0xc2 && p[i + 1] < 0xa0)
			return "a C1 control character";
		i += len;
	}
	return NULL;
}

struct outcome {
	int ret;
	const char *bad;
	char text[256];
};

/* Runs the handler of @f on @size bytes of @data; 0, or -1 if the output broke a rule. */
static int run(struct format *f, const void *data, int size, int at_start, struct outcome *o)
{
	struct tep_record record = { .size = size, .record_size = size, .cpu = 0 };
	struct guarded g;
	struct trace_seq s;

	guard(&g, data, size, at_start);
	record.data = g.data;
	trace_seq_init(&s);
	o->ret = f->event->handler(&s, &record, f->event, f->event->context);
	o->bad = NULL;
	if (o->ret != 0 && o->ret != 1)
		o->bad = "a return value other than 0 or 1";
	else if (o->ret == 1 && s.len)
		o->bad = "output before returning to libtraceevent's printer";
	else if (s.state != TRACE_SEQ__GOOD)
		o->bad = "a trace_seq failure";
	else
		o->bad = bad_output((const unsigned char *)s.buffer, s.len);
	snprintf(o->text, sizeof(o->text), "%.*s", (int)(s.len < 200 ? s.len : 200), s.buffer);
	trace_seq_destroy(&s);
	unguard(&g);
	return o->bad ? -1 : 0;
}

/* The plugin's cookie table emptied, its handlers left registered. */
static void forget_files(void)
{
	size_t i;

	for (i = 0; i < uu_size_files; i++)
		free(uu_files[i].path);
	free(uu_files);
	uu_files = NULL;
	uu_nr_files = uu_size_files = 0;
}

/* A record of event @name (of format @fmt, if not -1), picked at random. */
static struct rec *pick_fmt(const char *name, int fmt)
{
	int i, n = 0;
	struct rec *r = NULL;

	for (i = 0; i < nr_recs; i++)
		if (!strcmp(formats[recs[i].fmt].name, name) && (fmt < 0 || recs[i].fmt == fmt) &&
		    !below(++n))
			r = &recs[i];
	return r;
}

static struct rec *pick(const char *name)
{
	return pick_fmt(name, -1);
}

static void put_loc(struct tep_event *e, unsigned char *d, int size, const char *name,
		    unsigned int off, unsigned int len)
{
	struct tep_format_field *f = tep_find_field(e, name);
	uint32_t loc = len << 16 | (off & 0xffff);

	if (f && f->offset >= 0 && f->offset <= size - 4)
		memcpy(d + f->offset, &loc, 4);
}

/* An edge value for a 16-bit __data_loc half, given the record's size and the original. */
static unsigned int edge16(int size, unsigned int orig)
{
	unsigned int v[] = {
		0, 0xffff, size, size - 1, size + 1, orig + 1, orig ? orig - 1 : 0, 0x8000, orig,
		below(0x10000),
	};

	return v[below(10)];
}

static const char *const hostile_paths[] = {
	"/x\n => /etc/forged+0x0", "\x1b[2J\x1b]0;owned\x07", "/\xc2\x9b[31m",
	"/bad\xff\xfe\xc0\x80", "/\xed\xa0\x80", "/lone\xe2\x82", "[anon:\n]",
};

/* Mutates @d (@size bytes, room for @cap) of event @e; returns the new size. */
static int mutate(struct tep_event *e, unsigned char *d, int size, int cap)
{
	static const char *const locs[] = { "path", "build_id", "files", "offs", "file_idx" };
	static const char *const vals[] = {
		"cookie", "build_id_len", "start", "total", "idx_bits", "wide",
	};
	struct tep_format_field *f;
	unsigned int off, len, i, n = 1 + below(3);
	const char *p;

	while (n--) {
		switch (below(8)) {
		case 0:	/* a __data_loc word */
			f = tep_find_field(e, locs[below(5)]);
			if (!f || f->offset < 0 || f->offset > size - 4)
				break;
			off = loc_of(e, d, size, f->name, &len);
			if (below(2))
				off = edge16(size, off);
			else
				len = edge16(size, len);
			put_loc(e, d, size, f->name, off, len);
			break;
		case 1:	/* a count or a fixed field */
			f = tep_find_field(e, vals[below(6)]);
			if (!f || f->offset < 0 || f->size <= 0 || f->size > 8 ||
			    f->offset > size - f->size)
				break;
			{
				uint64_t v[] = { 0, ~0ULL, 31, 32, 33, 1, rnd(), 0x80 };
				uint64_t x = v[below(8)];

				memcpy(d + f->offset, &x, f->size);
			}
			break;
		case 2:	/* indexes: file_idx bytes, the top bits of offs words */
			if (tep_find_field(e, "file_idx")) {
				off = loc_of(e, d, size, "file_idx", &len);
				for (i = 0; i < len && off + i < (unsigned int)size; i++)
					if (below(2))
						d[off + i] = rnd();
			} else if (tep_find_field(e, "offs")) {
				off = loc_of(e, d, size, "offs", &len);
				for (i = 0; i + 4 <= len && off + i + 4 <= (unsigned int)size; i += 4)
					if (below(2))
						d[off + i + 3] = rnd();
			}
			break;
		case 3:	/* truncation */
			size = below(size + 1);
			break;
		case 4:	/* a string without its NUL, to the end of the record */
			if (!tep_find_field(e, "path"))
				break;
			off = loc_of(e, d, size, "path", &len);
			if (off >= (unsigned int)size)
				break;
			for (i = off; i < (unsigned int)size; i++)
				if (!d[i])
					d[i] = 'A' + below(26);
			put_loc(e, d, size, "path", off, size - off);
			break;
		case 5:	/* a hostile path */
			if (!tep_find_field(e, "path"))
				break;
			p = hostile_paths[below(sizeof(hostile_paths) / sizeof(*hostile_paths))];
			len = strlen(p) + 1;
			if (size + len > (unsigned int)cap)
				break;
			memcpy(d + size, p, len);
			put_loc(e, d, size + len, "path", size, len);
			size += len;
			break;
		case 6:	/* bytes flipped */
			for (i = 0; size && i < 1 + below(8); i++)
				d[below(size)] ^= 1 << below(8);
			break;
		default: /* bytes appended */
			len = below(64);
			if (size + len > (unsigned int)cap)
				break;
			for (i = 0; i < len; i++)
				d[size + i] = rnd();
			size += len;
			break;
		}
	}
	return size;
}

/* A hostile variant of @text: field offsets, sizes, types and names changed. */
static void mutate_format(const char *text, char *out)
{
	static const char *const offsets[] = { "0xfffffff0", "-1", "-8", "65535", "0x7fffffff",
					       "12", "20", "30", "4096" };
	static const char *const sizes[] = { "0xfffffff0", "0", "3", "16", "65535",
					     "0x7fffffff", "-4", "1", "2" };
	static const char *const types[] = { "u64 %s[2]", "__rel_loc u64[] %s", "u64 %s",
					     "__data_loc char[] %s", "u8 %s[0]", "char %s[16]",
					     "__data_loc u8[] %sz" };
	char lines[32][256], *fields[32], type[128], name[64], what[16];
	int n = 0, nf = 0, i, k, m;
	const char *p = text, *nl;
	int off, size, sign;
	size_t len;

	while (*p && n < 32) {
		nl = strchr(p, '\n');
		len = nl ? (size_t)(nl - p) : strlen(p);
		if (len > 255)
			len = 255;
		memcpy(lines[n], p, len);
		lines[n][len] = 0;
		if (strstr(lines[n], "field:") && !strstr(lines[n], "common_"))
			fields[nf++] = lines[n];
		n++;
		p = nl ? nl + 1 : p + len;
	}
	for (m = 1 + below(3); m-- && nf;) {
		char *l = fields[below(nf)];
		char *semi = strchr(l, ';');
		char *sp;

		if (!semi || sscanf(semi, ";\toffset:%d;\tsize:%d;\tsigned:%d;", &off, &size,
				    &sign) != 3)
			continue;
		*semi = 0;
		sp = strrchr(l, ' ');
		snprintf(type, sizeof(type), "%.*s", (int)(sp - strchr(l, ':') - 1),
			 strchr(l, ':') + 1);
		snprintf(name, sizeof(name), "%s", sp + 1);
		*semi = ';';
		k = below(4);
		if (k == 0) {
			snprintf(what, sizeof(what), "%s", offsets[below(9)]);
			snprintf(l, 256, "\tfield:%s %s;\toffset:%s;\tsize:%d;\tsigned:%d;",
				 type, name, what, size, sign);
		} else if (k == 1) {
			snprintf(what, sizeof(what), "%s", sizes[below(9)]);
			snprintf(l, 256, "\tfield:%s %s;\toffset:%d;\tsize:%s;\tsigned:%d;",
				 type, name, off, what, sign);
		} else if (k == 2) {
			char decl[128];

			snprintf(decl, sizeof(decl), types[below(7)], name);
			snprintf(l, 256, "\tfield:%s;\toffset:%d;\tsize:%d;\tsigned:%d;",
				 decl, off, size, sign);
		} else {
			snprintf(l, 256, "\tfield:%s %s;\toffset:%s;\tsize:%s;\tsigned:%d;",
				 type, name, offsets[below(9)], sizes[below(9)], sign);
		}
	}
	out[0] = 0;
	for (i = 0; i < n; i++) {
		if (!strncmp(lines[i], "print fmt:", 10))
			strcat(out, "print fmt: \"x\"\n");
		else if (strlen(out) + strlen(lines[i]) + 2 < MAX_FORMAT)
			strcat(strcat(out, lines[i]), "\n");
	}
}

static unsigned char *buf_for(struct rec *r, int *cap)
{
	static unsigned char buf[2 * PAGE];

	*cap = sizeof(buf);
	memcpy(buf, r->data, r->size);
	return buf;
}

static void fuzz(long inputs)
{
	long done = 0, fallback = 0, hostile = 0, refused = 0, per[2] = { 0, 0 };
	struct outcome o;
	char text[MAX_FORMAT];
	struct format hf;
	struct timespec t0, t1;
	int cap, size, j;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < inputs) {
		struct rec *r = pick(below(2) ? "file_cache" : "user_unwind_stack");
		struct format *f = &formats[r->fmt];
		unsigned char *d = buf_for(r, &cap);

		if (!below(8)) {
			/* A hostile format, and a few records of its event under it. */
			mutate_format(f->text, text);
			hf.tep = new_tep(text, f->name, &hf.event);
			if (!hf.tep) {
				refused++;
				continue;
			}
			for (j = 0; j < 4 && done < inputs; j++) {
				r = pick(f->name);
				d = buf_for(r, &cap);
				size = below(2) ? mutate(hf.event, d, r->size, cap) : r->size;
				if (run(&hf, d, size, done & 1, &o)) {
					check(0, "input %ld: %s under a hostile format: %s", done,
					      f->name, o.bad);
					fprintf(stderr, "%s\n", text);
				}
				fallback += o.ret;
				hostile++;
				done++;
			}
			tep_free(hf.tep);
			continue;
		}
		size = mutate(f->event, d, r->size, cap);
		if (run(f, d, size, done & 1, &o))
			check(0, "input %ld: %s: %s: %s", done, f->name, o.bad, o.text);
		fallback += o.ret;
		per[!strcmp(f->name, "file_cache")]++;
		done++;
		/* As trace-cmd would after many files: the table freed now and then. */
		if (!(done % 5000))
			forget_files();
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	check(1, "%ld mutated inputs in %.1f s: %ld file_cache, %ld user_unwind_stack",
	      done, t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9, per[1], per[0]);
	check(1, "%ld of them under hostile formats (%ld formats refused by libtraceevent)",
	      hostile, refused);
	check(1, "%ld of them returned to libtraceevent's printer", fallback);
}

/* A file_cache record of the fixture's format, with @path (of @len bytes). */
static int make_file_cache(unsigned char *out, unsigned long long cookie, const char *path,
			   unsigned int len)
{
	struct rec *r = pick("file_cache");
	struct tep_event *e = formats[r->fmt].event;
	struct tep_format_field *f = tep_find_field(e, "cookie");
	unsigned int off, id_len;

	memcpy(out, r->data, r->size);
	memcpy(out + f->offset, &cookie, 8);
	off = loc_of(e, out, r->size, "build_id", &id_len);
	memcpy(out + r->size, path, len);
	put_loc(e, out, r->size + len, "path", r->size, len);
	put_loc(e, out, r->size + len, "build_id", off, id_len);
	return r->size + len;
}

static void directed(void)
{
	static const char *const arrays[] = { "files", "offs", "file_idx" };
	struct format *fc = &formats[fmt_index("file_cache", 0)];
	struct format *st = &formats[fmt_index("user_unwind_stack", 0)];
	unsigned char d[2 * PAGE];
	struct outcome o;
	int i, ok, size, n;
	unsigned int off, len, need;
	const char *p;
	struct rec *r;

	/* The fixtures' own records print, as they did. */
	ok = 1;
	for (i = 0; i < nr_recs; i++)
		if (run(&formats[recs[i].fmt], recs[i].data, recs[i].size, i & 1, &o) || o.ret)
			ok = 0;
	check(ok, "the fixtures' %d records (and their packed versions) print, untouched",
	      nr_recs);

	/* The crafted records: a build_id of 0xffff bytes, a path at 0xffff. */
	r = pick("file_cache");
	memcpy(d, r->data, r->size);
	off = loc_of(fc->event, d, r->size, "build_id", &len);
	put_loc(fc->event, d, r->size, "build_id", off, 0xffff);
	run(fc, d, r->size, 0, &o);
	check(o.ret == 1 && !o.bad, "a build_id length of 0xffff goes to libtraceevent's printer");
	memcpy(d, r->data, r->size);
	put_loc(fc->event, d, r->size, "path", 0xffff, 0xffff);
	run(fc, d, r->size, 0, &o);
	check(o.ret == 1 && !o.bad, "a path at 0xffff of 0xffff bytes goes to libtraceevent's printer");
	r = pick_fmt("user_unwind_stack", st - formats);
	need = 32;
	for (i = 0; i < 3; i++) {
		off = loc_of(st->event, r->data, r->size, arrays[i], &len);
		if (off + len > need)
			need = off + len;
	}
	ok = 1;
	for (size = 0; size < r->size; size++) {
		run(st, r->data, size, 0, &o);
		ok &= o.ret == ((unsigned int)size < need) && !o.bad;
	}
	check(ok, "a stack record of %d bytes cut short of %u: to libtraceevent's printer",
	      r->size, need);

	/* A forged frame line and terminal escapes in a path are printed escaped. */
	p = "/x\n => /etc/forged+0x0\x1b]0;t\x07\xc2\x9b\xff";
	size = make_file_cache(d, 0x1234, p, strlen(p));
	run(fc, d, size, 0, &o);
	check(!o.ret && !o.bad && strstr(o.text, "path=/x\\n => /etc/forged+0x0\\x1b]0;t\\x07\\x9b\\xff "),
	      "a path with a newline, escapes and bad UTF-8 prints escaped: %s", o.text);
	p = "/usr/lib/\xc3\xa9t\xc3\xa9.so";
	size = make_file_cache(d, 0x1235, p, strlen(p));
	run(fc, d, size, 0, &o);
	check(!o.ret && strstr(o.text, "path=/usr/lib/\xc3\xa9t\xc3\xa9.so "),
	      "a UTF-8 path prints as it is: %s", o.text);

	/* A format whose files[] is a fixed array of 0xfffffff0 bytes. */
	{
		struct format h;
		char text[MAX_FORMAT];

		p = strstr(st->text, "\tfield:__data_loc u64[] files;\toffset:20;\tsize:4;");
		if (p)
			snprintf(text, sizeof(text), "%.*s%s%s", (int)(p - st->text), st->text,
				 "\tfield:u64 files[2];\toffset:20;\tsize:0xfffffff0;",
				 p + strlen("\tfield:__data_loc u64[] files;\toffset:20;\tsize:4;"));
		else
			snprintf(text, sizeof(text), "%s", st->text);
		h.tep = new_tep(text, "user_unwind_stack", &h.event);
		ok = h.tep && p;
		for (i = 0; ok && i < nr_recs; i++)
			if (!strcmp(formats[recs[i].fmt].name, "user_unwind_stack") &&
			    recs[i].fmt == st - formats) {
				run(&h, recs[i].data, recs[i].size, i & 1, &o);
				ok &= o.ret == 1 && !o.bad;
			}
		check(ok, "a format declaring files[2] of size 0xfffffff0 goes to libtraceevent's printer");
		if (h.tep)
			tep_free(h.tep);
	}

	/* Cookies aimed at one slot (i << 40) spread: short probes, all found. */
	{
		struct timespec t0, t1;
		unsigned long long c;
		size_t slot, home, probes = 0, worst = 0;
		double secs;

		n = 100000;
		forget_files();
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (i = 1; i <= n; i++)
			uu_remember((unsigned long long)i << 40, "/aimed", 6);
		ok = 1;
		for (i = 1; i <= n; i++) {
			c = (unsigned long long)i << 40;
			ok &= uu_path(c) && !strcmp(uu_path(c), "/aimed");
			slot = uu_slot(c, uu_size_files);
			home = (size_t)uu_siphash(c) & (uu_size_files - 1);
			len = (slot - home) & (uu_size_files - 1);
			probes += len;
			if (len > worst)
				worst = len;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs = t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9;
		check(ok && uu_nr_files == (size_t)n && probes < 2ULL * n && worst < 256,
		      "%d cookies i << 40: all found, %.2f probes on average, %zu at most, %.2f s",
		      n, (double)probes / n, worst, secs);
		forget_files();
	}
}

static int print_usage(void)
{
	fputs("usage: uu_fuzz [-n INPUTS] [-s SEED] FIXTURE.dat...\n", stderr);
	fputs("       uu_fuzz --craft IN OUT EVENT FIELD [off=N] [len=N] [str=S]\n", stderr);
	return 2;
}

/* --craft: set the __data_loc word FIELD of every EVENT record of IN. */
struct craft {
	char *bytes;
	size_t n;
	const char *event, *field, *str;
	long off, len;
	int patched;
};

static int craft_cb(struct tep_event *event, struct tep_record *record, void *arg)
{
	struct craft *c = arg;
	struct tep_format_field *f = tep_find_field(event, c->field);
	char *p = c->bytes, *end = c->bytes + c->n;
	unsigned int start, n, i;
	uint32_t loc;

	if (strcmp(event->name, c->event) || !f || f->offset < 0 ||
	    f->offset > record->size - 4)
		return 0;
	memcpy(&loc, (char *)record->data + f->offset, 4);
	start = loc & 0xffff;
	n = loc >> 16;
	if (c->str && (start > (unsigned int)record->size || n > record->size - start))
		return 0;
	if (c->off >= 0)
		loc = (loc & 0xffff0000U) | (uint32_t)c->off;
	if (c->len >= 0)
		loc = (loc & 0xffffU) | (uint32_t)c->len << 16;
	/* Every copy of the record's bytes in the file (the pages are stored as they are). */
	while ((p = memmem(p, end - p, record->data, record->size))) {
		memcpy(p + f->offset, &loc, 4);
		/* The array's bytes from str=, its last byte (the NUL) kept. */
		for (i = 0; c->str && c->str[i] && i + 1 < n; i++)
			p[start + i] = c->str[i];
		c->patched++;
		p += record->size;
	}
	return 0;
}

static int craft(int argc, char **argv)
{
	struct craft c = { .off = -1, .len = -1 };
	FILE *out;
	int i;

	if (argc < 6)
		return print_usage();
	c.bytes = read_file(argv[2], &c.n);
	c.event = argv[4];
	c.field = argv[5];
	for (i = 6; i < argc; i++) {
		if (!strncmp(argv[i], "off=", 4))
			c.off = strtol(argv[i] + 4, NULL, 0) & 0xffff;
		else if (!strncmp(argv[i], "len=", 4))
			c.len = strtol(argv[i] + 4, NULL, 0) & 0xffff;
		else if (!strncmp(argv[i], "str=", 4))
			c.str = argv[i] + 4;
	}
	each_record(argv[2], craft_cb, &c);
	if (!c.patched) {
		fprintf(stderr, "uu_fuzz: no %s record of %s found stored uncompressed\n",
			c.event, argv[2]);
		free(c.bytes);
		return 1;
	}
	out = fopen(argv[3], "wb");
	if (!out || fwrite(c.bytes, 1, c.n, out) != c.n || fclose(out)) {
		perror(argv[3]);
		free(c.bytes);
		return 1;
	}
	printf("%s: %d %s records' %s changed\n", argv[3], c.patched, c.event, c.field);
	free(c.bytes);
	return 0;
}

int main(int argc, char **argv)
{
	long inputs = 20000;
	uint64_t seed = 38;
	int i, opt;
	size_t n;
	char *bytes;

	if (argc > 1 && !strcmp(argv[1], "--craft"))
		return craft(argc, argv);
	while ((opt = getopt(argc, argv, "n:s:")) != -1) {
		if (opt == 'n')
			inputs = strtol(optarg, NULL, 0);
		else if (opt == 's')
			seed = strtoull(optarg, NULL, 0);
		else
			return print_usage();
	}
	if (optind == argc)
		return print_usage();
	rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	tep_set_loglevel(TEP_LOG_NONE);
	tracecmd_set_loglevel(TEP_LOG_NONE);
	/* The fixtures' formats, from the first that stores them as text. */
	for (i = optind; i < argc && !nr_formats; i++) {
		bytes = read_file(argv[i], &n);
		if (!format_text(bytes, n, "file_cache", formats[0].text) &&
		    !format_text(bytes, n, "user_unwind_stack", formats[1].text)) {
			formats[0].name = "file_cache";
			formats[1].name = "user_unwind_stack";
			nr_formats = 2;
		}
		free(bytes);
	}
	formats[nr_formats].name = "user_unwind_stack";
	snprintf(formats[nr_formats].text, MAX_FORMAT, "%s", packed_stack_format);
	nr_formats++;
	for (i = 0; i < nr_formats; i++) {
		formats[i].tep = new_tep(formats[i].text, formats[i].name, &formats[i].event);
		if (!formats[i].tep || !formats[i].event->handler) {
			fprintf(stderr, "uu_fuzz: format %d (%s) not parsed or not handled\n",
				i, formats[i].name);
			return 2;
		}
	}
	if (nr_formats != 3) {
		fprintf(stderr, "uu_fuzz: no fixture stores its formats uncompressed\n");
		return 2;
	}
	for (i = optind; i < argc; i++)
		each_record(argv[i], keep_rec, NULL);
	printf("# seed %llu, %d records from %d fixtures\n", (unsigned long long)seed, nr_recs,
	       argc - optind);
	if (!nr_recs || !pick("file_cache") || !pick("user_unwind_stack")) {
		fprintf(stderr, "uu_fuzz: the fixtures hold no user_unwind records\n");
		return 2;
	}
	directed();
	fuzz(inputs);
	forget_files();
	for (i = 0; i < nr_formats; i++)
		tep_free(formats[i].tep);
	for (i = 0; i < nr_recs; i++)
		free(recs[i].data);
	return failures ? 1 : 0;
}
