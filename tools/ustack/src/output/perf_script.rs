// SPDX-License-Identifier: GPL-2.0

//! perf script's text, sample by sample.

use std::io::Write;

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
