//! Verifying bernstein runs through the pipeline of `agentledger-bernstein`: those imported
//! into a ledger (over its tables, a [`Source`] read with the caller's apsw connection,
//! for `bernstein_check`) and those of a workdir on disk (`bernstein_verify_workdir`).
//! Results are frozen classes holding the Rust verdicts; each field becomes a Python
//! object only when read.

use std::borrow::Cow;
use std::sync::Mutex;

use agentledger_bernstein::directory::Directory;
use agentledger_bernstein::journal::StoreIndex;
use agentledger_bernstein::pipeline::{self, Source};
use agentledger_bernstein::report::{Browser, ClaimVerdict};
use agentledger_bernstein::store::{cas_path, Store};
use agentledger_bernstein::verify::{Finding, Options, Run, Stage};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use agentledger_bernstein::mirror::RecordsByRun;

use crate::bernstein_audit::BernsteinAuditMirror;
use crate::errors::Error;
use crate::interrupts::Looks;
use crate::pools::pool;
use crate::pyjson::py_text as text;
use crate::sqlite::{Connection, Held, OwnedConnection, Param, Statement};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bernstein_verify_workdir, m)?)?;
    m.add_class::<BernsteinOptions>()?;
    m.add_class::<BernsteinRun>()?;
    m.add_class::<BernsteinFinding>()?;
    m.add_class::<BernsteinStage>()?;
    m.add_class::<BernsteinClaim>()?;
    m.add_class::<BernsteinBrowser>()?;
    Ok(())
}

/// A journal's bytes by path, its chunks in order.
const JOURNAL_SQL: &str = "SELECT c.data FROM bernstein_files AS f \
     JOIN blob_chunks AS c ON c.digest = f.digest \
     WHERE f.path = ? AND f.kind = 'journal' ORDER BY c.idx";
/// A listed file's bytes by path (one row with NULL data for an empty blob; none when
/// the file is not listed or its blob is absent).
const FILE_SQL: &str = "SELECT c.data FROM bernstein_files AS f \
     JOIN blobs AS b ON b.digest = f.digest \
     LEFT JOIN blob_chunks AS c ON c.digest = b.digest \
     WHERE f.path = ? ORDER BY c.idx";
/// A listed file's digest by path.
const DIGEST_SQL: &str = "SELECT digest FROM bernstein_files WHERE path = ?";
/// A blob's chunks in order, by the digest the store index gives (one index search instead
/// of [`FILE_SQL`]'s three).
const CHUNKS_SQL: &str = "SELECT data FROM blob_chunks WHERE digest = ? ORDER BY idx";
/// Whether a blob is held (an empty one has no chunk).
const BLOB_SQL: &str = "SELECT size FROM blobs WHERE digest = ?";

/// How `bernstein_check` and `bernstein_verify_workdir` read and what they keep: plain values only (no Python object is
/// held after the call that made them).
#[pyclass(frozen, get_all, module = "agentledger._core")]
pub struct BernsteinOptions {
    /// Raw Ed25519 keys whose receipts are not self-asserted (`--trust`).
    pub(crate) trusted: Vec<Vec<u8>>,
    /// Keep every stage's verdict (`BernsteinRun.stages`), not only failing ones' reasons.
    pub(crate) stages: bool,
    /// Keep the content hashes reattachment trusted (`BernsteinRun.referenced`).
    pub(crate) referenced: bool,
    /// Pool threads (0: every core).
    pub(crate) jobs: usize,
}

#[pymethods]
impl BernsteinOptions {
    #[new]
    #[pyo3(signature = (*, trusted=Vec::new(), stages=false, referenced=false, jobs=0))]
    fn new(trusted: Vec<Vec<u8>>, stages: bool, referenced: bool, jobs: usize) -> Self {
        BernsteinOptions {
            trusted,
            stages,
            referenced,
            jobs,
        }
    }
}

/// The imported workdir, read through the caller's connection and, when they could be
/// opened in the same snapshot (`sqlite/reader.rs`), one reader connection per pool thread:
/// the calling thread reads the journals through the caller's connection, each pool thread
/// the store through its own reader (or, without readers, through the caller's connection,
/// one thread at a time, holding its mutex while it steps).
struct Ledger<'i> {
    connection: Connection,
    statements: Mutex<Statements>,
    /// By pool thread index: its reader and statements (empty: none could be opened).
    readers: Vec<Mutex<Reader>>,
    /// Each run's journal path (`None`: no journal to read).
    paths: Vec<Option<String>>,
    index: Option<&'i StoreIndex>,
}

/// A pool thread's own connection and its statements (dropped before the connection).
struct Reader {
    statements: Statements,
    _connection: OwnedConnection,
}

/// The statements, and the connection's mutex, held by one reading thread.
struct HeldStatements<'a> {
    statements: std::sync::MutexGuard<'a, Statements>,
    _held: Held,
}

impl std::ops::Deref for HeldStatements<'_> {
    type Target = Statements;
    fn deref(&self) -> &Statements {
        &self.statements
    }
}

impl std::ops::DerefMut for HeldStatements<'_> {
    fn deref_mut(&mut self) -> &mut Statements {
        &mut self.statements
    }
}

struct Statements {
    journal: Statement,
    file: Statement,
    digest: Statement,
    chunks: Statement,
    blob: Statement,
}

impl Statements {
    fn prepare(on: Connection) -> Result<Self, Error> {
        Ok(Statements {
            journal: on.prepare(JOURNAL_SQL)?,
            file: on.prepare(FILE_SQL)?,
            digest: on.prepare(DIGEST_SQL)?,
            chunks: on.prepare(CHUNKS_SQL)?,
            blob: on.prepare(BLOB_SQL)?,
        })
    }
}

impl Ledger<'_> {
    fn shared(&self) -> HeldStatements<'_> {
        let statements = self.statements.lock().unwrap_or_else(|p| p.into_inner());
        // After the statements' lock: a thread holds the connection only while it reads.
        let held = self.connection.lock();
        HeldStatements {
            statements,
            _held: held,
        }
    }

    /// The statements this thread reads the store with: its own reader's on a pool thread
    /// that has one (no other thread takes that lock), else the shared ones.
    fn with_store<R>(&self, read: impl FnOnce(&mut Statements) -> R) -> R {
        let own = rayon::current_thread_index().and_then(|i| self.readers.get(i));
        match own {
            Some(reader) => {
                let mut reader = reader.lock().unwrap_or_else(|p| p.into_inner());
                read(&mut reader.statements)
            }
            None => read(&mut self.shared()),
        }
    }

    /// The rows' data concatenated: `None` when there is no row.
    fn read(statement: &mut Statement, key: &str) -> Result<Option<Vec<u8>>, Error> {
        statement.start(&[Param::Text(key.to_owned())])?;
        let mut data: Option<Vec<u8>> = None;
        while statement.step()? {
            data.get_or_insert_with(Vec::new)
                .extend_from_slice(statement.bytes(0));
        }
        Ok(data)
    }
}

impl Store for Ledger<'_> {
    fn exists(&self) -> bool {
        self.index.is_some()
    }

    fn get(&self, content_hash: &[u8]) -> Option<Cow<'_, [u8]>> {
        // A failing read is an absent file here; the workspace checks report the table.
        if let Some(digest) = self.index.and_then(|index| index.get(content_hash)) {
            let digest = std::str::from_utf8(digest).ok()?;
            return self.with_store(|statements| {
                match Self::read(&mut statements.chunks, digest).ok()? {
                    Some(data) => Some(Cow::Owned(data)),
                    // No chunk: an empty blob, or none at all.
                    None => {
                        let held = Self::read(&mut statements.blob, digest).ok()?;
                        held.map(|_| Cow::Owned(Vec::new()))
                    }
                }
            });
        }
        let path = cas_path(content_hash)?;
        self.with_store(|statements| Self::read(&mut statements.file, &path))
            .ok()
            .flatten()
            .map(Cow::Owned)
    }

    fn stored_digest<'a>(&'a self, content_hash: &'a [u8]) -> Option<Cow<'a, [u8]>> {
        if let Some(stored) = self.index.and_then(|index| index.get(content_hash)) {
            return Some(Cow::Borrowed(stored));
        }
        let path = cas_path(content_hash)?;
        self.with_store(|statements| {
            let statement = &mut statements.digest;
            statement.start(&[Param::Text(path)]).ok()?;
            match statement.step() {
                Ok(true) if !statement.is_null(0) => Some(Cow::Owned(statement.bytes(0).to_vec())),
                _ => None,
            }
        })
    }
}

impl Source for Ledger<'_> {
    type Error = PyErr;

    fn journal(&self, run: usize) -> PyResult<Option<Vec<u8>>> {
        match &self.paths[run] {
            Some(path) => Ok(Self::read(&mut self.shared().journal, path)?),
            None => Ok(None),
        }
    }

    fn index(&self) -> Option<&StoreIndex> {
        self.index
    }
}

/// What verifying in a ledger reads with, prepared while the caller's connection is held
/// with the GIL: the statements, and a reader per pool thread when the file allows it
/// (proven to read the snapshot of the caller's transaction, begun with `mark`:
/// `sqlite/reader.rs`). The portable switch
/// keeps the reference: every read through the caller's connection, one at a time.
pub(crate) struct LedgerReads {
    statements: Statements,
    readers: Vec<Mutex<Reader>>,
}

impl LedgerReads {
    pub(crate) fn prepare(
        on: Connection,
        threads: usize,
        mark: Option<&[u8]>,
    ) -> Result<Self, Error> {
        let statements = Statements::prepare(on)?;
        let readers = (!agentledger_core::portable::forced())
            .then(|| on.open_readers(threads, mark))
            .flatten()
            .and_then(|readers| {
                readers
                    .into_iter()
                    .map(|reader| {
                        let statements = Statements::prepare(reader.connection()).ok()?;
                        Some(Mutex::new(Reader {
                            statements,
                            _connection: reader,
                        }))
                    })
                    .collect::<Option<Vec<_>>>()
            })
            .unwrap_or_default();
        Ok(LedgerReads {
            statements,
            readers,
        })
    }
}

/// Verify the imported runs `runs` (`(run id, journal path or None)`, in order) of the
/// ledger on `connection` (released by its `ApswConnection`, the GIL let go): one verdict
/// per run, in order. `index`: the store's index (`None`: the workdir has no `.sdd/cas`);
/// `audit`: the audit chain's records, when the chain mirrors activities.
pub(crate) fn verify_in_ledger(
    connection: Connection,
    reads: LedgerReads,
    runs: Vec<(String, Option<String>)>,
    options: &BernsteinOptions,
    index: Option<&StoreIndex>,
    audit: Option<&RecordsByRun<'_>>,
) -> PyResult<Vec<BernsteinRun>> {
    let (ids, paths): (Vec<String>, Vec<Option<String>>) = runs.into_iter().unzip();
    let run_ids: Vec<Vec<u8>> = ids.iter().map(|id| id.as_bytes().to_vec()).collect();
    // The pool's threads read too: each takes its reader, or the shared statements with
    // the connection's mutex (`Ledger::with_store`).
    let ledger = Ledger {
        connection,
        statements: Mutex::new(reads.statements),
        readers: reads.readers,
        paths,
        index,
    };
    let mut looks = Looks::new();
    let verdicts = verify_with(&ledger, &run_ids, options, audit, |_| {
        // Ctrl-C is seen between two journals, at most every `LOOK_EVERY`.
        match looks.due() {
            true => Python::with_gil(|py| py.check_signals()),
            false => Ok(()),
        }
    })?;
    Ok(finish(verdicts, ids))
}

/// Verify the runs `run_ids` of the workdir at `root`, in place (the directory is its own
/// store); `audit`: the audit chain's `activity.result` records, when the chain mirrors
/// activities.
#[pyfunction]
#[pyo3(signature = (root, run_ids, options, *, audit=None))]
fn bernstein_verify_workdir(
    py: Python<'_>,
    root: std::path::PathBuf,
    run_ids: Vec<String>,
    options: &Bound<'_, BernsteinOptions>,
    audit: Option<PyRef<'_, BernsteinAuditMirror>>,
) -> PyResult<Vec<BernsteinRun>> {
    let options = options.get();
    let ids: Vec<Vec<u8>> = run_ids.iter().map(|id| id.as_bytes().to_vec()).collect();
    let directory = Directory::new(root, ids.clone());
    let mirror = audit.as_deref().map(|m| RecordsByRun::new(&m.records));
    let runs =
        py.allow_threads(|| verify_with(&directory, &ids, options, mirror.as_ref(), |_| Ok(())))?;
    Ok(finish(runs, run_ids))
}

/// The pipeline over `source` (the GIL let go by the caller).
fn verify_with<S: Source>(
    source: &S,
    run_ids: &[Vec<u8>],
    options: &BernsteinOptions,
    mirror: Option<&RecordsByRun<'_>>,
    between: impl FnMut(usize) -> Result<(), S::Error> + Send,
) -> PyResult<Vec<Run>>
where
    PyErr: From<S::Error>,
{
    let trusted: Vec<[u8; 32]> = options
        .trusted
        .iter()
        .filter_map(|key| key.as_slice().try_into().ok())
        .collect();
    let verify = Options {
        trusted: &trusted,
        stages: options.stages,
        referenced: options.referenced,
    };
    let pool = pool(options.jobs)?;
    let of_run = |run_id: &[u8]| mirror.map_or_else(Vec::new, |m| m.of_run(run_id));
    let audit: pipeline::AuditRecords<'_> = match mirror {
        Some(_) => Some(&of_run),
        None => None,
    };
    let verdicts = pipeline::verify_runs(source, run_ids, audit, verify, &pool, between);
    Ok(verdicts?)
}

/// The verdicts as Python objects.
fn finish(runs: Vec<Run>, run_ids: Vec<String>) -> Vec<BernsteinRun> {
    runs.into_iter()
        .zip(run_ids)
        .map(|(run, run_id)| BernsteinRun { run_id, run })
        .collect()
}

/// One run's verdicts: bernstein's own (`compat_code`) and the strict findings.
#[pyclass(frozen, module = "agentledger._core")]
pub struct BernsteinRun {
    #[pyo3(get)]
    run_id: String,
    run: Run,
}

impl BernsteinRun {
    /// The content hashes reattachment trusted, as text (lossily: one that is not UTF-8
    /// names no blob the ledger holds).
    pub(crate) fn referenced_digests(&self) -> Vec<String> {
        self.run
            .referenced
            .iter()
            .map(|h| String::from_utf8_lossy(h).into_owned())
            .collect()
    }
}

#[pymethods]
impl BernsteinRun {
    /// Any `activity.result` row (bernstein's `found`).
    #[getter]
    fn found(&self) -> bool {
        self.run.found
    }
    #[getter]
    fn ok(&self) -> bool {
        self.run.ok
    }
    #[getter]
    fn chain_ok(&self) -> bool {
        self.run.chain_ok
    }
    #[getter]
    fn reason<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.run.reason)
    }
    #[getter]
    fn crash(&self) -> Option<String> {
        self.run.crash.clone()
    }
    /// Kept journal rows.
    #[getter]
    fn rows(&self) -> u64 {
        self.run.rows
    }
    /// `activity.result` stages verified.
    #[getter]
    fn activities(&self) -> u64 {
        self.run.activities
    }
    /// Whether the run has a journal.
    #[getter]
    fn has_journal(&self) -> bool {
        self.run.journal.is_some()
    }
    /// `sha256:<hex>` of the journal file (what the ledger's anchor pins).
    #[getter]
    fn file_sha256(&self) -> Option<String> {
        self.run.journal.as_ref().map(|j| j.file_sha256.clone())
    }
    #[getter]
    fn head<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.run
            .journal
            .as_ref()
            .map(|j| text(py, &j.head))
            .transpose()
    }
    #[getter]
    fn findings(&self) -> Vec<BernsteinFinding> {
        self.run
            .findings
            .iter()
            .map(|f| BernsteinFinding(f.clone()))
            .collect()
    }
    #[getter]
    fn limits(&self) -> Vec<String> {
        self.run.limits.clone()
    }
    #[getter]
    fn unstored_reports(&self) -> u64 {
        self.run.unstored_reports
    }
    /// Stored DataOps receipts re-checked.
    #[getter]
    fn receipts(&self) -> u64 {
        self.run.receipts
    }
    /// Signatures of the receipts that verified.
    #[getter]
    fn signatures(&self) -> u64 {
        self.run.signatures
    }
    /// Every stage, when the options asked to keep them.
    #[getter]
    fn stages(&self) -> Vec<BernsteinStage> {
        self.run
            .stages
            .iter()
            .map(|s| BernsteinStage(s.clone()))
            .collect()
    }
    /// The content hashes reattachment trusted, when the options asked to keep them.
    #[getter]
    fn referenced<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.run.referenced.iter().map(|h| text(py, h)).collect()
    }
    /// bernstein's exit code for `activity verify` on this run: 0 ok, 1 not found (or
    /// bernstein itself raises), 2 not ok.
    #[getter]
    fn compat_code(&self) -> u8 {
        self.run.compat_code()
    }
    /// bernstein's `activity verify --json` object (the stages when kept).
    fn compat_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("run", &self.run_id)?;
        d.set_item("found", self.run.found)?;
        d.set_item("ok", self.run.ok)?;
        d.set_item("chain_ok", self.run.chain_ok)?;
        d.set_item("reason", text(py, &self.run.reason)?)?;
        let stages = PyList::empty(py);
        for stage in &self.run.stages {
            stages.append(stage_json(py, stage)?)?;
        }
        d.set_item("stages", stages)?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        format!(
            "BernsteinRun({:?}, compat_code={}, findings={})",
            self.run_id,
            self.run.compat_code(),
            self.run.findings.len()
        )
    }
}

/// One divergence: `step` (kept-row index) or `None`, `check`, `field`, `expected`, `actual`.
#[pyclass(frozen, module = "agentledger._core")]
pub struct BernsteinFinding(Finding);

#[pymethods]
impl BernsteinFinding {
    #[getter]
    fn step(&self) -> Option<i64> {
        self.0.step
    }
    #[getter]
    fn check(&self) -> String {
        self.0.check.clone()
    }
    #[getter]
    fn field<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.field)
    }
    #[getter]
    fn expected<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.expected)
    }
    #[getter]
    fn actual<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.actual)
    }
    /// A finding bernstein's own verdict ignores (strict mode only).
    #[getter]
    fn strict_only(&self) -> bool {
        self.0.strict_only
    }
    fn __repr__(&self) -> String {
        format!(
            "BernsteinFinding({:?}, {:?}, {:?})",
            self.0.step,
            self.0.check,
            String::from_utf8_lossy(&self.0.field)
        )
    }
}

/// One `activity.result` stage's verdict.
#[pyclass(frozen, module = "agentledger._core")]
pub struct BernsteinStage(Stage);

#[pymethods]
impl BernsteinStage {
    #[getter]
    fn stage_id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.stage_id)
    }
    #[getter]
    fn kind<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.kind)
    }
    #[getter]
    fn step(&self) -> u64 {
        self.0.step
    }
    #[getter]
    fn ok(&self) -> bool {
        self.0.ok
    }
    #[getter]
    fn reason<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.reason)
    }
    #[getter]
    fn evidence_reattached(&self) -> bool {
        self.0.evidence_reattached
    }
    #[getter]
    fn signed_receipt_verified(&self) -> bool {
        self.0.signed_receipt_verified
    }
    #[getter]
    fn claim_verdicts(&self) -> Vec<BernsteinClaim> {
        self.0
            .claims
            .iter()
            .map(|c| BernsteinClaim(c.clone()))
            .collect()
    }
    #[getter]
    fn browser_verdict(&self) -> Option<BernsteinBrowser> {
        self.0.browser.clone().map(BernsteinBrowser)
    }
    /// The stage in bernstein's `--json` shape.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stage_json(py, &self.0)
    }
}

/// One claim of a research report.
#[pyclass(frozen, module = "agentledger._core")]
pub struct BernsteinClaim(ClaimVerdict);

#[pymethods]
impl BernsteinClaim {
    #[getter]
    fn claim_id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.claim_id)
    }
    #[getter]
    fn ok(&self) -> bool {
        self.0.ok
    }
    #[getter]
    fn citations_checked(&self) -> u64 {
        self.0.citations_checked
    }
    #[getter]
    fn reason<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.reason)
    }
}

/// A browser flow report's verdict.
#[pyclass(frozen, module = "agentledger._core")]
pub struct BernsteinBrowser(Browser);

#[pymethods]
impl BernsteinBrowser {
    #[getter]
    fn ok(&self) -> bool {
        self.0.ok
    }
    #[getter]
    fn head_anchor_ok(&self) -> bool {
        self.0.head_anchor_ok
    }
    #[getter]
    fn reason<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        text(py, &self.0.reason)
    }
    /// bernstein's `browser_verdict` object (steps and checks included).
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        browser_json(py, &self.0)
    }
}

fn claim_json<'py>(py: Python<'py>, claim: &ClaimVerdict) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("claim_id", text(py, &claim.claim_id)?)?;
    d.set_item("ok", claim.ok)?;
    d.set_item("citations_checked", claim.citations_checked)?;
    d.set_item("reason", text(py, &claim.reason)?)?;
    Ok(d)
}

fn browser_json<'py>(py: Python<'py>, browser: &Browser) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("ok", browser.ok)?;
    d.set_item("head_anchor_ok", browser.head_anchor_ok)?;
    d.set_item("reason", text(py, &browser.reason)?)?;
    let steps = PyList::empty(py);
    for step in &browser.steps {
        let s = PyDict::new(py);
        // Python's int of any size, from its decimal text.
        let index = py
            .get_type::<pyo3::types::PyInt>()
            .call1((step.index.as_str(),))?;
        s.set_item("index", index)?;
        s.set_item("ok", step.ok)?;
        s.set_item("reason", text(py, &step.reason)?)?;
        steps.append(s)?;
    }
    d.set_item("steps", steps)?;
    let checks = PyList::empty(py);
    for check in &browser.checks {
        let c = PyDict::new(py);
        c.set_item("check_id", text(py, &check.check_id)?)?;
        c.set_item("ok", check.ok)?;
        c.set_item("passed", check.passed)?;
        c.set_item("reason", text(py, &check.reason)?)?;
        checks.append(c)?;
    }
    d.set_item("checks", checks)?;
    Ok(d)
}

fn stage_json<'py>(py: Python<'py>, stage: &Stage) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("stage_id", text(py, &stage.stage_id)?)?;
    d.set_item("kind", text(py, &stage.kind)?)?;
    d.set_item("ok", stage.ok)?;
    d.set_item("evidence_reattached", stage.evidence_reattached)?;
    d.set_item("signed_receipt_verified", stage.signed_receipt_verified)?;
    let claims = PyList::empty(py);
    for claim in &stage.claims {
        claims.append(claim_json(py, claim)?)?;
    }
    d.set_item("claim_verdicts", claims)?;
    match &stage.browser {
        Some(browser) => d.set_item("browser_verdict", browser_json(py, browser)?)?,
        None => d.set_item("browser_verdict", py.None())?,
    }
    d.set_item("reason", text(py, &stage.reason)?)?;
    Ok(d)
}
