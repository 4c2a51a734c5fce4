//! The one way a connection enters `_core`: the `apsw.Connection` object itself, never
//! an integer. Taking it checks what an integer could not say: that it is an apsw
//! connection, that it is open, that the host SQLite is bound, and that no other thread
//! is using it.
//!
//! Why a call may use the `sqlite3*` inside until it returns:
//! - the object is an argument of the call, referenced by the caller until it returns, so
//!   it is not freed;
//! - the pointer is read with the GIL held through `apsw.Connection.sqlite3_pointer` of the
//!   base class (a subclass cannot answer with another integer), which refuses a closed
//!   connection;
//! - its mutex is then taken (a try, as apsw does: blocking on it with the GIL held could
//!   deadlock with a pass that holds it and waits for the GIL), and held while the GIL is:
//!   apsw refuses, with `ThreadingViolationError`, any use of a connection whose mutex another
//!   thread holds, `close` included;
//! - a call that lets the GIL go first prepares its statements: SQLite's `sqlite3_close`,
//!   which apsw's `close` calls, leaves a connection open (`SQLITE_BUSY`) while a statement
//!   of it is unfinalized.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

use super::{sqlite_bound, Connection, Held};

static CONNECTION_TYPE: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static THREADING_VIOLATION: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// An open apsw connection, its mutex held by this thread until dropped (see the module).
pub struct ApswConnection<'py> {
    connection: Connection,
    _held: Held,
    _object: Bound<'py, PyAny>,
}

impl<'py> FromPyObject<'py> for ApswConnection<'py> {
    fn extract_bound(object: &Bound<'py, PyAny>) -> PyResult<Self> {
        let py = object.py();
        let connection_type = CONNECTION_TYPE.import(py, "apsw", "Connection")?;
        if !object.is_instance(connection_type)? {
            return Err(PyTypeError::new_err(format!(
                "expected an apsw.Connection, not {}",
                object.get_type().name()?
            )));
        }
        if !sqlite_bound() {
            return Err(PyRuntimeError::new_err(
                "the host SQLite is not bound (storage/native.py binds it)",
            ));
        }
        // Raises apsw.ConnectionClosedError for a closed connection.
        let pointer: usize = connection_type
            .getattr("sqlite3_pointer")?
            .call1((object,))?
            .extract()?;
        if pointer == 0 {
            return Err(PyRuntimeError::new_err("apsw gave a null SQLite handle"));
        }
        let connection = Connection(pointer as *mut libsqlite3_sys::sqlite3);
        let Some(held) = connection.try_lock() else {
            let violation = THREADING_VIOLATION.import(py, "apsw", "ThreadingViolationError")?;
            return Err(PyErr::from_type(
                violation.clone(),
                "the connection is in use by another thread",
            ));
        };
        Ok(ApswConnection {
            connection,
            _held: held,
            _object: object.clone(),
        })
    }
}

impl ApswConnection<'_> {
    /// The connection, its mutex held by this thread.
    pub fn connection(&self) -> Connection {
        self.connection
    }

    /// Let the mutex go, for a pass that lets the GIL go and takes the mutex on its own
    /// threads: prepare its statements first (they keep the connection open).
    pub fn release(self) -> Connection {
        self.connection
    }
}
