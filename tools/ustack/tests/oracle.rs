// SPDX-License-Identifier: GPL-2.0

//! The trace.dat reader against `trace-cmd report`: each fixture was recorded in the guest
//! by trace-cmd 3.1.6 (tests/guest/ustack.sh) and printed by it there; every event the
//! report shows must be the event the reader decoded, field by field.

use std::path::Path;

use ustack::events::{decode_frames, decode_packed_frames, Event, Kind};

/// One event line of `trace-cmd report`: pid, cpu, microseconds (rounded), name, body.
fn report_events(text: &str) -> Vec<(i32, u32, u64, String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(open) = line.find(" [") else {
            continue;
        };
        let Some(close) = line[open..].find(']').map(|c| c + open) else {
            continue;
        };
        let task = line[..open].trim();
        let Some(dash) = task.rfind('-') else {
            continue;
        };
        let (Ok(pid), Ok(cpu)) = (task[dash + 1..].parse(), line[open + 2..close].parse()) else {
            continue;
        };
        let rest = line[close + 1..].trim_start();
        let (ts, rest) = rest.split_once(": ").unwrap();
        let (sec, usec) = ts.trim().split_once('.').unwrap();
        let us = sec.parse::<u64>().unwrap() * 1_000_000 + usec.parse::<u64>().unwrap();
        let (name, body) = rest.split_once(':').unwrap();
        out.push((
            pid,
            cpu,
            us,
            name.trim().to_string(),
            body.trim().to_string(),
        ));
    }
    out
}

fn field<'a>(body: &'a str, key: &str) -> &'a str {
    let start = body.find(&format!("{key}=")).unwrap() + key.len() + 1;
    let rest = &body[start..];
    // A field runs to the next " name=".
    let end = rest
        .match_indices(' ')
        .find(|(i, _)| {
            let after = &rest[i + 1..];
            after
                .split_once('=')
                .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        })
        .map(|(i, _)| i)
        .unwrap_or(rest.len());
    &rest[..end]
}

fn nums(s: &str) -> Vec<u64> {
    s.split_whitespace().map(|n| n.parse().unwrap()).collect()
}

/// What the report line says, in the decoder's terms.
fn expected(name: &str, body: &str) -> Kind {
    match name {
        "user_unwind_cookie" => Kind::Cookie {
            cookie: u64::from_str_radix(field(body, "cookie"), 16).unwrap(),
        },
        "user_unwind_stack" => {
            let files = nums(field(body, "files"));
            let offs: Vec<u32> = nums(field(body, "offs"))
                .iter()
                .map(|&v| v as u32)
                .collect();
            // Recordings of the module before the index was packed into the offset words
            // hold a file_idx array instead.
            let frames = if body.contains(" file_idx=") {
                let idx: Vec<u8> = nums(field(body, "file_idx"))
                    .iter()
                    .map(|&v| v as u8)
                    .collect();
                decode_frames(&files, &offs, &idx)
            } else {
                decode_packed_frames(
                    &files,
                    &offs,
                    field(body, "idx_bits").parse().unwrap(),
                    field(body, "wide") != "0",
                )
            };
            Kind::Stack {
                cookie: u64::from_str_radix(field(body, "cookie"), 16).unwrap(),
                start: field(body, "start").parse().unwrap(),
                total: field(body, "total").parse().unwrap(),
                frames,
            }
        }
        "file_cache" => {
            let id = field(body, "build_id");
            Kind::FileCache {
                cookie: u64::from_str_radix(field(body, "cookie"), 16).unwrap(),
                path: field(body, "path").to_string(),
                build_id: (0..id.len() / 2)
                    .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap())
                    .collect(),
            }
        }
        "user_unwind_truncated" => Kind::Truncated {
            cookie: u64::from_str_radix(field(body, "cookie"), 16).unwrap(),
            reason: field(body, "reason").into(),
        },
        other => Kind::Other { name: other.into() },
    }
}

fn short(k: &Kind) -> Kind {
    match k {
        Kind::Other { name } => Kind::Other {
            name: name.rsplit(':').next().unwrap().into(),
        },
        k => k.clone(),
    }
}

/// The committed recordings, and those of a fresh guest run in `$USTACK_FIXTURES` (the
/// end-to-end test's) when set.
pub fn fixture_dirs() -> Vec<std::path::PathBuf> {
    let mut v = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")];
    if let Some(d) = std::env::var_os("USTACK_FIXTURES") {
        v.push(d.into());
    }
    v
}

fn check(fixture: &str) {
    for dir in fixture_dirs() {
        check_in(&dir, fixture);
    }
}

fn check_in(dir: &Path, fixture: &str) {
    let dat = std::fs::read(dir.join(format!("{fixture}.dat"))).unwrap();
    let report = std::fs::read_to_string(dir.join(format!("{fixture}.report"))).unwrap();
    let loaded = ustack::load(&dat).unwrap();
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    let want = report_events(&report);
    assert!(
        want.len() > 50,
        "{fixture}: the report has {} events",
        want.len()
    );
    let mut got: Vec<(i32, u32, u64, Kind)> = loaded
        .events
        .iter()
        .map(|e: &Event| (e.pid, e.cpu, (e.ts + 500) / 1000, short(&e.kind)))
        .collect();
    let mut want: Vec<(i32, u32, u64, Kind)> = want
        .iter()
        .map(|(pid, cpu, us, name, body)| (*pid, *cpu, *us, expected(name, body)))
        .collect();
    assert_eq!(got.len(), want.len(), "{fixture}: event count");
    // Same multiset; the order of events with the same microsecond is not compared.
    let key = |e: &(i32, u32, u64, Kind)| (e.2, e.1, format!("{:?}", e.3));
    got.sort_by_key(key);
    want.sort_by_key(key);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{fixture}");
    }
    let stacks = got
        .iter()
        .filter(|e| matches!(e.3, Kind::Stack { .. }))
        .count();
    assert!(stacks >= 20, "{fixture}: {stacks} stacks");
}

#[test]
fn v7_zstd_matches_trace_cmd_report() {
    check("v7-zstd");
}

#[test]
fn v7_uncompressed_matches_trace_cmd_report() {
    check("v7-none");
}

#[test]
fn v6_matches_trace_cmd_report() {
    check("v6");
}

#[test]
fn v7_global_clock_matches_trace_cmd_report() {
    check("v7-global");
    let dat =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v7-global.dat"))
            .unwrap();
    assert_eq!(ustack::load(&dat).unwrap().clock.as_deref(), Some("global"));
    assert!(ustack::clock_warning(Some("global")).is_none());
    assert!(ustack::clock_warning(Some("local")).is_some());
}

/// `trace-cmd record --date`: the DATE option maps the trace clock to the time of day,
/// which trace-cmd report prints and the reader gives too.
#[test]
fn v7_date_matches_trace_cmd_report() {
    check("v7-date");
    let dat =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v7-date.dat"))
            .unwrap();
    let loaded = ustack::load(&dat).unwrap();
    // Recorded after 2020, by the guest's clock.
    assert!(loaded.events[0].ts > 1_600_000_000_000_000_000);
}

/// The text of the trace file and the trace.dat of the same workload join alike.
#[test]
fn text_and_trace_dat_join_alike() {
    for (dir, f) in fixture_dirs()
        .iter()
        .flat_map(|d| ["text.trace", "v7-zstd.dat"].map(|f| (d.clone(), f)))
    {
        let loaded = ustack::load(&std::fs::read(dir.join(f)).unwrap()).unwrap();
        let (samples, st) = ustack::join::join(&loaded.events);
        assert_eq!(st.unresolved_frames, 0, "{}", dir.join(f).display());
        assert_eq!(st.cookies_without_stack, 0, "{f}");
        assert_eq!(st.cookies_without_trigger, 0, "{f}");
        // uu_bench 3 100: three stacks of more than 64 frames, two records each.
        let deep: Vec<_> = samples.iter().filter(|s| s.frames.len() > 64).collect();
        assert_eq!(deep.len(), 3, "{f}");
        assert!(deep.iter().all(|s| s.complete));
        let chain = samples
            .iter()
            .filter(|s| s.comm.as_deref() == Some("uu_chain"))
            .count();
        assert_eq!(chain, 20, "{f}");
    }
}
