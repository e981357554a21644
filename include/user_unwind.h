/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interface between the Rust crate of user_unwind and its C glue.
 *
 * Functions named uu_rust_* are written in Rust and called from C; all others are C,
 * called from Rust. Contexts are stated per function.
 */
#ifndef _USER_UNWIND_H
#define _USER_UNWIND_H

#include <linux/types.h>

/* src/wrapper/symbols.c: the unexported kernel API, resolved at load. Task context. */
int uu_symbols_init(void);

/* src/hook.c: the request hook and the deferred callback. */
int uu_hook_init(void);		/* task context, may sleep */
void uu_hook_exit(void);		/* task context, may sleep; no callback runs after it */
int uu_hook_enable(void);		/* cookie event's reg callback */
void uu_hook_disable(void);		/* cookie event's unreg callback */

/* src/events.c */
void uu_events_init(void);
bool uu_is_own_event(unsigned short type);
void uu_emit_stack(u64 cookie, u16 start, u16 total, const u64 *offs,
		   const u64 *files, u32 nr);
void uu_emit_file_cache(u64 cookie, const char *path, const u8 *build_id,
			u32 build_id_len);
int uu_file_cache_reg(void);		/* file_cache's reg callback */
void uu_file_cache_unreg(void);

/* src/files.c: what file_cache reports, and the end of a file's life. */
struct file;
int uu_files_init(void);		/* task context; probes __fput */
void uu_files_exit(void);
const char *uu_file_path(struct file *file, char *buf, int len);
long uu_file_read(struct file *file, u64 offset, u8 *buf, size_t len);
struct vm_area_struct;
int uu_vma_name(struct vm_area_struct *vma, char *buf, int len);

/* src/option.c: options/userstacktrace_delay. Task context. */
int uu_option_init(bool enable);
void uu_option_exit(void);

/* src/glue.c: small wrappers for Rust. */
struct mm_struct *uu_current_mm(void);
void uu_vma_layout(size_t out[4]);
bool uu_tracing_on(void);
u64 uu_now_ns(void);
void uu_get_random_key(u64 key[2]);
u64 uu_kernel_siphash(const void *data, size_t len, const u64 key[2]);
u64 uu_kernel_siphash_1u64(u64 value, const u64 key[2]);

/* Rust: translate and emit one unwound stack. Task context, may fault and sleep. */
void uu_rust_stack(const unsigned long *ips, u32 nr, u64 cookie);
/* Rust: the struct file at @file is being freed. Any context but NMI. */
void uu_rust_file_freed(unsigned long file);
/* Rust: every file cookie needs a new file_cache event (a new reader may be starting). */
void uu_rust_files_reset(void);
/* Rust: parse a write to the option file. Returns 0 or 1, or -EINVAL. */
int uu_rust_parse_option(const u8 *buf, size_t len);

#endif /* _USER_UNWIND_H */
