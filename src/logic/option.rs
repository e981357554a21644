// SPDX-License-Identifier: GPL-2.0

//! Parsing what is written to `options/userstacktrace_delay`.

#![forbid(unsafe_code)]

/// The write is not `0` or `1`, with an optional trailing newline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidOption;

/// Parses a write to the option file, as the kernel's own `options/*` files accept it.
pub fn parse_option(buf: &[u8]) -> Result<bool, InvalidOption> {
    match buf {
        b"0" | b"0\n" => Ok(false),
        b"1" | b"1\n" => Ok(true),
        _ => Err(InvalidOption),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_zero_and_one_with_optional_newline() {
        assert_eq!(parse_option(b"0"), Ok(false));
        assert_eq!(parse_option(b"0\n"), Ok(false));
        assert_eq!(parse_option(b"1"), Ok(true));
        assert_eq!(parse_option(b"1\n"), Ok(true));
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            &b""[..],
            b"\n",
            b"2",
            b"10",
            b"1\n\n",
            b" 1",
            b"y",
            b"on",
            b"bogus",
            b"1\0",
        ] {
            assert_eq!(parse_option(bad), Err(InvalidOption), "{bad:?}");
        }
    }
}
