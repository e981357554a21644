// SPDX-License-Identifier: GPL-2.0

//! pprof's `profile.proto`, gzipped.

use std::collections::HashMap;
use std::io::Write;

use crate::stacks::Profile;

/// A protobuf message being written: fields by number, varints and byte strings.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.varint(u64::from(field) << 3);
            self.varint(v);
        }
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint((u64::from(field) << 3) | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn packed(&mut self, field: u32, vs: &[u64]) {
        let mut p = Pb::default();
        for &v in vs {
            p.varint(v);
        }
        self.bytes(field, &p.0);
    }
}

/// Is `path` a shared library by its name, as pprof's own heuristic for the main binary
/// tells them (`.so` at the end or before a version)?
fn is_library(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.ends_with(".so") || base.contains(".so.") || base.contains(".so_")
}

/// pprof's `profile.proto`, gzipped. Each file is a Mapping with its build-id, mapped at
/// address 0 with file offset 0, so that a Location's address is the frame's offset in the
/// file: the trace's own data, one to one. The first Mapping is the main binary (pprof's
/// `File:`): of the programs (not a library, not `[kernel.kallsyms]` or `[vdso]`), the one
/// with the most samples. A symbolized frame's functions (inlined ones first) are its
/// Lines; a frame nothing named has one Line, the name the other outputs give it
/// (`file+0xoffset`). So every Mapping says `has_functions`, and `has_filenames`,
/// `has_line_numbers` and `has_inline_frames` where its Lines have them: pprof does not
/// symbolize the profile again. The event, the command and the pid are sample labels, and
/// `truncated` the reason the unwinder stopped short, where it did. Times are the
/// trace's: `time_nanos` the first sample's when the trace maps its clock to the time of
/// day (`trace-cmd record --date`: pprof's `time_nanos` is wall-clock time), else 0 (not
/// given); `duration_nanos` the span; and, when the profile kept them, every event is a
/// Sample of its own with its time as the numeric label `time` in `nanoseconds` (the
/// trace's clock). Only upstream `profile.proto`'s fields are written.
pub fn pprof(p: &Profile) -> Vec<u8> {
    let mut strings: Vec<String> = vec![String::new()];
    let mut sidx: HashMap<String, u64> = HashMap::new();
    let mut s = |v: &str| -> u64 {
        if v.is_empty() {
            return 0;
        }
        if let Some(&i) = sidx.get(v) {
            return i;
        }
        strings.push(v.to_string());
        sidx.insert(v.to_string(), strings.len() as u64 - 1);
        strings.len() as u64 - 1
    };
    let mut msg = Pb::default();
    // sample_type: samples/count.
    // Off-CPU: the value is the time off the CPU (off-cpu/nanoseconds); the period is
    // still a sample an event.
    let (k_samples, k_count) = if p.off_cpu {
        (s("off-cpu"), s("nanoseconds"))
    } else {
        (s("samples"), s("count"))
    };
    let mut vt = Pb::default();
    vt.uint(1, k_samples);
    vt.uint(2, k_count);
    msg.bytes(1, &vt.0);
    let (k_time, k_ns) = if p.times {
        (s("time"), s("nanoseconds"))
    } else {
        (0, 0)
    };

    // Mappings: each frame's (path, build-id), numbered in the order first seen, and
    // the samples of each (an entry's value once per mapping it has frames in).
    type MapKey = (String, Option<String>);
    let mut map_keys: Vec<MapKey> = Vec::new();
    let mut map_idx: HashMap<MapKey, usize> = HashMap::new();
    let frame_map: Vec<Option<usize>> = p
        .frames
        .iter()
        .map(|f| {
            let m = f.module.as_ref()?;
            let key = (m.clone(), f.build_id.clone());
            Some(*map_idx.entry(key.clone()).or_insert_with(|| {
                map_keys.push(key);
                map_keys.len() - 1
            }))
        })
        .collect();
    let mut weight = vec![0u64; map_keys.len()];
    let mut last_entry = vec![usize::MAX; map_keys.len()];
    let mut first_seen: Vec<usize> = Vec::new();
    for (i, e) in p.raw.iter().enumerate() {
        for &pf in &e.frames {
            if let Some(Some(m)) = frame_map.get(pf as usize) {
                if last_entry[*m] != i {
                    if last_entry[*m] == usize::MAX {
                        first_seen.push(*m);
                    }
                    last_entry[*m] = i;
                    weight[*m] += e.count;
                }
            }
        }
    }
    // The main binary first (the first of the most weighty on a tie), then the others
    // as the samples meet them.
    let kernel: Vec<bool> = {
        let mut k = vec![false; map_keys.len()];
        for (f, m) in p.frames.iter().zip(&frame_map) {
            if let Some(m) = m {
                k[*m] |= f.kernel;
            }
        }
        k
    };
    let main = first_seen
        .iter()
        .copied()
        .filter(|&m| !kernel[m] && !map_keys[m].0.starts_with('[') && !is_library(&map_keys[m].0))
        .fold(None, |best: Option<usize>, m| match best {
            Some(b) if weight[b] >= weight[m] => Some(b),
            _ => Some(m),
        });
    let mut order: Vec<usize> = main.into_iter().collect();
    order.extend(first_seen.iter().copied().filter(|&m| Some(m) != main));
    // Mapping index -> its id (1-based, in `order`).
    let mut map_id = vec![0u64; map_keys.len()];
    for (i, &m) in order.iter().enumerate() {
        map_id[m] = i as u64 + 1;
    }
    // What the Lines of each mapping's locations hold: files, line numbers, inlined
    // functions.
    let mut has_files = vec![false; map_keys.len()];
    let mut has_lines = vec![false; map_keys.len()];
    let mut has_inline = vec![false; map_keys.len()];

    let mut functions: HashMap<(String, Option<String>), u64> = HashMap::new();
    let mut function_msgs = Vec::new();
    let mut location_msgs = Vec::new();
    let mut loc_of: HashMap<u32, u64> = HashMap::new();
    let mut sample_msgs = Vec::new();
    let (k_event, k_comm, k_pid) = (s("event"), s("comm"), s("pid"));
    let mut pt = Pb::default();
    pt.uint(1, s("samples"));
    pt.uint(2, s("count"));
    let k_truncated = s("truncated");
    let k_state = s("state");

    for e in &p.raw {
        let mut loc_ids = Vec::with_capacity(e.frames.len());
        for &pf in &e.frames {
            let next = loc_of.len() as u64 + 1;
            let id = *loc_of.entry(pf).or_insert_with(|| {
                let f = &p.frames[pf as usize];
                let m = frame_map.get(pf as usize).copied().flatten();
                let mut loc = Pb::default();
                loc.uint(1, next);
                if let Some(m) = m {
                    loc.uint(2, map_id[m]);
                }
                if let Some(off) = f.offset {
                    loc.uint(3, off);
                }
                let mut lines: Vec<(String, Option<String>, u32)> = Vec::new();
                match &f.syms {
                    Some(syms) => {
                        for sy in syms.iter() {
                            lines.push((
                                crate::stacks::escape(&sy.name),
                                sy.file.clone(),
                                sy.line.unwrap_or(0),
                            ));
                        }
                    }
                    // A frame nothing named is named as the other outputs name it.
                    None => lines.push((f.fallback.clone(), None, 0)),
                }
                if let Some(m) = m {
                    has_files[m] |= lines.iter().any(|l| l.1.is_some());
                    has_lines[m] |= lines.iter().any(|l| l.2 > 0);
                    has_inline[m] |= lines.len() > 1;
                }
                for (name, src, line) in lines {
                    let key = (name.clone(), src.clone());
                    let fnext = functions.len() as u64 + 1;
                    let fid = *functions.entry(key).or_insert_with(|| {
                        let mut fm = Pb::default();
                        fm.uint(1, fnext);
                        fm.uint(2, s(&name));
                        fm.uint(3, s(&name));
                        if let Some(src) = &src {
                            fm.uint(4, s(src));
                        }
                        function_msgs.push(fm.0);
                        fnext
                    });
                    let mut lm = Pb::default();
                    lm.uint(1, fid);
                    lm.uint(2, u64::from(line));
                    loc.bytes(4, &lm.0);
                }
                location_msgs.push(loc.0);
                next
            });
            loc_ids.push(id);
        }
        // The labels every sample of the entry has.
        let mut labels = Pb::default();
        let task = &p.labels[e.task as usize].name;
        let (comm, pid) = task.rsplit_once('-').unwrap_or((task.as_str(), "0"));
        for (k, v, num) in [
            (k_event, s(&p.labels[e.event as usize].name), None),
            (k_comm, s(comm), None),
            (k_pid, 0, pid.parse::<i64>().ok()),
        ] {
            let mut lm = Pb::default();
            lm.uint(1, k);
            lm.uint(2, v);
            if let Some(n) = num {
                lm.uint(3, n as u64);
            }
            labels.bytes(3, &lm.0);
        }
        if let Some(st) = &e.state {
            let mut lm = Pb::default();
            lm.uint(1, k_state);
            lm.uint(2, s(st));
            labels.bytes(3, &lm.0);
        }
        if let Some(r) = &e.truncated {
            let mut lm = Pb::default();
            lm.uint(1, k_truncated);
            lm.uint(2, s(r));
            labels.bytes(3, &lm.0);
        }
        let sample = |value: u64, time: Option<u64>| {
            let mut sm = Pb::default();
            sm.packed(1, &loc_ids);
            sm.packed(2, &[value]);
            sm.0.extend_from_slice(&labels.0);
            if let Some(t) = time {
                let mut lm = Pb::default();
                lm.uint(1, k_time);
                lm.uint(3, t);
                lm.uint(4, k_ns);
                sm.bytes(3, &lm.0);
            }
            sm.0
        };
        if p.times {
            // One sample an event, its time a numeric label.
            for &(t, v) in &e.times {
                sample_msgs.push(sample(v, Some(t)));
            }
        } else {
            sample_msgs.push(sample(e.count, None));
        }
    }
    let mut mapping_msgs = Vec::new();
    for &m in &order {
        let (path, build_id) = &map_keys[m];
        let mut mp = Pb::default();
        mp.uint(1, map_id[m]);
        // The kernel's mapping ([kernel.kallsyms], a module's [name]) holds kernel
        // addresses, as perf's pprof export maps them; a file's, offsets in it.
        mp.uint(
            3,
            if path.starts_with('[') && build_id.is_none() {
                u64::MAX
            } else {
                u64::MAX >> 1
            },
        );
        mp.uint(5, s(path));
        if let Some(b) = build_id {
            mp.uint(6, s(b));
        }
        // Every location has its functions (named, or file+0xoffset).
        mp.uint(7, 1);
        mp.uint(8, u64::from(has_files[m]));
        mp.uint(9, u64::from(has_lines[m]));
        mp.uint(10, u64::from(has_inline[m]));
        mapping_msgs.push(mp.0);
    }
    for m in &sample_msgs {
        msg.bytes(2, m);
    }
    for m in &mapping_msgs {
        msg.bytes(3, m);
    }
    for m in &location_msgs {
        msg.bytes(4, m);
    }
    for m in &function_msgs {
        msg.bytes(5, m);
    }
    for st in &strings {
        msg.bytes(6, st.as_bytes());
    }
    // Wall-clock time, when the trace maps its clock to the time of day; else not given
    // (the clock's count from boot is no date).
    if p.wall_clock {
        msg.uint(9, p.first_ts);
    }
    msg.uint(10, p.last_ts.saturating_sub(p.first_ts));
    // period_type and period: every sample is one event.
    msg.bytes(11, &pt.0);
    msg.uint(12, 1);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&msg.0);
    gz.finish().unwrap_or_default()
}
