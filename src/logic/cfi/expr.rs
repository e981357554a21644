// SPDX-License-Identifier: GPL-2.0

//! A small, bounded DWARF expression evaluator, for the expressions `.eh_frame` uses on
//! x86-64: GNU ld's `.plt` CFA (`breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl;
//! plus`), glibc's `__restore_rt` (`breg7 160; deref` for the CFA, `breg7 OFF` for each
//! register saved in the signal frame's `ucontext`), and stack realignment (`breg6 -8;
//! deref`).
//!
//! Operations: `lit0`-`lit31`, `const1u`-`const8s`, `constu`, `consts`, `breg0`-`breg31`,
//! `bregx` (of `rbp`, `rsp` and `rip` only), `dup`, `drop`, `over`, `pick`, `swap`, `rot`,
//! `deref`, `abs`, `and`, `div`, `minus`, `mod`, `mul`, `neg`, `not`, `or`, `plus`,
//! `plus_uconst`, `shl`, `shr`, `shra`, `xor`, the six comparisons and `nop`. Branches and
//! everything else are [`CfiError::Unsupported`]. The stack holds [`STACK_DEPTH`] values,
//! and each operation is charged to the budget: no expression loops or overflows.

#![forbid(unsafe_code)]

use super::cursor::Cursor;
use super::read_u64;
use super::Budget;
use super::CfiError;
use super::Memory;
use super::REG_RA;
use super::REG_RBP;
use super::REG_RSP;

/// Values the evaluation stack holds, at most.
pub const STACK_DEPTH: usize = 16;

/// The register values an expression may read: `rip` is the exact PC of the frame (for
/// the `.plt` expression), not `ip - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExprRegs {
    /// `rip`.
    pub ip: u64,
    /// `rsp`.
    pub sp: u64,
    /// `rbp`.
    pub bp: u64,
}

impl ExprRegs {
    fn get(&self, reg: u64) -> Result<u64, CfiError> {
        match reg {
            r if r == u64::from(REG_RSP) => Ok(self.sp),
            r if r == u64::from(REG_RBP) => Ok(self.bp),
            r if r == u64::from(REG_RA) => Ok(self.ip),
            _ => Err(CfiError::Unsupported),
        }
    }
}

struct Stack {
    v: [u64; STACK_DEPTH],
    len: usize,
}

impl Stack {
    fn push(&mut self, x: u64) -> Result<(), CfiError> {
        let slot = self.v.get_mut(self.len).ok_or(CfiError::Unsupported)?;
        *slot = x;
        self.len += 1;
        Ok(())
    }

    fn pop(&mut self) -> Result<u64, CfiError> {
        self.len = self.len.checked_sub(1).ok_or(CfiError::Malformed)?;
        self.v.get(self.len).copied().ok_or(CfiError::Malformed)
    }

    /// The value `i` places below the top.
    fn peek(&self, i: usize) -> Result<u64, CfiError> {
        let at = self
            .len
            .checked_sub(1)
            .and_then(|top| top.checked_sub(i))
            .ok_or(CfiError::Malformed)?;
        self.v.get(at).copied().ok_or(CfiError::Malformed)
    }
}

/// Evaluates `code` with `regs`, `initial` pushed first if given (the CFA, for
/// `DW_CFA_expression` and `DW_CFA_val_expression`), and returns the value on top of the
/// stack. `deref` reads memory through `mem`, charged to `budget`.
pub fn eval<M: Memory + ?Sized>(
    code: &[u8],
    regs: &ExprRegs,
    initial: Option<u64>,
    mem: &mut M,
    budget: &mut Budget,
) -> Result<u64, CfiError> {
    let mut s = Stack {
        v: [0; STACK_DEPTH],
        len: 0,
    };
    if let Some(x) = initial {
        s.push(x)?;
    }
    let mut c = Cursor::new(code, 0);
    while !c.is_empty() {
        budget.charge_insn()?;
        let op = c.u8()?;
        match op {
            // DW_OP_lit0..lit31
            0x30..=0x4f => s.push(u64::from(op - 0x30))?,
            // DW_OP_breg0..breg31
            0x70..=0x8f => {
                let off = c.sleb()?;
                let r = regs.get(u64::from(op - 0x70))?;
                s.push(r.wrapping_add(off as u64))?;
            }
            // DW_OP_bregx
            0x92 => {
                let reg = c.uleb()?;
                let off = c.sleb()?;
                s.push(regs.get(reg)?.wrapping_add(off as u64))?;
            }
            0x08 => s.push(u64::from(c.u8()?))?,
            0x09 => s.push(i64::from(c.u8()? as i8) as u64)?,
            0x0a => s.push(u64::from(c.u16()?))?,
            0x0b => s.push(i64::from(c.u16()? as i16) as u64)?,
            0x0c => s.push(u64::from(c.u32()?))?,
            0x0d => s.push(i64::from(c.u32()? as i32) as u64)?,
            0x0e | 0x0f => s.push(c.u64()?)?,
            0x10 => s.push(c.uleb()?)?,
            0x11 => s.push(c.sleb()? as u64)?,
            // DW_OP_dup, drop, over, pick, swap, rot
            0x12 => s.push(s.peek(0)?)?,
            0x13 => {
                s.pop()?;
            }
            0x14 => s.push(s.peek(1)?)?,
            0x15 => {
                let i = usize::from(c.u8()?);
                s.push(s.peek(i)?)?;
            }
            0x16 => {
                let a = s.pop()?;
                let b = s.pop()?;
                s.push(a)?;
                s.push(b)?;
            }
            0x17 => {
                let a = s.pop()?;
                let b = s.pop()?;
                let c3 = s.pop()?;
                s.push(a)?;
                s.push(c3)?;
                s.push(b)?;
            }
            // DW_OP_deref
            0x06 => {
                let addr = s.pop()?;
                s.push(read_u64(mem, budget, addr)?)?;
            }
            // DW_OP_abs, neg, not
            0x19 => {
                let a = s.pop()?;
                s.push((a as i64).unsigned_abs())?;
            }
            0x1f => {
                let a = s.pop()?;
                s.push(a.wrapping_neg())?;
            }
            0x20 => {
                let a = s.pop()?;
                s.push(!a)?;
            }
            // DW_OP_plus_uconst
            0x23 => {
                let a = s.pop()?;
                s.push(a.wrapping_add(c.uleb()?))?;
            }
            // Binary operations: the second value popped is the left operand.
            0x1a..=0x1e | 0x21 | 0x22 | 0x24..=0x27 | 0x29..=0x2e => {
                let b = s.pop()?;
                let a = s.pop()?;
                s.push(binary(op, a, b)?)?;
            }
            // DW_OP_nop
            0x96 => {}
            _ => return Err(CfiError::Unsupported),
        }
    }
    s.pop()
}

/// `a OP b` for the binary operation `op`; comparisons and `div` are signed, as DWARF says
/// for the generic type.
fn binary(op: u8, a: u64, b: u64) -> Result<u64, CfiError> {
    let (sa, sb) = (a as i64, b as i64);
    Ok(match op {
        0x1a => a & b,
        0x1b => sa.checked_div(sb).ok_or(CfiError::Malformed)? as u64,
        0x1c => a.wrapping_sub(b),
        0x1d => a.checked_rem(b).ok_or(CfiError::Malformed)?,
        0x1e => a.wrapping_mul(b),
        0x21 => a | b,
        0x22 => a.wrapping_add(b),
        0x24 => a.checked_shl(u32::try_from(b).unwrap_or(64)).unwrap_or(0),
        0x25 => a.checked_shr(u32::try_from(b).unwrap_or(64)).unwrap_or(0),
        0x26 => {
            let n = u32::try_from(b).unwrap_or(63).min(63);
            (sa >> n) as u64
        }
        0x27 => a ^ b,
        0x29 => u64::from(sa == sb),
        0x2a => u64::from(sa >= sb),
        0x2b => u64::from(sa > sb),
        0x2c => u64::from(sa <= sb),
        0x2d => u64::from(sa < sb),
        0x2e => u64::from(sa != sb),
        _ => return Err(CfiError::Unsupported),
    })
}

#[cfg(test)]
mod tests {
    use super::super::Slice;
    use super::*;

    /// GNU ld's `.plt` CFA expression.
    pub(crate) const PLT: [u8; 11] = [
        0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
    ];

    fn run(code: &[u8], regs: ExprRegs, initial: Option<u64>) -> Result<u64, CfiError> {
        let words: [u64; 4] = [0x1111, 0x7fff_0000, 0x3333, 0x4444];
        let mut bytes = [0u8; 32];
        for (i, w) in words.iter().enumerate() {
            bytes[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        let mut m = Slice {
            base: 0x9000,
            bytes: &bytes,
        };
        eval(code, &regs, initial, &mut m, &mut Budget::default())
    }

    const R: ExprRegs = ExprRegs {
        ip: 0x401026,
        sp: 0x7ffc_0000,
        bp: 0x9008,
    };

    #[test]
    fn plt_expression() {
        // Offsets 0-10 of a 16-byte lazy PLT entry (`jmp *GOT`, `push $n`): CFA = rsp + 8.
        let mut regs = R;
        regs.ip = 0x401020 + 10;
        assert_eq!(run(&PLT, regs, None), Ok(0x7ffc_0008));
        // Offsets 11-15 (`jmp PLT0`, after the push): CFA = rsp + 16.
        for low in 11..16 {
            regs.ip = 0x401020 + low;
            assert_eq!(run(&PLT, regs, None), Ok(0x7ffc_0010));
        }
    }

    #[test]
    fn signal_frame_expressions() {
        // glibc's __restore_rt: CFA = *(rsp + 160); rip saved at rsp + 168.
        let regs = ExprRegs {
            sp: 0x9008 - 160,
            ..R
        };
        assert_eq!(run(&[0x77, 0xa0, 0x01, 0x06], regs, None), Ok(0x7fff_0000));
        assert_eq!(run(&[0x77, 0xa8, 0x01], regs, Some(1)), Ok(0x9010));
        // Stack realignment: CFA = *(rbp - 8).
        assert_eq!(run(&[0x76, 0x78, 0x06], R, None), Ok(0x1111));
        // bregx rbp 8.
        assert_eq!(run(&[0x92, 6, 8], R, None), Ok(0x9010));
    }

    #[test]
    fn every_operation() {
        let cases: &[(&[u8], u64)] = &[
            (&[0x08, 0xff], 0xff),
            (&[0x09, 0xff], u64::MAX),
            (&[0x0a, 0xfe, 0xff], 0xfffe),
            (&[0x0b, 0xfe, 0xff], -2i64 as u64),
            (&[0x0c, 0xfc, 0xff, 0xff, 0xff], 0xffff_fffc),
            (&[0x0d, 0xfc, 0xff, 0xff, 0xff], -4i64 as u64),
            (&[0x0e, 1, 0, 0, 0, 0, 0, 0, 1], 0x0100_0000_0000_0001),
            (&[0x0f, 1, 0, 0, 0, 0, 0, 0, 0x80], 0x8000_0000_0000_0001),
            (&[0x10, 0x80, 0x01], 128),
            (&[0x11, 0x7f], u64::MAX),
            (&[0x35, 0x12, 0x22], 10),
            (&[0x35, 0x36, 0x13], 5),
            (&[0x35, 0x36, 0x14], 5),
            (&[0x35, 0x36, 0x37, 0x15, 2], 5),
            (&[0x35, 0x36, 0x16, 0x1c], 1),
            (&[0x31, 0x32, 0x33, 0x17, 0x1c, 0x1c], 4),
            (&[0x11, 0x79, 0x19], 7),
            (&[0x35, 0x1f], -5i64 as u64),
            (&[0x30, 0x20], u64::MAX),
            (&[0x3c, 0x3a, 0x1a], 8),
            (&[0x11, 0x78, 0x32, 0x1b], -4i64 as u64),
            (&[0x37, 0x33, 0x1d], 1),
            (&[0x37, 0x33, 0x1e], 21),
            (&[0x34, 0x31, 0x21], 5),
            (&[0x35, 0x23, 0x80, 0x01], 133),
            (&[0x31, 0x34, 0x24], 16),
            (&[0x31, 0x10, 0x40, 0x24], 0),
            (&[0x4f, 0x32, 0x25], 7),
            (&[0x11, 0x70, 0x32, 0x26], -4i64 as u64),
            (&[0x36, 0x33, 0x27], 5),
            (&[0x33, 0x33, 0x29], 1),
            (&[0x11, 0x7f, 0x30, 0x2a], 0),
            (&[0x33, 0x32, 0x2b], 1),
            (&[0x33, 0x32, 0x2c], 0),
            (&[0x11, 0x7f, 0x30, 0x2d], 1),
            (&[0x33, 0x32, 0x2e], 1),
            (&[0x96, 0x31], 1),
            (&[0x80, 0x00], 0x401026),
        ];
        for (code, want) in cases {
            assert_eq!(run(code, R, None), Ok(*want), "{code:x?}");
        }
    }

    #[test]
    fn refusals() {
        // Empty stack, underflow, division by zero, unknown and branch opcodes,
        // registers not tracked, truncated operands, stack overflow.
        assert_eq!(run(&[], R, None), Err(CfiError::Malformed));
        assert_eq!(run(&[0x22], R, None), Err(CfiError::Malformed));
        assert_eq!(run(&[0x31, 0x30, 0x1b], R, None), Err(CfiError::Malformed));
        assert_eq!(run(&[0x31, 0x30, 0x1d], R, None), Err(CfiError::Malformed));
        assert_eq!(run(&[0x2f, 0, 0], R, None), Err(CfiError::Unsupported));
        assert_eq!(run(&[0x28, 0, 0], R, None), Err(CfiError::Unsupported));
        assert_eq!(run(&[0x73, 0], R, None), Err(CfiError::Unsupported));
        assert_eq!(run(&[0x92, 3, 0], R, None), Err(CfiError::Unsupported));
        assert_eq!(run(&[0x0c, 1, 2], R, None), Err(CfiError::Malformed));
        assert_eq!(run(&[0x12; 20], R, Some(1)), Err(CfiError::Unsupported));
        assert_eq!(run(&[0x31, 0x15, 1], R, None), Err(CfiError::Malformed));
        assert_eq!(run(&[0x10, 0, 0x06], R, None), Err(CfiError::Read));
        let mut budget = Budget { bytes: 0, insns: 2 };
        let mut m = Slice {
            base: 0,
            bytes: &[],
        };
        assert_eq!(
            eval(&[0x96, 0x96, 0x30], &R, None, &mut m, &mut budget),
            Err(CfiError::Budget)
        );
    }
}
