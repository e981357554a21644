// SPDX-License-Identifier: GPL-2.0

//! (file, offset) to functions, inlined frames and file:line, with blazesym.
//!
//! The file named by a `file_cache` event is found on this machine through `--map`
//! prefixes or a sysroot; its build-id must be the one the trace recorded, else it is
//! reported and not symbolized. The offset becomes a virtual address through the file's
//! own `PT_LOAD` headers; the symbols come from a debug file found by build-id
//! (`DIR/.build-id/xx/yyyy.debug` under each debug directory) if there is one, else from
//! the file, whose DWARF, `.gnu_debuglink` and symbol tables blazesym reads. Results are
//! cached per (file, offset). Anonymous frames resolve through `/tmp/perf-PID.map`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer as Blaze};

use crate::elf;
use crate::join::{FileInfo, Frame};

/// One function of a symbolized frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sym {
    pub name: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Inlined into the next one of the frame.
    pub inlined: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub sysroot: Option<PathBuf>,
    /// Guest path prefix to a host directory, tried in order before the sysroot.
    pub maps: Vec<(String, PathBuf)>,
    /// Searched for build-id debug files before the system's.
    pub debug_dirs: Vec<PathBuf>,
    pub perf_maps: Vec<PathBuf>,
    pub no_inline: bool,
    /// Never fall back to this machine's own path when `--map`/`--sysroot` find nothing.
    pub sysroot_only: bool,
}

/// What became of a file of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileStatus {
    Ok {
        host: PathBuf,
        symbols: PathBuf,
    },
    /// No file at any of these paths (those tried, in order).
    Missing {
        tried: Vec<PathBuf>,
    },
    BuildIdMismatch {
        host: PathBuf,
        found: Option<Vec<u8>>,
    },
    NotElf {
        host: PathBuf,
    },
}

struct FileEntry {
    status: FileStatus,
    loads: Vec<elf::Load>,
    plt: Vec<elf::Stub>,
    /// The debug file failed (why): symbols come from the binary itself.
    debug_error: Option<String>,
    /// Frames the debug file did not name and the binary's own symbols did.
    from_binary: u64,
}

impl FileEntry {
    fn new(status: FileStatus, loads: Vec<elf::Load>) -> Self {
        FileEntry {
            status,
            loads,
            plt: Vec::new(),
            debug_error: None,
            from_binary: 0,
        }
    }
}

/// What the symbols of a file came from, when not as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub debug: PathBuf,
    /// The debug file's error, if it failed as a whole.
    pub error: Option<String>,
    /// Frames the binary's own symbols named instead.
    pub frames: u64,
}

/// A symbolized frame: its functions, innermost first, or nothing.
pub type Resolved = Option<Rc<[Sym]>>;

pub struct Symbolizer {
    blaze: Blaze,
    opts: Options,
    debug_dirs: Vec<PathBuf>,
    index: HashMap<(String, Vec<u8>), usize>,
    files: Vec<(Rc<FileInfo>, FileEntry)>,
    cache: HashMap<(usize, u64), Resolved>,
    perf: HashMap<i32, Vec<(u64, u64, String)>>,
    debuginfod: crate::debuginfod::Client,
    /// Debug files fetched from debuginfod servers or found in their cache (build-id,
    /// path), and what failed.
    pub fetched: Vec<(String, PathBuf)>,
    pub fetch_errors: Vec<String>,
    /// Lookups that were not served from the cache.
    pub lookups: u64,
    /// The traced kernel's symbols (the trace's kallsyms), for kernel frames.
    pub kallsyms: crate::kallsyms::Kallsyms,
}

/// A kernel frame named: its function, the offset in it, and its module as perf names
/// it (`[kernel.kallsyms]` for the kernel image, `[name]` for a module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KName {
    pub name: String,
    pub offset: u64,
    pub module: String,
}

/// The kernel image's name, as perf gives it.
pub const KERNEL_MODULE: &str = "[kernel.kallsyms]";

/// The system's debug directories, searched after the user's.
const SYSTEM_DEBUG_DIRS: [&str; 2] = ["/usr/lib/debug", "/lib/debug"];

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

impl Symbolizer {
    pub fn new(opts: Options) -> Symbolizer {
        let mut debug_dirs = opts.debug_dirs.clone();
        debug_dirs.extend(SYSTEM_DEBUG_DIRS.iter().map(PathBuf::from));
        let blaze = Blaze::builder()
            .enable_code_info(true)
            .enable_inlined_fns(!opts.no_inline)
            .enable_demangling(true)
            .set_debug_dirs(Some(&debug_dirs))
            .build();
        let mut perf = HashMap::new();
        for p in &opts.perf_maps {
            if let Some(pid) = perf_map_pid(p) {
                perf.insert(pid, read_perf_map(p));
            }
        }
        Symbolizer {
            blaze,
            opts,
            debug_dirs,
            index: HashMap::new(),
            files: Vec::new(),
            cache: HashMap::new(),
            perf,
            debuginfod: crate::debuginfod::Client::from_env(),
            fetched: Vec::new(),
            fetch_errors: Vec::new(),
            lookups: 0,
            kallsyms: Default::default(),
        }
    }

    /// A kernel frame's function: from the trace's kallsyms for an address (`None` where
    /// it covers none), as the kernel printed it for a name.
    pub fn kernel(&self, f: &crate::events::KFrame) -> Option<KName> {
        match f {
            crate::events::KFrame::Addr(a) => self.kallsyms.lookup(*a).map(|k| KName {
                name: k.name.to_string(),
                offset: k.offset,
                module: k
                    .module
                    .map(|m| format!("[{m}]"))
                    .unwrap_or_else(|| KERNEL_MODULE.to_string()),
            }),
            crate::events::KFrame::Name(n) => {
                let (name, module) = match n.split_once(' ') {
                    Some((n, m)) if m.starts_with('[') => (n, m.to_string()),
                    _ => (&**n, KERNEL_MODULE.to_string()),
                };
                Some(KName {
                    name: name.to_string(),
                    offset: 0,
                    module,
                })
            }
        }
    }

    /// Where a guest path is on this machine.
    pub fn host_path(&self, path: &str) -> PathBuf {
        for (prefix, dir) in &self.opts.maps {
            let prefix = prefix.trim_end_matches('/');
            if let Some(rest) = path.strip_prefix(prefix) {
                if rest.is_empty() {
                    return dir.clone();
                }
                if rest.starts_with('/') {
                    return dir.join(rest.trim_start_matches('/'));
                }
            }
        }
        match &self.opts.sysroot {
            Some(root) => root.join(path.trim_start_matches('/')),
            None => PathBuf::from(path),
        }
    }

    fn debug_file(&mut self, build_id: &[u8]) -> Option<PathBuf> {
        let (first, rest) = build_id.split_first()?;
        if rest.is_empty() {
            return None;
        }
        let rel = format!(".build-id/{first:02x}/{}.debug", hex(rest));
        if let Some(p) = self
            .debug_dirs
            .iter()
            .map(|d| d.join(&rel))
            .find(|p| elf::build_id(p).as_deref() == Some(build_id))
        {
            return Some(p);
        }
        // debuginfod: its cache, then its servers.
        let id = hex(build_id);
        let (found, errors) = self
            .debuginfod
            .debuginfo(&id, |p| elf::build_id(p).as_deref() == Some(build_id));
        self.fetch_errors.extend(errors);
        if let Some(p) = &found {
            self.fetched.push((id, p.clone()));
        }
        found
    }

    /// The paths to try for a guest path, in order, each with whether it is this
    /// machine's own path taken as a fallback (used only when its build-id is the trace's):
    /// a `--map` prefix's, else the sysroot's, else the path as it is; with a map or a
    /// sysroot, the path as it is after them unless `sysroot_only`.
    pub fn candidates(&self, path: &str) -> Vec<(PathBuf, bool)> {
        let first = self.host_path(path);
        let own = PathBuf::from(path);
        let mut v = vec![(first.clone(), false)];
        if first != own && !self.opts.sysroot_only {
            v.push((own, true));
        }
        v
    }

    fn open(&mut self, file: &FileInfo) -> FileEntry {
        let mut tried = Vec::new();
        let mut problem = None;
        let mut chosen = None;
        for (host, fallback) in self.candidates(&file.path) {
            // This machine's own file stands for the traced one only if the build-ids
            // say it is the same.
            if fallback && file.build_id.is_empty() {
                continue;
            }
            tried.push(host.clone());
            if !host.is_file() {
                continue;
            }
            let found = elf::build_id(&host);
            let Some(loads) = elf::loads(&host) else {
                problem.get_or_insert(FileStatus::NotElf { host });
                continue;
            };
            if !file.build_id.is_empty() && found.as_deref() != Some(&file.build_id[..]) {
                problem.get_or_insert(FileStatus::BuildIdMismatch { host, found });
                continue;
            }
            chosen = Some((host, found, loads));
            break;
        }
        let Some((host, found, loads)) = chosen else {
            return FileEntry::new(problem.unwrap_or(FileStatus::Missing { tried }), Vec::new());
        };
        let symbols = found
            .and_then(|id| self.debug_file(&id))
            .unwrap_or_else(|| host.clone());
        let mut e = FileEntry::new(
            FileStatus::Ok {
                host: host.clone(),
                symbols,
            },
            loads,
        );
        e.plt = elf::plt_stubs(&host);
        e
    }

    fn file_index(&mut self, file: &Rc<FileInfo>) -> usize {
        let key = (file.path.clone(), file.build_id.clone());
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let e = self.open(file);
        self.files.push((Rc::clone(file), e));
        self.index.insert(key, self.files.len() - 1);
        self.files.len() - 1
    }

    /// Files whose debug file failed or left frames unnamed that the binary's own
    /// symbols named.
    pub fn fallbacks(&self) -> Vec<(&FileInfo, Fallback)> {
        self.files
            .iter()
            .filter_map(|(f, e)| {
                let FileStatus::Ok { host, symbols } = &e.status else {
                    return None;
                };
                (e.debug_error.is_some() || e.from_binary > 0).then(|| {
                    (
                        &**f,
                        Fallback {
                            debug: if symbols == host {
                                PathBuf::new()
                            } else {
                                symbols.clone()
                            },
                            error: e.debug_error.clone(),
                            frames: e.from_binary,
                        },
                    )
                })
            })
            .collect()
    }

    /// Every file looked at so far, with what became of it.
    pub fn files(&self) -> impl Iterator<Item = (&FileInfo, &FileStatus)> {
        self.files.iter().map(|(f, e)| (&**f, &e.status))
    }

    /// Symbolize frame `depth` (0: innermost) of a stack of task `pid`. Frames above the
    /// first are return addresses, looked up one byte earlier, inside their call.
    pub fn resolve(&mut self, pid: i32, frame: &Frame, depth: usize) -> Resolved {
        let back = u64::from(depth > 0);
        match frame {
            Frame::File { file, offset } => {
                let i = self.file_index(file);
                let off = offset.saturating_sub(back);
                if let Some(r) = self.cache.get(&(i, off)) {
                    return r.clone();
                }
                let r = self.lookup(i, off);
                self.cache.insert((i, off), r.clone());
                r
            }
            Frame::Anon { addr, .. } => {
                let map = self.perf.get(&pid)?;
                let a = addr.saturating_sub(back);
                let k = map.partition_point(|(start, _, _)| *start <= a);
                let (start, size, name) = map.get(k.checked_sub(1)?)?;
                (a - start < *size).then(|| {
                    Rc::from(vec![Sym {
                        name: name.clone(),
                        file: None,
                        line: None,
                        inlined: false,
                    }])
                })
            }
            _ => None,
        }
    }

    fn lookup(&mut self, i: usize, off: u64) -> Resolved {
        self.lookups += 1;
        let e = &self.files[i].1;
        let FileStatus::Ok { symbols, host } = &e.status else {
            return None;
        };
        let va = elf::vaddr(&e.loads, off)?;
        if let Some(n) = elf::stub_at(&e.plt, va) {
            return Some(Rc::from(vec![Sym {
                name: n.to_string(),
                file: None,
                line: None,
                inlined: false,
            }]));
        }
        let (symbols, host) = (symbols.clone(), host.clone());
        let use_debug = symbols != host && e.debug_error.is_none();
        if use_debug {
            match self.symbolize(&symbols, va, true) {
                Ok(Some(r)) => return Some(r),
                Ok(None) => {}
                Err(err) => self.files[i].1.debug_error = Some(err),
            }
        } else if symbols == host {
            return self.symbolize(&host, va, true).ok().flatten();
        }
        // The debug file failed, or did not name this frame: the binary's own symbols
        // (not the debug file again through its debug link).
        let r = self.symbolize(&host, va, false).ok().flatten();
        if r.is_some() {
            self.files[i].1.from_binary += 1;
        }
        r
    }

    /// The functions at `va` in ELF file `path`: `Ok(None)` if it names none there.
    /// `debug`: its DWARF and the debug file its debug link names too, else its symbol
    /// tables only.
    fn symbolize(
        &self,
        path: &Path,
        va: u64,
        debug: bool,
    ) -> std::result::Result<Resolved, String> {
        let mut elf = Elf::new(path);
        elf.debug_syms = debug;
        let src = Source::Elf(elf);
        let sym = match self.blaze.symbolize_single(&src, Input::VirtOffset(va)) {
            Ok(Symbolized::Sym(sym)) => sym,
            Ok(_) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let loc = |ci: Option<&blazesym::symbolize::CodeInfo>| {
            let file = ci.map(|c| match &c.dir {
                Some(d) if !d.as_os_str().is_empty() => {
                    d.join(&*c.file).to_string_lossy().into_owned()
                }
                _ => c.file.to_string_lossy().into_owned(),
            });
            (file, ci.and_then(|c| c.line))
        };
        let mut v = Vec::with_capacity(sym.inlined.len() + 1);
        for f in sym.inlined.iter().rev() {
            let (file, line) = loc(f.code_info.as_ref());
            v.push(Sym {
                name: f.name.to_string(),
                file,
                line,
                inlined: true,
            });
        }
        let (file, line) = loc(sym.code_info.as_deref());
        v.push(Sym {
            name: sym.name.to_string(),
            file,
            line,
            inlined: false,
        });
        Ok(Some(Rc::from(v)))
    }
}

/// The pid in a `perf-PID.map` file name.
fn perf_map_pid(p: &Path) -> Option<i32> {
    let name = p.file_name()?.to_str()?;
    name.strip_prefix("perf-")?
        .strip_suffix(".map")?
        .parse()
        .ok()
}

/// `START SIZE NAME` lines, hexadecimal, sorted by start. Bad lines are skipped.
fn read_perf_map(p: &Path) -> Vec<(u64, u64, String)> {
    let text = std::fs::read(p).unwrap_or_default();
    let mut v: Vec<(u64, u64, String)> = String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ' ');
            let h = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            Some((
                h(it.next()?)?,
                h(it.next()?)?,
                it.next()?.trim().to_string(),
            ))
        })
        .collect();
    v.sort_by_key(|e| e.0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_maps_name_jit_frames() {
        let dir = std::env::temp_dir().join(format!("ustack-perf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("perf-4242.map");
        std::fs::write(
            &p,
            "7f0000001000 100 jit_add\nbad line\n7f0000000000 80 jit_entry\n",
        )
        .unwrap();
        let mut s = Symbolizer::new(Options {
            perf_maps: vec![p],
            ..Options::default()
        });
        let at = |s: &mut Symbolizer, addr, depth| {
            s.resolve(4242, &Frame::Anon { addr, name: None }, depth)
                .map(|v| v[0].name.clone())
        };
        assert_eq!(at(&mut s, 0x7f0000001010, 0).as_deref(), Some("jit_add"));
        assert_eq!(at(&mut s, 0x7f0000000010, 0).as_deref(), Some("jit_entry"));
        // A return address just past the end is still inside its call.
        assert_eq!(at(&mut s, 0x7f0000000080, 1).as_deref(), Some("jit_entry"));
        assert_eq!(at(&mut s, 0x7f0000000080, 0), None);
        assert_eq!(
            s.resolve(
                1,
                &Frame::Anon {
                    addr: 0x7f0000001010,
                    name: None
                },
                0
            ),
            None
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn maps_and_sysroot() {
        let s = Symbolizer::new(Options {
            sysroot: Some("/guest".into()),
            maps: vec![("/usr/bin".into(), "/cache/prog".into())],
            ..Options::default()
        });
        assert_eq!(
            s.host_path("/usr/bin/uu_chain"),
            PathBuf::from("/cache/prog/uu_chain")
        );
        assert_eq!(
            s.host_path("/usr/binary"),
            PathBuf::from("/guest/usr/binary")
        );
        assert_eq!(
            s.host_path("/lib/libc.so.6"),
            PathBuf::from("/guest/lib/libc.so.6")
        );
    }
}
