//! Property tests: roots and proofs read from the tiles against the in-memory tree of
//! `merkle.rs` (the reference), at random sizes across three tile levels.

use std::sync::OnceLock;

use proptest::prelude::*;

use super::in_memory::Tiles;
use super::{StoredTree, ALG};
use crate::merkle::{self, Hash};

/// Past 256 * 256 leaves: sizes reach the third level.
const LEAVES: usize = 70_000;

fn leaves() -> &'static (Vec<Vec<u8>>, Vec<Hash>) {
    static LEAVES_AND_HASHES: OnceLock<(Vec<Vec<u8>>, Vec<Hash>)> = OnceLock::new();
    LEAVES_AND_HASHES.get_or_init(|| {
        let data: Vec<Vec<u8>> = (0..LEAVES)
            .map(|i| format!("leaf {i}").into_bytes())
            .collect();
        let hashes = data.iter().map(|leaf| ALG.leaf_hash(leaf)).collect();
        (data, hashes)
    })
}

fn cases() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(48)
    }
}

/// A size, a leaf below it and an older size, biased to tile edges some of the time.
fn size_index_old() -> impl Strategy<Value = (u64, u64, u64)> {
    let edge = proptest::sample::select(vec![1u64, 255, 256, 257, 65_535, 65_536, 65_537]);
    prop_oneof![1 => edge, 3 => 1..=LEAVES as u64]
        .prop_flat_map(|size| (Just(size), 0..size, 0..=size))
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn the_stored_tree_proves_what_the_whole_tree_proves((size, index, old) in size_index_old()) {
        let (data, hashes) = leaves();
        let all = &data[..size as usize];
        // Tiles of more leaves than the size: what an older size reads from a grown log.
        let mut tiles = Tiles::of(&hashes[..(size as usize + 300).min(LEAVES)]);
        let mut tree = StoredTree::new();
        prop_assert_eq!(tree.root(&mut tiles, size).unwrap(), merkle::root(ALG, all));
        prop_assert_eq!(
            tree.inclusion_proof(&mut tiles, index, size).unwrap(),
            merkle::inclusion_proof(ALG, all, index).unwrap()
        );
        prop_assert_eq!(
            tree.consistency_proof(&mut tiles, old, size).unwrap(),
            merkle::consistency_proof(ALG, all, old).unwrap()
        );
        let mut incremental = merkle::IncrementalTree::new(ALG);
        for leaf in all {
            incremental.append(leaf).unwrap();
        }
        prop_assert_eq!(tree.frontier(&mut tiles, size).unwrap(), incremental.frontier());
    }
}
