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
    super::hex::decode_prefixed(SHA256_PREFIX, text)
}

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

    /// The portable decoder on a whole name.
    fn reference(text: &[u8]) -> Option<[u8; 32]> {
        super::super::hex::decode64_portable(text.strip_prefix(b"sha256:")?.try_into().ok()?)
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
