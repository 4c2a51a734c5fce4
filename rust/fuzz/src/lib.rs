//! The properties each fuzz target checks, shared so a plain test can replay a corpus.

use agentledger_core::canonical::{canonicalize_json, is_canonical};
use agentledger_bernstein::pyjson;

/// RFC 8785: whatever the input, no panic; an accepted text canonicalizes to bytes that
/// are themselves canonical and canonicalize to themselves (idempotence).
pub fn check_canonical_json(data: &[u8]) {
    let _ = is_canonical(data);
    if let Ok(canonical) = canonicalize_json(data) {
        assert_eq!(
            is_canonical(&canonical).ok(),
            Some(true),
            "output not canonical"
        );
        let again = canonicalize_json(&canonical).expect("canonical output must re-parse");
        assert_eq!(again, canonical, "canonicalization is not idempotent");
    }
}

/// Python `json` compatibility: no panic; an accepted text re-serialized with
/// `sort_keys=True` parses again to the same serialization.
pub fn check_pyjson(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = pyjson::parse(text) else {
        return;
    };
    for ensure_ascii in [true, false] {
        let mut out = Vec::new();
        if pyjson::dumps_sorted(&parsed.value, ensure_ascii, &mut out).is_err() {
            continue;
        }
        let again_text = String::from_utf8(out.clone()).expect("dumps produced UTF-8");
        let again = pyjson::parse(&again_text).expect("dumps output must re-parse");
        let mut twice = Vec::new();
        pyjson::dumps_sorted(&again.value, ensure_ascii, &mut twice).expect("re-dump");
        assert_eq!(twice, out, "py-json serialization is not idempotent");
    }
    let mut jcs = Vec::new();
    let _ = pyjson::dumps_jcs(&parsed.value, &mut jcs);
}
