// SPDX-License-Identifier: GPL-2.0

//! A file's table: what the unwinder keeps of one object's `.eh_frame` for every process
//! that maps it, in memory allocated for it in the deferred callback (task context) the
//! first time one of its rows misses the row cache, and grown as its functions are seen.
//!
//! It is one array of words, laid out here so that the kernel glue only allocates, copies
//! and publishes it:
//!
//! | words | what |
//! |---|---|
//! | 1 | [`MAGIC`] and the number of FDEs `count` |
//! | 1 | row capacity `cap` |
//! | 1 | rows used |
//! | 1 | the search index's shift (`u64::MAX`: none) |
//! | [`INFO_WORDS`] | the object's segments, entry point and `.eh_frame_hdr` (or `.eh_frame` section) |
//! | `count` | the search table, sorted: an FDE's first address (low half) and its address (high half), the object's own link-time addresses |
//! | [`index_words`]`(count)` | the search index: per span of `1 << shift` bytes from the first FDE's address, the index of the last FDE at or below the span's start, two a word |
//! | `count` | per FDE: 0 until its rows are kept; then its first row, its number of rows and the length it covers |
//! | 3 × `cap` | rows, an FDE's consecutive, each the row cache's three words with its first address (from the FDE's) in the third's bits 8-31 |
//!
//! The search table is a copy of the `.eh_frame_hdr`'s, read once when the table is made
//! (for an object without one, made from its `.eh_frame` section and sorted, [`sort`]):
//! a lookup bisects it in memory instead of reading the file at each probe, and only
//! between the two FDEs the search index gives for the address's span (as the kernel's
//! ORC unwinder's `orc_lookup`): about two FDEs a span, so a bisection of a few steps
//! instead of one of `log2(count)`. An FDE's rows
//! are all kept the first time one of them is needed: its program runs once, and every
//! later lookup in the function is a bisection of its rows.
//!
//! Readers take no lock: the search table is written before the table is published, and
//! an FDE's rows before its word, which is stored with release and loaded with acquire.
//! Writers (adding an FDE's rows, growing the table) are serialised by the glue, which
//! grows a table by copying it into a larger one that replaces it: a reader holding the
//! old one sees fewer FDEs, and parses the others again.

#![forbid(unsafe_code)]

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering;

use super::cfi::table::Entry;

/// Words of the object's description (see [`super::unwinder`]'s table cache slot, less its
/// key).
pub const INFO_WORDS: usize = super::unwinder::INFO_WORDS;
/// Words before the search table.
const HEAD: usize = 4 + INFO_WORDS;
/// The head word of the search index's shift.
const SHIFT: usize = 3;
/// The shift of a table without a search index.
const NO_INDEX: u64 = u64::MAX;
/// The first word's high half.
pub const MAGIC: u64 = 0x7575_7462;
/// An FDE's rows kept at most (more: parsed each time, never kept).
pub const FDE_ROWS_MAX: usize = 256;
/// Rows a new table has room for.
pub const FIRST_ROWS: usize = 256;
/// A table that grows has room for a row for every this many FDEs at least.
const GROW_FDES_PER_ROW: usize = 8;
/// An FDE word for an FDE whose rows cannot be kept: a row with an expression, more than
/// [`FDE_ROWS_MAX`] rows, a range of 16 MiB or more.
const UNKEPT: u64 = u64::MAX;

/// Spans of the search index of a table of `count` FDEs: about one for two FDEs.
#[inline]
fn spans(count: usize) -> usize {
    count.div_ceil(2).max(1)
}

/// Words of the search index of a table of `count` FDEs.
#[inline]
pub fn index_words(count: usize) -> usize {
    spans(count).div_ceil(2)
}

// The parts of a table's layout. Used only for a `count` whose table's [`words`] were
// found (`View::new`, `init`), a checked sum larger than each of them: they cannot
// overflow, and wrap rather than carry the kernel's overflow checks on every lookup.

/// The first word of the search index (see the layout) of a table of `count` FDEs.
#[inline]
fn index_start(count: usize) -> usize {
    HEAD.wrapping_add(count)
}

/// The first of the FDE words of a table of `count` FDEs.
#[inline]
fn fde_words(count: usize) -> usize {
    index_start(count).wrapping_add(index_words(count))
}

/// The first of the rows' words of a table of `count` FDEs.
#[inline]
fn row_words(count: usize) -> usize {
    fde_words(count).wrapping_add(count)
}

/// The words a table of `count` FDEs and room for `cap` rows takes.
#[inline]
pub fn words(count: usize, cap: usize) -> Option<usize> {
    count
        .checked_mul(2)?
        .checked_add(cap.checked_mul(3)?)?
        .checked_add(HEAD + index_words(count))
}

/// What an FDE's word says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// Not kept yet.
    Unseen,
    /// Not to be kept: parse it each time.
    Unkept,
    /// Kept.
    Kept {
        /// Its first row.
        first: usize,
        /// Its rows.
        n: usize,
        /// The bytes it covers from its first address.
        len: u64,
    },
}

/// A table's words, read.
#[derive(Clone, Copy)]
pub struct View<'w> {
    w: &'w [AtomicU64],
    count: usize,
    cap: usize,
}

impl<'w> View<'w> {
    /// The table in `w`, if its head is one.
    #[inline]
    pub fn new(w: &'w [AtomicU64]) -> Option<View<'w>> {
        let first = w.first()?.load(Ordering::Relaxed);
        if first >> 32 != MAGIC {
            return None;
        }
        let count = first as u32 as usize;
        let cap = usize::try_from(w.get(1)?.load(Ordering::Relaxed)).ok()?;
        if w.len() < words(count, cap)? {
            return None;
        }
        Some(View { w, count, cap })
    }

    fn word(&self, i: usize) -> u64 {
        self.w.get(i).map_or(0, |w| w.load(Ordering::Relaxed))
    }

    /// The object's description.
    #[inline]
    pub fn info(&self) -> [u64; INFO_WORDS] {
        let mut info = [0; INFO_WORDS];
        for (i, v) in info.iter_mut().enumerate() {
            *v = self.word(SHIFT + 1 + i);
        }
        info
    }

    /// FDEs in the search table.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Rows used.
    pub fn used(&self) -> usize {
        self.word(2) as usize
    }

    /// The search table's entry `i`.
    #[inline]
    pub fn entry(&self, i: usize) -> Entry {
        let e = self.word(HEAD + i);
        Entry {
            initial: e & 0xffff_ffff,
            fde: e >> 32,
        }
    }

    /// Entry `span` of the search index.
    #[inline]
    fn span(&self, span: usize) -> usize {
        (self.word(index_start(self.count) + span / 2) >> (32 * (span % 2))) as u32 as usize
    }

    /// The entries of the search table among which the last one at or below `vaddr` is,
    /// if any is: the first and the number, from the search index if the table has one.
    #[inline(always)]
    fn bounds(&self, vaddr: u32) -> (usize, usize) {
        let shift = self.word(SHIFT);
        let first = self.word(HEAD) as u32;
        if shift >= 32 || vaddr < first || self.count == 0 {
            return (0, self.count);
        }
        let span = ((vaddr - first) >> shift) as usize;
        let last = spans(self.count) - 1;
        let lo = self.span(span.min(last));
        let hi = if span < last {
            self.span(span + 1)
        } else {
            self.count - 1
        };
        if lo <= hi && hi < self.count {
            (lo, hi - lo + 1)
        } else {
            (0, self.count)
        }
    }

    /// The index of the FDE with the greatest first address at or below `vaddr`: the only
    /// one that can cover it.
    pub fn search(&self, vaddr: u64) -> Option<usize> {
        let vaddr = u32::try_from(vaddr).ok()?;
        let entries = self.w.get(HEAD..HEAD.checked_add(self.count)?)?;
        let at_or_below = |i: usize| {
            entries
                .get(i)
                .is_some_and(|e| e.load(Ordering::Relaxed) as u32 <= vaddr)
        };
        // Halving: the answer, if any, is in `base..base + size`, and `base` moves only to
        // an entry at or below `vaddr`.
        let (mut base, mut size) = self.bounds(vaddr);
        while size > 1 {
            // Within `base..base + size`, inside the table: no overflow.
            let half = size / 2;
            if at_or_below(base.wrapping_add(half)) {
                base = base.wrapping_add(half);
            }
            size = size.wrapping_sub(half);
        }
        at_or_below(base).then_some(base)
    }

    /// What FDE `i`'s word says.
    #[inline]
    pub fn rows(&self, i: usize) -> Rows {
        if i >= self.count {
            return Rows::Unkept;
        }
        let Some(w) = self.w.get(fde_words(self.count) + i) else {
            return Rows::Unkept;
        };
        match w.load(Ordering::Acquire) {
            0 => Rows::Unseen,
            UNKEPT => Rows::Unkept,
            v => Rows::Kept {
                first: (v & 0x0fff_ffff) as usize,
                n: ((v >> 28) & 0xfff) as usize,
                len: v >> 40,
            },
        }
    }

    /// The three words of the row in force `off` bytes into an FDE whose rows `rows` says
    /// are kept (the third without the row's first address); `None` when `off` is past
    /// the FDE's range.
    pub fn row(&self, rows: Rows, off: u64) -> Option<[u64; 3]> {
        let Rows::Kept { first, n, len } = rows else {
            return None;
        };
        if off >= len || n == 0 || first.checked_add(n)? > self.cap {
            return None;
        }
        // The FDE's rows, three words each. The sums cannot overflow: `View::new` found
        // the table's `words(count, cap)` words, and `first + n <= cap`; they wrap rather
        // than carry the kernel's overflow checks, and `get` checks every index anyway.
        let at = row_words(self.count).wrapping_add(first.wrapping_mul(3));
        let kept = self.w.get(at..at.wrapping_add(n.wrapping_mul(3)))?;
        let word = |i: usize| kept.get(i).map_or(0, |w| w.load(Ordering::Relaxed));
        // The last row starting at or below `off`; the first starts at 0.
        let (mut lo, mut hi) = (1usize, n);
        while lo < hi {
            let mid = lo.wrapping_add(hi.wrapping_sub(lo) / 2);
            if (word(mid.wrapping_mul(3).wrapping_add(2)) >> 8) & 0xff_ffff <= off {
                lo = mid.wrapping_add(1);
            } else {
                hi = mid;
            }
        }
        let r = lo.wrapping_sub(1).wrapping_mul(3);
        Some([
            word(r),
            word(r.wrapping_add(1)),
            word(r.wrapping_add(2)) & !0xffff_ff00,
        ])
    }
}

/// Writes the head of a new table into `w` (zeroed, [`words`]`(count, cap)` long): `count`
/// FDEs, room for `cap` rows, the object's description `info`.
pub fn init(w: &[AtomicU64], count: usize, cap: usize, info: &[u64; INFO_WORDS]) -> Option<()> {
    if w.len() < words(count, cap)? {
        return None;
    }
    let count32 = u32::try_from(count).ok()?;
    w.first()?
        .store(MAGIC << 32 | u64::from(count32), Ordering::Relaxed);
    w.get(1)?.store(cap as u64, Ordering::Relaxed);
    w.get(2)?.store(0, Ordering::Relaxed);
    w.get(SHIFT)?.store(NO_INDEX, Ordering::Relaxed);
    for (i, v) in info.iter().enumerate() {
        w.get(SHIFT + 1 + i)?.store(*v, Ordering::Relaxed);
    }
    Some(())
}

/// Sets entry `i` of the search table of the new table `w`; `None` when an address does
/// not fit in 32 bits (the table is not kept).
pub fn set_entry(w: &[AtomicU64], i: usize, e: Entry) -> Option<()> {
    let initial = u32::try_from(e.initial).ok()?;
    let fde = u32::try_from(e.fde).ok()?;
    w.get(HEAD + i)?
        .store(u64::from(initial) | u64::from(fde) << 32, Ordering::Relaxed);
    Some(())
}

/// Sorts the search table of the new table `w` by first address (then by FDE address),
/// in place: a heapsort, without recursion or memory, `count * log2(count)` steps at most
/// (a table made from `.eh_frame` itself, whose FDEs need not be in address order).
pub fn sort(w: &[AtomicU64]) -> Option<()> {
    let count = View::new(w)?.count;
    let entries = w.get(HEAD..HEAD.checked_add(count)?)?;
    // The order: the first address (the low half) first.
    let key = |i: usize| {
        entries
            .get(i)
            .map_or(0, |e| e.load(Ordering::Relaxed).rotate_left(32))
    };
    let swap = |a: usize, b: usize| {
        if let (Some(x), Some(y)) = (entries.get(a), entries.get(b)) {
            let t = x.load(Ordering::Relaxed);
            x.store(y.load(Ordering::Relaxed), Ordering::Relaxed);
            y.store(t, Ordering::Relaxed);
        }
    };
    // Moves entry `root` down the heap of the first `n` entries. Indices stay below
    // `n <= count`, whose table's words were found: no overflow.
    let sift = |mut root: usize, n: usize| loop {
        let left = root.wrapping_mul(2).wrapping_add(1);
        if left >= n {
            break;
        }
        let right = left.wrapping_add(1);
        let child = if right < n && key(right) > key(left) {
            right
        } else {
            left
        };
        if key(child) <= key(root) {
            break;
        }
        swap(root, child);
        root = child;
    };
    for root in (0..count / 2).rev() {
        sift(root, count);
    }
    for n in (1..count).rev() {
        swap(0, n);
        sift(0, n);
    }
    Some(())
}

/// Whether the search table of `view` is sorted, as a bisection needs (checked once, before
/// the table is published).
pub fn sorted(view: &View<'_>) -> bool {
    (1..view.count).all(|i| view.entry(i - 1).initial <= view.entry(i).initial)
}

/// Writes the search index of the new table `w`, whose search table is set and sorted: the
/// smallest shift that makes the FDEs' addresses fit in [`spans`] spans, and per span the
/// last FDE at or below its start (the first FDE for the first span).
pub fn index(w: &[AtomicU64]) -> Option<()> {
    let view = View::new(w)?;
    let count = view.count;
    if count == 0 {
        return Some(());
    }
    let first = view.entry(0).initial;
    let range = view.entry(count - 1).initial.checked_sub(first)?;
    let spans = spans(count);
    let shift = (0..=32u32).find(|&s| (range >> s) < spans as u64)?;
    let base = index_start(count);
    let mut i = 0;
    for span in 0..spans {
        let start = first + ((span as u64) << shift);
        while i + 1 < count && view.entry(i + 1).initial <= start {
            i += 1;
        }
        let word = w.get(base + span / 2)?;
        let half = (i as u64) << (32 * (span % 2));
        word.store(word.load(Ordering::Relaxed) | half, Ordering::Relaxed);
    }
    w.get(SHIFT)?.store(u64::from(shift), Ordering::Relaxed);
    Some(())
}

/// Why an FDE's rows were not added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Add {
    /// The table needs this many words (copy it into a table that large, then add).
    Room(usize),
    /// The FDE's rows are there already, or the table is not one.
    Done,
}

/// Adds FDE `i`'s rows `rows` (row words with their first address in the third's bits
/// 8-31), covering `len` bytes, to the table `w`, or marks it [`Rows::Unkept`] when
/// `rows` is `None`. The caller holds the writers' lock.
pub fn add(w: &[AtomicU64], i: usize, rows: Option<&[[u64; 3]]>, len: u64) -> Result<(), Add> {
    let view = View::new(w).ok_or(Add::Done)?;
    if view.rows(i) != Rows::Unseen {
        return Err(Add::Done);
    }
    let slot = w.get(fde_words(view.count) + i).ok_or(Add::Done)?;
    let Some(rows) = rows.filter(|r| !r.is_empty() && r.len() <= FDE_ROWS_MAX && len < 1 << 24)
    else {
        slot.store(UNKEPT, Ordering::Release);
        return Ok(());
    };
    let used = view.used();
    let end = used.checked_add(rows.len()).ok_or(Add::Done)?;
    if end > view.cap {
        // Twice the rows, and at least one for every eighth FDE: a grow copies the whole
        // table, whose search table a big file's FDEs make large (cc1's 45,201: 900 KiB),
        // so a big file grows once or twice, not once per doubling from FIRST_ROWS.
        let cap = end
            .max(view.cap.saturating_mul(2))
            .max(view.count / GROW_FDES_PER_ROW);
        return Err(Add::Room(words(view.count, cap).ok_or(Add::Done)?));
    }
    if end > 0x0fff_ffff {
        slot.store(UNKEPT, Ordering::Release);
        return Ok(());
    }
    let base = row_words(view.count) + 3 * used;
    for (k, row) in rows.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            w.get(base + 3 * k + j)
                .ok_or(Add::Done)?
                .store(*v, Ordering::Relaxed);
        }
    }
    w.get(2)
        .ok_or(Add::Done)?
        .store(end as u64, Ordering::Relaxed);
    slot.store(
        used as u64 | (rows.len() as u64) << 28 | len << 40,
        Ordering::Release,
    );
    Ok(())
}

/// Copies the table `old` into the larger `new` (zeroed, `new.len()` words), with as much
/// room for rows as `new` has. The caller holds the writers' lock.
pub fn grow(old: &[AtomicU64], new: &[AtomicU64]) -> Option<()> {
    let view = View::new(old)?;
    let rows = |w: usize| w.checked_sub(row_words(view.count)).map(|r| r / 3);
    let cap = rows(new.len())?;
    if cap < view.used() {
        return None;
    }
    let keep = row_words(view.count) + 3 * view.used();
    for (n, o) in new.iter().zip(old.iter()).take(keep) {
        n.store(o.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    new.get(1)?.store(cap as u64, Ordering::Relaxed);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(count: usize, cap: usize) -> [AtomicU64; 96] {
        let w = [const { AtomicU64::new(0) }; 96];
        init(&w, count, cap, &[7; INFO_WORDS]).unwrap();
        w
    }

    fn row(start: u64, tag: u64) -> [u64; 3] {
        [tag, tag + 1, start << 8 | 3]
    }

    #[test]
    fn a_big_table_grows_to_a_row_for_every_eighth_fde() {
        let count = 800;
        let n = words(count, 4).unwrap();
        let w: std::vec::Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        init(&w, count, 4, &[7; INFO_WORDS]).unwrap();
        let rows = [row(0, 1), row(1, 2), row(2, 3), row(3, 4), row(4, 5)];
        // Five rows into room for four: twice four would do, a hundred are asked.
        assert_eq!(
            add(&w, 0, Some(&rows), 8),
            Err(Add::Room(words(count, count / 8).unwrap()))
        );
    }

    #[test]
    fn searches_and_finds_rows() {
        let w = table(3, 4);
        for (i, initial) in [0x1000u64, 0x1100, 0x2000].into_iter().enumerate() {
            set_entry(
                &w,
                i,
                Entry {
                    initial,
                    fde: 0x9000 + i as u64,
                },
            )
            .unwrap();
        }
        let v = View::new(&w).unwrap();
        assert!(sorted(&v));
        assert_eq!(v.info(), [7; INFO_WORDS]);
        assert_eq!(v.search(0xfff), None);
        assert_eq!(v.search(0x10ff), Some(0));
        assert_eq!(v.search(0x1100), Some(1));
        assert_eq!(v.search(u64::from(u32::MAX) + 1), None);
        assert_eq!(v.entry(2).fde, 0x9002);
        assert_eq!(v.rows(1), Rows::Unseen);
        add(&w, 1, Some(&[row(0, 10), row(4, 20), row(9, 30)]), 0x40).unwrap();
        assert_eq!(add(&w, 1, Some(&[row(0, 1)]), 1), Err(Add::Done));
        let v = View::new(&w).unwrap();
        let r = v.rows(1);
        assert_eq!(
            r,
            Rows::Kept {
                first: 0,
                n: 3,
                len: 0x40
            }
        );
        assert_eq!(v.row(r, 0), Some([10, 11, 3]));
        assert_eq!(v.row(r, 3), Some([10, 11, 3]));
        assert_eq!(v.row(r, 4), Some([20, 21, 3]));
        assert_eq!(v.row(r, 0x3f), Some([30, 31, 3]));
        assert_eq!(v.row(r, 0x40), None);
        // Full: room asked, then the copy takes it.
        assert_eq!(
            add(&w, 0, Some(&[row(0, 1), row(1, 2)]), 8),
            Err(Add::Room(words(3, 8).unwrap()))
        );
        let big = [const { AtomicU64::new(0) }; 96];
        grow(&w, &big[..words(3, 8).unwrap()]).unwrap();
        add(&big, 0, Some(&[row(0, 1), row(1, 2)]), 8).unwrap();
        let v = View::new(&big).unwrap();
        assert_eq!(v.row(v.rows(1), 5), Some([20, 21, 3]));
        assert_eq!(v.row(v.rows(0), 1), Some([2, 3, 3]));
        add(&big, 2, None, 8).unwrap();
        assert_eq!(View::new(&big).unwrap().rows(2), Rows::Unkept);
    }

    #[test]
    fn search_finds_the_last_entry_at_or_below() {
        let first = |i: usize| 0x1000 + 16 * i as u64;
        for count in (0..).take_while(|&c| words(c, 0).is_some_and(|w| w <= 96)) {
            let t = table(count, 0);
            for i in 0..count {
                set_entry(
                    &t,
                    i,
                    Entry {
                        initial: first(i),
                        fde: 0,
                    },
                )
                .unwrap();
            }
            let v = View::new(&t).unwrap();
            for vaddr in 0xff0..first(count) + 8 {
                let want = (0..count).rev().find(|&i| first(i) <= vaddr);
                assert_eq!(v.search(vaddr), want, "{count} entries, {vaddr:#x}");
            }
        }
    }

    #[test]
    fn the_search_index_gives_what_the_whole_bisection_gives() {
        // FDEs of uneven sizes (some sharing a first address, some far apart), as many as
        // make spans of every shift from 0 up.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for count in [1, 2, 3, 4, 5, 7, 16, 33, 100, 1000] {
            let mut all = [0u64; 1000];
            let starts = &mut all[..count];
            let mut at = 0x40_0000 + (x >> 40);
            for s in starts.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *s = at;
                at += [0, 1, 16, 48, 200, 4096, 1 << 20][(x % 7) as usize];
            }
            let starts = &*starts;
            let all_words = [const { AtomicU64::new(0) }; 2400];
            let w = &all_words[..words(count, 0).unwrap()];
            init(w, count, 0, &[0; INFO_WORDS]).unwrap();
            for (i, &initial) in starts.iter().enumerate() {
                set_entry(w, i, Entry { initial, fde: 0 }).unwrap();
            }
            let mut whole = [None; 3000];
            let v = View::new(w).unwrap();
            let probes = starts.iter().flat_map(|&s| [s - 1, s, s + 1]);
            for (p, slot) in probes.zip(whole.iter_mut()) {
                *slot = v.search(p);
            }
            index(w).unwrap();
            let v = View::new(w).unwrap();
            assert!(v.word(SHIFT) <= 32, "{count} FDEs have an index");
            let probes = starts.iter().flat_map(|&s| [s - 1, s, s + 1]);
            for (p, want) in probes.zip(&whole) {
                assert_eq!(v.search(p), *want, "{count} FDEs, {p:#x}");
                let last = starts.iter().rposition(|&s| s <= p);
                assert_eq!(
                    v.search(p).map(|i| starts[i]),
                    last.map(|i| starts[i]),
                    "{count} FDEs, {p:#x}"
                );
            }
            assert_eq!(v.search(u64::from(u32::MAX)), Some(count - 1));
        }
    }

    #[test]
    fn sorts_the_search_table() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for count in [0usize, 1, 2, 3, 5, 8, 17, 28] {
            let w = table(count, 0);
            let mut want = std::vec::Vec::new();
            for i in 0..count {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Few distinct first addresses: ties are ordered by the FDE's address.
                let e = Entry {
                    initial: 0x1000 + (x % 7) * 16,
                    fde: 0x9000 + (x >> 40) % 64 + i as u64 * 64,
                };
                set_entry(&w, i, e).unwrap();
                want.push((e.initial, e.fde));
            }
            want.sort();
            sort(&w).unwrap();
            let v = View::new(&w).unwrap();
            assert!(sorted(&v));
            let got: std::vec::Vec<_> = (0..count)
                .map(|i| (v.entry(i).initial, v.entry(i).fde))
                .collect();
            assert_eq!(got, want, "{count}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_table() {
        let w = [const { AtomicU64::new(0) }; 8];
        assert!(View::new(&w).is_none());
        assert!(init(&w, 3, 4, &[0; INFO_WORDS]).is_none());
        let w = table(2, 2);
        assert!(set_entry(
            &w,
            0,
            Entry {
                initial: 1 << 32,
                fde: 0
            }
        )
        .is_none());
        set_entry(&w, 0, Entry { initial: 9, fde: 0 }).unwrap();
        set_entry(&w, 1, Entry { initial: 8, fde: 0 }).unwrap();
        assert!(!sorted(&View::new(&w).unwrap()));
        // A count past the words is not a table.
        w[0].store(MAGIC << 32 | 1000, Ordering::Relaxed);
        assert!(View::new(&w).is_none());
    }
}
