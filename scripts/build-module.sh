#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build user_unwind.ko out of tree, with CLIPPY=1, against $KDIR or the cached test kernel.
# Fails on any compiler or clippy warning. `build-module.sh clean` removes the objects.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KDIR=${KDIR:-$(kernel_build_dir)}
[ -f "$KDIR/Makefile" ] || die "no prepared kernel tree at $KDIR: run make setup, or pass KDIR="
if [ "${1:-}" = clean ]; then
	make -C "$KDIR" M="$ROOT" LLVM="$LLVM_SUFFIX" clean >/dev/null
	exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! make -C "$KDIR" M="$ROOT" LLVM="$LLVM_SUFFIX" RUST_LIB_SRC="$(rust_lib_src)" CLIPPY=1 \
	modules >"$log" 2>&1; then
	cat "$log" >&2
	die "module build failed"
fi
if grep -E 'warning:|error:' "$log" >&2; then
	die "module build has warnings"
fi
say "built $ROOT/user_unwind.ko against $KDIR"
