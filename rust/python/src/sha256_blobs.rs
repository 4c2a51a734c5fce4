//! Re-hashing ledger blobs read by Rust itself: the calling thread steps ordered queries of
//! `digest, data, idx` chunk rows through the open apsw connection (same transaction) while the
//! rayon pool hashes the blobs already read. The digests are a [`DigestSet`] kept in Rust,
//! so a set gathered by another Rust pass never becomes Python strings; that pass may also
//! have hashed blobs already, while it waited on other work ([`DigestSet::know`]).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use agentledger_bernstein::pyjson::write_py_string;
use agentledger_core::hash::{sha256_many, to_hex_prefixed, Sha256Name, SHA256_PREFIX};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::pools::{drop_later, pool};
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

/// Content digests (`sha256:<hex>` names of ledger blobs) to re-hash, held in Rust, each
/// once. A digest whose blob was already read and hashed is settled as it is added (a
/// lookup, nothing kept); only the others wait for `sha256_check_blobs`.
#[pyclass(module = "agentledger._core")]
#[derive(Default)]
pub struct DigestSet {
    /// Blobs already read, by digest: their SHA-256, and whether the set holds them.
    known: HashedBlobs,
    /// Digests added whose blobs are not read yet.
    unread: HashSet<Sha256Name, foldhash::fast::RandomState>,
    /// Digests added whose blobs were read: how many, and `(digest, "sha256:<hex>")` of
    /// those whose bytes hash otherwise.
    found: usize,
    mismatches: Vec<(String, String)>,
    /// Digests a pool task is still gathering (see [`DigestSet::gathered`]), added to
    /// these before the set is used.
    pending: Option<Mutex<mpsc::Receiver<DigestSet>>>,
}

/// A blob read: the SHA-256 of its bytes, and whether a [`DigestSet`] holds its digest
/// (set by whichever thread adds it first).
#[derive(Debug)]
pub struct Read {
    hash: [u8; 32],
    added: AtomicBool,
}

impl Read {
    fn new(hash: [u8; 32]) -> Self {
        Read {
            hash,
            added: AtomicBool::new(false),
        }
    }
}

/// Blobs read, by digest.
pub type HashedBlobs = HashMap<Sha256Name, Read, foldhash::fast::RandomState>;

/// Blobs read, by the threads that read them.
pub type Hashed = Mutex<HashedBlobs>;

/// An empty [`Hashed`] with room for `blobs`.
pub fn hashed_with_room(blobs: usize) -> Hashed {
    Mutex::new(HashMap::with_capacity_and_hasher(blobs, Default::default()))
}

impl Drop for DigestSet {
    fn drop(&mut self) {
        drop_later((
            std::mem::take(&mut self.known),
            std::mem::take(&mut self.unread),
        ));
    }
}

/// What adding digests to a set settles, on one thread.
#[derive(Default)]
struct Added {
    found: usize,
    mismatches: Vec<(String, String)>,
    unread: Vec<Sha256Name>,
}

impl Added {
    fn add(&mut self, known: &HashedBlobs, digest: &Sha256Name) {
        match known.get(digest) {
            Some(read) => self.settle(digest, read),
            None => self.unread.push(digest.clone()),
        }
    }

    /// Count a digest whose blob was read, the first time it is added, and note it if
    /// the bytes hash otherwise.
    fn settle(&mut self, digest: &Sha256Name, read: &Read) {
        if read.added.swap(true, Ordering::Relaxed) {
            return;
        }
        self.found += 1;
        if !digest.names(&read.hash) {
            let actual = to_hex_prefixed(SHA256_PREFIX, &read.hash);
            self.mismatches.push((digest.text(), actual));
        }
    }

    fn merge(mut self, other: Added) -> Added {
        self.found += other.found;
        self.mismatches.extend(other.mismatches);
        self.unread.extend(other.unread);
        self
    }
}

impl DigestSet {
    pub fn extend<'d>(&mut self, digests: impl IntoIterator<Item = &'d [u8]>) {
        let mut added = Added::default();
        for digest in digests {
            added.add(&self.known, &Sha256Name::parse(digest));
        }
        self.take(added);
    }

    /// [`DigestSet::extend`] with digests already read as names, looked up side by side
    /// on the current rayon pool.
    pub fn extend_in_parallel(&mut self, digests: &[Sha256Name]) {
        let known = &self.known;
        let added = digests
            .par_chunks(4096)
            .map(|chunk| {
                let mut added = Added::default();
                for digest in chunk {
                    added.add(known, digest);
                }
                added
            })
            .reduce(Added::default, Added::merge);
        self.take(added);
    }

    fn take(&mut self, added: Added) {
        self.found += added.found;
        self.mismatches.extend(added.mismatches);
        self.unread.extend(added.unread);
    }

    /// Blobs just read (none added yet): the digests added before them are settled now.
    pub fn know(&mut self, hashed: HashedBlobs) {
        if self.known.is_empty() && self.unread.is_empty() {
            self.known = hashed;
            return;
        }
        let mut added = Added::default();
        for (digest, read) in hashed {
            let was_added = self.unread.remove(&digest);
            let held = self
                .known
                .entry(digest.clone())
                .or_insert_with(|| Read::new(read.hash));
            if was_added {
                added.settle(&digest, held);
            }
        }
        self.take(added);
    }

    /// A set that `gather` fills on the pool while the caller goes on: tens of thousands
    /// of lookups that Python's thread need not wait for until it uses the set. What
    /// `gather` returns is dropped once the set is handed over.
    pub fn gathered<T: Send + 'static>(
        pool: &rayon::ThreadPool,
        gather: impl FnOnce(&mut DigestSet) -> T + Send + 'static,
    ) -> Self {
        let (sender, pending) = mpsc::channel();
        pool.spawn(move || {
            let mut set = DigestSet::default();
            let spent = gather(&mut set);
            let _ = sender.send(set);
            drop(spent);
        });
        let mut set = DigestSet::default();
        set.pending = Some(Mutex::new(pending));
        set
    }

    /// Wait for the digests still being gathered, if any (without the GIL).
    fn settle(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let pending = pending.into_inner().unwrap_or_else(|p| p.into_inner());
        let gathered = py
            .allow_threads(move || pending.recv())
            .map_err(|_| PyRuntimeError::new_err("gathering digests failed (internal error)"))?;
        // A set being gathered is used by nothing else until now: it is the gathered one.
        let mut gathered = gathered;
        std::mem::swap(&mut self.known, &mut gathered.known);
        std::mem::swap(&mut self.unread, &mut gathered.unread);
        std::mem::swap(&mut self.mismatches, &mut gathered.mismatches);
        self.found = gathered.found;
        Ok(())
    }

    /// How many digests the set holds.
    fn len(&self) -> usize {
        self.found + self.unread.len()
    }
}

#[pymethods]
impl DigestSet {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    fn update(&mut self, py: Python<'_>, digests: Vec<String>) -> PyResult<()> {
        self.settle(py)?;
        self.extend(digests.iter().map(String::as_bytes));
        Ok(())
    }

    fn __len__(&mut self, py: Python<'_>) -> PyResult<usize> {
        self.settle(py)?;
        Ok(self.len())
    }
}

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
    fn hash(self) -> Vec<(Sha256Name, Read)> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let blobs: Vec<&[u8]> = starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.data[start..end])
            .collect();
        let hashes = sha256_many(&blobs).into_iter();
        let read = hashes.map(Read::new);
        self.digests.into_iter().zip(read).collect()
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

/// Re-hash the blob of every digest in `digests` not already hashed: `sql` selects
/// `digest, data, idx` of the chunks of the digests in the JSON array it is given (one
/// parameter), in digest then chunk order. Returns the number of blobs found,
/// `(digest, "sha256:<hex>")` for each whose bytes hash otherwise, and the digests that
/// have no chunk at all; all in digest order.
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
    // SAFETY: `connection` is `storage/native.handle(conn)` of the caller's open apsw
    // connection, used only during this call, with the GIL held (from_pointer's contract).
    let connection = unsafe { Connection::from_pointer(connection)? };
    let pool = pool(jobs)?;
    digests.settle(py)?;
    let unread: Vec<Sha256Name> = digests.unread.iter().cloned().collect();
    let hashed = hashed_with_room(unread.len());
    let (listed, results) = (&unread, &hashed);
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
    // In digest order, as the set does not keep one; what is still unread has no chunk.
    let mut mismatches = digests.mismatches.clone();
    mismatches.sort_unstable();
    let mut missing: Vec<String> = digests.unread.iter().map(Sha256Name::text).collect();
    missing.sort_unstable();
    Ok((digests.found, mismatches, missing))
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
