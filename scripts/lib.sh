# SPDX-License-Identifier: GPL-2.0
# Shared settings for the project's scripts: the cache folder and small helpers.
# Sourced, never run.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${USER_UNWIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/user-unwind}
KERNEL_SERIES=7.3
LLVM_SUFFIX=-19
BINDGEN_VERSION=0.71.1
export LIBCLANG_PATH=/usr/lib/llvm${LLVM_SUFFIX}/lib
export PATH="$CACHE/cargo/bin:$PATH"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The rustc version string ("1.95.0"), which picks the matching rust-src.
rustc_version() { rustc --version | awk '{print $2}'; }

# The unpacked kernel source tree, set up by setup.sh.
kernel_src() { cat "$CACHE/linux-src.path" 2>/dev/null || die "kernel source missing: run scripts/setup.sh"; }

# Everything the kernel build depends on, hashed: kernel version, config fragments, toolchain.
kernel_key() {
	{
		cat "$CACHE/linux-src.version"
		cat "$ROOT"/kconfig/*.config
		rustc --version
		"clang$LLVM_SUFFIX" --version | head -n1
		bindgen --version
	} | sha256sum | cut -c1-16
}

# One build folder, rebuilt in place (make only redoes what a change touches) when the key
# recorded in it differs from kernel_key.
kernel_build_dir() { echo "$CACHE/kbuild/linux-$KERNEL_SERIES"; }

rust_lib_src() { echo "$CACHE/rust-src-$(rustc_version)/usr/src/rustc-$(rustc_version)/library"; }

kmake() {
	make -C "$(kernel_src)" O="$(kernel_build_dir)" LLVM="$LLVM_SUFFIX" \
		RUST_LIB_SRC="$(rust_lib_src)" "$@"
}
