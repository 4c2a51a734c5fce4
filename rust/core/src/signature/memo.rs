//! The signatures this install verified before: a verification it need not redo.
//!
//! Rules 1-6 are a pure function of `(public_key, message, signature)`, so a triple that
//! was accepted once is accepted again. While a [`Memo`] is active (one at a time in a
//! process: [`begin`], [`end`]), every [`PublicKey::verifies`] first looks its triple up
//! among the digests the memo was given, which the caller read from storage it trusts
//! (the install's key folder, never a ledger); a triple not among them is verified in
//! full, and its digest kept when it is accepted. Rejections are never remembered: each
//! is decided again, and reported again.
//!
//! A digest is BLAKE3 in key-derivation mode over the key, the signature and the message,
//! each with its length, under a context string that names these rules: no two triples
//! share a digest unless BLAKE3 collides, and digests made for another purpose (or
//! another rule set) are never taken for these.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use super::{PublicKey, PUBLIC_KEY_LENGTH};

/// The length of one remembered digest.
pub const DIGEST_LENGTH: usize = 32;

const CONTEXT: &str = "agentledger 2026-12 ed25519 libsodium-exact accepted triple";

pub type Digest = [u8; DIGEST_LENGTH];

/// The digest of a triple (see the module's comment).
pub fn digest(public_key: &[u8; PUBLIC_KEY_LENGTH], message: &[u8], signature: &[u8]) -> Digest {
    let mut hasher = blake3::Hasher::new_derive_key(CONTEXT);
    hasher.update(public_key);
    hasher.update(&(signature.len() as u64).to_le_bytes());
    hasher.update(signature);
    hasher.update(&(message.len() as u64).to_le_bytes());
    hasher.update(message);
    *hasher.finalize().as_bytes()
}

struct Memo {
    known: HashSet<Digest, foldhash::fast::RandomState>,
    /// Triples accepted from `known`, without the curve arithmetic.
    reused: AtomicU64,
    accepted: Mutex<Vec<Digest>>,
}

/// What an active memo did, given back by [`end`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ended {
    /// The digests of the triples it accepted that it was not given, each once, in byte
    /// order.
    pub accepted: Vec<Digest>,
    /// How many verifications it answered from the digests it was given.
    pub reused: u64,
}

static ACTIVE: RwLock<Option<Memo>> = RwLock::new(None);

/// Activates a memo of `known` digests (any bytes past the last whole digest are
/// ignored). `false`, and nothing changed, when one is active already.
pub fn begin(known: &[u8]) -> bool {
    let mut active = ACTIVE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if active.is_some() {
        return false;
    }
    let known = known
        .chunks_exact(DIGEST_LENGTH)
        .map(|chunk| Digest::try_from(chunk).expect("chunks of the digest length"))
        .collect();
    *active = Some(Memo {
        known,
        reused: AtomicU64::new(0),
        accepted: Mutex::new(Vec::new()),
    });
    true
}

/// Deactivates the memo and says what it did (nothing when none was active).
pub fn end() -> Ended {
    let mut active = ACTIVE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let Some(memo) = active.take() else {
        return Ended::default();
    };
    let mut accepted = memo
        .accepted
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    accepted.sort_unstable();
    accepted.dedup();
    Ended {
        accepted,
        reused: memo.reused.into_inner(),
    }
}

/// `verify(key, message, signature)`'s decision, from the active memo when it holds the
/// triple; a triple `verify` accepts is remembered.
pub(super) fn verifies(
    key: &PublicKey,
    message: &[u8],
    signature: &[u8],
    verify: impl FnOnce() -> bool,
) -> bool {
    let active = ACTIVE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let Some(memo) = active.as_ref() else {
        drop(active);
        return verify();
    };
    let triple = digest(&key.encoding, message, signature);
    if memo.known.contains(&triple) {
        memo.reused.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    let accepted = verify();
    if accepted {
        memo.accepted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(triple);
    }
    accepted
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::super::Signer;
    use super::*;

    /// The one test that activates a memo (the memo is the process's: tests that each
    /// activated one would race for it).
    #[test]
    fn a_memo_accepts_exactly_the_triples_it_was_given_or_accepted() {
        let signer = Signer::from_seed(&[7; 32]);
        let key = PublicKey::parse(&signer.public_key()).unwrap();
        let signed = signer.sign(b"receipt one");
        let mut forged = signed;
        forged[0] ^= 1;
        let calls = Cell::new(0);
        let exact = |message: &[u8], signature: &[u8]| {
            calls.set(calls.get() + 1);
            key.verifies_plain(message, signature)
        };
        // Through the memo, falling back to the exact check (counted).
        let check = |message: &[u8], signature: &[u8]| {
            verifies(&key, message, signature, || exact(message, signature))
        };

        assert!(begin(&[]));
        assert!(!begin(&[]), "a second memo while one is active");
        assert!(check(b"receipt one", &signed));
        assert!(!check(b"receipt one", &forged));
        assert_eq!(calls.get(), 2);
        let ended = end();
        assert_eq!(ended.reused, 0);
        let accepted = ended.accepted;
        assert_eq!(
            accepted,
            vec![digest(&key.encoding, b"receipt one", &signed)]
        );
        assert_eq!(end(), Ended::default(), "nothing is active any more");

        // Given back, the accepted triple is not verified again; the rejected one is, each
        // time, and so is the same signature over another message.
        let mut known = accepted.concat();
        known.extend_from_slice(&[0xaa; 5]); // a torn tail is ignored
        assert!(begin(&known));
        calls.set(0);
        assert!(check(b"receipt one", &signed));
        assert_eq!(calls.get(), 0);
        assert!(!check(b"receipt one", &forged));
        assert!(!check(b"receipt two", &signed));
        assert_eq!(calls.get(), 2);
        let ended = end();
        assert!(ended.accepted.is_empty(), "nothing new was accepted");
        assert_eq!(ended.reused, 1);

        // A digest of a rejected triple, had storage been forged to hold it, is the one way
        // to have it accepted: the digests must come from storage the install trusts.
        assert!(begin(&digest(&key.encoding, b"receipt one", &forged)));
        assert!(verifies(&key, b"receipt one", &forged, || unreachable!()));
        end();
    }

    #[test]
    fn the_digest_binds_each_part_and_where_it_ends() {
        let key = [1u8; 32];
        let base = digest(&key, b"ab", b"cd");
        assert_ne!(base, digest(&key, b"abc", b"d"));
        assert_ne!(base, digest(&key, b"a", b"bcd"));
        assert_ne!(base, digest(&[2u8; 32], b"ab", b"cd"));
        assert_ne!(base, digest(&key, b"ab", b"ce"));
        assert_eq!(base, digest(&key, b"ab", b"cd"));
    }
}
