// SPDX-License-Identifier: GPL-2.0

//! Symbol sources: a damaged debug file falls back to the binary's own symbols and says
//! so, PLT stubs are named `name@plt`, unnamed frames are counted, and debuginfod serves
//! debug files by build-id (tests/debuginfod: a real debuginfod on loopback).

mod common;

use common::tmpdir;
use std::path::Path;
use std::process::Command;

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// The text of a trace of task 42: one stack per frame (file cookie, file offset).
fn trace(files: &[(u64, &Path)], frames: &[(u64, u64)]) -> String {
    let mut t = String::from("# trace_clock: global\n# tracer: nop\n");
    let mut ts = 0;
    let mut ev = |t: &mut String, body: String| {
        ts += 1;
        t.push_str(&format!("  prog-42 [000] .....    10.{ts:06}: {body}\n"));
    };
    for (c, p) in files {
        let id = hex(&ustack::elf::build_id(p).unwrap());
        ev(
            &mut t,
            format!(
                "file_cache: cookie={c:x} path={} build_id={id} build_id_len=20",
                p.display()
            ),
        );
    }
    for (i, (c, off)) in frames.iter().enumerate() {
        let k = 0x100 + i;
        ev(&mut t, "sys_enter: NR 1 (1, 2, 3, 4, 5, 6)".into());
        ev(&mut t, format!("user_unwind_cookie: cookie={k:x}"));
        ev(&mut t, format!("user_unwind_stack: cookie={k:x}"));
        t.push_str(&format!(" => <{off:016x}> : 0x{c:x}\n"));
    }
    t
}

/// The file offset of virtual address `va` in `path`.
fn offset_of(path: &Path, va: u64) -> u64 {
    let l = ustack::elf::loads(path)
        .unwrap()
        .into_iter()
        .find(|l| va >= l.vaddr && va - l.vaddr < l.filesz)
        .unwrap();
    va - l.vaddr + l.offset
}

/// `nm -D`'s address of a dynamic symbol.
fn nm(path: &Path, name: &str) -> u64 {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let l = text
        .lines()
        .find(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|n| n == name || n.starts_with(&format!("{name}@")))
        })
        .unwrap();
    u64::from_str_radix(l.split_whitespace().next().unwrap(), 16).unwrap()
}

fn folded(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

#[test]
fn a_damaged_debug_file_falls_back_and_plt_stubs_are_named() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let ls = Path::new("/bin/ls");
    let d = tmpdir("fallback");
    // A debug file for libc found by build-id whose build-id note is whole and the rest
    // cut off: the first 8 KiB of libc itself.
    let id = hex(&ustack::elf::build_id(libc).unwrap());
    let dbg = d.join(format!("debug/.build-id/{}/{}.debug", &id[..2], &id[2..]));
    std::fs::create_dir_all(dbg.parent().unwrap()).unwrap();
    std::fs::write(&dbg, &std::fs::read(libc).unwrap()[..8192]).unwrap();
    // ls's first PLT stub, as objdump names it.
    let out = Command::new("objdump")
        .args(["-d", "-j", ".plt"])
        .arg(ls)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (stub_va, stub) = text
        .lines()
        .find_map(|l| {
            let (a, rest) = l.split_once(" <")?;
            let n = rest.strip_suffix(">:")?;
            n.ends_with("@plt")
                .then(|| (u64::from_str_radix(a, 16).unwrap(), n.to_string()))
        })
        .unwrap();
    let puts = offset_of(libc, nm(libc, "puts"));
    let t = trace(
        &[(0xaa, libc), (0xbb, ls)],
        &[
            (0xaa, puts),
            (0xbb, offset_of(ls, stub_va)),
            (0xbb, 0x7fff_ffff),
        ],
    );
    let f = d.join("t.trace");
    std::fs::write(&f, t).unwrap();
    let dd = d.join("debug");
    let (out, err) = folded(&[
        "--folded",
        "-",
        "--debug-dir",
        dd.to_str().unwrap(),
        f.to_str().unwrap(),
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.contains(&"raw_syscalls:sys_enter;puts 1")
            || lines.contains(&"raw_syscalls:sys_enter;_IO_puts 1"),
        "{out}"
    );
    assert!(
        lines.contains(&format!("raw_syscalls:sys_enter;{stub} 1").as_str()),
        "{out}"
    );
    assert!(
        err.contains(&format!(
            "{}: debug file {} unusable (",
            libc.display(),
            dbg.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("): symbols from the binary itself (1 frames named)"),
        "{err}"
    );
    // The offset beyond ls's segments is the one frame nothing names.
    assert!(
        err.contains("ustack: named: 2 of 3 frames of the samples kept (1 unnamed"),
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--sysroot DIR` (or `--map`) that does not hold a file: this machine's own file at the
/// traced path is taken, as the documentation says, but only when its build-id is the
/// trace's; `--sysroot-only` never looks there. What was tried is named.
#[test]
fn the_host_file_stands_in_only_with_the_traces_build_id() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let d = tmpdir("hostfallback");
    let id = hex(&ustack::elf::build_id(libc).unwrap());
    let puts = offset_of(libc, nm(libc, "puts"));
    // libc with its own build-id, /bin/ls with another one, /bin/true with none.
    let mut t = String::from("# trace_clock: global\n# tracer: nop\n");
    let mut ts = 0;
    let mut ev = |t: &mut String, body: String| {
        ts += 1;
        t.push_str(&format!("  prog-42 [000] .....    10.{ts:06}: {body}\n"));
    };
    for (c, p, id) in [
        (0xaa, "/lib/x86_64-linux-gnu/libc.so.6", id.as_str()),
        (0xbb, "/bin/ls", "00112233445566778899aabbccddeeff00112233"),
        (0xcc, "/bin/true", ""),
    ] {
        let n = id.len() / 2;
        ev(
            &mut t,
            format!("file_cache: cookie={c:x} path={p} build_id={id} build_id_len={n}"),
        );
    }
    for (i, (c, off)) in [(0xaa, puts), (0xbb, 0x10), (0xcc, 0x10)]
        .iter()
        .enumerate()
    {
        let k = 0x100 + i;
        ev(&mut t, "sys_enter: NR 1 (1, 2, 3, 4, 5, 6)".into());
        ev(&mut t, format!("user_unwind_cookie: cookie={k:x}"));
        ev(&mut t, format!("user_unwind_stack: cookie={k:x}"));
        t.push_str(&format!(" => <{off:016x}> : 0x{c:x}\n"));
    }
    let f = d.join("t.trace");
    std::fs::write(&f, t).unwrap();
    let f = f.to_str().unwrap();
    let (out, err) = folded(&["--folded", "-", "--sysroot", "/nonexistent", f]);
    let lines: Vec<&str> = out.lines().collect();
    // puts, _IO_puts or __GI__IO_puts, by the symbols libc6-dbg has or libc's own.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("raw_syscalls:sys_enter;") && l.ends_with("puts 1")),
        "{out}"
    );
    assert!(lines.contains(&"raw_syscalls:sys_enter;ls+0x10 1"), "{out}");
    assert!(
        lines.contains(&"raw_syscalls:sys_enter;true+0x10 1"),
        "{out}"
    );
    assert!(
        err.contains("ustack: /bin/ls: build-id mismatch: the trace has 00112233445566778899aabbccddeeff00112233, /bin/ls has "),
        "{err}"
    );
    // No build-id in the trace: the host's file cannot be checked, and is not tried.
    assert!(
        err.contains(
            "ustack: /bin/true: not found (tried /nonexistent/bin/true; see --sysroot, --map)"
        ),
        "{err}"
    );
    assert!(!err.contains("libc.so.6: not found"), "{err}");
    // --sysroot-only: the sysroot alone.
    let (out, err) = folded(&[
        "--folded",
        "-",
        "--sysroot",
        "/nonexistent",
        "--sysroot-only",
        f,
    ]);
    assert!(
        out.contains(&format!("raw_syscalls:sys_enter;libc.so.6+{puts:#x} 1")),
        "{out}"
    );
    assert!(
        err.contains("ustack: /lib/x86_64-linux-gnu/libc.so.6: not found (tried /nonexistent/lib/x86_64-linux-gnu/libc.so.6; see --sysroot, --map)"),
        "{err}"
    );
    // --map too: its directory, then the host's path.
    let (_, err) = folded(&["--folded", "-", "--map", "/bin=/nonexistent/bin", f]);
    assert!(
        err.contains("ustack: /bin/true: not found (tried /nonexistent/bin/true; see"),
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
