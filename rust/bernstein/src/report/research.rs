//! A research report's citations (§5): every cited page is in the store, hashes to the
//! pinned value and holds the quote.

use memchr::memmem;

use super::{ClaimVerdict, Research};
use crate::pyjson::{dicts, field, repr_text as repr, PyValue};
use crate::store::content_hash;
use crate::store::Store;
use crate::Crash;

/// `verify_research_report(report, read)` for a report already parsed by `json.loads`.
///
/// Nothing here raises in Python, so the result is always `Ok`; it is a `Result` like
/// [`super::verify_browser`]'s so that callers treat both reports alike.
pub fn verify_research(report: &PyValue<'_>, store: &dyn Store) -> Result<Research, Crash> {
    let claims: Vec<&PyValue<'_>> = dicts(report.get("claims")).collect();
    if claims.is_empty() {
        return Ok(Research {
            ok: false,
            reason: b"research report holds no claims".to_vec(),
            claims: vec![ClaimVerdict {
                claim_id: Vec::new(),
                ok: false,
                citations_checked: 0,
                reason: b"report holds no claims".to_vec(),
            }],
        });
    }
    let verdicts: Vec<ClaimVerdict> = claims
        .into_iter()
        .map(|claim| verify_claim(claim, store))
        .collect();
    let failing = verdicts
        .iter()
        .find(|verdict| !verdict.ok)
        .map(|verdict| verdict.reason.clone())
        .unwrap_or_default();
    Ok(Research {
        ok: failing.is_empty(),
        reason: failing,
        claims: verdicts,
    })
}

fn verify_claim(claim: &PyValue<'_>, store: &dyn Store) -> ClaimVerdict {
    let claim_id = field(claim, "claim_id");
    let mut citations = dicts(claim.get("citations")).peekable();
    let mut checked = 0;
    let mut reason = Vec::new();
    if citations.peek().is_none() {
        reason = [&b"claim "[..], &repr(&claim_id), b" has no citations"].concat();
    }
    for citation in citations {
        reason = check_citation(citation, store);
        if !reason.is_empty() {
            break;
        }
        checked += 1;
    }
    ClaimVerdict {
        claim_id: claim_id.into_owned(),
        ok: reason.is_empty(),
        citations_checked: checked,
        reason,
    }
}

/// The citation's failure, empty when it holds.
fn check_citation(citation: &PyValue<'_>, store: &dyn Store) -> Vec<u8> {
    let page_hash = field(citation, "page_content_hash");
    let why: &[u8] = match store.get(&page_hash) {
        None => b"cited page bytes missing from store for ",
        Some(page) if content_hash(&page)[..] != page_hash[..] => {
            b"cited page content hash mismatch for "
        }
        // `quote.encode("utf-8", "surrogatepass")` is the WTF-8 text as it is.
        Some(page) if memmem::find(&page, &field(citation, "quote")).is_none() => {
            b"quote not found in cited page "
        }
        Some(_) => return Vec::new(),
    };
    [why, &repr(&page_hash)].concat()
}
