// SPDX-License-Identifier: GPL-2.0

//! The outputs, one file a format: folded stacks, a text report in the style of `perf
//! report --stdio`, an SVG flame graph, speedscope JSON, pprof's gzipped `profile.proto`
//! and perf script's text. Each is written from the stacks counted by what it shows
//! ([`Profile`](crate::stacks::Profile)); what they share (the view options, shares) is
//! here.

mod flame;
mod folded;
pub mod perf_script;
mod pprof;
mod report;
mod speedscope;
pub mod top;
mod tree;

pub use flame::{svg, svg_diff};
pub use folded::{folded, write_folded};
pub use perf_script::{perf_script_sample, PerfScript};
pub use pprof::pprof;
pub use report::report;
pub use speedscope::{speedscope, write_speedscope};

/// A key of the report's function view (`--sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Function,
    File,
    Comm,
    Pid,
}

impl SortKey {
    pub fn parse(s: &str) -> Option<SortKey> {
        Some(match s {
            "function" | "sym" | "symbol" => SortKey::Function,
            "file" | "dso" => SortKey::File,
            "comm" => SortKey::Comm,
            "pid" => SortKey::Pid,
            _ => return None,
        })
    }
    fn title(self) -> &'static str {
        match self {
            SortKey::Function => "Function",
            SortKey::File => "File",
            SortKey::Comm => "Command",
            SortKey::Pid => "Pid",
        }
    }
}

/// How the outputs are shown.
#[derive(Debug, Clone)]
pub struct View {
    /// A `comm-pid` level under the event.
    pub task: bool,
    /// Stacks in the report.
    pub top: usize,
    /// Report entries under this share of the samples are left out.
    pub percent_limit: f64,
    pub sort: Vec<SortKey>,
    /// The report's stacks outermost frame first (`-G`), else innermost first.
    pub caller_first: bool,
    /// A call tree of each section, outermost frame first (`Some(true)`, `-g caller`) or
    /// innermost first (`Some(false)`, `-g callee`).
    pub call_tree: Option<bool>,
    /// The callers and callees of this function in each section (`--focus`).
    pub focus: Option<String>,
}

impl Default for View {
    fn default() -> Self {
        View {
            task: false,
            top: 10,
            percent_limit: 0.0,
            sort: vec![SortKey::Function, SortKey::File],
            caller_first: false,
            call_tree: None,
            focus: None,
        }
    }
}

/// `n` as a percentage of `total`.
pub(crate) fn pct(n: u64, total: u64) -> f64 {
    100.0 * n as f64 / total.max(1) as f64
}
