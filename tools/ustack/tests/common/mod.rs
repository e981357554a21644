// SPDX-License-Identifier: GPL-2.0

//! What the integration tests share: the committed recordings and a scratch folder.
//! Each test binary uses what it needs of it.
#![allow(dead_code)]

pub mod pprof;

use std::path::{Path, PathBuf};

/// A committed recording in `tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// An empty scratch folder, named after the test binary, `tag` and the process.
pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "ustack-{}-{tag}-{}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
