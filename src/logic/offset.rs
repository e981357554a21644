// SPDX-License-Identifier: GPL-2.0

//! Where a user-space address lies in the file its mapping maps.
//!
//! A frame at `addr` inside a VMA `[start, end)` that maps its file from page `pgoff` on is at
//! file offset `addr - start + (pgoff << PAGE_SHIFT)`. The kernel values are trusted, the
//! arithmetic is still checked: a result that does not fit is reported, never wrapped.

#![forbid(unsafe_code)]

/// The three VMA fields the translation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping (`vm_start`).
    pub start: u64,
    /// One past its last address (`vm_end`).
    pub end: u64,
    /// Offset of `start` in the file, in pages (`vm_pgoff`).
    pub pgoff: u64,
}

/// Why an address could not be translated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetError {
    /// The address is not inside the mapping.
    OutsideMapping,
    /// `pgoff << page_shift` or the sum does not fit in 64 bits.
    Overflow,
}

impl Mapping {
    /// Whether `addr` lies inside the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// The file offset of `addr`, for pages of `1 << page_shift` bytes.
    pub fn file_offset(&self, addr: u64, page_shift: u32) -> Result<u64, OffsetError> {
        if !self.contains(addr) {
            return Err(OffsetError::OutsideMapping);
        }
        let base = self
            .pgoff
            .checked_mul(1u64.checked_shl(page_shift).ok_or(OffsetError::Overflow)?)
            .ok_or(OffsetError::Overflow)?;
        (addr - self.start)
            .checked_add(base)
            .ok_or(OffsetError::Overflow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE_SHIFT: u32 = 12;

    #[test]
    fn offset_in_first_mapping_of_a_file() {
        let m = Mapping {
            start: 0x5555_5555_4000,
            end: 0x5555_5555_5000,
            pgoff: 0,
        };
        assert_eq!(m.file_offset(0x5555_5555_4123, PAGE_SHIFT), Ok(0x123));
    }

    #[test]
    fn offset_counts_pgoff_in_pages() {
        // A text segment mapped from file offset 0x1000 (pgoff 1), as ld.so maps .text.
        let m = Mapping {
            start: 0x7f00_0000_1000,
            end: 0x7f00_0000_3000,
            pgoff: 1,
        };
        assert_eq!(m.file_offset(0x7f00_0000_1010, PAGE_SHIFT), Ok(0x1010));
        assert_eq!(m.file_offset(0x7f00_0000_2fff, PAGE_SHIFT), Ok(0x2fff));
    }

    #[test]
    fn bounds_are_half_open() {
        let m = Mapping {
            start: 0x1000,
            end: 0x2000,
            pgoff: 0,
        };
        assert_eq!(m.file_offset(0x1000, PAGE_SHIFT), Ok(0));
        assert_eq!(
            m.file_offset(0x2000, PAGE_SHIFT),
            Err(OffsetError::OutsideMapping)
        );
        assert_eq!(
            m.file_offset(0xfff, PAGE_SHIFT),
            Err(OffsetError::OutsideMapping)
        );
    }

    #[test]
    fn overflow_is_reported_not_wrapped() {
        let huge = Mapping {
            start: 0x1000,
            end: 0x2000,
            pgoff: u64::MAX >> 4,
        };
        assert_eq!(
            huge.file_offset(0x1000, PAGE_SHIFT),
            Err(OffsetError::Overflow)
        );
        let edge = Mapping {
            start: 0,
            end: u64::MAX,
            pgoff: (u64::MAX >> PAGE_SHIFT),
        };
        assert_eq!(
            edge.file_offset(0x1000, PAGE_SHIFT),
            Err(OffsetError::Overflow)
        );
        assert_eq!(
            edge.file_offset(0, PAGE_SHIFT),
            Ok((u64::MAX >> PAGE_SHIFT) << PAGE_SHIFT)
        );
        let m = Mapping {
            start: 0,
            end: 0x1000,
            pgoff: 0,
        };
        assert_eq!(m.file_offset(0, 64), Err(OffsetError::Overflow));
    }
}
