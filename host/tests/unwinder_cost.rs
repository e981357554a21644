// SPDX-License-Identifier: GPL-2.0

//! The unwinder's driver on synthetic tasks: its cost per frame on a warm row cache, on a
//! stack of 129 frames of 16 bytes (what `uu_bench_nofp`'s recursion makes; run under
//! callgrind to count instructions, `UU_ITER=N valgrind --tool=callgrind`), and random
//! memory behind the mappings and on the stack (it ends, within its limits, never panics).

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
    let mut scratch = Scratch::new();
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
            let (n, _, _) = unwind(&mut t, regs, 1 << 47, &caches, &mut scratch, &mut ips);
            assert!(n <= ips.len());
            frames += n;
        }
    }
    // Random stacks still give frames beyond the first, through the random tables.
    assert!(frames > 2 * 3000, "{frames} frames");
}
