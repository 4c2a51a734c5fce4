//! The ledger's table of imported bernstein files (`bernstein_files`), read once by Rust
//! through apsw's connection: each import's manifest as `importer.manifest_of` writes it,
//! the import ids present, the files whose blob is absent, and the store index. One scan
//! in path order instead of one per use. What the rows mean (the manifests, the store
//! index) is the bernstein crate's (`manifest.rs`); this reads them.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{mpsc, Mutex, OnceLock};

use agentledger_bernstein::journal;
use agentledger_bernstein::manifest::{
    self, manifest_hash, manifest_parts, store_key, FileRow, ImportedFiles,
};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::Error;
use crate::pools::drop_later;
use crate::sqlite::ApswConnection;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BernsteinFiles>()?;
    m.add_class::<BernsteinStoreIndex>()?;
    Ok(())
}

/// What one scan of the table gives. The calling thread only copies the rows; another
/// writes the manifests and builds the store index while the caller goes on, and the
/// getters wait for it.
#[pyclass(frozen, module = "agentledger._core")]
struct BernsteinFiles {
    /// What closes every manifest: `],"format":"…"}`.
    closing: Vec<u8>,
    /// What the rows are made into, until taken by `settled`.
    pending: Mutex<Option<mpsc::Receiver<ImportedFiles>>>,
    settled: OnceLock<Settled>,
}

/// The rows of the table as read, one arena for their text.
#[derive(Default)]
struct Rows {
    text: Vec<u8>,
    rows: Vec<Row>,
}

/// One row: ranges of `Rows::text`.
struct Row {
    path: Range<usize>,
    kind: Range<usize>,
    digest: Option<Range<usize>>,
    import_id: i64,
    absent: bool,
}

struct Settled {
    manifests: BTreeMap<i64, Vec<u8>>,
    /// Each manifest's `content_hash`, closed.
    hashes: BTreeMap<i64, String>,
    absent: Vec<(String, String)>,
    store_index: Py<BernsteinStoreIndex>,
}

/// Rows handed to the thread that makes sense of them at a time.
const CHUNK_ROWS: usize = 4096;

impl Drop for BernsteinFiles {
    fn drop(&mut self) {
        if let Some(settled) = self.settled.take() {
            drop_later(settled.manifests);
        }
    }
}

impl Rows {
    fn push(&mut self, text: &[u8]) -> Range<usize> {
        let start = self.text.len();
        self.text.extend_from_slice(text);
        start..self.text.len()
    }

    /// Hand every row to `files`, in order.
    fn add_to(&self, files: &mut ImportedFiles, name_from: usize) {
        let text = |range: &Range<usize>| &self.text[range.clone()];
        for row in &self.rows {
            let file = FileRow {
                path: text(&row.path),
                kind: text(&row.kind),
                digest: row.digest.as_ref().map(text),
                import_id: row.import_id,
                absent: row.absent,
            };
            files.add(&file, name_from);
        }
    }
}

impl BernsteinFiles {
    /// What the rows were made into, once they are.
    fn settled(&self, py: Python<'_>) -> PyResult<&Settled> {
        if let Some(settled) = self.settled.get() {
            return Ok(settled);
        }
        let pending = lock(&self.pending).take();
        if let Some(pending) = pending {
            let ImportedFiles {
                manifests,
                absent,
                index,
                hashes,
                ..
            } = py.allow_threads(move || pending.recv()).map_err(|_| {
                PyRuntimeError::new_err("reading the files failed (internal error)")
            })?;
            let store_index = Py::new(py, BernsteinStoreIndex { map: index })?;
            let _ = self.settled.set(Settled {
                manifests,
                hashes,
                absent,
                store_index,
            });
        }
        self.settled
            .get()
            .ok_or_else(|| PyRuntimeError::new_err("reading the files failed (internal error)"))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[pymethods]
impl BernsteinFiles {
    /// Scan the rows `sql` selects, in path order: `path, kind, digest,
    /// import_id, blob absent (0/1)`. A store name starts after `name_from` characters
    /// of a path (see [`store_key`]). The rows are made sense of on a thread of their
    /// own, beside the pool (which is verifying journals meanwhile).
    #[new]
    fn new(
        py: Python<'_>,
        connection: ApswConnection<'_>,
        sql: &str,
        format: String,
        name_from: usize,
    ) -> PyResult<Self> {
        let mut statement = connection.connection().prepare(sql)?;
        let connection = connection.release();
        let closing = manifest::closing(&format);
        let (chunks, chunks_in) = mpsc::channel::<Rows>();
        let (made, pending) = mpsc::channel();
        let closed = closing.clone();
        std::thread::Builder::new()
            .name("bernstein-files".into())
            .spawn(move || {
                let mut files = ImportedFiles::default();
                for rows in chunks_in {
                    rows.add_to(&mut files, name_from);
                }
                files.close(&closed);
                let _ = made.send(files);
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
        py.allow_threads(move || -> Result<_, Error> {
            let held = connection.lock();
            statement.start(&[])?;
            let mut rows = Rows::default();
            while statement.step()? {
                let text = |column| statement.bytes_held(&held, column);
                let row = Row {
                    path: rows.push(text(0)),
                    kind: rows.push(text(1)),
                    digest: (!statement.is_null(2)).then(|| rows.push(text(2))),
                    import_id: statement.int(3),
                    absent: statement.int(4) != 0,
                };
                rows.rows.push(row);
                if rows.rows.len() == CHUNK_ROWS {
                    let _ = chunks.send(std::mem::take(&mut rows));
                }
            }
            let _ = chunks.send(rows);
            Ok(())
        })?;
        Ok(Self {
            closing,
            pending: Mutex::new(Some(pending)),
            settled: OnceLock::new(),
        })
    }

    /// `manifest_of` the import's rows (none: an empty list).
    fn manifest<'py>(&self, py: Python<'py>, import_id: i64) -> PyResult<Bound<'py, PyBytes>> {
        let settled = self.settled(py)?;
        let mut out = Vec::new();
        for part in manifest_parts(&settled.manifests, &self.closing, import_id) {
            out.extend_from_slice(part);
        }
        Ok(PyBytes::new(py, &out))
    }

    /// `content_hash(manifest(import_id))`, hashed as the rows were read.
    fn manifest_hash(&self, py: Python<'_>, import_id: i64) -> PyResult<String> {
        let settled = self.settled(py)?;
        Ok(match settled.hashes.get(&import_id) {
            Some(hash) => hash.clone(),
            None => manifest_hash(manifest_parts(&settled.manifests, &self.closing, import_id)),
        })
    }

    /// The import ids the table holds, in order.
    #[getter]
    fn import_ids(&self, py: Python<'_>) -> PyResult<Vec<i64>> {
        Ok(self.settled(py)?.manifests.keys().copied().collect())
    }

    /// `(path, digest)` of the files whose blob the ledger lacks, in path order.
    #[getter]
    fn absent(&self, py: Python<'_>) -> PyResult<Vec<(String, String)>> {
        Ok(self.settled(py)?.absent.clone())
    }

    #[getter]
    fn store_index(&self, py: Python<'_>) -> PyResult<Py<BernsteinStoreIndex>> {
        Ok(self.settled(py)?.store_index.clone_ref(py))
    }
}

/// `content hash -> digest of the stored bytes`, built in Rust from the `path, kind,
/// digest` rows of `bernstein_files` that `sql` selects on the connection (no Python object
/// per row; the rows of the index are those `manifest::store_key` keys): handed to
/// `bernstein_verify_journals` and `BernsteinOptions` without conversion.
#[pyclass(frozen, module = "agentledger._core")]
pub(crate) struct BernsteinStoreIndex {
    pub(crate) map: journal::StoreIndex,
}

impl Drop for BernsteinStoreIndex {
    fn drop(&mut self) {
        drop_later(std::mem::take(&mut self.map));
    }
}

#[pymethods]
impl BernsteinStoreIndex {
    #[new]
    fn new(
        py: Python<'_>,
        connection: ApswConnection<'_>,
        sql: &str,
        name_from: usize,
    ) -> PyResult<Self> {
        let mut statement = connection.connection().prepare(sql)?;
        let connection = connection.release();
        let map = py.allow_threads(move || -> Result<journal::StoreIndex, Error> {
            let held = connection.lock();
            statement.start(&[])?;
            let mut map = journal::StoreIndex::default();
            let mut key = Vec::new();
            while statement.step()? {
                let text = |column| statement.bytes_held(&held, column);
                if !statement.is_null(2) && store_key(text(0), text(1), name_from, &mut key) {
                    map.insert(&key, text(2));
                }
            }
            Ok(map)
        })?;
        Ok(Self { map })
    }

    /// The digest stored under `content_hash`, or `None`.
    fn get(&self, content_hash: &str) -> Option<String> {
        self.map
            .get(content_hash.as_bytes())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    fn __len__(&self) -> usize {
        self.map.len()
    }
}
