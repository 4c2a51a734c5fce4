//! A key's verifications from precomputed multiples, once it has verified enough signatures
//! on a thread to pay for them.

use std::cell::RefCell;
use std::sync::LazyLock;

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::traits::Identity;

use super::{FixedBase, PublicKey, PUBLIC_KEY_LENGTH};

/// Verifications under one key on one thread before its table is built: building costs
/// about what 45 verifications save.
pub const TABLES_AFTER: u32 = 64;

/// Keys counted (and tabled) per thread; the oldest is forgotten first. At most this many
/// tables of about 650 KB each per thread.
const KEYS: usize = 8;

static BASEPOINT: LazyLock<FixedBase> = LazyLock::new(|| FixedBase::new(&ED25519_BASEPOINT_POINT));

/// A public key with the multiples of `-A` (and, shared, of `B`) that rule 6 sums.
pub struct TabledKey {
    key: PublicKey,
    minus_a: FixedBase,
}

impl TabledKey {
    pub fn new(key: PublicKey) -> Self {
        Self {
            minus_a: FixedBase::new(&key.minus_a),
            key,
        }
    }

    /// Exactly [`PublicKey::verifies_plain`]'s decision.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        self.key.decide(message, signature, |h, s| {
            let mut product = EdwardsPoint::identity();
            BASEPOINT.add_multiple(s, &mut product);
            self.minus_a.add_multiple(h, &mut product);
            product
        })
    }
}

struct Seen {
    encoding: [u8; PUBLIC_KEY_LENGTH],
    verified: u32,
    tabled: Option<TabledKey>,
}

/// [`PublicKey::verifies`]: counts the key's verifications on this thread, and takes them
/// from its tables past [`TABLES_AFTER`].
pub(super) fn verifies_remembered(key: &PublicKey, message: &[u8], signature: &[u8]) -> bool {
    thread_local! {
        static SEEN: RefCell<Vec<Seen>> = const { RefCell::new(Vec::new()) };
    }
    SEEN.with_borrow_mut(|seen| {
        let at = match seen.iter().position(|s| s.encoding == key.encoding) {
            Some(at) => at,
            None => {
                if seen.len() == KEYS {
                    seen.remove(0);
                }
                seen.push(Seen {
                    encoding: key.encoding,
                    verified: 0,
                    tabled: None,
                });
                seen.len() - 1
            }
        };
        let entry = &mut seen[at];
        if entry.tabled.is_none() {
            entry.verified += 1;
            if entry.verified > TABLES_AFTER {
                entry.tabled = Some(TabledKey::new(*key));
            }
        }
        match &entry.tabled {
            Some(tabled) => tabled.verifies(message, signature),
            None => key.verifies_plain(message, signature),
        }
    })
}
