/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interface between the Rust crate of user_unwind and its C glue.
 *
 * Functions named uu_rust_* are written in Rust and called from C; all others are C,
 * called from Rust. Contexts are stated per function.
 */
#ifndef _USER_UNWIND_H
#define _USER_UNWIND_H

#include <linux/time64.h>
#include <linux/types.h>

/* src/wrapper/symbols.c: the unexported kernel API, resolved at load. Task context. */
int uu_symbols_init(void);
int uu_test_static_calls(void);	/* KUnit only: static calls not at their function */

/* src/hook.c: the request hook and the deferred callback. */
int uu_hook_init(void);		/* task context, may sleep */
void uu_hook_exit(void);		/* task context, may sleep; no callback runs after it */
int uu_hook_start(void);		/* task context; the end of module init */
int uu_hook_enable(void);		/* cookie event's reg callback */
void uu_hook_disable(void);		/* cookie event's unreg callback */
bool uu_hook_requesting(void);		/* task context */


/* src/events.c */
void uu_events_init(void);
bool uu_is_own_event(unsigned short type);
bool uu_is_cookie_event(unsigned short type);
bool uu_is_file_cache_event(unsigned short type);
void uu_emit_stack(u64 cookie, u16 start, u16 total, const u64 *files,
		   u32 nr_files, const u32 *lo, const u32 *hi, u8 idx_bits, u32 nr);
void uu_emit_truncated(u64 cookie, u16 frames, u8 reason);	/* task context */
bool uu_emit_file_cache(u64 cookie, const char *path, const u8 *build_id,
			u32 build_id_len);	/* task context: true when a buffer took it */
void uu_file_cache_committed(void);	/* the export saw a file_cache commit */
bool uu_file_cache_enabled(void);	/* any context */
int uu_file_cache_reg(void);		/* file_cache's reg callback */
void uu_file_cache_unreg(void);

/* src/files.c: the files behind file cookies, and the buffer resets readers cause. */
struct file;
struct vm_area_struct;

/* A mapped file's identity; mirrored by FileId in src/logic/frames.rs. */
struct uu_file_id {
	u64 ino;
	s64 ctime_sec;
	u32 dev;
	u32 generation;
	u32 ctime_nsec;
	u32 pad;
};

int uu_files_init(void);		/* task context; probes buffer resets */
void uu_files_exit(void);
bool uu_files_resets_probed(void);	/* are buffer resets seen? */
struct file *uu_vma_file_id(struct vm_area_struct *vma, struct uu_file_id *id);
struct inode;
struct timespec64 uu_ctime(const struct inode *inode);
const char *uu_file_path(struct file *file, char *buf, int len);
long uu_file_read(struct file *file, u64 offset, u8 *buf, size_t len);
int uu_vma_name(struct vm_area_struct *vma, char *buf, int len, bool *special);

/* src/unwind.c: the .eh_frame unwinder's access to current. Task context, may fault. */
struct uu_regs {
	u64 ip;
	u64 sp;
	u64 bp;
	u64 bx;
};

enum {
	UU_REGION_ANON,		/* no object: anonymous memory, JIT code */
	UU_REGION_FILE,		/* a file with an identity (id) */
	UU_REGION_VDSO,		/* the vDSO, an ELF object at its start */
};

/* A mapping of current; mirrored by Region in src/unwind.rs. */
struct uu_region {
	u64 start;
	u64 end;
	u64 pgoff;
	struct uu_file_id id;
	u32 kind;
	u32 pad;
};

/*
 * src/vma_memo.c: the file mappings of the last stacks, per CPU. Task context, the
 * deferred-unwind callback.
 */
int uu_vma_memo_find(u64 addr, struct uu_region *r);
struct file *uu_vma_memo_file(u64 addr, struct uu_file_id *id);
void uu_vma_memo_note(struct vm_area_struct *vma, const struct uu_file_id *id);
void uu_vma_memo_exit(void);	/* module exit, after the last callback */
int uu_vma_memo_ordinary(u64 addr, u64 *start, u64 *end);
void uu_vma_memo_note_ordinary(struct vm_area_struct *vma);

bool uu_unwind_regs(struct uu_regs *regs);	/* false: use the kernel's stack */
u64 uu_unwind_user_end(void);
int uu_unwind_read(void *dst, u64 addr, size_t len);
bool uu_vma_faultable(struct vm_area_struct *vma);	/* mmap_lock held */

/* src/fetch.c: the thread that brings in what the callback missed. */
int uu_fetch_init(void);		/* module init */
void uu_fetch_exit(void);		/* module exit, after the last callback */
void uu_fetch_file(struct file *file, pgoff_t index);	/* task context, never sleeps */
void uu_fetch_user(unsigned long addr);			/* task context, never sleeps */
int uu_unwind_region(u64 addr, struct uu_region *r);
int uu_unwind_ordinary(u64 addr, u64 *start, u64 *end);

/* An object whose unwind table is read; mirrored by UuObject in src/user_unwind_main.rs. */
struct uu_object {
	struct file *file;	/* UU_REGION_FILE: held */
	struct folio *folio;	/* UU_REGION_FILE: the folio last read, held, or NULL */
	u64 start;		/* UU_REGION_VDSO: where it is mapped */
	const void *vdso;	/* UU_REGION_VDSO: its image's bytes (vdso_image->data) */
	u64 size;		/* its size: the file's when opened, the vDSO image's */
	struct uu_file_id id;	/* UU_REGION_FILE: its identity when opened */
	u32 kind;		/* UU_REGION_FILE or UU_REGION_VDSO */
	u32 writers;		/* UU_REGION_FILE: unsettled when opened (uu_object_hold_file()) */
};

/*
 * struct uu_regs, uu_file_id, uu_region and uu_object are mirrored by hand in Rust
 * (src/user_unwind_main.rs), which asserts the same sizes: a field added on one side
 * only fails the build.
 */
static_assert(sizeof(struct uu_regs) == 32);
static_assert(sizeof(struct uu_file_id) == 32);
static_assert(sizeof(struct uu_region) == 64);
static_assert(sizeof(struct uu_object) == 80);

int uu_unwind_object_open(u64 addr, struct uu_object *o);
int uu_unwind_object_read(struct uu_object *o, u64 offset, void *buf, size_t len);
bool uu_unwind_object_settled(struct uu_object *o);
void uu_unwind_object_close(struct uu_object *o);

/* src/tables.c: the files' tables (src/logic/ftable.rs). */
struct uu_table;
struct uu_table *uu_table_get(u64 key, u64 **words, size_t *nwords);
void uu_table_put(struct uu_table *t);
struct uu_table *uu_table_alloc(size_t nwords, u64 **words);
bool uu_table_publish(struct uu_table *t, u64 key);
void uu_table_replace(struct uu_table *old, struct uu_table *new);
void uu_tables_write_lock(void);
void uu_tables_write_unlock(void);
unsigned long uu_tables_retry_at(void);
bool uu_tables_retry_now(unsigned long at);
void uu_tables_memory(unsigned long *bytes, unsigned long *count, unsigned long *users);
int uu_tables_init(void);
void uu_tables_exit(void);

/* src/option.c: options/userstacktrace_delay. Task context. */
int uu_option_init(bool enable);
void uu_option_exit(void);

/*
 * src/stats.c: the module's counters, per CPU, shown in tracefs's user_unwind_stats.
 * The values are mirrored in src/stats.rs.
 */
enum uu_stat {
	UU_STAT_REQUESTS,		/* unwind_deferred_request() accepted */
	UU_STAT_REQUESTS_FAILED,	/* unwind_deferred_request() refused */
	UU_STAT_REQUESTS_QUEUED,	/* ... accepted with a callback queued (0) */
	UU_STAT_CALLBACKS,		/* deferred callbacks run */
	UU_STAT_EXIT_CALLBACKS,		/* ... in a task that was exiting */
	UU_STAT_COOKIES_UNRECORDED,	/* a cookie event no instance's buffer took */
	UU_STAT_STACKS,			/* callbacks that recorded a stack */
	UU_STAT_FRAMES,			/* ... their frames */
	UU_STAT_EMPTY_STACKS,		/* ... of which with no frame */
	UU_STAT_FILE_CACHE,		/* file_cache events written */
	UU_STAT_FILE_CACHE_DEFERRED,	/* new files left to a later stack by the cap */
	UU_STAT_BUILD_ID_UNCACHED,	/* build-ids not read: pages not in the page cache */
	UU_STAT_CACHE_RESETS,		/* first-sight cache cleared */
	UU_STAT_FILE_CACHE_DROPPED,	/* file_cache events no buffer took */
	UU_STAT_LOOKUPS_CONTENDED,	/* frames left raw: mmap_lock was taken */
	UU_STAT_STACKS_AFTER_EXEC,	/* stacks left empty: the task exec'd since the request */
	UU_STAT_UNWIND_STACKS,		/* stacks unwound with .eh_frame */
	UU_STAT_UNWIND_CFI_FRAMES,	/* ... frames unwound by a CFI row */
	UU_STAT_UNWIND_FP_FRAMES,	/* ... frames unwound by frame pointer: no FDE */
	UU_STAT_UNWIND_ROW_MISSES,	/* ... rows parsed: not in the row cache */
	UU_STAT_UNWIND_CFI_ERRORS,	/* ... unwinds a bad table or the budget ended */
	UU_STAT_UNWIND_TRUNCATED,	/* ... stacks cut short of their outermost frame */
	UU_STAT_UNWIND_READS_UNFAULTED,	/* user reads failed: page not mapped, fetch asked */
	UU_STAT_UNWIND_TABLES_UNREAD,	/* frames whose table was not readable now: cut there */
	UU_STAT_UNWIND_POOL_BUSY,	/* no free work buffer: the kernel's stack recorded */
	UU_STAT_REQUESTS_SKIPPED,	/* events after unwind_reset_info() on the way out */
	UU_STAT_MEMO_EXPIRED,		/* mapping memos older than their bound: not used */
	UU_STAT_UNWIND_READS_REFUSED,	/* reads refused: not ordinary memory (VM_IO, PFNMAP) */
	UU_STAT_UNWIND_TABLES_UNSTABLE,	/* tables read while their file was written: not cached */
	UU_STAT_UNWIND_ROWS_PARSED,	/* row misses that ran an FDE's program (first sights) */
	UU_STAT_UNWIND_TABLES_MADE,	/* files' tables made */
	UU_STAT_UNWIND_TABLES_DROPPED,	/* files' tables dropped for memory */
	UU_STAT_UNWIND_TABLES_REFUSED,	/* files' tables not made or grown: table_kib, no memory */
	UU_STAT_FETCHES_QUEUED,		/* pages the callback missed, asked of the fetch thread */
	UU_STAT_FETCHES_DROPPED,	/* ... not asked: its queue was full */
	UU_STAT_UNWIND_TABLES_EVICTED,	/* files' tables in use dropped: user over its share */
	UU_STAT_NR
};

void uu_stat_add(enum uu_stat stat, unsigned long n);	/* any context */
u64 uu_stat_read(enum uu_stat stat);			/* any context */
const char *uu_stat_name(u32 stat);			/* any context */
extern const struct file_operations uu_stats_fops;

/* src/glue.c: small wrappers for Rust. */
enum {
	UU_LAYOUT_TASK_SIZE,
	UU_LAYOUT_TASK_MM,
	UU_LAYOUT_TASK_PID,
	UU_LAYOUT_TASK_TGID,
	UU_LAYOUT_TASK_GROUP_LEADER,
	UU_LAYOUT_VMA_SIZE,
	UU_LAYOUT_VMA_START,
	UU_LAYOUT_VMA_END,
	UU_LAYOUT_VMA_PGOFF,
	UU_LAYOUT_VMA_FILE,
	UU_LAYOUT_VMA_MM,
	UU_LAYOUT_VMA_FLAGS,
	UU_LAYOUT_FILE_SIZE,
	UU_LAYOUT_FILE_ID_SIZE,
	UU_LAYOUT_NR
};

int uu_layout(size_t *out, size_t n);	/* -EINVAL when n != UU_LAYOUT_NR */
u64 uu_now_ns(void);
int uu_get_random_key(u64 key[2]);	/* task context, may sleep */
u64 uu_kernel_siphash(const void *data, size_t len, const u64 key[2]);
u64 uu_kernel_siphash_1u64(u64 value, const u64 key[2]);

/* Rust: translate and emit one unwound stack. Task context, may fault and sleep. */
void uu_rust_stack(const unsigned long *ips, u32 nr, u64 cookie);
/*
 * Rust: unwind current's user stack with .eh_frame from @regs, then translate and emit it
 * as uu_rust_stack() does (@ips, the kernel's stack, when it has no buffer free). Task
 * context, may fault and sleep.
 */
void uu_rust_unwind_stack(const struct uu_regs *regs, const unsigned long *ips, u32 nr,
			  u64 cookie);
/* Rust: every file cookie needs a new file_cache event (a new reader may be starting). */
void uu_rust_files_reset(void);
/* Rust: parse a write to the option file. Returns 0 or 1, or -EINVAL. */
int uu_rust_parse_option(const u8 *buf, size_t len);

#endif /* _USER_UNWIND_H */
