// SPDX-License-Identifier: GPL-2.0

//! The `user_unwind` module's pure-logic files, compiled for the host so `cargo test` runs
//! their unit tests. The files live in `src/logic/` of the module; nothing here copies them.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

#[path = "../../src/logic/mod.rs"]
pub mod logic;
