//! The journal's write path: a batch of entries of one run encoded, chained, inserted and
//! added to the workspace log in one call, through the caller's apsw connection and inside
//! its transaction (`sqlite.rs`), and handed back as `Entry` values (`entry.rs`).
//!
//! The GIL is held throughout: bodies are read from Python objects, and while it is held no
//! other thread can close or use the apsw connection under the statement.

use agentledger_core::journal;
use agentledger_core::log::LOG_ALG;
use agentledger_core::merkle::IncrementalTree;
use agentledger_core::Error;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString};

use crate::entry::Entry;
use crate::errors::to_py;
use crate::journal::{canonical_bodies, frontier_nodes};
use crate::rows_table::{self, Rows};
use crate::sqlite::{Connection, Value};

/// One statement for the whole batch (`rows_table.rs` says why).
const INSERT: &str = "INSERT INTO entries (run_id, seq, kind, hash, bytes, leaf) \
                      SELECT c0, c1, c2, c3, c4, c5 FROM agentledger_rows(?)";
const COLUMNS: usize = 6;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(append_entries, m)?)?;
    Ok(())
}

type AppendTuple<'py> = (
    Bound<'py, PyList>,
    Bound<'py, PyBytes>,
    u64,
    Vec<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
);

/// Insert `items` (`(kind, body)`) as entries `first_seq..` of `run_id`, chained from
/// `prev`, as the next leaves of the log whose state is `(log_size, log_frontier)`.
///
/// Returns `(entries, last entry's hash, log size, log frontier, leaf hashes)`, the entries
/// as `Entry` values (`entry.rs`), the leaf hashes (32 bytes each, in leaf
/// order) for the log's tiles. A body without a canonical form raises
/// `CanonicalizationError` before anything is written; an SQLite failure raises
/// `SqliteError` (the statement's rows are undone, and the caller rolls back).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn append_entries<'py>(
    py: Python<'py>,
    connection: usize,
    run_id: &Bound<'py, PyString>,
    first_seq: u64,
    prev: &Bound<'py, PyString>,
    ts: &Bound<'py, PyString>,
    items: Vec<(Bound<'py, PyString>, Bound<'py, PyAny>)>,
    log_size: u64,
    log_frontier: Vec<Bound<'py, PyBytes>>,
) -> PyResult<AppendTuple<'py>> {
    let kinds = items
        .iter()
        .map(|(kind, _)| kind.to_str())
        .collect::<PyResult<Vec<_>>>()?;
    let bodies = canonical_bodies(kinds.into_iter().zip(items.iter().map(|(_, body)| body)))?;
    let run = run_id.to_str()?;
    let encoded = journal::encode_chain(run, first_seq, prev.to_str()?, ts.to_str()?, &bodies);

    let mut log = IncrementalTree::from_state(LOG_ALG, log_size, frontier_nodes(&log_frontier)?)
        .map_err(to_py)?;
    let seqs = (first_seq..)
        .take(encoded.len())
        .map(|seq| i64::try_from(seq).map_err(|_| out_of_range("seq", seq)))
        .collect::<PyResult<Vec<i64>>>()?;
    let leaf_hashes = agentledger_core::log::log_leaf_hashes(
        seqs.iter()
            .zip(&encoded)
            .map(|(&seq, (_, digest))| (run, seq, &digest[..])),
    );
    let mut values = Vec::with_capacity(encoded.len() * COLUMNS);
    let mut leaf_bytes = Vec::with_capacity(encoded.len() * 32);
    for ((&seq, (kind, _)), ((bytes, digest), leaf_hash)) in seqs
        .iter()
        .zip(&bodies)
        .zip(encoded.iter().zip(leaf_hashes))
    {
        let leaf = i64::try_from(log.size()).map_err(|_| out_of_range("leaf", log.size()))?;
        values.extend([
            Value::Text(run),
            Value::Int(seq),
            Value::Text(kind),
            Value::Blob(digest),
            Value::Blob(bytes),
            Value::Int(leaf),
        ]);
        leaf_bytes.extend_from_slice(&leaf_hash);
        log.append_leaf_hash(leaf_hash).map_err(to_py)?;
    }
    // SAFETY: `connection` is `storage/native.handle(conn)` of the caller's open apsw
    // connection, used only during this call, with the GIL held (from_pointer's contract).
    let connection = unsafe { Connection::from_pointer(connection)? };
    let rows = Rows::new(COLUMNS, &values);
    rows_table::prepare(&connection, INSERT)?.execute(&[Value::Rows(&rows)])?;

    // The entries hold only what they were made from here (strings, ints, the encoded
    // bytes): never a caller's body object, which the caller may change afterwards.
    let entries = PyList::empty(py);
    let mut prev = prev.clone().into_any().unbind();
    for (seq, ((kind, _), (bytes, digest))) in (first_seq..).zip(items.iter().zip(&encoded)) {
        let hash = PyString::new(py, &journal::prefixed_hex(digest))
            .into_any()
            .unbind();
        let entry = Entry::stored(
            run_id.clone().into_any().unbind(),
            PyInt::new(py, seq).into_any().unbind(),
            kind.clone().into_any().unbind(),
            hash.clone_ref(py),
            prev,
            ts.clone().into_any().unbind(),
            PyBytes::new(py, bytes).into_any().unbind(),
        );
        entries.append(Bound::new(py, entry)?)?;
        prev = hash;
    }
    let head = encoded.last().map_or(&[][..], |(_, digest)| &digest[..]);
    let frontier = log.frontier().iter().map(|n| PyBytes::new(py, n)).collect();
    Ok((
        entries,
        PyBytes::new(py, head),
        log.size(),
        frontier,
        PyBytes::new(py, &leaf_bytes),
    ))
}

fn out_of_range(what: &str, value: u64) -> PyErr {
    to_py(Error::invalid(format!(
        "{what} {value} is past what SQLite stores"
    )))
}
