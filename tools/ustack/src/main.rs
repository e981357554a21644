// SPDX-License-Identifier: GPL-2.0

//! `ustack`: symbolized user stacks, flame graphs and profiles from a user_unwind trace.

use std::path::PathBuf;
use std::process::ExitCode;

use ustack::error::{Error, Result};
use ustack::stacks::Filter;
use ustack::symbolize::{FileStatus, Options, Symbolizer};
use ustack::{join, output, stacks};

const USAGE: &str = "\
usage: ustack [OPTIONS] TRACE
       ustack --bench [STACKS [DEPTH [DISTINCT]]]

TRACE is a trace.dat from trace-cmd record (file version 6 or 7, compressed or not) or the
text of /sys/kernel/tracing/trace. Without an output option the top stacks are printed.

Outputs (each FILE may be - for standard output):
  --report FILE        top stacks with counts and percentages (perf report --stdio style)
  --folded FILE        folded stacks, 'event;outer;...;inner COUNT', for flame graph tools
  --svg FILE           a flame graph
  --speedscope FILE    speedscope JSON
  --pprof FILE         pprof profile.proto, gzipped
  --top N              stacks in the report (default 10)
  --task               a comm-pid level under the event
  --lines              file:line in folded and flame graph labels

Finding the files (the paths are the traced machine's):
  --sysroot DIR        look for every path under DIR
  --map PREFIX=DIR     look for paths under PREFIX in DIR (before the sysroot; repeatable)
  --debug-dir DIR      look for DIR/.build-id/xx/yyyy.debug first (repeatable)
  --perf-map FILE      a JIT's /tmp/perf-PID.map, for its anonymous frames (repeatable)
  --no-inline          no inlined frames

Filters (repeatable; a sample passes if it matches one of each kind given):
  --pid PID  --comm COMM  --event NAME (system:event or event)

  -q, --quiet          no summary on standard error
";

#[derive(Default)]
struct Args {
    trace: Option<PathBuf>,
    outputs: Vec<(String, String)>,
    top: usize,
    task: bool,
    lines: bool,
    quiet: bool,
    opts: Options,
    filter: Filter,
    bench: Option<Vec<usize>>,
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
    let mut a = Args {
        top: 10,
        ..Args::default()
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long(o @ ("report" | "folded" | "svg" | "speedscope" | "pprof")) => {
                let o = o.to_string();
                a.outputs.push((o, value(&mut p)?));
            }
            Long("top") => a.top = value(&mut p)?.parse().map_err(|_| "--top wants a number")?,
            Long("task") => a.task = true,
            Long("lines") => a.lines = true,
            Short('q') | Long("quiet") => a.quiet = true,
            Long("sysroot") => a.opts.sysroot = Some(os_value(&mut p)?.into()),
            Long("map") => {
                let v = value(&mut p)?;
                let (pre, dir) = v.split_once('=').ok_or("--map wants PREFIX=DIR")?;
                a.opts.maps.push((pre.to_string(), dir.into()));
            }
            Long("debug-dir") => a.opts.debug_dirs.push(os_value(&mut p)?.into()),
            Long("perf-map") => a.opts.perf_maps.push(os_value(&mut p)?.into()),
            Long("no-inline") => a.opts.no_inline = true,
            Long("pid") => a
                .filter
                .pids
                .push(value(&mut p)?.parse().map_err(|_| "--pid wants a number")?),
            Long("comm") => a.filter.comms.push(value(&mut p)?),
            Long("event") => a.filter.events.push(value(&mut p)?),
            Long("bench") => a.bench = Some(Vec::new()),
            Short('h') | Long("help") => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) if a.bench.is_some() => {
                let n = utf8(v)?.parse().map_err(|_| "--bench wants numbers")?;
                if let Some(b) = a.bench.as_mut() {
                    b.push(n);
                }
            }
            Value(v) if a.trace.is_none() => a.trace = Some(v.into()),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    if a.bench.is_none() && a.trace.is_none() {
        return Err("no trace given".into());
    }
    Ok(a)
}

fn write_out(dest: &str, data: &[u8]) -> Result<()> {
    if dest == "-" {
        use std::io::Write;
        std::io::stdout().write_all(data)?;
        return Ok(());
    }
    std::fs::write(dest, data).map_err(|e| Error::new(format!("{dest}: {e}")))
}

fn run(a: Args) -> Result<bool> {
    if let Some(b) = &a.bench {
        let get = |i: usize, d: usize| b.get(i).copied().unwrap_or(d);
        ustack::bench::run(get(0, 100_000), get(1, 32), get(2, 4096))?;
        return Ok(true);
    }
    let path = a.trace.clone().unwrap_or_default();
    let bytes = std::fs::read(&path).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    let loaded = ustack::load(&bytes).map_err(|e| e.context(&path.display().to_string()))?;
    let (samples, st) = join::join(&loaded.events);
    let mut sym = Symbolizer::new(a.opts);
    let p = stacks::profile(&samples, &mut sym, &a.filter, a.task);
    let name = path.display().to_string();
    let mut outputs = a.outputs;
    if outputs.is_empty() {
        outputs.push(("report".into(), "-".into()));
    }
    for (kind, dest) in &outputs {
        let data = match kind.as_str() {
            "report" => output::report(&p, a.top).into_bytes(),
            "folded" => output::folded(&p, a.lines).into_bytes(),
            "svg" => output::svg(&p, &format!("ustack: {name}"), a.lines).into_bytes(),
            "speedscope" => output::speedscope(&p, &name).into_bytes(),
            _ => output::pprof(&p),
        };
        write_out(dest, &data)?;
    }
    let mut clean = loaded.damage.is_empty();
    if !a.quiet {
        eprintln!(
            "ustack: {} ({}): {} events, {} cookies, {} stacks, {} samples kept, {} frames",
            name, loaded.kind, st.events, st.cookies, st.stacks, p.samples, st.frames
        );
        eprintln!(
            "ustack: unresolved: {} frames of {} file cookies; {} cookies without a stack, {} without a trigger, {} stacks without a cookie, {} incomplete; {} bad records, {} events lost",
            st.unresolved_frames,
            st.unresolved_cookies,
            st.cookies_without_stack,
            st.cookies_without_trigger,
            st.stacks_without_cookie,
            st.incomplete_stacks,
            loaded.bad_records,
            loaded.lost
        );
        if let Some(w) = ustack::clock_warning(loaded.clock.as_deref()) {
            eprintln!("ustack: warning: {w}");
        }
        for (f, status) in sym.files() {
            match status {
                FileStatus::Ok { .. } => {}
                FileStatus::Missing => {
                    eprintln!("ustack: {}: not found (see --sysroot, --map)", f.path)
                }
                FileStatus::NotElf { host } => {
                    eprintln!("ustack: {}: {} is not an ELF file", f.path, host.display())
                }
                FileStatus::BuildIdMismatch { host, found } => {
                    eprintln!(
                    "ustack: {}: build-id mismatch: the trace has {}, {} has {}; not symbolized",
                    f.path,
                    ustack::symbolize::hex(&f.build_id),
                    host.display(),
                    found.as_deref().map(ustack::symbolize::hex).unwrap_or_else(|| "none".into())
                )
                }
            }
        }
    }
    for d in &loaded.damage {
        eprintln!("ustack: {name}: damaged: {d}; the events before it were read");
        clean = false;
    }
    Ok(clean)
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ustack: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ustack: {e}");
            ExitCode::from(1)
        }
    }
}
