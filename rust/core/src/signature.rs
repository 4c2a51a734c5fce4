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

use ed25519_dalek::{Signature, VerifyingKey};
use rayon::prelude::*;

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

/// Verify one Ed25519 signature with libsodium's decisions (see the module docs).
pub fn verify(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    let Ok(public_key) = <&[u8; PUBLIC_KEY_LENGTH]>::try_from(public_key) else {
        return false;
    };
    let Ok(signature) = <&[u8; SIGNATURE_LENGTH]>::try_from(signature) else {
        return false;
    };
    if !is_canonical_point_encoding(public_key) {
        return false;
    }
    let Ok(key) = VerifyingKey::from_bytes(public_key) else {
        return false;
    };
    key.verify_strict(message, &Signature::from_bytes(signature))
        .is_ok()
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
        assert!(VerifyingKey::from_bytes(&key.clone().try_into().unwrap()).is_ok());
        let v = &testvectors()[0];
        assert!(!verify(&key, &v.message, &v.signature));
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
