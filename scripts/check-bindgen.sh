#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The bench's bindgen keeps the layout of an empty cacheline-aligned struct (the reproducer
# in tests/bindgen/repro.h, Documentation/user_unwind.rst "bindgen and task_struct"): the
# field after it must be at offset 64 in the generated Rust, as in C. BINDGEN=/path/to/bindgen
# checks another one.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
BINDGEN=${BINDGEN:-bindgen}
"$BINDGEN" --version
# The kernel's own bindgen flags that matter here (rust/Makefile): no layout tests, core.
"$BINDGEN" --use-core --no-layout-tests "$ROOT/tests/bindgen/repro.h" -o "$out/repro.rs" -- -x c
cat >"$out/lib.rs" <<'RS'
#![no_std]
#![allow(non_camel_case_types, dead_code)]
include!("repro.rs");
const _: () = assert!(core::mem::offset_of!(outer, after) == 64, "field after the empty aligned struct misplaced");
const _: () = assert!(core::mem::size_of::<outer>() == 128, "struct size differs from C's");
RS
rustc --edition 2021 --crate-type rlib --emit metadata -o "$out/repro.rmeta" "$out/lib.rs"
echo "bindgen keeps the layout of tests/bindgen/repro.h"
