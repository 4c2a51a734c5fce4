//! Ed25519 signature verification that decides exactly as libsodium's
//! `crypto_sign_verify_detached` (what PyNaCl's `VerifyKey.verify` calls).
//!
//! # The rule set
//!
//! A triple `(public_key, message, signature)` is accepted if and only if all of these hold,
//! where `A` is the public key encoding, `R` the first and `S` the second half of the
//! signature, and `B` the base point:
//!
//! 1. `public_key` is exactly 32 bytes and `signature` exactly 64 bytes (anything else is a
//!    rejection, never an error).
//! 2. `S`, read as a little-endian integer, is canonical: `S < L` (the group order).
//!    No high-bit shortcut: `S + L`, `S + 2L`, ... are all rejected.
//! 3. `A` is a canonical encoding: its low 255 bits, as an integer `y`, satisfy `y < p`
//!    (`p = 2^255 - 19`); the sign bit is not constrained. *This is the one check we add in
//!    front of ed25519-dalek's `verify_strict`, which reduces `y` mod `p` silently.*
//! 4. `A` decodes to a curve point and that point is not of small order (order 1, 2, 4 or
//!    8). Points with a small-order *component* (mixed order) are accepted.
//! 5. `R` decodes to a curve point and that point is not of small order. Every encoding of
//!    a small-order point is rejected: the 8 canonical ones, the sign-bit variants of
//!    `(0, 1)` and `(0, -1)`, and the non-canonical `y = p`, `y = p + 1` (either sign).
//! 6. The *cofactorless* equation holds byte for byte: with
//!    `h = SHA-512(R || A || message) mod L` over the bytes as given,
//!    `encode([S]B - [h]A) == R`. Since `encode` is canonical, a non-canonical `R` never
//!    matches, and a signature that only satisfies the cofactored equation
//!    `[8][S]B = [8]R + [8][h]A` (a torsion component in `R` or `A` that `h` does not
//!    cancel) is rejected.
//!
//! Rules 2, 4, 5 and 6 are ed25519-dalek's `verify_strict`; rule 3 is checked first here.
//! They are applied with curve25519-dalek directly, in an equivalent order that decodes
//! each key once ([`PublicKey`]) and never decodes `R`: when `R` is byte for byte the
//! canonical encoding of the computed `[S]B - [h]A`, it decodes to that very point, so
//! rule 5 is checked on the computed point; when it is not, rule 6 fails anyway.
//!
//! # How this was established
//!
//! Empirically, against PyNaCl 1.6.2 (its bundled libsodium), with a pure-Python Ed25519
//! oracle (kept in `tests/test_ed25519.py`) to build inputs that no honest signer makes:
//! all 14 encodings of the 8 small-order points as `A` and as `R` with various `S`;
//! `S + kL`; mixed-order keys `aB + T` for every torsion point `T`, with signatures valid
//! only under the cofactored equation and with signatures ground until they are valid under
//! the cofactorless one; mixed-order `R`; canonical and non-canonical encodings of the
//! large-order points with `y < 19`; off-curve points; random corruptions and random bytes;
//! the ed25519-dalek TESTVECTORS file. libsodium agreed with the rule set above on every
//! input (the differential test in `tests/test_ed25519.py` reruns this on every build),
//! and in particular it is *cofactorless*: it accepts a mixed-order key exactly when
//! `encode([S]B - [h]A) == R` and rejects the cofactored-only signatures.
//!
//! Rule 3 cannot be observed from outside without a discrete logarithm (the only
//! non-canonical encodings of large-order points have `y - p < 19`, and nobody can sign
//! for them); it is mirrored from libsodium's `ge25519_is_canonical(pk)` check so that the
//! decisions agree on every input, not only on the ones we can construct.
//!
//! # Two ways to the same point
//!
//! Rule 6's `[S]B - [h]A` is computed by a double-base multiplication
//! ([`PublicKey::verifies_plain`], the reference), or, once a key has verified enough
//! signatures on a thread, as sums of precomputed multiples of `B` and of `-A`
//! ([`TabledKey`], about 2.5 times faster). Both give the same group element and so the same
//! canonical encoding: the decisions are the same, and the tests take each of theirs both
//! ways.

mod fixed_base;
pub mod memo;
mod tabled;

use std::cell::RefCell;

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use rayon::prelude::*;
use sha2::{Digest, Sha512};

pub use fixed_base::FixedBase;
pub use tabled::{TabledKey, TABLES_AFTER};

pub const PUBLIC_KEY_LENGTH: usize = 32;
pub const SIGNATURE_LENGTH: usize = 64;

/// Whether the low 255 bits of `encoding` are below `p = 2^255 - 19`, i.e. whether it is
/// the canonical encoding of its `y` coordinate (libsodium's `ge25519_is_canonical`).
pub fn is_canonical_point_encoding(encoding: &[u8; 32]) -> bool {
    // y >= p exactly when the top byte (sign bit masked) is 0x7f, the 30 middle bytes are
    // 0xff and the lowest byte is at least 0xed.
    let top_is_max = encoding[31] & 0x7f == 0x7f;
    let middle_is_max = encoding[1..31].iter().all(|&b| b == 0xff);
    !(top_is_max && middle_is_max && encoding[0] >= 0xed)
}

/// A public key that passed rules 1, 3 and 4, decoded once for any number of signatures.
#[derive(Clone, Copy)]
pub struct PublicKey {
    /// The key as given: `h` hashes these bytes.
    encoding: [u8; PUBLIC_KEY_LENGTH],
    minus_a: EdwardsPoint,
}

impl PublicKey {
    /// `None` when no signature can verify under `public_key` (rules 1, 3 and 4).
    pub fn parse(public_key: &[u8]) -> Option<Self> {
        let encoding: [u8; PUBLIC_KEY_LENGTH] = public_key.try_into().ok()?;
        if !is_canonical_point_encoding(&encoding) {
            return None;
        }
        let a = CompressedEdwardsY(encoding).decompress()?;
        if a.is_small_order() {
            return None;
        }
        Some(Self {
            encoding,
            minus_a: -a,
        })
    }

    /// [`PublicKey::parse`], remembered on each thread for the last few keys it decoded:
    /// the receipts of a run set are mostly signed by one orchestrator's key, and decoding
    /// it costs about a tenth of a verification.
    pub fn parse_remembered(public_key: &[u8]) -> Option<Self> {
        const REMEMBERED: usize = 8;
        thread_local! {
            static DECODED: RefCell<Vec<([u8; PUBLIC_KEY_LENGTH], Option<PublicKey>)>> =
                const { RefCell::new(Vec::new()) };
        }
        let encoding: [u8; PUBLIC_KEY_LENGTH] = public_key.try_into().ok()?;
        DECODED.with_borrow_mut(|decoded| {
            if let Some((_, key)) = decoded.iter().find(|(known, _)| *known == encoding) {
                return *key;
            }
            let key = Self::parse(&encoding);
            if decoded.len() == REMEMBERED {
                decoded.remove(0);
            }
            decoded.push((encoding, key));
            key
        })
    }

    /// Rules 1, 2, 5 and 6 for one signature under this key: from this thread's tables for
    /// the key once it has verified [`TABLES_AFTER`] signatures here, else as
    /// [`PublicKey::verifies_plain`]; while a [`memo`] is active, a triple it holds is
    /// accepted without either.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        memo::verifies(self, message, signature, || {
            tabled::verifies_remembered(self, message, signature)
        })
    }

    /// Rules 1, 2, 5 and 6 with one double-base multiplication: the reference.
    pub fn verifies_plain(&self, message: &[u8], signature: &[u8]) -> bool {
        self.decide(message, signature, |h, s| {
            EdwardsPoint::vartime_double_scalar_mul_basepoint(h, &self.minus_a, s)
        })
    }

    /// Rules 1, 2, 5 and 6, with `product(h, S)` computing `[S]B - [h]A`.
    fn decide(
        &self,
        message: &[u8],
        signature: &[u8],
        product: impl FnOnce(&Scalar, &Scalar) -> EdwardsPoint,
    ) -> bool {
        let Ok(signature) = <&[u8; SIGNATURE_LENGTH]>::try_from(signature) else {
            return false;
        };
        let (r, s) = signature.split_at(32);
        let s: [u8; 32] = s.try_into().expect("32 bytes");
        let Some(s) = Option::<Scalar>::from(Scalar::from_canonical_bytes(s)) else {
            return false;
        };
        let mut hasher = Sha512::new();
        hasher.update(r);
        hasher.update(self.encoding);
        hasher.update(message);
        let h = Scalar::from_bytes_mod_order_wide(&hasher.finalize().into());
        let computed = product(&h, &s);
        computed.compress().as_bytes() == r && !computed.is_small_order()
    }
}

/// An Ed25519 signing key (RFC 8032), expanded once from its 32-byte seed: the hashed seed
/// and the public key, so each signature costs one fixed-base multiplication (signing from
/// the seed each time costs two). Signing is deterministic: these are the bytes libsodium's
/// `crypto_sign_detached` gives. The expanded key is zeroed when dropped.
pub struct Signer(ed25519_dalek::SigningKey);

impl Signer {
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Signer(ed25519_dalek::SigningKey::from_bytes(seed))
    }

    /// The signature of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer as _;
        self.0.sign(message).to_bytes()
    }

    /// The 32-byte public key.
    pub fn public_key(&self) -> [u8; 32] {
        self.0.verifying_key().to_bytes()
    }
}

/// Verify one Ed25519 signature with libsodium's decisions (see the module docs).
pub fn verify(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    PublicKey::parse(public_key).is_some_and(|key| key.verifies(message, signature))
}

/// Verify many `(public_key, message, signature)` triples in parallel on the rayon pool.
/// `result[i]` is exactly `verify(items[i])`.
pub fn verify_batch<K, M, S>(items: &[(K, M, S)]) -> Vec<bool>
where
    K: AsRef<[u8]> + Sync,
    M: AsRef<[u8]> + Sync,
    S: AsRef<[u8]> + Sync,
{
    items
        .par_iter()
        .with_min_len(64)
        .map(|(key, message, signature)| verify(key.as_ref(), message.as_ref(), signature.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::testutil::read_vector;

    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x10,
    ];

    /// Little-endian 256-bit addition; `None` on overflow.
    fn add_le(a: &[u8], b: &[u8; 32]) -> Option<[u8; 32]> {
        let mut out = [0u8; 32];
        let mut carry = 0u16;
        for i in 0..32 {
            let sum = a[i] as u16 + b[i] as u16 + carry;
            out[i] = sum as u8;
            carry = sum >> 8;
        }
        (carry == 0).then_some(out)
    }

    struct Vector {
        public_key: Vec<u8>,
        message: Vec<u8>,
        signature: Vec<u8>,
    }

    /// The SUPERCOP-format lines `sk||pk : pk : msg : sig||msg :`.
    fn testvectors() -> Vec<Vector> {
        read_vector("ed25519-dalek-testvectors/TESTVECTORS")
            .lines()
            .filter(|line| !line.is_empty())
            .map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                let public_key = hex::decode(fields[1]).unwrap();
                let message = hex::decode(fields[2]).unwrap();
                let signed = hex::decode(fields[3]).unwrap();
                assert_eq!(&signed[64..], &message[..]);
                Vector {
                    public_key,
                    message,
                    signature: signed[..64].to_vec(),
                }
            })
            .collect()
    }

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    /// [`super::verify`], with every decision taken three ways that must agree: the
    /// double-base reference, a key's tables, and the remembering path the product takes.
    fn verify(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
        let key = PublicKey::parse(public_key);
        let plain = key.is_some_and(|key| key.verifies_plain(message, signature));
        let tabled = key.is_some_and(|key| TabledKey::new(key).verifies(message, signature));
        assert_eq!(plain, tabled, "tables: {}", hex::encode(signature));
        assert_eq!(plain, super::verify(public_key, message, signature));
        plain
    }

    /// Every encoding of a small-order point (8 points, 14 encodings).
    const SMALL_ORDER_ENCODINGS: [&str; 14] = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000080",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000080",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    ];

    #[test]
    fn dalek_testvectors_verify_and_any_bit_flip_fails() {
        let vectors = testvectors();
        assert_eq!(vectors.len(), 128);
        for (i, v) in vectors.iter().enumerate() {
            assert!(
                verify(&v.public_key, &v.message, &v.signature),
                "vector {i}"
            );
            for (byte, bit) in [(0, 0), (31, 7), (33, 2), (63, 4)] {
                let mut sig = v.signature.clone();
                sig[byte] ^= 1 << bit;
                assert!(!verify(&v.public_key, &v.message, &sig), "vector {i} sig");
            }
            let mut key = v.public_key.clone();
            key[7] ^= 0x10;
            assert!(!verify(&key, &v.message, &v.signature), "vector {i} key");
            let mut message = v.message.clone();
            message.push(0);
            assert!(
                !verify(&v.public_key, &message, &v.signature),
                "vector {i} msg"
            );
        }
    }

    #[test]
    fn wrong_lengths_are_rejections() {
        let v = &testvectors()[1];
        assert!(!verify(&v.public_key[..31], &v.message, &v.signature));
        assert!(!verify(
            &[&v.public_key[..], &[0]].concat(),
            &v.message,
            &v.signature
        ));
        assert!(!verify(&v.public_key, &v.message, &v.signature[..63]));
        assert!(!verify(
            &v.public_key,
            &v.message,
            &[&v.signature[..], &[0]].concat()
        ));
        assert!(!verify(b"", b"", b""));
    }

    #[test]
    fn non_canonical_s_is_rejected() {
        for v in testvectors().iter().take(32) {
            let mut s_plus_l = v.signature.clone();
            let Some(s) = add_le(&v.signature[32..], &L) else {
                continue;
            };
            s_plus_l[32..].copy_from_slice(&s);
            assert!(!verify(&v.public_key, &v.message, &s_plus_l));
        }
        let v = &testvectors()[0];
        let mut max_s = v.signature.clone();
        max_s[32..].fill(0xff);
        assert!(!verify(&v.public_key, &v.message, &max_s));
    }

    #[test]
    fn small_order_public_keys_and_r_are_rejected() {
        // With a small-order A and R and S = 0, [S]B - [h]A is a small-order point, and
        // (0, 1) with S = 0 satisfies the equation for A = identity: the checks, not the
        // equation, must reject these.
        for a in SMALL_ORDER_ENCODINGS {
            for r in SMALL_ORDER_ENCODINGS {
                let sig = [h(r), vec![0; 32]].concat();
                assert!(!verify(&h(a), b"msg", &sig), "A {a} R {r}");
            }
        }
        // Small-order R against a real key, with S = h*a so that the cofactored equation
        // holds: libsodium rejects.
        let key = h("718b530c0e7259186d1fbf00cee154c2f46732b3cc61573bec6ba14a4fd86097");
        let sig = h(concat!(
            "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
            "67f563e1ee2b435d13be4edca7a61b78bc443685dd003b1d4af9c2a55323d90e"
        ));
        assert!(!verify(&key, b"agentledger", &sig));
    }

    #[test]
    fn identity_key_with_identity_r_and_zero_s_is_rejected() {
        // The one input that satisfies even the cofactorless equation for every message.
        let identity = h(SMALL_ORDER_ENCODINGS[2]);
        let sig = [identity.clone(), vec![0; 32]].concat();
        assert!(!verify(&identity, b"anything", &sig));
    }

    #[test]
    fn mixed_order_keys_follow_the_cofactorless_equation() {
        // A = aB + T (T a torsion point); libsodium (PyNaCl 1.6.2) accepts this one ...
        let key = h("df2a9143e920c971d735ad58fd3dc51a3541910eb69d8d979d55e70163e36260");
        let sig = h(concat!(
            "b48d022bd283c1793e4ff604bf570fc864df5f0bc832394c270e7b7614680e55",
            "13f0cb3e6a15a17eb89ecebb572e74b6f558f82860016a13e4e61d7983940308"
        ));
        assert!(verify(&key, b"agentledger", &sig));
        // ... and rejects this one, valid only under the cofactored equation.
        let key = h("ba7c258e8f29dc2147ff180b2e8e43bada265ae1ec81540db5ea542a58038101");
        let sig = h(concat!(
            "66d8d5aa64d6b04740407acc5c062df3f4e5b8f7f58a57e3a4cd416e9cf17517",
            "ff0358972cfb6569c49937f1576d294e20c825fcbf832f1d727e4366d0016909"
        ));
        assert!(!verify(&key, b"agentledger", &sig));
    }

    #[test]
    fn mixed_order_r_valid_only_cofactored_is_rejected() {
        let key = h("f64c55b6e2271ac5f91ef7154b496a82f1bff7909681201172f50f8f5e631fd9");
        let sig = h(concat!(
            "ce6a28d2c21b114c81f719ff763821f30071df18fc0108b8d6b78c9da99df1ca",
            "92ca727fab9b3abdd1813121d597aaf6b4837ba1d61f1ee1c29aec76511f1309"
        ));
        assert!(!verify(&key, b"agentledger", &sig));
    }

    #[test]
    fn canonical_point_encoding_predicate() {
        let mut p = [0xffu8; 32];
        p[31] = 0x7f;
        p[0] = 0xec; // p - 1: canonical
        assert!(is_canonical_point_encoding(&p));
        p[0] = 0xed; // p
        assert!(!is_canonical_point_encoding(&p));
        p[0] = 0xff; // 2^255 - 1
        assert!(!is_canonical_point_encoding(&p));
        p[31] = 0xff; // sign bit is ignored
        assert!(!is_canonical_point_encoding(&p));
        p[0] = 0xec;
        assert!(is_canonical_point_encoding(&p));
        p[5] = 0xfe;
        p[0] = 0xff;
        assert!(is_canonical_point_encoding(&p));
        assert!(is_canonical_point_encoding(&[0; 32]));
    }

    #[test]
    fn non_canonical_public_keys_are_rejected() {
        // y = p + 3 is the non-canonical encoding of the large-order point with y = 3:
        // ed25519-dalek alone would decode it, libsodium refuses it before decoding.
        let key = h("f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f");
        let encoding: [u8; 32] = key.clone().try_into().unwrap();
        assert!(CompressedEdwardsY(encoding).decompress().is_some());
        let v = &testvectors()[0];
        assert!(!verify(&key, &v.message, &v.signature));
    }

    /// ed25519-dalek's `verify_strict` behind the canonical-key check: the rule set as
    /// the module docs state it, decided by the library this module no longer calls.
    fn reference(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
        use ed25519_dalek::{Signature, VerifyingKey};
        let (Ok(key), Ok(signature)) = (
            <[u8; 32]>::try_from(public_key),
            <[u8; 64]>::try_from(signature),
        ) else {
            return false;
        };
        is_canonical_point_encoding(&key)
            && VerifyingKey::from_bytes(&key).is_ok_and(|key| {
                key.verify_strict(message, &Signature::from_bytes(&signature))
                    .is_ok()
            })
    }

    #[test]
    fn decisions_equal_verify_strict_on_valid_mutated_and_small_order_inputs() {
        let mut next = crate::hash::testutil::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let (mut accepted, mut checked) = (0, 0);
        for v in testvectors() {
            let mut cases = vec![(v.public_key.clone(), v.signature.clone())];
            for encoding in SMALL_ORDER_ENCODINGS {
                let r = [h(encoding), v.signature[32..].to_vec()].concat();
                cases.push((v.public_key.clone(), r));
                cases.push((h(encoding), v.signature.clone()));
            }
            for _ in 0..8 {
                let mut sig = v.signature.clone();
                let at = next() as usize % 64;
                sig[at] ^= 1 << (next() % 8);
                cases.push((v.public_key.clone(), sig));
            }
            for (key, sig) in cases {
                let decision = verify(&key, &v.message, &sig);
                assert_eq!(
                    decision,
                    reference(&key, &v.message, &sig),
                    "{}",
                    hex::encode(&sig)
                );
                accepted += usize::from(decision);
                checked += 1;
            }
        }
        assert_eq!(accepted, 128, "of {checked}");
    }

    #[test]
    fn an_identity_r_that_satisfies_the_equation_is_still_rejected() {
        // With the signer's scalar a, S = h*a makes [S]B - [h]A the identity, which R
        // encodes canonically: only the small-order rule rejects this signature.
        let line = read_vector("ed25519-dalek-testvectors/TESTVECTORS");
        let fields: Vec<&str> = line.lines().next().unwrap().split(':').collect();
        let (seed, public_key) = (h(&fields[0][..64]), h(fields[1]));
        let mut scalar: [u8; 32] = Sha512::digest(&seed)[..32].try_into().unwrap();
        scalar[0] &= 248;
        scalar[31] &= 63;
        scalar[31] |= 64;
        let a = Scalar::from_bytes_mod_order(scalar);
        let identity = h(SMALL_ORDER_ENCODINGS[2]);
        let message = b"agentledger";
        let digest = Sha512::new()
            .chain_update(&identity)
            .chain_update(&public_key)
            .chain_update(message)
            .finalize();
        let s = Scalar::from_bytes_mod_order_wide(&digest.into()) * a;
        let signature = [identity, s.as_bytes().to_vec()].concat();
        let key = PublicKey::parse(&public_key).unwrap();
        let computed = EdwardsPoint::vartime_double_scalar_mul_basepoint(
            &Scalar::from_bytes_mod_order_wide(&digest.into()),
            &key.minus_a,
            &s,
        );
        assert_eq!(computed.compress().as_bytes(), &signature[..32]);
        assert!(!verify(&public_key, message, &signature));
        assert!(!reference(&public_key, message, &signature));
    }

    #[test]
    fn a_remembered_key_decides_as_a_freshly_parsed_one() {
        // More keys than are remembered, each asked for again in reverse order: valid,
        // small-order, non-canonical and of the wrong length alike.
        let vectors = testvectors();
        let mut keys: Vec<Vec<u8>> = vectors
            .iter()
            .take(20)
            .map(|v| v.public_key.clone())
            .collect();
        keys.extend(SMALL_ORDER_ENCODINGS.iter().take(3).map(|e| h(e)));
        keys.push(vec![0xff; 32]);
        keys.push(vec![1; 31]);
        for key in keys.iter().chain(keys.iter().rev()) {
            assert_eq!(
                PublicKey::parse_remembered(key).is_some(),
                PublicKey::parse(key).is_some()
            );
            for v in vectors.iter().take(20) {
                assert_eq!(
                    PublicKey::parse_remembered(key)
                        .is_some_and(|k| k.verifies(&v.message, &v.signature)),
                    verify(key, &v.message, &v.signature),
                );
            }
        }
        let v = &vectors[5];
        assert!(PublicKey::parse_remembered(&v.public_key)
            .is_some_and(|k| k.verifies(&v.message, &v.signature)));
    }

    #[test]
    fn a_key_parsed_once_decides_as_verify_for_every_signature() {
        let vectors = testvectors();
        let key = PublicKey::parse(&vectors[3].public_key).unwrap();
        for v in &vectors {
            assert_eq!(
                key.verifies(&v.message, &v.signature),
                verify(&vectors[3].public_key, &v.message, &v.signature)
            );
        }
        assert!(key.verifies(&vectors[3].message, &vectors[3].signature));
        assert!(PublicKey::parse(&h(SMALL_ORDER_ENCODINGS[4])).is_none());
    }

    #[test]
    fn a_key_past_the_threshold_decides_from_its_tables_as_before() {
        // One key on one thread: its first TABLES_AFTER verifications are plain, the rest
        // come from its tables; valid and corrupted signatures on both sides of the switch.
        let vectors = testvectors();
        let v = &vectors[9];
        let key = PublicKey::parse(&v.public_key).unwrap();
        let mut accepted = 0;
        for i in 0..(3 * TABLES_AFTER as usize) {
            let mut sig = v.signature.clone();
            if i % 3 == 1 {
                sig[i % 64] ^= 1 << (i % 8);
            }
            let decision = key.verifies(&v.message, &sig);
            assert_eq!(decision, key.verifies_plain(&v.message, &sig), "at {i}");
            accepted += usize::from(decision);
        }
        assert_eq!(accepted, 2 * TABLES_AFTER as usize);
    }

    #[test]
    fn batch_decisions_equal_single_decisions() {
        let vectors = testvectors();
        let mut items: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> = Vec::new();
        for (i, v) in vectors.iter().enumerate() {
            let mut sig = v.signature.clone();
            if i % 3 == 0 {
                sig[i % 64] ^= 0x40;
            }
            items.push((v.public_key.clone(), v.message.clone(), sig));
        }
        items.push((vec![0; 31], vec![], vec![0; 64]));
        let batch = verify_batch(&items);
        let single: Vec<bool> = items.iter().map(|(k, m, s)| verify(k, m, s)).collect();
        assert_eq!(batch, single);
        assert!(batch.iter().any(|&ok| ok) && batch.iter().any(|&ok| !ok));
        assert!(verify_batch::<Vec<u8>, Vec<u8>, Vec<u8>>(&[]).is_empty());
    }
}
