//! agentledger-bernstein: bernstein's on-disk format and its verification rules, with no
//! Python in sight (the binding crate only converts). See docs/BERNSTEIN.md.
//!
//! - [`pyjson`]: Python `json`'s data model, parser and serializer (bernstein hashes
//!   values re-serialized by Python, so its hashes need Python's model, not JSON's).
//! - [`journal`]: the tolerant journal reader and the chain walk, batch and parallel.
//! - [`audit`] and [`mirror`]: the HMAC audit chain and its cross-check with the journals.
//! - [`receipt`]: signed DataOps receipts; [`report`]: stored research and browser reports.
//! - [`directory`]: a workdir on disk, verified in place.
//! - [`store`]: the content store as the verifiers read it (on disk or in a ledger).
//! - [`pipeline`]: the one pipeline (a reader thread and the pool) over a [`pipeline::Source`].
//! - [`verify`]: one run's verdicts, bernstein's and the strict one, every stage decided.
//! - [`store_index`]: the content store's index (content hash → digest of the bytes held).

pub mod audit;
pub mod directory;
pub mod journal;
pub mod mirror;
pub mod pipeline;
pub mod pyjson;
pub mod receipt;
pub mod report;
pub mod store;
pub mod store_index;
pub mod verify;

pub use agentledger_core::{Error, Result};

/// What bernstein's own code would raise while checking (it gives no verdict then): the
/// exception as Python prints it (`KeyError: 'x'`), for a `bernstein.crash` finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Crash(pub String);
