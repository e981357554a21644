// SPDX-License-Identifier: GPL-2.0

//! The CFI unwinder on a live process, against gdb: the test program built without frame
//! pointers (GCC and Clang `-O2 -fomit-frame-pointer`) is stopped with ptrace at the entry
//! of its `getppid` system call, deep in `main -> uu_a -> uu_b -> uu_c -> uu_lib_syscall`;
//! the pure logic unwinds it from its registers, reading `/proc/PID/mem` and finding each
//! object's table from its file (found through `/proc/PID/maps`); gdb, attached to the same stopped
//! process, must list the same PCs.

mod common;

use common::build_programs;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use user_unwind_logic::logic::cfi::elf::find_eh_frame_hdr;
use user_unwind_logic::logic::cfi::step::{step, Regs, Step};
use user_unwind_logic::logic::cfi::table::Hdr;
use user_unwind_logic::logic::cfi::{Budget, CfiError, Memory};
use user_unwind_logic::logic::unwinder::{unwind, Caches, End, Region, Task, Workspace};

/// The task's memory, through `/proc/PID/mem`.
struct ProcMem(File);

impl Memory for ProcMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.0.read_exact_at(buf, addr).map_err(|_| CfiError::Read)
    }
}

/// One line of `/proc/PID/maps`: start, end, file offset, path.
struct Map {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

fn maps(pid: i32) -> Vec<Map> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (s, e) = f.first()?.split_once('-')?;
            Some(Map {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                offset: u64::from_str_radix(f.get(2)?, 16).ok()?,
                path: f.get(5).map(|p| p.to_string()).unwrap_or_default(),
            })
        })
        .collect()
}

/// The `.eh_frame_hdr` of the object mapped at `pc`: from the mapping of its file at
/// offset 0, as the module will find it from the VMA.
fn hdr_for(maps: &[Map], mem: &mut ProcMem, budget: &mut Budget, pc: u64) -> Option<Hdr> {
    let m = maps.iter().find(|m| m.start <= pc && pc < m.end)?;
    if m.path.is_empty() || m.path.starts_with('[') {
        return None;
    }
    let base = maps
        .iter()
        .find(|b| b.path == m.path && b.offset == 0)?
        .start;
    let addr = find_eh_frame_hdr(mem, budget, base).ok()?;
    Hdr::parse(mem, budget, addr).ok()
}

/// The stopped task as the module's unwinder sees it: its mappings from `/proc/PID/maps`,
/// each file's cookie its path's index, the ELF base its mapping at offset 0.
struct ProcTask<'a> {
    mem: &'a mut ProcMem,
    maps: &'a [Map],
    /// The file of the object whose table is being read.
    object: Option<File>,
}

impl Memory for ProcTask<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        self.mem.read(addr, buf)
    }
}

impl Task for ProcTask<'_> {
    fn region(&mut self, addr: u64) -> Result<Option<Region>, CfiError> {
        let Some(m) = self.maps.iter().find(|m| m.start <= addr && addr < m.end) else {
            return Ok(None);
        };
        let key = if m.path.starts_with('/') {
            self.maps
                .iter()
                .position(|o| o.path == m.path)
                .map(|first| first as u64 + 2)
        } else {
            None
        };
        Ok(Some(Region {
            start: m.start,
            end: m.end,
            offset: m.offset,
            key,
        }))
    }

    /// The object's file itself, by its path, as the module reads it from the page cache.
    fn object_open(&mut self, region: &Region, _addr: u64) -> Result<(), CfiError> {
        let m = self
            .maps
            .iter()
            .find(|m| m.start == region.start)
            .ok_or(CfiError::Read)?;
        self.object = Some(File::open(&m.path).map_err(|_| CfiError::Read)?);
        Ok(())
    }

    fn object_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CfiError> {
        let file = self.object.as_ref().ok_or(CfiError::Read)?;
        file.read_exact_at(buf, offset)
            .map_err(|_| CfiError::Malformed)
    }

    fn object_settled(&mut self) -> bool {
        self.object.is_some()
    }

    fn object_close(&mut self) {
        self.object = None;
    }
}

fn ptrace(req: libc::c_uint, pid: i32, addr: usize, data: usize) -> i64 {
    // SAFETY: plain ptrace requests on our own child; `data` is either a number or
    // points to a live `user_regs_struct`.
    unsafe { libc::ptrace(req, pid, addr, data) }
}

fn wait_stop(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: waits for our own child into a local.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    assert_eq!(r, pid, "waitpid");
    assert!(libc::WIFSTOPPED(status), "the child stopped ({status:#x})");
    status
}

/// Runs `prog` until it enters `getppid`, unwinds it, detaches leaving it stopped, and
/// returns its pid and our PCs; `None` (and a SKIP line) if ptrace is not allowed here.
fn stop_and_unwind(prog: &str, args: &[&str]) -> Option<(std::process::Child, Vec<u64>)> {
    let mut child = Command::new(prog)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the test program runs");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("its first line");
    assert!(line.contains(" pid "), "{line}");
    let pid = child.id() as i32;
    assert_eq!(
        ptrace(
            libc::PTRACE_SEIZE,
            pid,
            0,
            libc::PTRACE_O_TRACESYSGOOD as usize
        ),
        0,
        "PTRACE_SEIZE"
    );
    assert_eq!(ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0), 0);
    wait_stop(pid);
    // SAFETY: user_regs_struct is plain old data, all zeroes is a valid value.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut inject = 0;
    for _ in 0..10_000 {
        assert_eq!(ptrace(libc::PTRACE_SYSCALL, pid, 0, inject), 0);
        let status = wait_stop(pid);
        let sig = libc::WSTOPSIG(status);
        // Deliver the program's own signals; not the traps of ptrace itself.
        inject = match sig {
            libc::SIGTRAP => 0,
            s if s == libc::SIGTRAP | 0x80 => 0,
            s => s as usize,
        };
        if sig != libc::SIGTRAP | 0x80 {
            continue;
        }
        let p = &mut regs as *mut libc::user_regs_struct as usize;
        assert_eq!(ptrace(libc::PTRACE_GETREGS, pid, 0, p), 0);
        // Entry (rax is -ENOSYS) of getppid.
        if regs.orig_rax == libc::SYS_getppid as u64 && regs.rax == (-libc::ENOSYS) as u64 {
            break;
        }
    }
    assert_eq!(
        regs.orig_rax,
        libc::SYS_getppid as u64,
        "stopped in getppid"
    );

    let maps = maps(pid);
    let mut mem = ProcMem(File::open(format!("/proc/{pid}/mem")).expect("/proc/PID/mem"));
    let mut budget = Budget::default();
    let mut work = Workspace::new();
    let mut r = Regs {
        ip: regs.rip,
        sp: regs.rsp,
        bp: regs.rbp,
        bx: regs.rbx,
    };
    let mut exact = true;
    let mut pcs = vec![r.ip];
    for _ in 0..64 {
        let pc = if exact { r.ip } else { r.ip - 1 };
        let Some(hdr) = hdr_for(&maps, &mut mem, &mut budget, pc) else {
            println!("{prog}: no .eh_frame_hdr for {pc:#x}");
            break;
        };
        match step(&mut mem, &mut budget, &hdr, &r, exact, &mut work.scratch) {
            Ok(Step::Caller { regs, exact_ip }) => {
                pcs.push(regs.ip);
                r = regs;
                exact = exact_ip;
            }
            Ok(Step::Outermost) => break,
            Err(e) => {
                println!("{prog}: stopped at {:#x}: {e:?}", r.ip);
                break;
            }
        }
    }
    println!(
        "{prog}: {} frames, budget left {} bytes, {} instructions",
        pcs.len(),
        budget.bytes,
        budget.insns
    );
    // The module's driver, with its caches cold and then warm, gives the same frames; warm,
    // it parses only the rows the cache does not keep (with DWARF expressions: a signal
    // trampoline's).
    let caches = Caches::new();
    let start = Regs {
        ip: regs.rip,
        sp: regs.rsp,
        bp: regs.rbp,
        bx: regs.rbx,
    };
    for pass in 0..2 {
        let mut task = ProcTask {
            mem: &mut mem,
            maps: &maps,
            object: None,
        };
        let mut ips = [0u64; 64];
        let (n, end, counts) = unwind(&mut task, start, 1 << 47, &caches, &mut work, &mut ips);
        println!("{prog}: driver pass {pass}: {n} frames, {end:?}, {counts:?}");
        assert_eq!(
            &ips[..n],
            &pcs[..],
            "{prog}: the driver and step() disagree"
        );
        assert_eq!(end, End::Complete);
        if pass == 1 {
            assert!(counts.row_misses <= 1, "{prog}: warm caches still parse");
        }
    }
    // Leave it stopped for gdb: the system call completes, the stop comes on its return,
    // with the same stack.
    assert_eq!(
        ptrace(libc::PTRACE_DETACH, pid, 0, libc::SIGSTOP as usize),
        0
    );
    Some((child, pcs))
}

/// gdb's PCs of every frame of the stopped process `pid`.
fn gdb_pcs(pid: u32) -> Vec<u64> {
    let out = Command::new("gdb")
        .args(["-nx", "-batch", "-p", &pid.to_string()])
        .args(["-ex", "set backtrace past-main on"])
        .args(["-ex", "frame apply all -q p/x $pc"])
        .output()
        .expect("gdb runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| l.split_once(" = 0x"))
        .filter_map(|(_, v)| u64::from_str_radix(v.trim(), 16).ok())
        .collect()
}

#[test]
fn live_process_matches_gdb() {
    if Command::new("gdb").arg("--version").output().is_err() {
        println!("SKIP: gdb is not installed");
        return;
    }
    let built = build_programs();
    for prog in &built.chains {
        let Some((mut child, ours)) = stop_and_unwind(prog, &["1000000000000", "0"]) else {
            return;
        };
        let gdb = gdb_pcs(child.id());
        let _ = child.kill();
        let _ = child.wait();
        println!("{prog}: ours {ours:x?}");
        println!("{prog}: gdb  {gdb:x?}");
        // uu_lib_syscall, uu_c, uu_b, uu_a, main, __libc_start_call_main,
        // __libc_start_main, _start.
        assert!(ours.len() >= 8, "{prog}: too short a stack");
        assert_eq!(ours, gdb, "{prog}: the unwinder and gdb disagree");
    }
    let _ = std::fs::remove_dir_all(&built.dir);
}

/// A program whose SIGALRM handler loops on `getppid`, the signal having interrupted a
/// busy loop: the unwinder goes through glibc's `__restore_rt` with its CFI expressions.
const SIGNAL_PROGRAM: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static volatile long spins;

__attribute__((noinline)) void uu_in_handler(void)
{
	for (;;) {
		long ret;
		asm volatile("syscall" : "=a"(ret) : "a"((long)SYS_getppid) : "rcx", "r11", "memory");
	}
}

__attribute__((noinline)) void uu_handler(int sig)
{
	(void)sig;
	uu_in_handler();
	spins++;
}

__attribute__((noinline)) void uu_spin(void)
{
	for (;;)
		spins++;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = uu_handler };
	struct itimerval t = { .it_value = { 0, 20000 } };

	sigaction(SIGALRM, &sa, NULL);
	printf("uu_sig pid %d\n", getpid());
	fflush(stdout);
	setitimer(ITIMER_REAL, &t, NULL);
	uu_spin();
	return 0;
}
"#;

#[test]
fn live_signal_frame_matches_gdb() {
    if Command::new("gdb").arg("--version").output().is_err() {
        println!("SKIP: gdb is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("uu-cfi-sig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let src = dir.join("uu_sig.c");
    std::fs::write(&src, SIGNAL_PROGRAM).expect("write uu_sig.c");
    let bin = dir.join("uu_sig");
    let out = Command::new("gcc")
        .args(["-O2", "-fomit-frame-pointer", "-Wall", "-Werror", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("gcc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prog = bin.to_string_lossy();
    let Some((mut child, ours)) = stop_and_unwind(&prog, &[]) else {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let gdb = gdb_pcs(child.id());
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    println!("{prog}: ours {ours:x?}");
    println!("{prog}: gdb  {gdb:x?}");
    // uu_in_handler, uu_handler, __restore_rt, uu_spin, main, __libc_start_call_main,
    // __libc_start_main, _start.
    assert!(ours.len() >= 8, "{prog}: too short a stack");
    assert_eq!(ours, gdb, "{prog}: the unwinder and gdb disagree");
}
