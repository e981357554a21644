// SPDX-License-Identifier: GPL-2.0

//! A search table from `.eh_frame` itself, for an object linked without `.eh_frame_hdr`
//! (a static binary such as Debian's busybox): every entry of the section walked once, in
//! order, each FDE's first address decoded with its CIE's pointer encoding (augmentation
//! `R`), the pairs handed to the caller, who sorts them ([`crate::logic::ftable::sort`]).
//!
//! The section is read a window of the caller's buffer at a time (an entry that runs past
//! the window is read again from its start). Everything is the file's word, checked: an
//! entry that runs past the section, a CIE pointer outside it or to an FDE, a pointer
//! encoding that cannot be decoded, more than [`MAX_TABLE_ENTRIES`] FDEs or a spent budget
//! end the walk with an error, and the object gets no table. No recursion, and every step
//! moves forward in the section.

#![forbid(unsafe_code)]

use super::cie::load_entry_head;
use super::cie::parse_cie;
use super::cie::RawEntry;
use super::elf::Section;
use super::pointer::read_encoded;
use super::pointer::read_value;
use super::pointer::Bases;
use super::read_mem;
use super::table::Entry;
use super::table::MAX_TABLE_ENTRIES;
use super::Budget;
use super::CfiError;
use super::Memory;

/// CIEs whose FDE pointer encoding the walk remembers: busybox has 5, libc 4.
const CIES: usize = 8;

/// Bytes of an entry the window must hold before it is decoded: the 64-bit format's
/// length and CIE pointer (20 bytes) and two 8-byte pointers.
const HEAD: u64 = 36;

/// Bytes of a CIE read when it is not one the walk passed: its augmentation lies in the
/// first of them.
const CIE_READ: usize = 128;

/// The CIEs seen, by address, with their FDEs' pointer encoding.
struct Cies {
    seen: [(u64, u8); CIES],
    next: usize,
}

impl Cies {
    fn get(&self, addr: u64) -> Option<u8> {
        self.seen
            .iter()
            .find(|(a, _)| *a == addr && addr != 0)
            .map(|&(_, enc)| enc)
    }

    fn put(&mut self, addr: u64, enc: u8) {
        if let Some(slot) = self.seen.get_mut(self.next % CIES) {
            *slot = (addr, enc);
        }
        self.next = self.next.wrapping_add(1);
    }
}

/// Walks the `.eh_frame` `section`, read from `mem` by address into the window `buf` (at
/// least [`HEAD`] bytes; the FDE scratch buffer), and hands `found` each FDE that covers at
/// least a byte: its first address and its own address (with `mem`, which the walk does
/// not use meanwhile). A zero length ends the section
/// (the terminator `crtend.o` writes). Returns the FDEs handed over; an error when the
/// section is not one to build a table from, or `found` returns `false` (which stops the
/// walk); [`CfiError::Read`] when a page could not be read now.
pub fn walk_eh_frame<M: Memory + ?Sized, F: FnMut(&mut M, Entry) -> bool>(
    mem: &mut M,
    budget: &mut Budget,
    section: Section,
    buf: &mut [u8],
    mut found: F,
) -> Result<usize, CfiError> {
    let end = section
        .addr
        .checked_add(section.size)
        .ok_or(CfiError::Malformed)?;
    let cap = buf.len() as u64;
    if cap < HEAD {
        return Err(CfiError::TooLong);
    }
    let mut cies = Cies {
        seen: [(0, 0); CIES],
        next: 0,
    };
    // The window: `buf[..len]` holds the bytes at `base`.
    let (mut base, mut len) = (section.addr, 0u64);
    let mut at = section.addr;
    let mut n = 0usize;
    while at < end {
        // The entry's first bytes, then as many of them as the window holds.
        let mut need = HEAD.min(end - at);
        let mut entry = None;
        for _ in 0..2 {
            if at < base || at - base + need > len {
                base = at;
                len = cap.min(end - at);
                let window = buf.get_mut(..len as usize).ok_or(CfiError::Malformed)?;
                read_mem(mem, budget, base, window)?;
            }
            let held = buf
                .get((at - base) as usize..len as usize)
                .ok_or(CfiError::Malformed)?;
            let (body_len, head) = match held.first_chunk::<4>().map(|b| u32::from_le_bytes(*b)) {
                None => return Err(CfiError::Malformed),
                Some(0) => return Ok(n),
                Some(0xffff_ffff) => {
                    let long = held.get(4..12).ok_or(CfiError::Malformed)?;
                    (le64(long), 12u64)
                }
                Some(0xffff_fff0..=0xffff_fffe) => return Err(CfiError::Malformed),
                Some(short) => (u64::from(short), 4u64),
            };
            let total = body_len.checked_add(head).ok_or(CfiError::Malformed)?;
            if total > end - at {
                return Err(CfiError::Malformed);
            }
            let want = total.min(cap);
            if want <= held.len() as u64 {
                entry = Some((body_len, head, want));
                break;
            }
            need = want;
        }
        let Some((body_len, head, want)) = entry else {
            return Err(CfiError::Malformed);
        };
        let from = (at - base) as usize;
        let bytes = buf
            .get(from..from + want as usize)
            .ok_or(CfiError::Malformed)?;
        let is64 = head == 12;
        let body_addr = at + head;
        let body = bytes.get(head as usize..).ok_or(CfiError::Malformed)?;
        let raw = RawEntry {
            addr: at,
            is64,
            body,
            len: usize::try_from(body_len).map_err(|_| CfiError::TooLong)?,
            at: head as usize,
            body_addr,
        };
        let mut c = raw.cursor();
        let id = raw.id(&mut c)?;
        if id == 0 {
            let cie = parse_cie(&raw)?;
            cies.put(at, cie.fde_enc);
        } else {
            // The CIE pointer counts back from its own field, to a CIE in the section.
            let cie_at = body_addr
                .checked_sub(id)
                .filter(|&a| a >= section.addr && a < end)
                .ok_or(CfiError::Malformed)?;
            let enc = match cies.get(cie_at) {
                Some(enc) => enc,
                None => {
                    let mut cbuf = [0u8; CIE_READ];
                    let ce = load_entry_head(mem, budget, cie_at, &mut cbuf)?;
                    let enc = parse_cie(&ce)?.fde_enc;
                    cies.put(cie_at, enc);
                    enc
                }
            };
            let initial = read_encoded(&mut c, enc, &Bases::default())?;
            let range = read_value(&mut c, enc)?;
            if range != 0 {
                initial.checked_add(range).ok_or(CfiError::Malformed)?;
                if n as u64 >= MAX_TABLE_ENTRIES {
                    return Err(CfiError::TooLong);
                }
                if !found(mem, Entry { initial, fde: at }) {
                    return Err(CfiError::TooLong);
                }
                n += 1;
            }
        }
        // Forward by a whole entry: at least 4 bytes.
        at = at.checked_add(head + body_len).ok_or(CfiError::Malformed)?;
    }
    Ok(n)
}

/// The little-endian 64-bit value of the first 8 bytes of `b` (which has them).
fn le64(b: &[u8]) -> u64 {
    b.first_chunk::<8>().map_or(0, |w| u64::from_le_bytes(*w))
}

#[cfg(test)]
mod tests {
    use super::super::cie::tests::GCC_CIE;
    use super::super::Slice;
    use super::*;
    use std::vec::Vec;

    /// An `.eh_frame` at 0x5000: GCC's CIE, then FDEs for `(start, len)` (pcrel|sdata4),
    /// then a terminator.
    fn section(fdes: &[(u64, u32)]) -> Vec<u8> {
        let mut b = GCC_CIE.to_vec();
        for &(start, len) in fdes {
            let at = b.len();
            b.extend_from_slice(&20u32.to_le_bytes());
            b.extend_from_slice(&((at + 4) as u32).to_le_bytes());
            let field = 0x5000 + at as u64 + 8;
            b.extend_from_slice(&(start.wrapping_sub(field) as u32).to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        }
        b.extend_from_slice(&[0; 4]);
        b
    }

    fn walk(bytes: &[u8], size: u64, buf: usize) -> Result<Vec<Entry>, CfiError> {
        let mut m = Slice {
            base: 0x5000,
            bytes,
        };
        let mut out = Vec::new();
        let mut window = std::vec![0u8; buf];
        let n = walk_eh_frame(
            &mut m,
            &mut Budget::default(),
            Section { addr: 0x5000, size },
            &mut window,
            |_, e| {
                out.push(e);
                true
            },
        )?;
        assert_eq!(n, out.len());
        Ok(out)
    }

    #[test]
    fn finds_every_fde_with_a_range() {
        let fdes = [(0x1100, 0x10), (0x1000, 0x40), (0x1200, 0), (0x1300, 8)];
        let b = section(&fdes);
        for buf in [36, 40, 64, 100, 4096] {
            let got = walk(&b, b.len() as u64, buf).unwrap();
            let want: Vec<Entry> = [(0, 0x1100), (1, 0x1000), (3, 0x1300)]
                .iter()
                .map(|&(i, initial)| Entry {
                    initial,
                    fde: 0x5000 + 24 + 24 * i,
                })
                .collect();
            assert_eq!(got, want, "window {buf}");
        }
        // Without the terminator, the section's end ends the walk.
        assert_eq!(walk(&b, b.len() as u64 - 4, 64).unwrap().len(), 3);
        assert_eq!(walk(&b, 0, 64).unwrap().len(), 0);
    }

    #[test]
    fn refuses_what_is_not_a_section() {
        let b = section(&[(0x1000, 0x40), (0x1100, 0x10)]);
        let size = b.len() as u64;
        // An entry that runs past the section, the section past the memory.
        assert_eq!(walk(&b, size - 8, 64), Err(CfiError::Malformed));
        assert_eq!(walk(&b, size + 64, 64), Err(CfiError::Read));
        // A CIE pointer before the section, or to an FDE.
        let mut bad = b.clone();
        bad[28..32].copy_from_slice(&0x100u32.to_le_bytes());
        assert_eq!(walk(&bad, size, 64), Err(CfiError::Malformed));
        let mut bad = b.clone();
        bad[52..56].copy_from_slice(&(52u32 - 24).to_le_bytes());
        assert_eq!(walk(&bad, size, 64), Err(CfiError::Malformed));
        // An indirect pointer encoding.
        let mut bad = b.clone();
        bad[16] = 0x9b;
        assert_eq!(walk(&bad, size, 64), Err(CfiError::Unsupported));
        // A reserved length, a 64-bit length past everything.
        let mut bad = b.clone();
        bad[24..28].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert_eq!(walk(&bad, size, 64), Err(CfiError::Malformed));
        let mut bad = b.clone();
        bad[24..28].copy_from_slice(&[0xff; 4]);
        assert_eq!(walk(&bad, size, 64), Err(CfiError::Malformed));
        // A window too small for an entry's head, a budget spent.
        assert_eq!(walk(&b, size, 8), Err(CfiError::TooLong));
        let mut m = Slice {
            base: 0x5000,
            bytes: &b,
        };
        let mut budget = Budget {
            bytes: 40,
            insns: 0,
        };
        let r = walk_eh_frame(
            &mut m,
            &mut budget,
            Section { addr: 0x5000, size },
            &mut [0u8; 64],
            |_, _| true,
        );
        assert_eq!(r, Err(CfiError::Budget));
        // A caller that stops it.
        let r = walk_eh_frame(
            &mut m,
            &mut Budget::default(),
            Section { addr: 0x5000, size },
            &mut [0u8; 64],
            |_, _| false,
        );
        assert_eq!(r, Err(CfiError::TooLong));
    }

    #[test]
    fn every_mutation_ends_without_a_panic() {
        let b = section(&[(0x1000, 0x40), (0x1100, 0x10), (0x1200, 0x30)]);
        for i in 0..b.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xfe, 0xff] {
                let mut m = b.clone();
                m[i] = v;
                for buf in [36, 64, 4096] {
                    let _ = walk(&m, m.len() as u64, buf);
                }
            }
        }
    }
}
