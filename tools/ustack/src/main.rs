// SPDX-License-Identifier: GPL-2.0

//! `ustack`: symbolized user stacks, flame graphs and profiles from a user_unwind trace.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use ustack::error::{Error, Result};
use ustack::kallsyms::Kallsyms;
use ustack::output::{SortKey, View};
use ustack::stacks::{escape, Aggregator, Filter, StackView};
use ustack::symbolize::{FileStatus, Options, Symbolizer};
use ustack::{join, output};

const USAGE: &str = "\
usage: ustack [OPTIONS] [-i] [TRACE]
       ustack record [-e EVENT]... [-o FILE] (-- COMMAND [ARGS...] | -p PID)
       ustack top [-e EVENT]... [--off-cpu] [--comm COMM] [--pid PID] [--duration S] [--once]
       ustack --bench [STACKS [DEPTH [OFFSETS [DISTINCT_STACKS]]]]

TRACE (or -i TRACE; trace.dat if none) is a trace.dat from trace-cmd record (file
version 6 or 7, compressed or not) or the text of /sys/kernel/tracing/trace. Without an
output option the report is printed.

Outputs (each FILE may be - for standard output, for one of them):
  --report FILE        functions (self, children) and top stacks, perf report style,
                       a section per event
  -o FILE              the report to FILE
  --folded FILE        folded stacks, 'event;outer;...;inner COUNT', for flame graph tools
  --svg FILE           a flame graph (click to zoom, search)
  --diff BASE          the flame graph coloured by the change from trace BASE
  --inverted           the flame graph as an icicle graph (its root at the top)
  --speedscope FILE    speedscope JSON
  --pprof FILE         pprof profile.proto, gzipped
  --perf-script FILE   perf script's text: each sample's event line, then its frames
  --top N              stacks in the report (default 10)
  --sort KEYS          the report's function view by these of function,file,comm,pid
                       (comma-separated; default function,file)
  --percent-limit P    leave out report entries under P% of the samples
  -G, --caller         report stacks outermost frame first (default: innermost first)
  -g, --call-graph MODE  a call tree of each section of the report, the stacks merged,
                       each branch with its samples (or time) and share: caller (the
                       outermost frame first, perf report -g caller) or callee (the
                       innermost first, each branch to its callers)
  --focus FUNCTION     the callers and the callees of FUNCTION in each section of the
                       report, each as a tree rooted at it (also -S, --symbols)
  --task               a comm-pid level under the event
  --lines              file:line in labels (and stacks told apart by line)
  --off-cpu            off-CPU time: each sched_switch sample weighted by the time until
                       its task is switched in again (ns); preempted tasks left out
  --preempted          with --off-cpu, preempted (runnable) tasks too, under [R]
  --kernel-threads     with --off-cpu, kernel threads' time too (kworker, ksoftirqd, rcu):
                       their kernel stacks under [kernel thread NAME]
  --min-block TIME     with --off-cpu, only blockings of at least TIME (10ms, 500us, 2s;
                       a bare number is microseconds, as offcputime -m takes it)
  --max-block TIME     with --off-cpu, only blockings of at most TIME (offcputime -M)
  --user-only          leave the kernel frames out (recorded with -T: ustack record -T)
  --kernel-only        only the kernel frames
  --keep-tracing-frames  keep the tracing machinery's own kernel frames (the event's
                       probe, __traceiter_EVENT, __do_trace_EVENT), left out by default:
                       kernel stacks start where the event happened, as perf's do

Finding the files (the paths are the traced machine's):
  --sysroot DIR        look for every path under DIR
  --map PREFIX=DIR     look for paths under PREFIX in DIR (before the sysroot; repeatable)
                       (a path neither finds is then looked for as it is, on this
                       machine, and taken if its build-id is the trace's)
  --sysroot-only       never look at this machine's own paths when --sysroot or --map
                       is given
  --debug-dir DIR      look for DIR/.build-id/xx/yyyy.debug first (repeatable)
  --perf-map FILE      a JIT's /tmp/perf-PID.map, for its anonymous frames (repeatable)
  --no-inline          no inlined frames

Filters (repeatable; a sample passes if it matches one of each kind given):
  --pid PID  --comm COMM  --event NAME (system:event or event; the report has a
                       section per event; COMM is the name at the sample: the trace's
                       sched_switch, exec and rename events, else saved_cmdlines)
  --tgid TGID          the threads of a process (from task:task_newtask events or the
                       text's tgid column; a task not created in the trace is its own)
  --cpu CPUS           the CPU of the sample's event: 0,2-3
  --time START,END     trace seconds, as perf and trace-cmd print them (an end may be empty)

Instances (trace-cmd record -B):
  --instance NAME      read this instance's buffer instead of the top one

  -q, --quiet          no summary on standard error
  -V, --version        the version
";

const RECORD_USAGE: &str = "\
usage: ustack record [-e EVENT]... [-o FILE] [-C CLOCK] [--date] [-T] [--off-cpu] -- COMMAND [ARGS...]
       ustack record [-e EVENT]... [-o FILE] [-C CLOCK] [--date] [-T] [--off-cpu] -p PID

Runs trace-cmd record with the user_unwind events, task:task_newtask and the events
given (sched:sched_switch if none), clock global, on COMMAND and its children or on
process PID (until Ctrl-C), into FILE (trace.dat). Checks first that the module is loaded
and its option file there, then that the option came on, and reads what was recorded.

  -e EVENT             an event whose stacks to record (system:event; repeatable)
  -p PID               record a running process
  -o FILE              the trace.dat to write (default trace.dat)
  -C CLOCK             the trace clock (default global)
  --date               times of day, not the clock's count (trace-cmd record --date): the
                       report, --time and pprof's time_nanos give them
  -T, --kernel         kernel stacks too (trace-cmd record -T): ustack puts them above
                       the user frames
  --off-cpu            what ustack --off-cpu reads: sched:sched_switch, kernel stacks
  --trace-cmd PATH     the trace-cmd to run
";

const TOP_USAGE: &str = "\
usage: ustack top [-e EVENT]... [--off-cpu] [-T] [--comm COMM]... [--pid PID]...
                  [--duration S] [--once] [OPTIONS]

A live view, as perf top gives: reads the ring buffer as it fills (every CPU's
trace_pipe_raw), symbolizes and counts the stacks as a trace's, and draws each event's
functions (the most self first) and top stacks every second. Runs as root on the traced
machine with the module loaded. It sets tracefs up (the module's option, the events and
their filters, the global clock, a buffer of --buffer-size at least) and puts all of it
back as it was when it ends: q, --duration, Ctrl-C, SIGTERM, an error.

  -e EVENT             an event whose stacks to count (system:event; repeatable); none:
                       the timer interrupt (irq_vectors:local_timer_entry, else
                       timer:hrtimer_expire_entry), sampling what runs on each CPU
  --off-cpu            off-CPU time: sched:sched_switch, each blocking weighed by its time
  -T, --kernel         kernel stacks too (the stacktrace option)
  --user-only          leave the kernel frames out
  --kernel-only        only the kernel frames
  --comm COMM          only tasks of this name (repeatable)
  --pid PID            only the threads process PID has when top starts (repeatable;
                       filtered in the kernel too)
  --duration S         end after S seconds
  --once               print one frame when it ends (after --duration, 1 s if none) and
                       nothing before: for scripts
  --top N              stacks per event (default 5)
  --functions N        functions per event (default 15)
  -m, --buffer-size KB the ring buffer's size per CPU, at least (default 4096)
  --sysroot, --map, --sysroot-only, --debug-dir, --perf-map, --no-inline
                       finding the files, as for a trace

Keys: q quits.
";

fn top_main() -> ExitCode {
    use lexopt::prelude::*;
    let mut t = ustack::top::Top::default();
    let usage = |e: String| {
        eprintln!(
            "ustack top: {}\nTry 'ustack top --help' for more information.",
            escape(&e)
        );
        ExitCode::from(2)
    };
    let number = |p: &mut lexopt::Parser, what: &str| -> std::result::Result<u64, String> {
        value(p)?
            .parse::<u64>()
            .map_err(|_| format!("{what} wants a number"))
    };
    let mut p = lexopt::Parser::from_args(std::env::args_os().skip(2));
    let mut user_only = false;
    let mut kernel_only = false;
    loop {
        let arg = match p.next() {
            Ok(Some(a)) => a,
            Ok(None) => break,
            Err(e) => return usage(e.to_string()),
        };
        let r: std::result::Result<(), String> = match arg {
            Short('e') | Long("event") => value(&mut p).map(|e| t.events.push(e)),
            Long("off-cpu") => {
                t.off_cpu = true;
                Ok(())
            }
            Short('T') | Long("kernel") => {
                t.kernel = true;
                Ok(())
            }
            Long("user-only") => {
                user_only = true;
                Ok(())
            }
            Long("kernel-only") => {
                kernel_only = true;
                Ok(())
            }
            Long("comm") => value(&mut p).map(|c| t.comms.push(c)),
            Long("pid") => value(&mut p).and_then(|v| {
                v.parse()
                    .map(|n| t.pids.push(n))
                    .map_err(|_| "--pid wants a number".to_string())
            }),
            Long("duration") => value(&mut p).and_then(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
                    .map(|s| t.duration = Some(std::time::Duration::from_secs_f64(s)))
                    .ok_or_else(|| format!("--duration wants seconds, not '{v}'"))
            }),
            Long("once") => {
                t.once = true;
                Ok(())
            }
            Long("top") => number(&mut p, "--top").map(|n| t.stacks = n as usize),
            Long("functions") => number(&mut p, "--functions").map(|n| t.functions = n as usize),
            Short('m') | Long("buffer-size") => {
                number(&mut p, "--buffer-size").map(|n| t.buffer_kb = n)
            }
            Long(o) if SYMBOL_OPTIONS.contains(&o) => {
                let o = o.to_string();
                symbol_option(&o, &mut p, &mut t.opts)
            }
            Short('h') | Long("help") => {
                print!("{TOP_USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => Err(arg.unexpected().to_string()),
        };
        if let Err(e) = r {
            return usage(e);
        }
    }
    t.view = match (user_only, kernel_only) {
        (true, true) => return usage("--user-only and --kernel-only: one of them".into()),
        (true, false) => StackView::UserOnly,
        (false, true) => StackView::KernelOnly,
        _ => StackView::Both,
    };
    if t.once && t.duration.is_none() {
        t.duration = Some(std::time::Duration::from_secs(1));
    }
    match t.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_usage() => usage(e.msg),
        Err(e) => {
            eprintln!("ustack top: {e}");
            ExitCode::from(1)
        }
    }
}

/// The options that say where a trace's files are found and how they are named.
const SYMBOL_OPTIONS: [&str; 6] = [
    "sysroot",
    "map",
    "debug-dir",
    "perf-map",
    "no-inline",
    "sysroot-only",
];

/// One of [`SYMBOL_OPTIONS`], with its value.
fn symbol_option(
    name: &str,
    p: &mut lexopt::Parser,
    o: &mut Options,
) -> std::result::Result<(), String> {
    match name {
        "sysroot" => o.sysroot = Some(os_value(p)?.into()),
        "map" => {
            let v = value(p)?;
            let (pre, dir) = v.split_once('=').ok_or("--map wants PREFIX=DIR")?;
            o.maps.push((pre.to_string(), dir.into()));
        }
        "debug-dir" => o.debug_dirs.push(os_value(p)?.into()),
        "perf-map" => o.perf_maps.push(os_value(p)?.into()),
        "no-inline" => o.no_inline = true,
        _ => o.sysroot_only = true,
    }
    Ok(())
}

fn record_main() -> ExitCode {
    use lexopt::prelude::*;
    let (trace_cmd, sys) = ustack::record::defaults();
    let mut r = ustack::record::Record {
        events: Vec::new(),
        pid: None,
        command: Vec::new(),
        output: PathBuf::from("trace.dat"),
        clock: "global".into(),
        date: false,
        kernel: false,
        off_cpu: false,
        trace_cmd,
        sys,
    };
    let usage = |e: String| {
        eprintln!(
            "ustack record: {}\nTry 'ustack record --help' for more information.",
            escape(&e)
        );
        ExitCode::from(2)
    };
    let mut p = lexopt::Parser::from_args(std::env::args_os().skip(2));
    loop {
        let arg = match p.next() {
            Ok(Some(a)) => a,
            Ok(None) => break,
            Err(e) => return usage(e.to_string()),
        };
        let v = |p: &mut lexopt::Parser| value(p);
        let r2 = match arg {
            Short('e') | Long("event") => v(&mut p).map(|e| r.events.push(e)),
            Short('o') | Long("output") => os_value(&mut p).map(|o| r.output = o.into()),
            Short('C') | Long("clock") => v(&mut p).map(|c| r.clock = c),
            Long("date") => {
                r.date = true;
                Ok(())
            }
            Short('T') | Long("kernel") => {
                r.kernel = true;
                Ok(())
            }
            Long("off-cpu") => {
                r.off_cpu = true;
                Ok(())
            }
            Long("trace-cmd") => os_value(&mut p).map(|t| r.trace_cmd = t.into()),
            Short('p') | Long("pid") => v(&mut p).and_then(|s| {
                s.parse()
                    .map(|n| r.pid = Some(n))
                    .map_err(|_| "-p wants a number".to_string())
            }),
            Short('h') | Long("help") => {
                print!("{RECORD_USAGE}");
                return ExitCode::SUCCESS;
            }
            Value(c) => {
                r.command.push(c.to_string_lossy().into_owned());
                r.command.extend(
                    p.raw_args()
                        .map(|mut a| {
                            a.by_ref()
                                .map(|x| x.to_string_lossy().into_owned())
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default(),
                );
                Ok(())
            }
            _ => Err(arg.unexpected().to_string()),
        };
        if let Err(e) = r2 {
            return usage(e);
        }
    }
    if r.command.is_empty() == r.pid.is_none() {
        return usage("give a command (after --) or -p PID, one of them".into());
    }
    match r.run() {
        Ok(lines) => {
            for l in lines {
                eprintln!("ustack: {}", escape(&l));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ustack record: {e}");
            ExitCode::from(1)
        }
    }
}

const HINT: &str = "Try 'ustack --help' for more information.";

#[derive(Default)]
struct Args {
    trace: Option<PathBuf>,
    outputs: Vec<(String, String)>,
    view: View,
    lines: bool,
    quiet: bool,
    opts: Options,
    filter: Filter,
    bench: Option<Vec<usize>>,
    diff: Option<PathBuf>,
    instance: Option<String>,
    /// An icicle graph: the flame graph's root at the top.
    inverted: bool,
    stack_view: StackView,
    off_cpu: Option<ustack::stacks::OffCpu>,
    /// Keep the tracing machinery's own kernel frames.
    keep_tracing: bool,
}

/// An option's value, as given (a path).
fn os_value(p: &mut lexopt::Parser) -> std::result::Result<std::ffi::OsString, String> {
    p.value().map_err(|e| e.to_string())
}

/// An option's value, as text.
fn value(p: &mut lexopt::Parser) -> std::result::Result<String, String> {
    utf8(os_value(p)?)
}

fn utf8(v: std::ffi::OsString) -> std::result::Result<String, String> {
    v.into_string()
        .map_err(|_| "non-UTF-8 argument".to_string())
}

fn parse_args() -> std::result::Result<Args, String> {
    use lexopt::prelude::*;
    let mut a = Args::default();
    let mut preempted = false;
    let mut kernel_threads = false;
    let mut block: (Option<u64>, Option<u64>) = (None, None);
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long(o @ ("report" | "folded" | "svg" | "speedscope" | "pprof" | "perf-script")) => {
                let o = o.to_string();
                a.outputs.push((o, value(&mut p)?));
            }
            Short('o') => a.outputs.push(("report".into(), value(&mut p)?)),
            Short('i') | Long("input") => {
                if a.trace.is_some() {
                    return Err("one trace at a time".into());
                }
                a.trace = Some(os_value(&mut p)?.into());
            }
            Long("top") => {
                a.view.top = value(&mut p)?.parse().map_err(|_| "--top wants a number")?
            }
            Long("sort") => {
                a.view.sort = value(&mut p)?
                    .split(',')
                    .map(|k| {
                        SortKey::parse(k.trim()).ok_or_else(|| {
                            format!("--sort: unknown key '{k}' (function, file, comm, pid)")
                        })
                    })
                    .collect::<std::result::Result<_, _>>()?;
            }
            Long("percent-limit") => {
                let v = value(&mut p)?;
                a.view.percent_limit = v
                    .trim_end_matches('%')
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=100.0).contains(p))
                    .ok_or_else(|| {
                        format!("--percent-limit wants a share from 0 to 100, not '{v}'")
                    })?
            }
            Short('G') | Long("caller") => a.view.caller_first = true,
            Long("inverted") => a.inverted = true,
            Long("user-only") => a.stack_view = StackView::UserOnly,
            Long("off-cpu") => a.off_cpu = Some(a.off_cpu.unwrap_or_default()),
            Long("preempted") => preempted = true,
            Long("kernel-threads") => kernel_threads = true,
            Long(o @ ("min-block" | "max-block")) => {
                let o = o.to_string();
                let v = value(&mut p)?;
                let ns = ustack::stacks::parse_duration(&v).ok_or_else(|| {
                    format!("--{o} wants a time: 10ms, 500us, 2s (a bare number is microseconds), not '{v}'")
                })?;
                if o == "min-block" {
                    block.0 = Some(ns);
                } else {
                    block.1 = Some(ns);
                }
            }
            Long("kernel-only") => a.stack_view = StackView::KernelOnly,
            Long("keep-tracing-frames") => a.keep_tracing = true,
            Long("callee") => a.view.caller_first = false,
            Short('g') | Long("call-graph") => {
                let v = value(&mut p)?;
                // perf's form: MODE, or fields of which the mode is one (graph,0.5,caller).
                let mode = v.split(',').find_map(|m| match m.trim() {
                    "caller" => Some(true),
                    "callee" => Some(false),
                    _ => None,
                });
                a.view.call_tree =
                    Some(mode.ok_or_else(|| {
                        format!("--call-graph wants caller or callee, not '{v}'")
                    })?);
            }
            Long("focus") | Short('S') | Long("symbols") => {
                let f = value(&mut p)?;
                if f.is_empty() {
                    return Err("--focus wants a function's name".into());
                }
                a.view.focus = Some(f);
            }
            Long("task") => a.view.task = true,
            Long("diff") => a.diff = Some(os_value(&mut p)?.into()),
            Long("lines") => a.lines = true,
            Short('q') | Long("quiet") => a.quiet = true,
            Long(o) if SYMBOL_OPTIONS.contains(&o) => {
                let o = o.to_string();
                symbol_option(&o, &mut p, &mut a.opts)?
            }
            Long("pid") => a
                .filter
                .pids
                .push(value(&mut p)?.parse().map_err(|_| "--pid wants a number")?),
            Long("comm") => a.filter.comms.push(value(&mut p)?),
            Long("tgid") => a.filter.tgids.push(
                value(&mut p)?
                    .parse()
                    .map_err(|_| "--tgid wants a number")?,
            ),
            Long("cpu") => a.filter.cpus.extend(
                ustack::stacks::parse_cpus(&value(&mut p)?).ok_or("--cpu wants CPUs: 0,2-3")?,
            ),
            Long("time") => {
                let v = value(&mut p)?;
                let t = ustack::stacks::parse_time(&v)
                    .ok_or("--time wants START,END in trace seconds (either may be empty)")?;
                if let (Some(a), Some(b)) = t {
                    if b < a {
                        return Err(format!(
                            "--time {v}: the end is before the start (START,END in trace seconds)"
                        ));
                    }
                }
                a.filter.time = Some(t);
            }
            Long("instance") => a.instance = Some(value(&mut p)?),
            Long("event") => a.filter.events.push(value(&mut p)?),
            Long("bench") => a.bench = Some(Vec::new()),
            Short('h') | Long("help") => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            Short('V') | Long("version") => {
                println!("ustack {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            Value(v) if a.bench.is_some() => {
                let n = utf8(v)?.parse().map_err(|_| "--bench wants numbers")?;
                if let Some(b) = a.bench.as_mut() {
                    b.push(n);
                }
            }
            Value(v) if a.trace.is_none() => a.trace = Some(v.into()),
            Value(_) => return Err("one trace at a time".into()),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    match (&mut a.off_cpu, preempted) {
        (Some(o), true) => o.preempted = true,
        (None, true) => {
            return Err(
                "--preempted adds preempted tasks to the off-CPU time: give --off-cpu too".into(),
            )
        }
        _ => {}
    }
    for (on, what) in [
        (
            kernel_threads,
            "--kernel-threads adds kernel threads' off-CPU time",
        ),
        (
            block.0.is_some(),
            "--min-block selects blockings of the off-CPU time",
        ),
        (
            block.1.is_some(),
            "--max-block selects blockings of the off-CPU time",
        ),
    ] {
        if on && a.off_cpu.is_none() {
            return Err(format!("{what}: give --off-cpu too"));
        }
    }
    if let Some(o) = &mut a.off_cpu {
        o.kernel_threads = kernel_threads;
        o.min_ns = block.0.unwrap_or(0);
        o.max_ns = block.1;
        if block.1.is_some_and(|max| max < o.min_ns) {
            return Err("--max-block is below --min-block: no blocking is kept".into());
        }
    }
    if a.stack_view != StackView::Both
        && std::env::args().any(|x| x == "--user-only")
        && std::env::args().any(|x| x == "--kernel-only")
    {
        return Err("--user-only and --kernel-only: one of them".into());
    }
    if a.inverted && !a.outputs.iter().any(|(k, _)| k == "svg") {
        return Err("--inverted draws the flame graph upside down: give --svg FILE too".into());
    }
    if a.diff.is_some() && !a.outputs.iter().any(|(k, _)| k == "svg") {
        return Err("--diff BASE colours a flame graph: give --svg FILE too".into());
    }
    let report = a.outputs.is_empty() || a.outputs.iter().any(|(k, _)| k == "report");
    if (a.view.call_tree.is_some() || a.view.focus.is_some()) && !report {
        return Err("--call-graph and --focus are views of the report: give --report FILE (or no output option)".into());
    }
    if a.outputs.iter().filter(|(_, d)| d == "-").count() > 1 {
        return Err("two outputs to standard output ('-'): give one of them a file".into());
    }
    Ok(a)
}

/// Standard output went away (`ustack ... | head`): stop quietly.
fn quiet_on_pipe(e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    Error::from(e)
}

/// Write one output to `dest` (`-`: standard output).
fn write_out(
    dest: &str,
    f: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    use std::io::Write;
    if dest == "-" {
        let mut o = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        f(&mut o).map_err(quiet_on_pipe)?;
        o.flush().map_err(quiet_on_pipe)?;
        return Ok(());
    }
    let err = |e: std::io::Error| Error::new(format!("{}: {e}", escape(dest)));
    let file = std::fs::File::create(dest).map_err(err)?;
    let mut o = std::io::BufWriter::with_capacity(1 << 16, file);
    f(&mut o).map_err(err)?;
    o.flush().map_err(err)
}

/// The input, mapped: a trace.dat's pages are read as they are walked and dropped after.
enum Input {
    Map(memmap2::Mmap),
    Bytes(Vec<u8>),
}

impl Input {
    fn open(path: &std::path::Path) -> Result<Input> {
        let err = |e: std::io::Error| Error::new(format!("{}: {e}", path.display()));
        let f = std::fs::File::open(path).map_err(err)?;
        let meta = f.metadata().map_err(err)?;
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: the file is only read; one changed under us gives wrong data (or
            // SIGBUS if cut), as reading it would.
            if let Ok(m) = unsafe { memmap2::Mmap::map(&f) } {
                let _ = m.advise(memmap2::Advice::Sequential);
                return Ok(Input::Map(m));
            }
        }
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut &f, &mut v).map_err(err)?;
        Ok(Input::Bytes(v))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Input::Map(m) => m,
            Input::Bytes(v) => v,
        }
    }

    /// Drop the pages of `start..end` from memory (they are read again if needed).
    fn release(&self, start: u64, end: u64) {
        if let Input::Map(m) = self {
            let page = 4096u64;
            let s = start.div_ceil(page) * page;
            let e = (end / page) * page;
            if e > s && e <= m.len() as u64 {
                // SAFETY: a read-only file mapping: the pages come back from the file.
                let _ = unsafe {
                    m.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        s as usize,
                        (e - s) as usize,
                    )
                };
            }
        }
    }
}

/// A progress line on standard error, when it is a terminal and the run is long.
struct Progress {
    start: Instant,
    last: Instant,
    on: bool,
    shown: bool,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        use std::io::IsTerminal;
        Progress {
            start: Instant::now(),
            last: Instant::now(),
            on: !quiet && std::io::stderr().is_terminal(),
            shown: false,
        }
    }
    fn tick(&mut self, what: impl FnOnce() -> String) {
        if !self.on
            || self.start.elapsed().as_millis() < 1000
            || self.last.elapsed().as_millis() < 250
        {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        eprint!("\r\x1b[Kustack: {}", what());
    }
    fn done(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

/// What of the samples the outputs show, and how they are weighed.
#[derive(Clone, Copy)]
struct Select {
    view: StackView,
    off_cpu: Option<ustack::stacks::OffCpu>,
    keep_tracing: bool,
}

/// Read a trace, join it and count its samples.
#[allow(clippy::too_many_arguments)]
fn read_trace(
    path: &std::path::Path,
    filter: &Filter,
    instance: Option<&str>,
    progress: &mut Progress,
    keep_times: bool,
    select: Select,
    mut sink: Option<&mut output::PerfScript>,
) -> Result<(Aggregator, join::Stats, ustack::Summary, Kallsyms)> {
    let name = path.display().to_string();
    let input = Input::open(path)?;
    let bytes = input.bytes();
    let total = bytes.len() as u64;
    let mut src = ustack::open_instance(bytes, instance).map_err(|e| e.context(&escape(&name)))?;
    src.on_release(|s, e| input.release(s, e));
    let kallsyms = src.kallsyms();
    if let Some(f) = sink.as_mut() {
        f.kallsyms(kallsyms.clone());
    }
    let mut joiner = join::Joiner::new();
    joiner.kernel_threads = select.off_cpu.is_some_and(|o| o.kernel_threads);
    joiner.renames_recorded = src.records_renames();
    let mut agg = Aggregator::new(filter.clone());
    agg.keep_times = keep_times;
    agg.view = select.view;
    agg.off_cpu = select.off_cpu;
    agg.keep_tracing = select.keep_tracing;
    agg.kallsyms = kallsyms.clone();
    let mut n = 0u64;
    let mut take = |s: join::Sample, sink: &mut Option<&mut output::PerfScript>| {
        // One rule for what every output shows: perf script writes what the count keeps.
        if let (Some(k), Some(f)) = (agg.add(&s), sink.as_mut()) {
            f.sample(&s, k);
        }
    };
    while let Some(e) = src.next() {
        let ts = e.ts;
        joiner.push(e, &mut |s| take(s, &mut sink));
        if let Some(f) = sink.as_mut() {
            f.advance(ts);
        }
        n += 1;
        if n.is_multiple_of(65536) {
            let read = src.bytes_read();
            let d = joiner.stacks();
            progress.tick(|| {
                format!(
                    "{:.0} of {:.0} MB, {n} events, {d} stacks",
                    read as f64 / 1e6,
                    total as f64 / 1e6
                )
            });
        }
    }
    let st = joiner.finish(&mut |s| take(s, &mut sink));
    let summary = src.summary();
    drop(src);
    if let Some(e) = &summary.not_a_trace {
        return Err(Error::new(e.clone()).context(&escape(&name)));
    }
    Ok((agg, st, summary, kallsyms))
}

fn run(a: Args) -> Result<bool> {
    if let Some(b) = &a.bench {
        let get = |i: usize, d: usize| b.get(i).copied().unwrap_or(d);
        let stacks = get(0, 100_000);
        ustack::bench::run(stacks, get(1, 32), get(2, 4096), get(3, stacks))?;
        return Ok(true);
    }
    let path = match a.trace.clone() {
        Some(p) => p,
        None => {
            let p = PathBuf::from("trace.dat");
            if !p.exists() {
                return Err(Error::usage(format!(
                    "no trace given, and no trace.dat in {}: name a trace (trace.dat or the text \
                     of the trace file), or record one with 'ustack record -e EVENT -- COMMAND' \
                     (or trace-cmd record -e user_unwind -e EVENT COMMAND)",
                    std::env::current_dir()
                        .map(|d| escape(&d.display().to_string()))
                        .unwrap_or_else(|_| "the current directory".into())
                )));
            }
            p
        }
    };
    let name = path.display().to_string();
    let select = Select {
        view: a.stack_view,
        off_cpu: a.off_cpu,
        keep_tracing: a.keep_tracing,
    };
    let mut progress = Progress::new(a.quiet);
    let mut sym = Symbolizer::new(a.opts.clone());
    // pprof gives each sample's time.
    let times = a.outputs.iter().any(|(k, _)| k == "pprof");
    // perf script's text is written sample by sample, as the trace is read.
    let mut late = 0;
    let (agg, st, summary, kallsyms) = match a.outputs.iter().find(|(k, _)| k == "perf-script") {
        Some((_, dest)) => {
            let mut r = None;
            write_out(dest, |w| {
                let mut ps = output::PerfScript::new(&mut sym, w);
                r = Some(read_trace(
                    &path,
                    &a.filter,
                    a.instance.as_deref(),
                    &mut progress,
                    times,
                    select,
                    Some(&mut ps),
                ));
                late = ps.finish()?;
                Ok(())
            })?;
            r.ok_or_else(|| Error::new("no trace read"))??
        }
        None => read_trace(
            &path,
            &a.filter,
            a.instance.as_deref(),
            &mut progress,
            times,
            select,
            None,
        )?,
    };
    let base = match &a.diff {
        Some(b) => Some(read_trace(
            b,
            &a.filter,
            a.instance.as_deref(),
            &mut progress,
            false,
            select,
            None,
        )?),
        None => None,
    };
    progress.tick(|| "symbolizing".to_string());
    let (kept, seen, times_dropped) = (agg.samples, agg.seen, agg.times_dropped);
    let off_cpu_note = a.off_cpu.map(|_| {
        (
            agg.value,
            agg.off_cpu_other,
            agg.off_cpu_preempted,
            agg.off_cpu_out_of_range,
            agg.off_cpu_kthreads,
        )
    });
    // Each trace's kernel frames by its own kallsyms.
    let base = base.map(|(b, _, _, k)| {
        sym.kallsyms = k;
        b.profile(&mut sym, a.lines)
    });
    sym.kallsyms = kallsyms;
    let mut p = agg.profile(&mut sym, a.lines);
    p.wall_clock = summary.wall_clock;
    // The counts are in the profile now: their memory is the outputs'.
    drop(agg);
    progress.done();
    let mut outputs = a.outputs;
    if outputs.is_empty() {
        outputs.push(("report".into(), "-".into()));
    }
    for (kind, dest) in &outputs {
        let task = a.view.task;
        match kind.as_str() {
            "report" => write_out(dest, |w| {
                w.write_all(output::report(&p, &a.view).as_bytes())
            })?,
            "folded" => write_out(dest, |w| output::write_folded(&p, task, w))?,
            "svg" => write_out(dest, |w| {
                // The graph says what its widths are when they are not samples.
                let what = if p.off_cpu {
                    "off-CPU time (ms) of "
                } else {
                    ""
                };
                let svg = match (&base, &a.diff) {
                    (Some(b), Some(bp)) => output::svg_diff(
                        &p,
                        b,
                        &format!(
                            "ustack: {what}{} against {}",
                            escape(&name),
                            escape(&bp.display().to_string())
                        ),
                        task,
                        a.inverted,
                    ),
                    _ => output::svg(
                        &p,
                        &format!("ustack: {what}{}", escape(&name)),
                        task,
                        a.inverted,
                    ),
                };
                w.write_all(svg.as_bytes())
            })?,
            "speedscope" => write_out(dest, |w| output::write_speedscope(&p, &name, task, w))?,
            "perf-script" => {}
            _ => write_out(dest, |w| w.write_all(&output::pprof(&p)))?,
        }
    }
    let mut clean = summary.damage.is_empty();
    if !a.quiet {
        eprintln!(
            "ustack: {} ({}): {} events, {} cookies, {} stacks, {} samples kept, {} frames",
            escape(&name),
            summary.kind,
            st.events,
            st.cookies,
            st.stacks,
            kept,
            st.frames
        );
        eprintln!(
            "ustack: unresolved: {} frames of {} file cookies ({} frames named by a file_cache after their stack); {} cookies without a stack, {} without a trigger, {} stacks without a cookie, {} incomplete, {} cut short by the unwinder; {} bad records, {} events lost",
            st.unresolved_frames,
            st.unresolved_cookies,
            st.late_named_frames,
            st.cookies_without_stack,
            st.cookies_without_trigger,
            st.stacks_without_cookie,
            st.incomplete_stacks,
            st.truncated_stacks,
            summary.bad_records,
            summary.lost
        );
        if let Some((ns, other, preempted, range, kthreads)) = off_cpu_note {
            eprintln!(
                "ustack: off-CPU: {:.3} ms in {kept} samples; left out: {other} whose event did not switch their task out (or the trace did not switch it in again), {preempted} preempted (--preempted shows them)",
                ns as f64 / 1e6
            );
            if a.off_cpu.is_some_and(|o| o.kernel_threads) {
                eprintln!("ustack: off-CPU: {kthreads} samples of kernel threads");
            }
            if range > 0 {
                eprintln!("ustack: off-CPU: {range} blockings left out by --min-block/--max-block");
            }
        }
        if st.kernel_stacks > 0 {
            eprintln!(
                "ustack: kernel stacks: {} of {} joined to a sample's event; {} kernel frames, {} not named by the trace's kallsyms ({} symbols)",
                st.kernel_stacks_joined,
                st.kernel_stacks,
                p.kernel_frames,
                p.kernel_unnamed,
                sym.kallsyms.len()
            );
        }
        if p.frames_total > 0 {
            eprintln!(
                "ustack: named: {} of {} frames of the samples kept ({} unnamed, shown as file+0xoffset)",
                p.frames_total - p.frames_unnamed,
                p.frames_total,
                p.frames_unnamed
            );
        }
        for (id, p) in &sym.fetched {
            eprintln!(
                "ustack: debug file of build-id {id} from debuginfod: {}",
                escape(&p.display().to_string())
            );
        }
        for e in &sym.fetch_errors {
            eprintln!("ustack: debuginfod: {}", escape(e));
        }
        for (f, fb) in sym.fallbacks() {
            let path = escape(&f.path);
            let debug = escape(&fb.debug.display().to_string());
            match &fb.error {
                Some(e) => eprintln!(
                    "ustack: {path}: debug file {debug} unusable ({}): symbols from the binary itself ({} frames named)",
                    escape(e),
                    fb.frames
                ),
                None => eprintln!(
                    "ustack: {path}: {} frames the debug file {debug} does not name were named from the binary itself",
                    fb.frames
                ),
            }
        }
        if let Some(w) = ustack::clock_warning(summary.clock.as_deref()) {
            eprintln!("ustack: warning: {}", escape(&w));
        }
        for (f, status) in sym.files() {
            let path = escape(&f.path);
            match status {
                FileStatus::Ok { .. } => {}
                FileStatus::Missing { tried } => {
                    let tried: Vec<String> = tried
                        .iter()
                        .map(|t| escape(&t.display().to_string()))
                        .collect();
                    eprintln!(
                        "ustack: {path}: not found (tried {}; see --sysroot, --map)",
                        tried.join(", ")
                    )
                }
                FileStatus::NotElf { host } => {
                    eprintln!(
                        "ustack: {path}: {} is not an ELF file",
                        escape(&host.display().to_string())
                    )
                }
                FileStatus::BuildIdMismatch { host, found } => {
                    eprintln!(
                    "ustack: {path}: build-id mismatch: the trace has {}, {} has {}; not symbolized",
                    ustack::symbolize::hex(&f.build_id),
                    escape(&host.display().to_string()),
                    found.as_deref().map(ustack::symbolize::hex).unwrap_or_else(|| "none".into())
                )
                }
            }
        }
    }
    if late > 0 {
        eprintln!(
            "ustack: perf script: {late} samples came more than {} s of trace after later ones and were written out of time order",
            output::perf_script::REORDER_NS / 1_000_000_000
        );
    }
    if times_dropped {
        eprintln!(
            "ustack: pprof: more than {} samples: their times are left out",
            ustack::stacks::TIMES_MAX
        );
    }
    if seen == 0 && summary.cut {
        eprintln!(
            "ustack: {}: no user stacks in what the file holds: it is cut short (truncated inside its event data: a partial copy, or a recording that did not finish), and the part there has no user_unwind_cookie event",
            escape(&name)
        );
    } else if seen == 0 {
        eprintln!(
            "ustack: {}: no user stacks: the trace has no user_unwind_cookie event (was the module loaded and its events recorded?)",
            escape(&name)
        );
    } else if kept == 0 {
        eprintln!("ustack: no sample matched the filters ({seen} samples in the trace)");
    }
    if !summary.other_instances.is_empty() {
        let names: Vec<String> = summary.other_instances.iter().map(|i| escape(i)).collect();
        eprintln!(
            "ustack: {}: instances not read: {} (--instance NAME reads one)",
            escape(&name),
            names.join(", ")
        );
    }
    for d in &summary.damage {
        eprintln!(
            "ustack: {}: damaged: {d}; the events before it were read",
            escape(&name)
        );
        clean = false;
    }
    if std::env::var_os("USTACK_PEAK").is_some() {
        if let Some(kb) = peak_kb() {
            eprintln!("ustack: peak memory {kb} kB");
        }
    }
    Ok(clean)
}

/// This process's peak resident memory (VmHWM), in kB.
fn peak_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == "record") {
        return record_main();
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == "top") {
        return top_main();
    }
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ustack: {}\n{HINT}", escape(&e));
            return ExitCode::from(2);
        }
    };
    match run(a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) if e.is_usage() => {
            eprintln!("ustack: {e}\n{HINT}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("ustack: {e}");
            ExitCode::from(1)
        }
    }
}
