//! Python `json` compatibility, for verifying journals that Python wrote and hashed.
//!
//! bernstein (an orchestrator whose workdirs the ledger imports) hashes *parsed* values
//! re-serialised by Python's `json.dumps`, so reproducing its hashes needs Python's data
//! model, not JSON's: integers of any size kept exact and distinct from floats (`1` vs
//! `1.0`), `NaN`/`Infinity`, strings that may hold lone surrogates, duplicate keys where
//! the last one wins. This module has:
//!
//! - [`parse`]: `json.loads` (the C scanner's grammar and errors) into a [`PyValue`];
//!   [`decode_json_bytes`] what `json.loads` decodes bytes to first (UTF-16 and UTF-32
//!   guessed from NUL bytes, surrogates let through), for [`parse_wtf8`] (the audit walk);
//! - [`dumps_sorted`]: `json.dumps(v, sort_keys=True, separators=(",", ":"))` with
//!   `ensure_ascii` on (the `py-json-v1` profile) or off (bernstein's activity hashes);
//! - [`dumps_jcs`]: bernstein's RFC 8785 (`jcs-v2`), reusing [`crate::canonical`] for
//!   strings, key order and ECMAScript numbers, with Python integers kept exact;
//! - [`py_str`] / [`float_repr`]: Python's `str()` and `repr(float)`;
//! - [`journal`]: bernstein's tolerant journal reader and chain walk, batch and parallel.
//!
//! Strings are kept as generalized UTF-8 (WTF-8): valid UTF-8, plus lone surrogates
//! encoded as the three bytes UTF-8 would give them. Byte order of WTF-8 is code-point
//! order, which is Python's `str` order, so `sort_keys` is a byte sort.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::Write as _;

use crate::{Error, Result};
use agentledger_core::canonical::{
    compare_keys_utf16, skip_plain, skip_printable_ascii, write_number, write_string,
};

/// Python's default limit on the digits of an `int` parsed from text (`sys.int_info`).
pub const MAX_INT_DIGITS: usize = 4300;

/// Nesting deeper than this makes Python's recursive scanner raise `RecursionError`.
pub const MAX_DEPTH: usize = 990;

/// A value nested deeper than this makes bernstein's `canonicalize_jcs` raise
/// `RecursionError`: it recurses three Python frames a level. Measured with
/// `verify_run_activities` called as the benches' peer calls it (a row member nested 329
/// levels raises); the bound moves down a level for every three frames a caller adds
/// (327 through its click command run in-process).
pub const JCS_MAX_DEPTH: usize = 328;

/// The same for the `py-json-v1` row hash (`json.dumps`, one C recursion a level): it
/// runs a few frames deeper than the reader, so a member nested 989 levels (its row 990,
/// which `json.loads` reads) raises there, measured as for [`JCS_MAX_DEPTH`].
pub const PY_JSON_MAX_DEPTH: usize = 988;

/// Nesting up to this depth is far from Python's recursion limit (1,000 frames less the
/// caller's), for its scanner and its encoder alike: deeper, only Python can say what
/// Python does (a caller asks its reference then).
pub const SURE_DEPTH: usize = 200;

/// How deeply `value` nests (a scalar: 0).
pub fn depth(value: &PyValue<'_>) -> usize {
    match value {
        PyValue::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        PyValue::Object(members) => 1 + members.iter().map(|(_, v)| depth(v)).max().unwrap_or(0),
        _ => 0,
    }
}

/// A value as Python's `json.loads` returns it.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue<'a> {
    Null,
    Bool(bool),
    /// An exact integer as normalized decimal text (`-0` is `0`, no leading zeros).
    Int(Cow<'a, str>),
    Float(f64),
    /// WTF-8 bytes (see the module docs).
    Str(Cow<'a, [u8]>),
    Array(Vec<PyValue<'a>>),
    /// Members in first-insertion order, each key once, holding the last value given.
    Object(Vec<(Cow<'a, [u8]>, PyValue<'a>)>),
}

impl<'a> PyValue<'a> {
    /// The member `key` of an object (`dict.get`).
    pub fn get(&self, key: &str) -> Option<&PyValue<'a>> {
        match self {
            PyValue::Object(members) => members
                .iter()
                .find(|(k, _)| k.as_ref() == key.as_bytes())
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string's WTF-8 bytes, if this is a string.
    pub fn as_str_bytes(&self) -> Option<&[u8]> {
        match self {
            PyValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The result of [`parse`]: the value, and whether any object repeated a key.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<'a> {
    pub value: PyValue<'a>,
    pub duplicate_keys: bool,
}

/// Parse one JSON text as Python's `json.loads` does (on the already decoded `str`).
pub fn parse(text: &str) -> Result<Parsed<'_>> {
    parse_wtf8(text.as_bytes())
}

/// [`parse`] of a `str` that may hold lone surrogates (WTF-8, as [`decode_json_bytes`]
/// gives it): they are kept in strings, and refused elsewhere, as Python's scanner does.
pub fn parse_wtf8(text: &[u8]) -> Result<Parsed<'_>> {
    let mut parser = Parser {
        text,
        pos: 0,
        depth: 0,
        duplicate_keys: false,
    };
    parser.skip_ws();
    let value = parser.value().map_err(|e| *e)?;
    parser.skip_ws();
    if parser.pos != parser.text.len() {
        return Err(*parser.error("Extra data"));
    }
    Ok(Parsed {
        value,
        duplicate_keys: parser.duplicate_keys,
    })
}

/// `json.loads(data)` for bytes: decoded as Python decodes them first
/// ([`decode_json_bytes`]: UTF-8 with or without a byte order mark, UTF-16 or UTF-32 told
/// from NUL bytes and a BOM, encoded surrogates let through), then parsed. bernstein's
/// writers only write UTF-8, but a stored report re-anchored by hand may be any of these,
/// and bernstein reads it. Its errors are [`Error::JsonDecode`], [`Error::UnicodeDecode`]
/// and [`Error::Recursion`].
pub fn loads(data: &[u8]) -> Result<Parsed<'_>> {
    let classify = |error: Error| {
        let message = error.to_string();
        if message.contains("maximum recursion depth exceeded") {
            Error::Recursion
        } else {
            Error::JsonDecode(message)
        }
    };
    match decode_json_bytes(data).ok_or(Error::UnicodeDecode)? {
        Cow::Borrowed(text) => parse_wtf8(text).map_err(classify),
        // Decoded into a buffer of its own: the values are copied out of it.
        Cow::Owned(text) => parse_wtf8(&text).map_err(classify).map(|parsed| Parsed {
            value: owned(&parsed.value),
            duplicate_keys: parsed.duplicate_keys,
        }),
    }
}

/// The parser's results: the error boxed, so that a result is no bigger than a value
/// (every value is returned through several calls).
type Parsing<T> = std::result::Result<T, Box<Error>>;

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
    depth: usize,
    duplicate_keys: bool,
}

impl<'a> Parser<'a> {
    fn error(&self, message: &str) -> Box<Error> {
        Box::new(Error::canonical_at(message, self.pos))
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    // json's WHITESPACE is exactly [ \t\n\r]*
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &[u8], value: PyValue<'a>) -> Parsing<PyValue<'a>> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("Expecting value"))
        }
    }

    fn value(&mut self) -> Parsing<PyValue<'a>> {
        match self.peek() {
            Some(b'"') => Ok(PyValue::Str(self.string()?)),
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'n') => self.literal(b"null", PyValue::Null),
            Some(b't') => self.literal(b"true", PyValue::Bool(true)),
            Some(b'f') => self.literal(b"false", PyValue::Bool(false)),
            Some(b'N') => self.literal(b"NaN", PyValue::Float(f64::NAN)),
            Some(b'I') => self.literal(b"Infinity", PyValue::Float(f64::INFINITY)),
            Some(b'-') if self.text[self.pos..].starts_with(b"-Infinity") => {
                self.pos += 9;
                Ok(PyValue::Float(f64::NEG_INFINITY))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error("Expecting value")),
        }
    }

    fn nested(&mut self, inner: fn(&mut Self) -> Parsing<PyValue<'a>>) -> Parsing<PyValue<'a>> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("maximum recursion depth exceeded"));
        }
        let value = inner(self);
        self.depth -= 1;
        value
    }

    fn number(&mut self) -> Parsing<PyValue<'a>> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
            }
            _ => {
                self.pos = start;
                return Err(self.error("Expecting value"));
            }
        }
        let int_end = self.pos;
        let mut is_float = false;
        if self.peek() == Some(b'.') && matches!(self.text.get(self.pos + 1), Some(b'0'..=b'9')) {
            is_float = true;
            self.pos += 1;
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            let mut end = self.pos + 1;
            if let Some(b'+' | b'-') = self.text.get(end) {
                end += 1;
            }
            if matches!(self.text.get(end), Some(b'0'..=b'9')) {
                is_float = true;
                while let Some(b'0'..=b'9') = self.text.get(end) {
                    end += 1;
                }
                self.pos = end;
            }
        }
        // The lexeme is ASCII by construction.
        let text: &'a [u8] = self.text;
        let lexeme = std::str::from_utf8(&text[start..self.pos]).unwrap_or("0");
        if is_float {
            // Rust's parse is correctly rounded and overflows to ±inf, like float().
            let x: f64 = lexeme
                .parse()
                .map_err(|_| Box::new(Error::canonical_at("invalid number", start)))?;
            return Ok(PyValue::Float(x));
        }
        debug_assert_eq!(int_end, self.pos);
        let negative = lexeme.starts_with('-');
        let digits = lexeme.trim_start_matches('-');
        if digits.len() > MAX_INT_DIGITS {
            return Err(Box::new(Error::canonical_at(
                "Exceeds the limit (4300 digits) for integer string conversion",
                start,
            )));
        }
        if negative && digits == "0" {
            return Ok(PyValue::Int(Cow::Borrowed("0")));
        }
        Ok(PyValue::Int(Cow::Borrowed(lexeme)))
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let slice = self.text.get(at..at + 4)?;
        let mut n = 0u32;
        for &b in slice {
            n = n * 16 + (b as char).to_digit(16)?;
        }
        Some(n)
    }

    fn string(&mut self) -> Parsing<Cow<'a, [u8]>> {
        let begin = self.pos;
        self.pos += 1; // opening quote
        let text: &'a [u8] = self.text;
        let first = self.pos;
        // The common string: no escape before its closing quote.
        let end = skip_plain(text, first);
        if text.get(end) == Some(&b'"') {
            self.pos = end + 1;
            return Ok(Cow::Borrowed(&text[first..end]));
        }
        let mut out = Vec::new();
        loop {
            let chunk_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.extend_from_slice(&self.text[chunk_start..self.pos]);
            match self.peek() {
                None => return Err(Box::new(Error::canonical_at("Unterminated string", begin))),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => self.escape(&mut out)?,
                Some(_) => return Err(self.error("Invalid control character")),
            }
        }
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Parsing<()> {
        let Some(&kind) = self.text.get(self.pos + 1) else {
            return Err(self.error("Unterminated string"));
        };
        let simple = match kind {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'u' => None,
            _ => return Err(self.error("Invalid \\escape")),
        };
        if let Some(byte) = simple {
            out.push(byte);
            self.pos += 2;
            return Ok(());
        }
        let Some(mut code) = self.hex4(self.pos + 2) else {
            return Err(self.error("Invalid \\uXXXX escape"));
        };
        self.pos += 6;
        // A high surrogate escape followed by a low one is one astral character (the C
        // scanner looks ahead only when six more characters and a closing quote fit).
        if (0xD800..=0xDBFF).contains(&code)
            && self.pos + 6 < self.text.len()
            && self.text[self.pos] == b'\\'
            && self.text[self.pos + 1] == b'u'
        {
            let Some(low) = self.hex4(self.pos + 2) else {
                self.pos += 2;
                return Err(self.error("Invalid \\uXXXX escape"));
            };
            if (0xDC00..=0xDFFF).contains(&low) {
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                self.pos += 6;
            }
        }
        push_code_point(code, out);
        Ok(())
    }

    fn array(&mut self) -> Parsing<PyValue<'a>> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(PyValue::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(PyValue::Array(items));
                }
                _ => return Err(self.error("Expecting ',' delimiter")),
            }
        }
    }

    fn object(&mut self) -> Parsing<PyValue<'a>> {
        self.pos += 1;
        // A journal row has a dozen members or so, a nested object a few: one allocation.
        let capacity = if self.depth <= 1 { 16 } else { 4 };
        let mut members: Vec<(Cow<'a, [u8]>, PyValue<'a>)> = Vec::with_capacity(capacity);
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(PyValue::Object(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("Expecting property name enclosed in double quotes"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("Expecting ':' delimiter"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value()?;
            // dict semantics: a repeated key keeps its first position and its last value.
            match members.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => {
                    slot.1 = value;
                    self.duplicate_keys = true;
                }
                None => members.push((key, value)),
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(PyValue::Object(members));
                }
                _ => return Err(self.error("Expecting ',' delimiter")),
            }
        }
    }
}

/// Append a code point (a lone surrogate included) as generalized UTF-8.
pub fn push_code_point(code: u32, out: &mut Vec<u8>) {
    match code {
        0..=0x7F => out.push(code as u8),
        0x80..=0x7FF => {
            out.extend_from_slice(&[0xC0 | (code >> 6) as u8, 0x80 | (code & 0x3F) as u8])
        }
        0x800..=0xFFFF => out.extend_from_slice(&[
            0xE0 | (code >> 12) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ]),
        _ => out.extend_from_slice(&[
            0xF0 | (code >> 18) as u8,
            0x80 | ((code >> 12) & 0x3F) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ]),
    }
}

/// The code points of generalized UTF-8 bytes (as produced by the parser).
pub fn code_points(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let b = *bytes.get(i)?;
        let (len, init) = match b {
            0..=0x7F => (1, b as u32),
            0xC0..=0xDF => (2, (b & 0x1F) as u32),
            0xE0..=0xEF => (3, (b & 0x0F) as u32),
            _ => (4, (b & 0x07) as u32),
        };
        let mut code = init;
        for k in 1..len {
            code = (code << 6) | (bytes.get(i + k).copied().unwrap_or(0x80) & 0x3F) as u32;
        }
        i += len;
        Some(code)
    })
}

/// The code point starting at `bytes[i]` (generalized UTF-8) and its length in bytes.
fn decode_at(bytes: &[u8], i: usize) -> (u32, usize) {
    let b = bytes[i];
    let (len, init) = match b {
        0..=0x7F => return (b as u32, 1),
        0xC0..=0xDF => (2, (b & 0x1F) as u32),
        0xE0..=0xEF => (3, (b & 0x0F) as u32),
        _ => (4, (b & 0x07) as u32),
    };
    let mut code = init;
    for k in 1..len {
        code = (code << 6) | (bytes.get(i + k).copied().unwrap_or(0x80) & 0x3F) as u32;
    }
    (code, len)
}

/// Whether WTF-8 bytes hold a lone surrogate (and so are not valid UTF-8).
pub fn has_surrogate(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_err()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_u_escape(unit: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((unit >> shift) & 0xF) as usize]);
    }
}

/// A string as `json.dumps` writes it. `ensure_ascii`: everything outside U+0020..U+007E
/// is escaped (astral characters as surrogate pairs). Otherwise only `"`, `\` and
/// controls below U+0020 are, and a lone surrogate is an error (Python cannot encode it).
pub fn write_py_string(s: &[u8], ensure_ascii: bool, out: &mut Vec<u8>) -> Result<()> {
    if !ensure_ascii {
        if has_surrogate(s) {
            return Err(Error::canonical(
                "'utf-8' codec can't encode character: surrogates not allowed",
            ));
        }
        write_json_str(s, out);
        return Ok(());
    }
    out.push(b'"');
    {
        // Runs of printable ASCII other than `"` and `\` are copied as they are.
        let mut i = 0;
        while i < s.len() {
            let start = i;
            i = skip_printable_ascii(s, i);
            out.extend_from_slice(&s[start..i]);
            if i == s.len() {
                break;
            }
            let (code, len) = decode_at(s, i);
            i += len;
            match code {
                0..=0xFFFF => push_short_escape(code, out),
                _ => {
                    let v = code - 0x10000;
                    push_u_escape(0xD800 | (v >> 10), out);
                    push_u_escape(0xDC00 | (v & 0x3FF), out);
                }
            }
        }
    }
    out.push(b'"');
    Ok(())
}

/// A string quoted by `json.encoder.encode_basestring` (what `json.dumps` uses with
/// `ensure_ascii=False`): `"`, `\` and the controls below U+0020 escaped, the rest as it
/// is, a lone surrogate included (only [`encode_utf8`] refuses it).
pub fn write_json_str(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    let mut start = 0;
    loop {
        let i = skip_plain(s, start);
        out.extend_from_slice(&s[start..i]);
        let Some(&b) = s.get(i) else { break };
        push_short_escape(b as u32, out);
        start = i + 1;
    }
    out.push(b'"');
}

/// `text.encode()` (UTF-8, strict): the bytes themselves, or the `UnicodeEncodeError`
/// Python raises at the first run of lone surrogates (positions count code points).
pub fn encode_utf8(text: Vec<u8>) -> std::result::Result<Vec<u8>, crate::Crash> {
    if std::str::from_utf8(&text).is_ok() {
        return Ok(text);
    }
    let is_surrogate = |code: u32| (0xD800..=0xDFFF).contains(&code);
    let mut run: Option<(usize, u32, usize)> = None; // (start, first surrogate, end)
    for (position, code) in code_points(&text).enumerate() {
        match (&mut run, is_surrogate(code)) {
            (None, true) => run = Some((position, code, position + 1)),
            (Some((_, _, end)), true) => *end = position + 1,
            (Some(_), false) => break,
            (None, false) => {}
        }
    }
    let (start, first, end) = run.expect("text that is not UTF-8 holds a lone surrogate");
    let message = if end == start + 1 {
        format!("'utf-8' codec can't encode character '\\u{first:04x}' in position {start}")
    } else {
        format!(
            "'utf-8' codec can't encode characters in position {start}-{}",
            end - 1
        )
    };
    Err(crate::Crash(format!(
        "UnicodeEncodeError: {message}: surrogates not allowed"
    )))
}

pub(crate) fn push_short_escape(code: u32, out: &mut Vec<u8>) {
    let short = match code {
        0x22 => b'"',
        0x5C => b'\\',
        0x0A => b'n',
        0x0D => b'r',
        0x09 => b't',
        0x08 => b'b',
        0x0C => b'f',
        _ => return push_u_escape(code, out),
    };
    out.push(b'\\');
    out.push(short);
}

/// Python's `repr(float)`: shortest round-trip digits, fixed notation for decimal
/// exponents -4..15, otherwise `d.ddde±XX`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let (negative, digits, exponent) = shortest_digits(x);
    let sign = if negative { "-" } else { "" };
    let (digits, exponent) = break_tie_to_even(x, digits, exponent);
    let mut out = String::with_capacity(digits.len() + 8);
    out.push_str(sign);
    if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.push_str(&"0".repeat(int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.push_str(&"0".repeat((-exponent - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(
            out,
            "e{}{:02}",
            if exponent < 0 { '-' } else { '+' },
            exponent.abs()
        );
    }
    out
}

/// The shortest round-trip digits of a finite `x` (no leading or trailing zeros, `"0"`
/// for zero) and the decimal exponent of the first one: `x = d1.d2d3... * 10^exponent`.
/// Taken from ryu-js, whose ECMAScript text holds the same digits as Python's repr.
fn shortest_digits(x: f64) -> (bool, String, i32) {
    let negative = x.is_sign_negative();
    let mut buffer = ryu_js::Buffer::new();
    let text = buffer.format_finite(x.abs());
    let (mantissa, adjust) = match text.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits = String::with_capacity(int_part.len() + frac_part.len());
    let exponent = if int_part.bytes().all(|b| b == b'0') {
        let zeros = frac_part.bytes().take_while(|&b| b == b'0').count();
        if zeros == frac_part.len() {
            return (negative, "0".into(), 0);
        }
        digits.push_str(&frac_part[zeros..]);
        -(zeros as i32) - 1 + adjust
    } else {
        let int_part = int_part.trim_start_matches('0');
        digits.push_str(int_part);
        digits.push_str(frac_part);
        int_part.len() as i32 - 1 + adjust
    };
    let kept = digits.trim_end_matches('0').len();
    digits.truncate(kept.max(1));
    (negative, digits, exponent)
}

/// Python's `repr` (David Gay's shortest mode) and Rust's shortest formatting agree except
/// when `x` lies exactly halfway between the two closest shortest candidates: Python then
/// takes the one whose last digit is even (`562949953421312.25` -> `...312.2`), Rust the
/// upper one. A tie means `x` is exactly a decimal with one more digit, ending in 5.
fn break_tie_to_even(x: f64, digits: String, exponent: i32) -> (String, i32) {
    let k = digits.len();
    let Ok(d) = digits.parse::<u64>() else {
        return (digits, exponent);
    };
    if k > 17 || d == 0 {
        return (digits, exponent);
    }
    // value = d * 10^(exponent - k + 1); the midpoints to the neighbours are (10d -+ 5)
    // * 10^(exponent - k). Cheap test first: does either midpoint even parse to x?
    let scale = exponent - k as i32;
    let magnitude = x.abs();
    // x = odd * 2^low exactly. A midpoint with `-scale` decimals (scale < 0) ends in 5 at
    // that place, and a binary fraction 2^low has exactly `-low` decimals: they must match.
    // Integers below 10^17 print exactly, so they are never ties.
    let bits = magnitude.to_bits();
    let (biased, fraction) = ((bits >> 52) as i32, bits & ((1u64 << 52) - 1));
    let (mantissa, power) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    let low = power + mantissa.trailing_zeros() as i32;
    if (scale < 0 && low != scale) || (scale >= 0 && (low < 0 || magnitude < 1e17)) {
        return (digits, exponent);
    }
    let parses_to_x = |m: u64| format!("{m}e{scale}").parse::<f64>().ok() == Some(magnitude);
    let (below, above) = (d * 10 - 5, d * 10 + 5);
    let midpoint = if parses_to_x(below) {
        below
    } else if parses_to_x(above) {
        above
    } else {
        return (digits, exponent);
    };
    // Is x exactly that midpoint? k + 25 significant digits decide it: a non-zero
    // remainder is a multiple of the double's ulp, within 17 digits of the leading one.
    let precise = format!("{:.*e}", k + 24, magnitude);
    let Some((mantissa, _)) = precise.split_once('e') else {
        return (digits, exponent);
    };
    let exact: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let wanted = midpoint.to_string();
    let exact_tie =
        exact.starts_with(wanted.as_bytes()) && exact[wanted.len()..].iter().all(|&b| b == b'0');
    if !exact_tie {
        return (digits, exponent);
    }
    // Python keeps the neighbour whose last digit is even.
    let even = if (midpoint / 10) % 2 == 0 {
        midpoint / 10
    } else {
        midpoint / 10 + 1
    };
    let text = even.to_string();
    let new_exponent = exponent + (text.len() as i32 - k as i32);
    let sign = if x < 0.0 { "-" } else { "" };
    if format!("{sign}{text}e{}", scale + 1).parse::<f64>().ok() != Some(x) {
        return (digits, exponent);
    }
    let trimmed = text.trim_end_matches('0');
    let trimmed = if trimmed.is_empty() { "0" } else { trimmed };
    (trimmed.to_owned(), new_exponent)
}

/// How `json.dumps` writes a float (`allow_nan=True`).
pub fn json_float(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        float_repr(x)
    }
}

/// `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii)`.
pub fn dumps_sorted(value: &PyValue<'_>, ensure_ascii: bool, out: &mut Vec<u8>) -> Result<()> {
    match value {
        PyValue::Null => out.extend_from_slice(b"null"),
        PyValue::Bool(true) => out.extend_from_slice(b"true"),
        PyValue::Bool(false) => out.extend_from_slice(b"false"),
        PyValue::Int(digits) => out.extend_from_slice(digits.as_bytes()),
        PyValue::Float(x) => out.extend_from_slice(json_float(*x).as_bytes()),
        PyValue::Str(s) => write_py_string(s, ensure_ascii, out)?,
        PyValue::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                dumps_sorted(item, ensure_ascii, out)?;
            }
            out.push(b']');
        }
        PyValue::Object(members) => {
            let mut sorted: Vec<&(Cow<'_, [u8]>, PyValue<'_>)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push(b'{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_py_string(key, ensure_ascii, out)?;
                out.push(b':');
                dumps_sorted(item, ensure_ascii, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn utf8(s: &[u8]) -> Result<&str> {
    std::str::from_utf8(s).map_err(|_| {
        Error::canonical("'utf-8' codec can't encode character: surrogates not allowed")
    })
}

/// bernstein's `canonicalize_jcs` (RFC 8785) of a parsed value: keys in UTF-16 order,
/// raw UTF-8 strings, ECMAScript floats (NaN and infinities refused), exact integers.
pub fn dumps_jcs(value: &PyValue<'_>, out: &mut Vec<u8>) -> Result<()> {
    if depth(value) > JCS_MAX_DEPTH {
        return Err(Error::Recursion);
    }
    dumps_jcs_in(value, out)
}

fn dumps_jcs_in(value: &PyValue<'_>, out: &mut Vec<u8>) -> Result<()> {
    match value {
        PyValue::Null => out.extend_from_slice(b"null"),
        PyValue::Bool(true) => out.extend_from_slice(b"true"),
        PyValue::Bool(false) => out.extend_from_slice(b"false"),
        PyValue::Int(digits) => out.extend_from_slice(digits.as_bytes()),
        PyValue::Float(x) => write_number(*x, out)?,
        PyValue::Str(s) => write_string(utf8(s)?, out),
        PyValue::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                dumps_jcs_in(item, out)?;
            }
            out.push(b']');
        }
        PyValue::Object(members) => {
            let mut sorted = Vec::with_capacity(members.len());
            for (key, item) in members {
                sorted.push((utf8(key)?, item));
            }
            sorted.sort_by(|a, b| compare_keys_utf16(a.0, b.0));
            out.push(b'{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                dumps_jcs_in(item, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// Python's `str(v)` as WTF-8 bytes: strings unchanged, everything else its `repr`.
pub fn py_str<'v>(value: &'v PyValue<'_>) -> Cow<'v, [u8]> {
    match value {
        PyValue::Str(s) => Cow::Borrowed(s),
        other => {
            let mut out = Vec::new();
            py_repr(other, &mut out);
            Cow::Owned(out)
        }
    }
}

/// `str(d.get(key, ""))` for a `dict` (any other value holds no key).
pub fn field<'v>(value: &'v PyValue<'_>, key: &str) -> Cow<'v, [u8]> {
    value.get(key).map_or(Cow::Borrowed(&b""[..]), py_str)
}

/// The items of a list (`x if isinstance(x, list) else []`): none for anything else.
pub fn list<'v, 'a>(value: Option<&'v PyValue<'a>>) -> &'v [PyValue<'a>] {
    match value {
        Some(PyValue::Array(items)) => items,
        _ => &[],
    }
}

/// The dicts among the items of a list (`[x for x in _list(v) if isinstance(x, dict)]`).
pub fn dicts<'v, 'a>(value: Option<&'v PyValue<'a>>) -> impl Iterator<Item = &'v PyValue<'a>> {
    list(value)
        .iter()
        .filter(|item| matches!(item, PyValue::Object(_)))
}

/// `repr()` of a string, as an f-string's `{x!r}` writes it.
pub fn repr_text(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    repr_str(s, &mut out);
    out
}

/// Python's `repr` of a parsed value. Non-ASCII characters follow `str.isprintable()`
/// for the categories listed in [`is_printable`]; see its note on the approximation.
pub fn py_repr(value: &PyValue<'_>, out: &mut Vec<u8>) {
    match value {
        PyValue::Null => out.extend_from_slice(b"None"),
        PyValue::Bool(true) => out.extend_from_slice(b"True"),
        PyValue::Bool(false) => out.extend_from_slice(b"False"),
        PyValue::Int(digits) => out.extend_from_slice(digits.as_bytes()),
        PyValue::Float(x) => out.extend_from_slice(float_repr(*x).as_bytes()),
        PyValue::Str(s) => repr_str(s, out),
        PyValue::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                py_repr(item, out);
            }
            out.push(b']');
        }
        PyValue::Object(members) => {
            out.push(b'{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                repr_str(key, out);
                out.extend_from_slice(b": ");
                py_repr(item, out);
            }
            out.push(b'}');
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text holds `'` and no `"`; the quote
/// and `\` escaped, `\t \n \r` by name, other ASCII controls and whatever
/// `str.isprintable()` refuses as `\xXX`, `\uXXXX` or `\UXXXXXXXX`.
pub fn repr_str(s: &[u8], out: &mut Vec<u8>) {
    let quote = if s.contains(&b'\'') && !s.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    out.push(quote);
    for code in code_points(s) {
        match code {
            c if c == quote as u32 || c == b'\\' as u32 => {
                out.push(b'\\');
                out.push(c as u8);
            }
            0x09 => out.extend_from_slice(b"\\t"),
            0x0A => out.extend_from_slice(b"\\n"),
            0x0D => out.extend_from_slice(b"\\r"),
            0x20..=0x7E => out.push(code as u8),
            c if c > 0x7F && is_printable(c) => push_code_point(c, out),
            c if c <= 0xFF => {
                let _ = write_hex(out, b"\\x", c, 2);
            }
            c if c <= 0xFFFF => {
                let _ = write_hex(out, b"\\u", c, 4);
            }
            c => {
                let _ = write_hex(out, b"\\U", c, 8);
            }
        }
    }
    out.push(quote);
}

fn write_hex(out: &mut Vec<u8>, prefix: &[u8], code: u32, width: u32) -> Option<()> {
    out.extend_from_slice(prefix);
    for i in (0..width).rev() {
        out.push(HEX[((code >> (4 * i)) & 0xF) as usize]);
    }
    Some(())
}

/// Compare two WTF-8 strings in Python's order (code points).
pub fn compare_py_str(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

pub(crate) mod printable;

mod decode;
pub use decode::decode_json_bytes;

/// The value with nothing borrowed (kept after the text it was parsed from is gone).
pub fn owned(value: &PyValue<'_>) -> PyValue<'static> {
    match value {
        PyValue::Null => PyValue::Null,
        PyValue::Bool(b) => PyValue::Bool(*b),
        PyValue::Int(digits) => PyValue::Int(Cow::Owned(digits.to_string())),
        PyValue::Float(x) => PyValue::Float(*x),
        PyValue::Str(s) => PyValue::Str(Cow::Owned(s.to_vec())),
        PyValue::Array(items) => PyValue::Array(items.iter().map(owned).collect()),
        PyValue::Object(members) => PyValue::Object(
            members
                .iter()
                .map(|(k, v)| (Cow::Owned(k.to_vec()), owned(v)))
                .collect(),
        ),
    }
}

use printable::is_printable;

#[cfg(test)]
mod tests;
