//! A DataOps receipt (BERNSTEIN-FORMAT.md §7) read without Python, for the shape
//! bernstein's writer produces: every field a string, steps strings, the embedded key a
//! one-line SPKI PEM, signatures unpadded base64url. For such a receipt the checks are
//! those of `reports.verify_receipt`, made exactly here; [`settle_receipt`] returns what is
//! left to decide (the signatures, and the reattachment of the hashes it pins). Any other
//! shape, and any check that fails, is `None`: the Python verifier then re-reads the
//! receipt and gives bernstein's reason.

use crate::pyjson::{dumps_sorted, parse, write_py_string, PyValue};
use agentledger_core::base64::{decode, STANDARD, URL_SAFE};
use agentledger_core::hash::sha256;

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
/// projection, then every signature, then (with a `store`) the reattachment of every
/// input and output.
pub fn verify_receipt(
    receipt: &PyValue<'_>,
    store: Option<&dyn crate::store::Store>,
) -> Result<ReceiptVerdict, crate::Crash> {
    let _ = (receipt, store);
    todo!("receipt verdict")
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentledger_core::base64::encode;

    const KEY: [u8; 32] = [7; 32];

    /// The PEM of `key`, as it stands inside a JSON string.
    fn pem_json(key: &[u8; 32]) -> String {
        let mut der = SPKI_ED25519_PREFIX.to_vec();
        der.extend_from_slice(key);
        let body = String::from_utf8(encode(&der, STANDARD)).unwrap();
        format!("-----BEGIN PUBLIC KEY-----\\n{body}\\n-----END PUBLIC KEY-----\\n")
    }

    fn receipt(plan_hash: &str, signature: &str) -> String {
        let sig = signature;
        format!(
            concat!(
                r#"{{"inputs":[{{"content_hash":"sha256:aa","ref":"in/1","role":"input","signature":"{sig}"}}],"#,
                r#""kind":"data","outputs":[{{"content_hash":"sha256:bb","ref":"out/1","role":"output","signature":"{sig}"}}],"#,
                r#""plan":{{"input_hashes":["sha256:aa"],"plan_hash":"{plan}","steps":["load"]}},"#,
                r#""signer_public_key_pem":"{pem}"}}"#
            ),
            sig = sig,
            plan = plan_hash,
            pem = pem_json(&KEY),
        )
    }

    fn good_plan() -> String {
        String::from_utf8(plan_hash(&[b"sha256:aa"], &[b"load"]).unwrap()).unwrap()
    }

    fn signature() -> String {
        String::from_utf8(encode(&[9; 64], URL_SAFE)).unwrap()
    }

    #[test]
    fn the_writers_shape_settles_with_its_payloads_and_references() {
        let settled = settle_receipt(receipt(&good_plan(), &signature()).as_bytes()).unwrap();
        assert_eq!(settled.signer, KEY);
        assert_eq!(
            settled.signatures[0].0,
            br#"{"content_hash":"sha256:aa","ref":"in/1","role":"input"}"#.to_vec()
        );
        assert_eq!(settled.signatures[1].1, [9; 64]);
        assert_eq!(
            settled.references,
            vec![b"sha256:aa".to_vec(), b"sha256:bb".to_vec()]
        );
    }

    #[test]
    fn a_plan_hash_that_does_not_recompute_is_left_to_python() {
        let plan = good_plan().replace("sha256:", "sha256:0");
        assert_eq!(
            settle_receipt(receipt(&plan, &signature()).as_bytes()),
            None
        );
    }

    #[test]
    fn other_shapes_are_left_to_python() {
        let good = receipt(&good_plan(), &signature());
        let padded = receipt(&good_plan(), &format!("{}==", signature()));
        let numeric_step = good.replace(r#"["load"]"#, "[1]");
        let bom = format!("\u{feff}{good}");
        for text in [
            padded,
            numeric_step,
            bom,
            good.replace("\"role\":\"input\",", ""),
        ] {
            assert_eq!(settle_receipt(text.as_bytes()), None, "{text}");
        }
    }
}
