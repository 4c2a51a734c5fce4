//! SQLite's index-versus-table check (`PRAGMA integrity_check(table)`) of many tables on
//! two connections at once: the caller's, and a reader proven to read the snapshot of
//! the caller's transaction (`sqlite/reader.rs`). Each takes the next table of the list
//! when it is done with one. A verify of named runs makes this check alone, with no blob
//! pass beside it, so one core was idle while the other checked every table in turn.
//!
//! The reference is the check table after table on the caller's connection
//! (`storage/btree_check.py: btree_problems`, and this call when no reader is had: no
//! mark, or the portable paths forced); a test holds the two to the same lines on
//! damaged files.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use libsqlite3_sys as ffi;
use pyo3::prelude::*;

use crate::errors::Error;
use crate::interrupts::LOOK_EVERY;
use crate::sqlite::{ApswConnection, Connection, Param, Statement};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(btree_check_tables, m)?)?;
    Ok(())
}

const CHECK_SQL: &str = "SELECT * FROM pragma_integrity_check(?)";

/// What SQLite's check says of each of `tables`, one list of lines per table in the
/// order of `tables` (`["ok"]` for a table whose b-trees agree): checked on `connection`
/// and, given the mark its transaction began with (`mark`, `sqlite/read_mark.rs`), on a
/// reader at once. The GIL is let go; Ctrl-C stops both.
#[pyfunction]
#[pyo3(signature = (connection, tables, mark=None))]
fn btree_check_tables(
    py: Python<'_>,
    connection: ApswConnection<'_>,
    tables: Vec<String>,
    mark: Option<Vec<u8>>,
) -> PyResult<Vec<Vec<String>>> {
    let reader = (!agentledger_core::portable::forced() && tables.len() > 1)
        .then(|| connection.connection().open_readers(1, mark.as_deref()))
        .flatten()
        .and_then(|mut readers| readers.pop());
    // Both statements are prepared while the caller's connection is held with the GIL.
    let mut own = connection.connection().prepare(CHECK_SQL)?;
    let mut beside = match &reader {
        Some(reader) => Some(reader.connection().prepare(CHECK_SQL)?),
        None => None,
    };
    let caller = connection.release();
    let shared = Shared {
        tables: &tables,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        lines: Mutex::new(vec![Vec::new(); tables.len()]),
        running: (
            Mutex::new(1 + usize::from(beside.is_some())),
            Condvar::new(),
        ),
    };
    let connections: Vec<Connection> = std::iter::once(caller)
        .chain(reader.as_ref().map(|reader| reader.connection()))
        .collect();
    let outcome = std::thread::scope(|threads| {
        let shared = &shared;
        let mut workers = vec![threads.spawn(move || shared.check_on(caller, &mut own))];
        if let (Some(statement), Some(reader)) = (beside.as_mut(), reader.as_ref()) {
            let on = reader.connection();
            workers.push(threads.spawn(move || shared.check_on(on, statement)));
        }
        // Ctrl-C is looked at while the tables are checked.
        let mut looked = Ok(());
        while looked.is_ok() && !py.allow_threads(|| shared.finished()) {
            looked = py.check_signals();
            if looked.is_err() {
                shared.stop.store(true, Ordering::Relaxed);
                for connection in &connections {
                    // SAFETY: live connections; sqlite3_interrupt may be called from any
                    // thread while another runs a statement on them.
                    unsafe { ffi::sqlite3_interrupt(connection.handle()) };
                }
            }
        }
        let failed = py.allow_threads(|| {
            workers
                .into_iter()
                .map(|worker| worker.join().expect("the check does not panic"))
                .collect::<Result<Vec<()>, Error>>()
        });
        looked?;
        failed.map_err(PyErr::from)
    });
    drop(beside);
    drop(reader);
    outcome?;
    Ok(shared
        .lines
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner))
}

/// What the two connections share: the tables, the next one to take, and the lines.
struct Shared<'t> {
    tables: &'t [String],
    next: AtomicUsize,
    stop: AtomicBool,
    lines: Mutex<Vec<Vec<String>>>,
    /// How many connections are still checking.
    running: (Mutex<usize>, Condvar),
}

impl Shared<'_> {
    /// Check the next table on `connection` until none is left (or one fails).
    fn check_on(&self, connection: Connection, statement: &mut Statement) -> Result<(), Error> {
        let checked = (|| {
            let _held = connection.lock();
            loop {
                let at = self.next.fetch_add(1, Ordering::Relaxed);
                if at >= self.tables.len() || self.stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                statement.start(&[Param::Text(self.tables[at].clone())])?;
                let mut lines = Vec::new();
                while statement.step()? {
                    lines.push(String::from_utf8_lossy(statement.bytes(0)).into_owned());
                }
                self.lines.lock().unwrap_or_else(PoisonError::into_inner)[at] = lines;
            }
        })();
        if checked.is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        let (running, done) = &self.running;
        *running.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        done.notify_all();
        checked
    }

    /// Whether both connections are done, waiting for it at most [`LOOK_EVERY`].
    fn finished(&self) -> bool {
        let (running, done) = &self.running;
        let running = running.lock().unwrap_or_else(PoisonError::into_inner);
        let (running, _) = done
            .wait_timeout_while(running, LOOK_EVERY, |running| *running > 0)
            .unwrap_or_else(PoisonError::into_inner);
        *running == 0
    }
}
