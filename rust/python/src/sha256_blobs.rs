//! Re-hashing ledger blobs read by Rust itself (for `bernstein_check`'s partial verify): the
//! calling thread steps ordered queries of `digest, data, idx` chunk rows through the open
//! apsw connection (same transaction) while the rayon pool hashes the blobs already read.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use agentledger_bernstein::pyjson::write_py_string;
use agentledger_core::hash::{sha256_many, to_hex_prefixed, Sha256Name, SHA256_PREFIX};
use pyo3::prelude::*;

use crate::errors::Error;
use crate::sqlite::{Connection, Param, Reading, Statement};

/// Digests listed in one query: a statement per digest costs more than its blob's hash.
const SLICE: usize = 4096;

/// Bytes read before a batch of blobs is handed to the pool.
const BATCH_BYTES: usize = 1 << 20;

/// The SHA-256 of each blob read, by digest.
type Hashed = Mutex<HashMap<Sha256Name, [u8; 32], foldhash::fast::RandomState>>;

/// Blobs streamed as `digest, data, idx` chunk rows (a blob's rows consecutive and in
/// order, from `idx` 0), gathered for hashing.
#[derive(Default)]
struct BlobBatch {
    digests: Vec<Sha256Name>,
    ends: Vec<usize>,
    data: Vec<u8>,
}

impl BlobBatch {
    /// An empty batch, its buffer allocated at once (not grown, copy after copy, while
    /// the calling thread reads).
    fn new() -> Self {
        BlobBatch {
            data: Vec::with_capacity(BATCH_BYTES + BATCH_BYTES / 4),
            ..Default::default()
        }
    }

    /// Add the current row of `statement`. A full batch is returned, to be hashed, when
    /// the row starts a new blob (so a blob never spans two batches).
    fn push(&mut self, statement: &Statement) -> Option<BlobBatch> {
        let digest = Sha256Name::parse(statement.bytes(0));
        let mut full = None;
        // The same blob may come twice in a row (under two names): chunk 0 starts one.
        if statement.int(2) == 0 || self.digests.last() != Some(&digest) {
            if self.data.len() >= BATCH_BYTES {
                full = Some(std::mem::replace(self, BlobBatch::new()));
            }
            self.digests.push(digest);
            self.ends.push(self.data.len());
        }
        self.data.extend_from_slice(statement.bytes(1));
        if let Some(end) = self.ends.last_mut() {
            *end = self.data.len();
        }
        full
    }

    /// Every blob's digest and SHA-256 (the batch's blobs hashed side by side).
    fn hash(self) -> Vec<(Sha256Name, [u8; 32])> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let blobs: Vec<&[u8]> = starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.data[start..end])
            .collect();
        let hashes = sha256_many(&blobs);
        self.digests.into_iter().zip(hashes).collect()
    }
}

/// Stream the rows `statement` yields (already started) into batches, each hashed on the
/// pool into `hashed`; `between` runs after each batch is handed over, with its size in bytes.
fn hash_rows<'s, E: From<Error>>(
    statement: &mut Statement,
    hashed: &'s Hashed,
    scope: &rayon::Scope<'s>,
    mut between: impl FnMut(usize) -> Result<(), E>,
) -> Result<(), E> {
    let mut batch = BlobBatch::new();
    let hand_over = |batch: BlobBatch| {
        scope.spawn(move |_| {
            let hashes = batch.hash();
            hashed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(hashes);
        });
    };
    while statement.step()? {
        if let Some(full) = batch.push(statement) {
            let bytes = full.data.len();
            hand_over(full);
            between(bytes)?;
        }
    }
    hand_over(batch);
    Ok(())
}

/// What re-hashing found: the number of blobs found, `(digest, "sha256:<hex>")` for each
/// whose bytes hash otherwise, and the digests that have no chunk at all; in digest order.
pub(crate) type Rehashed = (usize, Vec<(String, String)>, Vec<String>);

/// Re-hash the blob of every digest in `digests` on `pool`, the GIL let go:
/// `statement` (prepared on `connection`) selects `digest, data, idx` of the chunks of
/// the digests in the JSON array it is given (one parameter), in digest then chunk order.
pub(crate) fn check_blobs(
    connection: Connection,
    statement: &mut Statement,
    digests: &[String],
    pool: &rayon::ThreadPool,
) -> PyResult<Rehashed> {
    let listed: Vec<Sha256Name> = digests
        .iter()
        .map(|d| d.as_bytes())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(Sha256Name::parse)
        .collect();
    let hashed = Hashed::default();
    let (wanted, results) = (&listed, &hashed);
    pool.in_place_scope(|scope| -> PyResult<()> {
        let mut reading = Reading::new(connection);
        for slice in wanted.chunks(SLICE) {
            statement.start(&[Param::Text(json_array(slice))])?;
            hash_rows(statement, results, scope, |bytes| reading.count(bytes))?;
        }
        Ok(())
    })?;
    let hashed = hashed.into_inner().unwrap_or_else(|p| p.into_inner());
    let (mut found, mut mismatches, mut missing) = (0, Vec::new(), Vec::new());
    for digest in &listed {
        match hashed.get(digest) {
            None => missing.push(digest.text()),
            Some(hash) => {
                found += 1;
                if !digest.names(hash) {
                    mismatches.push((digest.text(), to_hex_prefixed(SHA256_PREFIX, hash)));
                }
            }
        }
    }
    Ok((found, mismatches, missing))
}

/// The digests as a JSON array of strings (for `json_each`).
fn json_array(digests: &[Sha256Name]) -> String {
    let mut listed = b"[".to_vec();
    for (i, digest) in digests.iter().enumerate() {
        if i > 0 {
            listed.push(b',');
        }
        // ASCII-escaped, so any bytes make valid JSON (digests come from `str`s anyway).
        let _ = write_py_string(digest.text().as_bytes(), true, &mut listed);
    }
    listed.push(b']');
    String::from_utf8_lossy(&listed).into_owned()
}
