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

/// pprof's `profile.proto`, gzipped. Each file is a Mapping with its build-id, mapped at
/// address 0 with file offset 0, so that a Location's address is the frame's offset in the
/// file: the trace's own data, one to one. A symbolized frame's functions (inlined ones
/// first) are its Lines; a frame nothing named has none, and its mapping says
/// `has_functions` only if some of its frames were named, so that pprof can symbolize the
/// rest itself. The event, the command and the pid are sample labels, and `truncated`
/// the reason the unwinder stopped short, where it did. Times are the
/// trace's: `time_nanos` the first sample's, `duration_nanos` the span, and, when the
/// profile kept them, every event is a Sample of its own with its time as the numeric
/// label `time` in `nanoseconds` (on the clock of `time_nanos`). Only upstream
/// `profile.proto`'s fields are written.
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

    // Mappings: (path, build-id) -> id, and whether any of its frames has functions.
    let mut mappings: HashMap<(String, Option<String>), (u64, bool)> = HashMap::new();
    let mut mapping_order: Vec<(String, Option<String>)> = Vec::new();
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
                let mut loc = Pb::default();
                loc.uint(1, next);
                if let Some(m) = &f.module {
                    let key = (m.clone(), f.build_id.clone());
                    let n = mappings.len() as u64 + 1;
                    let entry = mappings.entry(key.clone()).or_insert_with(|| {
                        mapping_order.push(key);
                        (n, false)
                    });
                    entry.1 |= f.syms.is_some();
                    loc.uint(2, entry.0);
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
                    // A frame no file can be found for is named as the other outputs name
                    // it; one in a file of a mapping is left for pprof to symbolize.
                    None if f.module.is_none() => lines.push((f.fallback.clone(), None, 0)),
                    None => {}
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
    for key in &mapping_order {
        let (id, has_functions) = mappings[key];
        let mut mp = Pb::default();
        mp.uint(1, id);
        // The kernel's mapping ([kernel.kallsyms], a module's [name]) holds kernel
        // addresses, as perf's pprof export maps them; a file's, offsets in it.
        mp.uint(
            3,
            if key.0.starts_with('[') && key.1.is_none() {
                u64::MAX
            } else {
                u64::MAX >> 1
            },
        );
        mp.uint(5, s(&key.0));
        if let Some(b) = &key.1 {
            mp.uint(6, s(b));
        }
        mp.uint(7, u64::from(has_functions));
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
    // The trace's own time: its clock's nanoseconds (the global clock's count from
    // boot), as perf script and trace-cmd report print it.
    msg.uint(9, p.first_ts);
    msg.uint(10, p.last_ts.saturating_sub(p.first_ts));
    // period_type and period: every sample is one event.
    msg.bytes(11, &pt.0);
    msg.uint(12, 1);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&msg.0);
    gz.finish().unwrap_or_default()
}
