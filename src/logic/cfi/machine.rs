// SPDX-License-Identifier: GPL-2.0

//! The CFA rule state machine: runs a CIE's initial instructions and an FDE's instructions
//! up to an address and yields the row in force there, with the address range it covers.
//!
//! A row ([`Row`]) keeps what the unwinder needs: the CFA rule and the rules of the return
//! address and of `rbp`; rules of other registers are decoded and dropped. It is `Copy` and
//! small, for a cache keyed by the file and the range of the row. `DW_CFA_remember_state`
//! pushes on a fixed stack of [`MAX_REMEMBER`] rows; every instruction is charged to the
//! budget. The x86-64 expressions the rules may hold are stored inline, up to
//! [`MAX_EXPR`] bytes.

#![forbid(unsafe_code)]

use super::cie::Cie;
use super::cursor::Cursor;
use super::pointer::read_encoded;
use super::pointer::Bases;
use super::read_mem;
use super::Budget;
use super::CfiError;
use super::Memory;
use super::REG_RA;
use super::REG_RBP;
use super::REG_RBX;

/// Bytes of a DWARF expression a row holds, at most (GNU ld's `.plt` expression takes 11).
pub const MAX_EXPR: usize = 14;
/// Depth of the `DW_CFA_remember_state` stack.
pub const MAX_REMEMBER: usize = 8;

/// The `DW_CFA_remember_state` stack (about 600 bytes): [`all_rows`] runs in one its caller
/// keeps, rather than one set up for every FDE.
pub type Remembered = [Row; MAX_REMEMBER];

/// A `DW_CFA_remember_state` stack for [`all_rows`].
pub const NO_ROWS: Remembered = [EMPTY_ROW; MAX_REMEMBER];

/// A DWARF expression copied into a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expr {
    len: u8,
    bytes: [u8; MAX_EXPR],
}

impl Expr {
    /// A copy of `code`, if it is at most [`MAX_EXPR`] bytes.
    pub fn new(code: &[u8]) -> Result<Expr, CfiError> {
        let mut e = Expr {
            len: u8::try_from(code.len()).map_err(|_| CfiError::Unsupported)?,
            bytes: [0; MAX_EXPR],
        };
        e.bytes
            .get_mut(..code.len())
            .ok_or(CfiError::Unsupported)?
            .copy_from_slice(code);
        Ok(e)
    }

    /// The expression's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

/// How to find a register's value in the caller's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Not recoverable; for the return address, the outermost frame.
    Undefined,
    /// Unchanged from this frame (the default for `rbp`, which is callee-saved).
    SameValue,
    /// Saved at CFA + offset.
    Offset(i32),
    /// The value is CFA + offset.
    ValOffset(i32),
    /// In another register (DWARF number).
    Register(u8),
    /// Saved at the address the expression computes, with the CFA pushed first.
    Expression(Expr),
    /// The value the expression computes, with the CFA pushed first.
    ValExpression(Expr),
}

/// How to compute the CFA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cfa {
    /// A register (DWARF number) plus an offset.
    RegOffset {
        /// The register.
        reg: u8,
        /// The offset.
        offset: i32,
    },
    /// A DWARF expression.
    Expression(Expr),
}

/// The unwind rules at one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The CFA.
    pub cfa: Cfa,
    /// The return address.
    pub ra: Rule,
    /// `rbp`.
    pub bp: Rule,
    /// `rbx`.
    pub bx: Rule,
    /// The FDE describes a signal trampoline (`S`): the caller's PC is exact, and the frame
    /// it restores need not be above this one.
    pub signal: bool,
}

/// The row in force at an address and the range of addresses it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// The row.
    pub row: Row,
    /// The first address the row covers.
    pub start: u64,
    /// The address after the last one.
    pub end: u64,
}

/// Where [`all_rows`] hands each row: its first address and the row.
pub type Emit<'e> = &'e mut dyn FnMut(u64, &Row) -> Result<(), CfiError>;

/// The state while instructions run.
struct Machine<'c, 'e, 's> {
    cie: &'c Cie,
    row: Row,
    initial: Row,
    /// The remembered rows, `depth` of them (the others are stale).
    stack: &'s mut Remembered,
    depth: usize,
    /// Where the current row starts.
    loc: u64,
    /// The address looked up.
    target: u64,
    /// Where the current row ends, once an advance past the target is seen.
    end: Option<u64>,
    /// With [`all_rows`]: where each row goes when the location moves past it (there is
    /// no target then).
    emit: Option<Emit<'e>>,
}

fn reg_u8(reg: u64) -> Result<u8, CfiError> {
    u8::try_from(reg).map_err(|_| CfiError::Unsupported)
}

fn off_i32(off: i64) -> Result<i32, CfiError> {
    i32::try_from(off).map_err(|_| CfiError::Unsupported)
}

impl Machine<'_, '_, '_> {
    /// `n` times the data alignment factor.
    fn factored(&self, n: i64) -> Result<i64, CfiError> {
        n.checked_mul(self.cie.data_align)
            .ok_or(CfiError::Malformed)
    }

    fn factored_u(&self, n: u64) -> Result<i64, CfiError> {
        self.factored(i64::try_from(n).map_err(|_| CfiError::Malformed)?)
    }

    /// The rule slot of `reg`, if it is tracked.
    fn slot<'r>(row: &'r mut Row, cie: &Cie, reg: u64) -> Option<&'r mut Rule> {
        if reg == cie.ra_reg {
            Some(&mut row.ra)
        } else if reg == u64::from(REG_RBP) {
            Some(&mut row.bp)
        } else if reg == u64::from(REG_RBX) {
            Some(&mut row.bx)
        } else {
            None
        }
    }

    /// Sets the rule of `reg` to what `make` gives, if the register is tracked (so that
    /// values only untracked registers use are not checked).
    fn set(
        &mut self,
        reg: u64,
        make: impl FnOnce() -> Result<Rule, CfiError>,
    ) -> Result<(), CfiError> {
        if let Some(slot) = Self::slot(&mut self.row, self.cie, reg) {
            *slot = make()?;
        }
        Ok(())
    }

    fn set_cfa_reg(&mut self, reg: u64) -> Result<(), CfiError> {
        match &mut self.row.cfa {
            Cfa::RegOffset { reg: r, .. } => *r = reg_u8(reg)?,
            Cfa::Expression(_) => return Err(CfiError::Malformed),
        }
        Ok(())
    }

    fn set_cfa_offset(&mut self, offset: i64) -> Result<(), CfiError> {
        match &mut self.row.cfa {
            Cfa::RegOffset { offset: o, .. } => *o = off_i32(offset)?,
            Cfa::Expression(_) => return Err(CfiError::Malformed),
        }
        Ok(())
    }

    /// Moves to `loc`; past the target, the current row is the answer and ends there.
    fn move_to(&mut self, loc: u64) -> Result<(), CfiError> {
        if loc < self.loc {
            return Err(CfiError::Malformed);
        }
        if let Some(emit) = self.emit.as_mut() {
            if loc > self.loc {
                emit(self.loc, &self.row)?;
            }
            self.loc = loc;
        } else if loc > self.target {
            self.end = Some(loc);
        } else {
            self.loc = loc;
        }
        Ok(())
    }

    fn advance(&mut self, delta: u64) -> Result<(), CfiError> {
        let by = delta
            .checked_mul(self.cie.code_align)
            .ok_or(CfiError::Malformed)?;
        self.move_to(self.loc.checked_add(by).ok_or(CfiError::Malformed)?)
    }

    fn block<'a>(c: &mut Cursor<'a>) -> Result<&'a [u8], CfiError> {
        let len = c.uleb()?;
        c.bytes(usize::try_from(len).map_err(|_| CfiError::Malformed)?)
    }

    /// Runs `insns` until their end or an advance past the target. In a CIE, instructions
    /// that move or use the saved state are malformed.
    /// Runs `insns` (at `addr`) until the row of the target is known or they end; returns
    /// the bytes of the instructions run. With `more`, more instructions follow these: one
    /// that runs off their end stops the run there, to be run again from its start.
    fn run(
        &mut self,
        insns: &[u8],
        addr: u64,
        in_cie: bool,
        more: bool,
        budget: &mut Budget,
    ) -> Result<usize, CfiError> {
        let mut c = Cursor::new(insns, addr);
        while self.end.is_none() && !c.is_empty() {
            let start = c.pos();
            match self.insn(&mut c, in_cie, budget) {
                Ok(()) => {}
                Err(CfiError::Malformed) if more => return Ok(start),
                Err(e) => return Err(e),
            }
        }
        Ok(c.pos())
    }

    /// One instruction.
    fn insn(
        &mut self,
        c: &mut Cursor<'_>,
        in_cie: bool,
        budget: &mut Budget,
    ) -> Result<(), CfiError> {
        {
            budget.charge_insn()?;
            let op = c.u8()?;
            let low = u64::from(op & 0x3f);
            let moves = matches!(op >> 6, 1 | 3) || matches!(op, 0x01..=0x04 | 0x06 | 0x0a | 0x0b);
            if in_cie && moves {
                return Err(CfiError::Malformed);
            }
            match op >> 6 {
                // DW_CFA_advance_loc
                1 => self.advance(low)?,
                // DW_CFA_offset
                2 => {
                    let n = c.uleb()?;
                    let off = self.factored_u(n)?;
                    self.set(low, || Ok(Rule::Offset(off_i32(off)?)))?;
                }
                // DW_CFA_restore
                3 => self.restore(low),
                _ => self.extended(op, c)?,
            }
        }
        Ok(())
    }

    fn restore(&mut self, reg: u64) {
        let mut initial = self.initial;
        if let Some(rule) = Self::slot(&mut initial, self.cie, reg) {
            let rule = *rule;
            if let Some(slot) = Self::slot(&mut self.row, self.cie, reg) {
                *slot = rule;
            }
        }
    }

    /// The instructions with a zero high part.
    fn extended(&mut self, op: u8, c: &mut Cursor<'_>) -> Result<(), CfiError> {
        match op {
            // DW_CFA_nop
            0x00 => {}
            // DW_CFA_set_loc
            0x01 => {
                let loc = read_encoded(c, self.cie.fde_enc, &Bases::default())?;
                self.move_to(loc)?;
            }
            // DW_CFA_advance_loc1, 2, 4
            0x02 => self.advance(u64::from(c.u8()?))?,
            0x03 => self.advance(u64::from(c.u16()?))?,
            0x04 => self.advance(u64::from(c.u32()?))?,
            // DW_CFA_offset_extended
            0x05 => {
                let reg = c.uleb()?;
                let off = self.factored_u(c.uleb()?)?;
                self.set(reg, || Ok(Rule::Offset(off_i32(off)?)))?;
            }
            // DW_CFA_restore_extended
            0x06 => {
                let reg = c.uleb()?;
                self.restore(reg);
            }
            // DW_CFA_undefined, same_value
            0x07 => {
                let reg = c.uleb()?;
                self.set(reg, || Ok(Rule::Undefined))?;
            }
            0x08 => {
                let reg = c.uleb()?;
                self.set(reg, || Ok(Rule::SameValue))?;
            }
            // DW_CFA_register
            0x09 => {
                let reg = c.uleb()?;
                let other = c.uleb()?;
                self.set(reg, || Ok(Rule::Register(reg_u8(other)?)))?;
            }
            // DW_CFA_remember_state
            0x0a => {
                let slot = self.stack.get_mut(self.depth).ok_or(CfiError::TooLong)?;
                *slot = self.row;
                self.depth += 1;
            }
            // DW_CFA_restore_state: the CFA and the register rules.
            0x0b => {
                self.depth = self.depth.checked_sub(1).ok_or(CfiError::Malformed)?;
                self.row = *self.stack.get(self.depth).ok_or(CfiError::Malformed)?;
            }
            // DW_CFA_def_cfa
            0x0c => {
                let reg = c.uleb()?;
                let offset = i64::try_from(c.uleb()?).map_err(|_| CfiError::Unsupported)?;
                self.row.cfa = Cfa::RegOffset {
                    reg: reg_u8(reg)?,
                    offset: off_i32(offset)?,
                };
            }
            // DW_CFA_def_cfa_register
            0x0d => {
                let reg = c.uleb()?;
                self.set_cfa_reg(reg)?;
            }
            // DW_CFA_def_cfa_offset
            0x0e => {
                let offset = i64::try_from(c.uleb()?).map_err(|_| CfiError::Unsupported)?;
                self.set_cfa_offset(offset)?;
            }
            // DW_CFA_def_cfa_expression
            0x0f => {
                let code = Self::block(c)?;
                self.row.cfa = Cfa::Expression(Expr::new(code)?);
            }
            // DW_CFA_expression, val_expression
            0x10 | 0x16 => {
                let reg = c.uleb()?;
                let code = Self::block(c)?;
                self.set(reg, || {
                    let e = Expr::new(code)?;
                    Ok(if op == 0x10 {
                        Rule::Expression(e)
                    } else {
                        Rule::ValExpression(e)
                    })
                })?;
            }
            // DW_CFA_offset_extended_sf
            0x11 => {
                let reg = c.uleb()?;
                let off = self.factored(c.sleb()?)?;
                self.set(reg, || Ok(Rule::Offset(off_i32(off)?)))?;
            }
            // DW_CFA_def_cfa_sf
            0x12 => {
                let reg = c.uleb()?;
                let offset = self.factored(c.sleb()?)?;
                self.row.cfa = Cfa::RegOffset {
                    reg: reg_u8(reg)?,
                    offset: off_i32(offset)?,
                };
            }
            // DW_CFA_def_cfa_offset_sf
            0x13 => {
                let offset = self.factored(c.sleb()?)?;
                self.set_cfa_offset(offset)?;
            }
            // DW_CFA_val_offset, val_offset_sf
            0x14 => {
                let reg = c.uleb()?;
                let off = self.factored_u(c.uleb()?)?;
                self.set(reg, || Ok(Rule::ValOffset(off_i32(off)?)))?;
            }
            0x15 => {
                let reg = c.uleb()?;
                let off = self.factored(c.sleb()?)?;
                self.set(reg, || Ok(Rule::ValOffset(off_i32(off)?)))?;
            }
            // DW_CFA_GNU_args_size: only matters for landing pads.
            0x2e => {
                c.uleb()?;
            }
            // DW_CFA_GNU_negative_offset_extended
            0x2f => {
                let reg = c.uleb()?;
                let off = self.factored_u(c.uleb()?)?;
                let off = off.checked_neg().ok_or(CfiError::Malformed)?;
                self.set(reg, || Ok(Rule::Offset(off_i32(off)?)))?;
            }
            _ => return Err(CfiError::Unsupported),
        }
        Ok(())
    }
}

/// The row before any instruction: the CFA unknown (`rsp + 0`, which the initial
/// instructions always replace), the return address undefined, `rbp` unchanged.
pub const EMPTY_ROW: Row = Row {
    cfa: Cfa::RegOffset { reg: 7, offset: 0 },
    ra: Rule::Undefined,
    bp: Rule::SameValue,
    bx: Rule::SameValue,
    signal: false,
};

/// One FDE's program: the CIE, its initial instructions, the FDE's instructions and
/// range, and the addresses the instruction bytes were copied from (for `pcrel`
/// `DW_CFA_set_loc` operands).
#[derive(Clone, Copy, Debug)]
pub struct Program<'a> {
    /// The CIE.
    pub cie: &'a Cie,
    /// Its initial instructions.
    pub cie_insns: &'a [u8],
    /// Their address.
    pub cie_insns_addr: u64,
    /// The FDE's instructions.
    pub fde_insns: &'a [u8],
    /// Their address.
    pub fde_insns_addr: u64,
    /// The first address the FDE covers.
    pub pc_begin: u64,
    /// The address after its last one.
    pub pc_end: u64,
}

impl<'c, 's> Machine<'c, '_, 's> {
    /// A machine for `program` looking up `pc`, which must lie in the FDE's range.
    fn new(program: &Program<'c>, pc: u64, stack: &'s mut Remembered) -> Result<Self, CfiError> {
        if !(program.pc_begin <= pc && pc < program.pc_end) {
            return Err(CfiError::NoFde);
        }
        if program.cie.ra_reg != u64::from(REG_RA) || program.cie.code_align == 0 {
            return Err(CfiError::Unsupported);
        }
        let mut row = EMPTY_ROW;
        row.signal = program.cie.signal;
        Ok(Machine {
            cie: program.cie,
            row,
            initial: row,
            stack,
            depth: 0,
            loc: program.pc_begin,
            target: pc,
            end: None,
            emit: None,
        })
    }

    /// A machine for `program` looking up `pc`, its CIE's initial instructions run.
    fn start(
        program: &Program<'c>,
        pc: u64,
        budget: &mut Budget,
        stack: &'s mut Remembered,
    ) -> Result<Self, CfiError> {
        let mut m = Machine::new(program, pc, stack)?;
        m.run(
            program.cie_insns,
            program.cie_insns_addr,
            true,
            false,
            budget,
        )?;
        m.initial = m.row;
        Ok(m)
    }

    /// Runs the FDE's instructions, whole.
    fn run_fde(&mut self, program: &Program<'_>, budget: &mut Budget) -> Result<(), CfiError> {
        self.run(
            program.fde_insns,
            program.fde_insns_addr,
            false,
            false,
            budget,
        )?;
        Ok(())
    }

    fn found(&self, program: &Program<'_>) -> Found {
        Found {
            row: self.row,
            start: self.loc,
            end: self.end.unwrap_or(program.pc_end).min(program.pc_end),
        }
    }
}

/// The row of `program` in force at `pc`, which must lie in the FDE's range.
pub fn find_row(program: &Program<'_>, pc: u64, budget: &mut Budget) -> Result<Found, CfiError> {
    let mut stack = NO_ROWS;
    let mut m = Machine::start(program, pc, budget, &mut stack)?;
    m.run_fde(program, budget)?;
    Ok(m.found(program))
}

/// Every row of `program`, in order, handed to `emit` with its first address: one run of
/// its instructions (the rows of a location the instructions advance by zero are not
/// handed, nor rows from `program.pc_end` on, which cover nothing). A row ends where the
/// next starts, the last at `pc_end`. `remembered` is where its
/// `DW_CFA_remember_state` rows go.
pub fn all_rows(
    program: &Program<'_>,
    budget: &mut Budget,
    remembered: &mut Remembered,
    emit: Emit<'_>,
) -> Result<(), CfiError> {
    let mut m = Machine::start(program, program.pc_begin, budget, remembered)?;
    let end = program.pc_end;
    let mut within = |start: u64, row: &Row| match start < end {
        true => emit(start, row),
        false => Ok(()),
    };
    m.emit = Some(&mut within);
    m.run_fde(program, budget)?;
    let (loc, row) = (m.loc, m.row);
    match m.emit {
        Some(emit) => emit(loc, &row),
        None => Ok(()),
    }
}

/// [`find_row`] for an FDE whose `insns_len` bytes of instructions, at
/// `program.fde_insns_addr`, are longer than `buf` (GCC writes FDEs of 20 KiB for its
/// largest generated functions): they are read from `mem` into `buf` a window at a time,
/// only as far as the row of `pc` needs (`program.fde_insns` is not used).
pub fn find_row_streamed<M: Memory + ?Sized>(
    program: &Program<'_>,
    insns_len: u64,
    pc: u64,
    budget: &mut Budget,
    mem: &mut M,
    buf: &mut [u8],
) -> Result<Found, CfiError> {
    let mut stack = NO_ROWS;
    let mut m = Machine::start(program, pc, budget, &mut stack)?;
    let mut done = 0u64;
    while m.end.is_none() && done < insns_len {
        let len = (insns_len - done).min(buf.len() as u64) as usize;
        let addr = program
            .fde_insns_addr
            .checked_add(done)
            .ok_or(CfiError::Malformed)?;
        let window = buf.get_mut(..len).ok_or(CfiError::TooLong)?;
        read_mem(mem, budget, addr, window)?;
        let more = done + (len as u64) < insns_len;
        let n = m.run(window, addr, false, more, budget)?;
        if n == 0 && more {
            // One instruction longer than a whole window.
            return Err(CfiError::TooLong);
        }
        done += n as u64;
    }
    Ok(m.found(program))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GCC's CIE: code 1, data -8, RA 16, "zR" pcrel|sdata4.
    pub(crate) fn gcc_cie(signal: bool) -> Cie {
        Cie {
            addr: 0,
            version: 1,
            code_align: 1,
            data_align: -8,
            ra_reg: 16,
            has_z: true,
            fde_enc: 0x1b,
            lsda_enc: 0xff,
            signal,
            insns_start: 0,
            insns_end: 0,
        }
    }

    /// `DW_CFA_def_cfa rsp 8; DW_CFA_offset rip -8`.
    const GCC_INIT: [u8; 5] = [0x0c, 7, 8, 0x90, 1];

    fn at(cie: &Cie, fde: &[u8], pc: u64) -> Result<Found, CfiError> {
        let p = Program {
            cie,
            cie_insns: &GCC_INIT,
            cie_insns_addr: 0x100,
            fde_insns: fde,
            fde_insns_addr: 0x200,
            pc_begin: 0x1000,
            pc_end: 0x1100,
        };
        find_row(&p, pc, &mut Budget::default())
    }

    fn sp(offset: i32) -> Cfa {
        Cfa::RegOffset { reg: 7, offset }
    }

    /// An FDE's instructions read a window at a time give the rows the whole
    /// instructions give, wherever the windows cut them.
    #[test]
    fn streamed_instructions_give_the_same_rows() {
        let cie = gcc_cie(false);
        // 600 rows: advance 1; def_cfa_offset (two-byte ULEB); offset rbp; nop; a
        // remember/restore pair now and then.
        let mut all = [0u8; 8192];
        let mut n = 0;
        let mut push = |b: &[u8]| {
            all[n..n + b.len()].copy_from_slice(b);
            n += b.len();
        };
        for i in 0..600u32 {
            push(&[
                0x41,
                0x0e,
                0x80 | ((i % 100) as u8 + 8),
                0x01,
                0x86,
                0x02,
                0x00,
            ]);
            if i % 50 == 7 {
                push(&[0x0a, 0x0e, 0x10, 0x0b]);
            }
        }
        let fde = &all[..n];
        const ADDR: u64 = 0x200;
        let p = Program {
            cie: &cie,
            cie_insns: &GCC_INIT,
            cie_insns_addr: 0x100,
            fde_insns: fde,
            fde_insns_addr: ADDR,
            pc_begin: 0x1000,
            pc_end: 0x1000 + 700,
        };
        let mut mem = crate::logic::cfi::Slice {
            base: ADDR,
            bytes: fde,
        };
        let mut space = [0u8; 4096];
        for window in [7usize, 16, 61, 4096] {
            let buf = &mut space[..window];
            for pc in [
                0x1000u64,
                0x1001,
                0x1002,
                0x1100,
                0x1257,
                0x1000 + 599,
                0x1000 + 650,
            ] {
                let whole = find_row(&p, pc, &mut Budget::default());
                let streamed = find_row_streamed(
                    &Program {
                        fde_insns: &[],
                        ..p
                    },
                    fde.len() as u64,
                    pc,
                    &mut Budget::default(),
                    &mut mem,
                    buf,
                );
                assert_eq!(streamed, whole, "window {window}, pc {pc:#x}");
            }
        }
        // An instruction longer than a window.
        let mut bytes = [0x96u8; 36]; // DW_CFA_def_cfa_expression, 32 bytes of DW_OP_nop
        bytes[..2].copy_from_slice(&[0x0f, 0x20]);
        let mut mem = crate::logic::cfi::Slice {
            base: ADDR,
            bytes: &bytes,
        };
        let mut buf = [0u8; 8];
        assert_eq!(
            find_row_streamed(
                &Program {
                    fde_insns: &[],
                    ..p
                },
                bytes.len() as u64,
                0x1000,
                &mut Budget::default(),
                &mut mem,
                &mut buf
            ),
            Err(CfiError::TooLong)
        );
    }

    #[test]
    fn push_rbp_prologue() {
        let cie = gcc_cie(false);
        // push %rbp; mov %rsp,%rbp; ... leave; ret
        let fde = [
            0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06, 0x02, 0x20, 0x0c, 0x07, 0x08, 0xc6,
        ];
        let f = at(&cie, &fde, 0x1000).unwrap();
        assert_eq!(
            (f.row.cfa, f.row.ra, f.row.bp),
            (sp(8), Rule::Offset(-8), Rule::SameValue)
        );
        assert_eq!((f.start, f.end), (0x1000, 0x1001));
        let f = at(&cie, &fde, 0x1003).unwrap();
        assert_eq!((f.row.cfa, f.row.bp), (sp(16), Rule::Offset(-16)));
        assert_eq!((f.start, f.end), (0x1001, 0x1004));
        let f = at(&cie, &fde, 0x1010).unwrap();
        assert_eq!(f.row.cfa, Cfa::RegOffset { reg: 6, offset: 16 });
        assert_eq!((f.start, f.end), (0x1004, 0x1024));
        let f = at(&cie, &fde, 0x10ff).unwrap();
        assert_eq!((f.row.cfa, f.row.bp), (sp(8), Rule::SameValue));
        assert_eq!((f.start, f.end), (0x1024, 0x1100));
        assert_eq!(at(&cie, &fde, 0x1100), Err(CfiError::NoFde));
    }

    #[test]
    fn advance_forms_and_set_loc() {
        let cie = gcc_cie(false);
        // advance_loc1 0x10; def_cfa_offset 16; advance_loc2 0x10; def_cfa_offset 24;
        // advance_loc4 0x10; def_cfa_offset 32; set_loc (pcrel) 0x1040; def_cfa_offset 40
        let mut fde = [
            0x02, 0x10, 0x0e, 16, 0x03, 0x10, 0, 0x0e, 24, 0x04, 0x10, 0, 0, 0, 0x0e, 32, 0x01, 0,
            0, 0, 0, 0x0e, 40,
        ];
        // The set_loc operand is at 0x200 + 17.
        fde[17..21].copy_from_slice(&(0x1040i32 - 0x211).to_le_bytes());
        let want = [
            (0x100f, 8),
            (0x1010, 16),
            (0x1020, 24),
            (0x1030, 32),
            (0x1040, 40),
        ];
        for (pc, off) in want {
            assert_eq!(at(&cie, &fde, pc).unwrap().row.cfa, sp(off), "{pc:x}");
        }
        // set_loc backwards is malformed.
        fde[17..21].copy_from_slice(&(0x1000i32 - 0x211).to_le_bytes());
        assert_eq!(at(&cie, &fde, 0x1050), Err(CfiError::Malformed));
    }

    #[test]
    fn every_register_rule() {
        let cie = gcc_cie(false);
        let e = |b: &[u8]| Expr::new(b).unwrap();
        let cases: &[(&[u8], Rule)] = &[
            (&[0x86, 0x03], Rule::Offset(-24)),
            (&[0x05, 6, 3], Rule::Offset(-24)),
            (&[0x11, 6, 0x7d], Rule::Offset(24)),
            (&[0x2f, 6, 3], Rule::Offset(24)),
            (&[0x14, 6, 2], Rule::ValOffset(-16)),
            (&[0x15, 6, 0x7e], Rule::ValOffset(16)),
            (&[0x07, 6], Rule::Undefined),
            (&[0x86, 0x03, 0x08, 6], Rule::SameValue),
            (&[0x09, 6, 3], Rule::Register(3)),
            (
                &[0x10, 6, 2, 0x77, 0x78],
                Rule::Expression(e(&[0x77, 0x78])),
            ),
            (&[0x16, 6, 1, 0x31], Rule::ValExpression(e(&[0x31]))),
            (&[0x86, 0x03, 0xc6], Rule::SameValue),
            (&[0x86, 0x03, 0x06, 6], Rule::SameValue),
            // Untracked registers (r12) do not touch rbp, whatever their operands.
            (
                &[0x8c, 0x03, 0x09, 12, 0xff, 0x7f, 0x10, 0, 0],
                Rule::SameValue,
            ),
            (&[0x2e, 0x10, 0x00], Rule::SameValue),
        ];
        for (fde, want) in cases {
            assert_eq!(at(&cie, fde, 0x1000).unwrap().row.bp, *want, "{fde:x?}");
        }
        // The RA: undefined (outermost frame), restored from the CIE.
        assert_eq!(
            at(&cie, &[0x07, 16], 0x1000).unwrap().row.ra,
            Rule::Undefined
        );
        let f = at(&cie, &[0x07, 16, 0xd0], 0x1000).unwrap();
        assert_eq!(f.row.ra, Rule::Offset(-8));
    }

    #[test]
    fn every_cfa_rule() {
        let cie = gcc_cie(false);
        let plt: [u8; 11] = [
            0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
        ];
        let mut def_expr = [0u8; 13];
        def_expr[0] = 0x0f;
        def_expr[1] = 11;
        def_expr[2..].copy_from_slice(&plt);
        let cases: &[(&[u8], Cfa)] = &[
            (&[0x0c, 6, 16], Cfa::RegOffset { reg: 6, offset: 16 }),
            (&[0x12, 6, 0x7e], Cfa::RegOffset { reg: 6, offset: 16 }),
            (&[0x0d, 6], Cfa::RegOffset { reg: 6, offset: 8 }),
            (&[0x0e, 0x80, 0x01], sp(128)),
            (&[0x13, 0x7c], sp(32)),
            (&def_expr, Cfa::Expression(Expr::new(&plt).unwrap())),
        ];
        for (fde, want) in cases {
            assert_eq!(at(&cie, fde, 0x1000).unwrap().row.cfa, *want, "{fde:x?}");
        }
        // An offset or register change on an expression CFA is malformed.
        let mut bad = [0u8; 15];
        bad[..13].copy_from_slice(&def_expr);
        bad[13..].copy_from_slice(&[0x0e, 8]);
        assert_eq!(at(&cie, &bad, 0x1000), Err(CfiError::Malformed));
        bad[13..].copy_from_slice(&[0x0d, 6]);
        assert_eq!(at(&cie, &bad, 0x1000), Err(CfiError::Malformed));
        // Too long an expression, too large an offset, too large a register.
        let long = [
            0x0f, 15, 0x96, 0x96, 0x96, 0x96, 0x96, 0x96, 0x96, 0x96, 0x96, 0x96, 0x96, 0x96, 0x96,
            0x96, 0x30,
        ];
        assert_eq!(at(&cie, &long, 0x1000), Err(CfiError::Unsupported));
        assert_eq!(
            at(&cie, &[0x0e, 0x80, 0x80, 0x80, 0x80, 0x10], 0x1000),
            Err(CfiError::Unsupported)
        );
        assert_eq!(
            at(&cie, &[0x0c, 0x80, 0x02, 8], 0x1000),
            Err(CfiError::Unsupported)
        );
    }

    #[test]
    fn remember_and_restore_state() {
        let cie = gcc_cie(false);
        // def_cfa_offset 336; advance 4; remember; def_cfa_offset 8; advance 1; restore.
        let fde = [0x0e, 0xd0, 0x02, 0x44, 0x0a, 0x0e, 0x08, 0x41, 0x0b];
        assert_eq!(at(&cie, &fde, 0x1004).unwrap().row.cfa, sp(8));
        let f = at(&cie, &fde, 0x1005).unwrap();
        assert_eq!((f.row.cfa, f.start, f.end), (sp(336), 0x1005, 0x1100));
        // Restore with nothing remembered; remembering too deep.
        assert_eq!(at(&cie, &[0x0b], 0x1000), Err(CfiError::Malformed));
        assert_eq!(at(&cie, &[0x0a; MAX_REMEMBER], 0x1000).map(|_| ()), Ok(()));
        assert_eq!(
            at(&cie, &[0x0a; MAX_REMEMBER + 1], 0x1000),
            Err(CfiError::TooLong)
        );
    }

    #[test]
    fn signal_frames_and_cie_checks() {
        let cie = gcc_cie(true);
        assert!(at(&cie, &[], 0x1000).unwrap().row.signal);
        let mut bad = gcc_cie(false);
        bad.ra_reg = 6;
        assert_eq!(at(&bad, &[], 0x1000), Err(CfiError::Unsupported));
        // Unknown opcodes, truncated operands, the budget.
        assert_eq!(at(&cie, &[0x2d], 0x1000), Err(CfiError::Unsupported));
        assert_eq!(at(&cie, &[0x0c, 7], 0x1000), Err(CfiError::Malformed));
        let p = Program {
            cie: &cie,
            cie_insns: &GCC_INIT,
            cie_insns_addr: 0,
            fde_insns: &[0; 100],
            fde_insns_addr: 0,
            pc_begin: 0x1000,
            pc_end: 0x1100,
        };
        let mut budget = Budget {
            bytes: 0,
            insns: 50,
        };
        assert_eq!(find_row(&p, 0x1000, &mut budget), Err(CfiError::Budget));
        // Advances in the CIE are malformed.
        let p = Program {
            cie_insns: &[0x41],
            ..p
        };
        assert_eq!(
            find_row(&p, 0x1000, &mut Budget::default()),
            Err(CfiError::Malformed)
        );
    }
}
