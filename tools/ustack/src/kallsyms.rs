// SPDX-License-Identifier: GPL-2.0

//! The traced kernel's symbols, from the `/proc/kallsyms` trace-cmd stores in every
//! trace.dat: kernel addresses of `kernel_stack` events to `function+0xoffset`, module
//! symbols with their module, as `trace-cmd report` names them.
//!
//! An address is named by the symbol at or below it when a symbol lies above it too (the
//! last symbol's end is not known); one below the first symbol or past the last, or a
//! trace without kallsyms (an empty `/proc/kallsyms`, a text trace), leaves it an address.

/// A symbol table, sorted by address.
#[derive(Debug, Default, Clone)]
pub struct Kallsyms {
    /// (address, index into `names`, index into `modules` + 1 or 0 for the kernel).
    syms: Vec<(u64, u32, u32)>,
    names: Vec<String>,
    modules: Vec<String>,
}

/// A kernel address, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KSym<'a> {
    pub name: &'a str,
    pub offset: u64,
    /// The module the symbol is in, `None` for the kernel image.
    pub module: Option<&'a str>,
}

impl Kallsyms {
    /// `/proc/kallsyms`'s text: `ADDRESS TYPE NAME [MODULE]` lines. Lines that do not
    /// parse, absolute symbols (type `a`, `A`), and symbols at address 0 (kallsyms shows every address as 0 to a reader
    /// without CAP_SYSLOG), are left out.
    pub fn parse(text: &[u8]) -> Kallsyms {
        let mut k = Kallsyms::default();
        let mut modules: std::collections::HashMap<String, u32> = Default::default();
        for line in String::from_utf8_lossy(text).lines() {
            let mut w = line.split_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (w.next(), w.next(), w.next()) else {
                continue;
            };
            // Absolute symbols (a module's per-CPU variables) are no place in code, and
            // trace-cmd's table leaves them out too.
            if ty.eq_ignore_ascii_case("a") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let module = match w.next() {
                Some(m) if m.starts_with('[') && m.ends_with(']') && m.len() > 2 => {
                    let m = &m[1..m.len() - 1];
                    let n = modules.len() as u32 + 1;
                    *modules.entry(m.to_string()).or_insert_with(|| {
                        k.modules.push(m.to_string());
                        n
                    })
                }
                _ => 0,
            };
            k.names.push(name.to_string());
            k.syms.push((addr, k.names.len() as u32 - 1, module));
        }
        // Stable: of symbols at one address (aliases: __asan_store8 and
        // __asan_store8_noabort), the first listed names it, as the kernel's own
        // kallsyms_lookup() does for the trace file's `<stack trace>`. trace-cmd report's
        // choice among aliases is libtraceevent's sort and bsearch, not a rule.
        k.syms.sort_by_key(|s| s.0);
        k
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Every symbol: address, name and module, by address.
    pub fn symbols(&self) -> impl Iterator<Item = (u64, &str, Option<&str>)> {
        self.syms.iter().map(|&(a, name, module)| {
            (
                a,
                self.names[name as usize].as_str(),
                (module > 0).then(|| self.modules[module as usize - 1].as_str()),
            )
        })
    }

    /// The symbol `addr` is in, if the table covers it.
    pub fn lookup(&self, addr: u64) -> Option<KSym<'_>> {
        // The last symbol at or below addr, with one above it.
        let i = self.syms.partition_point(|s| s.0 <= addr);
        if i == 0 || i == self.syms.len() {
            return None;
        }
        let at = self.syms[i - 1].0;
        // The first of the symbols at that address.
        let j = self.syms.partition_point(|s| s.0 < at);
        let (a, name, module) = self.syms[j];
        Some(KSym {
            name: &self.names[name as usize],
            offset: addr - a,
            module: (module > 0).then(|| self.modules[module as usize - 1].as_str()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_addresses_it_covers() {
        let k = Kallsyms::parse(
            b"ffffffff81000000 T _stext\n\
              ffffffff81001000 T do_syscall_64\n\
              ffffffff81001000 t do_syscall_64_alias\n\
              ffffffff81002000 T entry_SYSCALL_64\n\
              0000000000000000 A fixed_percpu_data\n\
              ffffffff81001800 a absolute_thing\n\
              garbage line\n\
              ffffffffc0001000 t uu_export_write\t[user_unwind]\n\
              ffffffffc0002000 t uu_other\t[user_unwind]\n",
        );
        assert_eq!(k.len(), 6);
        assert_eq!(
            k.lookup(0xffffffff81001234),
            Some(KSym {
                name: "do_syscall_64",
                offset: 0x234,
                module: None
            })
        );
        assert_eq!(
            k.lookup(0xffffffffc0001010),
            Some(KSym {
                name: "uu_export_write",
                offset: 0x10,
                module: Some("user_unwind")
            })
        );
        // Below the first symbol, past the last: not covered.
        assert_eq!(k.lookup(0xffffffff80000000), None);
        assert_eq!(k.lookup(0xffffffffc0002010), None);
        assert!(Kallsyms::parse(b"").lookup(0xffffffff81001000).is_none());
    }
}
