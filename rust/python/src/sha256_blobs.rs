//! Re-hashing ledger blobs read by Rust itself: the calling thread steps ordered queries of
//! `digest, data` chunk rows through the open apsw connection (same transaction) while the
//! rayon pool hashes the blobs already read. The digests are a [`DigestSet`] kept in Rust,
//! so a set gathered by another Rust pass never becomes Python strings; that pass may also
//! have hashed blobs already, while it waited on other work ([`DigestSet::know`]).

use std::collections::HashMap;
use std::sync::Mutex;

use agentledger_core::hash::{sha256, to_hex_prefixed, SHA256_PREFIX};
use agentledger_core::pyjson::write_py_string;
use pyo3::prelude::*;

use crate::pools::pool;
use crate::sqlite::{Connection, Failure, Param, Reading, Statement};

/// Digests listed in one query: a statement per digest costs more than its blob's hash.
const SLICE: usize = 4096;

/// Bytes read before a batch of blobs is handed to the pool.
const BATCH_BYTES: usize = 1 << 20;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sha256_check_blobs, m)?)?;
    m.add_class::<DigestSet>()?;
    Ok(())
}

/// Content digests (`sha256:<hex>` names of ledger blobs), held in Rust.
#[pyclass(module = "agentledger._core")]
#[derive(Default)]
pub struct DigestSet {
    digests: Vec<Vec<u8>>,
    /// SHA-256 of blobs already read, by digest (not necessarily in `digests`).
    known: HashedBlobs,
}

/// SHA-256 of blobs read, by digest.
pub type HashedBlobs = HashMap<Vec<u8>, [u8; 32], foldhash::fast::RandomState>;

/// `(digest, SHA-256 of its bytes)` of blobs read, by the threads that read them.
pub type Hashed = Mutex<HashedBlobs>;

impl DigestSet {
    pub fn extend(&mut self, digests: impl IntoIterator<Item = Vec<u8>>) {
        self.digests.extend(digests);
    }

    pub fn know(&mut self, hashed: HashedBlobs) {
        self.known.extend(hashed);
    }

    /// Sorted, each once.
    fn settle(&mut self) {
        self.digests.sort_unstable();
        self.digests.dedup();
    }
}

#[pymethods]
impl DigestSet {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    fn update(&mut self, digests: Vec<String>) {
        self.extend(digests.into_iter().map(String::into_bytes));
    }

    fn __len__(&mut self) -> usize {
        self.settle();
        self.digests.len()
    }
}

/// Blobs streamed as `digest, data` chunk rows (a blob's rows consecutive and in order),
/// gathered for hashing.
#[derive(Default)]
struct BlobBatch {
    digests: Vec<Vec<u8>>,
    ends: Vec<usize>,
    data: Vec<u8>,
}

impl BlobBatch {
    /// Add the current row of `statement`. A full batch is returned, to be hashed, when
    /// the row starts a new blob (so a blob never spans two batches).
    fn push(&mut self, statement: &Statement) -> Option<BlobBatch> {
        let digest = statement.bytes(0);
        let mut full = None;
        if self.digests.last().map(Vec::as_slice) != Some(digest) {
            if self.data.len() >= BATCH_BYTES {
                full = Some(std::mem::take(self));
            }
            self.digests.push(digest.to_vec());
            self.ends.push(self.data.len());
        }
        self.data.extend_from_slice(statement.bytes(1));
        if let Some(end) = self.ends.last_mut() {
            *end = self.data.len();
        }
        full
    }

    /// Every blob's digest and SHA-256.
    fn hash(self) -> Vec<(Vec<u8>, [u8; 32])> {
        let mut start = 0;
        self.digests
            .into_iter()
            .zip(self.ends)
            .map(|(digest, end)| {
                let hash = sha256(&self.data[start..end]);
                start = end;
                (digest, hash)
            })
            .collect()
    }
}

/// Stream the rows `statement` yields (already started) into batches, each hashed on the
/// pool into `hashed`; `between` runs after each batch is handed over, with its size in bytes.
pub fn hash_rows<'s, E: From<Failure>>(
    statement: &mut Statement,
    hashed: &'s Hashed,
    scope: &rayon::Scope<'s>,
    mut between: impl FnMut(usize) -> Result<(), E>,
) -> Result<(), E> {
    let mut batch = BlobBatch::default();
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

/// Re-hash the blob of every digest in `digests` not already hashed: `sql` selects
/// `digest, data` of the chunks of the digests in the JSON array it is given (one
/// parameter), in digest then chunk order. Returns the number of blobs found, `(digest, "sha256:<hex>")` for each
/// whose bytes hash otherwise, and the digests that have no chunk at all; all in digest
/// order.
#[pyfunction]
#[pyo3(signature = (connection, sql, digests, jobs = 0))]
#[allow(clippy::type_complexity)]
fn sha256_check_blobs(
    py: Python<'_>,
    connection: usize,
    sql: &str,
    digests: &mut DigestSet,
    jobs: usize,
) -> PyResult<(usize, Vec<(String, String)>, Vec<String>)> {
    let connection = Connection::from_pointer(connection)?;
    let pool = pool(jobs)?;
    digests.settle();
    let unknown: Vec<Vec<u8>> = digests
        .digests
        .iter()
        .filter(|d| !digests.known.contains_key(*d))
        .cloned()
        .collect();
    let hashed = Hashed::default();
    let (listed, results) = (&unknown, &hashed);
    py.allow_threads(move || {
        pool.in_place_scope(|scope| -> PyResult<()> {
            let mut reading = Reading::new(connection);
            let mut statement = connection.prepare(sql)?;
            for slice in listed.chunks(SLICE) {
                statement.start(&[Param::Text(json_array(slice))])?;
                hash_rows(&mut statement, results, scope, |bytes| reading.count(bytes))?;
            }
            Ok(())
        })
    })?;
    digests.know(hashed.into_inner().unwrap_or_else(|p| p.into_inner()));
    let mut found = 0;
    let mut mismatches = Vec::new();
    let mut missing = Vec::new();
    let text = |digest: &[u8]| String::from_utf8_lossy(digest).into_owned();
    let mut hex = [0u8; 64];
    for digest in &digests.digests {
        let Some(hash) = digests.known.get(digest) else {
            missing.push(text(digest));
            continue;
        };
        found += 1;
        // Compared as bytes: a string is made only for a mismatch.
        let _ = hex::encode_to_slice(hash, &mut hex);
        if digest.strip_prefix(SHA256_PREFIX.as_bytes()) != Some(&hex[..]) {
            mismatches.push((text(digest), to_hex_prefixed(SHA256_PREFIX, hash)));
        }
    }
    Ok((found, mismatches, missing))
}

/// The digests as a JSON array of strings (for `json_each`).
fn json_array(digests: &[Vec<u8>]) -> String {
    let mut listed = b"[".to_vec();
    for (i, digest) in digests.iter().enumerate() {
        if i > 0 {
            listed.push(b',');
        }
        // ASCII-escaped, so any bytes make valid JSON (digests come from `str`s anyway).
        let _ = write_py_string(digest, true, &mut listed);
    }
    listed.push(b']');
    String::from_utf8_lossy(&listed).into_owned()
}
