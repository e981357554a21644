// SPDX-License-Identifier: GPL-2.0

//! The ring buffer read as it fills: each CPU's `per_cpu/cpuN/trace_pipe_raw`, a
//! sub-buffer at a time, through the page decoder trace.dat's pages go through, and the
//! CPUs' events merged in timestamp order up to the time every CPU has been read to.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::events::{Event, PageDecoder};
use crate::ringbuf::Missed;

/// Pages read from one CPU in one [`Live::poll`] at most: a writer faster than the reader
/// does not keep it there.
const PAGES_PER_POLL: usize = 4096;

/// How long (trace time) before the time a poll began an event must be to be passed on:
/// one being written then may commit after its CPU was read.
pub const SLACK_NS: u64 = 10_000_000;

/// Whole sub-buffers from what a pipe gives: `trace_pipe_raw` hands out one sub-buffer
/// at a time, its events up to the commit word and zeros after, but a read asked for
/// less (or interrupted) gives part of one, and the next read the rest.
#[derive(Debug)]
pub struct PageAssembler {
    buf: Vec<u8>,
    page_size: usize,
}

impl PageAssembler {
    pub fn new(page_size: usize) -> Self {
        PageAssembler {
            buf: Vec::with_capacity(page_size),
            page_size,
        }
    }

    /// Take `bytes` just read; each page they complete is passed to `f`.
    pub fn push(&mut self, mut bytes: &[u8], mut f: impl FnMut(&[u8])) {
        while !bytes.is_empty() {
            if self.buf.is_empty() && bytes.len() >= self.page_size {
                let (page, rest) = bytes.split_at(self.page_size);
                f(page);
                bytes = rest;
                continue;
            }
            let n = (self.page_size - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.buf.len() == self.page_size {
                f(&self.buf);
                self.buf.clear();
            }
        }
    }

    /// Bytes of a page begun and not finished.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// Each CPU's events in its own order, handed on merged in timestamp order (ties in CPU
/// order, as trace.dat's are read), up to a time.
#[derive(Debug, Default)]
pub struct Merger {
    queues: Vec<VecDeque<Event>>,
}

impl Merger {
    pub fn new(cpus: usize) -> Self {
        Merger {
            queues: (0..cpus).map(|_| VecDeque::new()).collect(),
        }
    }

    /// An event of the `i`th CPU, after its earlier ones.
    pub fn push(&mut self, i: usize, e: Event) {
        if let Some(q) = self.queues.get_mut(i) {
            q.push_back(e);
        }
    }

    /// Pass on, in timestamp order, every event at `upto` or before (`None`: all).
    pub fn drain(&mut self, upto: Option<u64>, mut out: impl FnMut(Event)) {
        let ready = |e: &Event| upto.is_none_or(|t| e.ts <= t);
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = self
            .queues
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.front().filter(|e| ready(e)).map(|e| Reverse((e.ts, i))))
            .collect();
        while let Some(Reverse((_, i))) = heap.pop() {
            let Some(e) = self.queues[i].pop_front() else {
                continue;
            };
            out(e);
            if let Some(n) = self.queues[i].front().filter(|n| ready(n)) {
                heap.push(Reverse((n.ts, i)));
            }
        }
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct Pipe {
    cpu: u32,
    file: File,
    pages: PageAssembler,
}

/// The pipes of every CPU of tracefs `root` and what was read from them.
pub struct Live {
    root: std::path::PathBuf,
    pipes: Vec<Pipe>,
    decoder: PageDecoder,
    merger: Merger,
    buf: Vec<u8>,
    /// Events read, events the writer lost (the pages' missed counts; an unknown count
    /// adds 1), module records that did not fit their format.
    pub events: u64,
    pub lost: u64,
    pub bad: usize,
    /// Pages that did not parse (their events before the damage were read).
    pub damage: Vec<Error>,
}

impl Live {
    /// Open `per_cpu/cpuN/trace_pipe_raw` of every CPU of tracefs `root`, not blocking.
    pub fn open(root: &Path, decoder: PageDecoder, page_size: usize) -> Result<Live> {
        let dir = root.join("per_cpu");
        let mut cpus: Vec<u32> = std::fs::read_dir(&dir)
            .map_err(|e| Error::new(format!("{}: {e}", dir.display())))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        let mut pipes = Vec::new();
        for cpu in cpus {
            let p = dir.join(format!("cpu{cpu}/trace_pipe_raw"));
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&p)
                .map_err(|e| Error::new(format!("{}: {e}", p.display())))?;
            pipes.push(Pipe {
                cpu,
                file,
                pages: PageAssembler::new(page_size),
            });
        }
        if pipes.is_empty() {
            return Err(Error::new(format!("no CPU under {}", dir.display())));
        }
        Ok(Live {
            root: root.to_path_buf(),
            merger: Merger::new(pipes.len()),
            pipes,
            decoder,
            buf: vec![0; page_size],
            events: 0,
            lost: 0,
            bad: 0,
            damage: Vec::new(),
        })
    }

    /// The decoder, whose task names the caller keeps up to date.
    pub fn decoder_mut(&mut self) -> &mut PageDecoder {
        &mut self.decoder
    }

    /// Read what every CPU has now, then pass on, in timestamp order, the events older
    /// than the time the reading began by [`SLACK_NS`] (`last`: all of them, the pipes
    /// read for the last time).
    pub fn poll(&mut self, last: bool, mut out: impl FnMut(Event)) -> Result<()> {
        let began = crate::tracefs::read_text(&self.root.join("per_cpu/cpu0/stats"))
            .ok()
            .and_then(|s| crate::tracefs::now_ts(&s));
        let Live {
            pipes,
            decoder,
            merger,
            buf,
            events,
            lost,
            bad,
            damage,
            ..
        } = self;
        for (i, p) in pipes.iter_mut().enumerate() {
            let mut pages = 0;
            while pages < PAGES_PER_POLL {
                let n = match p.file.read(buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::new(format!("CPU {} pipe: {e}", p.cpu))),
                };
                let cpu = p.cpu;
                p.pages.push(&buf[..n], |page| {
                    pages += 1;
                    match decoder.page(cpu, page, bad, |e| {
                        *events += 1;
                        merger.push(i, e);
                    }) {
                        Ok(Missed::None) => {}
                        Ok(Missed::Count(n)) => *lost += n,
                        Ok(Missed::Unknown) => *lost += 1,
                        Err(e) => damage.push(e.context(&format!("CPU {cpu}"))),
                    }
                });
            }
        }
        // Without the clock's time (another clock, a stand-in's tracefs) every event read
        // is passed on.
        let upto = match (last, began) {
            (false, Some(t)) => Some(t.saturating_sub(SLACK_NS)),
            _ => None,
        };
        merger.drain(upto, &mut out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Endian;
    use crate::events::Kind;
    use crate::format::Format;
    use crate::ringbuf::tests::{page, HDR};
    use std::collections::HashMap;
    use std::rc::Rc;

    fn ev(ts: u64, cpu: u32) -> Event {
        Event {
            ts,
            cpu,
            pid: 1,
            tgid: None,
            comm: None,
            kind: Kind::Other {
                name: Rc::from("x:y"),
            },
        }
    }

    #[test]
    fn pages_from_short_reads() {
        let mut a = PageAssembler::new(8);
        let mut got: Vec<Vec<u8>> = Vec::new();
        a.push(&[1, 2, 3], |p| got.push(p.to_vec()));
        assert!(got.is_empty());
        assert_eq!(a.pending(), 3);
        a.push(&[4, 5, 6, 7, 8, 9, 10], |p| got.push(p.to_vec()));
        assert_eq!(got, vec![vec![1, 2, 3, 4, 5, 6, 7, 8]]);
        assert_eq!(a.pending(), 2);
        a.push(
            &[11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24],
            |p| got.push(p.to_vec()),
        );
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], vec![9, 10, 11, 12, 13, 14, 15, 16]);
        assert_eq!(got[2], vec![17, 18, 19, 20, 21, 22, 23, 24]);
        assert_eq!(a.pending(), 0);
    }

    #[test]
    fn a_partial_page_read_in_pieces_gives_its_events() {
        // A sub-buffer the reader took while the writer was on it: two events committed,
        // zeros after the commit, read in pieces of 1000 bytes.
        let p = page(
            500,
            &[(5, &[1, 0, 0, 0, 7, 0, 0, 0]), (3, &[2, 0, 0, 0])],
            4096,
        );
        let formats: HashMap<u16, Format> = [1, 2]
            .into_iter()
            .map(|id| {
                let f = Format {
                    system: "x".into(),
                    name: format!("e{id}"),
                    id,
                    fields: Vec::new(),
                };
                (id, f)
            })
            .collect();
        let mut d = PageDecoder::new(&formats, HDR, 4096, Endian::Little, &HashMap::new()).unwrap();
        let mut a = PageAssembler::new(4096);
        let mut seen = Vec::new();
        let mut bad = 0;
        for chunk in p.chunks(1000) {
            a.push(chunk, |page| {
                let r = d.page(3, page, &mut bad, |e| seen.push((e.ts, e.cpu, e.kind)));
                assert_eq!(r, Ok(Missed::None));
            });
        }
        assert_eq!(a.pending(), 0);
        let name = |n: &str| Kind::Other { name: Rc::from(n) };
        assert_eq!(seen, vec![(505, 3, name("x:e1")), (508, 3, name("x:e2"))]);
        assert_eq!(bad, 0);
    }

    #[test]
    fn merged_in_time_order_up_to_a_time() {
        let mut m = Merger::new(2);
        for (i, ts) in [(0, 10), (0, 30), (0, 50), (1, 20), (1, 30), (1, 60)] {
            m.push(i, ev(ts, i as u32));
        }
        let mut out = Vec::new();
        m.drain(Some(30), |e| out.push((e.ts, e.cpu)));
        // Ties keep CPU order; 50 and 60 wait for the other CPU.
        assert_eq!(out, vec![(10, 0), (20, 1), (30, 0), (30, 1)]);
        assert_eq!(m.len(), 2);
        m.push(1, ev(70, 1));
        out.clear();
        m.drain(None, |e| out.push((e.ts, e.cpu)));
        assert_eq!(out, vec![(50, 0), (60, 1), (70, 1)]);
        assert!(m.is_empty());
    }
}
