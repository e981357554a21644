// SPDX-License-Identifier: GPL-2.0

//! The flame graph: zoom, search and reset in a real browser (tests/flame_browser.py,
//! skipped without chromium except under CI), and the differential graph of two traces.

mod common;

use common::tmpdir;
use std::path::Path;
use std::process::Command;

#[test]
fn the_flame_graph_zooms_and_searches_in_a_browser() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/flame_browser.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_ustack"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Without chromium the script says SKIP and passes, except under CI, where
    // scripts/setup.sh has installed it.
    if text.starts_with("SKIP") {
        eprintln!("{text}");
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed: scripts/setup.sh installs it"
        );
    }
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Task 42's JIT frames: `a` stacks in jit_a and `b` in jit_b, under jit_main.
fn jit_trace(a: usize, b: usize) -> String {
    let mut t = String::from("# trace_clock: global\n# tracer: nop\n");
    for (i, addr) in std::iter::repeat_n(0x7f0000001010u64, a)
        .chain(std::iter::repeat_n(0x7f0000002010u64, b))
        .enumerate()
    {
        let c = 0x100 + i;
        for body in [
            "sys_enter: NR 1 (1, 2, 3, 4, 5, 6)".to_string(),
            format!("user_unwind_cookie: cookie={c:x}"),
            format!("user_unwind_stack: cookie={c:x}"),
        ] {
            t.push_str(&format!(
                "            prog-42      [000] .....    10.{i:06}: {body}\n"
            ));
        }
        t.push_str(&format!(" => <{addr:016x}> : 0x1\n"));
        t.push_str(" => <00007f0000003010> : 0x1\n");
    }
    t
}

#[test]
fn a_differential_flame_graph() {
    let d = tmpdir("diff");
    std::fs::write(
        d.join("perf-42.map"),
        "7f0000001000 100 jit_a\n7f0000002000 100 jit_b\n7f0000003000 100 jit_main\n",
    )
    .unwrap();
    // jit_a: 3 of 4 samples in the base, 1 of 4 now; jit_b the other way round.
    std::fs::write(d.join("base.trace"), jit_trace(3, 1)).unwrap();
    std::fs::write(d.join("now.trace"), jit_trace(1, 3)).unwrap();
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args([
            "-q",
            "--perf-map",
            &p("perf-42.map"),
            "--svg",
            &p("d.svg"),
            "--diff",
        ])
        .args([p("base.trace"), p("now.trace")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(d.join("d.svg")).unwrap();
    let frame = |name: &str| -> String {
        let i = svg.find(&format!("<title>{name}\n")).unwrap();
        svg[i..i + svg[i..].find("</g>").unwrap()].to_string()
    };
    // Widths from now; red where the share grew, blue where it shrank, white unchanged.
    let b = frame("jit_b");
    assert!(
        b.contains("3 samples, 75.00%; base 1 samples, 25.00%; +50.00 points"),
        "{b}"
    );
    assert!(b.contains("fill=\"rgb(255,100,100)\""), "{b}");
    let a = frame("jit_a");
    assert!(
        a.contains("1 samples, 25.00%; base 3 samples, 75.00%; -50.00 points"),
        "{a}"
    );
    assert!(a.contains("fill=\"rgb(100,100,255)\""), "{a}");
    assert!(frame("jit_main").contains("fill=\"rgb(255,255,255)\""));
    // Black labels stay readable on every colour: WCAG contrast at least 4.5.
    for fill in svg.split("fill=\"rgb(").skip(1) {
        let c: Vec<f64> = fill[..fill.find(')').unwrap()]
            .split(',')
            .map(|x| x.parse::<f64>().unwrap() / 255.0)
            .collect();
        let lin = |v: f64| {
            if v <= 0.03928 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        let l = 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
        assert!((l + 0.05) / 0.05 >= 4.5, "contrast of {c:?} with black");
    }
    // --diff colours a flame graph: without --svg it is a usage error.
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(["--diff", &p("base.trace"), &p("now.trace")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&d).unwrap();
}

/// The frames of an SVG: (name, x, y, width).
fn rects(svg: &str) -> Vec<(String, f64, f64, f64)> {
    let num = |s: &str, k: &str| -> f64 {
        let i = s.find(&format!(" {k}=\"")).unwrap() + k.len() + 3;
        s[i..i + s[i..].find('"').unwrap()].parse().unwrap()
    };
    svg.split("<g class=\"f\"")
        .skip(1)
        .map(|g| {
            let t = g.find("<title>").unwrap() + 7;
            let name = g[t..t + g[t..].find('\n').unwrap()].to_string();
            let r = &g[g.find("<rect").unwrap()..];
            (name, num(r, "x"), num(r, "y"), num(r, "width"))
        })
        .collect()
}

/// The footer sits below the root bar, not on it; `--inverted` puts the root at the top
/// and every frame below its parent (an icicle graph).
#[test]
fn the_footer_clears_the_root_and_inverted_is_an_icicle() {
    let d = tmpdir("icicle");
    std::fs::write(
        d.join("perf-42.map"),
        "7f0000001000 100 jit_a\n7f0000002000 100 jit_b\n7f0000003000 100 jit_main\n",
    )
    .unwrap();
    std::fs::write(d.join("t.trace"), jit_trace(1, 3)).unwrap();
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let run = |extra: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
            .args(["-q", "--perf-map", &p("perf-42.map"), "--svg", "-"])
            .args(extra)
            .arg(p("t.trace"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let row = 16.0;
    let footer_y = |svg: &str| -> f64 {
        let i = svg.find("<text id=\"details\"").unwrap();
        let y = svg[i..].find(" y=\"").unwrap() + i + 4;
        svg[y..y + svg[y..].find('"').unwrap()].parse().unwrap()
    };
    for (extra, inverted) in [(&[][..], false), (&["--inverted"][..], true)] {
        let svg = run(extra);
        let r = rects(&svg);
        let y = |n: &str| r.iter().find(|f| f.0 == n).unwrap().2;
        let (all, ev, main, b) = (
            y("all"),
            y("raw_syscalls:sys_enter"),
            y("jit_main"),
            y("jit_b"),
        );
        if inverted {
            assert!(all < ev && ev < main && main < b, "{r:?}");
        } else {
            assert!(all > ev && ev > main && main > b, "{r:?}");
        }
        // The footer's text (11 px) starts below the lowest bar.
        let lowest = r.iter().map(|f| f.2 + row - 1.0).fold(0.0, f64::max);
        assert!(
            footer_y(&svg) - 11.0 >= lowest,
            "footer at {} over a bar ending at {lowest}",
            footer_y(&svg)
        );
    }
    // --inverted draws a flame graph: without --svg it is a usage error.
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(["--inverted", &p("t.trace")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Without a browser (an `<img>` shows no script's work): the labels of kstack.dat's
/// kernel and user frames drop the `_[k]` / `_[i]` marks, the tooltips keep them, and a
/// title too long for the room between the buttons is cut there, whole in its tooltip.
#[test]
fn labels_drop_the_marks_and_a_long_title_is_cut() {
    let d = tmpdir("marks");
    let long = d.join(format!("{}.dat", "a-long-name".repeat(12)));
    std::fs::copy(common::fixture("kstack.dat"), &long).unwrap();
    let (svg, _) = common::ustack_ok(&["-q", "--svg", "-", long.to_str().unwrap()]);
    let frames: Vec<&str> = svg.split("<g class=\"f\"").skip(1).collect();
    let mut marked = 0;
    for g in &frames {
        let title = &g[g.find("<title>").unwrap() + 7..g.find("</title>").unwrap()];
        let label = &g[g.find("<text").unwrap()..g.find("</text>").unwrap()];
        assert!(
            !label.contains("_[k]") && !label.contains("_[i]"),
            "{label}"
        );
        marked += usize::from(title.contains("_[k]"));
    }
    assert!(marked > 10, "{marked} tooltips with _[k]");
    assert!(svg.contains(">__schedule</text>"), "a kernel frame's label");
    // The title: "ustack: PATH" is cut to 106 characters of 15 px at 1200 pixels.
    let full = format!("ustack: {}", long.display());
    let t = svg.find("<text id=\"title\"").unwrap();
    let shown = &svg[svg[t..].find('>').unwrap() + t + 1..t + svg[t..].find("</text>").unwrap()];
    assert_eq!(shown.chars().count(), 106, "{shown}");
    assert!(
        shown.ends_with("..") && full.starts_with(&shown[..104]),
        "{shown}"
    );
    assert!(svg.contains(&format!("<title>{full}</title>")));
    assert!(svg.contains(&format!("data-full=\"{full}\"")));
    std::fs::remove_dir_all(&d).unwrap();
}
