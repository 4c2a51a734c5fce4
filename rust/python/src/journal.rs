//! Journal encoding and batch verification. Rows cross the boundary as plain tuples of
//! str/int/bytes, are copied into Rust memory, and are verified with the GIL released.

use agentledger_core::journal::{self, Carry, DigestSet, EntryRow};
use agentledger_core::log::{self, LogAssembler as CoreAssembler, LogRow};
use agentledger_core::merkle::{Hash, HashAlg, IncrementalTree};
use memchr::memmem::Finder;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;

use crate::canonical::write_py;
use crate::errors::to_py;
use crate::pools::pool;
use crate::sqlite::{ApswConnection, Param, Reading};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_entries, m)?)?;
    m.add_function(wrap_pyfunction!(genesis_prev, m)?)?;
    m.add_function(wrap_pyfunction!(evidence_set_hash, m)?)?;
    m.add_function(wrap_pyfunction!(entry_hash, m)?)?;
    m.add_function(wrap_pyfunction!(log_leaf, m)?)?;
    m.add_function(wrap_pyfunction!(legacy_log_leaf, m)?)?;
    m.add_function(wrap_pyfunction!(log_extend, m)?)?;
    m.add_function(wrap_pyfunction!(log_rebuild, m)?)?;
    m.add_class::<LogAssembler>()?;
    m.add_class::<JournalScan>()?;
    m.add("MAX_FINDINGS_PER_RUN", journal::MAX_FINDINGS_PER_RUN)?;
    Ok(())
}

/// Canonical bytes and hash of consecutive entries of one run, each chained to the last.
#[pyfunction]
fn encode_entries<'py>(
    py: Python<'py>,
    run_id: &str,
    first_seq: u64,
    prev: &str,
    ts: &str,
    items: Vec<(String, Bound<'py, PyAny>)>,
) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    let bodies = canonical_bodies(items.iter().map(|(kind, body)| (kind.as_str(), body)))?;
    // Wrapped, hashed and chained with the GIL released.
    let run_id = run_id.to_owned();
    let prev = prev.to_owned();
    let ts = ts.to_owned();
    let encoded =
        py.allow_threads(move || journal::encode_chain(&run_id, first_seq, &prev, &ts, &bodies));
    Ok(encoded
        .into_iter()
        .map(|(bytes, digest)| (PyBytes::new(py, &bytes), PyBytes::new(py, &digest)))
        .collect())
}

/// `(kind, body)` items with each body written as canonical JSON straight from the Python
/// objects (at depth 1: it sits inside the entry object), ready for `encode_chain`.
pub(crate) fn canonical_bodies<'a, 'py: 'a, K>(
    items: impl IntoIterator<Item = (K, &'a Bound<'py, PyAny>)>,
) -> PyResult<Vec<(K, Vec<u8>)>> {
    items
        .into_iter()
        .map(|(kind, body)| {
            let mut out = Vec::with_capacity(128);
            write_py(body, &mut out, 1)?;
            Ok((kind, out))
        })
        .collect()
}

type FindingTuple = (String, Option<i64>, String, String, String);
type RunTuple = (String, u64, u64, u64, i64, Vec<u8>);
pub(crate) type BatchTuple = (Vec<FindingTuple>, Vec<RunTuple>, Vec<String>);
pub(crate) fn to_tuples(report: journal::BatchReport) -> BatchTuple {
    let findings = report
        .findings
        .into_iter()
        .map(|f| (f.run_id, f.seq, f.check, f.expected, f.actual))
        .collect();
    let runs = report
        .runs
        .into_iter()
        .map(|r| {
            (
                r.run_id,
                r.entries,
                r.activities,
                r.findings,
                r.last_seq,
                r.last_hash,
            )
        })
        .collect();
    (findings, runs, report.referenced)
}

/// What a whole journal pass gathers for the checks after it, across batches and without
/// a Python object per row: the distinct digests activity results reference, and for
/// each mark `(kinds, needle)` the `(run_id, seq)` of the rows whose kind is one of
/// `kinds` and whose bytes contain `needle` (SQL's `kind IN (...) AND instr(bytes,
/// needle) > 0`), in row order. A mark matching more than `limit` rows stops recording
/// (`marked` is then `None`), so memory stays bounded.
#[pyclass(module = "agentledger._core")]
pub(crate) struct JournalScan {
    marks: Vec<(Vec<String>, Finder<'static>)>,
    limit: usize,
    marked: Vec<Option<Vec<(String, i64)>>>,
    referenced: DigestSet,
}

#[pymethods]
impl JournalScan {
    #[new]
    #[pyo3(signature = (marks, limit = 100_000))]
    fn new(marks: Vec<(Vec<String>, Vec<u8>)>, limit: usize) -> Self {
        let marked = marks.iter().map(|_| Some(Vec::new())).collect();
        let marks = marks
            .into_iter()
            .map(|(kinds, needle)| (kinds, Finder::new(&needle).into_owned()))
            .collect();
        JournalScan {
            marks,
            limit,
            marked,
            referenced: DigestSet::default(),
        }
    }

    /// The rows mark `index` matched, in row order, or `None` past the limit.
    fn marked(&self, index: usize) -> Option<Vec<(String, i64)>> {
        self.marked.get(index).cloned().flatten()
    }

    /// The distinct referenced digests, sorted.
    fn referenced(&self) -> Vec<String> {
        let mut out: Vec<String> = self.referenced.iter().cloned().collect();
        out.sort_unstable();
        out
    }
}

/// Which of `marks` each row matches (bit `i` for mark `i`), computed in parallel.
fn match_rows<R: EntryRow>(marks: &[(Vec<String>, Finder<'static>)], rows: &[R]) -> Vec<u64> {
    if marks.is_empty() {
        return vec![0; rows.len()];
    }
    // Each kind the marks name, with the marks naming it: one lookup per row.
    let mut by_kind: Vec<(&str, u64)> = Vec::new();
    for (i, (kinds, _)) in marks.iter().enumerate().take(64) {
        for kind in kinds {
            match by_kind.iter_mut().find(|(name, _)| name == kind) {
                Some((_, candidates)) => *candidates |= 1 << i,
                None => by_kind.push((kind, 1 << i)),
            }
        }
    }
    rows.par_iter()
        .map(|row| {
            let Some(&(_, mut candidates)) = by_kind.iter().find(|(kind, _)| *kind == row.kind())
            else {
                return 0;
            };
            let mut bits = 0u64;
            while candidates != 0 {
                let i = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if marks[i].1.find(row.bytes()).is_some() {
                    bits |= 1 << i;
                }
            }
            bits
        })
        .collect()
}

impl JournalScan {
    fn record<R: EntryRow>(&mut self, rows: &[R], bits: &[u64]) {
        for (row, &bits) in rows.iter().zip(bits) {
            if bits == 0 {
                continue;
            }
            for (i, slot) in self.marked.iter_mut().enumerate().take(64) {
                if bits & (1 << i) == 0 {
                    continue;
                }
                if let Some(keys) = slot {
                    if keys.len() < self.limit {
                        keys.push((row.run_id().to_owned(), row.seq()));
                    } else {
                        *slot = None;
                    }
                }
            }
        }
    }
}

/// `verify_batch`, and with a scan, its marks matched in parallel with it and the batch's
/// referenced digests kept there rather than returned.
pub(crate) fn verify_and_scan<R: EntryRow>(
    ledger_id: &str,
    carry: Option<&Carry>,
    rows: &[R],
    scan: Option<&mut JournalScan>,
) -> journal::BatchReport {
    match scan {
        None => journal::verify_batch(ledger_id, carry, rows),
        Some(scan) => {
            let JournalScan {
                marks, referenced, ..
            } = scan;
            let (report, bits) = rayon::join(
                || journal::verify_batch_into(ledger_id, carry, rows, referenced),
                || match_rows(marks, rows),
            );
            scan.record(rows, &bits);
            report
        }
    }
}

#[pyfunction]
fn genesis_prev(ledger_id: &str, run_id: &str) -> String {
    journal::genesis_prev(ledger_id, run_id)
}

#[pyfunction]
fn evidence_set_hash(hashes: Vec<String>) -> String {
    journal::evidence_set_hash(hashes.iter().map(String::as_str))
}

#[pyfunction]
fn entry_hash<'py>(py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &journal::entry_hash(data))
}

/// The workspace-log leaf of one entry: its log-leaf document (canonical JSON bytes).
#[pyfunction]
fn log_leaf<'py>(
    py: Python<'py>,
    run_id: &str,
    seq: i64,
    entry_hash: &[u8],
) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &log::log_leaf(run_id, seq, entry_hash))
}

/// The leaf of one entry in the log before schema 6 (BLAKE3 tree, 32 bytes).
#[pyfunction]
fn legacy_log_leaf<'py>(
    py: Python<'py>,
    run_id: &str,
    seq: i64,
    entry_hash: &[u8],
) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &log::legacy_log_leaf(run_id, seq, entry_hash))
}

type LogExtendTuple<'py> = (
    u64,
    Vec<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
    Option<(u64, i64)>,
);

/// Extend the log state `(size, frontier)` with `(leaf, run_id, seq, hash)` rows in leaf
/// order. Returns `(size, frontier, root, gap)`; `gap` is `(expected, found)` for the first
/// row whose leaf index is not the next one (the state then stops before it). `legacy`:
/// the BLAKE3 tree of the log before schema 6 (to check checkpoints signed over it).
#[pyfunction]
#[pyo3(signature = (size, frontier, rows, jobs = 0, legacy = false))]
fn log_extend<'py>(
    py: Python<'py>,
    size: u64,
    frontier: Vec<Bound<'py, PyBytes>>,
    rows: Vec<(i64, String, i64, Bound<'py, PyBytes>)>,
    jobs: usize,
    legacy: bool,
) -> PyResult<LogExtendTuple<'py>> {
    let frontier = frontier_nodes(&frontier)?;
    let alg = if legacy {
        HashAlg::Blake3
    } else {
        log::LOG_ALG
    };
    let mut tree = IncrementalTree::from_state(alg, size, frontier).map_err(to_py)?;
    let rows: Vec<LogRow> = rows
        .into_iter()
        .map(|(leaf, run_id, seq, hash)| LogRow {
            leaf,
            run_id,
            seq,
            hash: hash.as_bytes().to_vec(),
        })
        .collect();
    let pool = pool(jobs)?;
    let (tree, gap) = py.allow_threads(move || {
        let gap = pool.install(|| log::extend_log(&mut tree, &rows));
        (tree, gap)
    });
    Ok(log_tuple(py, &tree, gap))
}

/// `(size, frontier, root, gap)` of a rebuilt or extended tree, for Python.
fn log_tuple<'py>(
    py: Python<'py>,
    tree: &IncrementalTree,
    gap: Option<log::LeafGap>,
) -> LogExtendTuple<'py> {
    let frontier = tree
        .frontier()
        .iter()
        .map(|node| PyBytes::new(py, node))
        .collect();
    let root = PyBytes::new(py, &tree.root());
    (
        tree.size(),
        frontier,
        root,
        gap.map(|g| (g.expected, g.found)),
    )
}

/// The log of the rows `sql` yields on `connection` with `params` (`leaf, run_id, seq,
/// hash`, in any order: the statement can scan the table itself rather than trust an index),
/// sorted by leaf and rebuilt from the empty tree while SQLite is stepped here with the GIL
/// released: `(size, frontier, root, gap)` as `log_extend` gives. The fast path of
/// `log.state_at`, which does the same through Python rows (the tests compare them).
#[pyfunction]
fn log_rebuild<'py>(
    py: Python<'py>,
    connection: ApswConnection<'_>,
    sql: &str,
    params: Vec<Param>,
) -> PyResult<LogExtendTuple<'py>> {
    let mut statement = connection.connection().prepare(sql)?;
    let connection = connection.release();
    let (tree, gap) = py.allow_threads(move || {
        statement.start(&params).map_err(PyErr::from)?;
        let mut reading = Reading::new(connection);
        let mut rows: Vec<LogRow> = Vec::new();
        while statement.step().map_err(PyErr::from)? {
            let run_id = statement.bytes_held(reading.held(), 1);
            let hash = statement.bytes_held(reading.held(), 3);
            let read = run_id.len() + hash.len() + 16;
            rows.push(LogRow {
                leaf: statement.int(0),
                run_id: String::from_utf8_lossy(run_id).into_owned(),
                seq: statement.int(2),
                hash: hash.to_vec(),
            });
            reading.count(read)?;
        }
        drop(reading);
        rows.sort_by_key(|row| row.leaf);
        let mut tree = IncrementalTree::new(log::LOG_ALG);
        let gap = log::extend_log(&mut tree, &rows);
        Ok::<_, PyErr>((tree, gap))
    })?;
    Ok(log_tuple(py, &tree, gap))
}

/// The workspace log rebuilt from the journal pass's own rows (see `verify_journal`).
#[pyclass(module = "agentledger._core")]
pub(crate) struct LogAssembler(pub(crate) CoreAssembler);

#[pymethods]
impl LogAssembler {
    /// Expect leaves `base..limit`; the first `base` are given by their frontier.
    #[new]
    fn new(base: u64, frontier: Vec<Bound<'_, PyBytes>>, limit: u64) -> PyResult<Self> {
        let frontier = frontier_nodes(&frontier)?;
        CoreAssembler::new(log::LOG_ALG, base, frontier, limit)
            .map(LogAssembler)
            .map_err(to_py)
    }

    /// `(size, frontier, root, gap)`: the tree of every leaf added, or `gap` =
    /// `(expected, found)` for the first leaf out of place (missing, repeated, out of range).
    fn finish<'py>(&self, py: Python<'py>) -> LogExtendTuple<'py> {
        let done = self.0.finish();
        let frontier = done
            .frontier
            .iter()
            .map(|node| PyBytes::new(py, node))
            .collect();
        (
            done.size,
            frontier,
            PyBytes::new(py, &done.root),
            done.gap.map(|g| (g.expected, g.found)),
        )
    }
}

pub(crate) fn frontier_nodes(frontier: &[Bound<'_, PyBytes>]) -> PyResult<Vec<Hash>> {
    frontier
        .iter()
        .map(|node| {
            Hash::try_from(node.as_bytes()).map_err(|_| {
                to_py(agentledger_core::Error::invalid(format!(
                    "a frontier node has 32 bytes, got {}",
                    node.as_bytes().len()
                )))
            })
        })
        .collect()
}
