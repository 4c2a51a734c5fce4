//! `Entry`: one journal entry as stored, an immutable value.
//!
//! It holds the entry's canonical bytes (`raw`) and the fields read from them; `body` is
//! parsed from `raw` on each access, so no caller's object is shared with it: mutating the
//! dict passed to an append, or the dict `body` returned, never changes the entry. Two
//! entries are equal when their fields are; an appended entry equals the same entry read
//! back (`Entry.from_row`).

use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyString, PyTuple};
use pyo3::{intern, IntoPyObjectExt};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Entry>()?;
    Ok(())
}

#[pyclass(module = "agentledger._core", frozen)]
pub(crate) struct Entry {
    #[pyo3(get)]
    run_id: PyObject,
    #[pyo3(get)]
    seq: PyObject,
    #[pyo3(get)]
    kind: PyObject,
    #[pyo3(get)]
    hash: PyObject,
    #[pyo3(get)]
    prev: PyObject,
    #[pyo3(get)]
    ts: PyObject,
    #[pyo3(get)]
    raw: PyObject,
    /// A body given to the constructor (an entry whose bytes do not parse, shown as
    /// text): kept as a deep copy, and copied again on each access. `None`: parsed from
    /// `raw`.
    given_body: Option<PyObject>,
}

impl Entry {
    /// An entry made by an append: every field a string, int or bytes the caller cannot
    /// change, the body in `raw` only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn stored(
        run_id: PyObject,
        seq: PyObject,
        kind: PyObject,
        hash: PyObject,
        prev: PyObject,
        ts: PyObject,
        raw: PyObject,
    ) -> Self {
        Entry {
            run_id,
            seq,
            kind,
            hash,
            prev,
            ts,
            raw,
            given_body: None,
        }
    }

    /// Every field but `body`, which `raw` holds unless the constructor was given one.
    fn stored_fields<'py>(&self, py: Python<'py>) -> [&Bound<'py, PyAny>; 7] {
        [
            self.run_id.bind(py),
            self.seq.bind(py),
            self.kind.bind(py),
            self.hash.bind(py),
            self.prev.bind(py),
            self.ts.bind(py),
            self.raw.bind(py),
        ]
    }

    fn fields<'py>(&self, py: Python<'py>) -> PyResult<[Bound<'py, PyAny>; 8]> {
        Ok([
            self.run_id.bind(py).clone(),
            self.seq.bind(py).clone(),
            self.kind.bind(py).clone(),
            self.hash.bind(py).clone(),
            self.prev.bind(py).clone(),
            self.ts.bind(py).clone(),
            self.body(py)?,
            self.raw.bind(py).clone(),
        ])
    }
}

fn json_loads(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static LOADS: GILOnceCell<PyObject> = GILOnceCell::new();
    LOADS
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("json")?.getattr("loads")?.unbind())
        })
        .map(|loads| loads.bind(py))
}

fn deepcopy<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    static DEEPCOPY: GILOnceCell<PyObject> = GILOnceCell::new();
    let py = value.py();
    DEEPCOPY
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("copy")?.getattr("deepcopy")?.unbind())
        })?
        .bind(py)
        .call1((value,))
}

fn frozen(py: Python<'_>, message: &str) -> PyErr {
    match py
        .import("dataclasses")
        .and_then(|module| module.getattr("FrozenInstanceError"))
        .and_then(|error| error.call1((message,)))
    {
        Ok(error) => PyErr::from_value(error),
        Err(err) => err,
    }
}

#[pymethods]
impl Entry {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        run_id: PyObject,
        seq: PyObject,
        kind: PyObject,
        hash: PyObject,
        prev: PyObject,
        ts: PyObject,
        body: &Bound<'_, PyAny>,
        raw: PyObject,
    ) -> PyResult<Self> {
        let mut entry = Entry::stored(run_id, seq, kind, hash, prev, ts, raw);
        entry.given_body = Some(deepcopy(body)?.unbind());
        Ok(entry)
    }

    /// The entry of a stored row (`run_id, seq, kind, hash, bytes`): `prev` and `ts` read
    /// from its bytes. Raises `ValueError`, `KeyError` or `TypeError` for bytes that are
    /// not an entry's JSON object.
    #[classmethod]
    fn from_row(
        _cls: &Bound<'_, pyo3::types::PyType>,
        run_id: PyObject,
        seq: PyObject,
        kind: PyObject,
        digest: &[u8],
        raw: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let py = raw.py();
        if raw.len()? > agentledger_core::journal::MAX_ENTRY_BYTES {
            // Never parsed: its objects could take tens of times its size (verify reports
            // it, `entry.size`).
            return Err(pyo3::exceptions::PyValueError::new_err(
                "larger than an entry can be",
            ));
        }
        let doc = json_loads(py)?.call1((raw,))?;
        let prev = doc.get_item(intern!(py, "prev"))?;
        let ts = doc.get_item(intern!(py, "ts"))?;
        doc.get_item(intern!(py, "body"))?;
        let hash = PyString::new(py, &agentledger_core::journal::prefixed_hex(digest));
        Ok(Entry::stored(
            run_id,
            seq,
            kind,
            hash.into_any().unbind(),
            prev.unbind(),
            ts.unbind(),
            raw.clone().unbind(),
        ))
    }

    /// The entry's body: a fresh object on each access (changing it changes no entry).
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.given_body {
            Some(body) => deepcopy(body.bind(py)),
            None => json_loads(py)?
                .call1((self.raw.bind(py),))?
                .get_item(intern!(py, "body")),
        }
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<PyObject> {
        let py = other.py();
        let Ok(other) = other.downcast::<Entry>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.get();
        if !matches!(op, CompareOp::Eq | CompareOp::Ne) {
            return Ok(py.NotImplemented());
        }
        let mut equal = true;
        for (mine, theirs) in self.stored_fields(py).iter().zip(other.stored_fields(py)) {
            if !mine.eq(theirs)? {
                equal = false;
                break;
            }
        }
        if equal && (self.given_body.is_some() || other.given_body.is_some()) {
            equal = self.body(py)?.eq(other.body(py)?)?;
        }
        (equal == matches!(op, CompareOp::Eq)).into_py_any(py)
    }

    /// As a frozen dataclass does: `dataclasses.FrozenInstanceError` (an `AttributeError`).
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(frozen(py, &format!("cannot assign to field '{name}'")))
    }

    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(frozen(py, &format!("cannot delete field '{name}'")))
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        PyTuple::new(
            py,
            [
                self.run_id.bind(py),
                self.seq.bind(py),
                self.hash.bind(py),
                self.raw.bind(py),
            ],
        )?
        .hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        const NAMES: [&str; 8] = ["run_id", "seq", "kind", "hash", "prev", "ts", "body", "raw"];
        let mut parts = Vec::with_capacity(NAMES.len());
        for (name, value) in NAMES.iter().zip(self.fields(py)?) {
            parts.push(format!("{name}={}", value.repr()?));
        }
        Ok(format!("Entry({})", parts.join(", ")))
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let fields = slf.get().fields(py)?;
        Ok((slf.get_type().into_any(), PyTuple::new(py, fields)?))
    }
}
