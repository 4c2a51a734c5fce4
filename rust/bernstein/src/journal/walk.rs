//! One pass over a journal file: each line read (the lean path when it can, the general
//! parse otherwise), hashed and walked as bernstein's `verify_journal` walks the chain,
//! with the strict findings bernstein never looks at gathered on the way.

use std::borrow::Cow;

use super::activity::{activity_row, lean_activity_row};
use super::lean_reads::{lean_read, LEAN_READS};
use super::lean_row::{Kind, LeanReader, LeanRow};
use super::lines::{physical_lines, read_line, Line};
use super::row_hash::{outside_payload, payload_hash_in, EventInputs, Profile};
use super::{JournalReport, RowFinding, ACTIVITY_EVENT, MAX_STRICT_FINDINGS};
use crate::pyjson::{py_repr, py_str, PyValue};
use agentledger_core::hash::{hex64, sha256_many};

/// `str(value)` of a member that may be absent (`""`), without copying a string.
pub(super) fn str_of<'v>(value: Option<&'v PyValue<'_>>) -> std::borrow::Cow<'v, [u8]> {
    match value {
        Some(PyValue::Str(s)) => std::borrow::Cow::Borrowed(s.as_ref()),
        Some(other) => py_str(other),
        None => std::borrow::Cow::Borrowed(b""),
    }
}

/// The members the chain walk reads, found in one scan of a row.
#[derive(Default)]
pub(super) struct Envelope<'v, 'a> {
    event: Option<&'v PyValue<'a>>,
    index: Option<&'v PyValue<'a>>,
    prev_hash: Option<&'v PyValue<'a>>,
    payload_hash: Option<&'v PyValue<'a>>,
    event_hash: Option<&'v PyValue<'a>>,
}

impl<'v, 'a> Envelope<'v, 'a> {
    pub(super) fn of(members: &'v [(std::borrow::Cow<'a, [u8]>, PyValue<'a>)]) -> Self {
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

pub(super) fn repr_bytes(s: &[u8]) -> String {
    let mut out = Vec::new();
    py_repr(&PyValue::Str(s.into()), &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Strict-only findings of one kind, kept up to a cap and counted exactly.
#[derive(Default)]
pub(super) struct Capped {
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
pub(super) fn profile_of(first: &PyValue<'_>) -> (Vec<u8>, Option<Profile>) {
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

/// [`verify_journal`], taking the lean path for the rows it can read or not (tests).
pub(super) fn verify_journal_reading(
    data: &[u8],
    digest: &[u8; 32],
    lean_rows: bool,
) -> JournalReport {
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
            Line::Crash(raised) => {
                // bernstein's reader raises before any row is walked: no verdict.
                report
                    .crash
                    .get_or_insert_with(|| format!("{raised} (line {number})"));
                report.chain_consistent = false;
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
            if event.as_ref() == ACTIVITY_EVENT.as_bytes() {
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
pub(super) struct RowView<'r> {
    pub(super) event_type: Cow<'r, [u8]>,
    /// The stored `index`: whether it is an integer, and its `str()`; `None` when absent.
    pub(super) index: Option<(bool, Cow<'r, [u8]>)>,
    pub(super) payload_hash: Cow<'r, [u8]>,
    pub(super) prev_hash: Cow<'r, [u8]>,
    pub(super) event_hash: Cow<'r, [u8]>,
}

impl<'r> RowView<'r> {
    pub(super) fn of(fields: &Envelope<'r, '_>) -> Self {
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
    pub(super) fn of_lean(row: &LeanRow<'_, 'r>) -> Option<Self> {
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
pub(super) struct Unhashed<'d> {
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
        if view.event_type.as_ref() == ACTIVITY_EVENT.as_bytes() {
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
pub(super) fn slices<'b>(bytes: &'b [u8], ends: &[usize]) -> Vec<&'b [u8]> {
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts
        .zip(ends)
        .map(|(start, &end)| &bytes[start..end])
        .collect()
}

/// A row's payload hash and event hash, in hex, or the error Python would raise.
pub(super) type RowHashes = crate::Result<([u8; 64], [u8; 64])>;

/// The chain walk's state from row to row: the findings it keeps, the previous row's
/// event hash (hex), and whether it still walks (bernstein's verify stops at the first
/// break; the strict findings go on).
pub(super) struct ChainWalk {
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
pub(super) struct WalkedRow<'r> {
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
                    report.crash = Some(match err {
                        crate::Error::Recursion => {
                            format!(
                                "RecursionError: maximum recursion depth exceeded (step {step})"
                            )
                        }
                        err => format!("ValueError: {err} (step {step})"),
                    });
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
