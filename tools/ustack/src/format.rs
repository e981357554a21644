// SPDX-License-Identifier: GPL-2.0

//! Event format files (`events/SYSTEM/EVENT/format`, as the trace.dat stores them): the
//! event's id and each field's offset, size and kind, so that no layout is hard-coded.

use crate::bytes::Endian;
use crate::error::{Error, Result};

/// One field of an event record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `__data_loc`: the field holds `(len << 16) | offset` of the data in the record.
    pub data_loc: bool,
    /// `__rel_loc`: as `__data_loc`, the offset counted from the end of this field.
    pub rel_loc: bool,
}

/// An event's format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub system: String,
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
}

impl Format {
    /// Parse a format file's text. `system` is the directory it came from.
    pub fn parse(system: &str, text: &[u8]) -> Result<Format> {
        let text = String::from_utf8_lossy(text);
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("ID:") {
                id = v.trim().parse::<u16>().ok();
            } else if line.starts_with("field:") {
                fields.push(parse_field(line)?);
            }
        }
        let name = name.ok_or_else(|| Error::new("event format without a name"))?;
        let id = id.ok_or_else(|| Error::new(format!("event format {name} without an ID")))?;
        Ok(Format {
            system: system.to_string(),
            name,
            id,
            fields,
        })
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// `system:name`, as trace-cmd names events.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.system, self.name)
    }
}

/// `field:TYPE NAME; offset:N; size:N; signed:N;` (tab-separated)
fn parse_field(line: &str) -> Result<Field> {
    let bad = || Error::new(format!("unreadable field line: {line}"));
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("field:") {
            decl = Some(v.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse::<usize>().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse::<usize>().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl.ok_or_else(bad)?;
    // The name is the last word, without an array suffix: "u8 data[32]", "char comm[16]".
    let last = decl.split_whitespace().last().ok_or_else(bad)?;
    let name = last.split('[').next().unwrap_or(last).to_string();
    Ok(Field {
        name,
        offset: offset.ok_or_else(bad)?,
        size: size.ok_or_else(bad)?,
        signed,
        data_loc: decl.starts_with("__data_loc"),
        rel_loc: decl.starts_with("__rel_loc"),
    })
}

/// The page header's layout, from `events/header_page`: where the timestamp, the commit
/// word (its size is the kernel's long) and the data start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    pub commit_offset: usize,
    pub commit_size: usize,
    pub data_offset: usize,
}

impl PageHeader {
    pub fn parse(text: &[u8]) -> Result<PageHeader> {
        let text = String::from_utf8_lossy(text);
        let mut commit = None;
        let mut data = None;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with("field:") {
                let f = parse_field(line)?;
                match f.name.as_str() {
                    "commit" => commit = Some(f),
                    "data" => data = Some(f),
                    _ => {}
                }
            }
        }
        let (Some(commit), Some(data)) = (commit, data) else {
            return Err(Error::new("header_page without commit and data fields"));
        };
        if commit.size != 4 && commit.size != 8 {
            return Err(Error::new(format!(
                "header_page commit size {}",
                commit.size
            )));
        }
        Ok(PageHeader {
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
        })
    }

    /// The size of a sub-buffer, header included, from the same text: the `data` field's
    /// end (the kernel prints the sub-buffer's capacity as its size).
    pub fn page_size(text: &[u8]) -> Option<usize> {
        String::from_utf8_lossy(text)
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("field:"))
            .filter_map(|l| parse_field(l).ok())
            .find(|f| f.name == "data")
            .and_then(|f| f.offset.checked_add(f.size))
    }
}

/// Field values of one record, read through its format.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub data: &'a [u8],
    pub endian: Endian,
}

impl<'a> Record<'a> {
    /// An integer field, sign-extended when the format says so.
    pub fn int(&self, f: &Field) -> Option<u64> {
        let v = self.endian.uint(self.data.get(f.offset..)?, f.size)?;
        if f.signed && f.size < 8 {
            let shift = 64 - 8 * f.size as u32;
            return Some((((v << shift) as i64) >> shift) as u64);
        }
        Some(v)
    }

    /// The bytes of a field: a `__data_loc`/`__rel_loc` one's data, else the field itself.
    pub fn bytes(&self, f: &Field) -> Option<&'a [u8]> {
        if f.data_loc || f.rel_loc {
            let loc = self.endian.uint(self.data.get(f.offset..)?, 4)? as usize;
            let mut start = loc & 0xffff;
            if f.rel_loc {
                start = start.checked_add(f.offset + f.size)?;
            }
            let len = loc >> 16;
            return self.data.get(start..start.checked_add(len)?);
        }
        self.data.get(f.offset..f.offset.checked_add(f.size)?)
    }

    /// A string field, up to its NUL.
    pub fn str(&self, f: &Field) -> Option<&'a [u8]> {
        let b = self.bytes(f)?;
        Some(b.split(|&c| c == 0).next().unwrap_or(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STACK: &str = "name: user_unwind_stack
ID: 1472
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u64 cookie;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u16 start;\toffset:16;\tsize:2;\tsigned:0;
\tfield:u16 total;\toffset:18;\tsize:2;\tsigned:0;
\tfield:__data_loc u64[] files;\toffset:20;\tsize:4;\tsigned:0;
\tfield:__data_loc u32[] offs;\toffset:24;\tsize:4;\tsigned:0;
\tfield:__data_loc u8[] file_idx;\toffset:28;\tsize:4;\tsigned:0;

print fmt: \"cookie=%llx\", REC->cookie
";

    #[test]
    fn parses_a_format_file() {
        let f = Format::parse("user_unwind", STACK.as_bytes()).unwrap();
        assert_eq!(f.id, 1472);
        assert_eq!(f.full_name(), "user_unwind:user_unwind_stack");
        let files = f.field("files").unwrap();
        assert!(files.data_loc && files.offset == 20 && files.size == 4);
        assert!(f.field("common_pid").unwrap().signed);
        assert_eq!(f.fields.len(), 10);
    }

    #[test]
    fn reads_fields_and_data_locs() {
        let f = Format::parse("user_unwind", STACK.as_bytes()).unwrap();
        let mut rec = vec![0u8; 40];
        rec[4..8].copy_from_slice(&(-5i32).to_le_bytes());
        rec[8..16].copy_from_slice(&0x1234u64.to_le_bytes());
        rec[20..24].copy_from_slice(&((8u32 << 16) | 32).to_le_bytes());
        rec[32..40].copy_from_slice(&7u64.to_le_bytes());
        let r = Record {
            data: &rec,
            endian: Endian::Little,
        };
        assert_eq!(r.int(f.field("cookie").unwrap()), Some(0x1234));
        assert_eq!(r.int(f.field("common_pid").unwrap()), Some(-5i64 as u64));
        assert_eq!(r.bytes(f.field("files").unwrap()), Some(&rec[32..40]));
        // A data_loc past the record's end is no data, not a panic.
        rec[24..28].copy_from_slice(&((8u32 << 16) | 36).to_le_bytes());
        let r = Record {
            data: &rec,
            endian: Endian::Little,
        };
        assert_eq!(r.bytes(f.field("offs").unwrap()), None);
    }

    #[test]
    fn page_layout_from_header_page() {
        // events/header_page of Linux 7.3, x86-64, 4 KiB sub-buffers.
        let text = b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: char overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;
";
        let h = PageHeader::parse(text).unwrap();
        assert_eq!((h.commit_offset, h.commit_size, h.data_offset), (8, 8, 16));
        assert_eq!(PageHeader::page_size(text), Some(4096));
        assert_eq!(
            PageHeader::page_size(b"field: u64 timestamp; offset:0; size:8;"),
            None
        );
    }

    #[test]
    fn rejects_a_format_without_id() {
        assert!(Format::parse("x", b"name: foo\nformat:\n").is_err());
        assert!(Format::parse("x", b"").is_err());
    }
}
