// SPDX-License-Identifier: GPL-2.0

//! The tool's one error type: what went wrong, and where in the input.

use std::fmt;

/// An error with the place it was found, `at` a byte offset of the file when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub msg: String,
    pub at: Option<u64>,
    /// The command line is wrong, not the input (exit status 2).
    pub usage: bool,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(msg: impl Into<String>) -> Self {
        Error {
            msg: msg.into(),
            at: None,
            usage: false,
        }
    }

    /// A usage error: the command line asks for what cannot be.
    pub fn usage(msg: impl Into<String>) -> Self {
        Error {
            usage: true,
            ..Error::new(msg)
        }
    }

    pub fn is_usage(&self) -> bool {
        self.usage
    }

    pub fn at(msg: impl Into<String>, at: u64) -> Self {
        Error {
            msg: msg.into(),
            at: Some(at),
            usage: false,
        }
    }

    /// The same error with `what` in front: "reading X: ...".
    pub fn context(self, what: &str) -> Self {
        Error {
            msg: format!("{what}: {}", self.msg),
            at: self.at,
            usage: self.usage,
        }
    }
}

/// A message as shown: control bytes escaped, cut to 300 characters (damaged input ends
/// up in messages: names, format text).
pub fn sanitize(msg: &str) -> String {
    const MAX: usize = 300;
    let mut out = String::new();
    for (n, c) in msg.chars().enumerate() {
        if n >= MAX {
            out.push_str("...");
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = sanitize(&self.msg);
        match self.at {
            Some(at) => write!(f, "{msg} (at byte {at:#x})"),
            None => f.write_str(&msg),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(e.to_string())
    }
}
