// SPDX-License-Identifier: GPL-2.0

//! The unwinder's cost per frame on a warm row cache, on a synthetic stack of 129 frames
//! of 16 bytes (what `uu_bench_nofp`'s recursion makes): run under callgrind to count
//! instructions (`valgrind --tool=callgrind`), or as a smoke test.

use user_unwind_logic::logic::cfi::machine::{Cfa, Row, Rule};
use user_unwind_logic::logic::cfi::step::{Regs, Scratch};
use user_unwind_logic::logic::cfi::{CfiError, Memory, Slice};
use user_unwind_logic::logic::unwinder::{unwind, Caches, End, Region, Task};

const SP: u64 = 0x7ffc_0000;
const FRAMES: usize = 129;

struct Synthetic<'a>(Slice<'a>);

impl Memory for Synthetic<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.0.read(addr, buf)
    }
}

impl Task for Synthetic<'_> {
    fn region(&mut self, addr: u64) -> Option<Region> {
        (0x1000..0x2000).contains(&addr).then_some(Region {
            start: 0x1000,
            end: 0x2000,
            offset: 0x1000,
            key: Some(5),
        })
    }
    fn elf_base(&mut self, _region: &Region, _addr: u64) -> Option<u64> {
        None
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
    let row = Row {
        cfa: Cfa::RegOffset { reg: 7, offset: 16 },
        ra: Rule::Offset(-8),
        bp: Rule::SameValue,
        bx: Rule::SameValue,
        signal: false,
    };
    caches.rows.put(5, 0x149f, &row);
    caches.rows.put(5, 0x1400, &row);
    let mut scratch = Scratch::new();
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
        let (got, end, counts) = unwind(&mut t, regs, 1 << 47, &caches, &mut scratch, &mut ips);
        assert_eq!((got, end), (FRAMES, End::Complete));
        assert_eq!(counts.row_misses, 0);
    }
}
