// SPDX-License-Identifier: GPL-2.0

//! The reader of `trace.dat`, the file `trace-cmd record` writes: versions 6 and 7
//! (trace-cmd's `trace-cmd.dat.v6.5.txt` and `.v7.5.txt`), v7's sections compressed with
//! zstd or not. Event ids and field offsets come from the file's own format sections.

use std::collections::HashMap;
use std::io::Read;

use crate::bytes::{Cursor, Endian};
use crate::error::{Error, Result};
use crate::format::{Format, PageHeader};

pub const MAGIC: &[u8] = b"\x17\x08\x44tracing";

// Option ids of the v7 format (and the few v6 shares).
const OPT_DONE: u16 = 0;
const OPT_DATE: u16 = 1;
const OPT_CPUSTAT: u16 = 2;
const OPT_BUFFER: u16 = 3;
const OPT_TRACECLOCK: u16 = 4;
const OPT_OFFSET: u16 = 7;
const OPT_HEADER_INFO: u16 = 16;
const OPT_FTRACE_EVENTS: u16 = 17;
const OPT_EVENT_FORMATS: u16 = 18;
const OPT_KALLSYMS: u16 = 19;
const OPT_CMDLINES: u16 = 21;

const SEC_FL_COMPRESS: u16 = 1;

/// Where one CPU's sub-buffers are in the file: as they are, or as zstd chunks
/// `(<zsize> <size> <data>)*` from `off` to `end`, `count` of them. Nothing is read or
/// decompressed until the events are walked ([`CpuReader`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuSource {
    Plain { off: u64, len: u64 },
    Chunks { off: u64, end: u64, count: u32 },
}

/// The data of one CPU of the top instance.
#[derive(Debug, Clone)]
pub struct CpuData {
    pub cpu: u32,
    pub src: CpuSource,
}

/// An integer as C's `strtoll(s, NULL, 0)` reads a whole string: a sign, then `0x`
/// hexadecimal, `0` octal or decimal digits.
fn parse_c_int(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        i64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse().ok()?
    };
    Some(if neg { v.checked_neg()? } else { v })
}

/// A trace.dat read into memory.
#[derive(Debug, Clone)]
pub struct TraceDat {
    pub version: u32,
    pub endian: Endian,
    pub page_size: usize,
    pub compression: Option<String>,
    pub clock: Option<String>,
    /// Nanoseconds added to every timestamp, as trace-cmd report adds them: the DATE
    /// option's (`trace-cmd record --date`: microseconds from the trace clock to the time
    /// of day) and the OFFSET option's (`--ts-offset`).
    pub ts_offset: i64,
    /// The DATE option was there: the timestamps (with `ts_offset`) are the time of day.
    pub date: bool,
    pub header: PageHeader,
    pub formats: HashMap<u16, Format>,
    /// The format files as stored (system, text), `header_page` first, for writers.
    pub format_texts: Vec<(String, Vec<u8>)>,
    pub comms: HashMap<i32, String>,
    pub cpus: Vec<CpuData>,
    /// Events the ring buffer lost, as the pages say (a page with an unknown count adds 1)
    /// and the CPUSTAT options' `overrun:` lines.
    pub lost: u64,
    /// What went wrong part way through the event data: the events before it were read.
    pub damage: Vec<Error>,
    /// The instances (`trace-cmd record -B`) in the file, by name, the top one ("") left
    /// out, and the one read (`None`: the top one).
    pub instances: Vec<String>,
    pub instance: Option<String>,
    /// The traced kernel's `/proc/kallsyms`, for `kernel_stack` events.
    pub kallsyms: crate::kallsyms::Kallsyms,
    /// The file ends inside its event data: it was cut short (a copy or a recording that
    /// did not finish).
    pub cut: bool,
}

/// Does `bytes` start like a trace.dat?
pub fn is_trace_dat(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// How much a section or chunk may expand: zstd itself can reach about 32000 times (runs
/// of one byte), trace data does not come near 100. A declared size beyond this is damage.
pub const MAX_RATIO: usize = 1024;

/// The window a zstd frame declares (RFC 8878, 3.1.1.1), which a decoder reserves up front.
fn zstd_window(data: &[u8]) -> Option<u64> {
    if data.get(..4)? != [0x28, 0xb5, 0x2f, 0xfd] {
        return None;
    }
    let fhd = *data.get(4)?;
    let single = fhd & 0x20 != 0;
    if !single {
        let wd = *data.get(5)?;
        let log = 10 + u32::from(wd >> 3);
        let base = 1u64 << log;
        return Some(base + (base / 8) * u64::from(wd & 7));
    }
    let dict = [0, 1, 2, 4][usize::from(fhd & 3)];
    let at = 5 + dict;
    let fcs = match fhd >> 6 {
        0 => u64::from(*data.get(at)?),
        1 => u64::from(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?)) + 256,
        2 => u64::from(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?)),
        _ => u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?),
    };
    Some(fcs)
}

/// `size` bytes from zstd data at file offset `at`. What is allocated and decompressed is
/// bounded by the declared size, and the declared size by the compressed one (and so by
/// the file's own size): a damaged size word or a bomb is an error, not an allocation.
pub fn unzstd(data: &[u8], size: usize, at: u64) -> Result<Vec<u8>> {
    let bound = data.len().saturating_mul(MAX_RATIO).saturating_add(1 << 16);
    if size > bound {
        return Err(Error::at(
            format!(
                "zstd: {size} bytes declared from {} compressed, more than {MAX_RATIO} times",
                data.len()
            ),
            at,
        ));
    }
    let window = zstd_window(data).ok_or_else(|| Error::at("zstd: no frame header", at))?;
    if window > (size as u64).max(1 << 23) {
        return Err(Error::at(
            format!("zstd: a window of {window} bytes for {size} bytes of data"),
            at,
        ));
    }
    let mut out = Vec::with_capacity(size.min(1 << 22));
    let dec = ruzstd::decoding::StreamingDecoder::new(data)
        .map_err(|e| Error::at(format!("zstd: {e}"), at))?;
    dec.take(size as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::at(format!("zstd: {e}"), at))?;
    if out.len() > size {
        return Err(Error::at(
            format!("zstd: more than the {size} bytes the header said"),
            at,
        ));
    }
    if out.len() < size {
        return Err(Error::at(
            format!("zstd: {} bytes, the header said {size}", out.len()),
            at,
        ));
    }
    Ok(out)
}

impl TraceDat {
    /// A file of `version`, byte order and page size, with nothing read yet: the header
    /// page layout trace-cmd writes, no options, no formats, no CPUs.
    fn empty(version: u32, endian: Endian, page_size: usize, instance: Option<&str>) -> Self {
        TraceDat {
            version,
            endian,
            page_size,
            compression: None,
            clock: None,
            ts_offset: 0,
            date: false,
            header: PageHeader {
                commit_offset: 8,
                commit_size: 8,
                data_offset: 16,
            },
            formats: HashMap::new(),
            format_texts: Vec::new(),
            comms: HashMap::new(),
            cpus: Vec::new(),
            lost: 0,
            damage: Vec::new(),
            instances: Vec::new(),
            instance: instance.map(str::to_string),
            kallsyms: Default::default(),
            cut: false,
        }
    }

    /// Read a whole trace.dat. Damage in the metadata is an error; damage in one CPU's
    /// event data keeps that CPU's events up to it and is listed in `damage`.
    pub fn parse(bytes: &[u8]) -> Result<TraceDat> {
        Self::parse_instance(bytes, None)
    }

    /// Read a trace.dat, the events of instance `instance` (`None`: the top one).
    pub fn parse_instance(bytes: &[u8], instance: Option<&str>) -> Result<TraceDat> {
        let mut c = Cursor::new(bytes, 0, Endian::Little);
        if c.take(MAGIC.len(), "magic")? != MAGIC {
            return Err(Error::at("not a trace.dat (bad magic)", 0));
        }
        let version = std::str::from_utf8(c.cstr("version")?)
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or_else(|| Error::at("unreadable file version", c.offset()))?;
        c.endian = match c.u8("endianness")? {
            0 => Endian::Little,
            1 => Endian::Big,
            e => return Err(Error::at(format!("endianness byte {e}"), c.offset() - 1)),
        };
        let long_size = c.u8("long size")?;
        if long_size != 4 && long_size != 8 {
            return Err(Error::at(format!("long size {long_size}"), c.offset() - 1));
        }
        let page_size = c.u32("page size")? as usize;
        if !(64..=(1 << 24)).contains(&page_size) {
            return Err(Error::at(format!("page size {page_size}"), c.offset() - 4));
        }
        let mut t = TraceDat::empty(version, c.endian, page_size, instance);
        match version {
            6 => t.parse_v6(bytes, c)?,
            7 => t.parse_v7(bytes, c)?,
            v => {
                return Err(Error::new(format!(
                    "trace.dat version {v} is not supported (6 and 7 are)"
                )))
            }
        }
        Ok(t)
    }

    fn header_info(&mut self, c: &mut Cursor) -> Result<()> {
        if c.take(12, "header_page tag")? != b"header_page\0" {
            return Err(Error::at("no header_page", c.offset() - 12));
        }
        let n = c.u64("header_page size")?;
        let n = c.len(n, "header_page")?;
        let text = c.take(n, "header_page")?;
        self.header = PageHeader::parse(text)?;
        self.format_texts
            .push(("header_page".into(), text.to_vec()));
        if c.take(13, "header_event tag")? != b"header_event\0" {
            return Err(Error::at("no header_event", c.offset() - 13));
        }
        let n = c.u64("header_event size")?;
        let n = c.len(n, "header_event")?;
        c.take(n, "header_event")?;
        Ok(())
    }

    fn ftrace_formats(&mut self, c: &mut Cursor) -> Result<()> {
        let count = c.u32("ftrace format count")?;
        for _ in 0..count {
            let n = c.u64("ftrace format size")?;
            let n = c.len(n, "ftrace format")?;
            let f = Format::parse("ftrace", c.take(n, "ftrace format")?)?;
            self.formats.insert(f.id, f);
        }
        Ok(())
    }

    fn event_formats(&mut self, c: &mut Cursor) -> Result<()> {
        let systems = c.u32("event system count")?;
        for _ in 0..systems {
            let system = String::from_utf8_lossy(c.cstr("event system name")?).into_owned();
            let count = c.u32("event count")?;
            for _ in 0..count {
                let n = c.u64("event format size")?;
                let n = c.len(n, "event format")?;
                let text = c.take(n, "event format")?;
                let f = Format::parse(&system, text)
                    .map_err(|e| e.context(&format!("events of {system}")))?;
                self.format_texts.push((system.clone(), text.to_vec()));
                self.formats.insert(f.id, f);
            }
        }
        Ok(())
    }

    fn cmdlines(&mut self, text: &[u8]) {
        for line in String::from_utf8_lossy(text).lines() {
            if let Some((pid, comm)) = line.trim().split_once(' ') {
                if let Ok(pid) = pid.parse() {
                    self.comms.insert(pid, comm.to_string());
                }
            }
        }
    }

    /// Version 6: everything in a fixed order, then options and the flyrecord offsets.
    fn parse_v6(&mut self, bytes: &[u8], mut c: Cursor) -> Result<()> {
        self.header_info(&mut c)?;
        self.ftrace_formats(&mut c)?;
        self.event_formats(&mut c)?;
        let n = c.u32("kallsyms size")?;
        let n = c.len(n.into(), "kallsyms")?;
        self.kallsyms = crate::kallsyms::Kallsyms::parse(c.take(n, "kallsyms")?);
        let n = c.u32("printk formats size")?;
        let n = c.len(n.into(), "printk formats")?;
        c.take(n, "printk formats")?;
        let n = c.u64("cmdlines size")?;
        let n = c.len(n, "cmdlines")?;
        let text = c.take(n, "cmdlines")?;
        self.cmdlines(text);
        let cpus = c.u32("cpu count")?;
        let mut tag = c.take(10, "section tag")?;
        if tag == b"options  \0" {
            loop {
                let id = c.u16("option id")?;
                if id == OPT_DONE {
                    break;
                }
                let n = c.u32("option size")?;
                let n = c.len(n.into(), "option")?;
                let data = c.take(n, "option")?;
                self.option_v6(id, data);
            }
            tag = c.take(10, "section tag")?;
        }
        if let Some(i) = &self.instance {
            return Err(Error::new(format!(
                "instance '{i}': the instances of a version 6 file are not read (they are: {})",
                self.instances.join(", ")
            )));
        }
        if tag == b"latency  \0" {
            return Err(Error::at(
                "a latency trace holds no events to read",
                c.offset(),
            ));
        }
        if tag != b"flyrecord\0" {
            return Err(Error::at("no flyrecord section", c.offset() - 10));
        }
        for cpu in 0..cpus {
            let offset = c.u64("cpu data offset")?;
            let size = c.u64("cpu data size")?;
            match self.plain(bytes, cpu, offset, size) {
                Ok(src) => self.cpus.push(CpuData { cpu, src }),
                Err(e) => self.damage.push(e.context(&format!("CPU {cpu}"))),
            }
        }
        Ok(())
    }

    /// One CPU's pages as they are, at `off`, `size` bytes. A file cut short inside them
    /// keeps what it holds (its last page partial, read up to the cut) and says so in
    /// `damage` and `cut`.
    fn plain(&mut self, bytes: &[u8], cpu: u32, off: u64, size: u64) -> Result<CpuSource> {
        let have = bytes.len() as u64;
        if off.checked_add(size).is_some_and(|end| end <= have) {
            return Ok(CpuSource::Plain { off, len: size });
        }
        self.cut = true;
        if off >= have {
            return Err(Error::at(
                format!(
                    "the file is cut short: its {size} bytes of event data start beyond its \
                     end ({have} bytes)"
                ),
                off,
            ));
        }
        let len = have - off;
        self.damage.push(
            Error::at(
                format!(
                "the file is cut short: {len} of its {size} bytes of event data are in the file"
            ),
                off,
            )
            .context(&format!("CPU {cpu}")),
        );
        Ok(CpuSource::Plain { off, len })
    }

    fn option_v6(&mut self, id: u16, data: &[u8]) {
        match id {
            // <offset> <name>: another instance's flyrecord.
            OPT_BUFFER => self
                .instances
                .push(String::from_utf8_lossy(cstr(data.get(8..).unwrap_or(&[]))).into_owned()),
            OPT_TRACECLOCK => self.set_clock(data),
            OPT_CPUSTAT => self.cpustat(data),
            OPT_DATE | OPT_OFFSET => self.add_offset(id, data),
            _ => {}
        }
    }

    /// The DATE option (microseconds) or OFFSET option (nanoseconds): a number as C's
    /// `strtoll(s, NULL, 0)` reads it, `0x` hexadecimal, `0` octal or decimal, signed. One
    /// that does not parse is left out, as trace-cmd reads it as 0.
    fn add_offset(&mut self, id: u16, data: &[u8]) {
        let text = String::from_utf8_lossy(cstr(data));
        let Some(v) = parse_c_int(text.trim()) else {
            return;
        };
        let v = if id == OPT_DATE {
            self.date = true;
            v.saturating_mul(1000)
        } else {
            v
        };
        self.ts_offset = self.ts_offset.saturating_add(v);
    }

    fn set_clock(&mut self, data: &[u8]) {
        if let Some(clock) = crate::selected_clock(&String::from_utf8_lossy(cstr(data))) {
            self.clock = Some(clock);
        }
    }

    fn cpustat(&mut self, data: &[u8]) {
        for line in String::from_utf8_lossy(cstr(data)).lines() {
            if let Some(v) = line.strip_prefix("overrun:") {
                self.lost += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }

    /// A v7 section at `offset`: its id and its content, uncompressed.
    fn section(&self, bytes: &[u8], offset: u64) -> Result<(u16, Vec<u8>)> {
        let mut c = cursor_at(bytes, offset, self.endian, "a section")?;
        let id = c.u16("section id")?;
        let flags = c.u16("section flags")?;
        c.u32("section description")?;
        let size = c.u64("section size")?;
        let size = c.len(size, "section")?;
        let mut c = Cursor::new(c.take(size, "section")?, c.offset(), self.endian);
        if flags & SEC_FL_COMPRESS == 0 {
            return Ok((id, c.take(c.remaining(), "section")?.to_vec()));
        }
        let at = c.offset();
        let zsize = c.u32("compressed size")?;
        let usize_ = c.u32("uncompressed size")?;
        let z = c.take(c.len(zsize.into(), "compressed data")?, "compressed data")?;
        Ok((id, self.decompress(z, usize_ as usize, at)?))
    }

    fn decompress(&self, z: &[u8], size: usize, at: u64) -> Result<Vec<u8>> {
        match self.compression.as_deref() {
            Some("zstd") => unzstd(z, size, at),
            Some(other) => Err(Error::at(
                format!("compression {other} is not supported"),
                at,
            )),
            None => Err(Error::at(
                "a compressed section in an uncompressed file",
                at,
            )),
        }
    }

    /// Version 7: a chain of option sections pointing at the other sections.
    fn parse_v7(&mut self, bytes: &[u8], mut c: Cursor) -> Result<()> {
        let name = String::from_utf8_lossy(c.cstr("compression name")?).into_owned();
        c.cstr("compression version")?;
        if name != "none" {
            self.compression = Some(name);
        }
        let mut next = c.u64("options offset")?;
        let mut buffers = Vec::new();
        let mut seen = Vec::new();
        while next != 0 {
            if seen.contains(&next) {
                return Err(Error::at("the options sections loop", next));
            }
            seen.push(next);
            let (id, data) = self.section(bytes, next)?;
            if id != 0 {
                return Err(Error::at(
                    format!("section {id} where options were expected"),
                    next,
                ));
            }
            next = 0;
            let mut o = Cursor::new(&data, 0, self.endian);
            while !o.is_empty() {
                let id = o.u16("option id")?;
                let n = o.u32("option size")?;
                let n = o.len(n.into(), "option")?;
                let d = o.take(n, "option")?;
                let mut oc = Cursor::new(d, 0, self.endian);
                match id {
                    OPT_DONE => {
                        next = oc.u64("next options offset")?;
                        break;
                    }
                    OPT_BUFFER => buffers.push(d.to_vec()),
                    OPT_TRACECLOCK => self.set_clock(d),
                    OPT_CPUSTAT => self.cpustat(d),
                    OPT_DATE | OPT_OFFSET => self.add_offset(id, d),
                    OPT_HEADER_INFO | OPT_FTRACE_EVENTS | OPT_EVENT_FORMATS | OPT_CMDLINES
                    | OPT_KALLSYMS => {
                        let at = oc.u64("section offset")?;
                        let (_, s) = self.section(bytes, at)?;
                        let mut sc = Cursor::new(&s, 0, self.endian);
                        match id {
                            OPT_HEADER_INFO => self.header_info(&mut sc)?,
                            OPT_FTRACE_EVENTS => self.ftrace_formats(&mut sc)?,
                            OPT_EVENT_FORMATS => self.event_formats(&mut sc)?,
                            OPT_KALLSYMS => {
                                let n = sc.u32("kallsyms size")?;
                                let n = sc.len(n.into(), "kallsyms")?;
                                self.kallsyms =
                                    crate::kallsyms::Kallsyms::parse(sc.take(n, "kallsyms")?);
                            }
                            _ => {
                                let n = sc.u64("cmdlines size")?;
                                let n = sc.len(n, "cmdlines")?;
                                let text = sc.take(n, "cmdlines")?;
                                self.cmdlines(text);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        // The top instance is the buffer with the empty name; another is read if asked
        // for, and the others are named.
        let want = self.instance.clone().unwrap_or_default();
        let mut found = false;
        for b in buffers {
            let mut bc = Cursor::new(&b, 0, self.endian);
            let offset = bc.u64("buffer offset")?;
            let name = bc.cstr("buffer name")?;
            let clock = bc.cstr("buffer clock")?;
            if !name.is_empty() {
                self.instances
                    .push(String::from_utf8_lossy(name).into_owned());
            }
            if name != want.as_bytes() {
                continue;
            }
            found = true;
            if !clock.is_empty() {
                self.clock = Some(String::from_utf8_lossy(clock).into_owned());
            }
            let page_size = bc.u32("buffer page size")? as usize;
            if (64..=(1 << 24)).contains(&page_size) {
                self.page_size = page_size;
            }
            let compressed = self.flyrecord_compressed(bytes, offset)?;
            let cpus = bc.u32("buffer cpu count")?;
            for _ in 0..cpus {
                let cpu = bc.u32("cpu id")?;
                let off = bc.u64("cpu data offset")?;
                let size = bc.u64("cpu data size")?;
                match self.cpu_data(bytes, cpu, off, size, compressed) {
                    Ok(src) => self.cpus.push(CpuData { cpu, src }),
                    Err(e) => self.damage.push(e.context(&format!("CPU {cpu}"))),
                }
            }
        }
        if !found && !want.is_empty() {
            return Err(Error::new(format!(
                "no instance '{want}' in the trace (it has: {})",
                if self.instances.is_empty() {
                    "only the top one".to_string()
                } else {
                    self.instances.join(", ")
                }
            )));
        }
        Ok(())
    }

    fn flyrecord_compressed(&self, bytes: &[u8], offset: u64) -> Result<bool> {
        let hdr = slice(bytes, offset, 4).map_err(|e| e.context("flyrecord section"))?;
        let flags = self.endian.u16([hdr[2], hdr[3]]);
        Ok(flags & SEC_FL_COMPRESS != 0)
    }

    /// One CPU's pages: as they are, or the chunks `<count> (<zsize> <size> <data>)*`,
    /// read when the events are walked.
    fn cpu_data(
        &mut self,
        bytes: &[u8],
        cpu: u32,
        off: u64,
        size: u64,
        compressed: bool,
    ) -> Result<CpuSource> {
        if !compressed {
            return self.plain(bytes, cpu, off, size);
        }
        let mut c = cursor_at(bytes, off, self.endian, "CPU data")?;
        let count = c.u32("chunk count")?;
        // The size trace-cmd stores does not always cover the chunks' headers: the chunks
        // are bounded by the file.
        let _ = size;
        let end = bytes.len() as u64;
        Ok(CpuSource::Chunks {
            off: c.offset(),
            end,
            count,
        })
    }

    /// A reader of one CPU's sub-buffers.
    pub fn reader(&self, cd: &CpuData) -> CpuReader {
        CpuReader {
            cpu: cd.cpu,
            src: cd.src,
            pos: match cd.src {
                CpuSource::Plain { off, .. } | CpuSource::Chunks { off, .. } => off,
            },
            chunk: 0,
            buf: Vec::new(),
            used: 0,
            page_size: self.page_size,
            endian: self.endian,
            compression: self.compression.clone(),
            pending_error: None,
            done: false,
        }
    }

    /// The format of an event record (its first two bytes are `common_type`).
    pub fn format_of(&self, data: &[u8]) -> Option<&Format> {
        let id = self.endian.uint(data, 2)? as u16;
        self.formats.get(&id)
    }

    pub fn format_named(&self, system: &str, name: &str) -> Option<&Format> {
        self.formats
            .values()
            .find(|f| f.system == system && f.name == name)
    }
}

/// A cursor from file offset `offset` to the end; `what` names what starts there.
fn cursor_at<'a>(bytes: &'a [u8], offset: u64, endian: Endian, what: &str) -> Result<Cursor<'a>> {
    match usize::try_from(offset).ok().and_then(|o| bytes.get(o..)) {
        Some(rest) => Ok(Cursor::new(rest, offset, endian)),
        None => Err(Error::at(
            format!(
                "truncated: {what} starts beyond the end of the file ({} bytes)",
                bytes.len()
            ),
            offset,
        )),
    }
}

fn cstr(b: &[u8]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or(b)
}

fn slice(bytes: &[u8], offset: u64, size: u64) -> Result<&[u8]> {
    let end = offset.checked_add(size);
    match end {
        Some(end) if end <= bytes.len() as u64 => Ok(&bytes[offset as usize..end as usize]),
        _ => {
            let have = (bytes.len() as u64).saturating_sub(offset);
            Err(Error::at(
                format!("truncated: {size} bytes wanted, {have} in the file"),
                offset,
            ))
        }
    }
}

/// One CPU's sub-buffers, a page at a time: straight from the file, or decompressed a
/// chunk at a time, so that memory holds one chunk, whatever the size of the trace.
pub struct CpuReader {
    pub cpu: u32,
    src: CpuSource,
    /// The next byte of the file to read.
    pos: u64,
    chunk: u32,
    /// Decompressed bytes not yet walked, from `used`.
    buf: Vec<u8>,
    used: usize,
    page_size: usize,
    endian: Endian,
    compression: Option<String>,
    /// A damaged chunk, reported once the pages before it are walked.
    pending_error: Option<Error>,
    pub done: bool,
}

impl CpuReader {
    /// The file offset read up to, for progress and for releasing what was read.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Call `f` with the next page (the last may be short). False when there is none; an
    /// error (a damaged chunk) ends the CPU's data.
    pub fn next_page(&mut self, bytes: &[u8], f: impl FnOnce(&[u8])) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        match self.src {
            CpuSource::Plain { off, len } => {
                let end = off + len;
                if self.pos >= end {
                    self.done = true;
                    return Ok(false);
                }
                let n = (end - self.pos).min(self.page_size as u64);
                let page = slice(bytes, self.pos, n)?;
                self.pos += n;
                f(page);
                Ok(true)
            }
            CpuSource::Chunks { end, count, .. } => {
                while self.buf.len() - self.used < self.page_size && self.chunk < count {
                    let i = self.chunk;
                    self.chunk += 1;
                    let r = (|| {
                        let at = self.pos;
                        let rest = slice(bytes, at, end.saturating_sub(at))?;
                        let mut c = Cursor::new(rest, at, self.endian);
                        let zsize = c.u32("chunk compressed size")?;
                        let size = c.u32("chunk size")?;
                        let z = c.take(c.len(zsize.into(), "chunk")?, "chunk")?;
                        let d = match self.compression.as_deref() {
                            Some("zstd") => unzstd(z, size as usize, at)?,
                            Some(other) => {
                                return Err(Error::at(
                                    format!("compression {other} is not supported"),
                                    at,
                                ))
                            }
                            None => {
                                return Err(Error::at(
                                    "a compressed section in an uncompressed file",
                                    at,
                                ))
                            }
                        };
                        Ok((c.offset(), d))
                    })();
                    match r {
                        Ok((next, d)) => {
                            self.pos = next;
                            self.buf.drain(..self.used);
                            self.used = 0;
                            self.buf.extend_from_slice(&d);
                        }
                        Err(e) => {
                            self.chunk = count;
                            let e = e.context(&format!("chunk {i} of {count}"));
                            if self.buf.len() > self.used {
                                // Walk what came before, then report.
                                self.pending_error = Some(e);
                                break;
                            }
                            self.done = true;
                            return Err(e);
                        }
                    }
                }
                if self.used >= self.buf.len() {
                    self.done = true;
                    if let Some(e) = self.pending_error.take() {
                        return Err(e);
                    }
                    return Ok(false);
                }
                let n = (self.buf.len() - self.used).min(self.page_size);
                let page = &self.buf[self.used..self.used + n];
                self.used += n;
                f(page);
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruzstd::encoding::{compress_to_vec, CompressionLevel};

    #[test]
    fn time_offsets_read_as_strtoll_reads_them() {
        // trace-cmd writes the DATE option as "0x%llx" (microseconds).
        assert_eq!(parse_c_int("0x661aa38b6119c"), Some(0x661aa38b6119c));
        assert_eq!(parse_c_int("-0x10"), Some(-16));
        assert_eq!(parse_c_int("1234"), Some(1234));
        assert_eq!(parse_c_int("017"), Some(15));
        assert_eq!(parse_c_int("0"), Some(0));
        assert_eq!(parse_c_int("0xzz"), None);
        assert_eq!(parse_c_int(""), None);
        let mut t = TraceDat::empty(7, Endian::Little, 4096, None);
        t.add_offset(OPT_DATE, b"0x10\0");
        t.add_offset(OPT_OFFSET, b"-5\0");
        t.add_offset(OPT_DATE, b"garbage\0");
        assert_eq!(t.ts_offset, 16_000 - 5);
    }

    #[test]
    fn zstd_sizes_are_bounded() {
        let page: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
        let z = compress_to_vec(&page[..], CompressionLevel::Fastest);
        assert_eq!(unzstd(&z, 4096, 0x10).unwrap(), page);
        // A flipped size word: an error, not a 4 GiB allocation.
        let e = unzstd(&z, u32::MAX as usize, 0x10).unwrap_err();
        assert!(e.msg.contains("declared from"), "{e}");
        // A bomb: 16 MiB of zeros. Declared as a page, decompression stops after it;
        // declared as what it is, it expands more than trace data can.
        let bomb = compress_to_vec(std::io::repeat(0).take(16 << 20), CompressionLevel::Fastest);
        assert!(bomb.len() < 16 << 10, "{}", bomb.len());
        let e = unzstd(&bomb, 4096, 0).unwrap_err();
        assert_eq!(e.msg, "zstd: more than the 4096 bytes the header said");
        let e = unzstd(&bomb, 16 << 20, 0).unwrap_err();
        assert!(e.msg.contains("more than 1024 times"), "{e}");
        // A frame header that asks for a huge window.
        let mut big = z.clone();
        big[4] = 0; // not single-segment, no checksum, no dictionary
        big.insert(5, 31 << 3); // window log 41
        let e = unzstd(&big, 4096, 0).unwrap_err();
        assert!(e.msg.contains("a window of"), "{e}");
    }
}
