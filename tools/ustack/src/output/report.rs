// SPDX-License-Identifier: GPL-2.0

//! The text report, in the style of `perf report --stdio --children`.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{pct, SortKey, View};
use crate::stacks::{Entry, Label, Profile};

/// Off-CPU nanoseconds in a unit a reader takes in at a glance: `2.993 s`, `665.848 ms`,
/// `12.500 us`, `800 ns`.
pub fn time(ns: u64) -> String {
    let f = ns as f64;
    match ns {
        1_000_000_000.. => format!("{:.3} s", f / 1e9),
        1_000_000.. => format!("{:.3} ms", f / 1e6),
        1_000.. => format!("{:.3} us", f / 1e3),
        _ => format!("{ns} ns"),
    }
}

/// The value columns of a row: its samples, or (`--off-cpu`) its time off the CPU and
/// the number of times its tasks blocked there.
pub(super) fn values(p: &Profile, value: u64, samples: u64) -> String {
    if p.off_cpu {
        format!("{:>10}  {samples:>9}", time(value))
    } else {
        format!("{value:7}")
    }
}

/// The report: for each event, functions with their self and children samples (`--sort`
/// keys), then the top stacks, innermost frame first (callee first, as `perf report --stdio`'s default
/// call graph) or outermost first with `caller_first` (`perf report -G`).
///
/// One section per event, as `perf report` gives one per event: samples of different
/// events are not shares of one whole. The section of the largest total comes first.
pub fn report(p: &Profile, v: &View) -> String {
    let events = sections(p);
    let mut out = String::new();
    if events.is_empty() {
        section(p, v, &[], &mut out);
    }
    for (i, (name, entries)) in events.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "# Event: {name}");
        section(p, v, entries, &mut out);
    }
    out
}

/// The entries of each event, the event of the largest total first (ties by name).
pub(super) fn sections(p: &Profile) -> Vec<(&str, Vec<&Entry>)> {
    let mut events: HashMap<&str, Vec<&Entry>> = HashMap::new();
    for e in &p.entries {
        events
            .entry(p.labels[e.event as usize].name.as_str())
            .or_default()
            .push(e);
    }
    let mut events: Vec<(&str, Vec<&Entry>)> = events.into_iter().collect();
    let total = |es: &[&Entry]| -> u64 { es.iter().map(|e| e.count).sum() };
    events.sort_by(|a, b| total(&b.1).cmp(&total(&a.1)).then(a.0.cmp(b.0)));
    events
}

/// One section of the report: the function view and top stacks of `entries`, shares of
/// their own total.
fn section(p: &Profile, v: &View, entries: &[&Entry], out: &mut String) {
    let stacks = shown_stacks(p, entries, v.task);
    let total: u64 = entries.iter().map(|e| e.count).sum();
    let blockings: u64 = entries.iter().map(|e| e.samples).sum();
    if p.off_cpu {
        let _ = writeln!(
            out,
            "# Off-CPU time: {:.3} ms in {blockings} blockings  Stacks: {}",
            total as f64 / 1e6,
            stacks.len()
        );
    } else {
        let _ = writeln!(out, "# Samples: {total}  Stacks: {}", stacks.len());
    }
    let rows = function_rows(p, v, entries);
    let shown: Vec<_> = rows
        .iter()
        .filter(|r| pct(r.1 .0, total) >= v.percent_limit)
        .collect();
    let titles: Vec<&str> = v.sort.iter().map(|k| k.title()).collect();
    let mut widths: Vec<usize> = titles.iter().map(|t| t.len()).collect();
    for (k, _) in &shown {
        for (i, s) in k.iter().enumerate() {
            widths[i] = widths[i].max(s.chars().count()).min(60);
        }
    }
    let cols = |vals: &[&str]| -> String {
        let mut s = String::new();
        for (i, v) in vals.iter().enumerate() {
            if i + 1 == vals.len() {
                s.push_str(v);
            } else {
                let _ = write!(s, "{v:<w$}  ", w = widths[i]);
            }
        }
        s
    };
    let (value_titles, value_dots) = if p.off_cpu {
        ("   Off-CPU  Blockings", "..........  .........")
    } else {
        ("Samples", ".......")
    };
    let _ = writeln!(out, "#");
    let _ = writeln!(
        out,
        "# Children      Self  {value_titles}  {}",
        cols(&titles)
    );
    let dots: Vec<String> = widths.iter().map(|w| ".".repeat(*w)).collect();
    let dots: Vec<&str> = dots.iter().map(String::as_str).collect();
    let _ = writeln!(out, "# ........  ........  {value_dots}  {}", cols(&dots));
    for (k, (children, selfn, n)) in &shown {
        let vals: Vec<&str> = k.iter().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "{:9.2}%  {:7.2}%  {}  {}",
            pct(*children, total),
            pct(*selfn, total),
            values(p, *children, *n),
            cols(&vals)
        );
    }
    if shown.len() < rows.len() {
        let _ = writeln!(
            out,
            "# ... {} more under {}%",
            rows.len() - shown.len(),
            v.percent_limit
        );
    }
    let _ = writeln!(out, "#");
    let order = if v.caller_first {
        "outermost frame first (caller first, -G)"
    } else {
        "innermost frame first (callee first)"
    };
    let _ = writeln!(out, "# Top stacks, {order}");
    let _ = writeln!(out, "#");
    let _ = writeln!(out, "# Overhead  {value_titles}  Event / task");
    let _ = writeln!(
        out,
        "# ........  {value_dots}  .............................."
    );
    let mut printed = 0;
    for (stack, (n, samples)) in &stacks {
        if printed >= v.top || pct(*n, total) < v.percent_limit {
            break;
        }
        printed += 1;
        let labels: Vec<&Label> = stack.iter().map(|&l| &p.labels[l as usize]).collect();
        let roots: Vec<&str> = labels
            .iter()
            .take(1 + usize::from(v.task))
            .map(|l| l.name.as_str())
            .collect();
        let _ = writeln!(
            out,
            "
{:9.2}%  {}  {}",
            pct(*n, total),
            values(p, *n, *samples),
            roots.join(" / ")
        );
        let _ = writeln!(out, "            |");
        let mut frames: Vec<&Label> = labels[1 + usize::from(v.task)..].to_vec();
        if !v.caller_first {
            frames.reverse();
        }
        // A run of one frame (recursion) is shown once with its count.
        let mut i = 0;
        while i < frames.len() {
            let l = frames[i];
            let run = frames[i..].iter().take_while(|m| **m == l).count();
            let lead = if i == 0 {
                "            ---"
            } else {
                "               "
            };
            i += run;
            let mut line = label_text(l);
            if run > 1 {
                let _ = write!(line, "  (x{run})");
            }
            let _ = writeln!(out, "{lead}{line}");
        }
    }
    if stacks.len() > printed {
        let _ = writeln!(
            out,
            "
# ... {} more stacks",
            stacks.len() - printed
        );
    }
    if v.call_tree.is_none() && v.focus.is_none() {
        return;
    }
    // The trees: each stack's labels after the event.
    let paths: Vec<super::tree::Path> = stacks
        .iter()
        .map(|(s, (n, samples))| (s[1..].to_vec(), *n, *samples))
        .collect();
    if let Some(caller_first) = v.call_tree {
        super::tree::call_tree(p, &paths, caller_first, total, v.percent_limit, out);
    }
    if let Some(f) = &v.focus {
        super::tree::focus(p, &paths, f, total, v.percent_limit, out);
    }
}

/// A row of the function view: its keys (`--sort`) and its (children, self, children's
/// samples).
pub(super) type Row = (Vec<String>, (u64, u64, u64));

/// The function view of `entries`: a key per label of each stack, counted once per stack
/// (children), and for its innermost frame (self); the most children first.
pub(super) fn function_rows(p: &Profile, v: &View, entries: &[&Entry]) -> Vec<Row> {
    // A row's key: the label's part (function, file), interned once per label, and the
    // task's part (pid and the task's label, `comm-pid`, for comm and pid: a task renamed
    // in the trace has a row per name).
    let by_task = v
        .sort
        .iter()
        .any(|k| matches!(k, SortKey::Comm | SortKey::Pid));
    let mut part_ids: HashMap<(String, String), u32> = HashMap::new();
    let mut parts: Vec<(String, String)> = Vec::new();
    let label_part: Vec<u32> = p
        .labels
        .iter()
        .map(|l| {
            let f = if v.sort.contains(&SortKey::Function) {
                if l.inlined {
                    format!("{} (inlined)", l.name)
                } else {
                    l.name.clone()
                }
            } else {
                String::new()
            };
            let m = if v.sort.contains(&SortKey::File) {
                l.module
                    .as_deref()
                    .map(|m| m.rsplit('/').next().unwrap_or(m).to_string())
                    .unwrap_or_else(|| "[unknown]".into())
            } else {
                String::new()
            };
            let k = (f, m);
            *part_ids.entry(k.clone()).or_insert_with(|| {
                parts.push(k);
                parts.len() as u32 - 1
            })
        })
        .collect();
    // (children, self, children's samples) of each key.
    let mut counts: HashMap<(u32, i32, u32), (u64, u64, u64)> = HashMap::new();
    let mut keys: Vec<(u32, i32, u32)> = Vec::new();
    for e in entries {
        let (pid, task) = if by_task { (e.pid, e.task) } else { (0, 0) };
        keys.clear();
        // Markers ([truncated: REASON], [no stack]) are not functions: the summary
        // counts them.
        keys.extend(
            e.frames
                .iter()
                .filter(|&&l| !p.labels[l as usize].synthetic)
                .map(|&l| (label_part[l as usize], pid, task)),
        );
        let inner = keys.last().copied();
        keys.sort_unstable();
        keys.dedup();
        for k in &keys {
            let c = counts.entry(*k).or_default();
            c.0 += e.count;
            c.2 += e.samples;
        }
        if let Some(k) = inner {
            counts.entry(k).or_default().1 += e.count;
        }
    }
    let rows: Vec<(Vec<String>, (u64, u64, u64))> = counts
        .into_iter()
        .map(|((part, pid, task), c)| {
            let (f, m) = &parts[part as usize];
            let k = v
                .sort
                .iter()
                .map(|k| match k {
                    SortKey::Function => f.clone(),
                    SortKey::File => m.clone(),
                    // The task's label is `comm-pid`, escaped.
                    SortKey::Comm => p.labels[task as usize]
                        .name
                        .rsplit_once('-')
                        .map_or("?", |(c, _)| c)
                        .to_string(),
                    SortKey::Pid => pid.to_string(),
                })
                .collect();
            (k, c)
        })
        .collect();
    // Rows shown alike are one (two processes of one command, with --sort comm): their
    // samples are apart, so the counts add up.
    let mut merged: HashMap<Vec<String>, (u64, u64, u64)> = HashMap::new();
    for (k, (c, s, n)) in rows {
        let m = merged.entry(k).or_default();
        m.0 += c;
        m.1 += s;
        m.2 += n;
    }
    let mut rows: Vec<(Vec<String>, (u64, u64, u64))> = merged.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    rows
}

/// A frame as the report's stacks show it: `name`, ` (inlined)`, its file's basename
/// (`  [libc.so.6]`, `  [kernel.kallsyms]`), `  file:line` with `--lines`.
pub(super) fn label_text(l: &Label) -> String {
    let mut line = l.name.clone();
    if l.inlined {
        line.push_str(" (inlined)");
    }
    if let Some(m) = &l.module {
        // A kernel frame's module is bracketed already: [kernel.kallsyms].
        let m = m.rsplit('/').next().unwrap_or(m);
        if m.starts_with('[') {
            let _ = write!(line, "  {m}");
        } else {
            let _ = write!(line, "  [{m}]");
        }
    }
    if let (Some(f), Some(n)) = (&l.source, l.line) {
        let _ = write!(line, "  {f}:{n}");
    }
    line
}

/// What the report shows of a label: two files of one basename print alike.
fn shown(l: &Label) -> Label {
    Label {
        module: l
            .module
            .as_deref()
            .map(|m| m.rsplit('/').next().unwrap_or(m).to_string()),
        ..l.clone()
    }
}

/// The label stacks of `entries` (the event, the task with `task`, the frames outermost
/// first) counted by what the report shows of them (a label per distinct shown label),
/// with their samples, most frequent first, ties in label order.
pub(super) fn shown_stacks(
    p: &Profile,
    entries: &[&Entry],
    task: bool,
) -> Vec<(Vec<u32>, (u64, u64))> {
    let mut ids: HashMap<Label, u32> = HashMap::new();
    let to_shown: Vec<u32> = p
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| *ids.entry(shown(l)).or_insert(i as u32))
        .collect();
    let mut m: HashMap<Vec<u32>, (u64, u64)> = HashMap::new();
    for e in entries {
        let mut s = Vec::with_capacity(e.frames.len() + 2);
        s.push(to_shown[e.event as usize]);
        if task {
            s.push(to_shown[e.task as usize]);
        }
        s.extend(e.frames.iter().map(|&l| to_shown[l as usize]));
        let c = m.entry(s).or_default();
        c.0 += e.count;
        c.1 += e.samples;
    }
    let mut v: Vec<(Vec<u32>, (u64, u64))> = m.into_iter().collect();
    v.sort_unstable_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    v
}
