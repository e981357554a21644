// SPDX-License-Identifier: GPL-2.0

//! Parsing Frame Description Entries: the address range one FDE covers, its CIE, and its
//! instructions.

#![forbid(unsafe_code)]

use super::cie::Cie;
use super::cie::RawEntry;
use super::pointer::read_encoded;
use super::pointer::read_value;
use super::pointer::Bases;
use super::pointer::DW_EH_PE_PCREL;
use super::pointer::DW_EH_PE_SDATA4;
use super::CfiError;

/// A parsed FDE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fde {
    /// Its address.
    pub addr: u64,
    /// The first address it covers.
    pub pc_begin: u64,
    /// The address after the last one it covers.
    pub pc_end: u64,
    /// Where its instructions start in the entry's body.
    pub insns_start: usize,
    /// Where they end (the end of the body).
    pub insns_end: usize,
}

impl Fde {
    /// Its instructions, from the body `entry` was parsed from.
    pub fn insns<'b>(&self, entry: &RawEntry<'b>) -> Result<&'b [u8], CfiError> {
        entry
            .body
            .get(self.insns_start..self.insns_end)
            .ok_or(CfiError::Malformed)
    }

    /// Whether it covers `pc`.
    pub fn covers(&self, pc: u64) -> bool {
        self.pc_begin <= pc && pc < self.pc_end
    }
}

/// The address of the CIE of the FDE `entry`: its CIE pointer counts back from the
/// pointer field itself. A CIE (id 0) is not an FDE: [`CfiError::Malformed`].
#[inline]
pub fn cie_addr(entry: &RawEntry<'_>) -> Result<u64, CfiError> {
    let mut c = entry.cursor();
    let field = c.addr();
    let back = entry.id(&mut c)?;
    if back == 0 {
        return Err(CfiError::Malformed);
    }
    field.checked_sub(back).ok_or(CfiError::Malformed)
}

/// Parses `entry` as an FDE of `cie`.
#[inline(always)]
pub fn parse_fde(entry: &RawEntry<'_>, cie: &Cie) -> Result<Fde, CfiError> {
    let mut c = entry.cursor();
    entry.id(&mut c)?;
    let (pc_begin, range) = if cie.fde_enc == DW_EH_PE_PCREL | DW_EH_PE_SDATA4 {
        // What compilers write, read without the general decoding: as below.
        let field = c.addr();
        let begin = i64::from(c.u32()? as i32);
        (
            field.wrapping_add_signed(begin),
            i64::from(c.u32()? as i32) as u64,
        )
    } else {
        let pc_begin = read_encoded(&mut c, cie.fde_enc, &Bases::default())?;
        (pc_begin, read_value(&mut c, cie.fde_enc)?)
    };
    let pc_end = pc_begin.checked_add(range).ok_or(CfiError::Malformed)?;
    if cie.has_z {
        let len = c.uleb()?;
        c.skip(len)?;
    }
    Ok(Fde {
        addr: entry.addr,
        pc_begin,
        pc_end,
        insns_start: c.pos(),
        insns_end: entry.body.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::cie::load_entry;
    use super::super::cie::parse_cie;
    use super::super::Budget;
    use super::super::Slice;
    use super::*;

    #[test]
    fn gcc_fde() {
        // A CIE at 0x4000 ("zR", pcrel|sdata4), an FDE at 0x4018 for 0x1000..0x1040.
        let mut bytes = [0u8; 24 + 24];
        bytes[..24].copy_from_slice(&super::super::cie::tests::GCC_CIE);
        let fde: [u8; 24] = [
            20, 0, 0, 0, 0x1c, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0x41, 0x0e, 0x10, 0, 0, 0, 0,
        ];
        bytes[24..].copy_from_slice(&fde);
        // pc_begin is at 0x4020: 0x1000 - 0x4020.
        bytes[32..36].copy_from_slice(&(0x1000i32 - 0x4020).to_le_bytes());
        let mut m = Slice {
            base: 0x4000,
            bytes: &bytes,
        };
        let mut budget = Budget::DEFAULT;
        let mut fbuf = [0u8; 64];
        let mut cbuf = [0u8; 64];
        let e = load_entry(&mut m, &mut budget, 0x4018, &mut fbuf).unwrap();
        assert_eq!(cie_addr(&e), Ok(0x4000));
        let ce = load_entry(&mut m, &mut budget, 0x4000, &mut cbuf).unwrap();
        let cie = parse_cie(&ce).unwrap();
        let f = parse_fde(&e, &cie).unwrap();
        assert_eq!((f.pc_begin, f.pc_end), (0x1000, 0x1040));
        assert!(f.covers(0x1000) && f.covers(0x103f) && !f.covers(0x1040));
        assert_eq!(f.insns(&e), Ok(&[0x41u8, 0x0e, 0x10, 0, 0, 0, 0][..]));
        // The CIE is no FDE, and a pointer before address 0 is malformed.
        assert_eq!(cie_addr(&ce), Err(CfiError::Malformed));
        bytes[28..32].copy_from_slice(&0x5000u32.to_le_bytes());
        let mut m = Slice {
            base: 0x4000,
            bytes: &bytes,
        };
        let e = load_entry(&mut m, &mut budget, 0x4018, &mut fbuf).unwrap();
        assert_eq!(cie_addr(&e), Err(CfiError::Malformed));
    }

    #[test]
    fn ranges_that_wrap_and_short_augmentation() {
        let mut bytes = [0u8; 24 + 24];
        bytes[..24].copy_from_slice(&super::super::cie::tests::GCC_CIE);
        let fde: [u8; 24] = [
            20, 0, 0, 0, 0x1c, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 5, 0, 0, 0,
            0, 0, 0, 0,
        ];
        bytes[24..].copy_from_slice(&fde);
        let mut m = Slice {
            base: 0xffff_ffff_ffff_0000,
            bytes: &bytes,
        };
        let mut budget = Budget::DEFAULT;
        let mut fbuf = [0u8; 64];
        let mut cbuf = [0u8; 64];
        let e = load_entry(&mut m, &mut budget, 0xffff_ffff_ffff_0018, &mut fbuf).unwrap();
        let ce = load_entry(&mut m, &mut budget, 0xffff_ffff_ffff_0000, &mut cbuf).unwrap();
        let cie = parse_cie(&ce).unwrap();
        assert_eq!(parse_fde(&e, &cie), Err(CfiError::Malformed));
    }
}
