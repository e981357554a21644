// SPDX-License-Identifier: GPL-2.0

//! The report's call trees (`-g caller`, `-g callee`, perf report's) and its view of one
//! function's callers and callees (`--focus`), on the guest recording `kstack.dat`, against
//! the counts the same run's folded stacks give: every branch of every tree is the sum of
//! the folded stacks through it.

mod common;

use common::{fixture, tmpdir};
use std::collections::BTreeMap;
use std::process::Command;

/// A path of frame names from a tree's root, and its value.
type Counts = BTreeMap<Vec<String>, u64>;

/// `ustack FLAGS --folded F --report R kstack.dat` (uu_offcpu named): the folded stacks
/// and the report.
fn run(flags: &[&str]) -> (String, String) {
    let d = tmpdir(&flags.join("").replace(['-', ' ', '_'], ""));
    let (f, r) = (d.join("f"), d.join("r"));
    // uu_offcpu's symbols: the build the guest ran, beside the recording.
    let map = format!("/usr/bin={}", fixture("").to_str().unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(flags)
        .args(["--map", &map])
        .arg("--folded")
        .arg(&f)
        .arg("--report")
        .arg(&r)
        .arg(fixture("kstack.dat"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{flags:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |p| std::fs::read_to_string(p).unwrap();
    let got = (read(&f), read(&r));
    std::fs::remove_dir_all(&d).unwrap();
    got
}

/// A frame's name as both outputs give it: folded's `_[k]` and `_[i]` marks, the report's
/// module and ` (inlined)` taken off.
fn folded_name(f: &str) -> String {
    f.trim_end_matches("_[k]")
        .trim_end_matches("_[i]")
        .to_string()
}
fn report_name(l: &str) -> String {
    let n = l.split("  ").next().unwrap();
    n.trim_end_matches(" (inlined)").to_string()
}

/// The folded stacks of `event`: frames outermost first (the event taken off), counts.
fn folded(text: &str, event: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .filter_map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            let mut f = s.split(';');
            (f.next() == Some(event)).then(|| (f.map(folded_name).collect(), n.parse().unwrap()))
        })
        .collect()
}

/// Every prefix of every path under `root`, with the sum of the values through it.
fn prefixes<'a>(root: &str, paths: impl Iterator<Item = (Vec<String>, u64)> + 'a) -> Counts {
    let mut c = Counts::new();
    for (p, n) in paths {
        for i in 0..=p.len() {
            let mut k = vec![root.to_string()];
            k.extend_from_slice(&p[..i]);
            *c.entry(k).or_default() += n;
        }
    }
    c
}

/// The report's section of `event`.
fn section<'a>(report: &'a str, event: &str) -> &'a str {
    let start = report.find(&format!("# Event: {event}\n")).unwrap();
    let rest = &report[start + 1..];
    &rest[..rest.find("\n# Event: ").map_or(rest.len(), |e| e + 1)]
}

/// The tree after the line `heading` in `text`: each line's path of names from the root
/// (by its indent, two spaces a level) and value, summed over lines alike; and the shares
/// each line gives against `total`.
fn tree(text: &str, heading: &str, total: u64) -> Counts {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("{heading}: {text}"));
    let mut lines = text[start..].lines().skip(1);
    let mut c = Counts::new();
    let mut path: Vec<String> = Vec::new();
    for l in lines.by_ref() {
        if l == "#" && path.is_empty() {
            continue;
        }
        if l.starts_with('#') || l.is_empty() {
            break;
        }
        let depth = (l.len() - l.trim_start().len()) / 2;
        let (share, rest) = l.trim_start().split_once("%  ").unwrap();
        let (value, label) = rest.split_once("  ").unwrap();
        let value: u64 = value.parse().unwrap();
        let share: f64 = share.parse().unwrap();
        assert!(
            (share - 100.0 * value as f64 / total as f64).abs() < 0.006,
            "{l}: {value} of {total}"
        );
        path.truncate(depth);
        assert_eq!(path.len(), depth, "{l}: a level skipped");
        path.push(report_name(label));
        *c.entry(path.clone()).or_default() += value;
    }
    c
}

const EVENTS: [&str; 2] = ["sched:sched_switch", "raw_syscalls:sys_enter"];

#[test]
fn call_tree_caller_and_callee_are_the_folded_counts() {
    for (mode, caller) in [("caller", true), ("callee", false)] {
        for flag in [&["-g", mode][..], &["--call-graph", mode][..]] {
            let (folded_text, report) = run(flag);
            for event in EVENTS {
                let stacks = folded(&folded_text, event);
                let total: u64 = stacks.iter().map(|s| s.1).sum();
                assert!(total > 0, "{event}");
                let want = prefixes(
                    "(all)",
                    stacks.into_iter().map(|(mut f, n)| {
                        if !caller {
                            f.reverse();
                        }
                        (f, n)
                    }),
                );
                let sec = section(&report, event);
                let got = tree(sec, "# Call tree, ", total);
                assert_eq!(got, want, "{mode} {event}: {sec}");
                assert!(sec.contains(&format!("(-g {mode})")), "{sec}");
            }
        }
    }
}

#[test]
fn focus_gives_the_callers_and_callees_of_one_function() {
    for (name, event) in [
        ("do_syscall_64", "sched:sched_switch"),
        ("oc_b", "sched:sched_switch"),
        ("__schedule", "sched:sched_switch"),
        ("trace_syscall_enter", "raw_syscalls:sys_enter"),
    ] {
        for flag in ["--focus", "-S"] {
            let (folded_text, report) = run(&[flag, name]);
            let stacks = folded(&folded_text, event);
            let total: u64 = stacks.iter().map(|s| s.1).sum();
            // Each stack at the function's outermost call.
            let (mut callers, mut callees) = (Vec::new(), Vec::new());
            let (mut with, mut itself) = (0, 0);
            for (f, n) in stacks {
                let Some(i) = f.iter().position(|x| *x == name) else {
                    continue;
                };
                with += n;
                if i + 1 == f.len() {
                    itself += n;
                }
                callers.push((f[..i].iter().rev().cloned().collect(), n));
                callees.push((f[i + 1..].to_vec(), n));
            }
            assert!(with > 0, "{name}");
            let sec = section(&report, event);
            let pct = |v: u64| format!("{:.2}%", 100.0 * v as f64 / total as f64);
            assert!(
                sec.contains(&format!(
                    "# Focus on {name}: {} of the event with its callees ({with} samples), {} itself ({itself} samples)\n",
                    pct(with),
                    pct(itself)
                )),
                "{sec}"
            );
            let got = tree(
                sec,
                &format!("# Callers of {name}, the nearest first:"),
                total,
            );
            assert_eq!(
                got,
                prefixes(name, callers.into_iter()),
                "{name} callers: {sec}"
            );
            let got = tree(sec, &format!("# Callees of {name}:"), total);
            assert_eq!(
                got,
                prefixes(name, callees.into_iter()),
                "{name} callees: {sec}"
            );
        }
    }
    // __schedule is where every sched_switch stack ends: all of it, itself.
    let (_, report) = run(&["--focus", "__schedule", "--event", "sched_switch"]);
    assert!(
        report.contains("# Focus on __schedule: 100.00% of the event with its callees (70 samples), 100.00% itself (70 samples)\n"),
        "{report}"
    );
    // A function in no stack of a section says so.
    let (_, report) = run(&["--focus", "no_such_function"]);
    assert!(
        report.contains("# Focus on no_such_function: not in this event's stacks\n"),
        "{report}"
    );
}

#[test]
fn without_the_options_the_report_is_as_before() {
    let (_, plain) = run(&[]);
    assert!(!plain.contains("# Call tree") && !plain.contains("# Focus"));
    // The trees come after the report's own lines, which stay as they are.
    let (_, with) = run(&["-g", "caller", "--focus", "oc_b"]);
    for event in EVENTS {
        let (a, b) = (section(&plain, event), section(&with, event));
        assert!(
            b.starts_with(a.trim_end_matches('\n')),
            "{event}:\n{a}\n----\n{b}"
        );
    }
}

#[test]
fn call_tree_and_focus_usage() {
    for args in [
        &["-g", "sideways"][..],
        &["--call-graph", "caller", "--folded", "-"],
        &["--focus", "oc_b", "--svg", "/dev/null"],
        &["--focus", ""],
    ] {
        common::ustack_usage_error(args, &fixture("kstack.dat"));
    }
    // perf's long form: fields of which the mode is one.
    let (_, r) = run(&["-g", "graph,0.5,callee"]);
    assert!(r.contains("(-g callee)"), "{r}");
}
