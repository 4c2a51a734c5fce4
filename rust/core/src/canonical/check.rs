//! The fast path of [`super::is_canonical`]: a single pass over the bytes that confirms a
//! text is already canonical without building a [`super::Value`].
//!
//! It answers only "certainly canonical" (`true`) or "not sure" (`false`). A `true`
//! guarantees that `parse(text)` succeeds and that `to_canonical` of the result is
//! `text` again: every token is checked to be in the form the serializer writes and
//! object keys to be strictly ascending in UTF-16 order. Anything else, valid or not,
//! is left to the full parse, so errors and their positions come from one place.

use std::cmp::Ordering;

use super::number::write_number;
use super::scan::skip_plain;
use super::serialize::compare_keys_utf16;
use super::MAX_DEPTH;

/// Whether `text` is certainly in canonical form (see the module comment).
pub(crate) fn certainly_canonical(text: &[u8]) -> bool {
    certainly_canonical_members(text, &mut TopMembers::default())
}

/// [`certainly_canonical`], also noting where the members of a top-level object are, so
/// that a caller reading a few fields needs no second pass over the text.
pub(crate) fn certainly_canonical_members(text: &[u8], members: &mut TopMembers) -> bool {
    // Most stored texts are ASCII, which `is_ascii` settles several times faster.
    let src = if text.is_ascii() {
        // SAFETY: ASCII is UTF-8.
        unsafe { std::str::from_utf8_unchecked(text) }
    } else {
        match std::str::from_utf8(text) {
            Ok(src) => src,
            Err(_) => return false,
        }
    };
    members.len = 0;
    members.complete = true;
    let mut checker = Checker {
        src,
        bytes: text,
        pos: 0,
        number: Vec::new(),
        members,
    };
    checker.value(0) && checker.pos == text.len()
}

/// Where one member of a canonical top-level object is: its key (quotes included, as raw
/// readers compare it) and its value, as byte ranges `start..end`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Member {
    pub key: (usize, usize),
    pub value: (usize, usize),
}

/// The members of a canonical top-level object, up to [`TopMembers::CAPACITY`] of them.
#[derive(Default)]
pub(crate) struct TopMembers {
    found: [Member; TopMembers::CAPACITY],
    len: usize,
    /// False when the object had more members than are kept.
    complete: bool,
}

impl TopMembers {
    const CAPACITY: usize = 8;

    /// Every member in order, or `None` when some were not kept.
    pub(crate) fn all(&self) -> Option<&[Member]> {
        self.complete.then(|| &self.found[..self.len])
    }

    fn note(&mut self, key: (usize, usize), value: (usize, usize)) {
        if self.len == Self::CAPACITY {
            self.complete = false;
        } else {
            self.found[self.len] = Member {
                key: (key.0 - 1, key.1 + 1),
                value,
            };
            self.len += 1;
        }
    }
}

/// A checked string's raw content (between its quotes), and whether it has escapes.
#[derive(Clone, Copy)]
struct RawStr {
    start: usize,
    end: usize,
    escaped: bool,
}

struct Checker<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Scratch space for re-serializing a number.
    number: Vec<u8>,
    members: &'a mut TopMembers,
}

impl Checker<'_> {
    fn eat(&mut self, byte: u8) -> bool {
        if self.bytes.get(self.pos) == Some(&byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> bool {
        match self.bytes.get(self.pos) {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().is_some(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            _ => false,
        }
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    fn array(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        self.pos += 1;
        if self.eat(b']') {
            return true;
        }
        loop {
            if !self.value(depth) {
                return false;
            }
            if self.eat(b']') {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    fn object(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        self.pos += 1;
        if self.eat(b'}') {
            return true;
        }
        let mut previous: Option<RawStr> = None;
        loop {
            if self.bytes.get(self.pos) != Some(&b'"') {
                return false;
            }
            let Some(key) = self.string() else {
                return false;
            };
            if let Some(previous) = previous {
                if self.compare_raw_keys(previous, key) != Ordering::Less {
                    return false;
                }
            }
            previous = Some(key);
            if !self.eat(b':') {
                return false;
            }
            let start = self.pos;
            if !self.value(depth) {
                return false;
            }
            if depth == 1 {
                self.members.note((key.start, key.end), (start, self.pos));
            }
            if self.eat(b'}') {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    /// Check a string in canonical form at `self.pos`; return its raw content.
    fn string(&mut self) -> Option<RawStr> {
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        loop {
            i = skip_plain(self.bytes, i);
            match self.bytes.get(i)? {
                b'"' => {
                    self.pos = i + 1;
                    return Some(RawStr {
                        start,
                        end: i,
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    i += canonical_escape_len(&self.bytes[i..])?;
                }
                _ => return None, // raw control character
            }
        }
    }

    /// UTF-16 order of two keys given as raw canonical content. Without escapes the raw
    /// bytes are the key; with them (rare) both are unescaped first.
    fn compare_raw_keys(&self, a: RawStr, b: RawStr) -> Ordering {
        let (a_text, b_text) = (&self.src[a.start..a.end], &self.src[b.start..b.end]);
        if a.escaped || b.escaped {
            compare_keys_utf16(&unescape_canonical(a_text), &unescape_canonical(b_text))
        } else {
            compare_keys_utf16(a_text, b_text)
        }
    }

    /// A number is canonical exactly when re-serializing its value gives its text back;
    /// `write_number` only ever writes valid JSON numbers, so this also checks the grammar.
    fn number(&mut self) -> bool {
        let start = self.pos;
        let mut end = start;
        while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.bytes.get(end) {
            end += 1;
        }
        let token = &self.src[start..end];
        if is_plain_integer(token.as_bytes()) {
            self.pos = end;
            return true;
        }
        let Ok(x) = token.parse::<f64>() else {
            return false;
        };
        self.number.clear();
        if write_number(x, &mut self.number).is_err() || self.number != token.as_bytes() {
            return false;
        }
        self.pos = end;
        true
    }
}

/// `0` or `-?[1-9][0-9]{0,14}` (not `-0`): an integer of at most 15 digits, exact in a
/// double and written by ES6 exactly so; most numbers in entries are.
fn is_plain_integer(token: &[u8]) -> bool {
    let digits = token.strip_prefix(b"-").unwrap_or(token);
    match digits {
        [b'0'] => digits.len() == token.len(),
        [b'1'..=b'9', rest @ ..] => rest.len() < 15 && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Length of the escape at the start of `escape` if it is one the serializer writes:
/// `\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r`, or `\u00xx` (lowercase) for other controls.
fn canonical_escape_len(escape: &[u8]) -> Option<usize> {
    match escape.get(1)? {
        b'"' | b'\\' | b'b' | b't' | b'n' | b'f' | b'r' => Some(2),
        b'u' => {
            let hex = escape.get(2..6)?;
            let lower_hex = |d: u8| d.is_ascii_digit() || (b'a'..=b'f').contains(&d);
            if hex[0] != b'0' || hex[1] != b'0' || !lower_hex(hex[2]) || !lower_hex(hex[3]) {
                return None;
            }
            let value = u8::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()?;
            let has_short_form = matches!(value, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D);
            (value < 0x20 && !has_short_form).then_some(6)
        }
        _ => None,
    }
}

/// Unescape the content of a string already checked by `Checker::string`.
fn unescape_canonical(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('b') => '\u{8}',
            Some('t') => '\t',
            Some('n') => '\n',
            Some('f') => '\u{C}',
            Some('r') => '\r',
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                char::from_u32(u32::from_str_radix(&hex, 16).unwrap_or(0)).unwrap_or('\0')
            }
            Some(other) => other, // '"' and '\\'
            None => '\\',
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{canonicalize_json, parse, to_canonical};
    use super::*;

    /// The fast path may only say `true` when the full path agrees.
    #[track_caller]
    fn assert_agrees(text: &[u8]) {
        let full = parse(text)
            .ok()
            .and_then(|v| to_canonical(&v).ok())
            .is_some_and(|c| c == text);
        assert_eq!(
            certainly_canonical(text),
            full,
            "{:?}",
            String::from_utf8_lossy(text)
        );
    }

    #[test]
    fn fast_path_confirms_canonical_texts() {
        for text in [
            &b"0"[..],
            b"-1.5",
            b"-7",
            b"999999999999999",
            b"-123456789012345",
            b"1e+21",
            b"1e-7",
            b"5e-324",
            b"true",
            b"null",
            b"\"\"",
            b"[]",
            b"{}",
            br#"{"":1,"a":[true,false,null,{"b":"c"}]}"#,
            br#"["\"\\\b\t\n\f\r\u0000\u001f\u000b",""]"#,
            "{\"\\n\":1,\"\\r\":2,\"1\":3,\"\u{80}\":4,\"😂\":5,\"\u{FB33}\":6}".as_bytes(),
            br#"{"a\"":1,"a\\":2}"#,
            br#"{"\u0001":1,"\u0002":2}"#,
        ] {
            assert!(
                certainly_canonical(text),
                "{:?}",
                String::from_utf8_lossy(text)
            );
            assert_agrees(text);
        }
    }

    #[test]
    fn fast_path_never_confirms_non_canonical_or_invalid_texts() {
        for text in [
            &b""[..],
            b" 0",
            b"0 ",
            b"-0",
            b"1.0",
            b"-00",
            b"9999999999999999",
            b"007",
            b"-",
            b"1-",
            b"1E+21",
            b"1e21",
            b"01",
            b"1.",
            b"+1",
            b"1e400",
            b"0.0000001",
            b"[1,]",
            b"[,1]",
            b"[1 ]",
            b"{\"a\":1,}",
            b"{\"b\":1,\"a\":2}",
            b"{\"a\":1,\"a\":1}",
            b"{\"a\" :1}",
            b"\"\\/\"",
            b"\"\\u0041\"",
            b"\"\\u000a\"",
            b"\"\\u001F\"",
            b"\"\\ud83d\\ude02\"",
            b"\"\\x\"",
            b"\"\x01\"",
            b"\"abc",
            b"tru",
            b"nulll",
            b"\"\xff\"",
            b"\"\xc3\"",
            b"\"\xc0\xaf\"",
            b"\"\xed\xa0\x80\"",
            b"{\"\xff\":1}",
            b"[1,\xc3\xa9]",
            b"NaN",
            "{\"\u{FB33}\":1,\"😂\":2}".as_bytes(),
            b"{\"\\u0002\":1,\"\\u0001\":2}",
            b"{\"b\":1,\"a\\\"\":2}",
        ] {
            assert!(
                !certainly_canonical(text),
                "{:?}",
                String::from_utf8_lossy(text)
            );
            assert_agrees(text);
        }
    }

    #[test]
    fn fast_path_respects_max_depth() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(certainly_canonical(ok.as_bytes()));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(!certainly_canonical(deep.as_bytes()));
        assert!(!certainly_canonical("[".repeat(100_000).as_bytes()));
    }

    #[test]
    fn fast_path_agrees_on_every_output_of_the_serializer() {
        let inputs: [&[u8]; 4] = [
            br#"{"z":[1,2.5e-8,1e300,-0.0],"\u0007":"\u00e9\n","a":{"y":null,"x":[{}]}}"#,
            br#"["\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", 333333333.33333329]"#,
            br#"{"\ud83d\ude02":1,"\ufb33":2,"\u0080":3,"\r":4}"#,
            br#"[1e21, 1e-6, 1e-7, 123456789012345678901, 0.1]"#,
        ];
        for input in inputs {
            let canonical = canonicalize_json(input).unwrap();
            assert!(certainly_canonical(&canonical));
            assert_agrees(input);
        }
    }

    #[test]
    fn fast_path_agrees_with_the_full_path_on_mutated_texts() {
        let seeds: [&[u8]; 3] = [
            br#"{"":"empty","1":{"\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{"E":"no","e":"yes"}],"A":{},"a":{}}"#,
            "{\"\\u0001\":\"\\\"\\\\\",\"\\n\":1,\"a\":[-1.5e-7,1e+21,0.001,true,null],\"\u{FB33}\":\"\u{1F602}\"}".as_bytes(),
            br#"[1,-2,3.5,[[]],{"b":{"a":false}}]"#,
        ];
        // Edits drawn from the bytes that matter to JSON syntax.
        let alphabet = b" \"\\/,:[]{}-+.0159eEuabfnrtl\x01\x7f\xc3\xa9";
        let mut next = crate::hash::testutil::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let mut confirmed = 0;
        for seed in seeds {
            assert!(certainly_canonical(seed));
            for _ in 0..20_000 {
                let mut text = seed.to_vec();
                for _ in 0..=(next() % 3) {
                    let at = (next() as usize) % (text.len() + 1);
                    let byte = alphabet[(next() as usize) % alphabet.len()];
                    match next() % 3 {
                        0 if at < text.len() => text[at] = byte,
                        1 if at < text.len() => {
                            text.remove(at);
                        }
                        _ => text.insert(at, byte),
                    }
                }
                assert_agrees(&text);
                confirmed += usize::from(certainly_canonical(&text));
            }
        }
        // Some edits keep the text canonical (a digit for a digit, a letter in a string).
        assert!(confirmed > 1000, "{confirmed}");
    }
}
