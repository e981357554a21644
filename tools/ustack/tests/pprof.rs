// SPDX-License-Identifier: GPL-2.0

//! Upstream's pprof as the oracle of `--pprof`: Google's own tool, built from the Go
//! source Debian packages by scripts/build-pprof.sh (cached outside the clone), reads
//! ustack's profile of `kstack.dat` without trying to symbolize it again and without a
//! warning, says `File:` the main binary, gives `Time:` only for a trace that has the time
//! of day, and its `-top` and `-traces` agree with ustack's own report. Without pprof the
//! test fails under CI (`$CI` set) and says SKIP elsewhere.

mod common;

use common::{fixture, tmpdir, ustack_ok};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// pprof, built (once, into the cache) by the project's script, run once for the tests
/// of this file; `None` (SKIP) when it cannot be, except under CI.
fn pprof_bin() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-pprof.sh");
        match Command::new("bash").arg(&script).output() {
            Ok(o) if o.status.success() => {
                let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
                if p.is_file() {
                    Ok(p)
                } else {
                    Err(format!("it printed no binary ({})", p.display()))
                }
            }
            Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Err(e.to_string()),
        }
    });
    let why = match built {
        Ok(p) => return Some(p.clone()),
        Err(why) => why,
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "pprof is not available: scripts/build-pprof.sh failed: {why}"
    );
    eprintln!("SKIP: pprof: scripts/build-pprof.sh failed: {why}");
    None
}

/// `pprof ARGS`, which must succeed without a word on standard error (no symbolization
/// attempt, no warning): its standard output.
fn pprof(bin: &Path, home: &Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        // Nothing of the user's: no pprof settings, no binaries to look for.
        .env("HOME", home)
        .env("PPROF_BINARY_PATH", home)
        .env("TZ", "UTC")
        .env_remove("PPROF_TOOLS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pprof {args:?}: {err}");
    assert_eq!(err, "", "pprof {args:?} said something on standard error");
    String::from_utf8(out.stdout).unwrap()
}

/// The header lines of pprof's text outputs (`File:`, `Type:`, `Time:`...), by key.
fn header(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .take_while(|l| !l.starts_with("Showing") && !l.starts_with("-----"))
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// One row of the report's function view: (self samples, samples), by function.
type Functions = BTreeMap<String, (u64, u64)>;

/// The report's one section: its samples, function view and stacks (event, frames
/// innermost first, without the markers of a stack cut short) with their samples.
fn report(text: &str) -> (u64, Functions, BTreeMap<Vec<String>, u64>) {
    let total: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("# Samples: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    let mut functions = Functions::new();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("# Children"))
        .skip(2);
    for l in lines.by_ref().take_while(|l| !l.starts_with('#')) {
        let w: Vec<&str> = l.split_whitespace().collect();
        let self_pct: f64 = w[1].trim_end_matches('%').parse().unwrap();
        let samples: u64 = w[2].parse().unwrap();
        let name = w[3..].join(" ");
        let self_n = (self_pct * total as f64 / 100.0).round() as u64;
        assert!(functions.insert(name, (self_n, samples)).is_none(), "{l}");
    }
    let mut stacks = BTreeMap::new();
    let mut cur: Option<(u64, Vec<String>)> = None;
    for l in lines.chain(std::iter::once("")) {
        let t = l.trim();
        let w: Vec<&str> = t.split_whitespace().collect();
        if w.len() == 3 && w[0].ends_with('%') && w[1].parse::<u64>().is_ok() {
            cur = Some((w[1].parse().unwrap(), Vec::new()));
        } else if t.is_empty() {
            if let Some((n, frames)) = cur.take() {
                if !frames.is_empty() {
                    *stacks.entry(frames).or_default() += n;
                }
            }
        } else if let (Some(c), false) = (cur.as_mut(), t == "|") {
            // "name  [file]", the first after "---"; "  (xN)" after it for N in a row.
            let f = t.strip_prefix("---").unwrap_or(t);
            let (f, times) = match f.rsplit_once("  (x") {
                Some((f, n)) if n.ends_with(')') => (f, n[..n.len() - 1].parse().unwrap()),
                _ => (f, 1),
            };
            let name = f.split("  [").next().unwrap();
            if !is_marker(name) {
                c.1.extend(std::iter::repeat_n(name.to_string(), times));
            }
        }
    }
    (total, functions, stacks)
}

/// The report's entries of a stack that are not frames (pprof has a label, or nothing).
fn is_marker(name: &str) -> bool {
    matches!(name, "[truncated]" | "[no stack]" | "[no user frames]")
        || name.starts_with("[truncated: ")
        || name.starts_with("[kernel thread ")
}

/// `pprof -top`: (flat, cum, inlined everywhere) by function; pprof marks a function
/// that is only ever inlined ` (inline)`.
fn top(text: &str) -> BTreeMap<String, (u64, u64, bool)> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let name = w[5..].join(" ");
            let (name, inline) = match name.strip_suffix(" (inline)") {
                Some(n) => (n.to_string(), true),
                None => (name, false),
            };
            (name, (w[0].parse().unwrap(), w[3].parse().unwrap(), inline))
        })
        .collect()
}

/// `pprof -traces`: each stack (innermost first, an inlined function marked ` (inline)`)
/// with its samples, and each sample's `event` label.
fn traces(text: &str) -> (BTreeMap<Vec<String>, u64>, BTreeMap<String, u64>) {
    let mut stacks = BTreeMap::new();
    let mut events = BTreeMap::new();
    for block in text
        .split("-----------+-------------------------------------------------------\n")
        .skip(1)
    {
        let mut n = 0;
        let mut frames = Vec::new();
        let mut event = None;
        for l in block.lines() {
            if let Some((k, v)) = l.split_once(":  ") {
                if k.trim() == "event" {
                    event = Some(v.to_string());
                }
                continue;
            }
            let (count, name) = l.split_at(10);
            if !count.trim().is_empty() {
                n = count.trim().parse().unwrap();
            }
            frames.push(name.trim_start().to_string());
        }
        if frames.is_empty() {
            continue;
        }
        *stacks.entry(frames).or_default() += n;
        *events.entry(event.expect("an event label")).or_default() += n;
    }
    (stacks, events)
}

#[test]
fn upstream_pprof_reads_the_profile_as_the_report_counts_it() {
    let Some(bin) = pprof_bin() else {
        return;
    };
    let d = tmpdir("pprof");
    let t = fixture("kstack.dat");
    let t = t.to_str().unwrap();
    for event in ["sched:sched_switch", "raw_syscalls:sys_enter"] {
        let pb = d.join("p.pb.gz");
        let (text, _) = ustack_ok(&[
            "-q",
            "--event",
            event,
            "--sort",
            "function",
            "--top",
            "1000",
            "--report",
            "-",
            "--pprof",
            pb.to_str().unwrap(),
            t,
        ]);
        let (total, functions, stacks) = report(&text);
        let pb = pb.to_str().unwrap();

        let top_text = pprof(&bin, &d, &["-top", "-nodecount=100000", pb]);
        let h = header(&top_text);
        // The main binary: uu_offcpu has most of the switches, uu_chain every sys_enter.
        let main = if event == "sched:sched_switch" {
            "uu_offcpu"
        } else {
            "uu_chain"
        };
        assert_eq!(h.get("File").map(String::as_str), Some(main), "{top_text}");
        assert_eq!(h.get("Type").map(String::as_str), Some("samples"));
        // kstack.dat's clock counts from boot: no date is given.
        assert!(!h.contains_key("Time"), "{top_text}");
        assert!(
            h["Duration"]
                .trim_end()
                .ends_with(&format!("Total samples = {total}")),
            "{h:?}"
        );
        // -top: a function's flat samples are those it is innermost in, its cum those it
        // is in. pprof counts a function once a stack when it is both inlined and not
        // (the report's `X` and `X (inlined)`): its cum lies between the two rows' larger
        // and their sum, its flat is their sum.
        let theirs = top(&top_text);
        let mut ours: BTreeMap<String, Vec<(u64, u64, bool)>> = BTreeMap::new();
        for (name, v) in &functions {
            let (base, inlined) = match name.strip_suffix(" (inlined)") {
                Some(b) => (b, true),
                None => (name.as_str(), false),
            };
            ours.entry(base.to_string())
                .or_default()
                .push((v.0, v.1, inlined));
        }
        assert_eq!(
            theirs.keys().collect::<Vec<_>>(),
            ours.keys().collect::<Vec<_>>(),
            "{event}: pprof's functions, then the report's"
        );
        for (name, rows) in &ours {
            let (flat, cum, inline) = theirs[name];
            assert_eq!(
                inline,
                rows.iter().all(|r| r.2),
                "{event}: {name} is inlined everywhere, {rows:?}"
            );
            let selfs: u64 = rows.iter().map(|r| r.0).sum();
            let max = rows.iter().map(|r| r.1).max().unwrap();
            let sum: u64 = rows.iter().map(|r| r.1).sum();
            assert_eq!(flat, selfs, "{event}: {name}'s flat, {rows:?}");
            assert!(
                (max..=sum).contains(&cum),
                "{event}: {name}'s cum {cum}, {rows:?}"
            );
        }
        assert_eq!(theirs.values().map(|v| v.0).sum::<u64>(), total);

        // -traces: every stack with its samples, as the report's stacks.
        let traces_text = pprof(&bin, &d, &["-traces", pb]);
        let (theirs, events) = traces(&traces_text);
        let ours: BTreeMap<Vec<String>, u64> = stacks
            .iter()
            .map(|(frames, n)| {
                let frames = frames
                    .iter()
                    .map(|f| match f.strip_suffix(" (inlined)") {
                        Some(b) => format!("{b} (inline)"),
                        None => f.clone(),
                    })
                    .collect();
                (frames, *n)
            })
            .collect();
        assert_eq!(theirs, ours, "{event}: pprof's stacks, then the report's");
        assert_eq!(events, BTreeMap::from([(event.to_string(), total)]));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A recording with the time of day (`trace-cmd record --date`): pprof's `Time:` is its
/// first sample's.
#[test]
fn upstream_pprof_gives_the_time_of_day_of_a_dated_trace() {
    let Some(bin) = pprof_bin() else {
        return;
    };
    let d = tmpdir("pprof-date");
    let pb = d.join("p.pb.gz");
    ustack_ok(&[
        "-q",
        "--pprof",
        pb.to_str().unwrap(),
        fixture("v7-date.dat").to_str().unwrap(),
    ]);
    let text = pprof(&bin, &d, &["-top", pb.to_str().unwrap()]);
    let h = header(&text);
    // trace-cmd report's first cookie of v7-date.dat is at 1778583375.950296 (UTC).
    let report = std::fs::read_to_string(fixture("v7-date.report")).unwrap();
    let first = report
        .lines()
        .find(|l| l.contains("user_unwind_cookie:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap();
    let secs: i64 = first.split('.').next().unwrap().parse().unwrap();
    let (y, mo, day, hh, mm) = civil(secs);
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (h12, ampm) = match hh {
        0 => (12, "am"),
        1..=11 => (hh, "am"),
        12 => (12, "pm"),
        _ => (hh - 12, "pm"),
    };
    let want = format!(
        "{} {day}, {y} at {h12}:{mm:02}{ampm} (UTC)",
        months[mo as usize - 1]
    );
    assert_eq!(h.get("Time"), Some(&want), "{text}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Seconds past the epoch to (year, month, day, hour, minute), UTC.
fn civil(secs: i64) -> (i64, i64, i64, i64, i64) {
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60)
}
