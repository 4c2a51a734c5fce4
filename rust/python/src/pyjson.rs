//! Python-`json`-compatible serialization (`agentledger-bernstein`'s `pyjson`), and the
//! one conversion of its WTF-8 strings to Python `str`: through the `surrogatepass` codec,
//! so lone surrogates round-trip exactly.

use agentledger_bernstein::pyjson;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};

use crate::errors::bernstein_to_py as to_py;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pyjson_dumps, m)?)?;
    m.add_function(wrap_pyfunction!(pyjson_float_repr, m)?)?;
    Ok(())
}

/// Parse JSON text as Python's `json.loads` does and re-serialize it.
/// `mode`: `py-json-v1` (sorted, compact, ASCII), `py-json-unicode` (the same without
/// `ensure_ascii`) or `jcs-v2` (bernstein's RFC 8785).
#[pyfunction]
fn pyjson_dumps<'py>(py: Python<'py>, text: &[u8], mode: &str) -> PyResult<Bound<'py, PyBytes>> {
    let text = std::str::from_utf8(text)
        .map_err(|e| PyValueError::new_err(format!("JSON text is not UTF-8: {e}")))?;
    let value = pyjson::parse(text).map_err(to_py)?.value;
    let mut out = Vec::with_capacity(text.len());
    match mode {
        "py-json-v1" => pyjson::dumps_sorted(&value, true, &mut out),
        "py-json-unicode" => pyjson::dumps_sorted(&value, false, &mut out),
        "jcs-v2" => pyjson::dumps_jcs(&value, &mut out),
        other => return Err(PyValueError::new_err(format!("unknown mode {other:?}"))),
    }
    .map_err(to_py)?;
    Ok(PyBytes::new(py, &out))
}

/// Python's `repr(float)`, computed in Rust (exposed for testing against Python).
#[pyfunction]
fn pyjson_float_repr(x: f64) -> String {
    pyjson::float_repr(x)
}

pub(crate) fn py_text<'py>(py: Python<'py>, wtf8: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    match std::str::from_utf8(wtf8) {
        Ok(s) => Ok(PyString::new(py, s).into_any()),
        Err(_) => Ok(
            PyString::from_object(&PyBytes::new(py, wtf8), "utf-8", "surrogatepass")?.into_any(),
        ),
    }
}

pub(crate) fn opt_text<'py>(py: Python<'py>, wtf8: Option<&[u8]>) -> PyResult<Bound<'py, PyAny>> {
    match wtf8 {
        Some(s) => py_text(py, s),
        None => Ok(py.None().into_bound(py)),
    }
}

/// The value as `json.loads` gives it: an `int` of any size, a `float`, a `str` (lone
/// surrogates kept), lists and dicts.
pub(crate) fn py_object<'py>(
    py: Python<'py>,
    value: &pyjson::PyValue<'_>,
) -> PyResult<Bound<'py, PyAny>> {
    use pyjson::PyValue;
    Ok(match value {
        PyValue::Null => py.None().into_bound(py),
        PyValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        // Python's int of any size, from its decimal text.
        PyValue::Int(digits) => py.get_type::<PyInt>().call1((digits.as_ref(),))?,
        PyValue::Float(x) => PyFloat::new(py, *x).into_any(),
        PyValue::Str(s) => py_text(py, s)?,
        PyValue::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(py_object(py, item)?)?;
            }
            list.into_any()
        }
        PyValue::Object(members) => {
            let dict = PyDict::new(py);
            for (key, item) in members {
                dict.set_item(py_text(py, key)?, py_object(py, item)?)?;
            }
            dict.into_any()
        }
    })
}
