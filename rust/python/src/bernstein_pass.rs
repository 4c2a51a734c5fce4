//! bernstein's `activity verify` over imported runs, read from SQLite by Rust itself.
//!
//! The journals are already verifying on the rayon pool ([`PendingJournals`]). The
//! calling thread only reads, through the open apsw connection (same transaction): when
//! asked, every blob of the store in one ordered scan, for the pool to hash; and the
//! stored DataOps receipts of the runs that settle, which the pool settles (plan, key,
//! signatures, reattachment). The pool also attaches the store index to each finished
//! report and picks which runs settle. So SQLite is read on one thread while every other
//! core verifies. A run whose every stage is settled that way comes back as a
//! [`CleanRun`], a handful of numbers: no Python object per row or per stage. Every other
//! run comes back as the report dict of `bernstein_verify_journals`, for the Python
//! verifier to finish with bernstein's own reasons. The content hashes the clean runs
//! reattached stay in Rust, in a [`DigestSet`] that already knows the blobs hashed here,
//! for `sha256_check_blobs` (gathered on the pool while Python goes on).

use std::sync::{mpsc, Arc, OnceLock};

use agentledger_bernstein::journal::{self, ActivityRow, JournalReport, StoreIndex};
use agentledger_bernstein::mirror::cross_check;
use agentledger_bernstein::receipt::{settle_receipt, SettledReceipt};
use agentledger_core::hash::Sha256Name;
use agentledger_core::signature;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::bernstein_journals::{read_chunks, PendingJournals};
use crate::pools::{drop_later, pool};
use crate::pyjson::{
    evidence_settled, py_text, report_dict, settled, settled_tuple, well_formed_artifact,
    BernsteinAuditMirror, BernsteinStoreIndex,
};
use crate::sha256_blobs::{hash_rows, hashed_with_room, DigestSet, Hashed};
use crate::sqlite::{Connection, Reading};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bernstein_ledger_pass, m)?)?;
    m.add_class::<CleanRun>()?;
    Ok(())
}

/// A run bernstein verifies clean, every stage settled in Rust: what the verifier still
/// needs from it.
#[pyclass(frozen, get_all, module = "agentledger._core")]
struct CleanRun {
    /// Kept journal rows.
    rows: u64,
    file_sha256: String,
    head: String,
    /// `activity.result` stages, all ok.
    stages: usize,
    /// Research/browser stages whose report is not in the store (bernstein skips them).
    unstored_reports: usize,
    /// In stage order: `(step, "absent", artifact_hash)` for a data/ops stage whose
    /// receipt is not in the store, `(step, "signer", key hex)` for a verified receipt.
    notes: Vec<(u64, &'static str, String)>,
    /// The stages as `bernstein_verify_journals`' settled tuples, when asked for.
    settled: Option<Py<PyList>>,
    /// With an audit mirror: the strict cross-check's findings, `(step, check, field,
    /// expected, actual)`, and the last journal index the run's records audit.
    audit: Option<PyObject>,
}

/// The queries the pass steps.
#[derive(Clone, Copy)]
struct Queries<'q> {
    /// A blob's chunks in order, by digest.
    blob: &'q str,
    /// `digest, data, idx` of every blob of the store, each blob's chunks in order (no
    /// parameter): hashed while the pool verifies, when most are referenced.
    store_blobs: Option<&'q str>,
}

/// Finish verifying the imported runs of `journals` (in their order): `blob_sql` selects a
/// digest's blob chunks in order. `store_blobs_sql`, when given, selects `digest, data, idx` of
/// every blob of the store, each blob's chunks in order: read while the pool verifies, they
/// are hashed for `sha256_check_blobs` (when most will be referenced). `store` is the
/// workdir's store index (`None` without `.sdd/cas`: then no run is settled here).
/// `mirror`: a clean audit chain's records, which clean runs are cross-checked with here;
/// `stage_rows`: clean runs list their stages (for a cross-check in Python). Returns, per
/// run, `None` (no journal), a `CleanRun` or a report dict; and the digests the clean runs
/// reattached.
#[pyfunction]
#[pyo3(signature = (connection, journals, blob_sql, store, jobs = 0, *, store_blobs_sql = None, mirror = None, stage_rows = false))]
#[allow(clippy::too_many_arguments)]
fn bernstein_ledger_pass(
    py: Python<'_>,
    connection: usize,
    journals: &Bound<'_, PendingJournals>,
    blob_sql: &str,
    store: Option<Py<BernsteinStoreIndex>>,
    jobs: usize,
    store_blobs_sql: Option<&str>,
    mirror: Option<Py<BernsteinAuditMirror>>,
    stage_rows: bool,
) -> PyResult<(Vec<PyObject>, DigestSet)> {
    // SAFETY: `connection` is `storage/native.handle(conn)` of the caller's open apsw
    // connection, used only during this call, with the GIL held (from_pointer's contract).
    let connection = unsafe { Connection::from_pointer(connection)? };
    let pool = pool(jobs)?;
    let journals = journals.get();
    let finished = journals.take_finished()?;
    let runs = &journals.runs;
    let index = store.as_ref().map(|s| &s.get().map);
    let mut reports: Vec<Option<JournalReport>> = runs.iter().map(|_| None).collect();
    let receipts: Vec<OnceLock<Vec<Receipt>>> = runs.iter().map(|_| OnceLock::new()).collect();
    let observed: Vec<OnceLock<Vec<Sha256Name>>> = runs.iter().map(|_| OnceLock::new()).collect();
    let queries = Queries {
        blob: blob_sql,
        store_blobs: store_blobs_sql,
    };
    // Room for every blob of the store, when it is read ahead.
    let reading_ahead = store_blobs_sql.is_some();
    let hashed = hashed_with_room(index.filter(|_| reading_ahead).map_or(0, StoreIndex::len));
    let slots = Slots {
        receipts: &receipts,
        observed: &observed,
        hashed: &hashed,
    };
    let taking = Taking {
        journals,
        finished,
        reports: &mut reports,
    };
    let scoped = &pool;
    py.allow_threads(move || {
        scoped.in_place_scope(|scope| read(connection, queries, taking, index, slots, scope))
    })?;
    let (reports, receipts) = (Arc::new(reports), Arc::new(receipts));
    let observed = Arc::new(observed);
    // The clean runs' reattached digests are gathered on the pool while this thread
    // makes the Python outcomes, and Python goes on.
    let digests = {
        let hashed = hashed.into_inner().unwrap_or_else(|p| p.into_inner());
        let (reports, receipts) = (reports.clone(), receipts.clone());
        DigestSet::gathered(&pool, move |digests| {
            digests.know(hashed);
            let mut listed = Vec::new();
            for ((report, verified), observed) in reports
                .iter()
                .zip(verified_receipts(&receipts))
                .zip(observed.iter())
            {
                if let (Some(_), Some(verified), Some(observed)) =
                    (report, verified, observed.get())
                {
                    reattached(observed, &verified, &mut listed);
                }
            }
            digests.extend_in_parallel(&listed);
            drop(listed);
            // Freed after the set is handed over (the last of the reports may be these).
            (reports, receipts, observed)
        })
    };
    let mirror = mirror.as_ref().map(|m| m.get());
    let mut outcomes = Vec::with_capacity(reports.len());
    let verified = verified_receipts(&receipts);
    for ((report, verified), (run_id, _)) in reports.iter().zip(verified).zip(runs) {
        let Some(report) = report else {
            outcomes.push(py.None());
            continue;
        };
        outcomes.push(match verified {
            Some(verified) => {
                let mut run = clean_run(py, report, &verified, stage_rows)?;
                if let Some(mirror) = mirror {
                    run.audit = Some(audit_cross_check(py, report, mirror, run_id)?);
                }
                Py::new(py, run)?.into_any()
            }
            None => report_dict(py, report, index.is_some())?
                .into_any()
                .unbind(),
        });
    }
    // Hundreds of thousands of small buffers, freed while Python goes on.
    drop_later((reports, receipts));
    Ok((outcomes, digests))
}

/// Per run, its verified receipts when it is clean: when every receipt it waits on
/// verified (`None` otherwise).
fn verified_receipts(receipts: &[OnceLock<Vec<Receipt>>]) -> Vec<Option<Vec<(usize, &Verified)>>> {
    receipts
        .iter()
        .map(|receipts| {
            let pending = receipts.get()?;
            pending
                .iter()
                .map(|r| Some((r.stage, r.outcome.get()?.as_ref()?)))
                .collect()
        })
        .collect()
}

/// The strict cross-check of a clean run with its audit records: `(findings, last
/// audited journal index)`.
fn audit_cross_check(
    py: Python<'_>,
    report: &JournalReport,
    mirror: &BernsteinAuditMirror,
    run_id: &str,
) -> PyResult<PyObject> {
    let (findings, last) = cross_check(&report.activities, &mirror.of_run(run_id.as_bytes()));
    let listed = PyList::empty(py);
    for f in findings {
        let item = (
            f.step,
            f.check,
            py_text(py, &f.field)?,
            py_text(py, &f.expected)?,
            py_text(py, &f.actual)?,
        );
        listed.append(item)?;
    }
    Ok((listed, last).into_pyobject(py)?.into_any().unbind())
}

/// Where the pool puts what it works out, per run (and the blobs it hashed).
#[derive(Clone, Copy)]
struct Slots<'s> {
    /// Set for a run that settles if its receipts do (possibly none).
    receipts: &'s [OnceLock<Vec<Receipt>>],
    /// Such a run's observations' content hashes, read as names on the pool meanwhile.
    observed: &'s [OnceLock<Vec<Sha256Name>>],
    /// The store's blobs, hashed meanwhile (`store_blobs`).
    hashed: &'s Hashed,
}

/// The journals' reports, taken on this thread as the pool finishes them.
struct Taking<'t> {
    journals: &'t PendingJournals,
    finished: mpsc::Receiver<usize>,
    reports: &'t mut [Option<JournalReport>],
}

/// Read the store's blobs, if asked, for the pool to hash; meanwhile, and then until the
/// last journal is verified, hand each finished report to the pool, which attaches the
/// store index to it and picks the receipts of a run that settles; read those receipts
/// here, for the pool to settle.
fn read<'s>(
    connection: Connection,
    queries: Queries<'_>,
    taking: Taking<'_>,
    index: Option<&'s StoreIndex>,
    slots: Slots<'s>,
    scope: &rayon::Scope<'s>,
) -> PyResult<()> {
    let Taking {
        journals,
        finished,
        reports,
    } = taking;
    let Some(index) = index else {
        for run in finished {
            reports[run] = journals.take_report(run)?;
        }
        return Ok(());
    };
    // Only this thread steps statements; Ctrl-C stops it between blob batches (the pool
    // finishes what it was handed, and the scope then returns the error).
    let mut reading = Reading::new(connection);
    let mut receipt_statement = connection.prepare(queries.blob)?;
    let (attached_to, attached) = mpsc::channel::<(usize, JournalReport)>();
    // The store index is looked up a hundred thousand times: on the pool, not here.
    let attach = |runs: &mut dyn Iterator<Item = usize>| -> PyResult<()> {
        let mut taken = Vec::new();
        for run in runs {
            if let Some(report) = journals.take_report(run)? {
                taken.push((run, report));
            }
        }
        if taken.is_empty() {
            return Ok(());
        }
        let attached_to = attached_to.clone();
        scope.spawn(move |_| {
            for (run, mut report) in taken {
                journal::attach_store(&mut report, index);
                if settles_but_receipts(&report) {
                    let _ = slots.receipts[run].set(Receipt::candidates(&report));
                    let _ = slots.observed[run].set(observed_names(&report));
                }
                let _ = attached_to.send((run, report));
            }
        });
        Ok(())
    };
    let mut settle = |(run, report): (usize, JournalReport)| -> PyResult<()> {
        for receipt in slots.receipts[run].get().into_iter().flatten() {
            match read_chunks(&mut receipt_statement, &receipt.artifact)? {
                Some(data) => scope.spawn(move |_| {
                    let _ = receipt.outcome.set(receipt.settle(&data, index));
                }),
                None => {
                    let _ = receipt.outcome.set(None);
                }
            }
        }
        reports[run] = Some(report);
        Ok(())
    };
    attach(&mut finished.try_iter())?;
    if let Some(sql) = queries.store_blobs {
        let mut statement = connection.prepare(sql)?;
        statement.start(&[])?;
        // Between batches, the journals verified meanwhile, and the receipts of those
        // attached meanwhile.
        hash_rows(&mut statement, slots.hashed, scope, |bytes| {
            reading.count(bytes)?;
            attach(&mut finished.try_iter())?;
            attached.try_iter().try_for_each(&mut settle)
        })?;
    }
    while let Ok(run) = finished.recv() {
        attach(&mut std::iter::once(run).chain(finished.try_iter()))?;
        attached.try_iter().try_for_each(&mut settle)?;
    }
    // Every report is with the pool or back: the channel ends with the last task.
    drop(attached_to);
    attached.iter().try_for_each(settle)
}

/// Whether bernstein's verdict on the run is clean, given that every stage not settled
/// from the journal pass alone (`settled`) is a receipt that settles here.
fn settles_but_receipts(report: &JournalReport) -> bool {
    report.chain_consistent
        && report.crash.is_none()
        && report.discarded_lines.is_empty()
        && report.row_finding_count == 0
        && !report.activities.is_empty()
        && report
            .activities
            .iter()
            .all(|a| settled(a) || Receipt::candidate(a))
}

/// A data/ops stage whose receipt is in the store, to be settled from its bytes.
struct Receipt {
    stage: usize,
    /// The receipt's digest: its `artifact_hash`, which the stored bytes must hash to.
    artifact: String,
    /// Set by the pool: `None` when Python must decide.
    outcome: OnceLock<Option<Verified>>,
}

/// A receipt that passed every check: its key, and the hashes it pins (reattached).
struct Verified {
    signer: [u8; 32],
    references: Vec<Vec<u8>>,
}

impl Receipt {
    /// The stages of a settling run that are not `settled`: its receipts.
    fn candidates(report: &JournalReport) -> Vec<Receipt> {
        let stages = report.activities.iter().enumerate();
        stages
            .filter(|(_, a)| !settled(a))
            .map(|(stage, a)| Receipt {
                stage,
                artifact: String::from_utf8_lossy(&a.artifact_hash).into_owned(),
                outcome: OnceLock::new(),
            })
            .collect()
    }

    /// A stage that would be `settled` but for its receipt, stored under its own name.
    fn candidate(a: &ActivityRow) -> bool {
        matches!(a.kind.as_slice(), b"data" | b"ops")
            && evidence_settled(a)
            && well_formed_artifact(&a.artifact_hash)
            && a.artifact_stored.as_deref() == Some(a.artifact_hash.as_slice())
    }

    /// bernstein's checks of the stored receipt `data`, when they all pass: the bytes
    /// hash to the artifact, the plan recomputes, every signature verifies against the
    /// embedded key, every pinned hash reattaches.
    fn settle(&self, data: &[u8], index: &StoreIndex) -> Option<Verified> {
        if agentledger_core::hash::sha256_hex(data) != self.artifact {
            return None;
        }
        let SettledReceipt {
            signer,
            signatures,
            references,
        } = settle_receipt(data)?;
        let reattached = references.iter().all(|r| index.holds_itself(r));
        // The embedded key is decoded once for all of the receipt's signatures (and for
        // the next receipts it signs, on this thread).
        let key = signature::PublicKey::parse_remembered(&signer);
        let verified = signatures
            .iter()
            .all(|(payload, sig)| key.is_some_and(|key| key.verifies(payload, sig)));
        (reattached && verified).then_some(Verified { signer, references })
    }
}

/// The content hashes of a run's observations, as names.
fn observed_names(report: &JournalReport) -> Vec<Sha256Name> {
    let observations = report.activities.iter().flat_map(|a| &a.observations);
    observations
        .map(|(_, _, hash)| Sha256Name::parse(hash))
        .collect()
}

/// The digests a clean run reattached: its observations' (`observed`), and what its
/// verified receipts pin (so their bytes are re-hashed too).
fn reattached(
    observed: &[Sha256Name],
    receipts: &[(usize, &Verified)],
    digests: &mut Vec<Sha256Name>,
) {
    digests.extend(observed.iter().cloned());
    for (_, receipt) in receipts {
        digests.extend(receipt.references.iter().map(|r| Sha256Name::parse(r)));
    }
}

/// A clean run's summary (what it reattached is gathered by `reattached`).
fn clean_run(
    py: Python<'_>,
    report: &JournalReport,
    receipts: &[(usize, &Verified)],
    stage_rows: bool,
) -> PyResult<CleanRun> {
    let mut notes = Vec::new();
    let mut unstored_reports = 0;
    let mut receipts = receipts.iter().peekable();
    for (stage, a) in report.activities.iter().enumerate() {
        if let Some((_, receipt)) = receipts.next_if(|(s, _)| *s == stage) {
            notes.push((a.step, "signer", hex::encode(receipt.signer)));
            continue;
        }
        match a.kind.as_slice() {
            b"data" | b"ops" => notes.push((
                a.step,
                "absent",
                String::from_utf8_lossy(&a.artifact_hash).into_owned(),
            )),
            b"research" | b"browser" => unstored_reports += 1,
            _ => {}
        }
    }
    let settled = if stage_rows {
        let rows = PyList::empty(py);
        for a in &report.activities {
            rows.append(settled_tuple(py, a)?)?;
        }
        Some(rows.unbind())
    } else {
        None
    };
    Ok(CleanRun {
        rows: report.count,
        file_sha256: report.file_sha256.clone(),
        head: String::from_utf8_lossy(&report.head).into_owned(),
        stages: report.activities.len(),
        unstored_reports,
        notes,
        settled,
        audit: None,
    })
}
