//! One run's verdicts: bernstein's own (`activity verify`, `verify_run_activities`) and the
//! strict one, from a journal pass and the store (BERNSTEIN-FORMAT.md §8). Every stage is
//! decided here; `tests/bernstein/reference.py` is the plain Python reference that the
//! differential tests hold this to.
//!
//! Strings are WTF-8, as Python would hold them; reasons are bernstein's exact text.

use crate::audit::ActivityRecord;
use crate::journal::{ActivityRow, JournalReport, Reattach};
use crate::mirror::cross_check;
use crate::pyjson::{loads, repr_text as repr, Parsed, PyValue};
use crate::receipt::verify_receipt;
use crate::report::{report_required, verify_browser, verify_research, Browser, ClaimVerdict};
use crate::store::{content_hash, lookup_raises, Store};
use crate::Crash;

/// One divergence: the step (kept-row index), the check, the field, expected and actual.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub step: Option<i64>,
    pub check: String,
    pub field: Vec<u8>,
    pub expected: Vec<u8>,
    pub actual: Vec<u8>,
    /// A finding bernstein's own verdict ignores (strict mode only).
    pub strict_only: bool,
}

/// One `activity.result` stage, in bernstein's `--json` shape plus its step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stage {
    pub stage_id: Vec<u8>,
    pub kind: Vec<u8>,
    pub step: u64,
    pub ok: bool,
    pub reason: Vec<u8>,
    pub evidence_reattached: bool,
    pub signed_receipt_verified: bool,
    pub claims: Vec<ClaimVerdict>,
    pub browser: Option<Browser>,
}

/// What the ledger's anchors pin of a journal file.
#[derive(Debug, Clone, PartialEq)]
pub struct Journal {
    pub file_sha256: String,
    pub head: Vec<u8>,
    pub count: u64,
}

/// One run's verdicts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    /// Any `activity.result` row (bernstein's `found`).
    pub found: bool,
    pub ok: bool,
    pub chain_ok: bool,
    pub reason: Vec<u8>,
    /// What bernstein's own code would raise on this run instead of answering.
    pub crash: Option<String>,
    /// Kept journal rows.
    pub rows: u64,
    /// `None`: the run has no journal.
    pub journal: Option<Journal>,
    /// The stages, when [`Options::stages`] asks for them.
    pub stages: Vec<Stage>,
    pub activities: u64,
    pub findings: Vec<Finding>,
    /// What no check can see in this run, in words.
    pub limits: Vec<String>,
    /// Research/browser stages whose report is not in the store (bernstein skips them).
    pub unstored_reports: u64,
    /// Content hashes whose stored digest reattachment trusted (to re-hash), when
    /// [`Options::referenced`] asks for them.
    pub referenced: Vec<Vec<u8>>,
    /// Stored DataOps receipts re-checked.
    pub receipts: u64,
    /// Signatures of the receipts that verified (each of their inputs and outputs).
    pub signatures: u64,
}

impl Run {
    /// bernstein's exit code for `activity verify` on this run: 0 ok, 1 not found (or
    /// bernstein raises), 2 not ok.
    pub fn compat_code(&self) -> u8 {
        if self.crash.is_some() || !self.found {
            1
        } else if self.ok {
            0
        } else {
            2
        }
    }
}

/// What a verify is given besides the journal.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// Raw Ed25519 keys whose receipts are not self-asserted (`--trust`).
    pub trusted: &'a [[u8; 32]],
    /// Keep each stage's verdict in [`Run::stages`] (else only counted).
    pub stages: bool,
    /// Keep the content hashes reattachment trusted in [`Run::referenced`] (a caller that
    /// re-hashes every blob anyway does not ask for them).
    pub referenced: bool,
}

/// The audit chain as one run sees it: the run's `activity.result` records, given when the
/// chain mirrors activities at all (then every row must have its record).
#[derive(Debug, Clone, Copy)]
pub struct Audit<'a> {
    pub records: &'a [&'a ActivityRecord],
}

/// Verify one run from its journal pass (`None`: no journal). `audit`: the run's records
/// of an audit chain that mirrors activities (`None`: no cross-check).
pub fn verify_run(
    run_id: &[u8],
    report: Option<&JournalReport>,
    store: &dyn Store,
    audit: Option<Audit<'_>>,
    options: Options<'_>,
) -> Run {
    let mut run = Run::default();
    let Some(report) = report else {
        run.reason = concat(&[b"no run journal for ", &repr(run_id)]);
        return run;
    };
    run.journal = Some(Journal {
        file_sha256: report.file_sha256.clone(),
        head: report.head.clone(),
        count: report.count,
    });
    journal_findings(&mut run, report);
    if report.activities.is_empty() {
        run.reason = b"run journal holds no activity.result entries".to_vec();
    } else {
        run.found = true;
        let mut all_ok = true;
        let mut first_failing: Option<Vec<u8>> = None;
        for row in &report.activities {
            let stage = verify_stage(&mut run, row, store, options);
            run.activities += 1;
            if !stage.ok {
                all_ok = false;
                run.findings.push(Finding {
                    step: Some(stage.step as i64),
                    check: "bernstein.stage".into(),
                    field: concat(&[b"stage ", &repr(&stage.stage_id)]),
                    expected: b"ok".to_vec(),
                    actual: stage.reason.clone(),
                    strict_only: false,
                });
                first_failing.get_or_insert_with(|| stage.reason.clone());
            }
            if options.stages {
                run.stages.push(stage);
            }
        }
        run.ok = run.chain_ok && all_ok && run.crash.is_none();
        if !run.ok && run.reason.is_empty() {
            run.reason = first_failing.unwrap_or_else(|| b"journal Merkle chain diverges".to_vec());
        }
    }
    let last = audit.and_then(|audit| {
        let (findings, last) = cross_check(&report.activities, audit.records);
        for f in findings {
            strict(
                &mut run,
                Some(f.step),
                f.check,
                f.field,
                f.expected,
                f.actual,
            );
        }
        last
    });
    state_limits(&mut run, last);
    run
}

/// The journal pass's own findings (`_verify_run` up to the stages).
fn journal_findings(run: &mut Run, report: &JournalReport) {
    run.rows = report.count;
    run.chain_ok = report.chain_consistent && report.discarded_lines.is_empty();
    if let Some(crash) = &report.crash {
        run.crash = Some(crash.clone());
        let finding = finding(
            None,
            "bernstein.crash",
            b"journal",
            b"a verdict",
            crash.as_bytes(),
        );
        run.findings.push(Finding {
            strict_only: true,
            ..finding
        });
    }
    if report.error.is_some() && report.divergent_index.is_none() && report.crash.is_none() {
        run.findings.push(finding(
            None,
            "bernstein.chain",
            b"hash_profile",
            b"py-json-v1 or jcs-v2",
            &report.profile,
        ));
    }
    if let Some(index) = report.divergent_index {
        run.findings.push(finding(
            Some(index as i64),
            "bernstein.chain",
            report.divergent_field.unwrap_or("None").as_bytes(),
            report.expected_hash.as_deref().unwrap_or(b"None"),
            report.actual_hash.as_deref().unwrap_or(b"None"),
        ));
    }
    for line in &report.discarded_lines {
        run.findings.push(finding(
            None,
            "bernstein.line.discarded",
            format!("line {line}").as_bytes(),
            b"a JSON object",
            b"unparsable",
        ));
    }
    for f in &report.row_findings {
        let check = format!("bernstein.{}", f.field);
        strict(
            run,
            Some(f.step as i64),
            &check,
            f.field.as_bytes().to_vec(),
            f.expected.clone(),
            f.actual.clone(),
        );
    }
}

fn finding(
    step: Option<i64>,
    check: &str,
    field: &[u8],
    expected: &[u8],
    actual: &[u8],
) -> Finding {
    Finding {
        step,
        check: check.to_owned(),
        field: field.to_vec(),
        expected: expected.to_vec(),
        actual: actual.to_vec(),
        strict_only: false,
    }
}

fn strict(
    run: &mut Run,
    step: Option<i64>,
    check: &str,
    field: Vec<u8>,
    expected: Vec<u8>,
    actual: Vec<u8>,
) {
    run.findings.push(Finding {
        step,
        check: check.to_owned(),
        field,
        expected,
        actual,
        strict_only: true,
    });
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// One stage (`_verify_stage`): evidence set, reports, reattachment, receipt, in
/// bernstein's order, stopping at the first failure.
fn verify_stage(
    run: &mut Run,
    row: &ActivityRow,
    store: &dyn Store,
    options: Options<'_>,
) -> Stage {
    let mut stage = Stage {
        stage_id: row.stage_id.clone(),
        kind: row.kind.clone(),
        step: row.step,
        ..Stage::default()
    };
    let recomputed = match &row.recomputed_evidence_set_hash {
        Ok(hash) => hash.as_bytes(),
        Err(error) => {
            run.crash
                .get_or_insert_with(|| format!("evidence set hash raises: {error}"));
            stage.reason = error.as_bytes().to_vec();
            return stage;
        }
    };
    if row.evidence_set_hash != recomputed {
        stage.reason = concat(&[
            b"evidence_set_hash mismatch: anchored ",
            &repr(&row.evidence_set_hash),
            b", recomputed ",
            &repr(recomputed),
        ]);
        return stage;
    }
    let has_store = store.exists();
    if !has_store {
        for (_, reference, digest) in &row.observations {
            missing(
                run,
                row,
                concat(&[b"observation ", &repr(reference)]),
                digest,
                b"no .sdd/cas",
            );
        }
        if report_required(&row.kind, &row.observations) {
            absent_report(run, row, true, b"no .sdd/cas");
        }
    }
    if !run.chain_ok {
        stage.reason = b"journal Merkle chain diverges".to_vec();
        return stage;
    }
    let kind = row.kind.as_slice();
    let artifact = row.artifact_hash.as_slice();
    if has_store && matches!(kind, b"research" | b"browser") {
        let reason = check_report(run, &mut stage, row, store);
        if !reason.is_empty() {
            stage.reason = reason;
            return stage;
        }
    }
    if has_store {
        let reason = reattach(run, row, store, options);
        if !reason.is_empty() {
            stage.reason = reason;
            return stage;
        }
        stage.evidence_reattached = !row.observations.is_empty();
    }
    if matches!(kind, b"data" | b"ops") {
        if !has_store {
            missing(run, row, b"receipt".to_vec(), artifact, b"no .sdd/cas");
        } else {
            let reason = check_receipt(run, &mut stage, row, store, options);
            if !reason.is_empty() {
                stage.reason = reason;
                return stage;
            }
        }
    }
    stage.ok = true;
    stage
}

/// bernstein's step 5: every observation's bytes exist and hash to its content hash
/// (the journal pass already looked them up in the store's index, when it had one).
fn reattach(run: &mut Run, row: &ActivityRow, store: &dyn Store, options: Options<'_>) -> Vec<u8> {
    let observations = &row.observations;
    let from = match row.reattach {
        Reattach::Ok => observations.len(),
        Reattach::Missing(i) | Reattach::Mismatch(i) => i,
        Reattach::NotChecked | Reattach::Unresolved(_) => 0,
    };
    let digests = observations[..from].iter().map(|(_, _, digest)| digest);
    trusted(run, options, digests);
    for (_, reference, digest) in &observations[from..] {
        if let Some(crash) = lookup_raises(digest) {
            return crashed(run, crash);
        }
        match store.stored_digest(digest) {
            None => {
                let field = concat(&[b"observation ", &repr(reference)]);
                missing(run, row, field, digest, b"absent");
                return concat(&[b"evidence bytes missing from store for ", &repr(reference)]);
            }
            Some(stored) if stored.as_ref() != digest.as_slice() => {
                return concat(&[b"content hash mismatch reattaching ", &repr(reference)]);
            }
            Some(_) => trusted(run, options, [digest]),
        }
    }
    Vec::new()
}

/// bernstein's common artifact steps: format, presence, hash. `Err(reason)`, or the
/// stored bytes (`None`: not in the store, which bernstein skips).
fn stored_artifact<'s>(
    artifact: &[u8],
    store: &'s dyn Store,
    what: &str,
    noun: &str,
) -> Result<Option<std::borrow::Cow<'s, [u8]>>, Vec<u8>> {
    let name = match artifact.iter().position(|&b| b == b':') {
        Some(colon) => &artifact[colon + 1..],
        None => artifact,
    };
    // bernstein's `^[0-9a-f]{64}$` through `re.match`: `$` also matches before a final
    // newline, so `<hex>\n` passes and is then looked up under that very name.
    let digits = name.strip_suffix(b"\n").unwrap_or(name);
    let hex64 = digits.len() == 64
        && digits
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex64 {
        return Err(concat(&[
            format!("malformed artifact_hash for {what} stage: ").as_bytes(),
            &repr(artifact),
        ]));
    }
    let Some(data) = store.get(artifact) else {
        return Ok(None);
    };
    if content_hash(&data) != artifact {
        return Err(concat(&[
            format!("{noun} bytes do not match anchored artifact_hash ").as_bytes(),
            &repr(artifact),
        ]));
    }
    Ok(Some(data))
}

/// A stored research or browser report, re-checked (`_check_report`).
fn check_report(run: &mut Run, stage: &mut Stage, row: &ActivityRow, store: &dyn Store) -> Vec<u8> {
    let artifact = row.artifact_hash.as_slice();
    let research = stage.kind == b"research";
    let (what, noun) = if research {
        ("research", "report")
    } else {
        ("browser", "flow report")
    };
    let data = match stored_artifact(artifact, store, what, noun) {
        Err(reason) => return reason,
        Ok(None) => {
            absent_report(
                run,
                row,
                report_required(&row.kind, &row.observations),
                b"absent",
            );
            return Vec::new();
        }
        Ok(Some(data)) => data,
    };
    let parsed = match load_stored(run, &data, noun) {
        Ok(parsed) => parsed,
        Err(reason) => return reason,
    };
    if research {
        match verify_research(&parsed.value, store) {
            Ok(verdict) => {
                stage.claims = verdict.claims;
                if verdict.ok {
                    Vec::new()
                } else {
                    verdict.reason
                }
            }
            Err(crash) => crashed(run, crash),
        }
    } else {
        match verify_browser(&parsed.value, store) {
            Ok(verdict) => {
                let reason = if verdict.ok {
                    Vec::new()
                } else {
                    verdict.reason.clone()
                };
                stage.browser = Some(verdict);
                reason
            }
            Err(crash) => crashed(run, crash),
        }
    }
}

/// A strict `bernstein.blob.missing`: the bytes `field` names (an observation, the
/// receipt) are not in the store under `digest` (`actual`: absent, or no store at all).
fn missing(run: &mut Run, row: &ActivityRow, field: Vec<u8>, digest: &[u8], actual: &[u8]) {
    let step = Some(row.step as i64);
    strict(
        run,
        step,
        "bernstein.blob.missing",
        field,
        digest.to_vec(),
        actual.to_vec(),
    );
}

/// Note content hashes whose stored digest reattachment trusted, when asked for.
fn trusted<'d>(
    run: &mut Run,
    options: Options<'_>,
    digests: impl IntoIterator<Item = &'d Vec<u8>>,
) {
    if options.referenced {
        run.referenced.extend(digests.into_iter().cloned());
    }
}

/// `X.from_dict(json.loads(data))` of a stored artifact's bytes, as far as it can fail:
/// the value, or bernstein's reason (`stored <noun> is not valid JSON: <exception>`), or
/// its crash when Python would not catch the exception. A value that is not an object
/// is one: every `from_dict` begins with `row.get(...)` (an `AttributeError`, which
/// bernstein does not catch).
fn load_stored<'d>(run: &mut Run, data: &'d [u8], noun: &str) -> Result<Parsed<'d>, Vec<u8>> {
    let parsed = loads(data).map_err(|error| match error.crash() {
        Some(crash) => crashed(run, crash),
        None => {
            let name = error.python_name().unwrap_or("ValueError");
            format!("stored {noun} is not valid JSON: {name}").into_bytes()
        }
    })?;
    if !matches!(parsed.value, PyValue::Object(_)) {
        return Err(crashed(run, no_get(&parsed.value)));
    }
    Ok(parsed)
}

/// What Python raises for `value.get(...)` on a value that is not a dict.
fn no_get(value: &PyValue<'_>) -> Crash {
    let name = match value {
        PyValue::Null => "NoneType",
        PyValue::Bool(_) => "bool",
        PyValue::Int(_) => "int",
        PyValue::Float(_) => "float",
        PyValue::Str(_) => "str",
        PyValue::Array(_) => "list",
        PyValue::Object(_) => "dict",
    };
    Crash(format!(
        "AttributeError: '{name}' object has no attribute 'get'"
    ))
}

/// `DataOpsReceipt.from_dict` reads every item of `inputs`, then of `outputs`, when it is
/// a list, through `SignedArtifact.from_dict` (`row.get(...)`): an item that is not an
/// object raises there (`verify_receipt` itself skips such items, as bernstein's
/// `verify receipt` command reads them).
fn receipt_items_crash(receipt: &PyValue<'_>) -> Option<Crash> {
    ["inputs", "outputs"]
        .into_iter()
        .find_map(|key| match receipt.get(key) {
            Some(PyValue::Array(items)) => items
                .iter()
                .find(|item| !matches!(item, PyValue::Object(_)))
                .map(no_get),
            _ => None,
        })
}

/// A research or browser stage whose report the store lacks (or there is no store): a
/// finding when its writer always stores one ([`report_required`]), else a limit.
fn absent_report(run: &mut Run, row: &ActivityRow, required: bool, actual: &[u8]) {
    if required {
        strict(
            run,
            Some(row.step as i64),
            "bernstein.report.missing",
            b"flow report".to_vec(),
            row.artifact_hash.clone(),
            actual.to_vec(),
        );
    } else {
        run.unstored_reports += 1;
    }
}

/// Where bernstein's own code raises: the run has no verdict of bernstein's (exit 1),
/// and the stage fails with the exception's text.
fn crashed(run: &mut Run, crash: Crash) -> Vec<u8> {
    let reason = crash.0.clone().into_bytes();
    run.crash.get_or_insert(crash.0);
    reason
}

/// A stored DataOps receipt, re-checked (`_check_receipt`).
fn check_receipt(
    run: &mut Run,
    stage: &mut Stage,
    row: &ActivityRow,
    store: &dyn Store,
    options: Options<'_>,
) -> Vec<u8> {
    let artifact = row.artifact_hash.as_slice();
    let step = Some(stage.step as i64);
    let data = match stored_artifact(artifact, store, "data/ops", "receipt") {
        Err(reason) => return reason,
        Ok(None) => {
            missing(run, row, b"receipt".to_vec(), artifact, b"absent");
            return Vec::new();
        }
        Ok(Some(data)) => data,
    };
    let parsed = match load_stored(run, &data, "receipt") {
        Ok(parsed) => parsed,
        Err(reason) => return reason,
    };
    if let Some(crash) = receipt_items_crash(&parsed.value) {
        return crashed(run, crash);
    }
    let verdict = match verify_receipt(&parsed.value, Some(store)) {
        Ok(verdict) => verdict,
        Err(crash) => return crashed(run, crash),
    };
    trusted(run, options, &verdict.references);
    run.receipts += 1;
    if verdict.ok {
        run.signatures += verdict.references.len() as u64;
    }
    if verdict.ok
        && !verdict
            .signer
            .is_some_and(|key| options.trusted.contains(&key))
    {
        let signer = verdict
            .signer
            .map_or_else(|| "unparsable".to_owned(), hex::encode);
        strict(
            run,
            step,
            "bernstein.receipt.self_asserted",
            b"signer_public_key_pem".to_vec(),
            b"a trusted key (--trust)".to_vec(),
            format!("ed25519:{signer}").into_bytes(),
        );
    }
    stage.signed_receipt_verified = verdict.ok;
    verdict.reason
}

/// What no check can see in this run (`_state_limits`); `last`: the last journal index
/// its audit records cover.
fn state_limits(run: &mut Run, last: Option<i64>) {
    if run.unstored_reports > 0 {
        run.limits.push(format!(
            "{} research/browser report(s) are not in the store: their claims and steps \
             cannot be re-checked (bernstein skips them too), and a removed report cannot \
             be told from one a legacy writer never stored (research stages, browser \
             stages not written by BrowserWorker)",
            run.unstored_reports
        ));
    }
    run.limits
        .push("ts and elapsed_s are outside every hash: an edit to them cannot be detected".into());
    let rows = run.rows as i64;
    match last {
        None => run.limits.push(
            "no audit record covers this run: a cut tail cannot be told from a shorter run".into(),
        ),
        Some(last) if rows - 1 > last => run.limits.push(format!(
            "{} row(s) after the last audited activity (step {last}) could be cut or \
             appended without trace",
            rows - 1 - last
        )),
        Some(_) => {}
    }
}

#[cfg(test)]
mod stage_tests;
