#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Prepare Debian's stock kernel ($DEBIAN_KERNEL, scripts/lib.sh) as a module target, in
# the cache: Debian's kernel image and headers (.config, Module.symvers, BTF vmlinux), a
# Debian $DEBIAN_TOOLS_SUITE root with the toolchain Debian built that kernel with (gcc-14,
# rustc 1.85.1, bindgen 0.71.1, pahole), and the kernel source prepared with it
# (modules_prepare), which gives the Rust metadata no Debian package ships. Idempotent:
# each step is redone only when what it depends on changed (stock_key).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROOTFS=$(stock_root)
OUT=$(stock_build_dir)
TOOLS=(gcc-14 make bc flex bison libelf-dev libssl-dev dwarves rustc rust-src rust-clippy
	bindgen libclang-dev cpio kmod python3 xz-utils openssl)

command -v debootstrap >/dev/null || die "debootstrap missing: run scripts/setup.sh"
[ "$(id -u)" = 0 ] || die "need root: the toolchain root is entered with unshare and chroot"

# 1. The toolchain root.
if [ "$(cat "$ROOTFS/.tools-done" 2>/dev/null)" != "${TOOLS[*]}" ]; then
	if [ ! -e "$ROOTFS/.debootstrap-done" ]; then
		say "creating a Debian $DEBIAN_TOOLS_SUITE root for the stock kernel's toolchain (about 1 minute)"
		rm -rf "$ROOTFS"
		debootstrap --variant=minbase "$DEBIAN_TOOLS_SUITE" "$ROOTFS" "$(debian_mirror)" \
			>"$CACHE/trixie-root.log" 2>&1 || die "debootstrap failed, see $CACHE/trixie-root.log"
		touch "$ROOTFS/.debootstrap-done"
	fi
	say "installing the stock kernel's toolchain in it (about 3 minutes)"
	in_stock_root apt-get update -qq >>"$CACHE/trixie-root.log" 2>&1 ||
		die "apt-get update in the toolchain root failed, see $CACHE/trixie-root.log"
	in_stock_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${TOOLS[@]}" >>"$CACHE/trixie-root.log" 2>&1 ||
		die "installing ${TOOLS[*]} in the toolchain root failed, see $CACHE/trixie-root.log"
	echo "${TOOLS[*]}" >"$ROOTFS/.tools-done"
fi

# The toolchain must be the one the kernel's config names, or the Rust symbols' crate
# hashes and the config itself (olddefconfig) differ from Debian's.
stock_fetch
config=$(stock_headers)/.config
want_rustc=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\(.*\)"$/\1/p' "$config")
want_bindgen=$(sed -n 's/^CONFIG_BINDGEN_VERSION_TEXT="\(.*\)"$/\1/p' "$config")
want_cc=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\(.*\)"$/\1/p' "$config")
got_rustc=$(in_stock_root rustc --version)
got_bindgen=$(in_stock_root bindgen --version)
got_cc=$(in_stock_root x86_64-linux-gnu-gcc-14 --version | head -n1)
[ "$got_rustc" = "$want_rustc" ] || die "toolchain root has $got_rustc, Debian's kernel was built with $want_rustc"
[ "$got_bindgen" = "$want_bindgen" ] || die "toolchain root has $got_bindgen, Debian's kernel was built with $want_bindgen"
[ "$got_cc" = "$want_cc" ] || die "toolchain root has $got_cc, Debian's kernel was built with $want_cc"

# 2. The prepared tree, from the same Debian source package as the kernel.
[ "$(cat "$CACHE/linux-src.version")" = "$DEBIAN_KERNEL_VERSION" ] ||
	die "the cached kernel source is $(cat "$CACHE/linux-src.version"), Debian's kernel is $DEBIAN_KERNEL_VERSION"
KEY=$(stock_key)
if [ "$(cat "$OUT/.done" 2>/dev/null)" = "$KEY" ]; then
	say "stock kernel tree up to date: $OUT"
	exit 0
fi
rm -f "$OUT/.done"
mkdir -p "$OUT"
cp "$(stock_headers)/.config" "$(stock_headers)/Module.symvers" "$OUT/"
# The BTF vmlinux: pahole builds each module's BTF against it.
cp "$(stock_headers)/vmlinux" "$OUT/" 2>/dev/null || true
say "preparing Debian's $DEBIAN_KERNEL tree with its own toolchain (about 3 minutes)"
start=$(date +%s)
stock_make olddefconfig >"$OUT/prepare.log" 2>&1 || die "olddefconfig failed, see $OUT/prepare.log"
if ! cmp -s <(grep '^CONFIG_' "$OUT/.config" | sort) <(grep '^CONFIG_' "$config" | sort); then
	diff <(grep '^CONFIG_' "$config" | sort) <(grep '^CONFIG_' "$OUT/.config" | sort) | head -n 20 >&2
	die "the config changed under olddefconfig: the toolchain root is not Debian's"
fi
stock_make -j"$(($(nproc) + 1))" modules_prepare >>"$OUT/prepare.log" 2>&1 ||
	{ tail -n 30 "$OUT/prepare.log" >&2; die "modules_prepare failed, see $OUT/prepare.log"; }
[ -f "$OUT/rust/libkernel.rmeta" ] || die "modules_prepare made no Rust metadata, see $OUT/prepare.log"
release=$(stock_make -s kernelrelease)
[ "$release" = "$DEBIAN_KERNEL" ] || die "prepared tree says $release, not $DEBIAN_KERNEL"
say "stock kernel tree prepared in $(($(date +%s) - start)) s: $OUT"
{
	echo "kernel: $DEBIAN_KERNEL ($DEBIAN_KERNEL_VERSION)"
	echo "rustc: $got_rustc"
	echo "bindgen: $got_bindgen"
	echo "cc: $got_cc"
} >"$OUT/versions.txt"
echo "$KEY" >"$OUT/.done"
