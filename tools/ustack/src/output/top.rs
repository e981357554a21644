// SPDX-License-Identifier: GPL-2.0

//! A frame of `ustack top`: a status line, then for each event its functions, the most
//! self first (`perf top`'s order), and its top stacks one a line, innermost frame first;
//! fitted to a terminal's rows and columns when one is given.

use std::fmt::Write as _;

use super::report::{function_rows, label_text, sections, shown_stacks, values};
use super::{pct, View};
use crate::stacks::Profile;

/// What a frame says besides the profile.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// What is watched: the events and filters.
    pub what: String,
    /// Seconds since the start.
    pub elapsed: f64,
    /// Events read from the ring buffer, and those its writer lost.
    pub events: u64,
    pub lost: u64,
    /// Frames of the samples shown that no `file_cache` named (yet): shown by their
    /// file cookie.
    pub unresolved: u64,
    /// A last line (the keys), if any.
    pub footer: Option<String>,
}

/// The frame: `functions` rows and `stacks` stacks per event at most; with `size`
/// (rows, columns), fewer so that the frame fits, each line cut to the width.
pub fn frame(
    p: &Profile,
    st: &Status,
    functions: usize,
    stacks: usize,
    size: Option<(usize, usize)>,
) -> String {
    let events = sections(p);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ustack top: {}  {:.1} s, {} events read, {} lost, {} frames unresolved",
        st.what, st.elapsed, st.events, st.lost, st.unresolved
    );
    let (mut functions, mut stacks) = (functions, stacks);
    if let Some((rows, _)) = size {
        // Each section: a blank line, its title, the functions' title, the functions, the
        // stacks' title and the stacks; the status line and the footer (after a blank
        // line) around them, and the cursor's line free.
        let around = 2 + 2 * usize::from(st.footer.is_some());
        let per = rows.saturating_sub(around) / events.len().max(1);
        let room = per.saturating_sub(4).max(2);
        functions = functions.min((room * 2 / 3).max(1));
        stacks = stacks.min(room - functions).max(1);
    }
    if events.is_empty() {
        let _ = writeln!(out, "\n(no samples yet)");
    }
    let v = View::default();
    for (name, entries) in &events {
        let total: u64 = entries.iter().map(|e| e.count).sum();
        let samples: u64 = entries.iter().map(|e| e.samples).sum();
        let shown = shown_stacks(p, entries, false);
        out.push('\n');
        if p.off_cpu {
            let _ = writeln!(
                out,
                "# Event: {name}  Off-CPU: {} in {samples} blockings  Stacks: {}",
                super::report::time(total),
                shown.len()
            );
        } else {
            let rate = samples as f64 / st.elapsed.max(1e-3);
            let _ = writeln!(
                out,
                "# Event: {name}  Samples: {total} ({rate:.1}/s)  Stacks: {}",
                shown.len()
            );
        }
        let mut rows = function_rows(p, &v, entries);
        rows.sort_by(|a, b| {
            (b.1 .1, b.1 .0)
                .cmp(&(a.1 .1, a.1 .0))
                .then_with(|| a.0.cmp(&b.0))
        });
        rows.truncate(functions);
        let width = rows
            .iter()
            .map(|r| r.0[0].chars().count())
            .max()
            .unwrap_or(0)
            .clamp(8, 60);
        let value_titles = if p.off_cpu {
            "   Off-CPU  Blockings"
        } else {
            "Samples"
        };
        let _ = writeln!(
            out,
            "  Children      Self  {value_titles}  {:<width$}  File",
            "Function"
        );
        for (k, (children, selfn, n)) in &rows {
            let _ = writeln!(
                out,
                "{:9.2}%  {:7.2}%  {}  {:<width$}  {}",
                pct(*children, total),
                pct(*selfn, total),
                values(p, *children, *n),
                k[0],
                k[1]
            );
        }
        let _ = writeln!(out, "# Top stacks, innermost frame first");
        for (stack, (n, blockings)) in shown.iter().take(stacks) {
            // A run of one frame (recursion) is shown once with its count, as the report
            // shows it.
            let mut frames: Vec<String> = Vec::new();
            let inner_first: Vec<u32> = stack[1..].iter().rev().copied().collect();
            for run in inner_first.chunk_by(|a, b| a == b) {
                let mut t = label_text(&p.labels[run[0] as usize]);
                if run.len() > 1 {
                    let _ = write!(t, " (x{})", run.len());
                }
                frames.push(t);
            }
            let _ = writeln!(
                out,
                "{:9.2}%  {}  {}",
                pct(*n, total),
                values(p, *n, *blockings),
                frames.join(" <- ")
            );
        }
    }
    if let Some(f) = &st.footer {
        let _ = writeln!(out, "\n{f}");
    }
    match size {
        Some((rows, cols)) => out
            .lines()
            .take(rows.saturating_sub(1).max(1))
            .map(|l| cut(l, cols))
            .collect::<Vec<_>>()
            .join("\n"),
        None => out,
    }
}

/// `line` cut to `cols` characters.
fn cut(line: &str, cols: usize) -> String {
    match line.char_indices().nth(cols) {
        Some((at, _)) => line[..at].to_string(),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::join::{FileInfo, Frame, Sample};
    use crate::stacks::{Aggregator, Filter};
    use crate::symbolize::{Options, Symbolizer};
    use std::rc::Rc;

    /// `n` samples of event `event` whose stack is `frames` (innermost first), each an
    /// offset in file `prog`, unsymbolized (the file is not there).
    fn add(a: &mut Aggregator, event: &str, frames: &[u64], n: usize) {
        let file = Rc::new(FileInfo {
            cookie: 7,
            path: "/nonexistent/prog".into(),
            build_id: Vec::new(),
        });
        for _ in 0..n {
            a.add(&Sample {
                ts: 1,
                cpu: 0,
                pid: 42,
                tgid: None,
                comm: Some(Rc::from("prog")),
                event: Rc::from(event),
                cookie: 3,
                frames: frames
                    .iter()
                    .map(|&offset| Frame::File {
                        file: Rc::clone(&file),
                        offset,
                    })
                    .collect(),
                complete: true,
                truncated: None,
                seq: 0,
                kernel: Vec::new(),
                switched: None,
                off_cpu: None,
                kthread: false,
            });
        }
    }

    fn profile() -> Profile {
        let mut a = Aggregator::new(Filter::default());
        // 0x10 is main, 0xa, 0xb and 0xc the hot functions: 6:3:1.
        add(&mut a, "timer:tick", &[0xa, 0x10, 0x10, 0x10], 60);
        add(&mut a, "timer:tick", &[0xb, 0x10], 30);
        add(&mut a, "timer:tick", &[0xc, 0x10], 10);
        add(&mut a, "raw_syscalls:sys_enter", &[0xc, 0x10], 5);
        let mut sym = Symbolizer::new(Options {
            sysroot: Some("/nonexistent".into()),
            sysroot_only: true,
            ..Options::default()
        });
        a.profile(&mut sym, false)
    }

    fn status() -> Status {
        Status {
            what: "timer:tick".into(),
            elapsed: 2.0,
            events: 400,
            lost: 3,
            unresolved: 0,
            footer: Some("q quits".into()),
        }
    }

    #[test]
    fn a_frame_per_event_most_self_first() {
        let f = frame(&profile(), &status(), 10, 10, None);
        let lines: Vec<&str> = f.lines().collect();
        assert_eq!(
            lines[0],
            "ustack top: timer:tick  2.0 s, 400 events read, 3 lost, 0 frames unresolved"
        );
        assert_eq!(lines[1], "");
        assert_eq!(
            lines[2],
            "# Event: timer:tick  Samples: 100 (50.0/s)  Stacks: 3"
        );
        assert_eq!(lines[3], "  Children      Self  Samples  Function   File");
        // main has every sample as children and none as self: after the hot three.
        assert_eq!(lines[4], "    60.00%    60.00%       60  prog+0xa   prog");
        assert_eq!(lines[5], "    30.00%    30.00%       30  prog+0xb   prog");
        assert_eq!(lines[6], "    10.00%    10.00%       10  prog+0xc   prog");
        assert_eq!(lines[7], "   100.00%     0.00%      100  prog+0x10  prog");
        assert_eq!(lines[8], "# Top stacks, innermost frame first");
        assert_eq!(
            lines[9],
            "    60.00%       60  prog+0xa  [prog] <- prog+0x10  [prog] (x3)"
        );
        // The smaller event's section follows, shares of its own total.
        assert!(f.contains("\n# Event: raw_syscalls:sys_enter  Samples: 5 (2.5/s)  Stacks: 1\n"));
        assert!(
            f.contains("\n   100.00%   100.00%        5  prog+0xc   prog\n"),
            "{f}"
        );
        assert!(f.ends_with("\nq quits\n"), "{f}");
    }

    #[test]
    fn a_frame_fits_its_terminal() {
        let f = frame(&profile(), &status(), 20, 20, Some((16, 50)));
        let lines: Vec<&str> = f.lines().collect();
        assert_eq!(lines.len(), 15, "{f}");
        assert!(lines.iter().all(|l| l.chars().count() <= 50), "{f}");
        assert_eq!(
            lines[2],
            "# Event: timer:tick  Samples: 100 (50.0/s)  Stacks"
        );
        assert_eq!(lines[14], "q quits");
        // Both sections are there, each with its hottest function and stack.
        assert!(
            lines.iter().any(|l| l.starts_with("# Event: raw_sys")),
            "{f}"
        );
        assert!(
            lines.iter().filter(|l| l.contains("prog+0xa")).count() >= 2,
            "{f}"
        );
    }

    #[test]
    fn no_samples_yet() {
        let mut sym = Symbolizer::new(Options::default());
        let p = Aggregator::new(Filter::default()).profile(&mut sym, false);
        let st = Status {
            footer: None,
            ..status()
        };
        let f = frame(&p, &st, 10, 10, None);
        assert!(f.ends_with("\n\n(no samples yet)\n"), "{f}");
    }
}
