//! SQLite's index-versus-table check made with sequential reads: one scan of a table and
//! one of each of its indexes, compared by `agentledger_core::index_agreement`. Which
//! indexes, and the SQL that scans each, are the caller's (`storage/btree_check.py`).

use agentledger_core::index_agreement::{Cell, IndexAgreement};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::sqlite::{ApswConnection, Reading, Statement};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(index_problems, m)?)?;
    Ok(())
}

/// One index: its name, the SQL that scans it (covering, in its order: its columns, the
/// table's primary key last), and where each of those columns is in the table's scan.
type IndexSpec = (String, String, Vec<usize>);

/// What differs between the table `table_sql` scans (in primary-key order, the key its
/// first `key_columns` columns) and each index of `indexes`, under `key` (32 random bytes,
/// fresh for this call); each problem starts with the b-tree's name. Empty when every
/// index holds exactly the table's rows and every scan is in order.
#[pyfunction]
fn index_problems(
    py: Python<'_>,
    connection: ApswConnection<'_>,
    key: [u8; 32],
    table: &str,
    table_sql: &str,
    key_columns: usize,
    indexes: Vec<IndexSpec>,
) -> PyResult<Vec<String>> {
    let mut table_scan = connection.connection().prepare(table_sql)?;
    let columns = table_scan.columns();
    let mut index_scans = Vec::with_capacity(indexes.len());
    for (name, sql, projection) in &indexes {
        if key_columns > columns || projection.iter().any(|&c| c >= columns) {
            return Err(PyValueError::new_err(format!(
                "{name}: a column outside the table's scan"
            )));
        }
        let statement = connection.connection().prepare(sql)?;
        if statement.columns() != projection.len() {
            return Err(PyValueError::new_err(format!(
                "{name}: the scan selects {} columns, not {}",
                statement.columns(),
                projection.len()
            )));
        }
        index_scans.push(statement);
    }
    let connection = connection.release();
    py.allow_threads(move || {
        let mut reading = Reading::new(connection);
        let mut agreement = IndexAgreement::new(key, indexes.len());
        table_scan.start(&[])?;
        // Buffers kept across rows, emptied before each step (their values borrow the row).
        let mut row_buffer: Vec<Cell<'static>> = Vec::with_capacity(columns);
        let mut projected_buffer: Vec<Vec<Cell<'static>>> = vec![Vec::new(); indexes.len()];
        while table_scan.step()? {
            let mut row = recycle(std::mem::take(&mut row_buffer));
            let bytes = read_row(&table_scan, &reading, columns, &mut row);
            let mut projected: Vec<Vec<Cell<'_>>> = std::mem::take(&mut projected_buffer)
                .into_iter()
                .map(recycle)
                .collect();
            for (cells, (_, _, projection)) in projected.iter_mut().zip(&indexes) {
                cells.extend(projection.iter().map(|&c| row[c]));
            }
            let per_index: Vec<&[Cell<'_>]> = projected.iter().map(Vec::as_slice).collect();
            agreement.add_table_row(&row[..key_columns], &per_index);
            drop(per_index);
            projected_buffer = projected.into_iter().map(recycle).collect();
            row_buffer = recycle(row);
            reading.count(bytes)?;
        }
        let mut problems: Vec<String> = agreement
            .table_problem()
            .map(|p| format!("{table}: {p}"))
            .into_iter()
            .collect();
        for (number, (mut statement, (name, _, projection))) in
            index_scans.into_iter().zip(&indexes).enumerate()
        {
            let mut scan = agreement.index_scan();
            statement.start(&[])?;
            while statement.step()? {
                let mut row = recycle(std::mem::take(&mut row_buffer));
                let bytes = read_row(&statement, &reading, projection.len(), &mut row);
                scan.add(&row);
                row_buffer = recycle(row);
                reading.count(bytes)?;
            }
            problems.extend(
                agreement
                    .index_problem(number, &scan)
                    .map(|p| format!("{name}: {p}")),
            );
        }
        Ok::<_, PyErr>(problems)
    })
}

/// An emptied buffer, free of the borrow its values had (its allocation kept).
fn recycle<'a, 'b>(mut cells: Vec<Cell<'a>>) -> Vec<Cell<'b>> {
    cells.clear();
    cells.into_iter().map(|_| Cell::Null).collect()
}

/// The statement's current row into `row` (borrowed until the next step); its size.
fn read_row<'s>(
    statement: &'s Statement,
    reading: &Reading,
    columns: usize,
    row: &mut Vec<Cell<'s>>,
) -> usize {
    let mut bytes = 8;
    for column in 0..columns {
        let cell = statement.cell_held(reading.held(), column as i32);
        bytes += match cell {
            Cell::Text(data) | Cell::Blob(data) => data.len() + 8,
            _ => 8,
        };
        row.push(cell);
    }
    bytes
}
