//! Whether each index of a table holds exactly the table's rows, from one ordered scan of
//! each b-tree: the check SQLite's `PRAGMA integrity_check(table)` makes by looking every
//! row up in every index, made here with sequential reads instead.
//!
//! Two b-trees hold the same rows when their multisets of tuples are equal. Each tuple is
//! hashed with a key drawn fresh for every check (keyed BLAKE3, 128 bits) and the hashes
//! are summed: the file was written before the key existed, so no arrangement of rows can
//! aim at a collision (each pair of distinct multisets collides with probability 2^-128).
//! The scans hash their rows a batch at a time in BLAKE3's lanes ([`RowBatch`]), held to
//! the row-by-row [`RowMultiset::add`] by a property test.
//! Each scan must also come out strictly increasing in SQLite's own order: a b-tree whose
//! in-order walk is sorted sends every seek the right way, so a query answered through the
//! index finds exactly the rows a scan of the table finds.

use std::cmp::Ordering;
use std::ops::Range;

use crate::hash::many::{hash_many, Mode};

/// One value as SQLite returns it, borrowed from the row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a [u8]),
    Blob(&'a [u8]),
}

/// SQLite's order of two values under the BINARY collation: NULL, then numbers by value,
/// then text, then blobs, each by `memcmp` then length.
pub fn compare(a: &Cell<'_>, b: &Cell<'_>) -> Ordering {
    fn class(cell: &Cell<'_>) -> u8 {
        match cell {
            Cell::Null => 0,
            Cell::Int(_) | Cell::Real(_) => 1,
            Cell::Text(_) => 2,
            Cell::Blob(_) => 3,
        }
    }
    match (a, b) {
        (Cell::Int(x), Cell::Int(y)) => x.cmp(y),
        (Cell::Int(x), Cell::Real(y)) => compare_int_real(*x, *y),
        (Cell::Real(x), Cell::Int(y)) => compare_int_real(*y, *x).reverse(),
        // NaN is never stored (SQLite reads it as NULL); treat it as equal to be safe.
        (Cell::Real(x), Cell::Real(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (Cell::Text(x), Cell::Text(y)) | (Cell::Blob(x), Cell::Blob(y)) => x.cmp(y),
        _ => class(a).cmp(&class(b)),
    }
}

fn compare_int_real(int: i64, real: f64) -> Ordering {
    // Exact for every integer whose magnitude is below 2^53, and conservative beyond: an
    // order SQLite would accept but this rounds to "equal" is reported, never hidden.
    (int as f64).partial_cmp(&real).unwrap_or(Ordering::Equal)
}

/// Compare two rows value by value.
pub fn compare_rows(a: &[Cell<'_>], b: &[Cell<'_>]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| compare(x, y))
        .find(|order| order.is_ne())
        .unwrap_or_else(|| a.len().cmp(&b.len()))
}

/// The keyed sum of a multiset of rows, and how many there are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMultiset {
    key: [u8; 32],
    sum: u128,
    count: u64,
}

/// A row's values, each typed and length-prefixed so no two rows encode alike.
fn encode_row(row: &[Cell<'_>], out: &mut Vec<u8>) {
    for cell in row {
        match *cell {
            Cell::Null => out.push(0),
            Cell::Int(n) => {
                out.push(1);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Cell::Real(x) => {
                out.push(2);
                out.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            Cell::Text(t) | Cell::Blob(t) => {
                out.push(if matches!(cell, Cell::Text(_)) { 3 } else { 4 });
                out.extend_from_slice(&(t.len() as u64).to_le_bytes());
                out.extend_from_slice(t);
            }
        }
    }
}

impl RowMultiset {
    pub fn new(key: [u8; 32]) -> Self {
        RowMultiset {
            key,
            sum: 0,
            count: 0,
        }
    }

    /// Add one row, hashed on its own: the reference [`RowBatch`] is held to.
    pub fn add(&mut self, row: &[Cell<'_>]) {
        let mut encoded = Vec::new();
        encode_row(row, &mut encoded);
        self.absorb_digest(blake3::keyed_hash(&self.key, &encoded).as_bytes());
    }

    /// Count a row by its keyed digest (the low 128 bits are summed).
    fn absorb_digest(&mut self, digest: &[u8; 32]) {
        let mut low = [0u8; 16];
        low.copy_from_slice(&digest[..16]);
        self.sum = self.sum.wrapping_add(u128::from_le_bytes(low));
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Add the rows another multiset (under the same key) counted: how rows hashed in
    /// parallel, a chunk each, come together.
    pub fn merge(&mut self, other: &RowMultiset) {
        debug_assert_eq!(self.key, other.key);
        self.sum = self.sum.wrapping_add(other.sum);
        self.count += other.count;
    }
}

/// Rows hashed a batch at a time, side by side in BLAKE3's lanes (`hash::many`): the
/// same sum as [`RowMultiset::add`] row by row, at a fraction of the cost for the short
/// rows of an index. A check adds hundreds of thousands of them.
#[derive(Debug, Clone)]
pub struct RowBatch {
    rows: RowMultiset,
    encoded: Vec<u8>,
    ends: Vec<usize>,
}

/// Rows encoded before their digests are computed together.
const BATCH_ROWS: usize = 256;

impl RowBatch {
    pub fn new(key: [u8; 32]) -> Self {
        RowBatch {
            rows: RowMultiset::new(key),
            encoded: Vec::new(),
            ends: Vec::with_capacity(BATCH_ROWS),
        }
    }

    pub fn add(&mut self, row: &[Cell<'_>]) {
        encode_row(row, &mut self.encoded);
        self.ends.push(self.encoded.len());
        if self.ends.len() == BATCH_ROWS {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let mut inputs: Vec<&[u8]> = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for &end in &self.ends {
            inputs.push(&self.encoded[start..end]);
            start = end;
        }
        let mut digests = vec![[0u8; 32]; inputs.len()];
        hash_many(&Mode::keyed(self.rows.key), &inputs, &mut digests);
        for digest in &digests {
            self.rows.absorb_digest(digest);
        }
        self.encoded.clear();
        self.ends.clear();
    }

    /// Every row added, hashed and counted.
    pub fn finish(mut self) -> RowMultiset {
        self.flush();
        self.rows
    }
}

/// Where a scan first failed to be strictly increasing. The previous row is kept in
/// buffers reused from row to row (a scan makes no allocation per row).
#[derive(Debug, Clone, Default)]
struct Order {
    bytes: Vec<u8>,
    previous: Vec<Kept>,
    seen: u64,
    disorder: Option<u64>,
}

/// A value copied out of a row, its text or blob appended to a buffer of the keeper's
/// (`Order::bytes` for the previous row of a scan).
#[derive(Debug, Clone)]
pub enum Kept {
    Null,
    Int(i64),
    Real(f64),
    Text(Range<usize>),
    Blob(Range<usize>),
}

impl Kept {
    /// `cell`, its text or blob appended to `bytes`.
    pub fn keep(cell: &Cell<'_>, bytes: &mut Vec<u8>) -> Kept {
        let mut copy = |data: &[u8]| {
            let start = bytes.len();
            bytes.extend_from_slice(data);
            start..bytes.len()
        };
        match *cell {
            Cell::Null => Kept::Null,
            Cell::Int(n) => Kept::Int(n),
            Cell::Real(x) => Kept::Real(x),
            Cell::Text(t) => Kept::Text(copy(t)),
            Cell::Blob(b) => Kept::Blob(copy(b)),
        }
    }

    /// The cell again, from the buffer it was kept in.
    pub fn cell<'a>(&self, bytes: &'a [u8]) -> Cell<'a> {
        match self {
            Kept::Null => Cell::Null,
            Kept::Int(n) => Cell::Int(*n),
            Kept::Real(x) => Cell::Real(*x),
            Kept::Text(range) => Cell::Text(&bytes[range.clone()]),
            Kept::Blob(range) => Cell::Blob(&bytes[range.clone()]),
        }
    }
}

impl Order {
    fn add(&mut self, row: &[Cell<'_>]) {
        if self.seen > 0 && self.disorder.is_none() && self.previous_cmp(row).is_ge() {
            self.disorder = Some(self.seen);
        }
        self.bytes.clear();
        self.previous.clear();
        for cell in row {
            self.previous.push(Kept::keep(cell, &mut self.bytes));
        }
        self.seen += 1;
    }

    /// The previous row against `row`, as [`compare_rows`].
    fn previous_cmp(&self, row: &[Cell<'_>]) -> Ordering {
        let previous = self.previous.iter().map(|kept| kept.cell(&self.bytes));
        previous
            .zip(row)
            .map(|(x, y)| compare(&x, y))
            .find(|order| order.is_ne())
            .unwrap_or_else(|| self.previous.len().cmp(&row.len()))
    }
}

/// One index's rows as its scan returns them: their multiset, and the first place the
/// scan was not strictly increasing.
#[derive(Debug, Clone)]
pub struct IndexScan {
    rows: RowBatch,
    order: Order,
}

impl IndexScan {
    /// An empty scan under `key` (the key of the [`IndexAgreement`] it is compared with).
    pub fn new(key: [u8; 32]) -> Self {
        IndexScan {
            rows: RowBatch::new(key),
            order: Order::default(),
        }
    }

    /// The scan's next row: the index's columns, the primary key last (the index is
    /// sorted on all of them).
    pub fn add(&mut self, row: &[Cell<'_>]) {
        self.order.add(row);
        self.rows.add(row);
    }
}

/// Compares a table's scan with each of its indexes' scans.
#[derive(Debug, Clone)]
pub struct IndexAgreement {
    key: [u8; 32],
    /// Per index: the table's rows projected onto the index's columns.
    projected: Vec<RowMultiset>,
    table: Order,
}

impl IndexAgreement {
    /// A check of `indexes` indexes, under `key` (fresh from the OS for every check).
    pub fn new(key: [u8; 32], indexes: usize) -> Self {
        IndexAgreement {
            key,
            projected: vec![RowMultiset::new(key); indexes],
            table: Order::default(),
        }
    }

    /// A scan of one index, to feed with [`IndexScan::add`] and hand to
    /// [`IndexAgreement::index_problem`].
    pub fn index_scan(&self) -> IndexScan {
        IndexScan::new(self.key)
    }

    /// The table's next row (in its scan's order): `key` its primary key, and for each
    /// index the row as that index holds it.
    pub fn add_table_row(&mut self, key: &[Cell<'_>], per_index: &[&[Cell<'_>]]) {
        self.table_key(key);
        for (multiset, row) in self.projected.iter_mut().zip(per_index) {
            multiset.add(row);
        }
    }

    /// The table's next row's primary key, in its scan's order (its projections counted
    /// apart, in [`IndexAgreement::fresh`] multisets merged with [`IndexAgreement::absorb`]).
    pub fn table_key(&mut self, key: &[Cell<'_>]) {
        self.table.add(key);
    }

    /// An empty batch under this check's key, for rows of the table counted apart.
    pub fn fresh(&self) -> RowBatch {
        RowBatch::new(self.key)
    }

    /// Rows of the table as index `index` holds them, counted apart.
    pub fn absorb(&mut self, index: usize, part: &RowMultiset) {
        self.projected[index].merge(part);
    }

    /// What is wrong with the table's own scan (None: strictly increasing by its key).
    pub fn table_problem(&self) -> Option<String> {
        self.table.disorder.map(|at| {
            format!("row {at} of the table's scan is not after the row before it (its b-tree is out of order)")
        })
    }

    /// What is wrong with index `index`'s scan against the table (None: the same rows, in
    /// order).
    pub fn index_problem(&self, index: usize, scan: IndexScan) -> Option<String> {
        let table = &self.projected[index];
        if let Some(at) = scan.order.disorder {
            return Some(format!(
                "row {at} of the index's scan is not after the row before it (its b-tree is out of order)"
            ));
        }
        let rows = scan.rows.finish();
        if rows.count != table.count {
            return Some(format!(
                "the index holds {} rows, its table {}",
                rows.count, table.count
            ));
        }
        (rows.sum != table.sum).then(|| {
            "the index's rows are not its table's rows (same count, other values)".to_owned()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: [u8; 32] = [7; 32];

    #[test]
    fn sqlite_orders_null_numbers_text_blob() {
        let order = [
            Cell::Null,
            Cell::Int(-3),
            Cell::Real(-2.5),
            Cell::Int(0),
            Cell::Real(0.5),
            Cell::Int(1),
            Cell::Text(b""),
            Cell::Text(b"a"),
            Cell::Text(b"ab"),
            Cell::Text(b"b"),
            Cell::Blob(b""),
            Cell::Blob(b"\x00"),
        ];
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn typed_encoding_tells_text_from_blob_and_splits_unambiguously() {
        let sum = |rows: &[&[Cell<'_>]]| {
            let mut m = RowMultiset::new(KEY);
            rows.iter().for_each(|r| m.add(r));
            m
        };
        assert_ne!(sum(&[&[Cell::Text(b"x")]]), sum(&[&[Cell::Blob(b"x")]]));
        assert_ne!(sum(&[&[Cell::Int(1)]]), sum(&[&[Cell::Real(1.0)]]));
        assert_ne!(
            sum(&[&[Cell::Text(b"ab"), Cell::Text(b"c")]]),
            sum(&[&[Cell::Text(b"a"), Cell::Text(b"bc")]])
        );
        // A row repeated is counted twice (a sum, not an exclusive or).
        let one: &[Cell<'_>] = &[Cell::Int(5)];
        assert_ne!(sum(&[one, one, one]), sum(&[one]));
        // Order does not matter.
        let two: &[Cell<'_>] = &[Cell::Int(6)];
        assert_eq!(sum(&[one, two]), sum(&[two, one]));
    }

    fn check(table: &[(i64, i64)], index: &[(i64, i64)]) -> Vec<String> {
        // A table keyed by its first column, indexed on (second, first).
        let mut agreement = IndexAgreement::new(KEY, 1);
        for &(k, v) in table {
            agreement.add_table_row(&[Cell::Int(k)], &[&[Cell::Int(v), Cell::Int(k)]]);
        }
        let mut scan = agreement.index_scan();
        for &(k, v) in index {
            scan.add(&[Cell::Int(v), Cell::Int(k)]);
        }
        agreement
            .table_problem()
            .into_iter()
            .chain(agreement.index_problem(0, scan))
            .collect()
    }

    proptest! {
        /// The reference: sort the table's rows by the index's columns and compare lists.
        #[test]
        fn agrees_exactly_when_the_index_is_the_sorted_table(
            table in proptest::collection::btree_map(0i64..50, 0i64..5, 0..40),
            edits in proptest::collection::vec((0usize..40, 0u8..4, 0i64..50), 0..3),
        ) {
            let table: Vec<(i64, i64)> = table.into_iter().collect();
            let mut sorted: Vec<(i64, i64)> = table.clone();
            sorted.sort_by_key(|&(k, v)| (v, k));
            let mut index = sorted.clone();
            for (at, how, value) in edits {
                if index.is_empty() { break; }
                let at = at % index.len();
                match how {
                    0 => { index.remove(at); }
                    1 => index[at].1 = value,
                    2 => { let row = index[at]; index.insert(at, row); }
                    _ => { let next = (at + 1) % index.len(); index.swap(at, next) }
                }
            }
            let problems = check(&table, &index);
            prop_assert_eq!(problems.is_empty(), index == sorted, "{:?}", problems);
        }
    }

    #[test]
    fn rows_counted_apart_and_merged_are_the_rows_counted_together() {
        let rows: Vec<[Cell<'_>; 2]> = (0..10).map(|n| [Cell::Int(n), Cell::Text(b"r")]).collect();
        let mut whole = RowMultiset::new(KEY);
        rows.iter().for_each(|r| whole.add(r));
        let mut merged = RowMultiset::new(KEY);
        for chunk in rows.chunks(3) {
            let mut part = RowMultiset::new(KEY);
            chunk.iter().for_each(|r| part.add(r));
            merged.merge(&part);
        }
        assert_eq!(merged, whole);
    }

    fn cell() -> impl Strategy<Value = (u8, i64, Vec<u8>)> {
        (
            0u8..5,
            any::<i64>(),
            proptest::collection::vec(any::<u8>(), 0..80),
        )
    }

    fn as_cell((kind, n, bytes): &(u8, i64, Vec<u8>)) -> Cell<'_> {
        match kind {
            0 => Cell::Null,
            1 => Cell::Int(*n),
            2 => Cell::Real(*n as f64 / 3.0),
            3 => Cell::Text(bytes),
            _ => Cell::Blob(bytes),
        }
    }

    proptest! {
        /// The lanes path sums exactly what the row-by-row reference sums, across batch
        /// boundaries and for rows longer than one BLAKE3 chunk.
        #[test]
        fn rows_hashed_in_batches_sum_as_rows_hashed_one_by_one(
            rows in proptest::collection::vec(proptest::collection::vec(cell(), 1..4), 0..600),
            long in proptest::collection::vec(any::<u8>(), 1000..2100),
        ) {
            let mut rows: Vec<Vec<Cell<'_>>> =
                rows.iter().map(|row| row.iter().map(as_cell).collect()).collect();
            rows.push(vec![Cell::Blob(&long), Cell::Int(1)]);
            let mut reference = RowMultiset::new(KEY);
            let mut batch = RowBatch::new(KEY);
            for row in &rows {
                reference.add(row);
                batch.add(row);
            }
            prop_assert_eq!(batch.finish(), reference);
        }
    }

    #[test]
    fn a_table_scan_out_of_key_order_is_named() {
        assert_eq!(check(&[(2, 0), (1, 0)], &[(1, 0), (2, 0)]).len(), 1);
        assert!(check(&[(1, 0), (2, 0)], &[(1, 0), (2, 0)]).is_empty());
    }
}
