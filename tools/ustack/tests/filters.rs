// SPDX-License-Identifier: GPL-2.0

//! Filters and views a trace user expects: a time range, CPUs, a process's threads, and
//! the instances of `trace-cmd record -B`, read or named.

mod common;

use common::{fixture, tmpdir};
use std::process::Command;

fn ustack(args: &[&str]) -> (String, String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Samples in the folded stacks of `trace` with `args`.
fn count(trace: &str, args: &[&str]) -> u64 {
    let mut a = vec!["-q", "--folded", "-", "--sysroot", "/nonexistent"];
    a.extend_from_slice(args);
    a.push(trace);
    let (out, err, code) = ustack(&a);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn time_and_cpu() {
    let t = fixture("text.trace");
    let t = t.to_str().unwrap();
    // The recording's 23 cookies are all on CPU 1: uu_chain's 20 from 42.356069 s to
    // 42.365823 s, uu_bench's 3 from 42.542781 s.
    assert_eq!(count(t, &["--cpu", "1"]), 23);
    assert_eq!(count(t, &["--cpu", "0,2-3"]), 0);
    assert_eq!(count(t, &["--time", "42.5,"]), 3);
    assert_eq!(count(t, &["--time", ",42.36"]), 6);
    assert_eq!(count(t, &["--time", "42.356069,42.356069"]), 1);
    assert_eq!(
        count(t, &["--time", "42.36,42.5", "--comm", "uu_chain"]),
        14
    );
    let (_, err, code) = ustack(&["--time", "soon", t]);
    assert_eq!(code, 2);
    assert!(err.contains("--time wants START,END"), "{err}");
}

#[test]
fn a_process_by_tgid() {
    // Task 42 makes thread 43 (CLONE_THREAD in clone_flags) and process 44 (a fork);
    // task 50's tgid comes from the text's tgid column.
    let mut t = String::from("# tracer: nop\n");
    let ev = |t: &mut String, task: &str, ts: u32, body: &str| {
        t.push_str(&format!("  {task} [000] .....    10.{ts:06}: {body}\n"));
    };
    ev(
        &mut t,
        "prog-42",
        1,
        "task_newtask: pid=43 comm=prog clone_flags=3d0f00 oom_score_adj=0",
    );
    ev(
        &mut t,
        "prog-42",
        2,
        "task_newtask: pid=44 comm=prog clone_flags=1200011 oom_score_adj=0",
    );
    let mut ts = 10;
    for task in [
        "prog-42",
        "prog-43",
        "prog-43",
        "prog-44",
        "other-50 (   42)",
    ] {
        ts += 3;
        let c = 0x100 + ts;
        ev(&mut t, task, ts, "sys_enter: NR 1 (1, 2, 3, 4, 5, 6)");
        ev(
            &mut t,
            task,
            ts + 1,
            &format!("user_unwind_cookie: cookie={c:x}"),
        );
        ev(
            &mut t,
            task,
            ts + 2,
            &format!("user_unwind_stack: cookie={c:x}"),
        );
        t.push_str(" => <0000000000001000> : 0x1\n");
    }
    let d = tmpdir("tgid");
    let f = d.join("t.trace");
    std::fs::write(&f, t).unwrap();
    let f = f.to_str().unwrap();
    assert_eq!(count(f, &[]), 5);
    assert_eq!(count(f, &["--tgid", "42"]), 4);
    assert_eq!(count(f, &["--tgid", "44"]), 1);
    assert_eq!(count(f, &["--pid", "43"]), 2);
    // --sort comm: prog's four samples over three pids are one row.
    let (report, err, code) = ustack(&["-q", "--sort", "comm", f]);
    assert_eq!(code, 0, "{err}");
    assert!(
        report.contains("    80.00%    80.00%        4  prog\n"),
        "{report}"
    );
    assert!(
        report.contains("    20.00%    20.00%        1  other\n"),
        "{report}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// v7-none.dat with a second instance, "inst", holding the top instance's data: a BUFFER
/// option in a new options section chained after the last one.
fn with_instance() -> Vec<u8> {
    let mut b = std::fs::read(fixture("v7-none.dat")).unwrap();
    let u16at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap());
    let u32at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    let u64at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    // magic, "7\0", endianness, long size, page size, "none\0", version "\0"
    let mut o = 10 + 2 + 1 + 1 + 4;
    for _ in 0..2 {
        o += b[o..].iter().position(|&c| c == 0).unwrap() + 1;
    }
    let mut section = u64at(&b, o);
    let mut top = None;
    loop {
        // id, flags, description, size, then the options
        let size = u64at(&b, section + 8);
        let (mut p, end) = (section + 16, section + 16 + size);
        let mut next_at = None;
        while p < end {
            let (id, n) = (u16at(&b, p), u32at(&b, p + 2));
            let data = p + 6;
            if id == 3 && b[data + 8] == 0 {
                top = Some(b[data..data + n].to_vec());
            }
            if id == 0 {
                next_at = Some(data);
                break;
            }
            p = data + n;
        }
        let at = next_at.unwrap();
        match u64at(&b, at) {
            0 => {
                let top = top.unwrap();
                let mut opt = top[..8].to_vec();
                opt.extend_from_slice(b"inst");
                opt.extend_from_slice(&top[8..]);
                let mut options = Vec::new();
                options.extend_from_slice(&3u16.to_le_bytes());
                options.extend_from_slice(&(opt.len() as u32).to_le_bytes());
                options.extend_from_slice(&opt);
                options.extend_from_slice(&0u16.to_le_bytes());
                options.extend_from_slice(&8u32.to_le_bytes());
                options.extend_from_slice(&0u64.to_le_bytes());
                let new = b.len() as u64;
                b[at..at + 8].copy_from_slice(&new.to_le_bytes());
                b.extend_from_slice(&0u16.to_le_bytes());
                b.extend_from_slice(&0u16.to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
                b.extend_from_slice(&(options.len() as u64).to_le_bytes());
                b.extend_from_slice(&options);
                return b;
            }
            n => section = n,
        }
    }
}

#[test]
fn instances_are_read_or_named() {
    let d = tmpdir("inst");
    let f = d.join("inst.dat");
    std::fs::write(&f, with_instance()).unwrap();
    let f = f.to_str().unwrap();
    let (top, err, code) = ustack(&["--folded", "-", "--sysroot", "/nonexistent", f]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("inst.dat: instances not read: inst (--instance NAME reads one)"),
        "{err}"
    );
    let (inst, err, code) = ustack(&[
        "--folded",
        "-",
        "--sysroot",
        "/nonexistent",
        "--instance",
        "inst",
        f,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("instances not read"), "{err}");
    assert_eq!(inst, top);
    assert!(inst.lines().count() >= 3, "{inst}");
    let (_, err, code) = ustack(&["--instance", "nope", f]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no instance 'nope' in the trace (it has: inst)"),
        "{err}"
    );
    // The committed recordings have none: nothing is said.
    let (_, err, _) = ustack(&[fixture("v7-none.dat").to_str().unwrap()]);
    assert!(!err.contains("instance"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
