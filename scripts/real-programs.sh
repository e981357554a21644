# SPDX-License-Identifier: GPL-2.0
# Debian's own big programs in a guest, as scripts/bigprog.sh and scripts/bench-real.sh run
# them: each binary and every library ldd lists for it go into the guest at their host
# paths (the real file behind a symlink, lib.sh's add_binaries), so that the host
# symbolizes every frame in the very file that ran; their inputs are made here, since the
# guest has no headers. Sourced after lib.sh; the functions add to the caller's `adds`
# array of run-guest.sh --add arguments.

# The C file cc1 and clang compile at -O2: a user-space program of the kernel source that
# builds with the C library's headers alone. Python tokenizes and parses these modules.
CC_FILES="scripts/dtc/livetree.c"
PY_MODULES="typing"
PY=/usr/bin/python3.11
PYLIB=/usr/lib/python3.11

# stage_c_inputs STAGE [CC]: $CC_FILES preprocessed with the host's headers by CC (gcc by
# default: GCC's attributes in glibc's headers are not clang's), into the guest's
# /root/bigprog/ (NAME.i, NAME.CC.i for another compiler).
stage_c_inputs() {
	local cc=${2:-gcc} src f i
	src=$(kernel_src)
	mkdir -p "$1/src"
	say "preprocessing $CC_FILES with $cc"
	for f in $CC_FILES; do
		i=$(basename "${f%.c}")
		[ "$cc" = gcc ] || i=$i.$cc
		i=$1/src/$i.i
		"$cc" -E -I"$src/$(dirname "$f")" -I"$src/scripts/dtc/libfdt" \
			-I"$src/scripts/include" "$src/$f" -o "$i" || die "preprocessing $f failed"
		adds+=(--add "$i:/root/bigprog/$(basename "$i")")
	done
}

# stage_python STAGE: python3.11 as /usr/bin/python3 and, of its standard library, the
# files `-m tokenize` and `-m ast` over $PY_MODULES load (as the host's python3 -v shows
# them, sources and bytecode with their times, so that the bytecode stays valid), with the
# landmark os.py; its extension modules' libraries too.
stage_python() {
	local m tool f pyfiles
	[ -x "$PY" ] && [ -d "$PYLIB" ] || die "Debian's python3.11 is not installed ($PY, $PYLIB)"
	say "listing the standard library files python3 loads for the workload"
	rm -rf "$1/py" && mkdir -p "$1/py"
	pyfiles=$(for m in $PY_MODULES; do
		for tool in tokenize ast; do
			"$PY" -v -m $tool "$PYLIB/$m.py" 2>&1 >/dev/null ||
				die "$PY -m $tool $m.py failed"
		done
		echo "$PYLIB/$m.py"
	done | grep -oE "$PYLIB/[^' ]+\.(py|pyc|so)" | sort -u)
	for f in $pyfiles "$PYLIB/os.py"; do
		install -D -p -m 0644 "$f" "$1/py$f" || die "copying $f failed"
	done
	ln -sf "$PY" "$1/python3"
	adds+=(--add "$1/py$PYLIB:$PYLIB" --add "$1/python3:/usr/bin/python3")
	add_binaries "$PY" $(echo "$pyfiles" | grep '\.so$' || true)
}
