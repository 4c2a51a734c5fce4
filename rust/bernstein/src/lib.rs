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
pub mod manifest;
pub mod mirror;
pub mod pipeline;
pub mod pyjson;
pub mod receipt;
pub mod report;
pub mod store;
pub mod store_index;
pub mod verify;

/// The one error type of this crate: a value or text with no canonical form, or an
/// argument that makes no sense (the core's errors, as the core gives them), or why
/// Python's `json.loads` raises on some bytes (the exception bernstein's code would see).
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The core's error (no canonical form, a bad argument).
    Core(agentledger_core::Error),
    /// `json.loads` raises `JSONDecodeError` (a `ValueError`), with this text.
    JsonDecode(String),
    /// `json.loads` raises `UnicodeDecodeError` (a `ValueError`): bytes that are not UTF-8.
    UnicodeDecode,
    /// `json.loads` raises `RecursionError`: nesting deeper than Python's recursion limit
    /// (not a `ValueError`, so bernstein's own code does not catch it).
    Recursion,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A value or text that has no canonical form.
    pub fn canonical(message: impl Into<String>) -> Self {
        Error::Core(agentledger_core::Error::canonical(message))
    }

    /// The same, at byte `position` of the text.
    pub fn canonical_at(message: impl Into<String>, position: usize) -> Self {
        Error::Core(agentledger_core::Error::canonical_at(message, position))
    }

    /// The class name of the exception `json.loads` raises (`type(exc).__name__`), for
    /// the errors that stand for one.
    pub fn python_name(&self) -> Option<&'static str> {
        match self {
            Error::Core(_) => None,
            Error::JsonDecode(_) => Some("JSONDecodeError"),
            Error::UnicodeDecode => Some("UnicodeDecodeError"),
            Error::Recursion => Some("RecursionError"),
        }
    }

    /// What bernstein's own code would raise instead of answering (it catches only
    /// `ValueError`).
    pub fn crash(&self) -> Option<Crash> {
        match self {
            Error::Recursion => Some(Crash(
                "RecursionError: maximum recursion depth exceeded while decoding a JSON document"
                    .into(),
            )),
            _ => None,
        }
    }
}

impl From<agentledger_core::Error> for Error {
    fn from(error: agentledger_core::Error) -> Self {
        Error::Core(error)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Core(error) => error.fmt(f),
            Error::JsonDecode(message) => write!(f, "JSONDecodeError: {message}"),
            Error::UnicodeDecode => f.write_str("UnicodeDecodeError: the bytes are not UTF-8"),
            Error::Recursion => f.write_str("RecursionError: nesting too deep"),
        }
    }
}

impl std::error::Error for Error {}

/// What bernstein's own code would raise while checking (it gives no verdict then): the
/// exception as Python prints it (`KeyError: 'x'`), for a `bernstein.crash` finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Crash(pub String);
