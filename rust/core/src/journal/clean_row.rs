//! The verifier's fast path: the common row checked from its text where one pass over it
//! found its members, without building a value tree. It answers `None` for anything
//! unusual, and the full checks (`verify.rs`) then decide that row, so both paths agree on
//! every row (`tests.rs` compares them on mutated rows; `AGENTLEDGER_PORTABLE=1` turns
//! the fast path off).

use std::borrow::Cow;

use crate::canonical::{self, raw};

use super::encode::evidence_set_bytes;
use super::row::{EntryRow, PendingEvidence, Prev, RowCheck};
use super::{ACTIVITY_RESULT_KIND, HEX_PREFIX};
use crate::hash;

/// The common case, without building a `Value`: a row whose hash matches, whose bytes are
/// certainly canonical, and whose fields all check out, read where that same pass found
/// them (an activity's body is walked once more for its evidence). `None` as soon as anything differs or is unusual (an
/// escaped string, a large number, a malformed body...): [`check_row_fully`] then does
/// every check again and names what diverged, so both paths agree on every row.
pub(super) fn check_clean_row<R: EntryRow>(row: &R, hash: [u8; 32]) -> Option<RowCheck<'_>> {
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
