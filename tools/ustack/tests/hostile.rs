// SPDX-License-Identifier: GPL-2.0

//! What a user meets first: hostile input (sizes, bombs, deep stacks, names with control
//! bytes, files that are not traces), the command-line conventions, and stacks counted by
//! what the outputs show.

mod common;

use common::{fixture, tmpdir};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

/// Run ustack: stdout, stderr, exit code.
fn ustack_in(dir: Option<&Path>, args: &[&str]) -> (String, String, i32) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ustack"));
    c.args(args);
    if let Some(d) = dir {
        c.current_dir(d);
    }
    let out = c.output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn ustack(args: &[&str]) -> (String, String, i32) {
    ustack_in(None, args)
}

/// The text of a trace: task 42 (`prog`), one `sys_enter` and cookie per stack, each
/// stack's frames (value, file cookie) innermost first; `files` are (cookie, path) as
/// the kernel prints them (control bytes as `\ooo`).
fn text_trace(files: &[(u64, &str)], stacks: &[Vec<(u64, u64)>]) -> String {
    let mut t = String::from("# trace_clock: global\n# tracer: nop\n");
    let mut ts = 1;
    let mut line = |t: &mut String, body: &str| {
        ts += 1;
        t.push_str(&format!(
            "            prog-42      [000] .....    10.{ts:06}: {body}\n"
        ));
    };
    for (c, p) in files {
        line(
            &mut t,
            &format!("file_cache: cookie={c:x} path={p} build_id= build_id_len=0"),
        );
    }
    for (i, s) in stacks.iter().enumerate() {
        let c = 0x100 + i as u64;
        line(&mut t, "sys_enter: NR 1 (1, 2, 3, 4, 5, 6)");
        line(&mut t, &format!("user_unwind_cookie: cookie={c:x}"));
        line(&mut t, &format!("user_unwind_stack: cookie={c:x}"));
        for (v, f) in s {
            t.push_str(&format!(" => <{v:016x}> : 0x{f:x}\n"));
        }
    }
    t
}

fn counts(folded: &str) -> Vec<(String, u64)> {
    folded
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').expect("a count");
            (s.to_string(), n.parse().expect("a number"))
        })
        .collect()
}

#[test]
fn a_flipped_chunk_size_is_an_error_under_a_memory_limit() {
    let mut b = std::fs::read(fixture("v7-zstd.dat")).unwrap();
    // CPU 0's first chunk: <count> at 0x2000, then <zsize> <size> (see the damage report
    // of a cut file); 588 bytes compressed.
    assert_eq!(
        u32::from_le_bytes(b[0x2004..0x2008].try_into().unwrap()),
        588
    );
    b[0x2008..0x200c].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let d = tmpdir("flip");
    let f = d.join("flip.dat");
    std::fs::write(&f, &b).unwrap();
    // 200 MB of address space: a 4 GiB allocation would abort.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 200000; exec {} --folded /dev/null {}",
            env!("CARGO_BIN_EXE_ustack"),
            f.display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "damaged: CPU 0: chunk 0 of 1: zstd: 4294967280 bytes declared from 588 compressed"
        ),
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// v6.dat cut inside CPU 1's only page (at 0x6000, after CPU 0's at 0x5000): the events
/// that page holds up to the cut are read, each CPU's a prefix of what the whole file
/// gives, all of them once the cut is past the page's commit; the damage says the file
/// is cut short.
#[test]
fn a_file_cut_in_its_last_page_keeps_the_events_before_the_cut() {
    let whole = std::fs::read(fixture("v6.dat")).unwrap();
    let page = 0x6000;
    assert_eq!(whole.len(), page + 4096, "v6.dat ends with CPU 1's page");
    let commit = u64::from_le_bytes(whole[page + 8..page + 16].try_into().unwrap()) & 0x7ff_ffff;
    let all = ustack::load(&whole).unwrap().events;
    let of_cpu = |ev: &[ustack::events::Event], cpu: u32| -> Vec<ustack::events::Event> {
        ev.iter().filter(|e| e.cpu == cpu).cloned().collect()
    };
    let (cpu0, cpu1) = (of_cpu(&all, 0), of_cpu(&all, 1));
    assert!(cpu1.len() > 10, "{}", cpu1.len());
    let mut last = 0;
    for cut in (page + 16..=page + 16 + commit as usize).step_by(64) {
        let l = ustack::load(&whole[..cut]).unwrap();
        assert_eq!(of_cpu(&l.events, 0), cpu0, "cut at {cut}: CPU 0 whole");
        let got = of_cpu(&l.events, 1);
        assert_eq!(
            got[..],
            cpu1[..got.len()],
            "cut at {cut}: a prefix of CPU 1"
        );
        assert!(
            got.len() >= last,
            "cut at {cut}: {} after {last}",
            got.len()
        );
        last = got.len();
        let d: Vec<String> = l.damage.iter().map(|e| e.to_string()).collect();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with("CPU 1: the file is cut short: ")
                && d[0].contains(&format!("{} of its 4096 bytes", cut - page)),
            "{d:?}"
        );
    }
    // Past the first few events, and all of them at the commit's end.
    assert!(
        ustack::load(&whole[..page + 16 + commit as usize / 2])
            .unwrap()
            .events
            .iter()
            .any(|e| e.cpu == 1),
        "half the page read"
    );
    let l = ustack::load(&whole[..page + 16 + commit as usize]).unwrap();
    assert_eq!(of_cpu(&l.events, 1), cpu1);
}

/// A v6 file cut before any of its events: the hint says the file is cut short, not
/// that the module's events were not recorded.
#[test]
fn a_cut_file_says_it_is_cut() {
    let whole = std::fs::read(fixture("v6.dat")).unwrap();
    let d = tmpdir("cut");
    for (cut, what) in [
        (0x5000 + 16, "16 of its 4096 bytes"),
        (0x5000 - 100, "start beyond"),
    ] {
        let f = d.join("cut.dat");
        std::fs::write(&f, &whole[..cut]).unwrap();
        let (_, err, code) = ustack(&["--folded", "/dev/null", f.to_str().unwrap()]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("no user stacks in what the file holds: it is cut short"),
            "{err}"
        );
        assert!(!err.contains("was the module loaded"), "{err}");
        assert!(err.contains(what), "{err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_deep_stack_and_names_with_control_bytes() {
    // 30000 frames: the flame graph is drawn without recursion.
    let deep: Vec<(u64, u64)> = (0..30000).map(|i| (0x1000 + i % 7, 0xaa)).collect();
    // A file name with a newline and a terminal escape (the kernel prints them octal).
    let t = text_trace(
        &[(0xaa, "/bin/deep"), (0xbb, "/tmp/evil\\012name\\033[31m")],
        &[deep, vec![(0x10, 0xbb)]],
    );
    let d = tmpdir("deep");
    let f = d.join("t.trace");
    std::fs::write(&f, t).unwrap();
    let svg = d.join("f.svg");
    let (folded, err, code) = ustack(&[
        "--svg",
        svg.to_str().unwrap(),
        "--folded",
        "-",
        "--sysroot",
        "/nonexistent",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.trim_end().ends_with("</svg>"));
    // Every line of the folded stacks is one stack and its count.
    let c = counts(&folded);
    assert_eq!(c.len(), 2, "{folded}");
    assert_eq!(c.iter().map(|x| x.1).sum::<u64>(), 2);
    let evil = &c.iter().find(|x| x.0.contains("evil")).unwrap().0;
    assert_eq!(evil, "raw_syscalls:sys_enter;evil\\nname\\x1b[31m+0x10");
    assert_eq!(
        c.iter()
            .find(|x| !x.0.contains("evil"))
            .unwrap()
            .0
            .split(';')
            .count(),
        30001
    );
    // The report reaches a terminal: no control byte in it.
    let (report, _, code) = ustack(&["--sysroot", "/nonexistent", f.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(report.contains("evil\\nname\\x1b[31m+0x10"), "{report}");
    assert!(!report.chars().any(|c| c.is_control() && c != '\n'));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn files_that_are_not_traces_and_filters_that_match_nothing() {
    let d = tmpdir("nottrace");
    let perf = d.join("perf.data");
    let mut p = b"PERFILE2".to_vec();
    p.resize(4096, 0);
    std::fs::write(&perf, p).unwrap();
    for (f, what) in [
        ("/etc/passwd", "not a trace: none of its"),
        (env!("CARGO_BIN_EXE_ustack"), "an ELF file, not a trace"),
        (
            perf.to_str().unwrap(),
            "a perf.data file (perf record's), not a trace",
        ),
    ] {
        let (out, err, code) = ustack(&[f]);
        assert_eq!(code, 1, "{f}: {err}");
        assert!(err.contains(what), "{f}: {err}");
        assert!(out.is_empty());
    }
    let t = fixture("text.trace");
    let (_, err, code) = ustack(&["--comm", "nobody", t.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        err.contains("no sample matched the filters (23 samples in the trace)"),
        "{err}"
    );
    // A trace without the module's events says so.
    let empty = d.join("empty.trace");
    std::fs::write(&empty, "# tracer: nop\n").unwrap();
    let (_, err, code) = ustack(&[empty.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(err.contains("no user stacks"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn conventions_version_input_default_and_usage_errors() {
    let (out, _, code) = ustack(&["--version"]);
    assert_eq!(
        (out.trim(), code),
        (concat!("ustack ", env!("CARGO_PKG_VERSION")), 0)
    );
    let t = fixture("text.trace");
    let t = t.to_str().unwrap();
    let (a, _, _) = ustack(&["-q", "--folded", "-", "-i", t]);
    let (b, _, _) = ustack(&["-q", "--folded", "-", t]);
    assert!(!a.is_empty());
    assert_eq!(a, b);
    // trace.dat in the current directory by default, as trace-cmd report.
    let d = tmpdir("default");
    std::fs::copy(fixture("v6.dat"), d.join("trace.dat")).unwrap();
    let (out, err, code) = ustack_in(Some(&d), &["-q"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# Samples: 24"), "{out}");
    // -o: the report to a file.
    let (_, _, code) = ustack_in(Some(&d), &["-q", "-o", "r.txt"]);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(d.join("r.txt")).unwrap(), out);
    // Usage errors: one line and a hint, status 2.
    for args in [
        &["--folded", "-", "--svg", "-", t][..],
        &["--bogus", t][..],
        &["--sort", "colour", t][..],
        &["--percent-limit", "200", t][..],
        &["--percent-limit", "-1", t][..],
        &["--time", "38,37", t][..],
        &["--inverted", t][..],
    ] {
        let (_, err, code) = ustack(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{err}");
        assert_eq!(lines[1], "Try 'ustack --help' for more information.");
    }
    let (_, err, _) = ustack(&["--folded", "-", "--svg", "-", t]);
    assert!(err.contains("two outputs to standard output"), "{err}");
    let (_, err, _) = ustack(&["--time", "38,37", t]);
    assert!(err.contains("the end is before the start"), "{err}");
    let (_, err, _) = ustack(&["--percent-limit", "200", t]);
    assert!(err.contains("from 0 to 100, not '200'"), "{err}");
    // No trace named and no trace.dat here: what was looked for, and how to get one.
    let empty = tmpdir("notrace");
    let (_, err, code) = ustack_in(Some(&empty), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(&format!(
            "ustack: no trace given, and no trace.dat in {}: ",
            empty.display()
        )) && err.contains("'ustack record -e EVENT -- COMMAND'"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "{err}");
    std::fs::remove_dir_all(&empty).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let deep: Vec<(u64, u64)> = (0..20000).map(|i| (0x1000 + i, 0xaa)).collect();
    let d = tmpdir("pipe");
    let f = d.join("t.trace");
    std::fs::write(&f, text_trace(&[(0xaa, "/bin/deep")], &[deep])).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(["-q", "--folded", "-", "--sysroot", "/nonexistent"])
        .arg(&f)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read a little, as head does, and close the pipe.
    let mut buf = [0u8; 16];
    c.stdout.take().unwrap().read_exact(&mut buf).unwrap();
    let mut err = String::new();
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let st = c.wait().unwrap();
    assert!(st.success(), "{st:?} {err}");
    assert!(err.is_empty(), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Two offsets in one function are one stack in every output that shows names: the
/// function (a JIT's, from its perf map) is the ground truth.
#[test]
fn stacks_are_counted_by_what_is_shown() {
    let d = tmpdir("shown");
    let map = d.join("perf-42.map");
    std::fs::write(
        &map,
        "7f0000001000 100 jit_add\n7f0000002000 100 jit_main\n",
    )
    .unwrap();
    // Three samples, three different stacks of offsets, one stack of names.
    let t = text_trace(
        &[],
        &[
            vec![(0x7f0000001010, 1), (0x7f0000002010, 1)],
            vec![(0x7f0000001020, 1), (0x7f0000002011, 1)],
            vec![(0x7f0000001030, 1), (0x7f0000002012, 1)],
            vec![(0x7f0000002040, 1)],
        ],
    );
    let f = d.join("t.trace");
    std::fs::write(&f, t).unwrap();
    let f = f.to_str().unwrap();
    let m = map.to_str().unwrap();
    let (folded, err, code) = ustack(&["-q", "--perf-map", m, "--folded", "-", f]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        folded,
        "raw_syscalls:sys_enter;jit_main;jit_add 3\nraw_syscalls:sys_enter;jit_main 1\n"
    );
    let (report, _, _) = ustack(&["-q", "--perf-map", m, "--report", "-", f]);
    assert!(
        report.starts_with("# Event: raw_syscalls:sys_enter\n# Samples: 4  Stacks: 2\n"),
        "{report}"
    );
    // jit_main: in all four, innermost in one; jit_add: innermost in three.
    assert!(
        report.contains("   100.00%    25.00%        4  jit_main  [unknown]\n"),
        "{report}"
    );
    assert!(
        report.contains("    75.00%    75.00%        3  jit_add   [unknown]\n"),
        "{report}"
    );
    assert!(report.contains("    75.00%        3  raw_syscalls:sys_enter\n            |\n            ---jit_add\n               jit_main\n"), "{report}");
    // -G: outermost first; --percent-limit leaves the 25% stack and row out.
    let (report, _, _) = ustack(&[
        "-q",
        "--perf-map",
        m,
        "-G",
        "--percent-limit",
        "50",
        "--sort",
        "pid,function",
        f,
    ]);
    assert!(
        report.contains("---jit_main\n               jit_add\n"),
        "{report}"
    );
    assert!(report.contains("        4  42   jit_main\n"), "{report}");
    assert!(!report.contains("1  raw_syscalls:sys_enter"), "{report}");
    assert!(report.contains("# ... 1 more stacks"), "{report}");
    let (s, _, _) = ustack(&["-q", "--perf-map", m, "--speedscope", "-", f]);
    let s: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(s["shared"]["frames"].as_array().unwrap().len(), 3);
    assert_eq!(s["profiles"][0]["weights"], serde_json::json!([3, 1]));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Two files of one basename (`/a/libx.so`, `/b/libx.so`) print alike in the report
/// (`[libx.so]`), as in the folded stacks: one stack, not two.
#[test]
fn files_of_one_basename_are_one_stack_in_the_report() {
    let d = tmpdir("basename");
    let t = text_trace(
        &[(0xa1, "/a/libx.so"), (0xb1, "/b/libx.so")],
        &[vec![(0x10, 0xa1)], vec![(0x10, 0xb1)]],
    );
    let f = d.join("t.trace");
    std::fs::write(&f, t).unwrap();
    let f = f.to_str().unwrap();
    let (folded, err, code) = ustack(&["-q", "--sysroot", "/nonexistent", "--folded", "-", f]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(folded.lines().count(), 1, "{folded}");
    let (report, _, _) = ustack(&["-q", "--sysroot", "/nonexistent", "--report", "-", f]);
    assert!(
        report.starts_with("# Event: raw_syscalls:sys_enter\n# Samples: 2  Stacks: 1\n"),
        "{report}"
    );
    assert!(report.contains("   100.00%        2  "), "{report}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `[truncated: REASON]` marks a stack, it is not a function: the report's function view
/// leaves it out (the summary counts it), its stack shows it.
#[test]
fn a_truncated_marker_is_not_in_the_function_view() {
    let t = fixture("v7-date.dat");
    let (report, err, code) = ustack(&[
        "--sysroot",
        "/nonexistent",
        "--top",
        "100",
        "--report",
        "-",
        t.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(", 1 cut short by the unwinder;"), "{err}");
    let (view, stacks) = report.split_once("# Top stacks").unwrap();
    assert!(view.contains("busybox+0x62137"), "{view}");
    assert!(!view.contains("[truncated"), "{view}");
    assert!(stacks.contains("[truncated: bad_frame]"), "{stacks}");
}

/// A comm, a kernel function, a JIT's function (from its perf map) and a file name with
/// control bytes (C0, DEL and a C1 CSI, U+009B): every text output shows them escaped,
/// none holds a control character but its own line breaks (and perf script's tabs).
#[test]
fn control_bytes_in_comms_functions_and_paths_are_escaped_in_every_output() {
    let comm = "ev\u{1b}[1mi\u{7}l";
    let t = format!(
        "# trace_clock: global
# tracer: nop
            {comm}-42      [000] .....    10.000001: file_cache: cookie=bb path=/tmp/a\\011b\\177c\u{9b}31md build_id= build_id_len=0
            {comm}-42      [000] .....    10.000002: user_unwind_cookie: cookie=100
            {comm}-42      [000] .....    10.000003: <stack trace>
 => trace_event_raw_event_user_unwind_cookie
            {comm}-42      [000] .....    10.000004: sys_enter: NR 110 (0, 0, 0, 0, 0, 0)
            {comm}-42      [000] .....    10.000005: <stack trace>
 => do_\u{1b}[2Jsyscall_64+0x5d/0x170
 => entry_SYSCALL_64_after_hwframe
            {comm}-42      [000] .....    10.000006: user_unwind_stack: cookie=100
 => <0000000000001010> : 0x1
 => <0000000000000010> : 0xbb
"
    );
    let d = tmpdir("ctl");
    let f = d.join("t.trace");
    std::fs::write(&f, t).unwrap();
    std::fs::write(d.join("perf-42.map"), "1000 100 jit\u{1b}[31m\u{85}main\n").unwrap();
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let (_, err, code) = ustack(&[
        "--sysroot",
        "/nonexistent",
        "--perf-map",
        &p("perf-42.map"),
        "--task",
        "--sort",
        "comm,function,file",
        "--report",
        &p("report"),
        "--folded",
        &p("folded"),
        "--perf-script",
        &p("perf"),
        "--svg",
        &p("f.svg"),
        "--speedscope",
        &p("s.json"),
        &p("t.trace"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err:?}");
    let escaped = [
        "ev\\x1b[1mi\\x07l",
        "do_\\x1b[2Jsyscall_64",
        "jit\\x1b[31m\\x85main",
        "a\\tb\\x7fc\\x9b31md",
    ];
    for (name, tabs) in [
        ("report", false),
        ("folded", false),
        ("perf", true),
        ("f.svg", false),
        ("s.json", false),
    ] {
        let text = std::fs::read_to_string(d.join(name)).unwrap();
        let bad: Vec<char> = text
            .chars()
            .filter(|&c| c.is_control() && c != '\n' && !(tabs && c == '\t'))
            .collect();
        assert!(bad.is_empty(), "{name}: {bad:?} in {text}");
        // JSON writes a backslash as two.
        let text = text.replace("\\\\", "\\");
        for e in escaped {
            assert!(text.contains(e), "{name}: no {e} in {text}");
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}
