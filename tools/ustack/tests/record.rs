// SPDX-License-Identifier: GPL-2.0

//! `ustack record` against a stand-in: a /sys with the module's directory and option file
//! ($USTACK_SYS), and a trace-cmd that logs its arguments, switches the option on as the
//! module's events do, and leaves a committed recording where -o says. The real
//! trace-cmd and module are the guest's (tests/guest).

mod common;

use common::fixture;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A /sys and a trace-cmd in a fresh directory; `switch_on`: the trace-cmd writes 1 to
/// the option file.
fn stage(tag: &str, switch_on: bool) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ustack-rec-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("sys/module/user_unwind")).unwrap();
    std::fs::create_dir_all(d.join("sys/kernel/tracing/options")).unwrap();
    std::fs::write(d.join("sys/kernel/tracing/trace"), "").unwrap();
    std::fs::write(
        d.join("sys/kernel/tracing/options/userstacktrace_delay"),
        "0\n",
    )
    .unwrap();
    let tc = d.join("trace-cmd");
    std::fs::write(
        &tc,
        format!(
            "#!/bin/sh\necho \"$*\" > {d}/args\n{on}\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\nsleep 0.3\ncp {fx} \"$out\"\n",
            d = d.display(),
            on = if switch_on {
                format!("echo 1 > {}/sys/kernel/tracing/options/userstacktrace_delay", d.display())
            } else {
                String::new()
            },
            fx = fixture("v7-global.dat").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tc, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn record(d: &Path, args: &[&str]) -> (String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .arg("record")
        .arg("--trace-cmd")
        .arg(d.join("trace-cmd"))
        .args(args)
        .env("USTACK_SYS", d.join("sys"))
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn record_date_asks_trace_cmd_for_the_time_of_day() {
    let d = stage("date", true);
    let out = d.join("out.dat");
    let o = out.to_str().unwrap();
    let (err, code) = record(&d, &["--date", "-o", o, "--", "./prog"]);
    assert_eq!(code, 0, "{err}");
    let args = std::fs::read_to_string(d.join("args")).unwrap();
    assert_eq!(
        args.trim(),
        format!("record -C global --date -o {o} -e user_unwind -e task:task_newtask -e sched:sched_switch -F -c ./prog")
    );
}

#[test]
fn record_runs_trace_cmd_with_the_right_clock_and_events() {
    let d = stage("cmd", true);
    let out = d.join("out.dat");
    let o = out.to_str().unwrap();
    let (err, code) = record(&d, &["-o", o, "--", "./prog", "arg", "-x"]);
    assert_eq!(code, 0, "{err}");
    let args = std::fs::read_to_string(d.join("args")).unwrap();
    assert_eq!(
        args.trim(),
        format!("record -C global -o {o} -e user_unwind -e task:task_newtask -e sched:sched_switch -F -c ./prog arg -x")
    );
    // What was recorded is read back: the committed recording's samples.
    let loaded = ustack::load(&std::fs::read(fixture("v7-global.dat")).unwrap()).unwrap();
    let (samples, st) = ustack::join::join(&loaded.events);
    let with = samples.iter().filter(|s| !s.frames.is_empty()).count();
    assert!(
        err.contains(&format!(
            "ustack: recorded {o}: {} events, {with} samples with stacks",
            st.events
        )),
        "{err}"
    );
    assert!(!err.contains("warning"), "{err}");

    // A running process, the events given, another clock.
    let (err, code) = record(
        &d,
        &[
            "-o",
            o,
            "-e",
            "raw_syscalls:sys_enter",
            "-C",
            "mono",
            "-p",
            "4242",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let args = std::fs::read_to_string(d.join("args")).unwrap();
    assert_eq!(
        args.trim(),
        format!("record -C mono -o {o} -e user_unwind -e task:task_newtask -e raw_syscalls:sys_enter -P 4242")
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn record_kernel_stacks_and_off_cpu() {
    let d = stage("kernel", true);
    let out = d.join("out.dat");
    let o = out.to_str().unwrap();
    let (err, code) = record(
        &d,
        &[
            "-T",
            "-e",
            "raw_syscalls:sys_enter",
            "-o",
            o,
            "--",
            "./prog",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let args = std::fs::read_to_string(d.join("args")).unwrap();
    assert_eq!(
        args.trim(),
        format!("record -C global -T -o {o} -e user_unwind -e task:task_newtask -e raw_syscalls:sys_enter -F -c ./prog")
    );
    // --off-cpu: sched_switch with kernel stacks, whatever else is asked for.
    let (err, code) = record(
        &d,
        &[
            "--off-cpu",
            "-e",
            "raw_syscalls:sys_enter",
            "-o",
            o,
            "-p",
            "7",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let args = std::fs::read_to_string(d.join("args")).unwrap();
    assert_eq!(
        args.trim(),
        format!("record -C global -T -o {o} -e user_unwind -e task:task_newtask -e sched:sched_switch -e raw_syscalls:sys_enter -P 7")
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `-p PID` records every thread of the process (trace-cmd's -P takes one task id):
/// this test's own threads.
#[test]
fn record_pid_takes_every_thread() {
    let t = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(500)));
    let me = std::process::id() as i32;
    let threads = ustack::record::threads(me);
    assert!(threads.len() >= 2 && threads.contains(&me), "{threads:?}");
    t.join().unwrap();
    // A process that is not there: its id as given.
    assert_eq!(ustack::record::threads(i32::MAX), [i32::MAX]);
}

#[test]
fn record_checks_the_module_and_the_option() {
    // The option never came on.
    let d = stage("off", false);
    let o = d.join("out.dat");
    let (err, code) = record(&d, &["-o", o.to_str().unwrap(), "--", "./prog"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("userstacktrace_delay never read 1"), "{err}");
    // No module: nothing is run.
    std::fs::remove_dir_all(d.join("sys/module/user_unwind")).unwrap();
    let _ = std::fs::remove_file(d.join("args"));
    let (err, code) = record(&d, &["-o", o.to_str().unwrap(), "--", "./prog"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("the user_unwind module is not loaded"),
        "{err}"
    );
    assert!(!d.join("args").exists());
    // Neither a command nor a pid.
    let (err, code) = record(&d, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("give a command (after --) or -p PID"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
