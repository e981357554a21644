// SPDX-License-Identifier: GPL-2.0

//! `ustack`: the host half of user_unwind. It reads a recorded trace (trace.dat or the
//! text of the `trace` file), joins each triggering event to its cookie, its stack
//! records and their files, symbolizes the frames and writes folded stacks, flame graphs,
//! a top-stacks report, speedscope JSON and pprof profiles.
//!
//! Nothing here trusts its input: a damaged trace gives an error naming the byte offset,
//! with what was read before it; a cookie the trace does not explain stays unresolved and
//! is counted.

pub mod bench;
pub mod bytes;
pub mod debuginfod;
pub mod elf;
pub mod error;
pub mod events;
pub mod format;
pub mod join;
pub mod kallsyms;
pub mod live;
pub mod output;
pub mod record;
pub mod ringbuf;
pub mod stacks;
pub mod symbolize;
pub mod top;
pub mod tracedat;
pub mod tracefs;

use error::Result;
use events::Event;

/// Trace clocks whose timestamps order events across CPUs (Documentation/trace/ftrace.rst):
/// `local` (the default) and `perf` are per-CPU, `x86-tsc` the raw TSC, `uptime` jiffies.
pub const COHERENT_CLOCKS: [&str; 6] = ["global", "counter", "mono", "mono_raw", "boot", "tai"];

/// The clock a `trace_clock` file's text selects: the one in brackets of
/// "local [global] counter ...", or a lone name.
pub fn selected_clock(s: &str) -> Option<String> {
    let s = s.trim();
    match (s.find('['), s.find(']')) {
        (Some(a), Some(b)) if a < b => Some(s[a + 1..b].to_string()),
        _ if !s.is_empty() && !s.contains(' ') => Some(s.to_string()),
        _ => None,
    }
}

/// A warning when `clock` does not order events across CPUs.
pub fn clock_warning(clock: Option<&str>) -> Option<String> {
    match clock {
        Some(c) if COHERENT_CLOCKS.contains(&c) => None,
        Some(c) => Some(format!(
            "trace clock '{c}' does not order events across CPUs: a file_cache on one CPU may \
             sort after a stack on another that needs it (record with trace-cmd record -C global)"
        )),
        None => Some(
            "trace clock unknown (no '# trace_clock:' line): events of different CPUs may be \
             out of order"
                .to_string(),
        ),
    }
}

/// A trace read from a file, whatever its kind.
pub struct Loaded {
    pub events: Vec<Event>,
    pub clock: Option<String>,
    /// Events the ring buffer lost, as the trace says.
    pub lost: u64,
    /// Records of the module's events that did not fit their format.
    pub bad_records: usize,
    /// Damage found part way; the events before it are in `events`.
    pub damage: Vec<error::Error>,
    pub kind: &'static str,
}

/// The events of a trace, read as they are asked for.
pub enum Source<'a> {
    Dat(Box<events::DatStream<'a>>),
    Text(events::TextStream<'a>),
}

/// What a trace said besides its events, once they are read.
pub struct Summary {
    pub clock: Option<String>,
    pub lost: u64,
    pub bad_records: usize,
    pub damage: Vec<error::Error>,
    pub kind: &'static str,
    /// Set when the input turned out not to be a trace at all.
    pub not_a_trace: Option<String>,
    /// The instances of the file that were not read.
    pub other_instances: Vec<String>,
    /// The file ends inside its event data: it was cut short.
    pub cut: bool,
    /// The times are the time of day (`trace-cmd record --date`).
    pub wall_clock: bool,
}

impl Iterator for Source<'_> {
    type Item = Event;
    fn next(&mut self) -> Option<Event> {
        match self {
            Source::Dat(d) => d.next(),
            Source::Text(t) => t.next(),
        }
    }
}

impl<'a> Source<'a> {
    /// Bytes of the input read so far.
    pub fn bytes_read(&self) -> u64 {
        match self {
            Source::Dat(d) => d.bytes_read(),
            Source::Text(t) => t.bytes_read(),
        }
    }

    /// The traced kernel's symbols the trace holds (trace.dat's kallsyms; none in text).
    pub fn kallsyms(&self) -> kallsyms::Kallsyms {
        match self {
            Source::Dat(d) => d.t.kallsyms.clone(),
            Source::Text(_) => kallsyms::Kallsyms::default(),
        }
    }

    /// Does the trace record the tasks' renames (trace.dat's formats hold task_rename or
    /// sched_process_exec)? The text does not say: false.
    pub fn records_renames(&self) -> bool {
        match self {
            Source::Dat(d) => {
                d.t.format_named("task", "task_rename").is_some()
                    || d.t.format_named("sched", "sched_process_exec").is_some()
            }
            Source::Text(_) => false,
        }
    }

    /// Ranges of the file read are passed to `f`, to drop them from memory.
    pub fn on_release(&mut self, f: impl FnMut(u64, u64) + 'a) {
        if let Source::Dat(d) = self {
            d.on_release(f);
        }
    }

    pub fn summary(&self) -> Summary {
        match self {
            Source::Dat(d) => Summary {
                clock: d.t.clock.clone(),
                lost: d.lost,
                bad_records: d.bad,
                damage: d.damage.clone(),
                kind: if d.t.version == 6 {
                    "trace.dat v6"
                } else {
                    "trace.dat v7"
                },
                not_a_trace: None,
                other_instances: d
                    .t
                    .instances
                    .iter()
                    .filter(|i| Some(*i) != d.t.instance.as_ref())
                    .cloned()
                    .collect(),
                cut: d.t.cut,
                wall_clock: d.t.date,
            },
            Source::Text(t) => Summary {
                clock: t.info.clock.clone(),
                lost: t.info.lost,
                bad_records: 0,
                damage: Vec::new(),
                kind: "text",
                not_a_trace: (t.event_lines == 0 && !t.header).then(|| {
                    format!(
                        "not a trace: none of its {} lines is an event of the trace file's text, \
                         and it is not a trace.dat",
                        t.lines
                    )
                }),
                other_instances: Vec::new(),
                cut: false,
                wall_clock: false,
            },
        }
    }
}

/// What a file that is not a trace is, from its first bytes.
fn not_a_trace(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x7fELF") {
        return Some("an ELF file, not a trace (ustack reads trace-cmd's trace.dat or the text of the trace file)");
    }
    if bytes.starts_with(b"PERFILE2") || bytes.starts_with(b"PERFFILE") {
        return Some("a perf.data file (perf record's), not a trace: perf report reads it; ustack reads trace-cmd's trace.dat");
    }
    let head = &bytes[..bytes.len().min(4096)];
    if head.contains(&0) {
        return Some("binary data, not a trace (ustack reads trace-cmd's trace.dat or the text of the trace file)");
    }
    None
}

/// Start reading a trace.dat or the text of the `trace` file; the metadata is read and
/// checked now, the events as they are asked for.
pub fn open(bytes: &[u8]) -> Result<Source<'_>> {
    open_instance(bytes, None)
}

/// [`open`], reading instance `instance` of a trace.dat (`None`: the top one).
pub fn open_instance<'a>(bytes: &'a [u8], instance: Option<&str>) -> Result<Source<'a>> {
    if tracedat::is_trace_dat(bytes) {
        let t = tracedat::TraceDat::parse_instance(bytes, instance)?;
        return Ok(Source::Dat(Box::new(events::DatStream::new(t, bytes)?)));
    }
    if bytes.is_empty() {
        return Err(error::Error::new("empty file"));
    }
    if bytes.starts_with(b"\x17\x08\x44") || tracedat::MAGIC.starts_with(bytes) {
        return Err(error::Error::at("truncated or damaged trace.dat header", 0));
    }
    if let Some(what) = not_a_trace(bytes) {
        return Err(error::Error::new(what));
    }
    if let Some(i) = instance {
        return Err(error::Error::new(format!(
            "instance '{i}': the text of a trace file is one instance's"
        )));
    }
    Ok(Source::Text(events::TextStream::new(bytes)))
}

/// Read a trace.dat or the text of the `trace` file, all of it.
pub fn load(bytes: &[u8]) -> Result<Loaded> {
    let mut src = open(bytes)?;
    let events: Vec<Event> = src.by_ref().collect();
    let s = src.summary();
    if let Some(e) = s.not_a_trace {
        return Err(error::Error::new(e));
    }
    Ok(Loaded {
        events,
        clock: s.clock,
        lost: s.lost,
        bad_records: s.bad_records,
        damage: s.damage,
        kind: s.kind,
    })
}
