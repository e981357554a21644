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

    /// A build-id of `bytes`, if it is not empty and at most [`BUILD_ID_MAX`] long.
    pub fn from_bytes(bytes: &[u8]) -> Option<BuildId> {
        if bytes.is_empty() || bytes.len() > BUILD_ID_MAX {
            return None;
        }
        let mut id = BuildId {
            bytes: [0; BUILD_ID_MAX],
            len: bytes.len(),
        };
        id.bytes[..bytes.len()].copy_from_slice(bytes);
        Some(id)
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
///
/// The layout is binutils' (`ELF_NOTE_DESC_OFFSET`, `ELF_NOTE_NEXT_OFFSET` in
/// include/elf/external.h) and the gABI's: the descriptor starts at
/// `align_up(12 + namesz, align)` from the note, the next note at
/// `align_up(desc + descsz, align)`. Padding `namesz` alone to an 8-byte alignment puts the
/// descriptor 4 bytes late for "GNU".
fn scan_notes(l: Layout, notes: &[u8], align: usize) -> Option<BuildId> {
    let pad = |n: usize| n.checked_add(align - 1).map(|v| v & !(align - 1));
    let mut at = 0usize;
    while at.checked_add(12)? <= notes.len() {
        let namesz = usize::try_from(l.u32(notes, at)?).ok()?;
        let descsz = usize::try_from(l.u32(notes, at + 4)?).ok()?;
        let kind = l.u32(notes, at + 8)?;
        let name_at = at + 12;
        let desc_at = pad(name_at.checked_add(namesz)?)?;
        let next = pad(desc_at.checked_add(descsz)?)?;
        let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
        let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return BuildId::from_bytes(desc);
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
    /// Room for every image below.
    pub const IMAGE_MAX: usize = 208;

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

    /// The shape of one test image.
    #[derive(Clone, Copy)]
    pub struct Shape {
        /// ELF64, or ELF32.
        pub is64: bool,
        /// Big-endian, or little-endian.
        pub big: bool,
        /// `p_align` of the `PT_NOTE` segment, which lays its notes out (4 or 8).
        pub align: u64,
        /// A 16-byte-descriptor `NT_GNU_PROPERTY_TYPE_0` note before the build-id note,
        /// as a `.note.gnu.property` section gives.
        pub property_first: bool,
    }

    /// A minimal ELF image whose one `PT_NOTE` holds the 20-byte build-id `a0 a1 .. b3`
    /// (after a property note if `shape` says so); returns its length.
    pub fn image(buf: &mut [u8; IMAGE_MAX], shape: Shape) -> usize {
        let Shape {
            is64,
            big,
            align,
            property_first,
        } = shape;
        *buf = [0; IMAGE_MAX];
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
        let pad = |n: usize| (n + align as usize - 1) & !(align as usize - 1);
        let notes = pad(ph + phentsize);
        let mut note = notes;
        put(buf, phoff_at, word, ph as u64, big);
        put(buf, phentsize_at, 2, phentsize as u64, big);
        put(buf, phnum_at, 2, 1, big);
        put(buf, ph, 4, 4, big); // PT_NOTE
        put(buf, ph + offset_at, word, notes as u64, big);
        put(buf, ph + align_at, word, align, big);
        if property_first {
            put(buf, note, 4, 4, big); // namesz
            put(buf, note + 4, 4, 16, big); // descsz
            put(buf, note + 8, 4, 5, big); // NT_GNU_PROPERTY_TYPE_0
            buf[note + 12..note + 16].copy_from_slice(b"GNU\0");
            put(buf, pad(note + 16), 4, 0xc000_0002, big); // GNU_PROPERTY_X86_FEATURE_1_AND
            put(buf, pad(note + 16) + 4, 4, 4, big);
            put(buf, pad(note + 16) + 8, 4, 3, big); // IBT | SHSTK
            note = pad(pad(note + 16) + 16);
        }
        put(buf, note, 4, 4, big); // namesz
        put(buf, note + 4, 4, 20, big); // descsz
        put(buf, note + 8, 4, 3, big); // NT_GNU_BUILD_ID
        buf[note + 12..note + 16].copy_from_slice(b"GNU\0");
        let desc = pad(note + 16);
        for (i, b) in buf[desc..desc + 20].iter_mut().enumerate() {
            *b = 0xa0 + i as u8;
        }
        let end = pad(desc + 20);
        put(buf, ph + filesz_at, word, (end - notes) as u64, big);
        end
    }

    /// The little-endian ELF64 image with 4-byte aligned notes; returns its length.
    pub fn elf64_le(buf: &mut [u8; IMAGE_MAX]) -> usize {
        image(
            buf,
            Shape {
                is64: true,
                big: false,
                align: 4,
                property_first: false,
            },
        )
    }

    /// The big-endian ELF32 image with 4-byte aligned notes; returns its length.
    pub fn elf32_be(buf: &mut [u8; IMAGE_MAX]) -> usize {
        image(
            buf,
            Shape {
                is64: false,
                big: true,
                align: 4,
                property_first: false,
            },
        )
    }

    /// The little-endian ELF64 image with a property note, then the build-id note, in an
    /// 8-byte aligned `PT_NOTE` (as GNU ld lays out `-z separate-code` x86-64 binaries with
    /// CET properties); returns its length.
    pub fn elf64_le_align8(buf: &mut [u8; IMAGE_MAX]) -> usize {
        image(
            buf,
            Shape {
                is64: true,
                big: false,
                align: 8,
                property_first: true,
            },
        )
    }

    /// The build-id every image carries.
    pub const ID: [u8; 20] = [
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae,
        0xaf, 0xb0, 0xb1, 0xb2, 0xb3,
    ];
}

#[cfg(test)]
mod tests {
    use super::vectors::*;
    use super::*;

    fn parse(bytes: &[u8]) -> Option<BuildId> {
        find_build_id(&mut &bytes[..])
    }

    #[test]
    fn both_classes_and_byte_orders() {
        let mut buf = [0u8; IMAGE_MAX];
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
    fn every_shape_gives_the_build_id() {
        let mut buf = [0u8; IMAGE_MAX];
        for is64 in [false, true] {
            for big in [false, true] {
                for align in [4, 8] {
                    for property_first in [false, true] {
                        let shape = Shape {
                            is64,
                            big,
                            align,
                            property_first,
                        };
                        let n = image(&mut buf, shape);
                        assert_eq!(
                            parse(&buf[..n]).map(|id| id.as_bytes().to_vec()),
                            Some(ID.to_vec()),
                            "is64 {is64} big {big} align {align} property {property_first}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn eight_aligned_notes_after_a_property_note() {
        let mut buf = [0u8; IMAGE_MAX];
        let n = elf64_le_align8(&mut buf);
        assert_eq!(
            parse(&buf[..n]).map(|id| id.as_bytes().to_vec()),
            Some(ID.to_vec())
        );
        for len in 0..n {
            assert_eq!(parse(&buf[..len]), None, "truncated to {len}");
        }
    }

    #[test]
    fn every_truncation_is_no_build_id() {
        let mut buf = [0u8; IMAGE_MAX];
        let n = elf64_le(&mut buf);
        for len in 0..n {
            assert_eq!(parse(&buf[..len]), None, "truncated to {len}");
        }
    }

    #[test]
    fn hostile_sizes_are_no_build_id() {
        let mut buf = [0u8; IMAGE_MAX];
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
        let mut buf = [0u8; IMAGE_MAX];
        elf64_le(&mut buf);
        buf[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        let mut file = Counting(&buf, 0);
        assert_eq!(find_build_id(&mut file), None);
        assert!(file.1 <= 2 + MAX_PHDRS, "{} reads", file.1);
    }
}
