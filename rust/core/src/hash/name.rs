//! SHA-256 content names (`sha256:` + 64 lowercase hex) held as their 32 bytes.
//!
//! Verify looks up, sorts and compares tens of thousands of these per run set; as 32 raw
//! bytes they live inline in a table (no pointer to chase, no 71-byte compare). Any other
//! text, upper-case hex included, stays text, so it never meets its lower-case twin.

use std::hash::{Hash, Hasher};

use super::{to_hex_prefixed, SHA256_PREFIX};

/// A content name as the verifier keeps it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sha256Name {
    /// `sha256:` + 64 lowercase hex: the digest's bytes.
    Plain([u8; 32]),
    /// Any other text, as it is.
    Text(Box<[u8]>),
}

impl Sha256Name {
    pub fn parse(text: &[u8]) -> Self {
        match plain_sha256(text) {
            Some(digest) => Sha256Name::Plain(digest),
            None => Sha256Name::Text(text.into()),
        }
    }

    /// The name as text.
    pub fn text(&self) -> String {
        match self {
            Sha256Name::Plain(digest) => to_hex_prefixed(SHA256_PREFIX, digest),
            Sha256Name::Text(text) => String::from_utf8_lossy(text).into_owned(),
        }
    }

    /// Whether this is the name of bytes whose SHA-256 is `digest`.
    pub fn names(&self, digest: &[u8; 32]) -> bool {
        matches!(self, Sha256Name::Plain(plain) if plain == digest)
    }
}

impl Hash for Sha256Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Sha256Name::Plain(digest) => Digest32(*digest).hash(state),
            Sha256Name::Text(text) => text.hash(state),
        }
    }
}

/// 32 bytes as a hash table key, fed to the hasher as four words: tables of digests are
/// probed hundreds of thousands of times per verify, and a byte slice costs a length
/// and a long-input path in the hasher besides. Every byte is still hashed (a keyed hash
/// of part of a name would let a hostile workdir pick names that all collide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest32(pub [u8; 32]);

impl Hash for Digest32 {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for word in self.0.chunks_exact(8) {
            state.write_u64(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
    }
}

/// The 32 bytes of a `sha256:` + 64 lowercase hex text; `None` for any other text.
pub fn plain_sha256(text: &[u8]) -> Option<[u8; 32]> {
    let hex: &[u8; 64] = text
        .strip_prefix(SHA256_PREFIX.as_bytes())?
        .try_into()
        .ok()?;
    // Verify reads hundreds of thousands of these names: sixteen digits at a time in SSE2
    // (which every x86-64 has), else byte by byte. Every digit is checked.
    #[cfg(target_arch = "x86_64")]
    return decode_sse2(hex);
    #[cfg(not(target_arch = "x86_64"))]
    return decode_bytes(hex);
}

/// 64 lowercase hex digits as the 32 bytes they spell, byte by byte (the portable reader,
/// and the SSE2 one's reference in the tests).
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
fn decode_bytes(hex: &[u8; 64]) -> Option<[u8; 32]> {
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
fn decode_sse2(hex: &[u8; 64]) -> Option<[u8; 32]> {
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
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
const NIBBLES: [u8; 256] = {
    let mut table = [0x80u8; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// `sha256:` and `fill` repeated to 64 characters (tests).
#[cfg(test)]
pub(crate) fn repeated_name(fill: &str) -> Vec<u8> {
    format!("sha256:{}", fill.repeat(64 / fill.len())).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::repeated_name as name;
    use super::*;

    #[test]
    fn only_exact_lowercase_sha256_names_are_plain() {
        assert_eq!(plain_sha256(&name("0f")), Some([0x0f; 32]));
        for text in [
            name("0F"),
            name("0f")[..70].to_vec(),
            [name("0f"), b"0".to_vec()].concat(),
            [&b"sha512:"[..], &name("0f")[7..]].concat(),
            name("0g"),
            b"0f".repeat(32),
        ] {
            assert_eq!(
                plain_sha256(&text),
                None,
                "{}",
                String::from_utf8_lossy(&text)
            );
        }
    }

    /// The byte decoder on a whole name.
    fn reference(text: &[u8]) -> Option<[u8; 32]> {
        decode_bytes(text.strip_prefix(b"sha256:")?.try_into().ok()?)
    }

    #[test]
    fn the_fast_decoder_agrees_with_the_byte_decoder() {
        // Random names, and names with one byte replaced by every value at every place.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let digest: [u8; 32] = std::array::from_fn(|_| next() as u8);
            let mut text = to_hex_prefixed(SHA256_PREFIX, &digest).into_bytes();
            assert_eq!(plain_sha256(&text), Some(digest));
            let at = 7 + (next() % 64) as usize;
            text[at] = next() as u8;
            assert_eq!(plain_sha256(&text), reference(&text), "{text:?}");
        }
        let base = name("5a");
        for at in 7..71 {
            for byte in 0u8..=255 {
                let mut text = base.clone();
                text[at] = byte;
                assert_eq!(plain_sha256(&text), reference(&text), "{at} {byte:#x}");
            }
        }
    }

    #[test]
    fn every_hex_digit_decodes_and_no_other_byte_does() {
        for byte in 0u8..=255 {
            let mut text = name("00");
            text[7 + 63] = byte;
            let want = (byte as char)
                .to_digit(16)
                .filter(|_| !byte.is_ascii_uppercase());
            assert_eq!(
                plain_sha256(&text).map(|d| d[31]),
                want.map(|v| v as u8),
                "{byte:#x}"
            );
        }
    }

    #[test]
    fn names_keep_their_text_and_name_only_their_own_digest() {
        for text in [name("ab"), name("AB"), b"sha256:../x".to_vec()] {
            assert_eq!(Sha256Name::parse(&text).text().as_bytes(), &text[..]);
        }
        assert!(Sha256Name::parse(&name("ab")).names(&[0xab; 32]));
        assert!(!Sha256Name::parse(&name("AB")).names(&[0xab; 32]));
        assert!(!Sha256Name::parse(&name("ab")).names(&[0xac; 32]));
    }
}
