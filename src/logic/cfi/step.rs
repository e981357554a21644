// SPDX-License-Identifier: GPL-2.0

//! One unwind step: from the registers of a frame to those of its caller.
//!
//! The step splits in two, so that a cache can sit between them: [`find`] (expensive: a
//! table bisection, the CIE and FDE copied and parsed, instructions run) gives the
//! [`Row`] in force at an address and the range it covers; [`apply`] (cheap: the CFA and
//! two loads) applies a row to the registers. [`step`] does both. [`step_fp`] and
//! [`step_fp_entry`] are the frame-pointer rules of the kernel's `unwind_user_next_fp()`,
//! [`step_sigframe`] reads the registers a signal interrupted from the kernel's
//! `rt_sigframe` directly, for a trampoline without CFI.
//!
//! The sanity checks are those of `unwind_user_next_common()` in kernel/unwind/user.c: the
//! CFA must be above the current stack pointer and 8-byte aligned (not for a signal frame,
//! whose CFA is the interrupted stack pointer, which may be anywhere, as on an alternate
//! signal stack).

#![forbid(unsafe_code)]

use super::cie::load_entry;
use super::cie::load_entry_head;
use super::cie::parse_cie;
use super::cie::Cie;
use super::expr::eval;
use super::expr::ExprRegs;
use super::fde::cie_addr;
use super::fde::parse_fde;
use super::machine::all_rows;
use super::machine::find_row;
use super::machine::find_row_streamed;
use super::machine::Cfa;
use super::machine::Found;
use super::machine::Program;
use super::machine::Remembered;
use super::machine::Row;
use super::machine::Rule;
use super::machine::MAX_REMEMBER;
use super::machine::NO_ROWS;
use super::packed::encode_row;
use super::packed::packed_initial;
use super::packed::packed_rows;
use super::packed::Packed;
use super::packed::PackedStack;
use super::read_u64;
use super::table::Hdr;
use super::Budget;
use super::CfiError;
use super::Memory;
use super::REG_RA;
use super::REG_RBP;
use super::REG_RBX;
use super::REG_RSP;

/// Bytes of the CIE buffer in [`Scratch`]: CIEs are about 20 bytes, with a personality 30.
pub const CIE_MAX: usize = 256;
/// Bytes of the FDE buffer in [`Scratch`]: the longest FDE of glibc is under 200 bytes, of
/// libstdc++ under 800. A longer one (GCC's `cc1` has one of 20 KiB) is read a buffer at a
/// time, as far as the row looked up needs.
pub const FDE_MAX: usize = 4096;
/// Rows of one FDE that [`Scratch`] holds: an FDE with more is not kept whole (see
/// [`crate::logic::ftable`]).
pub const ROWS_MAX: usize = crate::logic::ftable::FDE_ROWS_MAX;

/// Where a lookup copies the CIE and the FDE.
#[derive(Clone, Debug)]
pub struct Scratch {
    /// The CIE buffer.
    pub cie: [u8; CIE_MAX],
    /// The FDE buffer.
    pub fde: [u8; FDE_MAX],
    /// An FDE's rows, as a file's table keeps them.
    pub rows: [[u64; 3]; ROWS_MAX],
    /// The CIE [`fde_rows`] loaded last.
    pub last_cie: LastCie,
    /// The `DW_CFA_remember_state` stack of [`fde_rows`]'s general machine.
    pub remembered: Remembered,
    /// The same for its packed rows.
    pub packed: PackedStack,
}

impl Scratch {
    /// Zeroed buffers.
    pub const fn new() -> Scratch {
        Scratch {
            cie: [0; CIE_MAX],
            fde: [0; FDE_MAX],
            rows: [[0; 3]; ROWS_MAX],
            last_cie: LastCie::new(),
            remembered: NO_ROWS,
            packed: [[0; 3]; MAX_REMEMBER],
        }
    }
}

/// The CIE [`fde_rows`] loaded last, parsed, with its bytes: the FDEs of an object mostly
/// share one or two CIEs, so the next FDE's is mostly this one. Its address says which it
/// is only within one object: whoever reads an object with it says which first
/// ([`LastCie::open`]). It is kept for the next stack through the same file only once it
/// is known to be the file's settled content ([`LastCie::settled`]).
#[derive(Clone, Debug)]
pub struct LastCie {
    buf: [u8; CIE_MAX],
    /// The entry as loaded into `buf` (where its body starts there, its body's address),
    /// and parsed; `None`: nothing loaded.
    loaded: Option<(usize, u64, Cie)>,
    /// The row its initial instructions make, packed, once an FDE's rows were
    /// ([`packed_initial`]).
    initial: Option<Packed>,
    /// The key of the object it was read from (0: none).
    key: u64,
    /// What the first check of the object's content after it was read said (`None`: not
    /// checked yet).
    proven: Option<bool>,
}

impl LastCie {
    /// None loaded.
    pub const fn new() -> LastCie {
        LastCie {
            buf: [0; CIE_MAX],
            loaded: None,
            initial: None,
            key: 0,
            proven: None,
        }
    }

    /// Forgets the CIE loaded.
    pub fn forget(&mut self) {
        self.loaded = None;
        self.initial = None;
        self.proven = None;
    }

    /// The next loads are from the object `key` (a file's identity is its content): the CIE
    /// loaded is forgotten unless it is that object's, read from its settled content.
    pub fn open(&mut self, key: u64) {
        if key != self.key || self.proven != Some(true) {
            self.forget();
        }
        self.key = key;
    }

    /// Whether the object's content was settled when checked after a lookup: the CIE loaded
    /// is proven settled content by the first check after it was read, and never if that
    /// check fails.
    pub fn settled(&mut self, settled: bool) {
        if self.loaded.is_some() && self.proven.is_none() {
            self.proven = Some(settled);
        }
    }

    /// The CIE at `addr`, loaded and parsed unless it is the one loaded last: the CIE, its
    /// initial instructions and their address, and the row they make if it is known.
    #[inline]
    fn load<M: Memory + ?Sized>(
        &mut self,
        mem: &mut M,
        budget: &mut Budget,
        addr: u64,
    ) -> Result<CieRef<'_>, CfiError> {
        if !matches!(self.loaded, Some((.., ref cie)) if cie.addr == addr) {
            self.forget();
            let raw = load_entry(mem, budget, addr, &mut self.buf)?;
            let cie = parse_cie(&raw)?;
            // `load_entry()` loads a body whole or fails: its instructions are all there.
            self.loaded = Some((raw.at, raw.body_addr, cie));
        }
        let Some((at, body_addr, cie)) = &self.loaded else {
            return Err(CfiError::Malformed);
        };
        let insns = self.buf.get(at + cie.insns_start..at + cie.insns_end);
        Ok(CieRef {
            cie,
            insns: insns.ok_or(CfiError::Malformed)?,
            insns_addr: body_addr.wrapping_add(cie.insns_start as u64),
            initial: self.initial,
        })
    }
}

/// The CIE [`LastCie::load`] gives: parsed, its initial instructions and their address, and
/// the row they make if it is known.
struct CieRef<'c> {
    cie: &'c Cie,
    insns: &'c [u8],
    insns_addr: u64,
    initial: Option<Packed>,
}

impl Default for LastCie {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// The registers the unwinder tracks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    /// The instruction pointer (for a caller, the return address).
    pub ip: u64,
    /// The stack pointer.
    pub sp: u64,
    /// The frame pointer `rbp`; 0 once a rule made it unrecoverable.
    pub bp: u64,
    /// `rbx`, callee-saved; 0 once a rule made it unrecoverable.
    pub bx: u64,
}

/// What a step found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The caller's registers.
    Caller {
        /// Its registers.
        regs: Regs,
        /// Whether `regs.ip` is exact (the instruction a signal interrupted) rather than a
        /// return address: look it up as is, not `ip - 1`.
        exact_ip: bool,
    },
    /// This frame is the outermost: its return address is undefined (`_start`, a
    /// thread's start) or zero.
    Outermost,
}

/// The row in force at `pc`, in the FDE at `fde_addr`.
pub fn find_in_fde<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    fde_addr: u64,
    pc: u64,
    scratch: &mut Scratch,
) -> Result<Found, CfiError> {
    let fde_raw = load_entry_head(mem, budget, fde_addr, &mut scratch.fde)?;
    let cie_raw = load_entry(mem, budget, cie_addr(&fde_raw)?, &mut scratch.cie)?;
    let cie = parse_cie(&cie_raw)?;
    let fde = parse_fde(&fde_raw, &cie)?;
    let cie_insns = cie.insns(&cie_raw)?;
    let at = |base: u64, start: usize| base.wrapping_add(start as u64);
    let fde_insns_addr = at(fde_raw.body_addr, fde.insns_start);
    let (loaded, len) = (fde_raw.body.len(), fde_raw.len);
    let cie_insns_addr = at(cie_raw.body_addr, cie.insns_start);
    let program = Program {
        cie: &cie,
        cie_insns,
        cie_insns_addr,
        fde_insns: &[],
        fde_insns_addr,
        pc_begin: fde.pc_begin,
        pc_end: fde.pc_end,
    };
    if loaded == len {
        let whole = Program {
            fde_insns: fde.insns(&fde_raw)?,
            ..program
        };
        return find_row(&whole, pc, budget);
    }
    // Longer than the buffer: its instructions read as far as they are needed.
    let insns_len = len
        .checked_sub(fde.insns_start)
        .ok_or(CfiError::Malformed)?;
    find_row_streamed(
        &program,
        insns_len as u64,
        pc,
        budget,
        mem,
        &mut scratch.fde,
    )
}

/// Every row of the FDE at `fde_addr`, packed ([`super::packed`]) into `scratch.rows` with
/// each row's offset from the FDE's first address in bits 8-31 of its third word; its CIE
/// from `scratch.last_cie` (loaded there unless it is the last one), the FDE copied into
/// `scratch.fde`. Its range, and the number of rows if all of them have the packed form
/// and fit (else some are not packed: an expression, a row 16 MiB or more from the start,
/// more than [`ROWS_MAX`]). The program runs on the packed rows ([`packed_rows`]); only
/// where that needs the general machine ([`all_rows`]) is the program run by it again,
/// with the budget it had. An FDE longer than `scratch.fde`: [`CfiError::TooLong`] (the
/// rows of such an FDE are looked up one at a time, by [`find_in_fde`]).
pub fn fde_rows<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    fde_addr: u64,
    scratch: &mut Scratch,
) -> Result<(u64, u64, Option<usize>), CfiError> {
    let Scratch {
        fde,
        rows,
        last_cie,
        remembered,
        packed,
        ..
    } = scratch;
    let fde_raw = load_entry_head(mem, budget, fde_addr, fde)?;
    if fde_raw.body.len() != fde_raw.len {
        return Err(CfiError::TooLong);
    }
    let CieRef {
        cie,
        insns: cie_insns,
        insns_addr: cie_insns_addr,
        initial,
    } = last_cie.load(mem, budget, cie_addr(&fde_raw)?)?;
    let parsed = parse_fde(&fde_raw, cie)?;
    let program = Program {
        cie,
        cie_insns,
        cie_insns_addr,
        fde_insns: parsed.insns(&fde_raw)?,
        fde_insns_addr: fde_raw.body_addr.wrapping_add(parsed.insns_start as u64),
        pc_begin: parsed.pc_begin,
        pc_end: parsed.pc_end,
    };
    let range = (parsed.pc_begin, parsed.pc_end);
    let given = *budget;
    let initial = initial.or_else(|| packed_initial(&program, budget));
    if let Some(n) = initial.and_then(|i| packed_rows(&program, i, budget, packed, rows)) {
        last_cie.initial = initial;
        return Ok((range.0, range.1, Some(n)));
    }
    *budget = given;
    let (mut n, mut whole) = (0usize, true);
    all_rows(
        &program,
        budget,
        remembered,
        &mut |start: u64, row: &Row| {
            let off = start.wrapping_sub(parsed.pc_begin);
            match (encode_row(row), rows.get_mut(n)) {
                (Some([a, b, c]), Some(slot)) if off < 1 << 24 => {
                    *slot = [a, b, c | off << 8];
                    n += 1;
                }
                _ => whole = false,
            }
            Ok(())
        },
    )?;
    Ok((range.0, range.1, whole.then_some(n)))
}

/// The row in force at `pc`, through the `.eh_frame_hdr` table `hdr`.
pub fn find<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    hdr: &Hdr,
    pc: u64,
    scratch: &mut Scratch,
) -> Result<Found, CfiError> {
    let entry = hdr.lookup(mem, budget, pc)?;
    find_in_fde(mem, budget, entry.fde, pc, scratch)
}

fn reg_value(reg: u8, regs: &Regs) -> Result<u64, CfiError> {
    match u16::from(reg) {
        REG_RSP => Ok(regs.sp),
        REG_RBP => Ok(regs.bp),
        REG_RBX => Ok(regs.bx),
        REG_RA => Ok(regs.ip),
        _ => Err(CfiError::Unsupported),
    }
}

/// The caller's value of a register whose rule is `rule` and whose value in this frame
/// is `current`; `None` if undefined.
fn recover<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    rule: &Rule,
    current: u64,
    cfa: u64,
    regs: &Regs,
) -> Result<Option<u64>, CfiError> {
    let er = ExprRegs {
        ip: regs.ip,
        sp: regs.sp,
        bp: regs.bp,
    };
    Ok(Some(match rule {
        Rule::Undefined => return Ok(None),
        Rule::SameValue => current,
        Rule::Offset(off) => read_u64(mem, budget, cfa.wrapping_add_signed(i64::from(*off)))?,
        Rule::ValOffset(off) => cfa.wrapping_add_signed(i64::from(*off)),
        Rule::Register(r) => reg_value(*r, regs)?,
        Rule::Expression(e) => {
            let addr = eval(e.as_bytes(), &er, Some(cfa), mem, budget)?;
            read_u64(mem, budget, addr)?
        }
        Rule::ValExpression(e) => eval(e.as_bytes(), &er, Some(cfa), mem, budget)?,
    }))
}

/// The CFA of `row` for `regs`.
pub fn cfa<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    row: &Row,
    regs: &Regs,
) -> Result<u64, CfiError> {
    match &row.cfa {
        Cfa::RegOffset { reg, offset } => reg_value(*reg, regs)?
            .checked_add_signed(i64::from(*offset))
            .ok_or(CfiError::BadFrame),
        Cfa::Expression(e) => {
            let er = ExprRegs {
                ip: regs.ip,
                sp: regs.sp,
                bp: regs.bp,
            };
            eval(e.as_bytes(), &er, None, mem, budget)
        }
    }
}

/// Applies `row` to the registers of a frame: the caller's registers, or the end of the
/// stack.
pub fn apply<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    row: &Row,
    regs: &Regs,
) -> Result<Step, CfiError> {
    let cfa = cfa(mem, budget, row, regs)?;
    if !row.signal && (cfa <= regs.sp || cfa & 7 != 0) {
        return Err(CfiError::BadFrame);
    }
    if row.ra == Rule::SameValue {
        return Err(CfiError::BadFrame);
    }
    let Some(ra) = recover(mem, budget, &row.ra, regs.ip, cfa, regs)? else {
        return Ok(Step::Outermost);
    };
    if ra == 0 {
        return Ok(Step::Outermost);
    }
    let bp = recover(mem, budget, &row.bp, regs.bp, cfa, regs)?.unwrap_or(0);
    let bx = recover(mem, budget, &row.bx, regs.bx, cfa, regs)?.unwrap_or(0);
    Ok(Step::Caller {
        regs: Regs {
            ip: ra,
            sp: cfa,
            bp,
            bx,
        },
        exact_ip: row.signal,
    })
}

/// One step with the CFI of `hdr`: `exact_ip` is true for the innermost frame and for the
/// frame a signal interrupted; otherwise `ip` is a return address and `ip - 1` is looked
/// up, which lies in the call instruction.
pub fn step<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    hdr: &Hdr,
    regs: &Regs,
    exact_ip: bool,
    scratch: &mut Scratch,
) -> Result<Step, CfiError> {
    let pc = if exact_ip {
        regs.ip
    } else {
        regs.ip.checked_sub(1).ok_or(CfiError::NoFde)?
    };
    let found = find(mem, budget, hdr, pc, scratch)?;
    apply(mem, budget, &found.row, regs)
}

/// One step by the frame-pointer rule: the CFA is `rbp + 16`, the return address at
/// `rbp + 8`, the caller's `rbp` at `rbp`.
pub fn step_fp<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    regs: &Regs,
) -> Result<Step, CfiError> {
    if regs.bp < regs.sp {
        return Err(CfiError::BadFrame);
    }
    let cfa = regs.bp.checked_add(16).ok_or(CfiError::BadFrame)?;
    if cfa <= regs.sp || cfa & 7 != 0 {
        return Err(CfiError::BadFrame);
    }
    let ra = read_u64(mem, budget, cfa - 8)?;
    let bp = read_u64(mem, budget, cfa - 16)?;
    if ra == 0 {
        return Ok(Step::Outermost);
    }
    Ok(Step::Caller {
        regs: Regs {
            ip: ra,
            sp: cfa,
            bp,
            bx: regs.bx,
        },
        exact_ip: false,
    })
}

/// One step for the innermost frame stopped on a function's first instruction, before it
/// pushed `rbp`: the CFA is `rsp + 8`, the return address at `rsp`, `rbp` unchanged.
pub fn step_fp_entry<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    regs: &Regs,
) -> Result<Step, CfiError> {
    let cfa = regs.sp.checked_add(8).ok_or(CfiError::BadFrame)?;
    if cfa & 7 != 0 {
        return Err(CfiError::BadFrame);
    }
    let ra = read_u64(mem, budget, regs.sp)?;
    if ra == 0 {
        return Ok(Step::Outermost);
    }
    Ok(Step::Caller {
        regs: Regs {
            ip: ra,
            sp: cfa,
            bp: regs.bp,
            bx: regs.bx,
        },
        exact_ip: false,
    })
}

/// Offset of `uc_mcontext` in the x86-64 `struct ucontext` (`uc_flags`, `uc_link`, a
/// 24-byte `stack_t`), which starts at `rsp` once `__restore_rt` runs (the kernel's
/// `rt_sigframe` minus its popped `pretcode`).
pub const UC_MCONTEXT: u64 = 40;
/// Offset of `rbp` in `struct sigcontext` (x86-64: `r8`-`r15`, `rdi`, `rsi`, `rbp`, ...).
pub const SC_RBP: u64 = 80;
/// Offset of `rbx` in `struct sigcontext`.
pub const SC_RBX: u64 = 88;
/// Offset of `rsp` in `struct sigcontext`.
pub const SC_RSP: u64 = 120;
/// Offset of `rip` in `struct sigcontext`.
pub const SC_RIP: u64 = 128;

/// One step out of a signal trampoline (`__restore_rt`) with `rsp` at the `ucontext`: the
/// interrupted registers, from the signal frame. The interrupted `ip` is exact.
pub fn step_sigframe<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    regs: &Regs,
) -> Result<Step, CfiError> {
    let mc = regs.sp.checked_add(UC_MCONTEXT).ok_or(CfiError::BadFrame)?;
    let at = |off: u64| mc.checked_add(off).ok_or(CfiError::BadFrame);
    let bp = read_u64(mem, budget, at(SC_RBP)?)?;
    let bx = read_u64(mem, budget, at(SC_RBX)?)?;
    let sp = read_u64(mem, budget, at(SC_RSP)?)?;
    let ip = read_u64(mem, budget, at(SC_RIP)?)?;
    if ip == 0 {
        return Ok(Step::Outermost);
    }
    Ok(Step::Caller {
        regs: Regs { ip, sp, bp, bx },
        exact_ip: true,
    })
}

#[cfg(test)]
mod tests {
    use super::super::machine::Expr;
    use super::super::Slice;
    use super::*;

    const SP: u64 = 0x7ffc_1000;

    /// A stack at `SP` holding `words`.
    fn stack(words: &[u64], buf: &mut [u8; 512]) -> usize {
        for (i, w) in words.iter().enumerate() {
            buf[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        8 * words.len()
    }

    fn row(cfa: Cfa, ra: Rule, bp: Rule) -> Row {
        Row {
            cfa,
            ra,
            bp,
            bx: Rule::SameValue,
            signal: false,
        }
    }

    fn sp(offset: i32) -> Cfa {
        Cfa::RegOffset { reg: 7, offset }
    }

    fn caller(ip: u64, sp: u64, bp: u64) -> Result<Step, CfiError> {
        Ok(Step::Caller {
            regs: Regs { ip, sp, bp, bx: 0 },
            exact_ip: false,
        })
    }

    #[test]
    fn apply_register_rules() {
        let mut buf = [0u8; 512];
        let n = stack(&[0xb0b0, 0x4010, 0x4020], &mut buf);
        let mut m = Slice {
            base: SP,
            bytes: &buf[..n],
        };
        let regs = Regs {
            ip: 0x1000,
            sp: SP,
            bp: 0x55,
            bx: 0,
        };
        let b = &mut Budget::default();
        let r = row(sp(16), Rule::Offset(-8), Rule::Offset(-16));
        assert_eq!(apply(&mut m, b, &r, &regs), caller(0x4010, SP + 16, 0xb0b0));
        let r = row(sp(16), Rule::Offset(-8), Rule::SameValue);
        assert_eq!(apply(&mut m, b, &r, &regs), caller(0x4010, SP + 16, 0x55));
        let r = row(sp(16), Rule::Offset(-8), Rule::Undefined);
        assert_eq!(apply(&mut m, b, &r, &regs), caller(0x4010, SP + 16, 0));
        let r = row(sp(16), Rule::Offset(-8), Rule::ValOffset(-4));
        assert_eq!(
            apply(&mut m, b, &r, &regs),
            caller(0x4010, SP + 16, SP + 12)
        );
        let r = row(sp(16), Rule::Offset(-8), Rule::Register(7));
        assert_eq!(apply(&mut m, b, &r, &regs), caller(0x4010, SP + 16, SP));
        let e = Expr::new(&[0x77, 0x10]).unwrap(); // breg7 16: rsp + 16
        let r = row(sp(16), Rule::Expression(e), Rule::ValExpression(e));
        assert_eq!(
            apply(&mut m, b, &r, &regs),
            caller(0x4020, SP + 16, SP + 16)
        );
        // rbp-based CFA.
        let regs_bp = Regs { bp: SP, ..regs };
        let r = row(
            Cfa::RegOffset { reg: 6, offset: 16 },
            Rule::Offset(-8),
            Rule::Offset(-16),
        );
        assert_eq!(
            apply(&mut m, b, &r, &regs_bp),
            caller(0x4010, SP + 16, 0xb0b0)
        );
    }

    #[test]
    fn sanity_checks_and_the_end() {
        let mut buf = [0u8; 512];
        let n = stack(&[0, 0x4010, 0], &mut buf);
        let mut m = Slice {
            base: SP,
            bytes: &buf[..n],
        };
        let regs = Regs {
            ip: 0x1000,
            sp: SP,
            bp: 0,
            bx: 0,
        };
        let b = &mut Budget::default();
        // The CFA at or below sp, misaligned, from a register not tracked.
        let r = row(sp(0), Rule::Offset(-8), Rule::SameValue);
        assert_eq!(apply(&mut m, b, &r, &regs), Err(CfiError::BadFrame));
        let r = row(sp(12), Rule::Offset(-8), Rule::SameValue);
        assert_eq!(apply(&mut m, b, &r, &regs), Err(CfiError::BadFrame));
        let r = row(
            Cfa::RegOffset { reg: 12, offset: 8 },
            Rule::Offset(-8),
            Rule::SameValue,
        );
        assert_eq!(apply(&mut m, b, &r, &regs), Err(CfiError::Unsupported));
        let r = row(sp(8), Rule::SameValue, Rule::SameValue);
        assert_eq!(apply(&mut m, b, &r, &regs), Err(CfiError::BadFrame));
        // Undefined or zero return address: the outermost frame.
        let r = row(sp(8), Rule::Undefined, Rule::SameValue);
        assert_eq!(apply(&mut m, b, &r, &regs), Ok(Step::Outermost));
        let r = row(sp(8), Rule::Offset(-8), Rule::SameValue);
        assert_eq!(apply(&mut m, b, &r, &regs), Ok(Step::Outermost));
        // A saved value beyond readable memory.
        let r = row(sp(64), Rule::Offset(-8), Rule::SameValue);
        assert_eq!(apply(&mut m, b, &r, &regs), Err(CfiError::Read));
    }

    #[test]
    fn plt_row() {
        let mut buf = [0u8; 512];
        let n = stack(&[0x4444, 0x4010], &mut buf);
        let mut m = Slice {
            base: SP,
            bytes: &buf[..n],
        };
        let plt = Expr::new(&[
            0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
        ])
        .unwrap();
        let r = row(Cfa::Expression(plt), Rule::Offset(-8), Rule::SameValue);
        let b = &mut Budget::default();
        // At the push of a lazy PLT entry (offset 6): the return address on top.
        let regs = Regs {
            ip: 0x1026,
            sp: SP,
            bp: 1,
            bx: 0,
        };
        assert_eq!(apply(&mut m, b, &r, &regs), caller(0x4444, SP + 8, 1));
        // At its jmp to PLT0 (offset 11), the index pushed: the return address above it.
        let regs = Regs {
            ip: 0x103b,
            sp: SP,
            bp: 1,
            bx: 0,
        };
        assert_eq!(apply(&mut m, b, &r, &regs), caller(0x4010, SP + 16, 1));
    }

    /// A signal frame as the kernel builds it, seen from `__restore_rt` (`rsp` at the
    /// `ucontext`): the interrupted rbp, rsp and rip at 120, 160 and 168.
    fn sigframe(buf: &mut [u8; 512]) -> usize {
        let mut words = [0u64; 40];
        for (i, w) in words.iter_mut().enumerate() {
            *w = 0x1000 + i as u64;
        }
        words[(UC_MCONTEXT + SC_RBP) as usize / 8] = 0xbbbb;
        words[(UC_MCONTEXT + SC_RBX) as usize / 8] = 0xb8b8;
        words[(UC_MCONTEXT + SC_RSP) as usize / 8] = 0x7fff_0123;
        words[(UC_MCONTEXT + SC_RIP) as usize / 8] = 0x40_1234;
        stack(&words, buf)
    }

    #[test]
    fn signal_frame_by_glibc_cfi_and_by_layout() {
        let mut buf = [0u8; 512];
        let n = sigframe(&mut buf);
        let mut m = Slice {
            base: SP,
            bytes: &buf[..n],
        };
        // glibc's __restore_rt CFI: CFA = *(rsp + 160), rip at rsp + 168, rbp at rsp + 120,
        // rbx at rsp + 128.
        let r = Row {
            cfa: Cfa::Expression(Expr::new(&[0x77, 0xa0, 0x01, 0x06]).unwrap()),
            ra: Rule::Expression(Expr::new(&[0x77, 0xa8, 0x01]).unwrap()),
            bp: Rule::Expression(Expr::new(&[0x77, 0xf8, 0x00]).unwrap()),
            bx: Rule::Expression(Expr::new(&[0x77, 0x80, 0x01]).unwrap()),
            signal: true,
        };
        let regs = Regs {
            ip: 0x3c050,
            sp: SP,
            bp: 0,
            bx: 0,
        };
        let want = Ok(Step::Caller {
            regs: Regs {
                ip: 0x40_1234,
                sp: 0x7fff_0123,
                bp: 0xbbbb,
                bx: 0xb8b8,
            },
            exact_ip: true,
        });
        let b = &mut Budget::default();
        // The interrupted rsp is below this frame and misaligned: fine for a signal frame.
        assert_eq!(apply(&mut m, b, &r, &regs), want);
        assert_eq!(step_sigframe(&mut m, b, &regs), want);
        let r = Row { signal: false, ..r };
        assert_eq!(apply(&mut m, b, &r, &regs), Err(CfiError::BadFrame));
    }

    #[test]
    fn frame_pointer_rules() {
        let mut buf = [0u8; 512];
        let n = stack(&[0x99, 0xaaaa, SP + 0x40, 0x4010], &mut buf);
        let mut m = Slice {
            base: SP,
            bytes: &buf[..n],
        };
        let b = &mut Budget::default();
        let regs = Regs {
            ip: 0x1000,
            sp: SP,
            bp: SP + 16,
            bx: 0,
        };
        assert_eq!(
            step_fp(&mut m, b, &regs),
            caller(0x4010, SP + 32, SP + 0x40)
        );
        let bad = Regs {
            bp: SP - 16,
            ..regs
        };
        assert_eq!(step_fp(&mut m, b, &bad), Err(CfiError::BadFrame));
        let bad = Regs { bp: SP + 4, ..regs };
        assert_eq!(step_fp(&mut m, b, &bad), Err(CfiError::BadFrame));
        let bad = Regs {
            bp: u64::MAX - 8,
            ..regs
        };
        assert_eq!(step_fp(&mut m, b, &bad), Err(CfiError::BadFrame));
        assert_eq!(
            step_fp_entry(&mut m, b, &regs),
            caller(0x99, SP + 8, SP + 16)
        );
    }

    /// An `.eh_frame_hdr` at 0x1000 with one entry, and at 0x1100 GCC's CIE and an FDE for
    /// 0x2000..0x2100: `push %rbp` at 0x2000, then CFA = rsp + 16, rbp at cfa - 16.
    fn image(buf: &mut [u8; 512]) -> usize {
        let hdr: [u8; 20] = [
            1, 0x1b, 0x03, 0x3b, 0xfc, 0, 0, 0, 1, 0, 0, 0, 0, 0x10, 0, 0, 0x18, 1, 0, 0,
        ];
        buf[..20].copy_from_slice(&hdr);
        let cie: [u8; 24] = [
            0x14, 0, 0, 0, 0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1,
            0, 0,
        ];
        buf[0x100..0x118].copy_from_slice(&cie);
        let fde: [u8; 24] = [
            20, 0, 0, 0, 0x1c, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x41, 0x0e, 0x10, 0x86, 2, 0, 0,
        ];
        buf[0x118..0x130].copy_from_slice(&fde);
        // pc_begin at 0x1120, pcrel.
        buf[0x120..0x124].copy_from_slice(&(0x2000i32 - 0x1120).to_le_bytes());
        0x130
    }

    #[test]
    fn whole_steps_through_the_table() {
        let mut img = [0u8; 512];
        let n = image(&mut img);
        let mut words = [0u8; 512];
        let w = stack(&[0xb0b0, 0x3000, 0x3100], &mut words);
        struct Two<'a>(Slice<'a>, Slice<'a>);
        impl Memory for Two<'_> {
            fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
                self.0.read(addr, buf).or_else(|_| self.1.read(addr, buf))
            }
        }
        let mut m = Two(
            Slice {
                base: 0x1000,
                bytes: &img[..n],
            },
            Slice {
                base: SP,
                bytes: &words[..w],
            },
        );
        let b = &mut Budget::default();
        let hdr = Hdr::parse(&mut m, b, 0x1000).unwrap();
        assert_eq!(hdr.eh_frame, 0x1100);
        let s = &mut Scratch::new();
        // Innermost at 0x2000 (before the push): the return address on top.
        let at = |ip| Regs {
            ip,
            sp: SP,
            bp: 7,
            bx: 0,
        };
        assert_eq!(
            step(&mut m, b, &hdr, &at(0x2000), true, s),
            caller(0xb0b0, SP + 8, 7)
        );
        // A return address 0x2001 is looked up at 0x2000: the same row.
        assert_eq!(
            step(&mut m, b, &hdr, &at(0x2001), false, s),
            caller(0xb0b0, SP + 8, 7)
        );
        // A return address 0x2002 is in the row after the push.
        assert_eq!(
            step(&mut m, b, &hdr, &at(0x2002), false, s),
            caller(0x3000, SP + 16, 0xb0b0)
        );
        // Outside the FDE, before the first entry, at 0.
        assert_eq!(
            step(&mut m, b, &hdr, &at(0x2101), false, s),
            Err(CfiError::NoFde)
        );
        assert_eq!(
            step(&mut m, b, &hdr, &at(0x1fff), true, s),
            Err(CfiError::NoFde)
        );
        assert_eq!(
            step(&mut m, b, &hdr, &at(0), false, s),
            Err(CfiError::NoFde)
        );
        // The row of an address, with its range, for a cache.
        let f = find(&mut m, b, &hdr, 0x2050, s).unwrap();
        assert_eq!((f.start, f.end, f.row.cfa), (0x2001, 0x2100, sp(16)));
    }
}
