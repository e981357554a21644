// SPDX-License-Identifier: GPL-2.0

//! A row's packed form, the one the row cache and the files' tables keep, and an FDE's
//! rows run straight into it.
//!
//! A row without a DWARF expression is three words:
//!
//! | word | bits | what |
//! |---|---|---|
//! | `a` | 0-7 | the CFA's register |
//! | `a` | 8-15 | the FDE describes a signal trampoline |
//! | `a` | 16-23, 24-31 | the tags of the rules of the return address and of `rbp` |
//! | `a` | 32-63 | the CFA's offset |
//! | `b` | 0-31, 32-63 | the values of the rules of the return address and of `rbp` |
//! | `c` | 0-7 | the tag of the rule of `rbx` |
//! | `c` | 8-31 | unused here: a file's table keeps the row's offset in its FDE there |
//! | `c` | 32-63 | the value of the rule of `rbx` |
//!
//! A rule's tag is one of [`UNDEFINED`], [`SAME_VALUE`], [`OFFSET`], [`VAL_OFFSET`] and
//! [`REGISTER`]; its value is the offset (an `i32`) or the register's DWARF number.
//!
//! [`packed_rows`] is [`all_rows`](super::machine::all_rows) for an FDE whose rows all have
//! this form, the common case: the program runs on the three words, with no [`Row`] built,
//! copied or encoded. Whatever it does not handle the same way (an expression, an error,
//! too many rows) it leaves to the general machine, which its caller runs instead.

#![forbid(unsafe_code)]

use super::cursor::Cursor;
use super::machine::Cfa;
use super::machine::Program;
use super::machine::Row;
use super::machine::Rule;
use super::machine::MAX_REMEMBER;
use super::pointer::read_encoded;
use super::pointer::Bases;
use super::Budget;
use super::REG_RA;
use super::REG_RBP;
use super::REG_RBX;

/// The rule's register has no value in the caller (the return address: the outermost
/// frame).
pub const UNDEFINED: u64 = 1;
/// The register keeps its value.
pub const SAME_VALUE: u64 = 2;
/// Saved at the CFA plus the value.
pub const OFFSET: u64 = 3;
/// The CFA plus the value.
pub const VAL_OFFSET: u64 = 4;
/// In the register the value numbers.
pub const REGISTER: u64 = 5;

/// A row in its packed form: `a`, `b`, `c` in that order.
pub type Packed = [u64; 3];

/// The `DW_CFA_remember_state` stack of [`packed_rows`].
pub type PackedStack = [Packed; MAX_REMEMBER];

fn rule_code(r: &Rule) -> Option<(u64, u32)> {
    Some(match *r {
        Rule::Undefined => (UNDEFINED, 0),
        Rule::SameValue => (SAME_VALUE, 0),
        Rule::Offset(o) => (OFFSET, o as u32),
        Rule::ValOffset(o) => (VAL_OFFSET, o as u32),
        Rule::Register(r) => (REGISTER, u32::from(r)),
        Rule::Expression(_) | Rule::ValExpression(_) => return None,
    })
}

fn rule_decode(tag: u64, v: u32) -> Option<Rule> {
    Some(match tag {
        UNDEFINED => Rule::Undefined,
        SAME_VALUE => Rule::SameValue,
        OFFSET => Rule::Offset(v as i32),
        VAL_OFFSET => Rule::ValOffset(v as i32),
        REGISTER => Rule::Register(u8::try_from(v).ok()?),
        _ => return None,
    })
}

/// `row` packed, if it has no expression.
pub fn encode_row(row: &Row) -> Option<Packed> {
    let Cfa::RegOffset { reg, offset } = row.cfa else {
        return None;
    };
    let (ra_tag, ra) = rule_code(&row.ra)?;
    let (bp_tag, bp) = rule_code(&row.bp)?;
    let (bx_tag, bx) = rule_code(&row.bx)?;
    Some([
        u64::from(reg)
            | u64::from(row.signal) << 8
            | ra_tag << 16
            | bp_tag << 24
            | u64::from(offset as u32) << 32,
        u64::from(ra) | u64::from(bp) << 32,
        bx_tag | u64::from(bx) << 32,
    ])
}

/// The row `p` packs (bits 8-31 of `c` ignored), if it is one.
pub fn decode_row(p: Packed) -> Option<Row> {
    let [a, b, c] = p;
    Some(Row {
        cfa: Cfa::RegOffset {
            reg: a as u8,
            offset: (a >> 32) as u32 as i32,
        },
        ra: rule_decode((a >> 16) & 0xff, b as u32)?,
        bp: rule_decode((a >> 24) & 0xff, (b >> 32) as u32)?,
        bx: rule_decode(c & 0xff, (c >> 32) as u32)?,
        signal: (a >> 8) & 0xff != 0,
    })
}

/// Where a tracked register's rule is in a packed row: the word and shift of its tag, the
/// word and shift of its value.
type Place = (usize, u32, usize, u32);
const RA_AT: Place = (0, 16, 1, 0);
const BP_AT: Place = (0, 24, 1, 32);
const BX_AT: Place = (2, 0, 2, 32);

/// Sets the rule at `at` in `row` to `tag` and `v`.
#[inline(always)]
fn set_rule(row: &mut Packed, at: Place, tag: u64, v: u32) {
    let (t, ts, w, ws) = at;
    if let Some(word) = row.get_mut(t) {
        *word = *word & !(0xff << ts) | tag << ts;
    }
    if let Some(word) = row.get_mut(w) {
        *word = *word & !(0xffff_ffff << ws) | u64::from(v) << ws;
    }
}

/// The rule at `at` in `from`, as its tag and value.
#[inline(always)]
fn rule_at(from: &Packed, at: Place) -> (u64, u32) {
    let (t, ts, w, ws) = at;
    let word = |i: usize| from.get(i).copied().unwrap_or(0);
    ((word(t) >> ts) & 0xff, (word(w) >> ws) as u32)
}

/// The place of `reg`'s rule, if it is tracked ([`Row`]'s three registers).
#[inline(always)]
fn place(reg: u64) -> Option<Place> {
    match reg {
        r if r == u64::from(REG_RA) => Some(RA_AT),
        r if r == u64::from(REG_RBP) => Some(BP_AT),
        r if r == u64::from(REG_RBX) => Some(BX_AT),
        _ => None,
    }
}

/// Sets the CFA's register and offset in `row`, those given.
#[inline(always)]
fn set_cfa(row: &mut Packed, reg: Option<u64>, offset: Option<i64>) -> Option<()> {
    let [a, ..] = row;
    if let Some(reg) = reg {
        *a = *a & !0xff | u64::from(u8::try_from(reg).ok()?);
    }
    if let Some(offset) = offset {
        *a = *a & 0xffff_ffff | u64::from(i32::try_from(offset).ok()? as u32) << 32;
    }
    Some(())
}

/// `row`, which starts at `loc`, into `rows` at `n` (a row from the FDE's end on covers
/// nothing and is dropped).
#[inline(always)]
fn emit(
    program: &Program<'_>,
    rows: &mut [Packed],
    n: &mut usize,
    row: Packed,
    loc: u64,
) -> Option<()> {
    if loc >= program.pc_end {
        return Some(());
    }
    let off = loc.checked_sub(program.pc_begin)?;
    if off >= 1 << 24 {
        return None;
    }
    let [a, b, c] = row;
    *rows.get_mut(*n)? = [a, b, c | off << 8];
    *n += 1;
    Some(())
}

/// From `loc` to `to`, handing `row`, which ends there, on to `rows` at `n`: the new
/// location, `None` for a move backwards.
#[inline(always)]
fn move_to(
    program: &Program<'_>,
    rows: &mut [Packed],
    n: &mut usize,
    row: Packed,
    loc: u64,
    to: u64,
) -> Option<u64> {
    if to < loc {
        return None;
    }
    if to > loc {
        emit(program, rows, n, row, loc)?;
    }
    Some(to)
}

/// `f` run with the place of `reg`'s rule if it is tracked, a constant in each of its
/// three inlined copies: a row in locals stays in registers (a place chosen at run time
/// indexes the row, which then lives in memory).
#[inline(always)]
fn at_place(reg: u64, f: impl FnOnce(Place) -> Option<()>) -> Option<()> {
    match reg {
        r if r == u64::from(REG_RA) => f(RA_AT),
        r if r == u64::from(REG_RBP) => f(BP_AT),
        r if r == u64::from(REG_RBX) => f(BX_AT),
        _ => Some(()),
    }
}

/// Sets `reg`'s rule in `row`, if it is tracked, to `tag` and the value `v` makes (which
/// the general machine checks only then).
#[inline(always)]
fn set_reg(row: &mut Packed, reg: u64, tag: u64, v: impl FnOnce() -> Option<u32>) -> Option<()> {
    at_place(reg, |at| {
        set_rule(row, at, tag, v()?);
        Some(())
    })
}

/// Sets `reg`'s rule in `row`, if it is tracked, to `tag` and the offset `off`.
#[inline(always)]
fn set_offset(row: &mut Packed, reg: u64, tag: u64, off: i64) -> Option<()> {
    set_reg(row, reg, tag, || Some(i32::try_from(off).ok()? as u32))
}

/// Sets `reg`'s rule in `row`, if it is tracked, back to its rule in `initial`.
#[inline(always)]
fn restore_reg(row: &mut Packed, initial: &Packed, reg: u64) -> Option<()> {
    at_place(reg, |at| {
        let (tag, v) = rule_at(initial, at);
        set_rule(row, at, tag, v);
        Some(())
    })
}

/// The packed machine's state.
struct Run<'p, 'r> {
    program: &'p Program<'p>,
    row: Packed,
    initial: Packed,
    stack: &'r mut PackedStack,
    depth: usize,
    loc: u64,
    rows: &'r mut [Packed],
    n: usize,
}

impl Run<'_, '_> {
    /// `n` times the data alignment factor. Its failure fails the instruction whether or
    /// not its register is tracked, as in the general machine.
    fn factored(&self, n: i64) -> Option<i64> {
        n.checked_mul(self.program.cie.data_align)
    }

    fn factored_u(&self, n: u64) -> Option<i64> {
        self.factored(i64::try_from(n).ok()?)
    }

    #[inline(always)]
    fn set(&mut self, reg: u64, tag: u64, v: impl FnOnce() -> Option<u32>) -> Option<()> {
        set_reg(&mut self.row, reg, tag, v)
    }

    #[inline(always)]
    fn set_offset(&mut self, reg: u64, tag: u64, off: i64) -> Option<()> {
        set_offset(&mut self.row, reg, tag, off)
    }

    #[inline(always)]
    fn set_cfa(&mut self, reg: Option<u64>, offset: Option<i64>) -> Option<()> {
        set_cfa(&mut self.row, reg, offset)
    }

    /// Moves to `loc`, handing on the row that ends there.
    #[inline(always)]
    fn move_to(&mut self, loc: u64) -> Option<()> {
        self.loc = move_to(
            self.program,
            self.rows,
            &mut self.n,
            self.row,
            self.loc,
            loc,
        )?;
        Some(())
    }

    #[inline(always)]
    fn advance(&mut self, delta: u64) -> Option<()> {
        let by = delta.checked_mul(self.program.cie.code_align)?;
        self.move_to(self.loc.checked_add(by)?)
    }

    /// The current row, which starts at `loc`, into `rows` (a row from the FDE's end on
    /// covers nothing and is dropped).
    #[inline(always)]
    fn emit(&mut self) -> Option<()> {
        emit(self.program, self.rows, &mut self.n, self.row, self.loc)
    }

    /// Runs `insns` (at `addr`) to their end; a CIE's (`IN_CIE`) may not move or use the
    /// saved state. The budget is charged for the instructions once they have run: their
    /// number is bounded by their bytes, and if the budget is short the general machine
    /// runs them again and fails where it runs out.
    fn run<const IN_CIE: bool>(
        &mut self,
        insns: &[u8],
        addr: u64,
        budget: &mut Budget,
    ) -> Option<()> {
        // The padding after the last instruction (`DW_CFA_nop`, zero bytes) is counted, not
        // run. A zero byte that was an operand leaves its instruction short, which fails
        // it: the general machine then runs the program.
        let end = insns.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let mut ran = u32::try_from(insns.len() - end).ok()?;
        let mut c = Cursor::new(insns.get(..end)?, addr);
        // What the common instructions change is kept in locals, which stay in registers:
        // `extended`, out of line, sees it through `self`, written back around its call.
        let (mut row, mut loc, mut n) = (self.row, self.loc, self.n);
        let code_align = self.program.cie.code_align;
        while !c.is_empty() {
            ran = ran.wrapping_add(1);
            let op = c.u8().ok()?;
            let low = u64::from(op & 0x3f);
            if IN_CIE
                && (matches!(op >> 6, 1 | 3) || matches!(op, 0x01..=0x04 | 0x06 | 0x0a | 0x0b))
            {
                return None;
            }
            // The instructions of most FDEs here, the others in `extended`.
            match op {
                // DW_CFA_advance_loc
                0x40..=0x7f => {
                    let to = loc.checked_add(low.checked_mul(code_align)?)?;
                    loc = move_to(self.program, self.rows, &mut n, row, loc, to)?;
                }
                // DW_CFA_offset
                0x80..=0xbf => {
                    let off = self.factored_u(c.uleb().ok()?)?;
                    set_offset(&mut row, low, OFFSET, off)?;
                }
                // DW_CFA_restore
                0xc0..=0xff => restore_reg(&mut row, &self.initial, low)?,
                // DW_CFA_nop
                0x00 => {}
                // DW_CFA_def_cfa_offset
                0x0e => {
                    let offset = i64::try_from(c.uleb().ok()?).ok()?;
                    set_cfa(&mut row, None, Some(offset))?;
                }
                // DW_CFA_remember_state
                0x0a => {
                    *self.stack.get_mut(self.depth)? = row;
                    self.depth += 1;
                }
                // DW_CFA_restore_state
                0x0b => {
                    self.depth = self.depth.checked_sub(1)?;
                    row = *self.stack.get(self.depth)?;
                }
                // On a copy: the loop's cursor, never lent, stays in registers.
                _ => {
                    (self.row, self.loc, self.n) = (row, loc, n);
                    let mut rest = c;
                    self.extended(op, &mut rest)?;
                    c = rest;
                    (row, loc, n) = (self.row, self.loc, self.n);
                }
            }
        }
        (self.row, self.loc, self.n) = (row, loc, n);
        budget.insns = budget.insns.checked_sub(ran)?;
        Some(())
    }

    #[inline(always)]
    fn restore(&mut self, reg: u64) -> Option<()> {
        restore_reg(&mut self.row, &self.initial, reg)
    }

    /// The other instructions with a zero high part, as the general machine runs them;
    /// `None` for the expressions that set a tracked rule or the CFA.
    fn extended(&mut self, op: u8, c: &mut Cursor<'_>) -> Option<()> {
        match op {
            // DW_CFA_set_loc
            0x01 => {
                let loc = read_encoded(c, self.program.cie.fde_enc, &Bases::default()).ok()?;
                self.move_to(loc)?;
            }
            // DW_CFA_advance_loc1, 2, 4
            0x02 => self.advance(u64::from(c.u8().ok()?))?,
            0x03 => self.advance(u64::from(c.u16().ok()?))?,
            0x04 => self.advance(u64::from(c.u32().ok()?))?,
            // DW_CFA_offset_extended
            0x05 => {
                let reg = c.uleb().ok()?;
                let off = self.factored_u(c.uleb().ok()?)?;
                self.set_offset(reg, OFFSET, off)?;
            }
            // DW_CFA_restore_extended
            0x06 => {
                let reg = c.uleb().ok()?;
                self.restore(reg)?;
            }
            // DW_CFA_undefined, same_value
            0x07 => self.set(c.uleb().ok()?, UNDEFINED, || Some(0))?,
            0x08 => self.set(c.uleb().ok()?, SAME_VALUE, || Some(0))?,
            // DW_CFA_register
            0x09 => {
                let reg = c.uleb().ok()?;
                let other = c.uleb().ok()?;
                self.set(reg, REGISTER, || Some(u32::from(u8::try_from(other).ok()?)))?;
            }
            // DW_CFA_def_cfa
            0x0c => {
                let reg = c.uleb().ok()?;
                let offset = i64::try_from(c.uleb().ok()?).ok()?;
                self.set_cfa(Some(reg), Some(offset))?;
            }
            // DW_CFA_def_cfa_register
            0x0d => self.set_cfa(Some(c.uleb().ok()?), None)?,
            // DW_CFA_expression, val_expression: dropped for an untracked register.
            0x10 | 0x16 => {
                let reg = c.uleb().ok()?;
                let len = usize::try_from(c.uleb().ok()?).ok()?;
                c.bytes(len).ok()?;
                place(reg).is_none().then_some(())?;
            }
            // DW_CFA_offset_extended_sf
            0x11 => {
                let reg = c.uleb().ok()?;
                let off = self.factored(c.sleb().ok()?)?;
                self.set_offset(reg, OFFSET, off)?;
            }
            // DW_CFA_def_cfa_sf
            0x12 => {
                let reg = c.uleb().ok()?;
                let offset = self.factored(c.sleb().ok()?)?;
                self.set_cfa(Some(reg), Some(offset))?;
            }
            // DW_CFA_def_cfa_offset_sf
            0x13 => {
                let offset = self.factored(c.sleb().ok()?)?;
                self.set_cfa(None, Some(offset))?;
            }
            // DW_CFA_val_offset, val_offset_sf
            0x14 => {
                let reg = c.uleb().ok()?;
                let off = self.factored_u(c.uleb().ok()?)?;
                self.set_offset(reg, VAL_OFFSET, off)?;
            }
            0x15 => {
                let reg = c.uleb().ok()?;
                let off = self.factored(c.sleb().ok()?)?;
                self.set_offset(reg, VAL_OFFSET, off)?;
            }
            // DW_CFA_GNU_args_size
            0x2e => {
                c.uleb().ok()?;
            }
            // DW_CFA_GNU_negative_offset_extended
            0x2f => {
                let reg = c.uleb().ok()?;
                let off = self.factored_u(c.uleb().ok()?)?.checked_neg()?;
                self.set_offset(reg, OFFSET, off)?;
            }
            // DW_CFA_def_cfa_expression, and what the general machine does not know.
            _ => return None,
        }
        Some(())
    }
}

/// The row `program`'s CIE starts its FDEs with: its initial instructions run on the packed
/// form; `None` where the general machine is needed (as in [`packed_rows`]). The same for
/// every FDE of the CIE, so a caller may keep it for the next (the general machine runs
/// the initial instructions for each FDE: the budget is charged for them only here).
pub fn packed_initial(program: &Program<'_>, budget: &mut Budget) -> Option<Packed> {
    // The general machine's row before any instruction: the CFA rsp + 0, the return
    // address undefined, rbp and rbx unchanged.
    let empty = [
        7 | u64::from(program.cie.signal) << 8 | UNDEFINED << 16 | SAME_VALUE << 24,
        0,
        SAME_VALUE,
    ];
    let mut run = Run {
        program,
        row: empty,
        initial: empty,
        stack: &mut [[0; 3]; MAX_REMEMBER],
        depth: 0,
        loc: program.pc_begin,
        rows: &mut [],
        n: 0,
    };
    run.run::<true>(program.cie_insns, program.cie_insns_addr, budget)?;
    Some(run.row)
}

/// Every row of `program` as [`all_rows`](super::machine::all_rows) hands them, from the
/// row `initial` its CIE's instructions made ([`packed_initial`]), packed into `rows` with
/// each row's offset from `program.pc_begin` in bits 8-31 of its `c`; `stack` is where
/// `DW_CFA_remember_state` rows go. Their number, or `None` where the general machine is
/// needed to say what the rows are or why there are none: a rule or a CFA with an
/// expression, a row 16 MiB or more from the FDE's start, more rows than `rows` holds, an
/// error of any kind (the budget's too: the caller gives the general machine the budget
/// this one was given).
pub fn packed_rows(
    program: &Program<'_>,
    initial: Packed,
    budget: &mut Budget,
    stack: &mut PackedStack,
    rows: &mut [Packed],
) -> Option<usize> {
    let cie = program.cie;
    if program.pc_begin >= program.pc_end || cie.ra_reg != u64::from(REG_RA) || cie.code_align == 0
    {
        return None;
    }
    let mut run = Run {
        program,
        row: initial,
        initial,
        stack,
        depth: 0,
        loc: program.pc_begin,
        rows,
        n: 0,
    };
    run.run::<false>(program.fde_insns, program.fde_insns_addr, budget)?;
    run.emit()?;
    Some(run.n)
}
