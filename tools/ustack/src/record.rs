// SPDX-License-Identifier: GPL-2.0

//! `ustack record`: one command that records what `ustack` reads, as `perf record` is one
//! command. It checks that the module is loaded and its option file is there, runs
//! `trace-cmd record` with a clock that orders events across CPUs, the module's events,
//! `task:task_newtask` (for `--tgid`) and the events asked for, on a command or a running
//! process, watches the option come on, and reads the trace.dat it leaves.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct Record {
    pub events: Vec<String>,
    pub pid: Option<i32>,
    pub command: Vec<String>,
    pub output: PathBuf,
    pub clock: String,
    /// `trace-cmd record --date`: the file maps the trace clock to the time of day, which
    /// the report, `--time` and pprof's `time_nanos` then give.
    pub date: bool,
    /// Kernel stacks too (`trace-cmd record -T`: a `kernel_stack` after every event).
    pub kernel: bool,
    /// What `ustack --off-cpu` needs: `sched:sched_switch`, with kernel stacks.
    pub off_cpu: bool,
    pub trace_cmd: PathBuf,
    /// Where `/sys` is (tests give another).
    pub sys: PathBuf,
}

/// The events recorded when none are asked for: the stacks a task leaves the CPU with.
pub const DEFAULT_EVENT: &str = "sched:sched_switch";
const OPTION: &str = crate::tracefs::OPTION;

/// The events whose stacks are taken, from those asked for: `default` when none are, and
/// with `off_cpu` [`DEFAULT_EVENT`], which off-CPU time is weighed by, if not asked for.
pub fn triggers(asked: &[String], default: &str, off_cpu: bool) -> Vec<String> {
    let mut events = Vec::new();
    if off_cpu && !asked.iter().any(|e| e == DEFAULT_EVENT) {
        events.push(DEFAULT_EVENT.to_string());
    } else if asked.is_empty() {
        events.push(default.to_string());
    }
    events.extend(asked.iter().cloned());
    events
}

impl Record {
    /// The checks before recording: the module loaded, its option file present.
    pub fn check(&self) -> Result<PathBuf> {
        crate::tracefs::check_module(&self.sys)
    }

    /// trace-cmd's arguments.
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["record".into(), "-C".into(), self.clock.clone()];
        if self.date {
            a.push("--date".into());
        }
        if self.kernel || self.off_cpu {
            a.push("-T".into());
        }
        a.push("-o".into());
        a.push(self.output.display().to_string());
        let mut events = vec!["user_unwind".to_string(), "task:task_newtask".to_string()];
        events.extend(triggers(&self.events, DEFAULT_EVENT, self.off_cpu));
        for e in events {
            a.push("-e".into());
            a.push(e);
        }
        if let Some(p) = self.pid {
            // Every thread of the process, as perf record -p takes them: trace-cmd's -P
            // traces one task id.
            for t in threads(p) {
                a.push("-P".into());
                a.push(t.to_string());
            }
        } else {
            // The command and its children only, as perf record does.
            a.push("-F".into());
            a.push("-c".into());
            a.extend(self.command.iter().cloned());
        }
        a
    }

    /// Record; the summary lines to print.
    pub fn run(&self) -> Result<Vec<String>> {
        let tracefs = self.check()?;
        let mut child = Command::new(&self.trace_cmd)
            .args(self.args())
            .spawn()
            .map_err(|e| Error::new(format!("{}: {e}", self.trace_cmd.display())))?;
        // The module's events switch the option on; say so if they did not.
        let option = tracefs.join(OPTION);
        let t0 = Instant::now();
        let mut on = false;
        let status = loop {
            if !on {
                on = std::fs::read_to_string(&option).is_ok_and(|s| s.trim() == "1");
            }
            if let Some(st) = child.try_wait()? {
                break st;
            }
            std::thread::sleep(Duration::from_millis(if on { 200 } else { 20 }));
        };
        let mut lines = Vec::new();
        if !on {
            lines.push(format!(
                "warning: {} never read 1 in {:.1} s: the user_unwind events were not switched on, and no stacks were requested",
                option.display(),
                t0.elapsed().as_secs_f64()
            ));
        }
        if !status.success() {
            return Err(Error::new(format!("trace-cmd record failed: {status}")));
        }
        let bytes = std::fs::read(&self.output)
            .map_err(|e| Error::new(format!("{}: {e}", self.output.display())))?;
        let loaded =
            crate::load(&bytes).map_err(|e| e.context(&self.output.display().to_string()))?;
        let (samples, st) = crate::join::join(&loaded.events);
        lines.push(format!(
            "recorded {}: {} events, {} samples with stacks ({} cookies without one); ustack {} shows them",
            self.output.display(),
            st.events,
            samples.iter().filter(|s| !s.frames.is_empty()).count(),
            st.cookies_without_stack,
            self.output.display()
        ));
        if st.cookies == 0 {
            lines.push(
                "warning: no user_unwind_cookie in the trace: no event of the traced tasks triggered a stack"
                    .into(),
            );
        }
        Ok(lines)
    }
}

/// The threads of process `pid` (`/proc/PID/task`), in order; `pid` alone when they
/// cannot be listed.
pub fn threads(pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    if v.is_empty() {
        v.push(pid);
    }
    v
}

/// The default trace-cmd, and where /sys is (`$USTACK_SYS`, for tests).
pub fn defaults() -> (PathBuf, PathBuf) {
    (
        PathBuf::from("trace-cmd"),
        std::env::var_os("USTACK_SYS")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new("/sys").to_path_buf()),
    )
}
