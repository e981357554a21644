// SPDX-License-Identifier: GPL-2.0

//! Turning the user IPs of one stack into a `user_unwind_stack` record.
//!
//! This is all the work done at stack time, as the review of the seed series asked: look up the
//! VMA of each frame (reusing the previous one while frames stay inside it), compute the offset
//! in the mapped file and take the file's cookie. A file cookie names the file's identity, as
//! `/proc/PID/maps` shows it (device and inode, with the generation and change time that tell
//! apart a reused inode number or a file rewritten in place: [`FileId`]), hashed under the
//! module's secret key: the same for every process that maps the file, never a kernel
//! address, and never the name of another file.
//!
//! A record is compact ([`Record`]): the distinct file cookies of its frames once, in a table,
//! and per frame one 32-bit word, its index into that table in the top bits (as many as the
//! table needs: none for one file, two for up to four) and its offset in the others, 4 bytes
//! a frame instead of the 16 of an (offset, cookie) pair. A record with a value that does
//! not fit (a raw address, an offset in a file beyond what the index leaves) is wide: a
//! second word a frame holds the index and the high half, 8 bytes a frame.

#![forbid(unsafe_code)]

use super::offset::Mapping;
use super::siphash::siphash;
use super::siphash::SipKey;

/// File cookie of a frame that lies in no VMA; its value is the raw address.
pub const COOKIE_NO_MAPPING: u64 = 0;
/// File cookie of a frame in anonymous memory without a name (JIT code, say); its value is
/// the raw address, which is what `/tmp/perf-PID.map` files name.
pub const COOKIE_NO_FILE: u64 = 1;

/// Frames per `user_unwind_stack` record. A deeper stack is split into several records that
/// share the unwind cookie and say where they start, so nothing is cut silently. A record of
/// 64 frames is at most 1.1 KiB: it always fits a ring-buffer sub-buffer, and an index
/// takes at most 6 bits.
pub const CHUNK_FRAMES: usize = 64;

/// The identity of a mapped file: the device and inode number of the inode whose bytes the
/// mapping holds (for overlayfs, the layer's real file, not the overlay inode
/// `/proc/PID/maps` shows: `uu_vma_file_id()` in `src/files.c`), and what tells apart
/// two files behind those numbers: the inode's generation (a filesystem that reuses an
/// inode number gives the new inode another generation, or at least another change time)
/// and its change time, which moves whenever the file's contents or metadata change and
/// which no user can set back. Read under the VMA's lock, by the glue, in C's layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileId {
    /// `i_ino`.
    pub ino: u64,
    /// The seconds of the change time (`inode_get_ctime()`).
    pub ctime_sec: i64,
    /// `i_sb->s_dev`, as `/proc/PID/maps` prints it.
    pub dev: u32,
    /// `i_generation`.
    pub generation: u32,
    /// The nanoseconds of the change time.
    pub ctime_nsec: u32,
    /// Keeps the layout free of padding; always 0.
    pub pad: u32,
}

impl FileId {
    /// The bytes hashed for the cookie: the fields in a fixed order, little-endian, so the
    /// cookie does not depend on the layout.
    pub fn to_bytes(&self) -> [u8; 28] {
        let mut out = [0u8; 28];
        let fields: [&[u8]; 5] = [
            &self.ino.to_le_bytes(),
            &self.ctime_sec.to_le_bytes(),
            &self.dev.to_le_bytes(),
            &self.generation.to_le_bytes(),
            &self.ctime_nsec.to_le_bytes(),
        ];
        let mut at = 0;
        for field in fields.iter() {
            if let Some(dst) = out.get_mut(at..at + field.len()) {
                dst.copy_from_slice(field);
            }
            at += field.len();
        }
        out
    }
}

/// What backs a VMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A file a symbolizer can open: its [`file_cookie`]. Frames are file offsets.
    File(u64),
    /// A mapping the kernel names without a file (`[vdso]`): its [`name_cookie`]. Frames are
    /// offsets from its start, as for a file mapped at offset 0.
    Special(u64),
    /// Anonymous memory, with the [`name_cookie`] of its name (`[anon:...]`) if it has one.
    /// Frames are raw addresses.
    Anonymous(Option<u64>),
}

/// What the translation needs to know of a VMA, copied out under its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    /// Its address range and file page offset.
    pub map: Mapping,
    /// What it maps.
    pub backing: Backing,
}

/// The address space of the task being unwound.
pub trait AddressSpace {
    /// The VMA containing `addr`, if any, with the cookie of its file or name.
    fn lookup(&mut self, addr: u64) -> Option<Vma>;
}

/// The cookie of a file: SipHash-2-4 of its [`FileId`] under the module's secret file key,
/// moved off the two reserved values (a 2^-63 chance per file).
pub fn file_cookie(id: &FileId, key: &SipKey) -> u64 {
    unreserved(siphash(&id.to_bytes(), key))
}

/// Moves a hash off the reserved cookie values 0 and 1.
fn unreserved(hash: u64) -> u64 {
    if hash <= COOKIE_NO_FILE {
        hash + 2
    } else {
        hash
    }
}

/// The cookie of a named mapping without a file: SipHash-2-4 of the name, under `key`, the
/// module's name key, drawn independently of the file key. A name is its own identity: the
/// cookie means the same thing for as long as the key lives, so it needs no lifetime
/// tracking.
pub fn name_cookie(name: &[u8], key: &SipKey) -> u64 {
    unreserved(siphash(name, key))
}

/// The unwinder's cache key of a vDSO image: SipHash-2-4 of `[vdso]` and the image's
/// identity (`image`: which image the task maps and its size, as `src/unwind.c` fills it),
/// under the name key. One mapping name serves several images (64-bit, 32-bit, x32), whose
/// tables differ: each image is a key of its own.
pub fn vdso_key(image: &FileId, key: &SipKey) -> u64 {
    let mut bytes = [0u8; 6 + 28];
    bytes[..6].copy_from_slice(b"[vdso]");
    bytes[6..].copy_from_slice(&image.to_bytes());
    unreserved(siphash(&bytes, key))
}

/// Bits of a frame's value, signed: every value is in `[-2^57, 2^57)` as an `i64` (a
/// value outside is recorded as [`VALUE_MAX`]: no user address, no canonical kernel
/// address and no offset in a file below 128 PiB is), so that a wide record's high half,
/// sign-extended, has room for a file index of up to [`IDX_BITS_MAX`] bits. A raw address
/// in the kernel half (a return address the unwinder found outside user space) is
/// negative.
pub const VALUE_BITS: u32 = 58;
/// The largest value a frame records.
pub const VALUE_MAX: u64 = (1 << (VALUE_BITS - 1)) - 1;

/// `value` if it is one a frame can record, else [`VALUE_MAX`].
fn fit(value: u64) -> u64 {
    match (value as i64) >> (VALUE_BITS - 1) {
        0 | -1 => value,
        _ => VALUE_MAX,
    }
}

/// `value` sign-extended from its low `64 - bits` bits.
fn sign_extend(value: u64, bits: u32) -> u64 {
    ((value << bits) as i64 >> bits) as u64
}
/// Bits of the widest file index: a record has at most [`CHUNK_FRAMES`] files.
pub const IDX_BITS_MAX: u32 = 64 - VALUE_BITS;

/// The frames of one `user_unwind_stack` record, in the event's layout: `files` the distinct
/// file cookies and, per frame, one 32-bit word holding the index of its file in `files` in
/// its top `idx_bits` bits and its value in the others; a record with a value that does not
/// fit (a raw address, an offset beyond what the index leaves) is wide: the words hold the
/// low halves of the values, then as many words hold the index and the high halves, in the
/// same way.
///
/// A record whose values all fit in 26 bits (the common case: offsets in files below 64
/// MiB) takes a 6-bit index whatever its number of files, so that each frame's word is final
/// as it is added and writing the event is a copy; only a record with a larger value takes
/// the fewest bits that number its files (or turns wide), in a pass over its frames.
/// While frames are added, `lo` holds each value's low half XORed with the index at bit
/// 26, and `hi` the index in the top [`IDX_BITS_MAX`] bits above the value's high half;
/// [`Record::pack`] turns that into the event's layout in place.
pub struct Record {
    files: [u64; CHUNK_FRAMES],
    nr_files: usize,
    lo: [u32; CHUNK_FRAMES],
    hi: [u32; CHUNK_FRAMES],
    nr: usize,
    /// Every value added, ORed: whether they all fit a narrow record.
    values: u64,
    /// `Some(idx_bits)` once packed.
    packed: Option<u32>,
}

impl Default for Record {
    fn default() -> Self {
        Self::new()
    }
}

/// High bits of a value, under the index while a record is filled.
const HI_VALUE_BITS: u32 = VALUE_BITS - 32;

/// The low `bits` bits of a word.
const fn mask(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    }
}

/// A record in the event's layout ([`Record::pack`]).
pub struct Packed<'a> {
    /// The distinct file cookies.
    pub files: &'a [u64],
    /// One word a frame: the low halves of the values (with the index in a narrow record).
    pub lo: &'a [u32],
    /// In a wide record, one more word a frame: the index and the high halves.
    pub hi: Option<&'a [u32]>,
    /// The bits of the index at the top of a frame's word.
    pub idx_bits: u8,
}

impl Record {
    /// An empty record.
    pub const fn new() -> Self {
        Record {
            files: [0; CHUNK_FRAMES],
            nr_files: 0,
            lo: [0; CHUNK_FRAMES],
            hi: [0; CHUNK_FRAMES],
            nr: 0,
            values: 0,
            packed: None,
        }
    }

    /// Empties the record for the next chunk.
    pub fn clear(&mut self) {
        self.nr_files = 0;
        self.nr = 0;
        self.values = 0;
        self.packed = None;
    }

    /// The index of `cookie` in the table, added if new. The table has room for one
    /// cookie per frame, so it never fills before the frames do.
    fn file_index(&mut self, cookie: u64) -> u8 {
        let n = self.nr_files;
        if let Some(i) = self.files[..n].iter().position(|&c| c == cookie) {
            return i as u8;
        }
        if let Some(slot) = self.files.get_mut(n) {
            *slot = cookie;
            self.nr_files = n + 1;
        }
        n as u8
    }

    /// Appends a frame whose file has table index `idx`; the caller checked for room.
    #[inline]
    fn push(&mut self, value: u64, idx: u8) {
        let i = self.nr;
        let (Some(lo), Some(hi)) = (self.lo.get_mut(i), self.hi.get_mut(i)) else {
            return;
        };
        let value = fit(value);
        // As the event holds it when every value fits beside a 6-bit index (XORed, so that
        // [`Record::pack`] can take it out again when one does not).
        *lo = value as u32 ^ u32::from(idx) << HI_VALUE_BITS;
        *hi = u32::from(idx) << HI_VALUE_BITS | ((value >> 32) as u32 & mask(HI_VALUE_BITS));
        self.values |= value;
        self.nr = i + 1;
    }

    /// How many frames the record holds.
    pub fn len(&self) -> usize {
        self.nr
    }

    /// Whether the record holds no frame.
    pub fn is_empty(&self) -> bool {
        self.nr == 0
    }

    /// The distinct file cookies.
    pub fn files(&self) -> &[u64] {
        &self.files[..self.nr_files]
    }

    /// The bits a file index takes in the event: the fewest that number every file.
    fn idx_bits(&self) -> u32 {
        match self.nr_files {
            0 | 1 => 0,
            n => usize::BITS - (n - 1).leading_zeros(),
        }
    }

    /// Whether the record is wide: some value does not fit beside the index.
    fn wide(&self, idx_bits: u32) -> bool {
        self.values > u64::from(mask(32 - idx_bits))
    }

    /// The record in the event's layout: the index moved to the top `idx_bits` bits of the
    /// word that holds it. Once packed, a record takes no more frames until cleared.
    pub fn pack(&mut self) -> Packed<'_> {
        let bits = match self.packed {
            Some(bits) => bits,
            None => {
                if self.values >> HI_VALUE_BITS == 0 {
                    // Every value fits beside a 6-bit index: the words are as pushed.
                    self.packed = Some(IDX_BITS_MAX);
                    return Packed {
                        files: &self.files[..self.nr_files],
                        lo: &self.lo[..self.nr],
                        hi: None,
                        idx_bits: IDX_BITS_MAX as u8,
                    };
                }
                let bits = self.idx_bits();
                let n = self.nr;
                let (lo, hi) = (&mut self.lo[..n], &mut self.hi[..n]);
                for (lo, hi) in lo.iter_mut().zip(hi.iter()) {
                    *lo ^= *hi & !mask(HI_VALUE_BITS);
                }
                if self.values > u64::from(mask(32 - bits)) {
                    // Wide: the index moves down to the top `bits` bits of the high word.
                    for hi in hi {
                        let top = (u64::from(*hi >> HI_VALUE_BITS) << (32 - bits)) as u32;
                        // The high half, sign-extended to the bits beside the index.
                        let high = ((*hi << IDX_BITS_MAX) as i32 >> IDX_BITS_MAX) as u32;
                        *hi = top | (high & mask(32 - bits));
                    }
                } else if bits > 0 {
                    // Narrow: `hi` is the index at bit HI_VALUE_BITS alone (the values'
                    // high halves are 0); moved to the top `bits` bits of the low word.
                    let up = IDX_BITS_MAX - bits;
                    for (lo, hi) in lo.iter_mut().zip(hi.iter()) {
                        *lo |= *hi << up;
                    }
                }
                self.packed = Some(bits);
                bits
            }
        };
        let wide = self.wide(bits);
        Packed {
            files: &self.files[..self.nr_files],
            lo: &self.lo[..self.nr],
            hi: wide.then(|| &self.hi[..self.nr]),
            idx_bits: bits as u8,
        }
    }

    /// Frame `i` as (value, file cookie), packed or not.
    pub fn frame(&self, i: usize) -> Option<(u64, u64)> {
        let lo = *self.lo[..self.nr].get(i)?;
        let hi = self.hi[i];
        let (idx, value) = match self.packed {
            None => (
                hi >> HI_VALUE_BITS,
                sign_extend(
                    u64::from(hi & mask(HI_VALUE_BITS)) << 32
                        | u64::from(lo ^ (hi & !mask(HI_VALUE_BITS))),
                    IDX_BITS_MAX,
                ),
            ),
            Some(bits) => {
                let word = if self.wide(bits) { hi } else { lo };
                let idx = if bits == 0 { 0 } else { word >> (32 - bits) };
                let value = if self.wide(bits) {
                    sign_extend(u64::from(hi & mask(32 - bits)) << 32 | u64::from(lo), bits)
                } else {
                    u64::from(lo & mask(32 - bits))
                };
                (idx, value)
            }
        };
        let file = *self.files().get(idx as usize)?;
        Some((value, file))
    }

    /// Frame `i`'s index into [`Record::files`].
    pub fn idx(&self, i: usize) -> Option<u8> {
        let (_, file) = self.frame(i)?;
        self.files()
            .iter()
            .position(|&f| f == file)
            .map(|i| i as u8)
    }
}

/// The last VMA looked up, as the hot loop needs it: a frame at `ip` inside `[start, end)`
/// has the value `ip + delta` (wrapping; checked once, when the VMA was looked up).
#[derive(Clone, Copy)]
struct Remembered {
    start: u64,
    end: u64,
    delta: u64,
    cookie: u64,
}

impl Remembered {
    /// No VMA: no frame is in it.
    const EMPTY: Self = Remembered {
        start: 0,
        end: 0,
        delta: 0,
        cookie: 0,
    };

    /// What a frame in `vma` records: its offset in the file, its offset from the start of a
    /// special mapping, or the address itself in anonymous memory. `None` when an offset in
    /// the VMA does not fit in [`VALUE_BITS`] bits.
    fn new(vma: &Vma, cookie: u64, page_shift: u32) -> Option<Self> {
        let map = vma.map;
        let base = match vma.backing {
            Backing::File(_) => map.file_offset(map.start, page_shift).ok()?,
            Backing::Special(_) => 0,
            Backing::Anonymous(_) => map.start,
        };
        // The value of the VMA's last byte fits, so every value in it does.
        let last = base.checked_add(map.end.checked_sub(map.start)?.checked_sub(1)?)?;
        if last > VALUE_MAX {
            return None;
        }
        Some(Remembered {
            start: map.start,
            end: map.end,
            delta: base.wrapping_sub(map.start),
            cookie,
        })
    }

    fn value(&self, ip: u64) -> Option<u64> {
        (self.start <= ip && ip < self.end).then(|| ip.wrapping_add(self.delta))
    }
}

/// VMAs a translator remembers: a stack that goes back and forth between a program and its
/// libraries (a callback, an interpreter and its extensions) looks each VMA up once.
const RECENT: usize = 4;

/// Translates the frames of one stack, remembering the last [`RECENT`] VMAs and their
/// cookies across calls.
pub struct Translator {
    page_shift: u32,
    /// The VMA of the last frame translated, which the hot loop checks first.
    last: Option<Remembered>,
    /// The ones before it, the most recently used first ([`Remembered::EMPTY`] when none).
    older: [Remembered; RECENT - 1],
    lookups: usize,
}

impl Translator {
    /// A translator for pages of `1 << page_shift` bytes.
    pub fn new(page_shift: u32) -> Self {
        Translator {
            page_shift,
            last: None,
            older: [Remembered::EMPTY; RECENT - 1],
            lookups: 0,
        }
    }

    /// Forgets the remembered VMAs whose cookie `keep` refuses, so that the next frames in
    /// them are looked up again: a stack's next record keeps the VMAs of files whose
    /// `file_cache` is known to be in the trace, and looks up (and so holds) the others.
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        if self.last.is_some_and(|r| !keep(r.cookie)) {
            self.last = None;
        }
        for r in &mut self.older {
            if r.end > r.start && !keep(r.cookie) {
                *r = Remembered::EMPTY;
            }
        }
    }

    /// How many VMA lookups the translation has made so far.
    pub fn lookups(&self) -> usize {
        self.lookups
    }

    /// Translates `ips` into `rec`, after the frames it holds; returns how many frames were
    /// added, at most the room left in it.
    pub fn translate(
        &mut self,
        space: &mut impl AddressSpace,
        ips: impl IntoIterator<Item = u64>,
        rec: &mut Record,
    ) -> usize {
        let before = rec.len();
        // The index in `rec` of the remembered VMA's cookie, once looked up.
        let mut last_idx = None;
        for ip in ips {
            if rec.len() == CHUNK_FRAMES {
                break;
            }
            let remembered = self.last.and_then(|r| Some((r.value(ip)?, r.cookie)));
            let (value, idx) = match (remembered, last_idx) {
                // The hot path: a frame in the same VMA as the one before.
                (Some((value, _)), Some(idx)) => (value, idx),
                _ => {
                    let (value, cookie) = remembered.unwrap_or_else(|| self.miss(space, ip));
                    let idx = rec.file_index(cookie);
                    // A frame in no VMA leaves the remembered VMA as it was, and no index.
                    last_idx = (cookie != COOKIE_NO_MAPPING).then_some(idx);
                    (value, idx)
                }
            };
            rec.push(value, idx);
        }
        rec.len() - before
    }

    /// Finds the VMA of `ip` among the older ones remembered, or looks it up, and makes it
    /// the last: the frame's value and cookie.
    fn miss(&mut self, space: &mut impl AddressSpace, ip: u64) -> (u64, u64) {
        for n in 0..self.older.len() {
            let r = self.older[n];
            if let Some(value) = r.value(ip) {
                // The last becomes the most recent of the older ones.
                for i in (1..=n).rev() {
                    self.older[i] = self.older[i - 1];
                }
                self.older[0] = self.last.replace(r).unwrap_or(Remembered::EMPTY);
                return (value, r.cookie);
            }
        }
        self.lookups += 1;
        let Some(vma) = space.lookup(ip) else {
            return (ip, COOKIE_NO_MAPPING);
        };
        let cookie = match vma.backing {
            Backing::File(cookie) | Backing::Special(cookie) | Backing::Anonymous(Some(cookie)) => {
                cookie
            }
            Backing::Anonymous(None) => COOKIE_NO_FILE,
        };
        let Some(r) = Remembered::new(&vma, cookie, self.page_shift) else {
            return (ip, COOKIE_NO_MAPPING);
        };
        let Some(value) = r.value(ip) else {
            return (ip, COOKIE_NO_MAPPING);
        };
        if let Some(last) = self.last.replace(r) {
            for i in (1..self.older.len()).rev() {
                self.older[i] = self.older[i - 1];
            }
            self.older[0] = last;
        }
        (value, cookie)
    }
}

/// The `(start, len)` of each record a stack of `total` frames is split into.
pub fn chunks(total: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..total)
        .step_by(CHUNK_FRAMES)
        .map(move |start| (start, (total - start).min(CHUNK_FRAMES)))
}

#[cfg(test)]
mod tests {
    use super::super::siphash::TEST_KEY;
    use super::*;
    use std::vec::Vec;

    /// A fixed list of VMAs standing in for a process image.
    struct Space(&'static [Vma]);

    impl AddressSpace for Space {
        fn lookup(&mut self, addr: u64) -> Option<Vma> {
            self.0.iter().copied().find(|v| v.map.contains(addr))
        }
    }

    const EXE: u64 = 0x5c1d_0e9b_3a7f_4e21;
    const LIB: u64 = 0x2b6e_91c4_07fa_d853;
    const VDSO: u64 = 0x1234_5678_9abc_def0;
    const JIT: u64 = 0x0fed_cba9_8765_4321;
    const SPACE: &[Vma] = &[
        Vma {
            map: Mapping {
                start: 0x40_0000,
                end: 0x40_2000,
                pgoff: 1,
            },
            backing: Backing::File(EXE),
        },
        Vma {
            map: Mapping {
                start: 0x7f00_0000,
                end: 0x7f00_4000,
                pgoff: 0,
            },
            backing: Backing::File(LIB),
        },
        Vma {
            map: Mapping {
                start: 0x7ffd_0000,
                end: 0x7ffd_2000,
                pgoff: 0x12345,
            },
            backing: Backing::Anonymous(None),
        },
        Vma {
            map: Mapping {
                start: 0x7ffe_0000,
                end: 0x7ffe_2000,
                pgoff: 0x7ffe0,
            },
            backing: Backing::Special(VDSO),
        },
        Vma {
            map: Mapping {
                start: 0x7fff_1234_0000,
                end: 0x7fff_1235_0000,
                pgoff: 0x7_fff1_2340,
            },
            backing: Backing::Anonymous(Some(JIT)),
        },
    ];

    fn frames(rec: &Record) -> Vec<(u64, u64)> {
        (0..rec.len()).map(|i| rec.frame(i).unwrap()).collect()
    }

    fn idx(rec: &Record) -> Vec<u8> {
        (0..rec.len()).map(|i| rec.idx(i).unwrap()).collect()
    }

    fn translate(ips: &[u64]) -> Record {
        let mut rec = Record::new();
        let mut t = Translator::new(12);
        assert_eq!(
            t.translate(&mut Space(SPACE), ips.iter().copied(), &mut rec),
            ips.len().min(CHUNK_FRAMES)
        );
        rec
    }

    #[test]
    fn frames_get_file_offsets_and_per_file_cookies() {
        let rec = translate(&[0x7f00_0010, 0x40_0100, 0x40_0200, 0x7ffd_0008, 0x1234]);
        let (exe, lib) = (EXE, LIB);
        assert_ne!(exe, lib);
        assert_eq!(
            frames(&rec),
            [
                (0x10, lib),
                (0x1100, exe),
                (0x1200, exe),
                (0x7ffd_0008, COOKIE_NO_FILE),
                (0x1234, COOKIE_NO_MAPPING)
            ]
        );
    }

    #[test]
    fn a_record_holds_each_file_once_and_a_word_per_frame() {
        let mut rec = translate(&[
            0x40_0100,
            0x7f00_0010,
            0x40_0200,
            0x40_0300,
            0x7f00_0020,
            0x99,
        ]);
        let (exe, lib) = (EXE, LIB);
        assert_eq!(rec.files(), [exe, lib, COOKIE_NO_MAPPING]);
        assert_eq!(idx(&rec), [0, 1, 0, 0, 1, 2]);
        let before = frames(&rec);
        // Values below 2^26: the index takes the top 6 bits, as pushed.
        let p = rec.pack();
        assert_eq!(p.idx_bits, 6);
        assert_eq!(
            p.lo,
            [
                0x1100,
                0x0400_0010,
                0x1200,
                0x1300,
                0x0400_0020,
                0x0800_0099
            ]
        );
        assert_eq!(p.hi, None);
        assert_eq!(frames(&rec), before);
        // Packing twice changes nothing.
        assert_eq!(rec.pack().lo[1], 0x0400_0010);
        assert_eq!(frames(&rec), before);
    }

    #[test]
    fn index_bits_and_width_follow_every_frame_of_the_record() {
        // One file (no index bits), a value of 32 bits; then a second file: the first
        // value no longer fits beside a one-bit index, so the record turns wide.
        const SPC: &[Vma] = &[Vma {
            map: Mapping {
                start: 0x1000,
                end: 0x3000,
                pgoff: 0x000f_fff0,
            },
            backing: Backing::File(EXE),
        }];
        let mut rec = Record::new();
        let mut t = Translator::new(12);
        t.translate(&mut Space(SPC), [0x1000, 0x2000], &mut rec);
        t.translate(&mut Space(SPC), [0x10, 0x1008], &mut rec);
        let p = rec.pack();
        assert_eq!(p.idx_bits, 1);
        assert_eq!(p.lo, [0xffff_0000, 0xffff_1000, 0x10, 0xffff_0008]);
        assert_eq!(p.hi, Some(&[0, 0, 0x8000_0000, 0][..]));
        // Values below 2^26 keep the 6-bit index they were pushed with.
        let mut rec = translate(&[0x40_0100, 0x7f00_0010, 0x7ffe_0010, 0x40_0200]);
        let p = rec.pack();
        assert_eq!((p.idx_bits, p.hi), (6, None));
        assert_eq!(p.lo, [0x1100, 0x0400_0010, 0x0800_0010, 0x1200]);
        // A value of 2^26 with two files: the index taken out, then put back in one bit.
        const BIG: &[Vma] = &[Vma {
            map: Mapping {
                start: 0x1000,
                end: 0x2000,
                pgoff: 0x4000,
            },
            backing: Backing::File(EXE),
        }];
        let mut rec = Record::new();
        Translator::new(12).translate(&mut Space(BIG), [0x1000, 0x10], &mut rec);
        let before = frames(&rec);
        let p = rec.pack();
        assert_eq!((p.idx_bits, p.hi), (1, None));
        assert_eq!(p.lo, [0x0400_0000, 0x8000_0010]);
        assert_eq!(frames(&rec), before);
        let all: Vec<u64> = (0..5)
            .map(|i| [0x40_0100, 0x7f00_0010, 0x7ffe_0010, 0x7ffd_0008, 0x1234][i])
            .collect();
        let rec = translate(&all);
        assert_eq!(
            frames(&rec),
            [
                (0x1100, EXE),
                (0x10, LIB),
                (0x10, VDSO),
                (0x7ffd_0008, COOKIE_NO_FILE),
                (0x1234, COOKIE_NO_MAPPING)
            ]
        );
        assert_eq!(idx(&rec), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_kernel_half_address_is_recorded_whole() {
        const KADDR: u64 = 0xffff_ffff_8100_1234;
        let mut rec = translate(&[0x40_0100, KADDR]);
        let before = frames(&rec);
        assert_eq!(before, [(0x1100, EXE), (KADDR, COOKIE_NO_MAPPING)]);
        let p = rec.pack();
        assert_eq!(p.idx_bits, 1);
        assert_eq!(p.lo, [0x1100, 0x8100_1234]);
        // The high half sign-extended below the index: 0xffff_ffff less its top bit.
        assert_eq!(p.hi, Some(&[0, 0xffff_ffff][..]));
        assert_eq!(frames(&rec), before);
        // Alone, with no index bits, and beside five files.
        let mut rec = translate(&[KADDR]);
        assert_eq!(rec.pack().hi, Some(&[0xffff_ffff][..]));
        assert_eq!(frames(&rec), [(KADDR, COOKIE_NO_MAPPING)]);
        let ips = [
            0x40_0100,
            0x7f00_0010,
            0x7ffd_0008,
            0x7ffe_0010,
            0x7fff_1234_0008,
            KADDR,
        ];
        let mut rec = translate(&ips);
        rec.pack();
        assert_eq!(frames(&rec)[5], (KADDR, COOKIE_NO_MAPPING));
        // A non-canonical value is recorded as the largest value.
        let rec = translate(&[0x8000_0000_0000_0000]);
        assert_eq!(frames(&rec), [(VALUE_MAX, COOKIE_NO_MAPPING)]);
    }

    #[test]
    fn one_file_takes_no_index_bits() {
        let mut rec = translate(&[0x40_0100, 0x40_0200]);
        let p = rec.pack();
        assert_eq!((p.idx_bits, p.lo, p.hi), (6, &[0x1100, 0x1200][..], None));
        // A large offset: the fewest bits, none for one file.
        const BIG: &[Vma] = &[Vma {
            map: Mapping {
                start: 0x1000,
                end: 0x2000,
                pgoff: 0x000f_fff0,
            },
            backing: Backing::File(EXE),
        }];
        let mut rec = Record::new();
        Translator::new(12).translate(&mut Space(BIG), [0x1000], &mut rec);
        let p = rec.pack();
        assert_eq!((p.idx_bits, p.lo, p.hi), (0, &[0xffff_0000][..], None));
    }

    #[test]
    fn a_value_that_leaves_no_room_for_the_index_makes_the_record_wide() {
        // 0xffff_0000 fits 32 bits alone, not beside a one-bit index.
        const SPC: &[Vma] = &[Vma {
            map: Mapping {
                start: 0x1000,
                end: 0x2000,
                pgoff: 0x000f_fff0,
            },
            backing: Backing::File(EXE),
        }];
        let mut rec = Record::new();
        Translator::new(12).translate(&mut Space(SPC), [0x1000], &mut rec);
        assert_eq!(rec.pack().hi, None);
        let mut rec = Record::new();
        Translator::new(12).translate(&mut Space(SPC), [0x1000, 0x5000_0000], &mut rec);
        let p = rec.pack();
        assert_eq!(p.idx_bits, 1);
        assert_eq!(p.lo, [0xffff_0000, 0x5000_0000]);
        assert_eq!(p.hi, Some(&[0, 0x8000_0000][..]));
        assert_eq!(
            frames(&rec),
            [(0xffff_0000, EXE), (0x5000_0000, COOKIE_NO_MAPPING)]
        );
    }

    #[test]
    fn values_beyond_32_bits_make_the_record_wide() {
        let mut rec = translate(&[0x40_0100, 0x7fff_1234_5678]);
        let p = rec.pack();
        assert_eq!(p.lo, [0x1100, 0x1234_5678]);
        assert_eq!(p.hi, Some(&[0, 0x8000_7fff][..]));
        assert_eq!(frames(&rec)[1], (0x7fff_1234_5678, JIT));
        rec.clear();
        assert!(rec.is_empty() && rec.files().is_empty() && rec.pack().hi.is_none());
    }

    #[test]
    fn anonymous_memory_gives_addresses_special_mappings_offsets() {
        // The anonymous VMA's pgoff is ignored (mremap moves a VMA and keeps it).
        assert_eq!(
            frames(&translate(&[0x7ffd_0008])),
            [(0x7ffd_0008, COOKIE_NO_FILE)]
        );
        assert_eq!(frames(&translate(&[0x7ffe_0010])), [(0x10, VDSO)]);
    }

    #[test]
    fn a_frame_outside_every_vma_keeps_the_remembered_one() {
        let rec = translate(&[0x40_0100, 0x5000_0000, 0x40_0200]);
        let exe = EXE;
        assert_eq!(
            frames(&rec),
            [
                (0x1100, exe),
                (0x5000_0000, COOKIE_NO_MAPPING),
                (0x1200, exe)
            ]
        );
        assert_eq!(idx(&rec), [0, 1, 0]);
    }

    #[test]
    fn a_record_stops_at_chunk_frames_with_a_table_entry_per_file() {
        let ips: Vec<u64> = (0..100).map(|i| [0x40_0100, 0x7f00_0010][i % 2]).collect();
        let rec = translate(&ips);
        assert_eq!((rec.len(), rec.files().len()), (CHUNK_FRAMES, 2));
        // 64 frames each in no mapping: one table entry, one lookup each.
        let ips: Vec<u64> = (0..64).map(|i| 0x1000 * i).collect();
        let mut rec = Record::new();
        let mut t = Translator::new(12);
        t.translate(&mut Space(SPACE), ips.iter().copied(), &mut rec);
        assert_eq!((rec.len(), rec.files(), t.lookups()), (64, &[0][..], 64));
    }

    #[test]
    fn an_offset_beyond_64_bits_gives_the_raw_address() {
        const HUGE: &[Vma] = &[Vma {
            map: Mapping {
                start: 0x1000,
                end: 0x3000,
                pgoff: u64::MAX >> 12,
            },
            backing: Backing::File(EXE),
        }];
        let mut rec = Record::new();
        let mut t = Translator::new(12);
        t.translate(&mut Space(HUGE), [0x1008, 0x2008], &mut rec);
        assert_eq!(
            frames(&rec),
            [(0x1008, COOKIE_NO_MAPPING), (0x2008, COOKIE_NO_MAPPING)]
        );
    }

    #[test]
    fn vdso_keys_are_per_image() {
        let image = |ino, size| FileId {
            ino,
            ctime_sec: size,
            ..FileId::default()
        };
        let key = |ino, size| vdso_key(&image(ino, size), &TEST_KEY);
        let v64 = key(0xffff_ffff_8200_0000, 8192);
        assert_eq!(v64, key(0xffff_ffff_8200_0000, 8192));
        assert_ne!(v64, key(0xffff_ffff_8200_1000, 8192));
        assert_ne!(v64, key(0xffff_ffff_8200_0000, 4096));
        assert_ne!(v64, name_cookie(b"[vdso]", &TEST_KEY));
        assert!(v64 > COOKIE_NO_FILE);
    }

    #[test]
    fn name_cookies_are_per_name_and_not_file_cookies() {
        let vdso = name_cookie(b"[vdso]", &TEST_KEY);
        assert_eq!(vdso, name_cookie(b"[vdso]", &TEST_KEY));
        assert_ne!(vdso, name_cookie(b"[anon:jit]", &TEST_KEY));
        assert!(vdso > COOKIE_NO_FILE);
        // Under the module's two independent keys, the same bytes as a name and as a file
        // identity hash differently.
        let bytes = ID.to_bytes();
        let name_key = SipKey([TEST_KEY.0[1], TEST_KEY.0[0]]);
        assert_ne!(name_cookie(&bytes, &name_key), file_cookie(&ID, &TEST_KEY));
    }

    #[test]
    fn frames_back_and_forth_between_vmas_look_each_up_once() {
        // exe, lib, exe, vdso, lib, exe, ...: three VMAs, remembered together.
        let ips: Vec<u64> = (0..60)
            .map(|i| [0x40_0100, 0x7f00_0010, 0x40_0200, 0x7ffe_0010, 0x7f00_0020][i % 5])
            .collect();
        let mut rec = Record::new();
        let mut t = Translator::new(12);
        t.translate(&mut Space(SPACE), ips.iter().copied(), &mut rec);
        assert_eq!(t.lookups(), 3);
        let (exe, lib) = (EXE, LIB);
        assert_eq!(rec.files(), [exe, lib, VDSO]);
        assert_eq!(
            frames(&rec)[..6],
            [
                (0x1100, exe),
                (0x10, lib),
                (0x1200, exe),
                (0x10, VDSO),
                (0x20, lib),
                (0x1100, exe)
            ]
        );
        // Five VMAs in turn, one more than remembered: every frame is a lookup, and each
        // still gets its own cookie.
        let ips = [
            0x40_0100,
            0x7f00_0010,
            0x7ffd_0008,
            0x7ffe_0010,
            0x7fff_1234_0008,
        ];
        let ips: Vec<u64> = ips.iter().copied().cycle().take(20).collect();
        let mut rec = Record::new();
        let mut t = Translator::new(12);
        t.translate(&mut Space(SPACE), ips.iter().copied(), &mut rec);
        assert_eq!(t.lookups(), 20);
        assert_eq!(rec.files(), [exe, lib, COOKIE_NO_FILE, VDSO, JIT]);
        assert_eq!(idx(&rec)[15..], [0, 1, 2, 3, 4]);
        // Five files: three bits of index; the JIT's addresses make the record wide.
        let p = rec.pack();
        assert_eq!((p.idx_bits, p.hi.map(|hi| hi[19])), (3, Some(0x8000_7fff)));
        assert_eq!(frames(&rec)[19], (0x7fff_1234_0008, JIT));
    }

    #[test]
    fn a_translator_used_for_a_second_record_indexes_it_afresh() {
        let mut t = Translator::new(12);
        let (mut one, mut two) = (Record::new(), Record::new());
        t.translate(&mut Space(SPACE), [0x40_0100, 0x7f00_0010], &mut one);
        t.translate(&mut Space(SPACE), [0x7f00_0020, 0x40_0200], &mut two);
        let (exe, lib) = (EXE, LIB);
        assert_eq!(
            (two.files(), &idx(&two)[..]),
            (&[lib, exe][..], &[0, 1][..])
        );
        assert_eq!(frames(&two), [(0x20, lib), (0x1200, exe)]);
        assert_eq!(t.lookups(), 2);
    }

    #[test]
    fn a_translator_forgets_the_vmas_it_is_told_to() {
        let mut t = Translator::new(12);
        let mut rec = Record::new();
        let ips = [0x40_0100, 0x7f00_0010, 0x7ffe_0010];
        t.translate(&mut Space(SPACE), ips, &mut rec);
        assert_eq!(t.lookups(), 3);
        // The next record: the library's VMA forgotten, the others kept.
        t.retain(|cookie| cookie != LIB);
        rec.clear();
        t.translate(&mut Space(SPACE), ips, &mut rec);
        assert_eq!(t.lookups(), 4);
        assert_eq!(frames(&rec), [(0x1100, EXE), (0x10, LIB), (0x10, VDSO)]);
        // Forgetting the last VMA too.
        t.retain(|cookie| cookie == LIB);
        rec.clear();
        t.translate(&mut Space(SPACE), ips, &mut rec);
        assert_eq!(t.lookups(), 6);
    }

    #[test]
    fn consecutive_frames_in_one_vma_share_one_lookup() {
        let ips = [0x40_0100, 0x40_0200, 0x40_0300, 0x7f00_0000, 0x7f00_0001];
        let mut rec = Record::new();
        let mut t = Translator::new(12);
        t.translate(&mut Space(SPACE), ips, &mut rec);
        assert_eq!(t.lookups(), 2);
    }

    #[test]
    fn cookies_avoid_reserved_values_and_depend_on_key() {
        for ino in [0u64, 1, 2, 0xffff_8881_007e_d428] {
            assert!(file_cookie(&FileId { ino, ..ID }, &TEST_KEY) > COOKIE_NO_FILE);
        }
        let other = SipKey([1, 2]);
        assert_ne!(file_cookie(&ID, &TEST_KEY), file_cookie(&ID, &other));
    }

    /// A file's identity as the glue reads it: libc on the root filesystem.
    const ID: FileId = FileId {
        ino: 1_318_765,
        ctime_sec: 1_764_633_600,
        dev: 0x0803,
        generation: 0x5e1f_04c2,
        ctime_nsec: 123_456_789,
        pad: 0,
    };

    #[test]
    fn every_part_of_the_identity_makes_another_cookie() {
        // The same inode number on another device, reused with another generation, and the
        // same file after a change (its change time moved by a nanosecond or a second).
        let variants = [
            FileId { dev: 0x0804, ..ID },
            FileId {
                ino: ID.ino + 1,
                ..ID
            },
            FileId {
                generation: ID.generation + 1,
                ..ID
            },
            FileId {
                ctime_nsec: ID.ctime_nsec + 1,
                ..ID
            },
            FileId {
                ctime_sec: ID.ctime_sec + 1,
                ..ID
            },
        ];
        let cookie = file_cookie(&ID, &TEST_KEY);
        for v in variants {
            assert_ne!(file_cookie(&v, &TEST_KEY), cookie, "{v:?}");
        }
        // The padding is not part of the identity.
        assert_eq!(file_cookie(&FileId { pad: 7, ..ID }, &TEST_KEY), cookie);
    }

    #[test]
    fn the_cookie_is_siphash_of_the_documented_bytes() {
        // Documentation/user_unwind.rst: ino, ctime seconds (8 bytes each), dev, generation,
        // ctime nanoseconds (4 bytes each), little-endian, hashed with SipHash-2-4.
        let mut bytes = std::vec::Vec::new();
        bytes.extend_from_slice(&ID.ino.to_le_bytes());
        bytes.extend_from_slice(&ID.ctime_sec.to_le_bytes());
        bytes.extend_from_slice(&ID.dev.to_le_bytes());
        bytes.extend_from_slice(&ID.generation.to_le_bytes());
        bytes.extend_from_slice(&ID.ctime_nsec.to_le_bytes());
        assert_eq!(ID.to_bytes()[..], bytes[..]);
        assert_eq!(file_cookie(&ID, &TEST_KEY), siphash(&bytes, &TEST_KEY));
    }

    #[test]
    fn stacks_split_into_bounded_chunks() {
        assert_eq!(chunks(0).count(), 0);
        assert!(chunks(5).eq([(0, 5)]));
        assert!(chunks(CHUNK_FRAMES).eq([(0, CHUNK_FRAMES)]));
        assert!(chunks(2 * CHUNK_FRAMES + 1).eq([
            (0, CHUNK_FRAMES),
            (CHUNK_FRAMES, CHUNK_FRAMES),
            (2 * CHUNK_FRAMES, 1)
        ]));
        // The deepest stack the unwinder delivers still splits into few records.
        assert_eq!(chunks(511).count(), 8);
    }
}
