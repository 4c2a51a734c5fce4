//! The journal pass straight from SQLite: rows are read through the open apsw connection
//! (same transaction) into batches on the calling thread, while a second thread verifies
//! the batch before on the rayon pool. No Python object is made per row, at most
//! `IN_FLIGHT` batches exist at once, and the GIL is taken only between batches, at most
//! every `interrupts::LOOK_EVERY` (progress, Ctrl-C). One call: what the pass gathers (findings, run summaries, referenced digests,
//! marked rows, the rebuilt log) comes back as one `JournalPass`, and nothing of it stays
//! in Rust between calls.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use agentledger_core::index_agreement::Cell;
use agentledger_core::journal::{
    self, verify_and_scan, BatchReport, Carry, EntryRow, JournalScan, MarkedRows,
};
use agentledger_core::log::{LogAssembler, LogAssembly, LOG_ALG};
use agentledger_core::merkle::Hash;
use libsqlite3_sys as ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{to_py, Error};
use crate::index_check::{self, IndexSpec, PassRows, TableSide};
use crate::interrupts::Looks;
use crate::journal::frontier_nodes;
use crate::pools::pool;
use crate::sqlite::{ApswConnection, Connection, Held, Param, Reading, Statement};

const IN_FLIGHT: usize = 2;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(verify_journal, m)?)?;
    m.add_class::<JournalPass>()?;
    Ok(())
}

/// One query's parameters, and the entry before its first row when it starts mid-run.
type Query = (Vec<Param>, Option<(String, i64, Vec<u8>)>);

/// What to rebuild the workspace log from: the first `base` leaves given by their
/// `frontier`, then leaves `base..limit` as the rows name them (any order).
type LogBase<'py> = (u64, Vec<Bound<'py, PyBytes>>, u64);

/// The index-versus-table check folded into a whole pass: a 32-byte key drawn for this
/// call, the table's name, and its indexes (`index_check.rs`).
type IndexCheck = (Vec<u8>, String, Vec<IndexSpec>);

/// Verify the rows `sql` selects on `connection`, once per query in `queries`, in order.
/// `sql` selects `run_id, seq, kind, hash, bytes` (and `leaf` when `log` is given) ordered
/// by `(run_id, seq)`. With `marks`, the referenced digests are gathered across batches
/// and each mark's rows recorded (up to `marked_limit` each); with `log`, the workspace
/// log is rebuilt from the rows' leaves; with `indexes` (a whole pass in primary-key order,
/// `leaf` selected), each index is compared with the table's rows.
#[pyfunction]
#[pyo3(signature = (connection, ledger_id, sql, queries, jobs = 0, *, marks = None, marked_limit = 100_000, log = None, indexes = None, progress = None, batch_rows = 4_096))]
#[allow(clippy::too_many_arguments)]
fn verify_journal(
    py: Python<'_>,
    connection: ApswConnection<'_>,
    ledger_id: &str,
    sql: &str,
    queries: Vec<Query>,
    jobs: usize,
    marks: Option<Vec<(Vec<String>, Vec<u8>)>>,
    marked_limit: usize,
    log: Option<LogBase<'_>>,
    indexes: Option<IndexCheck>,
    progress: Option<PyObject>,
    batch_rows: usize,
) -> PyResult<JournalPass> {
    let logged = log.is_some();
    let mut assembler = match log {
        Some((base, frontier, limit)) => Some(
            LogAssembler::new(LOG_ALG, base, frontier_nodes(&frontier)?, limit).map_err(to_py)?,
        ),
        None => None,
    };
    let mut scan = marks.map(|marks| JournalScan::new(marks, marked_limit));
    let statement = connection.connection().prepare(sql)?;
    let mut folded = None;
    if let Some((key, table, specs)) = indexes {
        let key: [u8; 32] = key
            .try_into()
            .map_err(|_| pyo3::exceptions::PyValueError::new_err("the key is 32 bytes"))?;
        if !logged {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the index check needs the rows' leaf (a pass that rebuilds the log)",
            ));
        }
        let statements = index_check::prepare(connection.connection(), &specs)?;
        folded = Some((key, table, TableSide::new(key, &specs)?, specs, statements));
    }
    let connection = connection.release();
    let batch_rows = batch_rows.max(1);
    let pool = pool(jobs)?;
    let folding = assembler.as_mut();
    let scanning = scan.as_mut();
    let (index_statements, table_side) = match folded.as_mut() {
        Some((key, _, side, _, statements)) => {
            (Some((*key, std::mem::take(statements))), Some(side))
        }
        None => (None, None),
    };
    let report = py.allow_threads(move || {
        let (send, receive) = mpsc::sync_channel::<RowBatch>(IN_FLIGHT);
        // Verified batches come back to be filled again: their buffers are reused.
        let (give_back, spent) = mpsc::channel::<RowBatch>();
        let verified = AtomicU64::new(0);
        std::thread::scope(|threads| {
            // Leaf hashes go on to a thread of their own, which folds them into the log's
            // tree while the next batch is verified (that fold is sequential).
            let (leaves, to_fold) = mpsc::sync_channel::<Vec<(i64, Hash)>>(IN_FLIGHT);
            threads.spawn(move || {
                if let Some(assembler) = folding {
                    for batch in to_fold {
                        for (leaf, hash) in batch {
                            assembler.add(leaf, hash);
                        }
                    }
                }
            });
            let verifier = threads.spawn(|| {
                pool.install(|| {
                    let leaves = logged.then_some(leaves);
                    verify_batches(
                        ledger_id, receive, give_back, leaves, scanning, table_side, &verified,
                    )
                })
            });
            let mut reported = 0;
            let mut looks = Looks::new();
            let mut report_progress = |now: bool| -> PyResult<()> {
                if !(now || looks.due()) {
                    return Ok(());
                }
                Python::with_gil(|py| {
                    py.check_signals()?;
                    let done = verified.load(Ordering::Acquire);
                    if let Some(progress) = &progress {
                        if done > reported {
                            progress.call1(py, (done - reported,))?;
                        }
                    }
                    reported = done;
                    Ok(())
                })
            };
            // The first error of a progress call (Ctrl-C, or the callback's own) ends the pass.
            let mut stopped = None;
            let fresh = || RowBatch::reuse(&spent, batch_rows);
            let read = read_batches(
                connection,
                statement,
                queries,
                logged,
                batch_rows,
                fresh,
                |batch| {
                    send.send(batch).is_ok()
                        && report_progress(false)
                            .map_err(|err| stopped = Some(err))
                            .is_ok()
                },
            );
            drop(send);
            // Each index scanned in its own order while the last batches are verified.
            let scans = match (&read, &stopped, index_statements) {
                (Ok(()), None, Some((key, statements))) => {
                    let mut reading = Reading::new(connection);
                    Some(index_check::scan_indexes(key, statements, &mut reading))
                }
                _ => None,
            };
            let report = verifier.join().expect("the verifier does not panic");
            read.map_err(PyErr::from)?;
            if let Some(err) = stopped {
                return Err(err);
            }
            let scans = scans.transpose()?;
            report_progress(true)?;
            Ok::<_, PyErr>((report, scans))
        })
    })?;
    let ((report, first_odd), scans) = report;
    let index_problems = match (&folded, scans) {
        (Some((_, table, side, specs, _)), Some(scans)) => side.problems(table, specs, scans),
        _ => first_odd
            .map(|(run_id, seq)| vec![index_check::odd_row_problem("entries", &run_id, seq)])
            .unwrap_or_default(),
    };
    let (marked, mut referenced) = match scan {
        Some(scan) => scan.into_parts(),
        None => (Vec::new(), Vec::new()),
    };
    referenced.extend(report.referenced.iter().cloned());
    referenced.sort_unstable();
    referenced.dedup();
    Ok(JournalPass {
        report,
        marked,
        referenced,
        log: assembler.map(|assembler| assembler.finish()),
        index_problems,
    })
}

/// What one journal pass found and gathered (``verify_journal``'s result).
#[pyclass(frozen, module = "agentledger._core")]
struct JournalPass {
    report: BatchReport,
    marked: Vec<Option<MarkedRows>>,
    referenced: Vec<String>,
    log: Option<LogAssembly>,
    index_problems: Vec<String>,
}

type FindingTuple = (String, Option<i64>, String, String, String);
type RunTuple = (String, u64, u64, u64, i64, Vec<u8>);
type LogTuple<'py> = (
    u64,
    Vec<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
    Option<(u64, i64)>,
);

#[pymethods]
impl JournalPass {
    /// `(run_id, seq, check, expected, actual)`, at most `MAX_FINDINGS_PER_RUN` per run.
    #[getter]
    fn findings(&self) -> Vec<FindingTuple> {
        self.report
            .findings
            .iter()
            .map(|f| {
                let f = f.clone();
                (f.run_id, f.seq, f.check, f.expected, f.actual)
            })
            .collect()
    }

    /// One `(run_id, entries, activities, findings, last_seq, last_hash)` per run (a run
    /// split across queries may appear more than once).
    #[getter]
    fn runs(&self) -> Vec<RunTuple> {
        self.report
            .runs
            .iter()
            .map(|r| {
                let r = r.clone();
                (
                    r.run_id,
                    r.entries,
                    r.activities,
                    r.findings,
                    r.last_seq,
                    r.last_hash,
                )
            })
            .collect()
    }

    /// The distinct digests the rows reference, sorted.
    #[getter]
    fn referenced(&self) -> Vec<String> {
        self.referenced.clone()
    }

    /// Mark `index`'s `(run_id, seq)` in row order (`None` past the limit, or without
    /// marks). One mark at a time: a check converts only the rows it reads.
    fn marked(&self, index: usize) -> Option<MarkedRows> {
        self.marked.get(index).cloned().flatten()
    }

    /// What differs between the table and its indexes (empty without `indexes`), each
    /// problem starting with the b-tree's name.
    #[getter]
    fn index_problems(&self) -> Vec<String> {
        self.index_problems.clone()
    }

    /// The rebuilt log `(size, frontier, root, gap)` (None without `log`): `gap` is
    /// `(expected, found)` for the first leaf out of place.
    #[getter]
    fn log<'py>(&self, py: Python<'py>) -> Option<LogTuple<'py>> {
        self.log.as_ref().map(|done| {
            (
                done.size,
                done.frontier.iter().map(|n| PyBytes::new(py, n)).collect(),
                PyBytes::new(py, &done.root),
                done.gap.as_ref().map(|g| (g.expected, g.found)),
            )
        })
    }
}

/// Rows read from SQLite, their text and bytes in one buffer.
struct RowBatch {
    data: Vec<u8>,
    rows: Vec<StoredRow>,
    /// The entry before the first row, when that row continues a run (it chains to it).
    carry: Option<Carry>,
}

struct StoredRow {
    run_id: Range<usize>,
    seq: i64,
    kind: Range<usize>,
    hash: Range<usize>,
    bytes: Range<usize>,
    leaf: Option<i64>,
    /// `run_id` and `kind` as stored, when they are not UTF-8 (the ranges above then hold
    /// their lossy text, which the verifier reads): what the index check compares.
    raw_text: Option<(Range<usize>, Range<usize>)>,
    /// A value not of its column's type (STRICT: `run_id` and `kind` text, `seq` an
    /// integer, `hash` and `bytes` blobs, `leaf` an integer or NULL): what the index
    /// check reports.
    odd: bool,
}

/// A row of a batch, borrowed from its buffer.
struct RowView<'a> {
    run_id: &'a str,
    seq: i64,
    kind: &'a str,
    hash: &'a [u8],
    bytes: &'a [u8],
}

impl EntryRow for RowView<'_> {
    fn run_id(&self) -> &str {
        self.run_id
    }
    fn seq(&self) -> i64 {
        self.seq
    }
    fn kind(&self) -> &str {
        self.kind
    }
    fn hash(&self) -> &[u8] {
        self.hash
    }
    fn bytes(&self) -> &[u8] {
        self.bytes
    }
}

impl RowBatch {
    /// An empty batch for `capacity` rows, made of a spent one's buffers if there is one.
    fn reuse(spent: &mpsc::Receiver<RowBatch>, capacity: usize) -> Self {
        match spent.try_recv() {
            Ok(mut batch) => {
                batch.data.clear();
                batch.rows.clear();
                batch.carry = None;
                batch
            }
            Err(_) => RowBatch {
                data: Vec::with_capacity(capacity * 512),
                rows: Vec::with_capacity(capacity),
                carry: None,
            },
        }
    }

    fn keep(&mut self, bytes: &[u8]) -> Range<usize> {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        start..self.data.len()
    }

    /// Text kept as UTF-8 (an invalid sequence becomes U+FFFD, and so differs); whether
    /// it was valid.
    fn keep_text(&mut self, bytes: &[u8]) -> (Range<usize>, bool) {
        match std::str::from_utf8(bytes) {
            Ok(_) => (self.keep(bytes), true),
            Err(_) => (self.keep(String::from_utf8_lossy(bytes).as_bytes()), false),
        }
    }

    /// Copy the statement's current row. Values are taken by content: a STRICT table
    /// holds each in its column's type, and any edit of one changes what is hashed.
    fn push(&mut self, statement: &Statement, held: &Held, logged: bool) {
        // Types first: reading a value as bytes may convert it.
        let typed = statement.column_type(0) == ffi::SQLITE_TEXT
            && statement.column_type(1) == ffi::SQLITE_INTEGER
            && statement.column_type(2) == ffi::SQLITE_TEXT
            && statement.column_type(3) == ffi::SQLITE_BLOB
            && statement.column_type(4) == ffi::SQLITE_BLOB
            && (!logged
                || matches!(
                    statement.column_type(5),
                    ffi::SQLITE_INTEGER | ffi::SQLITE_NULL
                ));
        let (run_id, run_id_utf8) = self.keep_text(statement.bytes_held(held, 0));
        let (kind, kind_utf8) = self.keep_text(statement.bytes_held(held, 2));
        let raw_text = (!(run_id_utf8 && kind_utf8)).then(|| {
            let raw_run_id = self.keep(statement.bytes_held(held, 0));
            (raw_run_id, self.keep(statement.bytes_held(held, 2)))
        });
        let row = StoredRow {
            run_id,
            seq: statement.int(1),
            kind,
            hash: self.keep(statement.bytes_held(held, 3)),
            bytes: self.keep(statement.bytes_held(held, 4)),
            leaf: (logged && !statement.is_null(5)).then(|| statement.int(5)),
            raw_text,
            odd: !typed,
        };
        self.rows.push(row);
    }

    fn views(&self) -> Vec<RowView<'_>> {
        // SAFETY: `keep_text` stored only valid UTF-8 at these ranges.
        let text = |range: &Range<usize>| unsafe {
            std::str::from_utf8_unchecked(&self.data[range.clone()])
        };
        self.rows
            .iter()
            .map(|row| RowView {
                run_id: text(&row.run_id),
                seq: row.seq,
                kind: text(&row.kind),
                hash: &self.data[row.hash.clone()],
                bytes: &self.data[row.bytes.clone()],
            })
            .collect()
    }
}

impl PassRows for RowBatch {
    fn len(&self) -> usize {
        self.rows.len()
    }

    fn cell(&self, row: usize, column: usize) -> Cell<'_> {
        let row = &self.rows[row];
        let at = |range: &Range<usize>| &self.data[range.clone()];
        let (run_id, kind) = match &row.raw_text {
            Some((run_id, kind)) => (run_id, kind),
            None => (&row.run_id, &row.kind),
        };
        match column {
            0 => Cell::Text(at(run_id)),
            1 => Cell::Int(row.seq),
            2 => Cell::Text(at(kind)),
            3 => Cell::Blob(at(&row.hash)),
            4 => Cell::Blob(at(&row.bytes)),
            _ => row.leaf.map_or(Cell::Null, Cell::Int),
        }
    }

    fn odd(&self, row: usize) -> bool {
        self.rows[row].odd
    }
}

/// Read every query's rows (`statement`'s) into batches of `batch_rows` and hand each to `deliver`, which
/// says whether to go on. A query with a carry starts a batch of its own.
fn read_batches(
    connection: Connection,
    mut statement: Statement,
    queries: Vec<Query>,
    logged: bool,
    batch_rows: usize,
    fresh: impl Fn() -> RowBatch,
    mut deliver: impl FnMut(RowBatch) -> bool,
) -> Result<(), Error> {
    let mut batch = fresh();
    for (params, carry) in queries {
        if let Some((run_id, seq, hash)) = carry {
            if !batch.rows.is_empty() && !deliver(std::mem::replace(&mut batch, fresh())) {
                return Ok(());
            }
            batch.carry = Some(Carry { run_id, seq, hash });
        }
        statement.start(&params)?;
        while fill(connection, &mut statement, &mut batch, batch_rows, logged)? {
            if !deliver(std::mem::replace(&mut batch, fresh())) {
                return Ok(());
            }
        }
    }
    if !batch.rows.is_empty() {
        deliver(batch);
    }
    Ok(())
}

/// Step `statement` into `batch` until it holds `limit` rows (`true`) or the query is done
/// (`false`), holding the connection's mutex meanwhile.
fn fill(
    connection: Connection,
    statement: &mut Statement,
    batch: &mut RowBatch,
    limit: usize,
    logged: bool,
) -> Result<bool, Error> {
    let held = connection.lock();
    while batch.rows.len() < limit {
        if !statement.step()? {
            return Ok(false);
        }
        batch.push(statement, &held, logged);
    }
    Ok(true)
}

/// Verify batches as they arrive, each chained to the one before, into one report.
fn verify_batches(
    ledger_id: &str,
    batches: mpsc::Receiver<RowBatch>,
    spent: mpsc::Sender<RowBatch>,
    leaves: Option<mpsc::SyncSender<Vec<(i64, Hash)>>>,
    mut scan: Option<&mut JournalScan>,
    mut table: Option<&mut TableSide>,
    verified: &AtomicU64,
) -> (BatchReport, Option<(String, i64)>) {
    let mut total = BatchReport::default();
    let mut previous: Option<Carry> = None;
    // Without the folded index check (which reports it), the first row holding a value of
    // another type than its column's: a pass over named runs refuses the file as a whole
    // pass does.
    let mut first_odd = None;
    for batch in batches {
        if table.is_none() && first_odd.is_none() {
            first_odd = batch.rows.iter().find(|row| row.odd).map(|row| {
                let run_id = String::from_utf8_lossy(&batch.data[row.run_id.clone()]);
                (run_id.into_owned(), row.seq)
            });
        }
        let rows = batch.views();
        // Each row's `prev` names its predecessor's hash as recomputed from its bytes.
        let carry = batch.carry.clone().or(previous.take());
        let (report, (hashes, ())) = rayon::join(
            || verify_and_scan(ledger_id, carry.as_ref(), &rows, scan.as_deref_mut()),
            || {
                rayon::join(
                    || {
                        leaves
                            .is_some()
                            .then(|| agentledger_core::log::row_leaf_hashes(&rows))
                    },
                    || {
                        if let Some(table) = table.as_deref_mut() {
                            table.count(&batch);
                        }
                    },
                )
            },
        );
        if let (Some(leaves), Some(hashes)) = (&leaves, hashes) {
            let logged = batch.rows.iter().zip(hashes);
            let batch_leaves = logged.filter_map(|(row, hash)| Some((row.leaf?, hash)));
            // The folding thread outlives this one: a send only fails if it panicked.
            let _ = leaves.send(batch_leaves.collect());
        }
        if let Some(last) = rows.last() {
            previous = Some(Carry {
                run_id: last.run_id.to_owned(),
                seq: last.seq,
                hash: journal::entry_hash(last.bytes).to_vec(),
            });
        }
        verified.fetch_add(rows.len() as u64, Ordering::Release);
        total.absorb(report);
        drop(rows);
        // The reader may be gone (it stopped early); the batch is then simply dropped.
        let _ = spent.send(batch);
    }
    (total, first_odd)
}
