//! The one lowercase-hex codec: digests written as hex, and `<prefix>` + 64 hex digits read
//! back as 32 bytes. Upper-case hex is not read: it is not the form the writer produces, so
//! a name never meets its upper-case twin.
//!
//! Each direction has an SSE2 path (every x86-64 has SSE2) and a portable one, its
//! reference; `AGENTLEDGER_PORTABLE=1` forces the portable paths (`crate::portable`), and
//! the tests compare the two on every machine.

/// `prefix + lowercase hex(digest)`, e.g. `to_hex_prefixed(BLAKE3_PREFIX, &blake3(b""))`.
pub fn to_hex_prefixed(prefix: &str, digest: &[u8]) -> String {
    let mut out = vec![0; prefix.len() + 2 * digest.len()];
    out[..prefix.len()].copy_from_slice(prefix.as_bytes());
    write_hex(digest, &mut out[prefix.len()..]);
    String::from_utf8(out).expect("a str prefix and ASCII hex")
}

/// Lowercase hex of `bytes` into `out`, which holds two bytes per byte. `hex::encode`
/// goes a char at a time, which showed in append profiles (the journal writes three hex
/// digests per appended entry), and a bulk bernstein verify writes two per row: sixteen
/// bytes at a time in SSE2 (every x86-64 has it), the rest from a table.
pub fn write_hex(bytes: &[u8], out: &mut [u8]) {
    assert_eq!(out.len(), 2 * bytes.len(), "two hex digits per byte");
    #[cfg(target_arch = "x86_64")]
    let (bytes, out) = if crate::portable::forced() {
        (bytes, out)
    } else {
        let whole = bytes.len() / 16 * 16;
        let (chunks, out) = out.split_at_mut(2 * whole);
        for (chunk, digits) in bytes[..whole]
            .chunks_exact(16)
            .zip(chunks.chunks_exact_mut(32))
        {
            write_hex_sse2(chunk.try_into().expect("16 bytes"), digits);
        }
        (&bytes[whole..], out)
    };
    write_hex_portable(bytes, out);
}

/// Lowercase hex from a table, a byte at a time: the portable writer, and the SSE2 one's
/// reference.
pub fn write_hex_portable(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0x0f)];
    }
}

#[cfg(target_arch = "x86_64")]
fn write_hex_sse2(bytes: &[u8; 16], out: &mut [u8]) {
    use std::arch::x86_64::*;
    assert!(out.len() >= 32);
    // SAFETY: SSE2 is part of x86-64; one 16-byte load from `bytes`, two 16-byte stores
    // into the 32 bytes of `out` checked above.
    unsafe {
        let v = _mm_loadu_si128(bytes.as_ptr().cast());
        let low_nibble = _mm_set1_epi8(0x0F);
        let high = _mm_and_si128(_mm_srli_epi16(v, 4), low_nibble);
        let low = _mm_and_si128(v, low_nibble);
        // A nibble's digit: '0' + n, and 39 more ('a' - '0' - 10) above 9.
        let digit = |n: __m128i| {
            let letter = _mm_and_si128(_mm_cmpgt_epi8(n, _mm_set1_epi8(9)), _mm_set1_epi8(39));
            _mm_add_epi8(_mm_add_epi8(n, _mm_set1_epi8(b'0' as i8)), letter)
        };
        // Each byte's high digit first.
        let first = digit(_mm_unpacklo_epi8(high, low));
        let second = digit(_mm_unpackhi_epi8(high, low));
        _mm_storeu_si128(out.as_mut_ptr().cast(), first);
        _mm_storeu_si128(out[16..].as_mut_ptr().cast(), second);
    }
}

/// A 32-byte digest as 64 lowercase hex digits, without an allocation.
pub fn hex64(digest: &[u8; 32]) -> [u8; 64] {
    let mut text = [0u8; 64];
    write_hex(digest, &mut text);
    text
}

/// The 32 bytes of `prefix` + 64 lowercase hex digits; `None` for any other text.
pub fn decode_prefixed(prefix: &str, text: &[u8]) -> Option<[u8; 32]> {
    decode64(text.strip_prefix(prefix.as_bytes())?.try_into().ok()?)
}

/// 64 lowercase hex digits as the 32 bytes they spell; `None` if any is not `0-9a-f`.
pub fn decode64(hex: &[u8; 64]) -> Option<[u8; 32]> {
    // Verify reads hundreds of thousands of these: sixteen digits at a time in SSE2, else
    // byte by byte. Every digit is checked.
    #[cfg(target_arch = "x86_64")]
    if !crate::portable::forced() {
        return decode64_sse2(hex);
    }
    decode64_portable(hex)
}

/// 64 lowercase hex digits as the 32 bytes they spell, byte by byte: the portable reader,
/// and the SSE2 one's reference.
pub fn decode64_portable(hex: &[u8; 64]) -> Option<[u8; 32]> {
    let mut digest = [0u8; 32];
    // Branch-free: a non-hex byte sets the high bit of `invalid`.
    let mut invalid = 0u8;
    for (byte, pair) in digest.iter_mut().zip(hex.chunks_exact(2)) {
        let (high, low) = (NIBBLES[pair[0] as usize], NIBBLES[pair[1] as usize]);
        invalid |= high | low;
        *byte = (high << 4) | (low & 0x0F);
    }
    (invalid & 0x80 == 0).then_some(digest)
}

/// 64 lowercase hex digits as the 32 bytes they spell, sixteen digits at a time.
#[cfg(target_arch = "x86_64")]
fn decode64_sse2(hex: &[u8; 64]) -> Option<[u8; 32]> {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86-64; every load and store is of 16 bytes within the
    // 64-byte input or the 32-byte output.
    unsafe {
        let in_range = |v: __m128i, lo: u8, hi: u8| {
            // Signed compares: a byte of 0x80 or more is negative, so in no range.
            let above = _mm_cmpgt_epi8(v, _mm_set1_epi8((lo - 1) as i8));
            let below = _mm_cmplt_epi8(v, _mm_set1_epi8((hi + 1) as i8));
            _mm_and_si128(above, below)
        };
        // Sixteen digits as eight bytes, each in the low byte of its 16 bits; `None` when
        // a digit is not `0-9` or `a-f`.
        let pairs = |at: usize| -> Option<__m128i> {
            let v = _mm_loadu_si128(hex[at..].as_ptr().cast());
            let letter = in_range(v, b'a', b'f');
            let valid = _mm_or_si128(in_range(v, b'0', b'9'), letter);
            if _mm_movemask_epi8(valid) != 0xFFFF {
                return None;
            }
            // A digit's value is its low nibble, plus 9 for a letter.
            let nibbles = _mm_add_epi8(
                _mm_and_si128(v, _mm_set1_epi8(0x0F)),
                _mm_and_si128(letter, _mm_set1_epi8(9)),
            );
            // In each 16 bits: the first digit (low byte) is the high nibble.
            let high = _mm_slli_epi16(_mm_and_si128(nibbles, _mm_set1_epi16(0x0F)), 4);
            Some(_mm_or_si128(high, _mm_srli_epi16(nibbles, 8)))
        };
        let mut digest = [0u8; 32];
        for (half, at) in [0, 32].into_iter().enumerate() {
            let bytes = _mm_packus_epi16(pairs(at)?, pairs(at + 16)?);
            _mm_storeu_si128(digest[half * 16..].as_mut_ptr().cast(), bytes);
        }
        Some(digest)
    }
}

/// Each byte's value as a lowercase hex digit, or 0x80 for any other byte.
const NIBBLES: [u8; 256] = {
    let mut table = [0x80u8; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded xorshift: the same cases on every run and every machine.
    fn generator(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    #[test]
    fn the_sse2_decoder_agrees_with_the_portable_one() {
        // Random digests' hex, with one byte replaced by a random value at a random place.
        let mut next = generator(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let digest: [u8; 32] = std::array::from_fn(|_| next() as u8);
            let mut text = hex64(&digest);
            assert_eq!(decode64_portable(&text), Some(digest));
            assert_eq!(decode64(&text), Some(digest));
            let at = (next() % 64) as usize;
            text[at] = next() as u8;
            #[cfg(target_arch = "x86_64")]
            assert_eq!(decode64_sse2(&text), decode64_portable(&text), "{text:?}");
            assert_eq!(decode64(&text), decode64_portable(&text), "{text:?}");
        }
        // Every byte value at every place.
        let base = [b'5'; 64];
        for at in 0..64 {
            for byte in 0u8..=255 {
                let mut text = base;
                text[at] = byte;
                #[cfg(target_arch = "x86_64")]
                assert_eq!(
                    decode64_sse2(&text),
                    decode64_portable(&text),
                    "{at} {byte:#x}"
                );
                assert_eq!(decode64(&text), decode64_portable(&text), "{at} {byte:#x}");
            }
        }
    }

    #[test]
    fn the_sse2_writer_agrees_with_the_portable_one_and_the_hex_crate() {
        let mut next = generator(0x0123_4567_89AB_CDEF);
        for len in 0..100 {
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let mut fast = vec![0u8; 2 * len];
            let mut portable = vec![0u8; 2 * len];
            write_hex(&bytes, &mut fast);
            write_hex_portable(&bytes, &mut portable);
            assert_eq!(fast, portable);
            assert_eq!(fast, ::hex::encode(&bytes).into_bytes());
        }
    }

    #[test]
    fn a_prefixed_name_decodes_only_with_its_prefix_and_64_digits() {
        let text = format!("blake3:{}", "ab".repeat(32));
        assert_eq!(
            decode_prefixed("blake3:", text.as_bytes()),
            Some([0xab; 32])
        );
        assert_eq!(decode_prefixed("sha256:", text.as_bytes()), None);
        assert_eq!(decode_prefixed("blake3:", &text.as_bytes()[..70]), None);
        assert_eq!(
            decode_prefixed("blake3:", text.to_uppercase().as_bytes()),
            None
        );
    }
}
