//! RFC 9162 roots and proofs over a tree stored as C2SP tlog-tiles (SHA-256, tile height 8).
//!
//! Level 0 holds the leaf hashes, level `L` the roots of the perfect subtrees of `256^L`
//! leaves, each level cut into tiles of 256 hashes. A stored hash never changes, so the tree
//! at every earlier size is in the tiles: a node of height `8L + r` at index `k` (the root
//! of leaves `[k·2^h, (k+1)·2^h)`) is the root of `2^r` consecutive level-`L` hashes, all in
//! one tile. Any root, frontier, inclusion or consistency proof is O(log n) tile reads.
//!
//! The arithmetic reads hashes through [`HashReader`] and never sees where they live, as
//! Go's `tlog.HashReader` keeps proofs apart from storage; the proofs' shapes are
//! [`merkle`]'s, so a proof from the tiles is the proof over all the leaves.

use std::collections::HashMap;

use crate::error::Error;
use crate::merkle::{self, Hash, HashAlg, HASH_LEN};

pub const TILE_HEIGHT: u32 = 8;
/// Hashes in a full tile.
pub const TILE_WIDTH: u64 = 1 << TILE_HEIGHT;
/// A stored tile is always this long: its free slots are zero (see [`hashes_in_tile`]).
pub const TILE_BYTES: usize = TILE_WIDTH as usize * HASH_LEN;

/// The tiles hold an RFC 6962 tree: SHA-256.
const ALG: HashAlg = HashAlg::Sha256;

/// Nodes kept by a [`StoredTree`] across calls before it forgets them all (2 MiB).
const MAX_CACHED_NODES: usize = 1 << 16;

/// Where the stored hashes come from.
pub trait HashReader {
    /// What a read fails with; damaged tiles and bad arguments are core [`Error`]s.
    type Error: From<Error>;

    /// The `count` (1..=256) consecutive hashes of level `level` from `start`, all in one
    /// tile; [`hashes_in_tile`] says which stored tiles hold them.
    fn read_hashes(
        &mut self,
        level: u32,
        start: u64,
        count: usize,
    ) -> Result<Vec<Hash>, Self::Error>;
}

/// Hashes `start..start + count` of level `level` out of `tile`, the stored bytes of the
/// tile holding them (empty when there is no such row). A stored tile is exactly
/// [`TILE_BYTES`] long; a slot still zero holds no hash yet, so the last one asked for
/// must not be zero. Anything else is [`Error::LogDamaged`].
pub fn hashes_in_tile(
    tile: &[u8],
    level: u32,
    start: u64,
    count: usize,
) -> Result<Vec<Hash>, Error> {
    let (index, offset) = (start / TILE_WIDTH, (start % TILE_WIDTH) as usize);
    if count == 0 || offset + count > TILE_WIDTH as usize {
        return Err(Error::invalid(format!(
            "{count} hashes from {start} are not within one tile"
        )));
    }
    if tile.len() != TILE_BYTES {
        return Err(Error::log_damaged(format!(
            "tile {level}/{index} is {} bytes, not {TILE_BYTES}",
            tile.len()
        )));
    }
    let wanted = &tile[offset * HASH_LEN..(offset + count) * HASH_LEN];
    if wanted[wanted.len() - HASH_LEN..]
        .iter()
        .all(|&byte| byte == 0)
    {
        return Err(Error::log_damaged(format!(
            "level {level} has no hash {}",
            start + count as u64 - 1
        )));
    }
    Ok(wanted
        .chunks_exact(HASH_LEN)
        .map(|chunk| chunk.try_into().expect("chunks of HASH_LEN"))
        .collect())
}

/// The tree the tiles store, read through a [`HashReader`] given to each call. The nodes it
/// computes are kept (bounded) for later calls: proofs against one size share their upper
/// nodes. Keep one only while the tiles do not change under it (one snapshot or transaction).
#[derive(Debug, Default)]
pub struct StoredTree {
    nodes: HashMap<(u32, u64), Hash>,
}

impl StoredTree {
    pub fn new() -> Self {
        StoredTree::default()
    }

    /// The root of the perfect subtree of `2^height` leaves at `index`.
    pub fn node<R: HashReader>(
        &mut self,
        reader: &mut R,
        height: u32,
        index: u64,
    ) -> Result<Hash, R::Error> {
        if let Some(node) = self.nodes.get(&(height, index)) {
            return Ok(*node);
        }
        // Its first leaf, index << height, must be a leaf index (below 2^64).
        if height >= u64::BITS || (height > 0 && index >> (u64::BITS - height) != 0) {
            return Err(Error::invalid(format!("no node {index} of height {height}")).into());
        }
        let (level, rest) = (height / TILE_HEIGHT, height % TILE_HEIGHT);
        let count = 1usize << rest;
        let hashes = reader.read_hashes(level, index << rest, count)?;
        if hashes.len() != count {
            return Err(Error::invalid(format!(
                "asked for {count} hashes of level {level}, read {}",
                hashes.len()
            ))
            .into());
        }
        let node = merkle::root_of_leaf_hashes(ALG, &hashes);
        if self.nodes.len() >= MAX_CACHED_NODES {
            self.nodes.clear();
        }
        self.nodes.insert((height, index), node);
        Ok(node)
    }

    /// The Merkle tree hash of leaves `[start, stop)`, `start` a multiple of the range's
    /// largest power of two (the only ranges RFC 9162's roots and proofs use).
    fn range_root<R: HashReader>(
        &mut self,
        reader: &mut R,
        start: u64,
        stop: u64,
    ) -> Result<Hash, R::Error> {
        let width = stop.checked_sub(start).filter(|&width| width > 0);
        let Some(width) = width else {
            return Err(Error::invalid(format!("no leaves in [{start}, {stop})")).into());
        };
        if width.is_power_of_two() {
            let height = width.trailing_zeros();
            return self.node(reader, height, start >> height);
        }
        let split = start + merkle::split_point_u64(width);
        let left = self.range_root(reader, start, split)?;
        let right = self.range_root(reader, split, stop)?;
        Ok(ALG.node_hash(&left, &right))
    }

    /// The roots of the perfect subtrees the first `size` leaves decompose into, largest
    /// first (the frontier an `IncrementalTree` of that size holds).
    pub fn frontier<R: HashReader>(
        &mut self,
        reader: &mut R,
        size: u64,
    ) -> Result<Vec<Hash>, R::Error> {
        let mut nodes = Vec::with_capacity(size.count_ones() as usize);
        let mut start = 0u64;
        for height in (0..u64::BITS)
            .rev()
            .filter(|&height| size >> height & 1 == 1)
        {
            nodes.push(self.node(reader, height, start >> height)?);
            start += 1 << height;
        }
        Ok(nodes)
    }

    /// The root of the tree of the first `size` leaves.
    pub fn root<R: HashReader>(&mut self, reader: &mut R, size: u64) -> Result<Hash, R::Error> {
        if size == 0 {
            return Ok(ALG.empty_root());
        }
        self.range_root(reader, 0, size)
    }

    /// RFC 9162 §2.1.3.1 PATH(index, D[0:size]), lowest level first.
    pub fn inclusion_proof<R: HashReader>(
        &mut self,
        reader: &mut R,
        index: u64,
        size: u64,
    ) -> Result<Vec<Hash>, R::Error> {
        let ranges = merkle::inclusion_proof_ranges(index, size)?;
        self.roots_of(reader, &ranges)
    }

    /// RFC 9162 §2.1.4.1 PROOF(old_size, D[0:new_size]).
    pub fn consistency_proof<R: HashReader>(
        &mut self,
        reader: &mut R,
        old_size: u64,
        new_size: u64,
    ) -> Result<Vec<Hash>, R::Error> {
        let ranges = merkle::consistency_proof_ranges(old_size, new_size)?;
        self.roots_of(reader, &ranges)
    }

    fn roots_of<R: HashReader>(
        &mut self,
        reader: &mut R,
        ranges: &[(u64, u64)],
    ) -> Result<Vec<Hash>, R::Error> {
        ranges
            .iter()
            .map(|&(start, stop)| self.range_root(reader, start, stop))
            .collect()
    }
}

/// The tiles of the tree of some leaf hashes, built in memory: the reference the tests
/// read the stored tree through.
#[cfg(test)]
pub(crate) mod in_memory {
    use super::*;

    /// Every level's stored hashes, as tiles hold them (edge tiles zero-filled on read).
    pub struct Tiles {
        pub levels: Vec<Vec<Hash>>,
        pub reads: usize,
    }

    impl Tiles {
        pub fn of(leaf_hashes: &[Hash]) -> Self {
            let mut levels = vec![leaf_hashes.to_vec()];
            loop {
                let below = levels.last().expect("level 0");
                let above: Vec<Hash> = below
                    .chunks_exact(TILE_WIDTH as usize)
                    .map(|tile| merkle::root_of_leaf_hashes(ALG, tile))
                    .collect();
                if above.is_empty() {
                    break;
                }
                levels.push(above);
            }
            Tiles { levels, reads: 0 }
        }

        /// Tile `index` of `level` as stored: full length, free slots zero.
        pub fn tile(&self, level: u32, index: u64) -> Vec<u8> {
            let Some(hashes) = self.levels.get(level as usize) else {
                return Vec::new();
            };
            let first = (index * TILE_WIDTH) as usize;
            if first >= hashes.len() {
                return Vec::new();
            }
            let mut tile: Vec<u8> =
                hashes[first..hashes.len().min(first + TILE_WIDTH as usize)].concat();
            tile.resize(TILE_BYTES, 0);
            tile
        }
    }

    impl HashReader for Tiles {
        type Error = Error;

        fn read_hashes(
            &mut self,
            level: u32,
            start: u64,
            count: usize,
        ) -> Result<Vec<Hash>, Error> {
            self.reads += 1;
            hashes_in_tile(&self.tile(level, start / TILE_WIDTH), level, start, count)
        }
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::in_memory::Tiles;
    use super::*;
    use crate::hash::testutil::{base64_decode, parse_json, read_vector};

    fn leaves(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("leaf {i}").into_bytes()).collect()
    }

    fn leaf_hashes(leaves: &[Vec<u8>]) -> Vec<Hash> {
        leaves.iter().map(|leaf| ALG.leaf_hash(leaf)).collect()
    }

    #[test]
    fn roots_and_proofs_from_the_tiles_equal_those_over_all_the_leaves() {
        let data = leaves(66_000);
        let mut tiles = Tiles::of(&leaf_hashes(&data));
        assert_eq!(tiles.levels.len(), 3, "past 256 * 256 leaves: three levels");
        let mut tree = StoredTree::new();
        for size in [
            1usize, 2, 3, 255, 256, 257, 511, 65_535, 65_536, 65_537, 66_000,
        ] {
            let n = size as u64;
            let all = &data[..size];
            assert_eq!(
                tree.root(&mut tiles, n).unwrap(),
                merkle::root(ALG, all),
                "{size}"
            );
            let mut incremental = merkle::IncrementalTree::new(ALG);
            for leaf in all {
                incremental.append(leaf).unwrap();
            }
            assert_eq!(
                tree.frontier(&mut tiles, n).unwrap(),
                incremental.frontier()
            );
            for index in [0, size / 3, size / 2, size - 1] {
                assert_eq!(
                    tree.inclusion_proof(&mut tiles, index as u64, n).unwrap(),
                    merkle::inclusion_proof(ALG, all, index as u64).unwrap(),
                    "{index} of {size}"
                );
            }
            for old in [0, 1, size / 3, size - 1, size] {
                assert_eq!(
                    tree.consistency_proof(&mut tiles, old as u64, n).unwrap(),
                    merkle::consistency_proof(ALG, all, old as u64).unwrap(),
                    "{old} to {size}"
                );
            }
        }
    }

    #[test]
    fn the_rfc6962_reference_tree_and_probe_proofs_come_out_of_its_tiles() {
        let reference = parse_json(&read_vector("rfc6962-merkle/reference_tree.json"));
        let data: Vec<Vec<u8>> = reference
            .get("leaves_hex")
            .arr()
            .iter()
            .map(|h| hex::decode(h.str()).unwrap())
            .collect();
        let mut tiles = Tiles::of(&leaf_hashes(&data));
        let mut tree = StoredTree::new();
        let roots = reference.get("roots_by_size_hex").obj();
        assert_eq!(roots.len(), 8);
        for (size, want) in roots {
            let root = tree.root(&mut tiles, size.parse().unwrap()).unwrap();
            assert_eq!(hex::encode(root), want.str());
        }
        let empty = tree.root(&mut tiles, 0).unwrap();
        assert_eq!(hex::encode(empty), reference.get("empty_root_hex").str());
        let proof_of = |probe: &crate::hash::testutil::Json| -> Vec<Hash> {
            let nodes = probe.get("proof").arr().iter();
            nodes
                .map(|node| base64_decode(node.str()).try_into().unwrap())
                .collect()
        };
        for case in 0..5 {
            let probe = |kind: &str| {
                let path = format!("rfc6962-merkle/testdata/{kind}/{case}/happy-path.json");
                parse_json(&read_vector(&path))
            };
            let inclusion = probe("inclusion");
            let (index, size) = (
                inclusion.get("leafIdx").int(),
                inclusion.get("treeSize").int(),
            );
            assert_eq!(
                tree.inclusion_proof(&mut tiles, index as u64, size as u64)
                    .unwrap(),
                proof_of(&inclusion),
                "inclusion {case}"
            );
            let consistency = probe("consistency");
            let (old, new) = (
                consistency.get("size1").int(),
                consistency.get("size2").int(),
            );
            assert_eq!(
                tree.consistency_proof(&mut tiles, old as u64, new as u64)
                    .unwrap(),
                proof_of(&consistency),
                "consistency {case}"
            );
        }
    }

    #[test]
    fn upper_nodes_are_read_once_for_many_proofs() {
        let mut tiles = Tiles::of(&leaf_hashes(&leaves(70_000)));
        let mut tree = StoredTree::new();
        tree.inclusion_proof(&mut tiles, 4, 70_000).unwrap();
        let first = tiles.reads;
        tree.inclusion_proof(&mut tiles, 5, 70_000).unwrap();
        // Leaf 5's path differs from leaf 4's in its lowest node only.
        assert_eq!(tiles.reads - first, 1);
    }

    #[test]
    fn a_short_tile_a_missing_hash_or_a_missing_row_is_log_damaged() {
        let mut tile = vec![7u8; 3 * HASH_LEN];
        tile.resize(TILE_BYTES, 0);
        assert_eq!(hashes_in_tile(&tile, 0, 0, 3).unwrap().len(), 3);
        let damaged = |result: Result<Vec<Hash>, Error>| match result {
            Err(Error::LogDamaged(why)) => why,
            other => panic!("not damage: {other:?}"),
        };
        assert_eq!(
            damaged(hashes_in_tile(&tile, 0, 0, 4)),
            "level 0 has no hash 3"
        );
        assert_eq!(
            damaged(hashes_in_tile(&tile, 2, 259, 1)),
            "level 2 has no hash 259"
        );
        assert_eq!(
            damaged(hashes_in_tile(&tile[..100], 1, 512, 1)),
            "tile 1/2 is 100 bytes, not 8192"
        );
        assert_eq!(
            damaged(hashes_in_tile(&[], 0, 0, 1)),
            "tile 0/0 is 0 bytes, not 8192"
        );
        assert!(matches!(
            hashes_in_tile(&tile, 0, 255, 2),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            hashes_in_tile(&tile, 0, 0, 0),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn proofs_past_the_stored_tiles_are_errors_not_panics() {
        let mut tiles = Tiles::of(&leaf_hashes(&leaves(300)));
        let mut tree = StoredTree::new();
        for size in [301u64, 512, 1 << 20, u64::MAX] {
            assert!(
                matches!(tree.root(&mut tiles, size), Err(Error::LogDamaged(_))),
                "{size}"
            );
            assert!(tree.frontier(&mut tiles, size).is_err());
            // Leaf 0's path holds the root of the leaves from 256 on: 300 is not stored.
            assert!(tree.inclusion_proof(&mut tiles, 0, size).is_err());
            assert!(tree.consistency_proof(&mut tiles, 3, size).is_err());
        }
        assert!(matches!(
            tree.inclusion_proof(&mut tiles, 300, 300),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            tree.consistency_proof(&mut tiles, 5, 4),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            tree.node(&mut tiles, 64, 0),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            tree.node(&mut tiles, 8, u64::MAX),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(tree.root(&mut tiles, 0).unwrap(), ALG.empty_root());
        assert!(tree.frontier(&mut tiles, 0).unwrap().is_empty());
    }

    #[test]
    fn a_reader_answering_the_wrong_count_is_an_error() {
        struct Short;
        impl HashReader for Short {
            type Error = Error;
            fn read_hashes(&mut self, _: u32, _: u64, _: usize) -> Result<Vec<Hash>, Error> {
                Ok(Vec::new())
            }
        }
        assert!(StoredTree::new().root(&mut Short, 5).is_err());
    }
}
