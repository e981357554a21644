#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build user_unwind.ko out of tree, with CLIPPY=1: against the cached test kernel (the
# default; LLVM=-19 and the rustup toolchain, as the kernel was built), against the
# production-config test kernel the benchmark boots (KDIR=prod: the same toolchain; built
# in $TREE_OUT/module/prod), against Debian's stock kernel (KDIR=debian: GCC 14, rustc 1.85.1
# and bindgen 0.71.1 from the Debian root scripts/stock-kernel.sh prepares; built in
# $TREE_OUT/module/debian-*), or against any prepared tree (KDIR=/path, with the toolchain on
# PATH). Fails on any compiler or clippy warning. `build-module.sh clean` removes the
# objects.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Fails when the build log shows a compiler or clippy warning.
no_warnings() {
	! grep -E 'warning:|error:' "$log" >&2 || die "module build $1 has warnings"
}

# The sources alone, copied to $1/src: the clone also holds the test kernel's objects, and
# a separate output folder (MO=) wants a clean source tree.
copy_sources() {
	rm -rf "$1/src" && mkdir -p "$1/src"
	(cd "$ROOT" && find Kbuild src include -name Kbuild -o -name '*.[ch]' -o -name '*.rs') |
		(cd "$ROOT" && cpio -pdm --quiet "$1/src")
}

case ${KDIR:-} in
debian | prod)
	if [ "$KDIR" = debian ]; then
		"$ROOT/scripts/stock-kernel.sh"
		OUT=$(stock_module_dir) what="Debian's $DEBIAN_KERNEL"
	else
		KERNEL_FLAVOUR=prod "$ROOT/scripts/build-kernel.sh"
		OUT=$(prod_module_dir) what="the production-config test kernel"
	fi
	if [ "${1:-}" = clean ]; then
		rm -rf "$OUT"
		exit 0
	fi
	copy_sources "$OUT"
	if [ "$KDIR" = debian ]; then
		stock_toolchain_make -C "$(stock_build_dir)" M="$OUT/src" CLIPPY=1 modules
	else
		KERNEL_FLAVOUR=prod kmake M="$OUT/src" CLIPPY=1 modules
	fi >"$log" 2>&1 || { cat "$log" >&2; die "module build for $what failed"; }
	no_warnings "for $what"
	cp "$OUT/src/user_unwind.ko" "$OUT/user_unwind.ko"
	say "built $OUT/user_unwind.ko for $what"
	exit 0
	;;
esac

if [ -z "${KDIR:-}" ]; then
	# The test kernel: clang 19 and rustup's Rust with the matching Debian rust-src.
	KDIR=$(kernel_build_dir)
	args=(LLVM="$LLVM_SUFFIX" RUST_LIB_SRC="$(rust_lib_src)")
else
	# Another prepared tree: its own compiler family, and the rustc (and RUST_LIB_SRC, if
	# set) on PATH, which must be the ones the tree was prepared with.
	args=()
	! grep -q '^CONFIG_CC_IS_CLANG=y' "$KDIR/.config" 2>/dev/null || args+=(LLVM="$LLVM_SUFFIX")
	[ -z "${RUST_LIB_SRC:-}" ] || args+=(RUST_LIB_SRC="$RUST_LIB_SRC")
fi
[ -f "$KDIR/Makefile" ] || die "no prepared kernel tree at $KDIR: run make setup, or pass KDIR="
if [ "${1:-}" = clean ]; then
	make -C "$KDIR" M="$ROOT" "${args[@]}" clean >/dev/null
	make -C "$KDIR" M="$ROOT/tests/kmod" "${args[@]}" clean >/dev/null
	exit 0
fi
if ! make -C "$KDIR" M="$ROOT" "${args[@]}" CLIPPY=1 modules >"$log" 2>&1; then
	cat "$log" >&2
	die "module build failed"
fi
no_warnings "against $KDIR"
say "built $ROOT/user_unwind.ko against $KDIR"
# The guest tests' fixture (tests/kmod), for the test kernel only.
if [ "$KDIR" = "$(kernel_build_dir)" ]; then
	make -C "$KDIR" M="$ROOT/tests/kmod" "${args[@]}" modules >"$log" 2>&1 ||
		{ cat "$log" >&2; die "test fixture build failed"; }
	no_warnings "of the test fixture"
fi
