#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build Google's pprof, the upstream reader of ustack's --pprof output and a test oracle of
# it (tools/ustack/tests/pprof.rs): from the Go source Debian packages
# (golang-github-google-pprof-dev, built with golang-go, no module download), installing
# the two packages if they are missing. Cached outside the clone under $CACHE, keyed by
# the two packages' versions. Prints the binary's path.
# Usage: scripts/build-pprof.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PACKAGES=(golang-go golang-github-google-pprof-dev)
install_packages " for pprof" "${PACKAGES[@]}"

key=$(dpkg-query -W -f='${Package} ${Version}\n' "${PACKAGES[@]}" | sha256sum | cut -c1-16)
OUT=$CACHE/pprof/$key
if [ -x "$OUT/pprof" ] && [ "$(cat "$OUT/.done" 2>/dev/null)" = "$key" ]; then
	echo "$OUT/pprof"
	exit 0
fi

rm -f "$OUT/.done"
mkdir -p "$OUT"
say "pprof: building github.com/google/pprof from Debian's Go source into $OUT"
# GOPATH mode over the packaged source: every dependency is a Debian package too.
GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE="$OUT/gocache" \
	go build -o "$OUT/pprof" github.com/google/pprof >"$OUT/build.log" 2>&1 ||
	{ tail -n 30 "$OUT/build.log" >&2; die "pprof build failed, see $OUT/build.log"; }
[ -x "$OUT/pprof" ] || die "pprof build left no $OUT/pprof, see $OUT/build.log"
rm -rf "$OUT/gocache"
echo "$key" >"$OUT/.done"
echo "$OUT/pprof"
