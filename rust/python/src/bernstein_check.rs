//! `bernstein_check`: verify's one call into Rust for the bernstein runs imported into a
//! ledger. It reads the files table (manifests, absent blobs, the store index), walks the
//! audit chain, verifies the runs (cross-checked with the chain's records) and re-hashes
//! the blobs they referenced, the GIL released throughout; the store index and the
//! chain's records are used inside and never handed to Python. Python applies its policy
//! on the one result (`verify/bernstein_runs.py`). The rules are the bernstein crate's;
//! this converts and reads.

use std::collections::BTreeMap;

use agentledger_bernstein::audit::AuditWalk;
use agentledger_bernstein::manifest::{self, manifest_hash, manifest_parts};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::bernstein::{verify_in_ledger, BernsteinOptions, BernsteinRun, LedgerReads};
use crate::bernstein_audit::{walk_segments, BernsteinAuditWalk};
use crate::bernstein_files::scan_files;
use crate::pools::{drop_later, pool};
use crate::sha256_blobs::{check_blobs, Rehashed};
use crate::sqlite::ApswConnection;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bernstein_check, m)?)?;
    m.add_class::<BernsteinCheck>()?;
    Ok(())
}

/// Check the imported bernstein runs of the ledger open on `connection`, in one call.
///
/// - `runs`: `(run id, journal path or None)`, in the order of the results;
/// - `files`: `(sql, manifest format, name_from)`: `sql` selects every row of the files
///   table in path order as `path, kind, digest, import_id, blob absent (0/1)`; a store
///   name starts after `name_from` characters of a path;
/// - `audit`: the audit chain's segments in chain order, or `None` not to walk it;
///   `keys`: `(scheme 1 key, scheme 2 key)` to check its HMACs;
/// - `rehash`: the SQL selecting `digest, data, idx` of the chunks of the digests in a
///   JSON array, to re-hash the blobs the runs referenced (`None`: not re-hashed);
/// - `mark`: the mark the caller's transaction was begun with (`sqlite/read_mark.rs`):
///   with it the pool's threads may read on readers of their own, else on `connection`.
#[pyfunction]
#[pyo3(signature = (
    connection, runs, options, *, files, audit=None, keys=None, rehash=None, mark=None
))]
#[allow(clippy::too_many_arguments)]
fn bernstein_check<'py>(
    py: Python<'py>,
    connection: ApswConnection<'py>,
    runs: Vec<(String, Option<String>)>,
    options: &Bound<'py, BernsteinOptions>,
    files: (String, String, usize),
    audit: Option<Vec<Bound<'py, PyBytes>>>,
    keys: Option<(Vec<u8>, Vec<u8>)>,
    rehash: Option<String>,
    mark: Option<Vec<u8>>,
) -> PyResult<BernsteinCheck> {
    let options = options.get();
    let (files_sql, format, name_from) = files;
    let pool = pool(options.jobs)?;
    // Every statement is prepared while the caller's connection is held with the GIL.
    let on = connection.connection();
    let mut files_statement = on.prepare(&files_sql)?;
    let mut rehash_statement = rehash.as_deref().map(|sql| on.prepare(sql)).transpose()?;
    let reads = match runs.is_empty() {
        true => None,
        false => Some(LedgerReads::prepare(
            on,
            pool.current_num_threads(),
            mark.as_deref(),
        )?),
    };
    let connection = connection.release();
    let segments: Option<Vec<&[u8]>> = audit
        .as_ref()
        .map(|segments| segments.iter().map(|b| b.as_bytes()).collect());
    let closing = manifest::closing(&format);
    let closed = closing.clone();
    let (files, walk, runs, rehashed) = py.allow_threads(|| {
        let pending = scan_files(connection, &mut files_statement, closed, name_from)?;
        // The chain is walked on the pool while another thread makes the manifests.
        let walk = segments
            .as_deref()
            .map(|segments| pool.install(|| walk_segments(segments, keys.as_ref())));
        let files = pending.wait()?;
        let mirror = walk.as_ref().and_then(AuditWalk::cross_check);
        let index = files.store();
        let runs = match reads {
            Some(reads) => {
                verify_in_ledger(connection, reads, runs, options, index, mirror.as_ref())?
            }
            None => Vec::new(),
        };
        let rehashed = match rehash_statement.as_mut() {
            Some(statement) => {
                // Each digest once, in order: `check_blobs` sorts them.
                let referenced: Vec<String> = runs
                    .iter()
                    .flat_map(BernsteinRun::referenced_digests)
                    .collect();
                Some(check_blobs(connection, statement, &referenced, &pool)?)
            }
            None => None,
        };
        PyResult::Ok((files, walk, runs, rehashed))
    })?;
    drop_later(files.index);
    Ok(BernsteinCheck {
        closing,
        manifests: files.manifests,
        hashes: files.hashes,
        absent: files.absent,
        audit: walk
            .map(|walk| Py::new(py, BernsteinAuditWalk(walk)))
            .transpose()?,
        runs: runs
            .into_iter()
            .map(|run| Py::new(py, run))
            .collect::<PyResult<_>>()?,
        rehashed,
    })
}

/// What `bernstein_check` found, read as plain values.
#[pyclass(frozen, module = "agentledger._core")]
pub struct BernsteinCheck {
    /// What closes every manifest: `],"format":"…"}`.
    closing: Vec<u8>,
    /// Each import's manifest, unclosed.
    manifests: BTreeMap<i64, Vec<u8>>,
    /// Each manifest's `content_hash`, closed.
    hashes: BTreeMap<i64, String>,
    absent: Vec<(String, String)>,
    audit: Option<Py<BernsteinAuditWalk>>,
    runs: Vec<Py<BernsteinRun>>,
    rehashed: Option<Rehashed>,
}

impl Drop for BernsteinCheck {
    fn drop(&mut self) {
        drop_later(std::mem::take(&mut self.manifests));
    }
}

#[pymethods]
impl BernsteinCheck {
    /// `manifest_of` the import's rows (none: an empty list).
    fn manifest<'py>(&self, py: Python<'py>, import_id: i64) -> Bound<'py, PyBytes> {
        let parts = manifest_parts(&self.manifests, &self.closing, import_id);
        PyBytes::new(py, &parts.concat())
    }

    /// `content_hash(manifest(import_id))`, hashed as the rows were read.
    fn manifest_hash(&self, import_id: i64) -> String {
        match self.hashes.get(&import_id) {
            Some(hash) => hash.clone(),
            None => manifest_hash(manifest_parts(&self.manifests, &self.closing, import_id)),
        }
    }

    /// The import ids the files table holds, in order.
    #[getter]
    fn import_ids(&self) -> Vec<i64> {
        self.manifests.keys().copied().collect()
    }

    /// `(path, digest)` of the files whose blob the ledger lacks, in path order.
    #[getter]
    fn absent(&self) -> Vec<(String, String)> {
        self.absent.clone()
    }

    /// The audit chain's walk (`None`: not asked for).
    #[getter]
    fn audit(&self, py: Python<'_>) -> Option<Py<BernsteinAuditWalk>> {
        self.audit.as_ref().map(|walk| walk.clone_ref(py))
    }

    /// One verdict per run, in the order given.
    #[getter]
    fn runs(&self, py: Python<'_>) -> Vec<Py<BernsteinRun>> {
        self.runs.iter().map(|run| run.clone_ref(py)).collect()
    }

    /// The blobs the runs referenced, re-hashed: `(found, [(digest, actual)] that hash
    /// otherwise, [digest] missing)`, in digest order (`None`: not asked for).
    #[getter]
    #[allow(clippy::type_complexity)]
    fn rehashed(&self) -> Option<(usize, Vec<(String, String)>, Vec<String>)> {
        self.rehashed.clone()
    }
}
