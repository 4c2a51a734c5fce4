//! `json.loads(data)` for bytes, before parsing: `data.decode(json.detect_encoding(data),
//! "surrogatepass")`. Python guesses UTF-16 or UTF-32 from NUL bytes among the first four
//! and a byte order mark, and lets encoded surrogates through; the text is given here as
//! WTF-8 (see the module docs of [`super`]), ready for [`super::parse_wtf8`].

use std::borrow::Cow;

use super::push_code_point;

/// The text `json.loads(data)` parses, as WTF-8; `None` where the decode raises
/// `UnicodeDecodeError`.
pub fn decode_json_bytes(data: &[u8]) -> Option<Cow<'_, [u8]>> {
    match detect_encoding(data) {
        Encoding::Utf8Sig => utf8_surrogatepass(&data[3..]),
        Encoding::Utf8 => utf8_surrogatepass(data),
        Encoding::Utf16 { big_endian, bom } => {
            utf16_surrogatepass(&data[if bom { 2 } else { 0 }..], big_endian).map(Cow::Owned)
        }
        Encoding::Utf32 { big_endian, bom } => {
            utf32_surrogatepass(&data[if bom { 4 } else { 0 }..], big_endian).map(Cow::Owned)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Encoding {
    Utf8,
    Utf8Sig,
    Utf16 { big_endian: bool, bom: bool },
    Utf32 { big_endian: bool, bom: bool },
}

/// `json.detect_encoding`, the codec it names (a BOM-reading codec named by the BOM's
/// byte order, which is what that codec then reads).
fn detect_encoding(b: &[u8]) -> Encoding {
    if b.starts_with(b"\xff\xfe\x00\x00") {
        return Encoding::Utf32 {
            big_endian: false,
            bom: true,
        };
    }
    if b.starts_with(b"\x00\x00\xfe\xff") {
        return Encoding::Utf32 {
            big_endian: true,
            bom: true,
        };
    }
    if b.starts_with(b"\xff\xfe") {
        return Encoding::Utf16 {
            big_endian: false,
            bom: true,
        };
    }
    if b.starts_with(b"\xfe\xff") {
        return Encoding::Utf16 {
            big_endian: true,
            bom: true,
        };
    }
    if b.starts_with(b"\xef\xbb\xbf") {
        return Encoding::Utf8Sig;
    }
    if b.len() >= 4 {
        if b[0] == 0 {
            return if b[1] != 0 {
                Encoding::Utf16 {
                    big_endian: true,
                    bom: false,
                }
            } else {
                Encoding::Utf32 {
                    big_endian: true,
                    bom: false,
                }
            };
        }
        if b[1] == 0 {
            return if b[2] != 0 || b[3] != 0 {
                Encoding::Utf16 {
                    big_endian: false,
                    bom: false,
                }
            } else {
                Encoding::Utf32 {
                    big_endian: false,
                    bom: false,
                }
            };
        }
    } else if b.len() == 2 {
        if b[0] == 0 {
            return Encoding::Utf16 {
                big_endian: true,
                bom: false,
            };
        }
        if b[1] == 0 {
            return Encoding::Utf16 {
                big_endian: false,
                bom: false,
            };
        }
    }
    Encoding::Utf8
}

/// UTF-8, with a surrogate's three bytes (`ED A0..BF 80..BF`) let through; those are
/// already WTF-8, so valid input is returned as it is.
fn utf8_surrogatepass(data: &[u8]) -> Option<Cow<'_, [u8]>> {
    let mut rest = data;
    loop {
        match std::str::from_utf8(rest) {
            Ok(_) => return Some(Cow::Borrowed(data)),
            Err(error) => {
                let at = error.valid_up_to();
                match rest.get(at..at + 3) {
                    Some([0xED, 0xA0..=0xBF, 0x80..=0xBF]) => rest = &rest[at + 3..],
                    _ => return None,
                }
            }
        }
    }
}

/// UTF-16 code units: pairs joined, lone surrogates kept; an odd byte is refused.
fn utf16_surrogatepass(data: &[u8], big_endian: bool) -> Option<Vec<u8>> {
    if !data.len().is_multiple_of(2) {
        return None;
    }
    let units: Vec<u32> = data
        .chunks_exact(2)
        .map(|u| {
            let pair = [u[0], u[1]];
            u32::from(if big_endian {
                u16::from_be_bytes(pair)
            } else {
                u16::from_le_bytes(pair)
            })
        })
        .collect();
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < units.len() {
        let unit = units[i];
        let low = units.get(i + 1).copied();
        match low {
            Some(low) if (0xD800..=0xDBFF).contains(&unit) && (0xDC00..=0xDFFF).contains(&low) => {
                push_code_point(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00), &mut out);
                i += 2;
            }
            _ => {
                push_code_point(unit, &mut out);
                i += 1;
            }
        }
    }
    Some(out)
}

/// UTF-32 code points (surrogates kept); beyond U+10FFFF or a partial unit is refused.
fn utf32_surrogatepass(data: &[u8], big_endian: bool) -> Option<Vec<u8>> {
    if !data.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(data.len());
    for unit in data.chunks_exact(4) {
        let bytes = [unit[0], unit[1], unit[2], unit[3]];
        let code = if big_endian {
            u32::from_be_bytes(bytes)
        } else {
            u32::from_le_bytes(bytes)
        };
        if code > 0x10FFFF {
            return None;
        }
        push_code_point(code, &mut out);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_guesses_the_encoding_from_nul_bytes_and_boms() {
        let decoded = |b: &[u8]| decode_json_bytes(b).map(|t| t.into_owned());
        assert_eq!(decoded(b"{}"), Some(b"{}".to_vec()));
        assert_eq!(decoded(b"\xef\xbb\xbf{}"), Some(b"{}".to_vec()));
        assert_eq!(decoded(b"{\x00}\x00"), Some(b"{}".to_vec()));
        assert_eq!(decoded(b"\x00{\x00}"), Some(b"{}".to_vec()));
        assert_eq!(decoded(b"\xff\xfe{\x00}\x00"), Some(b"{}".to_vec()));
        assert_eq!(decoded(b"1\x00\x00\x00"), Some(b"1".to_vec()));
        assert_eq!(decoded(b"\x00\x00\x00\x31"), Some(b"1".to_vec()));
        assert_eq!(decoded(b"1\x00"), Some(b"1".to_vec()));
        // A surrogate encoded in UTF-8 passes; other invalid UTF-8 does not.
        assert_eq!(
            decoded(b"\"\xed\xa0\x80\""),
            Some(b"\"\xed\xa0\x80\"".to_vec())
        );
        assert_eq!(decoded(b"\xff"), None);
        assert_eq!(decoded(b"\xc0\xaf"), None);
        // An odd UTF-16 length, a code point beyond U+10FFFF.
        assert_eq!(decoded(b"{\x00}\x00\x01"), None);
        assert_eq!(decoded(b"\x00\x00\xfe\xff\x00\x11\x00\x00"), None);
        // A lone UTF-16 surrogate is kept as WTF-8.
        assert_eq!(
            decoded(b"\x00\"\xd8\x00\x00\""),
            Some(b"\"\xed\xa0\x80\"".to_vec())
        );
    }
}
