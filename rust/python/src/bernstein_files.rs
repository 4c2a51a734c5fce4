//! The ledger's table of imported bernstein files (`bernstein_files`), read once by Rust
//! through apsw's connection: each import's manifest as `importer.manifest_of` writes it,
//! the import ids present, the files whose blob is absent, and the store index. One scan
//! in path order instead of one per use.

use std::collections::BTreeMap;

use agentledger_core::hash::{to_hex_prefixed, Sha256Hasher, SHA256_PREFIX};
use agentledger_core::pyjson::{self, journal};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::pools::drop_later;
use crate::pyjson::BernsteinStoreIndex;
use crate::sqlite::{Connection, Failure};

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

impl Drop for BernsteinFiles {
    fn drop(&mut self) {
        drop_later(std::mem::take(&mut self.manifests));
    }
}

impl BernsteinFiles {
    /// The manifest's bytes, in pieces: the rows, then the format.
    fn manifest_parts(&self, import_id: i64) -> [&[u8]; 2] {
        let files = self.manifests.get(&import_id).map_or(FILES, Vec::as_slice);
        [files, &self.closing]
    }
}

/// Whether a `bernstein_files` row with a digest is in the store index, and its key in
/// `key`: a `cas` file whose name, the path after its first `name_from` characters, has no
/// `/` (a plain name in the flat store), keyed by `sha256:` + that name. Characters are
/// counted as SQLite's `substr` counts them, so that the index matches what SQL selects.
pub(crate) fn store_key(path: &[u8], kind: &[u8], name_from: usize, key: &mut Vec<u8>) -> bool {
    if kind != b"cas" {
        return false;
    }
    let mut at = 0;
    for _ in 0..name_from {
        // SQLite's SQLITE_SKIP_UTF8: a lead byte takes its continuation bytes with it.
        let Some(&lead) = path.get(at) else { break };
        at += 1;
        if lead >= 0xC0 {
            while path.get(at).is_some_and(|&b| b & 0xC0 == 0x80) {
                at += 1;
            }
        }
    }
    let name = &path[at..];
    if name.contains(&b'/') {
        return false;
    }
    key.clear();
    key.extend_from_slice(SHA256_PREFIX.as_bytes());
    key.extend_from_slice(name);
    true
}

#[pymethods]
impl BernsteinFiles {
    /// Scan the rows `sql` selects, in path order: `path, kind, digest,
    /// import_id, blob absent (0/1)`. A store name starts after `name_from` characters
    /// of a path (see [`store_key`]).
    #[new]
    fn new(
        py: Python<'_>,
        connection: usize,
        sql: &str,
        format: String,
        name_from: usize,
    ) -> PyResult<Self> {
        let connection = Connection::from_pointer(connection)?;
        let scanned = py.allow_threads(move || -> Result<_, Failure> {
            let held = connection.lock();
            let mut statement = connection.prepare(sql)?;
            statement.start(&[])?;
            let mut manifests: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
            let mut absent = Vec::new();
            let mut index = journal::StoreIndex::default();
            let mut key = Vec::new();
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
                let (path, kind) = (
                    statement.bytes_held(&held, 0),
                    statement.bytes_held(&held, 1),
                );
                if !statement.is_null(2) && store_key(path, kind, name_from, &mut key) {
                    index.insert(&key, statement.bytes_held(&held, 2));
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
