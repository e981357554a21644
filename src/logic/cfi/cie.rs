// SPDX-License-Identifier: GPL-2.0

//! Loading `.eh_frame` entries into a buffer, and parsing Common Information Entries.
//!
//! A CIE holds what its FDEs share: the code and data alignment factors, the return
//! address column, the augmentation (`z` data length, `R` FDE pointer encoding, `P`
//! personality, `L` LSDA encoding, `S` signal frame, and the old `eh` pointer) and the
//! initial instructions. Versions 1, 3 and 4 (address size 8) are read; the 32- and the
//! 64-bit DWARF formats both.

#![forbid(unsafe_code)]

use super::cursor::Cursor;
use super::pointer::fixed_size;
use super::pointer::read_value;
use super::pointer::DW_EH_PE_ABSPTR;
use super::pointer::DW_EH_PE_OMIT;
use super::read_mem;
use super::Budget;
use super::CfiError;
use super::Memory;

/// Bytes [`load_entry_head`] reads first, the length field with them: a CIE takes about
/// 24, most FDEs 24 to 40.
const FIRST_READ: usize = 64;

/// Longest augmentation string accepted.
pub const MAX_AUGMENTATION: usize = 8;

/// One `.eh_frame` entry copied to a buffer.
#[derive(Clone, Copy, Debug)]
pub struct RawEntry<'b> {
    /// The address of the entry (of its length field).
    pub addr: u64,
    /// The 64-bit DWARF format: 8-byte length escape, 8-byte CIE id and pointer.
    pub is64: bool,
    /// The bytes after the length field, up to the end of the entry (or, loaded with
    /// [`load_entry_head`], of the buffer).
    pub body: &'b [u8],
    /// The length of the whole body.
    pub len: usize,
    /// Where `body` starts in the buffer it was loaded into.
    pub at: usize,
    /// The address of the first byte of `body`.
    pub body_addr: u64,
}

impl<'b> RawEntry<'b> {
    /// A cursor over the body.
    pub fn cursor(&self) -> Cursor<'b> {
        Cursor::new(self.body, self.body_addr)
    }

    /// Reads the CIE id or CIE pointer field at the start of the body.
    pub fn id(&self, c: &mut Cursor<'_>) -> Result<u64, CfiError> {
        if self.is64 {
            c.u64()
        } else {
            c.u32().map(u64::from)
        }
    }
}

/// Copies the entry at `addr` into `buf`. A zero length (the terminator) is
/// [`CfiError::NoFde`]; an entry longer than `buf` is [`CfiError::TooLong`].
pub fn load_entry<'b, M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    addr: u64,
    buf: &'b mut [u8],
) -> Result<RawEntry<'b>, CfiError> {
    let entry = load_entry_head(mem, budget, addr, buf)?;
    if entry.body.len() < entry.len {
        return Err(CfiError::TooLong);
    }
    Ok(entry)
}

/// [`load_entry`], but an entry longer than `buf` is copied only as far as `buf` holds
/// (its `len` says how long it is).
#[inline(always)]
pub fn load_entry_head<'b, M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    addr: u64,
    buf: &'b mut [u8],
) -> Result<RawEntry<'b>, CfiError> {
    // Most entries are short: one read for the length and the body, charged the bytes the
    // entry takes. One that fails (the table's memory ends closer) or falls short of the
    // entry is made again exactly, below.
    let first = FIRST_READ.min(buf.len());
    let n = match buf.get_mut(..first) {
        Some(b) if budget.bytes as usize >= first && addr.checked_add(first as u64).is_some() => {
            match (mem.read(addr, b), b.first_chunk::<4>()) {
                (Ok(()), Some(&len4)) => u32::from_le_bytes(len4) as usize,
                _ => 0,
            }
        }
        _ => 0,
    };
    if n != 0 && n <= first - 4 {
        budget.charge_bytes(4 + n)?;
        return Ok(RawEntry {
            addr,
            is64: false,
            body: buf.get(4..4 + n).ok_or(CfiError::Malformed)?,
            len: n,
            at: 4,
            body_addr: addr.checked_add(4).ok_or(CfiError::Read)?,
        });
    }
    load_entry_exact(mem, budget, addr, buf)
}

/// [`load_entry_head`] a field at a time.
fn load_entry_exact<'b, M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    addr: u64,
    buf: &'b mut [u8],
) -> Result<RawEntry<'b>, CfiError> {
    let mut len4 = [0u8; 4];
    read_mem(mem, budget, addr, &mut len4)?;
    let (len, is64, head) = match u32::from_le_bytes(len4) {
        0 => return Err(CfiError::NoFde),
        0xffff_ffff => {
            let mut len8 = [0u8; 8];
            let at = addr.checked_add(4).ok_or(CfiError::Read)?;
            read_mem(mem, budget, at, &mut len8)?;
            (u64::from_le_bytes(len8), true, 12u64)
        }
        0xffff_fff0..=0xffff_fffe => return Err(CfiError::Malformed),
        n => (u64::from(n), false, 4u64),
    };
    let len = usize::try_from(len).map_err(|_| CfiError::TooLong)?;
    let body_addr = addr.checked_add(head).ok_or(CfiError::Read)?;
    body_addr
        .checked_add(len as u64)
        .ok_or(CfiError::Malformed)?;
    if len > buf.len() {
        // All of a longer entry must be there to be read: a length that runs past the
        // table's memory is no entry.
        let last = body_addr
            .checked_add(len as u64 - 1)
            .ok_or(CfiError::Malformed)?;
        read_mem(mem, budget, last, &mut [0u8; 1])?;
    }
    let body = buf.get_mut(..len.min(buf.len())).ok_or(CfiError::TooLong)?;
    read_mem(mem, budget, body_addr, body)?;
    Ok(RawEntry {
        addr,
        is64,
        body,
        len,
        at: 0,
        body_addr,
    })
}

/// A parsed CIE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cie {
    /// Its address.
    pub addr: u64,
    /// Its version (1, 3 or 4).
    pub version: u8,
    /// Code alignment factor: advance operands are multiplied by it.
    pub code_align: u64,
    /// Data alignment factor: offset operands are multiplied by it.
    pub data_align: i64,
    /// The return address column (16 on x86-64).
    pub ra_reg: u64,
    /// Whether the augmentation has `z`: FDEs carry an augmentation data length.
    pub has_z: bool,
    /// The encoding of the FDEs' addresses (`R`; absolute pointer without it).
    pub fde_enc: u8,
    /// The encoding of the FDEs' LSDA pointers (`L`; omitted without it).
    pub lsda_enc: u8,
    /// Whether its FDEs describe signal trampolines (`S`).
    pub signal: bool,
    /// Where the initial instructions start in the entry's body.
    pub insns_start: usize,
    /// Where they end (the end of the body).
    pub insns_end: usize,
}

impl Cie {
    /// The initial instructions, from the body `entry` was parsed from.
    pub fn insns<'b>(&self, entry: &RawEntry<'b>) -> Result<&'b [u8], CfiError> {
        entry
            .body
            .get(self.insns_start..self.insns_end)
            .ok_or(CfiError::Malformed)
    }
}

/// Skips a pointer of encoding `enc` without applying or dereferencing it.
fn skip_pointer(c: &mut Cursor<'_>, enc: u8) -> Result<(), CfiError> {
    if enc == DW_EH_PE_OMIT {
        return Ok(());
    }
    match fixed_size(enc)? {
        Some(n) => c.skip(n as u64),
        None => read_value(c, enc).map(|_| ()),
    }
}

/// Parses `entry` as a CIE.
pub fn parse_cie(entry: &RawEntry<'_>) -> Result<Cie, CfiError> {
    let mut c = entry.cursor();
    if entry.id(&mut c)? != 0 {
        return Err(CfiError::Malformed);
    }
    let version = c.u8()?;
    if !matches!(version, 1 | 3 | 4) {
        return Err(CfiError::Unsupported);
    }
    let mut aug = [0u8; MAX_AUGMENTATION];
    let mut aug_len = 0;
    loop {
        let b = c.u8()?;
        if b == 0 {
            break;
        }
        let slot = aug.get_mut(aug_len).ok_or(CfiError::Unsupported)?;
        *slot = b;
        aug_len += 1;
    }
    let mut letters = aug.get(..aug_len).ok_or(CfiError::Malformed)?;
    if let Some(rest) = letters.strip_prefix(b"eh") {
        c.skip(8)?;
        letters = rest;
    }
    if version == 4 {
        let address_size = c.u8()?;
        let segment_size = c.u8()?;
        if address_size != 8 || segment_size != 0 {
            return Err(CfiError::Unsupported);
        }
    }
    let code_align = c.uleb()?;
    let data_align = c.sleb()?;
    let ra_reg = if version == 1 {
        u64::from(c.u8()?)
    } else {
        c.uleb()?
    };
    let mut cie = Cie {
        addr: entry.addr,
        version,
        code_align,
        data_align,
        ra_reg,
        has_z: false,
        fde_enc: DW_EH_PE_ABSPTR,
        lsda_enc: DW_EH_PE_OMIT,
        signal: false,
        insns_start: 0,
        insns_end: entry.body.len(),
    };
    if let Some(rest) = letters.strip_prefix(b"z") {
        cie.has_z = true;
        let len = c.uleb()?;
        let len = usize::try_from(len).map_err(|_| CfiError::Malformed)?;
        let mut data = Cursor::new(c.bytes(len)?, 0);
        for &letter in rest {
            match letter {
                b'R' => cie.fde_enc = data.u8()?,
                b'L' => cie.lsda_enc = data.u8()?,
                b'P' => {
                    let enc = data.u8()?;
                    skip_pointer(&mut data, enc)?;
                }
                b'S' => cie.signal = true,
                // AArch64's BTI and MTE marks: no data.
                b'B' | b'G' => {}
                // Unknown: the `z` length lets the rest be skipped.
                _ => break,
            }
        }
    } else if !letters.is_empty() {
        return Err(CfiError::Unsupported);
    }
    cie.insns_start = c.pos();
    Ok(cie)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Slice;
    use super::*;

    fn load(bytes: &[u8], buf: &mut [u8]) -> Result<Cie, CfiError> {
        let mut m = Slice {
            base: 0x4000,
            bytes,
        };
        let e = load_entry(&mut m, &mut Budget::default(), 0x4000, buf)?;
        parse_cie(&e)
    }

    /// GCC's x86-64 CIE: version 1, "zR", pcrel|sdata4, CFA rsp+8, RA at cfa-8.
    pub(crate) const GCC_CIE: [u8; 24] = [
        0x14, 0, 0, 0, 0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1, 0,
        0,
    ];

    #[test]
    fn gcc_cie() {
        let mut buf = [0u8; 64];
        let cie = load(&GCC_CIE, &mut buf).unwrap();
        assert_eq!(cie.version, 1);
        assert_eq!((cie.code_align, cie.data_align, cie.ra_reg), (1, -8, 16));
        assert!(cie.has_z && !cie.signal);
        assert_eq!(cie.fde_enc, 0x1b);
        assert_eq!(cie.lsda_enc, DW_EH_PE_OMIT);
        assert_eq!((cie.insns_start, cie.insns_end), (13, 20));
    }

    #[test]
    fn augmentations_and_versions() {
        // Version 3, "zPLRS": personality indirect|pcrel|sdata4, LSDA pcrel|sdata4,
        // FDEs pcrel|sdata4, a signal frame; uleb RA column.
        let body: &[u8] = &[
            0, 0, 0, 0, 3, b'z', b'P', b'L', b'R', b'S', 0, 1, 0x78, 16, 7, 0x9b, 1, 2, 3, 4, 0x1b,
            0x1b, 0x0c, 7, 8,
        ];
        let mut bytes = [0u8; 64];
        bytes[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        bytes[4..4 + body.len()].copy_from_slice(body);
        let mut buf = [0u8; 64];
        let cie = load(&bytes, &mut buf).unwrap();
        assert_eq!(cie.version, 3);
        assert!(cie.signal && cie.has_z);
        assert_eq!((cie.fde_enc, cie.lsda_enc), (0x1b, 0x1b));
        assert_eq!(cie.insns_end - cie.insns_start, 3);

        // The old "eh" augmentation: an 8-byte pointer after the string.
        let body: &[u8] = &[
            0, 0, 0, 0, 1, b'e', b'h', 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0x78, 16,
        ];
        let mut bytes = [0u8; 64];
        bytes[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        bytes[4..4 + body.len()].copy_from_slice(body);
        let cie = load(&bytes, &mut buf).unwrap();
        assert!(!cie.has_z);
        assert_eq!((cie.code_align, cie.data_align, cie.ra_reg), (1, -8, 16));
        assert_eq!(cie.fde_enc, DW_EH_PE_ABSPTR);

        // Unknown letters without "z", other versions, an FDE id: refused.
        for (at, v) in [(9, b'Q'), (8, 2), (4, 1)] {
            let mut bytes = GCC_CIE;
            bytes[at] = v;
            assert!(load(&bytes, &mut buf).is_err(), "{at} {v}");
        }
        // An unknown letter after "z" stops the augmentation, the rest is skipped.
        let mut bytes = GCC_CIE;
        bytes[10] = b'Q';
        let cie = load(&bytes, &mut buf).unwrap();
        assert_eq!(cie.fde_enc, DW_EH_PE_ABSPTR);
        assert_eq!(cie.insns_start, 13);
    }

    #[test]
    fn entries_in_64_bit_format_and_bad_lengths() {
        let mut bytes = [0u8; 12 + 24];
        bytes[..4].copy_from_slice(&[0xff; 4]);
        bytes[4..12].copy_from_slice(&24u64.to_le_bytes());
        // 8-byte CIE id, then GCC_CIE's fields after its id.
        bytes[20..36].copy_from_slice(&GCC_CIE[8..]);
        let mut buf = [0u8; 64];
        let cie = load(&bytes, &mut buf).unwrap();
        assert_eq!(cie.fde_enc, 0x1b);

        assert_eq!(load(&[0, 0, 0, 0], &mut buf), Err(CfiError::NoFde));
        assert_eq!(
            load(&[0xf0, 0xff, 0xff, 0xff], &mut buf),
            Err(CfiError::Malformed)
        );
        let mut small = [0u8; 8];
        assert_eq!(load(&GCC_CIE, &mut small), Err(CfiError::TooLong));
        assert_eq!(load(&GCC_CIE[..20], &mut buf), Err(CfiError::Read));
        let mut long = [0u8; 40];
        long[..24].copy_from_slice(&GCC_CIE);
        long[9..20].copy_from_slice(b"zzzzzzzzzzz");
        assert_eq!(load(&long, &mut buf), Err(CfiError::Unsupported));
    }
}
