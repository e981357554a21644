// SPDX-License-Identifier: GPL-2.0

//! Damaged input: every truncation of each fixture and thousands of mutated copies must
//! give an error or the events before the damage, never a panic.

use std::path::Path;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// Read, join and fold: everything a damaged file reaches.
fn exercise(bytes: &[u8]) -> Option<usize> {
    let loaded = match ustack::load(bytes) {
        Ok(l) => l,
        Err(e) => {
            shown_safely(&e);
            return None;
        }
    };
    for d in &loaded.damage {
        shown_safely(d);
    }
    let (samples, _) = ustack::join::join(&loaded.events);
    // No file is found: the symbolizer's own reading of real files is not under test.
    let mut sym = ustack::symbolize::Symbolizer::new(ustack::symbolize::Options {
        sysroot: Some("/nonexistent".into()),
        ..Default::default()
    });
    let p = ustack::stacks::profile(&samples, &mut sym, &Default::default(), true);
    let _ = ustack::output::folded(&p, true);
    Some(loaded.events.len() + usize::from(!loaded.damage.is_empty()) * 1_000_000)
}

/// Damaged bytes reach error messages: as shown they are short and without control bytes.
fn shown_safely(e: &ustack::error::Error) {
    let s = e.to_string();
    assert!(s.chars().count() <= 400, "{s}");
    assert!(!s.chars().any(char::is_control), "{s:?}");
}

/// A cut file either fails, reports damage, or (cut in a part the reader does not need,
/// such as the section-name strings) still yields every event: never fewer in silence.
#[test]
fn every_truncation_is_an_error_or_reported_damage() {
    for name in ["v7-zstd.dat", "v7-none.dat", "v6.dat"] {
        let full = fixture(name);
        let all = ustack::load(&full).unwrap().events.len();
        for cut in 0..full.len() {
            let r = ustack::load(&full[..cut]);
            match r {
                Err(e) => {
                    assert!(!e.msg.is_empty());
                    shown_safely(&e);
                }
                Ok(l) => assert!(
                    !l.damage.is_empty() || l.events.len() == all,
                    "{name} cut at {cut}: {} events, no damage reported",
                    l.events.len()
                ),
            }
        }
    }
}

#[test]
fn mutated_files_never_panic() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for name in ["v7-zstd.dat", "v7-none.dat", "v6.dat", "text.trace"] {
        let full = fixture(name);
        for _ in 0..1500 {
            let mut b = full.clone();
            for _ in 0..1 + next() % 8 {
                let at = (next() % b.len() as u64) as usize;
                b[at] = match next() % 4 {
                    0 => 0,
                    1 => 0xff,
                    2 => b[at] ^ (1 << (next() % 8)),
                    _ => next() as u8,
                };
            }
            let _ = exercise(&b);
        }
    }
}
