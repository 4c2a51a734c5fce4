//! Finding the next byte of a string that is not literal content (`"`, `\` or a control
//! character below U+0020): the inner loop of both parsing and serializing strings.

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
pub(crate) fn skip_plain(bytes: &[u8], mut i: usize) -> usize {
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
            for len in 0..20 {
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
