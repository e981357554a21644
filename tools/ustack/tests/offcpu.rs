// SPDX-License-Identifier: GPL-2.0

//! Off-CPU time as bcc's offcputime gives it: kernel threads' time (`--kernel-threads`),
//! which have no user stack and so no cookie, under their name with their kernel frames;
//! blockings selected by their length (`--min-block`, `--max-block`, offcputime's `-m` and
//! `-M`); and preempted tasks left out unless `--preempted`. A text trace with the
//! stacktrace option on gives the exact times; the guest recording `kstack.dat` (it holds
//! kworker, ksoftirqd and rcu_sched switching out with their kernel stacks) the real
//! stacks.

mod common;

use common::{fixture, tmpdir, ustack_ok as ustack};

/// As the kernel prints it with the stacktrace option: each event followed by its
/// `<stack trace>`, the module's cookie (and its own stack) inside its trigger's commit.
/// kworker/0:1 (10) blocks twice, idle, for 100 us and 5000 us; prog (43) sleeps 2000 us
/// with its cookie and user stack (written once it runs again); prog (44) sleeps
/// without a cookie (the buffer lost it: a user task's stack, not a kernel thread's);
/// ksoftirqd/1 (22) is preempted for 3200 us; the idle task (0) switches out too.
const TRACE: &str = "# trace_clock: global
# tracer: nop
     kworker/0:1-10      [000] .....    10.000000: sched_switch: prev_comm=kworker/0:1 prev_pid=10 prev_prio=120 prev_state=I ==> next_comm=prog next_pid=43 next_prio=120
     kworker/0:1-10      [000] .....    10.000001: <stack trace>
 => __schedule
 => schedule
 => worker_thread
 => kthread
 => ret_from_fork
            prog-43      [000] .....    10.000100: sched_switch: prev_comm=prog prev_pid=43 prev_prio=120 prev_state=S ==> next_comm=kworker/0:1 next_pid=10 next_prio=120
            prog-43      [000] .....    10.000101: user_unwind_cookie: cookie=300
            prog-43      [000] .....    10.000102: <stack trace>
 => trace_event_raw_event_user_unwind_cookie
            prog-43      [000] .....    10.000103: <stack trace>
 => __schedule
 => schedule
 => do_nanosleep
     kworker/0:1-10      [000] .....    10.000150: sched_switch: prev_comm=kworker/0:1 prev_pid=10 prev_prio=120 prev_state=I ==> next_comm=swapper/0 next_pid=0 next_prio=120
     kworker/0:1-10      [000] .....    10.000151: <stack trace>
 => __schedule
 => schedule
 => worker_thread
 => kthread
 => ret_from_fork
            prog-44      [001] .....    10.000200: sched_switch: prev_comm=prog prev_pid=44 prev_prio=120 prev_state=S ==> next_comm=ksoftirqd/1 next_pid=22 next_prio=120
            prog-44      [001] .....    10.000201: <stack trace>
 => __schedule
 => schedule
 => do_nanosleep
 => do_syscall_64
 => entry_SYSCALL_64_after_hwframe
     ksoftirqd/1-22      [001] .....    10.000300: sched_switch: prev_comm=ksoftirqd/1 prev_pid=22 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120
     ksoftirqd/1-22      [001] .....    10.000301: <stack trace>
 => __schedule
 => schedule
 => smpboot_thread_fn
 => kthread
 => ret_from_fork
          <idle>-0       [000] .....    10.002100: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=prog next_pid=43 next_prio=120
          <idle>-0       [000] .....    10.002101: <stack trace>
 => __schedule
 => schedule_idle
            prog-43      [000] .....    10.002102: user_unwind_stack: cookie=300
 => <0000000000001020> : 0x1
          <idle>-0       [001] .....    10.003000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=prog next_pid=44 next_prio=120
            prog-44      [001] .....    10.003500: sched_switch: prev_comm=prog prev_pid=44 prev_prio=120 prev_state=S ==> next_comm=ksoftirqd/1 next_pid=22 next_prio=120
          <idle>-0       [000] .....    10.005150: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=kworker/0:1 next_pid=10 next_prio=120
";

const KWORKER: &str = "sched:sched_switch;[I];[kernel thread kworker/0:1];ret_from_fork_[k];kthread_[k];worker_thread_[k];schedule_[k];__schedule_[k]";
const PROG: &str = "sched:sched_switch;[S];sleeper;do_nanosleep_[k];schedule_[k];__schedule_[k]";
const KSOFTIRQD: &str = "sched:sched_switch;[R];[kernel thread ksoftirqd/1];ret_from_fork_[k];kthread_[k];smpboot_thread_fn_[k];schedule_[k];__schedule_[k]";

/// `ustack --folded - FLAGS` on [`TRACE`] (the report instead with `--report -`).
fn folded(flags: &[&str]) -> (String, String) {
    let d = tmpdir(&flags.join("").replace(['-', ' '], ""));
    let (t, map) = (d.join("t.trace"), d.join("perf-43.map"));
    std::fs::write(&t, TRACE).unwrap();
    std::fs::write(&map, "1000 100 sleeper\n").unwrap();
    let mut args = vec!["--perf-map", map.to_str().unwrap()];
    if !flags.contains(&"--report") {
        args.extend(["--folded", "-"]);
    }
    args.extend_from_slice(flags);
    args.push(t.to_str().unwrap());
    let r = ustack(&args);
    std::fs::remove_dir_all(&d).unwrap();
    r
}

#[test]
fn kernel_threads_under_their_name_with_kernel_frames() {
    // Without --kernel-threads: the user task's time only, as before.
    let (f, _) = folded(&["--off-cpu"]);
    assert_eq!(f, format!("{PROG} 2000000\n"));
    // With it: kworker's two blockings (100 us and 5000 us) under its name, with its
    // kernel frames and no user ones; prog (44), whose switch no cookie took but whose
    // stack is a system call's, not a kernel thread's, stays out; so does the idle task.
    let (f, err) = folded(&["--off-cpu", "--kernel-threads"]);
    assert_eq!(f, format!("{KWORKER} 5100000\n{PROG} 2000000\n"), "{err}");
    assert!(
        err.contains("ustack: off-CPU: 2 samples of kernel threads"),
        "{err}"
    );
    // Preempted kernel threads under [R] with --preempted, as user tasks are.
    let (f, _) = folded(&["--off-cpu", "--kernel-threads", "--preempted"]);
    assert_eq!(
        f,
        format!("{KWORKER} 5100000\n{KSOFTIRQD} 3200000\n{PROG} 2000000\n")
    );
    // --comm picks a kernel thread by its name; --user-only leaves kernel threads out
    // (they have no user frames); --kernel-only keeps them.
    let (f, _) = folded(&["--off-cpu", "--kernel-threads", "--comm", "kworker/0:1"]);
    assert_eq!(f, format!("{KWORKER} 5100000\n"));
    let (f, _) = folded(&["--off-cpu", "--kernel-threads", "--user-only"]);
    assert_eq!(f, "sched:sched_switch;[S];sleeper 2000000\n");
    let (f, _) = folded(&["--off-cpu", "--kernel-threads", "--kernel-only"]);
    assert!(f.starts_with(&format!("{KWORKER} 5100000\n")), "{f}");
    // The report names the kernel thread.
    let (r, _) = folded(&["--off-cpu", "--kernel-threads", "--report", "-"]);
    assert!(r.contains("worker_thread  [kernel.kallsyms]"), "{r}");
}

#[test]
fn blocking_time_selects_blockings_as_offcputime_m_and_big_m() {
    let run = |flags: &[&str]| {
        let mut a = vec!["--off-cpu", "--kernel-threads"];
        a.extend_from_slice(flags);
        folded(&a)
    };
    // At least 1 ms: kworker's 5000 us and prog's 2000 us, not kworker's 100 us.
    let (f, err) = run(&["--min-block", "1ms"]);
    assert_eq!(f, format!("{KWORKER} 5000000\n{PROG} 2000000\n"));
    assert!(
        err.contains("ustack: off-CPU: 1 blockings left out by --min-block/--max-block"),
        "{err}"
    );
    // A bare number is microseconds, as offcputime takes -m and -M; the bounds are kept.
    assert_eq!(
        run(&["--min-block", "2000"]).0,
        run(&["--min-block", "2ms"]).0
    );
    assert_eq!(
        run(&["--min-block", "2000"]).0,
        format!("{KWORKER} 5000000\n{PROG} 2000000\n")
    );
    assert_eq!(
        run(&["--max-block", "2000us"]).0,
        format!("{PROG} 2000000\n{KWORKER} 100000\n")
    );
    assert_eq!(
        run(&["--min-block", "0.1ms", "--max-block", "0.1ms"]).0,
        format!("{KWORKER} 100000\n")
    );
}

#[test]
fn off_cpu_selections_need_off_cpu_and_sound_values() {
    for args in [
        &["--kernel-threads"][..],
        &["--min-block", "1ms"],
        &["--max-block", "1ms"],
        &["--off-cpu", "--min-block", "soon"],
        &["--off-cpu", "--max-block", "-1ms"],
        &["--off-cpu", "--min-block", "2ms", "--max-block", "1ms"],
    ] {
        let err = common::ustack_usage_error(args, &fixture("kstack.dat"));
        assert!(err.contains("block") || err.contains("--off-cpu"), "{err}");
    }
}

/// The guest recording: its kernel threads' stacks, each under its name, every frame a
/// kernel one from ret_from_fork through kthread(); their time is what --kernel-threads
/// adds, and nothing else changes.
#[test]
fn kernel_threads_of_the_guest_recording() {
    let dat = fixture("kstack.dat");
    let dat = dat.to_str().unwrap();
    let parse = |t: &str| -> Vec<(String, u64)> {
        t.lines()
            .map(|l| {
                let (s, n) = l.rsplit_once(' ').unwrap();
                (s.to_string(), n.parse().unwrap())
            })
            .collect()
    };
    let (without, _) = ustack(&["--off-cpu", "--folded", "-", dat]);
    let (with, _) = ustack(&["--off-cpu", "--kernel-threads", "--folded", "-", dat]);
    let (without, with) = (parse(&without), parse(&with));
    let (kthreads, users): (Vec<_>, Vec<_>) = with
        .iter()
        .cloned()
        .partition(|(s, _)| s.contains(";[kernel thread "));
    let mut users = users;
    let mut without = without;
    users.sort();
    without.sort();
    assert_eq!(
        users, without,
        "the user tasks' stacks are as without the flag"
    );
    let mut names = std::collections::BTreeSet::new();
    for (s, n) in &kthreads {
        let f: Vec<&str> = s.split(';').collect();
        assert_eq!(f[0], "sched:sched_switch", "{s}");
        let name = f[2]
            .strip_prefix("[kernel thread ")
            .and_then(|x| x.strip_suffix(']'))
            .unwrap();
        names.insert(name.split('/').next().unwrap().to_string());
        assert!(f[3..].iter().all(|x| x.ends_with("_[k]")), "{s}");
        assert_eq!(f[3], "ret_from_fork_asm_[k]", "{s}");
        assert!(f.contains(&"kthread_[k]"), "{s}");
        assert!(*n > 0, "{s}");
    }
    for want in ["kworker", "ksoftirqd", "rcu_sched"] {
        assert!(names.contains(want), "{want} not among {names:?}");
    }
}
