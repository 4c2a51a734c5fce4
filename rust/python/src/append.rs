//! The journal's write path: a batch of entries of one run encoded, chained, inserted and
//! added to the workspace log in one call, through the caller's apsw connection and inside
//! its transaction (`sqlite.rs`), returned as the caller's `Entry` objects.
//!
//! The GIL is held throughout: bodies are read from Python objects, and while it is held no
//! other thread can close or use the apsw connection under the statements.

use agentledger_core::journal::{self, log_leaf};
use agentledger_core::merkle::{HashAlg, IncrementalTree};
use agentledger_core::Error;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString, PyType};
use pyo3::{ffi, intern};

use crate::errors::to_py;
use crate::journal::{canonical_bodies, frontier_nodes};
use crate::rows_table::{self, Rows};
use crate::sqlite::{Connection, Failure, Value};

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
);

/// Insert `items` (`(kind, body)`) as entries `first_seq..` of `run_id`, chained from
/// `prev`, as the next leaves of the log whose state is `(log_size, log_frontier)`.
///
/// Returns `(entries, last entry's hash, log size, log frontier)`, the entries as instances
/// of `entry_type` (`journal.Entry`). A body without a canonical form raises
/// `CanonicalizationError` before anything is written; an SQLite failure raises
/// `SqliteError`, possibly after some rows were inserted: the caller's transaction is then
/// rolled back.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn append_entries<'py>(
    py: Python<'py>,
    connection: usize,
    entry_type: &Bound<'py, PyType>,
    run_id: &Bound<'py, PyString>,
    first_seq: u64,
    prev: &Bound<'py, PyString>,
    ts: &Bound<'py, PyString>,
    items: Vec<(Bound<'py, PyString>, Bound<'py, PyAny>)>,
    log_size: u64,
    log_frontier: Vec<Bound<'py, PyBytes>>,
) -> PyResult<AppendTuple<'py>> {
    let kinds: Vec<&str> = items
        .iter()
        .map(|(kind, _)| kind.to_str())
        .collect::<PyResult<_>>()?;
    let bodies = canonical_bodies(kinds.into_iter().zip(items.iter().map(|(_, body)| body)))?;
    let alg = HashAlg::Blake3;
    let mut log = IncrementalTree::from_state(alg, log_size, frontier_nodes(&log_frontier)?)
        .map_err(to_py)?;
    let run = run_id.to_str()?;
    let encoded = journal::encode_chain(run, first_seq, prev.to_str()?, ts.to_str()?, &bodies);

    let mut rows = Vec::with_capacity(encoded.len() * COLUMNS);
    for (seq, ((kind, _), (bytes, digest))) in (first_seq..).zip(bodies.iter().zip(&encoded)) {
        let seq = i64::try_from(seq).map_err(|_| out_of_range("seq", seq))?;
        let leaf = i64::try_from(log.size()).map_err(|_| out_of_range("leaf", log.size()))?;
        rows.extend([
            Value::Text(run),
            Value::Int(seq),
            Value::Text(kind),
            Value::Blob(digest),
            Value::Blob(bytes),
            Value::Int(leaf),
        ]);
        log.append_leaf_hash(alg.leaf_hash(&log_leaf(run, seq, digest)))
            .map_err(to_py)?;
    }
    insert(&Connection::from_pointer(connection)?, &rows)?;

    let entries = PyList::empty(py);
    let new = entry_type.getattr(intern!(py, "__new__"))?;
    let mut prev = prev.clone();
    for (seq, ((kind, body), (bytes, digest))) in (first_seq..).zip(items.iter().zip(&encoded)) {
        let hash = PyString::new(py, &journal::prefixed_hex(digest));
        let seq = PyInt::new(py, seq);
        let raw = PyBytes::new(py, bytes);
        let entry = new.call1((entry_type,))?;
        let fields = [
            (intern!(py, "run_id"), run_id.as_any()),
            (intern!(py, "seq"), seq.as_any()),
            (intern!(py, "kind"), kind.as_any()),
            (intern!(py, "hash"), hash.as_any()),
            (intern!(py, "prev"), prev.as_any()),
            (intern!(py, "ts"), ts.as_any()),
            (intern!(py, "body"), body),
            (intern!(py, "raw"), raw.as_any()),
        ];
        for (name, value) in fields {
            set_field(&entry, name, value)?;
        }
        entries.append(entry)?;
        prev = hash;
    }
    let head = encoded.last().map_or(&[][..], |(_, digest)| &digest[..]);
    let frontier = log.frontier().iter().map(|n| PyBytes::new(py, n)).collect();
    Ok((entries, PyBytes::new(py, head), log.size(), frontier))
}

/// Set a field of a new `Entry` as its frozen dataclass `__init__` does
/// (`object.__setattr__`), without the eight Python-level calls that would cost more than
/// the rest of an append.
fn set_field(
    entry: &Bound<'_, PyAny>,
    name: &Bound<'_, PyString>,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    // SAFETY: live objects and the GIL held.
    let code =
        unsafe { ffi::PyObject_GenericSetAttr(entry.as_ptr(), name.as_ptr(), value.as_ptr()) };
    if code == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(entry.py()))
    }
}

/// Insert `rows` with one statement: see `rows_table.rs` for why not one per row.
fn insert(connection: &Connection, rows: &[Value<'_>]) -> Result<(), Failure> {
    rows_table::register(connection)?;
    let rows = Rows::new(COLUMNS, rows);
    connection.prepare(INSERT)?.execute(&[Value::Rows(&rows)])
}

fn out_of_range(what: &str, value: u64) -> PyErr {
    to_py(Error::invalid(format!(
        "{what} {value} is past what SQLite stores"
    )))
}
