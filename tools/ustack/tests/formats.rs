// SPDX-License-Identifier: GPL-2.0

//! Outputs other tools read: perf script's text (checked against the folded stacks, and by
//! stackcollapse-perf.pl when it is installed: $STACKCOLLAPSE_PERF or on the PATH), and
//! pprof's sample labels and `has_functions`.

mod common;

use common::fixture;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn ustack(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// perf script's text back to `comm;outer;...;inner` counts, by its documented shape.
fn collapse(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Some((comm, mut frames)) = cur.take() {
                frames.push(comm);
                frames.reverse();
                *out.entry(frames.join(";")).or_default() += 1;
            }
        } else if let Some(f) = line.strip_prefix('\t') {
            let f = f.trim_start();
            let (_addr, rest) = f.split_once(' ').unwrap();
            let (func, module) = rest.rsplit_once(" (").unwrap();
            let module = module.strip_suffix(')').unwrap();
            let base = module.rsplit('/').next().unwrap();
            let name = if func == "[unknown]" {
                format!("[{base}]")
            } else {
                func.to_string()
            };
            cur.as_mut().unwrap().1.push(name);
        } else {
            // comm tid [cpu] secs: 1 event:
            assert!(line.ends_with(':'), "{line}");
            let comm = line.split(' ').next().unwrap().to_string();
            cur = Some((comm, Vec::new()));
        }
    }
    out
}

#[test]
fn perf_script_text_holds_every_sample() {
    let t = fixture("v7-zstd.dat");
    let t = t.to_str().unwrap();
    let text = String::from_utf8(ustack(&[
        "-q",
        "--sysroot",
        "/nonexistent",
        "--perf-script",
        "-",
        t,
    ]))
    .unwrap();
    let ours = collapse(&text);
    // The ground truth: 20 samples of uu_chain, 3 of uu_bench, 1 of busybox, every frame
    // of the trace in its file (none named: nothing is found under /nonexistent).
    assert_eq!(ours.values().sum::<u64>(), 24);
    let chain = "uu_chain;[libc.so.6];[uu_chain];[uu_chain];[uu_chain];[uu_chain];[libuutest.so]";
    assert_eq!(ours.get(chain), Some(&20), "{ours:#?}");
    assert_eq!(text.matches(": 1 raw_syscalls:sys_enter:\n").count(), 24);
    assert!(
        text.contains("\t            12ce [unknown] (/usr/bin/uu_chain)\n"),
        "{text}"
    );
    // stackcollapse-perf.pl, when there is one, reads the same stacks.
    let sc = std::env::var_os("STACKCOLLAPSE_PERF")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("stackcollapse-perf.pl"))
                    .find(|f| f.is_file())
            })
        });
    let Some(sc) = sc else {
        eprintln!("SKIP: stackcollapse-perf.pl: not installed (set $STACKCOLLAPSE_PERF)");
        return;
    };
    let mut c = Command::new("perl")
        .arg(&sc)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut c.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    let theirs: BTreeMap<String, u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_string(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(theirs, ours);
}

/// A protobuf message's fields: (number, varint or bytes).
fn pb(mut b: &[u8]) -> Vec<(u64, Result<u64, Vec<u8>>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0;
        let mut shift = 0;
        loop {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte < 0x80 {
                return v;
            }
        }
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        match key & 7 {
            0 => out.push((key >> 3, Ok(varint(&mut b)))),
            2 => {
                let n = varint(&mut b) as usize;
                out.push((key >> 3, Err(b[..n].to_vec())));
                b = &b[n..];
            }
            t => panic!("wire type {t}"),
        }
    }
    out
}

fn get(m: &[(u64, Result<u64, Vec<u8>>)], k: u64) -> u64 {
    m.iter()
        .find(|(n, _)| *n == k)
        .map(|(_, v)| *v.as_ref().unwrap())
        .unwrap_or(0)
}

#[test]
fn pprof_labels_and_has_functions() {
    let t = fixture("v7-zstd.dat");
    let gz = ustack(&[
        "-q",
        "--sysroot",
        "/nonexistent",
        "--pprof",
        "-",
        t.to_str().unwrap(),
    ]);
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
    let f = pb(&raw);
    let strings: Vec<String> = f
        .iter()
        .filter(|(n, _)| *n == 6)
        .map(|(_, v)| String::from_utf8(v.clone().unwrap_err()).unwrap())
        .collect();
    // Nothing named: no mapping says has_functions, no location has a line, so pprof
    // may symbolize them all.
    for (_, m) in f.iter().filter(|(n, _)| *n == 3) {
        assert_eq!(get(&pb(m.as_ref().unwrap_err()), 7), 0);
    }
    for (_, l) in f.iter().filter(|(n, _)| *n == 4) {
        assert!(!pb(l.as_ref().unwrap_err()).iter().any(|(n, _)| *n == 4));
    }
    // The event, comm and pid are labels of each sample, not frames.
    let mut by_task: BTreeMap<(String, String, u64), u64> = BTreeMap::new();
    for (_, s) in f.iter().filter(|(n, _)| *n == 2) {
        let s = pb(s.as_ref().unwrap_err());
        let value = s
            .iter()
            .find(|(n, _)| *n == 2)
            .unwrap()
            .1
            .clone()
            .unwrap_err()[0] as u64;
        let mut labels: BTreeMap<String, (String, u64)> = BTreeMap::new();
        for (_, l) in s.iter().filter(|(n, _)| *n == 3) {
            let l = pb(l.as_ref().unwrap_err());
            labels.insert(
                strings[get(&l, 1) as usize].clone(),
                (strings[get(&l, 2) as usize].clone(), get(&l, 3)),
            );
        }
        *by_task
            .entry((
                labels["event"].0.clone(),
                labels["comm"].0.clone(),
                labels["pid"].1,
            ))
            .or_default() += value;
    }
    let ev = "raw_syscalls:sys_enter".to_string();
    assert_eq!(
        by_task.get(&(ev.clone(), "uu_chain".into(), 85)),
        Some(&20),
        "{by_task:?}"
    );
    assert_eq!(by_task.values().sum::<u64>(), 24);
}
