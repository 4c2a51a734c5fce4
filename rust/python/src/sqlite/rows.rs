//! `sqlite_rows`: a query's rows in one call, the GIL held throughout.
//!
//! apsw lets the GIL go around every row it steps. Alone, that costs nothing; beside a
//! busy Python thread, each row then waits for that thread's switch interval (5 ms) to
//! get the GIL back, so a verify that steps a few thousand rows through apsw takes
//! seconds instead of a fraction of one. Stepping here keeps the GIL: the rows cost what
//! SQLite and the conversions cost, whatever other threads do. For queries whose rows the
//! caller holds in memory anyway (a table of runs, a set of digests), or reads in pages.

use pyo3::exceptions::PyUnicodeDecodeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use super::{ApswConnection, Param};
use crate::errors::Error;
use agentledger_core::index_agreement::Cell;

/// Every row of `sql` with `params` bound (1-based), on `connection`, as tuples of
/// `int`, `float`, `str`, `bytes` or `None`, as apsw gives them (a text that is not UTF-8
/// raises `UnicodeDecodeError`, as it does there). SQLite's failures raise
/// `_core.SqliteError` (`storage/native.py` turns it into apsw's exception); what a Python
/// callback of the connection raised stops the statement and is raised as it is (the
/// statement bound's progress handler: Ctrl-C, the step budget).
#[pyfunction]
#[pyo3(signature = (connection, sql, params=Vec::new()))]
pub(super) fn sqlite_rows<'py>(
    py: Python<'py>,
    connection: ApswConnection<'py>,
    sql: &str,
    params: Vec<Param>,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let raised = |failure: Error| PyErr::take(py).unwrap_or_else(|| failure.into());
    let on = connection.connection();
    let held = on.lock();
    let mut statement = on.prepare(sql).map_err(raised)?;
    statement.start(&params)?;
    let columns = statement.columns();
    let mut rows = Vec::new();
    while statement.step().map_err(raised)? {
        let mut row = Vec::with_capacity(columns);
        for column in 0..columns {
            let at = i32::try_from(column).expect("SQLite counts columns in an int");
            row.push(match statement.cell_held(&held, at) {
                Cell::Null => py.None().into_bound(py),
                Cell::Int(n) => n.into_pyobject(py)?.into_any(),
                Cell::Real(x) => x.into_pyobject(py)?.into_any(),
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
