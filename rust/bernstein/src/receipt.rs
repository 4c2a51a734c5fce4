//! A DataOps receipt (BERNSTEIN-FORMAT.md §7) checked without Python.
//!
//! - [`verify_receipt`]: `reports.verify_receipt` for any parsed value, with its verdict,
//!   reason text, signer and references exactly as Python gives them (or the
//!   `UnicodeEncodeError` it dies with). Python's text and base64 behaviour it depends on
//!   is in [`crate::pyjson`] (`str()`, `repr()`, `json` quoting, `.encode()`) and in
//!   `binascii` (`a2b_base64` in both modes, the PEM block).

mod binascii;

use std::borrow::Cow;

use crate::pyjson::{dicts, encode_utf8, field, list, py_str, repr_str, write_json_str, PyValue};
use crate::store::{content_hash, lookup_raises};
use agentledger_core::signature::PublicKey;
use binascii::{public_key_der, urlsafe_b64decode_padded};

/// DER of an Ed25519 SubjectPublicKeyInfo, up to the 32 key bytes.
pub const SPKI_ED25519_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// A receipt's verdict (`reports.ReceiptVerdict`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiptVerdict {
    pub ok: bool,
    /// bernstein's reason (empty when ok).
    pub reason: Vec<u8>,
    /// The raw Ed25519 key the receipt embeds, when its PEM parses.
    pub signer: Option<[u8; 32]>,
    /// Every content hash the receipt's inputs and outputs pin (`str()` of each).
    pub references: Vec<Vec<u8>>,
}

/// `reports.verify_receipt` for a receipt already parsed by `json.loads`: the plan
/// projection, then every signature, then (with a `store`, whether or not it
/// [exists](crate::store::Store::exists)) the reattachment of every input and output.
///
/// Any value is read as bernstein reads it: a receipt or plan that is not an object
/// counts as `{}`, lists that are not lists as empty, inputs and outputs that are not
/// objects are skipped, and every field goes through `str()`. A lone surrogate where
/// Python encodes the text (the plan projection, an artifact's signed payload) is the
/// `UnicodeEncodeError` it raises there.
pub fn verify_receipt(
    receipt: &PyValue<'_>,
    store: Option<&dyn crate::store::Store>,
) -> Result<ReceiptVerdict, crate::Crash> {
    let objects = |key: &str| -> Vec<&PyValue<'_>> { dicts(receipt.get(key)).collect() };
    let (inputs, outputs) = (objects("inputs"), objects("outputs"));
    let artifacts = || inputs.iter().chain(&outputs).copied();
    let plan = receipt.get("plan");
    let pem = field(receipt, "signer_public_key_pem");
    let references: Vec<Vec<u8>> = artifacts()
        .map(|a| field(a, "content_hash").into_owned())
        .collect();
    let der = public_key_der(&pem);
    let signer = der.as_deref().and_then(ed25519_key);
    let verdict = |reason: Vec<u8>| ReceiptVerdict {
        ok: reason.is_empty(),
        reason,
        signer,
        references: references.clone(),
    };

    let recomputed_inputs = sorted_set(inputs.iter().map(|a| field(a, "content_hash")));
    let steps = list(plan.and_then(|plan| plan.get("steps")));
    let mut projection = b"{\"input_hashes\":[".to_vec();
    for (i, hash) in recomputed_inputs.iter().enumerate() {
        if i > 0 {
            projection.push(b',');
        }
        write_json_str(hash, &mut projection);
    }
    projection.extend_from_slice(b"],\"steps\":[");
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            projection.push(b',');
        }
        write_json_str(&py_str(step), &mut projection);
    }
    projection.extend_from_slice(b"]}");
    let recomputed = content_hash(&encode_utf8(projection)?);
    let anchored = plan.map_or(Cow::Borrowed(&b""[..]), |plan| field(plan, "plan_hash"));
    let listed = sorted_set(
        list(plan.and_then(|plan| plan.get("input_hashes")))
            .iter()
            .map(py_str),
    );
    if recomputed[..] != anchored[..] || listed != recomputed_inputs {
        let mut reason = b"plan_hash mismatch: anchored ".to_vec();
        repr_str(&anchored, &mut reason);
        reason.extend_from_slice(b", recomputed ");
        repr_str(&recomputed, &mut reason);
        return Ok(verdict(reason));
    }

    // `_core.ed25519_verify(key, payload, signature)` for each artifact: the key is
    // decoded once (a key no signature can verify under is `None`).
    let public_key = signer.and_then(|key| PublicKey::parse_remembered(&key));
    for artifact in artifacts() {
        let role = field(artifact, "role");
        let reference = field(artifact, "ref");
        let mut payload = b"{\"content_hash\":".to_vec();
        write_json_str(&field(artifact, "content_hash"), &mut payload);
        payload.extend_from_slice(b",\"ref\":");
        write_json_str(&reference, &mut payload);
        payload.extend_from_slice(b",\"role\":");
        write_json_str(&role, &mut payload);
        payload.push(b'}');
        let payload = encode_utf8(payload)?;
        let signature = field(artifact, "signature");
        let key = signer.map(|_| public_key);
        let why = check_signature(&pem, der.as_deref(), key, &payload, &signature);
        if let Some(why) = why {
            let mut reason = b"signature does not verify for ".to_vec();
            reason.extend_from_slice(&role);
            reason.push(b' ');
            repr_str(&reference, &mut reason);
            reason.extend_from_slice(b": ");
            reason.extend_from_slice(why.as_bytes());
            return Ok(verdict(reason));
        }
    }

    if let Some(store) = store {
        for artifact in artifacts() {
            let digest = field(artifact, "content_hash");
            if let Some(crash) = lookup_raises(&digest) {
                return Err(crash);
            }
            let why: &[u8] = match store.stored_digest(&digest) {
                None => b"artifact bytes missing from store for ",
                Some(stored) if stored[..] != digest[..] => b"content hash mismatch reattaching ",
                Some(_) => continue,
            };
            let mut reason = why.to_vec();
            repr_str(&field(artifact, "ref"), &mut reason);
            return Ok(verdict(reason));
        }
    }
    Ok(verdict(Vec::new()))
}

/// `sorted(set(strings))`: WTF-8 byte order is Python's code point order.
fn sorted_set<'v>(strings: impl Iterator<Item = Cow<'v, [u8]>>) -> Vec<Cow<'v, [u8]>> {
    let mut strings: Vec<_> = strings.collect();
    strings.sort_unstable();
    strings.dedup();
    strings
}

/// `_public_key_raw` given the DER: the key of an Ed25519 SubjectPublicKeyInfo.
fn ed25519_key(der: &[u8]) -> Option<[u8; 32]> {
    der.strip_prefix(&SPKI_ED25519_PREFIX[..])?.try_into().ok()
}

/// `_check_signature`: why the artifact's signature is refused (`None`: it verifies).
/// `der` is what the PEM gives (`_public_key_der`), `key` the Ed25519 key in it
/// (`_public_key_raw`), decoded (`Some(None)`: no signature verifies under it).
fn check_signature(
    pem: &[u8],
    der: Option<&[u8]>,
    key: Option<Option<PublicKey>>,
    payload: &[u8],
    signature: &[u8],
) -> Option<String> {
    if pem.is_empty() {
        return Some("catalog has no signer_pubkey".into());
    }
    if der.and_then(<[u8]>::first) != Some(&0x30) {
        return Some("cannot load public key: unable to load PEM".into());
    }
    let Some(key) = key else {
        return Some("public key must be Ed25519".into());
    };
    match urlsafe_b64decode_padded(signature) {
        Err(error) => Some(format!("signature is not valid base64url: {error}")),
        Ok(raw) if !key.is_some_and(|key| key.verifies(payload, &raw)) => {
            Some("signature does not verify".into())
        }
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests;
