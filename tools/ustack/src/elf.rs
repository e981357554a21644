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
}
