//! A row as the verifier reads it ([`EntryRow`]) and what the check of one row says
//! ([`RowCheck`]), shared by the full checks (`verify.rs`) and the fast path
//! (`clean_row.rs`).

use std::borrow::Cow;

use crate::hash;

use super::encode::prefixed_hex;
use super::HEX_PREFIX;

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

/// An entry's `prev`: a `blake3:<64 lowercase hex>` string read as its 32 bytes (compared
/// without formatting hex per row), or any other string as it is.
pub(super) enum Prev<'a> {
    Digest([u8; 32]),
    Text(Cow<'a, str>),
}

impl<'a> Prev<'a> {
    pub(super) fn new(text: Cow<'a, str>) -> Self {
        match hash::decode_prefixed(HEX_PREFIX, text.as_bytes()) {
            Some(digest) => Prev::Digest(digest),
            None => Prev::Text(text),
        }
    }

    /// Whether this equals `"blake3:" + hex(expected)`, the string the format requires.
    pub(super) fn is(&self, expected: &[u8]) -> bool {
        match self {
            Prev::Digest(digest) => <&[u8; 32]>::try_from(expected).is_ok_and(|e| e == digest),
            Prev::Text(text) => **text == prefixed_hex(expected),
        }
    }

    pub(super) fn into_string(self) -> String {
        match self {
            Prev::Digest(digest) => prefixed_hex(&digest),
            Prev::Text(text) => text.into_owned(),
        }
    }
}

/// What one row says about itself, computed independently of its neighbours.
pub(super) struct RowCheck<'a> {
    pub(super) hash: [u8; 32],
    pub(super) prev: Option<Prev<'a>>,
    pub(super) is_activity: bool,
    pub(super) referenced: Vec<Cow<'a, str>>,
    pub(super) findings: Vec<(&'static str, String, String)>,
    /// On the fast path, an activity's evidence set still to hash (many at a time) and
    /// compare: if it differs, the row is checked again in full.
    pub(super) evidence: Option<PendingEvidence>,
}

/// An evidence set's canonical bytes, and the digest its entry anchors.
pub(super) struct PendingEvidence {
    pub(super) anchored: [u8; 32],
    pub(super) set: Vec<u8>,
}
