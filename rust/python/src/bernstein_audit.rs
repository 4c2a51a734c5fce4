//! bernstein's HMAC audit chain: a chain that verifies clean, settled in Rust, and the
//! `activity.result` records the strict cross-check reads (kept in Rust).

use std::collections::HashMap;

use agentledger_bernstein::audit;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::pools::pool;
use crate::pyjson::{opt_text, py_text};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bernstein_audit_clean, m)?)?;
    m.add_class::<BernsteinAuditMirror>()?;
    m.add(
        "AUDITED_FIELDS",
        PyTuple::new(m.py(), audit::AUDITED_FIELDS)?,
    )?;
    Ok(())
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
