// SPDX-License-Identifier: GPL-2.0

//! `ustack top`: the live view, as `perf top` is. On the traced machine, with the module
//! loaded and as root, it sets tracefs up (the module's option, the events asked for, their
//! filters, the global clock, a buffer big enough), reads every CPU's ring buffer as it
//! fills ([`crate::live`]), joins and counts the samples as a trace.dat's are, and draws
//! their top functions and stacks every second. What it changed in tracefs is put back as
//! it read when it ends: `q`, `--duration`, Ctrl-C, SIGTERM or SIGHUP, an error, a panic.
//!
//! `file_cache` events written before it started are not in the pipe: enabling
//! `file_cache` (the option) and clearing the buffer each start a new generation of the
//! module's first-sight cache, so every file gets a `file_cache` again before the first
//! stack that uses it; a cookie still unnamed is shown as `[unresolved COOKIE]+OFFSET`.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::events::{Event, PageDecoder};
use crate::join::Joiner;
use crate::live::Live;
use crate::output::top::{frame, Status};
use crate::stacks::{escape, Aggregator, Filter, OffCpu, StackView};
use crate::symbolize::{Options, Symbolizer};
use crate::tracefs::{self, Settings, OPTION};

/// The events that sample what runs on a CPU, the first tracefs has taken: the local
/// timer interrupt (x86's tick, and every high-resolution timer), else an hrtimer's expiry.
pub const TIMER_EVENTS: [&str; 2] = [
    "irq_vectors:local_timer_entry",
    "timer:hrtimer_expire_entry",
];

/// How often the pipes are read.
const POLL: Duration = Duration::from_millis(100);
/// How often a frame is drawn.
const REDRAW: Duration = Duration::from_secs(1);
/// A process with more threads than this is filtered in user space only: the kernel's
/// filter would be one comparison a thread.
const FILTER_THREADS: usize = 64;

#[derive(Debug, Clone)]
pub struct Top {
    /// The events whose stacks are counted (`-e`); a timer event when none.
    pub events: Vec<String>,
    pub off_cpu: bool,
    /// Kernel stacks too (the `stacktrace` option).
    pub kernel: bool,
    pub view: StackView,
    pub comms: Vec<String>,
    /// Processes whose threads are watched.
    pub pids: Vec<i32>,
    pub duration: Option<Duration>,
    /// One frame, after the duration, then exit.
    pub once: bool,
    pub functions: usize,
    pub stacks: usize,
    /// The ring buffer's size per CPU, at least, in KiB.
    pub buffer_kb: u64,
    /// Where `/sys` is (`$USTACK_SYS`, for tests).
    pub sys: PathBuf,
    pub opts: Options,
}

impl Default for Top {
    fn default() -> Self {
        Top {
            events: Vec::new(),
            off_cpu: false,
            kernel: false,
            view: StackView::Both,
            comms: Vec::new(),
            pids: Vec::new(),
            duration: None,
            once: false,
            functions: 15,
            stacks: 5,
            buffer_kb: 4096,
            sys: crate::record::defaults().1,
            opts: Options::default(),
        }
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Ctrl-C, SIGTERM and SIGHUP end the view as `q` does, tracefs put back.
fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is a valid one to fill; the handler only stores to an
        // atomic, which is async-signal-safe; no old action is asked for.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The terminal, keys read one at a time without echo, put back when dropped.
struct Keys {
    saved: libc::termios,
}

impl Keys {
    /// Standard input, if it is a terminal, in non-canonical mode without echo; reads
    /// return at once, with a key or none.
    fn new() -> Option<Keys> {
        if !std::io::stdin().is_terminal() {
            return None;
        }
        // SAFETY: termios is plain data; tcgetattr fills it for fd 0, a terminal.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `t` is a valid termios to fill.
        if unsafe { libc::tcgetattr(0, &mut t) } != 0 {
            return None;
        }
        let saved = t;
        t.c_lflag &= !(libc::ICANON | libc::ECHO);
        t.c_cc[libc::VMIN] = 0;
        t.c_cc[libc::VTIME] = 0;
        // SAFETY: `t` is the terminal's own settings, changed in two flags and two counts.
        if unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) } != 0 {
            return None;
        }
        Some(Keys { saved })
    }

    /// The keys typed since the last call.
    fn read(&self) -> Vec<u8> {
        let mut b = [0u8; 16];
        // SAFETY: reads at most `b.len()` bytes into `b`; VMIN 0 and VTIME 0 make it
        // return at once.
        let n = unsafe { libc::read(0, b.as_mut_ptr().cast(), b.len()) };
        b[..usize::try_from(n).unwrap_or(0)].to_vec()
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: the settings read from this terminal at the start.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &self.saved) };
    }
}

/// Standard output's terminal size (rows, columns), if it is one.
fn window() -> Option<(usize, usize)> {
    // SAFETY: winsize is plain data, filled by TIOCGWINSZ on fd 1.
    let mut w: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize to the pointer given.
    let r = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut w) };
    (r == 0 && w.ws_row > 0 && w.ws_col > 0).then(|| (usize::from(w.ws_row), usize::from(w.ws_col)))
}

/// The byte order of the machine whose ring buffer is read: this one.
fn native() -> Endian {
    if cfg!(target_endian = "big") {
        Endian::Big
    } else {
        Endian::Little
    }
}

/// The kernel filter that keeps the events of tasks `tids` of event `event`: its own
/// task's, and for `sched_switch` a switch of one of them in or out (off-CPU time ends
/// when its task is switched in).
pub fn pid_filter(event: &str, tids: &[i32]) -> String {
    let fields: &[&str] = if event == crate::record::DEFAULT_EVENT {
        &["prev_pid", "next_pid"]
    } else {
        &["common_pid"]
    };
    let mut terms = Vec::new();
    for f in fields {
        for t in tids {
            terms.push(format!("{f} == {t}"));
        }
    }
    terms.join(" || ")
}

/// Task names: the kernel's saved cmdlines, else `/proc/PID/comm` (read once a frame).
#[derive(Default)]
struct Comms {
    proc: HashMap<i32, Option<Rc<str>>>,
}

impl Comms {
    fn fill(&mut self, e: &mut Event) {
        if e.comm.is_some() || e.pid <= 0 {
            return;
        }
        e.comm = self
            .proc
            .entry(e.pid)
            .or_insert_with(|| {
                std::fs::read_to_string(format!("/proc/{}/comm", e.pid))
                    .ok()
                    .map(|c| Rc::from(c.trim_end_matches('\n')))
            })
            .clone();
    }
}

/// `saved_cmdlines`: "PID COMM" lines.
fn saved_cmdlines(root: &Path) -> HashMap<i32, Rc<str>> {
    tracefs::read_text(&root.join("saved_cmdlines"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (pid, comm) = l.trim().split_once(' ')?;
            Some((pid.parse().ok()?, Rc::from(comm)))
        })
        .collect()
}

impl Top {
    /// The checks and the events: tracefs's path and the events whose stacks to count.
    fn prepare(&self) -> Result<(PathBuf, Vec<String>)> {
        let root = tracefs::check_module(&self.sys)?;
        if !root.join("events/user_unwind").is_dir() {
            return Err(Error::new(format!(
                "{} is not there: the user_unwind module's events are missing",
                root.join("events/user_unwind").display()
            )));
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(Error::new(
                "ustack top needs root: it sets up tracefs and reads the ring buffer (run it with sudo)",
            ));
        }
        let timer = TIMER_EVENTS
            .iter()
            .find(|e| tracefs::event_dir(e).is_some_and(|d| root.join(d).is_dir()))
            .copied();
        let default = match timer {
            Some(t) => t,
            None if !self.events.is_empty() || self.off_cpu => "",
            None => {
                return Err(Error::new(format!(
                    "no timer event in {} ({}): name the events to sample with -e",
                    root.display(),
                    TIMER_EVENTS.join(", ")
                )))
            }
        };
        let mut events = Vec::new();
        for e in crate::record::triggers(&self.events, default, self.off_cpu) {
            let q = crate::events::qualified(&e);
            let ok = tracefs::event_dir(&q).is_some_and(|d| root.join(d).join("enable").is_file());
            if !ok {
                return Err(Error::usage(format!(
                    "no event '{}' in {} (system:event, as events/SYSTEM/EVENT)",
                    escape(&e),
                    root.join("events").display()
                )));
            }
            if !events.contains(&q) {
                events.push(q);
            }
        }
        Ok((root, events))
    }

    /// Set tracefs up; every change is saved in `s` to be put back.
    fn setup(&self, s: &mut Settings, events: &[String], tids: &[i32]) -> Result<()> {
        s.set("tracing_on", "0")?;
        s.set("trace_clock", "global")?;
        if let Some(kb) = tracefs::restore_value("buffer_size_kb", &s.read("buffer_size_kb")?)
            .and_then(|v| v.parse::<u64>().ok())
        {
            if kb < self.buffer_kb {
                s.set("buffer_size_kb", &self.buffer_kb.to_string())?;
            }
        }
        if self.kernel {
            s.set("options/stacktrace", "1")?;
        }
        for e in events {
            let dir = tracefs::event_dir(e).unwrap_or_default();
            let filter = if tids.is_empty() || tids.len() > FILTER_THREADS {
                "0".to_string()
            } else {
                pid_filter(e, tids)
            };
            s.set(&format!("{dir}/filter"), &filter)?;
            s.set(&format!("{dir}/enable"), "1")?;
        }
        // The option switches every one of the module's events: each is put back as it
        // was after the option.
        let mut own: Vec<String> = std::fs::read_dir(s.root().join("events/user_unwind"))
            .map_err(|e| Error::new(format!("events/user_unwind: {e}")))?
            .flatten()
            .map(|e| {
                format!(
                    "events/user_unwind/{}/enable",
                    e.file_name().to_string_lossy()
                )
            })
            .filter(|f| s.root().join(f).is_file())
            .collect();
        own.sort();
        for f in &own {
            s.keep(f)?;
        }
        s.set(OPTION, "1")?;
        // What the buffer held before is not this view's (and its file_cache events are
        // written again: a reset starts a new generation of the module's cache).
        s.write("trace", "")?;
        s.set("tracing_on", "1")
    }

    /// Run the view until it is ended; tracefs is put back in all cases.
    pub fn run(&self) -> Result<()> {
        let (root, events) = self.prepare()?;
        let mut tids = Vec::new();
        for &p in &self.pids {
            if !Path::new(&format!("/proc/{p}")).is_dir() {
                return Err(Error::usage(format!("--pid {p}: no such process")));
            }
            tids.extend(crate::record::threads(p));
        }
        let layout = tracefs::layout(&root, &events)?;
        let mut decoder = PageDecoder::new(
            &layout.formats,
            layout.header,
            layout.page_size,
            native(),
            &HashMap::new(),
        )?;
        decoder.comms = saved_cmdlines(&root);
        let kallsyms = if self.kernel {
            crate::kallsyms::Kallsyms::parse(&std::fs::read("/proc/kallsyms").unwrap_or_default())
        } else {
            Default::default()
        };
        catch_signals();
        let mut settings = Settings::new(&root);
        let watched = self
            .setup(&mut settings, &events, &tids)
            .and_then(|()| Live::open(&root, decoder, layout.page_size))
            .and_then(|live| self.watch(&root, live, &events, &tids, kallsyms));
        let errors = settings.restore();
        let (agg, mut joiner, mut sym, status) = watched?;
        if let Some(e) = errors.into_iter().next() {
            return Err(e.context("putting tracefs back"));
        }
        if self.once {
            let mut agg = agg;
            let st = std::mem::take(&mut joiner).finish(&mut |s| {
                let _ = agg.add(&s);
            });
            let p = agg.profile(&mut sym, false);
            let status = Status {
                unresolved: st.unresolved_frames as u64,
                ..status
            };
            let mut out = std::io::stdout().lock();
            out.write_all(frame(&p, &status, self.functions, self.stacks, None).as_bytes())?;
            out.flush()?;
        }
        Ok(())
    }

    /// Read, count and draw until the view is ended; what was counted, for the last frame.
    fn watch(
        &self,
        root: &Path,
        mut live: Live,
        events: &[String],
        tids: &[i32],
        kallsyms: crate::kallsyms::Kallsyms,
    ) -> Result<(Aggregator, Joiner, Symbolizer, Status)> {
        let mut joiner = Joiner::new();
        let mut agg = Aggregator::new(Filter {
            pids: tids.to_vec(),
            comms: self.comms.clone(),
            events: events.to_vec(),
            ..Filter::default()
        });
        agg.off_cpu = self.off_cpu.then(OffCpu::default);
        agg.view = self.view;
        agg.kallsyms = kallsyms.clone();
        let mut sym = Symbolizer::new(self.opts.clone());
        sym.kallsyms = kallsyms;
        let mut what = events.join(", ");
        for c in &self.comms {
            what.push_str(&format!(", comm {}", escape(c)));
        }
        for p in &self.pids {
            what.push_str(&format!(", pid {p}"));
        }
        if self.off_cpu {
            what.push_str(", off-CPU");
        }
        let interactive = !self.once && std::io::stdout().is_terminal();
        let keys = if interactive { Keys::new() } else { None };
        let mut comms = Comms::default();
        let start = Instant::now();
        let mut next = start + REDRAW;
        let mut out = std::io::stdout();
        if interactive {
            // The cursor hidden while frames are drawn.
            out.write_all(b"\x1b[?25l")?;
        }
        let result = (|| -> Result<()> {
            loop {
                let quit = keys
                    .as_ref()
                    .is_some_and(|k| k.read().iter().any(|&c| c == b'q' || c == b'Q'));
                let last = quit
                    || STOP.load(Ordering::SeqCst)
                    || self.duration.is_some_and(|d| start.elapsed() >= d);
                live.poll(last, |mut e| {
                    comms.fill(&mut e);
                    joiner.push(e, &mut |s| {
                        let _ = agg.add(&s);
                    });
                })?;
                if last {
                    return Ok(());
                }
                if Instant::now() >= next && !self.once {
                    next += REDRAW;
                    live.decoder_mut().comms = saved_cmdlines(root);
                    comms = Comms::default();
                    let p = agg.profile(&mut sym, false);
                    let st = Status {
                        what: what.clone(),
                        elapsed: start.elapsed().as_secs_f64(),
                        events: live.events,
                        lost: live.lost,
                        unresolved: joiner.stats().unresolved_frames as u64,
                        footer: keys.as_ref().map(|_| "q quits".to_string()),
                    };
                    let size = if interactive { window() } else { None };
                    let f = frame(&p, &st, self.functions, self.stacks, size);
                    if interactive {
                        out.write_all(b"\x1b[H\x1b[2J")?;
                        out.write_all(f.as_bytes())?;
                    } else {
                        out.write_all(f.as_bytes())?;
                        out.write_all(b"\n")?;
                    }
                    out.flush()?;
                }
                std::thread::sleep(POLL);
            }
        })();
        if interactive {
            out.write_all(b"\x1b[?25h\n")?;
        }
        drop(keys);
        result?;
        for d in &live.damage {
            eprintln!("ustack: ring buffer: {d}");
        }
        let status = Status {
            what,
            elapsed: start.elapsed().as_secs_f64(),
            events: live.events,
            lost: live.lost,
            unresolved: 0,
            footer: None,
        };
        Ok((agg, joiner, sym, status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_filters() {
        assert_eq!(
            pid_filter("raw_syscalls:sys_enter", &[7, 9]),
            "common_pid == 7 || common_pid == 9"
        );
        assert_eq!(
            pid_filter("sched:sched_switch", &[7]),
            "prev_pid == 7 || next_pid == 7"
        );
    }
}
