//! The native run journal: how an entry is encoded, hashed and chained, and the batch
//! verifier that re-checks stored entries.
//!
//! An entry is the RFC 8785 canonical JSON of
//! `{"body": …, "kind": …, "prev": …, "run": …, "seq": …, "ts": …, "v": 1}`.
//! Its hash is `domain_hash("entry", bytes)`; `prev` is the previous entry's hash as
//! `"blake3:<hex>"`, and for `seq == 0` the run's genesis value, which binds the run to its
//! ledger (`domain_hash("run-genesis", canonical({"ledger": id, "run": run}))`).
//! See docs/FORMAT.md for the byte-level description and vectors.
//!
//! - `encode`: an entry's bytes, its hash, the chain and the genesis link;
//! - `row`: a row as the verifier reads it, and what the check of one row says;
//! - `verify`: the batch verifier and its reference checks of each row;
//! - `clean_row`: the verifier's fast path for the common row (same results, less work);
//! - `scan`: what a whole pass gathers for the checks after it (marked rows, digests).
//!
//! The workspace log the entries are leaves of is in [`crate::log`].

mod clean_row;
mod encode;
mod row;
mod scan;
mod verify;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

pub use encode::{
    encode_chain, encode_entry, encode_entry_around, entry_hash, evidence_set_hash, genesis_digest,
    genesis_prev, prefixed_hex, EntryHeader,
};
pub use scan::{verify_and_scan, JournalScan, MarkedRows};
pub use verify::{
    verify_batch, verify_batch_into, BatchReport, Carry, DigestSet, EntryRow, Finding, RunSummary,
    StoredEntry,
};

/// The journal format version carried in every entry as `"v"`.
pub const ENTRY_VERSION: f64 = 1.0;
/// Entries of this kind pin an evidence set: verify recomputes its hash.
pub const ACTIVITY_RESULT_KIND: &str = "activity.result";
/// The most canonical bytes an entry may have (a proof carries the entry whole). A longer
/// row is reported (`entry.size`) and never parsed: its parsed form could take tens of
/// times its size in memory.
pub const MAX_ENTRY_BYTES: usize = 16 << 20;
/// Verification keeps at most this many findings per run (it always counts them all).
pub const MAX_FINDINGS_PER_RUN: usize = 32;

pub(crate) const HEX_PREFIX: &str = "blake3:";

/// Rows per parallel task where their hashes are computed many at a time
/// ([`hash::many`]): enough to keep every lane busy, few enough to spread a batch over
/// the pool.
pub(crate) const HASH_MANY_ROWS: usize = 256;
