// SPDX-License-Identifier: GPL-2.0

//! debuginfod: a real server (Debian's `debuginfod`, started here on a free port and asked
//! on loopback) serving the debug file of a stripped program built here; ustack fetches it
//! by build-id into the cache `$DEBUGINFOD_CACHE_PATH` names and then names the frame.
//! Skipped, saying so, without debuginfod or gcc.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn have(prog: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {prog}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn run(c: &mut Command) {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// The HTTP status of a GET of `path` on 127.0.0.1:`port`.
fn status(port: u16, path: &str) -> Option<u32> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut b = [0u8; 64];
    let n = s.read(&mut b).ok()?;
    String::from_utf8_lossy(&b[..n])
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn ustack(env: &[(&str, &Path)], args: &[&str]) -> (String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ustack"));
    c.args(args).env_remove("DEBUGINFOD_URLS");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

#[test]
fn debug_files_from_a_debuginfod_server() {
    if !have("debuginfod") || !have("gcc") {
        eprintln!("SKIP: debuginfod test: needs debuginfod and gcc (Debian: apt-get install debuginfod gcc)");
        // scripts/setup.sh installs both: CI runs this test.
        assert!(
            std::env::var_os("CI").is_none(),
            "debuginfod or gcc is not installed: scripts/setup.sh installs them"
        );
        return;
    }
    let d = std::env::temp_dir().join(format!("ustack-dbgd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let served = d.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let p = |n: &str| -> PathBuf { d.join(n) };
    std::fs::write(
        p("prog.c"),
        "#include <stdio.h>\n__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }\nint main(int argc, char **argv) { printf(\"%d\\n\", leaf(argc)); return 0; }\n",
    )
    .unwrap();
    run(Command::new("gcc")
        .args(["-g", "-O1", "-o"])
        .arg(p("prog"))
        .arg(p("prog.c")));
    // The debug file goes to the server; the program keeps no symbol of leaf.
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(p("prog"))
        .arg(served.join("prog.debug")));
    run(Command::new("strip").arg("--strip-all").arg(p("prog")));
    let id = ustack::elf::build_id(&p("prog")).unwrap();
    assert_eq!(
        ustack::elf::build_id(&served.join("prog.debug")).unwrap(),
        id
    );
    // leaf's address, from the debug file's symbol table, as a file offset.
    let nm = Command::new("nm")
        .arg(served.join("prog.debug"))
        .output()
        .unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    let va = nm
        .lines()
        .find(|l| l.ends_with(" T leaf"))
        .map(|l| u64::from_str_radix(l.split(' ').next().unwrap(), 16).unwrap())
        .unwrap();
    let l = ustack::elf::loads(&p("prog"))
        .unwrap()
        .into_iter()
        .find(|l| va >= l.vaddr && va - l.vaddr < l.filesz)
        .unwrap();
    let off = va - l.vaddr + l.offset;
    let trace = format!(
        "# tracer: nop\n  prog-42 [000] .....    10.000001: file_cache: cookie=aa path={} build_id={} build_id_len=20\n  prog-42 [000] .....    10.000002: sys_enter: NR 1 (1, 2, 3, 4, 5, 6)\n  prog-42 [000] .....    10.000003: user_unwind_cookie: cookie=100\n  prog-42 [000] .....    10.000004: user_unwind_stack: cookie=100\n => <{off:016x}> : 0xaa\n",
        p("prog").display(),
        hex(&id)
    );
    std::fs::write(p("t.trace"), trace).unwrap();
    let t = p("t.trace");
    let t = t.to_str().unwrap();
    let cache = p("cache");
    // No server: the frame stays unnamed.
    let (out, _) = ustack(&[("DEBUGINFOD_CACHE_PATH", &cache)], &["--folded", "-", t]);
    assert!(out.starts_with("raw_syscalls:sys_enter;prog+0x"), "{out}");

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new("debuginfod")
        .args(["-F", "-t", "1", "-p", &port.to_string(), "-d"])
        .arg(p("db.sqlite"))
        .arg(&served)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let path = format!("/buildid/{}/debuginfo", hex(&id));
    let t0 = Instant::now();
    while status(port, &path) != Some(200) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "debuginfod did not serve {path}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let url = PathBuf::from(format!("http://127.0.0.1:{port}"));
    let env = [
        ("DEBUGINFOD_URLS", url.as_path()),
        ("DEBUGINFOD_CACHE_PATH", &cache),
    ];
    let (out, err) = ustack(&env, &["--folded", "-", "--lines", t]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(out, "raw_syscalls:sys_enter;leaf (prog.c:2) 1\n", "{err}");
    let cached = cache.join(hex(&id)).join("debuginfo");
    assert!(
        err.contains(&format!("from debuginfod: {}", cached.display())),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        std::fs::read(served.join("prog.debug")).unwrap()
    );
    // The server gone, the cache serves.
    let (out, _) = ustack(&env, &["--folded", "-", t]);
    assert_eq!(out, "raw_syscalls:sys_enter;leaf 1\n");
    std::fs::remove_dir_all(&d).unwrap();
}
