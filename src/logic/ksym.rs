// SPDX-License-Identifier: GPL-2.0

//! Recognising kernel symbols by name, for the probes the module places at load.

#![forbid(unsafe_code)]

/// Whether `name` is `__fput` or a compiler clone of it (`__fput.isra.0`,
/// `__fput.constprop.0`, `__fput.part.0`, `__fput.cold`): the compiler may split or
/// specialise the static function, and every copy frees files. `__fput_sync` and
/// `__fput_deferred` are other functions, which call one of these.
pub fn is_fput_symbol(name: &[u8]) -> bool {
    match name.strip_prefix(b"__fput") {
        Some(rest) => rest.is_empty() || rest.first() == Some(&b'.'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fput_and_its_clones_only() {
        for name in [
            &b"__fput"[..],
            b"__fput.isra.0",
            b"__fput.constprop.0",
            b"__fput.cold",
        ] {
            assert!(is_fput_symbol(name), "{name:?}");
        }
        for name in [
            &b"__fput_sync"[..],
            b"__fput_deferred",
            b"fput",
            b"____fput",
            b"__fpu",
        ] {
            assert!(!is_fput_symbol(name), "{name:?}");
        }
    }
}
