//! Hashing for Python: `blake3_hex`, `sha256_hex`, `domain_hash`, `hmac_sha256`,
//! `hkdf_sha256`, `content_names_in` (the content names bytes hold), and the streaming
//! `Blake3Hasher` / `Sha256Hasher`. Also the buffer helpers the other binding modules use
//! to take bytes-like arguments.
//!
//! # Buffers, the GIL and thread safety
//!
//! Every `data` argument accepts any bytes-like object: `bytes`, `bytearray`,
//! `memoryview`, `array.array`, `mmap`... (any C-contiguous buffer, viewed as raw bytes
//! whatever its item format, as `hashlib` does). Inputs of at least [`RELEASE_GIL_FROM`]
//! bytes are hashed with the GIL released, so other Python threads keep running. What we
//! read while the GIL is released must not change under us, hence two cases:
//!
//! - `bytes` is immutable and the argument keeps it alive for the whole call, so it is
//!   borrowed directly, without a copy, for the whole GIL-released computation.
//! - Any other buffer may be mutable (a `bytearray`, or a read-only `memoryview` of one),
//!   and another thread could write to it while the GIL is released. Unlike `hashlib`
//!   and blake3-py, which hash such buffers in place and document the race, we never
//!   read a mutable buffer without the GIL: it is copied, [`COPY_CHUNK`] bytes at a time,
//!   under the GIL, and each copied chunk is hashed with the GIL released. Memory stays
//!   bounded, and a concurrent writer can at worst change which bytes get hashed, never
//!   race with a read. (The buffer export also stops a `bytearray` from being resized.)
//!
//! The streaming hashers keep their state behind a `Mutex` because an update releases the
//! GIL: two threads feeding one hasher are serialized rather than racing. A thread that
//! finds the mutex taken waits for it with the GIL released, so the holder, which may need
//! the GIL to copy its next chunk, can always finish. Nothing here calls back into Python
//! while hashing.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, TryLockError};

use agentledger_core::hash::{self, Blake3Hasher as CoreBlake3, Sha256Hasher as CoreSha256};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView};

use crate::errors::to_py;

/// Inputs at least this large are hashed with the GIL released (CPython's hashlib uses
/// 2048 bytes too).
pub(crate) const RELEASE_GIL_FROM: usize = 2048;

/// Mutable buffers are copied and hashed in chunks of this size.
const COPY_CHUNK: usize = 1 << 20;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(blake3_hex, m)?)?;
    m.add_function(wrap_pyfunction!(sha256_hex, m)?)?;
    m.add_function(wrap_pyfunction!(content_names_in, m)?)?;
    m.add_function(wrap_pyfunction!(domain_hash, m)?)?;
    m.add_function(wrap_pyfunction!(hmac_sha256, m)?)?;
    m.add_function(wrap_pyfunction!(hkdf_sha256, m)?)?;
    m.add_class::<Blake3Hasher>()?;
    m.add_class::<Sha256Hasher>()?;
    Ok(())
}

/// A bytes-like argument, held for the duration of a call.
pub(crate) enum BytesArg<'py> {
    /// Immutable: safe to read with the GIL released.
    Immutable(Bound<'py, PyBytes>),
    /// Possibly mutable: read only while holding the GIL.
    Buffer(PyBuffer<u8>),
}

impl<'py> BytesArg<'py> {
    pub(crate) fn extract(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(bytes) = obj.downcast::<PyBytes>() {
            return Ok(BytesArg::Immutable(bytes.clone()));
        }
        let buffer = match PyBuffer::<u8>::get(obj) {
            Ok(buffer) => buffer,
            // Items that are not unsigned bytes ('b', 'I', 'd'...): view the same memory as
            // raw bytes. This raises TypeError for objects that are not buffers at all.
            Err(_) => {
                let raw = PyMemoryView::from(obj)?.call_method1("cast", ("B",))?;
                PyBuffer::<u8>::get(&raw)?
            }
        };
        if !buffer.is_c_contiguous() {
            return Err(PyBufferError::new_err("buffer is not C-contiguous"));
        }
        Ok(BytesArg::Buffer(buffer))
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            BytesArg::Immutable(bytes) => bytes.as_bytes().len(),
            BytesArg::Buffer(buffer) => buffer.len_bytes(),
        }
    }

    /// Append the bytes to `out` (under the GIL).
    pub(crate) fn append_to(&self, py: Python<'_>, out: &mut Vec<u8>) {
        match self {
            BytesArg::Immutable(bytes) => out.extend_from_slice(bytes.as_bytes()),
            BytesArg::Buffer(buffer) => {
                let cells = buffer.as_slice(py).expect("checked C-contiguous");
                out.extend(cells.iter().map(|cell| cell.get()));
            }
        }
    }

    pub(crate) fn to_vec(&self, py: Python<'_>) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.append_to(py, &mut out);
        out
    }

    /// Feed the bytes, in order, to `sink`, releasing the GIL for large inputs (see the
    /// module docs for why mutable buffers are fed in copied chunks).
    pub(crate) fn feed(&self, py: Python<'_>, sink: &mut (dyn FnMut(&[u8]) + Send)) {
        match self {
            BytesArg::Immutable(bytes) => {
                let data = bytes.as_bytes();
                if data.len() >= RELEASE_GIL_FROM {
                    py.allow_threads(|| sink(data));
                } else {
                    sink(data);
                }
            }
            BytesArg::Buffer(buffer) => {
                let cells = buffer.as_slice(py).expect("checked C-contiguous");
                if cells.len() < RELEASE_GIL_FROM {
                    let copy: Vec<u8> = cells.iter().map(|cell| cell.get()).collect();
                    sink(&copy);
                    return;
                }
                let mut chunk = Vec::with_capacity(COPY_CHUNK.min(cells.len()));
                for part in cells.chunks(COPY_CHUNK) {
                    chunk.clear();
                    chunk.extend(part.iter().map(|cell| cell.get()));
                    let data = &chunk[..];
                    py.allow_threads(|| sink(data));
                }
            }
        }
    }
}

/// Lock `mutex`, waiting with the GIL released if another thread holds it.
fn lock<'a, T: Send>(py: Python<'_>, mutex: &'a Mutex<T>) -> MutexGuard<'a, T> {
    loop {
        match mutex.try_lock() {
            Ok(guard) => return guard,
            // A panic while hashing leaves the state as consistent as it was before
            // (hashers have no invariants a partial update can break).
            Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => py.allow_threads(|| {
                drop(mutex.lock());
            }),
        }
    }
}

/// ``"blake3:" + hex(BLAKE3(data))``: the content address of exact bytes.
#[pyfunction]
fn blake3_hex(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<String> {
    let data = BytesArg::extract(data)?;
    let mut hasher = CoreBlake3::new();
    data.feed(py, &mut |chunk| {
        hasher.update(chunk);
    });
    Ok(hash::to_hex_prefixed(
        hash::BLAKE3_PREFIX,
        hasher.finalize().as_bytes(),
    ))
}

/// ``"sha256:" + hex(SHA-256(data))``.
#[pyfunction]
fn sha256_hex(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<String> {
    let data = BytesArg::extract(data)?;
    let mut hasher = CoreSha256::new();
    data.feed(py, &mut |chunk| {
        hasher.update(chunk);
    });
    Ok(hash::to_hex_prefixed(
        hash::SHA256_PREFIX,
        &hasher.finalize(),
    ))
}

/// The content names `data` (`bytes`) holds, as a set of `str` (`cas.names_in`).
#[pyfunction]
fn content_names_in(py: Python<'_>, data: &[u8]) -> HashSet<String> {
    let scan = || {
        hash::content_names_in(data)
            .into_iter()
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect()
    };
    if data.len() >= RELEASE_GIL_FROM {
        py.allow_threads(scan)
    } else {
        scan()
    }
}

/// 32-byte BLAKE3 in derive-key mode with context ``"agentledger/v1/" + domain``.
#[pyfunction]
fn domain_hash<'py>(
    py: Python<'py>,
    domain: &str,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let data = BytesArg::extract(data)?;
    let mut hasher = hash::domain_hasher(domain);
    data.feed(py, &mut |chunk| {
        hasher.update(chunk);
    });
    Ok(PyBytes::new(py, hasher.finalize().as_bytes()))
}

/// HMAC-SHA-256 of `data` under `key` (any key length).
#[pyfunction]
fn hmac_sha256<'py>(
    py: Python<'py>,
    key: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let key = BytesArg::extract(key)?.to_vec(py);
    let data = BytesArg::extract(data)?;
    let mac = match &data {
        BytesArg::Immutable(bytes) if bytes.as_bytes().len() >= RELEASE_GIL_FROM => {
            let bytes = bytes.as_bytes();
            py.allow_threads(|| hash::hmac_sha256(&key, bytes))
        }
        _ => {
            let copy = data.to_vec(py);
            if copy.len() >= RELEASE_GIL_FROM {
                py.allow_threads(|| hash::hmac_sha256(&key, &copy))
            } else {
                hash::hmac_sha256(&key, &copy)
            }
        }
    };
    Ok(PyBytes::new(py, &mac))
}

/// HKDF-SHA-256 (RFC 5869). `salt=None` is the RFC's all-zero default salt; `length` is
/// at most 255 * 32 = 8160 bytes.
#[pyfunction]
fn hkdf_sha256<'py>(
    py: Python<'py>,
    ikm: &Bound<'py, PyAny>,
    salt: Option<&Bound<'py, PyAny>>,
    info: &Bound<'py, PyAny>,
    length: i64,
) -> PyResult<Bound<'py, PyBytes>> {
    let length = usize::try_from(length)
        .map_err(|_| PyValueError::new_err(format!("HKDF length must be >= 0, got {length}")))?;
    let ikm = BytesArg::extract(ikm)?.to_vec(py);
    let salt = salt
        .map(BytesArg::extract)
        .transpose()?
        .map(|s| s.to_vec(py));
    let info = BytesArg::extract(info)?.to_vec(py);
    let okm = hash::hkdf_sha256(&ikm, salt.as_deref(), &info, length).map_err(to_py)?;
    Ok(PyBytes::new(py, &okm))
}

/// Streaming BLAKE3 (large updates release the GIL).
#[pyclass(module = "agentledger._core", name = "Blake3Hasher")]
struct Blake3Hasher {
    state: Mutex<CoreBlake3>,
}

#[pymethods]
impl Blake3Hasher {
    #[new]
    fn new() -> Self {
        Blake3Hasher {
            state: Mutex::new(CoreBlake3::new()),
        }
    }

    fn update(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let data = BytesArg::extract(data)?;
        let mut guard = lock(py, &self.state);
        let hasher: &mut CoreBlake3 = &mut guard;
        data.feed(py, &mut |chunk| {
            hasher.update(chunk);
        });
        Ok(())
    }

    /// ``"blake3:<hex>"`` of everything fed so far.
    fn hex_digest(&self, py: Python<'_>) -> String {
        let digest = lock(py, &self.state).finalize();
        hash::to_hex_prefixed(hash::BLAKE3_PREFIX, digest.as_bytes())
    }
}

/// Streaming SHA-256 (large updates release the GIL).
#[pyclass(module = "agentledger._core", name = "Sha256Hasher")]
struct Sha256Hasher {
    state: Mutex<CoreSha256>,
}

#[pymethods]
impl Sha256Hasher {
    #[new]
    fn new() -> Self {
        Sha256Hasher {
            state: Mutex::new(CoreSha256::new()),
        }
    }

    fn update(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let data = BytesArg::extract(data)?;
        let mut guard = lock(py, &self.state);
        let hasher: &mut CoreSha256 = &mut guard;
        data.feed(py, &mut |chunk| {
            hasher.update(chunk);
        });
        Ok(())
    }

    /// ``"sha256:<hex>"`` of everything fed so far.
    fn hex_digest(&self, py: Python<'_>) -> String {
        let digest = lock(py, &self.state).finalize();
        hash::to_hex_prefixed(hash::SHA256_PREFIX, &digest)
    }
}
