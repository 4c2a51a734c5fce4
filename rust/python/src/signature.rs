//! Ed25519 for Python: `Ed25519Signer` (the bytes libsodium gives), and `ed25519_verify` and
//! `ed25519_verify_batch`, deciding exactly as libsodium's `crypto_sign_verify_detached`
//! (rules in `agentledger_core::signature`). Signing keeps the GIL (a signature takes tens
//! of microseconds; letting the GIL go can cost a busy thread's switch interval).
//!
//! Wrong lengths are `False`, never an exception; only arguments that are not bytes-like
//! raise `TypeError`. The batch copies every triple into one Rust buffer, then releases the
//! GIL for the whole batch and verifies on the rayon pool: no Python object is touched
//! while other threads run.

use agentledger_core::signature;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::hashing::{BytesArg, RELEASE_GIL_FROM};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ed25519_verify, m)?)?;
    m.add_function(wrap_pyfunction!(ed25519_verify_batch, m)?)?;
    m.add_class::<Ed25519Signer>()?;
    m.add_function(wrap_pyfunction!(signature_memo_begin, m)?)?;
    m.add_function(wrap_pyfunction!(signature_memo_end, m)?)?;
    Ok(())
}

/// The key of a 32-byte seed, expanded once (`signature::Signer`): `ValueError` for another
/// length. The expanded key is zeroed when the object is freed.
#[pyclass(frozen, module = "agentledger._core")]
pub struct Ed25519Signer {
    signer: signature::Signer,
}

#[pymethods]
impl Ed25519Signer {
    #[new]
    fn new(py: Python<'_>, seed: &Bound<'_, PyAny>) -> PyResult<Self> {
        let seed: [u8; 32] = BytesArg::extract(seed)?
            .to_vec(py)
            .try_into()
            .map_err(|_| PyValueError::new_err("an Ed25519 seed is 32 bytes"))?;
        Ok(Ed25519Signer {
            signer: signature::Signer::from_seed(&seed),
        })
    }

    /// The signature of `message` (the bytes libsodium gives).
    fn sign<'py>(
        &self,
        py: Python<'py>,
        message: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let message = BytesArg::extract(message)?.to_vec(py);
        Ok(PyBytes::new(py, &self.signer.sign(&message)))
    }

    /// The 32-byte public key.
    #[getter]
    fn public_key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.signer.public_key())
    }
}

/// Strict verification: the same decision as libsodium's crypto_sign_verify_detached.
#[pyfunction]
fn ed25519_verify(
    py: Python<'_>,
    public_key: &Bound<'_, PyAny>,
    message: &Bound<'_, PyAny>,
    signature: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let public_key = BytesArg::extract(public_key)?.to_vec(py);
    let signature = BytesArg::extract(signature)?.to_vec(py);
    let message = BytesArg::extract(message)?;
    Ok(match &message {
        BytesArg::Immutable(bytes) => {
            let message = bytes.as_bytes();
            if message.len() >= RELEASE_GIL_FROM {
                py.allow_threads(|| signature::verify(&public_key, message, &signature))
            } else {
                signature::verify(&public_key, message, &signature)
            }
        }
        BytesArg::Buffer(_) => {
            let message = message.to_vec(py);
            py.allow_threads(|| signature::verify(&public_key, &message, &signature))
        }
    })
}

/// Verify (public_key, message, signature) triples in parallel with the GIL released.
#[pyfunction]
fn ed25519_verify_batch(py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
    // Layout per item in `data`: key, then signature, then message; `ends` marks the end
    // of each part.
    let mut data: Vec<u8> = Vec::new();
    let mut ends: Vec<[usize; 3]> = Vec::with_capacity(items.len().unwrap_or(0));
    for item in items.try_iter()? {
        let item = item?;
        let triple = item.downcast::<PyTuple>()?;
        let (public_key, message, signature) =
            triple.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>)>()?;
        BytesArg::extract(&public_key)?.append_to(py, &mut data);
        let key_end = data.len();
        BytesArg::extract(&signature)?.append_to(py, &mut data);
        let signature_end = data.len();
        BytesArg::extract(&message)?.append_to(py, &mut data);
        ends.push([key_end, signature_end, data.len()]);
    }
    Ok(py.allow_threads(|| {
        let mut start = 0;
        let triples: Vec<(&[u8], &[u8], &[u8])> = ends
            .iter()
            .map(|&[key_end, signature_end, end]| {
                let triple = (
                    &data[start..key_end],
                    &data[signature_end..end],
                    &data[key_end..signature_end],
                );
                start = end;
                triple
            })
            .collect();
        signature::verify_batch(&triples)
    }))
}

/// Activates the process's memo of accepted signatures (`signature::memo`) with `known`,
/// digests of 32 bytes each: `False`, and nothing changed, when one is active already.
#[pyfunction]
fn signature_memo_begin(known: &[u8]) -> bool {
    signature::memo::begin(known)
}

/// Deactivates the memo: the digests of the triples it accepted that it was not given,
/// concatenated, and how many verifications it answered from those it was given (empty
/// and 0 when none was active).
#[pyfunction]
fn signature_memo_end(py: Python<'_>) -> (Bound<'_, PyBytes>, u64) {
    let ended = signature::memo::end();
    (PyBytes::new(py, &ended.accepted.concat()), ended.reused)
}
