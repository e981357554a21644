#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Writes ELF files with hostile call-frame tables for the guest test UNWIND_HOSTILE
(tests/guest/unwind.sh), and checks its stacks on the host (tests/unwind.py calls check()).

Every file is one page-aligned image of SIZE bytes, mapped whole (read and execute, at file
offset 0, between PROT_NONE guards) by tests/prog/uu_hostile_cfi.c, which calls the function
at CODE in it, as a shared object's code would be called. That function zeroes rbp and either
makes the getppid system call itself (the hostile frame innermost) or calls libc's getppid
(the hostile frame its caller); the program is built without frame pointers. So only the
file's own `.eh_frame` (found through its PT_GNU_EH_FRAME) can unwind past its frame, and
the frame-pointer rule cannot.

"control" is a well-formed table: its stacks must be complete, through the loader's frames
into libc's start (the ground truth the other cases are measured against). Every other case
breaks one thing: lengths huge, 64-bit extended or past the mapping, a CIE pointer at the FDE
itself or at nothing, instruction streams that remember state without end or run thousands
of instructions, a search table out of order or pointing outside the mapping or into the
kernel, encodings the unwinder must refuse, CFA expressions that would loop or read kernel
memory, rows that would make the stack run backwards. Its stacks must end at the hostile
frame, with a user_unwind_truncated record giving the reason the module's logic gives for
it (src/logic/unwinder.rs: a table error is "table"; a table that cannot be read, or none,
falls back to the frame-pointer rule, which rbp = 0 stops: "bad_frame"; a row whose rule
reads the kernel: "read"), and never with a frame past it. A few cases are unusual but
valid ("chain"): their stacks must be complete.

FLIP lists the images that the flip test (UNWIND_HOSTILE_FLIP) writes in turn over one
mapped file while stacks are taken: each differs from the control in one field, so that a
reader seeing any mixture of two of them still finds either the control's rows or an error;
every stack must be the chain or the chain cut at the hostile frame.

Usage: hostile_cfi.py DIR: writes DIR/NAME for every case, DIR/expected ("NAME OUTCOME
REASONS" lines) and DIR/flip (the names of FLIP, one a line).
"""
import os
import re
import struct
import sys

SIZE = 0x3000
CODE = 0x100
HDR = 0x200
EH_FRAME = 0x400
CIE = EH_FRAME
FDE = 0x480
# The function at CODE (its file offsets are the hostile frame's):
#   0x100 push %rbp            0x108 call *%rdi         0x111 syscall
#   0x101 xor %ebp,%ebp        0x10a jmp 0x113          0x113 pop %rbp
#   0x103 test %rdi,%rdi       0x10c mov $110,%eax      0x114 ret
#   0x106 je 0x10c
CODE_BYTES = bytes.fromhex("55 31ed 4885ff 7404 ffd7 eb07 b86e000000 0f05 5d c3")
CODE_LEN = len(CODE_BYTES)
# The hostile frame: the syscall's return point (innermost, exact) and the return address
# of the call to getppid.
DIRECT_AT = 0x113
CALLBACK_AT = 0x10a
# GCC's CIE instructions: CFA = rsp + 8, return address at CFA - 8.
CIE_INSNS = bytes([0x0c, 7, 8, 0x90, 1])
# The function's rows: after the push, CFA = rsp + 16 and rbp at CFA - 16; after the pop
# (0x114), CFA = rsp + 8 again.
FDE_INSNS = bytes([0x41, 0x0e, 0x10, 0x86, 0x02, 0x53, 0x0e, 0x08, 0xc6])
KERNEL = 0xffffffff81000000
# Another function at CODE whose system call returns at the same offset with another frame
# (two more words pushed): the second content of the file UNWIND_HOSTILE_REWRITE rewrites,
# for which the control's row at DIRECT_AT would be wrong.
#   0x100 push %rbp   0x101 push $0   0x103 push $0   0x105 xor %ebp,%ebp
#   0x107 mov $110,%eax   0x10c nopl 0(%rax)   0x110 nop   0x111 syscall
#   0x113 add $16,%rsp    0x117 pop %rbp       0x118 ret
DEEP_BYTES = bytes.fromhex("55 6a00 6a00 31ed b86e000000 0f1f4000 90 0f05 4883c410 5d c3")
DEEP_INSNS = bytes([0x41, 0x0e, 0x10, 0x86, 0x02, 0x42, 0x0e, 0x18, 0x42, 0x0e, 0x20,
                    0x52, 0x0e, 0x10, 0x41, 0x0e, 0x08, 0xc6])


def uleb(v):
    out = bytearray()
    while True:
        b, v = v & 0x7f, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def sleb(v):
    out = bytearray()
    while True:
        b, v = v & 0x7f, v >> 7
        done = (v == 0 and not b & 0x40) or (v == -1 and b & 0x40)
        out.append(b | (0 if done else 0x80))
        if done:
            return bytes(out)


def entry(body, length=None, ext=False, ext_length=None):
    """A CIE or FDE: its length (the body's, or `length`), in the 64-bit format with
    `ext` (its 64-bit length the body's, or `ext_length`)."""
    if ext:
        size = len(body) if ext_length is None else ext_length
        return struct.pack("<IQ", 0xffffffff, size) + body
    return struct.pack("<I", len(body) if length is None else length) + body


def pad(body, head):
    return body + b"\0" * (-(len(body) + head) % 8)


def cie(version=1, aug=b"zR", aug_data=b"\x1b", code_align=1, data_align=-8, ra=16,
        insns=CIE_INSNS, length=None, ext=False, ext_length=None, raw_align=None):
    """A CIE (at CIE), GCC's by default."""
    body = (struct.pack("<QB" if ext else "<IB", 0, version) + aug + b"\0" +
            (raw_align if raw_align is not None else uleb(code_align)) + sleb(data_align) +
            (bytes([ra]) if version == 1 else uleb(ra)))
    if aug.startswith(b"z"):
        body += uleb(len(aug_data)) + aug_data
    body = pad(body + insns, 12 if ext else 4)
    return entry(body, length, ext, ext_length)


def fde(at=FDE, cie_at=CIE, begin=CODE, length_pc=CODE_LEN, insns=FDE_INSNS, length=None,
        ext=False, ext_length=None, cie_ptr=None):
    """An FDE at `at` for [begin, begin + length_pc), GCC's pcrel|sdata4 encoding."""
    head = 12 if ext else 4
    field = at + head
    ptr = field - cie_at if cie_ptr is None else cie_ptr
    idf = struct.pack("<Q", ptr & (1 << 64) - 1) if ext else struct.pack("<I", ptr & 0xffffffff)
    pc_field = field + len(idf)
    body = idf + struct.pack("<iI", begin - pc_field, length_pc & 0xffffffff) + uleb(0) + insns
    return entry(pad(body, head), length, ext, ext_length)


def hdr(entries=((CODE, FDE),), version=1, ptr_enc=0x1b, count_enc=0x03, table_enc=0x3b,
        count=None, eh_frame=EH_FRAME, raw_entries=None):
    """An .eh_frame_hdr at HDR: GCC's encodings, entries (initial location, FDE address)."""
    out = struct.pack("<BBBB", version, ptr_enc, count_enc, table_enc)
    out += struct.pack("<i", eh_frame - (HDR + 4))
    out += struct.pack("<I", len(entries) if count is None else count)
    if raw_entries is not None:
        return out + raw_entries
    for loc, f in entries:
        out += struct.pack("<ii", loc - HDR, f - HDR)
    return out


def elf(phdrs=None, phnum=None, phoff=64, magic=b"\x7fELF\x02\x01\x01\0", eh_vaddr=HDR):
    """The ELF header and program headers: one PT_LOAD of the whole file (read, execute)
    at address 0, and the PT_GNU_EH_FRAME at `eh_vaddr`."""
    if phdrs is None:
        phdrs = [(1, 5, 0, 0, SIZE), (0x6474e550, 4, HDR, eh_vaddr, 0x100)]
    ph = b"".join(struct.pack("<IIQQQQQQ", t, fl, off, va, va, sz, sz, 8)
                  for t, fl, off, va, sz in phdrs)
    head = magic + b"\0" * 8 + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, 56,
        len(phdrs) if phnum is None else phnum, 64, 0, 0)
    return head + ph


def image(elf_bytes=None, hdr_bytes=None, cie_bytes=None, fde_bytes=None, extra=(),
          code=CODE_BYTES):
    img = bytearray(SIZE)
    for at, b in [(0, elf() if elf_bytes is None else elf_bytes), (CODE, code),
                  (HDR, hdr() if hdr_bytes is None else hdr_bytes),
                  (CIE, cie() if cie_bytes is None else cie_bytes),
                  (FDE, fde() if fde_bytes is None else fde_bytes)] + list(extra):
        img[at:at + len(b)] = b
    assert len(img) == SIZE
    return bytes(img)


def expr_block(code):
    return uleb(len(code)) + code


FP = "bad_frame"  # no table, or one not read: the frame-pointer rule, stopped by rbp = 0
# A table pointing outside its object's segments (read from the file, by the object's own
# addresses): malformed, the stack ends at the frame.
OUTSIDE = "table"
CASES = {
    "control": (image(), "chain", ""),
    # Unusual but valid: 3900 DW_CFA_nop before the rows (one FDE nearly as long as the
    # unwinder's FDE buffer), a 64-bit extended CIE and FDE.
    "long_nops": (image(fde_bytes=fde(insns=b"\0" * 3900 + FDE_INSNS)), "chain", ""),
    "ext64_entries": (image(cie_bytes=cie(ext=True), fde_bytes=fde(ext=True)), "chain", ""),
    # .eh_frame_hdr and program headers.
    "hdr_version": (image(hdr_bytes=hdr(version=2)), "cut", FP),
    "hdr_count_huge": (image(hdr_bytes=hdr(count=0xffffffff)), "cut", "table"),
    # A million entries: the bisection reads past the mapping, into the guard.
    "hdr_count_past_end": (image(hdr_bytes=hdr(count=1 << 20)), "cut", OUTSIDE),
    "hdr_table_uleb": (image(hdr_bytes=hdr(table_enc=0x31)), "cut", FP),
    "hdr_ptr_enc_bad": (image(hdr_bytes=hdr(ptr_enc=0x0f)), "cut", FP),
    "hdr_indirect": (image(hdr_bytes=hdr(ptr_enc=0x9b)), "cut", FP),
    "eh_hdr_in_guard": (image(elf_bytes=elf(eh_vaddr=SIZE + 0x2000)), "cut", FP),
    "eh_hdr_kernel": (image(elf_bytes=elf(eh_vaddr=0xffff800000000000)), "cut", FP),
    "no_eh_frame_phdr": (image(elf_bytes=elf(phdrs=[(1, 5, 0, 0, SIZE)])), "cut", FP),
    "phnum_huge": (image(elf_bytes=elf(phnum=0xffff)), "cut", FP),
    "phoff_kernel": (image(elf_bytes=elf(phoff=0xffff800000000000)), "cut", FP),
    "phoff_wraps": (image(elf_bytes=elf(phoff=0xfffffffffffffff0)), "cut", FP),
    "bad_magic": (image(elf_bytes=elf(magic=b"\x7fELF\x01\x01\x01\0")), "cut", FP),
    # The search table: out of order (the bisection lands on the CIE), pointing outside
    # the mapping, into the kernel, at address 0, at the code.
    "table_unsorted": (image(hdr_bytes=hdr(entries=((0x300, FDE), (0x50, FDE), (CODE, CIE)))),
                       "cut", "table"),
    "table_fde_in_guard": (image(hdr_bytes=hdr(entries=((CODE, SIZE + 0x1000),))), "cut", OUTSIDE),
    "table_fde_below": (image(hdr_bytes=hdr(entries=((CODE, -0x800),))), "cut", OUTSIDE),
    "table_fde_kernel": (image(hdr_bytes=hdr(table_enc=0x04, raw_entries=struct.pack(
        "<QQ", 0, KERNEL))), "cut", OUTSIDE),
    # Address 0 of the object is its ELF header, read from the file: no FDE there.
    "table_fde_null": (image(hdr_bytes=hdr(table_enc=0x04, raw_entries=struct.pack(
        "<QQ", 0, 0))), "cut", "table"),
    # Just below the top of user space (the read straddles it), and non-canonical.
    "table_fde_user_top": (image(hdr_bytes=hdr(table_enc=0x04, raw_entries=struct.pack(
        "<QQ", 0, 0x7fffffffeffc))), "cut", OUTSIDE),
    "table_fde_noncanonical": (image(hdr_bytes=hdr(table_enc=0x04, raw_entries=struct.pack(
        "<QQ", 0, 0x8000000000000000))), "cut", OUTSIDE),
    "table_fde_in_code": (image(hdr_bytes=hdr(entries=((CODE, CODE),))), "cut", "table"),
    # FDE lengths.
    "fde_len_huge": (image(fde_bytes=fde(length=0x7ffffff0)), "cut", "table"),
    "fde_len_ext64_huge": (image(fde_bytes=fde(ext=True, ext_length=1 << 62)), "cut", "table"),
    "fde_len_reserved": (image(fde_bytes=fde(length=0xfffffff0)), "cut", "table"),
    "fde_len_zero": (image(fde_bytes=struct.pack("<I", 0)), "cut", FP),
    # Longer than the unwinder's FDE buffer: its instructions are read a window at a time.
    "fde_long": (image(fde_bytes=fde(insns=b"\0" * 5000 + FDE_INSNS)), "chain", ""),
    # An FDE whose length runs past the end of the mapping, into the guard.
    "fde_past_end": (image(hdr_bytes=hdr(entries=((CODE, SIZE - 0x40),)),
                           extra=[(SIZE - 0x40, fde(at=SIZE - 0x40, length=0x800)[:0x40])]),
                     "cut", OUTSIDE),
    # CIE pointers: at the FDE itself, 0 (the FDE is a CIE), into the guard below, at
    # another FDE whose own CIE pointer points back at the first (a loop, if followed).
    "cie_is_the_fde": (image(fde_bytes=fde(cie_at=FDE)), "cut", "table"),
    "cie_ptr_zero": (image(fde_bytes=fde(cie_ptr=0)), "cut", "table"),
    # The object's own bytes below its table (its addresses are the file's): no CIE there.
    "cie_ptr_in_guard": (image(fde_bytes=fde(cie_at=-0x800)), "cut", "table"),
    "cie_ptr_loop": (image(hdr_bytes=hdr(entries=((CODE, 0x600),)),
                           fde_bytes=fde(cie_at=0x600),
                           extra=[(0x600, fde(at=0x600, cie_at=FDE))]), "cut", "table"),
    # A CIE pointer is unsigned, counted back: one "forward" wraps to 4 GiB below, below
    # the object's first address.
    "cie_ptr_forward": (image(fde_bytes=fde(cie_at=0x600)), "cut", "table"),
    # CIE lengths and fields.
    "cie_len_huge": (image(cie_bytes=cie(length=0x7ffffff0)), "cut", "table"),
    "cie_len_ext64_huge": (image(cie_bytes=cie(ext=True, ext_length=0xffffffffffff)), "cut",
                           "table"),
    "cie_version": (image(cie_bytes=cie(version=2)), "cut", "table"),
    "cie_ra_reg": (image(cie_bytes=cie(ra=6)), "cut", "table"),
    "cie_code_align_zero": (image(cie_bytes=cie(code_align=0)), "cut", "table"),
    "cie_uleb_endless": (image(cie_bytes=cie(raw_align=b"\x80" * 11 + b"\x01")), "cut", "table"),
    "cie_aug_long": (image(cie_bytes=cie(aug=b"zRRRRRRRRRRRR",
                                         aug_data=b"\x1b" * 12)), "cut", "table"),
    "cie_insns_advance": (image(cie_bytes=cie(insns=CIE_INSNS + b"\x41")), "cut", "table"),
    # Pointer encodings of the FDE's addresses (the CIE's R augmentation).
    "enc_aligned": (image(cie_bytes=cie(aug_data=b"\x50")), "cut", "table"),
    "enc_indirect": (image(cie_bytes=cie(aug_data=b"\x9b")), "cut", "table"),
    "enc_bad_format": (image(cie_bytes=cie(aug_data=b"\x17")), "cut", "table"),
    "fde_range_wraps": (image(fde_bytes=fde(length_pc=0xffffffff)), "cut", "table"),
    "fde_not_covering": (image(fde_bytes=fde(begin=0x180)), "cut", FP),
    # Instruction streams.
    "remember_no_restore": (image(fde_bytes=fde(insns=b"\x0a" * 40 + FDE_INSNS)), "cut",
                            "table"),
    "restore_underflow": (image(fde_bytes=fde(insns=b"\x0b" + FDE_INSNS)), "cut", "table"),
    "set_loc_backwards": (image(fde_bytes=fde(insns=b"\x41\x01" + struct.pack(
        "<i", CODE - 0x40 - (FDE + 4 + 4 + 8 + 1 + 2)) + FDE_INSNS[1:])), "cut", "table"),
    # CFA expressions: a backward DW_OP_skip and DW_OP_bra (loops, refused), a division by
    # zero, one longer than a row holds, one reading the kernel.
    "cfa_expr_skip_loop": (image(fde_bytes=fde(insns=b"\x0f" + expr_block(b"\x2f\xfd\xff"))),
                           "cut", "table"),
    "cfa_expr_bra_loop": (image(fde_bytes=fde(insns=b"\x0f" + expr_block(b"\x31\x28\xfc\xff"))),
                          "cut", "table"),
    "cfa_expr_div_zero": (image(fde_bytes=fde(insns=b"\x0f" + expr_block(b"\x31\x30\x1b"))),
                          "cut", "table"),
    "cfa_expr_too_long": (image(fde_bytes=fde(insns=b"\x0f" + expr_block(
        b"\x96" * 20 + b"\x77\x10"))), "cut", "table"),
    "cfa_expr_kernel": (image(fde_bytes=fde(insns=b"\x0f" + expr_block(
        b"\x0e" + struct.pack("<Q", KERNEL) + b"\x06"))), "cut", "read"),
    "ra_expr_kernel": (image(fde_bytes=fde(insns=FDE_INSNS[:5] + b"\x10\x10" + expr_block(
        b"\x0e" + struct.pack("<Q", KERNEL)))), "cut", "read"),
    # Rows that would make the stack run backwards or sideways.
    "ra_same_value": (image(fde_bytes=fde(insns=FDE_INSNS[:5] + b"\x08\x10")), "cut",
                      "bad_frame"),
    "cfa_at_sp": (image(fde_bytes=fde(insns=b"\x41\x0e\x00")), "cut", "bad_frame"),
    "cfa_misaligned": (image(fde_bytes=fde(insns=b"\x41\x0e\x0d")), "cut", "bad_frame"),
    "cfa_reg_r12": (image(fde_bytes=fde(insns=b"\x41\x0c\x0c\x10")), "cut", "table"),
}

# The rewrite test's second content (its first is the control).
DEEP = image(code=DEEP_BYTES, fde_bytes=fde(length_pc=len(DEEP_BYTES), insns=DEEP_INSNS))

# The flip test's images: the control and single-field changes of it.
FLIP = ["control", "hdr_version", "hdr_count_huge", "table_fde_kernel", "fde_len_huge",
        "cie_is_the_fde", "cie_version", "cie_ra_reg", "enc_aligned"]

# The loader's frames below the hostile one (tests/prog/uu_hostile_cfi.c), then libc's start.
LOADER = ["hc_call", "hc_run", "main", "__libc_start_call_main", "__libc_start_main", "_start"]


def classify(frames, names, where):
    """A stack of the loader: (case file, "direct" or "callback", tail) where tail is what
    came after the hostile frame, or (None, why, None) when the stack is not one."""
    k = next((i for i, (_, p) in enumerate(frames) if p and where(p)), None)
    if k is None:
        return None, f"no frame in a hostile file: {frames}", None
    off, path = frames[k]
    if k == 0 and off == DIRECT_AT:
        kind = "direct"
    elif k == 1 and off == CALLBACK_AT and "getppid" in names[0]:
        kind = "callback"
    else:
        return None, f"hostile frame {k} at {off:#x}, names {names[:2]}", None
    return path, kind, names[k + 1:]


def is_prefix(tail, chain):
    return len(tail) <= len(chain) and all(w in n for w, n in zip(chain, tail))


def check(check_fn, s, prog, parse_trace, values, unwind, hostile):
    """UNWIND_HOSTILE and UNWIND_HOSTILE_FLIP (tests/guest/unwind.sh), against the
    expectations main() wrote to the folder `hostile`."""
    want = {}
    for line in open(os.path.join(hostile, "expected")):
        name, outcome, reason = line.split()
        want["/hostile-cfi/" + name] = (outcome, reason)
    cache = {}
    cut_stacks = table_stacks = 0
    for section, where in (("UNWIND_HOSTILE", lambda p: p.startswith("/hostile-cfi/")),
                           ("UNWIND_HOSTILE_FLIP", lambda p: p == "/tmp/uu-flip")):
        v = values(s.get(section, []))
        check_fn(f"hostile tables: {section} ran", v.get("status") == "0", str(v))
        events = parse_trace(s.get(section, []))
        cut = unwind.truncations(events)
        mine = [f for who, f in unwind.stacks(events) if who == "uu_hostile_cfi"]
        got = list(zip(unwind.cookies(events, "uu_hostile_cfi"), mine))
        seen, wrong, complete, short = {}, [], 0, 0
        for cookie, frames in got:
            names = unwind.symbolize(frames, prog, cache)
            path, kind, tail = classify(frames, names, where)
            if path is None:
                wrong.append(kind)
                continue
            seen.setdefault((path, kind), 0)
            seen[(path, kind)] += 1
            outcome, reason = want.get(path, ("either", "-"))
            trunc = cut.get(cookie)
            if tail and not is_prefix(tail, LOADER):
                wrong.append(f"{path} {kind}: wrong frames past the hostile one: "
                             f"{unwind.show(names)}")
            elif len(tail) == len(LOADER) and not trunc and outcome in ("chain", "either"):
                complete += 1
            elif not tail and trunc and trunc[0] == len(frames) and outcome in ("cut", "either"):
                short += 1
                cut_stacks += 1
                table_stacks += trunc[1] == "table"
                if reason != "-" and trunc[1] != reason:
                    wrong.append(f"{path} {kind}: reason {trunc[1]}, not {reason}")
            else:
                wrong.append(f"{path} {kind} ({outcome}): {unwind.show(names)}, "
                             f"truncated {trunc}")
        if section == "UNWIND_HOSTILE":
            missing = [f"{p} {k}" for p in want for k in ("direct", "callback")
                       if not seen.get((p, k))]
            check_fn("hostile tables: each file's stacks (both kinds) end at its frame, with "
                     "the reason its table gives, and the control's and the valid ones' are "
                     "complete", got and not wrong and not missing,
                     f"{len(got)} stacks, {len(wrong)} wrong, e.g. {wrong[:3]}; "
                     f"none for {missing[:4]}")
        else:
            check_fn("hostile tables: a table rewritten while stacks are taken: each stack is "
                     "the chain or the chain cut at that frame, both seen",
                     len(got) >= 100 and not wrong and complete and short,
                     f"{len(got)} stacks, {complete} complete, {short} cut, {len(wrong)} "
                     f"wrong, e.g. {wrong[:3]}")

    # The file rewritten with the control and DEEP in turn: every stack the whole chain.
    events = parse_trace(s.get("UNWIND_HOSTILE_REWRITE", []))
    cut = unwind.truncations(events)
    mine = [f for who, f in unwind.stacks(events) if who == "uu_hostile_cfi"]
    wrong = []
    for cookie, frames in zip(unwind.cookies(events, "uu_hostile_cfi"), mine):
        names = unwind.symbolize(frames, prog, cache)
        path, kind, tail = classify(frames, names, lambda p: p == "/tmp/uu-rewrite")
        if (path is None or kind != "direct" or len(tail) != len(LOADER)
                or not is_prefix(tail, LOADER) or cookie in cut):
            wrong.append(f"{unwind.show(names)} {cut.get(cookie)}")
    ids = {e["cookie"] for e in events if e.get("path") == "/tmp/uu-rewrite"}
    check_fn("unwinder: a file rewritten in place (code and table) between stacks, no pause: "
             "every "
             "stack is the whole chain",
             values(s.get("UNWIND_HOSTILE_REWRITE", [])).get("status") == "0"
             and len(mine) >= 90 and not wrong,
             f"{len(mine)} stacks, {len(ids)} file cookies, {len(wrong)} wrong, "
             f"e.g. {wrong[:3]}")

    def stats(section):
        return {k.rstrip(":"): int(x) for k, x in (line.split() for line in s.get(section, [])
                                                   if re.match(r"^\w+: \d+$", line))}
    before, after = stats("UNWIND_HOSTILE_BEFORE"), stats("UNWIND_HOSTILE_AFTER")
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in ("unwind_cfi_errors",
                                                              "unwind_truncated")}
    check_fn("hostile tables: user_unwind_stats counts them (unwind_cfi_errors at least the "
             "stacks a table error cut, unwind_truncated every stack cut)",
             before and delta["unwind_cfi_errors"] >= table_stacks > 0
             and delta["unwind_truncated"] >= cut_stacks > 0,
             f"{delta}, {table_stacks} table errors, {cut_stacks} cut")


def main(out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "expected"), "w") as exp:
        for name, (img, outcome, reason) in CASES.items():
            with open(os.path.join(out, name), "wb") as f:
                f.write(img)
            exp.write(f"{name} {outcome} {reason or '-'}\n")
    with open(os.path.join(out, "flip"), "w") as f:
        f.write("".join(n + "\n" for n in FLIP))
    with open(os.path.join(out, "deep"), "wb") as f:
        f.write(DEEP)


if __name__ == "__main__":
    main(sys.argv[1])
