// SPDX-License-Identifier: GPL-2.0

//! The SVG flame graph and the differential one, drawn by the tool itself; `flame.js`
//! makes them interactive in a browser.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::stacks::Profile;

/// Text for the SVG: the markup characters as entities, and any control character left (the
/// names reach it escaped already; XML 1.0 forbids most of them) as a space.
fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            c if c.is_control() => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// A stable colour per name (FNV-1a): warm for user code, aqua for kernel frames (marked
/// `_[k]`, as flamegraph.pl marks and colours them apart).
fn color(name: &str) -> String {
    let mut h: u32 = 0x811c9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x01000193);
    }
    if name.ends_with("_[k]") {
        let r = 50 + (h % 60);
        let g = 170 + ((h >> 8) % 50);
        let b = 190 + ((h >> 16) % 50);
        return format!("rgb({r},{g},{b})");
    }
    let r = 200 + (h % 55);
    let g = 80 + ((h >> 8) % 150);
    let b = 40 + ((h >> 16) % 40);
    format!("rgb({r},{g},{b})")
}

/// A frame's label as the graph shows it: without the `_[i]` (inlined) and `_[k]`
/// (kernel) marks of its name, as flamegraph.pl and inferno draw it (the tooltip, the
/// search and the colour keep the name as it is). A ` (file:line)` after the marks stays.
fn shown(name: &str) -> String {
    let (head, tail) = match name.rfind(" (") {
        Some(i) if name.ends_with(')') => name.split_at(i),
        _ => (name, ""),
    };
    let mut h = head;
    while let Some(x) = h.strip_suffix("_[k]").or_else(|| h.strip_suffix("_[i]")) {
        h = x;
    }
    format!("{h}{tail}")
}

/// The label of a frame `w` pixels wide: as many of `name`'s characters as fit (7 pixels
/// each), `..` where it is cut, nothing under 3 characters; with its source suffix kept
/// when whole (`f (a.c:7)`).
fn label(name: &str, w: f64) -> String {
    let chars = ((w - 4.0) / 7.0) as usize;
    if chars < 3 {
        return String::new();
    }
    let n = name.chars().count();
    if n <= chars {
        return name.to_string();
    }
    name.chars()
        .take(chars.saturating_sub(2))
        .collect::<String>()
        + ".."
}

/// The room the title has at the top, between the Reset zoom button on the left and
/// Search and Clear on the right (the wider side, on both sides: it stays centred).
const TITLE_SIDE: f64 = 110.0;
/// A character of the title (15 px monospace), in pixels.
const TITLE_CHAR: f64 = 9.0;

/// The title as it fits a graph `width` pixels wide between the buttons: cut with `..`
/// (the script fits it again to the window, and its tooltip is the whole title).
fn fit_title(title: &str, width: f64, pad: f64) -> String {
    let room = ((width - 2.0 * (pad + TITLE_SIDE)) / TITLE_CHAR).max(0.0) as usize;
    let n = title.chars().count();
    if n <= room {
        return title.to_string();
    }
    title
        .chars()
        .take(room.saturating_sub(2))
        .collect::<String>()
        + ".."
}

/// The flame graph's script (zoom, search, reset), the tool's own.
const FLAME_JS: &str = include_str!("flame.js");

/// A flame graph: the root at the bottom (at the top, an icicle graph, when `inverted`),
/// each frame as wide as its share of the samples, children sorted by name, labelled
/// without the `_[i]`/`_[k]` marks, the full name and count in a tooltip; clicking a frame
/// zooms to it, a search marks the matching frames and shows their share of the samples.
/// The title is cut to the room between the buttons (its tooltip whole).
pub fn svg(p: &Profile, title: &str, task: bool, inverted: bool) -> String {
    let stacks: Vec<(Vec<u32>, u64, u64)> = p
        .text_stacks(task)
        .iter()
        .map(|(s, n)| (s.clone(), *n, 0))
        .collect();
    flame(&p.texts, stacks, title, false, inverted, p.off_cpu)
}

/// A differential flame graph of `p` against `base`: widths from `p`, each frame coloured
/// by the change of its share of the samples, red where it grew, blue where it shrank
/// (flamegraph.pl's difffolded, as a flame graph of the second profile).
pub fn svg_diff(p: &Profile, base: &Profile, title: &str, task: bool, inverted: bool) -> String {
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
    flame(&texts, stacks, title, true, inverted, p.off_cpu)
}

/// Draw stacks of texts with their counts (and, for a differential graph, the base's).
fn flame(
    texts: &[String],
    stacks: Vec<(Vec<u32>, u64, u64)>,
    title: &str,
    diff: bool,
    inverted: bool,
    ns: bool,
) -> String {
    // A frame's value in its tooltip: samples, or off-CPU time in milliseconds.
    let value = |n: u64| -> String {
        if ns {
            format!("{:.2} ms", n as f64 / 1e6)
        } else {
            format!("{n} samples")
        }
    };
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
    // The footer (the frame under the pointer, the search's share) has a row of its own
    // below the frames.
    let footer = row + 2.0 * pad;
    let height = levels as f64 * row + top + footer;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" data-total="{total}" data-row="{row}" data-pad="{pad}" data-inverted="{inverted}">
<style>
text {{ font-family: monospace; font-size: 11px; }}
g.f {{ cursor: pointer; }}
g.f:hover rect {{ stroke: black; stroke-width: 0.5; }}
.button {{ font-size: 12px; cursor: pointer; fill: #1a5fb4; }}
.error {{ fill: #c01c28; }}
</style>
<script type="text/ecmascript"><![CDATA[
{FLAME_JS}]]></script>
<rect x="0" y="0" width="100%" height="100%" fill="#f8f8f8"/>
<g id="titlebox"><title>{}</title><text id="title" x="{}" y="20" text-anchor="middle" style="font-size:15px" data-full="{}" data-side="{TITLE_SIDE}">{}</text></g>
<text id="reset" class="button" x="{pad}" y="20" display="none">Reset zoom</text>
<text id="search" class="button" x="{}" y="20" text-anchor="end">Search</text>
<text id="unsearch" class="button" x="{}" y="20" text-anchor="end" display="none">Clear</text>
<text id="matched" x="{}" y="{}" text-anchor="end"> </text>
<text id="details" x="{pad}" y="{}"> </text>
<g id="frames">"##,
        xml(title),
        width / 2.0,
        xml(title),
        xml(&fit_title(title, width, pad)),
        width - pad,
        width - pad - 60.0,
        width - pad,
        height - pad,
        height - pad,
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
        let y = if inverted {
            top + level as f64 * row
        } else {
            height - footer - (level as f64 + 1.0) * row
        };
        let (fill, note) = if diff {
            let d = delta(count, base);
            let i = (d.abs() / max_delta).min(1.0);
            // From white to rgb(255,100,100) or rgb(100,100,255): black labels stay
            // readable on the deepest colour (contrast 4.8 on the blue).
            let c = (255.0 - 155.0 * i).round() as u32;
            let fill = if d >= 0.0 {
                format!("rgb(255,{c},{c})")
            } else {
                format!("rgb({c},{c},255)")
            };
            (
                fill,
                format!(
                    "; base {}, {:.2}%; {:+.2} points",
                    value(base),
                    100.0 * base as f64 / ball,
                    100.0 * d
                ),
            )
        } else {
            (color(name), String::new())
        };
        let _ = write!(
            out,
            "<g class=\"f\" data-s=\"{start}\" data-n=\"{count}\" data-d=\"{level}\"><title>{}\n{}, {:.2}%{note}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{fill}\" rx=\"2\"/>",
            xml(name),
            value(count),
            100.0 * count as f64 / all,
            row - 1.0,
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            x + 3.0,
            y + row - 4.0,
            xml(&label(&shown(name), w))
        );
    }
    out.push_str("</g>\n</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_drop_the_inline_and_kernel_marks() {
        assert_eq!(shown("__schedule_[k]"), "__schedule");
        assert_eq!(shown("read_[i]"), "read");
        assert_eq!(shown("f_[i]_[k]"), "f");
        assert_eq!(shown("inl_[i] (a.h:7)"), "inl (a.h:7)");
        assert_eq!(shown("main (a.c:3)"), "main (a.c:3)");
        assert_eq!(shown("x_[k]y"), "x_[k]y");
        assert_eq!(shown("all"), "all");
        assert_eq!(label("__schedule", 200.0), "__schedule");
        assert_eq!(label("__schedule", 60.0), "__sche..");
        assert_eq!(label("__schedule", 20.0), "");
    }

    #[test]
    fn a_long_title_is_cut_to_the_room_between_the_buttons() {
        let t = "ustack: ".to_string() + &"x".repeat(200);
        let f = fit_title(&t, 1200.0, 10.0);
        // (1200 - 2 * 120) / 9 = 106 characters.
        assert_eq!(f.chars().count(), 106);
        assert!(f.ends_with(".."));
        assert_eq!(fit_title("ustack: a.dat", 1200.0, 10.0), "ustack: a.dat");
    }
}
