//! Base64, standard (padded) or URL-safe (unpadded), read only in its canonical form.

pub(crate) const STANDARD: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub(crate) const URL_SAFE: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 in `alphabet` that is exactly the encoding of its bytes (padded with `=` for
/// the standard alphabet, unpadded for the URL-safe one): every decoder reads the same
/// bytes from it, Python's lenient ones included.
pub(crate) fn decode(text: &[u8], alphabet: &[u8; 64]) -> Option<Vec<u8>> {
    let digits = if alphabet == STANDARD {
        let unpadded = text.strip_suffix(b"==").or_else(|| text.strip_suffix(b"="));
        unpadded.unwrap_or(text)
    } else {
        text
    };
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for &c in digits {
        let value = alphabet.iter().position(|&a| a == c)? as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    (encode(&out, alphabet) == text).then_some(out)
}

pub(crate) fn encode(data: &[u8], alphabet: &[u8; 64]) -> Vec<u8> {
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
    fn base64_is_read_only_when_canonical() {
        assert_eq!(decode(b"Zm8=", STANDARD), Some(b"fo".to_vec()));
        assert_eq!(decode(b"Zm9=", STANDARD), None);
        assert_eq!(decode(b"Zm8", URL_SAFE), Some(b"fo".to_vec()));
        assert_eq!(decode(b"Zm+v", URL_SAFE), None);
    }
}
