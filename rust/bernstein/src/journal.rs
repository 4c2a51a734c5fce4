//! bernstein's journal: the tolerant reader (`load_events`) and the chain walk
//! (`verify_journal`), reproduced exactly, plus what a strict verifier also wants from
//! the same pass (stored `index`/`payload_hash` that do not match, duplicate keys, the
//! `activity.result` rows with their evidence sets recomputed).
//!
//! [`verify_journals`] runs many journals in parallel on the current rayon pool.

use rayon::prelude::*;

mod activity;
mod lean_reads;
mod lean_row;
mod lines;
mod row_hash;
mod summary;
mod walk;

use agentledger_core::hash::{sha256, sha256_many};

pub use activity::{attach_store, evidence_set_hash, ActivityRow, Reattach};
pub use lines::{load_events, physical_lines, reader_lines, KeptRow, ReadLine};
pub use row_hash::Profile;
pub use summary::{summarize, Summary};
#[cfg(test)]
use {
    crate::pyjson::{dumps_sorted, parse, PyValue},
    activity::*,
    lean_reads::*,
    lean_row::*,
    lines::*,
    row_hash::*,
    walk::*,
};

/// The `event` of a row that records an activity.
pub const ACTIVITY_EVENT: &str = "activity.result";

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

/// What the store holds, by content hash (only plain names are listed; anything else is
/// left to the caller: `Unresolved`).
pub use crate::store_index::StoreIndex;

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

/// [`verify_journal`], also reattaching observations against `store`.
pub fn verify_journal_with(data: &[u8], store: Option<&StoreIndex>) -> JournalReport {
    let mut report = verify_journal(data);
    if let Some(store) = store {
        attach_store(&mut report, store);
    }
    report
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
    walk::verify_journal_reading(data, digest, !agentledger_core::portable::forced())
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
pub(crate) mod tests;

#[cfg(test)]
mod store_tests;
