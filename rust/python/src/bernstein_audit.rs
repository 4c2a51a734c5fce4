//! bernstein's HMAC audit chain: the crate's walk (`audit::walk`) with the GIL released,
//! its result as plain values, and the `activity.result` records the workdir verify
//! cross-checks runs with.

use std::collections::HashMap;

use agentledger_bernstein::audit::{self, AuditWalk, Walked};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::pools::pool;
use crate::pyjson::{opt_text, py_object, py_text};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bernstein_audit_walk, m)?)?;
    m.add_function(wrap_pyfunction!(bernstein_canonical_records, m)?)?;
    m.add_class::<BernsteinAuditWalk>()?;
    m.add_class::<BernsteinAuditMirror>()?;
    m.add(
        "AUDITED_FIELDS",
        PyTuple::new(m.py(), audit::AUDITED_FIELDS)?,
    )?;
    Ok(())
}

/// Walk a bernstein audit chain (its segments in chain order) in parallel, the GIL
/// released. `keys`: `(scheme 1 key, scheme 2 key)`; without them the HMACs are not
/// checked.
#[pyfunction]
#[pyo3(signature = (segments, keys = None, jobs = 0))]
fn bernstein_audit_walk(
    py: Python<'_>,
    segments: Vec<Bound<'_, PyBytes>>,
    keys: Option<(Vec<u8>, Vec<u8>)>,
    jobs: usize,
) -> PyResult<BernsteinAuditWalk> {
    let views: Vec<&[u8]> = segments.iter().map(|b| b.as_bytes()).collect();
    let pool = pool(jobs)?;
    let walk = py.allow_threads(|| pool.install(|| walk_segments(&views, keys.as_ref())));
    Ok(BernsteinAuditWalk(walk))
}

/// How many records, and the first one's line as `(start, end)`.
type CountedRecords = (u64, Option<(usize, usize)>);

/// The records of one audit segment that a checkpoint counts
/// (`checkpoints.canonical_records`), checked in parallel with the GIL released:
/// `(records, (start, end) of the first one's line)`, or `None` where a line nests so
/// deeply that only Python can say what Python does (ask the reference then).
#[pyfunction]
#[pyo3(signature = (segment, jobs = 0))]
fn bernstein_canonical_records(
    py: Python<'_>,
    segment: &[u8],
    jobs: usize,
) -> PyResult<Option<CountedRecords>> {
    let pool = pool(jobs)?;
    let counted = py.allow_threads(|| pool.install(|| audit::canonical_records(segment)));
    Ok(counted.map(|c| (c.records, c.first.map(|r| (r.start, r.end)))))
}

/// The crate's walk, keys borrowed (on the current pool).
pub(crate) fn walk_segments(segments: &[&[u8]], keys: Option<&(Vec<u8>, Vec<u8>)>) -> AuditWalk {
    let keys = keys.map(|(a, b)| (a.as_slice(), b.as_slice()));
    audit::walk(segments, keys)
}

/// What the walk of an audit chain found, read as plain values.
#[pyclass(frozen, module = "agentledger._core")]
pub(crate) struct BernsteinAuditWalk(pub(crate) AuditWalk);

#[pymethods]
impl BernsteinAuditWalk {
    /// Lines that parsed as a JSON object.
    #[getter]
    fn records(&self) -> u64 {
        self.0.records
    }

    /// `(segment index, line, reason, run_id or None)` of each problem, in chain order
    /// (line -1: the segment's missing trailing newline).
    #[getter]
    fn problems<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        self.0
            .problems
            .iter()
            .map(|p| {
                let run_id = opt_text(py, p.run_id.as_deref())?;
                (p.segment, p.line, p.reason, run_id).into_pyobject(py)
            })
            .collect()
    }

    /// `(segment index, line, run_id or None, journal_index, {audited name: str(value)})`
    /// of each `activity.result` record, in chain order; `journal_index` as parsed (any
    /// JSON value, `None` when absent).
    #[getter]
    fn walked<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        walked(py, self.0.walked.iter())
    }

    /// The same, only for the records whose `journal_index` is not an integer (they
    /// audit no row; verify reports them).
    fn unindexed<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        walked(py, self.0.walked.iter().filter(|r| r.indexed().is_none()))
    }

    /// How many `activity.result` records the walk met of each run (`""` for a record
    /// that names none), as `walked` names them: what a check needing only the runs
    /// reads, without converting every record.
    #[getter]
    fn walked_per_run<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut tally: HashMap<&[u8], u64> = HashMap::new();
        for walked in &self.0.walked {
            let run_id = walked.activity.run_id.as_deref().unwrap_or_default();
            *tally.entry(run_id).or_default() += 1;
        }
        let counts = PyDict::new(py);
        for (run_id, count) in tally {
            counts.set_item(py_text(py, run_id)?, count)?;
        }
        Ok(counts)
    }

    /// Whether the chain mirrors activities (`AuditChain.mirrors_activities`).
    #[getter]
    fn mirrors_activities(&self) -> bool {
        self.0.mirrors_activities()
    }

    fn __repr__(&self) -> String {
        format!(
            "BernsteinAuditWalk(records={}, problems={}, walked={})",
            self.0.records,
            self.0.problems.len(),
            self.0.walked.len()
        )
    }
}

/// Walked records as `(segment, line, run_id, journal_index, {audited name: value})`.
fn walked<'a, 'py>(
    py: Python<'py>,
    records: impl Iterator<Item = &'a Walked>,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let mut out = Vec::new();
    for walked in records {
        let record = &walked.activity;
        let fields = PyDict::new(py);
        for (name, value) in &record.fields {
            fields.set_item(*name, py_text(py, value)?)?;
        }
        let item = (
            record.segment,
            record.line,
            opt_text(py, record.run_id.as_deref())?,
            py_object(py, &walked.journal_index())?,
            fields,
        );
        out.push(item.into_pyobject(py)?);
    }
    Ok(out)
}

/// `(run_id, journal_index, [(audited name, value)])` of a record, for the workdir verify.
type MirroredRecord = (Vec<u8>, i64, Vec<(String, Vec<u8>)>);

/// An audit chain's `activity.result` records, for `bernstein_verify_workdir` (a workdir
/// on disk): given by Python from its walk, plain values.
#[pyclass(frozen, module = "agentledger._core")]
pub(crate) struct BernsteinAuditMirror {
    pub(crate) records: Vec<audit::ActivityRecord>,
}

#[pymethods]
impl BernsteinAuditMirror {
    /// `(run_id, journal_index, [(audited name, str(value))])`, strings as WTF-8 bytes, in
    /// chain order. Names outside `AUDITED` are ignored.
    #[new]
    fn new(records: Vec<MirroredRecord>) -> Self {
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
        Self { records }
    }

    fn __len__(&self) -> usize {
        self.records.len()
    }
}
