//! Merkle trees with the RFC 9162 (Certificate Transparency v2) shape.
//!
//! - leaf hash `H(0x00 || leaf)`, interior node `H(0x01 || left || right)`;
//! - the root of the empty tree is `H("")`;
//! - a tree of `n > 1` leaves splits at `k`, the largest power of two strictly below `n`.
//!
//! `H` is SHA-256 by default (RFC 6962, as every C2SP log and the public vectors); BLAKE3 is
//! selectable for the workspace log's tree before schema 6. Both produce 32-byte digests, so every node is a [`Hash`].
//!
//! Proofs follow RFC 9162 §2.1.3 (inclusion) and §2.1.4 (consistency). Verification never
//! panics on hostile input: malformed sizes, indices, proof lengths or node lengths all
//! just return `false`. The edge cases, which match the transparency-dev/merkle probes in
//! `tests/vectors/rfc6962-merkle/testdata/`:
//!
//! - inclusion: `index >= size` is `false` (so the empty tree proves nothing);
//! - consistency, `old_size > new_size`: `false`;
//! - consistency, `old_size == new_size`: the proof must be empty and the roots equal, and
//!   for size 0 the root must be the empty-tree hash;
//! - consistency, `0 == old_size < new_size`: every tree extends the empty tree, so the
//!   proof must be empty, `old_root` must be the empty-tree hash and `new_root` must at
//!   least be a digest (32 bytes); nothing more can be checked.
//!
//! [`IncrementalTree`] keeps only the frontier: the roots of the perfect subtrees that
//! the leaves decompose into (one per set bit of the size, largest first), O(log n) state.

use crate::error::{Error, Result};

/// A node of the tree: both supported hashes have 32-byte digests.
pub type Hash = [u8; 32];

/// Length of every node, root and proof element.
pub const HASH_LEN: usize = 32;

pub const LEAF_PREFIX: u8 = 0x00;
const NODE_PREFIX: u8 = 0x01;

/// The hash function of a tree. Small and `Copy`, so every tree and proof routine is
/// parameterised by a value rather than a type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HashAlg {
    /// The workspace log's tree before schema 6.
    Blake3,
    /// RFC 6962 / C2SP: the workspace log's tree, and the public test vectors'.
    #[default]
    Sha256,
}

impl HashAlg {
    /// Parse `"blake3"` or `"sha256"`; anything else is an invalid argument.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "blake3" => Ok(HashAlg::Blake3),
            "sha256" => Ok(HashAlg::Sha256),
            other => Err(Error::invalid(format!(
                "unknown Merkle hash {other:?} (expected \"blake3\" or \"sha256\")"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HashAlg::Blake3 => "blake3",
            HashAlg::Sha256 => "sha256",
        }
    }

    fn hash_parts(self, parts: &[&[u8]]) -> Hash {
        match self {
            HashAlg::Blake3 => {
                let mut hasher = blake3::Hasher::new();
                for part in parts {
                    hasher.update(part);
                }
                *hasher.finalize().as_bytes()
            }
            HashAlg::Sha256 => {
                use sha2::Digest;
                let mut hasher = sha2::Sha256::new();
                for part in parts {
                    hasher.update(part);
                }
                hasher.finalize().into()
            }
        }
    }

    /// Root of the empty tree: `H("")`.
    pub fn empty_root(self) -> Hash {
        self.hash_parts(&[])
    }

    /// `H(0x00 || leaf)`.
    pub fn leaf_hash(self, leaf: &[u8]) -> Hash {
        self.hash_parts(&[&[LEAF_PREFIX], leaf])
    }

    /// `H(0x01 || left || right)`.
    pub fn node_hash(self, left: &Hash, right: &Hash) -> Hash {
        self.hash_parts(&[&[NODE_PREFIX], left, right])
    }
}

/// Largest power of two strictly below `n` (requires `n >= 2`).
fn split_point(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// Merkle Tree Hash of a range of already-hashed leaves (RFC 9162 §2.1.1).
fn subtree_root(alg: HashAlg, leaf_hashes: &[Hash]) -> Hash {
    match leaf_hashes.len() {
        0 => alg.empty_root(),
        1 => leaf_hashes[0],
        n => {
            let k = split_point(n);
            alg.node_hash(
                &subtree_root(alg, &leaf_hashes[..k]),
                &subtree_root(alg, &leaf_hashes[k..]),
            )
        }
    }
}

fn leaf_hashes<L: AsRef<[u8]>>(alg: HashAlg, leaves: &[L]) -> Vec<Hash> {
    leaves
        .iter()
        .map(|leaf| alg.leaf_hash(leaf.as_ref()))
        .collect()
}

/// Merkle Tree Hash of leaves given by their leaf hashes: the same tree as [`root`],
/// without hashing the leaves again. The workspace log's tiles hold such hashes, 256 to a
/// tile, and a subtree's root is rebuilt from the tile that holds its children.
pub fn root_of_leaf_hashes(alg: HashAlg, leaf_hashes: &[Hash]) -> Hash {
    subtree_root(alg, leaf_hashes)
}

/// Merkle Tree Hash of `leaves` (the leaf data, not their hashes).
pub fn root<L: AsRef<[u8]>>(alg: HashAlg, leaves: &[L]) -> Hash {
    // The frontier walk computes exactly the RFC tree with n - 1 node hashes and no recursion.
    let mut tree = IncrementalTree::new(alg);
    for leaf in leaves {
        tree.push_leaf_hash(alg.leaf_hash(leaf.as_ref()));
    }
    tree.root()
}

/// The leaf ranges `[start, stop)` whose subtree roots make the audit path of leaf
/// `index` in a tree of `size` leaves (RFC 9162 §2.1.3.1), lowest level first. A proof is
/// these ranges' roots wherever the hashes live (all leaves here, stored tiles elsewhere).
pub fn inclusion_proof_ranges(index: u64, size: u64) -> Result<Vec<(u64, u64)>> {
    if index >= size {
        return Err(Error::invalid(format!(
            "leaf index {index} out of range for a tree of {size} leaves"
        )));
    }
    let mut ranges = Vec::new();
    let (mut start, mut stop) = (0u64, size);
    while stop - start > 1 {
        let split = start + split_point_u64(stop - start);
        if index < split {
            ranges.push((split, stop));
            stop = split;
        } else {
            ranges.push((start, split));
            start = split;
        }
    }
    ranges.reverse();
    Ok(ranges)
}

/// The leaf ranges whose roots make the consistency proof from `old_size` to `new_size`
/// leaves (RFC 9162 §2.1.4.1 SUBPROOF), in proof order. Empty when `old_size` is 0 or
/// equals `new_size`.
pub fn consistency_proof_ranges(old_size: u64, new_size: u64) -> Result<Vec<(u64, u64)>> {
    if old_size > new_size {
        return Err(Error::invalid(format!(
            "old size {old_size} exceeds the tree size {new_size}"
        )));
    }
    let mut ranges = Vec::new();
    if old_size == 0 || old_size == new_size {
        return Ok(ranges);
    }
    let (mut start, mut stop, mut complete) = (0u64, new_size, true);
    loop {
        if old_size - start == stop - start {
            if !complete {
                ranges.push((start, stop));
            }
            break;
        }
        let split = start + split_point_u64(stop - start);
        if old_size <= split {
            ranges.push((split, stop));
            stop = split;
        } else {
            ranges.push((start, split));
            start = split;
            complete = false;
        }
    }
    ranges.reverse();
    Ok(ranges)
}

/// [`split_point`] for a `u64` width (requires `n >= 2`).
pub(crate) fn split_point_u64(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1 << (u64::BITS - 1 - (n - 1).leading_zeros())
}

/// Audit path for leaf `index` (RFC 9162 §2.1.3.1), lowest level first.
pub fn inclusion_proof<L: AsRef<[u8]>>(
    alg: HashAlg,
    leaves: &[L],
    index: u64,
) -> Result<Vec<Hash>> {
    let ranges = inclusion_proof_ranges(index, leaves.len() as u64)?;
    let hashes = leaf_hashes(alg, leaves);
    Ok(roots_of(alg, &hashes, &ranges))
}

/// The subtree root of each leaf range.
fn roots_of(alg: HashAlg, leaf_hashes: &[Hash], ranges: &[(u64, u64)]) -> Vec<Hash> {
    ranges
        .iter()
        .map(|&(start, stop)| subtree_root(alg, &leaf_hashes[start as usize..stop as usize]))
        .collect()
}

/// Consistency proof between the first `old_size` leaves and all of `leaves`
/// (RFC 9162 §2.1.4.1). Empty when `old_size` is 0 or equals the tree size.
pub fn consistency_proof<L: AsRef<[u8]>>(
    alg: HashAlg,
    leaves: &[L],
    old_size: u64,
) -> Result<Vec<Hash>> {
    let ranges = consistency_proof_ranges(old_size, leaves.len() as u64)?;
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    let hashes = leaf_hashes(alg, leaves);
    Ok(roots_of(alg, &hashes, &ranges))
}

fn as_node(bytes: &[u8]) -> Option<&Hash> {
    bytes.try_into().ok()
}

/// Check that leaf data `leaf` is at `index` in the tree of `size` leaves with `root`.
pub fn verify_inclusion<P: AsRef<[u8]>>(
    alg: HashAlg,
    leaf: &[u8],
    index: u64,
    size: u64,
    proof: &[P],
    root: &[u8],
) -> bool {
    verify_inclusion_leaf_hash(alg, &alg.leaf_hash(leaf), index, size, proof, root)
}

/// [`verify_inclusion`] for a caller that holds the leaf hash `H(0x00 || leaf)` rather than
/// the leaf data (as the RFC 6962 probe files do). A `leaf_hash` that is not 32 bytes is
/// rejected.
pub fn verify_inclusion_leaf_hash<P: AsRef<[u8]>>(
    alg: HashAlg,
    leaf_hash: &[u8],
    index: u64,
    size: u64,
    proof: &[P],
    root: &[u8],
) -> bool {
    // RFC 9162 §2.1.3.2.
    if index >= size {
        return false;
    }
    let Some(leaf_hash) = as_node(leaf_hash) else {
        return false;
    };
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = *leaf_hash;
    for p in proof {
        let Some(p) = as_node(p.as_ref()) else {
            return false;
        };
        if snode == 0 {
            return false;
        }
        if fnode & 1 == 1 || fnode == snode {
            r = alg.node_hash(p, &r);
            if fnode & 1 == 0 {
                while fnode & 1 == 0 && fnode != 0 {
                    fnode >>= 1;
                    snode >>= 1;
                }
            }
        } else {
            r = alg.node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    snode == 0 && r[..] == *root
}

/// Check that the tree of `new_size` leaves with `new_root` extends the tree of
/// `old_size` leaves with `old_root` (RFC 9162 §2.1.4.2, edge cases in the module docs).
pub fn verify_consistency<P: AsRef<[u8]>>(
    alg: HashAlg,
    old_size: u64,
    new_size: u64,
    old_root: &[u8],
    new_root: &[u8],
    proof: &[P],
) -> bool {
    if old_size > new_size {
        return false;
    }
    if old_size == new_size {
        return proof.is_empty()
            && old_root == new_root
            && (old_size > 0 || old_root == alg.empty_root());
    }
    if old_size == 0 {
        return proof.is_empty() && old_root == alg.empty_root() && new_root.len() == HASH_LEN;
    }
    if proof.is_empty() {
        return false;
    }
    let mut nodes: Vec<&Hash> = Vec::with_capacity(proof.len() + 1);
    for p in proof {
        match as_node(p.as_ref()) {
            Some(node) => nodes.push(node),
            None => return false,
        }
    }
    let Some(old_root_node) = as_node(old_root) else {
        return false;
    };
    if old_size.is_power_of_two() {
        nodes.insert(0, old_root_node);
    }
    let (mut fnode, mut snode) = (old_size - 1, new_size - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let mut fr = *nodes[0];
    let mut sr = *nodes[0];
    for c in &nodes[1..] {
        if snode == 0 {
            return false;
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = alg.node_hash(c, &fr);
            sr = alg.node_hash(c, &sr);
            if fnode & 1 == 0 {
                while fnode & 1 == 0 && fnode != 0 {
                    fnode >>= 1;
                    snode >>= 1;
                }
            }
        } else {
            sr = alg.node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    snode == 0 && fr[..] == *old_root && sr[..] == *new_root
}

/// An append-only Merkle tree that stores only its frontier.
///
/// `frontier[i]` is the root of the i-th perfect subtree from the left; their sizes are the
/// set bits of `size` from the most significant down, so `frontier.len() == size.count_ones()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncrementalTree {
    alg: HashAlg,
    size: u64,
    frontier: Vec<Hash>,
}

impl IncrementalTree {
    pub fn new(alg: HashAlg) -> Self {
        IncrementalTree {
            alg,
            size: 0,
            frontier: Vec::new(),
        }
    }

    /// Restore a tree from its `size` and `frontier` (as returned by [`Self::frontier`]).
    /// Fails unless the frontier has exactly `size.count_ones()` elements.
    pub fn from_state(alg: HashAlg, size: u64, frontier: Vec<Hash>) -> Result<Self> {
        let expected = size.count_ones() as usize;
        if frontier.len() != expected {
            return Err(Error::invalid(format!(
                "a tree of size {size} has a frontier of {expected} hashes, got {}",
                frontier.len()
            )));
        }
        Ok(IncrementalTree {
            alg,
            size,
            frontier,
        })
    }

    pub fn alg(&self) -> HashAlg {
        self.alg
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn frontier(&self) -> &[Hash] {
        &self.frontier
    }

    /// Append leaf data; returns the new leaf's index. Fails only if the tree already
    /// holds 2^64 - 1 leaves.
    pub fn append(&mut self, leaf: &[u8]) -> Result<u64> {
        self.append_leaf_hash(self.alg.leaf_hash(leaf))
    }

    /// Append a leaf given its leaf hash `H(0x00 || leaf)`; returns its index.
    pub fn append_leaf_hash(&mut self, leaf_hash: Hash) -> Result<u64> {
        if self.size == u64::MAX {
            return Err(Error::invalid("the Merkle tree is full"));
        }
        Ok(self.push_leaf_hash(leaf_hash))
    }

    fn push_leaf_hash(&mut self, leaf_hash: Hash) -> u64 {
        let index = self.size;
        let mut node = leaf_hash;
        // Each trailing one bit of the old size is a perfect subtree of the same height as
        // `node`: merge them, exactly as a binary counter carries.
        let mut carries = index.trailing_ones();
        while carries > 0 {
            let left = self
                .frontier
                .pop()
                .expect("frontier holds one hash per set bit");
            node = self.alg.node_hash(&left, &node);
            carries -= 1;
        }
        self.frontier.push(node);
        self.size = index + 1;
        index
    }

    /// The Merkle Tree Hash of all leaves so far (equal to [`root`] over the same leaves).
    pub fn root(&self) -> Hash {
        let mut subtrees = self.frontier.iter().rev();
        match subtrees.next() {
            None => self.alg.empty_root(),
            Some(&last) => subtrees.fold(last, |acc, left| self.alg.node_hash(left, &acc)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::testutil::{base64_decode, parse_json, read_vector, Json};

    const ALGS: [HashAlg; 2] = [HashAlg::Blake3, HashAlg::Sha256];

    fn leaves(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("leaf {i}").into_bytes()).collect()
    }

    #[test]
    fn hash_names_parse_and_unknown_names_fail() {
        assert_eq!(HashAlg::from_name("blake3").unwrap(), HashAlg::Blake3);
        assert_eq!(HashAlg::from_name("sha256").unwrap(), HashAlg::Sha256);
        assert!(HashAlg::from_name("SHA256").is_err());
        assert!(HashAlg::from_name("md5").is_err());
        assert_eq!(HashAlg::default(), HashAlg::Sha256);
    }

    #[test]
    fn split_point_is_largest_power_of_two_below_n() {
        for (n, k) in [(2, 1), (3, 2), (4, 2), (5, 4), (8, 4), (9, 8), (1000, 512)] {
            assert_eq!(split_point(n), k, "n = {n}");
        }
    }

    #[test]
    fn sha256_roots_match_rfc6962_reference_tree() {
        let reference = parse_json(&read_vector("rfc6962-merkle/reference_tree.json"));
        let data: Vec<Vec<u8>> = reference
            .get("leaves_hex")
            .arr()
            .iter()
            .map(|h| hex::decode(h.str()).unwrap())
            .collect();
        assert_eq!(
            hex::encode(root::<Vec<u8>>(HashAlg::Sha256, &[])),
            reference.get("empty_root_hex").str()
        );
        let roots = reference.get("roots_by_size_hex").obj();
        assert_eq!(roots.len(), 8);
        for (size, want) in roots {
            let size: usize = size.parse().unwrap();
            assert_eq!(
                hex::encode(root(HashAlg::Sha256, &data[..size])),
                want.str()
            );
            let mut tree = IncrementalTree::new(HashAlg::Sha256);
            for leaf in &data[..size] {
                tree.append(leaf).unwrap();
            }
            assert_eq!(hex::encode(tree.root()), want.str());
        }
    }

    /// Every `*.json` file under `dir` (recursively), sorted for stable failure messages.
    fn probe_files(dir: &str) -> Vec<(String, Json)> {
        fn walk(path: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(path).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|e| e == "json") {
                    out.push(p);
                }
            }
        }
        let base = format!(
            "{}/../../tests/vectors/rfc6962-merkle/testdata/{dir}",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut paths = Vec::new();
        walk(std::path::Path::new(&base), &mut paths);
        paths.sort();
        paths
            .into_iter()
            .map(|p| {
                let text = std::fs::read_to_string(&p).unwrap();
                (p.display().to_string(), parse_json(&text))
            })
            .collect()
    }

    fn b64_list(value: &Json) -> Vec<Vec<u8>> {
        value.arr().iter().map(|p| base64_decode(p.str())).collect()
    }

    #[test]
    fn inclusion_probes_from_transparency_dev_decide_as_expected() {
        let probes = probe_files("inclusion");
        assert!(probes.len() >= 95, "only {} probes", probes.len());
        let mut accepted = 0;
        for (path, probe) in &probes {
            let index = probe.get("leafIdx").int();
            let size = probe.get("treeSize").int();
            let ok = verify_inclusion_leaf_hash(
                HashAlg::Sha256,
                &base64_decode(probe.get("leafHash").str()),
                u64::try_from(index).unwrap(),
                u64::try_from(size).unwrap(),
                &b64_list(probe.get("proof")),
                &base64_decode(probe.get("root").str()),
            );
            assert_eq!(ok, !probe.get("wantErr").bool(), "{path}");
            accepted += ok as usize;
        }
        assert!(accepted >= 6, "the happy paths must be among the probes");
    }

    #[test]
    fn consistency_probes_from_transparency_dev_decide_as_expected() {
        let probes = probe_files("consistency");
        assert!(probes.len() >= 90, "only {} probes", probes.len());
        let mut accepted = 0;
        for (path, probe) in &probes {
            let ok = verify_consistency(
                HashAlg::Sha256,
                u64::try_from(probe.get("size1").int()).unwrap(),
                u64::try_from(probe.get("size2").int()).unwrap(),
                &base64_decode(probe.get("root1").str()),
                &base64_decode(probe.get("root2").str()),
                &b64_list(probe.get("proof")),
            );
            assert_eq!(ok, !probe.get("wantErr").bool(), "{path}");
            accepted += ok as usize;
        }
        assert!(accepted >= 5, "the happy paths must be among the probes");
    }

    #[test]
    fn generated_proofs_reproduce_the_rfc6962_probe_proofs() {
        let reference = parse_json(&read_vector("rfc6962-merkle/reference_tree.json"));
        let data: Vec<Vec<u8>> = reference
            .get("leaves_hex")
            .arr()
            .iter()
            .map(|h| hex::decode(h.str()).unwrap())
            .collect();
        for (path, probe) in probe_files("inclusion") {
            if !path.ends_with("happy-path.json") {
                continue;
            }
            let size = probe.get("treeSize").int() as usize;
            let index = probe.get("leafIdx").int() as u64;
            let proof = inclusion_proof(HashAlg::Sha256, &data[..size], index).unwrap();
            let want = b64_list(probe.get("proof"));
            assert_eq!(
                proof.iter().map(|p| p.to_vec()).collect::<Vec<_>>(),
                want,
                "{path}"
            );
        }
        for (path, probe) in probe_files("consistency") {
            if !path.ends_with("happy-path.json") {
                continue;
            }
            let size2 = probe.get("size2").int() as usize;
            let size1 = probe.get("size1").int() as u64;
            let proof = consistency_proof(HashAlg::Sha256, &data[..size2], size1).unwrap();
            let want = b64_list(probe.get("proof"));
            assert_eq!(
                proof.iter().map(|p| p.to_vec()).collect::<Vec<_>>(),
                want,
                "{path}"
            );
        }
    }

    #[test]
    fn incremental_root_equals_batch_root_for_sizes_0_to_300() {
        for alg in ALGS {
            let data = leaves(300);
            let mut tree = IncrementalTree::new(alg);
            let hashes = leaf_hashes(alg, &data);
            for n in 0..=300usize {
                assert_eq!(tree.size(), n as u64);
                assert_eq!(tree.frontier().len(), n.count_ones() as usize);
                let want = subtree_root(alg, &hashes[..n]);
                assert_eq!(tree.root(), want, "{alg:?} size {n}");
                assert_eq!(root(alg, &data[..n]), want, "{alg:?} size {n}");
                // Restoring from the state gives the same tree.
                let restored =
                    IncrementalTree::from_state(alg, tree.size(), tree.frontier().to_vec())
                        .unwrap();
                assert_eq!(restored.root(), want);
                if n < 300 {
                    assert_eq!(tree.append(&data[n]).unwrap(), n as u64);
                }
            }
        }
    }

    #[test]
    fn from_state_rejects_a_frontier_of_the_wrong_length() {
        let alg = HashAlg::Blake3;
        assert!(IncrementalTree::from_state(alg, 0, vec![]).is_ok());
        assert!(IncrementalTree::from_state(alg, 0, vec![[0; 32]]).is_err());
        assert!(IncrementalTree::from_state(alg, 5, vec![[0; 32]]).is_err());
        assert!(IncrementalTree::from_state(alg, 5, vec![[0; 32]; 2]).is_ok());
        assert!(IncrementalTree::from_state(alg, u64::MAX, vec![[0; 32]; 63]).is_err());
        let mut full = IncrementalTree::from_state(alg, u64::MAX, vec![[0; 32]; 64]).unwrap();
        assert!(full.append(b"x").is_err());
        let mut almost = IncrementalTree::from_state(alg, u64::MAX - 1, vec![[0; 32]; 63]).unwrap();
        assert_eq!(almost.append(b"x").unwrap(), u64::MAX - 1);
        assert_eq!(almost.frontier().len(), 64);
    }

    fn flip_each_byte_of(proof: &[Hash], mut check: impl FnMut(&[Hash])) {
        for i in 0..proof.len() {
            for byte in [0, 17, 31] {
                let mut tampered = proof.to_vec();
                tampered[i][byte] ^= 0x01;
                check(&tampered);
            }
        }
    }

    #[test]
    fn every_inclusion_proof_verifies_and_tampering_fails() {
        for alg in ALGS {
            for size in 1..=64usize {
                let data = leaves(size);
                let tree_root = root(alg, &data);
                for index in 0..size {
                    let proof = inclusion_proof(alg, &data, index as u64).unwrap();
                    let (i, n) = (index as u64, size as u64);
                    assert!(
                        verify_inclusion(alg, &data[index], i, n, &proof, &tree_root),
                        "{alg:?} {index}/{size}"
                    );
                    assert!(!verify_inclusion(alg, b"other", i, n, &proof, &tree_root));
                    if size > 1 {
                        let j = (i + 1) % n;
                        assert!(!verify_inclusion(
                            alg,
                            &data[index],
                            j,
                            n,
                            &proof,
                            &tree_root
                        ));
                    }
                    assert!(!verify_inclusion(
                        alg,
                        &data[index],
                        n,
                        n,
                        &proof,
                        &tree_root
                    ));
                    let mut bad_root = tree_root;
                    bad_root[0] ^= 0x80;
                    assert!(!verify_inclusion(
                        alg,
                        &data[index],
                        i,
                        n,
                        &proof,
                        &bad_root
                    ));
                    flip_each_byte_of(&proof, |tampered| {
                        assert!(!verify_inclusion(
                            alg,
                            &data[index],
                            i,
                            n,
                            tampered,
                            &tree_root
                        ));
                    });
                    let mut longer = proof.clone();
                    longer.push(tree_root);
                    assert!(!verify_inclusion(
                        alg,
                        &data[index],
                        i,
                        n,
                        &longer,
                        &tree_root
                    ));
                    if !proof.is_empty() {
                        let shorter = &proof[..proof.len() - 1];
                        assert!(!verify_inclusion(
                            alg,
                            &data[index],
                            i,
                            n,
                            shorter,
                            &tree_root
                        ));
                        let mut short_node: Vec<Vec<u8>> =
                            proof.iter().map(|p| p.to_vec()).collect();
                        short_node[0].pop();
                        assert!(!verify_inclusion(
                            alg,
                            &data[index],
                            i,
                            n,
                            &short_node,
                            &tree_root
                        ));
                    }
                }
                assert!(inclusion_proof(alg, &data, size as u64).is_err());
                assert!(inclusion_proof(alg, &data, u64::MAX).is_err());
            }
            assert!(inclusion_proof::<Vec<u8>>(alg, &[], 0).is_err());
        }
    }

    #[test]
    fn every_consistency_proof_verifies_and_tampering_fails() {
        for alg in ALGS {
            let data = leaves(64);
            let roots: Vec<Hash> = (0..=64).map(|n| root(alg, &data[..n])).collect();
            for new_size in 0..=64usize {
                for old_size in 0..=new_size {
                    let proof = consistency_proof(alg, &data[..new_size], old_size as u64).unwrap();
                    let (m, n) = (old_size as u64, new_size as u64);
                    let (old_root, new_root) = (&roots[old_size], &roots[new_size]);
                    assert!(
                        verify_consistency(alg, m, n, old_root, new_root, &proof),
                        "{alg:?} {old_size} -> {new_size}"
                    );
                    flip_each_byte_of(&proof, |tampered| {
                        assert!(!verify_consistency(alg, m, n, old_root, new_root, tampered));
                    });
                    let mut bad = *old_root;
                    bad[5] ^= 4;
                    assert!(!verify_consistency(alg, m, n, &bad, new_root, &proof));
                    let mut bad = *new_root;
                    bad[5] ^= 4;
                    // From the empty tree nothing about the new root can be checked.
                    let checks_new_root = old_size > 0 || new_size == 0;
                    assert_eq!(
                        verify_consistency(alg, m, n, old_root, &bad, &proof),
                        !checks_new_root
                    );
                    if old_size < new_size {
                        assert!(!verify_consistency(alg, n, m, new_root, old_root, &proof));
                        let mut longer = proof.clone();
                        longer.push(*new_root);
                        assert!(!verify_consistency(alg, m, n, old_root, new_root, &longer));
                    }
                    if old_size > 0 && old_size < new_size {
                        assert!(!verify_consistency(
                            alg,
                            m,
                            n,
                            old_root,
                            new_root,
                            &proof[1..]
                        ));
                    }
                }
                assert!(consistency_proof(alg, &data[..new_size], new_size as u64 + 1).is_err());
            }
        }
    }

    #[test]
    fn root_of_leaf_hashes_equals_root_of_the_leaves() {
        for alg in [HashAlg::Blake3, HashAlg::Sha256] {
            for n in 0..70 {
                let data = leaves(n);
                let hashed = leaf_hashes(alg, &data);
                assert_eq!(
                    root_of_leaf_hashes(alg, &hashed),
                    root(alg, &data),
                    "n = {n}"
                );
            }
        }
    }

    #[test]
    fn empty_tree_edge_cases() {
        for alg in ALGS {
            let empty = alg.empty_root();
            assert_eq!(root::<&[u8]>(alg, &[]), empty);
            assert_eq!(IncrementalTree::new(alg).root(), empty);
            let no_proof: &[Hash] = &[];
            assert!(verify_consistency(alg, 0, 0, &empty, &empty, no_proof));
            assert!(!verify_consistency(alg, 0, 0, b"x", b"x", no_proof));
            let one = root(alg, &[b"a"]);
            assert!(verify_consistency(alg, 0, 1, &empty, &one, no_proof));
            assert!(!verify_consistency(alg, 0, 1, &one, &one, no_proof));
            assert!(!verify_consistency(alg, 0, 1, &empty, &one, &[one]));
            assert!(!verify_inclusion(alg, b"a", 0, 0, no_proof, &empty));
            assert!(verify_inclusion(alg, b"a", 0, 1, no_proof, &one));
        }
    }
}
