// SPDX-License-Identifier: GPL-2.0

//! The guest's hostile call-frame tables (`tests/hostile_cfi.py`), replayed on the host:
//! each image mapped as `uu_hostile_cfi` maps it (whole, between unreadable guards), its
//! function's frame unwound by the driver from the system call's return point and from the
//! call's return address, with a stack whose caller ends the chain. The control and the
//! valid tables must unwind completely; every other table must end the unwind at its frame,
//! with the end its `expected` line names (`table`, `bad_frame`, `read`), cold and warm.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use user_unwind_logic::logic::cfi::step::Regs;
use user_unwind_logic::logic::cfi::{CfiError, Memory, Slice};
use user_unwind_logic::logic::unwinder::{unwind, Caches, End, Region, Task, Workspace};

/// Where the image is mapped (a page above the guard below it) and the stack.
const BASE: u64 = 0x7f00_0000_1000;
const STACK: u64 = 0x7ffc_0000_0000;
/// A return address in the loader, which has no table: the frame-pointer rule goes on.
const LOADER_RET: u64 = 0x5555_0000_1234;

/// The image's task: the file at `BASE`, a stack of two frames, nothing else readable.
struct Hostile<'a> {
    file: &'a [u8],
    stack: [u8; 64],
}

impl Memory for Hostile<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        let end = addr.checked_add(buf.len() as u64).ok_or(CfiError::Read)?;
        for (base, bytes) in [(BASE, self.file), (STACK, &self.stack[..])] {
            if base <= addr && end <= base + bytes.len() as u64 {
                let at = (addr - base) as usize;
                buf.copy_from_slice(&bytes[at..at + buf.len()]);
                return Ok(());
            }
        }
        Err(CfiError::Read)
    }
}

impl Task for Hostile<'_> {
    fn region(&mut self, addr: u64) -> Result<Option<Region>, CfiError> {
        let end = BASE + self.file.len() as u64;
        Ok((BASE..end).contains(&addr).then_some(Region {
            start: BASE,
            end,
            offset: 0,
            key: Some(0x5eed),
        }))
    }

    fn object_open(&mut self, _region: &Region, _addr: u64) -> Result<(), CfiError> {
        Ok(())
    }

    fn object_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        Slice {
            base: 0,
            bytes: self.file,
        }
        .read(offset, buf)
        .map_err(|_| CfiError::Malformed)
    }

    fn object_settled(&mut self) -> bool {
        true
    }

    fn object_close(&mut self) {}
}

/// The images and their expected lines, written by the generator into a folder of the
/// test's own.
fn images(test: &str) -> (PathBuf, Vec<(String, String, String)>) {
    let dir = std::env::temp_dir().join(format!("uu-hostile-cfi-{}-{test}", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/hostile_cfi.py");
    let ok = Command::new("python3")
        .arg(script)
        .arg(&dir)
        .status()
        .expect("python3")
        .success();
    assert!(ok, "{script} failed");
    let expected = std::fs::read_to_string(dir.join("expected")).expect("expected");
    let cases = expected
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), f[1].to_string(), f[2].to_string())
        })
        .collect();
    (dir, cases)
}

#[test]
fn hostile_tables_end_at_their_frame() {
    let (dir, cases) = images("ends");
    assert!(cases.len() > 50);
    let ends: HashMap<&str, End> = [
        ("table", End::Table),
        ("bad_frame", End::BadFrame),
        ("read", End::Read),
    ]
    .into();
    let mut failures = Vec::new();
    for (name, outcome, reason) in &cases {
        let file = std::fs::read(dir.join(name)).expect("image");
        // The frame's stack: the saved rbp (pointing at the loader's frame), the return
        // address into the loader; then the loader's frame, the outermost (return 0).
        let mut stack = [0u8; 64];
        stack[..8].copy_from_slice(&(STACK + 16).to_le_bytes());
        stack[8..16].copy_from_slice(&LOADER_RET.to_le_bytes());
        let mut task = Hostile { file: &file, stack };
        let caches = Caches::new();
        let mut work = Workspace::new();
        // The system call's return point, and (looked up as is) the call's return address.
        for at in [0x113u64, 0x10a] {
            for pass in ["cold", "warm"] {
                let regs = Regs {
                    ip: BASE + at,
                    sp: STACK,
                    bp: 0,
                    bx: 0,
                };
                let mut ips = [0u64; 8];
                let (n, end, counts) =
                    unwind(&mut task, regs, 1 << 47, &caches, &mut work, &mut ips);
                let ok = match outcome.as_str() {
                    "chain" => (n, end) == (2, End::Complete) && ips[1] == LOADER_RET,
                    _ => {
                        n == 1
                            && Some(&end) == ends.get(reason.as_str())
                            && (end != End::Table || counts.errors == 1)
                    }
                };
                if !ok {
                    failures.push(format!(
                        "{name} at {at:#x} ({pass}): {n} frames, {end:?}, want {outcome} {reason}"
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The rewrite test's two contents (the control, and `deep`: its system call returns at
/// the same offset with two more words on the stack) each unwind completely with their own
/// rows; with the control's rows cached under the same file key, `deep` would unwind wrong
/// (one frame): the file's identity is all that keeps a rewritten file's rows apart.
#[test]
fn a_rewritten_file_needs_its_own_rows() {
    let (dir, _) = images("rewrite");
    let control = std::fs::read(dir.join("control")).expect("control");
    let deep = std::fs::read(dir.join("deep")).expect("deep");
    let _ = std::fs::remove_dir_all(&dir);
    let mut words = [0u64; 8];
    let run = |file: &[u8], words: &[u64; 8], caches: &Caches| {
        let mut stack = [0u8; 64];
        for (w, b) in words.iter().zip(stack.chunks_mut(8)) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        let mut task = Hostile { file, stack };
        let regs = Regs {
            ip: BASE + 0x113,
            sp: STACK,
            bp: 0,
            bx: 0,
        };
        let mut ips = [0u64; 8];
        let (n, end, _) = unwind(
            &mut task,
            regs,
            1 << 47,
            caches,
            &mut Workspace::new(),
            &mut ips,
        );
        (n, end, ips[1])
    };
    // The control: saved rbp, return address; deep: two zeros first.
    words[..2].copy_from_slice(&[STACK + 16, LOADER_RET]);
    let warm = Caches::new();
    assert_eq!(run(&control, &words, &warm), (2, End::Complete, LOADER_RET));
    let deep_words = [0, 0, STACK + 32, LOADER_RET, 0, 0, 0, 0];
    assert_eq!(
        run(&deep, &deep_words, &Caches::new()),
        (2, End::Complete, LOADER_RET)
    );
    assert_eq!(run(&deep, &deep_words, &warm), (1, End::Complete, 0));
}

/// An object's start-up code (from its entry point up to the next FDE, within 256 bytes)
/// reached without an FDE and with a zero frame pointer is the outermost frame (ld.so's
/// `_start`, and its `_dl_start_user` that calls the constructors with rbp cleared, the
/// roots of the loader's stacks before `main`); with another frame pointer, or elsewhere
/// without an FDE, the frame-pointer rule goes on.
#[test]
fn an_entry_point_without_fde_is_the_root() {
    let (dir, _) = images("root");
    let control = std::fs::read(dir.join("control")).expect("control");
    let _ = std::fs::remove_dir_all(&dir);
    let with_entry = |entry: u64| {
        let mut file = control.clone();
        file[24..32].copy_from_slice(&entry.to_le_bytes());
        file
    };
    let unwind_at = |file: &[u8], ip: u64, bp: u64| {
        let mut stack = [0u8; 64];
        stack[..8].copy_from_slice(&(STACK + 16).to_le_bytes());
        stack[8..16].copy_from_slice(&LOADER_RET.to_le_bytes());
        let mut task = Hostile { file, stack };
        let mut ips = [0u64; 8];
        let regs = Regs {
            ip: BASE + ip,
            sp: STACK,
            bp,
            bx: 0,
        };
        let (caches, mut work) = (Caches::new(), Workspace::new());
        let (n, end, _) = unwind(&mut task, regs, 1 << 47, &caches, &mut work, &mut ips);
        (n, end)
    };
    // e_entry past the code (whose FDE covers CODE..CODE + 22, 0x100..0x116), where no
    // FDE covers it, nor the code after it.
    const ENTRY: u64 = 0x1f0;
    let file = with_entry(ENTRY);
    assert_eq!(unwind_at(&file, ENTRY + 5, 0), (1, End::Complete));
    // Further in the start-up code: still the root.
    assert_eq!(unwind_at(&file, ENTRY + 0x20, 0), (1, End::Complete));
    // Past the start-up span: the frame-pointer rule, which rbp = 0 stops.
    assert_eq!(unwind_at(&file, ENTRY + 0x100, 0), (1, End::BadFrame));
    // At the entry point with a frame pointer: the frame-pointer rule goes on.
    assert_eq!(unwind_at(&file, ENTRY + 5, STACK).0, 2);
    // An entry point below the FDE's function: the start-up code ends where that FDE
    // starts, so an address past the function, without an FDE, is no root.
    let file = with_entry(0xf0);
    assert_eq!(unwind_at(&file, 0xf5, 0), (1, End::Complete));
    assert_eq!(unwind_at(&file, 0x120, 0), (1, End::BadFrame));
}
