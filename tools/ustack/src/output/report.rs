// SPDX-License-Identifier: GPL-2.0

//! The text report, in the style of `perf report --stdio --children`.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{pct, SortKey, View};
use crate::stacks::{Label, Profile};

/// The report: functions with their self and children samples (`--sort` keys), then the
/// top stacks, innermost frame first (callee first, as `perf report --stdio`'s default
/// call graph) or outermost first with `caller_first` (`perf report -G`).
pub fn report(p: &Profile, v: &View) -> String {
    let stacks = shown_stacks(p, v.task);
    let mut out = String::new();
    if p.off_cpu {
        // --off-cpu: the counts are nanoseconds off the CPU.
        let _ = writeln!(
            out,
            "# Off-CPU time: {:.3} ms (counts in ns)  Stacks: {}",
            p.samples as f64 / 1e6,
            stacks.len()
        );
    } else {
        let _ = writeln!(out, "# Samples: {}  Stacks: {}", p.samples, stacks.len());
    }
    // The function view: a key per label of each stack, counted once per stack
    // (children), and for its innermost frame (self).
    // A row's key: the label's part (function, file), interned once per label, and the
    // task's part (pid, for comm and pid).
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
    let mut counts: HashMap<(u32, i32), (u64, u64)> = HashMap::new();
    let mut keys: Vec<(u32, i32)> = Vec::new();
    for e in &p.entries {
        let pid = if by_task { e.pid } else { 0 };
        keys.clear();
        // Markers ([truncated: REASON], [no stack]) are not functions: the summary
        // counts them.
        keys.extend(
            e.frames
                .iter()
                .filter(|&&l| !p.labels[l as usize].synthetic)
                .map(|&l| (label_part[l as usize], pid)),
        );
        let inner = keys.last().copied();
        keys.sort_unstable();
        keys.dedup();
        for k in &keys {
            counts.entry(*k).or_default().0 += e.count;
        }
        if let Some(k) = inner {
            counts.entry(k).or_default().1 += e.count;
        }
    }
    let rows: Vec<(Vec<String>, (u64, u64))> = counts
        .into_iter()
        .map(|((part, pid), c)| {
            let (f, m) = &parts[part as usize];
            let k = v
                .sort
                .iter()
                .map(|k| match k {
                    SortKey::Function => f.clone(),
                    SortKey::File => m.clone(),
                    SortKey::Comm => p
                        .comms
                        .get(&pid)
                        .map(|c| crate::stacks::escape(c))
                        .unwrap_or_else(|| "?".into()),
                    SortKey::Pid => pid.to_string(),
                })
                .collect();
            (k, c)
        })
        .collect();
    // Rows shown alike are one (two processes of one command, with --sort comm): their
    // samples are apart, so the counts add up.
    let mut merged: HashMap<Vec<String>, (u64, u64)> = HashMap::new();
    for (k, (c, s)) in rows {
        let m = merged.entry(k).or_default();
        m.0 += c;
        m.1 += s;
    }
    let mut rows: Vec<(Vec<String>, (u64, u64))> = merged.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let shown: Vec<_> = rows
        .iter()
        .filter(|r| pct(r.1 .0, p.samples) >= v.percent_limit)
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
    let _ = writeln!(out, "#");
    let _ = writeln!(out, "# Children      Self  Samples  {}", cols(&titles));
    let dots: Vec<String> = widths.iter().map(|w| ".".repeat(*w)).collect();
    let dots: Vec<&str> = dots.iter().map(String::as_str).collect();
    let _ = writeln!(out, "# ........  ........  .......  {}", cols(&dots));
    for (k, (children, selfn)) in &shown {
        let vals: Vec<&str> = k.iter().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "{:9.2}%  {:7.2}%  {children:7}  {}",
            pct(*children, p.samples),
            pct(*selfn, p.samples),
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
    let _ = writeln!(out, "# Overhead  Samples  Event / task");
    let _ = writeln!(out, "# ........  .......  ..............................");
    let mut printed = 0;
    for (stack, n) in &stacks {
        if printed >= v.top || pct(*n, p.samples) < v.percent_limit {
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
{:9.2}%  {n:7}  {}",
            pct(*n, p.samples),
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
    out
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

/// The profile's label stacks counted by what the report shows of them (a label per
/// distinct shown label), most frequent first, ties in label order.
fn shown_stacks(p: &Profile, task: bool) -> Vec<(Vec<u32>, u64)> {
    let mut ids: HashMap<Label, u32> = HashMap::new();
    let to_shown: Vec<u32> = p
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| *ids.entry(shown(l)).or_insert(i as u32))
        .collect();
    let mut m: HashMap<Vec<u32>, u64> = HashMap::new();
    for (mut s, n) in p.label_stacks(task) {
        for l in s.iter_mut() {
            *l = to_shown[*l as usize];
        }
        *m.entry(s).or_default() += n;
    }
    let mut v: Vec<(Vec<u32>, u64)> = m.into_iter().collect();
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}
