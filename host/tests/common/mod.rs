// SPDX-License-Identifier: GPL-2.0

//! Helpers of the CFI tests: memory over an ELF file's load segments, an ELF file read
//! by offset with its table kept as the module keeps it, and the test programs built
//! without frame pointers by GCC, Clang and rustc.

#![allow(dead_code)]

use gimli::{
    BaseAddresses, CieOrFde, EhFrame, EndianSlice, FrameDescriptionEntry, LittleEndian,
    UnwindSection,
};
use object::{Object, ObjectSegment};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;
use user_unwind_logic::logic::cfi::machine::Row;
use user_unwind_logic::logic::cfi::{CfiError, Memory, Slice};
use user_unwind_logic::logic::ftable::{self, Add};
use user_unwind_logic::logic::unwinder::{row_at, Caches, Region, Task, Workspace};

/// An ELF file's bytes seen at their link-time addresses, through its `PT_LOAD` segments.
pub struct ElfMemory<'a> {
    data: &'a [u8],
    /// (address, file offset, file size) of each segment.
    segments: Vec<(u64, u64, u64)>,
}

impl<'a> ElfMemory<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        let obj = object::File::parse(data).expect("an ELF file");
        let segments = obj
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (s.address(), off, size)
            })
            .collect();
        ElfMemory { data, segments }
    }

    /// The file offset of the byte at `vaddr`, if a segment maps it.
    pub fn file_offset(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(va, _, size)| va <= vaddr && vaddr < va + size)
            .map(|&(va, off, _)| off + vaddr - va)
    }

    /// The address of the segment at file offset 0: where the ELF header is mapped.
    pub fn first_load(&self) -> u64 {
        self.segments
            .iter()
            .find(|s| s.1 == 0)
            .map(|s| s.0)
            .expect("a segment maps the ELF header")
    }
}

impl Memory for ElfMemory<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        let end = addr.checked_add(buf.len() as u64).ok_or(CfiError::Read)?;
        for &(va, off, size) in &self.segments {
            if va <= addr && end <= va + size {
                let start = (off + addr - va) as usize;
                buf.copy_from_slice(&self.data[start..start + buf.len()]);
                return Ok(());
            }
        }
        Err(CfiError::Read)
    }
}

/// The test programs built without frame pointers.
pub struct Built {
    /// Where they are.
    pub dir: PathBuf,
    /// Every ELF file built: the GCC and Clang `uu_chain` and `libuutest.so`, the Rust
    /// binary.
    pub binaries: Vec<String>,
    /// The `uu_chain` programs (GCC's, then Clang's), which find their `libuutest.so`
    /// through their rpath.
    pub chains: Vec<String>,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn prog_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/prog")
}

fn build_c(dir: &Path, cc: &str, tag: &str) -> Vec<String> {
    let out = dir.join(tag);
    std::fs::create_dir_all(&out).expect("build folder");
    let flags = ["-O2", "-g", "-fomit-frame-pointer", "-Wall", "-Werror"];
    let lib = out.join("libuutest.so");
    run(Command::new(cc)
        .args(flags)
        .args(["-fPIC", "-shared", "-Wl,--build-id", "-o"])
        .arg(&lib)
        .arg(prog_dir().join("uu_lib.c")));
    let chain = out.join("uu_chain");
    run(Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(&chain)
        .arg(prog_dir().join("uu_chain.c"))
        .arg(format!("-L{}", out.display()))
        .arg("-luutest")
        .arg(format!("-Wl,-rpath,{}", out.display())));
    vec![
        chain.to_string_lossy().into_owned(),
        lib.to_string_lossy().into_owned(),
    ]
}

fn build_rust(dir: &Path) -> String {
    let src = dir.join("tiny.rs");
    std::fs::write(
        &src,
        "use std::collections::BTreeMap;\n\
         #[inline(never)]\n\
         fn work(n: u64) -> u64 {\n\
         \tlet mut m = BTreeMap::new();\n\
         \tfor i in 0..n { m.insert(i, format!(\"{i}\")); }\n\
         \tm.values().map(|s| s.len() as u64).sum()\n\
         }\n\
         fn main() { println!(\"{}\", work(std::env::args().count() as u64 * 10)); }\n",
    )
    .expect("write tiny.rs");
    let bin = dir.join("tiny-rust");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    run(Command::new(rustc)
        .args(["-C", "opt-level=2", "--edition=2021", "-o"])
        .arg(&bin)
        .arg(&src));
    bin.to_string_lossy().into_owned()
}

/// Builds the programs once per test binary into a fresh temporary folder.
pub fn build_programs() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("uu-cfi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary folder");
        let mut binaries = build_c(&dir, "gcc", "gcc");
        let mut chains = vec![binaries[0].clone()];
        if Path::new("/usr/bin/clang-19").exists() {
            let clang = build_c(&dir, "clang-19", "clang");
            chains.push(clang[0].clone());
            binaries.extend(clang);
        } else {
            println!("SKIP: clang-19 is not installed, no Clang build compared");
        }
        binaries.push(build_rust(&dir));
        Built {
            dir,
            binaries,
            chains,
        }
    })
}

/// An ELF file as the module reads an object (by file offset), with the file tables kept
/// as the module's glue keeps them: made, published, grown by copying.
pub struct FileTask<'a> {
    pub data: &'a [u8],
    /// The stack, and the mapping of the file every address is in (none by default).
    pub stack: Slice<'a>,
    pub region: Option<Region>,
    pub tables: HashMap<u64, Box<[AtomicU64]>>,
    pub pending: Option<Box<[AtomicU64]>>,
    pub grown: usize,
    /// A second file and its mapping, for stacks through two objects (none by default).
    pub other: Option<(Region, &'a [u8])>,
    /// Whether the object open is `other`.
    open_other: bool,
    /// What the object's content check says (settled by default).
    pub settled: bool,
    /// The file offsets of the object's reads.
    pub reads: Vec<u64>,
}

impl<'a> FileTask<'a> {
    /// The file `data`, with no table yet.
    pub fn new(data: &'a [u8]) -> Self {
        FileTask {
            data,
            stack: Slice {
                base: 0,
                bytes: &[],
            },
            region: None,
            tables: HashMap::new(),
            pending: None,
            grown: 0,
            other: None,
            open_other: false,
            settled: true,
            reads: Vec::new(),
        }
    }
}

pub fn zeroed(words: usize) -> Box<[AtomicU64]> {
    (0..words).map(|_| AtomicU64::new(0)).collect()
}

impl Memory for FileTask<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.stack.read(addr, buf)
    }
}

impl Task for FileTask<'_> {
    fn region(&mut self, addr: u64) -> Result<Option<Region>, CfiError> {
        let within = |r: &Region| r.start <= addr && addr < r.end;
        Ok(self
            .region
            .filter(within)
            .or_else(|| self.other.map(|(r, _)| r).filter(within)))
    }
    fn object_open(&mut self, region: &Region, _addr: u64) -> Result<(), CfiError> {
        self.open_other = self.other.is_some_and(|(r, _)| r.key == region.key);
        Ok(())
    }
    fn object_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.reads.push(offset);
        let data = match self.other {
            Some((_, other)) if self.open_other => other,
            _ => self.data,
        };
        let start = usize::try_from(offset).map_err(|_| CfiError::Malformed)?;
        let bytes = start
            .checked_add(buf.len())
            .and_then(|end| data.get(start..end))
            .ok_or(CfiError::Malformed)?;
        buf.copy_from_slice(bytes);
        Ok(())
    }
    fn object_settled(&mut self) -> bool {
        self.settled
    }
    fn object_close(&mut self) {}
    fn table(&mut self, key: u64) -> Option<&[AtomicU64]> {
        self.tables.get(&key).map(|t| &t[..])
    }
    fn table_create(&mut self, words: usize) -> Option<&[AtomicU64]> {
        self.pending = Some(zeroed(words));
        self.pending.as_deref()
    }
    fn table_pending(&mut self) -> Option<&[AtomicU64]> {
        self.pending.as_deref()
    }
    fn table_publish(&mut self, key: u64) {
        if let Some(t) = self.pending.take() {
            self.tables.entry(key).or_insert(t);
        }
    }
    fn table_write(&mut self, key: u64, write: &mut dyn FnMut(&[AtomicU64]) -> Result<(), Add>) {
        let Some(t) = self.tables.get(&key) else {
            return;
        };
        if let Err(Add::Room(words)) = write(t) {
            let new = zeroed(words);
            ftable::grow(t, &new).expect("the table grows");
            write(&new).expect("the rows fit the grown table");
            self.tables.insert(key, new);
            self.grown += 1;
        }
    }
}

/// Every FDE of `eh` as gimli reads it, in the section's order.
pub fn gimli_fdes<'a>(
    eh: &EhFrame<EndianSlice<'a, LittleEndian>>,
    bases: &BaseAddresses,
) -> Vec<FrameDescriptionEntry<EndianSlice<'a, LittleEndian>>> {
    let mut entries = eh.entries(bases);
    let mut out = Vec::new();
    while let Some(entry) = entries.next().expect("gimli walks .eh_frame") {
        if let CieOrFde::Fde(partial) = entry {
            out.push(
                partial
                    .parse(EhFrame::cie_from_offset)
                    .expect("gimli parses the FDE"),
            );
        }
    }
    out
}

/// The row at `pc` through the unwinder and the file's table (its cookie `key`), the file
/// mapped so that `pc`'s page lies at its own file offset; `None` when no segment of
/// `segments` maps `pc`.
pub fn row_through_table<T: Task>(
    file: &mut T,
    caches: &Caches,
    work: &mut Workspace,
    segments: &ElfMemory<'_>,
    key: u64,
    pc: u64,
) -> Option<Result<Option<Row>, CfiError>> {
    let offset = segments.file_offset(pc)?;
    let region = Region {
        start: pc - offset,
        end: u64::MAX,
        offset: 0,
        key: Some(key),
    };
    Some(row_at(file, caches, work, &region, pc))
}
