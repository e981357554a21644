// SPDX-License-Identifier: GPL-2.0

//! A bounds-checked little-endian reader over bytes copied from the task, which knows the
//! address the bytes came from (for `DW_EH_PE_pcrel` pointers).
//!
//! Running off the end is [`CfiError::Malformed`]; LEB128 numbers longer than 10 bytes or
//! wider than 64 bits are malformed too.

#![forbid(unsafe_code)]

use super::CfiError;

/// Reads values one after the other from `buf`, which was copied from address `addr`.
#[derive(Clone, Copy, Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    addr: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`, whose first byte is at address `addr`.
    pub fn new(buf: &'a [u8], addr: u64) -> Cursor<'a> {
        Cursor { buf, pos: 0, addr }
    }

    /// The offset of the next byte in the buffer.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The address of the next byte.
    pub fn addr(&self) -> u64 {
        self.addr.wrapping_add(self.pos as u64)
    }

    /// Whether all bytes have been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The next `n` bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], CfiError> {
        let end = self.pos.checked_add(n).ok_or(CfiError::Malformed)?;
        let b = self.buf.get(self.pos..end).ok_or(CfiError::Malformed)?;
        self.pos = end;
        Ok(b)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: u64) -> Result<(), CfiError> {
        let n = usize::try_from(n).map_err(|_| CfiError::Malformed)?;
        self.bytes(n).map(|_| ())
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], CfiError> {
        self.bytes(N)?.try_into().map_err(|_| CfiError::Malformed)
    }

    /// A byte.
    #[inline(always)]
    pub fn u8(&mut self) -> Result<u8, CfiError> {
        let b = *self.buf.get(self.pos).ok_or(CfiError::Malformed)?;
        self.pos += 1;
        Ok(b)
    }

    /// A 16-bit value.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, CfiError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A 32-bit value.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, CfiError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A 64-bit value.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, CfiError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// An unsigned LEB128 number. Always inlined: most are one byte (an FDE's
    /// augmentation length, a CFA instruction's operand), read in a few instructions, and
    /// a call made the callers spill their registers around it.
    #[inline(always)]
    pub fn uleb(&mut self) -> Result<u64, CfiError> {
        // Most are one byte.
        let b = self.u8()?;
        if b & 0x80 == 0 {
            return Ok(u64::from(b));
        }
        self.pos -= 1;
        self.uleb_long()
    }

    fn uleb_long(&mut self) -> Result<u64, CfiError> {
        let mut value = 0u64;
        for i in 0..10u32 {
            let b = self.u8()?;
            let low = u64::from(b & 0x7f);
            let shift = i * 7;
            if shift == 63 && low > 1 {
                return Err(CfiError::Malformed);
            }
            value |= low << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(CfiError::Malformed)
    }

    /// A signed LEB128 number.
    pub fn sleb(&mut self) -> Result<i64, CfiError> {
        let mut value = 0i64;
        for i in 0..10u32 {
            let b = self.u8()?;
            let shift = i * 7;
            value |= i64::from(b & 0x7f).wrapping_shl(shift);
            if b & 0x80 == 0 {
                if shift < 57 && b & 0x40 != 0 {
                    value |= (-1i64).wrapping_shl(shift + 7);
                }
                return Ok(value);
            }
        }
        Err(CfiError::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_width_values() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
        assert_eq!(Cursor::new(&b[..7], 0).u64(), Err(CfiError::Malformed));
        let mut c = Cursor::new(&b, 0x100);
        assert_eq!(c.u8(), Ok(1));
        assert_eq!(c.u16(), Ok(0x0302));
        assert_eq!(c.addr(), 0x103);
        assert_eq!(c.u32(), Ok(0x0706_0504));
        assert_eq!(c.pos(), 7);
        assert_eq!(c.u64(), Ok(0x0f0e_0d0c_0b0a_0908));
        assert!(c.is_empty());
        assert_eq!(c.u8(), Err(CfiError::Malformed));
    }

    #[test]
    fn leb128() {
        let mut c = Cursor::new(&[0xe5, 0x8e, 0x26], 0);
        assert_eq!(c.uleb(), Ok(624_485));
        let mut c = Cursor::new(&[0xc0, 0xbb, 0x78], 0);
        assert_eq!(c.sleb(), Ok(-123_456));
        let mut c = Cursor::new(&[0x7f], 0);
        assert_eq!(c.sleb(), Ok(-1));
        let mut c = Cursor::new(&[0x78], 0);
        assert_eq!(c.sleb(), Ok(-8));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Cursor::new(&max, 0).uleb(), Ok(u64::MAX));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(Cursor::new(&over, 0).uleb(), Err(CfiError::Malformed));
        let long = [0x80u8; 11];
        assert_eq!(Cursor::new(&long, 0).uleb(), Err(CfiError::Malformed));
        assert_eq!(Cursor::new(&long, 0).sleb(), Err(CfiError::Malformed));
        let min = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f];
        assert_eq!(Cursor::new(&min, 0).sleb(), Ok(i64::MIN));
        assert_eq!(Cursor::new(&[0x80], 0).uleb(), Err(CfiError::Malformed));
    }

    #[test]
    fn bytes_and_skip_stay_inside() {
        let mut c = Cursor::new(&[1, 2, 3], 0);
        assert_eq!(c.bytes(2), Ok(&[1u8, 2][..]));
        assert_eq!(c.skip(2), Err(CfiError::Malformed));
        assert_eq!(c.skip(u64::MAX), Err(CfiError::Malformed));
        assert_eq!(c.skip(1), Ok(()));
    }
}
