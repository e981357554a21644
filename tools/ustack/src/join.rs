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
//! record, in timestamp order across all CPUs: that is what keeps a reused cookie right. The
//! module repeats a stack's `file_cache` events right after it when a reader reset the
//! buffer while the stack was being written; those (same task, same CPU, before that CPU's
//! next other event) resolve it too. Nothing else is guessed: a cookie without either stays
//! unresolved and is counted.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use crate::events::{Event, Kind, RawFrame};

/// File cookie 0: the address was in no mapping; 1: anonymous memory (raw addresses).
pub const COOKIE_NO_VMA: u64 = 0;
pub const COOKIE_ANON: u64 = 1;

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
    pub comm: Option<String>,
    /// The triggering event's name.
    pub event: String,
    pub cookie: u64,
    pub frames: Vec<Frame>,
    /// All records of the stack were found.
    pub complete: bool,
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
}

struct Pending {
    samples: Vec<usize>,
    parts: Vec<(u16, Vec<Frame>)>,
    total: u16,
    got: usize,
}

/// Join decoded events (in timestamp order) into samples.
pub fn join(events: &[Event]) -> (Vec<Sample>, Stats) {
    let mut st = Stats {
        events: events.len(),
        ..Stats::default()
    };
    let files = FileTimeline::new(events);
    st.file_caches = files.count;
    let mut samples: Vec<Sample> = Vec::new();
    let triggers = pair_triggers(events);
    let mut pending: HashMap<(i32, u64), Pending> = HashMap::new();
    let mut orphan_stacks = HashSet::new();
    let mut unresolved = HashSet::new();

    for (i, e) in events.iter().enumerate() {
        match &e.kind {
            Kind::Other { .. } => {}
            Kind::Cookie { cookie } => {
                st.cookies += 1;
                let event = match triggers.get(&i).map(|&t| &events[t].kind) {
                    Some(Kind::Other { name }) => name.clone(),
                    _ => {
                        st.cookies_without_trigger += 1;
                        "(unrecorded event)".to_string()
                    }
                };
                samples.push(Sample {
                    ts: e.ts,
                    cpu: e.cpu,
                    pid: e.pid,
                    comm: e.comm.clone(),
                    event,
                    cookie: *cookie,
                    frames: Vec::new(),
                    complete: false,
                });
                let p = pending.entry((e.pid, *cookie)).or_insert(Pending {
                    samples: Vec::new(),
                    parts: Vec::new(),
                    total: 0,
                    got: 0,
                });
                p.samples.push(samples.len() - 1);
            }
            Kind::Stack {
                cookie,
                start,
                total,
                frames,
            } => {
                let key = (e.pid, *cookie);
                let Some(p) = pending.get_mut(&key) else {
                    if orphan_stacks.insert(key) {
                        st.stacks_without_cookie += 1;
                    }
                    continue;
                };
                let resolved: Vec<Frame> = frames
                    .iter()
                    .map(|f| files.frame(events, i, *f, &mut unresolved))
                    .collect();
                p.total = *total;
                p.got += resolved.len();
                p.parts.push((*start, resolved));
                if p.got >= usize::from(p.total) {
                    if let Some(p) = pending.remove(&key) {
                        st.stacks += 1;
                        finish(&mut samples, p, true);
                    }
                }
            }
            Kind::FileCache { .. } => {}
        }
    }
    for (_, p) in pending.drain() {
        if p.parts.is_empty() {
            st.cookies_without_stack += p.samples.len();
        } else {
            st.stacks += 1;
            st.incomplete_stacks += 1;
        }
        finish(&mut samples, p, false);
    }
    for f in samples.iter().flat_map(|s| &s.frames) {
        st.frames += 1;
        match f {
            Frame::Unresolved { .. } => st.unresolved_frames += 1,
            Frame::BadIndex { .. } => st.bad_index_frames += 1,
            _ => {}
        }
    }
    st.unresolved_cookies = unresolved.len();
    (samples, st)
}

/// Each cookie event's trigger: the index of an event of the same task beside it on its
/// CPU, before it if that one is free, else after it.
fn pair_triggers(events: &[Event]) -> HashMap<usize, usize> {
    let mut per_cpu: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        per_cpu.entry(e.cpu).or_default().push(i);
    }
    let mut pairs = HashMap::new();
    for seq in per_cpu.values() {
        let mut taken = HashSet::new();
        for (k, &i) in seq.iter().enumerate() {
            if !matches!(events[i].kind, Kind::Cookie { .. }) {
                continue;
            }
            let free = |j: usize| {
                matches!(events[j].kind, Kind::Other { .. })
                    && events[j].pid == events[i].pid
                    && !taken.contains(&j)
            };
            let before = k.checked_sub(1).map(|k| seq[k]).filter(|&j| free(j));
            let after = seq.get(k + 1).copied().filter(|&j| free(j));
            if let Some(j) = before.or(after) {
                taken.insert(j);
                pairs.insert(i, j);
            }
        }
    }
    pairs
}

fn finish(samples: &mut [Sample], mut p: Pending, complete: bool) {
    p.parts.sort_by_key(|(start, _)| *start);
    let frames: Vec<Frame> = p.parts.into_iter().flat_map(|(_, f)| f).collect();
    for &i in &p.samples {
        samples[i].frames = frames.clone();
        samples[i].complete = complete;
    }
}

/// Every `file_cache` by cookie, in event order, to find the one before a stack.
struct FileTimeline {
    by_cookie: HashMap<u64, Vec<(usize, Rc<FileInfo>)>>,
    count: usize,
}

impl FileTimeline {
    fn new(events: &[Event]) -> Self {
        let mut by_cookie: HashMap<u64, Vec<(usize, Rc<FileInfo>)>> = HashMap::new();
        let mut count = 0;
        for (i, e) in events.iter().enumerate() {
            if let Kind::FileCache {
                cookie,
                path,
                build_id,
            } = &e.kind
            {
                count += 1;
                let list = by_cookie.entry(*cookie).or_default();
                // A repeat of the same file shares its Rc, so the symbolizer sees one file.
                let info = match list.last() {
                    Some((_, last)) if last.path == *path && last.build_id == *build_id => {
                        Rc::clone(last)
                    }
                    _ => Rc::new(FileInfo {
                        cookie: *cookie,
                        path: path.clone(),
                        build_id: build_id.clone(),
                    }),
                };
                list.push((i, info));
            }
        }
        FileTimeline { by_cookie, count }
    }

    /// The file cookie `cookie` as of the stack record at `at`.
    fn lookup(&self, events: &[Event], at: usize, cookie: u64) -> Option<Rc<FileInfo>> {
        let list = self.by_cookie.get(&cookie)?;
        let n = list.partition_point(|(i, _)| *i < at);
        if n > 0 {
            return Some(Rc::clone(&list[n - 1].1));
        }
        // Repeated right after the stack: same task and CPU, before that CPU's next
        // event of another kind.
        let me = &events[at];
        for (j, e) in events.iter().enumerate().skip(at + 1) {
            if e.cpu != me.cpu {
                continue;
            }
            match &e.kind {
                Kind::FileCache { cookie: c, .. } if e.pid == me.pid => {
                    if *c == cookie {
                        let (_, f) = list.iter().find(|(i, _)| *i == j)?;
                        return Some(Rc::clone(f));
                    }
                }
                _ => break,
            }
        }
        None
    }

    fn frame(
        &self,
        events: &[Event],
        at: usize,
        f: RawFrame,
        unresolved: &mut HashSet<u64>,
    ) -> Frame {
        let Some(cookie) = f.file else {
            return Frame::BadIndex { value: f.value };
        };
        if cookie == COOKIE_NO_VMA || cookie == COOKIE_ANON {
            return Frame::Anon {
                addr: f.value,
                name: None,
            };
        }
        let Some(file) = self.lookup(events, at, cookie) else {
            unresolved.insert(cookie);
            return Frame::Unresolved {
                cookie,
                value: f.value,
            };
        };
        if file.path.starts_with("[anon:") {
            Frame::Anon {
                addr: f.value,
                name: Some(file),
            }
        } else if file.path.starts_with('[') {
            Frame::Special {
                file,
                offset: f.value,
            }
        } else {
            Frame::File {
                file,
                offset: f.value,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, cpu: u32, pid: i32, kind: Kind) -> Event {
        Event {
            ts,
            cpu,
            pid,
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
        assert_eq!(s[0].event, "raw_syscalls:sys_enter");
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
        let names: Vec<&str> = s.iter().map(|s| s.event.as_str()).collect();
        assert_eq!(
            names,
            ["filtered", "plain", "filtered2", "(unrecorded event)"]
        );
        assert_eq!(st.cookies_without_trigger, 1);
    }

    #[test]
    fn a_reused_cookie_takes_the_file_cache_before_the_stack() {
        let e = vec![
            fc(1, 0, 5, 0xaa, "/lib/old.so"),
            other(2, 0, 7),
            cookie(3, 0, 7, 0x100),
            stack(4, 0, 7, 0x100, 0, 1, &[(0x10, 0xaa)]),
            // The file went, its cookie came back for another file, on another CPU.
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
            // A later file_cache of another task does not count.
            fc(5, 0, 9, 0xaa, "/bin/late"),
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
        assert_eq!(s[1].event, "sched:sched_switch");
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
}
