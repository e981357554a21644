// SPDX-License-Identifier: GPL-2.0

//! Host microbenchmarks of the module's pure logic, so that a regression shows on the host
//! before a guest runs: frame translation into a record (VMA reuse, the file table) per
//! frame, for a stack in runs and one going back and forth, the file cookie of an identity
//! and its memo, the build-id parser on a real file, and first-sight cache lookups.
//! Run with `make bench-host` (`cargo bench` in host/).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use user_unwind_logic::logic::buildid::{find_build_id, vectors};
use user_unwind_logic::logic::frames::{
    file_cookie, AddressSpace, Backing, FileId, Record, Translator, Vma,
};
use user_unwind_logic::logic::memo::CookieMemo;
use user_unwind_logic::logic::offset::Mapping;
use user_unwind_logic::logic::seen::{CachedId, FirstSight, Sighting};
use user_unwind_logic::logic::siphash::TEST_KEY;

/// An executable, a library and libc, as a 32-frame stack sees them.
struct Space([Vma; 3]);

impl AddressSpace for Space {
    fn lookup(&mut self, addr: u64) -> Option<Vma> {
        self.0.iter().copied().find(|v| v.map.contains(addr))
    }
}

fn space() -> Space {
    let vma = |start: u64, file: u64| Vma {
        map: Mapping {
            start,
            end: start + 0x10_0000,
            pgoff: 1,
        },
        backing: Backing::File(file),
    };
    Space([
        vma(0x40_0000, 0x5c1d_0e9b_3a7f_4e21),
        vma(0x7f00_0000_0000, 0x2b6e_91c4_07fa_d853),
        vma(0x7f10_0000_0000, 0x93a0_5d11_e6c2_7f08),
    ])
}

/// 32 frames: one in the library, 28 in the executable, 3 in libc.
fn stack() -> [u64; 32] {
    let mut ips = [0u64; 32];
    ips[0] = 0x7f00_0000_1109;
    for (i, ip) in ips[1..29].iter_mut().enumerate() {
        *ip = 0x40_1000 + 0x20 * i as u64;
    }
    for (i, ip) in ips[29..].iter_mut().enumerate() {
        *ip = 0x7f10_0002_7000 + 0x40 * i as u64;
    }
    ips
}

/// 32 frames going back and forth: executable, library, executable, libc, ... (a callback
/// chain, an interpreter and its extensions).
fn interleaved_stack() -> [u64; 32] {
    let mut ips = [0u64; 32];
    for (i, ip) in ips.iter_mut().enumerate() {
        let base = [0x40_1000, 0x7f00_0000_1000, 0x40_2000, 0x7f10_0002_7000][i % 4];
        *ip = base + 0x20 * i as u64;
    }
    ips
}

fn translation(c: &mut Criterion) {
    let mut g = c.benchmark_group("translate");
    for (name, ips) in [
        ("32 frames, 3 files", stack()),
        ("32 frames back and forth, 3 files", interleaved_stack()),
    ] {
        g.throughput(Throughput::Elements(ips.len() as u64));
        g.bench_function(name, |b| {
            let mut rec = Record::new();
            b.iter(|| {
                let mut space = space();
                let mut t = Translator::new(12);
                rec.clear();
                black_box(t.translate(&mut space, ips, &mut rec));
            })
        });
    }
    g.finish();
    let id = FileId {
        ino: 1_318_765,
        ctime_sec: 1_764_633_600,
        dev: 0x0803,
        generation: 0x5e1f_04c2,
        ctime_nsec: 123_456_789,
        pad: 0,
    };
    c.bench_function("file cookie", |b| {
        b.iter(|| file_cookie(black_box(&id), &TEST_KEY))
    });
    let memo = Box::new(CookieMemo::new());
    c.bench_function("file cookie, remembered", |b| {
        b.iter(|| memo.cookie(black_box(&id), &TEST_KEY))
    });
}

fn build_ids(c: &mut Criterion) {
    let libc = std::fs::read("/lib/x86_64-linux-gnu/libc.so.6").expect("libc readable");
    c.bench_function("build-id of libc.so.6 (in memory)", |b| {
        b.iter(|| find_build_id(&mut &libc[..]).expect("libc has a build-id"))
    });
    let mut image = [0u8; vectors::IMAGE_MAX];
    let n = vectors::elf64_le_align8(&mut image);
    c.bench_function("build-id of an 8-aligned vector", |b| {
        b.iter(|| find_build_id(&mut &image[..n]))
    });
}

fn first_sight(c: &mut Criterion) {
    let cache = Box::new(FirstSight::new());
    let files: Vec<u64> = (0..64u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 2)
        .collect();
    for &f in &files {
        cache.record(f, &CachedId::None, 0, cache.generation());
    }
    let mut g = c.benchmark_group("first-sight");
    g.throughput(Throughput::Elements(files.len() as u64));
    g.bench_function("64 known files", |b| {
        b.iter(|| {
            for &f in &files {
                assert_eq!(cache.sighting(black_box(f), 1), Sighting::Known);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, translation, build_ids, first_sight);
criterion_main!(benches);
