//! The single place where the crates' errors become Python exceptions.

use agentledger_core::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    _core,
    CanonicalizationError,
    PyValueError,
    "A value or JSON text that has no RFC 8785 canonical form."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "CanonicalizationError",
        m.py().get_type::<CanonicalizationError>(),
    )?;
    Ok(())
}

/// Convert a core error into the Python exception that stands for it.
pub fn to_py(err: Error) -> PyErr {
    match err {
        Error::Canonicalization { .. } => CanonicalizationError::new_err(err.to_string()),
        Error::InvalidArgument(_) => PyValueError::new_err(err.to_string()),
    }
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
