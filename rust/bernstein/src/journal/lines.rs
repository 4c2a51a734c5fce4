//! bernstein's tolerant reader (`load_events`): physical lines as Python's universal
//! newlines split them, each stripped and parsed, blank ones skipped, any line that is
//! not a JSON object discarded and counted.

use std::ops::Range;

use crate::pyjson::{parse, PyValue};

/// Python's `str.isspace()` for one character (what `str.strip()` removes).
pub(super) fn is_py_space(c: char) -> bool {
    matches!(c,
        '\t'..='\r' | '\x1c'..='\x1f' | ' ' | '\u{85}' | '\u{a0}' | '\u{1680}'
        | '\u{2000}'..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}')
}

/// Physical lines as Python's universal newlines split them (`\n`, `\r\n`, lone `\r`).
pub fn physical_lines(data: &[u8]) -> Vec<&[u8]> {
    if memchr::memchr(b'\r', data).is_none() {
        // The common file: `\n` only.
        let mut lines: Vec<&[u8]> = Vec::with_capacity(data.len() / 256 + 1);
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', data) {
            lines.push(&data[start..end]);
            start = end + 1;
        }
        if start < data.len() {
            lines.push(&data[start..]);
        }
        return lines;
    }
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while let Some(offset) = memchr::memchr2(b'\n', b'\r', &data[i..]) {
        i += offset;
        lines.push(&data[start..i]);
        i += if data[i] == b'\r' && data.get(i + 1) == Some(&b'\n') {
            2
        } else {
            1
        };
        start = i;
    }
    if start < data.len() {
        lines.push(&data[start..]);
    }
    lines
}

/// A line the reader keeps: its physical number and parsed object members.
pub struct KeptRow<'a> {
    pub line: u64,
    pub value: PyValue<'a>,
    pub duplicate_keys: bool,
}

/// What `load_events` makes of one physical line.
pub(super) enum Line<'a> {
    Blank,
    Discarded,
    Kept(KeptRow<'a>),
    /// A line on which `load_events` raises instead of discarding it (it catches only
    /// `JSONDecodeError`): nesting past Python's recursion limit (`RecursionError`), an
    /// integer of more than 4,300 digits (`ValueError`). bernstein then gives no verdict.
    Crash(&'static str),
}

/// What Python raises for each parse error `load_events` does not catch.
const UNCAUGHT: [(&str, &str); 2] = [
    (
        "maximum recursion depth exceeded",
        "RecursionError: maximum recursion depth exceeded while decoding a JSON document",
    ),
    (
        "Exceeds the limit (4300 digits)",
        "ValueError: Exceeds the limit (4300 digits) for integer string conversion",
    ),
];

pub(super) fn read_line(number: u64, raw: &[u8]) -> Line<'_> {
    let Ok(text) = std::str::from_utf8(raw) else {
        return Line::Discarded;
    };
    let text = text.trim_matches(is_py_space);
    if text.is_empty() {
        return Line::Blank;
    }
    match parse(text) {
        Ok(parsed) if matches!(parsed.value, PyValue::Object(_)) => Line::Kept(KeptRow {
            line: number,
            value: parsed.value,
            duplicate_keys: parsed.duplicate_keys,
        }),
        Ok(_) => Line::Discarded,
        Err(error) => {
            let message = error.to_string();
            UNCAUGHT
                .iter()
                .find(|(said, _)| message.contains(said))
                .map_or(Line::Discarded, |(_, raised)| Line::Crash(raised))
        }
    }
}

/// A physical line the reader does not skip: its number, where its bytes lie in the
/// journal (without the newline), and whether the reader keeps it or discards it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadLine {
    pub number: u64,
    pub kept: bool,
    pub bytes: Range<usize>,
}

/// Each physical line the reader does not skip as blank, with what it makes of it: the
/// reading verify's walk does, for what `runs` and `show` say of the same journal.
pub(super) fn read_lines(data: &[u8]) -> impl Iterator<Item = (u64, Range<usize>, Line<'_>)> {
    let base = data.as_ptr() as usize;
    physical_lines(data)
        .into_iter()
        .enumerate()
        .filter_map(move |(number, raw)| {
            let start = raw.as_ptr() as usize - base;
            match read_line(number as u64, raw) {
                Line::Blank => None,
                line => Some((number as u64, start..start + raw.len(), line)),
            }
        })
}

/// [`read_lines`] without the parsed values.
pub fn reader_lines(data: &[u8]) -> Vec<ReadLine> {
    read_lines(data)
        .map(|(number, bytes, line)| ReadLine {
            number,
            kept: matches!(line, Line::Kept(_)),
            bytes,
        })
        .collect()
}

/// `load_events`: kept rows, discarded physical line numbers, physical line count.
pub fn load_events(data: &[u8]) -> (Vec<KeptRow<'_>>, Vec<u64>, u64) {
    let lines = physical_lines(data);
    let mut kept = Vec::with_capacity(lines.len());
    let mut discarded = Vec::new();
    for (number, raw) in lines.iter().enumerate() {
        match read_line(number as u64, raw) {
            Line::Blank => {}
            // Where bernstein raises, the line gives no event either.
            Line::Discarded | Line::Crash(_) => discarded.push(number as u64),
            Line::Kept(row) => kept.push(row),
        }
    }
    (kept, discarded, lines.len() as u64)
}
