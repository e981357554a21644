// SPDX-License-Identifier: GPL-2.0

//! The two facts the tool reads from an ELF file itself: its build-id (with the module's
//! own parser, `src/logic/buildid.rs`, so both sides agree on what a build-id is) and its
//! `PT_LOAD` segments, to turn a file offset into a virtual address. Bounded reads only:
//! a malformed file gives `None`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use user_unwind_logic::logic::buildid::{find_build_id, ReadAt, ReadError};

struct FileReader<'a>(&'a File);

impl ReadAt for FileReader<'_> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, ReadError> {
        self.0.read_at(buf, offset).map_err(|_| ReadError)
    }
}

pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    let f = File::open(path).ok()?;
    find_build_id(&mut FileReader(&f)).map(|id| id.as_bytes().to_vec())
}

/// A `PT_LOAD` segment: file offset, virtual address, size in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
}

const MAX_PHDRS: u64 = 256;

/// The `PT_LOAD` segments of an ELF64 or ELF32 file, either byte order.
pub fn loads(path: &Path) -> Option<Vec<Load>> {
    let f = File::open(path).ok()?;
    let mut ehdr = [0u8; 64];
    f.read_exact_at(&mut ehdr, 0).ok()?;
    if &ehdr[..4] != b"\x7fELF" {
        return None;
    }
    let wide = match ehdr[4] {
        1 => false,
        2 => true,
        _ => return None,
    };
    let big = match ehdr[5] {
        1 => false,
        2 => true,
        _ => return None,
    };
    let rd = |b: &[u8], at: usize, n: usize| -> Option<u64> {
        let s = b.get(at..at + n)?;
        let mut v = 0u64;
        for i in 0..n {
            let byte = if big { s[i] } else { s[n - 1 - i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    };
    let (phoff, phentsize, phnum) = if wide {
        (rd(&ehdr, 32, 8)?, rd(&ehdr, 54, 2)?, rd(&ehdr, 56, 2)?)
    } else {
        (rd(&ehdr, 28, 4)?, rd(&ehdr, 42, 2)?, rd(&ehdr, 44, 2)?)
    };
    let need = if wide { 56 } else { 32 };
    if phentsize < need || phnum > MAX_PHDRS {
        return None;
    }
    let mut out = Vec::new();
    let mut ph = vec![0u8; phentsize as usize];
    for i in 0..phnum {
        let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
        f.read_exact_at(&mut ph, at).ok()?;
        if rd(&ph, 0, 4)? != 1 {
            continue;
        }
        let load = if wide {
            Load {
                offset: rd(&ph, 8, 8)?,
                vaddr: rd(&ph, 16, 8)?,
                filesz: rd(&ph, 32, 8)?,
            }
        } else {
            Load {
                offset: rd(&ph, 4, 4)?,
                vaddr: rd(&ph, 8, 4)?,
                filesz: rd(&ph, 16, 4)?,
            }
        };
        out.push(load);
    }
    Some(out)
}

/// The virtual address of file offset `off`, through the segment holding it.
pub fn vaddr(loads: &[Load], off: u64) -> Option<u64> {
    loads
        .iter()
        .find(|l| off >= l.offset && off - l.offset < l.filesz)
        .map(|l| l.vaddr.wrapping_add(off - l.offset))
}

/// A PLT stub: its address range and `name@plt`.
pub type Stub = (u64, u64, String);

const MAX_SECTIONS: u64 = 4096;
const MAX_PLT_RELOCS: u64 = 1 << 20;

/// The PLT stubs of an ELF file, by address, named as objdump names them (`puts@plt`):
/// entry *i* of `.plt.sec` (or entry *i* + 1 of `.plt`, after the resolver's) jumps
/// through the GOT slot of relocation *i* of `.rela.plt`, whose symbol names it. x86-64,
/// i386 and AArch64; nothing for other machines or a file without them.
pub fn plt_stubs(path: &Path) -> Vec<Stub> {
    plt_stubs_of(path).unwrap_or_default()
}

fn plt_stubs_of(path: &Path) -> Option<Vec<Stub>> {
    let f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut ehdr = [0u8; 64];
    f.read_exact_at(&mut ehdr, 0).ok()?;
    if &ehdr[..4] != b"\x7fELF" {
        return None;
    }
    let wide = ehdr[4] == 2;
    let big = ehdr[5] == 2;
    let rd = |b: &[u8], at: usize, n: usize| -> Option<u64> {
        let s = b.get(at..at + n)?;
        let mut v = 0u64;
        for i in 0..n {
            let byte = if big { s[i] } else { s[n - 1 - i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    };
    let (entry, plt0) = match rd(&ehdr, 18, 2)? {
        62 | 3 => (16u64, 16u64),
        183 => (16, 32),
        _ => return None,
    };
    let w = if wide { 8 } else { 4 };
    let (shoff, shentsize, shnum, shstrndx) = if wide {
        (
            rd(&ehdr, 40, 8)?,
            rd(&ehdr, 58, 2)?,
            rd(&ehdr, 60, 2)?,
            rd(&ehdr, 62, 2)?,
        )
    } else {
        (
            rd(&ehdr, 32, 4)?,
            rd(&ehdr, 46, 2)?,
            rd(&ehdr, 48, 2)?,
            rd(&ehdr, 50, 2)?,
        )
    };
    if shnum > MAX_SECTIONS || shentsize < if wide { 64 } else { 40 } {
        return None;
    }
    // (name offset, type, addr, offset, size, link, entsize)
    let mut shdrs = Vec::new();
    let mut sh = vec![0u8; shentsize as usize];
    for i in 0..shnum {
        f.read_exact_at(&mut sh, shoff.checked_add(i * shentsize)?)
            .ok()?;
        let g = |o32: usize, o64: usize, n32: usize| {
            if wide {
                rd(&sh, o64, if n32 == 4 { 4 } else { 8 })
            } else {
                rd(&sh, o32, 4)
            }
        };
        shdrs.push((
            rd(&sh, 0, 4)?,
            rd(&sh, 4, 4)?,
            g(12, 16, 8)?,
            g(16, 24, 8)?,
            g(20, 32, 8)?,
            g(24, 40, 4)?,
            g(36, 56, 8)?,
        ));
    }
    let read = |off: u64, size: u64| -> Option<Vec<u8>> {
        if off.checked_add(size)? > len || size > 64 << 20 {
            return None;
        }
        let mut b = vec![0u8; size as usize];
        f.read_exact_at(&mut b, off).ok()?;
        Some(b)
    };
    let shstr = shdrs.get(shstrndx as usize)?;
    let names = read(shstr.3, shstr.4)?;
    let cstr = |b: &[u8], at: u64| -> Option<String> {
        let s = b.get(at as usize..)?;
        let n = s.iter().position(|&c| c == 0)?;
        Some(String::from_utf8_lossy(&s[..n]).into_owned())
    };
    let named = |n: &str| {
        shdrs
            .iter()
            .find(|h| cstr(&names, h.0).as_deref() == Some(n))
    };
    let rel = named(".rela.plt").or_else(|| named(".rel.plt"))?;
    let rela = rel.1 == 4;
    let rsize = match (wide, rela) {
        (true, _) => 24,
        (false, true) => 12,
        (false, false) => 8,
    };
    let count = rel.4 / rsize;
    if count > MAX_PLT_RELOCS {
        return None;
    }
    let rels = read(rel.3, count * rsize)?;
    let dynsym = shdrs.get(rel.5 as usize)?;
    let dynstr = shdrs.get(dynsym.5 as usize)?;
    let syms = read(dynsym.3, dynsym.4)?;
    let strs = read(dynstr.3, dynstr.4)?;
    let ssize = if wide { 24 } else { 16 };
    let mut names_of = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let info = rd(&rels, i * rsize as usize + w, w)?;
        let sym = if wide { info >> 32 } else { info >> 8 };
        let name = (sym != 0)
            .then(|| rd(&syms, sym as usize * ssize, 4))
            .flatten()
            .and_then(|n| cstr(&strs, n))
            .filter(|n| !n.is_empty());
        names_of.push(name);
    }
    let mut out = Vec::new();
    let mut add = |start: u64, size: u64, first: u64| {
        for (i, n) in names_of.iter().enumerate() {
            let at = start + first + i as u64 * entry;
            if let Some(n) = n {
                if at + entry <= start + size {
                    out.push((at, at + entry, format!("{n}@plt")));
                }
            }
        }
    };
    if let Some(sec) = named(".plt.sec") {
        add(sec.2, sec.4, 0);
    }
    if let Some(plt) = named(".plt") {
        add(plt.2, plt.4, plt0);
    }
    out.sort();
    Some(out)
}

/// The stub at virtual address `va`.
pub fn stub_at(stubs: &[Stub], va: u64) -> Option<&str> {
    let k = stubs.partition_point(|s| s.0 <= va);
    let s = stubs.get(k.checked_sub(1)?)?;
    (va < s.1).then_some(s.2.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_segments_and_build_id_match_readelf() {
        let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
        let out = std::process::Command::new("readelf")
            .args(["-lW", "-n"])
            .arg(libc)
            .output()
            .expect("readelf runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let want: Vec<Load> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("LOAD"))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let h = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
                Load {
                    offset: h(f[1]),
                    vaddr: h(f[2]),
                    filesz: h(f[4]),
                }
            })
            .collect();
        assert!(!want.is_empty());
        assert_eq!(loads(libc).unwrap(), want);
        let id = text
            .lines()
            .find_map(|l| l.split_once("Build ID: ").map(|(_, id)| id))
            .unwrap()
            .trim()
            .to_string();
        let ours: String = build_id(libc)
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(ours, id);
    }

    #[test]
    fn offsets_outside_every_segment_have_no_address() {
        let l = [Load {
            offset: 0x1000,
            vaddr: 0x401000,
            filesz: 0x100,
        }];
        assert_eq!(vaddr(&l, 0x1010), Some(0x401010));
        assert_eq!(vaddr(&l, 0x1100), None);
        assert_eq!(vaddr(&l, 0xfff), None);
    }

    #[test]
    fn not_elf_is_none() {
        let p = std::env::temp_dir().join(format!("ustack-not-elf-{}", std::process::id()));
        std::fs::write(&p, b"\x7fELF\x09garbage").unwrap();
        assert_eq!(loads(&p), None);
        assert_eq!(build_id(&p), None);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn plt_stubs_are_named_as_objdump_names_them() {
        let ls = Path::new("/bin/ls");
        let ours = plt_stubs(ls);
        let mut want = Vec::new();
        for sec in [".plt", ".plt.sec"] {
            let out = std::process::Command::new("objdump")
                .args(["-d", "-j", sec])
                .arg(ls)
                .output()
                .expect("objdump runs");
            for l in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some((a, rest)) = l.split_once(" <") {
                    if let Some(n) = rest.strip_suffix(">:") {
                        if n.ends_with("@plt") {
                            want.push((u64::from_str_radix(a, 16).unwrap(), n.to_string()));
                        }
                    }
                }
            }
        }
        assert!(want.len() > 50, "{want:?}");
        for (a, n) in &want {
            assert_eq!(stub_at(&ours, *a), Some(n.as_str()), "{a:#x}");
            assert_eq!(stub_at(&ours, *a + 15), Some(n.as_str()), "{a:#x}");
        }
        assert_eq!(ours.len(), want.len());
    }
}
