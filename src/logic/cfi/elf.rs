// SPDX-License-Identifier: GPL-2.0

//! An ELF object's program headers: where its `.eh_frame_hdr` is (`PT_GNU_EH_FRAME`),
//! which file bytes its `PT_LOAD` segments place at which addresses, and its entry point;
//! read from the file itself ([`read_object`]) or from where the object is mapped
//! ([`find_eh_frame_hdr`], for the host's tests). For an object without a
//! `.eh_frame_hdr` (a static binary linked without one, as Debian's busybox), its
//! `.eh_frame` section from the section headers ([`find_eh_frame`]).

#![forbid(unsafe_code)]

use super::read_mem;
use super::Budget;
use super::CfiError;
use super::Memory;

/// Program headers looked at, at most.
pub const MAX_PHDRS: u16 = 64;

const PT_LOAD: u32 = 1;
const PT_GNU_EH_FRAME: u32 = 0x6474_e550;

/// Section headers looked at, at most: a linked object has 25 to 45.
pub const MAX_SHDRS: u16 = 256;
/// Bytes of an `.eh_frame` section [`find_eh_frame`] accepts, at most: busybox's has 92
/// KiB (2,038 FDEs), libc's 240 KiB; a section this long has about 90,000 FDEs.
pub const MAX_EH_FRAME: u64 = 4 << 20;

const SHT_PROGBITS: u32 = 1;
/// The section type x86-64 assemblers give `.eh_frame` (`@unwind`), which lld keeps.
const SHT_X86_64_UNWIND: u32 = 0x7000_0001;
const SHF_ALLOC: u64 = 2;
const PF_X: u32 = 1;
const PF_R: u32 = 4;
/// The section header size of ELF64.
const SHDR_SIZE: u16 = 64;

/// `PT_LOAD` segments an [`Object`] keeps, at most.
pub const MAX_LOADS: usize = 6;

/// A `PT_LOAD` segment's bytes from the file: `filesz` bytes at file offset `offset`,
/// placed at the address `vaddr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    /// Its address, as linked.
    pub vaddr: u64,
    /// Its file offset.
    pub offset: u64,
    /// Its bytes in the file.
    pub filesz: u64,
}

/// What the unwinder needs of an ELF object's headers, in the object's own (link-time)
/// addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Object {
    /// Its `PT_LOAD` segments, in the order of the program headers.
    pub loads: [Load; MAX_LOADS],
    /// How many of `loads` there are.
    pub nr_loads: usize,
    /// The address of its `.eh_frame_hdr`, if it has one.
    pub eh_frame_hdr: Option<u64>,
    /// Its entry point (`e_entry`).
    pub entry: u64,
}

impl Object {
    fn loads(&self) -> &[Load] {
        self.loads.get(..self.nr_loads).unwrap_or(&[])
    }

    /// The address of the byte at file offset `offset`, if a segment loads it.
    #[inline]
    pub fn vaddr(&self, offset: u64) -> Option<u64> {
        let l = self
            .loads()
            .iter()
            .find(|l| offset >= l.offset && offset - l.offset < l.filesz)?;
        l.vaddr.checked_add(offset - l.offset)
    }

    /// The file offset of the `len` bytes at address `vaddr`, if one segment loads all of
    /// them from the file.
    #[inline]
    pub fn offset(&self, vaddr: u64, len: usize) -> Option<u64> {
        let len = len as u64;
        let l = self
            .loads()
            .iter()
            .find(|l| vaddr >= l.vaddr && len <= l.filesz && vaddr - l.vaddr <= l.filesz - len)?;
        l.offset.checked_add(vaddr - l.vaddr)
    }
}

/// The program headers of the little-endian ELF64 object that `file` reads, by file
/// offset. An object with more than [`MAX_LOADS`] `PT_LOAD` segments is
/// [`CfiError::Unsupported`].
pub fn read_object<M: Memory + ?Sized>(
    file: &mut M,
    budget: &mut Budget,
) -> Result<Object, CfiError> {
    let mut ehdr = [0u8; 64];
    read_mem(file, budget, 0, &mut ehdr)?;
    let word = |at: usize| -> Result<u64, CfiError> {
        ehdr.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or(CfiError::Malformed)
    };
    if ehdr.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err(CfiError::Unsupported);
    }
    let entry = word(24)?;
    let phoff = word(32)?;
    let [es0, es1, n0, n1, ..] = word(54)?.to_le_bytes();
    let phentsize = u16::from_le_bytes([es0, es1]);
    let phnum = u16::from_le_bytes([n0, n1]);
    if phentsize < 56 || phnum > MAX_PHDRS {
        return Err(CfiError::Malformed);
    }
    let mut object = Object {
        entry,
        ..Object::default()
    };
    for i in 0..u64::from(phnum) {
        let at = i
            .checked_mul(u64::from(phentsize))
            .and_then(|o| o.checked_add(phoff))
            .filter(|o| o.checked_add(40).is_some())
            .ok_or(CfiError::Malformed)?;
        let mut ph = [0u8; 40];
        read_mem(file, budget, at, &mut ph)?;
        let field = |at: usize| -> u64 {
            ph.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        let kind = field(0) as u32;
        if kind == PT_GNU_EH_FRAME {
            object.eh_frame_hdr = Some(field(16));
        }
        if kind == PT_LOAD {
            let slot = object
                .loads
                .get_mut(object.nr_loads)
                .ok_or(CfiError::Unsupported)?;
            *slot = Load {
                offset: field(8),
                vaddr: field(16),
                filesz: field(32),
            };
            object.nr_loads += 1;
        }
    }
    Ok(object)
}

/// An object's `.eh_frame` section, found by its section header: `size` bytes at the
/// address `addr`, which a `PT_LOAD` segment loads from the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Section {
    /// Its address, as linked.
    pub addr: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// Reads the `N` bytes at file offset `at`: `None` when they lie past the end of the
/// file or the budget is spent, [`CfiError::Read`] when they cannot be read now.
fn file_bytes<M: Memory + ?Sized, const N: usize>(
    file: &mut M,
    budget: &mut Budget,
    at: u64,
) -> Result<Option<[u8; N]>, CfiError> {
    let mut b = [0u8; N];
    match read_mem(file, budget, at, &mut b) {
        Ok(()) => Ok(Some(b)),
        Err(CfiError::Read) => Err(CfiError::Read),
        Err(_) => Ok(None),
    }
}

/// The little-endian value of `N` bytes at `at` in `b` (0 outside).
fn le<const N: usize>(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    if let Some(src) = at.checked_add(N).and_then(|end| b.get(at..end)) {
        if let Some(dst) = v.get_mut(..N) {
            dst.copy_from_slice(src);
        }
    }
    u64::from_le_bytes(v)
}

/// The `.eh_frame` section of the little-endian ELF64 object `object` that `file` reads
/// by file offset, from its section headers: the section named `.eh_frame`, of type
/// `SHT_PROGBITS` or `SHT_X86_64_UNWIND`, allocated, at most [`MAX_EH_FRAME`] bytes, that
/// lies whole in the file bytes of a readable or executable `PT_LOAD` segment at the
/// address its header gives, and where `object`'s segments read it. `None` when there is
/// none, or anything on the way is out of bounds: the headers are the file's, as hostile
/// as any of its bytes. [`CfiError::Read`] when a page of the file cannot be read now.
pub fn find_eh_frame<M: Memory + ?Sized>(
    file: &mut M,
    budget: &mut Budget,
    object: &Object,
) -> Result<Option<Section>, CfiError> {
    let Some(ehdr) = file_bytes::<M, 64>(file, budget, 0)? else {
        return Ok(None);
    };
    if ehdr.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Ok(None);
    }
    let phoff = le::<8>(&ehdr, 32);
    let shoff = le::<8>(&ehdr, 40);
    let phentsize = le::<2>(&ehdr, 54);
    let phnum = le::<2>(&ehdr, 56);
    let shentsize = le::<2>(&ehdr, 58);
    let shnum = le::<2>(&ehdr, 60);
    let shstrndx = le::<2>(&ehdr, 62);
    // No section headers, more than this reads, the extended numbering (`e_shnum` 0 or
    // `e_shstrndx` `SHN_XINDEX` with the real values in section 0): none looked at.
    if shoff == 0
        || shentsize < u64::from(SHDR_SIZE)
        || shnum == 0
        || shnum > u64::from(MAX_SHDRS)
        || shstrndx >= shnum
        || phentsize < 56
        || phnum > u64::from(MAX_PHDRS)
    {
        return Ok(None);
    }
    let shdr_at = |i: u64| i.checked_mul(shentsize).and_then(|o| o.checked_add(shoff));
    let Some(at) = shdr_at(shstrndx) else {
        return Ok(None);
    };
    let Some(strtab) = file_bytes::<M, 64>(file, budget, at)? else {
        return Ok(None);
    };
    let (str_off, str_size) = (le::<8>(&strtab, 24), le::<8>(&strtab, 32));
    const NAME: &[u8; 10] = b".eh_frame\0";
    let mut found = None;
    for i in 0..shnum {
        let Some(at) = shdr_at(i) else {
            return Ok(None);
        };
        let Some(sh) = file_bytes::<M, 64>(file, budget, at)? else {
            return Ok(None);
        };
        let name = le::<4>(&sh, 0);
        let kind = le::<4>(&sh, 4) as u32;
        if !matches!(kind, SHT_PROGBITS | SHT_X86_64_UNWIND) || le::<8>(&sh, 8) & SHF_ALLOC == 0 {
            continue;
        }
        // The name lies in the string table, all of it.
        let Some(name_at) = name
            .checked_add(NAME.len() as u64)
            .filter(|&end| end <= str_size)
            .and_then(|_| str_off.checked_add(name))
        else {
            continue;
        };
        if file_bytes::<M, 10>(file, budget, name_at)?.as_ref() != Some(NAME) {
            continue;
        }
        if found.is_some() {
            // Two: which one the unwinder would use is not clear.
            return Ok(None);
        }
        found = Some((le::<8>(&sh, 16), le::<8>(&sh, 24), le::<8>(&sh, 32)));
    }
    let Some((addr, offset, size)) = found else {
        return Ok(None);
    };
    if size == 0 || size > MAX_EH_FRAME || object.offset(addr, size as usize) != Some(offset) {
        return Ok(None);
    }
    // A readable or executable `PT_LOAD` segment holds it in its file bytes, at its
    // address.
    for i in 0..phnum {
        let Some(at) = i.checked_mul(phentsize).and_then(|o| o.checked_add(phoff)) else {
            return Ok(None);
        };
        let Some(ph) = file_bytes::<M, 40>(file, budget, at)? else {
            return Ok(None);
        };
        let (kind, flags) = (le::<4>(&ph, 0) as u32, le::<4>(&ph, 4) as u32);
        let (p_offset, p_vaddr, p_filesz) = (le::<8>(&ph, 8), le::<8>(&ph, 16), le::<8>(&ph, 32));
        if kind != PT_LOAD || flags & (PF_R | PF_X) == 0 {
            continue;
        }
        let inside = offset
            .checked_sub(p_offset)
            .filter(|&into| into <= p_filesz && size <= p_filesz - into)
            .and_then(|into| p_vaddr.checked_add(into));
        if inside == Some(addr) {
            return Ok(Some(Section { addr, size }));
        }
    }
    Ok(None)
}

/// The address of the `.eh_frame_hdr` of the little-endian ELF64 object whose first page
/// (file offset 0: the ELF header) is mapped at `base`. The load bias is `base` minus the
/// address of the `PT_LOAD` segment at file offset 0; the program headers must lie in that
/// mapping, as linkers place them. An object without `PT_GNU_EH_FRAME` is
/// [`CfiError::NoFde`].
pub fn find_eh_frame_hdr<M: Memory + ?Sized>(
    mem: &mut M,
    budget: &mut Budget,
    base: u64,
) -> Result<u64, CfiError> {
    let mut ehdr = [0u8; 64];
    read_mem(mem, budget, base, &mut ehdr)?;
    let bytes = |at: usize| -> Result<[u8; 8], CfiError> {
        ehdr.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .ok_or(CfiError::Malformed)
    };
    if ehdr.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err(CfiError::Unsupported);
    }
    let phoff = u64::from_le_bytes(bytes(32)?);
    let [es0, es1, n0, n1, ..] = bytes(54)?;
    let phentsize = u16::from_le_bytes([es0, es1]);
    let phnum = u16::from_le_bytes([n0, n1]);
    if phentsize < 56 || phnum > MAX_PHDRS {
        return Err(CfiError::Malformed);
    }
    let mut first_load = None;
    let mut eh = None;
    for i in 0..u64::from(phnum) {
        let at = i
            .checked_mul(u64::from(phentsize))
            .and_then(|o| o.checked_add(phoff))
            .and_then(|o| o.checked_add(base))
            .ok_or(CfiError::Malformed)?;
        let mut ph = [0u8; 24];
        read_mem(mem, budget, at, &mut ph)?;
        let [t0, t1, t2, t3, _, _, _, _, o0, o1, o2, o3, o4, o5, o6, o7, v0, v1, v2, v3, v4, v5, v6, v7] =
            ph;
        let kind = u32::from_le_bytes([t0, t1, t2, t3]);
        let offset = u64::from_le_bytes([o0, o1, o2, o3, o4, o5, o6, o7]);
        let vaddr = u64::from_le_bytes([v0, v1, v2, v3, v4, v5, v6, v7]);
        if kind == PT_LOAD && offset == 0 && first_load.is_none() {
            first_load = Some(vaddr);
        }
        if kind == PT_GNU_EH_FRAME {
            eh = Some(vaddr);
        }
    }
    let first_load = first_load.ok_or(CfiError::Malformed)?;
    let eh = eh.ok_or(CfiError::NoFde)?;
    Ok(base.wrapping_sub(first_load).wrapping_add(eh))
}

#[cfg(test)]
mod tests {
    use super::super::Slice;
    use super::*;

    /// An ELF64 header and `phnum` program headers: a `PT_LOAD` at offset 0 and address
    /// `0x400000`, and (if `eh`) a `PT_GNU_EH_FRAME` at `0x402000`.
    fn image(buf: &mut [u8; 256], eh: bool, phnum: u16) {
        *buf = [0; 256];
        buf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        buf[32..40].copy_from_slice(&64u64.to_le_bytes());
        buf[54..56].copy_from_slice(&56u16.to_le_bytes());
        buf[56..58].copy_from_slice(&phnum.to_le_bytes());
        buf[64..68].copy_from_slice(&PT_LOAD.to_le_bytes());
        buf[80..88].copy_from_slice(&0x40_0000u64.to_le_bytes());
        if eh {
            buf[120..124].copy_from_slice(&PT_GNU_EH_FRAME.to_le_bytes());
            buf[128..136].copy_from_slice(&0x1234u64.to_le_bytes());
            buf[136..144].copy_from_slice(&0x40_2000u64.to_le_bytes());
        }
    }

    fn find(buf: &[u8]) -> Result<u64, CfiError> {
        let mut m = Slice {
            base: 0x7f00_0000_0000,
            bytes: buf,
        };
        find_eh_frame_hdr(&mut m, &mut Budget::default(), 0x7f00_0000_0000)
    }

    #[test]
    fn reads_the_object_from_its_file() {
        let mut buf = [0u8; 256];
        image(&mut buf, true, 2);
        buf[24..32].copy_from_slice(&0x40_0100u64.to_le_bytes());
        buf[96..104].copy_from_slice(&0x3000u64.to_le_bytes());
        let mut file = Slice {
            base: 0,
            bytes: &buf,
        };
        let o = read_object(&mut file, &mut Budget::default()).unwrap();
        assert_eq!(o.entry, 0x40_0100);
        assert_eq!(o.eh_frame_hdr, Some(0x40_2000));
        assert_eq!(o.nr_loads, 1);
        assert_eq!(o.vaddr(0x10), Some(0x40_0010));
        assert_eq!(o.vaddr(0x3000), None);
        assert_eq!(o.offset(0x40_2ff8, 8), Some(0x2ff8));
        assert_eq!(o.offset(0x40_2ffc, 8), None);
        assert_eq!(o.offset(0x3f_ffff, 1), None);
        image(&mut buf, true, MAX_PHDRS + 1);
        assert_eq!(
            read_object(&mut file_of(&buf), &mut Budget::default()),
            Err(CfiError::Malformed)
        );
        image(&mut buf, true, 5);
        assert_eq!(
            read_object(&mut file_of(&buf), &mut Budget::default()),
            Err(CfiError::Read)
        );
        // More loads than an Object keeps.
        let mut many = [0u8; 1024];
        many[..6].copy_from_slice(b"\x7fELF\x02\x01");
        many[32..40].copy_from_slice(&64u64.to_le_bytes());
        many[54..56].copy_from_slice(&56u16.to_le_bytes());
        many[56..58].copy_from_slice(&((MAX_LOADS + 1) as u16).to_le_bytes());
        for i in 0..=MAX_LOADS {
            many[64 + 56 * i..68 + 56 * i].copy_from_slice(&PT_LOAD.to_le_bytes());
        }
        assert_eq!(
            read_object(&mut file_of(&many), &mut Budget::default()),
            Err(CfiError::Unsupported)
        );
    }

    fn file_of(bytes: &[u8]) -> Slice<'_> {
        Slice { base: 0, bytes }
    }

    #[test]
    fn finds_pt_gnu_eh_frame_with_the_load_bias() {
        let mut buf = [0u8; 256];
        image(&mut buf, true, 2);
        assert_eq!(find(&buf), Ok(0x7f00_0000_2000));
        image(&mut buf, false, 2);
        assert_eq!(find(&buf), Err(CfiError::NoFde));
        image(&mut buf, true, 2);
        buf[4] = 1;
        assert_eq!(find(&buf), Err(CfiError::Unsupported));
        image(&mut buf, true, MAX_PHDRS + 1);
        assert_eq!(find(&buf), Err(CfiError::Malformed));
        image(&mut buf, true, 5);
        assert_eq!(find(&buf), Err(CfiError::Read));
        image(&mut buf, true, 2);
        buf[72..80].copy_from_slice(&0x1000u64.to_le_bytes());
        assert_eq!(find(&buf), Err(CfiError::Malformed));
    }
}
