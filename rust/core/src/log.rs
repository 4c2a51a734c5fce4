//! The workspace log: one leaf per journal entry, in append order, an RFC 6962 tree with
//! SHA-256 ([`crate::merkle`]), as C2SP tlog-tiles logs are. How an entry becomes a leaf, how leaves extend a tree, and the
//! assembler that rebuilds the tree from leaves read in any order.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use rayon::prelude::*;

use crate::canonical;
use crate::hash::{self, many};
use crate::journal::{EntryRow, HASH_MANY_ROWS};
use crate::merkle::{self, Hash, HashAlg, IncrementalTree};
use crate::Result;

/// The hash of the workspace log's tree: RFC 6962 with SHA-256, as every C2SP log.
pub const LOG_ALG: HashAlg = HashAlg::Sha256;

/// The domain of a leaf of the log before schema 6: `domain_hash("log-leaf", …)`.
pub const LEGACY_LEAF_DOMAIN: &str = "log-leaf";

/// Below this many rows, leaf hashing stays on the calling thread (an append is small).
const PARALLEL_LEAVES: usize = 512;

/// The leaf of one entry in the workspace log: its log-leaf document, the JCS bytes of
/// `{"entry": "blake3:<hex>", "run": run, "seq": seq}`. The tree hashes it as
/// `SHA-256(0x00 || leaf)`, so any RFC 6962 client recomputes the leaf hash from it.
///
/// The object is written directly (its keys are already in JCS order); `seq` is a
/// non-negative integer below 2^53 for every real entry, where decimal is its JCS form.
pub fn log_leaf(run_id: &str, seq: i64, entry_hash: &[u8]) -> Vec<u8> {
    let mut document = Vec::with_capacity(LOG_LEAF_MESSAGE_LEN + run_id.len());
    write_log_leaf(run_id, seq, entry_hash, &mut document);
    document
}

/// The leaf of the log before schema 6 (BLAKE3 tree): `domain_hash("log-leaf", log_leaf(…))`,
/// 32 bytes. Kept to check checkpoints signed over that tree (docs/FORMAT.md §7).
pub fn legacy_log_leaf(run_id: &str, seq: i64, entry_hash: &[u8]) -> [u8; 32] {
    hash::domain_hash(LEGACY_LEAF_DOMAIN, &log_leaf(run_id, seq, entry_hash))
}

/// The bytes of a log leaf's document, less its run id.
const LOG_LEAF_MESSAGE_LEN: usize = 112;

/// Appends the log-leaf document of an entry to `out`.
pub fn write_log_leaf(run_id: &str, seq: i64, entry_hash: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"entry\":\"blake3:");
    let hex_start = out.len();
    out.resize(hex_start + 2 * entry_hash.len(), 0);
    hash::write_hex(entry_hash, &mut out[hex_start..]);
    out.extend_from_slice(b"\",\"run\":");
    // The common case, a run id needing no escape, without the general string writer.
    if run_id.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(run_id.as_bytes());
        out.push(b'"');
    } else {
        canonical::write_string(run_id, out);
    }
    out.extend_from_slice(b",\"seq\":");
    canonical::write_integer(seq, out);
    out.push(b'}');
}

/// The leaf hash `SHA-256(0x00 || log_leaf(run, seq, entry hash))` of each entry: the
/// prefixed documents are written into one buffer, then hashed many at a time
/// ([`hash::sha256_many`]).
pub fn log_leaf_hashes<'a>(
    entries: impl ExactSizeIterator<Item = (&'a str, i64, &'a [u8])>,
) -> Vec<Hash> {
    let count = entries.len();
    let mut messages = Vec::with_capacity(count * (LOG_LEAF_MESSAGE_LEN + 17));
    let mut ends = Vec::with_capacity(count);
    for (run_id, seq, entry_hash) in entries {
        messages.push(merkle::LEAF_PREFIX);
        write_log_leaf(run_id, seq, entry_hash, &mut messages);
        ends.push(messages.len());
    }
    let starts = std::iter::once(0).chain(ends.iter().copied());
    let inputs: Vec<&[u8]> = starts.zip(&ends).map(|(a, &b)| &messages[a..b]).collect();
    hash::sha256_many(&inputs)
}

/// The leaf hash of each entry in the log before schema 6: `BLAKE3(0x00 ||
/// legacy_log_leaf(…))`, the leaves, then their hashes, hashed many at a time.
pub fn legacy_leaf_hashes<'a>(
    entries: impl ExactSizeIterator<Item = (&'a str, i64, &'a [u8])>,
) -> Vec<Hash> {
    let count = entries.len();
    let mut messages = Vec::with_capacity(count * (LOG_LEAF_MESSAGE_LEN + 16));
    let mut ends = Vec::with_capacity(count);
    for (run_id, seq, entry_hash) in entries {
        write_log_leaf(run_id, seq, entry_hash, &mut messages);
        ends.push(messages.len());
    }
    let starts = std::iter::once(0).chain(ends.iter().copied());
    let inputs: Vec<&[u8]> = starts.zip(&ends).map(|(a, &b)| &messages[a..b]).collect();
    let mut leaves = vec![[0u8; 32]; count];
    many::hash_many(
        &many::Mode::domain(LEGACY_LEAF_DOMAIN),
        &inputs,
        &mut leaves,
    );
    let prefixed: Vec<[u8; 33]> = leaves
        .iter()
        .map(|leaf| {
            let mut input = [merkle::LEAF_PREFIX; 33];
            input[1..].copy_from_slice(leaf);
            input
        })
        .collect();
    let inputs: Vec<&[u8]> = prefixed.iter().map(|input| &input[..]).collect();
    let mut hashes = vec![[0u8; 32]; count];
    many::hash_many(&many::Mode::plain(), &inputs, &mut hashes);
    hashes
}

/// The leaf hashes of `entries` in the tree of `alg`: the log's ([`LOG_ALG`]), or the
/// BLAKE3 tree of the log before schema 6.
fn leaf_hashes_for<'a>(
    alg: HashAlg,
    entries: impl ExactSizeIterator<Item = (&'a str, i64, &'a [u8])>,
) -> Vec<Hash> {
    match alg {
        HashAlg::Sha256 => log_leaf_hashes(entries),
        HashAlg::Blake3 => legacy_leaf_hashes(entries),
    }
}

/// One row of the workspace log, read in leaf order: the entry's leaf index, run, seq and
/// stored hash.
#[derive(Debug, Clone)]
pub struct LogRow {
    pub leaf: i64,
    pub run_id: String,
    pub seq: i64,
    pub hash: Vec<u8>,
}

/// What [`extend_log`] reads of a row, however the row is held.
pub trait LeafRow: Sync {
    /// The leaf index the row claims.
    fn leaf(&self) -> i64;
    /// Its entry: run, seq and stored hash.
    fn entry(&self) -> (&str, i64, &[u8]);
}

impl LeafRow for LogRow {
    fn leaf(&self) -> i64 {
        self.leaf
    }
    fn entry(&self) -> (&str, i64, &[u8]) {
        (&self.run_id, self.seq, &self.hash)
    }
}

/// The first row whose leaf index is not the next one (`expected`, the tree's size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafGap {
    pub expected: u64,
    pub found: i64,
}

/// Append `rows` (in leaf order) to the log `tree`, which must hold exactly the leaves
/// before them: a SHA-256 tree is the log, a BLAKE3 one the log before schema 6. Leaf
/// hashes are computed in parallel for large batches; the appends are sequential. Stops at
/// the first row whose leaf index is not the tree's size.
pub fn extend_log<R: LeafRow>(tree: &mut IncrementalTree, rows: &[R]) -> Option<LeafGap> {
    let alg = tree.alg();
    let entries = |rows: &[R]| {
        leaf_hashes_for(
            alg,
            rows.iter()
                .map(LeafRow::entry)
                .collect::<Vec<_>>()
                .into_iter(),
        )
    };
    let hashes: Vec<Hash> = if rows.len() >= PARALLEL_LEAVES {
        rows.par_chunks(HASH_MANY_ROWS)
            .flat_map_iter(entries)
            .collect()
    } else {
        entries(rows)
    };
    for (row, hash) in rows.iter().zip(hashes) {
        let expected = tree.size();
        if u64::try_from(row.leaf()).ok() != Some(expected) || tree.append_leaf_hash(hash).is_err()
        {
            return Some(LeafGap {
                expected,
                found: row.leaf(),
            });
        }
    }
    None
}

/// The log leaf hash of each stored row in the log's tree, `SHA-256(0x00 || log_leaf(run,
/// seq, stored hash))`, computed in parallel.
pub fn row_leaf_hashes<R: EntryRow>(rows: &[R]) -> Vec<Hash> {
    rows.par_chunks(HASH_MANY_ROWS)
        .flat_map_iter(|chunk| {
            log_leaf_hashes(chunk.iter().map(|r| (r.run_id(), r.seq(), r.hash())))
        })
        .collect()
}

/// Rebuilds the log's tree from leaves that arrive in any order: the journal pass reads
/// entries in `(run, seq)` order, not in leaf order, and the log is checked from those same
/// rows rather than from a second read.
///
/// Two complete sibling subtrees merge as soon as both are present, so what is held is
/// only the subtrees whose siblings have not arrived yet: O(log n) when runs were appended
/// in batches in run-id order, at most O(n) hashes when appends interleaved. A bitmap of
/// one bit per leaf catches duplicates.
///
/// While leaves arrive in leaf order (runs appended one after the other), the held subtrees
/// are kept as a stack, largest first, as an incremental tree keeps them: no map lookups.
/// The first leaf out of order moves them into the map.
#[derive(Debug)]
pub struct LogAssembler {
    alg: HashAlg,
    base: u64,
    limit: u64,
    in_order: Option<Vec<((u32, u64), Hash)>>,
    nodes: HashMap<(u32, u64), Hash, RandomState>,
    seen: Vec<u64>,
    added: u64,
    problem: Option<LeafGap>,
}

/// What the assembled leaves make: the tree's state, or the first leaf out of place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAssembly {
    pub size: u64,
    pub frontier: Vec<Hash>,
    pub root: Hash,
    pub gap: Option<LeafGap>,
}

/// The perfect subtrees a tree of `size` leaves decomposes into: `(height, index)` with
/// `index` counted in subtrees of that height, largest first.
fn decomposition(size: u64) -> Vec<(u32, u64)> {
    let mut start = 0u64;
    let mut out = Vec::new();
    for height in (0..u64::BITS).rev() {
        if size >> height & 1 == 1 {
            out.push((height, start >> height));
            start += 1 << height;
        }
    }
    out
}

impl LogAssembler {
    /// Leaves `base..limit` are expected; the first `base` are given by their frontier.
    pub fn new(alg: HashAlg, base: u64, frontier: Vec<Hash>, limit: u64) -> Result<Self> {
        let shape = decomposition(base);
        if shape.len() != frontier.len() || limit < base {
            return Err(crate::Error::invalid(format!(
                "a log of {base} leaves has a frontier of {} hashes, got {} (limit {limit})",
                shape.len(),
                frontier.len()
            )));
        }
        let span = usize::try_from(limit - base)
            .map_err(|_| crate::Error::invalid("the log is too large to assemble"))?;
        Ok(LogAssembler {
            alg,
            base,
            limit,
            in_order: Some(shape.into_iter().zip(frontier).collect()),
            nodes: HashMap::default(),
            seen: vec![0; span.div_ceil(64)],
            added: 0,
            problem: None,
        })
    }

    /// Add one leaf hash at `leaf`. A leaf out of range or seen twice is remembered (the
    /// first such) and not added.
    pub fn add(&mut self, leaf: i64, leaf_hash: Hash) {
        let Some(index) = u64::try_from(leaf)
            .ok()
            .filter(|&i| i >= self.base && i < self.limit)
        else {
            self.note(LeafGap {
                expected: self.base,
                found: leaf,
            });
            return;
        };
        let offset = (index - self.base) as usize;
        let (word, bit) = (offset / 64, 1u64 << (offset % 64));
        if self.seen[word] & bit != 0 {
            self.note(LeafGap {
                expected: index + 1,
                found: leaf,
            });
            return;
        }
        self.seen[word] |= bit;
        let next = self.base + self.added;
        self.added += 1;
        if let Some(stack) = &mut self.in_order {
            if index == next {
                let (mut key, mut node) = ((0u32, index), leaf_hash);
                // In order, a left sibling is always the top of the stack.
                while let Some(&(top_key, top)) = stack.last() {
                    if top_key != (key.0, key.1 ^ 1) {
                        break;
                    }
                    stack.pop();
                    node = self.alg.node_hash(&top, &node);
                    key = (key.0 + 1, key.1 >> 1);
                }
                stack.push((key, node));
                return;
            }
            self.nodes.extend(stack.drain(..));
            self.in_order = None;
        }
        let (mut height, mut position, mut node) = (0u32, index, leaf_hash);
        while let Some(sibling) = self.nodes.remove(&(height, position ^ 1)) {
            node = if position & 1 == 0 {
                self.alg.node_hash(&node, &sibling)
            } else {
                self.alg.node_hash(&sibling, &node)
            };
            height += 1;
            position >>= 1;
        }
        self.nodes.insert((height, position), node);
    }

    fn note(&mut self, gap: LeafGap) {
        if self.problem.is_none() {
            self.problem = Some(gap);
        }
    }

    /// Subtrees held right now (for tests of the memory bound).
    pub fn held(&self) -> usize {
        self.nodes.len() + self.in_order.as_ref().map_or(0, Vec::len)
    }

    fn node(&self, key: (u32, u64)) -> Option<Hash> {
        let mut stacked = self.in_order.iter().flatten();
        stacked
            .find(|(k, _)| *k == key)
            .map(|(_, node)| *node)
            .or_else(|| self.nodes.get(&key).copied())
    }

    /// The tree of leaves `0..base + added`, or the first leaf out of place.
    pub fn finish(&self) -> LogAssembly {
        let size = self.base + self.added;
        let mut gap = self.problem.clone();
        if gap.is_none() {
            // No duplicate and all in range: a gap shows as an unset bit below `added`.
            let missing = (0..self.added).find(|&i| {
                let offset = i as usize;
                self.seen[offset / 64] & (1 << (offset % 64)) == 0
            });
            if let Some(offset) = missing {
                let next = (offset..self.limit - self.base).find(|&i| {
                    let o = i as usize;
                    self.seen[o / 64] & (1 << (o % 64)) != 0
                });
                gap = Some(LeafGap {
                    expected: self.base + offset,
                    found: next.map_or(-1, |i| (self.base + i) as i64),
                });
            }
        }
        let frontier: Option<Vec<Hash>> = decomposition(size)
            .into_iter()
            .map(|key| self.node(key))
            .collect();
        let (frontier, root) = match (&gap, frontier) {
            (None, Some(frontier)) => {
                let root = IncrementalTree::from_state(self.alg, size, frontier.clone())
                    .map(|tree| tree.root())
                    .unwrap_or_default();
                (frontier, root)
            }
            _ => (Vec::new(), [0u8; 32]),
        };
        LogAssembly {
            size,
            frontier,
            root,
            gap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Value;

    #[test]
    fn a_log_leaf_is_the_same_on_its_fast_and_general_paths() {
        for (run, seq, digest) in [
            ("run-1", 0i64, vec![7u8; 32]),
            ("run-1", 1234567890123, vec![0xab; 32]),
            ("a\"b\\c", 5, vec![1; 32]),
            ("r", -3, vec![2; 32]),
            ("r", 9, vec![3; 31]),
        ] {
            let text = format!(
                "{{\"entry\":\"blake3:{}\",\"run\":{},\"seq\":{seq}}}",
                hex::encode(&digest),
                String::from_utf8(canonical::to_canonical(&Value::String(run.to_owned())).unwrap())
                    .unwrap()
            );
            assert_eq!(log_leaf(run, seq, &digest), text.as_bytes(), "{text}");
            assert_eq!(
                legacy_log_leaf(run, seq, &digest),
                hash::domain_hash("log-leaf", text.as_bytes()),
                "{text}"
            );
        }
    }

    #[test]
    fn a_log_leaf_binds_run_seq_and_hash() {
        let base = log_leaf("a", 1, &[7u8; 32]);
        assert_ne!(base, log_leaf("b", 1, &[7u8; 32]));
        assert_ne!(base, log_leaf("a", 2, &[7u8; 32]));
        assert_ne!(base, log_leaf("a", 1, &[8u8; 32]));
        let text = format!(
            "{{\"entry\":\"blake3:{}\",\"run\":\"a\",\"seq\":1}}",
            "07".repeat(32)
        );
        assert_eq!(base, text.as_bytes());
    }

    #[test]
    fn leaf_hashes_are_rfc6962_sha256_of_the_document_and_legacy_ones_blake3() {
        let entries: Vec<(String, i64, Vec<u8>)> = (0..40)
            .map(|i| (format!("r{}", i % 3), i / 3, vec![i as u8; 32]))
            .collect();
        let view = || {
            entries
                .iter()
                .map(|(r, s, h)| (r.as_str(), *s, h.as_slice()))
        };
        for ((run, seq, digest), got) in view().zip(log_leaf_hashes(view())) {
            let mut prefixed = vec![0u8];
            prefixed.extend(log_leaf(run, seq, digest));
            assert_eq!(got, hash::sha256(&prefixed));
            assert_eq!(got, HashAlg::Sha256.leaf_hash(&log_leaf(run, seq, digest)));
        }
        for ((run, seq, digest), got) in view().zip(legacy_leaf_hashes(view())) {
            assert_eq!(
                got,
                HashAlg::Blake3.leaf_hash(&legacy_log_leaf(run, seq, digest))
            );
        }
    }

    #[test]
    fn extending_the_log_matches_the_root_and_stops_at_a_gap() {
        use crate::merkle::root;
        let rows: Vec<LogRow> = (0..1000)
            .map(|i| LogRow {
                leaf: i,
                run_id: format!("r{}", i % 7),
                seq: i / 7,
                hash: vec![(i % 251) as u8; 32],
            })
            .collect();
        let leaves: Vec<Vec<u8>> = rows
            .iter()
            .map(|r| log_leaf(&r.run_id, r.seq, &r.hash))
            .collect();
        let mut tree = IncrementalTree::new(LOG_ALG);
        assert_eq!(extend_log(&mut tree, &rows[..600]), None);
        assert_eq!(extend_log(&mut tree, &rows[600..]), None);
        assert_eq!(tree.root(), root(LOG_ALG, &leaves));

        let legacy: Vec<[u8; 32]> = rows
            .iter()
            .map(|r| legacy_log_leaf(&r.run_id, r.seq, &r.hash))
            .collect();
        let mut old = IncrementalTree::new(HashAlg::Blake3);
        assert_eq!(extend_log(&mut old, &rows), None);
        assert_eq!(old.root(), root(HashAlg::Blake3, &legacy));

        let mut gapped = IncrementalTree::new(LOG_ALG);
        let mut missing = rows[..10].to_vec();
        missing.remove(4);
        let gap = extend_log(&mut gapped, &missing);
        assert_eq!(
            gap,
            Some(LeafGap {
                expected: 4,
                found: 5
            })
        );
        assert_eq!(gapped.size(), 4);
    }

    #[test]
    fn leaves_assembled_in_any_order_make_the_same_tree() {
        use crate::merkle::root;
        let alg = LOG_ALG;
        let leaves: Vec<Vec<u8>> = (0..300).map(|i: u32| i.to_le_bytes().to_vec()).collect();
        let expected = root(alg, &leaves);
        // Interleaved order: all even leaves, then all odd ones.
        let mut order: Vec<usize> = (0..300).step_by(2).collect();
        order.extend((1..300).step_by(2));
        let mut assembler = LogAssembler::new(alg, 0, Vec::new(), 300).unwrap();
        for &i in &order {
            assembler.add(i as i64, alg.leaf_hash(&leaves[i]));
        }
        let done = assembler.finish();
        assert_eq!((done.size, done.root, done.gap), (300, expected, None));

        // In order throughout, in order and then not (the stack moves to the map), reversed.
        let in_order: Vec<usize> = (0..300).collect();
        let mut switching: Vec<usize> = (0..150).collect();
        switching.extend((200..300).chain(150..200));
        let reversed: Vec<usize> = (0..300).rev().collect();
        for order in [in_order, switching, reversed] {
            let mut assembler = LogAssembler::new(alg, 0, Vec::new(), 300).unwrap();
            for &i in &order {
                assembler.add(i as i64, alg.leaf_hash(&leaves[i]));
            }
            let done = assembler.finish();
            assert_eq!((done.size, done.root, done.gap), (300, expected, None));
        }

        // From a base frontier, in order: memory stays small.
        let mut base = IncrementalTree::new(alg);
        for leaf in &leaves[..100] {
            base.append(leaf).unwrap();
        }
        let mut tail = LogAssembler::new(alg, 100, base.frontier().to_vec(), 300).unwrap();
        for (i, leaf) in leaves.iter().enumerate().skip(100) {
            tail.add(i as i64, alg.leaf_hash(leaf));
            assert!(tail.held() <= 16);
        }
        assert_eq!(tail.finish().root, expected);
    }

    #[test]
    fn a_missing_or_duplicated_leaf_is_reported() {
        let alg = LOG_ALG;
        let mut missing = LogAssembler::new(alg, 0, Vec::new(), 10).unwrap();
        for i in [0, 1, 2, 4, 5] {
            missing.add(i, [i as u8; 32]);
        }
        assert_eq!(
            missing.finish().gap,
            Some(LeafGap {
                expected: 3,
                found: 4
            })
        );
        let mut twice = LogAssembler::new(alg, 0, Vec::new(), 10).unwrap();
        for i in [0, 1, 1] {
            twice.add(i, [0; 32]);
        }
        assert_eq!(
            twice.finish().gap,
            Some(LeafGap {
                expected: 2,
                found: 1
            })
        );
        let mut outside = LogAssembler::new(alg, 0, Vec::new(), 3).unwrap();
        outside.add(7, [0; 32]);
        assert!(outside.finish().gap.is_some());
    }
}
