// SPDX-License-Identifier: GPL-2.0

//! The unwinder's driver on synthetic tasks: its cost per frame on a warm row cache, on a
//! stack of 129 frames of 16 bytes (what `uu_bench_nofp`'s recursion makes; run under
//! callgrind to count instructions, `UU_ITER=N valgrind --tool=callgrind`), and random
//! memory behind the mappings and on the stack (it ends, within its limits, never panics).
//! Its cost at first sight, on libc: a row cache miss on an FDE its file's table has not
//! seen (two runs under `valgrind --tool=callgrind --toggle-collect='*unwinder::unwind*'`
//! with two values of `UU_FDES`: the difference over the difference in frames).

mod common;

use user_unwind_logic::logic::cfi::cie::load_entry;
use user_unwind_logic::logic::cfi::elf::find_eh_frame_hdr;
use user_unwind_logic::logic::cfi::fde::cie_addr;
use user_unwind_logic::logic::cfi::machine::{Cfa, Row, Rule};
use user_unwind_logic::logic::cfi::step::Regs;
use user_unwind_logic::logic::cfi::table::Hdr;
use user_unwind_logic::logic::cfi::Budget;
use user_unwind_logic::logic::cfi::{CfiError, Memory, Slice};
use user_unwind_logic::logic::ftable::View;
use user_unwind_logic::logic::unwinder::{row_at, unwind, Caches, End, Region, Task, Workspace};

const SP: u64 = 0x7ffc_0000;
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const FRAMES: usize = 129;

struct Synthetic<'a>(Slice<'a>);

impl Memory for Synthetic<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.0.read(addr, buf)
    }
}

impl Task for Synthetic<'_> {
    fn region(&mut self, addr: u64) -> Result<Option<Region>, CfiError> {
        Ok((0x1000..0x2000).contains(&addr).then_some(Region {
            start: 0x1000,
            end: 0x2000,
            offset: 0x1000,
            key: Some(5),
        }))
    }
    /// A file that is no ELF object: no table, the frame-pointer rule.
    fn object_open(&mut self, _region: &Region, _addr: u64) -> Result<(), CfiError> {
        Ok(())
    }
    fn object_read(&mut self, _offset: u64, _buf: &mut [u8]) -> Result<(), CfiError> {
        Err(CfiError::Malformed)
    }
    fn object_settled(&mut self) -> bool {
        false
    }
    fn object_close(&mut self) {}
}

/// The row of a frame whose CFA is `rsp + offset`, with the return address just below it
/// and `rbp` and `rbx` untouched.
fn rsp_row(offset: i32) -> Row {
    Row {
        cfa: Cfa::RegOffset { reg: 7, offset },
        ra: Rule::Offset(-8),
        bp: Rule::SameValue,
        bx: Rule::SameValue,
        signal: false,
    }
}

#[test]
fn warm_stack_of_129_frames() {
    let mut stack = vec![0u8; 16 * FRAMES + 16];
    for i in 0..FRAMES {
        let ra: u64 = if i + 1 < FRAMES { 0x14a0 } else { 0 };
        stack[16 * i + 8..16 * i + 16].copy_from_slice(&ra.to_le_bytes());
    }
    let caches = Caches::new();
    let row = rsp_row(16);
    caches.rows.put(5, 0x149f, &row);
    caches.rows.put(5, 0x1400, &row);
    let mut work = Workspace::new();
    let mut ips = vec![0u64; 511];
    let n: usize = std::env::var("UU_ITER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    for _ in 0..n {
        let mut t = Synthetic(Slice {
            base: SP,
            bytes: &stack,
        });
        let regs = Regs {
            ip: 0x1400,
            sp: SP,
            bp: 0,
            bx: 0,
        };
        let (got, end, counts) = unwind(&mut t, regs, 1 << 47, &caches, &mut work, &mut ips);
        assert_eq!((got, end), (FRAMES, End::Complete));
        assert_eq!(counts.row_misses, 0);
    }
}

/// The first addresses of `n` functions of libc (`data`) spread over its `.eh_frame_hdr`,
/// those whose page is mapped at its own offset (libc's code is), so that `region`, a
/// mapping at 0, covers them, and whose row there is a called function's (not a thread's
/// or a signal trampoline's first, which end a stack).
fn libc_entries(data: &[u8], region: &Region, n: u64) -> Vec<u64> {
    let mut mem = common::ElfMemory::new(data);
    let hdr = libc_hdr(&mut mem);
    let n = n.min(hdr.count);
    let entered = rsp_row(8);
    let mut probe = common::FileTask::new(data);
    let caches = Box::new(Caches::new());
    let mut work = Box::new(Workspace::new());
    let mut pcs = Vec::new();
    for k in 0..n {
        let i = k * hdr.count / n.max(1);
        let mut b = [0u8; 4];
        mem.read(hdr.table + 8 * i, &mut b)
            .expect("the search table");
        let pc = hdr.addr.wrapping_add(i32::from_le_bytes(b) as u64);
        let row = row_at(&mut probe, &caches, &mut work, region, pc);
        if mem.file_offset(pc) == Some(pc) && row == Ok(Some(entered)) {
            pcs.push(pc);
        }
    }
    pcs
}

/// A mapping of the whole of libc (`data`) at 0, under the file cookie `key`.
fn libc_region(data: &[u8], key: u64) -> Region {
    Region {
        start: 0,
        end: data.len() as u64,
        offset: 0,
        key: Some(key),
    }
}

/// libc's `.eh_frame_hdr`, read through `mem`.
fn libc_hdr(mem: &mut common::ElfMemory) -> Hdr {
    let mut budget = Budget::default();
    let base = mem.first_load();
    let at = find_eh_frame_hdr(mem, &mut budget, base).expect("libc's PT_GNU_EH_FRAME");
    Hdr::parse(mem, &mut budget, at).expect("libc's .eh_frame_hdr")
}

/// The return address 0: a single frame's stack.
static RET0: [u8; 8] = [0; 8];

/// libc (`data`) mapped as `region`, with a stack whose only frame is at a function's
/// first instruction (its return address is 0).
fn single_frame_file<'a>(data: &'a [u8], region: Region) -> common::FileTask<'a> {
    let mut file = common::FileTask::new(data);
    file.region = Some(region);
    file.stack = Slice {
        base: SP,
        bytes: &RET0,
    };
    file
}

/// Unwinds `file`'s single-frame stack at `pc`, which must be whole and a first sight.
fn first_sight_frame(
    file: &mut common::FileTask<'_>,
    caches: &Caches,
    work: &mut Workspace,
    pc: u64,
) {
    let regs = Regs {
        ip: pc,
        sp: SP,
        bp: 1,
        bx: 0,
    };
    let mut ips = [0u64; 4];
    let (n, end, counts) = unwind(file, regs, 1 << 47, caches, work, &mut ips);
    assert_eq!(
        (n, end, counts.row_misses),
        (1, End::Complete, 1),
        "{pc:#x}"
    );
}

/// First sight: stacks through the first addresses of `UU_FDES` (default 200) functions of
/// libc spread over its `.eh_frame_hdr`, 100 frames a stack, mapped where the file says:
/// each frame a row cache miss on an FDE the file's table has not seen, which parses the
/// FDE and keeps its rows (the table is made by the first). At a function's first
/// instruction the caller's return address is at the stack pointer, so the stack is the
/// return addresses one after the other. Every stack must be whole, every frame a row
/// cache miss, and the table must keep at least a row a frame; the oracle of the rows
/// themselves is `cfi_oracle`.
#[test]
fn first_sight_on_libc() {
    const KEY: u64 = 0x11bc;
    const DEPTH: usize = 100;
    let data = std::fs::read(LIBC).expect("libc");
    let n: u64 = std::env::var("UU_FDES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let region = libc_region(&data, KEY);
    let pcs = libc_entries(&data, &region, n);
    let caches = Box::new(Caches::new());
    let mut work = Box::new(Workspace::new());
    let mut file = common::FileTask::new(&data);
    file.region = Some(region);
    // Frame i's return address (into frame i + 1) at SP + 8 i; the last returns to 0.
    let stacks: Vec<Vec<u8>> = pcs
        .chunks(DEPTH)
        .map(|chunk| {
            let ras = chunk.iter().skip(1).map(|&pc| pc + 1).chain([0]);
            ras.flat_map(u64::to_le_bytes).collect()
        })
        .collect();
    let mut ips = vec![0u64; 511];
    let (mut frames, mut misses) = (0, 0);
    for (chunk, stack) in pcs.chunks(DEPTH).zip(&stacks) {
        file.stack = Slice {
            base: SP,
            bytes: stack,
        };
        let regs = Regs {
            ip: chunk[0],
            sp: SP,
            bp: 1,
            bx: 0,
        };
        let (got, end, counts) = unwind(&mut file, regs, 1 << 47, &caches, &mut work, &mut ips);
        assert_eq!((got, end), (chunk.len(), End::Complete), "{counts:?}");
        assert_eq!(
            &ips[..got],
            chunk
                .iter()
                .enumerate()
                .map(|(i, &pc)| pc + u64::from(i > 0))
                .collect::<Vec<_>>()
        );
        frames += got;
        misses += counts.row_misses as usize;
    }
    let view = View::new(file.tables.get(&KEY).expect("libc's table")).expect("a table");
    println!(
        "first sight: {frames} frames in libc, {misses} row misses, {} rows kept",
        view.used()
    );
    assert_eq!(misses, frames, "every frame is a first sight");
    assert!(view.used() >= frames, "the rows of every FDE are kept");
}

/// The last CIE a stack loaded serves the next stack through the same file only once a
/// check of the file's content after it was read proved it settled: a CIE read while the
/// file was being written (the check after its stack's lookup fails) is read again by the
/// next stack, one proven is not. Single-frame stacks at the first instruction of libc
/// functions, each a first sight; the CIE's reads are counted at its file offset.
#[test]
fn the_last_cie_serves_the_next_stack_only_once_proven_settled() {
    const KEY: u64 = 0xc1e;
    let data = std::fs::read(LIBC).expect("libc");
    let region = libc_region(&data, KEY);
    let pcs = libc_entries(&data, &region, 400);
    // Each function's CIE, at its file offset.
    let mut mem = common::ElfMemory::new(&data);
    let hdr = libc_hdr(&mut mem);
    let mut cie_of = |pc: u64| {
        let mut budget = Budget::default();
        let fde = hdr.lookup(&mut mem, &mut budget, pc).expect("an FDE").fde;
        let mut buf = [0u8; 4096];
        let entry = load_entry(&mut mem, &mut budget, fde, &mut buf).expect("the FDE");
        let cie = cie_addr(&entry).expect("its CIE");
        mem.file_offset(cie).expect("the CIE in the file")
    };
    let cies: Vec<(u64, u64)> = pcs.iter().map(|&pc| (pc, cie_of(pc))).collect();
    let c = cies[0].1;
    let with_c: Vec<u64> = cies.iter().filter(|p| p.1 == c).map(|p| p.0).collect();
    let (d, with_d) = {
        let d = cies.iter().find(|p| p.1 != c).expect("libc has two CIEs").1;
        (
            d,
            cies.iter()
                .filter(|p| p.1 == d)
                .map(|p| p.0)
                .collect::<Vec<_>>(),
        )
    };
    assert!(
        with_c.len() >= 3 && with_d.len() >= 2,
        "{with_c:x?} {with_d:x?}"
    );
    let caches = Box::new(Caches::new());
    let mut work = Box::new(Workspace::new());
    let mut file = single_frame_file(&data, region);
    // Whether a stack at `pc`, its file settled or not, read the CIE at `cie`.
    let mut reads_cie = |file: &mut common::FileTask<'_>, settled: bool, pc: u64, cie: u64| {
        file.settled = settled;
        file.reads.clear();
        first_sight_frame(file, &caches, &mut work, pc);
        file.reads.contains(&cie)
    };
    // Settled: the first stack reads C, the next ones through C do not.
    assert!(reads_cie(&mut file, true, with_c[0], c));
    assert!(!reads_cie(&mut file, true, with_c[1], c));
    // Proven, C stays proven while the file is written: the identity that keys it changes.
    assert!(!reads_cie(&mut file, false, with_c[2], c));
    // Read while the file is being written, D is read again by the next stack.
    assert!(reads_cie(&mut file, false, with_d[0], d));
    assert!(reads_cie(&mut file, true, with_d[1], d));
}

/// The description of a file (its segments and `.eh_frame_hdr`) that a stack used is kept
/// for the next stack only if every read of that stack proved settled: a stack that read
/// the file while it was being written leaves nothing for the next, which decodes the
/// description again from the file's table. Single-frame stacks at libc functions' first
/// instructions, each a first sight.
#[test]
fn the_file_description_serves_the_next_stack_only_once_proven_settled() {
    const KEY: u64 = 0xde5c;
    let data = std::fs::read(LIBC).expect("libc");
    let region = libc_region(&data, KEY);
    let pcs = libc_entries(&data, &region, 20);
    let hdr = libc_hdr(&mut common::ElfMemory::new(&data));
    let caches = Box::new(Caches::new());
    let mut work = Box::new(Workspace::new());
    let mut file = single_frame_file(&data, region);
    // The description kept after a stack at `pc`, its file settled or not.
    let mut kept = |file: &mut common::FileTask<'_>, settled: bool, pc: u64| {
        file.settled = settled;
        first_sight_frame(file, &caches, &mut work, pc);
        work.info.map(|(key, info)| (key, info.hdr))
    };
    assert_eq!(kept(&mut file, true, pcs[0]), Some((KEY, Some(hdr))));
    // Served from the last stack, kept again.
    assert_eq!(kept(&mut file, true, pcs[1]), Some((KEY, Some(hdr))));
    // Read while the file is being written: not kept.
    assert_eq!(kept(&mut file, false, pcs[2]), None);
    assert_eq!(kept(&mut file, true, pcs[3]), Some((KEY, Some(hdr))));
}

/// A stack through two objects whose CIEs lie at the same address but say different
/// things: libc, and a copy of it whose CIEs' initial instructions put the CFA at rsp + 16
/// and the return address at CFA - 16 (`0c 07 08 90 01` made `0c 07 10 90 02`), mapped
/// elsewhere under another file cookie. Frames alternate between the two, each at a
/// function's first instruction (so its row is its CIE's): the caller's stack pointer is
/// the return address's + 8 in libc and + 16 in the copy. The stack unwinds whole and
/// exact only if each frame is parsed with its own object's CIE, not with the one the
/// unwinder kept from the frame before (the last CIE and its initial row are forgotten
/// when another object is opened). Twice: at first sight, then from the tables.
#[test]
fn a_stack_through_two_objects_whose_cies_share_an_address() {
    const KEY: u64 = 0x11bc;
    const OTHER: u64 = 0x22cd;
    const AT: u64 = 1 << 40;
    let data = std::fs::read(LIBC).expect("libc");
    let mut copy = data.clone();
    let (eh, eh_len) = {
        let obj = object::File::parse(&*data).expect("an ELF file");
        let s = object::Object::section_by_name(&obj, ".eh_frame").expect(".eh_frame");
        let (off, len) = object::ObjectSection::file_range(&s).expect("in the file");
        (off as usize, len as usize)
    };
    let (mut at, mut patched) = (eh, 0);
    while at + 8 <= eh + eh_len {
        let len = u32::from_le_bytes(copy[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        let body = at + 4..at + 4 + len;
        let is_cie = copy[at + 4..at + 8] == [0, 0, 0, 0];
        let from = [0x0c, 0x07, 0x08, 0x90, 0x01];
        if let Some(i) = is_cie
            .then(|| copy[body.clone()].windows(5).position(|w| w == from))
            .flatten()
        {
            let i = body.start + i;
            copy[i..i + 5].copy_from_slice(&[0x0c, 0x07, 0x10, 0x90, 0x02]);
            patched += 1;
        }
        at = body.end;
    }
    assert!(
        patched >= 1,
        "libc has a CIE with GCC's initial instructions"
    );
    let mapping = |start: u64, key: u64| Region {
        start,
        end: start + data.len() as u64,
        offset: 0,
        key: Some(key),
    };
    let pcs = libc_entries(&data, &mapping(0, KEY), 60);
    assert!(pcs.len() >= 20, "{} functions", pcs.len());
    // Frame i is in the copy when i is odd.
    let pc = |i: usize| pcs[i] + if i % 2 == 1 { AT } else { 0 };
    let mut stack = Vec::new();
    for i in 0..pcs.len() {
        let ra = if i + 1 < pcs.len() { pc(i + 1) + 1 } else { 0 };
        stack.extend(ra.to_le_bytes());
        if i % 2 == 1 {
            stack.extend(0xdead_beefu64.to_le_bytes());
        }
    }
    let mut file = common::FileTask::new(&data);
    file.region = Some(mapping(0, KEY));
    file.other = Some((mapping(AT, OTHER), &copy));
    file.stack = Slice {
        base: SP,
        bytes: &stack,
    };
    let caches = Box::new(Caches::new());
    let mut work = Box::new(Workspace::new());
    let want: Vec<u64> = (0..pcs.len()).map(|i| pc(i) + u64::from(i > 0)).collect();
    for pass in ["at first sight", "from the tables"] {
        let mut ips = vec![0u64; 511];
        let regs = Regs {
            ip: pc(0),
            sp: SP,
            bp: 1,
            bx: 0,
        };
        let (got, end, counts) = unwind(&mut file, regs, 1 << 47, &caches, &mut work, &mut ips);
        assert_eq!((got, end), (pcs.len(), End::Complete), "{pass}: {counts:?}");
        assert_eq!(&ips[..got], &want[..], "{pass}");
        caches.rows.clear();
    }
    assert_eq!(file.tables.len(), 2, "a table for each object");
}

/// Random memory behind every mapping and on the stack, with and without a real-looking
/// ELF header: every unwind ends (complete or truncated) within the frame limit and the
/// budget, and never panics.
#[test]
fn random_memory_never_hangs_or_panics() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    struct Random<'a> {
        image: Slice<'a>,
        stack: Slice<'a>,
    }
    impl Memory for Random<'_> {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
            self.image
                .read(addr, buf)
                .or_else(|_| self.stack.read(addr, buf))
        }
    }
    impl Task for Random<'_> {
        fn region(&mut self, addr: u64) -> Result<Option<Region>, CfiError> {
            Ok((0x1000..0x1000 + 8192).contains(&addr).then_some(Region {
                start: 0x1000,
                end: 0x1000 + 8192,
                offset: 0,
                key: Some(7),
            }))
        }
        fn object_open(&mut self, _region: &Region, _addr: u64) -> Result<(), CfiError> {
            Ok(())
        }
        fn object_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CfiError> {
            self.image
                .read(offset.wrapping_add(0x1000), buf)
                .map_err(|_| CfiError::Malformed)
        }
        fn object_settled(&mut self) -> bool {
            true
        }
        fn object_close(&mut self) {}
    }
    let mut image = vec![0u8; 8192];
    let mut stack = vec![0u8; 4096];
    let mut ips = vec![0u64; 511];
    let mut work = Workspace::new();
    let mut frames = 0;
    for round in 0..3000 {
        let caches = Caches::new();
        for b in image.iter_mut().chain(stack.iter_mut()) {
            *b = next() as u8;
        }
        // Half the images start like an ELF64 object with a PT_GNU_EH_FRAME, so the
        // table parser sees random tables.
        if round % 2 == 0 {
            image[..6].copy_from_slice(b"\x7fELF\x02\x01");
            image[32..40].copy_from_slice(&64u64.to_le_bytes());
            image[54..56].copy_from_slice(&56u16.to_le_bytes());
            image[56..58].copy_from_slice(&2u16.to_le_bytes());
            image[64..68].copy_from_slice(&1u32.to_le_bytes());
            image[72..88].copy_from_slice(&[0; 16]);
            image[120..124].copy_from_slice(&0x6474_e550u32.to_le_bytes());
            image[136..144].copy_from_slice(&0x200u64.to_le_bytes());
            image[0x200] = 1;
        }
        // Return addresses into the image, now and then, so that unwinds go on.
        for i in (0..stack.len()).step_by(8) {
            if next() % 3 == 0 {
                let ra = 0x1000 + next() % 8192;
                stack[i..i + 8].copy_from_slice(&ra.to_le_bytes());
            }
        }
        let mut t = Random {
            image: Slice {
                base: 0x1000,
                bytes: &image,
            },
            stack: Slice {
                base: SP,
                bytes: &stack,
            },
        };
        let regs = Regs {
            ip: 0x1000 + next() % 8192,
            sp: SP + (next() % 512) * 8,
            bp: SP + (next() % 512) * 8,
            bx: next(),
        };
        for _ in 0..2 {
            let (n, _, _) = unwind(&mut t, regs, 1 << 47, &caches, &mut work, &mut ips);
            assert!(n <= ips.len());
            frames += n;
        }
    }
    // Random stacks still give frames beyond the first, through the random tables.
    assert!(frames > 2 * 3000, "{frames} frames");
}
