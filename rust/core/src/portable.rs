//! The switch that forces the portable paths: `AGENTLEDGER_PORTABLE=1` in the environment
//! (read once, at the first use).
//!
//! Every fast path (SIMD lanes, SSE2 hex, the journal's clean-row reader) has a portable
//! reference it must agree with. The tests compare each pair directly; `make test` also
//! runs the Rust tests a second time with the switch on, so the portable paths are the
//! ones exercised end to end on every machine, not only where the CPU lacks the
//! instructions. Results are the same either way; only speed differs.

use std::sync::OnceLock;

/// The environment variable that forces the portable paths when set to anything but `0`
/// or the empty string.
pub const VARIABLE: &str = "AGENTLEDGER_PORTABLE";

/// Whether the portable paths are forced.
pub fn forced() -> bool {
    static FORCED: OnceLock<bool> = OnceLock::new();
    *FORCED.get_or_init(|| std::env::var_os(VARIABLE).is_some_and(|v| !v.is_empty() && v != "0"))
}
