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

/// `ustack ARGS`, which must succeed: its standard output and standard error.
pub fn ustack_ok(args: &[&str]) -> (String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

/// `ustack ARGS FILE`, which must fail as a usage error (exit status 2): its standard error.
pub fn ustack_usage_error(args: &[&str], file: &Path) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    err
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
