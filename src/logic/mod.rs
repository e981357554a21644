// SPDX-License-Identifier: GPL-2.0

//! The module's pure logic: `core` only, no `kernel::` imports, no `unsafe`. The same files
//! build into `user_unwind.ko` and into the host crate in `host/`, which runs their tests.

pub mod buildid;
pub mod cfi;
pub mod frames;
pub mod ftable;
pub mod memo;
pub mod offset;
pub mod option;
pub mod seen;
pub mod siphash;
pub mod unwinder;
