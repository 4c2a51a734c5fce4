//! bernstein's journal: the tolerant reader (`load_events`) and the chain walk
//! (`verify_journal`), reproduced exactly, plus what a strict verifier also wants from
//! the same pass (stored `index`/`payload_hash` that do not match, duplicate keys, the
//! `activity.result` rows with their evidence sets recomputed).
//!
//! [`verify_journals`] runs many journals in parallel on the current rayon pool.

use std::borrow::Cow;
use std::io::Write as _;

use rayon::prelude::*;

mod lean_row;

use crate::pyjson::{dumps_jcs, dumps_sorted, parse, py_repr, py_str, write_py_string, PyValue};
use agentledger_core::canonical::write_string;
use agentledger_core::hash::{hex64, sha256, sha256_many};
use lean_row::{Kind, LeanReader, LeanRow};

/// The fields of a row that bernstein does not hash.
pub const ENVELOPE: [&str; 6] = [
    "ts",
    "elapsed_s",
    "index",
    "prev_hash",
    "payload_hash",
    "event_hash",
];

/// Journals verified together, their files hashed side by side (one per SHA-256 lane).
pub const JOURNAL_GROUP: usize = 16;

/// Findings kept per journal for each strict-only kind (the count is always exact).
pub const MAX_STRICT_FINDINGS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    PyJsonV1,
    JcsV2,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::PyJsonV1 => "py-json-v1",
            Profile::JcsV2 => "jcs-v2",
        }
    }

    fn canon(self, value: &PyValue<'_>, out: &mut Vec<u8>) -> crate::Result<()> {
        match self {
            Profile::PyJsonV1 => dumps_sorted(value, true, out),
            Profile::JcsV2 => dumps_jcs(value, out),
        }
    }

    fn key(self, key: &[u8], out: &mut Vec<u8>) -> crate::Result<()> {
        match self {
            Profile::PyJsonV1 => write_py_string(key, true, out),
            Profile::JcsV2 => {
                write_string(to_utf8(key)?, out);
                Ok(())
            }
        }
    }
}

fn to_utf8(s: &[u8]) -> crate::Result<&str> {
    std::str::from_utf8(s).map_err(|_| {
        crate::Error::canonical("'utf-8' codec can't encode character: surrogates not allowed")
    })
}

/// One strict-only observation about a row (bernstein never looks at these).
#[derive(Debug, Clone, PartialEq)]
pub struct RowFinding {
    pub step: u64,
    pub line: u64,
    /// `index`, `payload_hash` or `duplicate_key`.
    pub field: &'static str,
    pub expected: Vec<u8>,
    pub actual: Vec<u8>,
}

/// One `activity.result` row, its fields as Python `str()` would give them.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityRow {
    pub step: u64,
    pub line: u64,
    pub event_hash: Vec<u8>,
    pub stage_id: Vec<u8>,
    pub kind: Vec<u8>,
    pub artifact_hash: Vec<u8>,
    pub evidence_set_hash: Vec<u8>,
    pub terminal_state: Vec<u8>,
    pub reason_code: Vec<u8>,
    /// `(kind, ref, content_hash)` in row order; a non-list `observations` is empty.
    pub observations: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    /// `Ok("sha256:…")`, or the error Python would raise computing it.
    pub recomputed_evidence_set_hash: Result<String, String>,
    /// Reattachment against a [`StoreIndex`], when one was given.
    pub reattach: Reattach,
    /// The artifact in the store index: `None` without an index, else `Some(digest of
    /// the stored bytes)` or `Some(empty)` when the store has no such plain name.
    pub artifact_stored: Option<Vec<u8>>,
}

/// What the store holds, by content hash (only plain names are listed; anything else is
/// left to the caller: `Unresolved`).
pub use crate::store_index::StoreIndex;

/// The first observation that does not reattach (bernstein checks them in row order).
#[derive(Debug, Clone, PartialEq)]
pub enum Reattach {
    /// No store index was given.
    NotChecked,
    /// Every observation is in the store with matching bytes.
    Ok,
    Missing(usize),
    Mismatch(usize),
    /// A content hash whose store path needs resolving (`..`, `/`): the caller decides.
    Unresolved(usize),
}

fn reattach(observations: &[(Vec<u8>, Vec<u8>, Vec<u8>)], store: &StoreIndex) -> Reattach {
    for (i, (_, _, hash)) in observations.iter().enumerate() {
        match store.get(hash) {
            Some(stored) if stored == &hash[..] => continue,
            Some(_) => return Reattach::Mismatch(i),
            None => {
                let name = match hash.iter().position(|&b| b == b':') {
                    Some(colon) => &hash[colon + 1..],
                    None => &hash[..],
                };
                let plain = !name.is_empty()
                    && name != b"."
                    && name != b".."
                    && !name.contains(&b'/')
                    && !name.contains(&0);
                return if plain {
                    Reattach::Missing(i)
                } else {
                    Reattach::Unresolved(i)
                };
            }
        }
    }
    Reattach::Ok
}

/// Everything one pass over a journal file yields.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JournalReport {
    /// `str(hash_profile)` of the first kept row, else `py-json-v1`.
    pub profile: Vec<u8>,
    pub chain_consistent: bool,
    /// bernstein's error line for a failed walk (`step i: event_hash mismatch`, …).
    pub error: Option<String>,
    /// Where bernstein's own code would raise instead of answering.
    pub crash: Option<String>,
    pub divergent_index: Option<u64>,
    pub divergent_line: Option<u64>,
    /// Which stored field the break shows: `prev_hash`, `event_hash` or `payload`.
    pub divergent_field: Option<&'static str>,
    pub expected_hash: Option<Vec<u8>>,
    pub actual_hash: Option<Vec<u8>>,
    pub head: Vec<u8>,
    pub count: u64,
    pub physical_lines: u64,
    /// `sha256:<hex>` of the whole file: what the ledger's own chain pins.
    pub file_sha256: String,
    pub discarded_lines: Vec<u64>,
    pub row_findings: Vec<RowFinding>,
    pub row_finding_count: u64,
    pub activities: Vec<ActivityRow>,
}

/// Python's `str.isspace()` for one character (what `str.strip()` removes).
fn is_py_space(c: char) -> bool {
    matches!(c,
        '\t'..='\r' | '\x1c'..='\x1f' | ' ' | '\u{85}' | '\u{a0}' | '\u{1680}'
        | '\u{2000}'..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}')
}

/// Physical lines as Python's universal newlines split them (`\n`, `\r\n`, lone `\r`).
pub fn physical_lines(data: &[u8]) -> Vec<&[u8]> {
    if memchr::memchr(b'\r', data).is_none() {
        // The common file: `\n` only.
        let mut lines: Vec<&[u8]> = Vec::with_capacity(data.len() / 256 + 1);
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', data) {
            lines.push(&data[start..end]);
            start = end + 1;
        }
        if start < data.len() {
            lines.push(&data[start..]);
        }
        return lines;
    }
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while let Some(offset) = memchr::memchr2(b'\n', b'\r', &data[i..]) {
        i += offset;
        lines.push(&data[start..i]);
        i += if data[i] == b'\r' && data.get(i + 1) == Some(&b'\n') {
            2
        } else {
            1
        };
        start = i;
    }
    if start < data.len() {
        lines.push(&data[start..]);
    }
    lines
}

/// A line the reader keeps: its physical number and parsed object members.
pub struct KeptRow<'a> {
    pub line: u64,
    pub value: PyValue<'a>,
    pub duplicate_keys: bool,
}

/// What `load_events` makes of one physical line.
enum Line<'a> {
    Blank,
    Discarded,
    Kept(KeptRow<'a>),
}

fn read_line(number: u64, raw: &[u8]) -> Line<'_> {
    let Ok(text) = std::str::from_utf8(raw) else {
        return Line::Discarded;
    };
    let text = text.trim_matches(is_py_space);
    if text.is_empty() {
        return Line::Blank;
    }
    match parse(text) {
        Ok(parsed) if matches!(parsed.value, PyValue::Object(_)) => Line::Kept(KeptRow {
            line: number,
            value: parsed.value,
            duplicate_keys: parsed.duplicate_keys,
        }),
        _ => Line::Discarded,
    }
}

/// `load_events`: kept rows, discarded physical line numbers, physical line count.
pub fn load_events(data: &[u8]) -> (Vec<KeptRow<'_>>, Vec<u64>, u64) {
    let lines = physical_lines(data);
    let mut kept = Vec::with_capacity(lines.len());
    let mut discarded = Vec::new();
    for (number, raw) in lines.iter().enumerate() {
        match read_line(number as u64, raw) {
            Line::Blank => {}
            Line::Discarded => discarded.push(number as u64),
            Line::Kept(row) => kept.push(row),
        }
    }
    (kept, discarded, lines.len() as u64)
}

/// Lowercase hex SHA-256, without an allocation.
fn hex_sha256(data: &[u8]) -> [u8; 64] {
    hex64(&sha256(data))
}

fn str_field(row: &PyValue<'_>, key: &str) -> Vec<u8> {
    crate::pyjson::field(row, key).into_owned()
}

/// `str(value)` of a member that may be absent (`""`), without copying a string.
fn str_of<'v>(value: Option<&'v PyValue<'_>>) -> std::borrow::Cow<'v, [u8]> {
    match value {
        Some(PyValue::Str(s)) => std::borrow::Cow::Borrowed(s.as_ref()),
        Some(other) => py_str(other),
        None => std::borrow::Cow::Borrowed(b""),
    }
}

/// The members the chain walk reads, found in one scan of a row.
#[derive(Default)]
struct Envelope<'v, 'a> {
    event: Option<&'v PyValue<'a>>,
    index: Option<&'v PyValue<'a>>,
    prev_hash: Option<&'v PyValue<'a>>,
    payload_hash: Option<&'v PyValue<'a>>,
    event_hash: Option<&'v PyValue<'a>>,
}

impl<'v, 'a> Envelope<'v, 'a> {
    fn of(members: &'v [(std::borrow::Cow<'a, [u8]>, PyValue<'a>)]) -> Self {
        let mut fields = Envelope::default();
        for (key, value) in members {
            let slot = match key.as_ref() {
                b"event" => &mut fields.event,
                b"index" => &mut fields.index,
                b"prev_hash" => &mut fields.prev_hash,
                b"payload_hash" => &mut fields.payload_hash,
                b"event_hash" => &mut fields.event_hash,
                _ => continue,
            };
            *slot = Some(value);
        }
        fields
    }
}

/// Whether a member is left out of the payload hash (`event` is put back as `event_type`).
fn outside_payload(key: &[u8]) -> bool {
    // By length first: each test is then one compare of a fixed-size array.
    fn is<const N: usize>(key: &[u8], name: &[u8; N]) -> bool {
        <&[u8; N]>::try_from(key).is_ok_and(|key| key == name)
    }
    match key.len() {
        2 => is(key, b"ts"),
        5 => is(key, b"event") || is(key, b"index"),
        9 => is(key, b"elapsed_s") || is(key, b"prev_hash"),
        10 => is(key, b"event_hash"),
        12 => is(key, b"payload_hash"),
        _ => false,
    }
}

/// `payload_hash` of a row: the row minus the envelope, with `event` = `event_type`.
#[cfg(test)]
fn payload_hash(row: &PyValue<'_>, event_type: &[u8], profile: Profile) -> crate::Result<String> {
    let PyValue::Object(members) = row else {
        return Ok(String::new());
    };
    let hash = payload_hash_in(
        members,
        event_type,
        profile,
        &mut Vec::new(),
        &mut Vec::new(),
    )?;
    Ok(String::from_utf8_lossy(&hash).into_owned())
}

/// [`payload_hash`], serializing into `out` and sorting in `order` (buffers reused from
/// row to row). `order` holds member positions; `members.len()` stands for `event`.
fn payload_hash_in(
    members: &[(std::borrow::Cow<'_, [u8]>, PyValue<'_>)],
    event_type: &[u8],
    profile: Profile,
    out: &mut Vec<u8>,
    order: &mut Vec<usize>,
) -> crate::Result<[u8; 64]> {
    let event = PyValue::Str(event_type.into());
    let synthetic = members.len();
    let key = |at: usize| -> &[u8] {
        if at == synthetic {
            b"event"
        } else {
            &members[at].0
        }
    };
    order.clear();
    order.extend((0..members.len()).filter(|&i| !outside_payload(&members[i].0)));
    order.push(synthetic);
    match profile {
        Profile::PyJsonV1 => order.sort_unstable_by(|&a, &b| key(a).cmp(key(b))),
        Profile::JcsV2 => {
            for &at in order.iter() {
                to_utf8(key(at))?;
            }
            order.sort_unstable_by(|&a, &b| {
                agentledger_core::canonical::compare_keys_utf16(
                    std::str::from_utf8(key(a)).unwrap_or(""),
                    std::str::from_utf8(key(b)).unwrap_or(""),
                )
            });
        }
    }
    out.clear();
    out.push(b'{');
    for (i, &at) in order.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        profile.key(key(at), out)?;
        out.push(b':');
        let value = if at == synthetic {
            &event
        } else {
            &members[at].1
        };
        profile.canon(value, out)?;
    }
    out.push(b'}');
    Ok(hex_sha256(out))
}

/// What `event_hash` is computed from.
struct EventInputs<'a> {
    event_type: &'a [u8],
    index: u64,
    payload_hash: &'a [u8],
    prev: &'a [u8],
}

impl EventInputs<'_> {
    /// `event_hash`, canonicalised in the journal's profile into `out`.
    fn hash(&self, profile: Profile, out: &mut Vec<u8>) -> crate::Result<[u8; 64]> {
        out.clear();
        self.preimage(profile, out)?;
        Ok(hex_sha256(out))
    }

    /// What `event_hash` hashes, appended to `out`.
    fn preimage(&self, profile: Profile, out: &mut Vec<u8>) -> crate::Result<()> {
        out.extend_from_slice(b"{\"event_type\":");
        profile.canon(&PyValue::Str(self.event_type.into()), out)?;
        out.extend_from_slice(b",\"index\":");
        let _ = write!(out, "{}", self.index);
        out.extend_from_slice(b",\"payload_hash\":\"");
        out.extend_from_slice(self.payload_hash);
        out.extend_from_slice(b"\",\"prev_hash\":");
        profile.canon(&PyValue::Str(self.prev.into()), out)?;
        out.push(b'}');
        Ok(())
    }
}

/// `"sha256:" + H(acanon(sorted(set(hashes))))`: bernstein's evidence set hash.
pub fn evidence_set_hash(hashes: &[&[u8]]) -> Result<String, String> {
    let mut unique: Vec<&[u8]> = hashes.to_vec();
    unique.sort_unstable();
    unique.dedup();
    // A JSON array of strings, as `dumps_sorted` writes it (no value tree needed).
    let mut out = Vec::with_capacity(2 + unique.iter().map(|h| h.len() + 3).sum::<usize>());
    out.push(b'[');
    for (i, hash) in unique.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_py_string(hash, false, &mut out).map_err(|e| e.to_string())?;
    }
    out.push(b']');
    let mut text = String::with_capacity(71);
    text.push_str("sha256:");
    text.push_str(std::str::from_utf8(&hex_sha256(&out)).unwrap_or_default());
    Ok(text)
}

/// An activity's observations `(kind, ref, content_hash)` and its recomputed evidence set
/// hash, from its `observations` member.
type Evidence = (Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>, Result<String, String>);

fn evidence(member: Option<&PyValue<'_>>) -> Evidence {
    let observations: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> = match member {
        Some(PyValue::Array(items)) => items
            .iter()
            .map(|o| {
                (
                    str_field(o, "kind"),
                    str_field(o, "ref"),
                    str_field(o, "content_hash"),
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    let non_object = matches!(member, Some(PyValue::Array(items))
        if items.iter().any(|o| !matches!(o, PyValue::Object(_))));
    let hashes: Vec<&[u8]> = observations.iter().map(|o| o.2.as_slice()).collect();
    let recomputed = if non_object {
        Err("AttributeError: observation is not an object".to_owned())
    } else {
        evidence_set_hash(&hashes)
    };
    (observations, recomputed)
}

/// The fields of an activity row that are `str()` of a member.
const ACTIVITY_FIELDS: [&str; 7] = [
    "event_hash",
    "stage_id",
    "kind",
    "artifact_hash",
    "evidence_set_hash",
    "terminal_state",
    "reason_code",
];

/// The members the walk reads from a lean row, in key order (see [`LeanReader::new`]).
const LEAN_READS: [&[u8]; 12] = [
    b"artifact_hash",
    b"event",
    b"event_hash",
    b"evidence_set_hash",
    b"index",
    b"kind",
    b"observations",
    b"payload_hash",
    b"prev_hash",
    b"reason_code",
    b"stage_id",
    b"terminal_state",
];

/// The place of `key` in [`LEAN_READS`] (at compile time).
const fn lean_read(key: &str) -> usize {
    let key = key.as_bytes();
    let mut at = 0;
    while at < LEAN_READS.len() {
        let read = LEAN_READS[at];
        let mut same = read.len() == key.len();
        let mut i = 0;
        while same && i < key.len() {
            same = read[i] == key[i];
            i += 1;
        }
        if same {
            return at;
        }
        at += 1;
    }
    panic!("not in LEAN_READS");
}

const ACTIVITY_READS: [usize; 7] = {
    let mut reads = [0; 7];
    let mut i = 0;
    while i < 7 {
        reads[i] = lean_read(ACTIVITY_FIELDS[i]);
        i += 1;
    }
    reads
};

fn activity(
    step: u64,
    line: u64,
    fields: [Vec<u8>; 7],
    (observations, recomputed): Evidence,
) -> ActivityRow {
    let [event_hash, stage_id, kind, artifact_hash, evidence_set_hash, terminal_state, reason_code] =
        fields;
    ActivityRow {
        step,
        line,
        event_hash,
        stage_id,
        kind,
        artifact_hash,
        evidence_set_hash,
        terminal_state,
        reason_code,
        reattach: Reattach::NotChecked,
        artifact_stored: None,
        observations,
        recomputed_evidence_set_hash: recomputed,
    }
}

fn activity_row(step: u64, line: u64, row: &PyValue<'_>) -> ActivityRow {
    let fields = ACTIVITY_FIELDS.map(|key| str_field(row, key));
    activity(step, line, fields, evidence(row.get("observations")))
}

/// [`activity_row`] of a row read by the lean path; `None` when a field is not a plain
/// string (its `str()` needs the value tree).
fn lean_activity_row(step: u64, line: u64, row: &LeanRow<'_, '_>) -> Option<ActivityRow> {
    let mut fields: [Vec<u8>; 7] = Default::default();
    for (field, read) in fields.iter_mut().zip(ACTIVITY_READS) {
        *field = row.plain_str(read)?.unwrap_or_default().to_vec();
    }
    let observations = match row.member(lean_read("observations")) {
        None => None,
        Some((_, raw, _)) => Some(parse(std::str::from_utf8(raw).ok()?).ok()?.value),
    };
    Some(activity(
        step,
        line,
        fields,
        evidence(observations.as_ref()),
    ))
}

fn repr_bytes(s: &[u8]) -> String {
    let mut out = Vec::new();
    py_repr(&PyValue::Str(s.into()), &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// [`verify_journal`], also reattaching observations against `store`.
pub fn verify_journal_with(data: &[u8], store: Option<&StoreIndex>) -> JournalReport {
    let mut report = verify_journal(data);
    if let Some(store) = store {
        attach_store(&mut report, store);
    }
    report
}

/// Reattach each activity's observations and look up its artifact in `store` (what
/// [`verify_journal`] leaves `NotChecked`: the store index may come later).
pub fn attach_store(report: &mut JournalReport, store: &StoreIndex) {
    for activity in &mut report.activities {
        activity.reattach = reattach(&activity.observations, store);
        activity.artifact_stored = Some(
            store
                .get(&activity.artifact_hash)
                .map(<[u8]>::to_vec)
                .unwrap_or_default(),
        );
    }
}

/// Strict-only findings of one kind, kept up to a cap and counted exactly.
#[derive(Default)]
struct Capped {
    kept: Vec<RowFinding>,
    count: u64,
}

impl Capped {
    const CAP: usize = MAX_STRICT_FINDINGS * 3;

    fn push(&mut self, finding: RowFinding) {
        self.count += 1;
        if self.kept.len() < Self::CAP {
            self.kept.push(finding);
        }
    }
}

/// The hash profile named by the first kept row (`str(hash_profile)`, else `py-json-v1`).
fn profile_of(first: &PyValue<'_>) -> (Vec<u8>, Option<Profile>) {
    let name = match first.get("hash_profile") {
        Some(value) => py_str(value).into_owned(),
        None => b"py-json-v1".to_vec(),
    };
    let profile = match name.as_slice() {
        b"py-json-v1" => Some(Profile::PyJsonV1),
        b"jcs-v2" => Some(Profile::JcsV2),
        _ => None,
    };
    (name, profile)
}

/// Read and verify one journal file's bytes. One pass: each line is parsed, hashed and
/// walked, then dropped (bernstein reads, then walks; the verdict is the same, as the walk
/// only ever looks back at the previous hash).
pub fn verify_journal(data: &[u8]) -> JournalReport {
    verify_journal_digested(data, &sha256(data))
}

/// [`verify_journal`] of a file whose SHA-256 is already known (`digest`): files hashed
/// side by side in [`sha256_many`]'s lanes.
pub fn verify_journal_digested(data: &[u8], digest: &[u8; 32]) -> JournalReport {
    verify_journal_reading(data, digest, !agentledger_core::portable::forced())
}

/// [`verify_journal`] in groups of sixteen, each group's files hashed side by side: the
/// `(index, bytes)` of each journal, and what to do with each report.
pub fn verify_journal_group<'d>(
    journals: impl IntoIterator<Item = (usize, &'d [u8])>,
    mut report: impl FnMut(usize, JournalReport),
) {
    let journals: Vec<(usize, &[u8])> = journals.into_iter().collect();
    let files: Vec<&[u8]> = journals.iter().map(|(_, data)| *data).collect();
    for ((at, data), digest) in journals.iter().zip(sha256_many(&files)) {
        report(*at, verify_journal_digested(data, &digest));
    }
}

/// [`verify_journal`], taking the lean path for the rows it can read or not (tests).
fn verify_journal_reading(data: &[u8], digest: &[u8; 32], lean_rows: bool) -> JournalReport {
    let lines = physical_lines(data);
    let mut report = JournalReport {
        physical_lines: lines.len() as u64,
        file_sha256: agentledger_core::hash::to_hex_prefixed(
            agentledger_core::hash::SHA256_PREFIX,
            digest,
        ),
        chain_consistent: true,
        profile: b"py-json-v1".to_vec(),
        ..Default::default()
    };
    // bernstein lists duplicate keys of every row before the walk's findings.
    let mut duplicates = Capped::default();
    let mut walk = ChainWalk::default();
    let mut profile = Some(Profile::PyJsonV1);
    let mut scratch: Vec<u8> = Vec::with_capacity(4096);
    let mut order: Vec<usize> = Vec::with_capacity(32);
    let mut step: u64 = 0;
    let mut lean = LeanReader::new(&LEAN_READS);
    let mut unhashed = Unhashed::default();
    for (number, raw) in lines.iter().enumerate() {
        // After the first row, a py-json-v1 row is read straight from its line when it
        // can be (see lean_row.rs); any other row takes the general path below.
        if lean_rows && step > 0 && profile == Some(Profile::PyJsonV1) {
            if let Some(row) = lean.read(raw, outside_payload) {
                if unhashed.push(&mut report, (step, number as u64, &row)) {
                    step += 1;
                    continue;
                }
            }
        }
        // The rows before this one are walked first.
        unhashed.walk(&mut report, &mut walk);
        let row = match read_line(number as u64, raw) {
            Line::Blank => continue,
            Line::Discarded => {
                report.discarded_lines.push(number as u64);
                continue;
            }
            Line::Kept(row) => row,
        };
        if step == 0 {
            let (name, known) = profile_of(&row.value);
            report.profile = name;
            profile = known;
            if profile.is_none() {
                report.chain_consistent = false;
                report.error = Some(format!(
                    "unknown hash_profile {}",
                    repr_bytes(&report.profile)
                ));
            }
        }
        if row.duplicate_keys {
            duplicates.push(RowFinding {
                step,
                line: row.line,
                field: "duplicate_key",
                expected: b"each key once".to_vec(),
                actual: b"a key repeated (the last value is the one hashed)".to_vec(),
            });
        }
        let PyValue::Object(members) = &row.value else {
            continue;
        };
        let fields = Envelope::of(members);
        if let Some(PyValue::Str(event)) = fields.event {
            if event.as_ref() == b"activity.result" {
                report
                    .activities
                    .push(activity_row(step, row.line, &row.value));
            }
        }
        if let Some(profile) = profile {
            let view = RowView::of(&fields);
            let payload =
                payload_hash_in(members, &view.event_type, profile, &mut scratch, &mut order);
            let hashes = payload.and_then(|payload| {
                let inputs = EventInputs {
                    event_type: &view.event_type,
                    index: step,
                    payload_hash: &payload,
                    prev: &walk.prev,
                };
                let event = inputs.hash(profile, &mut scratch)?;
                Ok((payload, event))
            });
            walk.row(
                &mut report,
                WalkedRow {
                    step,
                    line: row.line,
                    view,
                    hashes,
                },
            );
        }
        step += 1;
    }
    unhashed.walk(&mut report, &mut walk);
    report.count = step;
    if walk.walking && profile.is_some() {
        report.head = walk.prev;
    }
    report.row_finding_count = duplicates.count + walk.findings.count;
    report.row_findings = duplicates.kept;
    let room = Capped::CAP.saturating_sub(report.row_findings.len());
    report
        .row_findings
        .extend(walk.findings.kept.into_iter().take(room));
    report
}

/// What the chain walk reads of a row, whichever path read it.
struct RowView<'r> {
    event_type: Cow<'r, [u8]>,
    /// The stored `index`: whether it is an integer, and its `str()`; `None` when absent.
    index: Option<(bool, Cow<'r, [u8]>)>,
    payload_hash: Cow<'r, [u8]>,
    prev_hash: Cow<'r, [u8]>,
    event_hash: Cow<'r, [u8]>,
}

impl<'r> RowView<'r> {
    fn of(fields: &Envelope<'r, '_>) -> Self {
        RowView {
            event_type: str_of(fields.event),
            index: fields
                .index
                .map(|value| (matches!(value, PyValue::Int(_)), py_str(value))),
            payload_hash: str_of(fields.payload_hash),
            prev_hash: str_of(fields.prev_hash),
            event_hash: str_of(fields.event_hash),
        }
    }

    /// The view of a lean row, borrowed from its line; `None` when a field the walk reads
    /// needs the value tree.
    fn of_lean(row: &LeanRow<'_, 'r>) -> Option<Self> {
        let plain = |read: usize| -> Option<Cow<'r, [u8]>> {
            Some(Cow::Borrowed(row.plain_str(read)?.unwrap_or_default()))
        };
        let index = match row.member(lean_read("index")) {
            None => None,
            // An integer's `str()` is its text, but for `-0`.
            Some((Kind::Int, b"-0", _)) => Some((true, Cow::Borrowed(&b"0"[..]))),
            Some((Kind::Int, digits, _)) => Some((true, Cow::Borrowed(digits))),
            Some(_) => return None,
        };
        Some(RowView {
            event_type: plain(lean_read("event"))?,
            index,
            payload_hash: plain(lean_read("payload_hash"))?,
            prev_hash: plain(lean_read("prev_hash"))?,
            event_hash: plain(lean_read("event_hash"))?,
        })
    }
}

/// Lean rows read but not walked yet: their hashes are computed side by side in
/// [`sha256_many`]'s lanes, then they are walked in order ([`Unhashed::walk`]).
#[derive(Default)]
struct Unhashed<'d> {
    rows: Vec<(u64, u64, RowView<'d>)>,
    /// Their canonical payloads, one after the other (`ends`).
    payloads: Vec<u8>,
    ends: Vec<usize>,
    /// Their event hash preimages, the same way.
    preimages: Vec<u8>,
    preimage_ends: Vec<usize>,
}

impl<'d> Unhashed<'d> {
    /// Take a row read by the lean path (always `py-json-v1`, no repeated key); `false`,
    /// with nothing recorded, when it needs the general path after all.
    fn push(
        &mut self,
        report: &mut JournalReport,
        (step, line, row): (u64, u64, &LeanRow<'_, 'd>),
    ) -> bool {
        let Some(view) = RowView::of_lean(row) else {
            return false;
        };
        if view.event_type.as_ref() == b"activity.result" {
            match lean_activity_row(step, line, row) {
                Some(activity) => report.activities.push(activity),
                None => return false,
            }
        }
        row.payload(&view.event_type, &mut self.payloads);
        self.ends.push(self.payloads.len());
        self.rows.push((step, line, view));
        true
    }

    /// Hash the rows taken, then walk them in order. Each event hash is computed with the
    /// row's stored `prev_hash`, not the walk's: `walk_row` only compares it once they are
    /// equal (and a `py-json-v1` string always canonicalizes), so it is exact.
    fn walk(&mut self, report: &mut JournalReport, walk: &mut ChainWalk) {
        if self.rows.is_empty() {
            return;
        }
        let payload_hashes = sha256_many(&slices(&self.payloads, &self.ends));
        let payloads: Vec<[u8; 64]> = payload_hashes.iter().map(hex64).collect();
        let mut failed = Vec::new();
        for ((step, _, view), payload) in self.rows.iter().zip(&payloads) {
            let at = self.preimages.len();
            let inputs = EventInputs {
                event_type: &view.event_type,
                index: *step,
                payload_hash: payload,
                prev: &view.prev_hash,
            };
            let written = inputs.preimage(Profile::PyJsonV1, &mut self.preimages);
            if let Err(err) = written {
                self.preimages.truncate(at);
                failed.push((*step, err));
            }
            self.preimage_ends.push(self.preimages.len());
        }
        let expected = sha256_many(&slices(&self.preimages, &self.preimage_ends));
        let mut failed = failed.into_iter().peekable();
        for ((step, line, view), (payload, expected)) in
            self.rows.drain(..).zip(payloads.into_iter().zip(expected))
        {
            let hashes = match failed.next_if(|(at, _)| *at == step) {
                Some((_, err)) => Err(err),
                None => Ok((payload, hex64(&expected))),
            };
            walk.row(
                report,
                WalkedRow {
                    step,
                    line,
                    view,
                    hashes,
                },
            );
        }
        self.payloads.clear();
        self.ends.clear();
        self.preimages.clear();
        self.preimage_ends.clear();
    }
}

/// The pieces of `bytes` that end at `ends`, one after the other.
fn slices<'b>(bytes: &'b [u8], ends: &[usize]) -> Vec<&'b [u8]> {
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts
        .zip(ends)
        .map(|(start, &end)| &bytes[start..end])
        .collect()
}

/// A row's payload hash and event hash, in hex, or the error Python would raise.
type RowHashes = crate::Result<([u8; 64], [u8; 64])>;

/// The chain walk's state from row to row: the findings it keeps, the previous row's
/// event hash (hex), and whether it still walks (bernstein's verify stops at the first
/// break; the strict findings go on).
struct ChainWalk {
    findings: Capped,
    prev: Vec<u8>,
    walking: bool,
}

impl Default for ChainWalk {
    fn default() -> Self {
        ChainWalk {
            findings: Capped::default(),
            prev: Vec::new(),
            walking: true,
        }
    }
}

/// One kept row, as the walk takes it: its place, what it stores, and its payload hash
/// and event hash as computed (the event hash is only read when the stored `prev_hash` is
/// the walk's `prev`).
struct WalkedRow<'r> {
    step: u64,
    line: u64,
    view: RowView<'r>,
    hashes: RowHashes,
}

impl ChainWalk {
    /// One kept row: its strict findings, then (while the walk goes on) bernstein's link
    /// and hash comparison.
    fn row(&mut self, report: &mut JournalReport, row: WalkedRow<'_>) {
        let WalkedRow {
            step,
            line,
            view,
            hashes,
        } = row;
        let ChainWalk {
            findings,
            prev,
            walking,
        } = self;
        let (payload, expected) = match hashes {
            Ok(pair) => pair,
            Err(err) => {
                if *walking {
                    // bernstein's verify_journal raises here: no verdict at all.
                    report.crash = Some(format!("ValueError: {err} (step {step})"));
                    report.chain_consistent = false;
                    *walking = false;
                }
                return;
            }
        };
        let stored_payload = &view.payload_hash;
        if stored_payload.as_ref() != payload {
            findings.push(RowFinding {
                step,
                line,
                field: "payload_hash",
                expected: payload.to_vec(),
                actual: stored_payload.to_vec(),
            });
        }
        let index_ok = match &view.index {
            Some((true, digits)) => {
                std::str::from_utf8(digits)
                    .ok()
                    .and_then(|digits| digits.parse::<u64>().ok())
                    == Some(step)
            }
            _ => false,
        };
        if !index_ok {
            let stored_index = match &view.index {
                Some((_, text)) => text.to_vec(),
                None => b"None".to_vec(),
            };
            findings.push(RowFinding {
                step,
                line,
                field: "index",
                expected: step.to_string().into_bytes(),
                actual: stored_index,
            });
        }
        if !*walking {
            return;
        }
        let (stored_prev, stored_event) = (&view.prev_hash, &view.event_hash);
        let (field, error, want, got) = if stored_prev.as_ref() != prev.as_slice() {
            (
                "prev_hash",
                "prev_hash break",
                prev.clone(),
                stored_prev.to_vec(),
            )
        } else if stored_event.as_ref() != expected {
            let field = if stored_payload.as_ref() == payload {
                "event_hash"
            } else {
                "payload"
            };
            (
                field,
                "event_hash mismatch",
                expected.to_vec(),
                stored_event.to_vec(),
            )
        } else {
            prev.clear();
            prev.extend_from_slice(&expected);
            return;
        };
        report.chain_consistent = false;
        report.divergent_index = Some(step);
        report.divergent_line = Some(line);
        report.divergent_field = Some(field);
        report.expected_hash = Some(want);
        report.actual_hash = Some(got);
        report.error = Some(format!("step {step}: {error}"));
        report.head = prev.clone();
        *walking = false;
    }
}

/// [`verify_journal`] over many journals in parallel (on the caller's rayon pool).
pub fn verify_journals(journals: &[Vec<u8>], store: Option<&StoreIndex>) -> Vec<JournalReport> {
    journals
        .par_chunks(JOURNAL_GROUP)
        .flat_map_iter(|group| {
            let mut reports = Vec::with_capacity(group.len());
            let files = group.iter().map(Vec::as_slice).enumerate();
            verify_journal_group(files, |_, mut report| {
                if let Some(store) = store {
                    attach_store(&mut report, store);
                }
                reports.push(report);
            });
            reports
        })
        .collect()
}

#[cfg(test)]
mod lean_tests;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn row(index: u64, event: &str, prev: &str, payload: &str, extra: &str) -> String {
        format!(
            "{{\"ts\": 1.5, \"elapsed_s\": 0.001, \"index\": {index}, \"event\": \"{event}\", \"prev_hash\": \"{prev}\", \"payload_hash\": \"{payload}\", \"event_hash\": \"{{EH}}\"{extra}}}"
        )
    }

    /// Build a valid py-json-v1 journal by computing the hashes the way bernstein does.
    pub(crate) fn journal(events: &[(&str, &str)]) -> Vec<u8> {
        let mut prev = String::new();
        let mut out = String::new();
        for (i, (event, extra)) in events.iter().enumerate() {
            let text = format!("{{\"event\": \"{event}\"{extra}}}");
            let value = parse(&text).unwrap().value;
            let ph = payload_hash(&value, event.as_bytes(), Profile::PyJsonV1).unwrap();
            let inputs = EventInputs {
                event_type: event.as_bytes(),
                index: i as u64,
                payload_hash: ph.as_bytes(),
                prev: prev.as_bytes(),
            };
            let eh = inputs.hash(Profile::PyJsonV1, &mut Vec::new()).unwrap();
            let eh = String::from_utf8(eh.to_vec()).unwrap();
            out.push_str(&row(i as u64, event, &prev, &ph, extra).replace("{EH}", &eh));
            out.push('\n');
            prev = eh;
        }
        out.into_bytes()
    }

    #[test]
    fn a_well_formed_journal_verifies_with_its_head() {
        let data = journal(&[("run_started", ", \"goal\": \"x\""), ("run_finished", "")]);
        let report = verify_journal(&data);
        assert!(report.chain_consistent, "{report:?}");
        assert_eq!(report.count, 2);
        assert_eq!(report.head.len(), 64);
        assert!(report.row_findings.is_empty());
    }

    #[test]
    fn an_edited_payload_breaks_the_chain_at_its_step_naming_the_payload() {
        let data = journal(&[("a", ", \"goal\": \"x\""), ("b", ", \"goal\": \"y\"")]);
        let edited = String::from_utf8(data).unwrap().replace("\"y\"", "\"z\"");
        let report = verify_journal(edited.as_bytes());
        assert!(!report.chain_consistent);
        assert_eq!(report.divergent_index, Some(1));
        assert_eq!(report.divergent_field, Some("payload"));
        assert_eq!(report.error.as_deref(), Some("step 1: event_hash mismatch"));
    }

    #[test]
    fn a_deleted_row_breaks_the_link_of_the_next() {
        let data = journal(&[("a", ""), ("b", ""), ("c", "")]);
        let text = String::from_utf8(data).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let cut = format!("{}\n{}\n", lines[0], lines[2]);
        let report = verify_journal(cut.as_bytes());
        assert_eq!(report.divergent_index, Some(1));
        assert_eq!(report.divergent_field, Some("prev_hash"));
    }

    #[test]
    fn unparsable_lines_are_discarded_and_counted_by_physical_number() {
        let mut data = journal(&[("a", "")]);
        data.extend_from_slice(b"\n   \nnot json\n[1]\n");
        let report = verify_journal(&data);
        assert_eq!(report.discarded_lines, vec![3, 4]);
        assert!(report.chain_consistent);
    }

    #[test]
    fn universal_newlines_split_on_cr_and_crlf() {
        assert_eq!(physical_lines(b"a\rb\r\nc\nd").len(), 4);
        assert_eq!(physical_lines(b"a\n").len(), 1);
    }

    #[test]
    fn newline_only_files_split_as_split_does() {
        let text = b"0123456789abcdef\n\nx\n0123456\n01234567\n012345678\nlast".to_vec();
        for end in 0..=text.len() {
            let data = &text[..end];
            let mut expected: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
            if expected.last().is_some_and(|l| l.is_empty()) {
                expected.pop();
            }
            assert_eq!(physical_lines(data), expected, "{end}");
        }
    }

    #[test]
    fn stored_index_and_payload_hash_edits_are_strict_findings_only() {
        let data = journal(&[("a", ""), ("b", "")]);
        let edited = String::from_utf8(data)
            .unwrap()
            .replacen("\"index\": 1", "\"index\": 7", 1);
        let report = verify_journal(edited.as_bytes());
        assert!(report.chain_consistent);
        assert_eq!(report.row_findings.len(), 1);
        assert_eq!(report.row_findings[0].field, "index");
    }

    #[test]
    fn an_unknown_profile_fails_without_a_divergent_index() {
        let data = journal(&[("a", ", \"hash_profile\": \"v9\"")]);
        let report = verify_journal(&data);
        assert!(!report.chain_consistent);
        assert_eq!(report.divergent_index, None);
        assert_eq!(report.error.as_deref(), Some("unknown hash_profile 'v9'"));
    }

    #[test]
    fn jcs_nan_is_a_crash_not_a_verdict() {
        let line = b"{\"index\": 0, \"event\": \"a\", \"hash_profile\": \"jcs-v2\", \"x\": NaN}\n";
        let report = verify_journal(line);
        assert!(report.crash.is_some());
    }

    #[test]
    fn evidence_set_of_nothing_is_the_empty_array_hash() {
        assert_eq!(
            evidence_set_hash(&[]).unwrap(),
            "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
        );
    }
}

#[cfg(test)]
mod store_tests {
    use super::*;

    fn activity_line(observations: &[&str]) -> Vec<u8> {
        let obs: Vec<String> = observations
            .iter()
            .map(|h| format!("{{\"kind\": \"page\", \"ref\": \"r\", \"content_hash\": \"{h}\"}}"))
            .collect();
        format!(
            "{{\"index\": 0, \"event\": \"activity.result\", \"stage_id\": \"s\", \"observations\": [{}]}}\n",
            obs.join(", ")
        )
        .into_bytes()
    }

    fn reattach_of(observations: &[&str], store: &StoreIndex) -> Reattach {
        let report = verify_journal_with(&activity_line(observations), Some(store));
        report.activities[0].reattach.clone()
    }

    #[test]
    fn observations_reattach_against_the_store_index_in_row_order() {
        let a = "sha256:aa";
        let b = "sha256:bb";
        let mut store = StoreIndex::default();
        store.insert(a.as_bytes(), a.as_bytes());
        store.insert(b.as_bytes(), b"sha256:other");
        assert_eq!(reattach_of(&[a], &store), Reattach::Ok);
        assert_eq!(reattach_of(&[a, b], &store), Reattach::Mismatch(1));
        assert_eq!(
            reattach_of(&[a, "sha256:cc", b], &store),
            Reattach::Missing(1)
        );
        assert_eq!(
            reattach_of(&["sha256:../x"], &store),
            Reattach::Unresolved(0)
        );
    }

    #[test]
    fn without_a_store_index_nothing_is_reattached() {
        let report = verify_journal(&activity_line(&["sha256:aa"]));
        assert_eq!(report.activities[0].reattach, Reattach::NotChecked);
        assert_eq!(report.activities[0].artifact_stored, None);
    }
}
