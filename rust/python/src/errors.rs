//! The binding's one error type, and the single place where errors become Python
//! exceptions.

use std::ffi::c_int;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    _core,
    CanonicalizationError,
    PyValueError,
    "A value or JSON text that has no RFC 8785 canonical form."
);

create_exception!(
    _core,
    SqliteError,
    PyRuntimeError,
    "A failure of the host SQLite: args are (result code, message)."
);

create_exception!(
    _core,
    LogDamagedError,
    PyValueError,
    "The stored log is not what it must be (a tile cut short, a hash missing)."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add(
        "CanonicalizationError",
        py.get_type::<CanonicalizationError>(),
    )?;
    m.add("SqliteError", py.get_type::<SqliteError>())?;
    m.add("LogDamagedError", py.get_type::<LogDamagedError>())?;
    Ok(())
}

/// What a call of the binding failed with, before it becomes a Python exception.
#[derive(Debug)]
pub enum Error {
    /// The core's error.
    Core(agentledger_core::Error),
    /// What went wrong, as SQLite said it: `(result code, message)`.
    Sqlite { code: c_int, message: String },
    /// What a Python callable given to the call raised, passed on as it is.
    Python(PyErr),
}

impl From<agentledger_core::Error> for Error {
    fn from(err: agentledger_core::Error) -> Self {
        Error::Core(err)
    }
}

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        use agentledger_core::Error as Core;
        match err {
            Error::Core(err @ Core::Canonicalization { .. }) => {
                CanonicalizationError::new_err(err.to_string())
            }
            Error::Core(err @ Core::InvalidArgument(_)) => PyValueError::new_err(err.to_string()),
            Error::Core(err @ Core::LogDamaged(_)) => LogDamagedError::new_err(err.to_string()),
            Error::Sqlite { code, message } => SqliteError::new_err((code, message)),
            Error::Python(err) => err,
        }
    }
}

/// A core error as the Python exception that stands for it (for `map_err`: `?` cannot
/// convert a core error into a `PyErr` directly).
pub fn to_py(err: agentledger_core::Error) -> PyErr {
    Error::Core(err).into()
}

/// Convert an error of the bernstein crate: the core's as [`to_py`]; what `json.loads`
/// would raise as the `ValueError` (or `RecursionError`) it stands for.
pub fn bernstein_to_py(err: agentledger_bernstein::Error) -> PyErr {
    use agentledger_bernstein::Error as B;
    match err {
        B::Core(err) => to_py(err),
        B::Recursion => pyo3::exceptions::PyRecursionError::new_err(err.to_string()),
        B::JsonDecode(_) | B::UnicodeDecode => PyValueError::new_err(err.to_string()),
    }
}
