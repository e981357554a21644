// SPDX-License-Identifier: GPL-2.0

//! The report's call trees: the stacks of a section merged into one tree, outermost frame
//! first (`perf report -g caller`) or innermost first (`-g callee`), each branch with its
//! value and its share of the section; and the callers and callees of one function
//! (`--focus`).

use std::collections::HashMap;
use std::fmt::Write as _;

use super::pct;
use crate::stacks::Profile;

/// A stack of a section: its labels after the event (the task with `--task`, the state,
/// the frames outermost first), its value and its samples.
pub(super) type Path = (Vec<u32>, u64, u64);

struct Node {
    label: u32,
    value: u64,
    samples: u64,
    children: Vec<usize>,
}

/// The paths merged: node 0 is the root, holding all of them.
fn merge<'a>(paths: impl Iterator<Item = (&'a [u32], u64, u64)>) -> Vec<Node> {
    let mut nodes = vec![Node {
        label: u32::MAX,
        value: 0,
        samples: 0,
        children: Vec::new(),
    }];
    let mut ids: HashMap<(usize, u32), usize> = HashMap::new();
    for (labels, value, samples) in paths {
        let mut at = 0;
        nodes[0].value += value;
        nodes[0].samples += samples;
        for &l in labels {
            let next = match ids.get(&(at, l)) {
                Some(&n) => n,
                None => {
                    nodes.push(Node {
                        label: l,
                        value: 0,
                        samples: 0,
                        children: Vec::new(),
                    });
                    let n = nodes.len() - 1;
                    nodes[at].children.push(n);
                    ids.insert((at, l), n);
                    n
                }
            };
            nodes[next].value += value;
            nodes[next].samples += samples;
            at = next;
        }
    }
    nodes
}

/// A node's line: its share of `total`, its value (samples, or off-CPU time and
/// blockings), its label as the report's stacks show one.
fn line(p: &Profile, label: Option<u32>, value: u64, samples: u64, total: u64) -> String {
    let mut s = format!("{:.2}%  ", pct(value, total));
    if p.off_cpu {
        let _ = write!(s, "{}  {samples} blockings", super::report::time(value));
    } else {
        let _ = write!(s, "{value}");
    }
    match label {
        Some(l) => {
            let _ = write!(s, "  {}", super::report::label_text(&p.labels[l as usize]));
        }
        None => s.push_str("  (all)"),
    }
    s
}

/// The tree of `paths` under a root line named `root` (or `(all)`), two spaces of
/// indent a level, the largest branch first; branches under `limit` % of `total` left out.
fn write_tree(
    p: &Profile,
    paths: &[(&[u32], u64, u64)],
    root: Option<u32>,
    total: u64,
    limit: f64,
    out: &mut String,
) {
    let nodes = merge(paths.iter().copied());
    let order = |v: &[usize]| -> Vec<usize> {
        let mut v = v.to_vec();
        v.sort_by(|&a, &b| {
            nodes[b].value.cmp(&nodes[a].value).then_with(|| {
                p.labels[nodes[a].label as usize]
                    .name
                    .cmp(&p.labels[nodes[b].label as usize].name)
            })
        });
        v
    };
    let _ = writeln!(
        out,
        "{}",
        line(p, root, nodes[0].value, nodes[0].samples, total)
    );
    // Depth first without recursion: stacks may be thousands of frames deep.
    let mut todo: Vec<(usize, usize)> = order(&nodes[0].children)
        .into_iter()
        .rev()
        .map(|n| (n, 1))
        .collect();
    let mut left_out = 0;
    while let Some((n, depth)) = todo.pop() {
        let node = &nodes[n];
        if pct(node.value, total) < limit {
            left_out += 1;
            continue;
        }
        let _ = writeln!(
            out,
            "{}{}",
            "  ".repeat(depth),
            line(p, Some(node.label), node.value, node.samples, total)
        );
        todo.extend(
            order(&node.children)
                .into_iter()
                .rev()
                .map(|c| (c, depth + 1)),
        );
    }
    if left_out > 0 {
        let _ = writeln!(out, "# ... {left_out} branches under {limit}%");
    }
}

/// The section's stacks merged into one tree: outermost frame first (`caller_first`,
/// `perf report -g caller`), or innermost first, each branch going to its callers
/// (`-g callee`).
pub(super) fn call_tree(
    p: &Profile,
    paths: &[Path],
    caller_first: bool,
    total: u64,
    limit: f64,
    out: &mut String,
) {
    let reversed: Vec<Vec<u32>> = paths
        .iter()
        .map(|(l, _, _)| {
            let mut l = l.clone();
            if !caller_first {
                l.reverse();
            }
            l
        })
        .collect();
    let merged: Vec<(&[u32], u64, u64)> = reversed
        .iter()
        .zip(paths)
        .map(|(l, (_, v, n))| (l.as_slice(), *v, *n))
        .collect();
    let (order, flag) = if caller_first {
        ("outermost frame first", "caller")
    } else {
        (
            "innermost frame first, each branch to its callers",
            "callee",
        )
    };
    let _ = writeln!(out, "#");
    let _ = writeln!(
        out,
        "# Call tree, {order} (-g {flag}): each branch's value and share of the event"
    );
    let _ = writeln!(out, "#");
    write_tree(p, &merged, None, total, limit, out);
}

/// The callers and the callees of function `name` (a label's name, as the report prints
/// it): of each stack that holds it, the frames outside its outermost call (its callers,
/// the nearest first) and those inside (its callees), each as a tree rooted at it.
pub(super) fn focus(
    p: &Profile,
    paths: &[Path],
    name: &str,
    total: u64,
    limit: f64,
    out: &mut String,
) {
    let _ = writeln!(out, "#");
    let mut callers: Vec<Vec<u32>> = Vec::new();
    let mut callees: Vec<(&[u32], u64, u64)> = Vec::new();
    let mut values: Vec<(u64, u64)> = Vec::new();
    let (mut value, mut samples, mut self_value) = (0, 0, 0);
    let mut root = None;
    for (labels, v, n) in paths {
        let Some(i) = labels.iter().position(|&l| {
            let l = &p.labels[l as usize];
            !l.synthetic && l.name == name
        }) else {
            continue;
        };
        root.get_or_insert(labels[i]);
        value += v;
        samples += n;
        // The innermost real frame is the function itself: its own value.
        if labels[i + 1..]
            .iter()
            .all(|&l| p.labels[l as usize].synthetic)
        {
            self_value += v;
        }
        callers.push(labels[..i].iter().rev().copied().collect());
        callees.push((&labels[i + 1..], *v, *n));
        values.push((*v, *n));
    }
    let Some(root) = root else {
        let _ = writeln!(out, "# Focus on {name}: not in this event's stacks");
        return;
    };
    let _ = writeln!(
        out,
        "# Focus on {name}: {:.2}% of the event with its callees ({}), {:.2}% itself ({})",
        pct(value, total),
        value_text(p, value),
        pct(self_value, total),
        value_text(p, self_value)
    );
    let _ = writeln!(out, "#");
    let _ = writeln!(out, "# Callers of {name}, the nearest first:");
    let callers: Vec<(&[u32], u64, u64)> = callers
        .iter()
        .zip(&values)
        .map(|(l, (v, n))| (l.as_slice(), *v, *n))
        .collect();
    write_tree(p, &callers, Some(root), total, limit, out);
    let _ = writeln!(out, "#");
    let _ = writeln!(out, "# Callees of {name}:");
    write_tree(p, &callees, Some(root), total, limit, out);
}

fn value_text(p: &Profile, v: u64) -> String {
    if p.off_cpu {
        super::report::time(v)
    } else {
        format!("{v} samples")
    }
}
