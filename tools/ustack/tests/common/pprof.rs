// SPDX-License-Identifier: GPL-2.0

//! pprof output decoded with upstream's `profile.proto` (a copy in `tests/fixtures/`, from
//! github.com/google/pprof `proto/profile.proto`), parsed at run time by a pure-Rust
//! `.proto` parser: a field the upstream schema does not have, or has with another type,
//! fails the decode, and nothing here knows field numbers.
#![allow(dead_code)]

use std::collections::BTreeMap;

use protobuf::reflect::{FileDescriptor, ReflectValueRef, RuntimeFieldType};
use protobuf::MessageDyn;

/// A decoded message: its fields by name (those set), each a list of values.
#[derive(Debug, Clone, Default)]
pub struct Msg {
    pub fields: BTreeMap<String, Vec<Val>>,
}

#[derive(Debug, Clone)]
pub enum Val {
    Int(i64),
    Str(String),
    Bool(bool),
    Msg(Msg),
}

impl Msg {
    /// A numeric field (0 when unset, as proto3 defines it).
    pub fn int(&self, name: &str) -> i64 {
        match self.fields.get(name).and_then(|v| v.first()) {
            Some(Val::Int(i)) => *i,
            Some(Val::Bool(b)) => i64::from(*b),
            None => 0,
            Some(v) => panic!("{name} is {v:?}"),
        }
    }
    /// A repeated numeric field.
    pub fn ints(&self, name: &str) -> Vec<i64> {
        self.fields
            .get(name)
            .map(|v| {
                v.iter()
                    .map(|x| match x {
                        Val::Int(i) => *i,
                        _ => panic!("{name}: {x:?}"),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    /// A repeated (or singular) message field.
    pub fn msgs(&self, name: &str) -> Vec<&Msg> {
        self.fields
            .get(name)
            .map(|v| {
                v.iter()
                    .map(|x| match x {
                        Val::Msg(m) => m,
                        _ => panic!("{name}: {x:?}"),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    pub fn strs(&self, name: &str) -> Vec<String> {
        self.fields
            .get(name)
            .map(|v| {
                v.iter()
                    .map(|x| match x {
                        Val::Str(s) => s.clone(),
                        _ => panic!("{name}: {x:?}"),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn val(v: ReflectValueRef) -> Val {
    match v {
        ReflectValueRef::U32(x) => Val::Int(i64::from(x)),
        ReflectValueRef::U64(x) => Val::Int(x as i64),
        ReflectValueRef::I32(x) => Val::Int(i64::from(x)),
        ReflectValueRef::I64(x) => Val::Int(x),
        ReflectValueRef::Bool(b) => Val::Bool(b),
        ReflectValueRef::String(s) => Val::Str(s.to_string()),
        ReflectValueRef::Message(m) => Val::Msg(walk(&*m)),
        other => panic!("unexpected value {other:?}"),
    }
}

/// The fields of `m`; panics on a field upstream's schema does not know.
fn walk(m: &dyn MessageDyn) -> Msg {
    let d = m.descriptor_dyn();
    let unknown: Vec<u32> = m.unknown_fields_dyn().iter().map(|(n, _)| n).collect();
    assert!(
        unknown.is_empty(),
        "{}: fields {unknown:?} are not in upstream profile.proto",
        d.name()
    );
    let mut out = Msg::default();
    for f in d.fields() {
        let vals: Vec<Val> = match f.runtime_field_type() {
            RuntimeFieldType::Singular(_) => f.get_singular(m).map(val).into_iter().collect(),
            RuntimeFieldType::Repeated(_) => {
                let r = f.get_repeated(m);
                (0..r.len()).map(|i| val(r.get(i))).collect()
            }
            RuntimeFieldType::Map(..) => panic!("profile.proto has no maps"),
        };
        if !vals.is_empty() {
            out.fields.insert(f.name().to_string(), vals);
        }
    }
    out
}

/// A gzipped pprof profile, decoded with upstream's schema; also its string table.
pub fn decode(gz: &[u8]) -> (Msg, Vec<String>) {
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut raw)
        .expect("pprof output is gzipped");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let parsed = protobuf_parse::Parser::new()
        .pure()
        .include(&dir)
        .input(dir.join("profile.proto"))
        .parse_and_typecheck()
        .expect("upstream profile.proto parses");
    let fds = FileDescriptor::new_dynamic_fds(parsed.file_descriptors, &[]).unwrap();
    let md = fds
        .iter()
        .find_map(|f| f.message_by_package_relative_name("Profile"))
        .expect("message Profile");
    let m = md
        .parse_from_bytes(&raw)
        .expect("the profile decodes with upstream's profile.proto");
    let p = walk(&*m);
    let strings = p.strs("string_table");
    assert_eq!(strings.first().map(String::as_str), Some(""));
    (p, strings)
}

/// A sample's labels: key -> (string value, number, unit).
pub fn labels(s: &Msg, strings: &[String]) -> BTreeMap<String, Vec<(String, i64, String)>> {
    let mut out: BTreeMap<String, Vec<(String, i64, String)>> = BTreeMap::new();
    for l in s.msgs("label") {
        out.entry(strings[l.int("key") as usize].clone())
            .or_default()
            .push((
                strings[l.int("str") as usize].clone(),
                l.int("num"),
                strings[l.int("num_unit") as usize].clone(),
            ));
    }
    out
}
