// SPDX-License-Identifier: GPL-2.0

//! The build-id parser on real ELF files, against what `readelf -n` reports, and on
//! mutated and random inputs (a bounded proptest fuzz run).

use proptest::prelude::*;
use std::process::Command;
use user_unwind_logic::logic::buildid::{find_build_id, vectors, ReadAt, ReadError};

/// What binutils says the build-id of `path` is.
fn readelf_build_id(path: &str) -> Option<String> {
    let out = Command::new("readelf")
        .args(["-n", path])
        .output()
        .expect("readelf runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .map(|s| s.trim().to_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn ours(path: &str) -> Option<String> {
    let bytes = std::fs::read(path).expect("file readable");
    find_build_id(&mut &bytes[..]).map(|id| hex(id.as_bytes()))
}

#[test]
fn real_files_match_readelf() {
    let files = [
        "/bin/ls",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
    ];
    let mut with_id = 0;
    for path in files {
        let want = readelf_build_id(path);
        assert_eq!(ours(path), want, "{path}");
        with_id += usize::from(want.is_some());
    }
    assert!(with_id >= 2, "the system files should carry build-ids");
}

#[test]
fn files_without_build_id_and_non_elf() {
    // A script and a text file: not ELF.
    assert_eq!(ours("/etc/passwd"), None);
    // A static binary: whatever readelf finds, the parser must find too.
    if std::path::Path::new("/bin/busybox").exists() {
        assert_eq!(ours("/bin/busybox"), readelf_build_id("/bin/busybox"));
    }
}

/// A reader that fails after `budget` calls, as a file being truncated under us would.
struct Failing<'a>(&'a [u8], usize);

impl ReadAt for Failing<'_> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, ReadError> {
        if self.1 == 0 {
            return Err(ReadError);
        }
        self.1 -= 1;
        let mut s = self.0;
        s.read_at(offset, buf)
    }
}

#[test]
fn read_errors_are_no_build_id() {
    let mut buf = [0u8; vectors::IMAGE_MAX];
    let n = vectors::elf64_le(&mut buf);
    for budget in 0..4 {
        assert_eq!(find_build_id(&mut Failing(&buf[..n], budget)), None);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_mutated_headers(at in 0usize..156, value in any::<u8>(), cut in 0usize..=156) {
        let mut buf = [0u8; vectors::IMAGE_MAX];
        let n = vectors::elf64_le(&mut buf);
        buf[at] = value;
        let _ = find_build_id(&mut &buf[..n.min(cut.max(1))]);
    }

    #[test]
    fn fuzz_random_bytes(mut bytes in proptest::collection::vec(any::<u8>(), 0..512), class in 1u8..=2, data in 1u8..=2) {
        if bytes.len() >= 6 {
            bytes[..4].copy_from_slice(b"\x7fELF");
            bytes[4] = class;
            bytes[5] = data;
        }
        if let Some(id) = find_build_id(&mut &bytes[..]) {
            prop_assert!(!id.as_bytes().is_empty());
        }
    }
}

/// The `p_align` of each `PT_NOTE` segment of `path`, in file order, as `readelf -l` says.
fn note_aligns(path: &str) -> Vec<String> {
    let out = Command::new("readelf")
        .args(["-lW", path])
        .output()
        .expect("readelf runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("NOTE "))
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect()
}

/// One program linked by GNU ld, gold and ld.lld, with CET properties (GNU ld and gold put
/// `.note.gnu.property` in an 8-aligned `PT_NOTE` of its own before the build-id's): the
/// parser must walk past the 8-aligned notes and agree with `readelf -n` on each.
#[test]
fn every_linker_matches_readelf() {
    let dir = std::env::temp_dir().join(format!("uu-linkers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("t.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let linkers: [(&str, &str, &[&str]); 3] = [
        ("bfd", "gcc", &["-fcf-protection=full", "-fuse-ld=bfd"]),
        ("gold", "gcc", &["-fcf-protection=full", "-fuse-ld=gold"]),
        ("lld", "clang-19", &["-fcf-protection=full", "-fuse-ld=lld"]),
    ];
    let mut eight_aligned = 0;
    for (name, cc, flags) in linkers {
        let out = dir.join(format!("t.{name}"));
        let status = Command::new(cc)
            .args(flags)
            .arg("-Wl,--build-id=sha1")
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .status()
            .unwrap_or_else(|e| panic!("{cc} for {name}: {e}"));
        assert!(status.success(), "linking with {name} failed");
        let path = out.to_str().unwrap();
        let want = readelf_build_id(path);
        assert!(want.is_some(), "{name}: readelf finds no build-id");
        assert_eq!(ours(path), want, "{name}");
        let aligns = note_aligns(path);
        eight_aligned += usize::from(aligns.first().map(String::as_str) == Some("0x8"));
    }
    assert!(
        eight_aligned >= 2,
        "GNU ld and gold should lead with an 8-aligned PT_NOTE"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The hostile images the guest test maps (`tests/hostile_elf.py`): the parser gives the
/// well-formed ones their build-id and every other one none, without panicking.
#[test]
fn hostile_images_give_no_build_id() {
    let dir = std::env::temp_dir().join(format!("uu-hostile-{}", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/hostile_elf.py");
    let ok = Command::new("python3")
        .arg(script)
        .arg(&dir)
        .status()
        .expect("python3 runs");
    assert!(ok.success());
    let expected = std::fs::read_to_string(dir.join("expected")).expect("expected written");
    let mut cases = 0;
    for line in expected.lines() {
        let (name, want) = line.split_once(' ').expect("NAME BUILD_ID");
        let got = ours(dir.join(name).to_str().expect("utf-8 path"));
        assert_eq!(got.as_deref().unwrap_or("-"), want, "{name}");
        cases += 1;
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(cases >= 15, "{cases} cases");
}
