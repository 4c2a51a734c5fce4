//! A strict RFC 8259 parser producing a [`Value`], with the extra refusals RFC 8785
//! (I-JSON) needs: duplicate keys, lone surrogates, numbers that overflow a double.
//!
//! Every error carries the byte offset of the offending input.

use super::scan::skip_plain;
use super::value::Value;
use super::MAX_DEPTH;
use crate::error::{Error, Result};

/// Parse one JSON text (surrounding whitespace allowed) into a [`Value`].
///
/// Refuses: invalid UTF-8; duplicate object keys (compared after unescaping); escapes
/// that leave a lone surrogate; invalid escapes; unescaped control characters in
/// strings; `NaN`/`Infinity` literals; leading zeros; numbers that overflow a double
/// (underflow to zero is IEEE rounding and accepted); data after the value; nesting of
/// arrays/objects deeper than [`MAX_DEPTH`]; empty input. Numbers are correctly rounded.
pub fn parse(text: &[u8]) -> Result<Value> {
    let src = std::str::from_utf8(text)
        .map_err(|e| Error::canonical_at("invalid UTF-8", e.valid_up_to()))?;
    if src.is_empty() {
        return Err(Error::canonical_at("empty input", 0));
    }
    let mut parser = Parser {
        src,
        bytes: text,
        pos: 0,
        key_positions: Vec::new(),
    };
    parser.skip_whitespace();
    let value = parser.parse_value(0)?;
    parser.skip_whitespace();
    if parser.pos < text.len() {
        return Err(parser.unexpected("after the JSON value (trailing data)"));
    }
    Ok(value)
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Start offsets of the keys of the objects being parsed, innermost last; shared so
    /// that duplicate detection needs no allocation per object.
    key_positions: Vec<usize>,
}

/// Objects up to this size check duplicates pairwise; larger ones sort.
const PAIRWISE_DUPLICATE_CHECK: usize = 16;

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// An error for whatever sits at `self.pos` (a character, or the end of input).
    fn unexpected(&self, context: &str) -> Error {
        match self.src[self.pos..].chars().next() {
            None => Error::canonical_at(format!("unexpected end of input {context}"), self.pos),
            Some(c) => Error::canonical_at(format!("unexpected {c:?} {context}"), self.pos),
        }
    }

    fn parse_value(&mut self, depth: usize) -> Result<Value> {
        match self.peek() {
            Some(b'{') => self.parse_object(depth + 1),
            Some(b'[') => self.parse_array(depth + 1),
            Some(b'"') => Ok(Value::String(self.parse_string()?)),
            Some(b'-' | b'0'..=b'9') => self.parse_number(),
            Some(b't') => self.parse_literal("true", Value::Bool(true)),
            Some(b'f') => self.parse_literal("false", Value::Bool(false)),
            Some(b'n') => self.parse_literal("null", Value::Null),
            Some(b'N') if self.bytes[self.pos..].starts_with(b"NaN") => {
                Err(Error::canonical_at("NaN is not a JSON number", self.pos))
            }
            Some(b'I') if self.bytes[self.pos..].starts_with(b"Infinity") => Err(
                Error::canonical_at("Infinity is not a JSON number", self.pos),
            ),
            _ => Err(self.unexpected("where a JSON value was expected")),
        }
    }

    fn parse_literal(&mut self, word: &str, value: Value) -> Result<Value> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(Error::canonical_at(
                format!("invalid literal (expected {word:?})"),
                self.pos,
            ))
        }
    }

    fn check_depth(&self, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            Err(Error::canonical_at(
                format!("nesting deeper than {MAX_DEPTH} arrays/objects"),
                self.pos,
            ))
        } else {
            Ok(())
        }
    }

    fn parse_array(&mut self, depth: usize) -> Result<Value> {
        self.check_depth(depth)?;
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.parse_value(depth)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.unexpected("in array (expected ',' or ']')")),
            }
        }
    }

    fn parse_object(&mut self, depth: usize) -> Result<Value> {
        self.check_depth(depth)?;
        self.pos += 1; // '{'
        let mut members: Vec<(String, Value)> = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        let base = self.key_positions.len();
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.unexpected("where an object key (a string) was expected"));
            }
            self.key_positions.push(self.pos);
            let key = self.parse_string()?;
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.unexpected("after an object key (expected ':')"));
            }
            self.pos += 1;
            self.skip_whitespace();
            let value = self.parse_value(depth)?;
            members.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.unexpected("in object (expected ',' or '}')")),
            }
        }
        let result = check_duplicate_keys(&members, &self.key_positions[base..]);
        self.key_positions.truncate(base);
        result?;
        Ok(Value::Object(members))
    }

    /// Parse the string starting at the `"` under `self.pos`.
    fn parse_string(&mut self) -> Result<String> {
        let open_quote = self.pos;
        self.pos += 1;
        let mut run_start = self.pos;
        let mut unescaped: Option<String> = None;
        loop {
            let i = skip_plain(self.bytes, self.pos);
            self.pos = i;
            match self.peek() {
                None => return Err(Error::canonical_at("unterminated string", open_quote)),
                Some(b'"') => {
                    let tail = &self.src[run_start..i];
                    self.pos += 1;
                    return Ok(match unescaped {
                        None => tail.to_owned(),
                        Some(mut s) => {
                            s.push_str(tail);
                            s
                        }
                    });
                }
                Some(b'\\') => {
                    let c = self.parse_escape()?;
                    let s = unescaped.get_or_insert_with(String::new);
                    s.push_str(&self.src[run_start..i]);
                    s.push(c);
                    run_start = self.pos;
                }
                Some(byte) => {
                    return Err(Error::canonical_at(
                        format!("unescaped control character U+{byte:04X} in string"),
                        i,
                    ))
                }
            }
        }
    }

    /// Parse the escape whose `\` is under `self.pos`; return the character it stands for.
    fn parse_escape(&mut self) -> Result<char> {
        let backslash = self.pos;
        let c = match self.bytes.get(backslash + 1) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{C}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let unit = self.hex4(backslash)?;
                self.pos = backslash + 6;
                return match unit {
                    0xD800..=0xDBFF => {
                        let low_start = self.pos;
                        if self.bytes.get(low_start) != Some(&b'\\')
                            || self.bytes.get(low_start + 1) != Some(&b'u')
                        {
                            return Err(Error::canonical_at(
                                "lone high surrogate escape (not followed by a low surrogate)",
                                backslash,
                            ));
                        }
                        let low = self.hex4(low_start)?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(Error::canonical_at(
                                "lone high surrogate escape (not followed by a low surrogate)",
                                backslash,
                            ));
                        }
                        self.pos = low_start + 6;
                        let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        Ok(char::from_u32(code).expect("a surrogate pair is a valid scalar"))
                    }
                    0xDC00..=0xDFFF => {
                        Err(Error::canonical_at("lone low surrogate escape", backslash))
                    }
                    _ => Ok(char::from_u32(unit).expect("a non-surrogate BMP unit is a char")),
                };
            }
            _ => return Err(Error::canonical_at("invalid escape sequence", backslash)),
        };
        self.pos = backslash + 2;
        Ok(c)
    }

    /// The four hex digits of the `\uXXXX` escape starting at `backslash`.
    fn hex4(&self, backslash: usize) -> Result<u32> {
        let digits = self
            .bytes
            .get(backslash + 2..backslash + 6)
            .ok_or_else(|| Error::canonical_at("truncated \\u escape", backslash))?;
        let mut unit = 0u32;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => {
                    return Err(Error::canonical_at(
                        "invalid \\u escape (needs 4 hex digits)",
                        backslash,
                    ))
                }
            };
            unit = unit * 16 + u32::from(v);
        }
        Ok(unit)
    }

    /// `-? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?`, correctly rounded.
    fn parse_number(&mut self) -> Result<Value> {
        let start = self.pos;
        let mut i = start;
        let negative = self.bytes[i] == b'-';
        if negative {
            i += 1;
        }
        match self.bytes.get(i) {
            Some(b'0') => {
                i += 1;
                if let Some(b'0'..=b'9') = self.bytes.get(i) {
                    return Err(Error::canonical_at("leading zero in number", start));
                }
            }
            Some(b'1'..=b'9') => i = self.skip_digits(i),
            Some(b'I') if self.bytes[i..].starts_with(b"Infinity") => {
                return Err(Error::canonical_at("-Infinity is not a JSON number", start))
            }
            _ => {
                self.pos = i;
                return Err(self.unexpected("in number (expected a digit)"));
            }
        }
        let integer_end = i;
        if self.bytes.get(i) == Some(&b'.') {
            i += 1;
            let after = self.skip_digits(i);
            if after == i {
                self.pos = i;
                return Err(self.unexpected("in number (expected a digit after '.')"));
            }
            i = after;
        }
        if let Some(b'e' | b'E') = self.bytes.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = self.bytes.get(i) {
                i += 1;
            }
            let after = self.skip_digits(i);
            if after == i {
                self.pos = i;
                return Err(self.unexpected("in number (expected an exponent digit)"));
            }
            i = after;
        }
        self.pos = i;
        // Short plain integers convert exactly; everything else goes through the
        // correctly rounded `str::parse`.
        let digits_start = start + usize::from(negative);
        if i == integer_end && i - digits_start <= 15 {
            let magnitude = self.bytes[digits_start..i]
                .iter()
                .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'))
                as f64;
            return Ok(Value::Number(if negative { -magnitude } else { magnitude }));
        }
        let x: f64 = self.src[start..i]
            .parse()
            .map_err(|_| Error::canonical_at("invalid number", start))?;
        if x.is_infinite() {
            return Err(Error::canonical_at(
                "number out of the range of a double",
                start,
            ));
        }
        Ok(Value::Number(x))
    }

    fn skip_digits(&self, mut i: usize) -> usize {
        while let Some(b'0'..=b'9') = self.bytes.get(i) {
            i += 1;
        }
        i
    }
}

/// Refuse the first key (in text order) that repeats an earlier one.
fn check_duplicate_keys(members: &[(String, Value)], positions: &[usize]) -> Result<()> {
    let duplicate_at = |j: usize| {
        Error::canonical_at(
            format!("duplicate object key {:?}", members[j].0),
            positions[j],
        )
    };
    if members.len() <= PAIRWISE_DUPLICATE_CHECK {
        for j in 1..members.len() {
            if members[..j].iter().any(|(k, _)| *k == members[j].0) {
                return Err(duplicate_at(j));
            }
        }
        return Ok(());
    }
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_unstable_by(|&a, &b| members[a].0.cmp(&members[b].0).then(a.cmp(&b)));
    // Within a run of equal keys the second index is that key's first repetition.
    let first_repeat = order
        .windows(2)
        .filter(|w| members[w[0]].0 == members[w[1]].0)
        .map(|w| w[1])
        .min();
    match first_repeat {
        Some(j) => Err(duplicate_at(j)),
        None => Ok(()),
    }
}
