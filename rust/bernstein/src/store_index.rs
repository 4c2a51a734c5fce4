//! The flat store's index: `content_hash -> digest of the bytes stored under it`.
//!
//! Verify looks up every observation and artifact of every journal here: a hundred
//! thousand lookups for a thousand runs. Nearly every key is a plain `sha256:` + 64
//! lowercase hex, and nearly every stored digest equals its key; those are kept as 32
//! raw bytes inline in the table (no pointer to chase, no 71-byte compare), with the
//! digest only noted as "the key itself". Any other key or digest is kept as text.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use agentledger_core::hash::{plain_sha256, Digest32};

/// What is stored under a plain key.
#[derive(Debug, Clone, PartialEq)]
enum Stored {
    /// The digest is the key's own text.
    Itself,
    Other(Box<[u8]>),
}

/// `content_hash -> stored digest`, as text in and text out.
#[derive(Debug, Clone, Default)]
pub struct StoreIndex {
    plain: HashMap<Digest32, Stored, RandomState>,
    other: HashMap<Vec<u8>, Vec<u8>, RandomState>,
}

impl StoreIndex {
    pub fn insert(&mut self, content_hash: &[u8], digest: &[u8]) {
        match plain_sha256(content_hash) {
            Some(key) => {
                let stored = if digest == content_hash {
                    Stored::Itself
                } else {
                    Stored::Other(digest.into())
                };
                self.plain.insert(Digest32(key), stored);
            }
            None => {
                self.other.insert(content_hash.to_vec(), digest.to_vec());
            }
        }
    }

    /// The digest stored under `content_hash` (borrowed from it when they are equal).
    pub fn get<'a>(&'a self, content_hash: &'a [u8]) -> Option<&'a [u8]> {
        match plain_sha256(content_hash) {
            Some(key) => self.plain.get(&Digest32(key)).map(|stored| match stored {
                Stored::Itself => content_hash,
                Stored::Other(digest) => &digest[..],
            }),
            None => self.other.get(content_hash).map(Vec::as_slice),
        }
    }

    /// Whether the store holds bytes under `content_hash` whose digest is that very hash.
    pub fn holds_itself(&self, content_hash: &[u8]) -> bool {
        self.get(content_hash) == Some(content_hash)
    }

    pub fn len(&self) -> usize {
        self.plain.len() + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: AsRef<[u8]>, V: AsRef<[u8]>> FromIterator<(K, V)> for StoreIndex {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut index = StoreIndex::default();
        for (key, value) in pairs {
            index.insert(key.as_ref(), value.as_ref());
        }
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_other_keys_answer_with_their_stored_text() {
        let (a, b) = (hash("ab"), hash("cd"));
        let upper = hash("AB");
        let odd = b"sha256:../x".to_vec();
        let index: StoreIndex = [
            (a.clone(), a.clone()),
            (b.clone(), b"sha256:elsewhere".to_vec()),
            (upper.clone(), upper.clone()),
            (odd.clone(), b"d".to_vec()),
        ]
        .into_iter()
        .collect();
        assert_eq!(index.len(), 4);
        assert_eq!(index.get(&a), Some(&a[..]));
        assert_eq!(index.get(&b), Some(&b"sha256:elsewhere"[..]));
        assert_eq!(index.get(&upper), Some(&upper[..]));
        assert_eq!(index.get(&odd), Some(&b"d"[..]));
        assert_eq!(index.get(&hash("ef")), None);
        assert!(index.holds_itself(&a) && !index.holds_itself(&b));
    }

    #[test]
    fn an_upper_case_twin_is_a_different_key() {
        let (lower, upper) = (hash("ab"), hash("AB"));
        let index: StoreIndex = [(lower.clone(), lower.clone())].into_iter().collect();
        assert_eq!(index.get(&upper), None);
    }

    /// `sha256:` and `fill` repeated to 64 characters.
    fn hash(fill: &str) -> Vec<u8> {
        format!("sha256:{}", fill.repeat(64 / fill.len())).into_bytes()
    }
}
