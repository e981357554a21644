// SPDX-License-Identifier: GPL-2.0

//! The command line on the guest's recordings: what it does when a file is not the one
//! that ran, what each output holds, and the libtraceevent plugin under the real
//! `trace-cmd report`.

mod common;

use common::{fixture, tmpdir};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ustack(args: &[&str]) -> (String, String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

#[test]
fn a_build_id_mismatch_is_reported_and_not_symbolized() {
    // Another program where the trace's /usr/bin/uu_chain should be.
    let d = tmpdir("mismatch");
    std::fs::copy("/bin/ls", d.join("uu_chain")).unwrap();
    let map = format!("/usr/bin={}", d.display());
    let trace = fixture("v7-zstd.dat");
    let (out, err, ok) = ustack(&["--map", &map, "--folded", "-", trace.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        err.contains("/usr/bin/uu_chain: build-id mismatch: the trace has 8f1c4a317736b185d8108e1cac695adf265d433b"),
        "{err}"
    );
    let chain = out
        .lines()
        .find(|l| l.contains("uu_chain+0x"))
        .expect("raw uu_chain frames");
    assert!(chain.ends_with(" 20"), "{chain}");
    assert!(!out.contains("uu_a"), "{out}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_missing_file_and_an_empty_or_damaged_trace() {
    let trace = fixture("v6.dat");
    let (_, err, ok) = ustack(&["--sysroot", "/nonexistent", trace.to_str().unwrap()]);
    assert!(ok);
    assert!(err.contains("/usr/bin/uu_chain: not found"), "{err}");
    let d = tmpdir("damaged");
    std::fs::write(d.join("empty"), b"").unwrap();
    let (_, err, ok) = ustack(&[d.join("empty").to_str().unwrap()]);
    assert!(!ok && err.contains("empty file"), "{err}");
    let mut cut = std::fs::read(fixture("v7-zstd.dat")).unwrap();
    cut.truncate(cut.len() * 3 / 4);
    std::fs::write(d.join("cut.dat"), &cut).unwrap();
    let (_, err, ok) = ustack(&[d.join("cut.dat").to_str().unwrap()]);
    assert!(!ok && err.contains("truncated"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// The libc the guest ran is this machine's (the initramfs copies it): its frames are
/// named from Debian's libc6-dbg, found by build-id, unless libc changed since the
/// fixtures were recorded, which must then be reported as a mismatch.
#[test]
fn libc_frames_are_named_from_its_debug_file() {
    let trace = fixture("v7-zstd.dat");
    let (out, err, ok) = ustack(&["--folded", "-", "--lines", trace.to_str().unwrap()]);
    assert!(ok, "{err}");
    let libc = ustack::elf::build_id(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
    if ustack::symbolize::hex(&libc) == "93ac61ec5a8eb1396f9fbd350e3169a558528a40" {
        assert!(
            out.contains("__libc_start_call_main (libc_start_call_main.h:58)"),
            "{out}"
        );
    } else {
        assert!(
            err.contains("/lib/x86_64-linux-gnu/libc.so.6: build-id mismatch"),
            "{err}"
        );
    }
}

#[test]
fn the_outputs_hold_the_stacks() {
    let d = tmpdir("outputs");
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let trace = fixture("text.trace");
    let (_, err, ok) = ustack(&[
        "--svg",
        &p("f.svg"),
        "--speedscope",
        &p("s.json"),
        "--pprof",
        &p("p.pb.gz"),
        "--folded",
        &p("f.txt"),
        "--report",
        &p("r.txt"),
        "--sysroot",
        "/nonexistent",
        trace.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let folded = std::fs::read_to_string(p("f.txt")).unwrap();
    let total: u64 = folded
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 23, "{folded}");
    let svg = std::fs::read_to_string(p("f.svg")).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(
        svg.contains("<title>all\n23 samples, 100.00%</title>"),
        "{svg}"
    );
    assert!(
        svg.contains("<title>raw_syscalls:sys_enter\n23 samples"),
        "{svg}"
    );
    let report = std::fs::read_to_string(p("r.txt")).unwrap();
    assert!(report.contains("# Samples: 23"), "{report}");
    assert!(
        report.contains("86.96%       20  raw_syscalls:sys_enter"),
        "{report}"
    );

    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("s.json")).unwrap()).unwrap();
    let prof = &s["profiles"][0];
    let weights: u64 = prof["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .sum();
    assert_eq!(weights, 23);
    let frames = s["shared"]["frames"].as_array().unwrap();
    let first = prof["samples"][0].as_array().unwrap();
    assert_eq!(
        frames[first[0].as_u64().unwrap() as usize]["name"],
        "raw_syscalls:sys_enter"
    );

    // pprof, decoded with upstream's profile.proto: the mappings' build-ids and the
    // locations.
    let (prof, strings) = common::pprof::decode(&std::fs::read(p("p.pb.gz")).unwrap());
    let mappings: HashMap<i64, (String, String)> = prof
        .msgs("mapping")
        .iter()
        .map(|m| {
            (
                m.int("id"),
                (
                    strings[m.int("filename") as usize].clone(),
                    strings[m.int("build_id") as usize].clone(),
                ),
            )
        })
        .collect();
    let chain = mappings
        .values()
        .find(|(f, _)| f == "/usr/bin/uu_chain")
        .expect("uu_chain mapping");
    assert_eq!(chain.1, "8f1c4a317736b185d8108e1cac695adf265d433b");
    let values: i64 = prof.msgs("sample").iter().map(|s| s.ints("value")[0]).sum();
    assert_eq!(values, 23);
    // Each uu_chain location's address is its frame's offset, as the trace has it.
    let addrs: Vec<i64> = prof
        .msgs("location")
        .iter()
        .filter(|l| {
            mappings
                .get(&l.int("mapping_id"))
                .is_some_and(|m| m.0 == "/usr/bin/uu_chain")
        })
        .map(|l| l.int("address"))
        .collect();
    let text = std::fs::read_to_string(&trace).unwrap();
    for a in &addrs {
        assert!(text.contains(&format!("<{a:016x}>")), "{a:#x}");
    }
    assert!(addrs.len() >= 4);
    std::fs::remove_dir_all(&d).unwrap();
}

/// The plugin's frames under trace-cmd report are the tool's own join, record by record.
#[test]
fn the_plugin_prints_what_the_tool_joins() {
    let d = tmpdir("plugin");
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin");
    let st = Command::new("make")
        .args(["-s", "-C"])
        .arg(&plugin)
        .arg(format!("OUT={}", d.display()))
        .status()
        .unwrap();
    assert!(st.success());
    // This machine's trace-cmd on the committed recordings; the guest's own report with
    // the plugin on a fresh one (the end-to-end test's $USTACK_FIXTURES).
    let mut runs: Vec<(PathBuf, String)> = Vec::new();
    for f in ["v7-zstd.dat", "v6.dat"] {
        let out = Command::new("trace-cmd")
            .args(["report", "-i"])
            .arg(fixture(f))
            .env("TRACEEVENT_PLUGIN_DIR", &d)
            .env("HOME", &d)
            .output()
            .unwrap();
        runs.push((
            fixture(f),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }
    if let Some(dir) = std::env::var_os("USTACK_FIXTURES") {
        let dir = PathBuf::from(dir);
        for f in ["v7-zstd", "v7-none", "v6", "v7-global"] {
            let report = std::fs::read_to_string(dir.join(format!("{f}.plugin-report"))).unwrap();
            runs.push((dir.join(format!("{f}.dat")), report));
        }
    }
    for (f, text) in &runs {
        let f = f.display();
        // cookie -> frames, in the order the records came.
        let mut plugin_frames: HashMap<u64, Vec<String>> = HashMap::new();
        let mut current = None;
        for line in text.lines() {
            if let Some(f) = line.strip_prefix(" => ") {
                plugin_frames
                    .entry(current.unwrap())
                    .or_default()
                    .push(f.to_string());
            } else if let Some(i) = line.find("user_unwind_stack:") {
                let c = line[i..].split("cookie=").nth(1).unwrap();
                let c: String = c.chars().take_while(char::is_ascii_hexdigit).collect();
                current = Some(u64::from_str_radix(&c, 16).unwrap());
            }
        }
        assert!(plugin_frames.len() >= 20, "{f}: {text}");
        assert!(!text.contains("FAILED TO PARSE"));
        let loaded = ustack::load(&std::fs::read(f.to_string()).unwrap()).unwrap();
        let (samples, _) = ustack::join::join(&loaded.events);
        for s in &samples {
            let ours: Vec<String> = s
                .frames
                .iter()
                .map(|fr| match fr {
                    ustack::join::Frame::File { file, offset } => {
                        format!("{}+{offset:#x}", file.path)
                    }
                    other => format!("{other:?}"),
                })
                .collect();
            assert_eq!(
                plugin_frames.get(&s.cookie),
                Some(&ours),
                "{f}: cookie {:#x}",
                s.cookie
            );
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn filters_by_task_pid_and_event() {
    let trace = fixture("text.trace");
    let t = trace.to_str().unwrap();
    let count = |args: &[&str]| -> u64 {
        let mut a = vec!["--folded", "-", "--sysroot", "/nonexistent"];
        a.extend_from_slice(args);
        a.push(t);
        let (out, err, ok) = ustack(&a);
        assert!(ok, "{err}");
        out.lines()
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(count(&[]), 23);
    assert_eq!(count(&["--comm", "uu_bench"]), 3);
    assert_eq!(count(&["--comm", "uu_chain", "--comm", "uu_bench"]), 23);
    // uu_chain's pid in this recording.
    assert_eq!(count(&["--pid", "114"]), 20);
    assert_eq!(count(&["--pid", "114", "--comm", "uu_bench"]), 0);
    assert_eq!(count(&["--event", "sys_enter"]), 23);
    assert_eq!(count(&["--event", "raw_syscalls:sys_enter"]), 23);
    assert_eq!(count(&["--event", "sched_switch"]), 0);
    let (_, err, ok) = ustack(&["--pid", "x", t]);
    assert!(!ok && err.contains("--pid wants a number"), "{err}");
}

#[test]
fn a_stack_the_unwinder_cut_short_is_marked() {
    // v7-date.dat: busybox's sh called getppid once; the .eh_frame unwinder stopped after
    // its first frame (its user_unwind_truncated says bad_frame). The stack is marked
    // under its event, the summary counts it, and the others are not marked.
    let t = fixture("v7-date.dat");
    let (folded, err, ok) = ustack(&[
        "--folded",
        "-",
        "--sysroot",
        "/nonexistent",
        t.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let marked: Vec<&str> = folded
        .lines()
        .filter(|l| l.contains("[truncated"))
        .collect();
    assert_eq!(
        marked,
        ["raw_syscalls:sys_enter;[truncated: bad_frame];busybox+0x62137 1"],
        "{folded}"
    );
    assert!(err.contains(", 1 cut short by the unwinder;"), "{err}");
}
