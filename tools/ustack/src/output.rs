// SPDX-License-Identifier: GPL-2.0

//! The outputs: folded stacks, a text report in the style of `perf report --stdio`, an SVG
//! flame graph, speedscope JSON and pprof's gzipped `profile.proto`. Each is written from
//! the stacks counted by what it shows ([`Profile`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;

use crate::stacks::{Label, Profile};

/// A key of the report's function view (`--sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Function,
    File,
    Comm,
    Pid,
}

impl SortKey {
    pub fn parse(s: &str) -> Option<SortKey> {
        Some(match s {
            "function" | "sym" | "symbol" => SortKey::Function,
            "file" | "dso" => SortKey::File,
            "comm" => SortKey::Comm,
            "pid" => SortKey::Pid,
            _ => return None,
        })
    }
    fn title(self) -> &'static str {
        match self {
            SortKey::Function => "Function",
            SortKey::File => "File",
            SortKey::Comm => "Command",
            SortKey::Pid => "Pid",
        }
    }
}

/// How the outputs are shown.
#[derive(Debug, Clone)]
pub struct View {
    /// A `comm-pid` level under the event.
    pub task: bool,
    /// Stacks in the report.
    pub top: usize,
    /// Report entries under this share of the samples are left out.
    pub percent_limit: f64,
    pub sort: Vec<SortKey>,
    /// The report's stacks outermost frame first (`-G`), else innermost first.
    pub caller_first: bool,
}

impl Default for View {
    fn default() -> Self {
        View {
            task: false,
            top: 10,
            percent_limit: 0.0,
            sort: vec![SortKey::Function, SortKey::File],
            caller_first: false,
        }
    }
}

/// `a;b;c N` lines, the input of the flame graph tools: one line per stack as shown.
pub fn write_folded(p: &Profile, task: bool, w: &mut dyn Write) -> std::io::Result<()> {
    for (stack, n) in p.text_stacks(task).iter() {
        for (i, t) in stack.iter().enumerate() {
            if i > 0 {
                w.write_all(b";")?;
            }
            w.write_all(p.texts[*t as usize].as_bytes())?;
        }
        writeln!(w, " {n}")?;
    }
    Ok(())
}

/// [`write_folded`] to a string.
pub fn folded(p: &Profile, task: bool) -> String {
    let mut v = Vec::new();
    let _ = write_folded(p, task, &mut v);
    String::from_utf8(v).unwrap_or_default()
}

fn pct(n: u64, total: u64) -> f64 {
    100.0 * n as f64 / total.max(1) as f64
}

/// The report: functions with their self and children samples (`--sort` keys), then the
/// top stacks, innermost frame first (callee first, as `perf report --stdio`'s default
/// call graph) or outermost first with `caller_first` (`perf report -G`).
pub fn report(p: &Profile, v: &View) -> String {
    let stacks = p.label_stacks(v.task);
    let mut out = String::new();
    let _ = writeln!(out, "# Samples: {}  Stacks: {}", p.samples, stacks.len());
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
        keys.extend(e.frames.iter().map(|&l| (label_part[l as usize], pid)));
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
                let _ = write!(line, "  [{}]", m.rsplit('/').next().unwrap_or(m));
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

fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            c if (c as u32) < 0x20 => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// A stable warm colour per name (FNV-1a).
fn color(name: &str) -> String {
    let mut h: u32 = 0x811c9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x01000193);
    }
    let r = 200 + (h % 55);
    let g = 80 + ((h >> 8) % 150);
    let b = 40 + ((h >> 16) % 40);
    format!("rgb({r},{g},{b})")
}

/// The flame graph's script (zoom, search, reset), the tool's own.
const FLAME_JS: &str = include_str!("flame/flame.js");

/// A flame graph: the root at the bottom, each frame as wide as its share of the samples,
/// children sorted by name, the full name and count in a tooltip; clicking a frame zooms to
/// it, a search marks the matching frames and shows their share of the samples.
pub fn svg(p: &Profile, title: &str, task: bool) -> String {
    let stacks: Vec<(Vec<u32>, u64, u64)> = p
        .text_stacks(task)
        .iter()
        .map(|(s, n)| (s.clone(), *n, 0))
        .collect();
    flame(&p.texts, stacks, title, false)
}

/// A differential flame graph of `p` against `base`: widths from `p`, each frame coloured
/// by the change of its share of the samples, red where it grew, blue where it shrank
/// (flamegraph.pl's difffolded, as a flame graph of the second profile).
pub fn svg_diff(p: &Profile, base: &Profile, title: &str, task: bool) -> String {
    let mut texts: Vec<String> = p.texts.clone();
    let mut ids: HashMap<&str, u32> = HashMap::new();
    for (i, t) in p.texts.iter().enumerate() {
        ids.insert(t, i as u32);
    }
    let mut base_map: Vec<u32> = Vec::with_capacity(base.texts.len());
    for t in &base.texts {
        let id = match ids.get(t.as_str()) {
            Some(&i) => i,
            None => {
                texts.push(t.clone());
                texts.len() as u32 - 1
            }
        };
        base_map.push(id);
    }
    let mut m: HashMap<Vec<u32>, (u64, u64)> = HashMap::new();
    for (s, n) in p.text_stacks(task).iter() {
        m.entry(s.clone()).or_default().0 += n;
    }
    for (s, n) in base.text_stacks(task).iter() {
        let s: Vec<u32> = s.iter().map(|t| base_map[*t as usize]).collect();
        m.entry(s).or_default().1 += n;
    }
    let stacks = m.into_iter().map(|(s, (a, b))| (s, a, b)).collect();
    flame(&texts, stacks, title, true)
}

/// Draw stacks of texts with their counts (and, for a differential graph, the base's).
fn flame(texts: &[String], stacks: Vec<(Vec<u32>, u64, u64)>, title: &str, diff: bool) -> String {
    // Each text's rank in name order, to sort the stacks by name cheaply.
    let mut by_name: Vec<u32> = (0..texts.len() as u32).collect();
    by_name.sort_unstable_by(|a, b| texts[*a as usize].cmp(&texts[*b as usize]));
    let mut rank = vec![0u32; texts.len()];
    for (r, t) in by_name.iter().enumerate() {
        rank[*t as usize] = r as u32;
    }
    let mut stacks: Vec<(Vec<u32>, u64, u64)> = stacks
        .into_iter()
        .map(|(s, n, b)| (s.iter().map(|t| rank[*t as usize]).collect(), n, b))
        .collect();
    stacks.sort_unstable();
    for (s, _, _) in stacks.iter_mut() {
        for t in s.iter_mut() {
            *t = by_name[*t as usize];
        }
    }
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    let base_total: u64 = stacks.iter().map(|s| s.2).sum();
    let levels = 1 + stacks
        .iter()
        .filter(|s| s.1 > 0)
        .map(|s| s.0.len())
        .max()
        .unwrap_or(0);
    let (width, row, pad) = (1200.0f64, 16.0f64, 10.0f64);
    let top = 3.0 * pad + 24.0;
    let height = levels as f64 * row + top + 2.0 * pad;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" data-total="{total}" data-row="{row}" data-pad="{pad}">
<style>
text {{ font-family: monospace; font-size: 11px; }}
g.f {{ cursor: pointer; }}
g.f:hover rect {{ stroke: black; stroke-width: 0.5; }}
.button {{ font-size: 12px; cursor: pointer; fill: #1a5fb4; }}
</style>
<script type="text/ecmascript"><![CDATA[
{FLAME_JS}]]></script>
<rect x="0" y="0" width="100%" height="100%" fill="#f8f8f8"/>
<text id="title" x="{}" y="20" text-anchor="middle" style="font-size:15px">{}</text>
<text id="reset" class="button" x="{pad}" y="20" display="none">Reset zoom</text>
<text id="search" class="button" x="{}" y="20" text-anchor="end">Search</text>
<text id="unsearch" class="button" x="{}" y="20" text-anchor="end" display="none">Clear</text>
<text id="matched" x="{}" y="{}" text-anchor="end"> </text>
<text id="details" x="{pad}" y="{}"> </text>
<g id="frames">"##,
        width / 2.0,
        xml(title),
        width - pad,
        width - pad - 60.0,
        width - pad,
        height - pad / 2.0,
        height - pad / 2.0,
    );
    let scale = (width - 2.0 * pad) / total.max(1) as f64;
    let all = (total as f64).max(1.0);
    let ball = (base_total as f64).max(1.0);
    // The largest change of share, for the colour scale of a differential graph.
    let mut nodes: Vec<(u32, usize, u64, u64, u64)> = Vec::new();
    let mut emit = |t: u32, level: usize, start: u64, count: u64, base: u64| {
        if count as f64 * scale >= 0.1 {
            nodes.push((t, level, start, count, base));
        }
    };
    emit(u32::MAX, 0, 0, total, base_total);
    // The frames open on the current path: (text, first sample, samples, base samples).
    let mut open: Vec<(u32, u64, u64, u64)> = Vec::new();
    let mut x = 0u64;
    for (stack, n, b) in &stacks {
        let common = open
            .iter()
            .zip(stack.iter())
            .take_while(|(o, t)| o.0 == **t)
            .count();
        while open.len() > common {
            if let Some((t, start, count, base)) = open.pop() {
                emit(t, open.len() + 1, start, count, base);
            }
        }
        for &t in &stack[common..] {
            open.push((t, x, 0, 0));
        }
        for o in open.iter_mut() {
            o.2 += n;
            o.3 += b;
        }
        x += n;
    }
    while let Some((t, start, count, base)) = open.pop() {
        emit(t, open.len() + 1, start, count, base);
    }
    let delta = |count: u64, base: u64| count as f64 / all - base as f64 / ball;
    let max_delta = nodes
        .iter()
        .map(|n| delta(n.3, n.4).abs())
        .fold(0.0f64, f64::max)
        .max(1e-12);
    // Parents before children, left to right.
    nodes.sort_unstable_by_key(|n| (n.1, n.2));
    for (t, level, start, count, base) in nodes {
        let name = if t == u32::MAX {
            "all"
        } else {
            texts[t as usize].as_str()
        };
        let w = count as f64 * scale;
        let x = pad + start as f64 * scale;
        let y = height - pad - (level as f64 + 1.0) * row;
        let (fill, note) = if diff {
            let d = delta(count, base);
            let i = (d.abs() / max_delta).min(1.0);
            let c = (255.0 * (1.0 - i)).round() as u32;
            let fill = if d >= 0.0 {
                format!("rgb(255,{c},{c})")
            } else {
                format!("rgb({c},{c},255)")
            };
            (
                fill,
                format!(
                    "; base {base} samples, {:.2}%; {:+.2} points",
                    100.0 * base as f64 / ball,
                    100.0 * d
                ),
            )
        } else {
            (color(name), String::new())
        };
        let _ = write!(
            out,
            "<g class=\"f\" data-s=\"{start}\" data-n=\"{count}\" data-d=\"{level}\"><title>{}\n{count} samples, {:.2}%{note}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{fill}\" rx=\"2\"/>",
            xml(name),
            100.0 * count as f64 / all,
            row - 1.0,
        );
        let chars = ((w - 4.0) / 7.0) as usize;
        let mut label = String::new();
        if chars >= 3 {
            label = name.chars().take(chars).collect();
            if label.chars().count() < name.chars().count() {
                label = name
                    .chars()
                    .take(chars.saturating_sub(2))
                    .collect::<String>()
                    + "..";
            }
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            x + 3.0,
            y + row - 4.0,
            xml(&label)
        );
    }
    out.push_str("</g>\n</svg>\n");
    out
}

/// Speedscope's file format: shared frames and one sampled profile, stacks root first.
pub fn write_speedscope(
    p: &Profile,
    name: &str,
    task: bool,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    let js = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    // A text's file and line, from its first label.
    let mut where_: HashMap<u32, &Label> = HashMap::new();
    for (l, &t) in p.label_text.iter().enumerate() {
        where_.entry(t).or_insert(&p.labels[l]);
    }
    let stacks = p.text_stacks(task);
    // Frames in order of first use.
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut order: Vec<u32> = Vec::new();
    for (stack, _) in stacks.iter() {
        for &t in stack {
            index.entry(t).or_insert_with(|| {
                order.push(t);
                order.len() - 1
            });
        }
    }
    write!(
        w,
        "{{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"ustack\",\"name\":{},\"activeProfileIndex\":0,\"shared\":{{\"frames\":[",
        js(name)
    )?;
    for (i, t) in order.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{{\"name\":{}", js(&p.texts[*t as usize]))?;
        if let Some(l) = where_.get(t) {
            if let Some(s) = &l.source {
                write!(w, ",\"file\":{}", js(s))?;
            }
            if let Some(line) = l.line {
                write!(w, ",\"line\":{line}")?;
            }
        }
        w.write_all(b"}")?;
    }
    write!(
        w,
        "]}},\"profiles\":[{{\"type\":\"sampled\",\"name\":{},\"unit\":\"none\",\"startValue\":0,\"endValue\":{},\"samples\":[",
        js(name),
        p.samples
    )?;
    for (i, (stack, _)) in stacks.iter().enumerate() {
        w.write_all(if i > 0 { b",[" } else { b"[" })?;
        for (j, t) in stack.iter().enumerate() {
            if j > 0 {
                w.write_all(b",")?;
            }
            write!(w, "{}", index[t])?;
        }
        w.write_all(b"]")?;
    }
    w.write_all(b"],\"weights\":[")?;
    for (i, (_, n)) in stacks.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{n}")?;
    }
    w.write_all(b"]}]}")?;
    Ok(())
}

/// [`write_speedscope`] to a string.
pub fn speedscope(p: &Profile, name: &str, task: bool) -> String {
    let mut v = Vec::new();
    let _ = write_speedscope(p, name, task, &mut v);
    String::from_utf8(v).unwrap_or_default()
}

/// A protobuf message being written: fields by number, varints and byte strings.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.varint(u64::from(field) << 3);
            self.varint(v);
        }
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint((u64::from(field) << 3) | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn packed(&mut self, field: u32, vs: &[u64]) {
        let mut p = Pb::default();
        for &v in vs {
            p.varint(v);
        }
        self.bytes(field, &p.0);
    }
}

/// pprof's `profile.proto`, gzipped. Each file is a Mapping with its build-id, mapped at
/// address 0 with file offset 0, so that a Location's address is the frame's offset in the
/// file: the trace's own data, one to one. A symbolized frame's functions (inlined ones
/// first) are its Lines; a frame nothing named has none, and its mapping says
/// `has_functions` only if some of its frames were named, so that pprof can symbolize the
/// rest itself. The event, the command and the pid are sample labels, and `truncated`
/// the reason the unwinder stopped short, where it did. Times are the
/// trace's: `time_nanos` the first sample's, `duration_nanos` the span, and each sample's
/// Breakdown the time of every event it counts (ticks in nanoseconds after `time_nanos`),
/// when the profile kept them.
pub fn pprof(p: &Profile) -> Vec<u8> {
    let mut strings: Vec<String> = vec![String::new()];
    let mut sidx: HashMap<String, u64> = HashMap::new();
    let mut s = |v: &str| -> u64 {
        if v.is_empty() {
            return 0;
        }
        if let Some(&i) = sidx.get(v) {
            return i;
        }
        strings.push(v.to_string());
        sidx.insert(v.to_string(), strings.len() as u64 - 1);
        strings.len() as u64 - 1
    };
    let mut msg = Pb::default();
    // sample_type: samples/count.
    let (k_samples, k_count) = (s("samples"), s("count"));
    let mut vt = Pb::default();
    vt.uint(1, k_samples);
    vt.uint(2, k_count);
    msg.bytes(1, &vt.0);
    let k_ns = if p.times { s("nanoseconds") } else { 0 };

    // Mappings: (path, build-id) -> id, and whether any of its frames has functions.
    let mut mappings: HashMap<(String, Option<String>), (u64, bool)> = HashMap::new();
    let mut mapping_order: Vec<(String, Option<String>)> = Vec::new();
    let mut functions: HashMap<(String, Option<String>), u64> = HashMap::new();
    let mut function_msgs = Vec::new();
    let mut location_msgs = Vec::new();
    let mut loc_of: HashMap<u32, u64> = HashMap::new();
    let mut sample_msgs = Vec::new();
    let (k_event, k_comm, k_pid) = (s("event"), s("comm"), s("pid"));
    let k_truncated = s("truncated");

    for e in &p.raw {
        let mut loc_ids = Vec::with_capacity(e.frames.len());
        for &pf in &e.frames {
            let next = loc_of.len() as u64 + 1;
            let id = *loc_of.entry(pf).or_insert_with(|| {
                let f = &p.frames[pf as usize];
                let mut loc = Pb::default();
                loc.uint(1, next);
                if let Some(m) = &f.module {
                    let key = (m.clone(), f.build_id.clone());
                    let n = mappings.len() as u64 + 1;
                    let entry = mappings.entry(key.clone()).or_insert_with(|| {
                        mapping_order.push(key);
                        (n, false)
                    });
                    entry.1 |= f.syms.is_some();
                    loc.uint(2, entry.0);
                }
                if let Some(off) = f.offset {
                    loc.uint(3, off);
                }
                let mut lines: Vec<(String, Option<String>, u32)> = Vec::new();
                match &f.syms {
                    Some(syms) => {
                        for sy in syms.iter() {
                            lines.push((
                                crate::stacks::escape(&sy.name),
                                sy.file.clone(),
                                sy.line.unwrap_or(0),
                            ));
                        }
                    }
                    // A frame no file can be found for is named as the other outputs name
                    // it; one in a file of a mapping is left for pprof to symbolize.
                    None if f.module.is_none() => lines.push((f.fallback.clone(), None, 0)),
                    None => {}
                }
                for (name, src, line) in lines {
                    let key = (name.clone(), src.clone());
                    let fnext = functions.len() as u64 + 1;
                    let fid = *functions.entry(key).or_insert_with(|| {
                        let mut fm = Pb::default();
                        fm.uint(1, fnext);
                        fm.uint(2, s(&name));
                        fm.uint(3, s(&name));
                        if let Some(src) = &src {
                            fm.uint(4, s(src));
                        }
                        function_msgs.push(fm.0);
                        fnext
                    });
                    let mut lm = Pb::default();
                    lm.uint(1, fid);
                    lm.uint(2, u64::from(line));
                    loc.bytes(4, &lm.0);
                }
                location_msgs.push(loc.0);
                next
            });
            loc_ids.push(id);
        }
        let mut sm = Pb::default();
        sm.packed(1, &loc_ids);
        sm.packed(2, &[e.count]);
        if p.times {
            // Breakdown: the time of each sample, in tick_unit after time_nanos.
            let ticks: Vec<u64> = e.times.iter().map(|t| t - p.first_ts).collect();
            let mut bd = Pb::default();
            bd.packed(1, &ticks);
            sm.bytes(4, &bd.0);
        }
        let task = &p.labels[e.task as usize].name;
        let (comm, pid) = task.rsplit_once('-').unwrap_or((task.as_str(), "0"));
        for (k, v, num) in [
            (k_event, s(&p.labels[e.event as usize].name), None),
            (k_comm, s(comm), None),
            (k_pid, 0, pid.parse::<i64>().ok()),
        ] {
            let mut lm = Pb::default();
            lm.uint(1, k);
            lm.uint(2, v);
            if let Some(n) = num {
                lm.uint(3, n as u64);
            }
            sm.bytes(3, &lm.0);
        }
        if let Some(r) = &e.truncated {
            let mut lm = Pb::default();
            lm.uint(1, k_truncated);
            lm.uint(2, s(r));
            sm.bytes(3, &lm.0);
        }
        sample_msgs.push(sm.0);
    }
    let mut mapping_msgs = Vec::new();
    for key in &mapping_order {
        let (id, has_functions) = mappings[key];
        let mut mp = Pb::default();
        mp.uint(1, id);
        mp.uint(3, u64::MAX >> 1);
        mp.uint(5, s(&key.0));
        if let Some(b) = &key.1 {
            mp.uint(6, s(b));
        }
        mp.uint(7, u64::from(has_functions));
        mapping_msgs.push(mp.0);
    }
    for m in &sample_msgs {
        msg.bytes(2, m);
    }
    for m in &mapping_msgs {
        msg.bytes(3, m);
    }
    for m in &location_msgs {
        msg.bytes(4, m);
    }
    for m in &function_msgs {
        msg.bytes(5, m);
    }
    for st in &strings {
        msg.bytes(6, st.as_bytes());
    }
    // The trace's own time: its clock's nanoseconds (the global clock's count from
    // boot), as perf script and trace-cmd report print it.
    msg.uint(9, p.first_ts);
    msg.uint(10, p.last_ts.saturating_sub(p.first_ts));
    // period_type and period: every sample is one event.
    msg.bytes(11, &vt.0);
    msg.uint(12, 1);
    msg.uint(15, k_ns);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&msg.0);
    gz.finish().unwrap_or_default()
}

/// One sample as `perf script` prints one (the text hotspot, the Firefox Profiler's
/// importer and stackcollapse-perf.pl read): `comm tid [cpu] secs.usecs: 1 event:`, then a
/// line per frame, innermost first, `\tADDRESS FUNCTION (FILE)` (an inlined function on
/// its own line at its caller's address; `[unknown]` where nothing names it), then an
/// empty line. The address is the frame's offset in its file, or its address in
/// anonymous memory.
pub fn perf_script_sample(
    s: &crate::join::Sample,
    sym: &mut crate::symbolize::Symbolizer,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    use crate::join::Frame;
    use crate::stacks::escape;
    let comm = escape(s.comm.as_deref().unwrap_or("?"));
    writeln!(
        w,
        "{comm} {} [{:03}] {}.{:06}: 1 {}:",
        s.pid,
        s.cpu,
        s.ts / 1_000_000_000,
        s.ts % 1_000_000_000 / 1000,
        escape(&s.event)
    )?;
    for (depth, f) in s.frames.iter().enumerate() {
        let (addr, module) = match f {
            Frame::File { file, offset } | Frame::Special { file, offset } => {
                (*offset, escape(&file.path))
            }
            Frame::Anon { addr, name } => (
                *addr,
                match name {
                    Some(n) => escape(&n.path),
                    None => format!("/tmp/perf-{}.map", s.pid),
                },
            ),
            Frame::Unresolved { value, .. } | Frame::BadIndex { value } => {
                (*value, "[unknown]".to_string())
            }
        };
        match sym.resolve(s.pid, f, depth) {
            Some(syms) => {
                for sy in syms.iter() {
                    writeln!(w, "\t{addr:16x} {} ({module})", escape(&sy.name))?;
                }
            }
            None => writeln!(w, "\t{addr:16x} [unknown] ({module})")?,
        }
    }
    writeln!(w)
}
