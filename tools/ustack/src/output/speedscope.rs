// SPDX-License-Identifier: GPL-2.0

//! speedscope's JSON file format, written as it goes.

use std::collections::HashMap;
use std::io::Write;

use crate::stacks::{Label, Profile};

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
        "]}},\"profiles\":[{{\"type\":\"sampled\",\"name\":{},\"unit\":{},\"startValue\":0,\"endValue\":{},\"samples\":[",
        js(name),
        if p.off_cpu {
            "\"nanoseconds\""
        } else {
            "\"none\""
        },
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
