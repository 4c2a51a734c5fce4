//! RFC 8785 serialization of a [`Value`]: no whitespace, members sorted by UTF-16 code
//! units, minimal string escaping, ECMAScript numbers.

use std::cmp::Ordering;

use super::number::write_number;
use super::scan::skip_plain;
use super::value::Value;
use super::MAX_DEPTH;
use crate::error::{Error, Result};

/// Append the canonical bytes of `value` to `out`.
///
/// Refuses NaN/infinite numbers, objects with duplicate keys, and nesting deeper than
/// [`MAX_DEPTH`]. On error `out` holds a partial serialization and should be discarded.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<()> {
    write_value(value, out, 0)
}

/// The canonical bytes of `value`.
pub fn to_canonical(value: &Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_canonical(value, &mut out)?;
    Ok(out)
}

fn write_value(value: &Value, out: &mut Vec<u8>, depth: usize) -> Result<()> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(x) => write_number(*x, out)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            check_depth(depth + 1)?;
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(members) => {
            check_depth(depth + 1)?;
            out.push(b'{');
            if keys_strictly_ascending(members)? {
                for (i, (key, item)) in members.iter().enumerate() {
                    write_member(i, key, item, out, depth)?;
                }
            } else {
                let mut sorted: Vec<&(String, Value)> = members.iter().collect();
                sorted.sort_unstable_by(|a, b| compare_keys_utf16(&a.0, &b.0));
                for pair in sorted.windows(2) {
                    if pair[0].0 == pair[1].0 {
                        return Err(duplicate_key(&pair[0].0));
                    }
                }
                for (i, (key, item)) in sorted.into_iter().enumerate() {
                    write_member(i, key, item, out, depth)?;
                }
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn write_member(
    index: usize,
    key: &str,
    item: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    if index > 0 {
        out.push(b',');
    }
    write_string(key, out);
    out.push(b':');
    write_value(item, out, depth + 1)
}

/// Already-sorted objects (every object parsed from a canonical text) skip the sort.
fn keys_strictly_ascending(members: &[(String, Value)]) -> Result<bool> {
    for pair in members.windows(2) {
        match compare_keys_utf16(&pair[0].0, &pair[1].0) {
            Ordering::Less => {}
            Ordering::Equal => return Err(duplicate_key(&pair[0].0)),
            Ordering::Greater => return Ok(false),
        }
    }
    Ok(true)
}

fn check_depth(depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        Err(Error::canonical(format!(
            "nesting deeper than {MAX_DEPTH} arrays/objects"
        )))
    } else {
        Ok(())
    }
}

fn duplicate_key(key: &str) -> Error {
    Error::canonical(format!("duplicate object key {key:?}"))
}

/// Order two keys by their UTF-16 code units, as RFC 8785 §3.2.3 requires.
///
/// UTF-8 byte order equals code-point order, which differs from UTF-16 order in one
/// case only: a supplementary character (UTF-8 lead byte F0..F4, a surrogate pair
/// D800..DFFF in UTF-16) against a character in E000..FFFF (lead byte EE or EF).
/// Bytes before the first difference are shared, so if that difference is at a lead
/// byte both characters start there; if it is at a continuation byte both characters
/// have the same lead byte and byte order is already right.
pub fn compare_keys_utf16(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None => a.len().cmp(&b.len()),
        Some(i) => {
            let (x, y) = (a[i], b[i]);
            if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
                y.cmp(&x)
            } else {
                x.cmp(&y)
            }
        }
    }
}

/// Append `s` as a canonical JSON string: `"` and `\` escaped, control characters below
/// U+0020 as `\b \t \n \f \r` or `\u00xx` (lowercase hex), everything else (U+007F,
/// U+2028, non-ASCII) as literal UTF-8.
pub fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    loop {
        let i = skip_plain(bytes, start);
        out.extend_from_slice(&bytes[start..i]);
        let Some(&byte) = bytes.get(i) else { break };
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0A => out.extend_from_slice(b"\\n"),
            0x0C => out.extend_from_slice(b"\\f"),
            0x0D => out.extend_from_slice(b"\\r"),
            _ => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(byte >> 4)]);
                out.push(HEX[usize::from(byte & 0xF)]);
            }
        }
        start = i + 1;
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16_reference(a: &str, b: &str) -> Ordering {
        a.encode_utf16().cmp(b.encode_utf16())
    }

    #[test]
    fn key_order_is_utf16_code_units_not_code_points() {
        // U+1F602 is D83D DE02 in UTF-16, so it sorts before U+FB33.
        assert_eq!(compare_keys_utf16("\u{1F602}", "\u{FB33}"), Ordering::Less);
        assert_eq!(
            compare_keys_utf16("\u{FB33}", "\u{1F602}"),
            Ordering::Greater
        );
        assert_eq!(
            compare_keys_utf16("\u{E000}", "\u{10000}"),
            Ordering::Greater
        );
        assert_eq!(compare_keys_utf16("\u{D7FF}", "\u{10000}"), Ordering::Less);
        assert_eq!(compare_keys_utf16("a", "ab"), Ordering::Less);
        assert_eq!(compare_keys_utf16("", ""), Ordering::Equal);
    }

    #[test]
    fn key_order_matches_utf16_reference_on_boundary_characters() {
        let chars = [
            '\0',
            'A',
            'a',
            '\u{7F}',
            '\u{80}',
            '\u{7FF}',
            '\u{800}',
            '\u{D7FF}',
            '\u{E000}',
            '\u{EFFF}',
            '\u{F000}',
            '\u{FB33}',
            '\u{FFFF}',
            '\u{10000}',
            '\u{1F602}',
            '\u{10FFFF}',
        ];
        let mut keys = vec![String::new()];
        for &c in &chars {
            keys.push(c.to_string());
            for &d in &chars {
                keys.push(format!("{c}{d}"));
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(
                    compare_keys_utf16(a, b),
                    utf16_reference(a, b),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn strings_escape_only_quote_backslash_and_controls() {
        let mut out = Vec::new();
        write_string(
            "a\"b\\c/\u{8}\u{9}\n\u{C}\r\u{0}\u{1F}\u{7F}\u{2028}é€😂",
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c/\\b\\t\\n\\f\\r\\u0000\\u001f\u{7F}\u{2028}é€😂\""
        );
    }

    #[test]
    fn duplicate_keys_in_a_built_value_are_refused() {
        let value = Value::Object(vec![
            ("b".into(), Value::Null),
            ("a".into(), Value::Null),
            ("b".into(), Value::Null),
        ]);
        assert!(to_canonical(&value).is_err());
        let sorted = Value::Object(vec![("a".into(), Value::Null), ("a".into(), Value::Null)]);
        assert!(to_canonical(&sorted).is_err());
    }

    #[test]
    fn built_values_deeper_than_max_depth_are_refused() {
        let mut value = Value::Null;
        for _ in 0..MAX_DEPTH {
            value = Value::Array(vec![value]);
        }
        let text = to_canonical(&value).unwrap();
        assert_eq!(text.len(), 2 * MAX_DEPTH + 4);
        let deeper = Value::Object(vec![("k".into(), value)]);
        assert!(to_canonical(&deeper).is_err());
    }

    #[test]
    fn non_finite_number_in_a_built_value_is_refused() {
        let value = Value::Array(vec![Value::Number(f64::NAN)]);
        assert!(to_canonical(&value).is_err());
    }

    #[test]
    fn members_are_sorted_and_insertion_order_is_kept_in_the_value() {
        let value = Value::Object(vec![
            ("b".into(), Value::Number(2.0)),
            (
                "a".into(),
                Value::Array(vec![Value::Bool(true), Value::Null]),
            ),
        ]);
        assert_eq!(to_canonical(&value).unwrap(), br#"{"a":[true,null],"b":2}"#);
        assert_eq!(value.get("b"), Some(&Value::Number(2.0)));
        assert_eq!(value.as_object().unwrap()[0].0, "b");
    }
}
