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
pub mod elf;
pub mod error;
pub mod events;
pub mod format;
pub mod join;
pub mod output;
pub mod ringbuf;
pub mod stacks;
pub mod symbolize;
pub mod tracedat;

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

/// Read a trace.dat or the text of the `trace` file.
pub fn load(bytes: &[u8]) -> Result<Loaded> {
    if tracedat::is_trace_dat(bytes) {
        let mut t = tracedat::TraceDat::parse(bytes)?;
        let (events, bad_records) = events::from_trace_dat(&mut t)?;
        return Ok(Loaded {
            events,
            clock: t.clock.clone(),
            lost: t.lost,
            bad_records,
            damage: t.damage.clone(),
            kind: if t.version == 6 {
                "trace.dat v6"
            } else {
                "trace.dat v7"
            },
        });
    }
    if bytes.is_empty() {
        return Err(error::Error::new("empty file"));
    }
    if bytes.starts_with(b"\x17\x08\x44") || tracedat::MAGIC.starts_with(bytes) {
        return Err(error::Error::at("truncated or damaged trace.dat header", 0));
    }
    let text = String::from_utf8_lossy(bytes);
    let (events, info) = events::from_text(&text);
    Ok(Loaded {
        events,
        clock: info.clock,
        lost: info.lost,
        bad_records: 0,
        damage: Vec::new(),
        kind: "text",
    })
}
