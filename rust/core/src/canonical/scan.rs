//! Finding the next byte of a string that is not literal content (`"`, `\` or a control
//! character below U+0020): the inner loop of both parsing and serializing strings. And,
//! for Python's ASCII-escaped form, the next byte that is not printable ASCII.

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Whether any byte of `word` is zero (exact: no false positives for "any").
#[inline]
fn has_zero_byte(word: u64) -> bool {
    word.wrapping_sub(ONES) & !word & HIGHS != 0
}

/// Whether any byte of `word` is below 0x20 (exact for thresholds up to 0x80).
#[inline]
fn has_byte_below_0x20(word: u64) -> bool {
    word.wrapping_sub(ONES * 0x20) & !word & HIGHS != 0
}

#[inline]
fn is_special(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// The index of the first `"`, `\` or control byte at or after `i`, or `bytes.len()`.
#[inline]
pub fn skip_plain(bytes: &[u8], i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    let i = match skip_sse2::<false>(bytes, i) {
        Ok(found) => return found,
        Err(tail) => tail,
    };
    skip_plain_words(bytes, i)
}

/// Sixteen bytes at a time: `Ok` at the first `"`, `\` or control byte (with `ASCII`,
/// or byte 0x7F and above), or `Err` where fewer than sixteen bytes remain.
#[cfg(target_arch = "x86_64")]
#[inline]
fn skip_sse2<const ASCII: bool>(bytes: &[u8], mut i: usize) -> Result<usize, usize> {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_min_epu8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of x86_64; every load reads 16 bytes inside `bytes`.
    unsafe {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let below_space = _mm_set1_epi8(0x1F);
        let delete = _mm_set1_epi8(0x7F);
        while i + 16 <= bytes.len() {
            let chunk = _mm_loadu_si128(bytes.as_ptr().add(i).cast::<__m128i>());
            // A byte is a control character when min(byte, 0x1F) is the byte itself (and
            // 0x7F or above when max(byte, 0x7F) is).
            let control = _mm_cmpeq_epi8(_mm_min_epu8(chunk, below_space), chunk);
            let mut special = _mm_or_si128(
                control,
                _mm_or_si128(
                    _mm_cmpeq_epi8(chunk, quote),
                    _mm_cmpeq_epi8(chunk, backslash),
                ),
            );
            if ASCII {
                let high = _mm_cmpeq_epi8(_mm_max_epu8(chunk, delete), chunk);
                special = _mm_or_si128(special, high);
            }
            let mask = _mm_movemask_epi8(special);
            if mask != 0 {
                return Ok(i + mask.trailing_zeros() as usize);
            }
            i += 16;
        }
    }
    Err(i)
}

/// Eight bytes at a time (any target), then byte by byte.
#[inline]
fn skip_plain_words(bytes: &[u8], mut i: usize) -> usize {
    // Eight bytes at a time while none of them is special.
    while let Some(chunk) = bytes.get(i..i + 8) {
        let word = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
        if has_byte_below_0x20(word)
            || has_zero_byte(word ^ (ONES * u64::from(b'"')))
            || has_zero_byte(word ^ (ONES * u64::from(b'\\')))
        {
            break;
        }
        i += 8;
    }
    while i < bytes.len() && !is_special(bytes[i]) {
        i += 1;
    }
    i
}

/// The index of the first byte at or after `i` that `json.dumps` (ASCII-escaped) does
/// not copy as it is: `"`, `\`, or anything outside U+0020..U+007E; or `bytes.len()`.
#[inline]
pub fn skip_printable_ascii(bytes: &[u8], i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    let mut i = match skip_sse2::<true>(bytes, i) {
        Ok(found) => return found,
        Err(tail) => tail,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let mut i = i;
    while i < bytes.len() && !is_special(bytes[i]) && bytes[i] < 0x7F {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(bytes: &[u8], i: usize) -> usize {
        (i..bytes.len())
            .find(|&j| is_special(bytes[j]))
            .unwrap_or(bytes.len())
    }

    #[test]
    fn skip_plain_stops_at_every_special_byte_in_every_lane() {
        for special in (0u8..0x20).chain([b'"', b'\\']) {
            for len in 0..40 {
                for at in 0..len {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = special;
                    for start in 0..=at {
                        assert_eq!(skip_plain(&bytes, start), at, "{special:#x} {len} {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn skip_printable_ascii_stops_exactly_where_python_escapes() {
        let escaped = |b: u8| is_special(b) || b >= 0x7F;
        for byte in 0u8..=255 {
            for len in 1..36 {
                for at in 0..len {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = byte;
                    for start in 0..=at {
                        let want = if escaped(byte) { at } else { len };
                        assert_eq!(
                            skip_printable_ascii(&bytes, start),
                            want,
                            "{byte:#x} {len} {at}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn skip_plain_never_stops_at_literal_bytes() {
        let literal: Vec<u8> = (0u8..=255).filter(|&b| !is_special(b)).collect();
        for shift in 0..literal.len() {
            let mut bytes = literal.clone();
            bytes.rotate_left(shift);
            assert_eq!(skip_plain(&bytes, 0), bytes.len());
            bytes.push(b'"');
            for start in 0..bytes.len() {
                assert_eq!(skip_plain(&bytes, start), reference(&bytes, start));
            }
        }
    }
}
