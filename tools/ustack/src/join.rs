// SPDX-License-Identifier: GPL-2.0

//! Joining: each triggering event to its `user_unwind_cookie`, the cookie to the
//! `user_unwind_stack` records of the same task that carry it (split records put back in
//! `start` order), and each frame's file cookie to the `file_cache` that named it.
//!
//! A cookie's trigger is the event of the same task next to it on its CPU. The module
//! writes the cookie while the trigger commits: after it for most events, before it for an
//! event the kernel stages in its per-CPU buffer first (a filtered or soft-disabled one), so
//! both neighbours are looked at, the one before first; an event another cookie took is not
//! taken twice.
//!
//! A file cookie resolves to the most recent `file_cache` with that cookie before the stack
//! record, in timestamp order across all CPUs. The module repeats a stack's `file_cache`
//! events right after it when a reader reset the buffer while the stack was being written;
//! those (same task, same CPU, before that CPU's next other event) resolve it too. A cookie
//! is a hash of the file's identity and never names another file, so a `file_cache` *after*
//! the stack names it as well: the module's reminder writes one within about a second for
//! every file in use, which is how a reader that lost the first one (a buffer that
//! overwrote its start) finds it. A sample with such a cookie waits for it, bounded
//! ([`HOLD_NS`] of trace time, [`HOLD_FRAMES`] frames held in all), then comes out as it is.
//! Nothing else is guessed: a cookie no `file_cache` names stays unresolved and is counted.

use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use crate::events::{Event, KFrame, Kind, RawFrame};

/// File cookie 0: the address was in no mapping; 1: anonymous memory (raw addresses).
pub const COOKIE_NO_VMA: u64 = 0;
pub const COOKIE_ANON: u64 = 1;

/// How long (trace time) a sample waits for a `file_cache` after it that names one of its
/// file cookies: the module's reminder writes one within about a second of a file's use.
pub const HOLD_NS: u64 = 5_000_000_000;
/// The frames of all samples waiting so, at most (about 24 bytes each): past that the
/// oldest comes out as it is.
pub const HOLD_FRAMES: usize = 1 << 19;

/// What a `file_cache` event says a cookie stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub cookie: u64,
    pub path: String,
    pub build_id: Vec<u8>,
}

/// One frame of a joined stack, innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// `offset` in a mapped file.
    File { file: Rc<FileInfo>, offset: u64 },
    /// An offset in a mapping the kernel names (`[vdso]`).
    Special { file: Rc<FileInfo>, offset: u64 },
    /// A raw address in anonymous memory, named (`[anon:...]`) or not, or in no mapping.
    Anon {
        addr: u64,
        name: Option<Rc<FileInfo>>,
    },
    /// A file cookie no `file_cache` named.
    Unresolved { cookie: u64, value: u64 },
    /// The record's file index pointed outside its table.
    BadIndex { value: u64 },
}

/// A triggering event with its stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub ts: u64,
    pub cpu: u32,
    pub pid: i32,
    /// The thread group, when the trace said (else the task is taken as its own).
    pub tgid: Option<i32>,
    pub comm: Option<Rc<str>>,
    /// The triggering event's name.
    pub event: Rc<str>,
    pub cookie: u64,
    pub frames: Vec<Frame>,
    /// All records of the stack were found.
    pub complete: bool,
    /// The unwinder stopped short of the outermost frame, for this reason
    /// (`user_unwind_truncated`).
    pub truncated: Option<Rc<str>>,
    /// The order of its cookie in the trace.
    pub seq: usize,
    /// The kernel stack of its triggering event (`kernel_stack`, the stacktrace option),
    /// innermost frame first; empty when the trace has none.
    pub kernel: Vec<KFrame>,
    /// When its event is the task's own `sched_switch` out: the state it left in
    /// (`prev_state`) and, once the trace switches it in again, the time it was off the
    /// CPU, in nanoseconds.
    pub switched: Option<Rc<str>>,
    pub off_cpu: Option<u64>,
    /// A kernel thread's `sched_switch` out ([`Joiner::kernel_threads`]): no cookie took
    /// it, so it has no user stack, only its kernel one.
    pub kthread: bool,
}

/// What the join found and what it could not, every count of something not guessed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub events: usize,
    pub cookies: usize,
    /// Cookie events with no triggering event before them on their CPU (the trigger was
    /// not recorded).
    pub cookies_without_trigger: usize,
    pub stacks: usize,
    /// Stacks with no cookie event in the trace (recorded before the trace starts).
    pub stacks_without_cookie: usize,
    /// Cookie events whose stack never came (the task exited, the trace ended first, or
    /// the buffer lost it).
    pub cookies_without_stack: usize,
    /// Stacks some of whose records are missing.
    pub incomplete_stacks: usize,
    pub frames: usize,
    pub unresolved_frames: usize,
    pub unresolved_cookies: usize,
    pub bad_index_frames: usize,
    pub file_caches: usize,
    /// Stacks the unwinder stopped short of their outermost frame (`user_unwind_truncated`).
    pub truncated_stacks: usize,
    /// Frames named by a `file_cache` written after their stack.
    pub late_named_frames: usize,
    /// `kernel_stack` events, and those joined to a sample's triggering event.
    pub kernel_stacks: usize,
    pub kernel_stacks_joined: usize,
}

struct Pending {
    samples: Vec<usize>,
    parts: Vec<(u16, Vec<Frame>)>,
    total: u16,
    got: usize,
    truncated: Option<Rc<str>>,
}

/// A sample waiting for its trigger (the next event on its CPU) or its stack.
struct Waiting {
    s: Sample,
    trigger_known: bool,
    frames_known: bool,
}

/// The last event seen on a CPU, a possible trigger of the cookie after it.
struct Last {
    trigger: Option<Rc<str>>,
    pid: i32,
    /// Its number on the CPU.
    n: u64,
    /// A sched_switch: its time, the task switched out and its state.
    switch: Option<(u64, i32, Rc<str>)>,
}

/// An event on a CPU whose `kernel_stack` has not come yet: the kernel writes an event's
/// stack right after the event commits, so one written while another commits (the
/// module's cookie, from inside the trigger's commit) gets its stack first: the most
/// recent such event of the task takes the next `kernel_stack`.
struct KWait {
    n: u64,
    pid: i32,
    /// The sample whose trigger it is, once a cookie took it.
    seq: Option<usize>,
}

/// Events waiting for their kernel stack on a CPU, at most (a trace without kernel stacks
/// never takes them).
const KWAIT_MAX: usize = 8;

/// A stack record, until the next event on its CPU: the `file_cache` events right after it
/// (same task) may name its file cookies, and a `user_unwind_truncated` of its cookie says
/// the unwinder stopped short.
struct Awaiting {
    key: (i32, u64),
    pid: i32,
    start: u16,
    total: u16,
    frames: Vec<Frame>,
    truncated: Option<Rc<str>>,
}

/// A `sched_switch` out that no cookie took (yet): a kernel thread's, unless the cookie
/// after it on its CPU takes it. It waits there for its kernel stack, then (without a
/// cookie) for the trace to switch its task in again.
struct KSwitch {
    /// Its event's number on the CPU, to know its kernel stack.
    n: u64,
    s: Sample,
}

#[derive(Default)]
struct CpuState {
    last: Option<Last>,
    /// A `sched_switch` out no cookie took yet (with [`Joiner::kernel_threads`]).
    kswitch: Option<KSwitch>,
    /// Events counted on the CPU, and those waiting for their kernel stack.
    n: u64,
    kwait: Vec<KWait>,
    /// A cookie whose trigger may be the next event.
    waiting: Option<(usize, i32)>,
    awaiting: Option<Awaiting>,
}

/// The join, an event at a time: memory holds the stacks not yet complete and the files
/// of the trace, not its events. Samples come out (through `out`) when their trigger and
/// stack are both known, so not in trace order: `seq` gives that.
///
/// File cookies resolve through one map, cookie to the most recent `file_cache` with it,
/// for every task: a cookie names a file, whichever process mapped it, and a cookie seen
/// again with another path names the new one for later stacks.
#[derive(Default)]
pub struct Joiner {
    st: Stats,
    files: HashMap<u64, Rc<FileInfo>>,
    waiting: HashMap<usize, Waiting>,
    next_seq: usize,
    pending: HashMap<(i32, u64), Pending>,
    orphan_stacks: HashSet<(i32, u64)>,
    unresolved: HashSet<u64>,
    cpus: HashMap<u32, CpuState>,
    tgids: HashMap<i32, i32>,
    /// Samples complete but for file cookies nothing named yet, oldest first, with the
    /// count of their frames and of the held samples waiting for each cookie.
    held: VecDeque<Sample>,
    held_frames: usize,
    awaited: HashMap<u64, usize>,
    /// Tasks switched out by a sample's event: task to (time, sample), until the trace
    /// switches them in.
    switched_out: HashMap<i32, (u64, usize)>,
    /// Take the `sched_switch` out of a task that no cookie takes, with its kernel stack,
    /// as a sample of its own (a kernel thread's off-CPU time: kworker, ksoftirqd, rcu).
    pub kernel_threads: bool,
    /// Those samples, by task, until the trace switches it in again.
    kthreads_out: HashMap<i32, Sample>,
    /// The name the trace last gave each task (sched_switch, task_rename, exec,
    /// task_newtask), and whether task_newtask gave it.
    names: HashMap<i32, (Rc<str>, bool)>,
    /// The trace records the tasks' renames (task_rename or sched_process_exec is among its
    /// events): a name holds until the next one it records. Set by the reader from the
    /// trace's formats, and on the first such event.
    pub renames_recorded: bool,
}

impl Joiner {
    pub fn new() -> Self {
        Joiner::default()
    }

    /// The thread group of task `pid`: as the trace said (task_newtask, the text's tgid
    /// column), else its own.
    fn tgid(&self, pid: i32) -> i32 {
        self.tgids.get(&pid).copied().unwrap_or(pid)
    }

    /// The name of task `pid` now, as the trace gave it last: by the task's own
    /// sched_switch (`prev_comm` out, `next_comm` in), task_rename or exec; by
    /// task_newtask only when the trace records renames (an exec right after the fork
    /// renames the task). `None` when the trace gave it none.
    fn name(&self, pid: i32) -> Option<Rc<str>> {
        match self.names.get(&pid) {
            Some((n, forked)) if !forked || self.renames_recorded => Some(Rc::clone(n)),
            _ => None,
        }
    }

    /// The names event `e` gives tasks, taken before the event is: an event's sample has
    /// the name its task had then.
    fn take_names(&mut self, e: &Event) {
        match &e.kind {
            Kind::Switch {
                prev_pid,
                next_pid,
                prev_comm,
                next_comm,
                ..
            } => {
                for (pid, comm) in [(prev_pid, prev_comm), (next_pid, next_comm)] {
                    // The idle task is swapper/N on each CPU.
                    if let (Some(c), true) = (comm, *pid != 0) {
                        self.names.insert(*pid, (Rc::clone(c), false));
                    }
                }
            }
            Kind::NewTask {
                child,
                comm: Some(c),
                ..
            } => {
                self.names.insert(*child, (Rc::clone(c), true));
            }
            Kind::Rename { pid, comm, .. } => {
                self.renames_recorded = true;
                match comm {
                    Some(c) => self.names.insert(*pid, (Rc::clone(c), false)),
                    None => self.names.remove(pid),
                };
            }
            _ => {}
        }
    }

    /// A sample of task `e.pid` at event `e`, for `event` and `cookie`: no frames yet, not
    /// complete, no switch, a user task's. Its name is the one the trace gave the task
    /// last ([`Joiner::name`]), else the file's for the pid (trace.dat's saved_cmdlines,
    /// the text's column).
    fn sample(&self, e: &Event, event: Rc<str>, cookie: u64, seq: usize) -> Sample {
        Sample {
            ts: e.ts,
            cpu: e.cpu,
            pid: e.pid,
            tgid: self.tgids.get(&e.pid).copied(),
            comm: self.name(e.pid).or_else(|| e.comm.clone()),
            event,
            cookie,
            frames: Vec::new(),
            complete: false,
            truncated: None,
            seq,
            kernel: Vec::new(),
            switched: None,
            off_cpu: None,
            kthread: false,
        }
    }

    /// What `cookie` names from now on: the same FileInfo as before if nothing changed,
    /// so that repeats of a file cost nothing downstream.
    fn file_info(
        files: &mut HashMap<u64, Rc<FileInfo>>,
        cookie: u64,
        path: &str,
        build_id: &[u8],
    ) -> Rc<FileInfo> {
        if let Some(f) = files.get(&cookie) {
            if f.path == path && f.build_id == build_id {
                return Rc::clone(f);
            }
        }
        let f = Rc::new(FileInfo {
            cookie,
            path: path.to_string(),
            build_id: build_id.to_vec(),
        });
        files.insert(cookie, Rc::clone(&f));
        f
    }

    /// Stacks complete so far.
    pub fn stacks(&self) -> usize {
        self.st.stacks
    }

    /// What the join has counted so far (the samples out, their frames unresolved).
    pub fn stats(&self) -> &Stats {
        &self.st
    }

    /// Take one event, in timestamp order.
    pub fn push(&mut self, e: Event, out: &mut impl FnMut(Sample)) {
        self.st.events += 1;
        while self
            .held
            .front()
            .is_some_and(|h| e.ts.saturating_sub(h.ts) > HOLD_NS)
        {
            self.release_front(out);
        }
        let mut cpu = self.cpus.remove(&e.cpu).unwrap_or_default();
        // A kernel stack belongs to an event before it on its CPU, and is no event of its
        // own: the runs below (a cookie's trigger next to it, file caches after a stack)
        // go through it.
        if let Kind::KernelStack { frames } = e.kind {
            self.st.kernel_stacks += 1;
            if let Some(i) = cpu.kwait.iter().rposition(|k| k.pid == e.pid) {
                let k = cpu.kwait.swap_remove(i);
                cpu.kwait.truncate(i);
                if let Some(w) = k.seq.and_then(|seq| self.waiting.get_mut(&seq)) {
                    w.s.kernel = frames;
                    self.st.kernel_stacks_joined += 1;
                } else if let Some(ks) = cpu.kswitch.as_mut().filter(|ks| ks.n == k.n) {
                    ks.s.kernel = frames;
                    self.st.kernel_stacks_joined += 1;
                }
            }
            self.cpus.insert(e.cpu, cpu);
            return;
        }
        cpu.n += 1;
        let n = cpu.n;
        let mut kseq = None;
        self.take_names(&e);
        // A switch out that no cookie took: the cookie of its task right after it takes
        // it (a user task's); else, with its kernel stack, it is a kernel thread's.
        if let Some(ks) = cpu.kswitch.take() {
            let took = matches!(e.kind, Kind::Cookie { .. }) && e.pid == ks.s.pid;
            if !took && !ks.s.kernel.is_empty() {
                self.kthreads_out.insert(ks.s.pid, ks.s);
            }
        }
        // File caches repeated right after a stack on its CPU resolve it; anything else
        // ends the run.
        if let Some(aw) = cpu.awaiting.as_mut() {
            match &e.kind {
                Kind::FileCache {
                    cookie,
                    path,
                    build_id,
                } if e.pid == aw.pid => {
                    let info = Self::file_info(&mut self.files, *cookie, path, build_id);
                    for f in aw.frames.iter_mut() {
                        if let Frame::Unresolved { cookie: c, value } = *f {
                            if c == *cookie {
                                *f = classify(Rc::clone(&info), value);
                            }
                        }
                    }
                }
                Kind::Truncated { cookie, reason } if e.pid == aw.pid && *cookie == aw.key.1 => {
                    aw.truncated = Some(Rc::clone(reason));
                }
                _ => {
                    if let Some(aw) = cpu.awaiting.take() {
                        self.add_part(aw, out);
                    }
                }
            }
        }
        // A cookie waiting for the event after it.
        let mut taken = false;
        if let Some((seq, pid)) = cpu.waiting.take() {
            let trigger = match e.kind.trigger() {
                Some(name) if e.pid == pid => {
                    taken = true;
                    kseq = Some(seq);
                    // The name at its trigger, which came after the cookie.
                    let comm = self.name(pid);
                    if let (Some(w), Some(c)) = (self.waiting.get_mut(&seq), comm) {
                        w.s.comm = Some(c);
                    }
                    if let Kind::Switch {
                        prev_pid,
                        prev_state,
                        ..
                    } = &e.kind
                    {
                        self.switch_out(seq, e.ts, *prev_pid, prev_state, pid);
                    }
                    Some(Rc::clone(name))
                }
                _ => None,
            };
            self.set_trigger(seq, trigger, out);
        }
        if let Some(t) = e.tgid {
            self.tgids.insert(e.pid, t);
        }
        match &e.kind {
            Kind::Other { .. } | Kind::KernelStack { .. } | Kind::Rename { .. } => {}
            // A task switched in: its sample's off-CPU time ends.
            Kind::Switch {
                name,
                prev_pid,
                prev_state,
                next_pid,
                ..
            } => {
                if let Some((ts, seq)) = self.switched_out.remove(next_pid) {
                    if let Some(w) = self.waiting.get_mut(&seq) {
                        w.s.off_cpu = Some(e.ts.saturating_sub(ts));
                    }
                }
                if let Some(mut s) = self.kthreads_out.remove(next_pid) {
                    s.off_cpu = Some(e.ts.saturating_sub(s.ts));
                    s.seq = self.next_seq;
                    self.next_seq += 1;
                    self.release(s, out);
                }
                // The idle task (0) does not block.
                if self.kernel_threads && !taken && *prev_pid == e.pid && e.pid != 0 {
                    cpu.kswitch = Some(KSwitch {
                        n,
                        s: Sample {
                            complete: true,
                            switched: Some(Rc::clone(prev_state)),
                            kthread: true,
                            ..self.sample(&e, Rc::clone(name), 0, 0)
                        },
                    });
                }
            }
            Kind::NewTask { child, thread, .. } => {
                let t = if *thread { self.tgid(e.pid) } else { *child };
                self.tgids.insert(*child, t);
            }
            Kind::Cookie { cookie } => {
                self.st.cookies += 1;
                let seq = self.next_seq;
                self.next_seq += 1;
                self.waiting.insert(
                    seq,
                    Waiting {
                        s: self.sample(&e, Rc::from("(unrecorded event)"), *cookie, seq),
                        trigger_known: false,
                        frames_known: false,
                    },
                );
                self.pending
                    .entry((e.pid, *cookie))
                    .or_insert(Pending {
                        samples: Vec::new(),
                        parts: Vec::new(),
                        total: 0,
                        got: 0,
                        truncated: None,
                    })
                    .samples
                    .push(seq);
                match cpu.last.take() {
                    Some(Last {
                        trigger: Some(name),
                        pid,
                        n,
                        switch,
                    }) if pid == e.pid => {
                        if let Some(k) = cpu.kwait.iter_mut().find(|k| k.n == n) {
                            k.seq = Some(seq);
                        }
                        if let Some((ts, prev, state)) = switch {
                            self.switch_out(seq, ts, prev, &state, pid);
                        }
                        self.set_trigger(seq, Some(name), out)
                    }
                    _ => cpu.waiting = Some((seq, e.pid)),
                }
            }
            Kind::Stack {
                cookie,
                start,
                total,
                frames,
            } => {
                let key = (e.pid, *cookie);
                if !self.pending.contains_key(&key) {
                    if self.orphan_stacks.insert(key) {
                        self.st.stacks_without_cookie += 1;
                    }
                } else {
                    let resolved: Vec<Frame> = frames.iter().map(|f| self.frame(*f)).collect();
                    cpu.awaiting = Some(Awaiting {
                        key,
                        pid: e.pid,
                        start: *start,
                        total: *total,
                        frames: resolved,
                        truncated: None,
                    });
                }
            }
            Kind::FileCache {
                cookie,
                path,
                build_id,
            } => {
                self.st.file_caches += 1;
                let info = Self::file_info(&mut self.files, *cookie, path, build_id);
                self.named(*cookie, &info, out);
            }
            // Not right after its stack on this CPU (the task moved between the two
            // writes): its stack, if not complete yet, takes it.
            Kind::Truncated { cookie, reason } => {
                let taken = cpu
                    .awaiting
                    .as_ref()
                    .is_some_and(|aw| aw.key == (e.pid, *cookie));
                if !taken {
                    if let Some(p) = self.pending.get_mut(&(e.pid, *cookie)) {
                        p.truncated = Some(Rc::clone(reason));
                    }
                }
            }
        }
        cpu.last = Some(Last {
            trigger: match e.kind.trigger() {
                Some(name) if !taken => Some(Rc::clone(name)),
                _ => None,
            },
            pid: e.pid,
            n,
            switch: match &e.kind {
                Kind::Switch {
                    prev_pid,
                    prev_state,
                    ..
                } if !taken => Some((e.ts, *prev_pid, Rc::clone(prev_state))),
                _ => None,
            },
        });
        if cpu.kwait.len() >= KWAIT_MAX {
            cpu.kwait.remove(0);
        }
        cpu.kwait.push(KWait {
            n,
            pid: e.pid,
            seq: kseq,
        });
        self.cpus.insert(e.cpu, cpu);
    }

    /// Sample `seq`'s event switched its task (`pid`) out at `ts`, in `state`.
    fn switch_out(&mut self, seq: usize, ts: u64, prev: i32, state: &Rc<str>, pid: i32) {
        if prev != pid {
            return;
        }
        if let Some(w) = self.waiting.get_mut(&seq) {
            w.s.switched = Some(Rc::clone(state));
            self.switched_out.insert(pid, (ts, seq));
        }
    }

    fn set_trigger(&mut self, seq: usize, name: Option<Rc<str>>, out: &mut impl FnMut(Sample)) {
        let Some(w) = self.waiting.get_mut(&seq) else {
            return;
        };
        match name {
            Some(n) => w.s.event = n,
            None => self.st.cookies_without_trigger += 1,
        }
        w.trigger_known = true;
        if w.frames_known {
            self.emit(seq, out);
        }
    }

    /// A sample whose trigger and stack are known: out, or held while a file cookie of it
    /// is not named yet.
    fn emit(&mut self, seq: usize, out: &mut impl FnMut(Sample)) {
        let Some(mut w) = self.waiting.remove(&seq) else {
            return;
        };
        // Named since the stack was recorded (a file_cache on another CPU before this
        // CPU's next event).
        for f in w.s.frames.iter_mut() {
            if let Frame::Unresolved { cookie, value } = *f {
                if let Some(info) = self.files.get(&cookie) {
                    *f = classify(Rc::clone(info), value);
                    self.st.late_named_frames += 1;
                }
            }
        }
        let mut cookies: Vec<u64> =
            w.s.frames
                .iter()
                .filter_map(|f| match f {
                    Frame::Unresolved { cookie, .. } => Some(*cookie),
                    _ => None,
                })
                .collect();
        if cookies.is_empty() {
            self.release(w.s, out);
            return;
        }
        cookies.sort_unstable();
        cookies.dedup();
        for c in cookies {
            *self.awaited.entry(c).or_default() += 1;
        }
        self.held_frames += w.s.frames.len();
        self.held.push_back(w.s);
        while self.held_frames > HOLD_FRAMES {
            self.release_front(out);
        }
    }

    /// The oldest held sample comes out as it is: waited long enough.
    fn release_front(&mut self, out: &mut impl FnMut(Sample)) {
        if let Some(s) = self.held.pop_front() {
            self.unhold(&s);
            self.release(s, out);
        }
    }

    fn unhold(&mut self, s: &Sample) {
        self.held_frames -= s.frames.len();
        let mut cookies: Vec<u64> = s
            .frames
            .iter()
            .filter_map(|f| match f {
                Frame::Unresolved { cookie, .. } => Some(*cookie),
                _ => None,
            })
            .collect();
        cookies.sort_unstable();
        cookies.dedup();
        for c in cookies {
            if let Some(n) = self.awaited.get_mut(&c) {
                *n -= 1;
                if *n == 0 {
                    self.awaited.remove(&c);
                }
            }
        }
    }

    /// A `file_cache` named `cookie`: the held samples that wait for it take it, and those
    /// that wait for nothing else come out.
    fn named(&mut self, cookie: u64, info: &Rc<FileInfo>, out: &mut impl FnMut(Sample)) {
        if self.awaited.remove(&cookie).is_none() {
            return;
        }
        let mut rest = VecDeque::with_capacity(self.held.len());
        for mut s in std::mem::take(&mut self.held) {
            let mut unresolved = false;
            for f in s.frames.iter_mut() {
                if let Frame::Unresolved { cookie: c, value } = *f {
                    if c == cookie {
                        *f = classify(Rc::clone(info), value);
                        self.st.late_named_frames += 1;
                    } else {
                        unresolved = true;
                    }
                }
            }
            if unresolved {
                rest.push_back(s);
            } else {
                self.held_frames -= s.frames.len();
                self.release(s, out);
            }
        }
        self.held = rest;
    }

    /// A sample out, its frames counted.
    fn release(&mut self, s: Sample, out: &mut impl FnMut(Sample)) {
        self.st.frames += s.frames.len();
        for f in &s.frames {
            match f {
                Frame::Unresolved { cookie, .. } => {
                    self.st.unresolved_frames += 1;
                    self.unresolved.insert(*cookie);
                }
                Frame::BadIndex { .. } => self.st.bad_index_frames += 1,
                _ => {}
            }
        }
        out(s);
    }

    fn add_part(&mut self, aw: Awaiting, out: &mut impl FnMut(Sample)) {
        let Some(p) = self.pending.get_mut(&aw.key) else {
            return;
        };
        p.total = aw.total;
        p.got += aw.frames.len();
        if aw.truncated.is_some() {
            p.truncated = aw.truncated;
        }
        p.parts.push((aw.start, aw.frames));
        if p.got >= usize::from(p.total) {
            if let Some(p) = self.pending.remove(&aw.key) {
                self.st.stacks += 1;
                self.finish_stack(p, true, out);
            }
        }
    }

    fn finish_stack(&mut self, mut p: Pending, complete: bool, out: &mut impl FnMut(Sample)) {
        p.parts.sort_by_key(|(start, _)| *start);
        self.st.truncated_stacks += usize::from(p.truncated.is_some());
        let frames: Vec<Frame> = p.parts.into_iter().flat_map(|(_, f)| f).collect();
        for &seq in &p.samples {
            if let Some(w) = self.waiting.get_mut(&seq) {
                w.s.frames = frames.clone();
                w.s.complete = complete;
                w.s.truncated = p.truncated.clone();
                w.frames_known = true;
                if w.trigger_known {
                    self.emit(seq, out);
                }
            }
        }
    }

    /// The end of the trace: what is still waiting comes out as it is, counted.
    pub fn finish(mut self, out: &mut impl FnMut(Sample)) -> Stats {
        // CPUs in order: the samples come out the same every run.
        let mut cpus: Vec<u32> = self.cpus.keys().copied().collect();
        cpus.sort_unstable();
        for c in cpus {
            if let Some(mut cpu) = self.cpus.remove(&c) {
                if let Some(aw) = cpu.awaiting.take() {
                    self.add_part(aw, out);
                }
                if let Some((seq, _)) = cpu.waiting.take() {
                    self.set_trigger(seq, None, out);
                }
                if let Some(ks) = cpu.kswitch.take().filter(|ks| !ks.s.kernel.is_empty()) {
                    self.kthreads_out.insert(ks.s.pid, ks.s);
                }
            }
        }
        // Kernel threads the trace never switched in again: out without their time.
        let mut out_still: Vec<Sample> = self.kthreads_out.drain().map(|(_, s)| s).collect();
        out_still.sort_by_key(|s| (s.ts, s.pid));
        for mut s in out_still {
            s.seq = self.next_seq;
            self.next_seq += 1;
            self.release(s, out);
        }
        let mut rest: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        rest.sort_by_key(|p| p.samples.first().copied());
        for p in rest {
            if p.parts.is_empty() {
                self.st.cookies_without_stack += p.samples.len();
            } else {
                self.st.stacks += 1;
                self.st.incomplete_stacks += 1;
            }
            self.finish_stack(p, false, out);
        }
        while !self.held.is_empty() {
            self.release_front(out);
        }
        self.st.unresolved_cookies = self.unresolved.len();
        self.st
    }

    fn frame(&mut self, f: RawFrame) -> Frame {
        let Some(cookie) = f.file else {
            return Frame::BadIndex { value: f.value };
        };
        if cookie == COOKIE_NO_VMA || cookie == COOKIE_ANON {
            return Frame::Anon {
                addr: f.value,
                name: None,
            };
        }
        match self.files.get(&cookie) {
            Some(file) => classify(Rc::clone(file), f.value),
            None => Frame::Unresolved {
                cookie,
                value: f.value,
            },
        }
    }
}

/// A frame in a named file: anonymous, special or a file offset, by its path.
fn classify(file: Rc<FileInfo>, value: u64) -> Frame {
    if file.path.starts_with("[anon:") {
        Frame::Anon {
            addr: value,
            name: Some(file),
        }
    } else if file.path.starts_with('[') {
        Frame::Special {
            file,
            offset: value,
        }
    } else {
        Frame::File {
            file,
            offset: value,
        }
    }
}

/// Join decoded events (in timestamp order) into samples, in the order of their cookies.
pub fn join(events: &[Event]) -> (Vec<Sample>, Stats) {
    let mut j = Joiner::new();
    let mut samples = Vec::new();
    let mut out = |s: Sample| samples.push(s);
    for e in events {
        j.push(e.clone(), &mut out);
    }
    let st = j.finish(&mut out);
    samples.sort_by_key(|s| s.seq);
    (samples, st)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, cpu: u32, pid: i32, kind: Kind) -> Event {
        Event {
            ts,
            cpu,
            pid,
            tgid: None,
            comm: Some("t".into()),
            kind,
        }
    }
    fn other(ts: u64, cpu: u32, pid: i32) -> Event {
        ev(
            ts,
            cpu,
            pid,
            Kind::Other {
                name: "raw_syscalls:sys_enter".into(),
            },
        )
    }
    fn cookie(ts: u64, cpu: u32, pid: i32, c: u64) -> Event {
        ev(ts, cpu, pid, Kind::Cookie { cookie: c })
    }
    fn fc(ts: u64, cpu: u32, pid: i32, c: u64, path: &str) -> Event {
        ev(
            ts,
            cpu,
            pid,
            Kind::FileCache {
                cookie: c,
                path: path.into(),
                build_id: vec![],
            },
        )
    }
    fn stack(
        ts: u64,
        cpu: u32,
        pid: i32,
        c: u64,
        start: u16,
        total: u16,
        fr: &[(u64, u64)],
    ) -> Event {
        ev(
            ts,
            cpu,
            pid,
            Kind::Stack {
                cookie: c,
                start,
                total,
                frames: fr
                    .iter()
                    .map(|&(value, file)| RawFrame {
                        value,
                        file: Some(file),
                    })
                    .collect(),
            },
        )
    }
    fn path(f: &Frame) -> String {
        match f {
            Frame::File { file, offset } => format!("{}+{offset:#x}", file.path),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_stack_on_another_cpu_joins_its_cookie() {
        let e = vec![
            fc(1, 0, 5, 0xaa, "/bin/a"),
            other(2, 1, 7),
            cookie(3, 1, 7, 0x100),
            stack(9, 0, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
        ];
        let (s, st) = join(&e);
        assert_eq!(s.len(), 1);
        assert_eq!(&*s[0].event, "raw_syscalls:sys_enter");
        assert!(s[0].complete);
        assert_eq!(path(&s[0].frames[0]), "/bin/a+0x10");
        assert_eq!((st.cookies, st.stacks, st.unresolved_frames), (1, 1, 0));
    }

    #[test]
    fn a_cookie_before_its_staged_trigger() {
        // Filtered events commit after their cookie; unfiltered ones before it.
        let e = vec![
            cookie(1, 0, 7, 0x100),
            ev(
                2,
                0,
                7,
                Kind::Other {
                    name: "filtered".into(),
                },
            ),
            ev(
                3,
                0,
                7,
                Kind::Other {
                    name: "plain".into(),
                },
            ),
            cookie(4, 0, 7, 0x100),
            cookie(5, 0, 7, 0x100),
            ev(
                6,
                0,
                7,
                Kind::Other {
                    name: "filtered2".into(),
                },
            ),
            // Another task's event is never a trigger.
            ev(
                7,
                0,
                8,
                Kind::Other {
                    name: "other task".into(),
                },
            ),
            cookie(8, 0, 7, 0x100),
        ];
        let (s, st) = join(&e);
        let names: Vec<&str> = s.iter().map(|s| &*s.event).collect();
        assert_eq!(
            names,
            ["filtered", "plain", "filtered2", "(unrecorded event)"]
        );
        assert_eq!(st.cookies_without_trigger, 1);
    }

    #[test]
    fn a_stack_cut_short_says_why() {
        let trunc = |ts, cpu, pid, c: u64| {
            ev(
                ts,
                cpu,
                pid,
                Kind::Truncated {
                    cookie: c,
                    reason: "bad_frame".into(),
                },
            )
        };
        let e = vec![
            fc(1, 0, 7, 0xaa, "/bin/a"),
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            stack(4, 0, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
            // Right after its stack, with a repeated file_cache between.
            fc(5, 0, 7, 0xaa, "/bin/a"),
            trunc(6, 0, 7, 0x100),
            other(7, 0, 7),
            cookie(8, 0, 7, 0x200),
            stack(9, 0, 7, 0x200, 0, 1, &[(0x10, 0xaa)]),
            // Another cookie's, or another task's: not this stack's.
            trunc(10, 0, 8, 0x200),
            other(11, 1, 7),
            cookie(12, 1, 7, 0x300),
            // A stack of two records; the task moved to CPU 0 before the last one.
            stack(13, 1, 7, 0x300, 0, 2, &[(0x10, 0xaa)]),
            trunc(14, 1, 7, 0x300),
            stack(15, 0, 7, 0x300, 1, 2, &[(0x20, 0xaa)]),
        ];
        let (s, st) = join(&e);
        let why: Vec<Option<&str>> = s.iter().map(|s| s.truncated.as_deref()).collect();
        assert_eq!(why, [Some("bad_frame"), None, Some("bad_frame")]);
        assert!(s.iter().all(|s| s.complete));
        assert_eq!(st.truncated_stacks, 2);
        assert_eq!(&*s[0].event, "raw_syscalls:sys_enter");
    }

    #[test]
    fn the_modules_own_events_trigger_nothing() {
        // user_unwind_truncated follows the stack it describes; the staged sys_enter after
        // the next cookie is that cookie's trigger, not it.
        let trunc = |ts, name: &str| ev(ts, 0, 7, Kind::Other { name: name.into() });
        let e = vec![
            fc(1, 0, 7, 0xaa, "/bin/a"),
            cookie(2, 0, 7, 0x100),
            other(3, 0, 7),
            stack(4, 0, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
            trunc(5, "user_unwind:user_unwind_truncated"),
            cookie(6, 0, 7, 0x200),
            other(7, 0, 7),
            stack(8, 0, 7, 0x200, 0, 1, &[(0x10, 0xaa)]),
            trunc(9, "user_unwind_truncated"),
            cookie(10, 0, 7, 0x300),
            other(11, 0, 7),
            stack(12, 0, 7, 0x300, 0, 1, &[(0x10, 0xaa)]),
        ];
        let (s, st) = join(&e);
        let names: Vec<&str> = s.iter().map(|s| &*s.event).collect();
        assert_eq!(names, ["raw_syscalls:sys_enter"; 3]);
        assert_eq!(st.cookies_without_trigger, 0);
    }

    #[test]
    fn a_cookie_seen_again_with_another_path_names_the_stacks_after_it() {
        let e = vec![
            fc(1, 0, 5, 0xaa, "/lib/old.so"),
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            stack(4, 0, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
            // The same file seen by another path (renamed, another mount), on another CPU:
            // the stack before keeps the path it had.
            fc(5, 1, 8, 0xaa, "/lib/new.so"),
            other(6, 0, 7),
            cookie(7, 0, 7, 0x200),
            stack(8, 0, 7, 0x200, 0, 1, &[(0x20, 0xaa)]),
        ];
        let (s, _) = join(&e);
        assert_eq!(path(&s[0].frames[0]), "/lib/old.so+0x10");
        assert_eq!(path(&s[1].frames[0]), "/lib/new.so+0x20");
    }

    #[test]
    fn a_missing_file_cache_is_counted_not_guessed() {
        let e = vec![
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            stack(4, 0, 7, 0x100, 0, 2, &[(0x10, 0xaa), (0x20, 0xbb)]),
        ];
        let (s, st) = join(&e);
        assert_eq!(
            s[0].frames[0],
            Frame::Unresolved {
                cookie: 0xaa,
                value: 0x10
            }
        );
        assert_eq!((st.unresolved_frames, st.unresolved_cookies), (2, 2));
    }

    #[test]
    fn a_file_cache_after_the_stack_names_it() {
        // A cookie names one file whatever task, so the reminder of another task on
        // another CPU, a second later, names the stacks before it; the cookie it does not
        // name stays unresolved, and a cookie named before keeps that name.
        let e = vec![
            fc(1, 0, 5, 0xcc, "/lib/early.so"),
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            stack(
                4,
                0,
                7,
                0x100,
                0,
                3,
                &[(0x10, 0xaa), (0x20, 0xbb), (0x30, 0xcc)],
            ),
            other(5, 1, 8),
            cookie(6, 1, 8, 0x200),
            stack(7, 1, 8, 0x200, 0, 1, &[(0x40, 0xaa)]),
            fc(1_000_000_000, 1, 9, 0xaa, "/bin/late"),
            fc(1_000_000_001, 1, 9, 0xcc, "/lib/other-name.so"),
            other(1_000_000_002, 0, 7),
            cookie(1_000_000_003, 0, 7, 0x300),
            stack(1_000_000_004, 0, 7, 0x300, 0, 1, &[(0x50, 0xaa)]),
        ];
        let (s, st) = join(&e);
        assert_eq!(s.len(), 3);
        assert_eq!(path(&s[0].frames[0]), "/bin/late+0x10");
        assert_eq!(
            s[0].frames[1],
            Frame::Unresolved {
                cookie: 0xbb,
                value: 0x20
            }
        );
        assert_eq!(path(&s[0].frames[2]), "/lib/early.so+0x30");
        assert_eq!(path(&s[1].frames[0]), "/bin/late+0x40");
        assert_eq!(path(&s[2].frames[0]), "/bin/late+0x50");
        assert_eq!(st.late_named_frames, 2);
        assert_eq!((st.unresolved_frames, st.unresolved_cookies), (1, 1));
        assert_eq!(st.frames, 5);
    }

    #[test]
    fn a_sample_waits_for_its_file_cache_a_bounded_time() {
        // Past HOLD_NS the sample comes out as it is, in the order the stacks completed:
        // the join streams, it does not keep the trace.
        let mut j = Joiner::new();
        let mut out = Vec::new();
        for e in [
            other(1, 0, 7),
            cookie(2, 0, 7, 0x100),
            stack(3, 0, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
            other(4, 0, 7),
        ] {
            j.push(e, &mut |s| out.push(s));
        }
        assert!(out.is_empty(), "held while its cookie may still be named");
        j.push(other(HOLD_NS + 4, 0, 7), &mut |s| out.push(s));
        assert_eq!(out.len(), 1);
        j.push(fc(HOLD_NS + 5, 0, 7, 0xaa, "/bin/too-late"), &mut |s| {
            out.push(s)
        });
        let st = j.finish(&mut |s| out.push(s));
        assert!(matches!(out[0].frames[0], Frame::Unresolved { .. }));
        assert_eq!((st.unresolved_frames, st.late_named_frames), (1, 0));
    }

    #[test]
    fn held_samples_are_bounded_by_frames() {
        // A cookie never named: the oldest samples come out once HOLD_FRAMES are held.
        let mut j = Joiner::new();
        let mut n = 0usize;
        let mut most = 0usize;
        let frames: Vec<(u64, u64)> = (0..64).map(|i| (i, 0xaa)).collect();
        let stacks = HOLD_FRAMES / 64 + 100;
        for i in 0..stacks as u64 {
            let mut take = |_: Sample| n += 1;
            j.push(other(4 * i, 0, 7), &mut take);
            j.push(cookie(4 * i + 1, 0, 7, 0x100 + i), &mut take);
            j.push(stack(4 * i + 2, 0, 7, 0x100 + i, 0, 64, &frames), &mut take);
            most = most.max(j.held_frames);
        }
        // The last stack is complete at the next event on its CPU.
        j.push(other(4 * stacks as u64, 0, 7), &mut |_| n += 1);
        assert!(most <= HOLD_FRAMES);
        assert_eq!(n, 100);
        let st = j.finish(&mut |_| n += 1);
        assert_eq!(n, stacks);
        assert_eq!(st.unresolved_frames, stacks * 64);
    }

    #[test]
    fn file_caches_repeated_right_after_the_stack_resolve_it() {
        let e = vec![
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            stack(4, 0, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
            fc(4, 0, 7, 0xaa, "/bin/a"),
        ];
        let (s, st) = join(&e);
        assert_eq!(path(&s[0].frames[0]), "/bin/a+0x10");
        assert_eq!(st.unresolved_frames, 0);
    }

    #[test]
    fn split_records_are_put_back_in_start_order() {
        let mut e = vec![
            fc(1, 0, 7, 0xaa, "/bin/a"),
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
        ];
        let first: Vec<(u64, u64)> = (0..64).map(|i| (i, 0xaa)).collect();
        let second: Vec<(u64, u64)> = (64..70).map(|i| (i, 0xaa)).collect();
        // The second part first: order comes from start, not arrival.
        e.push(stack(4, 1, 7, 0x100, 64, 70, &second));
        e.push(stack(5, 1, 7, 0x100, 0, 70, &first));
        let (s, st) = join(&e);
        assert!(s[0].complete);
        assert_eq!(s[0].frames.len(), 70);
        for (i, f) in s[0].frames.iter().enumerate() {
            assert_eq!(path(f), format!("/bin/a+{i:#x}"));
        }
        assert_eq!((st.stacks, st.incomplete_stacks), (1, 0));
    }

    #[test]
    fn missing_parts_and_stacks_are_counted() {
        let e = vec![
            fc(1, 0, 7, 0xaa, "/bin/a"),
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            stack(4, 0, 7, 0x100, 64, 70, &[(1, 0xaa)]),
            other(5, 0, 7),
            cookie(6, 0, 7, 0x200),
            // A stack whose cookie came before the trace started.
            stack(7, 0, 8, 0x300, 0, 1, &[(1, 0xaa)]),
            // A cookie whose trigger was not recorded.
            cookie(8, 1, 9, 0x400),
        ];
        let (s, st) = join(&e);
        assert_eq!(st.incomplete_stacks, 1);
        assert!(!s[0].complete);
        assert_eq!(st.cookies_without_stack, 2);
        assert_eq!(st.stacks_without_cookie, 1);
        assert_eq!(st.cookies_without_trigger, 1);
    }

    #[test]
    fn every_event_of_one_entry_shares_the_stack() {
        let e = vec![
            fc(1, 0, 7, 0xaa, "/bin/a"),
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            ev(
                4,
                0,
                7,
                Kind::Other {
                    name: "sched:sched_switch".into(),
                },
            ),
            cookie(5, 0, 7, 0x100),
            stack(6, 0, 7, 0x100, 0, 1, &[(1, 0xaa)]),
        ];
        let (s, st) = join(&e);
        assert_eq!(s.len(), 2);
        assert_eq!(&*s[1].event, "sched:sched_switch");
        assert_eq!(s[0].frames, s[1].frames);
        assert_eq!(st.stacks, 1);
    }

    #[test]
    fn anonymous_special_and_empty() {
        let e = vec![
            fc(1, 0, 7, 0xcc, "[vdso]"),
            fc(1, 0, 7, 0xdd, "[anon:jit]"),
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            stack(
                4,
                0,
                7,
                0x100,
                0,
                4,
                &[(0x7f00, 1), (0x9, 0), (0x5, 0xcc), (0x7e00, 0xdd)],
            ),
            other(5, 0, 7),
            cookie(6, 0, 7, 0x200),
            stack(7, 0, 7, 0x200, 0, 0, &[]),
        ];
        let (s, _) = join(&e);
        assert_eq!(
            s[0].frames[0],
            Frame::Anon {
                addr: 0x7f00,
                name: None
            }
        );
        assert_eq!(
            s[0].frames[1],
            Frame::Anon {
                addr: 0x9,
                name: None
            }
        );
        assert!(matches!(&s[0].frames[2], Frame::Special { offset: 5, .. }));
        assert!(matches!(
            &s[0].frames[3],
            Frame::Anon {
                addr: 0x7e00,
                name: Some(_)
            }
        ));
        assert!(s[1].complete && s[1].frames.is_empty());
    }

    #[test]
    fn one_file_cache_explains_a_shared_cookie_for_every_process() {
        // The module's cookie names a file, whichever process maps it: one file_cache,
        // written for task 5, serves tasks 7 and 8; the cookie seen again with another
        // path (the file replaced) names the new one for the stacks after it.
        let e = vec![
            fc(1, 0, 5, 0xaa, "/lib/a.so"),
            other(2, 1, 7),
            cookie(3, 1, 7, 0x100),
            stack(4, 1, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
            other(5, 0, 8),
            cookie(6, 0, 8, 0x200),
            stack(7, 0, 8, 0x200, 0, 1, &[(0x20, 0xaa)]),
            fc(8, 1, 9, 0xaa, "/lib/b.so"),
            other(9, 1, 7),
            cookie(10, 1, 7, 0x300),
            stack(11, 1, 7, 0x300, 0, 1, &[(0x30, 0xaa)]),
        ];
        let (s, st) = join(&e);
        let paths: Vec<String> = s.iter().map(|s| path(&s.frames[0])).collect();
        assert_eq!(
            paths,
            ["/lib/a.so+0x10", "/lib/a.so+0x20", "/lib/b.so+0x30"]
        );
        assert_eq!(st.unresolved_frames, 0);
        // The same file for both tasks is one FileInfo.
        match (&s[0].frames[0], &s[1].frames[0]) {
            (Frame::File { file: a, .. }, Frame::File { file: b, .. }) => assert!(Rc::ptr_eq(a, b)),
            other => panic!("{other:?}"),
        }
    }

    fn switch(ts: u64, cpu: u32, prev: i32, state: &str, next: i32) -> Event {
        ev(
            ts,
            cpu,
            prev,
            Kind::Switch {
                name: "sched:sched_switch".into(),
                prev_pid: prev,
                prev_state: state.into(),
                next_pid: next,
                prev_comm: None,
                next_comm: None,
            },
        )
    }
    fn kstack(ts: u64, cpu: u32, pid: i32, names: &[&str]) -> Event {
        ev(
            ts,
            cpu,
            pid,
            Kind::KernelStack {
                frames: names.iter().map(|n| KFrame::Name((*n).into())).collect(),
            },
        )
    }

    #[test]
    fn a_switch_no_cookie_takes_is_a_kernel_threads_sample() {
        let events = vec![
            // Task 10 (no user memory: no cookie) blocks; task 7 blocks with its cookie
            // after its switch, then its stack once it runs again.
            switch(100, 0, 10, "I", 7),
            kstack(100, 0, 10, &["__schedule", "worker_thread", "kthread"]),
            switch(200, 0, 7, "S", 0),
            cookie(200, 0, 7, 0x100),
            kstack(200, 0, 7, &["__schedule", "do_nanosleep"]),
            // The idle task's switch is no blocking.
            switch(300, 0, 0, "R", 10),
            switch(350, 0, 10, "I", 7),
            switch(400, 0, 7, "R", 0),
            stack(400, 0, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
        ];
        let mut j = Joiner::new();
        j.kernel_threads = true;
        let mut got = Vec::new();
        for e in &events {
            j.push(e.clone(), &mut |s| got.push(s));
        }
        j.finish(&mut |s| got.push(s));
        let k: Vec<&Sample> = got.iter().filter(|s| s.kthread).collect();
        // Task 10: switched in at 300, 200 ns off the CPU; switched out again at 350
        // and never in: out without its time. Its second switch had no kernel stack:
        // not taken (a task's without -T, or a lost cookie's, is not guessed).
        assert_eq!(k.len(), 1, "{got:?}");
        assert_eq!((k[0].pid, k[0].off_cpu), (10, Some(200)));
        assert_eq!(k[0].switched.as_deref(), Some("I"));
        assert_eq!(&*k[0].event, "sched:sched_switch");
        assert_eq!(k[0].kernel.len(), 3);
        assert!(k[0].frames.is_empty() && k[0].complete);
        // Task 7's switch is its cookie's, not a kernel thread's.
        let u: Vec<&Sample> = got.iter().filter(|s| !s.kthread).collect();
        assert_eq!(u.len(), 1);
        assert_eq!((u[0].pid, u[0].off_cpu), (7, Some(150)));
        // Without kernel_threads, none.
        let (s, _) = join(&events);
        assert!(s.iter().all(|s| !s.kthread));
    }

    /// A switch with the tasks' names, as the trace has them.
    fn named_switch(ts: u64, prev: (i32, &str), state: &str, next: (i32, &str)) -> Event {
        ev(
            ts,
            0,
            prev.0,
            Kind::Switch {
                name: "sched:sched_switch".into(),
                prev_pid: prev.0,
                prev_state: state.into(),
                next_pid: next.0,
                prev_comm: Some(prev.1.into()),
                next_comm: Some(next.1.into()),
            },
        )
    }

    #[test]
    fn a_sample_has_its_tasks_name_at_its_event() {
        let rename = |ts, pid, comm: Option<&str>| {
            ev(
                ts,
                0,
                pid,
                Kind::Rename {
                    name: "task:task_rename".into(),
                    pid,
                    comm: comm.map(Rc::from),
                },
            )
        };
        let newtask = |ts, pid, child, comm: &str| {
            ev(
                ts,
                0,
                pid,
                Kind::NewTask {
                    name: "task:task_newtask".into(),
                    child,
                    thread: false,
                    comm: Some(comm.into()),
                },
            )
        };
        let events = vec![
            // Task 42 switched in as "sh": its sys_enter is sh's.
            named_switch(1, (0, "swapper/0"), "R", (42, "sh")),
            other(2, 0, 42),
            cookie(3, 0, 42, 0x10),
            // It execs (renamed through task_rename), then blocks as "prog".
            rename(4, 42, Some("prog")),
            other(5, 0, 42),
            cookie(6, 0, 42, 0x11),
            named_switch(7, (42, "prog"), "S", (0, "swapper/0")),
            cookie(8, 0, 42, 0x12),
            // Its child 43, a new task named after it; an exec of a file descriptor
            // (no name told): the file's name for the pid then.
            newtask(9, 42, 43, "prog"),
            other(10, 0, 43),
            cookie(11, 0, 43, 0x13),
            rename(12, 43, None),
            other(13, 0, 43),
            cookie(14, 0, 43, 0x14),
        ];
        let (s, _) = join(&events);
        let names: Vec<(i32, &str)> = s
            .iter()
            .map(|s| (s.pid, s.comm.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(
            names,
            [
                (42, "sh"),
                (42, "prog"),
                (42, "prog"),
                (43, "prog"),
                (43, "t")
            ]
        );
        // Without the renames recorded, a new task's name is its parent's only until an
        // exec the trace does not show: not taken. The switches' names are.
        let events = vec![
            newtask(1, 42, 43, "parent"),
            other(2, 0, 43),
            cookie(3, 0, 43, 0x10),
            named_switch(4, (43, "child"), "S", (0, "swapper/0")),
            cookie(5, 0, 43, 0x11),
        ];
        let (s, _) = join(&events);
        let names: Vec<&str> = s.iter().map(|s| s.comm.as_deref().unwrap_or("")).collect();
        assert_eq!(names, ["t", "child"]);
        // With them recorded (trace.dat's formats say so), it is.
        let mut j = Joiner::new();
        j.renames_recorded = true;
        let mut got = Vec::new();
        for e in &events {
            j.push(e.clone(), &mut |s| got.push(s));
        }
        j.finish(&mut |s| got.push(s));
        got.sort_by_key(|s| s.seq);
        assert_eq!(got[0].comm.as_deref(), Some("parent"));
    }
}
