//! The ledger's table of imported bernstein files (`bernstein_files`), read once by Rust
//! through apsw's connection for `bernstein_check`: each import's manifest as
//! `importer.manifest_of` writes it, the import ids present, the files whose blob is
//! absent, and the store index. One scan in path order instead of one per use. What the
//! rows mean (the manifests, the store index) is the bernstein crate's (`manifest.rs`);
//! this reads them. `BernsteinStoreIndex` is the store index alone, for the importer and
//! the workdir read from a ledger.

use std::ops::Range;
use std::sync::mpsc;

use agentledger_bernstein::journal;
use agentledger_bernstein::manifest::{store_key, FileRow, ImportedFiles};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::Error;
use crate::pools::drop_later;
use crate::sqlite::{ApswConnection, Connection, Statement};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BernsteinStoreIndex>()?;
    Ok(())
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

/// Rows handed to the thread that makes sense of them at a time.
const CHUNK_ROWS: usize = 4096;

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

/// What the files are made into, once [`scan_files`] read them.
pub(crate) struct PendingFiles(mpsc::Receiver<ImportedFiles>);

impl PendingFiles {
    /// Wait for the thread making them.
    pub(crate) fn wait(self) -> PyResult<ImportedFiles> {
        self.0
            .recv()
            .map_err(|_| PyRuntimeError::new_err("reading the files failed (internal error)"))
    }
}

/// Read the rows `statement` selects (prepared on `connection`), in path order: `path,
/// kind, digest, import_id, blob absent (0/1)`. The calling thread (without the GIL) only
/// copies them; another makes each import's manifest closed by `closing`, the absent
/// blobs and the store index (a store name starts after `name_from` characters of a path,
/// see [`store_key`]) while the caller goes on.
pub(crate) fn scan_files(
    connection: Connection,
    statement: &mut Statement,
    closing: Vec<u8>,
    name_from: usize,
) -> PyResult<PendingFiles> {
    let (chunks, chunks_in) = mpsc::channel::<Rows>();
    let (made, pending) = mpsc::channel();
    std::thread::Builder::new()
        .name("bernstein-files".into())
        .spawn(move || {
            let mut files = ImportedFiles::default();
            for rows in chunks_in {
                rows.add_to(&mut files, name_from);
            }
            files.close(&closing);
            let _ = made.send(files);
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
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
    Ok(PendingFiles(pending))
}

/// `content hash -> digest of the stored bytes`, built in Rust from the `path, kind,
/// digest` rows of `bernstein_files` that `sql` selects on the connection (no Python object
/// per row; the rows of the index are those `manifest::store_key` keys): handed to
/// `bernstein_verify_journals` without conversion.
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
