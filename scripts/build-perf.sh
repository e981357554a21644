#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build perf from the kernel source the bench already has (tools/perf of $(kernel_src)),
# for `make bench`'s perf arms (tests/guest/bench.sh: P0, P1, P2): the perf of the kernel
# under test, with its deferred user callchains (`--call-graph fp,defer`), which a distro's
# perf may not have. Optional features off, so it links only libraries Debian 12 has (libelf,
# zlib, libtraceevent for tracepoints); cached outside the clone under $CACHE, keyed by the
# kernel source version, the flags and the compiler. Prints the binary's path.
# With --dwarf, a second build with libdw (elfutils), for the host only: `perf report` and
# `perf script` unwind the user stacks `--call-graph dwarf` copied with it (make bench-real).
# Usage: scripts/build-perf.sh [--dwarf]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dwarf=0
case ${1:-} in
"") ;;
--dwarf) dwarf=1 ;;
*) die "usage: scripts/build-perf.sh [--dwarf]" ;;
esac

# What a tracepoint record needs is kept (libelf, zlib, libtraceevent); the rest is off.
FLAGS=(NO_LIBPYTHON=1 NO_LIBPERL=1 NO_SLANG=1 NO_GTK2=1 NO_LIBBPF=1 BUILD_BPF_SKEL=0
	NO_LIBDEBUGINFOD=1 NO_LIBUNWIND=1 NO_LIBDW=1 NO_LIBLLVM=1 NO_JEVENTS=1 NO_LIBNUMA=1
	NO_LIBCAP=1 NO_LIBCRYPTO=1 NO_BABELTRACE2=1 NO_CAPSTONE=1 NO_LIBPFM4=1 NO_JVMTI=1
	NO_RUST=1 NO_DEMANGLE=1 NO_LZMA=1 NO_LIBZSTD=1 NO_AIO=1 NO_SHELLCHECK=1 NO_SDT=1
	WERROR=0)
# Debian packages perf's build wants beyond setup.sh's (flex, bison, libelf-dev,
# libtraceevent-dev and pkg-config are among those).
PACKAGES=(zlib1g-dev)
if ((dwarf)); then
	mapfile -t FLAGS < <(printf '%s\n' "${FLAGS[@]}" | grep -vx NO_LIBDW=1)
	PACKAGES+=(libdw-dev)
fi

SRC=$(kernel_src)
[ -f "$SRC/tools/perf/Makefile.perf" ] || die "no tools/perf in $SRC"
key=$({
	cat "$CACHE/linux-src.version"
	printf '%s\n' "${FLAGS[@]}"
	gcc --version | head -n1
} | sha256sum | cut -c1-16)
OUT=$CACHE/perf/$key
if [ -x "$OUT/perf" ] && [ "$(cat "$OUT/.done" 2>/dev/null)" = "$key" ]; then
	echo "$OUT/perf"
	exit 0
fi

install_packages " for perf" "${PACKAGES[@]}"

rm -f "$OUT/.done"
mkdir -p "$OUT"
say "perf: building from $SRC/tools/perf into $OUT (about 4 minutes on 2 cores)"
start=$(date +%s)
# The tree is shared with the kernel builds: perf's objects all go to O=.
make -C "$SRC/tools/perf" O="$OUT" -j"$(nproc)" "${FLAGS[@]}" perf >"$OUT/build.log" 2>&1 ||
	{ tail -n 30 "$OUT/build.log" >&2; die "perf build failed, see $OUT/build.log"; }
[ -x "$OUT/perf" ] || die "perf build left no $OUT/perf, see $OUT/build.log"
# The deferred user callchains this bench measures (the guest checks each run's records too).
grep -q defer_callchain "$OUT/perf" || die "this perf has no deferred callchains (--call-graph fp,defer)"
if ((dwarf)); then
	"$OUT/perf" version --build-options | grep -Eq 'dwarf-unwind: +\[ on' ||
		die "this perf was built without libdw (see $OUT/build.log)"
fi
say "perf: built in $(($(date +%s) - start)) s: $("$OUT/perf" version)"
echo "$key" >"$OUT/.done"
echo "$OUT/perf"
