// SPDX-License-Identifier: GPL-2.0

//! Folded stacks, the input of flamegraph.pl, inferno and speedscope.

use std::io::Write;

use crate::stacks::Profile;

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
