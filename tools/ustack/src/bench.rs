// SPDX-License-Identifier: GPL-2.0

//! `ustack --bench`: a large synthetic trace.dat (version 6, the formats of a real
//! recording, stacks of 32 frames in this machine's libc) written to a file, then `ustack`
//! run on it as a user would, writing all five outputs: its time and peak memory are the
//! figures, with the symbolization rate once libc's data is loaded.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::join::{self, Frame};
use crate::symbolize::{Options, Symbolizer};
use crate::tracedat::TraceDat;

/// A line of figures; standard output closed (`| head`) is not an error.
macro_rules! say {
    ($($t:tt)*) => {
        let _ = writeln!(std::io::stdout(), $($t)*);
    };
}

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

/// Pages of one CPU, filled in order, each event 1 ns after the last, written out as
/// each fills.
struct Pages<W: Write> {
    out: W,
    written: u64,
    page: Vec<u8>,
    page_ts: u64,
    ts: u64,
    err: Option<std::io::Error>,
}

impl<W: Write> Pages<W> {
    fn new(out: W) -> Self {
        Pages {
            out,
            written: 0,
            page: Vec::new(),
            page_ts: 0,
            ts: 0,
            err: None,
        }
    }
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
        if let Err(e) = self.out.write_all(&p) {
            self.err.get_or_insert(e);
        }
        self.written += PAGE as u64;
        self.page.clear();
    }
}

/// The head of a version 6 trace.dat of one CPU with the fixture's formats, up to its
/// data at the returned offset; the data's size is patched at `returned - 8`... see
/// `synthetic_file`.
fn write_v6(formats: &[(String, Vec<u8>)], cpu_data_len: u64) -> (Vec<u8>, usize) {
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
    let size_at = f.len();
    f.extend_from_slice(&cpu_data_len.to_le_bytes());
    f.resize(data_at, 0);
    (f, size_at)
}

/// The synthetic trace, written to `path`: `stacks` syscalls of task 4242, each with its
/// cookie and a stack of `depth` frames at `distinct` offsets spread over libc's text.
/// Returns its size and its number of events.
pub fn synthetic_file(
    path: &Path,
    stacks: usize,
    depth: usize,
    distinct: usize,
    uniq: usize,
) -> Result<(u64, usize)> {
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
    let io = |e: std::io::Error| Error::new(format!("{}: {e}", path.display()));
    let mut file = std::fs::File::create(path).map_err(io)?;
    let (head, size_at) = write_v6(&t.format_texts, 0);
    file.write_all(&head).map_err(io)?;
    const FILE: u64 = 0x5eed_f11e_c0de_0001;
    let mut pages = Pages::new(std::io::BufWriter::with_capacity(1 << 20, &mut file));
    let rec = Rec::new(fc, 4242)
        .int("cookie", FILE)
        .int("build_id_len", build_id.len() as u64)
        .dynamic("path", format!("{LIBC}\0").as_bytes())
        .dynamic("build_id", &build_id);
    pages.push(&rec.buf);
    let mut offs = Vec::with_capacity(4 * depth);
    for i in 0..stacks {
        let c = (i as u64 + 1) << 12 | 1;
        // Stack i is the same as stack i % uniq.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64
            ^ ((i % uniq.max(1)) as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
        pages.push(&Rec::new(sys, 4242).int("id", 110).buf);
        pages.push(&Rec::new(cookie, 4242).int("cookie", c).buf);
        offs.clear();
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
    let written = pages.written;
    if let Some(e) = pages.err.take() {
        return Err(io(e));
    }
    pages.out.flush().map_err(io)?;
    drop(pages);
    file.seek(SeekFrom::Start(size_at as u64)).map_err(io)?;
    file.write_all(&written.to_le_bytes()).map_err(io)?;
    Ok((head.len() as u64 + written, 1 + 3 * stacks))
}

/// Build the synthetic trace in a file, run `ustack` on it writing all five outputs, and
/// print its time and peak memory; then the symbolization rate.
pub fn run(stacks: usize, depth: usize, distinct: usize, uniq: usize) -> Result<()> {
    // $USTACK_BENCH_DIR keeps the trace and the outputs there.
    let keep = std::env::var_os("USTACK_BENCH_DIR").map(PathBuf::from);
    let dir = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("ustack-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    // The trace is removed however the run ends (a panic, standard output closed).
    struct Cleanup(Option<PathBuf>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(d) = &self.0 {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
    let _cleanup = Cleanup(keep.is_none().then(|| dir.clone()));
    run_in(&dir, stacks, depth, distinct, uniq)
}

fn run_in(dir: &Path, stacks: usize, depth: usize, distinct: usize, uniq: usize) -> Result<()> {
    let trace = dir.join("trace.dat");
    let t0 = Instant::now();
    let (size, events) = synthetic_file(&trace, stacks, depth, distinct, uniq)?;
    let built = t0.elapsed();
    let mb = size as f64 / 1e6;
    say!(
        "bench: trace.dat {mb:.1} MB, {events} events, {stacks} stacks ({} distinct) of {depth} frames, {distinct} distinct offsets in {LIBC} (written in {:.2} s)",
        uniq.min(stacks),
        built.as_secs_f64()
    );
    let out = |n: &str| -> PathBuf { dir.join(n) };
    let exe = std::env::current_exe().map_err(|e| Error::new(format!("ustack itself: {e}")))?;
    let t0 = Instant::now();
    let o = std::process::Command::new(exe)
        .arg("--report")
        .arg(out("report.txt"))
        .arg("--folded")
        .arg(out("stacks.folded"))
        .arg("--svg")
        .arg(out("flame.svg"))
        .arg("--speedscope")
        .arg(out("speedscope.json"))
        .arg("--pprof")
        .arg(out("profile.pb.gz"))
        .arg(&trace)
        .env("USTACK_PEAK", "1")
        .output()
        .map_err(|e| Error::new(format!("running ustack: {e}")))?;
    let secs = t0.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        return Err(Error::new(format!(
            "ustack on the synthetic trace failed: {err}"
        )));
    }
    let peak: f64 = err
        .lines()
        .find_map(|l| l.strip_prefix("ustack: peak memory "))
        .and_then(|l| l.trim_end_matches(" kB").parse().ok())
        .unwrap_or(f64::NAN);
    let folded = std::fs::read_to_string(out("stacks.folded")).unwrap_or_default();
    let samples: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    if samples != stacks as u64 {
        return Err(Error::new(format!(
            "the folded stacks hold {samples} samples, not {stacks}: {err}"
        )));
    }
    say!(
        "all five outputs: {secs:.2} s, peak memory {:.0} MB ({:.1} MB/s; report, folded, svg, speedscope and pprof of {} lines of folded stacks)",
        peak / 1024.0,
        mb / secs,
        folded.lines().count()
    );

    // The symbolization rate once libc's data is loaded, in this process.
    let mut sym = Symbolizer::new(Options::default());
    let t = crate::elf::loads(Path::new(LIBC))
        .and_then(|l| l.into_iter().find(|l| l.filesz > 0x10000 && l.offset > 0))
        .ok_or_else(|| Error::new(format!("{LIBC}: no text segment")))?;
    let file = std::rc::Rc::new(join::FileInfo {
        cookie: 2,
        path: LIBC.into(),
        build_id: crate::elf::build_id(Path::new(LIBC)).unwrap_or_default(),
    });
    let at = |k: u64| Frame::File {
        file: std::rc::Rc::clone(&file),
        offset: t.offset + 16 + k * ((t.filesz - 32) / distinct as u64),
    };
    let t0 = Instant::now();
    let mut named = 0usize;
    for k in 0..distinct as u64 {
        named += usize::from(sym.resolve(4242, &at(k), 1).is_some());
    }
    let cold = t0.elapsed().as_secs_f64();
    say!(
        "symbolize: {distinct} distinct offsets in {cold:.3} s with libc's debug data loaded first ({:.0} lookups/s, {named} named)",
        distinct as f64 / cold
    );
    Ok(())
}
