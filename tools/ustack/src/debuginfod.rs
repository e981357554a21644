// SPDX-License-Identifier: GPL-2.0

//! Debug files by build-id from debuginfod servers, the convention perf, gdb and elfutils
//! follow: the servers in `$DEBUGINFOD_URLS` (separated by spaces), each asked for
//! `URL/buildid/HEX/debuginfo`, the answer kept in elfutils' client cache layout,
//! `CACHE/HEX/debuginfo`, where CACHE is `$DEBUGINFOD_CACHE_PATH`, else
//! `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`; a file already
//! there is used without asking. `$DEBUGINFOD_TIMEOUT` (seconds, default 90) bounds each
//! connection's silence. `http://` is spoken here; `https://` goes through `curl`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest debug file fetched.
const MAX_SIZE: u64 = 4 << 30;

#[derive(Debug, Clone, Default)]
pub struct Client {
    pub urls: Vec<String>,
    pub cache: Option<PathBuf>,
    pub timeout: Duration,
}

impl Client {
    /// The client the environment describes; no server when `$DEBUGINFOD_URLS` is unset.
    pub fn from_env() -> Client {
        let urls = std::env::var("DEBUGINFOD_URLS")
            .unwrap_or_default()
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        let cache = std::env::var_os("DEBUGINFOD_CACHE_PATH")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME")
                    .map(|x| PathBuf::from(x).join("debuginfod_client"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/debuginfod_client"))
            });
        let timeout = std::env::var("DEBUGINFOD_TIMEOUT")
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(90);
        Client {
            urls,
            cache,
            timeout: Duration::from_secs(timeout),
        }
    }

    /// The debug file of `build_id` (hex): from the cache, else fetched into it.
    /// `check` tells whether a file is the right one (its build-id). Errors say which
    /// server failed how.
    pub fn debuginfo(
        &self,
        build_id: &str,
        check: impl Fn(&Path) -> bool,
    ) -> (Option<PathBuf>, Vec<String>) {
        let mut errors = Vec::new();
        let Some(cache) = &self.cache else {
            return (None, errors);
        };
        let dest = cache.join(build_id).join("debuginfo");
        if dest.is_file() && check(&dest) {
            return (Some(dest), errors);
        }
        if self.urls.is_empty() || !build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return (None, errors);
        }
        if let Err(e) = std::fs::create_dir_all(dest.parent().unwrap_or(cache)) {
            errors.push(format!("{}: {e}", cache.display()));
            return (None, errors);
        }
        let tmp = dest.with_extension(format!("part{}", std::process::id()));
        for url in &self.urls {
            let u = format!("{url}/buildid/{build_id}/debuginfo");
            match self.get(&u, &tmp) {
                Ok(()) if check(&tmp) => {
                    if std::fs::rename(&tmp, &dest).is_ok() {
                        return (Some(dest), errors);
                    }
                }
                Ok(()) => errors.push(format!("{u}: not the debug file of {build_id}")),
                Err(e) => errors.push(format!("{u}: {e}")),
            }
            let _ = std::fs::remove_file(&tmp);
        }
        (None, errors)
    }

    fn get(&self, url: &str, to: &Path) -> Result<(), String> {
        if let Some(rest) = url.strip_prefix("http://") {
            return self.http_get(rest, to, 3);
        }
        // https and the rest: curl, if there is one.
        let st = std::process::Command::new("curl")
            .args(["-fsSL", "--max-time"])
            .arg((self.timeout.as_secs() * 10).max(30).to_string())
            .arg("--max-filesize")
            .arg(MAX_SIZE.to_string())
            .arg("-o")
            .arg(to)
            .arg(url)
            .status()
            .map_err(|e| format!("curl: {e}"))?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("curl: {st}"))
        }
    }

    /// A GET over HTTP/1.1 of `host[:port]/path`, the body written to `to`.
    fn http_get(&self, rest: &str, to: &Path, redirects: u32) -> Result<(), String> {
        let (hostport, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let addr = if hostport.contains(':') && !hostport.ends_with(']') {
            hostport.to_string()
        } else {
            format!("{hostport}:80")
        };
        let s = TcpStream::connect(&addr).map_err(|e| format!("{addr}: {e}"))?;
        s.set_read_timeout(Some(self.timeout)).ok();
        s.set_write_timeout(Some(self.timeout)).ok();
        let mut w = &s;
        write!(
            w,
            "GET {path} HTTP/1.1\r\nHost: {hostport}\r\nUser-Agent: ustack/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            env!("CARGO_PKG_VERSION")
        )
        .map_err(|e| e.to_string())?;
        let mut r = BufReader::new(&s);
        let mut line = String::new();
        r.read_line(&mut line).map_err(|e| e.to_string())?;
        let status: u32 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| {
                format!(
                    "not an HTTP answer: {}",
                    crate::error::sanitize(line.trim())
                )
            })?;
        let (mut length, mut chunked, mut location) = (None, false, None);
        loop {
            line.clear();
            if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("the answer ended in its headers".into());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let v = v.trim();
                match k.to_ascii_lowercase().as_str() {
                    "content-length" => length = v.parse::<u64>().ok(),
                    "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
                    "location" => location = Some(v.to_string()),
                    _ => {}
                }
            }
        }
        if (300..400).contains(&status) && redirects > 0 {
            if let Some(l) = location.and_then(|l| l.strip_prefix("http://").map(str::to_string)) {
                return self.http_get(&l, to, redirects - 1);
            }
        }
        if status != 200 {
            return Err(format!("HTTP {status}"));
        }
        if length.is_some_and(|n| n > MAX_SIZE) {
            return Err("larger than 4 GiB".into());
        }
        let mut f = std::fs::File::create(to).map_err(|e| format!("{}: {e}", to.display()))?;
        let copy = |r: &mut dyn Read, f: &mut std::fs::File, n: u64| -> Result<u64, String> {
            std::io::copy(&mut r.take(n), f).map_err(|e| e.to_string())
        };
        if chunked {
            let mut total = 0u64;
            loop {
                line.clear();
                r.read_line(&mut line).map_err(|e| e.to_string())?;
                let n = u64::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| "a bad chunk size".to_string())?;
                if n == 0 {
                    break;
                }
                total += n;
                if total > MAX_SIZE {
                    return Err("larger than 4 GiB".into());
                }
                if copy(&mut r, &mut f, n)? != n {
                    return Err("the answer was cut".into());
                }
                line.clear();
                r.read_line(&mut line).map_err(|e| e.to_string())?;
            }
        } else {
            let want = length.unwrap_or(MAX_SIZE);
            let got = copy(&mut r, &mut f, want)?;
            if length.is_some_and(|n| n != got) {
                return Err(format!("the answer was cut ({got} of {want} bytes)"));
            }
        }
        f.flush().map_err(|e| e.to_string())
    }
}
