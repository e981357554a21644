// SPDX-License-Identifier: GPL-2.0

//! Objects without `.eh_frame_hdr`: the search table the unwinder makes from their
//! `.eh_frame` section itself ([`user_unwind_logic::logic::cfi::walk`]) against gimli on
//! real files. Debian's busybox-static (linked without one), a static program linked with
//! `-Wl,--no-eh-frame-hdr`, and the system's libc, loader and the test programs with their
//! `PT_GNU_EH_FRAME` header turned into `PT_NULL`: for every FDE gimli finds, at its first,
//! middle and last address, the FDE the file's table gives must be the one gimli's
//! `fde_for_address` gives (the first in the section that covers it), and the row the
//! unwinder finds there the one that FDE's program gives; an address no FDE covers has no
//! row. Then the file mutated (its section headers, its `.eh_frame`): no table, or one
//! whose FDEs are real, and never a panic.

mod common;

use common::{build_programs, row_through_table, FileTask};
use gimli::{BaseAddresses, EhFrame, LittleEndian};
use object::{Object, ObjectSection};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use user_unwind_logic::logic::cfi::step::{find_in_fde, Scratch};
use user_unwind_logic::logic::cfi::Budget;
use user_unwind_logic::logic::ftable::View;
use user_unwind_logic::logic::unwinder::{Caches, Region, Workspace};

const KEY: u64 = 0x5eed;
const PT_GNU_EH_FRAME: u32 = 0x6474_e550;

/// `data` with its `PT_GNU_EH_FRAME` program header made `PT_NULL`; whether it had one.
fn without_hdr(data: &mut [u8]) -> bool {
    let u = |d: &[u8], at: usize, n: usize| {
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(&d[at..at + n]);
        u64::from_le_bytes(v) as usize
    };
    let (phoff, phentsize, phnum) = (u(data, 32, 8), u(data, 54, 2), u(data, 56, 2));
    let mut had = false;
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        if u(data, at, 4) as u32 == PT_GNU_EH_FRAME {
            data[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            had = true;
        }
    }
    had
}

/// The row at `pc` through the unwinder and the file's table ([`common::row_through_table`]).
fn row(
    file: &mut FileTask<'_>,
    caches: &Caches,
    work: &mut Workspace,
    segments: &common::ElfMemory<'_>,
    pc: u64,
) -> Option<Result<Option<user_unwind_logic::logic::cfi::machine::Row>, String>> {
    row_through_table(file, caches, work, segments, KEY, pc)
        .map(|r| r.map_err(|e| format!("{e:?}")))
}

/// FDEs of `data`'s `.eh_frame` as gimli reads them: (first address, end, FDE address), in
/// the section's order, those that cover at least a byte.
fn gimli_fdes(data: &[u8]) -> (Vec<(u64, u64, u64)>, u64) {
    let obj = object::File::parse(data).expect("an ELF file");
    let s = obj.section_by_name(".eh_frame").expect("an .eh_frame");
    let eh_addr = s.address();
    let eh = EhFrame::new(s.data().expect("section data"), LittleEndian);
    let bases = BaseAddresses::default().set_eh_frame(eh_addr);
    let out = common::gimli_fdes(&eh, &bases)
        .iter()
        .filter(|fde| fde.len() > 0)
        .map(|fde| {
            (
                fde.initial_address(),
                fde.end_address(),
                eh_addr + fde.offset() as u64,
            )
        })
        .collect();
    (out, eh_addr)
}

/// Compares the table made from `data`'s `.eh_frame` with gimli; returns the FDEs.
fn compare(name: &str, data: &[u8]) -> usize {
    let (fdes, _) = gimli_fdes(data);
    assert!(!fdes.is_empty(), "{name}: FDEs");
    // gimli's `fde_for_address` on `.eh_frame`: the first FDE of the section that covers
    // the address.
    let covering = |pc: u64| fdes.iter().find(|f| f.0 <= pc && pc < f.1).map(|f| f.2);
    let mut file = FileTask::new(data);
    let caches = Box::new(Caches::new());
    let mut work = Box::new(Workspace::new());
    let mut mem = common::ElfMemory::new(data);
    let segments = common::ElfMemory::new(data);
    let mut scratch = Box::new(Scratch::new());
    let mut mismatches = Vec::new();
    let mut compared = 0;
    // The first sight: the first lookup makes the table (two walks and a sort), once.
    let first = std::time::Instant::now();
    let _ = row(&mut file, &caches, &mut work, &segments, fdes[0].0);
    let made = first.elapsed();
    let (reads, bytes) = (file.reads.len(), data.len());
    let words = file.tables.get(&KEY).map_or(0, |t| t.len());
    for &(begin, end, _) in &fdes {
        for pc in [begin, begin + (end - begin) / 2, end - 1, end] {
            let Some(got) = row(&mut file, &caches, &mut work, &segments, pc) else {
                continue;
            };
            let want = covering(pc);
            // The table, made at the first lookup, gives gimli's FDE.
            let table = file.tables.get(&KEY).map(|t| &t[..]);
            let view = table
                .and_then(View::new)
                .expect("the file's table was made");
            let found = view.search(pc).map(|i| view.entry(i).fde);
            let ours = found.filter(|&f| fdes.iter().any(|g| g.2 == f && g.0 <= pc && pc < g.1));
            if ours != want {
                mismatches.push(format!("{pc:#x}: table {found:x?}, gimli {want:x?}"));
                continue;
            }
            let want_row = want.map(|fde| {
                find_in_fde(&mut mem, &mut Budget::default(), fde, pc, &mut scratch)
                    .map(|f| f.row)
                    .map_err(|e| format!("{e:?}"))
            });
            let want_row = want_row.transpose();
            if got != want_row {
                mismatches.push(format!("{pc:#x}: row {got:x?}, not {want_row:x?}"));
            }
            compared += 1;
        }
    }
    let view = View::new(&file.tables[&KEY]).expect("a table");
    println!(
        "{name}: {} FDEs in gimli, {} in the table made from .eh_frame ({} words, made at \
         the first lookup in {made:?} with {reads} reads of its {bytes}-byte file), \
         {compared} lookups compared, {} mismatches",
        fdes.len(),
        view.count(),
        words,
        mismatches.len()
    );
    for m in mismatches.iter().take(20) {
        println!("MISMATCH {name}: {m}");
    }
    assert_eq!(view.count(), fdes.len(), "{name}: the table's FDEs");
    assert!(
        mismatches.is_empty(),
        "{name}: {} mismatches",
        mismatches.len()
    );
    fdes.len()
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A static C program linked without `.eh_frame_hdr`, in `dir`: built once for all the
/// tests, which run at once (two compiling it to one path read a half-written file).
fn static_program(dir: &Path) -> Option<String> {
    static BUILT: OnceLock<Option<String>> = OnceLock::new();
    BUILT.get_or_init(|| build_static(dir)).clone()
}

fn build_static(dir: &Path) -> Option<String> {
    let src = dir.join("static.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n\
         int main(int argc, char **argv) { qsort(argv, argc, sizeof(*argv), 0 ? 0 : \
         (int (*)(const void *, const void *))abs); printf(\"%d\\n\", argc); return 0; }\n",
    )
    .ok()?;
    let bin = dir.join("static-no-hdr");
    let out = Command::new("gcc")
        .args(["-O2", "-static", "-Wl,--no-eh-frame-hdr", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .ok()?;
    if !out.status.success() {
        println!(
            "SKIP: no static program: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(bin.to_string_lossy().into_owned())
}

#[test]
fn busybox_and_static_programs_match_gimli() {
    let mut n = 0;
    if Path::new("/bin/busybox").exists() {
        let data = read("/bin/busybox");
        let obj = object::File::parse(&*data).expect("an ELF file");
        if obj.section_by_name(".eh_frame_hdr").is_none() {
            n += compare("/bin/busybox", &data);
        } else {
            println!("SKIP: /bin/busybox has an .eh_frame_hdr");
        }
    } else {
        println!("SKIP: /bin/busybox is not installed (busybox-static)");
    }
    let built = build_programs();
    if let Some(path) = static_program(&built.dir) {
        n += compare(&path, &read(&path));
    }
    assert!(n > 0, "no file compared");
}

#[test]
fn files_without_their_hdr_match_gimli() {
    let mut paths = vec![
        "/lib/x86_64-linux-gnu/libc.so.6".to_string(),
        "/lib64/ld-linux-x86-64.so.2".to_string(),
    ];
    paths.extend(build_programs().binaries.iter().cloned());
    for path in &paths {
        let mut data = read(path);
        assert!(without_hdr(&mut data), "{path}: PT_GNU_EH_FRAME");
        compare(path, &data);
    }
}

/// Whether the unwinder made a table of `data`, looking up rows at some FDEs' first
/// addresses (never a panic); with `strict`, every entry of it must be one of `fdes`.
/// `segments`: the unmutated file's, which map the addresses looked up.
fn made_table(
    data: &[u8],
    segments: &common::ElfMemory<'_>,
    fdes: &[(u64, u64, u64)],
    strict: bool,
) -> bool {
    let mut file = FileTask::new(data);
    let caches = Box::new(Caches::new());
    let mut work = Box::new(Workspace::new());
    for &(begin, _, _) in fdes.iter().step_by(97) {
        let _ = row(&mut file, &caches, &mut work, segments, begin);
    }
    let Some(t) = file.tables.get(&KEY) else {
        return false;
    };
    let view = View::new(t).expect("a table");
    for i in (0..view.count()).filter(|_| strict) {
        let e = view.entry(i);
        assert!(
            fdes.iter().any(|f| f.2 == e.fde && f.0 == e.initial),
            "an entry of a mutated file's table is no FDE of it: {e:x?}"
        );
    }
    true
}

#[test]
fn hostile_section_headers_and_eh_frame_give_no_table() {
    let built = build_programs();
    let path = &built.binaries[0];
    let mut base = read(path);
    assert!(without_hdr(&mut base));
    let (fdes, eh_addr) = gimli_fdes(&base);
    let unmutated = base.clone();
    let segments = common::ElfMemory::new(&unmutated);
    assert!(
        made_table(&base, &segments, &fdes, true),
        "the unmutated file has a table"
    );
    let obj = object::File::parse(&*base).expect("an ELF file");
    let eh = obj.section_by_name(".eh_frame").expect(".eh_frame");
    let eh_index = eh.index().0;
    let (eh_off, eh_size) = eh.file_range().expect("in the file");
    drop(obj);
    let u = |d: &[u8], at: usize, n: usize| {
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(&d[at..at + n]);
        u64::from_le_bytes(v)
    };
    let shoff = u(&base, 40, 8) as usize;
    let shstrndx = u(&base, 62, 2) as usize;
    let sh = |i: usize| shoff + 64 * i;
    let name_at = u(&base, sh(shstrndx) + 24, 8) as usize + u(&base, sh(eh_index), 4) as usize;
    let phoff = u(&base, 32, 8) as usize;
    let phnum = u(&base, 56, 2) as usize;
    // Each: where, what; every one must leave the file without a table.
    let mut cases: Vec<(&str, usize, Vec<u8>)> = vec![
        (
            "e_shoff past the file",
            40,
            (base.len() as u64).to_le_bytes().to_vec(),
        ),
        ("e_shoff wraps", 40, u64::MAX.to_le_bytes().to_vec()),
        ("e_shoff 0", 40, 0u64.to_le_bytes().to_vec()),
        ("e_shentsize short", 58, 40u16.to_le_bytes().to_vec()),
        ("e_shnum 0", 60, 0u16.to_le_bytes().to_vec()),
        ("e_shnum huge", 60, 0xfff0u16.to_le_bytes().to_vec()),
        (
            "e_shstrndx past e_shnum",
            62,
            0xfff0u16.to_le_bytes().to_vec(),
        ),
        (
            "e_shstrndx SHN_XINDEX",
            62,
            0xffffu16.to_le_bytes().to_vec(),
        ),
        ("the name", name_at + 4, b"x".to_vec()),
        (
            "the name's offset past the strings",
            sh(eh_index),
            u32::MAX.to_le_bytes().to_vec(),
        ),
        ("sh_type", sh(eh_index) + 4, 8u32.to_le_bytes().to_vec()),
        ("sh_flags", sh(eh_index) + 8, 0u64.to_le_bytes().to_vec()),
        (
            "sh_addr",
            sh(eh_index) + 16,
            (eh_addr + 8).to_le_bytes().to_vec(),
        ),
        (
            "sh_offset",
            sh(eh_index) + 24,
            (eh_off + 8).to_le_bytes().to_vec(),
        ),
        ("sh_size 0", sh(eh_index) + 32, 0u64.to_le_bytes().to_vec()),
        (
            "sh_size huge",
            sh(eh_index) + 32,
            u64::MAX.to_le_bytes().to_vec(),
        ),
        (
            "sh_size past the segment",
            sh(eh_index) + 32,
            (1u64 << 22).to_le_bytes().to_vec(),
        ),
        (
            "the CIE's pointer encoding indirect",
            eh_off as usize + 16,
            vec![0x9b],
        ),
        (
            "the first entry's length reserved",
            eh_off as usize,
            vec![0xf0, 0xff, 0xff, 0xff],
        ),
        (
            "the first entry's length past the section",
            eh_off as usize,
            (eh_size as u32).to_le_bytes().to_vec(),
        ),
    ];
    // Every PT_LOAD neither readable nor executable.
    let mut flags = Vec::new();
    for i in 0..phnum {
        flags.push(phoff + 56 * i + 4);
    }
    for at in &flags {
        cases.push(("p_flags 0", *at, 0u32.to_le_bytes().to_vec()));
    }
    // A second `.eh_frame` (the one before it renamed).
    let mut two = base.clone();
    let other = (0..eh_index)
        .rev()
        .find(|&i| u(&base, sh(i) + 4, 4) == 1)
        .expect("a section");
    two[sh(other)..sh(other) + 4].copy_from_slice(&base[sh(eh_index)..sh(eh_index) + 4]);
    let mut n = 0;
    for (what, at, bytes) in &cases {
        let mut data = if *what == "p_flags 0" {
            let mut d = base.clone();
            for a in &flags {
                d[*a..*a + 4].copy_from_slice(&0u32.to_le_bytes());
            }
            d
        } else {
            base.clone()
        };
        data[*at..*at + bytes.len()].copy_from_slice(bytes);
        assert!(
            !made_table(&data, &segments, &fdes, false),
            "{what}: a table was made"
        );
        n += 1;
    }
    assert!(
        !made_table(&two, &segments, &fdes, false),
        "two .eh_frame sections: a table was made"
    );
    // Random bytes of the section: no table, or one; never a panic.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let (mut tables, mut none) = (0, 0);
    for _ in 0..400 {
        let mut data = base.clone();
        for _ in 0..1 + x % 4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = eh_off as usize + (x % eh_size) as usize;
            data[at] = (x >> 32) as u8;
        }
        if made_table(&data, &segments, &fdes, false) {
            tables += 1;
        } else {
            none += 1;
        }
    }
    println!(
        "{n} header cases without a table; 400 mutated sections: {tables} tables, {none} none"
    );
}

/// A file being written (its content not settled) gets no table, and a stack walks its
/// `.eh_frame` once, not at each of its frames: the others take the frame-pointer rule.
#[test]
fn an_unsettled_file_is_walked_once_a_stack() {
    use user_unwind_logic::logic::cfi::step::Regs;
    use user_unwind_logic::logic::cfi::Slice;
    use user_unwind_logic::logic::unwinder::{unwind, End};
    let built = build_programs();
    let Some(path) = static_program(&built.dir) else {
        return;
    };
    let data = read(&path);
    let (fdes, _) = gimli_fdes(&data);
    let obj = object::File::parse(&*data).expect("an ELF file");
    let (eh_off, eh_size) = obj
        .section_by_name(".eh_frame")
        .and_then(|s| s.file_range())
        .expect(".eh_frame");
    let segments = common::ElfMemory::new(&data);
    // Eight frames in the program, a frame-pointer chain from STACK ending with a zero
    // return address.
    const STACK: u64 = 0x7ffc_0000_0000;
    const FRAMES: usize = 8;
    let pcs: Vec<u64> = fdes.iter().take(FRAMES).map(|f| f.0 + 1).collect();
    let mut stack = vec![0u8; 16 * FRAMES];
    for i in 0..FRAMES {
        let next = pcs.get(i + 1).copied().unwrap_or(0);
        let at = 16 * i;
        stack[at..at + 8].copy_from_slice(&(STACK + 16 * (i as u64 + 1)).to_le_bytes());
        stack[at + 8..at + 16].copy_from_slice(&next.to_le_bytes());
    }
    let offset = segments.file_offset(pcs[0]).expect("mapped");
    let mut file = FileTask::new(&data);
    file.settled = false;
    file.stack = Slice {
        base: STACK,
        bytes: &stack,
    };
    file.region = Some(Region {
        start: pcs[0] - offset,
        end: pcs[0] - offset + data.len() as u64,
        offset: 0,
        key: Some(KEY),
    });
    let regs = Regs {
        ip: pcs[0],
        sp: STACK,
        bp: STACK,
        bx: 0,
    };
    let caches = Box::new(Caches::new());
    let mut work = Box::new(Workspace::new());
    let mut ips = [0u64; 16];
    let (n, end, _) = unwind(&mut file, regs, 1 << 47, &caches, &mut work, &mut ips);
    assert_eq!((n, end), (FRAMES, End::Complete));
    assert_eq!(&ips[..FRAMES], &pcs[..]);
    assert!(file.tables.is_empty(), "an unsettled file's table was kept");
    assert!(
        file.pending.is_none(),
        "an unsettled file's table was allocated"
    );
    let in_section = file
        .reads
        .iter()
        .filter(|&&o| o >= eh_off && o < eh_off + eh_size)
        .count();
    // One table attempt: two walks of the section, a window at a time.
    let windows = eh_size.div_ceil(4096 - 64) as usize;
    println!("{path}: {in_section} reads in .eh_frame for a stack of {FRAMES} frames");
    assert!(
        in_section <= 2 * windows + 8,
        "{in_section} reads in .eh_frame: walked more than once"
    );
}
