//! The native run journal: how an entry is encoded, hashed and chained, and the batch
//! verifier that re-checks stored entries.
//!
//! An entry is the RFC 8785 canonical JSON of
//! `{"body": …, "kind": …, "prev": …, "run": …, "seq": …, "ts": …, "v": 1}`.
//! Its hash is `domain_hash("entry", bytes)`; `prev` is the previous entry's hash as
//! `"blake3:<hex>"`, and for `seq == 0` the run's genesis value, which binds the run to its
//! ledger (`domain_hash("run-genesis", canonical({"ledger": id, "run": run}))`).
//! See docs/FORMAT.md for the byte-level description and vectors.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use foldhash::fast::RandomState;
use rayon::prelude::*;

use crate::canonical::{self, raw, Value};
use crate::hash::{self, many};
use crate::merkle::{self, Hash, HashAlg, IncrementalTree};
use crate::Result;

/// The journal format version carried in every entry as `"v"`.
pub const ENTRY_VERSION: f64 = 1.0;
/// Entries of this kind pin an evidence set: verify recomputes its hash.
pub const ACTIVITY_RESULT_KIND: &str = "activity.result";
/// Verification keeps at most this many findings per run (it always counts them all).
pub const MAX_FINDINGS_PER_RUN: usize = 32;

const HEX_PREFIX: &str = "blake3:";

/// Rows per parallel task where their hashes are computed many at a time
/// ([`hash::many`]): enough to keep every lane busy, few enough to spread a batch over
/// the pool.
const HASH_MANY_ROWS: usize = 256;

/// `"blake3:" + hex` of a 32-byte digest.
pub fn prefixed_hex(digest: &[u8]) -> String {
    hash::to_hex_prefixed(HEX_PREFIX, digest)
}

/// The domain of an entry's hash.
const ENTRY_DOMAIN: &str = "entry";

/// The hash of an entry's canonical bytes.
pub fn entry_hash(bytes: &[u8]) -> [u8; 32] {
    hash::domain_hash(ENTRY_DOMAIN, bytes)
}

/// The `prev` value of a run's first entry: binds the run to its ledger identity.
pub fn genesis_prev(ledger_id: &str, run_id: &str) -> String {
    prefixed_hex(&genesis_digest(ledger_id, run_id))
}

/// `domain_hash("run-genesis", JCS({"ledger": ledger_id, "run": run_id}))`: the raw bytes
/// of [`genesis_prev`]. The object is written directly (its keys are in JCS order).
pub fn genesis_digest(ledger_id: &str, run_id: &str) -> [u8; 32] {
    let mut bytes = Vec::with_capacity(24 + ledger_id.len() + run_id.len());
    bytes.extend_from_slice(b"{\"ledger\":");
    canonical::write_string(ledger_id, &mut bytes);
    bytes.extend_from_slice(b",\"run\":");
    canonical::write_string(run_id, &mut bytes);
    bytes.push(b'}');
    hash::domain_hash("run-genesis", &bytes)
}

/// The evidence set hash: `domain_hash("evidence-set", canonical(sorted unique hashes))`.
pub fn evidence_set_hash<'a>(hashes: impl IntoIterator<Item = &'a str>) -> String {
    let mut unique: Vec<&str> = hashes.into_iter().collect();
    unique.sort_unstable();
    unique.dedup();
    prefixed_hex(&evidence_set_digest_sorted(&unique))
}

/// The evidence set digest of hashes already sorted and de-duplicated: their JCS array
/// (strings joined by `,` in `[...]`) written directly.
fn evidence_set_digest_sorted(unique: &[&str]) -> [u8; 32] {
    hash::domain_hash(EVIDENCE_SET_DOMAIN, &evidence_set_bytes(unique))
}

/// The domain of an evidence set's hash.
const EVIDENCE_SET_DOMAIN: &str = "evidence-set";

/// The canonical bytes of a sorted, deduplicated list of content hashes.
fn evidence_set_bytes(unique: &[&str]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(2 + unique.iter().map(|h| h.len() + 3).sum::<usize>());
    bytes.push(b'[');
    for (i, h) in unique.iter().enumerate() {
        if i > 0 {
            bytes.push(b',');
        }
        canonical::write_string(h, &mut bytes);
    }
    bytes.push(b']');
    bytes
}

/// What an entry says about itself besides its body.
pub struct EntryHeader<'a> {
    pub run_id: &'a str,
    pub seq: u64,
    pub kind: &'a str,
    pub prev: &'a str,
    pub ts: &'a str,
}

/// Canonical bytes of an entry. `body` must be a canonicalizable value.
pub fn encode_entry(header: &EntryHeader<'_>, body: &Value) -> Result<Vec<u8>> {
    let mut body_bytes = Vec::new();
    canonical::write_canonical(body, &mut body_bytes)?;
    Ok(encode_entry_around(header, &body_bytes))
}

/// Canonical bytes of an entry whose body is already canonical JSON (`body_jcs`).
///
/// The members are written in their sorted order (`body kind prev run seq ts v`), so the
/// envelope is canonical exactly when the body is.
pub fn encode_entry_around(header: &EntryHeader<'_>, body_jcs: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body_jcs.len() + 192);
    out.extend_from_slice(b"{\"body\":");
    out.extend_from_slice(body_jcs);
    out.extend_from_slice(b",\"kind\":");
    canonical::write_string(header.kind, &mut out);
    out.extend_from_slice(b",\"prev\":");
    canonical::write_string(header.prev, &mut out);
    out.extend_from_slice(b",\"run\":");
    canonical::write_string(header.run_id, &mut out);
    out.extend_from_slice(b",\"seq\":");
    out.extend_from_slice(header.seq.to_string().as_bytes());
    out.extend_from_slice(b",\"ts\":");
    canonical::write_string(header.ts, &mut out);
    out.extend_from_slice(b",\"v\":1}");
    out
}

/// Encode a batch of consecutive entries of one run from their canonical bodies, chaining
/// each to the one before. Returns `(bytes, hash)` per entry.
pub fn encode_chain<K: AsRef<str>>(
    run_id: &str,
    first_seq: u64,
    prev: &str,
    ts: &str,
    items: &[(K, Vec<u8>)],
) -> Vec<(Vec<u8>, [u8; 32])> {
    let mut out = Vec::with_capacity(items.len());
    let mut prev = prev.to_owned();
    for (offset, (kind, body_jcs)) in items.iter().enumerate() {
        let header = EntryHeader {
            run_id,
            seq: first_seq + offset as u64,
            kind: kind.as_ref(),
            prev: &prev,
            ts,
        };
        let bytes = encode_entry_around(&header, body_jcs);
        let digest = entry_hash(&bytes);
        prev = prefixed_hex(&digest);
        out.push((bytes, digest));
    }
    out
}

/// One row of the `entries` table, as read back for verification.
#[derive(Debug, Clone)]
pub struct StoredEntry {
    pub run_id: String,
    pub seq: i64,
    pub kind: String,
    pub hash: Vec<u8>,
    pub bytes: Vec<u8>,
}

/// A row to verify, however it is held (owned here, borrowed from Python objects by the
/// extension so that batches cross the boundary without copying their bytes).
pub trait EntryRow: Sync {
    fn run_id(&self) -> &str;
    fn seq(&self) -> i64;
    fn kind(&self) -> &str;
    /// The stored `hash` column.
    fn hash(&self) -> &[u8];
    /// The stored canonical bytes.
    fn bytes(&self) -> &[u8];
}

impl EntryRow for StoredEntry {
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn seq(&self) -> i64 {
        self.seq
    }
    fn kind(&self) -> &str {
        &self.kind
    }
    fn hash(&self) -> &[u8] {
        &self.hash
    }
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

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

/// An entry's `prev`: a `blake3:<64 lowercase hex>` string read as its 32 bytes (compared
/// without formatting hex per row), or any other string as it is.
enum Prev<'a> {
    Digest([u8; 32]),
    Text(Cow<'a, str>),
}

impl<'a> Prev<'a> {
    fn new(text: Cow<'a, str>) -> Self {
        match hash::decode_prefixed(HEX_PREFIX, text.as_bytes()) {
            Some(digest) => Prev::Digest(digest),
            None => Prev::Text(text),
        }
    }

    /// Whether this equals `"blake3:" + hex(expected)`, the string the format requires.
    fn is(&self, expected: &[u8]) -> bool {
        match self {
            Prev::Digest(digest) => <&[u8; 32]>::try_from(expected).is_ok_and(|e| e == digest),
            Prev::Text(text) => **text == prefixed_hex(expected),
        }
    }

    fn into_string(self) -> String {
        match self {
            Prev::Digest(digest) => prefixed_hex(&digest),
            Prev::Text(text) => text.into_owned(),
        }
    }
}

/// What one row says about itself, computed independently of its neighbours.
struct RowCheck<'a> {
    hash: [u8; 32],
    prev: Option<Prev<'a>>,
    is_activity: bool,
    referenced: Vec<Cow<'a, str>>,
    findings: Vec<(&'static str, String, String)>,
    /// On the fast path, an activity's evidence set still to hash (many at a time) and
    /// compare: if it differs, the row is checked again in full.
    evidence: Option<PendingEvidence>,
}

/// An evidence set's canonical bytes, and the digest its entry anchors.
struct PendingEvidence {
    anchored: [u8; 32],
    set: Vec<u8>,
}

/// The checks of each row, their hashes computed many at a time: the entries', then on
/// the fast path the evidence sets'.
fn check_rows<R: EntryRow>(rows: &[R]) -> Vec<RowCheck<'_>> {
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
    let fast = !crate::portable::forced();
    if fast && <&[u8; 32]>::try_from(row.hash()).is_ok_and(|stored| *stored == computed) {
        if let Some(check) = check_clean_row(row, computed) {
            return check;
        }
    }
    check_row_fully(row, computed)
}

/// The common case, without building a `Value`: a row whose hash matches, whose bytes are
/// certainly canonical, and whose fields all check out, read where that same pass found
/// them (an activity's body is walked once more for its evidence). `None` as soon as anything differs or is unusual (an
/// escaped string, a large number, a malformed body...): [`check_row_fully`] then does
/// every check again and names what diverged, so both paths agree on every row.
fn check_clean_row<R: EntryRow>(row: &R, hash: [u8; 32]) -> Option<RowCheck<'_>> {
    let text = row.bytes();
    let mut members = canonical::TopMembers::default();
    if !canonical::certainly_canonical_members(text, &mut members) {
        return None;
    }
    let is_activity = row.kind() == ACTIVITY_RESULT_KIND;
    let (mut v, mut run, mut seq, mut kind, mut prev, mut ts, mut body) =
        (None, None, None, None, None, None, false);
    let mut activity = None;
    // Canonical keys are unique, sorted and written without escapes for these names.
    for member in members.all()? {
        let value = &text[member.value.0..member.value.1];
        match &text[member.key.0..member.key.1] {
            b"\"body\"" => {
                body = true;
                if is_activity {
                    activity = Some(clean_evidence(text, member.value.0)?);
                }
            }
            b"\"kind\"" => kind = Some(value),
            b"\"prev\"" => prev = Some(value),
            b"\"run\"" => run = Some(value),
            b"\"seq\"" => seq = Some(value),
            b"\"ts\"" => ts = Some(value),
            b"\"v\"" => v = Some(value),
            _ => {}
        }
    }
    // The canonical form of the number 1 is exactly `1`.
    if !body
        || v? != b"1"
        || raw::plain_str(run?)? != row.run_id()
        || small_integer(seq?)? != row.seq()
        || raw::plain_str(kind?)? != row.kind()
        || ts?.first() != Some(&b'"')
    {
        return None;
    }
    let prev = Prev::new(Cow::Borrowed(raw::plain_str(prev?)?));
    let (referenced, evidence) = match activity {
        Some((referenced, evidence)) => (referenced, Some(evidence)),
        None if is_activity => return None,
        None => (Vec::new(), None),
    };
    Some(RowCheck {
        hash,
        prev: Some(prev),
        is_activity,
        referenced,
        findings: Vec::new(),
        evidence,
    })
}

/// A canonical non-negative integer of at most 15 digits (exact in a double).
fn small_integer(raw: &[u8]) -> Option<i64> {
    if raw.is_empty() || raw.len() > 15 || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(raw.iter().fold(0i64, |n, &d| n * 10 + i64::from(d - b'0')))
}

/// The activity result body at `start`, read for the fast path: the content hashes it
/// references (observations sorted and unique, then the artifact) and its evidence set,
/// whose hash the caller compares; or `None` for anything else [`check_evidence_set`]
/// would report or that needs unescaping.
fn clean_evidence(text: &[u8], start: usize) -> Option<(Vec<Cow<'_, str>>, PendingEvidence)> {
    let (mut anchored, mut artifact) = (None, None);
    let mut hashes: Option<Vec<&str>> = None;
    raw::walk_object(text, start, |key, value_start| {
        if key == b"\"observations\"" {
            let mut found: Vec<&str> = Vec::with_capacity(8);
            let end = raw::walk_array(text, value_start, |item| {
                let mut content_hash = None;
                let end = raw::walk_object(text, item, |key, start| {
                    let end = raw::value_end(text, start)?;
                    if key == b"\"content_hash\"" {
                        content_hash = Some(raw::plain_str(&text[start..end])?);
                    }
                    Some(end)
                })?;
                found.push(content_hash?);
                Some(end)
            })?;
            hashes = Some(found);
            return Some(end);
        }
        let end = raw::value_end(text, value_start)?;
        match key {
            b"\"artifact_hash\"" => artifact = Some(&text[value_start..end]),
            b"\"evidence_set_hash\"" => anchored = Some(&text[value_start..end]),
            _ => {}
        }
        Some(end)
    })?;
    let anchored = raw::plain_str(anchored?)?;
    let mut hashes = hashes?;
    hashes.sort_unstable();
    hashes.dedup();
    let evidence = PendingEvidence {
        anchored: hash::decode_prefixed(HEX_PREFIX, anchored.as_bytes())?,
        set: evidence_set_bytes(&hashes),
    };
    let mut referenced: Vec<Cow<'_, str>> = hashes.into_iter().map(Cow::Borrowed).collect();
    if let Some(artifact) = artifact.filter(|raw| raw.first() == Some(&b'"')) {
        referenced.push(Cow::Borrowed(raw::plain_str(artifact)?));
    }
    Some((referenced, evidence))
}

/// Every check on one row, from the parsed value: the reference behaviour, and the one
/// that names what diverged.
fn check_row_fully<R: EntryRow>(row: &R, computed: [u8; 32]) -> RowCheck<'_> {
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
        other => note("entry.run", row.run_id().to_owned(), describe(other)),
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
        other => note("entry.kind", row.kind().to_owned(), describe(other)),
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
fn check_evidence_set(body: &Value) -> Option<(String, String)> {
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
fn referenced_hashes(body: &Value) -> Vec<String> {
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

fn describe(value: Option<&Value>) -> String {
    match value {
        None => "missing".to_owned(),
        Some(v) => canonical::to_canonical(v)
            .map(|b| {
                let text = String::from_utf8_lossy(&b).into_owned();
                if text.len() > 120 {
                    let mut cut = 120;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    format!("{}…", &text[..cut])
                } else {
                    text
                }
            })
            .unwrap_or_else(|_| "unrepresentable".to_owned()),
    }
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
                push(
                    "chain.prev",
                    prefixed_hex(&expected_prev),
                    prev.into_string(),
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

/// The domain of a workspace-log leaf: `domain_hash("log-leaf", …)`.
pub const LOG_LEAF_DOMAIN: &str = "log-leaf";

/// Below this many rows, leaf hashing stays on the calling thread (an append is small).
const PARALLEL_LEAVES: usize = 512;

/// The leaf data of one entry in the workspace log: `domain_hash("log-leaf",
/// JCS({"entry": "blake3:<hex>", "run": run, "seq": seq}))`, 32 bytes.
///
/// The object is written directly (its keys are already in JCS order); `seq` is a
/// non-negative integer below 2^53 for every real entry, where decimal is its JCS form.
pub fn log_leaf(run_id: &str, seq: i64, entry_hash: &[u8]) -> [u8; 32] {
    let mut message = Vec::with_capacity(LOG_LEAF_MESSAGE_LEN + run_id.len());
    write_log_leaf_message(run_id, seq, entry_hash, &mut message);
    hash::domain_hash(LOG_LEAF_DOMAIN, &message)
}

/// The bytes of a log leaf's object, less its run id.
const LOG_LEAF_MESSAGE_LEN: usize = 112;

/// Appends the JCS bytes [`log_leaf`] hashes to `out`.
fn write_log_leaf_message(run_id: &str, seq: i64, entry_hash: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"entry\":\"blake3:");
    let hex_start = out.len();
    out.resize(hex_start + 2 * entry_hash.len(), 0);
    hash::write_hex(entry_hash, &mut out[hex_start..]);
    out.extend_from_slice(b"\",\"run\":");
    // The common case, a run id needing no escape, without the general string writer.
    if run_id.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(run_id.as_bytes());
        out.push(b'"');
    } else {
        canonical::write_string(run_id, out);
    }
    out.extend_from_slice(b",\"seq\":");
    canonical::write_integer(seq, out);
    out.push(b'}');
}

/// The log leaf hash `H(0x00 || log_leaf(run, seq, entry hash))` of each entry, with
/// BLAKE3 as `H`: the leaves, then their hashes, are hashed many at a time
/// ([`hash::many`]).
pub fn blake3_leaf_hashes<'a>(
    entries: impl ExactSizeIterator<Item = (&'a str, i64, &'a [u8])>,
) -> Vec<Hash> {
    let count = entries.len();
    let mut messages = Vec::with_capacity(count * (LOG_LEAF_MESSAGE_LEN + 16));
    let mut ends = Vec::with_capacity(count);
    for (run_id, seq, entry_hash) in entries {
        write_log_leaf_message(run_id, seq, entry_hash, &mut messages);
        ends.push(messages.len());
    }
    let starts = std::iter::once(0).chain(ends.iter().copied());
    let inputs: Vec<&[u8]> = starts.zip(&ends).map(|(a, &b)| &messages[a..b]).collect();
    let mut leaves = vec![[0u8; 32]; count];
    many::hash_many(&many::Mode::domain(LOG_LEAF_DOMAIN), &inputs, &mut leaves);
    let prefixed: Vec<[u8; 33]> = leaves
        .iter()
        .map(|leaf| {
            let mut input = [merkle::LEAF_PREFIX; 33];
            input[1..].copy_from_slice(leaf);
            input
        })
        .collect();
    let inputs: Vec<&[u8]> = prefixed.iter().map(|input| &input[..]).collect();
    let mut hashes = vec![[0u8; 32]; count];
    many::hash_many(&many::Mode::plain(), &inputs, &mut hashes);
    hashes
}

/// One row of the workspace log, read in leaf order: the entry's leaf index, run, seq and
/// stored hash.
#[derive(Debug, Clone)]
pub struct LogRow {
    pub leaf: i64,
    pub run_id: String,
    pub seq: i64,
    pub hash: Vec<u8>,
}

/// The first row whose leaf index is not the next one (`expected`, the tree's size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafGap {
    pub expected: u64,
    pub found: i64,
}

/// Append `rows` (in leaf order) to the log `tree`, which must hold exactly the leaves
/// before them. Leaf hashes are computed in parallel for large batches; the appends are
/// sequential. Stops at the first row whose leaf index is not the tree's size.
pub fn extend_log(tree: &mut IncrementalTree, rows: &[LogRow]) -> Option<LeafGap> {
    let alg = tree.alg();
    let leaf_hash = |row: &LogRow| alg.leaf_hash(&log_leaf(&row.run_id, row.seq, &row.hash));
    let hashes: Vec<Hash> = if rows.len() >= PARALLEL_LEAVES {
        rows.par_iter().map(leaf_hash).collect()
    } else {
        rows.iter().map(leaf_hash).collect()
    };
    for (row, hash) in rows.iter().zip(hashes) {
        let expected = tree.size();
        if u64::try_from(row.leaf).ok() != Some(expected) || tree.append_leaf_hash(hash).is_err() {
            return Some(LeafGap {
                expected,
                found: row.leaf,
            });
        }
    }
    None
}

/// The log leaf hash of each stored row, `H(0x00 || log_leaf(run, seq, stored hash))`,
/// computed in parallel.
pub fn row_leaf_hashes<R: EntryRow>(alg: HashAlg, rows: &[R]) -> Vec<Hash> {
    match alg {
        HashAlg::Blake3 => rows
            .par_chunks(HASH_MANY_ROWS)
            .flat_map_iter(|chunk| {
                blake3_leaf_hashes(chunk.iter().map(|r| (r.run_id(), r.seq(), r.hash())))
            })
            .collect(),
        HashAlg::Sha256 => rows
            .par_iter()
            .map(|row| alg.leaf_hash(&log_leaf(row.run_id(), row.seq(), row.hash())))
            .collect(),
    }
}

/// Rebuilds the log's tree from leaves that arrive in any order: the journal pass reads
/// entries in `(run, seq)` order, not in leaf order, and the log is checked from those same
/// rows rather than from a second read.
///
/// Two complete sibling subtrees merge as soon as both are present, so what is held is
/// only the subtrees whose siblings have not arrived yet: O(log n) when runs were appended
/// in batches in run-id order, at most O(n) hashes when appends interleaved. A bitmap of
/// one bit per leaf catches duplicates.
///
/// While leaves arrive in leaf order (runs appended one after the other), the held subtrees
/// are kept as a stack, largest first, as an incremental tree keeps them: no map lookups.
/// The first leaf out of order moves them into the map.
#[derive(Debug)]
pub struct LogAssembler {
    alg: HashAlg,
    base: u64,
    limit: u64,
    in_order: Option<Vec<((u32, u64), Hash)>>,
    nodes: HashMap<(u32, u64), Hash, RandomState>,
    seen: Vec<u64>,
    added: u64,
    problem: Option<LeafGap>,
}

/// What the assembled leaves make: the tree's state, or the first leaf out of place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAssembly {
    pub size: u64,
    pub frontier: Vec<Hash>,
    pub root: Hash,
    pub gap: Option<LeafGap>,
}

/// The perfect subtrees a tree of `size` leaves decomposes into: `(height, index)` with
/// `index` counted in subtrees of that height, largest first.
fn decomposition(size: u64) -> Vec<(u32, u64)> {
    let mut start = 0u64;
    let mut out = Vec::new();
    for height in (0..u64::BITS).rev() {
        if size >> height & 1 == 1 {
            out.push((height, start >> height));
            start += 1 << height;
        }
    }
    out
}

impl LogAssembler {
    /// Leaves `base..limit` are expected; the first `base` are given by their frontier.
    pub fn new(alg: HashAlg, base: u64, frontier: Vec<Hash>, limit: u64) -> Result<Self> {
        let shape = decomposition(base);
        if shape.len() != frontier.len() || limit < base {
            return Err(crate::Error::invalid(format!(
                "a log of {base} leaves has a frontier of {} hashes, got {} (limit {limit})",
                shape.len(),
                frontier.len()
            )));
        }
        let span = usize::try_from(limit - base)
            .map_err(|_| crate::Error::invalid("the log is too large to assemble"))?;
        Ok(LogAssembler {
            alg,
            base,
            limit,
            in_order: Some(shape.into_iter().zip(frontier).collect()),
            nodes: HashMap::default(),
            seen: vec![0; span.div_ceil(64)],
            added: 0,
            problem: None,
        })
    }

    /// Add one leaf hash at `leaf`. A leaf out of range or seen twice is remembered (the
    /// first such) and not added.
    pub fn add(&mut self, leaf: i64, leaf_hash: Hash) {
        let Some(index) = u64::try_from(leaf)
            .ok()
            .filter(|&i| i >= self.base && i < self.limit)
        else {
            self.note(LeafGap {
                expected: self.base,
                found: leaf,
            });
            return;
        };
        let offset = (index - self.base) as usize;
        let (word, bit) = (offset / 64, 1u64 << (offset % 64));
        if self.seen[word] & bit != 0 {
            self.note(LeafGap {
                expected: index + 1,
                found: leaf,
            });
            return;
        }
        self.seen[word] |= bit;
        let next = self.base + self.added;
        self.added += 1;
        if let Some(stack) = &mut self.in_order {
            if index == next {
                let (mut key, mut node) = ((0u32, index), leaf_hash);
                // In order, a left sibling is always the top of the stack.
                while let Some(&(top_key, top)) = stack.last() {
                    if top_key != (key.0, key.1 ^ 1) {
                        break;
                    }
                    stack.pop();
                    node = self.alg.node_hash(&top, &node);
                    key = (key.0 + 1, key.1 >> 1);
                }
                stack.push((key, node));
                return;
            }
            self.nodes.extend(stack.drain(..));
            self.in_order = None;
        }
        let (mut height, mut position, mut node) = (0u32, index, leaf_hash);
        while let Some(sibling) = self.nodes.remove(&(height, position ^ 1)) {
            node = if position & 1 == 0 {
                self.alg.node_hash(&node, &sibling)
            } else {
                self.alg.node_hash(&sibling, &node)
            };
            height += 1;
            position >>= 1;
        }
        self.nodes.insert((height, position), node);
    }

    fn note(&mut self, gap: LeafGap) {
        if self.problem.is_none() {
            self.problem = Some(gap);
        }
    }

    /// Subtrees held right now (for tests of the memory bound).
    pub fn held(&self) -> usize {
        self.nodes.len() + self.in_order.as_ref().map_or(0, Vec::len)
    }

    fn node(&self, key: (u32, u64)) -> Option<Hash> {
        let mut stacked = self.in_order.iter().flatten();
        stacked
            .find(|(k, _)| *k == key)
            .map(|(_, node)| *node)
            .or_else(|| self.nodes.get(&key).copied())
    }

    /// The tree of leaves `0..base + added`, or the first leaf out of place.
    pub fn finish(&self) -> LogAssembly {
        let size = self.base + self.added;
        let mut gap = self.problem.clone();
        if gap.is_none() {
            // No duplicate and all in range: a gap shows as an unset bit below `added`.
            let missing = (0..self.added).find(|&i| {
                let offset = i as usize;
                self.seen[offset / 64] & (1 << (offset % 64)) == 0
            });
            if let Some(offset) = missing {
                let next = (offset..self.limit - self.base).find(|&i| {
                    let o = i as usize;
                    self.seen[o / 64] & (1 << (o % 64)) != 0
                });
                gap = Some(LeafGap {
                    expected: self.base + offset,
                    found: next.map_or(-1, |i| (self.base + i) as i64),
                });
            }
        }
        let frontier: Option<Vec<Hash>> = decomposition(size)
            .into_iter()
            .map(|key| self.node(key))
            .collect();
        let (frontier, root) = match (&gap, frontier) {
            (None, Some(frontier)) => {
                let root = IncrementalTree::from_state(self.alg, size, frontier.clone())
                    .map(|tree| tree.root())
                    .unwrap_or_default();
                (frontier, root)
            }
            _ => (Vec::new(), [0u8; 32]),
        };
        LogAssembly {
            size,
            frontier,
            root,
            gap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEDGER: &str = "00112233445566778899aabbccddeeff";

    fn chain(run: &str, n: u64) -> Vec<StoredEntry> {
        let items = (0..n)
            .map(|i| {
                let body = Value::Object(vec![("i".to_owned(), Value::Number(i as f64))]);
                ("step".to_owned(), canonical::to_canonical(&body).unwrap())
            })
            .collect::<Vec<_>>();
        encode_chain(
            run,
            0,
            &genesis_prev(LEDGER, run),
            "2026-11-30T00:00:00Z",
            &items,
        )
        .into_iter()
        .enumerate()
        .map(|(i, (bytes, hash))| StoredEntry {
            run_id: run.to_owned(),
            seq: i as i64,
            kind: "step".to_owned(),
            hash: hash.to_vec(),
            bytes,
        })
        .collect()
    }

    #[test]
    fn the_envelope_around_canonical_bytes_equals_canonicalizing_the_whole_entry() {
        let body = Value::Object(vec![
            ("z".to_owned(), Value::String("é\u{1}\"".to_owned())),
            ("a".to_owned(), Value::Number(1e21)),
        ]);
        let header = EntryHeader {
            run_id: "run.1",
            seq: 9_007_199_254_740_991,
            kind: "activity.result",
            prev: "blake3:00",
            ts: "2026-11-30T00:00:00.000000Z",
        };
        let whole = Value::Object(vec![
            ("v".to_owned(), Value::Number(ENTRY_VERSION)),
            ("ts".to_owned(), Value::String(header.ts.to_owned())),
            ("seq".to_owned(), Value::Number(header.seq as f64)),
            ("run".to_owned(), Value::String(header.run_id.to_owned())),
            ("prev".to_owned(), Value::String(header.prev.to_owned())),
            ("kind".to_owned(), Value::String(header.kind.to_owned())),
            ("body".to_owned(), body.clone()),
        ]);
        assert_eq!(
            encode_entry(&header, &body).unwrap(),
            canonical::to_canonical(&whole).unwrap()
        );
    }

    #[test]
    fn a_fresh_chain_verifies_clean() {
        let mut rows = chain("a", 5);
        rows.extend(chain("b", 3));
        let report = verify_batch(LEDGER, None, &rows);
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        assert_eq!(report.runs.len(), 2);
        assert_eq!(report.runs[0].entries, 5);
        assert_eq!(report.runs[1].last_seq, 2);
    }

    #[test]
    fn a_run_split_across_batches_verifies_with_the_carry() {
        let rows = chain("a", 6);
        let first = verify_batch(LEDGER, None, &rows[..4]);
        let last = &rows[3];
        let carry = Carry {
            run_id: last.run_id.clone(),
            seq: last.seq,
            hash: last.hash.clone(),
        };
        let second = verify_batch(LEDGER, Some(&carry), &rows[4..]);
        assert!(first.findings.is_empty() && second.findings.is_empty());
    }

    #[test]
    fn batches_absorbed_in_order_report_what_one_batch_would() {
        let mut rows = chain("a", 80);
        for row in rows.iter_mut().skip(5) {
            row.hash[0] ^= 1; // each a finding, well past the per-run cap in all
        }
        rows.extend(chain("b", 3));
        let whole = verify_batch(LEDGER, None, &rows);
        for split in [1, 20, 50, 79, 80, 81] {
            // The next row's `prev` must name the hash its predecessor's bytes have.
            let last = &rows[split - 1];
            let carry = Carry {
                run_id: last.run_id.clone(),
                seq: last.seq,
                hash: entry_hash(&last.bytes).to_vec(),
            };
            let mut merged = verify_batch(LEDGER, None, &rows[..split]);
            merged.absorb(verify_batch(LEDGER, Some(&carry), &rows[split..]));
            assert_eq!(merged.runs, whole.runs, "split at {split}");
            assert_eq!(merged.findings, whole.findings, "split at {split}");
        }
        assert_eq!(whole.findings.len(), MAX_FINDINGS_PER_RUN);
        assert!(whole.runs[0].findings > MAX_FINDINGS_PER_RUN as u64);
    }

    #[test]
    fn a_deleted_middle_entry_breaks_the_chain_at_the_next_step() {
        let mut rows = chain("a", 5);
        rows.remove(2);
        let report = verify_batch(LEDGER, None, &rows);
        let checks: Vec<_> = report
            .findings
            .iter()
            .map(|f| (f.seq, f.check.as_str()))
            .collect();
        assert!(checks.contains(&(Some(3), "chain.gap")));
        assert!(checks.contains(&(Some(3), "chain.prev")));
    }

    #[test]
    fn an_edited_body_is_named_at_its_step() {
        let mut rows = chain("a", 3);
        let text = String::from_utf8(rows[1].bytes.clone()).unwrap();
        rows[1].bytes = text.replace("\"i\":1", "\"i\":7").into_bytes();
        let report = verify_batch(LEDGER, None, &rows);
        assert_eq!(report.findings[0].seq, Some(1));
        assert_eq!(report.findings[0].check, "entry.hash");
        assert!(report
            .findings
            .iter()
            .any(|f| f.seq == Some(2) && f.check == "chain.prev"));
    }

    #[test]
    fn a_run_moved_to_another_ledger_fails_at_genesis() {
        let rows = chain("a", 2);
        let report = verify_batch("another-ledger", None, &rows);
        assert_eq!(report.findings.len(), 1);
        assert_eq!(report.findings[0].check, "chain.prev");
        assert_eq!(report.findings[0].seq, Some(0));
    }

    #[test]
    fn the_evidence_set_hash_is_recomputed() {
        let observation = |h: &str| {
            Value::Object(vec![(
                "content_hash".to_owned(),
                Value::String(h.to_owned()),
            )])
        };
        let good = evidence_set_hash(["blake3:bb", "blake3:aa", "blake3:bb"]);
        assert_eq!(good, evidence_set_hash(["blake3:aa", "blake3:bb"]));
        let body = |esh: &str| {
            Value::Object(vec![
                (
                    "evidence_set_hash".to_owned(),
                    Value::String(esh.to_owned()),
                ),
                (
                    "observations".to_owned(),
                    Value::Array(vec![observation("blake3:bb"), observation("blake3:aa")]),
                ),
            ])
        };
        assert_eq!(check_evidence_set(&body(&good)), None);
        assert!(check_evidence_set(&body("blake3:00")).is_some());
    }

    /// The one-pass path must agree with the full path on every row it accepts.
    #[test]
    fn the_fast_path_agrees_with_the_full_checks_on_mutated_rows() {
        let observation = |h: &str| {
            Value::Object(vec![
                ("content_hash".to_owned(), Value::String(h.to_owned())),
                ("kind".to_owned(), Value::String("page".to_owned())),
                (
                    "ref".to_owned(),
                    Value::String("https://e/\"x\"".to_owned()),
                ),
            ])
        };
        let hashes = [
            blake3_hex_of(b"a"),
            blake3_hex_of(b"b"),
            blake3_hex_of(b"a"),
        ];
        let body = Value::Object(vec![
            (
                "artifact_hash".to_owned(),
                Value::String(blake3_hex_of(b"art")),
            ),
            (
                "evidence_set_hash".to_owned(),
                Value::String(evidence_set_hash(hashes.iter().map(String::as_str))),
            ),
            (
                "observations".to_owned(),
                Value::Array(hashes.iter().map(|h| observation(h)).collect()),
            ),
            ("stage_id".to_owned(), Value::String("s-1".to_owned())),
        ]);
        let step = Value::Object(vec![("n".to_owned(), Value::Number(12.0))]);
        let encoded = encode_chain(
            "run-1",
            0,
            &genesis_prev(LEDGER, "run-1"),
            "2026-11-30T00:00:00.000000Z",
            &[
                ("step".to_owned(), canonical::to_canonical(&step).unwrap()),
                (
                    ACTIVITY_RESULT_KIND.to_owned(),
                    canonical::to_canonical(&body).unwrap(),
                ),
            ],
        );
        let seeds: Vec<(String, Vec<u8>)> = encoded
            .into_iter()
            .zip(["step", ACTIVITY_RESULT_KIND])
            .map(|((bytes, _), kind)| (kind.to_owned(), bytes))
            .collect();
        let alphabet = b"\"\\,:[]{}-.019eEabfu:";
        let mut next = crate::hash::testutil::xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut fast = 0;
        for (kind, seed) in &seeds {
            for round in 0..6_000 {
                let mut bytes = seed.clone();
                if round > 0 {
                    for _ in 0..=(next() % 2) {
                        let at = (next() as usize) % bytes.len();
                        let byte = alphabet[(next() as usize) % alphabet.len()];
                        match next() % 3 {
                            0 => bytes[at] = byte,
                            1 => {
                                bytes.remove(at);
                            }
                            _ => bytes.insert(at, byte),
                        }
                    }
                }
                let row = StoredEntry {
                    run_id: "run-1".to_owned(),
                    seq: i64::from(kind == ACTIVITY_RESULT_KIND),
                    kind: kind.clone(),
                    hash: entry_hash(&bytes).to_vec(),
                    bytes,
                };
                let full = check_row_fully(&row, entry_hash(&row.bytes));
                // The path verify takes finds exactly what the full checks find.
                let taken = check_rows(std::slice::from_ref(&row)).remove(0);
                assert_eq!(taken.findings, full.findings);
                let Some(quick) = check_clean_row(&row, entry_hash(&row.bytes)) else {
                    continue;
                };
                // The fast path holds only if the evidence set it left to hash matches.
                if let Some(evidence) = &quick.evidence {
                    if hash::domain_hash(EVIDENCE_SET_DOMAIN, &evidence.set) != evidence.anchored {
                        continue;
                    }
                }
                fast += 1;
                let text = String::from_utf8_lossy(&row.bytes).into_owned();
                assert!(full.findings.is_empty(), "{text} {:?}", full.findings);
                assert_eq!(quick.is_activity, full.is_activity, "{text}");
                let as_string = |p: Option<Prev<'_>>| p.map(Prev::into_string);
                assert_eq!(as_string(quick.prev), as_string(full.prev), "{text}");
                let mut a: Vec<String> =
                    quick.referenced.into_iter().map(Cow::into_owned).collect();
                let mut b: Vec<String> = full.referenced.into_iter().map(Cow::into_owned).collect();
                a.sort();
                a.dedup();
                b.sort();
                b.dedup();
                assert_eq!(a, b, "{text}");
            }
        }
        assert!(fast > 100, "{fast}");
    }

    fn blake3_hex_of(data: &[u8]) -> String {
        hash::blake3_hex(data)
    }

    #[test]
    fn prev_is_compared_as_bytes_exactly_like_its_string() {
        let digest = [0xabu8; 32];
        let text = prefixed_hex(&digest);
        assert!(Prev::new(Cow::Borrowed(&text)).is(&digest));
        assert!(!Prev::new(Cow::Borrowed(&text)).is(&[0xab; 31]));
        let upper = text.to_uppercase().replace("BLAKE3:", "blake3:");
        assert!(matches!(Prev::new(Cow::Borrowed(&upper)), Prev::Text(_)));
        assert!(!Prev::new(Cow::Borrowed(&upper)).is(&digest));
        let odd = prefixed_hex(&[1u8; 33]);
        assert!(Prev::new(Cow::Borrowed(&odd)).is(&[1u8; 33]));
        assert_eq!(genesis_prev(LEDGER, "a"), {
            let value = Value::Object(vec![
                ("ledger".to_owned(), Value::String(LEDGER.to_owned())),
                ("run".to_owned(), Value::String("a".to_owned())),
            ]);
            prefixed_hex(&hash::domain_hash(
                "run-genesis",
                &canonical::to_canonical(&value).unwrap(),
            ))
        });
    }

    #[test]
    fn a_log_leaf_is_the_same_on_its_fast_and_general_paths() {
        for (run, seq, digest) in [
            ("run-1", 0i64, vec![7u8; 32]),
            ("run-1", 1234567890123, vec![0xab; 32]),
            ("a\"b\\c", 5, vec![1; 32]),
            ("r", -3, vec![2; 32]),
            ("r", 9, vec![3; 31]),
        ] {
            let text = format!(
                "{{\"entry\":\"blake3:{}\",\"run\":{},\"seq\":{seq}}}",
                hex::encode(&digest),
                String::from_utf8(canonical::to_canonical(&Value::String(run.to_owned())).unwrap())
                    .unwrap()
            );
            assert_eq!(
                log_leaf(run, seq, &digest),
                hash::domain_hash("log-leaf", text.as_bytes()),
                "{text}"
            );
        }
    }

    #[test]
    fn a_log_leaf_binds_run_seq_and_hash() {
        let base = log_leaf("a", 1, &[7u8; 32]);
        assert_ne!(base, log_leaf("b", 1, &[7u8; 32]));
        assert_ne!(base, log_leaf("a", 2, &[7u8; 32]));
        assert_ne!(base, log_leaf("a", 1, &[8u8; 32]));
        let text = format!(
            "{{\"entry\":\"blake3:{}\",\"run\":\"a\",\"seq\":1}}",
            "07".repeat(32)
        );
        assert_eq!(base, hash::domain_hash("log-leaf", text.as_bytes()));
    }

    #[test]
    fn extending_the_log_matches_the_root_and_stops_at_a_gap() {
        use crate::merkle::{root, HashAlg};
        let rows: Vec<LogRow> = (0..1000)
            .map(|i| LogRow {
                leaf: i,
                run_id: format!("r{}", i % 7),
                seq: i / 7,
                hash: vec![(i % 251) as u8; 32],
            })
            .collect();
        let leaves: Vec<[u8; 32]> = rows
            .iter()
            .map(|r| log_leaf(&r.run_id, r.seq, &r.hash))
            .collect();
        let mut tree = IncrementalTree::new(HashAlg::Blake3);
        assert_eq!(extend_log(&mut tree, &rows[..600]), None);
        assert_eq!(extend_log(&mut tree, &rows[600..]), None);
        assert_eq!(tree.root(), root(HashAlg::Blake3, &leaves));

        let mut gapped = IncrementalTree::new(HashAlg::Blake3);
        let mut missing = rows[..10].to_vec();
        missing.remove(4);
        let gap = extend_log(&mut gapped, &missing);
        assert_eq!(
            gap,
            Some(LeafGap {
                expected: 4,
                found: 5
            })
        );
        assert_eq!(gapped.size(), 4);
    }

    #[test]
    fn leaves_assembled_in_any_order_make_the_same_tree() {
        use crate::merkle::root;
        let alg = HashAlg::Blake3;
        let leaves: Vec<Vec<u8>> = (0..300).map(|i: u32| i.to_le_bytes().to_vec()).collect();
        let expected = root(alg, &leaves);
        // Interleaved order: all even leaves, then all odd ones.
        let mut order: Vec<usize> = (0..300).step_by(2).collect();
        order.extend((1..300).step_by(2));
        let mut assembler = LogAssembler::new(alg, 0, Vec::new(), 300).unwrap();
        for &i in &order {
            assembler.add(i as i64, alg.leaf_hash(&leaves[i]));
        }
        let done = assembler.finish();
        assert_eq!((done.size, done.root, done.gap), (300, expected, None));

        // In order throughout, in order and then not (the stack moves to the map), reversed.
        let in_order: Vec<usize> = (0..300).collect();
        let mut switching: Vec<usize> = (0..150).collect();
        switching.extend((200..300).chain(150..200));
        let reversed: Vec<usize> = (0..300).rev().collect();
        for order in [in_order, switching, reversed] {
            let mut assembler = LogAssembler::new(alg, 0, Vec::new(), 300).unwrap();
            for &i in &order {
                assembler.add(i as i64, alg.leaf_hash(&leaves[i]));
            }
            let done = assembler.finish();
            assert_eq!((done.size, done.root, done.gap), (300, expected, None));
        }

        // From a base frontier, in order: memory stays small.
        let mut base = IncrementalTree::new(alg);
        for leaf in &leaves[..100] {
            base.append(leaf).unwrap();
        }
        let mut tail = LogAssembler::new(alg, 100, base.frontier().to_vec(), 300).unwrap();
        for (i, leaf) in leaves.iter().enumerate().skip(100) {
            tail.add(i as i64, alg.leaf_hash(leaf));
            assert!(tail.held() <= 16);
        }
        assert_eq!(tail.finish().root, expected);
    }

    #[test]
    fn a_missing_or_duplicated_leaf_is_reported() {
        let alg = HashAlg::Blake3;
        let mut missing = LogAssembler::new(alg, 0, Vec::new(), 10).unwrap();
        for i in [0, 1, 2, 4, 5] {
            missing.add(i, [i as u8; 32]);
        }
        assert_eq!(
            missing.finish().gap,
            Some(LeafGap {
                expected: 3,
                found: 4
            })
        );
        let mut twice = LogAssembler::new(alg, 0, Vec::new(), 10).unwrap();
        for i in [0, 1, 1] {
            twice.add(i, [0; 32]);
        }
        assert_eq!(
            twice.finish().gap,
            Some(LeafGap {
                expected: 2,
                found: 1
            })
        );
        let mut outside = LogAssembler::new(alg, 0, Vec::new(), 3).unwrap();
        outside.add(7, [0; 32]);
        assert!(outside.finish().gap.is_some());
    }
}
