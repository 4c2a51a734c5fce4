//! Journal encoding and batch verification. Rows cross the boundary as plain tuples of
//! str/int/bytes, are copied into Rust memory, and are verified with the GIL released.

use std::ops::{Range, RangeBounds};

use agentledger_core::journal;
use agentledger_core::log::{self, LogRow};
use agentledger_core::merkle::{Hash, HashAlg, IncrementalTree};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::canonical::write_py;
use crate::errors::to_py;
use crate::pools::{drop_later, pool};
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
    m.add_class::<LoggedRows>()?;
    m.add("MAX_FINDINGS_PER_RUN", journal::MAX_FINDINGS_PER_RUN)?;
    m.add("MAX_ENTRY_BYTES", journal::MAX_ENTRY_BYTES)?;
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
        let mut rows = LeafRows::default();
        while statement.step().map_err(PyErr::from)? {
            let run_id = statement.bytes_held(reading.held(), 1);
            let hash = statement.bytes_held(reading.held(), 3);
            let read = run_id.len() + hash.len() + 16;
            rows.push(statement.int(0), run_id, statement.int(2), hash);
            reading.count(read)?;
        }
        drop(reading);
        Ok::<_, PyErr>(rows.rebuild(..))
    })?;
    Ok(log_tuple(py, &tree, gap))
}

/// Log rows held in one buffer: each row's leaf and seq, and where its run id (as UTF-8,
/// invalid bytes replaced as `from_utf8_lossy` does) and stored hash are in `bytes`. A
/// million rows are two allocations, not two million.
#[derive(Default)]
pub struct LeafRows {
    bytes: Vec<u8>,
    rows: Vec<LeafAt>,
}

struct LeafAt {
    leaf: i64,
    seq: i64,
    run_id: Range<usize>,
    hash: Range<usize>,
}

/// One row of [`LeafRows`], borrowed.
struct LeafRef<'a> {
    leaf: i64,
    run_id: &'a str,
    seq: i64,
    hash: &'a [u8],
}

impl log::LeafRow for LeafRef<'_> {
    fn leaf(&self) -> i64 {
        self.leaf
    }
    fn entry(&self) -> (&str, i64, &[u8]) {
        (self.run_id, self.seq, self.hash)
    }
}

impl LeafRows {
    pub fn push(&mut self, leaf: i64, run_id: &[u8], seq: i64, hash: &[u8]) {
        let start = self.bytes.len();
        match std::str::from_utf8(run_id) {
            Ok(text) => self.bytes.extend_from_slice(text.as_bytes()),
            Err(_) => self
                .bytes
                .extend_from_slice(String::from_utf8_lossy(run_id).as_bytes()),
        }
        let middle = self.bytes.len();
        self.bytes.extend_from_slice(hash);
        self.rows.push(LeafAt {
            leaf,
            seq,
            run_id: start..middle,
            hash: middle..self.bytes.len(),
        });
    }

    /// The log rebuilt from the empty tree out of the rows whose leaf is in `wanted` (read
    /// in any order): sorted by leaf, stably (of two rows at one leaf, the first read is
    /// the one kept).
    fn rebuild(&self, wanted: impl RangeBounds<i64>) -> (IncrementalTree, Option<log::LeafGap>) {
        let mut rows: Vec<LeafRef<'_>> = self
            .rows
            .iter()
            .filter(|row| wanted.contains(&row.leaf))
            .map(|row| LeafRef {
                leaf: row.leaf,
                // Stored from a `str` by `push`.
                run_id: std::str::from_utf8(&self.bytes[row.run_id.clone()]).unwrap_or_default(),
                seq: row.seq,
                hash: &self.bytes[row.hash.clone()],
            })
            .collect();
        rows.sort_by_key(|row| row.leaf);
        let mut tree = IncrementalTree::new(log::LOG_ALG);
        let gap = log::extend_log(&mut tree, &rows);
        (tree, gap)
    }
}

/// The `(leaf, run_id, seq, hash)` of every logged row of `entries`, as a read of the
/// table itself found them (`check_indexes`, for a verify of named runs or
/// `--incremental`): the log that verify proves is rebuilt from them instead of a second
/// read of the table.
#[pyclass(frozen, module = "agentledger._core")]
pub struct LoggedRows(pub LeafRows);

#[pymethods]
impl LoggedRows {
    /// `log_rebuild` over the rows whose leaf is in `0..size`: the same answer.
    fn rebuild<'py>(&self, py: Python<'py>, size: i64) -> LogExtendTuple<'py> {
        let (tree, gap) = py.allow_threads(|| self.0.rebuild(0..size));
        log_tuple(py, &tree, gap)
    }

    fn __len__(&self) -> usize {
        self.0.rows.len()
    }
}

impl Drop for LoggedRows {
    fn drop(&mut self) {
        drop_later(std::mem::take(&mut self.0));
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
