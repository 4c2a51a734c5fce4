//! Zero-copy reading of a text already confirmed canonical by
//! [`super::check::certainly_canonical`]: objects and arrays walked member by member in
//! one pass, values as raw byte ranges, without building a [`super::Value`].
//!
//! Only for such texts: the functions assume the grammar holds (no whitespace, every
//! string closed, containers balanced) and return `None` when what they are asked for is
//! not there, never an error. Callers that need more than "is it exactly this" take the
//! full parse instead.

use super::scan::skip_plain;

/// The end (exclusive) of the value starting at `start`.
pub(crate) fn value_end(text: &[u8], start: usize) -> Option<usize> {
    match text.get(start)? {
        b'"' => string_end(text, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            loop {
                match text.get(i)? {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = start;
            while let Some(&b) = text.get(i) {
                if matches!(b, b',' | b'}' | b']') {
                    break;
                }
                i += 1;
            }
            Some(i)
        }
    }
}

/// The end (exclusive, after the closing quote) of the string whose `"` is at `start`.
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        i = skip_plain(text, i);
        match text.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2, // the escaped byte (or a `\u`'s `u`) is never a quote
            _ => return None,
        }
    }
}

/// The content of a string value given as its raw range (quotes included), when it has no
/// escapes (so the raw bytes are the string). `None` for anything else.
pub(crate) fn plain_str(raw: &[u8]) -> Option<&str> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    // No escape (nor quote or control byte) before the closing quote.
    if skip_plain(inner, 0) != inner.len() {
        return None;
    }
    if inner.is_ascii() {
        // SAFETY: ASCII is UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(inner) });
    }
    std::str::from_utf8(inner).ok()
}

/// Walk the object at `start` in one pass: `visit(raw key, value start)` consumes each
/// member's value and returns where it ends (`value_end` to skip it). Returns the end of
/// the object, or `None` if it is not an object or a visit says `None`.
pub(crate) fn walk_object<'a>(
    text: &'a [u8],
    start: usize,
    mut visit: impl FnMut(&'a [u8], usize) -> Option<usize>,
) -> Option<usize> {
    if text.get(start) != Some(&b'{') {
        return None;
    }
    let mut pos = start + 1;
    if text.get(pos) == Some(&b'}') {
        return Some(pos + 1);
    }
    loop {
        let key_end = string_end(text, pos)?;
        if text.get(key_end) != Some(&b':') {
            return None;
        }
        let end = visit(&text[pos..key_end], key_end + 1)?;
        match text.get(end)? {
            b',' => pos = end + 1,
            b'}' => return Some(end + 1),
            _ => return None,
        }
    }
}

/// Walk the array at `start` in one pass: `visit(item start)` consumes each item and
/// returns where it ends. Returns the end of the array.
pub(crate) fn walk_array(
    text: &[u8],
    start: usize,
    mut visit: impl FnMut(usize) -> Option<usize>,
) -> Option<usize> {
    if text.get(start) != Some(&b'[') {
        return None;
    }
    let mut pos = start + 1;
    if text.get(pos) == Some(&b']') {
        return Some(pos + 1);
    }
    loop {
        let end = visit(pos)?;
        match text.get(end)? {
            b',' => pos = end + 1,
            b']' => return Some(end + 1),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walking_a_canonical_text() {
        let text = br#"{"a":[1,"x\"]",{"b":null}],"b\\":"s","c":{},"d":-1.5e-7}"#;
        assert_eq!(value_end(text, 0), Some(text.len()));
        assert_eq!(value_end(text, 5), Some(26));
        assert_eq!(plain_str(br#""s""#), Some("s"));
        assert_eq!(plain_str(br#""x\"]""#), None);
        assert_eq!(plain_str(b"1"), None);

        let mut seen = Vec::new();
        let end = walk_object(text, 0, |key, start| {
            let end = if key == br#""a""# {
                walk_array(text, start, |item| {
                    let end = value_end(text, item)?;
                    seen.push(&text[item..end]);
                    Some(end)
                })?
            } else {
                value_end(text, start)?
            };
            seen.push(key);
            Some(end)
        });
        assert_eq!(end, Some(text.len()));
        let expected: [&[u8]; 7] = [
            b"1",
            br#""x\"]""#,
            br#"{"b":null}"#,
            br#""a""#,
            br#""b\\""#,
            br#""c""#,
            br#""d""#,
        ];
        assert_eq!(seen, expected);
        assert_eq!(walk_object(b"{}", 0, |_, _| None), Some(2));
        assert_eq!(walk_array(b"[]", 0, |_| None), Some(2));
        assert_eq!(walk_array(b"{}", 0, |_| None), None);
    }
}
