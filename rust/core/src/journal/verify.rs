//! The batch verifier: each row's checks computed in parallel (the clean-row fast path
//! where it applies, else the full reference checks), then the chain links in order.

use std::borrow::Cow;
use std::collections::HashSet;

use foldhash::fast::RandomState;
use rayon::prelude::*;

use crate::canonical::{self, Value};
use crate::hash::many;

use super::clean_row::check_clean_row;
use super::encode::evidence_set_hash;
use super::encode::{genesis_digest, prefixed_hex, ENTRY_DOMAIN, EVIDENCE_SET_DOMAIN};
pub use super::row::{EntryRow, StoredEntry};
use super::row::{Prev, RowCheck};
use super::{
    ACTIVITY_RESULT_KIND, ENTRY_VERSION, HASH_MANY_ROWS, MAX_ENTRY_BYTES, MAX_FINDINGS_PER_RUN,
};

/// The last row of the previous batch, so a run may span batches.
#[derive(Debug, Clone)]
pub struct Carry {
    pub run_id: String,
    pub seq: i64,
    pub hash: Vec<u8>,
}

/// One thing that diverged: which run, which step, which check, expected vs actual.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub run_id: String,
    pub seq: Option<i64>,
    pub check: String,
    pub expected: String,
    pub actual: String,
}

/// Per-run totals for the rows of one batch (a run spanning batches appears in each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub run_id: String,
    pub entries: u64,
    pub activities: u64,
    pub findings: u64,
    pub last_seq: i64,
    pub last_hash: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct BatchReport {
    pub findings: Vec<Finding>,
    pub runs: Vec<RunSummary>,
    /// Distinct content hashes the batch's activity results reference (observations and
    /// artifacts), sorted: the caller checks the blob store holds each of them.
    pub referenced: Vec<String>,
}

impl BatchReport {
    /// Append the report of the batch that follows this one: a run continuing across the
    /// boundary becomes one summary, and its findings stay capped at
    /// [`MAX_FINDINGS_PER_RUN`] in all. Referenced digests are concatenated as they are.
    pub fn absorb(&mut self, next: BatchReport) {
        let mut runs = next.runs.into_iter().peekable();
        let continuing = match (self.runs.last_mut(), runs.peek()) {
            (Some(last), Some(first)) if last.run_id == first.run_id => {
                let first = runs.next().expect("peeked");
                last.entries += first.entries;
                last.activities += first.activities;
                last.findings += first.findings;
                last.last_seq = first.last_seq;
                last.last_hash = first.last_hash;
                Some(last.run_id.clone())
            }
            _ => None,
        };
        let mut room = continuing.as_ref().map_or(0, |run_id| {
            let kept = self
                .findings
                .iter()
                .rev()
                .take_while(|f| &f.run_id == run_id)
                .count();
            MAX_FINDINGS_PER_RUN.saturating_sub(kept)
        });
        for finding in next.findings {
            if Some(&finding.run_id) == continuing.as_ref() {
                if room == 0 {
                    continue;
                }
                room -= 1;
            }
            self.findings.push(finding);
        }
        self.runs.extend(runs);
        self.referenced.extend(next.referenced);
    }
}

/// Distinct referenced digests. Hashed with foldhash: seeded per process like SipHash (a
/// crafted ledger cannot make lookups collide), at a fraction of its cost per key.
pub type DigestSet = HashSet<String, RandomState>;

/// The checks of each row, their hashes computed many at a time: the entries', then on
/// the fast path the evidence sets'.
pub(super) fn check_rows<R: EntryRow>(rows: &[R]) -> Vec<RowCheck<'_>> {
    let inputs: Vec<&[u8]> = rows.iter().map(EntryRow::bytes).collect();
    let mut hashes = vec![[0u8; 32]; rows.len()];
    many::hash_many(&many::Mode::domain(ENTRY_DOMAIN), &inputs, &mut hashes);
    let mut checks: Vec<RowCheck<'_>> = rows
        .iter()
        .zip(hashes)
        .map(|(row, hash)| check_row(row, hash))
        .collect();
    let pending: Vec<usize> = (0..checks.len())
        .filter(|&i| checks[i].evidence.is_some())
        .collect();
    let sets: Vec<&[u8]> = pending
        .iter()
        .filter_map(|&i| Some(&checks[i].evidence.as_ref()?.set[..]))
        .collect();
    let mut digests = vec![[0u8; 32]; sets.len()];
    many::hash_many(
        &many::Mode::domain(EVIDENCE_SET_DOMAIN),
        &sets,
        &mut digests,
    );
    for (i, digest) in pending.into_iter().zip(digests) {
        let evidence = checks[i].evidence.take().expect("pending");
        if evidence.anchored != digest {
            checks[i] = check_row_fully(&rows[i], checks[i].hash);
        }
    }
    checks
}

/// The checks of `row`, whose bytes hash to `computed`.
fn check_row<R: EntryRow>(row: &R, computed: [u8; 32]) -> RowCheck<'_> {
    // Compared as arrays: a fixed-size compare inlines, a slice compare calls memcmp.
    let fast = !crate::portable::forced() && row.bytes().len() <= MAX_ENTRY_BYTES;
    if fast && <&[u8; 32]>::try_from(row.hash()).is_ok_and(|stored| *stored == computed) {
        if let Some(check) = check_clean_row(row, computed) {
            return check;
        }
    }
    check_row_fully(row, computed)
}

/// Every check on one row, from the parsed value: the reference behaviour, and the one
/// that names what diverged.
pub(super) fn check_row_fully<R: EntryRow>(row: &R, computed: [u8; 32]) -> RowCheck<'_> {
    let mut check = RowCheck {
        hash: computed,
        prev: None,
        is_activity: false,
        referenced: Vec::new(),
        findings: Vec::new(),
        evidence: None,
    };
    let mut note = |name: &'static str, expected: String, actual: String| {
        check.findings.push((name, expected, actual));
    };
    if row.hash() != computed.as_slice() {
        note(
            "entry.hash",
            prefixed_hex(row.hash()),
            prefixed_hex(&computed),
        );
    }
    if row.bytes().len() > MAX_ENTRY_BYTES {
        note(
            "entry.size",
            format!("at most {MAX_ENTRY_BYTES} bytes"),
            format!("{} bytes", row.bytes().len()),
        );
        return check;
    }
    let value = match canonical::parse(row.bytes()) {
        Ok(value) => value,
        Err(err) => {
            note("entry.json", "canonical JSON".to_owned(), err.to_string());
            return check;
        }
    };
    match canonical::to_canonical(&value) {
        Ok(canonical_bytes) if canonical_bytes == row.bytes() => {}
        _ => note(
            "entry.canonical",
            "RFC 8785 canonical bytes".to_owned(),
            "non-canonical encoding".to_owned(),
        ),
    }
    let Value::Object(_) = &value else {
        note(
            "entry.json",
            "an object".to_owned(),
            "not an object".to_owned(),
        );
        return check;
    };
    match value.get("v") {
        Some(Value::Number(v)) if *v == ENTRY_VERSION => {}
        other => note("entry.v", "1".to_owned(), describe(other)),
    }
    match value.get("run") {
        Some(Value::String(run)) if run == row.run_id() => {}
        other => note("entry.run", row.run_id().to_owned(), describe_name(other)),
    }
    match value.get("seq") {
        Some(Value::Number(seq)) if seq.fract() == 0.0 && *seq >= 0.0 => {
            let seq = *seq as i64;
            if seq != row.seq() {
                note("entry.seq", row.seq().to_string(), seq.to_string());
            }
        }
        other => note("entry.seq", row.seq().to_string(), describe(other)),
    }
    match value.get("kind") {
        Some(Value::String(kind)) if kind == row.kind() => {}
        other => note("entry.kind", row.kind().to_owned(), describe_name(other)),
    }
    match value.get("prev") {
        Some(Value::String(prev)) => check.prev = Some(Prev::new(Cow::Owned(prev.clone()))),
        other => note("entry.prev", "a hash".to_owned(), describe(other)),
    }
    if !matches!(value.get("ts"), Some(Value::String(_))) {
        note(
            "entry.ts",
            "a timestamp".to_owned(),
            describe(value.get("ts")),
        );
    }
    match value.get("body") {
        Some(body) => {
            if row.kind() == ACTIVITY_RESULT_KIND {
                check.is_activity = true;
                if let Some((expected, actual)) = check_evidence_set(body) {
                    note("activity.evidence_set_hash", expected, actual);
                }
                check.referenced = referenced_hashes(body)
                    .into_iter()
                    .map(Cow::Owned)
                    .collect();
            }
        }
        None => note("entry.body", "a body".to_owned(), "missing".to_owned()),
    }
    check
}

/// Recompute an activity result's evidence set hash from its pinned observation hashes.
/// Returns `(anchored, recomputed)` when they differ or the body is malformed.
pub(super) fn check_evidence_set(body: &Value) -> Option<(String, String)> {
    let anchored = match body.get("evidence_set_hash") {
        Some(Value::String(s)) => s.clone(),
        other => return Some(("an evidence_set_hash".to_owned(), describe(other))),
    };
    let Some(Value::Array(observations)) = body.get("observations") else {
        return Some((anchored, "no observations list".to_owned()));
    };
    let mut hashes = Vec::with_capacity(observations.len());
    for observation in observations {
        match observation.get("content_hash") {
            Some(Value::String(h)) => hashes.push(h.as_str()),
            other => {
                return Some((
                    anchored,
                    format!("observation without content_hash ({})", describe(other)),
                ))
            }
        }
    }
    let recomputed = evidence_set_hash(hashes);
    (recomputed != anchored).then_some((anchored, recomputed))
}

/// The content hashes an activity result points into the blob store.
pub(super) fn referenced_hashes(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::Array(observations)) = body.get("observations") {
        for observation in observations {
            if let Some(Value::String(h)) = observation.get("content_hash") {
                out.push(h.clone());
            }
        }
    }
    if let Some(Value::String(h)) = body.get("artifact_hash") {
        out.push(h.clone());
    }
    out
}

pub(super) fn describe(value: Option<&Value>) -> String {
    match value {
        None => "missing".to_owned(),
        Some(v) => canonical::to_canonical(v)
            .map(|b| shortened(String::from_utf8_lossy(&b).into_owned()))
            .unwrap_or_else(|_| "unrepresentable".to_owned()),
    }
}

/// A name the bytes hold (a run id, a kind), said as its column says it: a string as
/// itself, so expected and actual read alike; anything else as `describe` says it.
fn describe_name(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(name)) => shortened(name.clone()),
        other => describe(other),
    }
}

fn shortened(text: String) -> String {
    if text.len() <= 120 {
        return text;
    }
    let mut cut = 120;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// Verify a batch of rows ordered by `(run_id, seq)`.
///
/// Per-row work (hashing, parsing, canonical form, fields, evidence sets) runs in parallel;
/// the chain links are then checked in order. `carry` is the previous batch's last row, so
/// a run may be split across batches at any point.
pub fn verify_batch<R: EntryRow>(
    ledger_id: &str,
    carry: Option<&Carry>,
    rows: &[R],
) -> BatchReport {
    let mut referenced = DigestSet::default();
    let mut report = verify_batch_into(ledger_id, carry, rows, &mut referenced);
    let mut referenced: Vec<String> = referenced.into_iter().collect();
    referenced.sort_unstable();
    report.referenced = referenced;
    report
}

/// [`verify_batch`], adding the referenced digests to `referenced` (kept across batches
/// by a caller that only needs the distinct ones) instead of returning them.
pub fn verify_batch_into<R: EntryRow>(
    ledger_id: &str,
    carry: Option<&Carry>,
    rows: &[R],
    referenced: &mut DigestSet,
) -> BatchReport {
    let checks: Vec<RowCheck<'_>> = rows
        .par_chunks(HASH_MANY_ROWS)
        .flat_map_iter(check_rows)
        .collect();
    let mut report = BatchReport::default();
    let mut current: Option<RunSummary> = None;
    // The previous entry's hash (raw bytes): what this entry's `prev` must name.
    let mut expected_prev: Vec<u8> = Vec::with_capacity(32);
    let mut expected_seq: i64 = 0;
    let mut kept_for_run = 0usize;

    for (index, (row, check)) in rows.iter().zip(checks).enumerate() {
        let RowCheck {
            hash,
            prev,
            is_activity,
            referenced: row_referenced,
            findings,
            evidence: _,
        } = check;
        for digest in row_referenced {
            // Many rows reference the same few digests: allocate only for new ones.
            if !referenced.contains(digest.as_ref()) {
                referenced.insert(digest.into_owned());
            }
        }
        let starts_run = !matches!(&current, Some(run) if run.run_id == row.run_id());
        if starts_run {
            if let Some(mut done) = current.take() {
                done.last_hash = rows[index - 1].hash().to_vec();
                report.runs.push(done);
            }
            kept_for_run = 0;
            expected_prev.clear();
            match carry.filter(|c| index == 0 && c.run_id == row.run_id()) {
                Some(c) => {
                    expected_seq = c.seq + 1;
                    expected_prev.extend_from_slice(&c.hash);
                }
                None => {
                    expected_seq = 0;
                    expected_prev.extend_from_slice(&genesis_digest(ledger_id, row.run_id()));
                }
            }
            current = Some(RunSummary {
                run_id: row.run_id().to_owned(),
                entries: 0,
                activities: 0,
                findings: 0,
                last_seq: -1,
                last_hash: Vec::new(),
            });
        }
        let run = current.as_mut().expect("a run is open");
        let mut push = |check: &str, expected: String, actual: String| {
            run.findings += 1;
            if kept_for_run < MAX_FINDINGS_PER_RUN {
                kept_for_run += 1;
                report.findings.push(Finding {
                    run_id: row.run_id().to_owned(),
                    seq: Some(row.seq()),
                    check: check.to_owned(),
                    expected,
                    actual,
                });
            }
        };
        if row.seq() != expected_seq {
            let what = if row.seq() > expected_seq {
                "chain.gap"
            } else {
                "chain.order"
            };
            push(what, expected_seq.to_string(), row.seq().to_string());
        }
        if let Some(prev) = prev {
            if !prev.is(&expected_prev) {
                // Expected: the link this entry's bytes hold (chained on to the signed
                // log, the anchored record); actual: the hash of the entry before it now.
                // An edit then reads with the same two hashes as its `entry.hash`.
                push(
                    "chain.prev",
                    prev.into_string(),
                    prefixed_hex(&expected_prev),
                );
            }
        }
        for (name, expected, actual) in findings {
            push(name, expected, actual);
        }
        run.entries += 1;
        run.activities += u64::from(is_activity);
        run.last_seq = row.seq();
        expected_seq = row.seq() + 1;
        expected_prev.clear();
        expected_prev.extend_from_slice(&hash);
    }
    if let Some(mut done) = current.take() {
        done.last_hash = rows.last().expect("a run holds a row").hash().to_vec();
        report.runs.push(done);
    }
    report
}
