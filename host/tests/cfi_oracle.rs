// SPDX-License-Identifier: GPL-2.0

//! The CFI unwinder against gimli on real binaries: for every FDE of the system's libc,
//! dynamic loader and libstdc++, of GCC and Clang `-O2` builds of the test program and of a
//! Rust release binary, every row gimli's `UnwindTable` gives (each address where the
//! rules change) must match the row the pure logic finds at its start: the CFA rule, the
//! return address and `rbp` rules, the row's range and the signal-frame mark. The
//! `.eh_frame_hdr` table lookup and the `PT_GNU_EH_FRAME` helper are checked on the same
//! files. So is the file's table ([`user_unwind_logic::logic::ftable`]): every row is
//! looked up again as a stack's unwind does when the row cache misses (the first row of
//! an FDE parses and keeps all of its rows, the others come from the table), from the
//! file read by offset as the module reads it, and must be the same row.

mod common;

use common::{build_programs, row_through_table, ElfMemory, FileTask};
use gimli::{BaseAddresses, CfaRule, EhFrame, LittleEndian, Register, RegisterRule, UnwindContext};
use object::{Object, ObjectSection};
use user_unwind_logic::logic::cfi::elf::find_eh_frame_hdr;
use user_unwind_logic::logic::cfi::machine::{Cfa, Found, Rule};
use user_unwind_logic::logic::cfi::step::{find_in_fde, Scratch};
use user_unwind_logic::logic::cfi::table::Hdr;
use user_unwind_logic::logic::cfi::Budget;
use user_unwind_logic::logic::ftable::View;
use user_unwind_logic::logic::unwinder::{Caches, Workspace};

/// What one file gave.
#[derive(Default, Debug)]
struct Counts {
    fdes: usize,
    rows: usize,
    table_hits: usize,
    /// Rows with a CFA expression (`.plt`, `__restore_rt`, stack realignment).
    expr_rows: usize,
    /// Rows of signal trampolines.
    signal_rows: usize,
    mismatches: Vec<String>,
    /// Rows the file's table kept, and times it grew.
    kept_rows: usize,
    /// Rows of FDEs with a row the table cannot keep (an expression).
    unkeepable: usize,
    grown: usize,
}

fn gimli_rule(rule: Option<RegisterRule<usize>>, eh: &[u8], default: Rule) -> String {
    let bytes = |off: usize, len: usize| format!("{:x?}", &eh[off..off + len]);
    match rule {
        None => format!("{default:?}"),
        Some(RegisterRule::Undefined) => "Undefined".into(),
        Some(RegisterRule::SameValue) => "SameValue".into(),
        Some(RegisterRule::Offset(o)) => format!("Offset({o})"),
        Some(RegisterRule::ValOffset(o)) => format!("ValOffset({o})"),
        Some(RegisterRule::Register(r)) => format!("Register({})", r.0),
        Some(RegisterRule::Expression(e)) => format!("Expression({})", bytes(e.offset, e.length)),
        Some(RegisterRule::ValExpression(e)) => {
            format!("ValExpression({})", bytes(e.offset, e.length))
        }
        Some(other) => format!("gimli-only {other:?}"),
    }
}

fn our_rule(rule: Rule) -> String {
    match rule {
        Rule::Expression(e) => format!("Expression({:x?})", e.as_bytes()),
        Rule::ValExpression(e) => format!("ValExpression({:x?})", e.as_bytes()),
        other => format!("{other:?}"),
    }
}

fn gimli_cfa(cfa: &CfaRule<usize>, eh: &[u8]) -> String {
    match cfa {
        CfaRule::RegisterAndOffset { register, offset } => {
            format!("reg{}{:+}", register.0, offset)
        }
        CfaRule::Expression(e) => format!("expr{:x?}", &eh[e.offset..e.offset + e.length]),
    }
}

fn our_cfa(cfa: &Cfa) -> String {
    match cfa {
        Cfa::RegOffset { reg, offset } => format!("reg{reg}{offset:+}"),
        Cfa::Expression(e) => format!("expr{:x?}", e.as_bytes()),
    }
}

/// Compares every row of every FDE of the ELF file `path`.
fn compare_file(path: &str) -> Counts {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let obj = object::File::parse(&*data).expect("an ELF file");
    let section = |name: &str| {
        let s = obj
            .section_by_name(name)
            .unwrap_or_else(|| panic!("{path}: no {name}"));
        (s.address(), s.data().expect("section data"))
    };
    let (eh_addr, eh_data) = section(".eh_frame");
    let (hdr_addr, _) = section(".eh_frame_hdr");
    let mut mem = ElfMemory::new(&data);
    let mut counts = Counts::default();

    // PT_GNU_EH_FRAME, from the ELF header "mapped" at its link-time address.
    let mut budget = Budget::default();
    let base = mem.first_load();
    let found = find_eh_frame_hdr(&mut mem, &mut budget, base);
    assert_eq!(found, Ok(hdr_addr), "{path}: PT_GNU_EH_FRAME");
    let hdr = Hdr::parse(&mut mem, &mut budget, hdr_addr).expect("the .eh_frame_hdr parses");
    assert_eq!(hdr.eh_frame, eh_addr, "{path}: .eh_frame pointer");

    let eh = EhFrame::new(eh_data, LittleEndian);
    let bases = BaseAddresses::default()
        .set_eh_frame(eh_addr)
        .set_eh_frame_hdr(hdr_addr);
    let mut ctx = UnwindContext::<usize>::new();
    let mut scratch = Scratch::new();
    let mut file = FileTask::new(&data);
    let caches = Box::new(Caches::new());
    let mut table_work = Box::new(Workspace::new());
    const KEY: u64 = 0x5eed;
    let offsets = ElfMemory::new(&data);
    let mut kept = |file: &mut FileTask<'_>, pc: u64| {
        row_through_table(file, &caches, &mut table_work, &offsets, KEY, pc)
            .expect("a segment maps the FDE's range")
    };
    for fde in common::gimli_fdes(&eh, &bases) {
        let fde_addr = eh_addr + fde.offset() as u64;
        counts.fdes += 1;
        let mut mismatch = |what: String| {
            if counts.mismatches.len() < 1000 {
                counts.mismatches.push(format!(
                    "{path}: FDE {fde_addr:#x} ({:#x}..{:#x}): {what}",
                    fde.initial_address(),
                    fde.end_address()
                ))
            }
        };
        if fde.len() > 0 {
            let mut budget = Budget::default();
            match hdr.lookup(&mut mem, &mut budget, fde.initial_address()) {
                Ok(e) if e.fde == fde_addr => counts.table_hits += 1,
                other => mismatch(format!("table lookup gives {other:x?}")),
            }
        }
        let (mut fde_rows, mut fde_exprs) = (0, 0);
        let mut rows = fde.rows(&eh, &bases, &mut ctx).expect("gimli runs the FDE");
        while let Some(row) = rows.next_row().expect("gimli runs the FDE") {
            if row.start_address() == row.end_address() {
                continue;
            }
            counts.rows += 1;
            let pc = row.start_address();
            let mut budget = Budget::default();
            let ours: Found = match find_in_fde(&mut mem, &mut budget, fde_addr, pc, &mut scratch) {
                Ok(f) => f,
                Err(e) => {
                    mismatch(format!("at {pc:#x}: {e:?}, gimli has a row"));
                    continue;
                }
            };
            let want = (
                gimli_cfa(row.cfa(), eh_data),
                gimli_rule(row.register(Register(16)), eh_data, Rule::Undefined),
                gimli_rule(row.register(Register(6)), eh_data, Rule::SameValue),
                row.start_address(),
                row.end_address(),
                fde.is_signal_trampoline(),
            );
            let got = (
                our_cfa(&ours.row.cfa),
                our_rule(ours.row.ra),
                our_rule(ours.row.bp),
                ours.start,
                ours.end,
                ours.row.signal,
            );
            for at in [pc, row.end_address() - 1] {
                match kept(&mut file, at) {
                    Ok(Some(r)) if r == ours.row => {}
                    other => mismatch(format!(
                        "at {at:#x} through the file's table: {other:x?}, not {:x?}",
                        ours.row
                    )),
                }
            }
            let expr = |r: Rule| matches!(r, Rule::Expression(_) | Rule::ValExpression(_));
            fde_rows += 1;
            fde_exprs += usize::from(
                matches!(ours.row.cfa, Cfa::Expression(_))
                    || expr(ours.row.ra)
                    || expr(ours.row.bp)
                    || expr(ours.row.bx),
            );
            counts.expr_rows += usize::from(matches!(ours.row.cfa, Cfa::Expression(_)));
            counts.signal_rows += usize::from(ours.row.signal);
            if want != got {
                mismatch(format!("at {pc:#x}: gimli {want:x?}, ours {got:x?}"));
            }
            // The last address of the row has the same rules.
            let last = row.end_address() - 1;
            let mut budget = Budget::default();
            match find_in_fde(&mut mem, &mut budget, fde_addr, last, &mut scratch) {
                Ok(f) if f == ours => {}
                other => mismatch(format!("at {last:#x}: {other:x?}, not {ours:x?}")),
            }
        }
        if fde_exprs > 0 {
            counts.unkeepable += fde_rows;
        }
    }
    let table = file.tables.get(&KEY).expect("the file's table was made");
    let view = View::new(table).expect("a table");
    assert_eq!(
        view.count() as u64,
        hdr.count,
        "{path}: the search table's entries"
    );
    counts.kept_rows = view.used();
    counts.grown = file.grown;
    counts
}

fn check(paths: &[String]) {
    let mut total = Counts::default();
    for path in paths {
        let c = compare_file(path);
        println!(
            "{path}: {} FDEs, {} rows compared with gimli ({} with a CFA expression, {} in \
             signal frames), {} table lookups, {} rows kept in its table (grown {} times), \
             {} mismatches",
            c.fdes,
            c.rows,
            c.expr_rows,
            c.signal_rows,
            c.table_hits,
            c.kept_rows,
            c.grown,
            c.mismatches.len()
        );
        assert!(
            c.fdes > 0 && c.rows >= c.fdes,
            "{path}: too few FDEs or rows"
        );
        assert_eq!(
            c.kept_rows,
            c.rows - c.unkeepable,
            "{path}: the rows its table kept, of {} ({} in FDEs with an expression)",
            c.rows,
            c.unkeepable
        );
        total.fdes += c.fdes;
        total.rows += c.rows;
        total.mismatches.extend(c.mismatches);
    }
    for m in total.mismatches.iter().take(20) {
        println!("MISMATCH {m}");
    }
    assert!(
        total.mismatches.is_empty(),
        "{} mismatches over {} FDEs and {} rows",
        total.mismatches.len(),
        total.fdes,
        total.rows
    );
}

#[test]
fn system_libraries_match_gimli() {
    let mut paths = vec![
        "/lib/x86_64-linux-gnu/libc.so.6".to_string(),
        "/lib64/ld-linux-x86-64.so.2".to_string(),
    ];
    let stdcxx = std::fs::read_dir("/usr/lib/x86_64-linux-gnu")
        .expect("the library folder")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n == "libstdc++.so.6"))
        .expect("libstdc++.so.6 is installed");
    paths.push(stdcxx.to_string_lossy().into_owned());
    check(&paths);
}

#[test]
fn compiled_programs_match_gimli() {
    let built = build_programs();
    check(&built.binaries);
    let _ = std::fs::remove_dir_all(&built.dir);
}
