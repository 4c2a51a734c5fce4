//! The index-versus-table check folded into the whole journal pass: the table's side is
//! counted from the rows the pass reads anyway (keys in order on the verifier thread, the
//! keyed multisets on the pool), each index is then scanned in its own order on the reading
//! thread. `agentledger_core::index_agreement` compares them; which indexes, and the SQL
//! that scans each, are the caller's (`storage/btree_check.py`).

use agentledger_core::index_agreement::{Cell, IndexAgreement, IndexScan, RowMultiset};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::errors::Error;
use crate::sqlite::{Connection, Reading, Statement};

/// One index: its name, the SQL that scans it (covering, in its order: its columns, the
/// primary key last), and where each of those columns is in the journal pass's row.
pub type IndexSpec = (String, String, Vec<usize>);

/// The columns of the journal pass's row: `run_id, seq, kind, hash, bytes, leaf`.
pub const PASS_COLUMNS: usize = 6;

/// Rows hashed per task on the pool.
const CHUNK_ROWS: usize = 2_048;

/// A batch of the journal pass's rows, as the check reads them (no copy of any value).
pub trait PassRows: Sync {
    fn len(&self) -> usize;
    /// Column `column` (of `PASS_COLUMNS`) of row `row`.
    fn cell(&self, row: usize, column: usize) -> Cell<'_>;
    /// Whether the row holds a value not of its column's type.
    fn odd(&self, row: usize) -> bool;
}

/// The table's side of the check, fed batch after batch.
pub struct TableSide {
    agreement: IndexAgreement,
    projections: Vec<Vec<usize>>,
    /// The first row whose values are not of their column's type (a STRICT table holds
    /// none: `run_id` and `kind` text, `seq` an integer, `leaf` an integer or NULL).
    odd_row: Option<(String, i64)>,
}

impl TableSide {
    pub fn new(key: [u8; 32], specs: &[IndexSpec]) -> PyResult<Self> {
        for (name, _, projection) in specs {
            if projection.iter().any(|&c| c >= PASS_COLUMNS) {
                return Err(PyValueError::new_err(format!(
                    "{name}: a column outside the journal pass's row"
                )));
            }
        }
        Ok(TableSide {
            agreement: IndexAgreement::new(key, specs.len()),
            projections: specs.iter().map(|(_, _, p)| p.clone()).collect(),
            odd_row: None,
        })
    }

    /// One batch of the table's rows, in the scan's order.
    pub fn count(&mut self, rows: &impl PassRows) {
        for row in 0..rows.len() {
            self.agreement
                .table_key(&[rows.cell(row, 0), rows.cell(row, 1)]);
            if rows.odd(row) && self.odd_row.is_none() {
                let run_id = match rows.cell(row, 0) {
                    Cell::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    _ => String::new(),
                };
                let seq = if let Cell::Int(n) = rows.cell(row, 1) {
                    n
                } else {
                    -1
                };
                self.odd_row = Some((run_id, seq));
            }
        }
        let agreement = &self.agreement;
        let projections = &self.projections;
        let starts: Vec<usize> = (0..rows.len()).step_by(CHUNK_ROWS).collect();
        let parts: Vec<Vec<RowMultiset>> = starts
            .par_iter()
            .map(|&start| {
                let end = (start + CHUNK_ROWS).min(rows.len());
                let mut cells: Vec<Cell<'_>> = Vec::with_capacity(PASS_COLUMNS);
                projections
                    .iter()
                    .map(|projection| {
                        let mut part = agreement.fresh();
                        for row in start..end {
                            cells.clear();
                            cells.extend(projection.iter().map(|&c| rows.cell(row, c)));
                            part.add(&cells);
                        }
                        part.finish()
                    })
                    .collect()
            })
            .collect();
        for chunk in parts {
            for (index, part) in chunk.iter().enumerate() {
                self.agreement.absorb(index, part);
            }
        }
    }

    /// What differs, each problem starting with the b-tree's name; empty when every index
    /// holds exactly the table's rows and every scan was in order.
    pub fn problems(&self, table: &str, specs: &[IndexSpec], scans: Vec<IndexScan>) -> Vec<String> {
        let mut problems: Vec<String> = Vec::new();
        if let Some((run_id, seq)) = &self.odd_row {
            problems.push(format!(
                "{table}: the row ({run_id:?}, {seq}) holds a value of another type than its STRICT column's"
            ));
        }
        problems.extend(
            self.agreement
                .table_problem()
                .map(|p| format!("{table}: {p}")),
        );
        for (number, ((name, _, _), scan)) in specs.iter().zip(scans).enumerate() {
            problems.extend(
                self.agreement
                    .index_problem(number, scan)
                    .map(|p| format!("{name}: {p}")),
            );
        }
        problems
    }
}

/// Prepare each index's scan on `connection` (held by the caller).
pub fn prepare(connection: Connection, specs: &[IndexSpec]) -> Result<Vec<Statement>, Error> {
    specs
        .iter()
        .map(|(_, sql, _)| connection.prepare(sql))
        .collect()
}

/// Scan each index in its order under `key` (the connection held by `reading`).
pub fn scan_indexes(
    key: [u8; 32],
    statements: Vec<Statement>,
    reading: &mut Reading,
) -> PyResult<Vec<IndexScan>> {
    let mut scans = Vec::with_capacity(statements.len());
    let mut row: Vec<Cell<'static>> = Vec::new();
    for mut statement in statements {
        let columns = statement.columns();
        let mut scan = IndexScan::new(key);
        statement.start(&[])?;
        while statement.step()? {
            let mut cells = recycle(std::mem::take(&mut row));
            let mut bytes = 8;
            for column in 0..columns {
                let cell = statement.cell_held(reading.held(), column as i32);
                if let Cell::Text(data) | Cell::Blob(data) = cell {
                    bytes += data.len();
                }
                cells.push(cell);
            }
            scan.add(&cells);
            row = recycle(cells);
            reading.count(bytes)?;
        }
        scans.push(scan);
    }
    Ok(scans)
}

/// An emptied buffer, free of the borrow its values had (its allocation kept).
fn recycle<'a, 'b>(mut cells: Vec<Cell<'a>>) -> Vec<Cell<'b>> {
    cells.clear();
    cells.into_iter().map(|_| Cell::Null).collect()
}
