#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install what the bench needs and is missing: Debian packages (among them gdb for the
# unwinder's live oracle, chromium for the flame graph's browser test and debuginfod for
# ustack's), the 7.3 kernel source, the matching rust-src, bindgen, inferno-collapse-perf
# (ustack's perf script consumer), Google's pprof built from Debian's Go source (ustack's
# pprof reader). Idempotent; every download lands in the cache folder.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PACKAGES=(clang-19 lld-19 llvm-19 libclang-19-dev flex bison bc libelf-dev libssl-dev cpio
	make gcc xz-utils qemu-system-x86 busybox-static trace-cmd binutils python3 perl
	debootstrap libtraceevent-dev pkg-config libc6-dbg gdb chromium debuginfod dmsetup e2fsprogs
	golang-go golang-github-google-pprof-dev)

mkdir -p "$CACHE"
command -v rustc >/dev/null || die "rustc not found: install Rust with rustup (the kernel needs >= 1.85)"
command -v cargo >/dev/null || die "cargo not found: install Rust with rustup"
rv=$(rustc_version)
[ "$(printf '%s\n1.85.0\n' "$rv" | sort -V | head -n1)" = 1.85.0 ] ||
	die "rustc $rv is too old: the kernel needs 1.85 or newer (rustup update)"
command -v apt-get >/dev/null || die "apt-get not found: this bench needs a Debian 12 machine"

install_packages "" "${PACKAGES[@]}"

RV=$(rustc_version)
RUST_SRC_DIR="$CACHE/rust-src-$RV"
if [ ! -d "$(rust_lib_src)/core" ]; then
	private_apt
	ver=$(apt-cache "${APT_OPTS[@]}" madison rust-src | awk -v v="$RV" '$3 ~ "^"v"\\+" {print $3; exit}')
	[ -n "$ver" ] || die "no Debian rust-src package matches rustc $RV"
	deb=$(fetch_deb "rust-src=$ver")
	rm -rf "$RUST_SRC_DIR.tmp" && mkdir -p "$RUST_SRC_DIR.tmp"
	dpkg-deb -x "$deb" "$RUST_SRC_DIR.tmp"
	rm -rf "$RUST_SRC_DIR" && mv "$RUST_SRC_DIR.tmp" "$RUST_SRC_DIR"
	[ -d "$(rust_lib_src)/core" ] || die "rust-src $ver has no library/core"
fi

if [ ! -s "$CACHE/linux-src.path" ] || [ ! -f "$(cat "$CACHE/linux-src.path")/Makefile" ]; then
	private_apt
	deb=$(fetch_deb "linux-source-$KERNEL_SERIES")
	say "unpacking $(basename "$deb")"
	tmp="$CACHE/linux-deb.tmp"
	rm -rf "$tmp" && mkdir -p "$tmp"
	dpkg-deb -x "$deb" "$tmp"
	rm -rf "$CACHE/linux-src" && mkdir -p "$CACHE/linux-src"
	tar -xf "$tmp/usr/src/linux-source-$KERNEL_SERIES.tar.xz" -C "$CACHE/linux-src"
	rm -rf "$tmp"
	dir=$(echo "$CACHE/linux-src"/linux-source-*)
	[ -f "$dir/Makefile" ] || die "unpacked kernel source has no Makefile"
	dpkg-deb -f "$deb" Version >"$CACHE/linux-src.version"
	echo "$dir" >"$CACHE/linux-src.path"
fi

# bindgen is pinned: 0.72 and later lay out an empty `____cacheline_aligned` struct without its
# alignment, which misplaces every task_struct field after `stats` in the Rust bindings
# (Documentation/user_unwind.rst, "bindgen and task_struct"). 0.71.1 is the kernel's minimum
# and what Debian built its own 7.3 kernel with.
if [ "$(bindgen --version 2>/dev/null)" != "bindgen $BINDGEN_VERSION" ]; then
	say "building bindgen-cli $BINDGEN_VERSION with cargo (about 75 s)"
	cargo install --quiet --locked --force --root "$CACHE/cargo" "bindgen-cli@$BINDGEN_VERSION" ||
		die "cargo install bindgen-cli@$BINDGEN_VERSION failed"
	[ "$(bindgen --version)" = "bindgen $BINDGEN_VERSION" ] ||
		die "bindgen on PATH is $(bindgen --version), not $BINDGEN_VERSION: the cache's must come first"
fi

# inferno-collapse-perf reads ustack's perf script text in tools/ustack's tests, as a user's
# stackcollapse-perf.pl would (which no package registry carries). It is CDDL-1.0: it is only
# run, as an external program, never linked or copied into the project.
if [ ! -x "$CACHE/cargo/bin/inferno-collapse-perf" ] ||
	! grep -q "^\"inferno $INFERNO_VERSION " "$CACHE/cargo/.crates.toml" 2>/dev/null; then
	say "building inferno-collapse-perf $INFERNO_VERSION with cargo (about 65 s)"
	cargo install --quiet --locked --force --root "$CACHE/cargo" "inferno@$INFERNO_VERSION" \
		--bin inferno-collapse-perf || die "cargo install inferno@$INFERNO_VERSION failed"
fi

# pprof reads ustack's --pprof output in tools/ustack's tests, as a user's pprof would.
"$ROOT/scripts/build-pprof.sh" >/dev/null

say "setup ok: kernel $(cat "$CACHE/linux-src.version"), rustc $RV, $(bindgen --version), cache $CACHE"
