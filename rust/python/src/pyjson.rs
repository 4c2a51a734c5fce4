//! Python-`json`-compatible serialization and bernstein's journal verification.
//!
//! `bernstein_verify_journals` copies every journal into Rust memory, then verifies them
//! in parallel with the GIL released; the results become plain dicts afterwards.
//! Strings that may hold lone surrogates (WTF-8 in the core) become Python `str` through
//! the `surrogatepass` codec, so they round-trip exactly.

use std::collections::HashMap;

use agentledger_bernstein::{audit, journal, pyjson};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::bernstein_files::store_key;
use crate::errors::to_py;
use crate::pools::{drop_later, pool};
use crate::sqlite::{Connection, Failure};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pyjson_dumps, m)?)?;
    m.add_function(wrap_pyfunction!(pyjson_float_repr, m)?)?;
    m.add_function(wrap_pyfunction!(bernstein_verify_journals, m)?)?;
    m.add_function(wrap_pyfunction!(sha256_hex_many, m)?)?;
    m.add_function(wrap_pyfunction!(bernstein_audit_clean, m)?)?;
    m.add_class::<BernsteinStoreIndex>()?;
    m.add_class::<BernsteinAuditMirror>()?;
    m.add(
        "AUDITED_FIELDS",
        PyTuple::new(m.py(), audit::AUDITED_FIELDS)?,
    )?;
    Ok(())
}

/// Parse JSON text as Python's `json.loads` does and re-serialize it.
/// `mode`: `py-json-v1` (sorted, compact, ASCII), `py-json-unicode` (the same without
/// `ensure_ascii`) or `jcs-v2` (bernstein's RFC 8785).
#[pyfunction]
fn pyjson_dumps<'py>(py: Python<'py>, text: &[u8], mode: &str) -> PyResult<Bound<'py, PyBytes>> {
    let text = std::str::from_utf8(text)
        .map_err(|e| PyValueError::new_err(format!("JSON text is not UTF-8: {e}")))?;
    let value = pyjson::parse(text).map_err(to_py)?.value;
    let mut out = Vec::with_capacity(text.len());
    match mode {
        "py-json-v1" => pyjson::dumps_sorted(&value, true, &mut out),
        "py-json-unicode" => pyjson::dumps_sorted(&value, false, &mut out),
        "jcs-v2" => pyjson::dumps_jcs(&value, &mut out),
        other => return Err(PyValueError::new_err(format!("unknown mode {other:?}"))),
    }
    .map_err(to_py)?;
    Ok(PyBytes::new(py, &out))
}

/// Python's `repr(float)`, computed in Rust (exposed for testing against Python).
#[pyfunction]
fn pyjson_float_repr(x: f64) -> String {
    pyjson::float_repr(x)
}

pub(crate) fn py_text<'py>(py: Python<'py>, wtf8: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    match std::str::from_utf8(wtf8) {
        Ok(s) => Ok(PyString::new(py, s).into_any()),
        Err(_) => Ok(
            PyString::from_object(&PyBytes::new(py, wtf8), "utf-8", "surrogatepass")?.into_any(),
        ),
    }
}

fn opt_text<'py>(py: Python<'py>, wtf8: Option<&[u8]>) -> PyResult<Bound<'py, PyAny>> {
    match wtf8 {
        Some(s) => py_text(py, s),
        None => Ok(py.None().into_bound(py)),
    }
}

fn activity_dict<'py>(py: Python<'py>, a: &journal::ActivityRow) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("step", a.step)?;
    d.set_item("line", a.line)?;
    d.set_item("event_hash", py_text(py, &a.event_hash)?)?;
    d.set_item("stage_id", py_text(py, &a.stage_id)?)?;
    d.set_item("kind", py_text(py, &a.kind)?)?;
    d.set_item("artifact_hash", py_text(py, &a.artifact_hash)?)?;
    d.set_item("evidence_set_hash", py_text(py, &a.evidence_set_hash)?)?;
    d.set_item("terminal_state", py_text(py, &a.terminal_state)?)?;
    d.set_item("reason_code", py_text(py, &a.reason_code)?)?;
    let observations = PyList::empty(py);
    for (kind, reference, hash) in &a.observations {
        let item = PyTuple::new(
            py,
            [
                py_text(py, kind)?,
                py_text(py, reference)?,
                py_text(py, hash)?,
            ],
        )?;
        observations.append(item)?;
    }
    d.set_item("observations", observations)?;
    match a.reattach {
        journal::Reattach::NotChecked => d.set_item("reattach", py.None())?,
        journal::Reattach::Ok => d.set_item("reattach", ("ok", -1))?,
        journal::Reattach::Missing(i) => d.set_item("reattach", ("missing", i as i64))?,
        journal::Reattach::Mismatch(i) => d.set_item("reattach", ("mismatch", i as i64))?,
        journal::Reattach::Unresolved(i) => d.set_item("reattach", ("unresolved", i as i64))?,
    }
    d.set_item(
        "artifact_stored",
        opt_text(py, a.artifact_stored.as_deref())?,
    )?;
    match &a.recomputed_evidence_set_hash {
        Ok(hash) => {
            d.set_item("recomputed_evidence_set_hash", hash)?;
            d.set_item("recompute_error", py.None())?;
        }
        Err(err) => {
            d.set_item("recomputed_evidence_set_hash", py.None())?;
            d.set_item("recompute_error", err)?;
        }
    }
    Ok(d)
}

fn report_dict<'py>(py: Python<'py>, r: &journal::JournalReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("profile", py_text(py, &r.profile)?)?;
    d.set_item("chain_consistent", r.chain_consistent)?;
    d.set_item("error", &r.error)?;
    d.set_item("crash", &r.crash)?;
    d.set_item("divergent_index", r.divergent_index)?;
    d.set_item("divergent_line", r.divergent_line)?;
    d.set_item("divergent_field", r.divergent_field)?;
    d.set_item("expected_hash", opt_text(py, r.expected_hash.as_deref())?)?;
    d.set_item("actual_hash", opt_text(py, r.actual_hash.as_deref())?)?;
    d.set_item("head", py_text(py, &r.head)?)?;
    d.set_item("count", r.count)?;
    d.set_item("physical_lines", r.physical_lines)?;
    d.set_item("file_sha256", &r.file_sha256)?;
    d.set_item("discarded_lines", r.discarded_lines.clone())?;
    let findings = PyList::empty(py);
    for f in &r.row_findings {
        let item = (
            f.step,
            f.line,
            f.field,
            py_text(py, &f.expected)?,
            py_text(py, &f.actual)?,
        );
        findings.append(item)?;
    }
    d.set_item("row_findings", findings)?;
    d.set_item("row_finding_count", r.row_finding_count)?;
    let activities = PyList::empty(py);
    for a in &r.activities {
        activities.append(activity_dict(py, a)?)?;
    }
    d.set_item("activities", activities)?;
    Ok(d)
}

/// `content hash -> digest of the stored bytes`, built in Rust from the `path, kind,
/// digest` rows of `bernstein_files` that `sql` selects on the connection (no Python object
/// per row; the rows of the index are those `bernstein_files::store_key` keys): handed to
/// `bernstein_verify_journals` and `bernstein_ledger_pass` without conversion.
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
    fn new(py: Python<'_>, connection: usize, sql: &str, name_from: usize) -> PyResult<Self> {
        // SAFETY: `connection` is `storage/native.handle(conn)` of the caller's open apsw
        // connection, used only during this call (from_pointer's contract).
        let connection = unsafe { Connection::from_pointer(connection)? };
        let map = py.allow_threads(move || -> Result<journal::StoreIndex, Failure> {
            let mut statement = connection.prepare(sql)?;
            statement.start(&[])?;
            let mut map = journal::StoreIndex::default();
            let mut key = Vec::new();
            while statement.step()? {
                let (path, kind) = (statement.bytes(0), statement.bytes(1));
                if !statement.is_null(2) && store_key(path, kind, name_from, &mut key) {
                    map.insert(&key, statement.bytes(2));
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

/// Verify bernstein journals (file bytes) in parallel; one report dict per journal.
/// `store` maps content hashes to the digest of the bytes the store holds under them,
/// so observations are reattached here too. The import reads its summaries from these,
/// and the tests' Python reference verifier its journal pass.
#[pyfunction]
#[pyo3(signature = (journals, jobs = 0, store = None))]
fn bernstein_verify_journals<'py>(
    py: Python<'py>,
    journals: Vec<Bound<'py, PyBytes>>,
    jobs: usize,
    store: Option<Bound<'py, PyAny>>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    // A `BernsteinStoreIndex` is used as it is; a dict is converted.
    let (built, converted): (Option<Py<BernsteinStoreIndex>>, Option<journal::StoreIndex>) =
        match store {
            None => (None, None),
            Some(store) => match store.downcast::<BernsteinStoreIndex>() {
                Ok(index) => (Some(index.clone().unbind()), None),
                Err(_) => {
                    let map: HashMap<String, String> = store.extract()?;
                    (None, Some(map.into_iter().collect()))
                }
            },
        };
    // Copy out of the bytes objects (a `Vec<u8>` extraction would go int by int).
    let journals: Vec<Vec<u8>> = journals.iter().map(|b| b.as_bytes().to_vec()).collect();
    let pool = pool(jobs)?;
    let reports = py.allow_threads(|| {
        let store = match (&built, &converted) {
            (Some(index), _) => Some(&index.get().map),
            (None, map) => map.as_ref(),
        };
        pool.install(|| journal::verify_journals(&journals, store))
    });
    reports.iter().map(|r| report_dict(py, r)).collect()
}

/// `"sha256:<hex>"` of each buffer, computed in parallel with the GIL released (bulk
/// re-hashing of imported blobs).
#[pyfunction]
#[pyo3(signature = (items, jobs = 0))]
fn sha256_hex_many(
    py: Python<'_>,
    items: Vec<Bound<'_, PyBytes>>,
    jobs: usize,
) -> PyResult<Vec<String>> {
    use rayon::prelude::*;
    let items: Vec<Vec<u8>> = items.iter().map(|b| b.as_bytes().to_vec()).collect();
    let pool = pool(jobs)?;
    Ok(py.allow_threads(move || {
        pool.install(|| {
            items
                .par_iter()
                .map(|data| agentledger_core::hash::sha256_hex(data))
                .collect()
        })
    }))
}

/// A bernstein audit chain (segments in chain order) that verifies clean, settled in
/// parallel with the GIL released: `(records, mirror)`, the mirror holding its
/// `activity.result` records; or `None` when any line needs the exact walk.
/// `keys`: `(scheme 1 key, scheme 2 key)`; without them the HMACs are not checked.
#[pyfunction]
#[pyo3(signature = (segments, keys = None, jobs = 0))]
fn bernstein_audit_clean<'py>(
    py: Python<'py>,
    segments: Vec<Bound<'py, PyBytes>>,
    keys: Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>,
    jobs: usize,
) -> PyResult<Option<(u64, BernsteinAuditMirror)>> {
    let segments: Vec<Vec<u8>> = segments.iter().map(|b| b.as_bytes().to_vec()).collect();
    let keys: Option<(Vec<u8>, Vec<u8>)> =
        keys.map(|(k1, k2)| (k1.as_bytes().to_vec(), k2.as_bytes().to_vec()));
    let pool = pool(jobs)?;
    let chain = py.allow_threads(|| {
        let views: Vec<&[u8]> = segments.iter().map(Vec::as_slice).collect();
        let keys = keys.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice()));
        pool.install(|| audit::walk_clean(&views, keys))
    });
    Ok(chain.map(|chain| (chain.records, BernsteinAuditMirror::new(chain.activity))))
}

/// `(run_id, journal_index, [(audited name, value)])` of a record walked in Python.
type WalkedRecord = (Vec<u8>, i64, Vec<(String, Vec<u8>)>);

/// A clean audit chain's `activity.result` records, kept in Rust: the ledger pass
/// cross-checks runs with them there, and Python reads them only when it asks.
#[pyclass(frozen, module = "agentledger._core")]
pub(crate) struct BernsteinAuditMirror {
    records: Vec<audit::ActivityRecord>,
    /// Positions in `records`, by `str(details["run_id"])` (`""` when absent).
    by_run: HashMap<Vec<u8>, Vec<usize>>,
}

impl BernsteinAuditMirror {
    fn new(records: Vec<audit::ActivityRecord>) -> Self {
        let mut by_run: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
        for (i, record) in records.iter().enumerate() {
            let run = record.run_id.clone().unwrap_or_default();
            by_run.entry(run).or_default().push(i);
        }
        Self { records, by_run }
    }

    /// The records of `run_id`, in chain order.
    pub(crate) fn of_run(&self, run_id: &[u8]) -> Vec<&audit::ActivityRecord> {
        let positions = self.by_run.get(run_id).map_or(&[][..], Vec::as_slice);
        positions.iter().map(|&i| &self.records[i]).collect()
    }
}

#[pymethods]
impl BernsteinAuditMirror {
    /// The mirror of records walked in Python (a chain `bernstein_audit_clean` would not
    /// settle): `(run_id, journal_index, [(audited name, str(value))])`, strings as WTF-8
    /// bytes, in chain order. Names outside `AUDITED` are ignored.
    #[new]
    fn walked(records: Vec<WalkedRecord>) -> Self {
        let records = records
            .into_iter()
            .enumerate()
            .map(
                |(line, (run_id, journal_index, fields))| audit::ActivityRecord {
                    segment: 0,
                    line: line as u64,
                    run_id: Some(run_id),
                    journal_index,
                    fields: fields
                        .into_iter()
                        .filter_map(|(name, value)| {
                            let name = audit::AUDITED.iter().find(|known| **known == name)?;
                            Some((*name, value))
                        })
                        .collect(),
                },
            )
            .collect();
        Self::new(records)
    }

    /// `(segment, line, run_id, journal_index, {audited name: str(value)})` of each
    /// record in chain order; only those of `run_id` when it is given.
    #[pyo3(signature = (run_id = None))]
    fn records<'py>(
        &self,
        py: Python<'py>,
        run_id: Option<&str>,
    ) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let records = match run_id {
            Some(run_id) => self.of_run(run_id.as_bytes()),
            None => self.records.iter().collect(),
        };
        let mut out = Vec::with_capacity(records.len());
        for record in records {
            let fields = PyDict::new(py);
            for (name, value) in &record.fields {
                fields.set_item(*name, py_text(py, value)?)?;
            }
            let item = (
                record.segment,
                record.line,
                opt_text(py, record.run_id.as_deref())?,
                record.journal_index,
                fields,
            );
            out.push(item.into_pyobject(py)?);
        }
        Ok(out)
    }

    fn __len__(&self) -> usize {
        self.records.len()
    }
}
