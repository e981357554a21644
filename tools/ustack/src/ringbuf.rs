// SPDX-License-Identifier: GPL-2.0

//! Ring-buffer sub-buffers, as `include/linux/ring_buffer.h` lays them out and
//! libtraceevent's kbuffer reads them: a page header (timestamp, commit word), then events
//! with a 5-bit `type_len` and a 27-bit time delta.

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::format::PageHeader;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
/// The top bits of an absolute timestamp are kept from the page's (kbuffer's `TS_MSB`).
const TS_MSB: u64 = 0xf8 << 56;
const COMMIT_MASK: u64 = (1 << 27) - 1;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;

/// What the writer lost before a page: none, a count, or some number it did not store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    None,
    Count(u64),
    Unknown,
}

/// Walk the events of one sub-buffer, calling `f(timestamp, data)` for each data event.
/// Returns what was lost before the page. A malformed event ends the page with an error;
/// the events before it have been delivered. A page shorter than `page_size` whose
/// commit reaches past its end is the last of a file cut short: its events up to the cut
/// are delivered, then the cut is the error.
pub fn parse_page<'a>(
    page: &'a [u8],
    page_size: usize,
    hdr: &PageHeader,
    endian: Endian,
    mut f: impl FnMut(u64, &'a [u8]),
) -> Result<Missed> {
    let bad = |what: &str, at: usize| Error::at(format!("ring-buffer page: {what}"), at as u64);
    let mut ts = endian
        .uint(page, 8)
        .ok_or_else(|| bad("no page header", 0))?;
    let commit = page
        .get(hdr.commit_offset..)
        .and_then(|b| endian.uint(b, hdr.commit_size))
        .ok_or_else(|| bad("no commit word", hdr.commit_offset))?;
    let full = (commit & COMMIT_MASK) as usize;
    let have = page.len().saturating_sub(hdr.data_offset);
    let cut = full > have && page.len() < page_size;
    let size = if cut { have } else { full };
    let cut_error = || {
        bad(
            &format!(
                "cut short: the file ends {have} bytes into the page's {full} bytes of events; \
                 the events before the cut were read"
            ),
            hdr.data_offset + have,
        )
    };
    let data = page
        .get(hdr.data_offset..)
        .and_then(|d| d.get(..size))
        .ok_or_else(|| bad("commit beyond the page", hdr.commit_offset))?;
    let missed = if commit & MISSED_EVENTS == 0 {
        Missed::None
    } else if commit & MISSED_STORED != 0 {
        let at = hdr.data_offset + size;
        match page.get(at..).and_then(|b| endian.uint(b, hdr.commit_size)) {
            Some(n) => Missed::Count(n),
            None => Missed::Unknown,
        }
    } else {
        Missed::Unknown
    };

    let word = |at: usize| -> Result<u32> {
        data.get(at..at + 4)
            .and_then(|b| endian.uint(b, 4))
            .map(|v| v as u32)
            .ok_or_else(|| {
                if cut {
                    cut_error()
                } else {
                    bad("event header beyond the commit", hdr.data_offset + at)
                }
            })
    };
    let mut at = 0usize;
    while at < size {
        let h = word(at)?;
        let (type_len, delta) = match endian {
            Endian::Little => (h & 0x1f, u64::from(h >> 5)),
            Endian::Big => (h >> 27, u64::from(h & ((1 << 27) - 1))),
        };
        let body = at + 4;
        let (start, len) = match type_len {
            TYPE_PADDING => {
                if delta == 0 {
                    // Padding to the end of the page: nothing more here.
                    break;
                }
                let len = word(body)? as usize;
                at = body.checked_add(len).ok_or_else(|| bad("padding", at))?;
                continue;
            }
            TYPE_TIME_EXTEND | TYPE_TIME_STAMP => {
                let ext = (u64::from(word(body)?) << TS_SHIFT) + delta;
                if type_len == TYPE_TIME_STAMP {
                    ts = ext | (ts & TS_MSB);
                } else {
                    ts = ts.wrapping_add(ext);
                }
                at = body + 4;
                continue;
            }
            0 => {
                let len = word(body)? as usize;
                let len = len
                    .checked_sub(4)
                    .ok_or_else(|| bad("event length < 4", at))?;
                (body + 4, (len + 3) & !3)
            }
            n => (body, n as usize * 4),
        };
        ts = ts.wrapping_add(delta);
        let end = start
            .checked_add(len)
            .ok_or_else(|| bad("event length", at))?;
        let Some(ev) = data.get(start..end) else {
            if cut {
                return Err(cut_error());
            }
            return Err(bad("event beyond the commit", hdr.data_offset + at));
        };
        f(ts, ev);
        at = end;
    }
    if cut {
        return Err(cut_error());
    }
    Ok(missed)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub const HDR: PageHeader = PageHeader {
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
    };

    /// A page of `size` bytes holding `events` (delta, payload) after a page timestamp.
    pub fn page(ts: u64, events: &[(u32, &[u8])], size: usize) -> Vec<u8> {
        let mut data = Vec::new();
        for &(delta, payload) in events {
            let words = payload.len().div_ceil(4);
            if words <= 28 {
                data.extend_from_slice(&((delta << 5) | words as u32).to_le_bytes());
            } else {
                data.extend_from_slice(&(delta << 5).to_le_bytes());
                data.extend_from_slice(&(payload.len() as u32 + 4).to_le_bytes());
            }
            data.extend_from_slice(payload);
            data.resize(data.len().div_ceil(4) * 4, 0);
        }
        let mut p = Vec::new();
        p.extend_from_slice(&ts.to_le_bytes());
        p.extend_from_slice(&(data.len() as u64).to_le_bytes());
        p.extend_from_slice(&data);
        p.resize(size.max(p.len()), 0);
        p
    }

    fn collect(p: &[u8]) -> (Result<Missed>, Vec<(u64, Vec<u8>)>) {
        let mut v = Vec::new();
        let r = parse_page(p, 4096, &HDR, Endian::Little, |ts, d| {
            v.push((ts, d.to_vec()))
        });
        (r, v)
    }

    #[test]
    fn reads_short_and_long_events() {
        let long = [7u8; 200];
        let p = page(1000, &[(5, &[1, 2, 3, 4]), (10, &long)], 4096);
        let (r, v) = collect(&p);
        assert_eq!(r, Ok(Missed::None));
        assert_eq!(v.len(), 2);
        assert_eq!(v[0], (1005, vec![1, 2, 3, 4]));
        assert_eq!(v[1].0, 1015);
        assert_eq!(v[1].1, long.to_vec());
    }

    #[test]
    fn time_extend_and_absolute_stamps() {
        let mut data = Vec::new();
        // Time extend of (2 << 27) + 3.
        data.extend_from_slice(&((3u32 << 5) | TYPE_TIME_EXTEND).to_le_bytes());
        data.extend_from_slice(&2u32.to_le_bytes());
        data.extend_from_slice(&((1u32 << 5) | 1).to_le_bytes());
        data.extend_from_slice(&[9, 9, 9, 9]);
        // Absolute stamp 5 << 27 | 4.
        data.extend_from_slice(&((4u32 << 5) | TYPE_TIME_STAMP).to_le_bytes());
        data.extend_from_slice(&5u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        data.extend_from_slice(&[8, 8, 8, 8]);
        let mut p = 100u64.to_le_bytes().to_vec();
        p.extend_from_slice(&(data.len() as u64).to_le_bytes());
        p.extend_from_slice(&data);
        let (r, v) = collect(&p);
        assert!(r.is_ok());
        assert_eq!(v[0].0, 100 + (2 << 27) + 3 + 1);
        assert_eq!(v[1].0, (5 << 27) + 4);
    }

    #[test]
    fn missed_events_are_reported() {
        let mut p = page(0, &[(1, &[1, 2, 3, 4])], 64);
        let commit = 8 | MISSED_EVENTS | MISSED_STORED;
        p[8..16].copy_from_slice(&commit.to_le_bytes());
        p[24..32].copy_from_slice(&42u64.to_le_bytes());
        assert_eq!(collect(&p).0, Ok(Missed::Count(42)));
        p[8..16].copy_from_slice(&(8 | MISSED_EVENTS).to_le_bytes());
        assert_eq!(collect(&p).0, Ok(Missed::Unknown));
    }

    #[test]
    fn a_page_cut_by_the_end_of_the_file_gives_its_events_before_the_cut() {
        let p = page(
            0,
            &[(1, &[1, 2, 3, 4]), (1, &[5, 6, 7, 8]), (1, &[9; 8])],
            4096,
        );
        // Cut inside the third event, then inside the second's header: what is whole is
        // read, then the cut is the error.
        for (len, n) in [(16 + 8 + 8 + 6, 2), (16 + 8 + 2, 1), (16, 0)] {
            let (r, v) = collect(&p[..len]);
            assert_eq!(v.len(), n, "cut at {len}");
            let e = r.unwrap_err();
            assert!(e.msg.contains("cut short"), "{e}");
        }
        // Cut after the commit: nothing is missing.
        let (r, v) = collect(&p[..16 + 8 + 8 + 12 + 4]);
        assert_eq!((r, v.len()), (Ok(Missed::None), 3));
        // A whole page whose commit claims more than it holds is damage, not a cut.
        let mut q = p.clone();
        q[8..16].copy_from_slice(&5000u64.to_le_bytes());
        let (r, v) = collect(&q);
        assert!(r.unwrap_err().msg.contains("commit beyond the page"));
        assert!(v.is_empty());
    }

    #[test]
    fn damage_is_an_error_after_the_good_events() {
        let p = page(0, &[(1, &[1, 2, 3, 4]), (1, &[5, 6, 7, 8])], 64);
        // Commit claims more than the page holds.
        let mut q = p.clone();
        q[8..16].copy_from_slice(&1000u64.to_le_bytes());
        assert!(collect(&q).0.is_err());
        // The second event's header says 28 words: beyond the commit.
        let mut q = p.clone();
        q[24..28].copy_from_slice(&((1u32 << 5) | 28).to_le_bytes());
        let (r, v) = collect(&q);
        assert!(r.is_err());
        assert_eq!(v.len(), 1);
    }
}
