//! The log's tree as `log_tiles` stores it, for Python: `StoredTree`, whose roots, frontiers
//! and proofs are the core's (`agentledger_core::tiles`), its tiles read through the
//! Python callable each call is given (`tiles.py` reads them on its connection).
//!
//! A callable rather than the connection: `tiles.py` sits in the layer below
//! `storage/native.py`, which binds the host SQLite for calls that take a connection.
//!
//! A call holds the GIL throughout: it reads O(log n) tiles, each at most once (the
//! callable is called only for a tile not read before), and hashes fewer than 256 nodes
//! per level.

use std::collections::HashMap;

use agentledger_core::base64;
use agentledger_core::merkle::Hash;
use agentledger_core::tiles::{self as core_tiles, HashReader, TILE_BYTES, TILE_WIDTH};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::Error;
use crate::merkle::hashes_to_py;

/// Tiles kept across calls before all are forgotten (8 MiB).
const MAX_CACHED_TILES: usize = 1024;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StoredTree>()?;
    Ok(())
}

/// Full-length tiles read so far, by `(level, index)`.
type TileCache = HashMap<(u32, u64), Box<[u8]>>;

/// `read_tile(level, index)`, the stored tile's bytes or `None`, as a [`HashReader`].
struct TileCalls<'a, 'py> {
    read_tile: &'a Bound<'py, PyAny>,
    tiles: &'a mut TileCache,
}

impl HashReader for TileCalls<'_, '_> {
    type Error = Error;

    fn read_hashes(&mut self, level: u32, start: u64, count: usize) -> Result<Vec<Hash>, Error> {
        let index = start / TILE_WIDTH;
        if let Some(tile) = self.tiles.get(&(level, index)) {
            return Ok(core_tiles::hashes_in_tile(tile, level, start, count)?);
        }
        let found = self
            .read_tile
            .call1((level, index))
            .map_err(Error::Python)?;
        // No tile, or anything but bytes, reads as no bytes: a damaged tile.
        let tile: Box<[u8]> = match found.downcast::<PyBytes>() {
            Ok(bytes) => Box::from(bytes.as_bytes()),
            Err(_) => Box::default(),
        };
        let hashes = core_tiles::hashes_in_tile(&tile, level, start, count)?;
        if tile.len() == TILE_BYTES {
            if self.tiles.len() >= MAX_CACHED_TILES {
                self.tiles.clear();
            }
            self.tiles.insert((level, index), tile);
        }
        Ok(hashes)
    }
}

/// The log's tree as its tiles store it. It keeps the tiles and nodes it reads (bounded) for
/// later calls, so use one only while the tiles do not change (one snapshot or
/// transaction). Damaged tiles raise `LogDamagedError`; an index or size out of range
/// `ValueError`; what `read_tile` raises is passed on.
#[pyclass(module = "agentledger._core", name = "StoredTree")]
#[derive(Default)]
struct StoredTree {
    tree: core_tiles::StoredTree,
    tiles: TileCache,
}

impl StoredTree {
    fn read<T>(
        &mut self,
        read_tile: &Bound<'_, PyAny>,
        read: impl FnOnce(&mut core_tiles::StoredTree, &mut TileCalls<'_, '_>) -> Result<T, Error>,
    ) -> PyResult<T> {
        let mut calls = TileCalls {
            read_tile,
            tiles: &mut self.tiles,
        };
        Ok(read(&mut self.tree, &mut calls)?)
    }
}

#[pymethods]
impl StoredTree {
    #[new]
    fn new() -> Self {
        StoredTree::default()
    }

    /// The root of the tree of the first `size` leaves.
    fn root<'py>(
        &mut self,
        py: Python<'py>,
        read_tile: &Bound<'py, PyAny>,
        size: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let root = self.read(read_tile, |tree, calls| tree.root(calls, size))?;
        Ok(PyBytes::new(py, &root))
    }

    /// The perfect subtrees' roots of the tree of `size` leaves, largest first.
    fn frontier<'py>(
        &mut self,
        py: Python<'py>,
        read_tile: &Bound<'py, PyAny>,
        size: u64,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let nodes = self.read(read_tile, |tree, calls| tree.frontier(calls, size))?;
        Ok(hashes_to_py(py, &nodes))
    }

    /// RFC 9162 PATH(index, D[0:size]), lowest level first.
    fn inclusion_proof<'py>(
        &mut self,
        py: Python<'py>,
        read_tile: &Bound<'py, PyAny>,
        index: u64,
        size: u64,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let proof = self.read(read_tile, |tree, calls| {
            tree.inclusion_proof(calls, index, size)
        })?;
        Ok(hashes_to_py(py, &proof))
    }

    /// PATH(index, D[0:size]) of each leaf of `indices`, in order, each node in standard
    /// base64: the proofs an archive's seal carries (checked by the caller before they are
    /// written: `_core.verify_inclusions`).
    fn inclusion_proofs_base64(
        &mut self,
        read_tile: &Bound<'_, PyAny>,
        indices: Vec<u64>,
        size: u64,
    ) -> PyResult<Vec<Vec<String>>> {
        self.read(read_tile, |tree, calls| {
            indices
                .iter()
                .map(|&index| {
                    let proof = tree.inclusion_proof(calls, index, size)?;
                    Ok(proof
                        .iter()
                        .map(|node| {
                            let text = base64::encode(node, base64::STANDARD);
                            String::from_utf8(text).expect("base64 is ASCII")
                        })
                        .collect())
                })
                .collect()
        })
    }

    /// RFC 9162 PROOF(old_size, D[0:new_size]).
    fn consistency_proof<'py>(
        &mut self,
        py: Python<'py>,
        read_tile: &Bound<'py, PyAny>,
        old_size: u64,
        new_size: u64,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let proof = self.read(read_tile, |tree, calls| {
            tree.consistency_proof(calls, old_size, new_size)
        })?;
        Ok(hashes_to_py(py, &proof))
    }

    /// `count` (1..=256) consecutive stored hashes of level `level` from `start`, all in
    /// one tile, concatenated.
    fn hashes<'py>(
        &mut self,
        py: Python<'py>,
        read_tile: &Bound<'py, PyAny>,
        level: u32,
        start: u64,
        count: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let hashes = self.read(read_tile, |_, calls| calls.read_hashes(level, start, count))?;
        Ok(PyBytes::new(py, hashes.as_flattened()))
    }
}
