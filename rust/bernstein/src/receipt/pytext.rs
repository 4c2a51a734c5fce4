//! The Python text operations `reports.verify_receipt` goes through, exact for any parsed
//! value: `str()` and `repr()` (with Python 3.11's `str.isprintable()`), the string
//! quoting of `json.dumps(ensure_ascii=False)`, and `str.encode()` with its
//! `UnicodeEncodeError` on a lone surrogate.
//!
//! Strings are WTF-8 (see [`crate::pyjson`]).

use std::borrow::Cow;

use super::printable::is_printable;
use crate::pyjson::{code_points, float_repr, push_code_point, PyValue};
use crate::Crash;

/// Python's `str(value)`: a string as it is, anything else its `repr`.
pub(super) fn py_str<'v>(value: &'v PyValue<'_>) -> Cow<'v, [u8]> {
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
pub(super) fn field<'v>(value: &'v PyValue<'_>, key: &str) -> Cow<'v, [u8]> {
    value.get(key).map_or(Cow::Borrowed(&b""[..]), py_str)
}

/// Python's `repr(value)`.
pub(super) fn py_repr(value: &PyValue<'_>, out: &mut Vec<u8>) {
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

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut Vec<u8>, prefix: &[u8], code: u32, digits: u32) {
    out.extend_from_slice(prefix);
    for i in (0..digits).rev() {
        out.push(HEX[((code >> (4 * i)) & 0xF) as usize]);
    }
}

/// Python's `repr(str)`: single quotes unless the text holds `'` and no `"`; the quote
/// and `\` escaped, `\t \n \r` by name, other ASCII controls and whatever
/// `str.isprintable()` refuses as `\xXX`, `\uXXXX` or `\UXXXXXXXX`.
pub(super) fn repr_str(s: &[u8], out: &mut Vec<u8>) {
    let quote = if s.contains(&b'\'') && !s.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    out.push(quote);
    for code in code_points(s) {
        match code {
            c if c == u32::from(quote) || c == u32::from(b'\\') => {
                out.push(b'\\');
                out.push(c as u8);
            }
            0x09 => out.extend_from_slice(b"\\t"),
            0x0A => out.extend_from_slice(b"\\n"),
            0x0D => out.extend_from_slice(b"\\r"),
            0x20..=0x7E => out.push(code as u8),
            c if c > 0x7F && is_printable(c) => push_code_point(c, out),
            c if c <= 0xFF => push_hex(out, b"\\x", c, 2),
            c if c <= 0xFFFF => push_hex(out, b"\\u", c, 4),
            c => push_hex(out, b"\\U", c, 8),
        }
    }
    out.push(quote);
}

/// A string quoted by `json.encoder.encode_basestring` (what `json.dumps` uses with
/// `ensure_ascii=False`): `"`, `\` and the controls below U+0020 escaped, the rest as it is
/// (a lone surrogate included: only [`encode`] refuses it).
pub(super) fn push_json_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            0..=0x1F => push_hex(out, b"\\u", u32::from(b), 4),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// `text.encode()` (UTF-8, strict): the bytes themselves, or the `UnicodeEncodeError`
/// Python raises at the first run of lone surrogates (positions count code points).
pub(super) fn encode(text: Vec<u8>) -> Result<Vec<u8>, Crash> {
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
    Err(Crash(format!(
        "UnicodeEncodeError: {message}: surrogates not allowed"
    )))
}
