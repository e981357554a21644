// SPDX-License-Identifier: GPL-2.0

//! The outputs: folded stacks, a text report in the style of `perf report --stdio`, an SVG
//! flame graph, speedscope JSON and pprof's gzipped `profile.proto`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write;

use crate::stacks::{Label, Profile};

/// `a;b;c N` lines, the input of the flame graph tools.
pub fn folded(p: &Profile, lines: bool) -> String {
    let mut out = String::new();
    for (stack, n) in &p.stacks {
        let labels: Vec<String> = stack.iter().map(|l| l.text(lines)).collect();
        let _ = writeln!(out, "{} {n}", labels.join(";"));
    }
    out
}

/// The top stacks, most frequent first, with counts and percentages, each listed from its
/// innermost frame out as `perf report --stdio -G` would.
pub fn report(p: &Profile, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Samples: {}  Stacks: {}", p.samples, p.stacks.len());
    let _ = writeln!(out, "#");
    let _ = writeln!(out, "# Overhead  Samples  Event / task");
    let _ = writeln!(out, "# ........  .......  ..............................");
    for (stack, n) in p.stacks.iter().take(top) {
        let pct = 100.0 * *n as f64 / p.samples.max(1) as f64;
        let roots: Vec<&str> = stack
            .iter()
            .take_while(|l| l.synthetic)
            .map(|l| l.name.as_str())
            .collect();
        let _ = writeln!(out, "\n{pct:9.2}%  {n:7}  {}", roots.join(" / "));
        let _ = writeln!(out, "            |");
        // Innermost first; a run of one frame (recursion) is shown once with its count.
        let frames: Vec<&Label> = stack
            .iter()
            .rev()
            .filter(|l| !l.synthetic || l.name.starts_with('['))
            .collect();
        let mut i = 0;
        while i < frames.len() {
            let l = frames[i];
            let run = frames[i..].iter().take_while(|m| same_line(m, l)).count();
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
    if p.stacks.len() > top {
        let _ = writeln!(out, "\n# ... {} more stacks", p.stacks.len() - top);
    }
    out
}

/// Two frames the report shows alike (offsets may differ).
fn same_line(a: &Label, b: &Label) -> bool {
    (&a.name, &a.module, &a.source, a.line, a.inlined)
        == (&b.name, &b.module, &b.source, b.line, b.inlined)
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

#[derive(Default)]
struct Node {
    count: u64,
    children: BTreeMap<String, Node>,
}

/// A flame graph: the root at the bottom, each frame as wide as its share of the samples,
/// children sorted by name (as flamegraph.pl does), the full name and count in a tooltip.
pub fn svg(p: &Profile, title: &str, lines: bool) -> String {
    let mut root = Node::default();
    for (stack, n) in &p.stacks {
        root.count += n;
        let mut node = &mut root;
        for l in stack {
            node = node.children.entry(l.text(lines)).or_default();
            node.count += n;
        }
    }
    fn depth(n: &Node) -> usize {
        1 + n.children.values().map(depth).max().unwrap_or(0)
    }
    let (width, row, pad) = (1200.0f64, 16.0f64, 10.0f64);
    let levels = depth(&root);
    let height = levels as f64 * row + 3.0 * pad + 20.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">
<style>text {{ font-family: monospace; font-size: 11px; }} rect:hover {{ stroke: black; }}</style>
<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f8"/>
<text x="{}" y="20" text-anchor="middle" style="font-size:15px">{}</text>"##,
        width / 2.0,
        xml(title)
    );
    let total = root.count.max(1) as f64;
    let scale = (width - 2.0 * pad) / total;
    fn color(name: &str) -> String {
        // A stable warm colour per name (FNV-1a).
        let mut h: u32 = 0x811c9dc5;
        for b in name.bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x01000193);
        }
        let r = 200 + (h % 55);
        let g = 80 + ((h >> 8) % 150);
        let b = 40 + ((h >> 16) % 40);
        format!("rgb({r},{g},{b})")
    }
    #[allow(clippy::too_many_arguments)]
    fn draw(
        out: &mut String,
        name: &str,
        n: &Node,
        x: f64,
        level: usize,
        ctx: (f64, f64, f64, f64, f64),
    ) {
        let (scale, row, pad, height, total) = ctx;
        let w = n.count as f64 * scale;
        let y = height - pad - (level as f64 + 1.0) * row;
        if w >= 0.1 {
            let pct = 100.0 * n.count as f64 / total;
            let _ = writeln!(
                out,
                r#"<g><title>{} ({} samples, {pct:.2}%)</title><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}" rx="2"/>"#,
                xml(name),
                n.count,
                row - 1.0,
                color(name)
            );
            let chars = ((w - 4.0) / 7.0) as usize;
            if chars >= 3 {
                let mut t: String = name.chars().take(chars).collect();
                if t.chars().count() < name.chars().count() {
                    t = name
                        .chars()
                        .take(chars.saturating_sub(2))
                        .collect::<String>()
                        + "..";
                }
                let _ = writeln!(
                    out,
                    r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                    x + 3.0,
                    y + row - 4.0,
                    xml(&t)
                );
            }
            let _ = writeln!(out, "</g>");
        }
        let mut cx = x;
        for (cname, c) in &n.children {
            draw(out, cname, c, cx, level + 1, ctx);
            cx += c.count as f64 * scale;
        }
    }
    let ctx = (scale, row, pad, height, total);
    draw(&mut out, "all", &root, pad, 0, ctx);
    out.push_str("</svg>\n");
    out
}

/// Speedscope's file format: shared frames, one sampled profile, stacks root first.
pub fn speedscope(p: &Profile, name: &str) -> String {
    let mut frames: Vec<serde_json::Value> = Vec::new();
    let mut index: HashMap<&Label, usize> = HashMap::new();
    let mut samples = Vec::new();
    let mut weights = Vec::new();
    for (stack, n) in &p.stacks {
        let ids: Vec<usize> = stack
            .iter()
            .map(|l| {
                *index.entry(l).or_insert_with(|| {
                    let mut f = serde_json::json!({ "name": l.text(false) });
                    if let Some(s) = &l.source {
                        f["file"] = s.clone().into();
                    }
                    if let Some(line) = l.line {
                        f["line"] = line.into();
                    }
                    frames.push(f);
                    frames.len() - 1
                })
            })
            .collect();
        samples.push(ids);
        weights.push(*n);
    }
    let doc = serde_json::json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": "ustack",
        "name": name,
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": [{
            "type": "sampled",
            "name": name,
            "unit": "none",
            "startValue": 0,
            "endValue": p.samples,
            "samples": samples,
            "weights": weights,
        }],
    });
    doc.to_string()
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
/// file: the trace's own data, one to one.
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
    let mut vt = Pb::default();
    vt.uint(1, s("samples"));
    vt.uint(2, s("count"));
    msg.bytes(1, &vt.0);

    let mut mappings: HashMap<(String, Option<String>), u64> = HashMap::new();
    let mut functions: HashMap<(String, Option<String>), u64> = HashMap::new();
    let mut locations: HashMap<Vec<Label>, u64> = HashMap::new();
    let mut mapping_msgs = Vec::new();
    let mut function_msgs = Vec::new();
    let mut location_msgs = Vec::new();
    let mut sample_msgs = Vec::new();

    for (stack, n) in &p.stacks {
        // A location is one frame: its functions (inlined ones first) at one offset.
        let mut loc_ids = Vec::new();
        let mut group: Vec<Label> = Vec::new();
        let leaf_first: Vec<&Label> = stack.iter().rev().collect();
        let mut i = 0;
        while i < leaf_first.len() {
            group.clear();
            while i < leaf_first.len() {
                group.push(leaf_first[i].clone());
                i += 1;
                if !group.last().is_some_and(|l| l.inlined) {
                    break;
                }
            }
            let next = locations.len() as u64 + 1;
            let id = *locations.entry(group.clone()).or_insert_with(|| {
                let outer = group.last().cloned().unwrap_or_else(|| group[0].clone());
                let mapping = outer.module.as_ref().map(|m| {
                    let key = (m.clone(), outer.build_id.clone());
                    let next = mappings.len() as u64 + 1;
                    *mappings.entry(key).or_insert_with(|| {
                        let mut mp = Pb::default();
                        mp.uint(1, next);
                        mp.uint(3, u64::MAX >> 1);
                        mp.uint(5, s(m));
                        if let Some(b) = &outer.build_id {
                            mp.uint(6, s(b));
                        }
                        mp.uint(7, 1);
                        mapping_msgs.push(mp.0);
                        next
                    })
                });
                let mut loc = Pb::default();
                loc.uint(1, next);
                if let Some(m) = mapping {
                    loc.uint(2, m);
                }
                if let Some(off) = outer.offset {
                    loc.uint(3, off);
                }
                for l in &group {
                    let key = (l.name.clone(), l.source.clone());
                    let fnext = functions.len() as u64 + 1;
                    let fid = *functions.entry(key).or_insert_with(|| {
                        let mut f = Pb::default();
                        f.uint(1, fnext);
                        f.uint(2, s(&l.name));
                        f.uint(3, s(&l.name));
                        if let Some(src) = &l.source {
                            f.uint(4, s(src));
                        }
                        function_msgs.push(f.0);
                        fnext
                    });
                    let mut line = Pb::default();
                    line.uint(1, fid);
                    line.uint(2, u64::from(l.line.unwrap_or(0)));
                    loc.bytes(4, &line.0);
                }
                location_msgs.push(loc.0);
                next
            });
            loc_ids.push(id);
        }
        let mut sm = Pb::default();
        sm.packed(1, &loc_ids);
        sm.packed(2, &[*n]);
        sample_msgs.push(sm.0);
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
    msg.uint(9, p.first_ts);
    msg.uint(10, p.last_ts.saturating_sub(p.first_ts));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&msg.0);
    gz.finish().unwrap_or_default()
}
