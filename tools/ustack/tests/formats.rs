// SPDX-License-Identifier: GPL-2.0

//! Outputs other tools read: perf script's text (read back by its documented shape, and
//! folded by stackcollapse-perf.pl's Rust port inferno-collapse-perf, or the script itself
//! in $STACKCOLLAPSE_PERF, into ustack's own folded stacks), and pprof's sample labels,
//! mappings (the main binary first, `has_functions`) and sample times.

mod common;

use common::{fixture, pprof};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn ustack(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// perf script's text back to `comm;outer;...;inner` counts, by its documented shape.
fn collapse(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Some((comm, mut frames)) = cur.take() {
                frames.push(comm);
                frames.reverse();
                *out.entry(frames.join(";")).or_default() += 1;
            }
        } else if let Some(f) = line.strip_prefix('\t') {
            let f = f.trim_start();
            let (_addr, rest) = f.split_once(' ').unwrap();
            let (func, module) = rest.rsplit_once(" (").unwrap();
            let module = module.strip_suffix(')').unwrap();
            let base = module.rsplit('/').next().unwrap();
            let name = if func == "[unknown]" {
                format!("[{base}]")
            } else {
                func.to_string()
            };
            cur.as_mut().unwrap().1.push(name);
        } else {
            // comm tid [cpu] secs: 1 event:
            assert!(line.ends_with(':'), "{line}");
            let comm = line.split(' ').next().unwrap().to_string();
            cur = Some((comm, Vec::new()));
        }
    }
    out
}

#[test]
fn perf_script_text_holds_every_sample() {
    let t = fixture("v7-zstd.dat");
    let t = t.to_str().unwrap();
    let text = String::from_utf8(ustack(&[
        "-q",
        "--sysroot",
        "/nonexistent",
        "--sysroot-only",
        "--perf-script",
        "-",
        t,
    ]))
    .unwrap();
    let ours = collapse(&text);
    // The ground truth: 20 samples of uu_chain, 3 of uu_bench, 1 of busybox, every frame
    // of the trace in its file (none named: nothing is found under /nonexistent).
    assert_eq!(ours.values().sum::<u64>(), 24);
    let chain = "uu_chain;[libc.so.6];[uu_chain];[uu_chain];[uu_chain];[uu_chain];[libuutest.so]";
    assert_eq!(ours.get(chain), Some(&20), "{ours:#?}");
    assert_eq!(text.matches(": 1 raw_syscalls:sys_enter:\n").count(), 24);
    assert!(
        text.contains("\t            12ce [unknown] (/usr/bin/uu_chain)\n"),
        "{text}"
    );
}

/// The perf script consumer the test runs: `$STACKCOLLAPSE_PERF` (FlameGraph's
/// stackcollapse-perf.pl, run with perl), else inferno-collapse-perf, its Rust port, which
/// scripts/setup.sh installs into the cache (on the PATH of make check's stages). Absent,
/// the test fails under CI and says SKIP elsewhere.
fn consumer() -> Option<Command> {
    if let Some(pl) = std::env::var_os("STACKCOLLAPSE_PERF") {
        let mut c = Command::new("perl");
        c.arg(pl);
        return Some(c);
    }
    let name = "inferno-collapse-perf";
    let cache = std::env::var_os("USER_UNWIND_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(|x| PathBuf::from(x).join("user-unwind"))
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/user-unwind"))
                })
        });
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(cache.map(|c| c.join("cargo/bin")))
        .map(|d| d.join(name))
        .find(|f| f.is_file());
    match found {
        Some(f) => {
            let mut c = Command::new(f);
            c.arg("-q");
            Some(c)
        }
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{name} is not installed: scripts/setup.sh installs it (or set $STACKCOLLAPSE_PERF)"
            );
            eprintln!("SKIP: {name}: not installed (scripts/setup.sh installs it)");
            None
        }
    }
}

/// Folded lines to counts.
fn counts(text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let (s, n) = l.rsplit_once(' ').unwrap();
        *m.entry(s.to_string()).or_default() += n.parse::<u64>().unwrap();
    }
    m
}

/// ustack's own `--folded --task` lines as stackcollapse-perf.pl folds perf script's text,
/// the documented differences taken out: the consumer's root is the command (ustack's is
/// the event, then `comm-pid`); perf script's text has no inline marker (ustack's
/// `_[i]`); a frame nothing named is `[file]` (ustack's `file+0xoffset`); a sample without
/// frames is not counted (ustack's `[no stack]`, `[no user frames]`). The markers of a
/// stack cut short (`[truncated]`, `[truncated: REASON]`) are frames of both.
fn as_consumer_folds(folded: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (stack, n) in counts(folded) {
        let mut parts = stack.split(';');
        let _event = parts.next().unwrap();
        let task = parts.next().unwrap();
        let comm = task.rsplit_once('-').unwrap().0;
        let frames: Vec<String> = parts
            .filter(|f| !matches!(*f, "[no stack]" | "[no user frames]"))
            .map(|f| {
                let f = f.strip_suffix("_[i]").unwrap_or(f);
                match f.rsplit_once("+0x") {
                    Some((file, off)) if u64::from_str_radix(off, 16).is_ok() => {
                        format!("[{file}]")
                    }
                    _ => f.to_string(),
                }
            })
            .collect();
        if frames.is_empty() {
            continue;
        }
        *m.entry(format!("{comm};{}", frames.join(";"))).or_default() += n;
    }
    m
}

/// The consumer's folding of ustack's perf script text of `trace` equals ustack's own
/// folded stacks of it, modulo the documented differences; returns the stacks.
fn consumer_agrees(trace: &str, extra: &[&str]) -> Option<BTreeMap<String, u64>> {
    let mut c = consumer()?;
    let mut args = vec!["-q", "--perf-script", "-"];
    args.extend_from_slice(extra);
    args.push(trace);
    let text = ustack(&args);
    let mut args = vec!["-q", "--task", "--folded", "-"];
    args.extend_from_slice(extra);
    args.push(trace);
    let ours = as_consumer_folds(&String::from_utf8(ustack(&args)).unwrap());
    let mut c = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut c.stdin.take().unwrap(), &text).unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let theirs = counts(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(theirs, ours, "the consumer's stacks, then ustack's");
    Some(theirs)
}

#[test]
fn stackcollapse_perf_folds_perf_script_as_ustack_folds() {
    // The recording: every frame unnamed (nothing is found under /nonexistent).
    let t = fixture("v7-zstd.dat");
    let Some(stacks) = consumer_agrees(
        t.to_str().unwrap(),
        &["--sysroot", "/nonexistent", "--sysroot-only"],
    ) else {
        return;
    };
    let chain = "uu_chain;[libc.so.6];[uu_chain];[uu_chain];[uu_chain];[uu_chain];[libuutest.so]";
    assert_eq!(stacks.get(chain), Some(&20), "{stacks:#?}");
    assert_eq!(stacks.values().sum::<u64>(), 24);
}

#[test]
fn stackcollapse_perf_sees_a_stack_cut_short_marked() {
    // v7-date.dat: busybox's stack the unwinder stopped after one frame (bad_frame).
    let t = fixture("v7-date.dat");
    let Some(stacks) = consumer_agrees(
        t.to_str().unwrap(),
        &["--sysroot", "/nonexistent", "--sysroot-only"],
    ) else {
        return;
    };
    assert_eq!(
        stacks.get("uu_bench;[truncated: bad_frame];[busybox]"),
        Some(&1),
        "{stacks:#?}"
    );
}

/// The sample lines of perf script's text: (secs.usecs as nanoseconds/1000, cpu, line).
fn sample_lines(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('\t'))
        .map(|l| {
            let t = l.split_whitespace().nth(3).unwrap().trim_end_matches(':');
            let (s, us) = t.split_once('.').unwrap();
            (
                s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap(),
                l.to_string(),
            )
        })
        .collect()
}

#[test]
fn perf_script_is_in_time_order_and_the_same_every_run() {
    // The join gives a sample when its stack completes: in these recordings two samples
    // come after later ones. perf script's text is in time order, and the same text
    // every run (CPUs flushed in order, ties broken by CPU and cookie order).
    for name in [
        "v6.dat",
        "v7-zstd.dat",
        "v7-global.dat",
        "v7-date.dat",
        "text.trace",
    ] {
        let t = fixture(name);
        let run = || {
            String::from_utf8(ustack(&[
                "-q",
                "--sysroot",
                "/nonexistent",
                "--sysroot-only",
                "--perf-script",
                "-",
                t.to_str().unwrap(),
            ]))
            .unwrap()
        };
        let first = run();
        let lines = sample_lines(&first);
        assert!(lines.len() >= 23, "{name}: {first}");
        for w in lines.windows(2) {
            assert!(w[0].0 <= w[1].0, "{name}: {} before {}", w[0].1, w[1].1);
        }
        for _ in 0..4 {
            assert_eq!(run(), first, "{name}: another run, another text");
        }
        // The same samples as the report counts.
        let mut cookies: Vec<u64> = Vec::new();
        let report = match name.strip_suffix(".dat") {
            Some(n) => std::fs::read_to_string(fixture(&format!("{n}.report"))).unwrap(),
            None => String::new(),
        };
        for l in report.lines().filter(|l| l.contains("user_unwind_cookie:")) {
            // COMM-PID [CPU] SECS.USECS: (a COMM may hold spaces)
            let t = l.split("] ").nth(1).unwrap().split(':').next().unwrap();
            let (s, us) = t.trim().split_once('.').unwrap();
            cookies.push(s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap());
        }
        if !cookies.is_empty() {
            cookies.sort_unstable();
            // trace-cmd report rounds to the microsecond, perf script's text truncates.
            let ours: Vec<u64> = lines.iter().map(|l| l.0).collect();
            assert_eq!(ours.len(), cookies.len(), "{name}: a sample a cookie");
            for (o, c) in ours.iter().zip(&cookies) {
                assert!(
                    o.abs_diff(*c) <= 1,
                    "{name}: {ours:?}, cookies at {cookies:?}"
                );
            }
        }
    }
}

#[test]
fn stackcollapse_perf_reads_named_frames() {
    // A stack in this machine's libc, named from its symbols (and libc6-dbg's debug file
    // when installed), under a frame of a file that is not here.
    let libc = std::path::Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let id: String = ustack::elf::build_id(libc)
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let nm = String::from_utf8(
        Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(libc)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let off = |name: &str, plus: u64| {
        let va = nm
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                let a = w.next()?;
                let n = w.nth(1)?;
                (n == name || n.starts_with(&format!("{name}@@")))
                    .then(|| u64::from_str_radix(a, 16).unwrap())
            })
            .unwrap();
        let l = ustack::elf::loads(libc)
            .unwrap()
            .into_iter()
            .find(|l| va >= l.vaddr && va - l.vaddr < l.filesz)
            .unwrap();
        va - l.vaddr + l.offset + plus
    };
    let mut t = String::from("# trace_clock: global\n# tracer: nop\n");
    let line = |t: &mut String, us: u32, body: &str| {
        t.push_str(&format!("  prog-42 [000] .....    10.{us:06}: {body}\n"));
    };
    line(
        &mut t,
        1,
        &format!(
            "file_cache: cookie=aa path={} build_id={id} build_id_len=20",
            libc.display()
        ),
    );
    line(
        &mut t,
        2,
        "file_cache: cookie=bb path=/usr/bin/not-here build_id=0102 build_id_len=2",
    );
    let stack = [
        (off("getppid", 0), 0xaa),
        (off("puts", 8), 0xaa),
        (off("qsort", 8), 0xaa),
        (0x1234, 0xbb),
    ];
    for i in 0..3u32 {
        line(&mut t, 10 + 3 * i, "sys_enter: NR 110 (0, 0, 0, 0, 0, 0)");
        line(
            &mut t,
            11 + 3 * i,
            &format!("user_unwind_cookie: cookie={:x}", 0x100 + i),
        );
        line(
            &mut t,
            12 + 3 * i,
            &format!("user_unwind_stack: cookie={:x}", 0x100 + i),
        );
        for (o, c) in &stack[..2 + i as usize] {
            t.push_str(&format!(" => <{o:016x}> : 0x{c:x}\n"));
        }
    }
    let d = common::tmpdir("named");
    let f = d.join("named.trace");
    std::fs::write(&f, t).unwrap();
    let Some(stacks) = consumer_agrees(f.to_str().unwrap(), &[]) else {
        return;
    };
    // libc6-dbg names them as glibc's sources do (__GI_getppid), libc's own symbols
    // without the prefixes.
    let plain: BTreeMap<String, u64> = stacks
        .iter()
        .map(|(k, n)| (k.replace("__GI_", "").replace("_IO_", ""), *n))
        .collect();
    assert_eq!(
        plain.get("prog;[not-here];qsort;puts;getppid"),
        Some(&1),
        "{stacks:#?}"
    );
    assert_eq!(plain.get("prog;puts;getppid"), Some(&1), "{stacks:#?}");
    assert_eq!(stacks.values().sum::<u64>(), 3);
}

/// `ustack --pprof` of the trace `t`, nothing symbolized, decoded with upstream's
/// profile.proto; and its string table.
fn pprof_of(t: &std::path::Path) -> (pprof::Msg, Vec<String>) {
    let gz = ustack(&[
        "-q",
        "--sysroot",
        "/nonexistent",
        "--sysroot-only",
        "--pprof",
        "-",
        t.to_str().unwrap(),
    ]);
    pprof::decode(&gz)
}

#[test]
fn pprof_labels_and_has_functions() {
    let t = fixture("v7-zstd.dat");
    let (f, strings) = pprof_of(&t);
    // Nothing named: each location has one line, its frame's name in the other outputs
    // (file+0xoffset), so every mapping says has_functions (pprof does not symbolize it
    // again), and none has file names, line numbers or inlined functions.
    assert!(!f.msgs("mapping").is_empty());
    for m in f.msgs("mapping") {
        assert_eq!(m.int("has_functions"), 1);
        assert_eq!(m.int("has_filenames"), 0);
        assert_eq!(m.int("has_line_numbers"), 0);
        assert_eq!(m.int("has_inline_frames"), 0);
    }
    let function_names: BTreeMap<i64, String> = f
        .msgs("function")
        .iter()
        .map(|x| (x.int("id"), strings[x.int("name") as usize].clone()))
        .collect();
    for l in f.msgs("location") {
        let lines = l.msgs("line");
        assert_eq!(lines.len(), 1);
        let name = &function_names[&lines[0].int("function_id")];
        let (file, off) = name.rsplit_once("+0x").unwrap();
        assert_eq!(
            i64::from_str_radix(off, 16).unwrap(),
            l.int("address"),
            "{name}"
        );
        assert!(!file.is_empty(), "{name}");
    }
    // The main binary first: uu_chain has 20 of the 24 samples.
    let first = f.msgs("mapping")[0];
    assert_eq!(strings[first.int("filename") as usize], "/usr/bin/uu_chain");
    assert_eq!(first.int("id"), 1);
    // The event, comm and pid are labels of each sample, not frames.
    let mut by_task: BTreeMap<(String, String, i64), i64> = BTreeMap::new();
    for s in f.msgs("sample") {
        let labels = pprof::labels(s, &strings);
        *by_task
            .entry((
                labels["event"][0].0.clone(),
                labels["comm"][0].0.clone(),
                labels["pid"][0].1,
            ))
            .or_default() += s.ints("value")[0];
    }
    let ev = "raw_syscalls:sys_enter".to_string();
    assert_eq!(
        by_task.get(&(ev.clone(), "uu_chain".into(), 85)),
        Some(&20),
        "{by_task:?}"
    );
    assert_eq!(by_task.values().sum::<i64>(), 24);
}

#[test]
fn pprof_sample_times_are_the_trace_times() {
    // The clock counts from boot: no date, time_nanos is not given.
    assert_eq!(pprof_times("v7-zstd"), 0);
}

#[test]
fn pprof_sample_times_are_the_time_of_day_with_date() {
    // trace-cmd record --date: time_nanos is then nanoseconds past the epoch, as pprof
    // defines it.
    let t = pprof_times("v7-date");
    assert!(t > 1_600_000_000_000_000_000, "{t}");
}

/// Checks the pprof times of recording `name` against its trace-cmd report: time_nanos
/// its first sample's, or 0; returns time_nanos.
fn pprof_times(name: &str) -> i64 {
    // Ground truth: trace-cmd report's time of every cookie of the recording (a sample's
    // time is its cookie's), in microseconds (rounded to the nearest), per task.
    let report = std::fs::read_to_string(fixture(&format!("{name}.report"))).unwrap();
    let mut truth: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for l in report.lines().filter(|l| l.contains("user_unwind_cookie:")) {
        let mut w = l.split_whitespace();
        let task = w.next().unwrap().to_string();
        let _cpu = w.next();
        let t = w.next().unwrap().trim_end_matches(':');
        let (sec, usec) = t.split_once('.').unwrap();
        let us = sec.parse::<i64>().unwrap() * 1_000_000 + usec.parse::<i64>().unwrap();
        truth.entry(task).or_default().push(us);
    }
    let t = fixture(&format!("{name}.dat"));
    let (f, strings) = pprof_of(&t);
    let time_nanos = f.int("time_nanos");
    let duration = f.int("duration_nanos");
    // Upstream's field 15 is doc_url: nothing is written there.
    assert_eq!(f.int("doc_url"), 0, "doc_url");
    assert_eq!(f.int("period"), 1, "period");
    let pt = f.msgs("period_type")[0];
    assert_eq!(
        (
            strings[pt.int("type") as usize].as_str(),
            strings[pt.int("unit") as usize].as_str()
        ),
        ("samples", "count")
    );
    // Every event is a sample of its own, its time a numeric label in nanoseconds.
    let mut ours: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut last = 0;
    let mut first = i64::MAX;
    for s in f.msgs("sample") {
        assert_eq!(s.ints("value"), [1]);
        let labels = pprof::labels(s, &strings);
        let time = &labels["time"];
        assert_eq!(time.len(), 1);
        assert_eq!(time[0].2, "nanoseconds");
        let t = time[0].1;
        assert!(t >= time_nanos);
        last = last.max(t);
        first = first.min(t);
        let task = format!("{}-{}", labels["comm"][0].0, labels["pid"][0].1);
        ours.entry(task).or_default().push((t + 500) / 1000);
    }
    for v in ours.values_mut() {
        v.sort_unstable();
    }
    assert_eq!(ours, truth);
    assert_eq!(
        duration,
        last - first,
        "duration_nanos: the first sample to the last"
    );
    assert_eq!(
        (first + 500) / 1000,
        *truth.values().flatten().min().unwrap()
    );
    assert!(time_nanos == 0 || time_nanos == first, "{time_nanos}");
    time_nanos
}
