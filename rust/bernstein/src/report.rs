//! The stored reports bernstein re-checks (BERNSTEIN-FORMAT.md §5 and §6): a research
//! report's citations and a browser flow report's anchored steps and checks, with
//! bernstein's parsing quirks and reason strings (`reports.py` is the reference).
//!
//! Strings are WTF-8 (see [`crate::pyjson`]); reasons are the exact text bernstein gives.
//! Both checks take a report already parsed by `json.loads` and read the content store
//! through [`Store::get`], as `reports.store_reader` does.

mod browser;
mod research;

pub use browser::verify_browser;
pub use research::verify_research;

use agentledger_core::hash::{hex64, sha256};

#[cfg(doc)]
use crate::store::Store;

/// One claim's verdict (`claim_verdicts` in bernstein's `--json`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimVerdict {
    /// `str()` of the claim's `claim_id` (`""` when missing).
    pub claim_id: Vec<u8>,
    pub ok: bool,
    /// The citations that passed before the first failing one.
    pub citations_checked: u64,
    /// bernstein's reason (empty when ok).
    pub reason: Vec<u8>,
}

/// A research report's verdict: `(ok, reason, claim_verdicts)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Research {
    pub ok: bool,
    /// The first failing claim's reason, or `research report holds no claims`.
    pub reason: Vec<u8>,
    /// One verdict per claim, in order; one synthetic verdict when there are none.
    pub claims: Vec<ClaimVerdict>,
}

/// One replayed step (`{"index", "ok", "reason"}`); `index` is the text of Python's
/// `int()` of the recorded index (it may exceed 64 bits).
#[derive(Debug, Clone, PartialEq)]
pub struct StepVerdict {
    pub index: String,
    pub ok: bool,
    pub reason: Vec<u8>,
}

/// One recomputed check (`{"check_id", "ok", "passed", "reason"}`).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckVerdict {
    pub check_id: Vec<u8>,
    pub ok: bool,
    /// The recorded `passed`, by Python truthiness.
    pub passed: bool,
    pub reason: Vec<u8>,
}

/// A browser flow report's verdict (`browser_verdict`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Browser {
    pub ok: bool,
    pub head_anchor_ok: bool,
    pub reason: Vec<u8>,
    /// The steps replayed, up to and including the first failing one.
    pub steps: Vec<StepVerdict>,
    pub checks: Vec<CheckVerdict>,
}

/// `hashlib.sha256(data).hexdigest()`.
fn sha256_hex(data: &[u8]) -> [u8; 64] {
    hex64(&sha256(data))
}

/// Whether a research or browser stage's report must be in the store, its writer storing
/// it always, so that an absent one was removed (`tests/bernstein/reference.py` `_report_required` is
/// the reference; bernstein itself skips a missing report silently, BERNSTEIN-FORMAT.md §8).
///
/// - **browser**: the observations are exactly those `BrowserWorker`'s flow session
///   (`browser_worker._FlowSession.anchor`) captures: for each step `i` from 0, a
///   `snapshot` named `i:screenshot`, a `snapshot` named `i:dom` and an `action_receipt`
///   named `i:action`, in that order, at least one step. That worker stores the flow
///   report before it builds the result, on every path that yields one; a browser stage
///   written another way (`BrowserActivity` used directly, the legacy shape) names its
///   observations as its caller likes and may never have stored a report.
/// - **research**: never. `ResearchWorker` stores its report, but its stages (`page`
///   observations named by source, `completed`/`ok`) look like those of
///   `ResearchActivity` used directly, which stores none: nothing in the row, the audit
///   record or the store tells the two apart.
/// - Stages without observations (a refused flow) can come from either writer: never.
pub fn report_required(kind: &[u8], observations: &[(Vec<u8>, Vec<u8>, Vec<u8>)]) -> bool {
    kind == b"browser" && flow_session_observations(observations)
}

/// `BrowserWorker`'s observations: `(snapshot, i:screenshot)`, `(snapshot, i:dom)`,
/// `(action_receipt, i:action)` for `i` = 0, 1, … (see [`report_required`]).
fn flow_session_observations(observations: &[(Vec<u8>, Vec<u8>, Vec<u8>)]) -> bool {
    if observations.is_empty() || !observations.len().is_multiple_of(3) {
        return false;
    }
    observations.chunks(3).enumerate().all(|(step, captured)| {
        let expected: [(&[u8], String); 3] = [
            (b"snapshot", format!("{step}:screenshot")),
            (b"snapshot", format!("{step}:dom")),
            (b"action_receipt", format!("{step}:action")),
        ];
        captured
            .iter()
            .zip(&expected)
            .all(|((kind, name, _), (want_kind, want_name))| {
                kind == want_kind && name == want_name.as_bytes()
            })
    })
}

#[cfg(test)]
mod tests;
