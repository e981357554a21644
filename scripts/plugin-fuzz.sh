#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The trace-cmd report plugin against hostile traces (Documentation/ustack.rst, "The
# trace-cmd report plugin"): its handlers under AddressSanitizer and
# UndefinedBehaviorSanitizer over mutated records of the committed fixtures
# (tools/ustack/plugin/fuzz/uu_fuzz.c, PLUGIN_FUZZ_INPUTS of them, seed PLUGIN_FUZZ_SEED),
# then crafted copies of the fixtures through the real trace-cmd report with the plugin
# (built by its Makefile, plain and with the sanitizers): no crash, no sanitizer report, a
# crafted record printed by libtraceevent's own printer, no path that is not in the
# fixture, no control byte. Prints "ok - " / "not ok - " lines, then "plugin-fuzz: ".
set -euo pipefail
. "$(dirname "$0")/lib.sh"

INPUTS=${PLUGIN_FUZZ_INPUTS:-100000}
SEED=${PLUGIN_FUZZ_SEED:-38}
FIX=$ROOT/tools/ustack/tests/fixtures
SAN=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)

# libtracecmd reads the fixtures' records for the harness; gcc's sanitizer runtimes
# (Debian's clang-19 comes without compiler-rt's).
install_packages " for the plugin's fuzz harness" gcc pkg-config trace-cmd libtraceevent-dev \
	libtracecmd-dev libtracefs-dev

out=$TREE_OUT/plugin-fuzz
rm -rf "$out" && mkdir -p "$out/plain" "$out/san" "$out/none" "$out/home"
passed=0 failed=0
ok() { echo "ok - $*"; passed=$((passed + 1)); }
notok() { echo "not ok - $*"; failed=$((failed + 1)); }

say "building the harness and the plugin"
# shellcheck disable=SC2046 # pkg-config's flags are words
gcc "${SAN[@]}" -Wall -Wextra -Wno-unused-parameter -Werror \
	$(pkg-config --cflags libtracecmd libtraceevent) -o "$out/uu_fuzz" \
	"$ROOT/tools/ustack/plugin/fuzz/uu_fuzz.c" $(pkg-config --libs libtracecmd libtraceevent) ||
	die "building the fuzz harness failed"
make -s -C "$ROOT/tools/ustack/plugin" OUT="$out/plain" || die "building the plugin failed"
make -s -C "$ROOT/tools/ustack/plugin" OUT="$out/san" CC=gcc \
	CFLAGS="${SAN[*]} -Wall -Wextra -Wno-unused-parameter -Werror" ||
	die "building the plugin with the sanitizers failed"
export ASAN_OPTIONS=abort_on_error=0:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$ROOT/tools/ustack/plugin/fuzz/lsan.supp:print_suppressions=0

say "fuzzing the plugin's handlers: $INPUTS inputs, seed $SEED"
set +e
"$out/uu_fuzz" -n "$INPUTS" -s "$SEED" "$FIX"/*.dat >"$out/harness.log" 2>&1
rc=$?
set -e
cat "$out/harness.log"
passed=$((passed + $(grep -c '^ok - ' "$out/harness.log" || true)))
failed=$((failed + $(grep -c '^not ok - ' "$out/harness.log" || true)))
if [ "$rc" -ne 0 ] || ! grep -q ' mutated inputs in ' "$out/harness.log"; then
	notok "the harness ran to its end without a sanitizer report (exit $rc)"
fi

# report DIR FILE: trace-cmd report of FILE with the plugins of DIR (none: an empty one).
report() {
	HOME=$out/home TRACEEVENT_PLUGIN_DIR=$1 trace-cmd report -i "$2"
}
# The frame lines' paths (what precedes +0x or " 0x"), sorted, unique.
frame_paths() {
	sed -n 's/^ => \(.*\)\( 0x\|+0x\)[0-9a-f]*$/\1/p' "$1" | sort -u
}

# crafted NAME FIXTURE EVENT FIELD ARG...: a copy of FIXTURE with the __data_loc word
# FIELD of every EVENT record changed (uu_fuzz --craft's ARGs) through trace-cmd report.
crafted() {
	local name=$1 fix=$2 event=$3 field=$4 dat=$out/$1.dat rc src
	shift 4
	if ! "$out/uu_fuzz" --craft "$FIX/$fix" "$dat" "$event" "$field" "$@" >/dev/null; then
		notok "$name: crafting $fix failed"
		return
	fi
	[ -f "$out/$fix.orig" ] || report "$out/plain" "$FIX/$fix" >"$out/$fix.orig" 2>/dev/null
	set +e
	report "$out/plain" "$dat" >"$out/$name.plain" 2>"$out/$name.plain.err"
	rc=$?
	LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so) \
		ASAN_OPTIONS=detect_leaks=0 report "$out/san" "$dat" \
		>"$out/$name.san" 2>"$out/$name.san.err"
	src=$?
	report "$out/none" "$dat" >"$out/$name.none" 2>/dev/null
	set -e
	if [ "$rc" -ne 0 ]; then
		notok "$name: trace-cmd report with the plugin exits $rc"
		return
	fi
	if [ "$src" -ne 0 ] || grep -qE 'AddressSanitizer|runtime error' "$out/$name.san.err"; then
		notok "$name: the sanitized plugin under trace-cmd report (exit $src):"
		head -n 20 "$out/$name.san.err"
		return
	fi
	if ! cmp -s "$out/$name.plain" "$out/$name.san"; then
		notok "$name: the sanitized plugin prints otherwise"
		return
	fi
	if LC_ALL=C grep -qaP '[\x00-\x09\x0b-\x1f\x7f]' "$out/$name.plain"; then
		notok "$name: a control byte in the report"
		return
	fi
	# Each crafted record fails the plugin's checks: libtraceevent prints it, as
	# without the plugin.
	if ! diff <(grep -a " $event: " "$out/$name.plain") \
		<(grep -a " $event: " "$out/$name.none") >"$out/$name.diff"; then
		notok "$name: a crafted $event not printed by libtraceevent's printer"
		head -n 10 "$out/$name.diff"
		return
	fi
	# Every path a frame names is one the fixture names (or a cookie not yet seen).
	if comm -23 <(frame_paths "$out/$name.plain" | grep -v '^\[[0-9a-f]*\]$\|^\[anon\]$\|^?$') \
		<(frame_paths "$out/$fix.orig") | grep -q .; then
		notok "$name: a frame path that is not the fixture's"
		return
	fi
	ok "$name: trace-cmd report with the plugin (plain and sanitized) prints $(grep -c '^ => ' \
		"$out/$name.plain") frames, crafted records by libtraceevent's printer"
}

say "crafted trace.dat files through trace-cmd report"
crafted build-id-0xffff-v7 v7-none.dat file_cache build_id len=0xffff
crafted path-0xffff-v6 v6.dat file_cache path off=0xffff len=0xffff
crafted build-id-0xffff-v6 v6.dat file_cache build_id len=0xffff
crafted path-past-end-v7 v7-none.dat file_cache path off=0xfff0
crafted offs-0xffff v7-none.dat user_unwind_stack offs len=0xffff
crafted files-at-0xffff v6.dat user_unwind_stack files off=0xffff
crafted file-idx-0xffff v7-none.dat user_unwind_stack file_idx len=0xffff

# A path that holds a forged frame line and a terminal escape prints escaped.
forged=$'/x\n => /etc/forged+0x0\e[31m'
if "$out/uu_fuzz" --craft "$FIX/v6.dat" "$out/forged.dat" file_cache path "str=$forged" \
	>/dev/null; then
	report "$out/plain" "$out/forged.dat" >"$out/forged.plain" 2>/dev/null || true
	if grep -qa '^ => /etc/forged' "$out/forged.plain" || LC_ALL=C grep -qaP '\x1b' \
		"$out/forged.plain" || ! grep -qaF 'path=/x\n => /etc/forged+0x0\x1b[31m' \
		"$out/forged.plain" || ! grep -qaF ' => /x\n => /etc/' "$out/forged.plain"; then
		notok "forged-path: a path's newline or escape reached the report"
		grep -a -m 5 'forged' "$out/forged.plain"
	else
		ok "forged-path: a path with a newline and a terminal escape prints escaped"
	fi
else
	notok "forged-path: crafting v6.dat failed"
fi

echo "plugin-fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
