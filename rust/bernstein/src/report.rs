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

#[cfg(test)]
mod tests;
