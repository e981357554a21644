// SPDX-License-Identifier: GPL-2.0

//! Unwinding user stacks with the program's own `.eh_frame` call-frame information.
//!
//! Linux unwinds user space by frame pointers only, and most distributions build without
//! them. This is the pure part of a CFI unwinder for x86-64: it finds the FDE of an address
//! through the `.eh_frame_hdr` binary-search table ([`table`]), or one made from the
//! `.eh_frame` section itself where the object has none ([`walk`]), parses its CIE and FDE
//! ([`cie`], [`fde`]), steps the CFA rule state machine over their instructions up to the
//! address ([`machine`]), and applies the resulting row to the registers ([`step`]).
//!
//! Everything the unwinder reads is untrusted: it comes from the task's memory through a
//! caller-provided [`Memory`], each read charged to a [`Budget`] of bytes and CFI
//! instructions. Malformed, looping or oversized tables return a [`CfiError`], never a panic,
//! an unbounded loop or an out-of-bounds access. No allocation: the CIE and FDE bytes go to
//! a caller-provided [`Scratch`](step::Scratch).

#![forbid(unsafe_code)]

pub mod cie;
pub mod cursor;
pub mod elf;
pub mod expr;
pub mod fde;
pub mod machine;
pub mod packed;
pub mod pointer;
pub mod step;
pub mod table;
pub mod walk;

/// Why a CFI lookup or unwind step failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfiError {
    /// The memory could not be read (unmapped, a fault).
    Read,
    /// The bytes do not make a valid table, entry, instruction or expression.
    Malformed,
    /// Valid, but something this unwinder does not implement (an encoding, an opcode, a
    /// register it does not track used where it needs a value).
    Unsupported,
    /// The per-stack budget of bytes read or instructions executed is spent.
    Budget,
    /// An entry is longer than the scratch buffer or a fixed limit.
    TooLong,
    /// No FDE covers the address.
    NoFde,
    /// The resulting frame fails a sanity check (the stack going the wrong way, a
    /// misaligned CFA).
    BadFrame,
}

/// Reads the unwound task's memory.
pub trait Memory {
    /// Fills `buf` with the bytes at `addr`, or fails with [`CfiError::Read`].
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError>;

    /// The little-endian 64-bit word at `addr` (an address range that does not wrap); a
    /// reader may serve it faster than [`Memory::read`].
    fn read_word(&mut self, addr: u64) -> Result<u64, CfiError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// A byte slice that appears at address `base`: memory for tests and for files read on the
/// host.
#[derive(Clone, Copy, Debug)]
pub struct Slice<'a> {
    /// The address of the first byte.
    pub base: u64,
    /// The bytes.
    pub bytes: &'a [u8],
}

impl Memory for Slice<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        let start = addr.checked_sub(self.base).ok_or(CfiError::Read)?;
        let start = usize::try_from(start).map_err(|_| CfiError::Read)?;
        let end = start.checked_add(buf.len()).ok_or(CfiError::Read)?;
        let src = self.bytes.get(start..end).ok_or(CfiError::Read)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Bytes read per stack by [`Budget::DEFAULT`].
pub const DEFAULT_BYTES: u32 = 64 * 1024;
/// CFI instructions and expression operations executed per stack by [`Budget::DEFAULT`].
pub const DEFAULT_INSNS: u32 = 64 * 1024;

/// What one stack may still cost: bytes read from memory and CFI instructions (and DWARF
/// expression operations) executed. Every read and every instruction is charged first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Bytes that may still be read.
    pub bytes: u32,
    /// Instructions and expression operations that may still run.
    pub insns: u32,
}

impl Budget {
    /// The budget of one stack: [`DEFAULT_BYTES`] and [`DEFAULT_INSNS`].
    pub const DEFAULT: Budget = Budget {
        bytes: DEFAULT_BYTES,
        insns: DEFAULT_INSNS,
    };

    /// Charges `n` bytes read.
    pub fn charge_bytes(&mut self, n: usize) -> Result<(), CfiError> {
        let n = u32::try_from(n).map_err(|_| CfiError::Budget)?;
        self.bytes = self.bytes.checked_sub(n).ok_or(CfiError::Budget)?;
        Ok(())
    }

    /// Charges one instruction or expression operation.
    pub fn charge_insn(&mut self) -> Result<(), CfiError> {
        self.insns = self.insns.checked_sub(1).ok_or(CfiError::Budget)?;
        Ok(())
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Reads `buf.len()` bytes at `addr`, charged to `budget`; an address range that wraps
/// fails.
pub fn read_mem<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    addr: u64,
    buf: &mut [u8],
) -> Result<(), CfiError> {
    let len = u64::try_from(buf.len()).map_err(|_| CfiError::Read)?;
    addr.checked_add(len).ok_or(CfiError::Read)?;
    budget.charge_bytes(buf.len())?;
    mem.read(addr, buf)
}

/// Reads the little-endian 64-bit word at `addr`, charged to `budget`.
#[inline(always)]
pub fn read_u64<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    addr: u64,
) -> Result<u64, CfiError> {
    addr.checked_add(8).ok_or(CfiError::Read)?;
    budget.charge_bytes(8)?;
    mem.read_word(addr)
}

/// DWARF register number of `rbx` on x86-64: callee-saved, and the CFA register of
/// glibc's lazy-binding trampoline (`_dl_runtime_resolve_*`), which realigns the stack.
pub const REG_RBX: u16 = 3;
/// DWARF register number of `rbp` on x86-64.
pub const REG_RBP: u16 = 6;
/// DWARF register number of `rsp` on x86-64.
pub const REG_RSP: u16 = 7;
/// DWARF register number of the return address (`rip`) on x86-64.
pub const REG_RA: u16 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_reads_inside_only() {
        let bytes = [1u8, 2, 3, 4];
        let mut m = Slice {
            base: 0x1000,
            bytes: &bytes,
        };
        let mut b = [0u8; 2];
        assert_eq!(m.read(0x1002, &mut b), Ok(()));
        assert_eq!(b, [3, 4]);
        assert_eq!(m.read(0x1003, &mut b), Err(CfiError::Read));
        assert_eq!(m.read(0xfff, &mut b), Err(CfiError::Read));
        assert_eq!(m.read(u64::MAX, &mut b), Err(CfiError::Read));
    }

    #[test]
    fn budget_is_charged_before_reading() {
        let bytes = [0u8; 16];
        let mut m = Slice {
            base: 0,
            bytes: &bytes,
        };
        let mut budget = Budget {
            bytes: 12,
            insns: 1,
        };
        assert_eq!(read_u64(&mut m, &mut budget, 0), Ok(0));
        assert_eq!(read_u64(&mut m, &mut budget, 0), Err(CfiError::Budget));
        assert_eq!(budget.charge_insn(), Ok(()));
        assert_eq!(budget.charge_insn(), Err(CfiError::Budget));
        assert_eq!(
            read_mem(&mut m, &mut budget, u64::MAX - 1, &mut [0u8; 4]),
            Err(CfiError::Read)
        );
    }
}
