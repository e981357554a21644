// SPDX-License-Identifier: GPL-2.0

//! A bounds-checked reader over untrusted bytes: every read is `get(..)` and `checked_*`,
//! and running out of input is an error naming the offset, never a panic.

use crate::error::{Error, Result};

/// Byte order of the traced machine, from the file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    pub fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }

    pub fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }

    pub fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }

    /// An unsigned value of 1, 2, 4 or 8 bytes at the start of `b`.
    pub fn uint(self, b: &[u8], size: usize) -> Option<u64> {
        let b = b.get(..size)?;
        Some(match size {
            1 => u64::from(b[0]),
            2 => u64::from(self.u16(b.try_into().ok()?)),
            4 => u64::from(self.u32(b.try_into().ok()?)),
            8 => self.u64(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// A cursor over `data`, whose first byte is at file offset `base` (for error messages).
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    pub endian: Endian,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8], base: u64, endian: Endian) -> Self {
        Cursor {
            data,
            pos: 0,
            base,
            endian,
        }
    }

    /// The file offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.data.get(self.pos..end)) {
            Some(b) => {
                self.pos += n;
                Ok(b)
            }
            None => Err(Error::at(
                format!(
                    "truncated: {what} needs {n} bytes, {} left",
                    self.remaining()
                ),
                self.offset(),
            )),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let b = self.take(N, what)?;
        // The slice is N bytes long: take() returned exactly that many.
        let mut a = [0; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &str) -> Result<u16> {
        let a = self.array(what)?;
        Ok(self.endian.u16(a))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32> {
        let a = self.array(what)?;
        Ok(self.endian.u32(a))
    }

    pub fn u64(&mut self, what: &str) -> Result<u64> {
        let a = self.array(what)?;
        Ok(self.endian.u64(a))
    }

    /// A NUL-terminated string; the NUL is consumed, not returned.
    pub fn cstr(&mut self, what: &str) -> Result<&'a [u8]> {
        let rest = &self.data[self.pos..];
        match rest.iter().position(|&b| b == 0) {
            Some(n) => {
                self.pos += n + 1;
                Ok(&rest[..n])
            }
            None => Err(Error::at(
                format!("truncated: {what} has no terminating NUL"),
                self.offset(),
            )),
        }
    }

    /// A length that must fit what is left, as a `usize`.
    pub fn len(&self, n: u64, what: &str) -> Result<usize> {
        match usize::try_from(n) {
            Ok(n) if n <= self.remaining() => Ok(n),
            _ => Err(Error::at(
                format!(
                    "{what}: size {n} is larger than the {} bytes left",
                    self.remaining()
                ),
                self.offset(),
            )),
        }
    }
}
