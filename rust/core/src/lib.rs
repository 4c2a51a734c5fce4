//! agentledger-core: everything that must be exact and fast, with no Python in sight.
//!
//! - [`canonical`]: RFC 8785 (JCS) canonical JSON, from a parsed text or a built [`canonical::Value`].
//! - [`hash`]: BLAKE3 / SHA-256 / HMAC / HKDF and the ledger's domain-separated hash scheme.
//! - [`merkle`]: RFC 9162-shaped Merkle trees, proofs, and an incremental append-only tree.
//! - [`tiles`]: the same roots and proofs over a tree stored as C2SP tlog-tiles.
//! - [`signature`]: Ed25519 verification with libsodium-compatible strictness, single and batch.
//!
//! Every fallible function returns [`Error`]; the binding crate maps it to Python exceptions in one place.

pub mod base64;
pub mod blob_check;
pub mod canonical;
pub mod error;
pub mod hash;
pub mod index_agreement;
pub mod journal;
pub mod log;
pub mod merkle;
pub mod portable;
pub mod signature;
pub mod tiles;

pub use error::{Error, Result};
