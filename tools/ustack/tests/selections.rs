// SPDX-License-Identifier: GPL-2.0

//! Every output honours every selection and weight: `--off-cpu`, `--user-only` and
//! `--kernel-only` on the guest recording `kstack.dat` (kernel stacks, `sched_switch` and
//! `sys_enter`), each output of one run checked against that run's folded stacks and
//! against what the flag means: the report, the flame graph, speedscope, pprof (decoded
//! with upstream's `profile.proto`) and perf script's text, whose samples, folded here,
//! must be the folded stacks themselves.

mod common;

use common::{fixture, pprof, tmpdir};
use std::collections::BTreeMap;
use std::process::Command;

/// Every output of `ustack FLAGS kstack.dat`, as text (pprof's decoded), and the summary.
struct Run {
    folded: String,
    report: String,
    svg: String,
    speedscope: String,
    perf_script: String,
    pprof: (pprof::Msg, Vec<String>),
    err: String,
}

fn run(flags: &[&str]) -> Run {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = tmpdir(&format!("sel{n}"));
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    for (o, f) in [
        ("--folded", "f"),
        ("--report", "r"),
        ("--svg", "s"),
        ("--speedscope", "j"),
        ("--perf-script", "ps"),
        ("--pprof", "p"),
    ] {
        args.push(o.into());
        args.push(p(f));
    }
    args.push(fixture("kstack.dat").to_str().unwrap().into());
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(&args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {err}");
    let read = |n: &str| std::fs::read_to_string(p(n)).unwrap();
    let r = Run {
        folded: read("f"),
        report: read("r"),
        svg: read("s"),
        speedscope: read("j"),
        perf_script: read("ps"),
        pprof: pprof::decode(&std::fs::read(p("p")).unwrap()),
        err,
    };
    std::fs::remove_dir_all(&d).unwrap();
    r
}

/// Folded stacks as `(frames, count)`, frames root first.
fn folded(text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.split(';').map(String::from).collect(), n.parse().unwrap())
        })
        .collect()
}

fn total(f: &[(Vec<String>, u64)]) -> u64 {
    f.iter().map(|s| s.1).sum()
}

/// The samples kept, as the summary says.
fn kept(err: &str) -> u64 {
    let i = err.find(" samples kept").unwrap();
    err[..i].rsplit(' ').next().unwrap().parse().unwrap()
}

/// A frame that is not code: the flame graph's root, the event, an off-CPU state, a
/// marker.
fn synthetic(f: &str) -> bool {
    f == "all" || f.starts_with('[') || f.contains(':')
}

/// perf script's samples, each folded as ustack folds it: `event;outermost;...;innermost`,
/// kernel frames marked `_[k]` without their offset, a frame nothing named as
/// `file+0xoffset`, counted by period; and the number of samples.
fn fold_perf_script(text: &str) -> (BTreeMap<String, u64>, u64, Vec<u64>) {
    let mut out = BTreeMap::new();
    let (mut n, mut periods) = (0, Vec::new());
    for s in text.split("\n\n").filter(|s| !s.trim().is_empty()) {
        let mut lines = s.lines();
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let period: u64 = head[head.len() - 2].parse().unwrap();
        let event = head[head.len() - 1].trim_end_matches(':');
        let mut frames = Vec::new();
        for l in lines {
            let l = l.trim();
            let (addr, rest) = l.split_once(' ').unwrap();
            let (name, module) = rest.rsplit_once(" (").unwrap();
            let module = module.trim_end_matches(')');
            // Kernel frames come first, at kernel addresses; their module is
            // `[kernel.kallsyms]` or a module's (`[user_unwind]`).
            let name = if kernel_addr(addr) {
                format!("{}_[k]", name.split('+').next().unwrap())
            } else if name == "[unknown]" {
                format!("{}+0x{addr}", module.rsplit('/').next().unwrap_or(module))
            } else {
                name.to_string()
            };
            frames.push(name);
        }
        frames.push(event.to_string());
        frames.reverse();
        *out.entry(frames.join(";")).or_default() += period;
        n += 1;
        periods.push(period);
    }
    (out, n, periods)
}

fn kernel_addr(a: &str) -> bool {
    a.len() == 16 && a.starts_with("ffff")
}

/// The folded stacks as perf script can show them: without inline marks and the
/// synthetic levels under the event (off-CPU states, `[no ...]` markers).
fn fold_folded(f: &[(Vec<String>, u64)]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (s, n) in f {
        let frames: Vec<String> = s
            .iter()
            .enumerate()
            .filter(|(i, x)| *i == 0 || !(x.starts_with("[no ") || is_state(x)))
            .map(|(_, x)| x.replace("_[i]", ""))
            .collect();
        *out.entry(frames.join(";")).or_default() += n;
    }
    out
}

fn is_state(f: &str) -> bool {
    f.len() <= 5 && f.starts_with('[') && f.ends_with(']') && f != "[k]"
}

/// The names of the flame graph's frames (their tooltips' first line), and its total.
fn svg_frames(svg: &str) -> (Vec<String>, u64) {
    let names = svg
        .split("<g class=\"f\"")
        .skip(1)
        .map(|g| {
            let t = &g[g.find("<title>").unwrap() + 7..];
            t[..t.find('\n').unwrap()]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .collect();
    let t = &svg[svg.find("data-total=\"").unwrap() + 12..];
    (names, t[..t.find('"').unwrap()].parse().unwrap())
}

/// speedscope's frame names and its profile's end value.
fn speedscope_frames(j: &str) -> (Vec<String>, u64) {
    let names = j
        .split("{\"name\":\"")
        .skip(1)
        .map(|f| f[..f.find('"').unwrap()].to_string())
        .collect();
    let e = &j[j.find("\"endValue\":").unwrap() + 11..];
    (
        names,
        e[..e.find(|c: char| !c.is_ascii_digit()).unwrap()]
            .parse()
            .unwrap(),
    )
}

/// pprof: the sample type, the values' sum, and each sample's mappings' file names.
fn pprof_facts(p: &(pprof::Msg, Vec<String>)) -> ((String, String), u64, Vec<String>) {
    let (m, strings) = p;
    let st = m.msgs("sample_type")[0];
    let ty = (
        strings[st.int("type") as usize].clone(),
        strings[st.int("unit") as usize].clone(),
    );
    let sum = m
        .msgs("sample")
        .iter()
        .map(|s| s.ints("value")[0] as u64)
        .sum();
    let files: BTreeMap<i64, String> = m
        .msgs("mapping")
        .iter()
        .map(|x| (x.int("id"), strings[x.int("filename") as usize].clone()))
        .collect();
    let loc_map: BTreeMap<i64, i64> = m
        .msgs("location")
        .iter()
        .map(|l| (l.int("id"), l.int("mapping_id")))
        .collect();
    let mut used = Vec::new();
    for s in m.msgs("sample") {
        for l in s.ints("location_id") {
            if let Some(f) = loc_map.get(&l).and_then(|mid| files.get(mid)) {
                used.push(f.clone());
            }
        }
    }
    (ty, sum, used)
}

/// Checks what every run must hold: each output's total is the folded stacks', perf
/// script's samples are the folded stacks and as many as the summary keeps.
fn common_checks(r: &Run, what: &str) -> Vec<(Vec<String>, u64)> {
    let f = folded(&r.folded);
    let t = total(&f);
    assert!(t > 0, "{what}: folded stacks empty");
    let (ps, n, _) = fold_perf_script(&r.perf_script);
    assert_eq!(n, kept(&r.err), "{what}: perf script's samples");
    assert_eq!(ps, fold_folded(&f), "{what}: perf script against folded");
    let (_, svg_total) = svg_frames(&r.svg);
    assert_eq!(svg_total, t, "{what}: the flame graph's total");
    let (_, end) = speedscope_frames(&r.speedscope);
    assert_eq!(end, t, "{what}: speedscope's end value");
    let (_, sum, _) = pprof_facts(&r.pprof);
    assert_eq!(sum, t, "{what}: pprof's values");
    f
}

#[test]
fn user_only_in_every_output() {
    let r = run(&["--user-only"]);
    let f = common_checks(&r, "--user-only");
    for (s, _) in &f {
        assert!(!s.iter().any(|x| x.ends_with("_[k]")), "folded: {s:?}");
    }
    assert!(
        !r.report.contains("kernel.kallsyms"),
        "report: {}",
        r.report
    );
    assert!(!r.perf_script.contains("kernel.kallsyms"), "perf script");
    let (names, _) = svg_frames(&r.svg);
    assert!(!names.iter().any(|x| x.ends_with("_[k]")), "svg: {names:?}");
    let (names, _) = speedscope_frames(&r.speedscope);
    assert!(!names.iter().any(|x| x.ends_with("_[k]")), "speedscope");
    let (_, _, files) = pprof_facts(&r.pprof);
    assert!(!files.iter().any(|x| x.starts_with("[kernel")), "pprof");
    assert!(files.iter().any(|x| x.ends_with("libc.so.6")), "pprof");
}

#[test]
fn kernel_only_in_every_output() {
    let r = run(&["--kernel-only"]);
    let f = common_checks(&r, "--kernel-only");
    let user = |x: &str| !x.ends_with("_[k]") && !synthetic(x);
    for (s, _) in &f {
        assert!(!s[1..].iter().any(|x| user(x)), "folded: {s:?}");
    }
    // The report names none of the user files (those perf script names without the flag).
    let all = run(&[]);
    let user_files: std::collections::BTreeSet<&str> = all
        .perf_script
        .lines()
        .filter(|l| l.starts_with('\t') && !kernel_addr(l.trim().split(' ').next().unwrap()))
        .map(|l| {
            let m = l.rsplit_once(" (").unwrap().1.trim_end_matches(')');
            m.rsplit('/').next().unwrap()
        })
        .collect();
    assert!(user_files.contains("libc.so.6"), "{user_files:?}");
    for f in &user_files {
        assert!(!r.report.contains(f), "report: {f}: {}", r.report);
    }
    for l in r.perf_script.lines().filter(|l| l.starts_with('\t')) {
        let addr = l.trim().split(' ').next().unwrap();
        assert!(kernel_addr(addr) && l.ends_with("])"), "perf script: {l}");
    }
    let (names, _) = svg_frames(&r.svg);
    assert!(!names.iter().any(|x| user(x)), "svg: {names:?}");
    let (names, _) = speedscope_frames(&r.speedscope);
    assert!(!names.iter().any(|x| user(x)), "speedscope: {names:?}");
    let (_, _, files) = pprof_facts(&r.pprof);
    assert!(
        files.iter().any(|x| x == "[kernel.kallsyms]")
            && files
                .iter()
                .all(|x| x.starts_with('[') && x != "[vdso]" && x != "[unknown]"),
        "pprof: {files:?}"
    );
}

#[test]
fn off_cpu_in_every_output() {
    let r = run(&["--off-cpu"]);
    let f = common_checks(&r, "--off-cpu");
    let t = total(&f);
    // Only sched_switch samples that switched their task out asleep, not preempted,
    // each weighted by its time off the CPU.
    for (s, _) in &f {
        assert_eq!(s[0], "sched:sched_switch", "folded: {s:?}");
        assert!(is_state(&s[1]) && !s[1].starts_with("[R"), "folded: {s:?}");
    }
    let (_, n, periods) = fold_perf_script(&r.perf_script);
    assert_eq!(n, 44, "perf script: the 44 samples off the CPU");
    assert!(
        periods.iter().all(|&p| p > 1000),
        "perf script: {periods:?}"
    );
    assert!(!r.perf_script.contains("sys_enter"), "perf script");
    // The report: the time in a readable unit and the number of blockings, in columns
    // that keep their alignment whatever the unit.
    assert!(
        r.report.starts_with(
            "# Event: sched:sched_switch\n# Off-CPU time: 2993.320 ms in 44 blockings  Stacks: "
        ),
        "report: {}",
        r.report
    );
    let header = r
        .report
        .lines()
        .find(|l| l.starts_with("# Children"))
        .unwrap();
    assert!(
        header.starts_with("# Children      Self     Off-CPU  Blockings  Function"),
        "{header}"
    );
    let time_end = header.find("Off-CPU").unwrap() + "Off-CPU".len();
    let n_end = header.find("Blockings").unwrap() + "Blockings".len();
    let mut units = std::collections::BTreeSet::new();
    let rows = r
        .report
        .lines()
        .skip_while(|l| !l.starts_with("# Children"))
        .skip(2)
        .take_while(|l| !l.starts_with('#'));
    for l in rows {
        let time = l[..time_end].rsplit("  ").next().unwrap();
        let (num, unit) = time.split_once(' ').unwrap();
        assert!(
            num.parse::<f64>().is_ok() && l[time_end..].starts_with("  "),
            "{l}"
        );
        units.insert(unit.to_string());
        let n = l[..n_end].rsplit(' ').next().unwrap();
        assert!(n.parse::<u64>().unwrap() >= 1, "{l}");
        assert!(l[n_end..].starts_with("  "), "{l}");
    }
    assert!(units.contains("s") && units.contains("ms"), "{units:?}");
    // The top stacks: the same columns.
    assert!(
        r.report
            .contains("# Overhead     Off-CPU  Blockings  Event / task\n"),
        "report: {}",
        r.report
    );
    assert!(
        r.report
            .contains("%  779.590 ms          2  sched:sched_switch\n"),
        "report: {}",
        r.report
    );
    // The flame graph's title says what its widths are.
    assert!(
        r.svg.contains(">ustack: off-CPU time (ms) of "),
        "svg: the title"
    );
    assert!(!r.report.contains("sys_enter"), "report");
    let (names, _) = svg_frames(&r.svg);
    assert!(!names.iter().any(|x| x.contains("sys_enter")), "svg");
    assert!(r.svg.contains(" ms"), "svg: times in ms");
    assert!(
        r.speedscope.contains("\"unit\":\"nanoseconds\""),
        "speedscope"
    );
    let (ty, sum, _) = pprof_facts(&r.pprof);
    assert_eq!(ty, ("off-cpu".into(), "nanoseconds".into()), "pprof");
    assert_eq!(sum, t, "pprof");
}

#[test]
fn every_sample_in_every_output_without_flags() {
    let r = run(&[]);
    let f = common_checks(&r, "no flag");
    assert_eq!(total(&f), 74, "folded: every sample once");
    let (_, n, periods) = fold_perf_script(&r.perf_script);
    assert_eq!(n, 74);
    assert!(periods.iter().all(|&p| p == 1), "perf script: {periods:?}");
}

#[test]
fn preempted_without_off_cpu_is_a_usage_error() {
    let t = fixture("kstack.dat");
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(["--preempted", "--folded", "-"])
        .arg(&t)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty(), "nothing written");
    assert!(
        err.contains("--preempted") && err.contains("--off-cpu"),
        "{err}"
    );
    // With --off-cpu, in either order, it adds the preempted samples.
    for args in [["--off-cpu", "--preempted"], ["--preempted", "--off-cpu"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
            .args(args)
            .args(["--folded", "-"])
            .arg(&t)
            .output()
            .unwrap();
        assert!(out.status.success());
        let f = folded(&String::from_utf8_lossy(&out.stdout));
        assert!(f.iter().any(|(s, _)| s[1].starts_with("[R")), "{args:?}");
    }
}

/// The tracing machinery's own kernel frames (the event's probe, `__traceiter_EVENT`,
/// `__do_trace_EVENT`) are in no output by default, and in every one with
/// `--keep-tracing-frames`: the same samples, the same totals.
#[test]
fn tracing_frames_left_out_of_every_output_unless_kept() {
    let machinery = [
        "trace_event_raw_event_sched_switch",
        "__traceiter_sched_switch",
        "__do_trace_sched_switch",
        "trace_event_raw_event_sys_enter",
        "__do_trace_sys_enter",
    ];
    for keep in [false, true] {
        let r = run(if keep {
            &["--keep-tracing-frames"]
        } else {
            &[]
        });
        let f = common_checks(&r, if keep { "kept" } else { "trimmed" });
        assert_eq!(total(&f), 74);
        let (_, strings) = &r.pprof;
        for m in machinery {
            for (what, text) in [
                ("folded", &r.folded),
                ("report", &r.report),
                ("svg", &r.svg),
                ("speedscope", &r.speedscope),
                ("perf script", &r.perf_script),
            ] {
                assert_eq!(text.contains(m), keep, "{what}: {m}");
            }
            assert_eq!(strings.iter().any(|s| s == m), keep, "pprof: {m}");
        }
        // Where the event happened is innermost: the "Self" of its report section.
        let inner = if keep {
            "trace_event_raw_event_sched_switch"
        } else {
            "__schedule"
        };
        assert!(
            r.report
                .contains(&format!("\n   100.00%   100.00%       70  {inner}  ")),
            "{}",
            r.report
        );
    }
}

/// The report of `args` on kstack.dat.
fn report_of(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(["-q", "--report", "-"])
        .args(args)
        .arg(fixture("kstack.dat"))
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The report's sections: (event, text from its `# Event:` line up to the next).
fn sections(report: &str) -> Vec<(String, String)> {
    report
        .split("# Event: ")
        .skip(1)
        .map(|s| {
            let (name, _) = s.split_once('\n').unwrap();
            (
                name.to_string(),
                format!("# Event: {}", s.trim_end_matches('\n')),
            )
        })
        .collect()
}

/// One report section per event, as perf report gives, the largest first, each a whole
/// of its own (its shares of its own samples); `--event` picks one, in either form.
#[test]
fn one_report_section_per_event() {
    let all = report_of(&["--top", "3"]);
    let s = sections(&all);
    let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["sched:sched_switch", "raw_syscalls:sys_enter"],
        "{all}"
    );
    assert!(all.starts_with("# Event: sched:sched_switch\n# Samples: 70  Stacks: "));
    let (sw, se) = (&s[0].1, &s[1].1);
    assert!(se.contains("\n# Samples: 4  Stacks: "), "{se}");
    // Each section's function view is of its own samples: the place each event
    // happened is all of its own section's "Self", and the other event's frames are not
    // in it.
    assert!(
        sw.contains("\n   100.00%   100.00%       70  __schedule  "),
        "{sw}"
    );
    assert!(
        se.contains("\n   100.00%   100.00%        4  trace_syscall_enter  "),
        "{se}"
    );
    assert!(!sw.contains("trace_syscall_enter") && !se.contains("__schedule"));
    // Each section's top stacks: at most --top, their shares of its samples.
    for (name, text) in &s {
        let shares: Vec<f64> = text
            .lines()
            .filter(|l| l.ends_with(&format!("  {name}")))
            .map(|l| l.trim().split('%').next().unwrap().parse().unwrap())
            .collect();
        assert!(!shares.is_empty() && shares.len() <= 3, "{text}");
        assert!(shares.iter().sum::<f64>() <= 100.01, "{text}");
    }
    // --event picks a section, the same as in the whole report.
    for (pick, i) in [
        ("sys_enter", 1),
        ("raw_syscalls:sys_enter", 1),
        ("sched:sched_switch", 0),
    ] {
        let one = report_of(&["--top", "3", "--event", pick]);
        let picked = sections(&one);
        assert_eq!(picked.len(), 1, "{one}");
        assert_eq!(picked[0], s[i], "--event {pick}");
    }
}
