//! RFC 8785 canonical JSON for Python: `canonicalize(value)`, `canonicalize_json(data)`,
//! `MAX_DEPTH`.
//!
//! `canonicalize` walks the Python value and writes canonical bytes directly (no
//! intermediate tree, no copy of strings); `write_py` does the same for other bindings
//! (the journal's entry bodies). They accept exactly these values: `None`, `bool`, `int`
//! within ±(2**53 − 1), finite `float`, `str` without lone surrogates, `list`/`tuple`,
//! and `dict` with `str` keys (subclasses of these included), nested at most
//! `MAX_DEPTH` containers deep. No Python code is called (no `__float__`, `__index__`,
//! `__str__`...), so the bytes depend only on the data.

use std::cmp::Ordering;

use agentledger_core::canonical::{
    self, compare_keys_utf16, write_number, write_string, MAX_DEPTH,
};
use agentledger_core::Error;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::to_py;

/// Inputs at least this large are canonicalized with the GIL released.
const RELEASE_GIL_FROM_BYTES: usize = 16 * 1024;

/// The largest integer magnitude every double represents exactly (I-JSON, RFC 7493 §2.2).
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(canonicalize, m)?)?;
    m.add_function(wrap_pyfunction!(canonicalize_json, m)?)?;
    m.add("MAX_DEPTH", MAX_DEPTH)?;
    Ok(())
}

/// RFC 8785 bytes of a Python value (dict[str, ...], list/tuple, str, int, float, bool, None).
#[pyfunction]
fn canonicalize<'py>(py: Python<'py>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::with_capacity(128);
    write_py(value, &mut out, 0)?;
    Ok(PyBytes::new(py, &out))
}

/// Parse JSON text (numbers as IEEE-754 doubles) and return its RFC 8785 bytes.
///
/// Error positions are byte offsets into `data` (into its UTF-8 encoding for a `str`).
#[pyfunction]
fn canonicalize_json<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    // Both `bytes` and the UTF-8 form of a `str` are immutable and kept alive by `data`,
    // so borrowing them while other threads run is sound.
    let text: &[u8] = if let Ok(bytes) = data.downcast::<PyBytes>() {
        bytes.as_bytes()
    } else if let Ok(string) = data.downcast::<PyString>() {
        str_of(string)?.as_bytes()
    } else {
        return Err(PyTypeError::new_err(format!(
            "canonicalize_json() expects bytes or str, not {}",
            type_name(data)
        )));
    };
    let canonical = if text.len() >= RELEASE_GIL_FROM_BYTES {
        py.allow_threads(|| canonical::canonicalize_json(text))
    } else {
        canonical::canonicalize_json(text)
    }
    .map_err(to_py)?;
    Ok(PyBytes::new(py, &canonical))
}

/// Canonical bytes of a Python value appended to `out`, `depth` containers deep already
/// (the journal writes entry bodies at depth 1). Refuses exactly what `canonicalize` refuses.
pub(crate) fn write_py(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>, depth: usize) -> PyResult<()> {
    match classify(obj)? {
        Kind::Null => out.extend_from_slice(b"null"),
        Kind::Bool(true) => out.extend_from_slice(b"true"),
        Kind::Bool(false) => out.extend_from_slice(b"false"),
        Kind::Int(n) => write_number(n as f64, out).map_err(to_py)?,
        Kind::Float(x) => write_number(x, out).map_err(to_py)?,
        Kind::Str(s) => write_string(str_of(s)?, out),
        Kind::List(list) => {
            check_depth(depth + 1)?;
            out.push(b'[');
            for (i, item) in list.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_py(&item, out, depth + 1)?;
            }
            out.push(b']');
        }
        Kind::Tuple(tuple) => {
            check_depth(depth + 1)?;
            out.push(b'[');
            for (i, item) in tuple.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_py(&item, out, depth + 1)?;
            }
            out.push(b']');
        }
        Kind::Dict(dict) => {
            check_depth(depth + 1)?;
            let entries = dict_entries(dict)?;
            let mut members: Vec<(&str, &Bound<'_, PyAny>)> = Vec::with_capacity(entries.len());
            for (key, item) in &entries {
                members.push((str_of(key)?, item));
            }
            sort_members(&mut members)?;
            out.push(b'{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_py(item, out, depth + 1)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// Sort members by UTF-16 code units; equal keys (possible only with `str` subclasses
/// that override hashing) are refused.
fn sort_members(members: &mut [(&str, &Bound<'_, PyAny>)]) -> PyResult<()> {
    let mut sorted = true;
    for pair in members.windows(2) {
        match compare_keys_utf16(pair[0].0, pair[1].0) {
            Ordering::Less => {}
            Ordering::Equal => return Err(duplicate_key(pair[0].0)),
            Ordering::Greater => {
                sorted = false;
                break;
            }
        }
    }
    if !sorted {
        members.sort_unstable_by(|a, b| compare_keys_utf16(a.0, b.0));
        if let Some(pair) = members.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(duplicate_key(pair[0].0));
        }
    }
    Ok(())
}

/// What a Python value is, as far as JSON is concerned.
enum Kind<'a, 'py> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a Bound<'py, PyString>),
    List(&'a Bound<'py, PyList>),
    Tuple(&'a Bound<'py, PyTuple>),
    Dict(&'a Bound<'py, PyDict>),
}

fn classify<'a, 'py>(obj: &'a Bound<'py, PyAny>) -> PyResult<Kind<'a, 'py>> {
    // Most common first. `bool` is an `int` subclass, so it is tested before `int`.
    if let Ok(s) = obj.downcast::<PyString>() {
        Ok(Kind::Str(s))
    } else if obj.is_none() {
        Ok(Kind::Null)
    } else if let Ok(b) = obj.downcast::<PyBool>() {
        Ok(Kind::Bool(b.is_true()))
    } else if let Ok(n) = obj.downcast::<PyInt>() {
        match n.extract::<i64>() {
            Ok(n) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&n) => Ok(Kind::Int(n)),
            _ => Err(refuse(
                "integer outside ±(2**53 - 1) has no exact JSON number".to_owned(),
            )),
        }
    } else if let Ok(f) = obj.downcast::<PyFloat>() {
        let x = f.value();
        if x.is_finite() {
            Ok(Kind::Float(x))
        } else {
            Err(refuse(format!("{x} has no JSON representation")))
        }
    } else if let Ok(d) = obj.downcast::<PyDict>() {
        Ok(Kind::Dict(d))
    } else if let Ok(l) = obj.downcast::<PyList>() {
        Ok(Kind::List(l))
    } else if let Ok(t) = obj.downcast::<PyTuple>() {
        Ok(Kind::Tuple(t))
    } else {
        Err(refuse(format!(
            "cannot canonicalize a value of type {}",
            type_name(obj)
        )))
    }
}

/// The (key, value) pairs of a dict, keys checked to be `str`. Collected before any
/// recursion so that nothing can change the dict while it is iterated.
fn dict_entries<'py>(
    dict: &Bound<'py, PyDict>,
) -> PyResult<Vec<(Bound<'py, PyString>, Bound<'py, PyAny>)>> {
    let mut entries = Vec::with_capacity(dict.len());
    for (key, item) in dict.iter() {
        let key = key.downcast_into::<PyString>().map_err(|e| {
            refuse(format!(
                "object keys must be str, not {}",
                type_name(e.into_inner().as_any())
            ))
        })?;
        entries.push((key, item));
    }
    Ok(entries)
}

/// The UTF-8 of a `str`; a lone surrogate (which UTF-8 cannot hold) is refused.
fn str_of<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
    s.to_str()
        .map_err(|_| refuse("string contains a lone surrogate (not valid Unicode)".to_owned()))
}

fn check_depth(depth: usize) -> PyResult<()> {
    if depth > MAX_DEPTH {
        Err(refuse(format!(
            "nesting deeper than {MAX_DEPTH} lists/dicts (or a container that contains itself)"
        )))
    } else {
        Ok(())
    }
}

fn duplicate_key(key: &str) -> PyErr {
    refuse(format!("duplicate object key {key:?}"))
}

fn refuse(message: String) -> PyErr {
    to_py(Error::canonical(message))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|name| format!("'{name}'"))
        .unwrap_or_else(|_| "an unknown type".to_owned())
}
