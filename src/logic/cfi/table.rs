// SPDX-License-Identifier: GPL-2.0

//! The `.eh_frame_hdr` section: the address of `.eh_frame` and a table of (initial
//! location, FDE address) pairs sorted by location, searched by bisection in the task's
//! memory.
//!
//! The table is read in place, one entry per probe, so a lookup costs about
//! `log2(entries)` reads of two values. Entries must have a fixed size (GNU ld and lld emit
//! `datarel|sdata4`); a table longer than [`MAX_TABLE_ENTRIES`] or without a table is
//! refused.

#![forbid(unsafe_code)]

use super::cursor::Cursor;
use super::elf::Object;
use super::elf::Section;
use super::pointer::fixed_size;
use super::pointer::read_encoded;
use super::pointer::read_encoded_at;
use super::pointer::Bases;
use super::pointer::DW_EH_PE_OMIT;
use super::read_mem;
use super::Budget;
use super::CfiError;
use super::Memory;

/// Entries of a binary-search table, at most (4 Mi; libstdc++ has under 5000 FDEs).
pub const MAX_TABLE_ENTRIES: u64 = 1 << 22;

/// A parsed `.eh_frame_hdr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hdr {
    /// Its address (the `datarel` base of its fields).
    pub addr: u64,
    /// The address of `.eh_frame`.
    pub eh_frame: u64,
    /// Entries in the table.
    pub count: u64,
    /// Encoding of the table's values.
    pub table_enc: u8,
    /// Address of the first entry.
    pub table: u64,
    /// Bytes per value (an entry is two values).
    pub value_size: u8,
}

/// What a file's headers say, as the unwinder's caches keep it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableInfo {
    /// Its segments and entry point.
    pub object: Object,
    /// Its `.eh_frame_hdr`, in its own addresses; `None` when it has no usable one.
    pub hdr: Option<Hdr>,
    /// Without a usable `.eh_frame_hdr`: its `.eh_frame` section, found by the section
    /// headers, from which its search table is made ([`super::walk`]); `None` when it has
    /// none either (its frames use the frame-pointer rule), or none could be made.
    pub eh_frame: Option<Section>,
}

/// One table entry: an FDE and the first address it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The first address the FDE covers.
    pub initial: u64,
    /// The address of the FDE.
    pub fde: u64,
}

impl Hdr {
    /// Parses the `.eh_frame_hdr` at `addr`.
    pub fn parse<M: Memory + ?Sized>(
        mem: &mut M,
        budget: &mut Budget,
        addr: u64,
    ) -> Result<Hdr, CfiError> {
        let mut head = [0u8; 4];
        read_mem(mem, budget, addr, &mut head)?;
        let [version, ptr_enc, count_enc, table_enc] = head;
        if version != 1 {
            return Err(CfiError::Unsupported);
        }
        let bases = Bases {
            data: Some(addr),
            ..Bases::default()
        };
        let at = addr.checked_add(4).ok_or(CfiError::Read)?;
        let (eh_frame, at) = read_encoded_at(mem, budget, at, ptr_enc, &bases)?;
        if count_enc == DW_EH_PE_OMIT || table_enc == DW_EH_PE_OMIT {
            return Err(CfiError::Unsupported);
        }
        let (count, table) = read_encoded_at(mem, budget, at, count_enc, &bases)?;
        if count > MAX_TABLE_ENTRIES {
            return Err(CfiError::TooLong);
        }
        let value_size = fixed_size(table_enc)?.ok_or(CfiError::Unsupported)?;
        let value_size = u8::try_from(value_size).map_err(|_| CfiError::Malformed)?;
        Ok(Hdr {
            addr,
            eh_frame,
            count,
            table_enc,
            table,
            value_size,
        })
    }

    /// Entry `i` of the table.
    pub fn entry<M: Memory + ?Sized>(
        &self,
        mem: &mut M,
        budget: &mut Budget,
        i: u64,
    ) -> Result<Entry, CfiError> {
        if i >= self.count {
            return Err(CfiError::NoFde);
        }
        let size = usize::from(self.value_size);
        let at = i
            .checked_mul(2 * u64::from(self.value_size))
            .and_then(|off| self.table.checked_add(off))
            .ok_or(CfiError::Read)?;
        let mut buf = [0u8; 16];
        let dst = buf.get_mut(..2 * size).ok_or(CfiError::Malformed)?;
        read_mem(mem, budget, at, dst)?;
        let bases = Bases {
            data: Some(self.addr),
            ..Bases::default()
        };
        let mut c = Cursor::new(dst, at);
        let initial = read_encoded(&mut c, self.table_enc, &bases)?;
        let fde = read_encoded(&mut c, self.table_enc, &bases)?;
        Ok(Entry { initial, fde })
    }

    /// The entry with the greatest initial location at or below `pc`: the only FDE that
    /// can cover `pc` (the caller checks that it does). At most 64 probes.
    pub fn lookup<M: Memory + ?Sized>(
        &self,
        mem: &mut M,
        budget: &mut Budget,
        pc: u64,
    ) -> Result<Entry, CfiError> {
        // Invariant: entries below `lo` start at or below pc, entries from `hi` above it.
        let mut lo = 0u64;
        let mut hi = self.count;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mem, budget, mid)?.initial <= pc {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let found = lo.checked_sub(1).ok_or(CfiError::NoFde)?;
        self.entry(mem, budget, found)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Slice;
    use super::*;

    /// A header at 0x1000 with `n` datarel|sdata4 entries: entry i starts at 0x100 * (i+1)
    /// above the header, its FDE at 0x10 * i above it.
    fn image(n: u32) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[..4].copy_from_slice(&[1, 0x1b, 0x03, 0x3b]);
        b[4..8].copy_from_slice(&0x0800i32.to_le_bytes()); // .eh_frame at 0x1804
        b[8..12].copy_from_slice(&n.to_le_bytes());
        for i in 0..n as usize {
            let at = 12 + 8 * i;
            b[at..at + 4].copy_from_slice(&(0x100 * (i as i32 + 1)).to_le_bytes());
            b[at + 4..at + 8].copy_from_slice(&(0x10 * i as i32).to_le_bytes());
        }
        b
    }

    #[test]
    fn parses_and_bisects() {
        let b = image(6);
        let mut m = Slice {
            base: 0x1000,
            bytes: &b,
        };
        let mut budget = Budget::DEFAULT;
        let h = Hdr::parse(&mut m, &mut budget, 0x1000).unwrap();
        assert_eq!(h.eh_frame, 0x1804);
        assert_eq!(h.count, 6);
        assert_eq!(h.table, 0x100c);
        assert_eq!(h.value_size, 4);
        assert_eq!(h.lookup(&mut m, &mut budget, 0x10ff), Err(CfiError::NoFde));
        for i in 0..6u64 {
            let want = Entry {
                initial: 0x1000 + 0x100 * (i + 1),
                fde: 0x1000 + 0x10 * i,
            };
            for pc in [want.initial, want.initial + 0xff] {
                assert_eq!(h.lookup(&mut m, &mut budget, pc), Ok(want));
            }
        }
        assert_eq!(h.lookup(&mut m, &mut budget, u64::MAX).unwrap().fde, 0x1050);
        assert_eq!(h.entry(&mut m, &mut budget, 6), Err(CfiError::NoFde));
    }

    #[test]
    fn refuses_what_it_cannot_bisect() {
        let mut b = image(2);
        let mut budget = Budget::DEFAULT;
        b[0] = 2;
        let m = &mut Slice {
            base: 0x1000,
            bytes: &b,
        };
        assert_eq!(
            Hdr::parse(m, &mut budget, 0x1000),
            Err(CfiError::Unsupported)
        );
        let mut b = image(2);
        b[3] = 0x01; // uleb128 table
        let m = &mut Slice {
            base: 0x1000,
            bytes: &b,
        };
        assert_eq!(
            Hdr::parse(m, &mut budget, 0x1000),
            Err(CfiError::Unsupported)
        );
        let mut b = image(2);
        b[3] = DW_EH_PE_OMIT;
        let m = &mut Slice {
            base: 0x1000,
            bytes: &b,
        };
        assert_eq!(
            Hdr::parse(m, &mut budget, 0x1000),
            Err(CfiError::Unsupported)
        );
        let mut b = image(2);
        b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let m = &mut Slice {
            base: 0x1000,
            bytes: &b,
        };
        assert_eq!(Hdr::parse(m, &mut budget, 0x1000), Err(CfiError::TooLong));
        // A count past the end of memory fails to read, it does not loop.
        let mut b = image(2);
        b[8..12].copy_from_slice(&1000u32.to_le_bytes());
        let m = &mut Slice {
            base: 0x1000,
            bytes: &b,
        };
        let h = Hdr::parse(m, &mut budget, 0x1000).unwrap();
        assert_eq!(h.lookup(m, &mut budget, 0x1_0000), Err(CfiError::Read));
    }

    #[test]
    fn other_encodings() {
        // udata8 absolute entries, udata2 count, absptr .eh_frame pointer.
        let mut b = [0u8; 4 + 8 + 2 + 32];
        b[..4].copy_from_slice(&[1, 0x00, 0x02, 0x04]);
        b[4..12].copy_from_slice(&0x9000u64.to_le_bytes());
        b[12..14].copy_from_slice(&2u16.to_le_bytes());
        for (i, v) in [0x100u64, 0x8000, 0x200, 0x8010].iter().enumerate() {
            b[14 + 8 * i..22 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        let mut m = Slice {
            base: 0x1000,
            bytes: &b,
        };
        let mut budget = Budget::DEFAULT;
        let h = Hdr::parse(&mut m, &mut budget, 0x1000).unwrap();
        assert_eq!((h.eh_frame, h.count, h.value_size), (0x9000, 2, 8));
        let e = h.lookup(&mut m, &mut budget, 0x250).unwrap();
        assert_eq!(e.fde, 0x8010);
    }
}
