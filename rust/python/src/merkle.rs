//! Merkle trees for Python: `merkle_root`, `inclusion_proof`, `verify_inclusion`,
//! `consistency_proof`, `verify_consistency`, the proofs' leaf ranges and
//! `IncrementalMerkleTree` (the same over the stored tiles: `tiles.rs`).
//!
//! Leaves and proofs are copied into one Rust buffer under the GIL, then hashed, with the
//! GIL released when there are many of them ([`RELEASE_GIL_FROM`]). Sizes and indices that are not in `0..2**64` make generation raise
//! `ValueError` and verification return `False`; a non-integer is a `TypeError`.

use agentledger_core::merkle::{self, Hash, HashAlg, IncrementalTree, HASH_LEN};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyList, PyString};
use rayon::prelude::*;

use crate::errors::to_py;
use crate::hashing::BytesArg;
use crate::pools::pool;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(merkle_root, m)?)?;
    m.add_function(wrap_pyfunction!(merkle_root_of_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(inclusion_proof, m)?)?;
    m.add_function(wrap_pyfunction!(verify_inclusion, m)?)?;
    m.add_function(wrap_pyfunction!(verify_inclusions, m)?)?;
    m.add_function(wrap_pyfunction!(consistency_proof, m)?)?;
    m.add_function(wrap_pyfunction!(verify_consistency, m)?)?;
    m.add_function(wrap_pyfunction!(inclusion_proof_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(consistency_proof_ranges, m)?)?;
    m.add_class::<IncrementalMerkleTree>()?;
    Ok(())
}

/// Trees over at least this many bytes of leaves or hashes are worked on with the GIL
/// released. Below, the work (a tile's root: tens of microseconds; a proof's check: a few)
/// costs less than taking the GIL back can: beside a busy Python thread that waits up to
/// the thread's switch interval (5 ms), which made a verify's 800 tile roots take seconds.
const RELEASE_GIL_FROM: usize = 64 * 1024;

/// `work()`, with the GIL released when it is over `bytes` of at least [`RELEASE_GIL_FROM`].
fn hashing<T: Send>(py: Python<'_>, bytes: usize, work: impl FnOnce() -> T + Send) -> T {
    if bytes >= RELEASE_GIL_FROM {
        py.allow_threads(work)
    } else {
        work()
    }
}

fn hash_alg(name: &str) -> PyResult<HashAlg> {
    HashAlg::from_name(name).map_err(to_py)
}

/// Many byte strings in one allocation: item `i` is `data[ends[i - 1]..ends[i]]`.
struct FlatBytes {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl FlatBytes {
    fn from_sequence(py: Python<'_>, items: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        if items.is_instance_of::<PyBytes>() || items.is_instance_of::<pyo3::types::PyString>() {
            return Err(PyTypeError::new_err(format!(
                "{what} must be a sequence of bytes objects, not a single {}",
                items.get_type().name()?
            )));
        }
        let mut flat = FlatBytes {
            data: Vec::new(),
            ends: Vec::with_capacity(items.len().unwrap_or(0)),
        };
        for item in items.try_iter()? {
            BytesArg::extract(&item?)?.append_to(py, &mut flat.data);
            flat.ends.push(flat.data.len());
        }
        Ok(flat)
    }

    fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let slice = &self.data[start..end];
                start = end;
                slice
            })
            .collect()
    }
}

/// A Python int as a u64: `Ok(None)` if it is negative or too large, `TypeError` if it is
/// not an int at all.
fn u64_arg(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<u64>> {
    if !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            value.get_type().name()?
        )));
    }
    Ok(value.extract::<u64>().ok())
}

pub(crate) fn hashes_to_py<'py>(py: Python<'py>, hashes: &[Hash]) -> Vec<Bound<'py, PyBytes>> {
    hashes.iter().map(|h| PyBytes::new(py, h)).collect()
}

#[pyfunction]
#[pyo3(signature = (leaves, hash = "sha256"))]
fn merkle_root<'py>(
    py: Python<'py>,
    leaves: &Bound<'py, PyAny>,
    hash: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let alg = hash_alg(hash)?;
    let leaves = FlatBytes::from_sequence(py, leaves, "leaves")?;
    let root = hashing(py, leaves.data.len(), || {
        merkle::root(alg, &leaves.slices())
    });
    Ok(PyBytes::new(py, &root))
}

/// The root of a tree given its leaf hashes, concatenated (32 bytes each): a tile's
/// subtree, without hashing the leaves again.
#[pyfunction]
#[pyo3(signature = (hashes, hash = "sha256"))]
fn merkle_root_of_hashes<'py>(
    py: Python<'py>,
    hashes: &[u8],
    hash: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let alg = hash_alg(hash)?;
    if !hashes.len().is_multiple_of(HASH_LEN) {
        return Err(PyValueError::new_err(format!(
            "{} bytes are not a list of {HASH_LEN}-byte hashes",
            hashes.len()
        )));
    }
    let nodes: Vec<Hash> = hashes
        .chunks_exact(HASH_LEN)
        .map(|chunk| chunk.try_into().expect("chunks of HASH_LEN"))
        .collect();
    let root = hashing(py, hashes.len(), || {
        merkle::root_of_leaf_hashes(alg, &nodes)
    });
    Ok(PyBytes::new(py, &root))
}

#[pyfunction]
#[pyo3(signature = (leaves, index, hash = "sha256"))]
fn inclusion_proof<'py>(
    py: Python<'py>,
    leaves: &Bound<'py, PyAny>,
    index: &Bound<'py, PyAny>,
    hash: &str,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let alg = hash_alg(hash)?;
    let leaves = FlatBytes::from_sequence(py, leaves, "leaves")?;
    let Some(index_u64) = u64_arg(index, "index")? else {
        return Err(PyValueError::new_err(format!(
            "leaf index {index} out of range for a tree of {} leaves",
            leaves.ends.len()
        )));
    };
    let proof = hashing(py, leaves.data.len(), || {
        merkle::inclusion_proof(alg, &leaves.slices(), index_u64)
    })
    .map_err(to_py)?;
    Ok(hashes_to_py(py, &proof))
}

#[pyfunction]
#[pyo3(signature = (leaf, index, size, proof, root, hash = "sha256"))]
fn verify_inclusion(
    py: Python<'_>,
    leaf: &Bound<'_, PyAny>,
    index: &Bound<'_, PyAny>,
    size: &Bound<'_, PyAny>,
    proof: &Bound<'_, PyAny>,
    root: &Bound<'_, PyAny>,
    hash: &str,
) -> PyResult<bool> {
    let alg = hash_alg(hash)?;
    let leaf = BytesArg::extract(leaf)?.to_vec(py);
    let root = BytesArg::extract(root)?.to_vec(py);
    let proof = FlatBytes::from_sequence(py, proof, "proof")?;
    let (Some(index), Some(size)) = (u64_arg(index, "index")?, u64_arg(size, "size")?) else {
        return Ok(false);
    };
    Ok(hashing(py, leaf.len() + proof.data.len(), || {
        merkle::verify_inclusion(alg, &leaf, index, size, &proof.slices(), &root)
    }))
}

/// Many inclusion proofs in one tree (`size` leaves, `root`), each given as a sealed archive
/// holds it: `[index, [base64 node, ...]]` (`proofs[i]` for leaf data `leaves[i]`). For
/// each, `verify_inclusion`'s answer, checked in parallel with the GIL released; `None`
/// where a proof is not in that plain form (an index that is not an int in `0..2**64`, a
/// node that is not a `str` of the canonical base64 of 32 bytes): the caller decides those
/// (the reference, `verify/log.py`'s `_source_proof_holds`, is held to this by a test).
#[pyfunction]
#[pyo3(signature = (leaves, proofs, size, root, jobs = 0))]
fn verify_inclusions(
    py: Python<'_>,
    leaves: Vec<Vec<u8>>,
    proofs: &Bound<'_, PyList>,
    size: u64,
    root: Vec<u8>,
    jobs: usize,
) -> PyResult<Vec<Option<bool>>> {
    if leaves.len() != proofs.len() {
        return Err(PyValueError::new_err("a proof for each leaf"));
    }
    // Each plain proof: its index and its nodes' range in one buffer of nodes.
    let mut nodes: Vec<Hash> = Vec::new();
    let plain: Vec<Option<(u64, std::ops::Range<usize>)>> = proofs
        .iter()
        .map(|item| {
            let start = nodes.len();
            let read = plain_proof(&item, &mut nodes);
            if read.is_none() {
                nodes.truncate(start);
            }
            read.map(|index| (index, start..nodes.len()))
        })
        .collect();
    let pool = pool(jobs)?;
    Ok(py.allow_threads(|| {
        pool.install(|| {
            plain
                .par_iter()
                .zip(&leaves)
                .map(|(proof, leaf)| {
                    let (index, range) = proof.as_ref()?;
                    let path = &nodes[range.clone()];
                    Some(merkle::verify_inclusion(
                        HashAlg::Sha256,
                        leaf,
                        *index,
                        size,
                        path,
                        &root,
                    ))
                })
                .collect()
        })
    }))
}

/// `[index, [node, ...]]` with an int index in `0..2**64` (not a bool) and every node a
/// `str` of the canonical standard base64 of 32 bytes (which Python's strict decoder reads
/// alike): the index, the decoded nodes appended to `nodes`; `None` for any other shape.
fn plain_proof(item: &Bound<'_, PyAny>, nodes: &mut Vec<Hash>) -> Option<u64> {
    let pair = item.downcast::<PyList>().ok()?;
    if pair.len() != 2 {
        return None;
    }
    let index = pair.get_item(0).ok()?;
    if !index.is_instance_of::<PyInt>() || index.is_instance_of::<PyBool>() {
        return None;
    }
    let index = index.extract::<u64>().ok()?;
    let path = pair.get_item(1).ok()?;
    for node in path.downcast::<PyList>().ok()?.iter() {
        let text = node.downcast::<PyString>().ok()?.to_str().ok()?;
        nodes.push(agentledger_core::base64::decode_exact::<HASH_LEN>(
            text.as_bytes(),
        )?);
    }
    Some(index)
}

#[pyfunction]
#[pyo3(signature = (leaves, old_size, hash = "sha256"))]
fn consistency_proof<'py>(
    py: Python<'py>,
    leaves: &Bound<'py, PyAny>,
    old_size: &Bound<'py, PyAny>,
    hash: &str,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let alg = hash_alg(hash)?;
    let leaves = FlatBytes::from_sequence(py, leaves, "leaves")?;
    let Some(old_size_u64) = u64_arg(old_size, "old_size")? else {
        return Err(PyValueError::new_err(format!(
            "old size {old_size} out of range for a tree of {} leaves",
            leaves.ends.len()
        )));
    };
    let proof = hashing(py, leaves.data.len(), || {
        merkle::consistency_proof(alg, &leaves.slices(), old_size_u64)
    })
    .map_err(to_py)?;
    Ok(hashes_to_py(py, &proof))
}

#[pyfunction]
#[pyo3(signature = (old_size, new_size, old_root, new_root, proof, hash = "sha256"))]
fn verify_consistency(
    py: Python<'_>,
    old_size: &Bound<'_, PyAny>,
    new_size: &Bound<'_, PyAny>,
    old_root: &Bound<'_, PyAny>,
    new_root: &Bound<'_, PyAny>,
    proof: &Bound<'_, PyAny>,
    hash: &str,
) -> PyResult<bool> {
    let alg = hash_alg(hash)?;
    let old_root = BytesArg::extract(old_root)?.to_vec(py);
    let new_root = BytesArg::extract(new_root)?.to_vec(py);
    let proof = FlatBytes::from_sequence(py, proof, "proof")?;
    let (Some(old_size), Some(new_size)) = (
        u64_arg(old_size, "old_size")?,
        u64_arg(new_size, "new_size")?,
    ) else {
        return Ok(false);
    };
    Ok(hashing(py, proof.data.len(), || {
        merkle::verify_consistency(
            alg,
            old_size,
            new_size,
            &old_root,
            &new_root,
            &proof.slices(),
        )
    }))
}

/// The leaf ranges `(start, stop)` whose roots make the audit path of leaf `index` in a
/// tree of `size` leaves, lowest level first (the shape every proof here has).
#[pyfunction]
fn inclusion_proof_ranges(index: u64, size: u64) -> PyResult<Vec<(u64, u64)>> {
    merkle::inclusion_proof_ranges(index, size).map_err(to_py)
}

/// The leaf ranges whose roots make the consistency proof from `old_size` to `new_size`.
#[pyfunction]
fn consistency_proof_ranges(old_size: u64, new_size: u64) -> PyResult<Vec<(u64, u64)>> {
    merkle::consistency_proof_ranges(old_size, new_size).map_err(to_py)
}

/// Append-only Merkle tree keeping only O(log n) state (the right frontier).
#[pyclass(module = "agentledger._core", name = "IncrementalMerkleTree")]
struct IncrementalMerkleTree {
    tree: IncrementalTree,
}

#[pymethods]
impl IncrementalMerkleTree {
    #[new]
    #[pyo3(signature = (hash = "sha256"))]
    fn new(hash: &str) -> PyResult<Self> {
        Ok(IncrementalMerkleTree {
            tree: IncrementalTree::new(hash_alg(hash)?),
        })
    }

    /// Restore a tree from `size` and `frontier()`; the frontier must hold exactly
    /// `size.bit_count()` 32-byte hashes.
    #[staticmethod]
    #[pyo3(signature = (size, frontier, hash = "sha256"))]
    fn from_state(
        py: Python<'_>,
        size: &Bound<'_, PyAny>,
        frontier: &Bound<'_, PyAny>,
        hash: &str,
    ) -> PyResult<Self> {
        let alg = hash_alg(hash)?;
        let Some(size_u64) = u64_arg(size, "size")? else {
            return Err(PyValueError::new_err(format!(
                "tree size {size} out of range 0..2**64"
            )));
        };
        let flat = FlatBytes::from_sequence(py, frontier, "frontier")?;
        let nodes = flat
            .slices()
            .into_iter()
            .map(|node| {
                <Hash>::try_from(node).map_err(|_| {
                    PyValueError::new_err(format!(
                        "frontier hashes are {HASH_LEN} bytes, got one of {}",
                        node.len()
                    ))
                })
            })
            .collect::<PyResult<Vec<Hash>>>()?;
        let tree = IncrementalTree::from_state(alg, size_u64, nodes).map_err(to_py)?;
        Ok(IncrementalMerkleTree { tree })
    }

    #[getter]
    fn size(&self) -> u64 {
        self.tree.size()
    }

    /// The subtree roots that, with ``size``, restore the tree (``from_state``).
    fn frontier<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        hashes_to_py(py, self.tree.frontier())
    }

    /// Append a leaf (its data, not its hash); return its index.
    fn append(&mut self, py: Python<'_>, leaf: &Bound<'_, PyAny>) -> PyResult<u64> {
        let leaf = BytesArg::extract(leaf)?;
        let leaf_hash = match &leaf {
            BytesArg::Immutable(bytes) => self.tree.alg().leaf_hash(bytes.as_bytes()),
            BytesArg::Buffer(_) => self.tree.alg().leaf_hash(&leaf.to_vec(py)),
        };
        self.tree.append_leaf_hash(leaf_hash).map_err(to_py)
    }

    fn root<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.tree.root())
    }

    fn __repr__(&self) -> String {
        format!(
            "IncrementalMerkleTree(size={}, hash={:?})",
            self.tree.size(),
            self.tree.alg().name()
        )
    }
}
