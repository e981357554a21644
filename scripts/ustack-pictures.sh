#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The pictures README.md and Documentation/ustack.rst show, made from a committed
# recording so that they stay true: ustack's flame graph of kernel and user frames and its
# off-CPU flame graph of tools/ustack/tests/fixtures/kstack.dat, as SVG in
# Documentation/images/. The frames are named from the recording's own files only (its
# uu_offcpu, beside it; kallsyms in the trace), never from this machine's, so every
# machine makes the same bytes; tools/ustack/tests/pictures.rs fails when the committed
# pictures differ from what this makes.
# Usage: scripts/ustack-pictures.sh [OUTDIR]   (default Documentation/images)
#        USTACK=path/to/ustack to use that binary (default: built with cargo)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

OUT=${1:-$ROOT/Documentation/images}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -z "${USTACK:-}" ]; then
	say "building ustack (cargo build --release)"
	(cd "$ROOT/tools/ustack" && cargo build --release --quiet) || die "building ustack failed"
	USTACK=$ROOT/tools/ustack/target/release/ustack
fi
[ -x "$USTACK" ] || die "no ustack at $USTACK"

# From the fixtures' folder: the graphs' titles name the recording as kstack.dat, and the
# traced machine's /usr/bin is that folder (uu_offcpu); nothing else is looked for.
cd "$ROOT/tools/ustack/tests/fixtures"
NAMING=(-q --sysroot /nonexistent --sysroot-only --map /usr/bin=.)
"$USTACK" "${NAMING[@]}" --svg "$OUT/ustack-flame.svg" kstack.dat ||
	die "ustack --svg on kstack.dat failed"
"$USTACK" "${NAMING[@]}" --off-cpu --svg "$OUT/ustack-offcpu.svg" kstack.dat ||
	die "ustack --off-cpu --svg on kstack.dat failed"
say "pictures: $OUT/ustack-flame.svg, $OUT/ustack-offcpu.svg"
