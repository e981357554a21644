// SPDX-License-Identifier: GPL-2.0

//! Samples to labelled stacks, counted: the one model every output is written from.

use std::collections::HashMap;
use std::path::Path;

use crate::join::{Frame, Sample};
use crate::symbolize::{Sym, Symbolizer};

/// One entry of a stack as the outputs show it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    /// Function name, or `file+0xoffset` when there is none.
    pub name: String,
    /// The file the frame is in (its path in the trace), if any.
    pub module: Option<String>,
    /// For pprof: the file's build-id (hex) and the frame's offset in it.
    pub build_id: Option<String>,
    pub offset: Option<u64>,
    pub source: Option<String>,
    pub line: Option<u32>,
    pub inlined: bool,
    /// The root entries (event, task) that are not code.
    pub synthetic: bool,
}

impl Label {
    fn synthetic(name: String) -> Label {
        Label {
            name,
            module: None,
            build_id: None,
            offset: None,
            source: None,
            line: None,
            inlined: false,
            synthetic: true,
        }
    }

    /// The text of the label in folded stacks and flame graphs; `lines` adds file:line.
    pub fn text(&self, lines: bool) -> String {
        let mut s = self.name.clone();
        if self.inlined {
            s.push_str(" [inlined]");
        }
        if lines {
            if let (Some(f), Some(l)) = (&self.source, self.line) {
                let base = Path::new(f).file_name().map(|b| b.to_string_lossy());
                s.push_str(&format!(" ({}:{l})", base.unwrap_or_default()));
            }
        }
        // ';' separates frames in folded stacks and a space starts the count.
        s.replace(';', ":")
    }
}

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub pids: Vec<i32>,
    pub comms: Vec<String>,
    pub events: Vec<String>,
}

impl Filter {
    pub fn keeps(&self, s: &Sample) -> bool {
        let short = s.event.rsplit(':').next().unwrap_or(&s.event);
        (self.pids.is_empty() || self.pids.contains(&s.pid))
            && (self.comms.is_empty() || s.comm.as_ref().is_some_and(|c| self.comms.contains(c)))
            && (self.events.is_empty() || self.events.iter().any(|e| *e == s.event || e == short))
    }
}

/// Counted stacks, root first: the event, the task if asked for, outermost frame first.
#[derive(Debug, Default)]
pub struct Profile {
    pub stacks: Vec<(Vec<Label>, u64)>,
    pub samples: u64,
    pub first_ts: u64,
    pub last_ts: u64,
}

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn frame_labels(sym: &mut Symbolizer, pid: i32, f: &Frame, depth: usize) -> Vec<Label> {
    let (module, build_id, offset) = match f {
        Frame::File { file, offset } | Frame::Special { file, offset } => (
            Some(file.path.clone()),
            (!file.build_id.is_empty()).then(|| crate::symbolize::hex(&file.build_id)),
            Some(*offset),
        ),
        Frame::Anon { name, addr } => (name.as_ref().map(|n| n.path.clone()), None, Some(*addr)),
        _ => (None, None, None),
    };
    if let Some(syms) = sym.resolve(pid, f, depth) {
        return syms
            .iter()
            .map(|s: &Sym| Label {
                name: s.name.clone(),
                module: module.clone(),
                build_id: build_id.clone(),
                offset,
                source: s.file.clone(),
                line: s.line,
                inlined: s.inlined,
                synthetic: false,
            })
            .collect();
    }
    let name = match f {
        Frame::File { file, offset } | Frame::Special { file, offset } => {
            format!("{}+{offset:#x}", base(&file.path))
        }
        Frame::Anon {
            addr,
            name: Some(n),
        } => format!("{}@{addr:#x}", n.path),
        Frame::Anon { addr, name: None } => format!("[anon]@{addr:#x}"),
        Frame::Unresolved { cookie, value } => format!("[unresolved {cookie:#x}]+{value:#x}"),
        Frame::BadIndex { value } => format!("[bad index]+{value:#x}"),
    };
    vec![Label {
        name,
        module,
        build_id,
        offset,
        source: None,
        line: None,
        inlined: false,
        synthetic: false,
    }]
}

/// Symbolize and count the samples `filter` keeps; `task` adds a `comm-pid` level below
/// the event.
pub fn profile(samples: &[Sample], sym: &mut Symbolizer, filter: &Filter, task: bool) -> Profile {
    let mut counts: HashMap<Vec<Label>, u64> = HashMap::new();
    let mut p = Profile::default();
    for s in samples.iter().filter(|s| filter.keeps(s)) {
        let mut stack = vec![Label::synthetic(s.event.clone())];
        if task {
            let comm = s.comm.as_deref().unwrap_or("?");
            stack.push(Label::synthetic(format!("{comm}-{}", s.pid)));
        }
        if s.frames.is_empty() {
            stack.push(Label::synthetic(
                if s.complete {
                    "[no user frames]"
                } else {
                    "[no stack]"
                }
                .to_string(),
            ));
        }
        let mut frames = Vec::new();
        for (depth, f) in s.frames.iter().enumerate() {
            // Innermost first within a frame too: reversed below, with the stack.
            frames.extend(frame_labels(sym, s.pid, f, depth));
        }
        if !s.complete && !s.frames.is_empty() {
            frames.push(Label::synthetic("[truncated]".to_string()));
        }
        frames.reverse();
        stack.extend(frames);
        *counts.entry(stack).or_default() += 1;
        if p.samples == 0 {
            p.first_ts = s.ts;
        }
        p.samples += 1;
        p.last_ts = p.last_ts.max(s.ts);
    }
    p.stacks = counts.into_iter().collect();
    // Most frequent first, then by the stack itself, so output is stable.
    p.stacks
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    p
}
