# SPDX-License-Identifier: GPL-2.0
# Shared settings for the project's scripts: the cache folder and small helpers.
# Sourced, never run.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${USER_UNWIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/user-unwind}
# What a checkout builds and logs (test programs, the prod and Debian modules, check logs,
# the demo) lives in a folder of its own, so that two checkouts' runs never mix outputs.
TREE_OUT=$CACHE/tree/$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)
PROG=$TREE_OUT/prog
KERNEL_SERIES=7.3
LLVM_SUFFIX=-19
BINDGEN_VERSION=0.71.1
# inferno's collapse-perf, the Rust port of FlameGraph's stackcollapse-perf.pl: a test oracle
# of ustack's perf script text (tools/ustack/tests/formats.rs), run as a separate program.
INFERNO_VERSION=0.12.8
export LIBCLANG_PATH=/usr/lib/llvm${LLVM_SUFFIX}/lib
export PATH="$CACHE/cargo/bin:$PATH"

# Debian's stock kernel, the second target (scripts/stock-kernel.sh): its release as
# `uname -r` says it, the package version, the suite that carries it, and the Debian release
# whose toolchain built it. The next Debian kernel is a change of these lines.
DEBIAN_KERNEL=7.3.4+deb13-amd64
DEBIAN_KERNEL_VERSION=7.3.4-1~bpo13+1
DEBIAN_KERNEL_SUITE=trixie-backports
DEBIAN_TOOLS_SUITE=trixie

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Installs the Debian packages among "$@" that are missing, saying they are for $1 (the
# first argument, then the packages). Idempotent: nothing runs when all are there.
install_packages() {
	local what=$1 missing=() p
	shift
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	say "installing Debian packages$what: ${missing[*]}"
	[ "$(id -u)" = 0 ] || die "need root to install ${missing[*]} (or install them yourself)"
	apt-get update -qq || die "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
		>/dev/null || die "apt-get install ${missing[*]} failed"
}

# The rustc version string ("1.95.0"), which picks the matching rust-src.
rustc_version() { rustc --version | awk '{print $2}'; }

# The unpacked kernel source tree, set up by setup.sh.
kernel_src() { cat "$CACHE/linux-src.path" 2>/dev/null || die "kernel source missing: run scripts/setup.sh"; }

# The test kernel comes in two flavours, picked by $KERNEL_FLAVOUR: debug (the default; the
# base fragment plus the checkers of debug.config, what the tests run on) and prod (the base
# fragment alone, as a production kernel is configured; what `make bench` measures on).
KERNEL_FLAVOUR=${KERNEL_FLAVOUR:-debug}
kernel_fragments() {
	case $KERNEL_FLAVOUR in
	debug) echo "$ROOT/kconfig/base.config $ROOT/kconfig/debug.config" ;;
	prod) echo "$ROOT/kconfig/base.config" ;;
	*) die "KERNEL_FLAVOUR is debug or prod, not '$KERNEL_FLAVOUR'" ;;
	esac
}

# Everything the kernel build depends on, hashed: kernel version, config fragments, toolchain.
kernel_key() {
	{
		cat "$CACHE/linux-src.version"
		# shellcheck disable=SC2046 # the fragments are paths without spaces
		cat $(kernel_fragments)
		rustc --version
		"clang$LLVM_SUFFIX" --version | head -n1
		bindgen --version
	} | sha256sum | cut -c1-16
}

# One build folder per flavour, rebuilt in place (make only redoes what a change touches)
# when the key recorded in it differs from kernel_key.
kernel_build_dir() {
	case $KERNEL_FLAVOUR in
	debug) echo "$CACHE/kbuild/linux-$KERNEL_SERIES" ;;
	*) echo "$CACHE/kbuild/linux-$KERNEL_SERIES-$KERNEL_FLAVOUR" ;;
	esac
}

# The module built for the prod flavour (build-module.sh KDIR=prod).
prod_module_dir() { echo "$TREE_OUT/module/prod"; }
# The test programs, built once into the cache (frame pointers), so that the host-side
# checks read the very binaries that ran in the guest.
build_test_programs() {
	mkdir -p "$PROG"
	make -s -C "$ROOT/tests/prog" OUT="$PROG" || die "building the test programs failed"
}

# add_libraries FILE...: to the caller's `adds` array (run-guest.sh --add arguments),
# every library ldd lists for each file, at its path (the real file behind a symlink),
# each once. add_binaries FILE...: each file at its path too.
declare -A staged=()
add_libraries() {
	local bin lib
	for bin in "$@"; do
		for lib in $(ldd "$bin" | grep -oE '/[^ ]+' || true); do
			[ -z "${staged[$lib]:-}" ] || continue
			staged[$lib]=1
			adds+=(--add "$(readlink -f "$lib"):$lib")
		done
	done
}
add_binaries() {
	local bin
	for bin in "$@"; do
		if [ -z "${staged[$bin]:-}" ] && [ -x "$bin" ]; then
			staged[$bin]=1
			adds+=(--add "$(readlink -f "$bin"):$bin")
		fi
		add_libraries "$bin"
	done
}

rust_lib_src() { echo "$CACHE/rust-src-$(rustc_version)/usr/src/rustc-$(rustc_version)/library"; }

# The mirror the machine's own Debian sources name: every download goes there.
debian_mirror() {
	local uri
	uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
	[ -n "$uri" ] || uri=$(awk '/^deb / && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
	[ -n "$uri" ] || die "no Debian mirror found in /etc/apt/sources.list.d/debian.sources"
	echo "$uri"
}

# A private apt configuration that adds $DEBIAN_KERNEL_SUITE without touching the system's
# apt state. Sets APT and APT_OPTS.
APT="$CACHE/apt"
private_apt() {
	mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/debs" "$APT/parts"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) $DEBIAN_KERNEL_SUITE main" \
		>"$APT/sources.list"
	APT_OPTS=(-o Dir::Etc::sourcelist="$APT/sources.list" -o Dir::Etc::sourceparts="$APT/parts"
		-o Dir::Etc::preferencesparts="$APT/parts" -o Dir::State::Lists="$APT/lists"
		-o Dir::Cache="$APT/cache" -o APT::Sandbox::User=root)
	if [ ! -e "$APT/updated" ]; then
		say "fetching the $DEBIAN_KERNEL_SUITE package lists (private apt configuration)"
		apt-get "${APT_OPTS[@]}" update -qq || die "private apt-get update failed"
		touch "$APT/updated"
	fi
}

# Download one package (name=version optional) into $APT/debs, once; prints its path.
fetch_deb() {
	local spec=$1 name=${1%%=*} ver=${1#*=}
	[ "$ver" = "$1" ] && ver=
	if ! ls "$APT/debs/${name}_${ver//:/%3a}"*.deb >/dev/null 2>&1; then
		say "downloading $spec"
		(cd "$APT/debs" && apt-get "${APT_OPTS[@]}" download "$spec" >/dev/null) ||
			die "apt-get download $spec failed"
	fi
	ls "$APT/debs/${name}_${ver//:/%3a}"*.deb | head -n1
}

kmake() {
	make -C "$(kernel_src)" O="$(kernel_build_dir)" LLVM="$LLVM_SUFFIX" \
		RUST_LIB_SRC="$(rust_lib_src)" "$@"
}

# Debian's stock kernel (scripts/stock-kernel.sh).
stock_root() { echo "$CACHE/$DEBIAN_TOOLS_SUITE-root"; }
stock_build_dir() { echo "$CACHE/kbuild/debian-$DEBIAN_KERNEL"; }
stock_pkgs() { echo "$CACHE/debian-$DEBIAN_KERNEL"; }
stock_headers() { echo "$(stock_pkgs)/headers/usr/src/linux-headers-$DEBIAN_KERNEL"; }
stock_vmlinuz() { echo "$(stock_pkgs)/binary/usr/lib/modules/$DEBIAN_KERNEL/vmlinuz"; }
# Debian's own modules the guest tests load (the test kernel has them built in): loop,
# device-mapper and ext4 under the suspended-device test, overlayfs. Decompressed (busybox's
# insmod reads plain .ko), with their dependencies, and "order" listing them for insmod.
STOCK_GUEST_MODULES="loop dm-mod ext4 overlay"
stock_guest_modules() { echo "$(stock_pkgs)/guest-modules"; }

# Runs a command in the toolchain root, with the cache and the clone at their own paths.
# A private mount namespace: nothing of it outlives the command, nothing of the host changes.
in_stock_root() {
	local r
	r=$(stock_root)
	mkdir -p "$r$CACHE" "$r$ROOT"
	cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
	unshare -m --propagation private -- sh -c '
		r=$1 cache=$2 root=$3
		shift 3
		mount -t proc proc "$r/proc" && mount --rbind /dev "$r/dev" &&
		mount --bind "$cache" "$r$cache" && mount --bind "$root" "$r$root" &&
		exec chroot "$r" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			LANG=C.UTF-8 "$@"' sh "$r" "$CACHE" "$ROOT" "$@"
}

# Downloads and unpacks Debian's kernel image and headers, once.
stock_fetch() {
	local pkgs deb
	pkgs=$(stock_pkgs)
	[ -f "$(stock_headers)/Module.symvers" ] && [ -f "$(stock_vmlinuz)" ] &&
		[ -f "$(stock_guest_modules)/order" ] && return 0
	private_apt
	rm -rf "$pkgs" && mkdir -p "$pkgs/headers" "$pkgs/binary"
	deb=$(fetch_deb "linux-headers-$DEBIAN_KERNEL=$DEBIAN_KERNEL_VERSION")
	dpkg-deb -x "$deb" "$pkgs/headers"
	deb=$(fetch_deb "linux-binary-$DEBIAN_KERNEL=$DEBIAN_KERNEL_VERSION")
	dpkg-deb -x "$deb" "$pkgs/binary"
	[ -f "$(stock_headers)/Module.symvers" ] || die "linux-headers-$DEBIAN_KERNEL has no Module.symvers"
	[ -f "$(stock_vmlinuz)" ] || die "linux-binary-$DEBIAN_KERNEL has no vmlinuz"
	stock_fetch_modules
}

# The guest tests' modules out of linux-modules-$DEBIAN_KERNEL (stock_guest_modules): the
# package has no modules.dep (depmod makes it at install), so each module's dependencies
# come from its own modinfo.
stock_fetch_modules() {
	local deb out tmp
	deb=$(fetch_deb "linux-modules-$DEBIAN_KERNEL=$DEBIAN_KERNEL_VERSION")
	out=$(stock_guest_modules)
	tmp=$(mktemp -d)
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards './usr/lib/modules/*/kernel/*' ||
		die "unpacking linux-modules-$DEBIAN_KERNEL failed"
	rm -rf "$out" && mkdir -p "$out"
	# Each wanted module after its dependencies, each once, decompressed.
	# shellcheck disable=SC2086 # the names are words
	python3 - "$tmp" "$out" $STOCK_GUEST_MODULES <<'PY' || die "Debian's modules for the guest: see above"
import lzma, os, sys
tmp, out, want = sys.argv[1], sys.argv[2], sys.argv[3:]
norm = lambda n: n.replace("_", "-")
paths = {}
for d, _, files in os.walk(tmp):
    for f in files:
        if ".ko" in f:
            paths[norm(f.split(".ko")[0])] = os.path.join(d, f)
order = []
def visit(name, depth=0):
    if name in order:
        return
    if name not in paths or depth > 32:
        sys.exit(f"error: no module {name} in the package")
    path = paths[name]
    data = lzma.open(path).read() if path.endswith(".xz") else open(path, "rb").read()
    # .modinfo's "depends=" string, as modinfo reads it.
    deps = next((x[8:].decode() for x in data.split(b"\0") if x.startswith(b"depends=")), "")
    for d in filter(None, deps.split(",")):
        visit(norm(d), depth + 1)
    order.append(name)
for name in want:
    visit(norm(name))
for name in order:
    path = paths[name]
    data = lzma.open(path).read() if path.endswith(".xz") else open(path, "rb").read()
    with open(os.path.join(out, name + ".ko"), "wb") as f:
        f.write(data)
with open(os.path.join(out, "order"), "w") as f:
    f.write("\n".join(n + ".ko" for n in order) + "\n")
PY
	rm -rf "$tmp"
}

# make with Debian's toolchain, in the toolchain root: the compilers the stock kernel was
# built with and the rust-src of its rustc.
stock_toolchain_make() {
	local rv
	rv=$(in_stock_root rustc --version | awk '{print $2}')
	in_stock_root make CC=x86_64-linux-gnu-gcc-14 HOSTCC=x86_64-linux-gnu-gcc-14 \
		RUST_LIB_SRC="/usr/src/rustc-$rv/library" "$@"
}

# make in the kernel source for the stock kernel's prepared tree.
stock_make() {
	stock_toolchain_make -C "$(kernel_src)" O="$(stock_build_dir)" \
		LOCALVERSION="+${DEBIAN_KERNEL#*+}" "$@"
}

# What the prepared stock tree depends on.
stock_key() {
	{
		echo "$DEBIAN_KERNEL $DEBIAN_KERNEL_VERSION"
		cat "$CACHE/linux-src.version"
		in_stock_root sh -c 'rustc --version; bindgen --version; x86_64-linux-gnu-gcc-14 --version | head -n1; pahole --version'
	} | sha256sum | cut -c1-16
}
stock_module_dir() { echo "$TREE_OUT/module/debian-$DEBIAN_KERNEL"; }
