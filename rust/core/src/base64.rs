//! Base64, standard (padded) or URL-safe (unpadded), read only in its canonical form.

pub const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Each byte's value in an alphabet, or [`NOT_A_DIGIT`].
const fn values_of(alphabet: &[u8; 64]) -> [u8; 256] {
    let mut values = [NOT_A_DIGIT; 256];
    let mut i = 0;
    while i < 64 {
        values[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    values
}

const NOT_A_DIGIT: u8 = 0xFF;
const STANDARD_VALUES: [u8; 256] = values_of(STANDARD);
const URL_SAFE_VALUES: [u8; 256] = values_of(URL_SAFE);

/// Base64 in `alphabet` that is exactly the encoding of its bytes (padded with `=` for
/// the standard alphabet, unpadded for the URL-safe one): every decoder reads the same
/// bytes from it, Python's lenient ones included.
pub fn decode(text: &[u8], alphabet: &[u8; 64]) -> Option<Vec<u8>> {
    let digits = if alphabet == STANDARD {
        let unpadded = text.strip_suffix(b"==").or_else(|| text.strip_suffix(b"="));
        unpadded.unwrap_or(text)
    } else {
        text
    };
    let values = if alphabet == STANDARD {
        STANDARD_VALUES
    } else if alphabet == URL_SAFE {
        URL_SAFE_VALUES
    } else {
        values_of(alphabet)
    };
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    read_digits(digits, &values, |byte| out.push(byte))?;
    (encode(&out, alphabet) == text).then_some(out)
}

/// Each byte `digits` spell (values from `values`), given to `byte` in order; the bits
/// left over past the last whole byte, or `None` at a byte that is not a digit.
fn read_digits(digits: &[u8], values: &[u8; 256], mut byte: impl FnMut(u8)) -> Option<u32> {
    let (mut bits, mut count) = (0u32, 0);
    for &c in digits {
        let value = match values[c as usize] {
            NOT_A_DIGIT => return None,
            value => u32::from(value),
        };
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            byte((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(bits)
}

/// [`decode`] in the standard alphabet of text that spells exactly `N` bytes, without
/// allocating: an archive's proofs hold millions of 32-byte nodes.
pub fn decode_exact<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    let pad = (3 - N % 3) % 3;
    if text.len() != N.div_ceil(3) * 4 {
        return None;
    }
    let (digits, padding) = text.split_at(text.len() - pad);
    if padding.iter().any(|&c| c != b'=') {
        return None;
    }
    let mut out = [0u8; N];
    let mut at = 0;
    let spare = read_digits(digits, &STANDARD_VALUES, |byte| {
        if let Some(slot) = out.get_mut(at) {
            *slot = byte;
        }
        at += 1;
    })?;
    // Canonical: the bits past the last byte are zero (as `encode` writes them).
    (at == N && spare == 0).then_some(out)
}

pub fn encode(data: &[u8], alphabet: &[u8; 64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 0x3F) as usize]);
        }
    }
    if alphabet == STANDARD {
        while out.len() % 4 != 0 {
            out.push(b'=');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_digit_of_each_alphabet_and_no_other_byte_decodes() {
        for alphabet in [STANDARD, URL_SAFE] {
            for byte in 0u8..=255 {
                // Four digits spell three bytes, whatever the digit; any other byte fails.
                let text = [byte, b'A', b'A', b'A'];
                let want = alphabet
                    .iter()
                    .position(|&a| a == byte)
                    .map(|v| vec![(v as u8) << 2, 0, 0]);
                assert_eq!(decode(&text, alphabet), want, "{byte:#x}");
            }
        }
    }

    /// `decode_exact` is `decode` of exactly `N` bytes.
    fn exact_is_decode<const N: usize>(text: &[u8]) {
        let want = decode(text, STANDARD).and_then(|bytes| <[u8; N]>::try_from(bytes).ok());
        assert_eq!(
            decode_exact::<N>(text),
            want,
            "{:?}",
            String::from_utf8_lossy(text)
        );
    }

    proptest::proptest! {
        #[test]
        fn decode_exact_is_decode_of_that_many_bytes(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            at in 0usize..64,
            byte in proptest::prelude::any::<u8>(),
            change in 0u8..4,
        ) {
            let mut text = encode(&data, STANDARD);
            // Sometimes one byte changed, dropped or added: most such texts decode to nothing.
            if !text.is_empty() {
                let at = at % text.len();
                match change {
                    0 => text[at] = byte,
                    1 => { text.remove(at); }
                    2 => text.insert(at, byte),
                    _ => {}
                }
            }
            exact_is_decode::<0>(&text);
            exact_is_decode::<1>(&text);
            exact_is_decode::<2>(&text);
            exact_is_decode::<3>(&text);
            exact_is_decode::<31>(&text);
            exact_is_decode::<32>(&text);
            exact_is_decode::<33>(&text);
        }
    }

    #[test]
    fn decode_exact_reads_only_canonical_text_of_that_length() {
        let node = encode(&[7u8; 32], STANDARD);
        assert_eq!(decode_exact::<32>(&node), Some([7u8; 32]));
        // The last digit's two spare bits set: Python's lenient decoders read it, not this.
        let mut spare = node.clone();
        spare[42] = STANDARD[(STANDARD.iter().position(|&c| c == node[42]).unwrap() | 1) & 63];
        assert_ne!(spare, node);
        assert_eq!(decode_exact::<32>(&spare), None);
        assert_eq!(decode_exact::<32>(&node[..43]), None);
        assert_eq!(decode_exact::<31>(&node), None);
        assert_eq!(decode_exact::<1>(b"AQ=="), Some([1]));
        assert_eq!(decode_exact::<1>(b"AR=="), None);
        assert_eq!(decode_exact::<1>(b"AQ=A"), None);
        assert_eq!(decode_exact::<0>(b""), Some([]));
    }

    #[test]
    fn base64_is_read_only_when_canonical() {
        assert_eq!(decode(b"Zm8=", STANDARD), Some(b"fo".to_vec()));
        assert_eq!(decode(b"Zm9=", STANDARD), None);
        assert_eq!(decode(b"Zm8", URL_SAFE), Some(b"fo".to_vec()));
        assert_eq!(decode(b"Zm+v", URL_SAFE), None);
    }
}
