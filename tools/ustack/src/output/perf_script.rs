// SPDX-License-Identifier: GPL-2.0

//! perf script's text, sample by sample, in time order.
//!
//! The join gives a sample when its stack is complete, which is later than its event by
//! the time the task took to return to user space (and, for a file named by a later
//! `file_cache`, up to [`HOLD_NS`](crate::join::HOLD_NS) more). As perf's ordered events
//! do, samples wait in a bounded window ([`REORDER_NS`] of trace time, at most
//! [`REORDER_MAX`] samples) and come out by (time, CPU, order of their cookie in the
//! trace): the same text every run, in time order. A sample that comes after one later
//! than it was written is written at once, and counted.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;

use crate::join::Sample;
use crate::stacks::Kept;
use crate::symbolize::Symbolizer;

/// How long (trace time) a sample may wait for an earlier one.
pub const REORDER_NS: u64 = crate::join::HOLD_NS + 1_000_000_000;
/// Samples waiting at most; past that the earliest is written.
pub const REORDER_MAX: usize = 1 << 16;

/// A waiting sample, ordered by (time, CPU, cookie order).
struct Held(Sample, Kept);

impl Held {
    fn key(&self) -> (u64, u32, usize) {
        (self.0.ts, self.0.cpu, self.0.seq)
    }
}
impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key().cmp(&o.key())
    }
}

/// perf script's text of the samples given, written in time order.
pub struct PerfScript<'a> {
    sym: &'a mut Symbolizer,
    w: &'a mut dyn Write,
    held: BinaryHeap<Reverse<Held>>,
    /// The key of the last sample written.
    last: Option<(u64, u32, usize)>,
    /// Samples written after a later one (they came past the window).
    pub late: u64,
    err: Option<std::io::Error>,
}

impl<'a> PerfScript<'a> {
    pub fn new(sym: &'a mut Symbolizer, w: &'a mut dyn Write) -> Self {
        PerfScript {
            sym,
            w,
            held: BinaryHeap::new(),
            last: None,
            late: 0,
            err: None,
        }
    }

    fn write(&mut self, s: &Sample, k: Kept) {
        let key = (s.ts, s.cpu, s.seq);
        if self.last.is_some_and(|l| key < l) {
            self.late += 1;
        } else {
            self.last = Some(key);
        }
        if self.err.is_none() {
            if let Err(e) = perf_script_sample(s, k, self.sym, self.w) {
                self.err = Some(e);
            }
        }
    }

    /// The trace's kernel symbols, for the kernel frames.
    pub fn kallsyms(&mut self, k: crate::kallsyms::Kallsyms) {
        self.sym.kallsyms = k;
    }

    /// A sample the join gave, as the selections and weight keep it.
    pub fn sample(&mut self, s: &Sample, k: Kept) {
        if self.last.is_some_and(|l| (s.ts, s.cpu, s.seq) < l) {
            self.write(s, k);
            return;
        }
        self.held.push(Reverse(Held(s.clone(), k)));
        if self.held.len() > REORDER_MAX {
            if let Some(Reverse(h)) = self.held.pop() {
                self.write(&h.0, h.1);
            }
        }
    }

    /// The trace has reached time `now`: write the samples older than the window.
    pub fn advance(&mut self, now: u64) {
        while self
            .held
            .peek()
            .is_some_and(|h| h.0 .0.ts.saturating_add(REORDER_NS) < now)
        {
            if let Some(Reverse(h)) = self.held.pop() {
                self.write(&h.0, h.1);
            }
        }
    }

    /// Write what waits; the first write error, if any.
    pub fn finish(mut self) -> std::io::Result<u64> {
        while let Some(Reverse(h)) = self.held.pop() {
            self.write(&h.0, h.1);
        }
        match self.err {
            Some(e) => Err(e),
            None => Ok(self.late),
        }
    }
}

/// One sample as `perf script` prints one (the text hotspot, the Firefox Profiler's
/// importer and stackcollapse-perf.pl read): `comm tid [cpu] secs.usecs: PERIOD event:`
/// (the period is 1, or the nanoseconds off the CPU with `--off-cpu`), then the frames `k`
/// shows (the kernel's, the user's or both), a
/// line per frame, innermost first, `\tADDRESS FUNCTION (FILE)` (an inlined function on
/// its own line at its caller's address; `[unknown]` where nothing names it), then an
/// empty line. The address is the frame's offset in its file, or its address in
/// anonymous memory. A stack cut short ends, as in the other outputs, with a frame
/// `[truncated]` (records missing) or `[truncated: REASON]` (the unwinder stopped) at
/// address 0 in `[unknown]`.
pub fn perf_script_sample(
    s: &crate::join::Sample,
    k: Kept,
    sym: &mut crate::symbolize::Symbolizer,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    use crate::join::Frame;
    use crate::stacks::escape;
    let comm = escape(s.comm.as_deref().unwrap_or("?"));
    writeln!(
        w,
        "{comm} {} [{:03}] {}.{:06}: {} {}:",
        s.pid,
        s.cpu,
        s.ts / 1_000_000_000,
        s.ts % 1_000_000_000 / 1000,
        k.weight,
        escape(&s.event)
    )?;
    // The kernel's frames first, as perf prints a callchain: `ADDRESS function+0xOFF
    // ([kernel.kallsyms])`, the address as it is where kallsyms names nothing.
    for kf in k.kernel_frames(s) {
        let addr = match kf {
            crate::events::KFrame::Addr(a) => *a,
            crate::events::KFrame::Name(_) => 0,
        };
        match sym.kernel(kf) {
            Some(n) if n.offset > 0 => writeln!(
                w,
                "\t{addr:16x} {}+{:#x} ({})",
                escape(&n.name),
                n.offset,
                escape(&n.module)
            )?,
            Some(n) => writeln!(
                w,
                "\t{addr:16x} {} ({})",
                escape(&n.name),
                escape(&n.module)
            )?,
            None => writeln!(
                w,
                "\t{addr:16x} [unknown] ({})",
                crate::symbolize::KERNEL_MODULE
            )?,
        }
    }
    if !k.user {
        return writeln!(w);
    }
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
    if !s.complete && !s.frames.is_empty() {
        writeln!(w, "\t{:16x} [truncated] ([unknown])", 0)?;
    }
    if let Some(r) = &s.truncated {
        writeln!(w, "\t{:16x} [truncated: {}] ([unknown])", 0, escape(r))?;
    }
    writeln!(w)
}
