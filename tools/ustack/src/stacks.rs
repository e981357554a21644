// SPDX-License-Identifier: GPL-2.0

//! Samples to counted stacks, the one model every output is written from.
//!
//! Samples are counted as they come, by what the trace holds (event, task, frames as
//! (file, offset)): memory grows with the distinct stacks and files, not the events. Each
//! distinct frame is then symbolized once, and the stacks are counted again by what the
//! outputs show, so that two stacks printed alike are one: by label (function, file,
//! `file:line` with `--lines`) for the report, by text for folded stacks, flame graphs and
//! speedscope. pprof keeps the offsets.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use crate::join::{FileInfo, Frame, Sample};
use crate::symbolize::{Sym, Symbolizer};

/// A fast hash for the stack tables (the multiply-rotate of rustc's FxHasher): their keys
/// are ids the tool assigned, not text from the trace.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl IdHasher {
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Stacks (ids, root first) and their counts.
pub type Stacks = Vec<(Vec<u32>, u64)>;

pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Control characters (a newline in a file name, a terminal escape) as `\n`, `\x1b`: every
/// name reaches the text outputs through this.
pub fn escape(s: &str) -> String {
    if !s.chars().any(|c| c.is_control()) {
        return s.to_string();
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c if c.is_control() => o.push_str(&format!("\\x{:02x}", c as u32)),
            c => o.push(c),
        }
    }
    o
}

/// One entry of a stack as the outputs show it (its strings escaped).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    /// Function name, or `file+0xoffset` when there is none.
    pub name: String,
    /// The file the frame is in (its path in the trace), if any.
    pub module: Option<String>,
    /// Source file and line: only with `--lines`.
    pub source: Option<String>,
    pub line: Option<u32>,
    pub inlined: bool,
    /// The root entries (event, task) and markers that are not code.
    pub synthetic: bool,
    /// A kernel frame (its module `[kernel.kallsyms]` or `[name]`).
    pub kernel: bool,
}

impl Label {
    fn synthetic(name: &str) -> Label {
        Label {
            name: escape(name),
            module: None,
            source: None,
            line: None,
            inlined: false,
            synthetic: true,
            kernel: false,
        }
    }

    /// The text of the label in folded stacks and flame graphs: inlined functions marked
    /// `_[i]` and kernel frames `_[k]` as FlameGraph's tools do, ` (file:line)` when there
    /// is one.
    pub fn text(&self) -> String {
        let mut s = self.name.clone();
        if self.inlined {
            s.push_str("_[i]");
        }
        if self.kernel {
            s.push_str("_[k]");
        }
        if let (Some(f), Some(l)) = (&self.source, self.line) {
            s.push_str(&format!(" ({}:{l})", base(f)));
        }
        // ';' separates frames in folded stacks.
        s.replace(';', ":")
    }
}

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub pids: Vec<i32>,
    /// Thread groups: a sample's task's, as the trace says, else the task's own id.
    pub tgids: Vec<i32>,
    pub comms: Vec<String>,
    pub events: Vec<String>,
    /// The CPU the sample's event was recorded on.
    pub cpus: Vec<u32>,
    /// Trace time, nanoseconds, both ends included.
    pub time: Option<(Option<u64>, Option<u64>)>,
}

impl Filter {
    pub fn keeps(&self, s: &Sample) -> bool {
        let short = s.event.rsplit(':').next().unwrap_or(&s.event);
        (self.pids.is_empty() || self.pids.contains(&s.pid))
            && (self.tgids.is_empty() || self.tgids.contains(&s.tgid.unwrap_or(s.pid)))
            && (self.cpus.is_empty() || self.cpus.contains(&s.cpu))
            && self
                .time
                .is_none_or(|(a, b)| a.is_none_or(|a| s.ts >= a) && b.is_none_or(|b| s.ts <= b))
            && (self.comms.is_empty()
                || s.comm
                    .as_ref()
                    .is_some_and(|c| self.comms.iter().any(|x| **x == **c)))
            && (self.events.is_empty() || self.events.iter().any(|e| **e == *s.event || e == short))
    }

    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
            && self.tgids.is_empty()
            && self.comms.is_empty()
            && self.events.is_empty()
            && self.cpus.is_empty()
            && self.time.is_none()
    }
}

/// `START,END` in trace seconds (either may be empty), as perf and trace-cmd take it, to
/// nanoseconds.
pub fn parse_time(v: &str) -> Option<(Option<u64>, Option<u64>)> {
    let (a, b) = v.split_once(',')?;
    let secs = |x: &str| -> Option<Option<u64>> {
        let x = x.trim();
        if x.is_empty() {
            return Some(None);
        }
        let f: f64 = x.parse().ok()?;
        (f >= 0.0 && f.is_finite()).then(|| Some((f * 1e9).round() as u64))
    };
    Some((secs(a)?, secs(b)?))
}

/// `0,2-3` to CPU numbers.
pub fn parse_cpus(v: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in v.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A frame as a key: files by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum FKey {
    File(u32, u64),
    Special(u32, u64),
    Anon(Option<u32>, u64),
    Unresolved(u64, u64),
    BadIndex(u64),
    /// A kernel frame: an address, or a name (a string id) from the trace file's text.
    KAddr(u64),
    KName(u32),
}

impl FKey {
    fn is_kernel(self) -> bool {
        matches!(self, FKey::KAddr(_) | FKey::KName(_))
    }
}

/// Whether kernel function `func` is the tracing machinery of event `event` (`system:name`
/// or `name`), which a kernel stack taken in the event holds innermost, above the place
/// the event happened: the code the kernel's `TRACE_EVENT` and `DECLARE_TRACE` macros
/// generate for it. `innermost`: the stack's first frame, the event's probe, named for
/// its class (`trace_event_raw_event_CLASS`, `perf_trace_CLASS`), which may not be the
/// event's own name (`DEFINE_EVENT`); then the event's own `__traceiter_NAME`,
/// `__do_trace_NAME` and `trace_NAME`. A compiler's suffix (`.isra.0`, `.constprop.0`)
/// is not part of the name.
pub fn is_tracing_frame(event: &str, func: &str, innermost: bool) -> bool {
    let name = event.rsplit(':').next().unwrap_or(event);
    let func = func.split('.').next().unwrap_or(func);
    if innermost && (func.starts_with("trace_event_raw_event_") || func.starts_with("perf_trace_"))
    {
        return true;
    }
    ["__traceiter_", "__do_trace_", "trace_"]
        .iter()
        .any(|p| func.strip_prefix(p) == Some(name))
}

/// How many of the innermost frames of `kernel` (the kernel stack of an `event`) are the
/// tracing machinery's, by the names `kallsyms` (or the trace's text) gives them.
pub fn tracing_frames(
    event: &str,
    kernel: &[crate::events::KFrame],
    kallsyms: &crate::kallsyms::Kallsyms,
) -> usize {
    kernel
        .iter()
        .enumerate()
        .take_while(|(i, k)| {
            let name = match k {
                crate::events::KFrame::Addr(a) => kallsyms.lookup(*a).map(|s| s.name),
                crate::events::KFrame::Name(n) => n.split(' ').next(),
            };
            name.is_some_and(|n| is_tracing_frame(event, n, *i == 0))
        })
        .count()
}

/// A blocking time for `--min-block` and `--max-block`, in nanoseconds: a number with a
/// unit (`ns`, `us`, `ms`, `s`), or a bare number of microseconds as bcc's offcputime
/// takes `-m` and `-M`.
pub fn parse_duration(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, scale) = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)]
        .iter()
        .find_map(|(u, k)| v.strip_suffix(u).map(|n| (n, *k)))
        .unwrap_or((v, 1e3));
    let n: f64 = num.trim().parse().ok()?;
    let ns = n * scale;
    (n.is_finite() && n >= 0.0 && ns < u64::MAX as f64).then_some(ns.round() as u64)
}

/// Whether kernel frame `k` is function `name`.
fn kernel_name_is(
    k: &crate::events::KFrame,
    kallsyms: &crate::kallsyms::Kallsyms,
    name: &str,
) -> bool {
    match k {
        crate::events::KFrame::Addr(a) => kallsyms.lookup(*a).is_some_and(|s| s.name == name),
        crate::events::KFrame::Name(n) => n.split(' ').next() == Some(name),
    }
}

/// What `--off-cpu` counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffCpu {
    /// Preempted tasks (switched out runnable, `R`, `R+`) too, under their state.
    pub preempted: bool,
    /// Kernel threads' time too ([`Sample::kthread`]), under their name.
    pub kernel_threads: bool,
    /// Blockings shorter than this many nanoseconds are left out (`--min-block`).
    pub min_ns: u64,
    /// And those longer than this (`--max-block`).
    pub max_ns: Option<u64>,
}

/// What of a sample every output shows, once the selections and weight are applied: one
/// rule for the counted outputs and for perf script's text, which writes samples as they
/// come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// Its value: 1, or the nanoseconds its task was off the CPU (`--off-cpu`).
    pub weight: u64,
    /// The kernel frames shown: `kernel[kernel_from..]`, none when `!kernel`.
    pub kernel: bool,
    pub kernel_from: usize,
    /// The user frames (and the markers of a user stack cut short) are shown.
    pub user: bool,
}

impl Kept {
    /// The kernel frames of `s` this shows, innermost first.
    pub fn kernel_frames<'a>(&self, s: &'a Sample) -> &'a [crate::events::KFrame] {
        if self.kernel {
            s.kernel.get(self.kernel_from..).unwrap_or_default()
        } else {
            &[]
        }
    }
}

/// Which frames the outputs show: kernel and user (the default), or one of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StackView {
    #[default]
    Both,
    UserOnly,
    KernelOnly,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RawStack {
    event: u32,
    pid: i32,
    comm: u32,
    complete: bool,
    /// Why the unwinder stopped short (a string id), if it did.
    truncated: Option<u32>,
    /// Off-CPU: the state its task was switched out in (a string id).
    state: Option<u32>,
    /// A kernel thread's (`--kernel-threads`): shown under its name.
    kthread: bool,
    /// Frame keys, innermost first.
    frames: Box<[u32]>,
}

/// The sample times kept for pprof at most (8 bytes each): past that no sample's are.
pub const TIMES_MAX: usize = 1 << 20;

/// A stack's count, and the times of its samples when they are kept.
#[derive(Default)]
struct Count {
    /// Its value: samples, or off-CPU nanoseconds.
    n: u64,
    samples: u64,
    /// (time, value) of each sample, when kept.
    times: Vec<(u64, u64)>,
}

/// Samples counted as they come, by what the trace holds.
#[derive(Default)]
pub struct Aggregator {
    pub filter: Filter,
    /// Off-CPU time: each sample weighted by the time its task was switched out.
    pub off_cpu: Option<OffCpu>,
    /// Samples left out of the off-CPU profile: their event did not switch their task
    /// out (or the trace never switched it in again), or it was preempted (runnable).
    pub off_cpu_other: u64,
    pub off_cpu_preempted: u64,
    /// Blockings left out by `--min-block` or `--max-block`.
    pub off_cpu_out_of_range: u64,
    /// Kernel threads' samples kept.
    pub off_cpu_kthreads: u64,
    /// Kernel frames, user frames or both.
    pub view: StackView,
    /// Keep the tracing machinery's own kernel frames ([`tracing_frames`]), which are
    /// left out by default.
    pub keep_tracing: bool,
    /// The trace's kernel symbols, to know those frames by name.
    pub kallsyms: crate::kallsyms::Kallsyms,
    /// Keep each sample's time (for pprof), up to [`TIMES_MAX`] in all.
    pub keep_times: bool,
    times_kept: usize,
    /// More samples than [`TIMES_MAX`]: no times are given.
    pub times_dropped: bool,
    files: Vec<Rc<FileInfo>>,
    /// Every FileInfo seen, kept alive so that its address is not reused.
    keep: Vec<Rc<FileInfo>>,
    file_ptr: HashMap<usize, u32>,
    file_content: HashMap<(String, Vec<u8>), u32>,
    fkeys: Vec<FKey>,
    fkey_ids: IdMap<FKey, u32>,
    strings: Vec<Rc<str>>,
    string_ids: HashMap<Rc<str>, u32>,
    stacks: IdMap<RawStack, Count>,
    /// Samples kept, and seen before the filter.
    pub samples: u64,
    pub seen: u64,
    /// The samples' values in all (their count, or off-CPU nanoseconds).
    pub value: u64,
    first_ts: Option<u64>,
    last_ts: u64,
}

impl Aggregator {
    pub fn new(filter: Filter) -> Self {
        Aggregator {
            filter,
            ..Aggregator::default()
        }
    }

    fn string(&mut self, s: &Rc<str>) -> u32 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        self.strings.push(Rc::clone(s));
        self.string_ids
            .insert(Rc::clone(s), self.strings.len() as u32 - 1);
        self.strings.len() as u32 - 1
    }

    fn file(&mut self, f: &Rc<FileInfo>) -> u32 {
        let p = Rc::as_ptr(f) as usize;
        if let Some(&i) = self.file_ptr.get(&p) {
            return i;
        }
        let key = (f.path.clone(), f.build_id.clone());
        let i = match self.file_content.get(&key) {
            Some(&i) => i,
            None => {
                self.files.push(Rc::clone(f));
                let i = self.files.len() as u32 - 1;
                self.file_content.insert(key, i);
                i
            }
        };
        self.keep.push(Rc::clone(f));
        self.file_ptr.insert(p, i);
        i
    }

    fn fkey(&mut self, f: &Frame) -> u32 {
        let k = match f {
            Frame::File { file, offset } => FKey::File(self.file(file), *offset),
            Frame::Special { file, offset } => FKey::Special(self.file(file), *offset),
            Frame::Anon { addr, name } => FKey::Anon(name.as_ref().map(|n| self.file(n)), *addr),
            Frame::Unresolved { cookie, value } => FKey::Unresolved(*cookie, *value),
            Frame::BadIndex { value } => FKey::BadIndex(*value),
        };
        self.intern(k)
    }

    fn intern(&mut self, k: FKey) -> u32 {
        if let Some(&i) = self.fkey_ids.get(&k) {
            return i;
        }
        self.fkeys.push(k);
        self.fkey_ids.insert(k, self.fkeys.len() as u32 - 1);
        self.fkeys.len() as u32 - 1
    }

    /// Count one sample, if the filter and `--off-cpu` keep it: what of it every output
    /// shows, with its weight, or `None`.
    pub fn add(&mut self, s: &Sample) -> Option<Kept> {
        self.seen += 1;
        if !self.filter.keeps(s) {
            return None;
        }
        let (weight, state) = match self.off_cpu {
            None if s.kthread => return None,
            None => (1, None),
            Some(m) => {
                let (Some(ns), Some(state)) = (s.off_cpu, &s.switched) else {
                    self.off_cpu_other += 1;
                    return None;
                };
                if state.starts_with('R') && !m.preempted {
                    self.off_cpu_preempted += 1;
                    return None;
                }
                if ns < m.min_ns || m.max_ns.is_some_and(|max| ns > max) {
                    self.off_cpu_out_of_range += 1;
                    return None;
                }
                // A kernel thread's stack starts in kthread(); without it, the sample is
                // a user task's whose cookie the trace lost. Kernel threads have no user
                // frames for --user-only.
                if s.kthread {
                    if !m.kernel_threads
                        || self.view == StackView::UserOnly
                        || !s
                            .kernel
                            .iter()
                            .any(|k| kernel_name_is(k, &self.kallsyms, "kthread"))
                    {
                        self.off_cpu_other += 1;
                        return None;
                    }
                    self.off_cpu_kthreads += 1;
                }
                (ns, Some(self.string(state)))
            }
        };
        let kept = Kept {
            weight,
            kernel: self.view != StackView::UserOnly,
            kernel_from: if self.keep_tracing {
                0
            } else {
                tracing_frames(&s.event, &s.kernel, &self.kallsyms)
            },
            user: self.view != StackView::KernelOnly,
        };
        let event = self.string(&s.event);
        let comm = match &s.comm {
            Some(c) => self.string(c),
            None => self.string(&Rc::from("?")),
        };
        // Kernel frames (innermost first) above the user frames, as perf shows a
        // callchain.
        let mut frames: Vec<u32> = Vec::with_capacity(s.kernel.len() + s.frames.len());
        for k in kept.kernel_frames(s) {
            let key = match k {
                crate::events::KFrame::Addr(a) => FKey::KAddr(*a),
                crate::events::KFrame::Name(n) => FKey::KName(self.string(n)),
            };
            frames.push(self.intern(key));
        }
        let (mut complete, mut truncated) =
            (s.complete, s.truncated.as_ref().map(|r| self.string(r)));
        if !kept.user {
            (complete, truncated) = (true, None);
        } else {
            for f in &s.frames {
                let k = self.fkey(f);
                frames.push(k);
            }
        }
        let frames: Box<[u32]> = frames.into();
        let c = self
            .stacks
            .entry(RawStack {
                event,
                pid: s.pid,
                comm,
                complete,
                truncated,
                state,
                kthread: s.kthread,
                frames,
            })
            .or_default();
        c.n += weight;
        c.samples += 1;
        self.value += weight;
        if self.keep_times && !self.times_dropped {
            if self.times_kept < TIMES_MAX {
                c.times.push((s.ts, weight));
                self.times_kept += 1;
            } else {
                self.times_dropped = true;
                for c in self.stacks.values_mut() {
                    c.times = Vec::new();
                }
            }
        }
        self.samples += 1;
        self.first_ts = Some(self.first_ts.map_or(s.ts, |t| t.min(s.ts)));
        self.last_ts = self.last_ts.max(s.ts);
        Some(kept)
    }

    /// Distinct stacks so far, as the trace holds them.
    pub fn distinct(&self) -> usize {
        self.stacks.len()
    }

    /// Symbolize each distinct frame once and count the stacks by what is shown; `lines`
    /// puts `file:line` in the labels. The counts go on: `ustack top` draws a profile of
    /// them every second, the symbolizer's caches kept.
    pub fn profile(&self, sym: &mut Symbolizer, lines: bool) -> Profile {
        let mut p = Profile {
            samples: self.value,
            off_cpu: self.off_cpu.is_some(),
            first_ts: self.first_ts.unwrap_or(0),
            last_ts: self.last_ts,
            times: self.keep_times && !self.times_dropped,
            ..Profile::default()
        };
        let hex_ids: Vec<Option<String>> = self
            .files
            .iter()
            .map(|f| (!f.build_id.is_empty()).then(|| crate::symbolize::hex(&f.build_id)))
            .collect();
        // (frame key, return address, pid for anonymous frames) -> symbolized frame.
        let mut pf_ids: IdMap<(u32, bool, i32), u32> = IdMap::default();
        let mut pf_labels: Vec<Vec<u32>> = Vec::new();
        // (event, pid, task, complete, labels) -> (value, samples).
        type Shown = (u32, i32, u32, bool, Vec<u32>);
        let mut entries: IdMap<Shown, (u64, u64)> = IdMap::default();
        let mut stacks: Vec<(&RawStack, &Count)> = self.stacks.iter().collect();
        // Most frequent first, then in the order of the trace's first frames: the order
        // labels are numbered in, and so ties are broken in, is the same every run.
        stacks.sort_unstable_by(|a, b| {
            b.1.n.cmp(&a.1.n).then_with(|| {
                (
                    a.0.event,
                    a.0.pid,
                    a.0.comm,
                    a.0.complete,
                    a.0.truncated,
                    &a.0.frames,
                )
                    .cmp(&(
                        b.0.event,
                        b.0.pid,
                        b.0.comm,
                        b.0.complete,
                        b.0.truncated,
                        &b.0.frames,
                    ))
            })
        });
        for (raw, c) in stacks {
            let (count, nsamples) = (c.n, c.samples);
            let mut times = c.times.clone();
            times.sort_unstable();
            let mut frames: Vec<u32> = Vec::new();
            let mut pfs = Vec::with_capacity(raw.frames.len());
            let nkernel = raw
                .frames
                .iter()
                .take_while(|&&k| self.fkeys[k as usize].is_kernel())
                .count();
            for (i, &fk) in raw.frames.iter().enumerate() {
                let k = fk;
                let key = self.fkeys[k as usize];
                if key.is_kernel() {
                    let pf = match pf_ids.get(&(k, false, 0)) {
                        Some(&i) => i,
                        None => {
                            let kf = match key {
                                FKey::KAddr(a) => crate::events::KFrame::Addr(a),
                                FKey::KName(n) => crate::events::KFrame::Name(Rc::clone(
                                    &self.strings[n as usize],
                                )),
                                _ => unreachable!("a kernel key"),
                            };
                            let named = sym.kernel(&kf);
                            let addr = match key {
                                FKey::KAddr(a) => Some(a),
                                _ => None,
                            };
                            let fallback = addr.map(|a| format!("{a:#x}")).unwrap_or_default();
                            let module = Some(
                                named
                                    .as_ref()
                                    .map(|n| n.module.clone())
                                    .unwrap_or_else(|| crate::symbolize::KERNEL_MODULE.into()),
                            );
                            let label = p.label(Label {
                                name: escape(named.as_ref().map_or(&fallback, |n| &n.name)),
                                module: module.as_deref().map(escape),
                                source: None,
                                line: None,
                                inlined: false,
                                synthetic: false,
                                kernel: true,
                            });
                            p.frames.push(PFrame {
                                module,
                                build_id: None,
                                offset: addr,
                                syms: named.map(|n| {
                                    Rc::from(vec![Sym {
                                        name: n.name,
                                        file: None,
                                        line: None,
                                        inlined: false,
                                    }])
                                }),
                                fallback,
                                kernel: true,
                            });
                            pf_labels.push(vec![label]);
                            let i = p.frames.len() as u32 - 1;
                            pf_ids.insert((k, false, 0), i);
                            i
                        }
                    };
                    pfs.push(pf);
                    frames.extend_from_slice(&pf_labels[pf as usize]);
                    continue;
                }
                let depth = i - nkernel;
                let pid = if matches!(key, FKey::Anon(..)) {
                    raw.pid
                } else {
                    0
                };
                let id = (k, depth > 0, pid);
                let pf = match pf_ids.get(&id) {
                    Some(&i) => i,
                    None => {
                        let frame = rebuild(&self.files, key);
                        let syms = sym.resolve(raw.pid, &frame, depth);
                        let (module, build_id, offset) = match key {
                            FKey::File(f, o) | FKey::Special(f, o) => (
                                Some(self.files[f as usize].path.clone()),
                                hex_ids[f as usize].clone(),
                                Some(o),
                            ),
                            FKey::Anon(n, a) => (
                                n.map(|n| self.files[n as usize].path.clone()),
                                None,
                                Some(a),
                            ),
                            _ => (None, None, None),
                        };
                        let fallback = fallback_name(&frame);
                        let labels: Vec<u32> = match &syms {
                            Some(s) => s
                                .iter()
                                .map(|s: &Sym| {
                                    p.label(Label {
                                        name: escape(&s.name),
                                        module: module.as_deref().map(escape),
                                        source: if lines {
                                            s.file.as_deref().map(escape)
                                        } else {
                                            None
                                        },
                                        line: if lines { s.line } else { None },
                                        inlined: s.inlined,
                                        synthetic: false,
                                        kernel: false,
                                    })
                                })
                                .collect(),
                            None => vec![p.label(Label {
                                name: escape(&fallback),
                                module: module.as_deref().map(escape),
                                source: None,
                                line: None,
                                inlined: false,
                                synthetic: false,
                                kernel: false,
                            })],
                        };
                        p.frames.push(PFrame {
                            module,
                            build_id,
                            offset,
                            syms,
                            fallback,
                            kernel: false,
                        });
                        pf_labels.push(labels);
                        let i = p.frames.len() as u32 - 1;
                        pf_ids.insert(id, i);
                        i
                    }
                };
                pfs.push(pf);
                frames.extend_from_slice(&pf_labels[pf as usize]);
            }
            let user = raw.frames.len() - nkernel;
            if !raw.complete && user > 0 {
                frames.push(p.label(Label::synthetic("[truncated]")));
            }
            let truncated = raw.truncated.map(|r| Rc::clone(&self.strings[r as usize]));
            if let Some(r) = &truncated {
                frames.push(p.label(Label::synthetic(&format!("[truncated: {r}]"))));
            }
            if raw.kthread {
                let comm = &self.strings[raw.comm as usize];
                frames.push(p.label(Label::synthetic(&format!("[kernel thread {comm}]"))));
            } else if raw.frames.is_empty() || (user == 0 && self.view != StackView::KernelOnly) {
                let m = if self.view == StackView::KernelOnly {
                    "[no kernel stack]"
                } else if raw.complete {
                    "[no user frames]"
                } else {
                    "[no stack]"
                };
                frames.push(p.label(Label::synthetic(m)));
            }
            // Off-CPU: the state the task waited in, under the event.
            if let Some(st) = raw.state {
                frames.push(p.label(Label::synthetic(&format!(
                    "[{}]",
                    self.strings[st as usize]
                ))));
            }
            frames.reverse();
            let event = p.label(Label::synthetic(&self.strings[raw.event as usize]));
            let comm = Rc::clone(&self.strings[raw.comm as usize]);
            let task = p.label(Label::synthetic(&format!("{comm}-{}", raw.pid)));
            for &f in &pfs {
                let pf = &p.frames[f as usize];
                let unnamed = u64::from(pf.syms.is_none());
                if pf.kernel {
                    p.kernel_frames += nsamples;
                    p.kernel_unnamed += nsamples * unnamed;
                } else {
                    p.frames_total += nsamples;
                    p.frames_unnamed += nsamples * unnamed;
                }
            }
            p.raw.push(RawEntry {
                event,
                task,
                frames: pfs,
                complete: raw.complete,
                truncated,
                state: raw.state.map(|st| Rc::clone(&self.strings[st as usize])),
                count,
                times,
            });
            let e = entries
                .entry((event, raw.pid, task, raw.complete, frames))
                .or_default();
            e.0 += count;
            e.1 += nsamples;
        }
        p.entries = entries
            .into_iter()
            .map(|((event, pid, task, _, frames), (count, samples))| Entry {
                event,
                pid,
                task,
                frames,
                count,
                samples,
            })
            .collect();
        p.entries.sort_unstable_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| (a.event, a.pid, &a.frames).cmp(&(b.event, b.pid, &b.frames)))
        });
        p
    }
}

/// A frame again, from its key, for the symbolizer.
fn rebuild(files: &[Rc<FileInfo>], k: FKey) -> Frame {
    match k {
        FKey::File(f, offset) => Frame::File {
            file: Rc::clone(&files[f as usize]),
            offset,
        },
        FKey::Special(f, offset) => Frame::Special {
            file: Rc::clone(&files[f as usize]),
            offset,
        },
        FKey::Anon(n, addr) => Frame::Anon {
            addr,
            name: n.map(|n| Rc::clone(&files[n as usize])),
        },
        FKey::Unresolved(cookie, value) => Frame::Unresolved { cookie, value },
        FKey::BadIndex(value) => Frame::BadIndex { value },
        // Kernel frames are named from kallsyms, never rebuilt for the file symbolizer.
        FKey::KAddr(value) => Frame::BadIndex { value },
        FKey::KName(_) => Frame::BadIndex { value: 0 },
    }
}

/// The name of a frame nothing names.
fn fallback_name(f: &Frame) -> String {
    match f {
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
    }
}

/// A symbolized frame of the trace, for pprof: its file, build-id (hex), offset and
/// functions (innermost first), or the name it is shown with.
#[derive(Debug, Clone)]
pub struct PFrame {
    pub module: Option<String>,
    pub build_id: Option<String>,
    pub offset: Option<u64>,
    pub syms: Option<Rc<[Sym]>>,
    pub fallback: String,
    /// A kernel frame: `offset` is its address, `module` `[kernel.kallsyms]` or a module.
    pub kernel: bool,
}

/// A stack as the trace holds it (frames innermost first), counted.
#[derive(Debug, Clone)]
pub struct RawEntry {
    pub event: u32,
    pub task: u32,
    pub frames: Vec<u32>,
    pub complete: bool,
    /// Why the unwinder stopped short of the outermost frame, if it did.
    pub truncated: Option<Rc<str>>,
    pub count: u64,
    /// Off-CPU: the state its task was switched out in.
    pub state: Option<Rc<str>>,
    /// The (time, value) of its samples, in time order, when [`Profile::times`].
    pub times: Vec<(u64, u64)>,
}

/// A stack as shown: event and task labels, frames outermost first.
#[derive(Debug, Clone)]
pub struct Entry {
    pub event: u32,
    pub pid: i32,
    pub task: u32,
    pub frames: Vec<u32>,
    /// Its value: samples, or off-CPU nanoseconds.
    pub count: u64,
    /// Its samples (with `--off-cpu`, the times its task blocked).
    pub samples: u64,
}

/// Counted stacks by what they show.
#[derive(Debug, Default)]
pub struct Profile {
    pub labels: Vec<Label>,
    label_ids: HashMap<Label, u32>,
    /// Each label's text (folded, flame graph), and its index among the distinct texts.
    pub texts: Vec<String>,
    text_ids: HashMap<String, u32>,
    pub label_text: Vec<u32>,
    /// Most frequent first.
    pub entries: Vec<Entry>,
    pub frames: Vec<PFrame>,
    pub raw: Vec<RawEntry>,
    /// The samples' value in all: their count, or off-CPU nanoseconds.
    pub samples: u64,
    /// Values are off-CPU nanoseconds, not sample counts.
    pub off_cpu: bool,
    pub first_ts: u64,
    pub last_ts: u64,
    /// The times are the time of day (the trace maps its clock to it: `trace-cmd record
    /// --date`), not a clock's count from boot.
    pub wall_clock: bool,
    /// Every raw entry has its samples' times.
    pub times: bool,
    /// Frames of the samples kept, and those nothing named (shown as `file+0xoffset`).
    pub frames_total: u64,
    pub frames_unnamed: u64,
    /// Kernel frames of the samples kept, and those the trace's kallsyms did not cover.
    pub kernel_frames: u64,
    pub kernel_unnamed: u64,
    /// The text stacks of the last call, for the next output.
    text_cache: RefCell<Option<(bool, Rc<Stacks>)>>,
}

impl Profile {
    fn label(&mut self, l: Label) -> u32 {
        if let Some(&i) = self.label_ids.get(&l) {
            return i;
        }
        let t = l.text();
        let ti = match self.text_ids.get(&t) {
            Some(&i) => i,
            None => {
                self.texts.push(t.clone());
                self.text_ids.insert(t, self.texts.len() as u32 - 1);
                self.texts.len() as u32 - 1
            }
        };
        self.label_text.push(ti);
        self.labels.push(l.clone());
        self.label_ids.insert(l, self.labels.len() as u32 - 1);
        self.labels.len() as u32 - 1
    }

    /// Stacks of labels, root first (event, the task if `task`, outermost frame first),
    /// counted by label, most frequent first (ties in label order).
    pub fn label_stacks(&self, task: bool) -> Vec<(Vec<u32>, u64)> {
        let mut v = self.label_stacks_unsorted(task);
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    fn label_stacks_unsorted(&self, task: bool) -> Vec<(Vec<u32>, u64)> {
        if task {
            // Every entry is one (event, task, frames) already.
            return self
                .entries
                .iter()
                .map(|e| {
                    let mut s = Vec::with_capacity(e.frames.len() + 2);
                    s.push(e.event);
                    s.push(e.task);
                    s.extend_from_slice(&e.frames);
                    (s, e.count)
                })
                .collect();
        }
        let mut m: IdMap<Vec<u32>, u64> = IdMap::default();
        for e in &self.entries {
            let mut s = Vec::with_capacity(e.frames.len() + 1);
            s.push(e.event);
            s.extend_from_slice(&e.frames);
            *m.entry(s).or_default() += e.count;
        }
        m.into_iter().collect()
    }

    /// Stacks of texts (indices into `texts`), root first, counted by text, most frequent
    /// first: what folded stacks, flame graphs and speedscope show.
    pub fn text_stacks(&self, task: bool) -> Rc<Stacks> {
        if let Some((t, v)) = &*self.text_cache.borrow() {
            if *t == task {
                return Rc::clone(v);
            }
        }
        let mut m: IdMap<Vec<u32>, u64> = IdMap::default();
        for (mut s, n) in self.label_stacks_unsorted(task) {
            for l in s.iter_mut() {
                *l = self.label_text[*l as usize];
            }
            *m.entry(s).or_default() += n;
        }
        let mut v: Vec<(Vec<u32>, u64)> = m.into_iter().collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let v = Rc::new(v);
        *self.text_cache.borrow_mut() = Some((task, Rc::clone(&v)));
        v
    }
}

/// Symbolize and count the samples `filter` keeps (the whole pipeline on samples in
/// memory, for tests).
pub fn profile(samples: &[Sample], sym: &mut Symbolizer, filter: &Filter, lines: bool) -> Profile {
    let mut a = Aggregator::new(filter.clone());
    for s in samples {
        let _ = a.add(s);
    }
    a.profile(sym, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_frames_are_the_events_own() {
        use crate::events::KFrame;
        let names =
            |v: &[&str]| -> Vec<KFrame> { v.iter().map(|n| KFrame::Name(Rc::from(*n))).collect() };
        let none = crate::kallsyms::Kallsyms::default();
        let sw = names(&[
            "trace_event_raw_event_sched_switch",
            "__traceiter_sched_switch",
            "__do_trace_sched_switch",
            "__schedule",
            "schedule",
        ]);
        assert_eq!(tracing_frames("sched:sched_switch", &sw, &none), 3);
        // Another event's functions are not this one's machinery.
        assert_eq!(tracing_frames("sched:sched_wakeup", &sw, &none), 1);
        let se = names(&[
            "trace_event_raw_event_sys_enter",
            "__do_trace_sys_enter",
            "trace_syscall_enter",
            "do_syscall_64",
        ]);
        assert_eq!(tracing_frames("raw_syscalls:sys_enter", &se, &none), 2);
        // A class probe counts only innermost; the event's own name anywhere in the run.
        let wk = names(&[
            "perf_trace_sched_wakeup_template.isra.0",
            "trace_sched_wakeup",
            "trace_event_raw_event_sched_switch",
            "try_to_wake_up",
        ]);
        assert_eq!(tracing_frames("sched_wakeup", &wk, &none), 2);
        assert_eq!(
            tracing_frames("sched_wakeup", &names(&["__schedule"]), &none),
            0
        );
        // A stack the event's machinery is not in (the text's, already cut) stays whole.
        let text = names(&["trace_syscall_enter", "do_syscall_64+0x5d/0x170"]);
        assert_eq!(tracing_frames("sys_enter", &text, &none), 0);
    }

    #[test]
    fn labels_as_folded_text() {
        let l = Label {
            name: escape("inl;ined\n"),
            module: None,
            source: Some("/src/a.h".into()),
            line: Some(7),
            inlined: true,
            synthetic: false,
            kernel: false,
        };
        assert_eq!(l.text(), "inl:ined\\n_[i] (a.h:7)");
        assert_eq!(escape("a\x1b[0m\tb"), "a\\x1b[0m\\tb");
    }

    #[test]
    fn blocking_times_as_offcputime_takes_them() {
        assert_eq!(parse_duration("10ms"), Some(10_000_000));
        assert_eq!(parse_duration("500us"), Some(500_000));
        assert_eq!(parse_duration("2s"), Some(2_000_000_000));
        assert_eq!(parse_duration("250ns"), Some(250));
        assert_eq!(parse_duration("0.1ms"), Some(100_000));
        // A bare number is microseconds, as offcputime -m and -M.
        assert_eq!(parse_duration("1000"), Some(1_000_000));
        for bad in ["", "ms", "-1ms", "soon", "1e30s", "NaNms", "inf"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
