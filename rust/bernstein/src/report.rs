//! The stored reports bernstein re-checks (BERNSTEIN-FORMAT.md §5 and §6): a research
//! report's citations and a browser flow report's anchored steps and checks, with
//! bernstein's parsing quirks and reason strings (`reports.py` is the reference).
//!
//! Strings are WTF-8 (see [`crate::pyjson`]); reasons are the exact text bernstein gives.

use crate::pyjson::PyValue;
use crate::store::Store;
use crate::Crash;

/// One claim's verdict (`claim_verdicts` in bernstein's `--json`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimVerdict {
    pub claim_id: Vec<u8>,
    pub ok: bool,
    pub citations_checked: u64,
    pub reason: Vec<u8>,
}

/// A research report's verdict: `(ok, reason, claim_verdicts)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Research {
    pub ok: bool,
    pub reason: Vec<u8>,
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
    pub passed: bool,
    pub reason: Vec<u8>,
}

/// A browser flow report's verdict (`browser_verdict`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Browser {
    pub ok: bool,
    pub head_anchor_ok: bool,
    pub reason: Vec<u8>,
    pub steps: Vec<StepVerdict>,
    pub checks: Vec<CheckVerdict>,
}

/// `verify_research_report(report, read)` for a report already parsed by `json.loads`.
pub fn verify_research(report: &PyValue<'_>, store: &dyn Store) -> Result<Research, Crash> {
    let _ = (report, store);
    todo!("research report check")
}

/// `verify_browser_report(report, read)` for a report already parsed by `json.loads`.
pub fn verify_browser(report: &PyValue<'_>, store: &dyn Store) -> Result<Browser, Crash> {
    let _ = (report, store);
    todo!("browser flow report check")
}
