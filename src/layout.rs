// SPDX-License-Identifier: GPL-2.0

//! Refusing to run on Rust bindings that disagree with C about a struct layout.
//!
//! bindgen 0.72 and later emit an empty struct declared `____cacheline_aligned` (such as
//! `struct sched_statistics` with `CONFIG_SCHEDSTATS=n`) without its alignment, so every
//! `task_struct` field after it is misplaced in the generated bindings, and the kernel
//! crate's own `Task::mm()`, `pid()` or `group_leader()` read other fields
//! (Documentation/user_unwind.rst, "bindgen and task_struct"). The module reads
//! `vm_area_struct` fields through the bindings and `current->mm` through the kernel crate:
//! at load it compares every such offset, and the sizes of the structs, with C's.

use crate::logic::frames::FileId;
use crate::{ffi, to_result};
use core::mem::{offset_of, size_of};
use kernel::bindings::{file, task_struct, vm_area_struct};
use kernel::prelude::*;

/// What the bindings say, in the order of `UU_LAYOUT_*` (include/user_unwind.h).
const RUST: [(&str, usize); 14] = [
    ("sizeof(struct task_struct)", size_of::<task_struct>()),
    ("task_struct.mm", offset_of!(task_struct, mm)),
    ("task_struct.pid", offset_of!(task_struct, pid)),
    ("task_struct.tgid", offset_of!(task_struct, tgid)),
    (
        "task_struct.group_leader",
        offset_of!(task_struct, group_leader),
    ),
    ("sizeof(struct vm_area_struct)", size_of::<vm_area_struct>()),
    (
        "vm_area_struct.vm_start",
        offset_of!(vm_area_struct, __bindgen_anon_1.__bindgen_anon_1.vm_start),
    ),
    (
        "vm_area_struct.vm_end",
        offset_of!(vm_area_struct, __bindgen_anon_1.__bindgen_anon_1.vm_end),
    ),
    (
        "vm_area_struct.vm_pgoff",
        offset_of!(vm_area_struct, vm_pgoff),
    ),
    (
        "vm_area_struct.vm_file",
        offset_of!(vm_area_struct, vm_file),
    ),
    ("vm_area_struct.vm_mm", offset_of!(vm_area_struct, vm_mm)),
    (
        "vm_area_struct.vm_flags",
        offset_of!(vm_area_struct, __bindgen_anon_2.vm_flags),
    ),
    ("sizeof(struct file)", size_of::<file>()),
    ("sizeof(struct uu_file_id)", size_of::<FileId>()),
];

/// The fields where the bindings and C disagree, as `(name, rust, c)`.
pub(crate) fn mismatches() -> Result<impl Iterator<Item = (&'static str, usize, usize)>> {
    let mut c = [0usize; RUST.len()];
    // SAFETY: `c` is valid for `c.len()` writes; C writes only if that is its count.
    to_result(unsafe { ffi::uu_layout(c.as_mut_ptr(), c.len()) })?;
    Ok(RUST
        .into_iter()
        .zip(c)
        .filter(|((_, rust), c)| rust != c)
        .map(|((name, rust), c)| (name, rust, c)))
}

/// Fails, with one message per field, when the bindings disagree with C.
///
/// The refusal itself is not exercised by the tests: that needs a second test kernel built
/// with a bindgen that misplaces fields (another 15 minutes of build per run); the KUnit
/// suite checks that the comparison finds nothing on the bench's kernel, and
/// `scripts/check-bindgen.sh` that the bench's bindgen keeps the layout the comparison
/// would catch.
pub(crate) fn check() -> Result {
    let mut bad = 0;
    for (name, rust, c) in mismatches()? {
        pr_err!("Rust bindings place {name} at {rust}, C at {c}: rebuild the kernel with bindgen 0.71\n");
        bad += 1;
    }
    if bad > 0 {
        return Err(ENOEXEC);
    }
    Ok(())
}
