// SPDX-License-Identifier: GPL-2.0

//! tracefs as `ustack record` and `ustack top` meet it: where it is mounted, whether the
//! module is loaded, the event formats and page layout a trace.dat would carry, and the
//! settings `ustack top` changes, each put back as it read before.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{Format, PageHeader};

/// The module's option file, relative to tracefs.
pub const OPTION: &str = "options/userstacktrace_delay";

/// tracefs under `sys` (`/sys`, or a stand-in's): `kernel/tracing`, else the older
/// `kernel/debug/tracing`.
pub fn find(sys: &Path) -> Option<PathBuf> {
    ["kernel/tracing", "kernel/debug/tracing"]
        .iter()
        .map(|d| sys.join(d))
        .find(|d| d.join("trace").exists() || d.join("options").is_dir())
}

/// The checks before tracing: the module loaded, tracefs mounted, the module's option file
/// there. Returns tracefs's path.
pub fn check_module(sys: &Path) -> Result<PathBuf> {
    if !sys.join("module/user_unwind").is_dir() {
        return Err(Error::new(format!(
            "the user_unwind module is not loaded ({} is not there): insmod user_unwind.ko",
            sys.join("module/user_unwind").display()
        )));
    }
    let t = find(sys).ok_or_else(|| {
        Error::new(format!(
            "no tracefs under {}: mount -t tracefs nodev /sys/kernel/tracing",
            sys.display()
        ))
    })?;
    if !t.join(OPTION).exists() {
        return Err(Error::new(format!(
            "{} is missing: the module is loaded but did not create its option",
            t.join(OPTION).display()
        )));
    }
    Ok(t)
}

/// A tracefs file's bytes. Some files (an event's `filter`, `header_page`) give all of
/// their text to the first read, cut to what it asked for, and nothing to the next: the
/// first read asks for 64 KiB.
pub fn read_bytes(p: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(p)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut out = Vec::new();
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// [`read_bytes`] as text.
pub fn read_text(p: &Path) -> std::io::Result<String> {
    read_bytes(p).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// An event's directory under `events/`, from `system:event`.
pub fn event_dir(name: &str) -> Option<String> {
    let (system, event) = name.split_once(':')?;
    let ok = |s: &str| !s.is_empty() && !s.contains(['/', '.']);
    (ok(system) && ok(event)).then(|| format!("events/{system}/{event}"))
}

/// What to write to tracefs file `file` (its path relative to tracefs) to set it back to
/// what reading it gave, `read`; `None` when the text cannot be written back (a buffer
/// size that differs between CPUs reads `X`).
pub fn restore_value(file: &str, read: &str) -> Option<String> {
    let name = file.rsplit('/').next().unwrap_or(file);
    let first = read.lines().next().unwrap_or("").trim();
    match name {
        // "1*": enabled in soft mode (a trigger's); the star is not written.
        "enable" => first
            .chars()
            .next()
            .filter(|c| matches!(c, '0' | '1'))
            .map(String::from),
        "filter" if first == "none" => Some("0".into()),
        "trace_clock" => crate::selected_clock(read),
        // "7 (expanded: 1408)": not yet expanded; the first event enabled expands it, so
        // the size to put back is the expanded one.
        "buffer_size_kb" => {
            let n = match first.split_once("(expanded:") {
                Some((_, e)) => e.trim_end_matches(')').trim(),
                None => first,
            };
            n.parse::<u64>().ok().map(|n| n.to_string())
        }
        _ => Some(first.to_string()),
    }
}

/// The tracefs files changed, each with what it held before: put back in the reverse
/// order of the changes by [`Settings::restore`], and when dropped (an error, a panic).
pub struct Settings {
    root: PathBuf,
    saved: Vec<(String, String)>,
}

impl Settings {
    pub fn new(root: &Path) -> Self {
        Settings {
            root: root.to_path_buf(),
            saved: Vec::new(),
        }
    }

    /// tracefs's path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The text of tracefs file `rel`.
    pub fn read(&self, rel: &str) -> Result<String> {
        let p = self.root.join(rel);
        read_text(&p).map_err(|e| Error::new(format!("{}: {e}", p.display())))
    }

    /// Write `value` to `rel`, the file as it is (no creation; truncated, as `echo >`
    /// does).
    pub fn write(&self, rel: &str, value: &str) -> Result<()> {
        let p = self.root.join(rel);
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .and_then(|mut f| f.write_all(value.as_bytes()))
            .map_err(|e| Error::new(format!("writing '{value}' to {}: {e}", p.display())))
    }

    /// Set `rel` to `value` unless it reads so already; the first change of a file saves
    /// what it held, to put back.
    pub fn set(&mut self, rel: &str, value: &str) -> Result<()> {
        let now = self.read(rel)?;
        if restore_value(rel, &now).as_deref() == Some(value) {
            return Ok(());
        }
        if !self.saved.iter().any(|(f, _)| f == rel) {
            let old = restore_value(rel, &now).ok_or_else(|| {
                Error::new(format!(
                    "{}: '{}' cannot be put back as it reads: not changed",
                    self.root.join(rel).display(),
                    now.trim()
                ))
            })?;
            self.saved.push((rel.to_string(), old));
        }
        self.write(rel, value)
    }

    /// Save what `rel` holds now, to put back, without changing it: a file that something
    /// else changes (the module's option switches its events).
    pub fn keep(&mut self, rel: &str) -> Result<()> {
        if self.saved.iter().any(|(f, _)| f == rel) {
            return Ok(());
        }
        let now = self.read(rel)?;
        if let Some(old) = restore_value(rel, &now) {
            self.saved.push((rel.to_string(), old));
        }
        Ok(())
    }

    /// The files changed so far, with what they held.
    pub fn saved(&self) -> &[(String, String)] {
        &self.saved
    }

    /// Put every file back, the last changed first; each failure is returned, the others
    /// are put back all the same.
    pub fn restore(&mut self) -> Vec<Error> {
        let mut errors = Vec::new();
        while let Some((rel, old)) = self.saved.pop() {
            if let Err(e) = self.write(&rel, &old) {
                errors.push(e);
            }
        }
        errors
    }
}

impl Drop for Settings {
    fn drop(&mut self) {
        for e in self.restore() {
            eprintln!("ustack: {e}");
        }
    }
}

/// What a trace.dat would carry of tracefs for reading pages: the page layout and size
/// (`events/header_page`), and the formats of the events named (`system:event`), of the
/// module's own, of those the tool reads (`sched_switch`, `task_newtask`, `kernel_stack`)
/// and of those enabled now (`set_event`), so that every event in the buffer is known.
pub struct Layout {
    pub header: PageHeader,
    pub page_size: usize,
    pub formats: HashMap<u16, Format>,
}

/// Read [`Layout`] from tracefs `root`.
pub fn layout(root: &Path, events: &[String]) -> Result<Layout> {
    let read = |rel: &str| {
        let p = root.join(rel);
        read_bytes(&p).map_err(|e| Error::new(format!("{}: {e}", p.display())))
    };
    let hp = read("events/header_page")?;
    let header = PageHeader::parse(&hp).map_err(|e| e.context("events/header_page"))?;
    let page_size = PageHeader::page_size(&hp)
        .filter(|n| (64..=1 << 24).contains(n))
        .ok_or_else(|| Error::new("events/header_page: no usable data field size"))?;
    let mut names: Vec<String> = events.to_vec();
    for e in [
        "sched:sched_switch",
        "task:task_newtask",
        "ftrace:kernel_stack",
    ] {
        names.push(e.to_string());
    }
    if let Ok(d) = std::fs::read_dir(root.join("events/user_unwind")) {
        for e in d.flatten() {
            if e.path().join("format").is_file() {
                names.push(format!("user_unwind:{}", e.file_name().to_string_lossy()));
            }
        }
    }
    if let Ok(s) = read_text(&root.join("set_event")) {
        names.extend(s.lines().map(|l| l.trim().to_string()));
    }
    names.sort();
    names.dedup();
    let mut formats = HashMap::new();
    for n in &names {
        let Some(dir) = event_dir(n) else { continue };
        let Ok(text) = read_bytes(&root.join(&dir).join("format")) else {
            continue;
        };
        let system = n.split(':').next().unwrap_or_default();
        let f = Format::parse(system, &text).map_err(|e| e.context(&format!("{dir}/format")))?;
        formats.insert(f.id, f);
    }
    Ok(Layout {
        header,
        page_size,
        formats,
    })
}

/// The trace clock's time now, in nanoseconds, from a CPU's `stats` (`now ts:` in seconds
/// with microseconds, for the clocks counted in nanoseconds).
pub fn now_ts(stats: &str) -> Option<u64> {
    let v = stats
        .lines()
        .find_map(|l| l.strip_prefix("now ts:"))?
        .trim();
    let (s, us) = v.split_once('.')?;
    if us.len() != 6 {
        return None;
    }
    let s: u64 = s.trim().parse().ok()?;
    let us: u64 = us.parse().ok()?;
    s.checked_mul(1_000_000_000)?.checked_add(us * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_put_back_as_they_read() {
        assert_eq!(restore_value("events/a/b/enable", "1\n"), Some("1".into()));
        assert_eq!(restore_value("events/a/b/enable", "0*\n"), Some("0".into()));
        assert_eq!(restore_value("events/a/b/enable", "X\n"), None);
        assert_eq!(
            restore_value("events/a/b/filter", "none\n"),
            Some("0".into())
        );
        assert_eq!(
            restore_value("events/a/b/filter", "id == 110\n"),
            Some("id == 110".into())
        );
        assert_eq!(
            restore_value("trace_clock", "[local] global counter uptime perf\n"),
            Some("local".into())
        );
        assert_eq!(
            restore_value("buffer_size_kb", "1408\n"),
            Some("1408".into())
        );
        assert_eq!(
            restore_value("buffer_size_kb", "7 (expanded: 1408)\n"),
            Some("1408".into())
        );
        assert_eq!(restore_value("buffer_size_kb", "X\n"), None);
        assert_eq!(restore_value(OPTION, "0\n"), Some("0".into()));
        assert_eq!(restore_value("tracing_on", "1\n"), Some("1".into()));
    }

    #[test]
    fn settings_are_put_back_last_first() {
        let d = std::env::temp_dir().join(format!("ustack-tracefs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("options")).unwrap();
        std::fs::write(d.join("trace_clock"), "[local] global\n").unwrap();
        std::fs::write(d.join("tracing_on"), "1\n").unwrap();
        std::fs::write(d.join(OPTION), "0\n").unwrap();
        {
            let mut s = Settings::new(&d);
            s.set("tracing_on", "0").unwrap();
            s.set("trace_clock", "global").unwrap();
            s.set(OPTION, "0").unwrap();
            s.keep(OPTION).unwrap();
            s.set("tracing_on", "1").unwrap();
            assert_eq!(
                s.saved(),
                &[
                    ("tracing_on".to_string(), "1".to_string()),
                    ("trace_clock".to_string(), "local".to_string()),
                    (OPTION.to_string(), "0".to_string())
                ]
            );
            assert_eq!(s.read("trace_clock").unwrap(), "global");
            // A file that is not there is an error, and nothing is saved for it.
            assert!(s.set("buffer_size_kb", "4096").is_err());
            assert!(!d.join("buffer_size_kb").exists());
        }
        assert_eq!(
            std::fs::read_to_string(d.join("trace_clock")).unwrap(),
            "local"
        );
        assert_eq!(std::fs::read_to_string(d.join("tracing_on")).unwrap(), "1");
        // Kept, not changed: written back all the same.
        assert_eq!(std::fs::read_to_string(d.join(OPTION)).unwrap(), "0");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_clock_now_from_stats() {
        let stats = "entries: 0\noverrun: 0\nbytes: 0\noldest event ts:  5.000100\nnow ts:    12.345678\ndropped events: 0\n";
        assert_eq!(now_ts(stats), Some(12_345_678_000));
        assert_eq!(now_ts("now ts: 123456789\n"), None);
        assert_eq!(now_ts(""), None);
    }

    #[test]
    fn event_directories() {
        assert_eq!(
            event_dir("raw_syscalls:sys_enter").as_deref(),
            Some("events/raw_syscalls/sys_enter")
        );
        assert_eq!(event_dir("sys_enter"), None);
        assert_eq!(event_dir("../x:y"), None);
        assert_eq!(event_dir("a:"), None);
    }
}
