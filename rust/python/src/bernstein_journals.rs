//! bernstein's journal pass as Python dicts: the import's summaries of the journals it
//! brings in, and the journal pass of the tests' reference verifier. (Verify itself goes
//! through `bernstein.rs`, whose results are typed.) Also the counts `runs` lists and the
//! lines `show` shows, as the reader verify uses reads them.

use std::collections::HashMap;

use agentledger_bernstein::journal;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::bernstein_files::BernsteinStoreIndex;
use crate::pools::pool;
use crate::pyjson::{opt_text, py_text};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bernstein_verify_journals, m)?)?;
    m.add_function(wrap_pyfunction!(bernstein_journal_summary, m)?)?;
    m.add_function(wrap_pyfunction!(bernstein_journal_lines, m)?)?;
    Ok(())
}

/// `(events, activities, discarded, (start, end) of the last event's line or None)` of
/// one journal, as `view.summarize` counts them (the GIL released).
#[pyfunction]
fn bernstein_journal_summary(
    py: Python<'_>,
    journal: &[u8],
) -> (u64, u64, u64, Option<(usize, usize)>) {
    let summary = py.allow_threads(|| journal::summarize(journal));
    let last = summary.last.map(|range| (range.start, range.end));
    (summary.events, summary.activities, summary.discarded, last)
}

/// `[(physical line, kept, start, end)]` of one journal: every line bernstein's reader
/// does not skip as blank, numbered from 0 as verify's findings number them, with where
/// its bytes lie (`view.read_imported_run` shows them).
#[pyfunction]
fn bernstein_journal_lines(py: Python<'_>, journal: &[u8]) -> Vec<(u64, bool, usize, usize)> {
    py.allow_threads(|| journal::reader_lines(journal))
        .into_iter()
        .map(|line| (line.number, line.kept, line.bytes.start, line.bytes.end))
        .collect()
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
