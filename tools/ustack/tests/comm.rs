// SPDX-License-Identifier: GPL-2.0

//! The process name at each sample: the name the trace had for the task then, not its
//! last one. On `kstack.dat` (sched_switch's `prev_comm` against trace-cmd report's own
//! text of the recording), and on a text trace with an exec and a rename.

mod common;

use common::{fixture, tmpdir, ustack_ok};

/// trace-cmd report's sched_switch lines of kstack.dat: (time in µs, prev_pid, prev_comm).
fn switches() -> Vec<(i64, i32, String)> {
    let report = std::fs::read_to_string(fixture("kstack.report")).unwrap();
    report
        .lines()
        .filter(|l| l.contains(" sched_switch: "))
        .map(|l| {
            let t = l.split_whitespace().nth(2).unwrap().trim_end_matches(':');
            let (s, us) = t.split_once('.').unwrap();
            let ts = s.parse::<i64>().unwrap() * 1_000_000 + us.parse::<i64>().unwrap();
            let body = &l[l.find("prev_comm=").unwrap() + 10..];
            let (comm, rest) = body.split_once(" prev_pid=").unwrap();
            let pid = rest.split_whitespace().next().unwrap().parse().unwrap();
            (ts, pid, comm.to_string())
        })
        .collect()
}

/// perf script's sample lines: (comm, pid, time in µs, event).
fn samples(text: &str) -> Vec<(String, i32, i64, String)> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('\t'))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let t = w[3].trim_end_matches(':');
            let (s, us) = t.split_once('.').unwrap();
            let ts = s.parse::<i64>().unwrap() * 1_000_000 + us.parse::<i64>().unwrap();
            (
                w[0].to_string(),
                w[1].parse().unwrap(),
                ts,
                w[5].trim_end_matches(':').to_string(),
            )
        })
        .collect()
}

#[test]
fn each_switch_sample_has_the_name_its_switch_gives() {
    let t = fixture("kstack.dat");
    let (text, _) = ustack_ok(&["-q", "--perf-script", "-", t.to_str().unwrap()]);
    let truth = switches();
    let got = samples(&text);
    let mut checked = 0;
    for (comm, pid, ts, event) in &got {
        if event != "sched:sched_switch" {
            continue;
        }
        // The task's last switch out at the sample's time (its cookie's, at the switch
        // or soon after it; perf script and trace-cmd round the microsecond apart).
        let (_, _, want) = truth
            .iter()
            .rfind(|(t, p, _)| p == pid && *t <= ts + 1)
            .unwrap_or_else(|| panic!("no switch of {pid} at {ts}"));
        assert_eq!(comm, want, "task {pid} at {ts}");
        checked += 1;
    }
    assert_eq!(checked, 70);
    // Task 97 was trace-cmd, then sh (busybox), then uu_offcpu: each name has samples.
    let of_97: std::collections::BTreeSet<&str> = got
        .iter()
        .filter(|s| s.1 == 97)
        .map(|s| s.0.as_str())
        .collect();
    assert_eq!(
        of_97.into_iter().collect::<Vec<_>>(),
        ["sh", "trace-cmd", "uu_offcpu"]
    );
}

/// `--comm sh`: the samples of tasks 97 and 98 while they were busybox's sh, among them
/// task 97's 265.8 ms in wait4 off the CPU.
#[test]
fn comm_selects_the_name_at_the_sample() {
    let t = fixture("kstack.dat");
    let t = t.to_str().unwrap();
    let (text, _) = ustack_ok(&["-q", "--comm", "sh", "--perf-script", "-", t]);
    let got = samples(&text);
    // Task 97's three switches and one sys_enter as sh, task 98's sys_enter.
    assert_eq!(got.len(), 5, "{text}");
    assert!(got.iter().all(|s| s.0 == "sh" && (s.1 == 97 || s.1 == 98)));
    let (report, _) = ustack_ok(&["-q", "--comm", "sh", "--off-cpu", t]);
    assert!(
        report.contains("# Off-CPU time: 265.810 ms in 1 blockings"),
        "{report}"
    );
    assert!(report.contains("__x64_sys_wait4"), "{report}");
    // The report's command column: a row per name of task 97.
    let (report, _) = ustack_ok(&["-q", "--sort", "comm,pid", t]);
    for row in ["uu_offcpu  97", "sh         97", "trace-cmd  97"] {
        assert!(report.contains(row), "{row}: {report}");
    }
}

/// A text trace: task 42 switched in as `sh`, execs `prog` (sched_process_exec), is
/// renamed `worker` (task_rename); each sys_enter is under the name it had then, though
/// the text's column (the name the kernel had last) says `prog` on every line.
#[test]
fn exec_and_rename_name_the_samples_after_them() {
    let mut t = String::from("# tracer: nop\n# trace_clock: global\n");
    let mut ts = 0;
    let mut line = |body: &str| {
        ts += 1;
        t.push_str(&format!(
            "            prog-42      [000] .....    10.{ts:06}: {body}\n"
        ));
    };
    let sample = |line: &mut dyn FnMut(&str), c: u32| {
        line("sys_enter: NR 1 (1, 2, 3, 4, 5, 6)");
        line(&format!("user_unwind_cookie: cookie={c:x}"));
        line(&format!("user_unwind_stack: cookie={c:x} (no frames)"));
    };
    line(
        "sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> \
         next_comm=sh next_pid=42 next_prio=120",
    );
    sample(&mut line, 0x100);
    line("sched_process_exec: filename=/usr/bin/prog pid=42 old_pid=42");
    sample(&mut line, 0x101);
    sample(&mut line, 0x102);
    line("task_rename: pid=42 oldcomm=prog newcomm=worker oom_score_adj=0");
    sample(&mut line, 0x103);
    let d = tmpdir("names");
    let f = d.join("t.trace");
    std::fs::write(&f, &t).unwrap();
    let f = f.to_str().unwrap();
    let count = |comm: &str| -> usize {
        let (text, _) = ustack_ok(&["-q", "--comm", comm, "--perf-script", "-", f]);
        samples(&text)
            .iter()
            .filter(|s| s.3 == "raw_syscalls:sys_enter")
            .count()
    };
    assert_eq!(
        (count("sh"), count("prog"), count("worker")),
        (1, 2, 1),
        "{t}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
