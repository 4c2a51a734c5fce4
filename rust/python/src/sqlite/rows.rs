//! `sqlite_rows`: a query's rows in one call, the GIL held throughout.
//!
//! apsw lets the GIL go around every row it steps. Alone, that costs nothing; beside a
//! busy Python thread, each row then waits for that thread's switch interval (5 ms) to
//! get the GIL back, so a verify that steps a few thousand rows through apsw takes
//! seconds instead of a fraction of one. Stepping here keeps the GIL: the rows cost what
//! SQLite and the conversions cost, whatever other threads do. For queries whose rows the
//! caller holds in memory anyway (a table of runs, a set of digests), or reads in pages.
//!
//! A [`StatementCache`] keeps a connection's statements prepared from call to call, as
//! apsw's own cache does (preparing costs more than stepping a short statement). Its owner
//! empties it before closing the connection: SQLite does not close a connection under an
//! unfinalized statement (`SQLITE_BUSY`). Dropping the cache finalizes them too.

use pyo3::exceptions::PyUnicodeDecodeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyString, PyTuple};

use std::collections::HashMap;
use std::sync::Mutex;

use super::{ApswConnection, Held, Param, Statement};
use crate::errors::Error;
use agentledger_core::index_agreement::Cell;

/// Every row of `sql` with `params` bound (1-based), on `connection`, as tuples of
/// `int`, `float`, `str`, `bytes` or `None`, as apsw gives them (a text that is not UTF-8
/// raises `UnicodeDecodeError`, as it does there). SQLite's failures raise
/// `_core.SqliteError` (`storage/native.py` turns it into apsw's exception); what a Python
/// callback of the connection raised stops the statement and is raised as it is (the
/// statement bound's progress handler: Ctrl-C, the step budget).
///
/// With `cache` (made for this connection), the statement is taken from it, or prepared,
/// and given back reset after the call.
#[pyfunction]
#[pyo3(signature = (connection, sql, params=Vec::new(), cache=None))]
pub(super) fn sqlite_rows<'py>(
    py: Python<'py>,
    connection: ApswConnection<'py>,
    sql: &str,
    params: Vec<Param>,
    cache: Option<&StatementCache>,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let raised = |failure: Error| PyErr::take(py).unwrap_or_else(|| failure.into());
    let on = connection.connection();
    let held = on.lock();
    let cache = cache.filter(|cache| cache.connection == on.handle() as usize);
    // Taken out while in use: a callback that runs this SQL again meanwhile prepares its own.
    let cached = cache.and_then(|cache| cache.take(sql));
    let mut statement = match cached {
        Some(statement) => statement,
        None => on.prepare(sql).map_err(raised)?,
    };
    statement.start(&params)?;
    let rows = step_all(py, &held, &mut statement, raised)?;
    if let Some(cache) = cache {
        statement.rewind();
        cache.give_back(sql, statement);
    }
    Ok(rows)
}

/// The statement's rows as tuples; `raised` says what a failed step raises.
fn step_all<'py>(
    py: Python<'py>,
    held: &Held,
    statement: &mut Statement,
    raised: impl Fn(Error) -> PyErr,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let columns = statement.columns();
    let mut rows = Vec::new();
    while statement.step().map_err(&raised)? {
        let mut row = Vec::with_capacity(columns);
        for column in 0..columns {
            let at = i32::try_from(column).expect("SQLite counts columns in an int");
            row.push(match statement.cell_held(held, at) {
                Cell::Null => py.None().into_bound(py),
                Cell::Int(n) => PyInt::new(py, n).into_any(),
                Cell::Real(x) => PyFloat::new(py, x).into_any(),
                Cell::Text(text) => text_of(py, text)?,
                Cell::Blob(blob) => PyBytes::new(py, blob).into_any(),
            });
        }
        rows.push(PyTuple::new(py, row)?);
    }
    Ok(rows)
}

/// A text value as a `str`; not UTF-8: the `UnicodeDecodeError` apsw raises.
fn text_of<'py>(py: Python<'py>, text: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    match std::str::from_utf8(text) {
        Ok(text) => Ok(PyString::new(py, text).into_any()),
        Err(err) => Err(PyErr::from_value(
            PyUnicodeDecodeError::new_utf8(py, text, err)?.into_any(),
        )),
    }
}

/// At most this many statements are kept per connection (the ledger's hot paths use fewer).
const CACHED: usize = 128;

/// A connection's prepared statements, by SQL (see the module docs).
#[pyclass(frozen, module = "agentledger._core")]
pub struct StatementCache {
    /// The `sqlite3*` they were prepared on: another connection's calls do not use them.
    connection: usize,
    statements: Mutex<HashMap<String, Statement>>,
}

impl StatementCache {
    fn take(&self, sql: &str) -> Option<Statement> {
        self.statements.lock().ok()?.remove(sql)
    }

    fn give_back(&self, sql: &str, statement: Statement) {
        if let Ok(mut statements) = self.statements.lock() {
            if statements.len() < CACHED {
                statements.insert(sql.to_owned(), statement);
            }
        }
    }
}

#[pymethods]
impl StatementCache {
    #[new]
    fn new(connection: ApswConnection<'_>) -> Self {
        StatementCache {
            connection: connection.connection().handle() as usize,
            statements: Mutex::new(HashMap::new()),
        }
    }

    /// Finalize every statement kept (before the connection is closed).
    fn clear(&self, connection: ApswConnection<'_>) {
        let _held = connection.connection().lock();
        if let Ok(mut statements) = self.statements.lock() {
            statements.clear();
        }
    }
}
