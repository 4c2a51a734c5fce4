//! The blob store checked against its names: a blob's chunks, streamed in order, must
//! hash to its name, add up to its size, be cut at its chunk size and be numbered 0..n-1.
//!
//! Rows arrive as one ordered query yields them (`digest, size, chunk_size, idx, data`,
//! each blob's chunks consecutive), so no blob is ever held whole.

use crate::hash::{
    content_name_prefix, to_hex_prefixed, Blake3Hasher, Sha256Hasher, BLAKE3_PREFIX, SHA256_PREFIX,
};

/// Chunk sizes and indexes quoted in a finding (the start of the list).
const QUOTED_SIZES: usize = 4;
const QUOTED_INDEXES: usize = 20;

/// One thing wrong with a blob: which check, expected vs actual.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobFinding {
    pub digest: String,
    pub check: &'static str,
    pub expected: String,
    pub actual: String,
}

enum ContentHasher {
    Blake3(Box<Blake3Hasher>),
    Sha256(Sha256Hasher),
}

/// A blob as its chunks stream past.
pub struct BlobCheck {
    digest: String,
    size: i64,
    chunk_size: i64,
    hasher: Option<ContentHasher>,
    total: i64,
    chunks: i64,
    previous_size: Option<i64>,
    badly_cut: bool,
    misnumbered: bool,
    sizes: Vec<i64>,
    indexes: Vec<i64>,
}

/// A list of numbers as Python writes one (`[1, 2]`), as the findings have always read.
fn quoted(numbers: &[i64]) -> String {
    let items: Vec<String> = numbers.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

impl BlobCheck {
    pub fn new(digest: String, size: i64, chunk_size: i64) -> Self {
        let hasher = match content_name_prefix(digest.as_bytes()) {
            Some(BLAKE3_PREFIX) => Some(ContentHasher::Blake3(Box::default())),
            Some(_) => Some(ContentHasher::Sha256(Sha256Hasher::new())),
            None => None,
        };
        BlobCheck {
            digest,
            size,
            chunk_size,
            hasher,
            total: 0,
            chunks: 0,
            previous_size: None,
            badly_cut: false,
            misnumbered: false,
            sizes: Vec::new(),
            indexes: Vec::new(),
        }
    }

    /// The next chunk, in index order.
    pub fn add(&mut self, idx: i64, data: &[u8]) {
        let len = data.len() as i64;
        // Every chunk but the last is exactly `chunk_size`; the last is at most that.
        if self
            .previous_size
            .is_some_and(|size| size != self.chunk_size)
        {
            self.badly_cut = true;
        }
        self.misnumbered |= idx != self.chunks;
        if self.sizes.len() < QUOTED_SIZES {
            self.sizes.push(len);
        }
        if self.indexes.len() < QUOTED_INDEXES {
            self.indexes.push(idx);
        }
        self.previous_size = Some(len);
        self.total += len;
        self.chunks += 1;
        match &mut self.hasher {
            Some(ContentHasher::Blake3(hasher)) => {
                hasher.update(data);
            }
            Some(ContentHasher::Sha256(hasher)) => {
                hasher.update(data);
            }
            None => {}
        }
    }

    /// What is wrong with the blob, now that all its chunks have passed.
    pub fn finish(self) -> Vec<BlobFinding> {
        let finding = |check, expected: String, actual: String| BlobFinding {
            digest: self.digest.clone(),
            check,
            expected,
            actual,
        };
        let actual = match &self.hasher {
            None => {
                let named = format!("'{}'", self.digest);
                return vec![finding("blob.name", "blake3:/sha256:<hex>".into(), named)];
            }
            Some(ContentHasher::Blake3(hasher)) => {
                to_hex_prefixed(BLAKE3_PREFIX, hasher.finalize().as_bytes())
            }
            Some(ContentHasher::Sha256(hasher)) => {
                to_hex_prefixed(SHA256_PREFIX, &hasher.finalize())
            }
        };
        let mut found = Vec::new();
        if actual != self.digest {
            found.push(finding("blob.digest", self.digest.clone(), actual));
        }
        if self.total != self.size {
            found.push(finding(
                "blob.size",
                self.size.to_string(),
                self.total.to_string(),
            ));
        }
        if self.badly_cut
            || self
                .previous_size
                .is_some_and(|size| size > self.chunk_size)
        {
            found.push(finding(
                "blob.chunk_size",
                self.chunk_size.to_string(),
                quoted(&self.sizes),
            ));
        }
        if self.misnumbered {
            found.push(finding(
                "blob.chunks",
                "0..n-1".into(),
                quoted(&self.indexes),
            ));
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{blake3_hex, sha256_hex};

    fn check(
        digest: &str,
        size: i64,
        chunk_size: i64,
        chunks: &[(i64, &[u8])],
    ) -> Vec<&'static str> {
        let mut blob = BlobCheck::new(digest.to_owned(), size, chunk_size);
        for (idx, data) in chunks {
            blob.add(*idx, data);
        }
        blob.finish().into_iter().map(|f| f.check).collect()
    }

    #[test]
    fn a_blob_stored_as_written_is_clean() {
        let name = blake3_hex(b"abcdefg");
        assert!(check(&name, 7, 3, &[(0, b"abc"), (1, b"def"), (2, b"g")]).is_empty());
        let name = sha256_hex(b"abcdefg");
        assert!(check(&name, 7, 4, &[(0, b"abcd"), (1, b"efg")]).is_empty());
        assert!(check(&blake3_hex(b""), 0, 4, &[]).is_empty());
    }

    #[test]
    fn each_kind_of_damage_is_named() {
        let name = blake3_hex(b"abcdefg");
        assert_eq!(
            check(&name, 7, 3, &[(0, b"abc"), (1, b"deX"), (2, b"g")]),
            ["blob.digest"]
        );
        assert_eq!(
            check(&name, 8, 3, &[(0, b"abc"), (1, b"def"), (2, b"g")]),
            ["blob.size"]
        );
        assert_eq!(
            check(&name, 7, 3, &[(0, b"ab"), (1, b"cdef"), (2, b"g")]),
            ["blob.chunk_size"]
        );
        assert_eq!(
            check(&name, 7, 3, &[(0, b"abc"), (1, b"defg")]),
            ["blob.chunk_size"]
        );
        assert_eq!(
            check(&name, 7, 3, &[(0, b"abc"), (2, b"def"), (3, b"g")]),
            ["blob.chunks"]
        );
        assert_eq!(check("blake3:XYZ", 7, 3, &[(0, b"abc")]), ["blob.name"]);
        assert_eq!(check(&name.to_uppercase(), 0, 3, &[]), ["blob.name"]);
    }

    #[test]
    fn findings_quote_the_start_of_the_lists() {
        let mut blob = BlobCheck::new(blake3_hex(b"x"), 1, 1);
        for idx in [0, 5, 6] {
            blob.add(idx, b"x");
        }
        let found = blob.finish();
        let chunks = found.iter().find(|f| f.check == "blob.chunks").unwrap();
        assert_eq!(
            (chunks.expected.as_str(), chunks.actual.as_str()),
            ("0..n-1", "[0, 5, 6]")
        );
    }
}
