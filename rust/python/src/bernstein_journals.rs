//! The imported runs' journals, read through the apsw connection and handed to the rayon
//! pool, which verifies them in the background while the caller goes on (the verify reads
//! the ledger's table of imported files meanwhile). `bernstein_ledger_pass` takes the
//! reports as they finish, attaches the store index to them and settles the clean runs.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use agentledger_bernstein::journal::{self, JournalReport};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::pools::pool;
use crate::sqlite::{Connection, Failure, Param, Reading, Statement};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PendingJournals>()?;
    Ok(())
}

/// Journals being verified on the pool, without a store index yet.
#[pyclass(frozen, module = "agentledger._core")]
pub(crate) struct PendingJournals {
    /// `(run_id, path of its journal in bernstein_files, or None)`, in the caller's order.
    #[pyo3(get)]
    pub(crate) runs: Vec<(String, Option<String>)>,
    verifying: Arc<Verifying>,
    /// The runs in the order the pool finishes them; taken by the one pass that reads them.
    finished: Mutex<Option<mpsc::Receiver<usize>>>,
}

/// What the pool's tasks fill in, run by run.
struct Verifying {
    reports: Vec<Mutex<Option<JournalReport>>>,
    /// A task panicked (a bug): its run has no report, and the pass must not go on.
    panicked: AtomicBool,
}

#[pymethods]
impl PendingJournals {
    /// Read the journal of each of `runs` (`sql` selects a path's chunks in order) and
    /// hand it to the pool of `jobs` threads; returns once every journal is read.
    #[new]
    #[pyo3(signature = (connection, sql, runs, jobs = 0))]
    fn new(
        py: Python<'_>,
        connection: usize,
        sql: &str,
        runs: Vec<(String, Option<String>)>,
        jobs: usize,
    ) -> PyResult<Self> {
        // SAFETY: `connection` is `storage/native.handle(conn)` of an open apsw connection
        // that the Python caller keeps open while this object lives (from_pointer's contract).
        let connection = unsafe { Connection::from_pointer(connection)? };
        let pool = pool(jobs)?;
        let verifying = Arc::new(Verifying {
            reports: runs.iter().map(|_| Mutex::new(None)).collect(),
            panicked: AtomicBool::new(false),
        });
        let (done, finished) = mpsc::channel::<usize>();
        let shared = &verifying;
        let listed = &runs;
        py.allow_threads(move || -> PyResult<()> {
            // Ctrl-C stops the reading; the journals already handed over finish unread.
            let mut reading = Reading::new(connection);
            let mut statement = connection.prepare(sql)?;
            // Sixteen journals to a task: their files are hashed side by side.
            let mut group: Vec<(usize, Vec<u8>)> = Vec::with_capacity(journal::JOURNAL_GROUP);
            let hand_over = |group: Vec<(usize, Vec<u8>)>| {
                let (verifying, done) = (shared.clone(), done.clone());
                pool.spawn(move || {
                    let journals = group.iter().map(|(run, data)| (*run, data.as_slice()));
                    // A panic would abort the process from a detached task: it is noted.
                    let verified = catch_unwind(AssertUnwindSafe(|| {
                        journal::verify_journal_group(journals, |run, report| {
                            *lock(&verifying.reports[run]) = Some(report);
                            let _ = done.send(run);
                        })
                    }));
                    if verified.is_err() {
                        verifying.panicked.store(true, Ordering::SeqCst);
                        // The runs not reported yet must still end the pass's wait.
                        for (run, _) in &group {
                            if lock(&verifying.reports[*run]).is_none() {
                                let _ = done.send(*run);
                            }
                        }
                    }
                });
            };
            for (run, (_, path)) in listed.iter().enumerate() {
                let Some(path) = path else { continue };
                let Some(data) = read_chunks(&mut statement, path)? else {
                    continue;
                };
                reading.count(data.len())?;
                group.push((run, data));
                if group.len() == journal::JOURNAL_GROUP {
                    hand_over(std::mem::take(&mut group));
                }
            }
            if !group.is_empty() {
                hand_over(group);
            }
            Ok(())
        })?;
        Ok(Self {
            runs,
            verifying,
            finished: Mutex::new(Some(finished)),
        })
    }
}

impl PendingJournals {
    /// The runs as the pool finishes them (the iterator ends with the last), for the one
    /// pass that takes their reports.
    pub(crate) fn take_finished(&self) -> PyResult<mpsc::Receiver<usize>> {
        lock(&self.finished)
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("these journals were already verified"))
    }

    /// Run `run`'s report, once the pool has finished it (see `take_finished`).
    pub(crate) fn take_report(&self, run: usize) -> PyResult<Option<JournalReport>> {
        if self.verifying.panicked.load(Ordering::SeqCst) {
            return Err(PyRuntimeError::new_err(
                "a journal's verification failed (internal error)",
            ));
        }
        Ok(lock(&self.verifying.reports[run]).take())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The rows of `statement` for `key`, concatenated (`None` when there are none).
pub(crate) fn read_chunks(
    statement: &mut Statement,
    key: &str,
) -> Result<Option<Vec<u8>>, Failure> {
    statement.start(&[Param::Text(key.to_owned())])?;
    let mut data: Option<Vec<u8>> = None;
    while statement.step()? {
        data.get_or_insert_with(Vec::new)
            .extend_from_slice(statement.bytes(0));
    }
    Ok(data)
}
