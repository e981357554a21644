// SPDX-License-Identifier: GPL-2.0

//! Finding the GNU build-id of an ELF file, reading as little of it as possible.
//!
//! The file is untrusted: every length and offset is checked, every read is bounded
//! ([`MAX_PHDRS`] program headers, [`NOTE_BYTES`] bytes of each `PT_NOTE` segment), and any
//! malformed, truncated or hostile input yields `None`, never a panic or an out-of-bounds
//! access. ELF32 and ELF64, either byte order. The bytes come from a caller-provided
//! [`ReadAt`], so the same parser reads a `struct file` in the kernel and a slice in tests.

#![forbid(unsafe_code)]

/// Longest build-id kept; GNU ld writes 20 bytes (SHA-1), 16 (MD5, UUID) or what
/// `--build-id=0x...` says.
pub const BUILD_ID_MAX: usize = 64;
/// Program headers looked at, at most.
pub const MAX_PHDRS: usize = 64;
/// Bytes read from the start of each `PT_NOTE` segment, at most.
pub const NOTE_BYTES: usize = 1024;

const PT_NOTE: u32 = 4;
const NT_GNU_BUILD_ID: u32 = 3;

/// The file could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadError;

/// Random access to the file's bytes.
pub trait ReadAt {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at the end).
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, ReadError>;
}

impl ReadAt for &[u8] {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, ReadError> {
        let start = usize::try_from(offset).map_err(|_| ReadError)?;
        let src = self.get(start..).unwrap_or(&[]);
        let n = src.len().min(buf.len());
        buf[..n].copy_from_slice(&src[..n]);
        Ok(n)
    }
}

/// A build-id: `len` bytes of `bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildId {
    bytes: [u8; BUILD_ID_MAX],
    len: usize,
}

impl BuildId {
    /// The build-id bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[derive(Clone, Copy)]
struct Layout {
    is64: bool,
    big: bool,
}

impl Layout {
    /// The `N` bytes at `at`, if `b` has them.
    fn bytes<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
        b.get(at..at.checked_add(N)?)?.try_into().ok()
    }

    fn u16(&self, b: &[u8], at: usize) -> Option<u16> {
        let v = Self::bytes(b, at)?;
        Some(if self.big {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        })
    }

    fn u32(&self, b: &[u8], at: usize) -> Option<u32> {
        let v = Self::bytes(b, at)?;
        Some(if self.big {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        })
    }

    fn u64(&self, b: &[u8], at: usize) -> Option<u64> {
        let v = Self::bytes(b, at)?;
        Some(if self.big {
            u64::from_be_bytes(v)
        } else {
            u64::from_le_bytes(v)
        })
    }

    /// A word: 8 bytes in ELF64, 4 in ELF32.
    fn word(&self, b: &[u8], at: usize) -> Option<u64> {
        if self.is64 {
            self.u64(b, at)
        } else {
            self.u32(b, at).map(u64::from)
        }
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, or fails.
fn read_exact(file: &mut impl ReadAt, offset: u64, buf: &mut [u8]) -> Option<()> {
    let mut done = 0;
    while done < buf.len() {
        let at = offset.checked_add(done as u64)?;
        let n = file.read_at(at, &mut buf[done..]).ok()?;
        if n == 0 || n > buf.len() - done {
            return None;
        }
        done += n;
    }
    Some(())
}

/// The build-id of the ELF file behind `file`, or `None` when it has none or is not a
/// well-formed ELF file.
pub fn find_build_id(file: &mut impl ReadAt) -> Option<BuildId> {
    let mut ehdr = [0u8; 64];
    read_exact(file, 0, &mut ehdr[..52])?;
    if ehdr.get(..4)? != b"\x7fELF" {
        return None;
    }
    let l = Layout {
        is64: match ehdr[4] {
            1 => false,
            2 => true,
            _ => return None,
        },
        big: match ehdr[5] {
            1 => false,
            2 => true,
            _ => return None,
        },
    };
    if l.is64 {
        read_exact(file, 52, &mut ehdr[52..64])?;
    }
    let (phoff, phentsize, phnum) = if l.is64 {
        (l.u64(&ehdr, 32)?, l.u16(&ehdr, 54)?, l.u16(&ehdr, 56)?)
    } else {
        (
            u64::from(l.u32(&ehdr, 28)?),
            l.u16(&ehdr, 42)?,
            l.u16(&ehdr, 44)?,
        )
    };
    let min_entsize = if l.is64 { 56 } else { 32 };
    if usize::from(phentsize) < min_entsize || phoff == 0 {
        return None;
    }

    let mut notes = [0u8; NOTE_BYTES];
    for i in 0..usize::from(phnum).min(MAX_PHDRS) {
        let mut phdr = [0u8; 56];
        let at = phoff.checked_add((i as u64).checked_mul(u64::from(phentsize))?)?;
        read_exact(file, at, &mut phdr[..min_entsize])?;
        if l.u32(&phdr, 0)? != PT_NOTE {
            continue;
        }
        let (offset, filesz, align) = if l.is64 {
            (l.word(&phdr, 8)?, l.word(&phdr, 32)?, l.word(&phdr, 48)?)
        } else {
            (l.word(&phdr, 4)?, l.word(&phdr, 16)?, l.word(&phdr, 28)?)
        };
        let len = usize::try_from(filesz).ok()?.min(NOTE_BYTES);
        if read_exact(file, offset, &mut notes[..len]).is_none() {
            continue;
        }
        if let Some(id) = scan_notes(l, &notes[..len], if align == 8 { 8 } else { 4 }) {
            return Some(id);
        }
    }
    None
}

/// Walks the notes of one segment for `GNU` / `NT_GNU_BUILD_ID`.
fn scan_notes(l: Layout, notes: &[u8], align: usize) -> Option<BuildId> {
    let pad = |n: usize| n.checked_add(align - 1).map(|v| v & !(align - 1));
    let mut at = 0usize;
    while at.checked_add(12)? <= notes.len() {
        let namesz = usize::try_from(l.u32(notes, at)?).ok()?;
        let descsz = usize::try_from(l.u32(notes, at + 4)?).ok()?;
        let kind = l.u32(notes, at + 8)?;
        let name_at = at + 12;
        let desc_at = name_at.checked_add(pad(namesz)?)?;
        let next = desc_at.checked_add(pad(descsz)?)?;
        let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
        let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            if desc.len() > BUILD_ID_MAX {
                return None;
            }
            let mut id = BuildId {
                bytes: [0; BUILD_ID_MAX],
                len: desc.len(),
            };
            id.bytes[..desc.len()].copy_from_slice(desc);
            return Some(id);
        }
        if next <= at {
            return None;
        }
        at = next;
    }
    None
}

/// Golden vectors shared by the host tests and KUnit: small hand-made ELF images.
pub mod vectors {
    /// Writes the low `width` bytes of `value` at `at`, big- or little-endian.
    fn put(buf: &mut [u8], at: usize, width: usize, value: u64, big: bool) {
        let bytes = if big {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        };
        let src = if big {
            &bytes[8 - width..]
        } else {
            &bytes[..width]
        };
        buf[at..at + width].copy_from_slice(src);
    }

    /// A minimal ELF image, ELF64 or ELF32, little- or big-endian, whose one `PT_NOTE`
    /// holds the 20-byte build-id `00 01 .. 13`; returns its length.
    fn image(buf: &mut [u8; 160], is64: bool, big: bool) -> usize {
        *buf = [0; 160];
        buf[..4].copy_from_slice(b"\x7fELF");
        buf[4] = if is64 { 2 } else { 1 };
        buf[5] = if big { 2 } else { 1 };
        // Where e_phoff, e_phentsize, e_phnum and the program header table are; its size
        // and word size; where p_offset, p_filesz and p_align are in it.
        let (phoff_at, phentsize_at, phnum_at, ph, phentsize, word) = if is64 {
            (32, 54, 56, 64, 56, 8)
        } else {
            (28, 42, 44, 52, 32, 4)
        };
        let (offset_at, filesz_at, align_at) = if is64 { (8, 32, 48) } else { (4, 16, 28) };
        let note = ph + phentsize;
        put(buf, phoff_at, word, ph as u64, big);
        put(buf, phentsize_at, 2, phentsize as u64, big);
        put(buf, phnum_at, 2, 1, big);
        put(buf, ph, 4, 4, big); // PT_NOTE
        put(buf, ph + offset_at, word, note as u64, big);
        put(buf, ph + filesz_at, word, 36, big);
        put(buf, ph + align_at, word, 4, big);
        put(buf, note, 4, 4, big); // namesz
        put(buf, note + 4, 4, 20, big); // descsz
        put(buf, note + 8, 4, 3, big); // NT_GNU_BUILD_ID
        buf[note + 12..note + 16].copy_from_slice(b"GNU\0");
        for (i, b) in buf[note + 16..note + 36].iter_mut().enumerate() {
            *b = i as u8;
        }
        note + 36
    }

    /// The little-endian ELF64 image (156 bytes, note at 120); returns its length.
    pub fn elf64_le(buf: &mut [u8; 160]) -> usize {
        image(buf, true, false)
    }

    /// The big-endian ELF32 image (120 bytes, note at 84); returns its length.
    pub fn elf32_be(buf: &mut [u8; 160]) -> usize {
        image(buf, false, true)
    }
}

#[cfg(test)]
mod tests {
    use super::vectors::*;
    use super::*;

    const ID: [u8; 20] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
    ];

    fn parse(bytes: &[u8]) -> Option<BuildId> {
        find_build_id(&mut &bytes[..])
    }

    #[test]
    fn both_classes_and_byte_orders() {
        let mut buf = [0u8; 160];
        let n = elf64_le(&mut buf);
        assert_eq!(
            parse(&buf[..n]).map(|id| id.as_bytes().to_vec()),
            Some(ID.to_vec())
        );
        let n = elf32_be(&mut buf);
        assert_eq!(
            parse(&buf[..n]).map(|id| id.as_bytes().to_vec()),
            Some(ID.to_vec())
        );
    }

    #[test]
    fn every_truncation_is_no_build_id() {
        let mut buf = [0u8; 160];
        let n = elf64_le(&mut buf);
        for len in 0..n {
            assert_eq!(parse(&buf[..len]), None, "truncated to {len}");
        }
    }

    #[test]
    fn hostile_sizes_are_no_build_id() {
        let mut buf = [0u8; 160];
        let n = elf64_le(&mut buf);
        let cases: &[(usize, &[u8])] = &[
            (124, &u32::MAX.to_le_bytes()),     // descsz
            (120, &u32::MAX.to_le_bytes()),     // namesz
            (124, &200u32.to_le_bytes()),       // descsz beyond the segment
            (64 + 32, &u64::MAX.to_le_bytes()), // p_filesz
            (64 + 8, &u64::MAX.to_le_bytes()),  // p_offset
            (32, &u64::MAX.to_le_bytes()),      // e_phoff
            (54, &1u16.to_le_bytes()),          // e_phentsize
            (4, &[3]),                          // EI_CLASS
            (5, &[0]),                          // EI_DATA
            (128, &7u32.to_le_bytes()),         // note type
            (132, b"GNX\0"),                    // note name
        ];
        for &(at, bytes) in cases {
            let mut bad = buf;
            bad[at..at + bytes.len()].copy_from_slice(bytes);
            assert_eq!(parse(&bad[..n]), None, "patch at {at}");
        }
    }

    #[test]
    fn huge_phnum_reads_a_bounded_number_of_headers() {
        struct Counting<'a>(&'a [u8], usize);
        impl ReadAt for Counting<'_> {
            fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, ReadError> {
                self.1 += 1;
                // Every program header reads as PT_LOAD, forever.
                let _ = self.0;
                if offset >= 64 {
                    buf.fill(0);
                    buf[0] = 1;
                    return Ok(buf.len());
                }
                (&self.0[..]).read_at(offset, buf)
            }
        }
        let mut buf = [0u8; 160];
        elf64_le(&mut buf);
        buf[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        let mut file = Counting(&buf, 0);
        assert_eq!(find_build_id(&mut file), None);
        assert!(file.1 <= 2 + MAX_PHDRS, "{} reads", file.1);
    }
}
