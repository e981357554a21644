// SPDX-License-Identifier: GPL-2.0

//! Finding a loaded ELF object's `.eh_frame_hdr` from its program headers
//! (`PT_GNU_EH_FRAME`), read in the task's memory from where the object is mapped.

#![forbid(unsafe_code)]

use super::read_mem;
use super::Budget;
use super::CfiError;
use super::Memory;

/// Program headers looked at, at most.
pub const MAX_PHDRS: u16 = 64;

const PT_LOAD: u32 = 1;
const PT_GNU_EH_FRAME: u32 = 0x6474_e550;

/// The address of the `.eh_frame_hdr` of the little-endian ELF64 object whose first page
/// (file offset 0: the ELF header) is mapped at `base`. The load bias is `base` minus the
/// address of the `PT_LOAD` segment at file offset 0; the program headers must lie in that
/// mapping, as linkers place them. An object without `PT_GNU_EH_FRAME` is
/// [`CfiError::NoFde`].
pub fn find_eh_frame_hdr<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    base: u64,
) -> Result<u64, CfiError> {
    let mut ehdr = [0u8; 64];
    read_mem(mem, budget, base, &mut ehdr)?;
    let bytes = |at: usize| -> Result<[u8; 8], CfiError> {
        ehdr.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .ok_or(CfiError::Malformed)
    };
    if ehdr.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err(CfiError::Unsupported);
    }
    let phoff = u64::from_le_bytes(bytes(32)?);
    let [es0, es1, n0, n1, ..] = bytes(54)?;
    let phentsize = u16::from_le_bytes([es0, es1]);
    let phnum = u16::from_le_bytes([n0, n1]);
    if phentsize < 56 || phnum > MAX_PHDRS {
        return Err(CfiError::Malformed);
    }
    let mut first_load = None;
    let mut eh = None;
    for i in 0..u64::from(phnum) {
        let at = i
            .checked_mul(u64::from(phentsize))
            .and_then(|o| o.checked_add(phoff))
            .and_then(|o| o.checked_add(base))
            .ok_or(CfiError::Malformed)?;
        let mut ph = [0u8; 24];
        read_mem(mem, budget, at, &mut ph)?;
        let [t0, t1, t2, t3, _, _, _, _, o0, o1, o2, o3, o4, o5, o6, o7, v0, v1, v2, v3, v4, v5, v6, v7] =
            ph;
        let kind = u32::from_le_bytes([t0, t1, t2, t3]);
        let offset = u64::from_le_bytes([o0, o1, o2, o3, o4, o5, o6, o7]);
        let vaddr = u64::from_le_bytes([v0, v1, v2, v3, v4, v5, v6, v7]);
        if kind == PT_LOAD && offset == 0 && first_load.is_none() {
            first_load = Some(vaddr);
        }
        if kind == PT_GNU_EH_FRAME {
            eh = Some(vaddr);
        }
    }
    let first_load = first_load.ok_or(CfiError::Malformed)?;
    let eh = eh.ok_or(CfiError::NoFde)?;
    Ok(base.wrapping_sub(first_load).wrapping_add(eh))
}
