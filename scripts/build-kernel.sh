#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the test kernel into the cache: tinyconfig + the fragments of $KERNEL_FLAVOUR
# (lib.sh: kernel_fragments; debug by default, prod for the benchmark), LLVM=-19.
# The build is keyed by kernel version, fragments and toolchain (lib.sh: kernel_key): when
# the key recorded in the build folder differs, the kernel is rebuilt in place, which
# redoes only what the change touches; nothing else triggers a build.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SRC=$(kernel_src)
OUT=$(kernel_build_dir)
KEY=$(kernel_key)
if [ "$(cat "$OUT/.done" 2>/dev/null)" = "$KEY" ] && [ -f "$OUT/arch/x86/boot/bzImage" ]; then
	say "test kernel up to date: $OUT"
	exit 0
fi
rm -f "$OUT/.done"
mkdir -p "$OUT"

frags=$(kernel_fragments)
names=$(for f in $frags; do basename "$f"; done | xargs)
say "kernel ($KERNEL_FLAVOUR): configuring (tinyconfig + $names)"
kmake tinyconfig >"$OUT/build.log" 2>&1 || die "make tinyconfig failed, see $OUT/build.log"
KCONFIG_CONFIG="$OUT/.config" "$SRC/scripts/kconfig/merge_config.sh" -m -O "$OUT" \
	"$OUT/.config" $frags >>"$OUT/build.log" 2>&1 ||
	die "merge_config.sh failed, see $OUT/build.log"
kmake olddefconfig >>"$OUT/build.log" 2>&1 || die "make olddefconfig failed, see $OUT/build.log"

# Every option the fragments ask for must have survived olddefconfig.
lost=$(grep -hE '^CONFIG_[A-Z0-9_]+=' $frags | grep -vxFf "$OUT/.config" || true)
[ -z "$lost" ] || die "options from kconfig/ did not stick (a dependency is missing): $lost"
kmake rustavailable >>"$OUT/build.log" 2>&1 || die "Rust is not available to the kernel build, see $OUT/build.log"

say "kernel ($KERNEL_FLAVOUR): building bzImage and modules (about 16 minutes on 2 cores for debug)"
start=$(date +%s)
kmake -j"$(($(nproc) + 1))" bzImage modules >>"$OUT/build.log" 2>&1 ||
	{ tail -n 30 "$OUT/build.log" >&2; die "kernel build failed, see $OUT/build.log"; }
say "kernel: built in $(($(date +%s) - start)) s"

{
	echo "kernel: $(cat "$CACHE/linux-src.version") ($(kmake -s kernelrelease))"
	echo "rustc: $(rustc --version)"
	echo "clang: $(clang$LLVM_SUFFIX --version | head -n1)"
	echo "bindgen: $(bindgen --version)"
} >"$OUT/versions.txt"
echo "$KEY" >"$OUT/.done"
say "test kernel ready: $OUT"
