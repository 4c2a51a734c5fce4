//! The ledger's table of imported bernstein files (`bernstein_files`), read once by Rust
//! through apsw's connection: each import's manifest as `importer.manifest_of` writes it,
//! the import ids present, the files whose blob is absent, and the store index. One scan
//! in path order instead of one per use.

use std::collections::BTreeMap;

use agentledger_core::hash::{to_hex_prefixed, Sha256Hasher, SHA256_PREFIX};
use agentledger_core::pyjson::{self, journal};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::pyjson::BernsteinStoreIndex;
use crate::sqlite::{Connection, Failure, Param};

/// How every manifest starts.
const FILES: &[u8] = b"{\"files\":[";

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BernsteinFiles>()?;
    Ok(())
}

/// What one scan of the table gives.
#[pyclass(frozen, module = "agentledger._core")]
struct BernsteinFiles {
    /// Each import's manifest so far: `{"files":[[path, kind, digest], …` (unclosed).
    manifests: BTreeMap<i64, Vec<u8>>,
    /// What closes every manifest: `],"format":"…"}`.
    closing: Vec<u8>,
    /// `(path, digest)` of the files whose blob the ledger lacks, in path order.
    #[pyo3(get)]
    absent: Vec<(String, String)>,
    #[pyo3(get)]
    store_index: Py<BernsteinStoreIndex>,
}

impl BernsteinFiles {
    /// The manifest's bytes, in pieces: the rows, then the format.
    fn manifest_parts(&self, import_id: i64) -> [&[u8]; 2] {
        let files = self.manifests.get(&import_id).map_or(FILES, Vec::as_slice);
        [files, &self.closing]
    }
}

#[pymethods]
impl BernsteinFiles {
    /// Scan the rows `sql` selects with `params`, in path order: `path, kind, digest,
    /// import_id, blob absent (0/1), store index key (NULL: not in the index)`.
    #[new]
    fn new(
        py: Python<'_>,
        connection: usize,
        sql: &str,
        params: Vec<Param>,
        format: String,
    ) -> PyResult<Self> {
        let connection = Connection::from_pointer(connection)?;
        let scanned = py.allow_threads(move || -> Result<_, Failure> {
            let held = connection.lock();
            let mut statement = connection.prepare(sql)?;
            statement.start(&params)?;
            let mut manifests: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
            let mut absent = Vec::new();
            let mut index = journal::StoreIndex::default();
            while statement.step()? {
                let manifest = manifests
                    .entry(statement.int(3))
                    .or_insert_with(|| FILES.to_vec());
                if manifest.len() > FILES.len() {
                    manifest.push(b',');
                }
                manifest.push(b'[');
                for column in 0..3 {
                    if column > 0 {
                        manifest.push(b',');
                    }
                    if statement.is_null(column) {
                        manifest.extend_from_slice(b"null");
                    } else {
                        // ASCII-escaped: any text is written (a mismatch is decided in Python).
                        let text = statement.bytes_held(&held, column);
                        let _ = pyjson::write_py_string(text, true, manifest);
                    }
                }
                manifest.push(b']');
                if statement.int(4) != 0 {
                    let text = |column| {
                        String::from_utf8_lossy(statement.bytes_held(&held, column)).into_owned()
                    };
                    absent.push((text(0), text(2)));
                }
                if !statement.is_null(5) {
                    index.insert(
                        statement.bytes_held(&held, 5),
                        statement.bytes_held(&held, 2),
                    );
                }
            }
            Ok((manifests, absent, index))
        });
        let (manifests, absent, map) = scanned?;
        let mut closing = b"],\"format\":".to_vec();
        let _ = pyjson::write_py_string(format.as_bytes(), true, &mut closing);
        closing.push(b'}');
        Ok(Self {
            manifests,
            closing,
            absent,
            store_index: Py::new(py, BernsteinStoreIndex { map })?,
        })
    }

    /// `manifest_of` the import's rows (none: an empty list).
    fn manifest<'py>(&self, py: Python<'py>, import_id: i64) -> Bound<'py, PyBytes> {
        let mut out = Vec::new();
        for part in self.manifest_parts(import_id) {
            out.extend_from_slice(part);
        }
        PyBytes::new(py, &out)
    }

    /// `content_hash(manifest(import_id))`, without copying the manifest.
    fn manifest_hash(&self, py: Python<'_>, import_id: i64) -> String {
        py.allow_threads(|| {
            let mut hasher = Sha256Hasher::new();
            for part in self.manifest_parts(import_id) {
                hasher.update(part);
            }
            to_hex_prefixed(SHA256_PREFIX, &hasher.finalize())
        })
    }

    /// The import ids the table holds, in order.
    #[getter]
    fn import_ids(&self) -> Vec<i64> {
        self.manifests.keys().copied().collect()
    }
}
