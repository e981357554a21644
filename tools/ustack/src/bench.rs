// SPDX-License-Identifier: GPL-2.0

//! `ustack --bench`: a large synthetic trace.dat (version 6, the formats of a real
//! recording, stacks of 32 frames in this machine's libc), then the trace.dat read rate and
//! the symbolization rate once each file's data is loaded, printed as figures.

use std::path::Path;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::join::{self, Frame};
use crate::symbolize::{Options, Symbolizer};
use crate::tracedat::TraceDat;

/// A recording of the guest's, for its formats.
const FIXTURE: &[u8] = include_bytes!("../tests/fixtures/v6.dat");
pub const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const PAGE: usize = 4096;

/// A record of `f`'s fixed fields plus dynamic data, written through the format.
struct Rec<'a> {
    f: &'a Format,
    buf: Vec<u8>,
}

impl<'a> Rec<'a> {
    fn new(f: &'a Format, pid: i32) -> Self {
        let fixed = f
            .fields
            .iter()
            .map(|x| x.offset + x.size)
            .max()
            .unwrap_or(8);
        let mut r = Rec {
            f,
            buf: vec![0; fixed],
        };
        r.buf[..2].copy_from_slice(&f.id.to_le_bytes());
        r.buf[4..8].copy_from_slice(&pid.to_le_bytes());
        r
    }
    fn int(mut self, name: &str, v: u64) -> Self {
        if let Some(x) = self.f.field(name) {
            let b = v.to_le_bytes();
            self.buf[x.offset..x.offset + x.size].copy_from_slice(&b[..x.size]);
        }
        self
    }
    fn dynamic(mut self, name: &str, data: &[u8]) -> Self {
        if let Some(x) = self.f.field(name) {
            let loc = ((data.len() as u32) << 16) | self.buf.len() as u32;
            self.buf[x.offset..x.offset + 4].copy_from_slice(&loc.to_le_bytes());
            self.buf.extend_from_slice(data);
        }
        self
    }
}

/// Pages of one CPU, filled in order, each event 1 ns after the last.
#[derive(Default)]
struct Pages {
    data: Vec<u8>,
    page: Vec<u8>,
    page_ts: u64,
    ts: u64,
}

impl Pages {
    fn push(&mut self, rec: &[u8]) {
        let words = rec.len().div_ceil(4);
        let len = 4 + if words <= 28 {
            4 * words
        } else {
            4 + 4 * words
        };
        if self.page.len() + len > PAGE - 16 {
            self.flush();
        }
        if self.page.is_empty() {
            self.page_ts = self.ts;
        }
        let delta = 1u32;
        self.ts += 1;
        if words <= 28 {
            self.page
                .extend_from_slice(&((delta << 5) | words as u32).to_le_bytes());
        } else {
            self.page.extend_from_slice(&(delta << 5).to_le_bytes());
            self.page
                .extend_from_slice(&(4 * words as u32 + 4).to_le_bytes());
        }
        self.page.extend_from_slice(rec);
        self.page.resize(self.page.len().div_ceil(4) * 4, 0);
    }
    fn flush(&mut self) {
        if self.page.is_empty() {
            return;
        }
        let mut p = Vec::with_capacity(PAGE);
        p.extend_from_slice(&self.page_ts.to_le_bytes());
        p.extend_from_slice(&(self.page.len() as u64).to_le_bytes());
        p.extend_from_slice(&self.page);
        p.resize(PAGE, 0);
        self.data.extend_from_slice(&p);
        self.page.clear();
    }
}

/// A version 6 trace.dat of one CPU holding `pages`, with the fixture's formats.
fn write_v6(formats: &[(String, Vec<u8>)], cpu_data: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(b"\x17\x08\x44tracing6\0\0\x08");
    f.extend_from_slice(&(PAGE as u32).to_le_bytes());
    let (hp, events): (Vec<_>, Vec<_>) = formats.iter().partition(|(s, _)| s == "header_page");
    let header = hp.first().map(|h| h.1.clone()).unwrap_or_default();
    f.extend_from_slice(b"header_page\0");
    f.extend_from_slice(&(header.len() as u64).to_le_bytes());
    f.extend_from_slice(&header);
    f.extend_from_slice(b"header_event\0");
    f.extend_from_slice(&0u64.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes()); // ftrace formats
    let mut systems: Vec<&str> = events.iter().map(|(s, _)| s.as_str()).collect();
    systems.dedup();
    f.extend_from_slice(&(systems.len() as u32).to_le_bytes());
    for sys in &systems {
        f.extend_from_slice(sys.as_bytes());
        f.push(0);
        let of: Vec<_> = events.iter().filter(|(s, _)| s == sys).collect();
        f.extend_from_slice(&(of.len() as u32).to_le_bytes());
        for (_, t) in of {
            f.extend_from_slice(&(t.len() as u64).to_le_bytes());
            f.extend_from_slice(t);
        }
    }
    f.extend_from_slice(&0u32.to_le_bytes()); // kallsyms
    f.extend_from_slice(&0u32.to_le_bytes()); // printk
    let comms = b"4242 bench\n";
    f.extend_from_slice(&(comms.len() as u64).to_le_bytes());
    f.extend_from_slice(comms);
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(b"flyrecord\0");
    let data_at = (f.len() + 16).div_ceil(PAGE) * PAGE;
    f.extend_from_slice(&(data_at as u64).to_le_bytes());
    f.extend_from_slice(&(cpu_data.len() as u64).to_le_bytes());
    f.resize(data_at, 0);
    f.extend_from_slice(cpu_data);
    f
}

/// The synthetic trace: `stacks` syscalls of task 4242, each with its cookie and a stack
/// of `depth` frames at `distinct` offsets spread over libc's text.
pub fn synthetic(stacks: usize, depth: usize, distinct: usize) -> Result<Vec<u8>> {
    let t = TraceDat::parse(FIXTURE)?;
    let need = |s: &str, n: &str| {
        t.format_named(s, n)
            .ok_or_else(|| Error::new(format!("fixture lacks {s}:{n}")))
    };
    let (sys, cookie, stack, fc) = (
        need("raw_syscalls", "sys_enter")?,
        need("user_unwind", "user_unwind_cookie")?,
        need("user_unwind", "user_unwind_stack")?,
        need("user_unwind", "file_cache")?,
    );
    let libc = Path::new(LIBC);
    let build_id = crate::elf::build_id(libc).unwrap_or_default();
    let text = crate::elf::loads(libc)
        .and_then(|l| l.into_iter().find(|l| l.filesz > 0x10000 && l.offset > 0))
        .ok_or_else(|| Error::new(format!("{LIBC}: no text segment")))?;
    const FILE: u64 = 0x5eed_f11e_c0de_0001;
    let mut pages = Pages::default();
    let rec = Rec::new(fc, 4242)
        .int("cookie", FILE)
        .int("build_id_len", build_id.len() as u64)
        .dynamic("path", format!("{LIBC}\0").as_bytes())
        .dynamic("build_id", &build_id);
    pages.push(&rec.buf);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..stacks {
        let c = (i as u64 + 1) << 12 | 1;
        pages.push(&Rec::new(sys, 4242).int("id", 110).buf);
        pages.push(&Rec::new(cookie, 4242).int("cookie", c).buf);
        let mut offs = Vec::with_capacity(4 * depth);
        for _ in 0..depth {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let k = rng % distinct as u64;
            let off = text.offset + 16 + k * ((text.filesz - 32) / distinct as u64);
            offs.extend_from_slice(&(off as u32).to_le_bytes());
        }
        let rec = Rec::new(stack, 4242)
            .int("cookie", c)
            .int("start", 0)
            .int("total", depth as u64)
            .dynamic("files", &FILE.to_le_bytes())
            .dynamic("offs", &offs)
            .dynamic("file_idx", &vec![0u8; depth]);
        pages.push(&rec.buf);
    }
    pages.flush();
    Ok(write_v6(&t.format_texts, &pages.data))
}

/// Build the synthetic trace, read it, join it and symbolize every frame; print figures.
pub fn run(stacks: usize, depth: usize, distinct: usize) -> Result<()> {
    let t0 = Instant::now();
    let file = synthetic(stacks, depth, distinct)?;
    let built = t0.elapsed();

    let t0 = Instant::now();
    let loaded = crate::load(&file)?;
    let read = t0.elapsed();
    let (samples, stats) = join::join(&loaded.events);
    let joined = t0.elapsed();
    if stats.stacks != stacks || stats.unresolved_frames != 0 {
        return Err(Error::new(format!(
            "the synthetic trace joined wrong: {stats:?}"
        )));
    }

    let mut sym = Symbolizer::new(Options::default());
    let frames: Vec<(&Frame, usize)> = samples
        .iter()
        .flat_map(|s| s.frames.iter().enumerate().map(|(d, f)| (f, d)))
        .collect();
    // Load the file's data (and look every distinct offset up once): the first pass.
    let t0 = Instant::now();
    for &(f, d) in &frames {
        sym.resolve(4242, f, d);
    }
    let cold = t0.elapsed();
    let lookups = sym.lookups;
    let t0 = Instant::now();
    let mut named = 0usize;
    for &(f, d) in &frames {
        named += usize::from(sym.resolve(4242, f, d).is_some());
    }
    let warm = t0.elapsed();
    let mb = file.len() as f64 / 1e6;
    println!(
        "bench: trace.dat {mb:.1} MB, {} events, {stacks} stacks of {depth} frames, {distinct} distinct offsets in {LIBC} (built in {:.2} s)",
        loaded.events.len(),
        built.as_secs_f64()
    );
    println!(
        "read: {:.1} MB/s (trace.dat parsed and decoded in {:.3} s; joined by {:.3} s)",
        mb / read.as_secs_f64(),
        read.as_secs_f64(),
        joined.as_secs_f64()
    );
    println!(
        "symbolize first pass: {} frames in {:.3} s, {lookups} distinct lookups ({:.0} lookups/s)",
        frames.len(),
        cold.as_secs_f64(),
        lookups as f64 / cold.as_secs_f64()
    );
    println!(
        "symbolize: {:.0} frames/s once loaded ({} frames in {:.3} s, {} named)",
        frames.len() as f64 / warm.as_secs_f64(),
        frames.len(),
        warm.as_secs_f64(),
        named
    );
    Ok(())
}
