// SPDX-License-Identifier: GPL-2.0

//! The events the tool works with, decoded from a trace.dat (through the file's own
//! formats) or parsed from the text of the `trace` file: the module's three events, and
//! every other event as a possible trigger.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::rc::Rc;

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::format::{Field, Format, PageHeader, Record};
use crate::ringbuf::{self, Missed};
use crate::tracedat::{CpuReader, TraceDat};

/// One frame of a `user_unwind_stack` record: the value (a file offset, or a raw address
/// for anonymous memory) and its file cookie (`None`: the record's index was bad).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame {
    pub value: u64,
    pub file: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Cookie {
        cookie: u64,
    },
    Stack {
        cookie: u64,
        start: u16,
        total: u16,
        frames: Vec<RawFrame>,
    },
    FileCache {
        cookie: u64,
        path: String,
        build_id: Vec<u8>,
    },
    /// `user_unwind_truncated`: the stack of `cookie`, just written, ends short of its
    /// outermost frame, for `reason` (by its name as the event prints it).
    Truncated {
        cookie: u64,
        reason: Rc<str>,
    },
    /// `ftrace:kernel_stack` (the `stacktrace` option, `trace-cmd record -T`): the kernel
    /// stack of the event before it on its CPU, innermost frame first.
    KernelStack {
        frames: Vec<KFrame>,
    },
    /// `sched:sched_switch`: task `prev_pid` switched out in state `prev_state` (as the
    /// event prints it: `S`, `D`, `R+`...), `next_pid` in, each with its name then
    /// (`prev_comm`, `next_comm`). A possible trigger.
    Switch {
        name: Rc<str>,
        prev_pid: i32,
        prev_state: Rc<str>,
        next_pid: i32,
        prev_comm: Option<Rc<str>>,
        next_comm: Option<Rc<str>>,
    },
    /// Any other event: a possible trigger, named `system:event` (or `event` from text).
    Other {
        name: Rc<str>,
    },
    /// `task:task_newtask`: task `child` was created by the event's task, as its thread
    /// (CLONE_THREAD) or as a new process, named `comm` (its parent's name then). A
    /// possible trigger too.
    NewTask {
        name: Rc<str>,
        child: i32,
        thread: bool,
        comm: Option<Rc<str>>,
    },
    /// `task:task_rename` (`prctl(PR_SET_NAME)`, and exec, which renames through it) or
    /// `sched:sched_process_exec`: task `pid` is named `comm` from now on (`None`: a name
    /// the event does not tell, an exec of a file descriptor). A possible trigger.
    Rename {
        name: Rc<str>,
        pid: i32,
        comm: Option<Rc<str>>,
    },
}

/// A kernel frame as the trace has it: an address (trace.dat, named through its kallsyms)
/// or the name the kernel printed (the trace file's text).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KFrame {
    Addr(u64),
    Name(Rc<str>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub ts: u64,
    pub cpu: u32,
    pub pid: i32,
    /// The task's thread group, when the trace says (the text's `(tgid)` column).
    pub tgid: Option<i32>,
    pub comm: Option<Rc<str>>,
    pub kind: Kind,
}

impl Kind {
    /// The name of an event that may trigger a stack: not one of the module's own, which
    /// it writes after a stack (`user_unwind_truncated`) and requests none for.
    pub fn trigger(&self) -> Option<&Rc<str>> {
        match self {
            Kind::Other { name } if is_module_event(name) => None,
            Kind::Other { name }
            | Kind::NewTask { name, .. }
            | Kind::Switch { name, .. }
            | Kind::Rename { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// The kernel's trace events and their systems (`system:event` lines), from its sources
/// (`tools/event-systems.py`).
const EVENT_SYSTEMS: &str = include_str!("event_systems.txt");

/// The system-qualified name of an event the trace file's text names bare
/// (`sys_enter` is `raw_syscalls:sys_enter`), as trace.dat names it: from the kernel's
/// table, `syscalls:` for `sys_enter_*` and `sys_exit_*`, `user_unwind:` for the
/// module's; a name the table does not know (or knows in two systems) stays bare.
pub fn qualified(name: &str) -> String {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static TABLE: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    if name.contains(':') {
        return name.to_string();
    }
    if name.starts_with("sys_enter_") || name.starts_with("sys_exit_") {
        return format!("syscalls:{name}");
    }
    if name.starts_with("user_unwind_") || name == "file_cache" {
        return format!("user_unwind:{name}");
    }
    let t = TABLE.get_or_init(|| {
        EVENT_SYSTEMS
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(':').map(|(s, e)| (e, s)))
            .collect()
    });
    match t.get(name) {
        Some(s) => format!("{s}:{name}"),
        None => name.to_string(),
    }
}

/// An event of the module's `user_unwind` system, as trace.dat names it (`system:name`) or
/// as the trace file's text does (the bare name).
fn is_module_event(name: &str) -> bool {
    name.starts_with("user_unwind:") || name.starts_with("user_unwind_")
}

/// CLONE_THREAD, in task_newtask's clone_flags.
const CLONE_THREAD: u64 = 0x10000;

/// Field lookups of the module's events, resolved once from the file's formats.
struct Layouts {
    /// task:task_newtask's id, pid, clone_flags and comm.
    newtask: Option<(u16, Field, Field, Option<Field>)>,
    cookie: Option<(u16, Field)>,
    stack: Option<StackFields>,
    file_cache: Option<FileCacheFields>,
    /// user_unwind_truncated's id, cookie and reason.
    truncated: Option<(u16, Field, Field)>,
    /// ftrace:kernel_stack's id, size and caller[].
    kstack: Option<(u16, Field, Field)>,
    /// sched:sched_switch's id, prev_pid, prev_state and next_pid, and its prev_comm and
    /// next_comm.
    switch: Option<(u16, Field, Field, Field)>,
    switch_comms: Option<(Field, Field)>,
    /// task:task_rename's id, its pid (older kernels; else the event's task) and newcomm.
    rename: Option<(u16, Option<Field>, Field)>,
    /// sched:sched_process_exec's id, filename and pid.
    exec: Option<(u16, Field, Field)>,
}

/// user_unwind_truncated's reason, as its `__print_symbolic` names it (src/events.h).
pub fn truncation_reason(r: u64) -> Rc<str> {
    match r {
        1 => "limit".into(),
        2 => "table".into(),
        3 => "bad_frame".into(),
        4 => "read".into(),
        5 => "not_user".into(),
        n => format!("{n:#x}").into(),
    }
}

struct StackFields {
    id: u16,
    cookie: Field,
    start: Field,
    total: Field,
    files: Field,
    offs: Field,
    index: FrameIndex,
}

/// Where a stack record keeps each frame's file index.
enum FrameIndex {
    /// In the top `idx_bits` bits of the frame's word (its second word when `wide`).
    Packed { idx_bits: Field, wide: Field },
    /// In a byte array of its own: the module's records before the index was packed.
    Bytes(Field),
}

struct FileCacheFields {
    id: u16,
    cookie: Field,
    path: Field,
    build_id: Field,
}

fn fields<const N: usize>(f: &Format, names: [&str; N]) -> Option<[Field; N]> {
    let mut out = Vec::with_capacity(N);
    for n in names {
        out.push(f.field(n)?.clone());
    }
    out.try_into().ok()
}

impl Layouts {
    fn new(formats: &HashMap<u16, Format>) -> Result<Layouts> {
        let missing = |e: &str| Error::new(format!("the trace's {e} format lacks a field"));
        let t = Named(formats);
        let cookie = match t.format_named("user_unwind", "user_unwind_cookie") {
            Some(f) => Some((
                f.id,
                f.field("cookie").ok_or_else(|| missing(&f.name))?.clone(),
            )),
            None => None,
        };
        let stack = match t.format_named("user_unwind", "user_unwind_stack") {
            Some(f) => {
                let [cookie, start, total, files, offs] =
                    fields(f, ["cookie", "start", "total", "files", "offs"])
                        .ok_or_else(|| missing(&f.name))?;
                let index = match f.field("file_idx") {
                    Some(idx) => FrameIndex::Bytes(idx.clone()),
                    None => {
                        let [idx_bits, wide] =
                            fields(f, ["idx_bits", "wide"]).ok_or_else(|| missing(&f.name))?;
                        FrameIndex::Packed { idx_bits, wide }
                    }
                };
                Some(StackFields {
                    id: f.id,
                    cookie,
                    start,
                    total,
                    files,
                    offs,
                    index,
                })
            }
            None => None,
        };
        let file_cache = match t.format_named("user_unwind", "file_cache") {
            Some(f) => {
                let [cookie, path, build_id] =
                    fields(f, ["cookie", "path", "build_id"]).ok_or_else(|| missing(&f.name))?;
                Some(FileCacheFields {
                    id: f.id,
                    cookie,
                    path,
                    build_id,
                })
            }
            None => None,
        };
        let truncated = match t.format_named("user_unwind", "user_unwind_truncated") {
            Some(f) => {
                let [cookie, reason] =
                    fields(f, ["cookie", "reason"]).ok_or_else(|| missing(&f.name))?;
                Some((f.id, cookie, reason))
            }
            None => None,
        };
        let newtask = t.format_named("task", "task_newtask").and_then(|f| {
            Some((
                f.id,
                f.field("pid")?.clone(),
                f.field("clone_flags")?.clone(),
                f.field("comm").cloned(),
            ))
        });
        let rename = t
            .format_named("task", "task_rename")
            .and_then(|f| Some((f.id, f.field("pid").cloned(), f.field("newcomm")?.clone())));
        let exec = t
            .format_named("sched", "sched_process_exec")
            .and_then(|f| Some((f.id, f.field("filename")?.clone(), f.field("pid")?.clone())));
        let kstack = t
            .format_named("ftrace", "kernel_stack")
            .and_then(|f| Some((f.id, f.field("size")?.clone(), f.field("caller")?.clone())));
        let switch = t.format_named("sched", "sched_switch").and_then(|f| {
            Some((
                f.id,
                f.field("prev_pid")?.clone(),
                f.field("prev_state")?.clone(),
                f.field("next_pid")?.clone(),
            ))
        });
        let switch_comms = t
            .format_named("sched", "sched_switch")
            .and_then(|f| Some((f.field("prev_comm")?.clone(), f.field("next_comm")?.clone())));
        Ok(Layouts {
            switch,
            switch_comms,
            rename,
            exec,
            kstack,
            newtask,
            cookie,
            stack,
            file_cache,
            truncated,
        })
    }

    /// Is `id` one of the module's events?
    fn is_ours(&self, id: u16) -> bool {
        [
            self.cookie.as_ref().map(|c| c.0),
            self.stack.as_ref().map(|s| s.id),
            self.file_cache.as_ref().map(|f| f.id),
            self.truncated.as_ref().map(|t| t.0),
        ]
        .contains(&Some(id))
    }
}

/// A trace's formats, looked up by name.
struct Named<'a>(&'a HashMap<u16, Format>);

impl Named<'_> {
    fn format_named(&self, system: &str, name: &str) -> Option<&Format> {
        self.0
            .values()
            .find(|f| f.system == system && f.name == name)
    }
}

/// `files[]` and `offs[]` to frames, each frame's file index in the top `idx_bits` bits of
/// its word: offs holds a word a frame, or in a `wide` record two (the low halves of the
/// values, then the index and the high halves).
pub fn decode_packed_frames(
    files: &[u64],
    offs: &[u32],
    idx_bits: u32,
    wide: bool,
) -> Vec<RawFrame> {
    let nr = if wide { offs.len() / 2 } else { offs.len() };
    // A damaged idx_bits reads as none, as the module's own output does.
    let bits = if idx_bits < 32 { idx_bits } else { 0 };
    let vmask = u32::MAX >> bits;
    (0..nr)
        .map(|i| {
            let word = if wide { offs[nr + i] } else { offs[i] };
            let idx = if bits == 0 { 0 } else { word >> (32 - bits) };
            let mut value = u64::from(word & vmask);
            if wide {
                // A wide value is signed: sign-extended from its 64 - bits bits.
                value = (((value << 32 | u64::from(offs[i])) << bits) as i64 >> bits) as u64;
            }
            RawFrame {
                value,
                file: files.get(idx as usize).copied(),
            }
        })
        .collect()
}

/// `files[]`, `offs[]` and `file_idx[]` to frames, as the module recorded them before the
/// index was packed into the offset words: offs holds `2 * nr` values in a wide record
/// (low halves, then high halves).
pub fn decode_frames(files: &[u64], offs: &[u32], idx: &[u8]) -> Vec<RawFrame> {
    let nr = idx.len().min(offs.len());
    let wide = nr > 0 && offs.len() >= 2 * nr;
    (0..nr)
        .map(|i| {
            let mut value = u64::from(offs[i]);
            if wide {
                value |= u64::from(offs[nr + i]) << 32;
            }
            RawFrame {
                value,
                file: files.get(usize::from(idx[i])).copied(),
            }
        })
        .collect()
}

fn words<T>(b: &[u8], size: usize, f: impl Fn(&[u8]) -> T) -> Vec<T> {
    b.chunks_exact(size).map(f).collect()
}

/// Ring-buffer pages to events, by a trace's formats: trace.dat's sub-buffers and, live,
/// what `per_cpu/cpuN/trace_pipe_raw` reads.
pub struct PageDecoder {
    layouts: Layouts,
    names: HashMap<u16, Rc<str>>,
    /// Task names by pid (trace.dat's saved cmdlines), given to the events.
    pub comms: HashMap<i32, Rc<str>>,
    /// The task names the records carry (sched_switch's, task_rename's...), one `Rc` each.
    task_names: TaskNames,
    endian: Endian,
    header: PageHeader,
    /// The size of a whole page: a shorter one is the last of a file cut short.
    page_size: usize,
}

impl PageDecoder {
    /// A decoder by `formats` (event id to format), for pages of `page_size` bytes laid
    /// out as `header` says.
    pub fn new(
        formats: &HashMap<u16, Format>,
        header: PageHeader,
        page_size: usize,
        endian: Endian,
        comms: &HashMap<i32, String>,
    ) -> Result<Self> {
        Ok(PageDecoder {
            layouts: Layouts::new(formats)?,
            names: formats
                .iter()
                .map(|(id, f)| (*id, Rc::from(f.full_name())))
                .collect(),
            comms: comms
                .iter()
                .map(|(p, c)| (*p, Rc::from(c.as_str())))
                .collect(),
            task_names: TaskNames::default(),
            endian,
            header,
            page_size,
        })
    }

    /// The events of one page of CPU `cpu`, each passed to `f`; what the writer lost
    /// before the page. Records of the module's events too short for their format are
    /// skipped and counted in `bad`; an event whose format is unknown is skipped. A
    /// malformed page is an error after the events before the damage.
    pub fn page(
        &mut self,
        cpu: u32,
        page: &[u8],
        bad: &mut usize,
        mut f: impl FnMut(Event),
    ) -> Result<Missed> {
        ringbuf::parse_page(
            page,
            self.page_size,
            &self.header,
            self.endian,
            |ts, data| {
                if let Some(e) = decode_event(
                    &self.layouts,
                    &self.names,
                    &self.comms,
                    &mut self.task_names,
                    self.endian,
                    cpu,
                    ts,
                    data,
                    bad,
                ) {
                    f(e);
                }
            },
        )
    }
}

/// The events of a trace.dat, decoded a page at a time and merged across CPUs in
/// timestamp order (ties keep CPU order): memory holds a page of each CPU, not the trace.
/// A damaged page or chunk ends its CPU's events and is listed in `damage`; records of the
/// module's events too short for their format are skipped and counted in `bad`.
pub struct DatStream<'a> {
    pub t: TraceDat,
    bytes: &'a [u8],
    decoder: PageDecoder,
    readers: Vec<CpuReader>,
    queues: Vec<VecDeque<Event>>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    started: bool,
    pub bad: usize,
    pub lost: u64,
    pub damage: Vec<Error>,
    /// Told of each range of the file read (start, end), when a MiB more has been.
    release: Option<Box<dyn FnMut(u64, u64) + 'a>>,
    released: Vec<u64>,
}

impl<'a> DatStream<'a> {
    pub fn new(t: TraceDat, bytes: &'a [u8]) -> Result<Self> {
        let decoder = PageDecoder::new(&t.formats, t.header, t.page_size, t.endian, &t.comms)?;
        let readers: Vec<CpuReader> = t.cpus.iter().map(|c| t.reader(c)).collect();
        let released = readers.iter().map(CpuReader::position).collect();
        let damage = t.damage.clone();
        let lost = t.lost;
        Ok(DatStream {
            queues: readers.iter().map(|_| VecDeque::new()).collect(),
            readers,
            t,
            bytes,
            decoder,
            heap: BinaryHeap::new(),
            started: false,
            bad: 0,
            lost,
            damage,
            release: None,
            released,
        })
    }

    /// Call `f(start, end)` with the ranges of the file that have been read, to drop them
    /// from memory.
    pub fn on_release(&mut self, f: impl FnMut(u64, u64) + 'a) {
        self.release = Some(Box::new(f));
    }

    /// Bytes of the file read so far (event data).
    pub fn bytes_read(&self) -> u64 {
        self.readers
            .iter()
            .zip(&self.t.cpus)
            .map(|(r, c)| match c.src {
                crate::tracedat::CpuSource::Plain { off, .. }
                | crate::tracedat::CpuSource::Chunks { off, .. } => r.position() - off,
            })
            .sum()
    }

    /// Fill CPU `i`'s queue with the events of its next pages, until it has one.
    fn refill(&mut self, i: usize) {
        let DatStream {
            t,
            bytes,
            decoder,
            readers,
            queues,
            bad,
            lost,
            damage,
            ..
        } = self;
        let r = &mut readers[i];
        let q = &mut queues[i];
        while q.is_empty() {
            let mut res = Ok(Missed::None);
            let cpu = r.cpu;
            let got = r.next_page(bytes, |page| {
                res = decoder.page(cpu, page, bad, |e| q.push_back(e));
            });
            match got {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    damage.push(e.context(&format!("CPU {cpu}")));
                    break;
                }
            }
            match res {
                Ok(Missed::None) => {}
                Ok(Missed::Count(n)) => *lost += n,
                Ok(Missed::Unknown) => *lost += 1,
                Err(e) => {
                    // The last page of a file cut short: the file's damage says so.
                    if !(t.cut && r.position() == bytes.len() as u64) {
                        damage.push(
                            e.context(&format!("CPU {cpu} at file offset {:#x}", r.position())),
                        );
                    }
                    r.done = true;
                    break;
                }
            }
        }
        let pos = readers[i].position();
        if pos >= self.released[i] + (1 << 20) || readers[i].done {
            if let Some(f) = self.release.as_mut() {
                f(self.released[i], pos);
            }
            self.released[i] = pos;
        }
    }
}

impl Iterator for DatStream<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if !self.started {
            self.started = true;
            for i in 0..self.readers.len() {
                self.refill(i);
                if let Some(e) = self.queues[i].front() {
                    self.heap.push(Reverse((e.ts, i)));
                }
            }
        }
        let Reverse((_, i)) = self.heap.pop()?;
        let mut e = self.queues[i].pop_front()?;
        if self.queues[i].is_empty() {
            self.refill(i);
        }
        if let Some(n) = self.queues[i].front() {
            self.heap.push(Reverse((n.ts, i)));
        }
        // The file's time offset (trace-cmd record --date, --ts-offset), as trace-cmd
        // report applies it: the order is the same.
        e.ts = e.ts.saturating_add_signed(self.t.ts_offset);
        Some(e)
    }
}

/// Task names read from records, one `Rc` each: a trace names the same few tasks over and
/// over (every sched_switch names two).
#[derive(Default)]
struct TaskNames(HashMap<Box<[u8]>, Rc<str>>);

impl TaskNames {
    /// At most this many names are kept; past it they are read afresh.
    const MAX: usize = 1 << 16;

    /// The name in `b`, up to its NUL; `None` when empty.
    fn get(&mut self, b: &[u8]) -> Option<Rc<str>> {
        let b = b.split(|&c| c == 0).next().unwrap_or(b);
        if b.is_empty() {
            return None;
        }
        if let Some(n) = self.0.get(b) {
            return Some(Rc::clone(n));
        }
        if self.0.len() >= Self::MAX {
            self.0.clear();
        }
        let n: Rc<str> = String::from_utf8_lossy(b).into();
        self.0.insert(b.into(), Rc::clone(&n));
        Some(n)
    }
}

/// The name exec gives a task running `filename` (fs/exec.c, `begin_new_exec`): its base
/// name, cut to the 15 bytes a task's name holds. `None` for an exec of a file descriptor
/// (`/dev/fd/N`): the kernel names the task after the file, which the event does not say.
pub fn exec_comm(filename: &[u8]) -> Option<&[u8]> {
    let rest = filename.strip_prefix(b"/dev/fd/");
    if rest.is_some_and(|r| !r.is_empty() && r.iter().all(u8::is_ascii_digit)) {
        return None;
    }
    let base = filename.rsplit(|&c| c == b'/').next().unwrap_or(filename);
    Some(&base[..base.len().min(15)])
}

#[allow(clippy::too_many_arguments)]
fn decode_event(
    layouts: &Layouts,
    names: &HashMap<u16, Rc<str>>,
    comms: &HashMap<i32, Rc<str>>,
    task_names: &mut TaskNames,
    endian: Endian,
    cpu: u32,
    ts: u64,
    data: &[u8],
    bad: &mut usize,
) -> Option<Event> {
    let pid_field = Field {
        name: String::new(),
        offset: 4,
        size: 4,
        signed: true,
        data_loc: false,
        rel_loc: false,
    };
    let r = Record { data, endian };
    let Some(id) = endian.uint(data, 2).map(|v| v as u16) else {
        *bad += 1;
        return None;
    };
    let pid = r.int(&pid_field).map(|p| p as i32).unwrap_or(-1);
    let kind = if layouts.is_ours(id) {
        // A record of ours that does not fit its format is counted.
        let kind = decode(layouts, id, &r, endian);
        *bad += usize::from(kind.is_none());
        kind
    } else {
        // An event whose format the file does not have is skipped.
        names.get(&id).map(|n| match &layouts.kstack {
            Some((kid, size, caller)) if *kid == id => Kind::KernelStack {
                frames: kernel_frames(&r, endian, size, caller),
            },
            _ if layouts.switch.as_ref().is_some_and(|s| s.0 == id) => {
                let Some((_, prev, state, next)) = &layouts.switch else {
                    unreachable!("checked above");
                };
                let mut comm = |f: Option<&Field>| task_names.get(f.and_then(|f| r.bytes(f))?);
                match (r.int(prev), r.int(state), r.int(next)) {
                    (Some(p), Some(st), Some(nx)) => Kind::Switch {
                        name: Rc::clone(n),
                        prev_pid: p as i32,
                        prev_state: task_state(st).into(),
                        next_pid: nx as i32,
                        prev_comm: comm(layouts.switch_comms.as_ref().map(|c| &c.0)),
                        next_comm: comm(layouts.switch_comms.as_ref().map(|c| &c.1)),
                    },
                    _ => Kind::Other { name: Rc::clone(n) },
                }
            }
            _ if layouts.rename.as_ref().is_some_and(|x| x.0 == id) => {
                let Some((_, pid_field, newcomm)) = &layouts.rename else {
                    unreachable!("checked above");
                };
                // Without a pid field, the event renames its own task.
                match pid_field.as_ref().map_or(Some(pid as u64), |p| r.int(p)) {
                    Some(p) => Kind::Rename {
                        name: Rc::clone(n),
                        pid: p as i32,
                        comm: r.bytes(newcomm).and_then(|b| task_names.get(b)),
                    },
                    None => Kind::Other { name: Rc::clone(n) },
                }
            }
            _ if layouts.exec.as_ref().is_some_and(|x| x.0 == id) => {
                let Some((_, filename, pid)) = &layouts.exec else {
                    unreachable!("checked above");
                };
                match (r.str(filename), r.int(pid)) {
                    (Some(f), Some(p)) => Kind::Rename {
                        name: Rc::clone(n),
                        pid: p as i32,
                        comm: exec_comm(f).and_then(|c| task_names.get(c)),
                    },
                    _ => Kind::Other { name: Rc::clone(n) },
                }
            }
            _ => match &layouts.newtask {
                Some((nid, child, flags, comm)) if *nid == id => {
                    match (r.int(child), r.int(flags)) {
                        (Some(c), Some(f)) => Kind::NewTask {
                            name: Rc::clone(n),
                            child: c as i32,
                            thread: f & CLONE_THREAD != 0,
                            comm: comm
                                .as_ref()
                                .and_then(|x| r.bytes(x))
                                .and_then(|b| task_names.get(b)),
                        },
                        _ => Kind::Other { name: Rc::clone(n) },
                    }
                }
                _ => Kind::Other { name: Rc::clone(n) },
            },
        })
    };
    Some(Event {
        ts,
        cpu,
        pid,
        tgid: None,
        comm: comms.get(&pid).cloned(),
        kind: kind?,
    })
}

/// A task state as sched_switch prints `prev_state` (include/trace/events/sched.h): the
/// TASK_REPORT bits by letter, `R` for none (runnable: preempted), `+` when the
/// TASK_REPORT_MAX bit (preempted) is set.
pub fn task_state(s: u64) -> String {
    const LETTERS: [(u64, &str); 8] = [
        (0x01, "S"),
        (0x02, "D"),
        (0x04, "T"),
        (0x08, "t"),
        (0x10, "X"),
        (0x20, "Z"),
        (0x40, "P"),
        (0x80, "I"),
    ];
    let low = s & 0xff;
    let mut out = if low == 0 {
        "R".to_string()
    } else {
        LETTERS
            .iter()
            .filter(|(b, _)| low & b != 0)
            .map(|(_, l)| *l)
            .collect::<Vec<_>>()
            .join("|")
    };
    if s & 0x100 != 0 {
        out.push('+');
    }
    out
}

/// A `kernel_stack` record's frames: `size` addresses from `caller` (the format says
/// `caller[8]`; the record holds `size` of them, bounded by its length), up to the first
/// zero, which ends the kernel's part (trace-cmd report prints `0x0` there; what follows
/// is no kernel frame).
fn kernel_frames(r: &Record, endian: Endian, size: &Field, caller: &Field) -> Vec<KFrame> {
    let n = r.int(size).unwrap_or(0).min(4096) as usize;
    let start = caller.offset;
    let data = r.data.get(start..).unwrap_or(&[]);
    data.chunks_exact(8)
        .take(n)
        .filter_map(|w| endian.uint(w, 8))
        .take_while(|&a| a != 0)
        .map(KFrame::Addr)
        .collect()
}

/// Decode every event of a trace.dat, in timestamp order. Records of the module's events
/// too short for their format are skipped and counted in the returned number.
pub fn from_trace_dat(t: &mut TraceDat, bytes: &[u8]) -> Result<(Vec<Event>, usize)> {
    let mut s = DatStream::new(t.clone(), bytes)?;
    let events: Vec<Event> = s.by_ref().collect();
    t.damage = s.damage.clone();
    t.lost = s.lost;
    Ok((events, s.bad))
}

fn decode(l: &Layouts, id: u16, r: &Record, endian: Endian) -> Option<Kind> {
    if let Some((cid, f)) = &l.cookie {
        if *cid == id {
            return Some(Kind::Cookie { cookie: r.int(f)? });
        }
    }
    if let Some(s) = &l.stack {
        if s.id == id {
            let files = words(r.bytes(&s.files)?, 8, |b| endian.uint(b, 8).unwrap_or(0));
            let offs = words(r.bytes(&s.offs)?, 4, |b| {
                endian.uint(b, 4).unwrap_or(0) as u32
            });
            let frames = match &s.index {
                FrameIndex::Bytes(idx) => decode_frames(&files, &offs, r.bytes(idx)?),
                FrameIndex::Packed { idx_bits, wide } => {
                    decode_packed_frames(&files, &offs, r.int(idx_bits)? as u32, r.int(wide)? != 0)
                }
            };
            return Some(Kind::Stack {
                cookie: r.int(&s.cookie)?,
                start: r.int(&s.start)? as u16,
                total: r.int(&s.total)? as u16,
                frames,
            });
        }
    }
    if let Some((tid, cookie, reason)) = &l.truncated {
        if *tid == id {
            return Some(Kind::Truncated {
                cookie: r.int(cookie)?,
                reason: truncation_reason(r.int(reason)?),
            });
        }
    }
    if let Some(f) = &l.file_cache {
        if f.id == id {
            return Some(Kind::FileCache {
                cookie: r.int(&f.cookie)?,
                path: String::from_utf8_lossy(r.str(&f.path)?).into_owned(),
                build_id: r.bytes(&f.build_id)?.to_vec(),
            });
        }
    }
    None
}

/// What the text of a trace holds besides its events.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TextInfo {
    /// From a `# trace_clock:` line.
    pub clock: Option<String>,
    /// The sum of the `CPU:N [LOST M EVENTS]` lines.
    pub lost: u64,
}

/// Parse the text of the `trace` file (or `trace-cmd report`-like text with the same
/// line shape). Lines that are not events are skipped.
pub fn from_text(text: &str) -> (Vec<Event>, TextInfo) {
    let mut s = TextStream::new(text.as_bytes());
    let events = s.by_ref().collect();
    (events, s.info)
}

/// The events of the text of a trace, a line at a time.
pub struct TextStream<'a> {
    bytes: &'a [u8],
    pos: usize,
    cur: Option<Event>,
    pub info: TextInfo,
    /// Lines that were events, and lines in all.
    pub event_lines: usize,
    pub lines: usize,
    /// A `# tracer:` header was seen: the text is a trace, even with no events.
    pub header: bool,
}

impl<'a> TextStream<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        TextStream {
            bytes,
            pos: 0,
            cur: None,
            info: TextInfo::default(),
            event_lines: 0,
            lines: 0,
            header: false,
        }
    }

    pub fn bytes_read(&self) -> u64 {
        self.pos as u64
    }

    fn line(&mut self) -> Option<std::borrow::Cow<'a, str>> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        let n = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        self.pos += n + 1;
        self.lines += 1;
        let l = &rest[..n];
        Some(String::from_utf8_lossy(l.strip_suffix(b"\r").unwrap_or(l)))
    }
}

fn whole(mut e: Event) -> Event {
    // A record printed without "frames A-B of N" is the whole stack.
    if let Kind::Stack { total, frames, .. } = &mut e.kind {
        if *total == WHOLE {
            *total = frames.len().try_into().unwrap_or(u16::MAX);
        }
    }
    e
}

impl Iterator for TextStream<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        while let Some(line) = self.line() {
            let line = &*line;
            if let Some(i) = line.find("[LOST ") {
                let n: String = line[i + 6..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if line[i..].contains(" EVENTS]") {
                    self.info.lost += n.parse::<u64>().unwrap_or(0);
                    continue;
                }
            }
            if line.starts_with("# tracer:") || line.starts_with("cpus=") {
                self.header = true;
            }
            if let Some(c) = line.strip_prefix("# trace_clock:") {
                self.info.clock = crate::selected_clock(c);
                continue;
            }
            if let Some(rest) = line.trim_start().strip_prefix("=> ") {
                match self.cur.as_mut().map(|e| &mut e.kind) {
                    Some(Kind::Stack { frames, .. }) => {
                        if let Some(f) = parse_frame_line(rest) {
                            frames.push(f);
                        }
                    }
                    Some(Kind::KernelStack { frames }) => frames.push(parse_kernel_frame(rest)),
                    _ => {}
                }
                continue;
            }
            if let Some(e) = parse_event_line(line) {
                self.event_lines += 1;
                if let Some(prev) = self.cur.replace(e) {
                    return Some(whole(prev));
                }
            }
        }
        self.cur.take().map(whole)
    }
}

/// The total of a record printed without a range, until its frames are counted.
const WHOLE: u16 = u16::MAX;

/// `<value> : 0xcookie` or `<value> : ?`
fn parse_frame_line(s: &str) -> Option<RawFrame> {
    let s = s.trim();
    let (v, c) = s.split_once(" : ")?;
    let value = u64::from_str_radix(v.strip_prefix('<')?.strip_suffix('>')?, 16).ok()?;
    let file = match c.trim() {
        "?" => None,
        c => Some(u64::from_str_radix(c.strip_prefix("0x")?, 16).ok()?),
    };
    Some(RawFrame { value, file })
}

/// A kernel frame of the trace file's text: `function`, `function+0x1a/0x30` (the
/// sym-offset option: the name is kept), `function [module]`, or an address the kernel
/// could not name (`0xffffffff81000000`).
fn parse_kernel_frame(s: &str) -> KFrame {
    let s = s.trim();
    if let Some(a) = s
        .strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
    {
        return KFrame::Addr(a);
    }
    let (name, module) = match s.split_once(' ') {
        Some((n, m)) if m.starts_with('[') => (n, Some(m)),
        _ => (s, None),
    };
    let name = match name.split_once("+0x") {
        Some((n, _)) => n,
        None => name,
    };
    match module {
        Some(m) => KFrame::Name(format!("{name} {m}").into()),
        None => KFrame::Name(name.into()),
    }
}

/// `COMM-PID [CPU] FLAGS TS: NAME: BODY`, the flags optional.
fn parse_event_line(line: &str) -> Option<Event> {
    let open = line.find(" [")?;
    let close = open + line[open..].find(']')?;
    let mut task = line[..open].trim();
    // "comm-pid (tgid)" with the record-tgid option.
    let mut tgid = None;
    if let Some(t) = task.strip_suffix(')') {
        let o = t.rfind('(')?;
        tgid = t[o + 1..].trim().parse().ok();
        task = t[..o].trim_end();
    }
    let dash = task.rfind('-')?;
    let pid: i32 = task[dash + 1..].parse().ok()?;
    let comm = task[..dash].to_string();
    let cpu: u32 = line[open + 2..close].trim().parse().ok()?;
    let rest = &line[close + 1..];
    let colon = rest.find(": ")?;
    let ts_word = rest[..colon].split_whitespace().last()?;
    let ts = parse_ts(ts_word)?;
    let rest = &rest[colon + 2..];
    // The kernel's stack trace (the stacktrace option): its frames follow as "=> " lines.
    if rest.trim_end() == "<stack trace>" {
        return Some(Event {
            ts,
            cpu,
            pid,
            tgid,
            comm: Some(comm.into()),
            kind: Kind::KernelStack { frames: Vec::new() },
        });
    }
    let (name, body) = match rest.find(':') {
        Some(i) => (&rest[..i], rest[i + 1..].trim_start()),
        None => (rest, ""),
    };
    let kind = match name {
        "user_unwind_cookie" => Kind::Cookie {
            cookie: hex_field(body, "cookie=")?,
        },
        "user_unwind_stack" => {
            let cookie = hex_field(body, "cookie=")?;
            let (start, total) = if body.contains("(no frames)") {
                (0, 0)
            } else if let Some(i) = body.find(" frames ") {
                // "frames A-B of N"
                let f: Vec<&str> = body[i + 8..].split([' ', '-']).collect();
                (f.first()?.parse().ok()?, f.get(3)?.parse().ok()?)
            } else {
                (0, WHOLE)
            };
            Kind::Stack {
                cookie,
                start,
                total,
                frames: Vec::new(),
            }
        }
        "file_cache" => {
            let cookie = hex_field(body, "cookie=")?;
            let p = body.find(" path=")? + 6;
            let b = body.rfind(" build_id=")?;
            let path = unescape(body.get(p..b)?);
            let id = body[b + 10..].split_whitespace().next().unwrap_or("");
            Kind::FileCache {
                cookie,
                path,
                build_id: unhex(id),
            }
        }
        "user_unwind_truncated" => Kind::Truncated {
            cookie: hex_field(body, "cookie=")?,
            reason: body
                .split("reason=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .into(),
        },
        n if n.is_empty() || n.contains(' ') => return None,
        "sched_switch" => {
            let word = |k: &str| -> Option<&str> {
                body.split_whitespace().find_map(|w| w.strip_prefix(k))
            };
            Kind::Switch {
                name: qualified(name).into(),
                prev_pid: word("prev_pid=")?.parse().ok()?,
                prev_state: word("prev_state=")?.into(),
                next_pid: word("next_pid=")?.parse().ok()?,
                prev_comm: between(body, "prev_comm=", " prev_pid="),
                next_comm: between(body, "next_comm=", " next_pid="),
            }
        }
        "task_rename" => Kind::Rename {
            name: qualified(name).into(),
            pid: match dec_field(body, "pid=") {
                Some(p) => p as i32,
                None => pid,
            },
            comm: between(body, "newcomm=", " oom_score_adj="),
        },
        "sched_process_exec" => Kind::Rename {
            name: qualified(name).into(),
            pid: dec_field(body, " pid=")? as i32,
            comm: between(body, "filename=", " pid=")
                .and_then(|f| exec_comm(f.as_bytes()).map(|c| String::from_utf8_lossy(c).into())),
        },
        "task_newtask" => {
            let child = dec_field(body, "pid=")?;
            let flags = u64::from_str_radix(
                body.split("clone_flags=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?,
                16,
            )
            .ok()?;
            Kind::NewTask {
                name: qualified(name).into(),
                child: child as i32,
                thread: flags & CLONE_THREAD != 0,
                comm: between(body, " comm=", " clone_flags="),
            }
        }
        n => Kind::Other {
            name: qualified(n).into(),
        },
    };
    Some(Event {
        ts,
        cpu,
        pid,
        tgid,
        comm: Some(comm.into()),
        kind,
    })
}

/// The text of `body` from after `start` to `end` (or to its end when `end` is not
/// there): a task name, which may hold spaces; `None` when empty or `start` is not there.
fn between(body: &str, start: &str, end: &str) -> Option<Rc<str>> {
    let rest = &body[body.find(start)? + start.len()..];
    let v = match rest.find(end) {
        Some(i) => &rest[..i],
        None => rest.trim_end(),
    };
    (!v.is_empty()).then(|| v.into())
}

/// The kernel escapes control bytes and `\` in paths as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push(((b[i + 1] - b'0') << 6) | ((b[i + 2] - b'0') << 3) | (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn unhex(s: &str) -> Vec<u8> {
    if !s.len().is_multiple_of(2) {
        return Vec::new();
    }
    (0..s.len() / 2)
        .map_while(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// A decimal `key=N` of an event's text.
fn dec_field(body: &str, key: &str) -> Option<i64> {
    let i = body.find(key)? + key.len();
    body[i..].split_whitespace().next()?.parse().ok()
}

fn hex_field(body: &str, key: &str) -> Option<u64> {
    let i = body.find(key)? + key.len();
    let v: String = body[i..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    u64::from_str_radix(&v, 16).ok()
}

/// "12.345678" seconds, or a bare counter, to nanoseconds.
fn parse_ts(s: &str) -> Option<u64> {
    match s.split_once('.') {
        Some((sec, frac)) => {
            let sec: u64 = sec.parse().ok()?;
            let mut f: String = frac.chars().take(9).collect();
            while f.len() < 9 {
                f.push('0');
            }
            Some(sec.checked_mul(1_000_000_000)? + f.parse::<u64>().ok()?)
        }
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# tracer: nop
# trace_clock: local [global] counter
            uu_chain-93      [001] .....    12.000100: sys_enter: NR 110 (0, 0, 0, 0, 0, 0)
            uu_chain-93      [001] .....    12.000101: user_unwind_cookie: cookie=300000004
            uu_chain-93      [001] .....    12.000200: file_cache: cookie=5c1d0e9b3a7f4e21 path=/usr/bin/a b\\012c build_id=0a0b build_id_len=2
            uu_chain-93      [001] .....    12.000201: user_unwind_stack: cookie=300000004
 => <0000000000001139> : 0x5c1d0e9b3a7f4e21
 => <00007f0000001000> : ?
            uu_chain-93      [001] .....    12.000300: user_unwind_stack: cookie=500000004 frames 64-66 of 66
 => <0000000000001139> : 0x5c1d0e9b3a7f4e21
CPU:0 [LOST 7 EVENTS]
           <...>-94      [000] d....    12.000400: user_unwind_stack: cookie=600000004 (no frames)
";

    #[test]
    fn bare_names_get_their_system() {
        assert_eq!(qualified("sys_enter"), "raw_syscalls:sys_enter");
        assert_eq!(qualified("sched_switch"), "sched:sched_switch");
        assert_eq!(qualified("kernel_stack"), "ftrace:kernel_stack");
        assert_eq!(qualified("sys_enter_openat"), "syscalls:sys_enter_openat");
        assert_eq!(
            qualified("user_unwind_cookie"),
            "user_unwind:user_unwind_cookie"
        );
        assert_eq!(qualified("irq:irq_handler_entry"), "irq:irq_handler_entry");
        assert_eq!(qualified("no_such_event_here"), "no_such_event_here");
    }

    #[test]
    fn parses_the_trace_file() {
        let (ev, info) = from_text(TEXT);
        assert_eq!(info.clock.as_deref(), Some("global"));
        assert_eq!(info.lost, 7);
        assert_eq!(ev.len(), 6);
        assert_eq!(
            ev[0].kind,
            Kind::Other {
                // Qualified as trace.dat names it.
                name: "raw_syscalls:sys_enter".into()
            }
        );
        assert_eq!(ev[0].pid, 93);
        assert_eq!(ev[0].cpu, 1);
        assert_eq!(ev[0].ts, 12_000_100_000);
        assert_eq!(
            ev[1].kind,
            Kind::Cookie {
                cookie: 0x300000004
            }
        );
        assert_eq!(
            ev[2].kind,
            Kind::FileCache {
                cookie: 0x5c1d0e9b3a7f4e21,
                path: "/usr/bin/a b\nc".into(),
                build_id: vec![0xa, 0xb],
            }
        );
        let Kind::Stack {
            frames,
            start,
            total,
            ..
        } = &ev[3].kind
        else {
            panic!()
        };
        assert_eq!((*start, *total), (0, 2));
        assert_eq!(
            frames[0],
            RawFrame {
                value: 0x1139,
                file: Some(0x5c1d0e9b3a7f4e21)
            }
        );
        assert_eq!(
            frames[1],
            RawFrame {
                value: 0x7f0000001000,
                file: None
            }
        );
        let Kind::Stack { start, total, .. } = &ev[4].kind else {
            panic!()
        };
        assert_eq!((*start, *total), (64, 66));
        let Kind::Stack { total, frames, .. } = &ev[5].kind else {
            panic!()
        };
        assert_eq!((*total, frames.len()), (0, 0));
        assert_eq!(ev[5].comm.as_deref(), Some("<...>"));
    }

    #[test]
    fn wide_and_narrow_frames() {
        let f = decode_frames(&[7, 9], &[1, 2], &[0, 1]);
        assert_eq!(
            f,
            vec![
                RawFrame {
                    value: 1,
                    file: Some(7)
                },
                RawFrame {
                    value: 2,
                    file: Some(9)
                }
            ]
        );
        let f = decode_frames(&[7], &[1, 2, 3, 4], &[0, 5]);
        assert_eq!(
            f[0],
            RawFrame {
                value: 1 | 3 << 32,
                file: Some(7)
            }
        );
        assert_eq!(
            f[1],
            RawFrame {
                value: 2 | 4 << 32,
                file: None
            }
        );
        assert!(decode_frames(&[], &[], &[]).is_empty());
        // Fewer offsets than indices: only the frames with both.
        assert_eq!(decode_frames(&[7], &[1], &[0, 0]).len(), 1);
    }

    #[test]
    fn packed_frames() {
        let frame = |value, file| RawFrame { value, file };
        // Three files, two bits of index; one file, none.
        let f = decode_packed_frames(&[7, 8, 9], &[0x1100, 0x4000_0010, 0x8000_0099], 2, false);
        assert_eq!(
            f,
            [
                frame(0x1100, Some(7)),
                frame(0x10, Some(8)),
                frame(0x99, Some(9))
            ]
        );
        let f = decode_packed_frames(&[7], &[0xffff_ffff], 0, false);
        assert_eq!(f, [frame(0xffff_ffff, Some(7))]);
        // Wide: the index at the top of the second word, above the high half.
        let f = decode_packed_frames(&[7, 9], &[0x1100, 0x1234_5678, 0, 0x8000_7fff], 1, true);
        assert_eq!(
            f,
            [frame(0x1100, Some(7)), frame(0x7fff_1234_5678, Some(9))]
        );
        // An index beyond the table: no file. A damaged idx_bits: none.
        let f = decode_packed_frames(&[7], &[0x8000_0001], 1, false);
        assert_eq!(f, [frame(1, None)]);
        assert_eq!(
            decode_packed_frames(&[7], &[5], 200, false),
            [frame(5, Some(7))]
        );
        // A wide record with an odd number of words: the whole pairs.
        assert_eq!(decode_packed_frames(&[7], &[1, 2, 3], 0, true).len(), 1);
        assert!(decode_packed_frames(&[], &[], 0, false).is_empty());
        // A kernel-half address: the high half sign-extended below the index.
        let f = decode_packed_frames(&[7, 0], &[0x1100, 0x8100_1234, 0, 0xffff_ffff], 1, true);
        assert_eq!(f[1], frame(0xffff_ffff_8100_1234, Some(0)));
    }

    #[test]
    fn task_names_from_the_text() {
        let line = |body: &str| {
            parse_event_line(&format!("     a b-7     [000] .....    1.000001: {body}"))
                .unwrap()
                .kind
        };
        let Kind::Switch {
            prev_comm,
            next_comm,
            ..
        } = line(
            "sched_switch: prev_comm=my task prev_pid=7 prev_prio=120 prev_state=S ==> \
             next_comm=kworker/0:1 next_pid=10 next_prio=120",
        )
        else {
            panic!("a switch");
        };
        assert_eq!(
            (prev_comm.as_deref(), next_comm.as_deref()),
            (Some("my task"), Some("kworker/0:1"))
        );
        assert_eq!(
            line("task_rename: pid=8 oldcomm=sh newcomm=worker one oom_score_adj=0"),
            Kind::Rename {
                name: "task:task_rename".into(),
                pid: 8,
                comm: Some("worker one".into())
            }
        );
        // A kernel whose task_rename has no pid renames the event's own task.
        assert_eq!(
            line("task_rename: oldcomm=sh newcomm=w oom_score_adj=0"),
            Kind::Rename {
                name: "task:task_rename".into(),
                pid: 7,
                comm: Some("w".into())
            }
        );
        assert_eq!(
            line("sched_process_exec: filename=/usr/bin/a-rather-long-name pid=9 old_pid=9"),
            Kind::Rename {
                name: "sched:sched_process_exec".into(),
                pid: 9,
                comm: Some("a-rather-long-n".into())
            }
        );
        assert_eq!(
            line("sched_process_exec: filename=/dev/fd/3 pid=9 old_pid=9"),
            Kind::Rename {
                name: "sched:sched_process_exec".into(),
                pid: 9,
                comm: None
            }
        );
        let Kind::NewTask { comm, child, .. } =
            line("task_newtask: pid=11 comm=b c clone_flags=3d0f00 oom_score_adj=0")
        else {
            panic!("a new task");
        };
        assert_eq!((child, comm.as_deref()), (11, Some("b c")));
        assert_eq!(exec_comm(b"/dev/fd/3/prog"), Some(&b"prog"[..]));
        assert_eq!(exec_comm(b"prog"), Some(&b"prog"[..]));
    }

    /// task_rename and sched_process_exec records of trace.dat, through the formats the
    /// kernel prints for them (v6.dat's file, the two formats added).
    #[test]
    fn task_names_from_trace_dat_records() {
        let bytes = include_bytes!("../tests/fixtures/v6.dat");
        let mut t = TraceDat::parse(bytes).unwrap();
        let rename = "name: task_rename\nID: 900\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
            \tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n\
            \tfield:char oldcomm[16];\toffset:12;\tsize:16;\tsigned:0;\n\
            \tfield:char newcomm[16];\toffset:28;\tsize:16;\tsigned:0;\n\
            \tfield:short oom_score_adj;\toffset:44;\tsize:2;\tsigned:1;\n\n\
            print fmt: \"pid=%d oldcomm=%s newcomm=%s\", REC->pid, REC->oldcomm, REC->newcomm\n";
        let exec = "name: sched_process_exec\nID: 901\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
            \tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n\
            \tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n\
            \tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;\n\n\
            print fmt: \"filename=%s pid=%d old_pid=%d\", __get_str(filename), REC->pid, REC->old_pid\n";
        for (system, text) in [("task", rename), ("sched", exec)] {
            let f = Format::parse(system, text.as_bytes()).unwrap();
            t.formats.insert(f.id, f);
        }
        let layouts = Layouts::new(&t.formats).unwrap();
        let names: HashMap<u16, Rc<str>> = t
            .formats
            .iter()
            .map(|(id, f)| (*id, Rc::from(f.full_name())))
            .collect();
        let mut task_names = TaskNames::default();
        let mut decode = |rec: &[u8]| {
            let mut bad = 0;
            let e = decode_event(
                &layouts,
                &names,
                &HashMap::new(),
                &mut task_names,
                Endian::Little,
                0,
                1,
                rec,
                &mut bad,
            );
            assert_eq!(bad, 0);
            e.unwrap().kind
        };
        let mut r = vec![0u8; 48];
        r[..2].copy_from_slice(&900u16.to_le_bytes());
        r[4..8].copy_from_slice(&7i32.to_le_bytes());
        r[8..12].copy_from_slice(&8i32.to_le_bytes());
        r[12..14].copy_from_slice(b"sh");
        r[28..34].copy_from_slice(b"worker");
        assert_eq!(
            decode(&r),
            Kind::Rename {
                name: "task:task_rename".into(),
                pid: 8,
                comm: Some("worker".into())
            }
        );
        let path = b"/usr/bin/prog\0";
        let mut r = vec![0u8; 20];
        r[..2].copy_from_slice(&901u16.to_le_bytes());
        r[4..8].copy_from_slice(&9i32.to_le_bytes());
        let loc = ((path.len() as u32) << 16) | 20;
        r[8..12].copy_from_slice(&loc.to_le_bytes());
        r[12..16].copy_from_slice(&9i32.to_le_bytes());
        r.extend_from_slice(path);
        assert_eq!(
            decode(&r),
            Kind::Rename {
                name: "sched:sched_process_exec".into(),
                pid: 9,
                comm: Some("prog".into())
            }
        );
    }
}
