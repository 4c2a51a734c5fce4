//! The blob pass straight from SQLite: every chunk of every blob streamed through a
//! connection and re-hashed, with the GIL released: on the open apsw connection (taking the
//! GIL back now and then for Ctrl-C), or on a reader of its own beside work the caller does
//! on its connection meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use agentledger_core::blob_check::{BlobCheck, BlobFinding};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

use crate::interrupts::LOOK_EVERY;
use crate::sqlite::{ApswConnection, Held, Param, Reading, Statement};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(verify_blobs, m)?)?;
    m.add_function(wrap_pyfunction!(verify_blobs_beside, m)?)?;
    Ok(())
}

type FindingTuple = (String, &'static str, String, String);

/// `(blobs checked, findings)`.
type Rehashed = (u64, Vec<FindingTuple>);

/// Check the blobs `sql` yields on `connection`, once per parameter list
/// in `queries`: rows `(digest, size, chunk_size, idx, data)`, each blob's chunks together
/// in index order, `idx` NULL for a blob without chunks. Returns `(blobs checked,
/// findings)`, a finding being `(digest, check, expected, actual)`.
#[pyfunction]
fn verify_blobs(
    py: Python<'_>,
    connection: ApswConnection<'_>,
    sql: &str,
    queries: Vec<Vec<Param>>,
) -> PyResult<Rehashed> {
    let mut statement = connection.connection().prepare(sql)?;
    let connection = connection.release();
    py.allow_threads(move || rehash(&mut statement, queries, &mut Reading::new(connection)))
}

/// [`verify_blobs`] on a reader of its own (`sqlite/reader.rs`: it sees the snapshot of the
/// caller's transaction, begun with `mark`), while `beside()` runs on this thread with the
/// caller's connection free: SQLite does not step two statements of one connection at
/// once, and this way the blobs are re-hashed on one core while `beside` (the b-tree
/// check) reads on the other. Returns
/// `(blobs, what beside returned)`; `blobs` is `None` when no reader could be opened (or
/// the portable paths are forced), or when SQLite failed the pass: then nothing was
/// re-hashed. When `beside` raises, or Ctrl-C comes while the pass ends, the pass is
/// stopped and the error raised.
#[pyfunction]
#[pyo3(signature = (connection, sql, beside, mark=None))]
fn verify_blobs_beside(
    py: Python<'_>,
    connection: ApswConnection<'_>,
    sql: &str,
    beside: PyObject,
    mark: Option<Vec<u8>>,
) -> PyResult<(Option<Rehashed>, PyObject)> {
    let reader = (!agentledger_core::portable::forced())
        .then(|| connection.connection().open_readers(1, mark.as_deref()))
        .flatten()
        .and_then(|mut readers| readers.pop());
    let Some(reader) = reader else {
        drop(connection);
        return Ok((None, beside.call0(py)?));
    };
    let mut statement = reader.connection().prepare(sql)?;
    drop(connection); // `beside` uses it
    let stop = AtomicBool::new(false);
    let finished = (Mutex::new(false), Condvar::new());
    std::thread::scope(|threads| {
        let pass = threads.spawn(|| {
            let mut holding = Stoppable {
                held: reader.connection().lock(),
                stop: &stop,
            };
            let blobs = rehash(&mut statement, vec![Vec::new()], &mut holding);
            *finished.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
            finished.1.notify_all();
            blobs
        });
        let mut done = beside.call0(py);
        // Ctrl-C is looked at while the pass ends (a large store takes a while).
        while done.is_ok() && !py.allow_threads(|| wait_for(&finished, LOOK_EVERY)) {
            if let Err(interrupted) = py.check_signals() {
                done = Err(interrupted);
            }
        }
        if done.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let blobs = py.allow_threads(|| pass.join().expect("the blob pass does not panic"));
        // A pass the file's SQLite stopped (a page it cannot read) re-hashed nothing: the
        // caller's b-tree check says why, or the pass on its connection raises as before.
        Ok((blobs.ok(), done?))
    })
}

/// Whether `flag` was set within `timeout`.
fn wait_for((flag, changed): &(Mutex<bool>, Condvar), timeout: Duration) -> bool {
    let set = flag.lock().unwrap_or_else(PoisonError::into_inner);
    let (set, _) = changed
        .wait_timeout_while(set, timeout, |set| !*set)
        .unwrap_or_else(PoisonError::into_inner);
    *set
}

/// How a pass holds its connection between two rows.
trait Holding {
    fn held(&self) -> &Held;
    /// Count `bytes` just read; the error that stops the pass, if one is due.
    fn count(&mut self, bytes: usize) -> PyResult<()>;
}

impl Holding for Reading {
    fn held(&self) -> &Held {
        Reading::held(self)
    }
    fn count(&mut self, bytes: usize) -> PyResult<()> {
        Reading::count(self, bytes)
    }
}

/// A reader's hold, on a thread that never takes the GIL: stopped by a flag instead.
struct Stoppable<'s> {
    held: Held,
    stop: &'s AtomicBool,
}

impl Holding for Stoppable<'_> {
    fn held(&self) -> &Held {
        &self.held
    }
    fn count(&mut self, _bytes: usize) -> PyResult<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(PyKeyboardInterrupt::new_err(
                "the work beside the blob pass failed",
            ));
        }
        Ok(())
    }
}

/// The rows of `statement` for each of `queries`, re-hashed blob by blob.
fn rehash(
    statement: &mut Statement,
    queries: Vec<Vec<Param>>,
    holding: &mut impl Holding,
) -> PyResult<Rehashed> {
    let mut findings = Vec::new();
    let mut checked = 0u64;
    let mut finish = |blob: BlobCheck| {
        checked += 1;
        findings.extend(blob.finish().into_iter().map(
            |BlobFinding {
                 digest,
                 check,
                 expected,
                 actual,
             }| (digest, check, expected, actual),
        ));
    };
    for params in queries {
        statement.start(&params).map_err(PyErr::from)?;
        // The blob being read, and its name's stored bytes (what rows are grouped by).
        let mut current: Option<(BlobCheck, Vec<u8>)> = None;
        while statement.step().map_err(PyErr::from)? {
            let digest = statement.bytes_held(holding.held(), 0);
            if current.as_ref().is_none_or(|(_, name)| name != digest) {
                if let Some((done, _)) = current.take() {
                    finish(done);
                }
                let name = String::from_utf8_lossy(digest).into_owned();
                let blob = BlobCheck::new(name, statement.int(1), statement.int(2));
                current = Some((blob, digest.to_vec()));
            }
            if !statement.is_null(3) {
                let data = statement.bytes_held(holding.held(), 4);
                let read = data.len();
                current
                    .as_mut()
                    .expect("set above")
                    .0
                    .add(statement.int(3), data);
                holding.count(read)?;
            }
        }
        if let Some((done, _)) = current.take() {
            finish(done);
        }
    }
    Ok((checked, findings))
}
