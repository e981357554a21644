// SPDX-License-Identifier: GPL-2.0

//! `ustack top` against a stand-in tracefs ($USTACK_SYS) made from a committed recording:
//! its formats and header_page as the files tracefs shows, each CPU's pages as that CPU's
//! trace_pipe_raw, its cmdlines as saved_cmdlines. The frame must count what the report of
//! the recording counts, and every setting top changes must read as before once it ends:
//! after --duration, on SIGTERM, after an error part way through the set-up. The real
//! kernel and module are the guest's (tests/guest/ustack.sh).

mod common;

use common::{fixture, tmpdir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use ustack::tracefs::restore_value;

/// The files of the stand-in top changes, and what they hold first.
const SETTINGS: [(&str, &str); 7] = [
    ("tracing_on", "1\n"),
    (
        "trace_clock",
        "[local] global counter uptime perf mono mono_raw boot\n",
    ),
    ("buffer_size_kb", "1408\n"),
    ("options/userstacktrace_delay", "0\n"),
    ("options/stacktrace", "0\n"),
    ("events/raw_syscalls/sys_enter/enable", "0\n"),
    ("events/raw_syscalls/sys_enter/filter", "id == 110\n"),
];

/// A /sys whose tracefs holds recording `name`'s formats and pages.
fn stage(tag: &str, name: &str) -> PathBuf {
    let d = tmpdir(tag);
    let sys = d.join("sys");
    std::fs::create_dir_all(sys.join("module/user_unwind")).unwrap();
    let t = sys.join("kernel/tracing");
    std::fs::create_dir_all(t.join("options")).unwrap();
    let bytes = std::fs::read(fixture(name)).unwrap();
    let dat = ustack::tracedat::TraceDat::parse(&bytes).unwrap();
    for (system, text) in &dat.format_texts {
        if system == "header_page" {
            std::fs::create_dir_all(t.join("events")).unwrap();
            std::fs::write(t.join("events/header_page"), text).unwrap();
            continue;
        }
        let f = ustack::format::Format::parse(system, text).unwrap();
        let e = t.join("events").join(system).join(&f.name);
        std::fs::create_dir_all(&e).unwrap();
        std::fs::write(e.join("format"), text).unwrap();
        std::fs::write(e.join("enable"), "0\n").unwrap();
        std::fs::write(e.join("filter"), "none\n").unwrap();
    }
    for (f, v) in SETTINGS {
        std::fs::write(t.join(f), v).unwrap();
    }
    std::fs::write(t.join("trace"), "").unwrap();
    std::fs::write(t.join("set_event"), "").unwrap();
    let cmdlines: String = dat
        .comms
        .iter()
        .map(|(p, c)| format!("{p} {c}\n"))
        .collect();
    std::fs::write(t.join("saved_cmdlines"), cmdlines).unwrap();
    for cd in &dat.cpus {
        let mut r = dat.reader(cd);
        let mut pages = Vec::new();
        while r.next_page(&bytes, |p| pages.extend_from_slice(p)).unwrap() {}
        let c = t.join(format!("per_cpu/cpu{}", cd.cpu));
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("trace_pipe_raw"), pages).unwrap();
    }
    sys
}

fn tracefs(sys: &Path) -> PathBuf {
    sys.join("kernel/tracing")
}

/// What each setting and every event's enable and filter read as, as top puts them back.
fn settings(sys: &Path) -> BTreeMap<String, Option<String>> {
    let t = tracefs(sys);
    let mut files: Vec<String> = SETTINGS.iter().map(|(f, _)| f.to_string()).collect();
    for system in std::fs::read_dir(t.join("events")).unwrap().flatten() {
        for event in std::fs::read_dir(system.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            for f in ["enable", "filter"] {
                let p = event.path().join(f);
                if p.is_file() {
                    files.push(p.strip_prefix(&t).unwrap().display().to_string());
                }
            }
        }
    }
    files
        .into_iter()
        .map(|f| {
            let v = std::fs::read_to_string(t.join(&f)).unwrap();
            let r = restore_value(&f, &v);
            (f, r)
        })
        .collect()
}

fn top(sys: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ustack"))
        .arg("top")
        .args(args)
        .env("USTACK_SYS", sys)
        .output()
        .unwrap()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The function rows of each section of a report or a frame: event to
/// (children, self, samples, function, file), as whitespace-separated words.
fn rows(text: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut m: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let mut event = String::new();
    let mut in_functions = false;
    for l in text.lines() {
        if let Some(e) = l.strip_prefix("# Event: ") {
            event = e.split_whitespace().next().unwrap().to_string();
            in_functions = true;
        } else if l.starts_with("# Top stacks") {
            in_functions = false;
        } else if in_functions && l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
            let w: Vec<String> = l.split_whitespace().map(String::from).collect();
            m.entry(event.clone()).or_default().push(w);
        }
    }
    m
}

#[test]
fn a_frame_counts_what_the_report_counts_and_tracefs_is_put_back() {
    if !is_root() {
        eprintln!("skipped: ustack top runs as root");
        return;
    }
    let sys = stage("frame", "v7-global.dat");
    let before = settings(&sys);
    let out = top(
        &sys,
        &[
            "--once",
            "--duration",
            "0.3",
            "-e",
            "raw_syscalls:sys_enter",
            "--functions",
            "1000",
        ],
    );
    let frame = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(settings(&sys), before, "{err}");
    // The buffer was cleared as top began.
    assert!(
        frame.starts_with("ustack top: raw_syscalls:sys_enter  "),
        "{frame}"
    );
    let (report, _) =
        common::ustack_ok(&["--report", "-", fixture("v7-global.dat").to_str().unwrap()]);
    let (ours, theirs) = (rows(&frame), rows(&report));
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        vec!["raw_syscalls:sys_enter"]
    );
    let mut a = ours["raw_syscalls:sys_enter"].clone();
    let mut b = theirs["raw_syscalls:sys_enter"].clone();
    a.sort();
    b.sort();
    assert!(a.len() > 3, "{frame}");
    assert_eq!(a, b, "top:\n{frame}\nreport:\n{report}");
    let total = |t: &str| {
        t.lines()
            .find_map(|l| l.split("Samples: ").nth(1))
            .and_then(|s| s.split_whitespace().next().map(String::from))
    };
    assert_eq!(total(&frame), total(&report));
}

#[test]
fn comm_and_the_kernel_filter_of_pid() {
    if !is_root() {
        return;
    }
    let sys = stage("comm", "v7-global.dat");
    let before = settings(&sys);
    let out = top(
        &sys,
        &[
            "--once",
            "--duration",
            "0.2",
            "-e",
            "sys_enter",
            "--comm",
            "uu_chain",
        ],
    );
    let frame = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(frame.contains("comm uu_chain"), "{frame}");
    assert!(frame.contains("Samples: 20 "), "{frame}");
    assert_eq!(settings(&sys), before);
    // A process of this machine: its threads are the event's kernel filter while top
    // runs (a stand-in keeps what was written), the old filter after.
    let me = std::process::id().to_string();
    let filter = tracefs(&sys).join("events/raw_syscalls/sys_enter/filter");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(["top", "-e", "raw_syscalls:sys_enter", "--pid", &me])
        .env("USTACK_SYS", &sys)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut seen = String::new();
    while t0.elapsed().as_secs() < 10 {
        seen = std::fs::read_to_string(&filter).unwrap();
        if seen.contains("common_pid") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: a signal to the child just spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(seen.starts_with(&format!("common_pid == {me}")), "{seen}");
    assert_eq!(settings(&sys), before);
}

#[test]
fn an_error_part_way_puts_back_what_was_changed() {
    if !is_root() {
        return;
    }
    let sys = stage("error", "v7-global.dat");
    let before = settings(&sys);
    // Clearing the buffer, the last step but one, fails.
    let trace = tracefs(&sys).join("trace");
    std::fs::remove_file(&trace).unwrap();
    std::fs::create_dir(&trace).unwrap();
    let out = top(&sys, &["--once", "-e", "raw_syscalls:sys_enter", "-T"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("writing '' to "), "{err}");
    assert_eq!(settings(&sys), before, "{err}");
}

#[test]
fn refusals() {
    let sys = stage("refuse", "v7-global.dat");
    // Not root.
    let mut c = Command::new(env!("CARGO_BIN_EXE_ustack"));
    c.args(["top", "--once"]).env("USTACK_SYS", &sys);
    if is_root() {
        use std::os::unix::process::CommandExt;
        c.uid(65534).gid(65534);
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("ustack top needs root"), "{err}");
    if !is_root() {
        return;
    }
    // An event tracefs does not have: a usage error, nothing changed.
    let before = settings(&sys);
    let out = top(&sys, &["--once", "-e", "sched:nope"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no event 'sched:nope'"), "{err}");
    // No timer event in the stand-in, none asked for.
    let out = top(&sys, &["--once"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no timer event"), "{err}");
    assert_eq!(settings(&sys), before);
    // The module's events missing, then the module.
    std::fs::remove_dir_all(tracefs(&sys).join("events/user_unwind")).unwrap();
    let err = String::from_utf8_lossy(&top(&sys, &["--once"]).stderr).into_owned();
    assert!(err.contains("events/user_unwind is not there"), "{err}");
    std::fs::remove_dir_all(sys.join("module/user_unwind")).unwrap();
    let err = String::from_utf8_lossy(&top(&sys, &["--once"]).stderr).into_owned();
    assert!(
        err.contains("the user_unwind module is not loaded"),
        "{err}"
    );
}
