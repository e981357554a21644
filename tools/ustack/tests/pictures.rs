// SPDX-License-Identifier: GPL-2.0

//! The pictures README.md and Documentation/ustack.rst show (Documentation/images/) are
//! what scripts/ustack-pictures.sh makes from the committed recording with this ustack,
//! byte for byte: a change of the graph or of the recording that leaves them stale fails
//! here.

use std::path::Path;
use std::process::Command;

#[test]
fn the_committed_pictures_are_what_the_script_makes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("ustack-pictures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new("bash")
        .arg(root.join("scripts/ustack-pictures.sh"))
        .arg(&out)
        .env("USTACK", env!("CARGO_BIN_EXE_ustack"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "scripts/ustack-pictures.sh: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    for name in ["ustack-flame.svg", "ustack-offcpu.svg"] {
        let made = std::fs::read(out.join(name)).unwrap();
        let committed = std::fs::read(root.join("Documentation/images").join(name))
            .unwrap_or_else(|e| panic!("Documentation/images/{name}: {e}"));
        assert!(
            made == committed,
            "Documentation/images/{name} is not what scripts/ustack-pictures.sh makes \
             ({} bytes, committed {}): run the script and commit the pictures",
            made.len(),
            committed.len()
        );
    }
    // Run twice, the same bytes: nothing of the run (time, order of a hash map) is in
    // them.
    let again = Command::new("bash")
        .arg(root.join("scripts/ustack-pictures.sh"))
        .arg(out.join("again"))
        .env("USTACK", env!("CARGO_BIN_EXE_ustack"))
        .output()
        .unwrap();
    assert!(again.status.success());
    for name in ["ustack-flame.svg", "ustack-offcpu.svg"] {
        assert_eq!(
            std::fs::read(out.join(name)).unwrap(),
            std::fs::read(out.join("again").join(name)).unwrap(),
            "{name}: two runs differ"
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
}
