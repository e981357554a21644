// SPDX-License-Identifier: GPL-2.0

//! The CFI unwinder on hostile input (a bounded proptest fuzz run): random tables and
//! instructions, and libc's real `.eh_frame_hdr` and `.eh_frame` with bytes mutated. It
//! must never panic, and never read more bytes than its budget allows.

mod common;

use common::ElfMemory;
use object::{Object, ObjectSection};
use proptest::prelude::*;
use std::sync::OnceLock;
use user_unwind_logic::logic::cfi::cie::Cie;
use user_unwind_logic::logic::cfi::elf::find_eh_frame_hdr;
use user_unwind_logic::logic::cfi::machine::{all_rows, find_row, Program, Row, NO_ROWS};
use user_unwind_logic::logic::cfi::packed::{encode_row, packed_initial, packed_rows, Packed};
use user_unwind_logic::logic::cfi::step::{step, Regs, Scratch, Step};
use user_unwind_logic::logic::cfi::table::Hdr;
use user_unwind_logic::logic::cfi::{Budget, CfiError, Memory, Slice};

/// Counts what goes through, and serves a fake stack above the file.
struct Counting<M> {
    inner: M,
    stack: Vec<u8>,
    stack_base: u64,
    bytes: u64,
}

impl<M: Memory> Memory for Counting<M> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.bytes += buf.len() as u64;
        let mut stack = Slice {
            base: self.stack_base,
            bytes: &self.stack,
        };
        stack
            .read(addr, buf)
            .or_else(|_| self.inner.read(addr, buf))
    }
}

const STACK_BASE: u64 = 0x7ff0_0000_0000;

/// libc's bytes, its `.eh_frame_hdr` address and the file range the mutations hit.
fn libc() -> &'static (Vec<u8>, u64, std::ops::Range<usize>) {
    static LIBC: OnceLock<(Vec<u8>, u64, std::ops::Range<usize>)> = OnceLock::new();
    LIBC.get_or_init(|| {
        let data = std::fs::read("/lib/x86_64-linux-gnu/libc.so.6").expect("libc");
        let obj = object::File::parse(&*data).expect("ELF");
        let range = |name: &str| {
            let s = obj.section_by_name(name).expect(name);
            let (off, size) = s.file_range().expect("in the file");
            (s.address(), off as usize..(off + size) as usize)
        };
        let (hdr_addr, hdr) = range(".eh_frame_hdr");
        let (_, eh) = range(".eh_frame");
        let lo = hdr.start.min(eh.start);
        let hi = hdr.end.max(eh.end);
        (data, hdr_addr, lo..hi)
    })
}

/// Unwinds up to 64 frames from `regs` with `hdr_addr`'s table, on `mem`; returns how
/// many steps succeeded, checking the budget held.
fn unwind<M: Memory>(mem: &mut Counting<M>, hdr_addr: u64, mut regs: Regs) -> usize {
    let budget0 = Budget {
        bytes: 16 * 1024,
        insns: 4096,
    };
    let mut budget = budget0;
    let mut scratch = Scratch::new();
    let mut steps = 0;
    let Ok(hdr) = Hdr::parse(mem, &mut budget, hdr_addr) else {
        return 0;
    };
    let mut exact = true;
    for _ in 0..64 {
        match step(mem, &mut budget, &hdr, &regs, exact, &mut scratch) {
            Ok(Step::Caller {
                regs: next,
                exact_ip,
            }) => {
                regs = next;
                exact = exact_ip;
                steps += 1;
            }
            Ok(Step::Outermost) | Err(_) => break,
        }
    }
    assert!(
        mem.bytes <= u64::from(budget0.bytes),
        "read {} bytes on a budget of {}",
        mem.bytes,
        budget0.bytes
    );
    assert!(budget.insns <= budget0.insns);
    steps
}

fn fake_stack(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A CIE as GCC writes them ("zR", pc-relative FDE pointers, the return address in 16)
/// with the given factors and signal mark.
fn gcc_like_cie(code_align: u64, data_align: i64, signal: bool) -> Cie {
    Cie {
        addr: 0,
        version: 1,
        code_align,
        data_align,
        ra_reg: 16,
        has_z: true,
        fde_enc: 0x1b,
        lsda_enc: 0xff,
        signal,
        insns_start: 0,
        insns_end: 0,
    }
}

/// An FDE covering 0x1000-0x1100 with the instructions `fde_insns`, of a CIE `cie` whose
/// initial instructions are `cie_insns`.
fn program<'a>(cie: &'a Cie, cie_insns: &'a [u8], fde_insns: &'a [u8]) -> Program<'a> {
    Program {
        cie,
        cie_insns,
        cie_insns_addr: 0x100,
        fde_insns,
        fde_insns_addr: 0x200,
        pc_begin: 0x1000,
        pc_end: 0x1100,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    /// libc with up to 16 bytes of its unwind sections changed, unwound from an address
    /// in it with a stack of random words that point back into libc.
    #[test]
    fn fuzz_mutated_libc(
        muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        ip in any::<prop::sample::Index>(),
        words in proptest::collection::vec(any::<u64>(), 0..64),
        text_words in proptest::collection::vec(any::<prop::sample::Index>(), 0..64),
    ) {
        let (data, hdr_addr, range) = libc();
        let mut data = data.clone();
        for (at, v) in &muts {
            data[range.start + at.index(range.len())] = *v;
        }
        // Return addresses into libc's text (0x26000..0x1a0000 or so), mixed with noise.
        let text = 0x26000u64..0x1a0000u64;
        let span = (text.end - text.start) as usize;
        let mut stack = words.clone();
        for (i, t) in text_words.iter().enumerate() {
            if i < stack.len() && i % 2 == 0 {
                stack[i] = text.start + t.index(span) as u64;
            }
        }
        let stack = fake_stack(&stack);
        let mut mem = Counting {
            inner: ElfMemory::new(&data),
            stack,
            stack_base: STACK_BASE,
            bytes: 0,
        };
        let regs = Regs {
            ip: text.start + ip.index(span) as u64,
            sp: STACK_BASE,
            bp: STACK_BASE + 64, bx: 0,
        };
        unwind(&mut mem, *hdr_addr, regs);
    }

    /// Random bytes as a whole `.eh_frame_hdr` and `.eh_frame`.
    #[test]
    fn fuzz_random_tables(
        mut bytes in proptest::collection::vec(any::<u8>(), 0..1024),
        head in prop_oneof![Just(0x1b033b01u32), any::<u32>()],
        ip in 0x1000u64..0x1400,
    ) {
        if bytes.len() >= 4 {
            bytes[..4].copy_from_slice(&head.to_le_bytes());
        }
        let mut mem = Counting {
            inner: Slice { base: 0x1000, bytes: &bytes },
            stack: fake_stack(&[0x1010, 0x1020, 0x1030, 0, 0x1040]),
            stack_base: STACK_BASE,
            bytes: 0,
        };
        let regs = Regs { ip, sp: STACK_BASE, bp: STACK_BASE + 16, bx: 0 };
        unwind(&mut mem, 0x1000, regs);
        let mut budget = Budget::default();
        let _ = find_eh_frame_hdr(&mut mem, &mut budget, 0x1000);
    }

    /// Random instruction streams through the state machine, with random CIE fields.
    #[test]
    fn fuzz_instructions(
        cie_insns in proptest::collection::vec(any::<u8>(), 0..64),
        fde_insns in proptest::collection::vec(any::<u8>(), 0..512),
        code_align in 0u64..4,
        data_align in -16i64..16,
        signal in any::<bool>(),
        pc in 0x1000u64..0x1200,
    ) {
        let cie = gcc_like_cie(code_align, data_align, signal);
        let p = program(&cie, &cie_insns, &fde_insns);
        let mut budget = Budget { bytes: 0, insns: 300 };
        if let Ok(found) = find_row(&p, pc, &mut budget) {
            prop_assert!(found.start <= pc && pc < found.end, "{found:?} for {pc:#x}");
            prop_assert!(found.end <= 0x1100);
        }
    }
}

/// A CFA instruction with its operands: mostly what compilers write (on the registers the
/// unwinder tracks and others), sometimes an expression or a random byte.
fn cfa_op() -> impl Strategy<Value = Vec<u8>> {
    let reg = prop_oneof![Just(3u8), Just(6), Just(7), Just(16), 0u8..40];
    let uleb = prop_oneof![0u8..0x7f, Just(0x7f)].prop_map(|b| vec![b]);
    let wide = Just(vec![0x80u8, 0x80, 0x80, 0x80, 0x08]);
    prop_oneof![
        (1u8..0x40).prop_map(|d| vec![0x40 | d]),
        (reg.clone(), prop_oneof![uleb.clone(), wide.clone()]).prop_map(|(r, n)| [
            vec![0x80 | (r & 0x3f)],
            n
        ]
        .concat()),
        reg.clone().prop_map(|r| vec![0xc0 | (r & 0x3f)]),
        (reg.clone(), uleb.clone()).prop_map(|(r, n)| [vec![0x0c, r], n].concat()),
        (reg.clone(), uleb.clone()).prop_map(|(r, n)| [vec![0x14, r], n].concat()),
        (reg.clone(), any::<u8>()).prop_map(|(r, n)| vec![0x11, r, n & 0x7f]),
        prop_oneof![uleb.clone(), wide].prop_map(|n| [vec![0x0e], n].concat()),
        any::<u8>().prop_map(|n| vec![0x13, n & 0x7f]),
        reg.clone().prop_map(|r| vec![0x0d, r]),
        reg.clone().prop_map(|r| vec![0x07, r]),
        reg.clone().prop_map(|r| vec![0x08, r]),
        (reg.clone(), reg.clone()).prop_map(|(r, o)| vec![0x09, r, o]),
        reg.clone().prop_map(|r| vec![0x06, r]),
        Just(vec![0x0a]),
        Just(vec![0x0b]),
        Just(vec![0x00]),
        any::<u8>().prop_map(|d| vec![0x02, d]),
        Just(vec![0x03, 0x00, 0x01]),
        Just(vec![0x2e, 0x10]),
        (reg.clone(), 0u8..20).prop_map(|(r, n)| [vec![0x10, r, n], vec![0x77; n.into()]].concat()),
        (reg, 0u8..4).prop_map(|(r, n)| [vec![0x16, r, n], vec![0x08; n.into()]].concat()),
        Just(vec![0x0f, 0x02, 0x77, 0x08]),
        any::<u8>().prop_map(|b| vec![b]),
    ]
}

/// The general machine's rows of `p`, packed as [`packed_rows`] gives them, if it succeeds
/// and all of them have the packed form.
fn general_rows(p: &Program<'_>, budget: &mut Budget) -> Option<Vec<Packed>> {
    let (mut rows, mut whole) = (Vec::new(), true);
    let mut emit = |start: u64, row: &Row| {
        let off = start - p.pc_begin;
        match encode_row(row) {
            Some([a, b, c]) if off < 1 << 24 && rows.len() < 256 => rows.push([a, b, c | off << 8]),
            _ => whole = false,
        }
        Ok(())
    };
    let mut remembered = NO_ROWS;
    let ok = all_rows(p, budget, &mut remembered, &mut emit).is_ok();
    (ok && whole).then_some(rows)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    /// The packed machine gives an FDE's rows only when the general machine gives the same
    /// rows, all packed (else its caller runs the general machine): on instruction streams
    /// of what compilers write, mixed with expressions, errors and random bytes, under a
    /// budget that sometimes runs out.
    #[test]
    fn packed_rows_are_the_general_machines(
        cie_ops in proptest::collection::vec(cfa_op(), 0..4),
        fde_ops in proptest::collection::vec(cfa_op(), 0..40),
        code_align in 0u64..3,
        data_align in -9i64..9,
        signal in any::<bool>(),
        insns in 20u32..100,
    ) {
        let cie = gcc_like_cie(code_align, data_align, signal);
        let (cie_insns, fde_insns) = (cie_ops.concat(), fde_ops.concat());
        let p = program(&cie, &cie_insns, &fde_insns);
        let budget = Budget { bytes: 0, insns };
        let general = general_rows(&p, &mut budget.clone());
        let mut b = budget;
        let mut stack = [[0; 3]; 8];
        let mut rows = [[0; 3]; 256];
        let packed = packed_initial(&p, &mut b)
            .and_then(|initial| packed_rows(&p, initial, &mut b, &mut stack, &mut rows));
        if let Some(n) = packed {
            prop_assert_eq!(Some(rows[..n].to_vec()), general);
        }
    }
}

/// The harness on the unmutated libc: one step from `getpid`'s first instruction.
#[test]
fn real_libc_unwinds_a_frame() {
    let (data, hdr_addr, _) = libc();
    let obj = object::File::parse(&**data).expect("ELF");
    let getpid = obj
        .dynamic_symbols()
        .find(|s| object::ObjectSymbol::name(s) == Ok("getpid"))
        .map(|s| object::ObjectSymbol::address(&s))
        .expect("getpid in libc");
    // At getpid's first instruction: CFA = rsp + 8, the return address on top of the stack.
    let mut mem = Counting {
        inner: ElfMemory::new(data),
        stack: fake_stack(&[0x1234_5678, 0]),
        stack_base: STACK_BASE,
        bytes: 0,
    };
    let mut budget = Budget::default();
    let hdr = Hdr::parse(&mut mem, &mut budget, *hdr_addr).expect("hdr");
    let regs = Regs {
        ip: getpid,
        sp: STACK_BASE,
        bp: 77,
        bx: 0,
    };
    let got = step(
        &mut mem,
        &mut budget,
        &hdr,
        &regs,
        true,
        &mut Scratch::new(),
    );
    assert_eq!(
        got,
        Ok(Step::Caller {
            regs: Regs {
                ip: 0x1234_5678,
                sp: STACK_BASE + 8,
                bp: 77,
                bx: 0
            },
            exact_ip: false
        })
    );
}
