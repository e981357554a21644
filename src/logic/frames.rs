// SPDX-License-Identifier: GPL-2.0

//! Turning the user IPs of one stack into `(file offset, file cookie)` pairs.
//!
//! This is all the work done at stack time, as the review of the seed series asked: look up the
//! VMA of each frame (reusing the previous one while frames stay inside it), compute the offset
//! in the mapped file and hash the `struct file` pointer value. Nothing is registered, nothing
//! is dereferenced: the cookie is an opaque number, only valid for the lifetime of the mapping
//! that produced it.

#![forbid(unsafe_code)]

use super::offset::Mapping;
use super::siphash::{siphash, siphash_1u64, SipKey};

/// File cookie of a frame that lies in no VMA; its offset is the raw address.
pub const COOKIE_NO_MAPPING: u64 = 0;
/// File cookie of a frame in a VMA without a file (anonymous memory, JIT code, the vdso).
pub const COOKIE_NO_FILE: u64 = 1;

/// Frames per `user_unwind_stack` record. A deeper stack is split into several records that
/// share the unwind cookie and say where they start, so nothing is cut silently. 64 frames are
/// 1 KiB of payload: one record always fits a ring-buffer sub-buffer.
pub const CHUNK_FRAMES: usize = 64;

/// What backs a VMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A file: the value of `vm_file`, used only as hash input.
    File(u64),
    /// No file, but a name the kernel gives (`[vdso]`, `[anon:...]`): its [`name_cookie`].
    Named(u64),
    /// Anonymous memory without a name.
    Anonymous,
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
    /// The VMA containing `addr`, if any.
    fn lookup(&mut self, addr: u64) -> Option<Vma>;
}

/// The cookie of a file pointer value: SipHash-2-4 under the module's secret key, moved off
/// the two reserved values (a 2^-63 chance per file).
pub fn file_cookie(file: u64, key: &SipKey) -> u64 {
    unreserved(siphash_1u64(file, key))
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

/// Translates the frames of one stack, remembering the last VMA and its cookie across calls.
pub struct Translator<'k> {
    key: &'k SipKey,
    page_shift: u32,
    last: Option<(Vma, u64)>,
    lookups: usize,
}

impl<'k> Translator<'k> {
    /// A translator for pages of `1 << page_shift` bytes and file cookies under `key`.
    pub fn new(key: &'k SipKey, page_shift: u32) -> Self {
        Translator {
            key,
            page_shift,
            last: None,
            lookups: 0,
        }
    }

    /// How many VMA lookups the translation has made so far.
    pub fn lookups(&self) -> usize {
        self.lookups
    }

    /// Translates `ips` into `offs[i]` and `cookies[i]`; returns how many frames were written,
    /// at most the length of the shorter buffer.
    pub fn translate(
        &mut self,
        space: &mut impl AddressSpace,
        ips: impl IntoIterator<Item = u64>,
        offs: &mut [u64],
        cookies: &mut [u64],
    ) -> usize {
        let mut n = 0;
        for ((ip, off), cookie) in ips.into_iter().zip(offs.iter_mut()).zip(cookies.iter_mut()) {
            (*off, *cookie) = self.frame(space, ip);
            n += 1;
        }
        n
    }

    fn frame(&mut self, space: &mut impl AddressSpace, ip: u64) -> (u64, u64) {
        let cached = match self.last {
            Some((vma, cookie)) if vma.map.contains(ip) => Some((vma, cookie)),
            _ => None,
        };
        let (vma, cookie) = match cached {
            Some(hit) => hit,
            None => {
                self.lookups += 1;
                let Some(vma) = space.lookup(ip) else {
                    return (ip, COOKIE_NO_MAPPING);
                };
                let cookie = match vma.backing {
                    Backing::File(file) => file_cookie(file, self.key),
                    Backing::Named(cookie) => cookie,
                    Backing::Anonymous => COOKIE_NO_FILE,
                };
                self.last = Some((vma, cookie));
                (vma, cookie)
            }
        };
        match vma.map.file_offset(ip, self.page_shift) {
            Ok(off) => (off, cookie),
            Err(_) => (ip, COOKIE_NO_MAPPING),
        }
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

    /// A fixed list of VMAs standing in for a process image.
    struct Space(&'static [Vma]);

    impl AddressSpace for Space {
        fn lookup(&mut self, addr: u64) -> Option<Vma> {
            self.0.iter().copied().find(|v| v.map.contains(addr))
        }
    }

    const EXE: u64 = 0xffff_8881_0000_1000;
    const LIB: u64 = 0xffff_8881_0000_2000;
    const VDSO: u64 = 0x1234_5678_9abc_def0;
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
                pgoff: 0x7ffd0,
            },
            backing: Backing::Anonymous,
        },
        Vma {
            map: Mapping {
                start: 0x7ffe_0000,
                end: 0x7ffe_2000,
                pgoff: 0,
            },
            backing: Backing::Named(VDSO),
        },
    ];

    #[test]
    fn frames_get_file_offsets_and_per_file_cookies() {
        let ips = [0x7f00_0010, 0x40_0100, 0x40_0200, 0x7ffd_0008, 0x1234];
        let (mut offs, mut cookies) = ([0; 5], [0; 5]);
        let mut t = Translator::new(&TEST_KEY, 12);
        assert_eq!(
            t.translate(&mut Space(SPACE), ips, &mut offs, &mut cookies),
            5
        );
        assert_eq!(offs, [0x10, 0x1100, 0x1200, 0x7ffd_0008, 0x1234]);
        let (exe, lib) = (file_cookie(EXE, &TEST_KEY), file_cookie(LIB, &TEST_KEY));
        assert_ne!(exe, lib);
        assert_eq!(cookies, [lib, exe, exe, COOKIE_NO_FILE, COOKIE_NO_MAPPING]);
    }

    #[test]
    fn named_mappings_carry_their_name_cookie() {
        let (mut offs, mut cookies) = ([0; 1], [0; 1]);
        let mut t = Translator::new(&TEST_KEY, 12);
        t.translate(&mut Space(SPACE), [0x7ffe_0010], &mut offs, &mut cookies);
        assert_eq!((offs[0], cookies[0]), (0x10, VDSO));
    }

    #[test]
    fn name_cookies_are_per_name_and_not_file_cookies() {
        let vdso = name_cookie(b"[vdso]", &TEST_KEY);
        assert_eq!(vdso, name_cookie(b"[vdso]", &TEST_KEY));
        assert_ne!(vdso, name_cookie(b"[anon:jit]", &TEST_KEY));
        assert!(vdso > COOKIE_NO_FILE);
        // Under the module's two independent keys, the same eight bytes as a name and as
        // a file pointer value hash differently.
        let bytes = EXE.to_le_bytes();
        let name_key = SipKey([TEST_KEY.0[1], TEST_KEY.0[0]]);
        assert_ne!(name_cookie(&bytes, &name_key), file_cookie(EXE, &TEST_KEY));
    }

    #[test]
    fn consecutive_frames_in_one_vma_share_one_lookup() {
        let ips = [0x40_0100, 0x40_0200, 0x40_0300, 0x7f00_0000, 0x7f00_0001];
        let (mut offs, mut cookies) = ([0; 5], [0; 5]);
        let mut t = Translator::new(&TEST_KEY, 12);
        t.translate(&mut Space(SPACE), ips, &mut offs, &mut cookies);
        assert_eq!(t.lookups(), 2);
    }

    #[test]
    fn cookies_avoid_reserved_values_and_depend_on_key() {
        for file in [1u64, 2, 0xffff_8881_007e_d428] {
            assert!(file_cookie(file, &TEST_KEY) > COOKIE_NO_FILE);
        }
        let other = SipKey([1, 2]);
        assert_ne!(file_cookie(EXE, &TEST_KEY), file_cookie(EXE, &other));
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
