//! A research report's citations (§5): every cited page is in the store, hashes to the
//! pinned value and holds the quote.

use memchr::memmem;

use super::{ClaimVerdict, Research};
use crate::pyjson::{dicts, encode_utf8, field, repr_text as repr, PyValue};
use crate::store::content_hash;
use crate::store::{lookup_raises, Store};
use crate::Crash;

/// `verify_research_report(report, read)` for a report already parsed by `json.loads`.
/// `Err` is what bernstein's own check raises instead of giving a verdict: a page hash the
/// store cannot look up ([`lookup_raises`]), a quote with a lone surrogate checked against
/// a page that is there.
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
    let verdicts = claims
        .into_iter()
        .map(|claim| verify_claim(claim, store))
        .collect::<Result<Vec<ClaimVerdict>, Crash>>()?;
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

fn verify_claim(claim: &PyValue<'_>, store: &dyn Store) -> Result<ClaimVerdict, Crash> {
    let claim_id = field(claim, "claim_id");
    let mut citations = dicts(claim.get("citations")).peekable();
    let mut checked = 0;
    let mut reason = Vec::new();
    if citations.peek().is_none() {
        reason = [&b"claim "[..], &repr(&claim_id), b" has no citations"].concat();
    }
    for citation in citations {
        reason = check_citation(citation, store)?;
        if !reason.is_empty() {
            break;
        }
        checked += 1;
    }
    Ok(ClaimVerdict {
        claim_id: claim_id.into_owned(),
        ok: reason.is_empty(),
        citations_checked: checked,
        reason,
    })
}

/// The citation's failure, empty when it holds.
fn check_citation(citation: &PyValue<'_>, store: &dyn Store) -> Result<Vec<u8>, Crash> {
    let page_hash = field(citation, "page_content_hash");
    if let Some(crash) = lookup_raises(&page_hash) {
        return Err(crash);
    }
    let why: &[u8] = match store.get(&page_hash) {
        None => b"cited page bytes missing from store for ",
        Some(page) if content_hash(&page)[..] != page_hash[..] => {
            b"cited page content hash mismatch for "
        }
        Some(page) => {
            // `citation.quote.encode("utf-8")`: strict, a lone surrogate raises.
            let quote = encode_utf8(field(citation, "quote").into_owned())?;
            if memmem::find(&page, &quote).is_some() {
                return Ok(Vec::new());
            }
            b"quote not found in cited page "
        }
    };
    Ok([why, &repr(&page_hash)].concat())
}
