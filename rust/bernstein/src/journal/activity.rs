//! `activity.result` rows: their fields as Python `str()` gives them, their evidence sets
//! recomputed, and their observations reattached against the store index.

use super::lean_reads::lean_read;
use super::lean_row::LeanRow;
use super::row_hash::hex_sha256;
use super::{JournalReport, StoreIndex};
use crate::pyjson::{parse, write_py_string, PyValue};

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

pub(super) fn reattach(
    observations: &[(Vec<u8>, Vec<u8>, Vec<u8>)],
    store: &StoreIndex,
) -> Reattach {
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

pub(super) fn str_field(row: &PyValue<'_>, key: &str) -> Vec<u8> {
    crate::pyjson::field(row, key).into_owned()
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
pub(super) type Evidence = (Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>, Result<String, String>);

pub(super) fn evidence(member: Option<&PyValue<'_>>) -> Evidence {
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
pub(super) const ACTIVITY_FIELDS: [&str; 7] = [
    "event_hash",
    "stage_id",
    "kind",
    "artifact_hash",
    "evidence_set_hash",
    "terminal_state",
    "reason_code",
];

pub(super) const ACTIVITY_READS: [usize; 7] = {
    let mut reads = [0; 7];
    let mut i = 0;
    while i < 7 {
        reads[i] = lean_read(ACTIVITY_FIELDS[i]);
        i += 1;
    }
    reads
};

pub(super) fn activity(
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

pub(super) fn activity_row(step: u64, line: u64, row: &PyValue<'_>) -> ActivityRow {
    let fields = ACTIVITY_FIELDS.map(|key| str_field(row, key));
    activity(step, line, fields, evidence(row.get("observations")))
}

/// [`activity_row`] of a row read by the lean path; `None` when a field is not a plain
/// string (its `str()` needs the value tree).
pub(super) fn lean_activity_row(
    step: u64,
    line: u64,
    row: &LeanRow<'_, '_>,
) -> Option<ActivityRow> {
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
