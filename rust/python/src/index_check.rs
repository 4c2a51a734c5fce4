//! The index-versus-table check folded into the whole journal pass: the table's side is
//! counted from the rows the pass reads anyway (keys in order on the verifier thread, the
//! keyed multisets on the pool), each index is then scanned in its own order on the reading
//! thread. `agentledger_core::index_agreement` compares them; which indexes, and the SQL
//! that scans each, are the caller's (`storage/btree_check.py`).
//!
//! A verify that reads only some rows (named runs, `--incremental`) makes the same check
//! from a read of its own (`check_indexes`): the key columns of every row, in key order.

use std::sync::mpsc;

use agentledger_core::index_agreement::{Cell, IndexAgreement, IndexScan, Kept, RowMultiset};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::errors::Error;
use crate::journal::{LeafRows, LoggedRows};
use crate::pools::pool;
use crate::sqlite::{ApswConnection, Connection, Held, Reading, Statement};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_indexes, m)?)?;
    Ok(())
}

/// One index: its name, the SQL that scans it (covering, in its order: its columns, the
/// primary key last), and where each of those columns is in the journal pass's row.
pub type IndexSpec = (String, String, Vec<usize>);

/// The columns of the journal pass's row: `run_id, seq, kind, hash, bytes, leaf`.
pub const PASS_COLUMNS: usize = 6;
const HASH: usize = 3;
const LEAF: usize = 5;

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
            problems.push(odd_row_problem(table, run_id, *seq));
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

/// The problem a row holding a value of another type than its STRICT column's is.
pub fn odd_row_problem(table: &str, run_id: &str, seq: i64) -> String {
    format!("{table}: the row ({run_id:?}, {seq}) holds a value of another type than its STRICT column's")
}

/// Rows of a table scan, batched before the table's side counts them.
const SCAN_ROWS: usize = 16_384;

/// The folded check on a read of its own, for a verify that reads only some rows:
/// `sql` (prepared on `connection`, inside the caller's read transaction) selects, for
/// every row of `table` in primary-key order, the journal pass's columns `columns` (their
/// positions in `PASS_COLUMNS`, the key `run_id, seq` first); then each index of `specs`
/// is scanned as in the whole pass. The problems, as `TableSide::problems` words them;
/// with `logged` (the columns then include `hash` and `leaf`), also the logged rows read.
#[pyfunction]
#[pyo3(signature = (connection, sql, columns, key, table, specs, jobs = 0, *, logged = false))]
#[allow(clippy::too_many_arguments)]
fn check_indexes(
    py: Python<'_>,
    connection: ApswConnection<'_>,
    sql: &str,
    columns: Vec<usize>,
    key: Vec<u8>,
    table: &str,
    specs: Vec<IndexSpec>,
    jobs: usize,
    logged: bool,
) -> PyResult<(Vec<String>, Option<LoggedRows>)> {
    let key: [u8; 32] = key
        .try_into()
        .map_err(|_| PyValueError::new_err("the key is 32 bytes"))?;
    let mut side = TableSide::new(key, &specs)?;
    let mut batch = ScannedRows::new(&columns)?;
    for (name, _, projection) in &specs {
        if projection.iter().any(|&c| batch.at[c].is_none()) {
            return Err(PyValueError::new_err(format!(
                "{name}: a column the table scan does not read"
            )));
        }
    }
    if logged && (batch.at[HASH].is_none() || batch.at[LEAF].is_none()) {
        return Err(PyValueError::new_err(
            "the logged rows need hash and leaf read",
        ));
    }
    let on = connection.connection();
    let mut statement = on.prepare(sql)?;
    if statement.columns() != columns.len() {
        return Err(PyValueError::new_err(
            "the table scan selects other columns",
        ));
    }
    let statements = prepare(on, &specs)?;
    let connection = connection.release();
    let pool = pool(jobs)?;
    py.allow_threads(|| {
        let mut reading = Reading::new(connection);
        // Batches are counted on a thread of their own while the next ones are read, and
        // come back to be filled again.
        let (send, batches) = mpsc::sync_channel::<ScannedRows>(2);
        let (give_back, spent) = mpsc::channel::<ScannedRows>();
        std::thread::scope(|threads| {
            let counter = threads.spawn(|| {
                let mut rows = LeafRows::default();
                for batch in batches {
                    pool.install(|| side.count(&batch));
                    if logged {
                        batch.logged_into(&mut rows);
                    }
                    let _ = give_back.send(batch);
                }
                (side, rows)
            });
            let mut read = || -> PyResult<()> {
                statement.start(&[])?;
                while statement.step()? {
                    let bytes = batch.push(&statement, reading.held());
                    reading.count(bytes)?;
                    if batch.len() == SCAN_ROWS {
                        let next = match spent.try_recv() {
                            Ok(mut used) => {
                                used.clear();
                                used
                            }
                            Err(_) => batch.empty(),
                        };
                        let _ = send.send(std::mem::replace(&mut batch, next));
                    }
                }
                let _ = send.send(std::mem::replace(&mut batch, ScannedRows::unused()));
                Ok(())
            };
            let read = read();
            drop(send);
            // Each index scanned in its order while the last batches are counted.
            let scans = read.and_then(|()| scan_indexes(key, statements, &mut reading));
            let (side, rows) = counter.join().expect("the counting does not panic");
            let problems = side.problems(table, &specs, scans?);
            Ok((problems, logged.then(|| LoggedRows(rows))))
        })
    })
}

/// Rows of a table scan: for each row, its values in the scan's column order.
struct ScannedRows {
    /// Where each of `PASS_COLUMNS` is in the scan's row (None: not read).
    at: [Option<usize>; PASS_COLUMNS],
    width: usize,
    data: Vec<u8>,
    values: Vec<Kept>,
    odd: Vec<bool>,
}

impl ScannedRows {
    fn new(columns: &[usize]) -> PyResult<Self> {
        let mut at = [None; PASS_COLUMNS];
        for (position, &column) in columns.iter().enumerate() {
            if column >= PASS_COLUMNS || at[column].is_some() {
                return Err(PyValueError::new_err(
                    "the scan's columns are distinct columns of the journal pass's row",
                ));
            }
            at[column] = Some(position);
        }
        if columns.get(..2) != Some(&[0, 1]) {
            return Err(PyValueError::new_err(
                "the scan reads the key (run_id, seq) first",
            ));
        }
        Ok(ScannedRows {
            at,
            width: columns.len(),
            data: Vec::new(),
            values: Vec::new(),
            odd: Vec::new(),
        })
    }

    /// A batch of the same columns, empty.
    fn empty(&self) -> Self {
        ScannedRows {
            at: self.at,
            width: self.width,
            data: Vec::new(),
            values: Vec::new(),
            odd: Vec::new(),
        }
    }

    /// What is left where a batch was sent on: nothing to fill.
    fn unused() -> Self {
        ScannedRows {
            at: [None; PASS_COLUMNS],
            width: 0,
            data: Vec::new(),
            values: Vec::new(),
            odd: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.odd.len()
    }

    fn clear(&mut self) {
        self.data.clear();
        self.values.clear();
        self.odd.clear();
    }

    /// Copy the statement's row (each value as SQLite holds it, never converted); the
    /// bytes it held.
    fn push(&mut self, statement: &Statement, held: &Held) -> usize {
        let start = self.data.len();
        let first = self.values.len();
        for column in 0..self.width {
            let cell = statement.cell_held(held, column as i32);
            self.values.push(Kept::keep(&cell, &mut self.data));
        }
        // The types a STRICT `entries` holds, as the whole pass checks them.
        let row = &self.values[first..];
        let is = |column: usize, typed: fn(&Kept) -> bool| {
            self.at[column].is_none_or(|at| typed(&row[at]))
        };
        let odd = !(is(0, |v| matches!(v, Kept::Text(_)))
            && is(1, |v| matches!(v, Kept::Int(_)))
            && is(2, |v| matches!(v, Kept::Text(_)))
            && is(3, |v| matches!(v, Kept::Blob(_)))
            && is(4, |v| matches!(v, Kept::Blob(_)))
            && is(5, |v| matches!(v, Kept::Int(_) | Kept::Null)));
        self.odd.push(odd);
        8 * self.width + self.data.len() - start
    }

    /// The `(leaf, run_id, seq, hash)` of each row with an integer leaf, as the log's
    /// rebuild reads them (`journal::log_rebuild`).
    fn logged_into(&self, rows: &mut LeafRows) {
        for row in 0..self.len() {
            let Cell::Int(leaf) = self.cell(row, LEAF) else {
                continue; // not logged (NULL), or of another type: a problem of the check
            };
            let bytes = |column| match self.cell(row, column) {
                Cell::Text(b) | Cell::Blob(b) => b,
                _ => &[],
            };
            let seq = match self.cell(row, 1) {
                Cell::Int(n) => n,
                _ => 0,
            };
            rows.push(leaf, bytes(0), seq, bytes(HASH));
        }
    }
}

impl PassRows for ScannedRows {
    fn len(&self) -> usize {
        ScannedRows::len(self)
    }

    fn cell(&self, row: usize, column: usize) -> Cell<'_> {
        let Some(at) = self.at[column] else {
            return Cell::Null; // never projected: `check_indexes` refuses such a spec
        };
        self.values[row * self.width + at].cell(&self.data)
    }

    fn odd(&self, row: usize) -> bool {
        self.odd[row]
    }
}
