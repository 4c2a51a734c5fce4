//! An entry's canonical bytes and hash, the chain of a run's entries, its genesis link,
//! and the evidence set hash an activity entry anchors.

use crate::canonical::{self, Value};
use crate::hash;
use crate::Result;

use super::HEX_PREFIX;

/// `"blake3:" + hex` of a 32-byte digest.
pub fn prefixed_hex(digest: &[u8]) -> String {
    hash::to_hex_prefixed(HEX_PREFIX, digest)
}

/// The domain of an entry's hash.
pub(super) const ENTRY_DOMAIN: &str = "entry";

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
pub(super) fn evidence_set_digest_sorted(unique: &[&str]) -> [u8; 32] {
    hash::domain_hash(EVIDENCE_SET_DOMAIN, &evidence_set_bytes(unique))
}

/// The domain of an evidence set's hash.
pub(super) const EVIDENCE_SET_DOMAIN: &str = "evidence-set";

/// The canonical bytes of a sorted, deduplicated list of content hashes.
pub(super) fn evidence_set_bytes(unique: &[&str]) -> Vec<u8> {
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
