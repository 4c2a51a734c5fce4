//! Journal rows canonicalized straight from their text, without a value tree.
//!
//! Nearly every row bernstein writes is one object of plain keys, strings in
//! `json.dumps`'s own ASCII-escaped form, numbers, and a few nested lists and objects.
//! For such a row the `py-json-v1` canonical form of each value (compact, keys sorted,
//! ASCII-escaped) is written in the one scan that reads it, and the payload is then put
//! together in key order: no allocation per value, each string scanned once.
//!
//! Anything else makes [`LeanReader::read`] answer `None`: a repeated key, a key with an
//! escape, a raw byte outside printable ASCII in a string, `NaN` or `Infinity`, an
//! integer over Python's digit limit, deep nesting, or anything the parser would refuse.
//! The walk then takes the general path for that row (`parse`, `dumps_sorted`), so the
//! two paths never have to agree on anything but what both read.

use crate::pyjson::{json_float, push_short_escape, MAX_INT_DIGITS};
use agentledger_core::canonical::skip_printable_ascii;

/// Nested deeper than this, a row takes the general path (which allows 990 levels).
const MAX_DEPTH: usize = 32;

/// What a member's value is, as far as the walk needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string written without escapes: its contents are the text between the quotes.
    PlainStr,
    /// An integer: its canonical text is its `str()`.
    Int,
    /// Anything else (an escaped string, a float, a literal, a list or an object).
    Other,
}

/// A range of a row's text or canonical output (32 bits: rows are sorted by moving these).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn new(start: usize, end: usize) -> Self {
        // `read` refuses rows long enough to overflow.
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    fn of(self, bytes: &[u8]) -> &[u8] {
        &bytes[self.start as usize..self.end as usize]
    }
}

/// Rows longer than this take the general path (a canonical form can be a few times
/// longer than its text, and spans are 32-bit).
const MAX_ROW: usize = (u32::MAX / 8) as usize;

/// One member of an object, as spans of the row's text and of the canonical output.
#[derive(Debug, Clone)]
struct Entry {
    /// The key's first eight bytes, big-endian and zero-padded: most keys are ordered
    /// by this alone (a key has no NUL byte, so the padding cannot tie two keys).
    prefix: u64,
    key: Span,
    value: Span,
    canon: Span,
    kind: Kind,
    /// Whether the member is part of the hashed payload (top level only).
    hashed: bool,
}

/// Reusable buffers for reading the rows of one journal.
pub struct LeanReader {
    /// The top-level members the caller reads, in key order, with their prefixes.
    reads: &'static [&'static [u8]],
    read_prefixes: Vec<u64>,
    /// Where each of `reads` is among the members of the row just read.
    slots: Vec<Option<usize>>,
    /// Canonical forms of the top-level values, one after the other.
    canon: Vec<u8>,
    /// Where a nested object's members are put in key order.
    spare: Vec<u8>,
    /// Members of the objects being read (a stack: nested objects sit above their parent).
    entries: Vec<Entry>,
}

/// A row read by [`LeanReader::read`]: its top-level members in key order (`'t`: the
/// line's text, `'r`: the reader's buffers).
pub struct LeanRow<'r, 't> {
    text: &'t [u8],
    canon: &'r [u8],
    members: &'r [Entry],
    slots: &'r [Option<usize>],
}

/// See [`Entry::prefix`].
fn prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

impl Entry {
    /// This entry's key against `key` (whose prefix is `prefix`).
    fn order(&self, text: &[u8], prefix: u64, key: &[u8]) -> std::cmp::Ordering {
        self.prefix.cmp(&prefix).then_with(|| {
            // Equal prefixes: both keys are the same under eight bytes, or both go on.
            let own = self.key.of(text);
            if own.len() <= 8 && key.len() <= 8 {
                own.len().cmp(&key.len())
            } else {
                own[8.min(own.len())..].cmp(&key[8.min(key.len())..])
            }
        })
    }
}

impl<'r, 't> LeanRow<'r, 't> {
    /// The member `read` (an index into the reader's `reads`).
    fn get(&self, read: usize) -> Option<&'r Entry> {
        self.slots[read].map(|at| &self.members[at])
    }

    /// The member `read`: `Some(None)` when absent, `Some(Some(contents))` for a plain
    /// string, `None` for any other value (the caller needs the general path).
    pub fn plain_str(&self, read: usize) -> Option<Option<&'t [u8]>> {
        match self.get(read) {
            None => Some(None),
            Some(e) if e.kind == Kind::PlainStr => Some(Some(
                Span::new(e.value.start as usize + 1, e.value.end as usize - 1).of(self.text),
            )),
            Some(_) => None,
        }
    }

    /// The member `read` as written, with its kind and canonical text (a float's is only
    /// its text as written when the member is not hashed).
    pub fn member(&self, read: usize) -> Option<(Kind, &'t [u8], &'r [u8])> {
        self.get(read).map(|e| self.parts(e))
    }

    fn parts(&self, e: &Entry) -> (Kind, &'t [u8], &'r [u8]) {
        (e.kind, e.value.of(self.text), e.canon.of(self.canon))
    }

    /// Any member, by key (tests).
    #[cfg(test)]
    pub fn member_by_key(&self, key: &[u8]) -> Option<(Kind, &'t [u8], &'r [u8])> {
        let wanted = prefix(key);
        let at = self
            .members
            .binary_search_by(|e| e.order(self.text, wanted, key))
            .ok()?;
        Some(self.parts(&self.members[at]))
    }

    /// The payload bernstein hashes, canonical, appended to `out`: every hashed member,
    /// with `"event"` set to `event` (a plain string), in key order.
    pub fn payload(&self, event: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        out.push(b'{');
        let mut event_written = false;
        let write_event = |out: &mut Vec<u8>| {
            if out.len() > start + 1 {
                out.push(b',');
            }
            out.extend_from_slice(b"\"event\":\"");
            out.extend_from_slice(event);
            out.push(b'"');
        };
        for e in self.members {
            let key = e.key.of(self.text);
            if !event_written && key > &b"event"[..] {
                write_event(out);
                event_written = true;
            }
            if !e.hashed {
                continue;
            }
            if out.len() > start + 1 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(key);
            out.extend_from_slice(b"\":");
            out.extend_from_slice(e.canon.of(self.canon));
        }
        if !event_written {
            write_event(out);
        }
        out.push(b'}');
    }
}

impl LeanReader {
    /// A reader for rows whose members `reads` (in key order) the caller will ask for.
    pub fn new(reads: &'static [&'static [u8]]) -> Self {
        debug_assert!(reads.windows(2).all(|w| w[0] < w[1]));
        LeanReader {
            reads,
            read_prefixes: reads.iter().map(|key| prefix(key)).collect(),
            slots: Vec::with_capacity(reads.len()),
            canon: Vec::new(),
            spare: Vec::new(),
            entries: Vec::new(),
        }
    }

    /// Read one row from its physical line; `None` when it needs the general path. A row
    /// read here is ASCII, so Python decodes and strips its line as this does. Top-level
    /// members that `unhashed` names are left out of the payload, and their floats are
    /// checked but not re-formatted (the walk never hashes them).
    pub fn read<'r, 't>(
        &'r mut self,
        line: &'t [u8],
        unhashed: fn(&[u8]) -> bool,
    ) -> Option<LeanRow<'r, 't>> {
        // `str.strip()`'s ASCII whitespace; a line with any other byte at an end is left
        // to the general path.
        let space = |b: &u8| matches!(b, b'\t'..=b'\r' | 0x1C..=0x1F | b' ');
        let start = line.iter().position(|b| !space(b)).unwrap_or(line.len());
        let end = line
            .iter()
            .rposition(|b| !space(b))
            .map_or(start, |last| last + 1);
        let text = &line[start..end];
        if text.len() > MAX_ROW {
            return None;
        }
        self.canon.clear();
        self.entries.clear();
        let mut scan = Scan {
            text,
            pos: 0,
            out: &mut self.canon,
            spare: &mut self.spare,
            entries: &mut self.entries,
            unhashed,
            format_floats: true,
        };
        scan.ws();
        if scan.peek() != Some(b'{') {
            return None;
        }
        scan.members(1)?;
        scan.ws();
        if scan.pos != scan.text.len() {
            return None;
        }
        // Both lists are in key order: one merge finds every member the caller reads.
        self.slots.clear();
        self.slots.resize(self.reads.len(), None);
        let (mut at, mut read) = (0, 0);
        while at < self.entries.len() && read < self.reads.len() {
            let order = self.entries[at].order(text, self.read_prefixes[read], self.reads[read]);
            match order {
                std::cmp::Ordering::Less => at += 1,
                std::cmp::Ordering::Greater => read += 1,
                std::cmp::Ordering::Equal => {
                    self.slots[read] = Some(at);
                    (at, read) = (at + 1, read + 1);
                }
            }
        }
        Some(LeanRow {
            text,
            canon: &self.canon,
            members: &self.entries,
            slots: &self.slots,
        })
    }
}

struct Scan<'t, 's> {
    text: &'t [u8],
    pos: usize,
    out: &'s mut Vec<u8>,
    spare: &'s mut Vec<u8>,
    entries: &'s mut Vec<Entry>,
    unhashed: fn(&[u8]) -> bool,
    /// Off while reading the value of an unhashed top-level member.
    format_floats: bool,
}

impl Scan<'_, '_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// One value, its canonical form appended to `out`.
    fn value(&mut self, depth: usize) -> Option<Kind> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' => {
                let base = self.entries.len();
                let start = self.out.len();
                self.members(depth + 1)?;
                self.put_in_order(base, start);
                self.entries.truncate(base);
                Some(Kind::Other)
            }
            b'[' => self.array(depth + 1).map(|()| Kind::Other),
            b'n' => self.literal(b"null"),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<Kind> {
        if !self.text[self.pos..].starts_with(word) {
            return None;
        }
        self.pos += word.len();
        self.out.extend_from_slice(word);
        Some(Kind::Other)
    }

    /// A string in `json.dumps`'s ASCII-escaped form: each escape written as Python
    /// would write the code unit it stands for (a surrogate pair comes out as the same
    /// two escapes, decoded as one character or not).
    fn string(&mut self) -> Option<Kind> {
        let text = self.text;
        let first = self.pos + 1;
        let end = skip_printable_ascii(text, first);
        if text.get(end) == Some(&b'"') {
            self.out.extend_from_slice(&text[self.pos..=end]);
            self.pos = end + 1;
            return Some(Kind::PlainStr);
        }
        self.out.push(b'"');
        let mut i = first;
        loop {
            let run_end = skip_printable_ascii(text, i);
            self.out.extend_from_slice(&text[i..run_end]);
            match text.get(run_end)? {
                b'"' => {
                    self.out.push(b'"');
                    self.pos = run_end + 1;
                    return Some(Kind::Other);
                }
                b'\\' => {}
                // A control byte (refused by the parser) or one that is escaped otherwise.
                _ => return None,
            }
            let unit = match text.get(run_end + 1)? {
                b'"' => 0x22,
                b'\\' => 0x5C,
                b'/' => 0x2F,
                b'b' => 0x08,
                b'f' => 0x0C,
                b'n' => 0x0A,
                b'r' => 0x0D,
                b't' => 0x09,
                b'u' => hex4(text.get(run_end + 2..run_end + 6)?)?,
                _ => return None,
            };
            i = run_end + if text[run_end + 1] == b'u' { 6 } else { 2 };
            match unit {
                0x20..=0x7E if unit != 0x22 && unit != 0x5C => self.out.push(unit as u8),
                _ => push_short_escape(unit, self.out),
            }
        }
    }

    fn number(&mut self) -> Option<Kind> {
        let text = self.text;
        let start = self.pos;
        let mut i = start + usize::from(text[start] == b'-');
        match text.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => {
                while let Some(b'0'..=b'9') = text.get(i) {
                    i += 1;
                }
            }
            _ => return None,
        }
        let mut float = false;
        if text.get(i) == Some(&b'.') && matches!(text.get(i + 1), Some(b'0'..=b'9')) {
            float = true;
            i += 1;
            while let Some(b'0'..=b'9') = text.get(i) {
                i += 1;
            }
        }
        if let Some(b'e' | b'E') = text.get(i) {
            let mut end = i + 1;
            if let Some(b'+' | b'-') = text.get(end) {
                end += 1;
            }
            if matches!(text.get(end), Some(b'0'..=b'9')) {
                float = true;
                while let Some(b'0'..=b'9') = text.get(end) {
                    end += 1;
                }
                i = end;
            }
        }
        self.pos = i;
        let lexeme = &text[start..i];
        if float {
            // Any lexeme of this grammar is a float to Rust and Python alike.
            if self.format_floats {
                // ASCII by construction.
                let x: f64 = std::str::from_utf8(lexeme).ok()?.parse().ok()?;
                self.out.extend_from_slice(json_float(x).as_bytes());
            } else {
                self.out.extend_from_slice(lexeme);
            }
            return Some(Kind::Other);
        }
        let digits = lexeme.len() - usize::from(lexeme[0] == b'-');
        if digits > MAX_INT_DIGITS {
            return None;
        }
        let canonical: &[u8] = if lexeme == b"-0" { b"0" } else { lexeme };
        self.out.extend_from_slice(canonical);
        Some(Kind::Int)
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.pos += 1;
        self.out.push(b'[');
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.out.push(b']');
            return Some(());
        }
        loop {
            self.ws();
            self.value(depth)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    self.out.push(b',');
                }
                b']' => {
                    self.pos += 1;
                    self.out.push(b']');
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An object's members, pushed on `entries` in key order (values in `out`).
    fn members(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let base = self.entries.len();
        self.pos += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Some(());
        }
        loop {
            self.ws();
            if self.peek()? != b'"' {
                return None;
            }
            let key_start = self.pos + 1;
            let key_end = skip_printable_ascii(self.text, key_start);
            if self.text.get(key_end) != Some(&b'"') {
                return None;
            }
            self.pos = key_end + 1;
            self.ws();
            if self.peek()? != b':' {
                return None;
            }
            self.pos += 1;
            self.ws();
            let (value_start, canon_start) = (self.pos, self.out.len());
            let hashed = depth > 1 || !(self.unhashed)(&self.text[key_start..key_end]);
            self.format_floats = hashed;
            let kind = self.value(depth)?;
            self.format_floats = true;
            self.entries.push(Entry {
                prefix: prefix(&self.text[key_start..key_end]),
                key: Span::new(key_start, key_end),
                value: Span::new(value_start, self.pos),
                canon: Span::new(canon_start, self.out.len()),
                kind,
                hashed,
            });
            self.ws();
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    break;
                }
                _ => return None,
            }
        }
        // Plain ASCII keys: byte order is Python's `str` order. A repeated key is left to
        // the general path (it keeps the first position and the last value).
        let text = self.text;
        let members = &mut self.entries[base..];
        // By prefix first (one integer compare); keys that share one are rare.
        members.sort_unstable_by_key(|e| e.prefix);
        if members.windows(2).any(|w| w[0].prefix == w[1].prefix) {
            members.sort_unstable_by(|a, b| a.order(text, b.prefix, b.key.of(text)));
        }
        let repeated = members.windows(2).any(|w| {
            w[0].prefix == w[1].prefix
                && w[0].order(text, w[1].prefix, w[1].key.of(text)) == std::cmp::Ordering::Equal
        });
        (!repeated).then_some(())
    }

    /// Rewrite a nested object's values (from `start` in `out`) as the object, in key
    /// order.
    fn put_in_order(&mut self, base: usize, start: usize) {
        let spare = &mut *self.spare;
        spare.clear();
        spare.push(b'{');
        for (i, e) in self.entries[base..].iter().enumerate() {
            if i > 0 {
                spare.push(b',');
            }
            spare.push(b'"');
            spare.extend_from_slice(e.key.of(self.text));
            spare.extend_from_slice(b"\":");
            spare.extend_from_slice(e.canon.of(self.out));
        }
        spare.push(b'}');
        self.out.truncate(start);
        self.out.extend_from_slice(spare);
    }
}

/// Four hex digits (either case), as the parser reads `\uXXXX`.
fn hex4(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0u32, |n, &b| Some(n * 16 + (b as char).to_digit(16)?))
}
