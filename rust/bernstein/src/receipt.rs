//! A DataOps receipt (BERNSTEIN-FORMAT.md §7) checked without Python.
//!
//! - [`verify_receipt`]: `reports.verify_receipt` for any parsed value, with its verdict,
//!   reason text, signer and references exactly as Python gives them (or the
//!   `UnicodeEncodeError` it dies with). Python's text and base64 behaviour it depends on
//!   is in the submodules: `pytext` (`str()`, `repr()`, `json` quoting, `.encode()`),
//!   `binascii` (`a2b_base64` in both modes, the PEM block) and `printable` (Python
//!   3.11's `str.isprintable()`).
//! - [`settle_receipt`]: a fast path for the shape bernstein's writer produces (every
//!   field a string, steps strings, the embedded key a one-line SPKI PEM, signatures
//!   unpadded base64url). For such a receipt the plan checks are made here and it returns
//!   what is left to decide (the signatures, and the reattachment of the hashes it pins).
//!   Any other shape, and any check that fails, is `None`, left to [`verify_receipt`].

mod binascii;
mod printable;
mod pytext;

use std::borrow::Cow;

use crate::pyjson::{dumps_sorted, parse, write_py_string, PyValue};
use agentledger_core::base64::{decode, STANDARD, URL_SAFE};
use agentledger_core::hash::sha256;
use agentledger_core::signature::PublicKey;
use binascii::{public_key_der, urlsafe_b64decode_padded};
use pytext::{encode, field, push_json_string, py_str, repr_str};

/// DER of an Ed25519 SubjectPublicKeyInfo, up to the 32 key bytes.
pub const SPKI_ED25519_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

const PEM_BEGIN: &[u8] = b"-----BEGIN PUBLIC KEY-----\n";
const PEM_END: &[u8] = b"\n-----END PUBLIC KEY-----\n";

/// A receipt whose plan recomputes; the rest of bernstein's checks, still to be made.
#[derive(Debug, Clone, PartialEq)]
pub struct SettledReceipt {
    /// The raw Ed25519 key the receipt embeds (and is signed with).
    pub signer: [u8; 32],
    /// `(payload, signature)` of each input, then each output: every one must verify.
    pub signatures: Vec<(Vec<u8>, [u8; 64])>,
    /// The content hash of each input, then each output: every one must reattach.
    pub references: Vec<Vec<u8>>,
}

/// The stored receipt `data` (the bytes `json.loads` is given), if it has the writer's
/// shape and its plan hash and input hashes recompute.
pub fn settle_receipt(data: &[u8]) -> Option<SettledReceipt> {
    // `json.loads(bytes)` detects UTF-16/32 from NUL bytes among the first four; text
    // that starts with `{` and has none there is decoded as UTF-8.
    if data.first() != Some(&b'{') || data.iter().take(4).any(|&b| b == 0) {
        return None;
    }
    let text = std::str::from_utf8(data).ok()?;
    let doc = parse(text).ok()?.value;
    let inputs = artifacts(doc.get("inputs")?)?;
    let outputs = artifacts(doc.get("outputs")?)?;
    let plan = doc.get("plan")?;
    if !matches!(plan, PyValue::Object(_)) {
        return None;
    }
    let steps = strings(plan.get("steps")?)?;
    let listed = strings(plan.get("input_hashes")?)?;
    let anchored = text_of(plan.get("plan_hash")?)?;
    let mut recomputed_inputs: Vec<&[u8]> = inputs.iter().map(|a| a.content_hash).collect();
    recomputed_inputs.sort_unstable();
    recomputed_inputs.dedup();
    let mut listed_inputs = listed;
    listed_inputs.sort_unstable();
    listed_inputs.dedup();
    if listed_inputs != recomputed_inputs
        || plan_hash(&recomputed_inputs, &steps)?.as_slice() != anchored
    {
        return None;
    }
    let signer = pem_key(text_of(doc.get("signer_public_key_pem")?)?)?;
    let mut signatures = Vec::with_capacity(inputs.len() + outputs.len());
    let mut references = Vec::with_capacity(inputs.len() + outputs.len());
    for artifact in inputs.iter().chain(&outputs) {
        let signature = decode(artifact.signature, URL_SAFE)?;
        signatures.push((artifact.payload()?, signature.try_into().ok()?));
        references.push(artifact.content_hash.to_vec());
    }
    Some(SettledReceipt {
        signer,
        signatures,
        references,
    })
}

/// One input or output, every field a UTF-8 string.
struct Artifact<'v> {
    role: &'v [u8],
    reference: &'v [u8],
    content_hash: &'v [u8],
    signature: &'v [u8],
}

impl Artifact<'_> {
    /// `acanon({"role", "ref", "content_hash"})`: what the receipt's key signed.
    fn payload(&self) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(48 + self.reference.len() + self.content_hash.len());
        out.extend_from_slice(b"{\"content_hash\":");
        write_py_string(self.content_hash, false, &mut out).ok()?;
        out.extend_from_slice(b",\"ref\":");
        write_py_string(self.reference, false, &mut out).ok()?;
        out.extend_from_slice(b",\"role\":");
        write_py_string(self.role, false, &mut out).ok()?;
        out.push(b'}');
        Some(out)
    }
}

fn artifacts<'v>(value: &'v PyValue<'_>) -> Option<Vec<Artifact<'v>>> {
    let PyValue::Array(items) = value else {
        return None;
    };
    items
        .iter()
        .map(|item| {
            Some(Artifact {
                role: text_of(item.get("role")?)?,
                reference: text_of(item.get("ref")?)?,
                content_hash: text_of(item.get("content_hash")?)?,
                signature: text_of(item.get("signature")?)?,
            })
        })
        .collect()
}

/// A string without lone surrogates (which `acanon` could not encode).
fn text_of<'v>(value: &'v PyValue<'_>) -> Option<&'v [u8]> {
    let PyValue::Str(s) = value else {
        return None;
    };
    std::str::from_utf8(s).ok().map(str::as_bytes)
}

fn strings<'v>(value: &'v PyValue<'_>) -> Option<Vec<&'v [u8]>> {
    let PyValue::Array(items) = value else {
        return None;
    };
    items.iter().map(text_of).collect()
}

/// `CH(acanon({"input_hashes": inputs, "steps": steps}))`.
fn plan_hash(inputs: &[&[u8]], steps: &[&[u8]]) -> Option<Vec<u8>> {
    fn list<'a>(items: &[&'a [u8]]) -> PyValue<'a> {
        PyValue::Array(items.iter().map(|s| PyValue::Str((*s).into())).collect())
    }
    let projection = PyValue::Object(vec![
        (b"input_hashes"[..].into(), list(inputs)),
        (b"steps"[..].into(), list(steps)),
    ]);
    let mut out = Vec::new();
    dumps_sorted(&projection, false, &mut out).ok()?;
    let mut hash = b"sha256:".to_vec();
    hash.extend_from_slice(hex::encode(sha256(&out)).as_bytes());
    Some(hash)
}

/// The key of a PEM that is exactly `BEGIN`, the base64 of the SPKI DER on one line,
/// `END` (what `reports._public_key_raw` reads the same key from).
fn pem_key(pem: &[u8]) -> Option<[u8; 32]> {
    let body = pem.strip_prefix(PEM_BEGIN)?.strip_suffix(PEM_END)?;
    let der = decode(body, STANDARD)?;
    let key = der.strip_prefix(&SPKI_ED25519_PREFIX[..])?;
    key.try_into().ok()
}

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
    let objects = |key: &str| -> Vec<&PyValue<'_>> {
        list(receipt.get(key))
            .iter()
            .filter(|a| matches!(a, PyValue::Object(_)))
            .collect()
    };
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
        push_json_string(hash, &mut projection);
    }
    projection.extend_from_slice(b"],\"steps\":[");
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            projection.push(b',');
        }
        push_json_string(&py_str(step), &mut projection);
    }
    projection.extend_from_slice(b"]}");
    let recomputed = content_hash(&encode(projection)?);
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
        push_json_string(&field(artifact, "content_hash"), &mut payload);
        payload.extend_from_slice(b",\"ref\":");
        push_json_string(&reference, &mut payload);
        payload.extend_from_slice(b",\"role\":");
        push_json_string(&role, &mut payload);
        payload.push(b'}');
        let payload = encode(payload)?;
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

/// `_list`: the items of a list, none for anything else.
fn list<'v, 'a>(value: Option<&'v PyValue<'a>>) -> &'v [PyValue<'a>] {
    match value {
        Some(PyValue::Array(items)) => items,
        _ => &[],
    }
}

/// `sorted(set(strings))`: WTF-8 byte order is Python's code point order.
fn sorted_set<'v>(strings: impl Iterator<Item = Cow<'v, [u8]>>) -> Vec<Cow<'v, [u8]>> {
    let mut strings: Vec<_> = strings.collect();
    strings.sort_unstable();
    strings.dedup();
    strings
}

/// `CH(data)`: `sha256:` and the hex digest.
fn content_hash(data: &[u8]) -> Vec<u8> {
    let mut hash = b"sha256:".to_vec();
    hash.extend_from_slice(hex::encode(sha256(data)).as_bytes());
    hash
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
