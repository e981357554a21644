// SPDX-License-Identifier: GPL-2.0

//! The `DW_EH_PE_*` pointer encodings of `.eh_frame` and `.eh_frame_hdr` (LSB, "Exception
//! Frames"): a value format in the low nibble, how to apply it in the high one.
//!
//! Formats: absolute pointer (8 bytes here), `udata2/4/8`, `sdata2/4/8`, `uleb128`,
//! `sleb128`. Applications: absolute, `pcrel` (from the field's own address), `datarel`,
//! `textrel` and `funcrel` (from a base the caller gives, or unsupported without one).
//! `aligned` and `indirect` are refused with [`CfiError::Unsupported`]: no x86-64 toolchain
//! emits them where the unwinder needs a value (personality pointers are skipped, not read).

#![forbid(unsafe_code)]

use super::cursor::Cursor;
use super::read_mem;
use super::Budget;
use super::CfiError;
use super::Memory;

/// Absolute pointer, address-sized (8 bytes on x86-64).
pub const DW_EH_PE_ABSPTR: u8 = 0x00;
/// Unsigned LEB128.
pub const DW_EH_PE_ULEB128: u8 = 0x01;
/// Unsigned 16-bit.
pub const DW_EH_PE_UDATA2: u8 = 0x02;
/// Unsigned 32-bit.
pub const DW_EH_PE_UDATA4: u8 = 0x03;
/// Unsigned 64-bit.
pub const DW_EH_PE_UDATA8: u8 = 0x04;
/// Signed LEB128.
pub const DW_EH_PE_SLEB128: u8 = 0x09;
/// Signed 16-bit.
pub const DW_EH_PE_SDATA2: u8 = 0x0a;
/// Signed 32-bit.
pub const DW_EH_PE_SDATA4: u8 = 0x0b;
/// Signed 64-bit.
pub const DW_EH_PE_SDATA8: u8 = 0x0c;
/// Relative to the address of the field.
pub const DW_EH_PE_PCREL: u8 = 0x10;
/// Relative to the start of the text section.
pub const DW_EH_PE_TEXTREL: u8 = 0x20;
/// Relative to the data base: the start of `.eh_frame_hdr` in that section.
pub const DW_EH_PE_DATAREL: u8 = 0x30;
/// Relative to the start of the function.
pub const DW_EH_PE_FUNCREL: u8 = 0x40;
/// Aligned to the address size.
pub const DW_EH_PE_ALIGNED: u8 = 0x50;
/// The value is the address of the pointer.
pub const DW_EH_PE_INDIRECT: u8 = 0x80;
/// No value.
pub const DW_EH_PE_OMIT: u8 = 0xff;

/// The bases `datarel`, `textrel` and `funcrel` values are relative to, when known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bases {
    /// The data base (the address of `.eh_frame_hdr` for its own fields).
    pub data: Option<u64>,
    /// The text base.
    pub text: Option<u64>,
    /// The start of the function.
    pub func: Option<u64>,
}

/// The size of a value in format `enc` (the low nibble), if it is fixed.
pub fn fixed_size(enc: u8) -> Result<Option<usize>, CfiError> {
    match enc & 0x0f {
        DW_EH_PE_ABSPTR => Ok(Some(8)),
        DW_EH_PE_UDATA2 | DW_EH_PE_SDATA2 => Ok(Some(2)),
        DW_EH_PE_UDATA4 | DW_EH_PE_SDATA4 => Ok(Some(4)),
        DW_EH_PE_UDATA8 | DW_EH_PE_SDATA8 => Ok(Some(8)),
        DW_EH_PE_ULEB128 | DW_EH_PE_SLEB128 => Ok(None),
        _ => Err(CfiError::Malformed),
    }
}

/// Reads the raw value of format `enc` (low nibble only), sign-extended for signed ones.
pub fn read_value(c: &mut Cursor<'_>, enc: u8) -> Result<u64, CfiError> {
    Ok(match enc & 0x0f {
        DW_EH_PE_ABSPTR | DW_EH_PE_UDATA8 | DW_EH_PE_SDATA8 => c.u64()?,
        DW_EH_PE_ULEB128 => c.uleb()?,
        DW_EH_PE_UDATA2 => u64::from(c.u16()?),
        DW_EH_PE_UDATA4 => u64::from(c.u32()?),
        DW_EH_PE_SLEB128 => c.sleb()? as u64,
        DW_EH_PE_SDATA2 => i64::from(c.u16()? as i16) as u64,
        DW_EH_PE_SDATA4 => i64::from(c.u32()? as i32) as u64,
        _ => return Err(CfiError::Malformed),
    })
}

/// Reads a pointer encoded as `enc` and applies it; [`DW_EH_PE_OMIT`] is not a value and
/// fails as malformed.
pub fn read_encoded(c: &mut Cursor<'_>, enc: u8, bases: &Bases) -> Result<u64, CfiError> {
    if enc == DW_EH_PE_OMIT {
        return Err(CfiError::Malformed);
    }
    if enc & DW_EH_PE_INDIRECT != 0 {
        return Err(CfiError::Unsupported);
    }
    let field = c.addr();
    let value = read_value(c, enc)?;
    let base = match enc & 0x70 {
        DW_EH_PE_ABSPTR => 0,
        DW_EH_PE_PCREL => field,
        DW_EH_PE_TEXTREL => bases.text.ok_or(CfiError::Unsupported)?,
        DW_EH_PE_DATAREL => bases.data.ok_or(CfiError::Unsupported)?,
        DW_EH_PE_FUNCREL => bases.func.ok_or(CfiError::Unsupported)?,
        DW_EH_PE_ALIGNED => return Err(CfiError::Unsupported),
        _ => return Err(CfiError::Malformed),
    };
    Ok(base.wrapping_add(value))
}

/// The encoding of the search tables every x86-64 linker writes in `.eh_frame_hdr`
/// (GNU ld, gold, lld, mold): a signed 4-byte offset from the header's address.
pub const DATAREL_SDATA4: u8 = DW_EH_PE_DATAREL | DW_EH_PE_SDATA4;

/// The two values of a search table entry encoded as [`DATAREL_SDATA4`] (8 bytes: each as
/// [`read_encoded`] reads it, from `data`, the header's address), without going through
/// the general decoder: a table of a few hundred thousand entries is read at first sight.
#[inline(always)]
pub fn datarel_sdata4_pair(entry: &[u8; 8], data: u64) -> (u64, u64) {
    let [a0, a1, a2, a3, b0, b1, b2, b3] = *entry;
    let a = i32::from_le_bytes([a0, a1, a2, a3]);
    let b = i32::from_le_bytes([b0, b1, b2, b3]);
    (
        data.wrapping_add(i64::from(a) as u64),
        data.wrapping_add(i64::from(b) as u64),
    )
}

/// Reads a pointer encoded as `enc` straight from memory at `addr`; returns it and the
/// address after it. LEB128 values are read a byte at a time, so nothing past the value is
/// touched.
pub fn read_encoded_at<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    addr: u64,
    enc: u8,
    bases: &Bases,
) -> Result<(u64, u64), CfiError> {
    let mut buf = [0u8; 10];
    let len = match fixed_size(enc)? {
        Some(n) => {
            let dst = buf.get_mut(..n).ok_or(CfiError::Malformed)?;
            read_mem(mem, budget, addr, dst)?;
            n
        }
        None => {
            let mut n = 0;
            loop {
                let at = addr.checked_add(n as u64).ok_or(CfiError::Read)?;
                let dst = buf.get_mut(n..n + 1).ok_or(CfiError::Malformed)?;
                read_mem(mem, budget, at, dst)?;
                n += 1;
                if dst.first().is_some_and(|b| b & 0x80 == 0) {
                    break;
                }
            }
            n
        }
    };
    let bytes = buf.get(..len).ok_or(CfiError::Malformed)?;
    let mut c = Cursor::new(bytes, addr);
    let value = read_encoded(&mut c, enc, bases)?;
    Ok((value, addr.wrapping_add(len as u64)))
}

#[cfg(test)]
mod tests {
    use super::super::Slice;
    use super::*;

    fn dec(bytes: &[u8], enc: u8) -> Result<u64, CfiError> {
        let bases = Bases {
            data: Some(0x5000),
            text: None,
            func: Some(0x7000),
        };
        read_encoded(&mut Cursor::new(bytes, 0x1000), enc, &bases)
    }

    #[test]
    fn a_search_table_entry_reads_as_the_general_decoder_reads_it() {
        let bases = Bases {
            data: Some(0x7f00_0000_1000),
            ..Bases::default()
        };
        for (a, b) in [
            (0i32, 4i32),
            (-1, 1),
            (i32::MIN, i32::MAX),
            (-0x1000, 0x7654_3210),
        ] {
            let mut e = [0u8; 8];
            e[..4].copy_from_slice(&a.to_le_bytes());
            e[4..].copy_from_slice(&b.to_le_bytes());
            let mut c = Cursor::new(&e, 0x2000);
            let general = (
                read_encoded(&mut c, DATAREL_SDATA4, &bases),
                read_encoded(&mut c, DATAREL_SDATA4, &bases),
            );
            let fast = datarel_sdata4_pair(&e, 0x7f00_0000_1000);
            assert_eq!((Ok(fast.0), Ok(fast.1)), general, "{a} {b}");
        }
    }

    #[test]
    fn every_format() {
        let word = [0x88u8, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11];
        assert_eq!(dec(&word, DW_EH_PE_ABSPTR), Ok(0x1122_3344_5566_7788));
        assert_eq!(dec(&word, DW_EH_PE_UDATA8), Ok(0x1122_3344_5566_7788));
        assert_eq!(dec(&word, DW_EH_PE_SDATA8), Ok(0x1122_3344_5566_7788));
        assert_eq!(dec(&[0xfe, 0xff], DW_EH_PE_UDATA2), Ok(0xfffe));
        assert_eq!(dec(&[0xfe, 0xff], DW_EH_PE_SDATA2), Ok(-2i64 as u64));
        assert_eq!(
            dec(&[0xfc, 0xff, 0xff, 0xff], DW_EH_PE_UDATA4),
            Ok(0xffff_fffc)
        );
        assert_eq!(
            dec(&[0xfc, 0xff, 0xff, 0xff], DW_EH_PE_SDATA4),
            Ok(-4i64 as u64)
        );
        assert_eq!(dec(&[0x80, 0x01], DW_EH_PE_ULEB128), Ok(128));
        assert_eq!(dec(&[0x7f], DW_EH_PE_SLEB128), Ok(-1i64 as u64));
        assert_eq!(dec(&[0x00], 0x05), Err(CfiError::Malformed));
        assert_eq!(dec(&[0xfe], DW_EH_PE_UDATA2), Err(CfiError::Malformed));
    }

    #[test]
    fn every_application() {
        let m4 = [0xfc, 0xff, 0xff, 0xff];
        assert_eq!(dec(&m4, DW_EH_PE_PCREL | DW_EH_PE_SDATA4), Ok(0xffc));
        assert_eq!(dec(&m4, DW_EH_PE_DATAREL | DW_EH_PE_SDATA4), Ok(0x4ffc));
        assert_eq!(dec(&m4, DW_EH_PE_FUNCREL | DW_EH_PE_SDATA4), Ok(0x6ffc));
        assert_eq!(
            dec(&m4, DW_EH_PE_TEXTREL | DW_EH_PE_SDATA4),
            Err(CfiError::Unsupported)
        );
        assert_eq!(
            dec(&m4, DW_EH_PE_ALIGNED | DW_EH_PE_SDATA4),
            Err(CfiError::Unsupported)
        );
        assert_eq!(
            dec(&m4, DW_EH_PE_INDIRECT | DW_EH_PE_PCREL | DW_EH_PE_SDATA4),
            Err(CfiError::Unsupported)
        );
        assert_eq!(dec(&m4, 0x60 | DW_EH_PE_SDATA4), Err(CfiError::Malformed));
        assert_eq!(dec(&m4, DW_EH_PE_OMIT), Err(CfiError::Malformed));
        // pcrel wraps like address arithmetic.
        let mut c = Cursor::new(&m4, 0);
        assert_eq!(
            read_encoded(&mut c, DW_EH_PE_PCREL | DW_EH_PE_SDATA4, &Bases::default()),
            Ok(u64::MAX - 3)
        );
    }

    #[test]
    fn from_memory() {
        let bytes = [0xaa, 0x80, 0x01, 0xfc, 0xff, 0xff, 0xff];
        let mut m = Slice {
            base: 0x2000,
            bytes: &bytes,
        };
        let mut budget = Budget::DEFAULT;
        let b = Bases::default();
        let got = read_encoded_at(&mut m, &mut budget, 0x2001, DW_EH_PE_ULEB128, &b);
        assert_eq!(got, Ok((128, 0x2003)));
        let enc = DW_EH_PE_PCREL | DW_EH_PE_SDATA4;
        let got = read_encoded_at(&mut m, &mut budget, 0x2003, enc, &b);
        assert_eq!(got, Ok((0x1fff, 0x2007)));
        let got = read_encoded_at(&mut m, &mut budget, 0x2004, enc, &b);
        assert_eq!(got, Err(CfiError::Read));
        // An unterminated LEB128 runs into the end of memory, not past ten bytes.
        let ones = [0xffu8; 16];
        let mut m = Slice {
            base: 0,
            bytes: &ones,
        };
        let got = read_encoded_at(&mut m, &mut budget, 0, DW_EH_PE_ULEB128, &b);
        assert_eq!(got, Err(CfiError::Malformed));
    }
}
