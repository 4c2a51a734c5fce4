//! Property tests: every fast hashing path against its reference, on inputs proptest
//! draws (a few hundred cases each: `make test` runs them twice).

use proptest::collection::vec;
use proptest::prelude::*;

use super::hex::{decode64_portable, write_hex_portable};
use super::many::{hash_many, Mode};
use super::{decode64, hex64, sha256, sha256_many, write_hex};

/// A few hundred cases, and no regression files written into the source tree.
fn cases() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(256)
    }
}

/// 64 bytes, mostly hex digits (upper case and neighbours of the ranges among them), so
/// that valid and invalid texts are both common.
fn hex_like() -> impl Strategy<Value = [u8; 64]> {
    let digit = prop_oneof![
        8 => proptest::sample::select(b"0123456789abcdef".to_vec()),
        1 => proptest::sample::select(b"/:@AFG`g\x00\x80\xff".to_vec()),
        1 => any::<u8>(),
    ];
    proptest::array::uniform32((digit.clone(), digit)).prop_map(|pairs| {
        std::array::from_fn(|i| {
            if i % 2 == 0 {
                pairs[i / 2].0
            } else {
                pairs[i / 2].1
            }
        })
    })
}

/// The BLAKE3 digest of each input alone: one input never takes the lanes.
fn one_by_one(mode: &Mode, inputs: &[Vec<u8>]) -> Vec<[u8; 32]> {
    inputs
        .iter()
        .map(|input| {
            let mut out = [[0u8; 32]];
            hash_many(mode, &[input.as_slice()], &mut out);
            out[0]
        })
        .collect()
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn sse2_hex_writes_what_the_table_writes(bytes in vec(any::<u8>(), 0..100)) {
        let mut fast = vec![0u8; 2 * bytes.len()];
        let mut reference = vec![0u8; 2 * bytes.len()];
        write_hex(&bytes, &mut fast);
        write_hex_portable(&bytes, &mut reference);
        prop_assert_eq!(fast, reference);
    }

    #[test]
    fn sse2_hex_reads_what_the_table_reads(text in hex_like()) {
        prop_assert_eq!(decode64(&text), decode64_portable(&text));
    }

    #[test]
    fn hex_read_back_is_the_digest(digest in any::<[u8; 32]>()) {
        prop_assert_eq!(decode64(&hex64(&digest)), Some(digest));
    }

    #[test]
    fn blake3_lanes_hash_what_one_at_a_time_hashes(
        inputs in vec(vec(any::<u8>(), 0..2500), 0..20),
        domain in proptest::option::of("[a-z.]{1,12}"),
    ) {
        let mode = domain.as_deref().map_or_else(Mode::plain, Mode::domain);
        let slices: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let mut lanes = vec![[0u8; 32]; inputs.len()];
        hash_many(&mode, &slices, &mut lanes);
        prop_assert_eq!(lanes, one_by_one(&mode, &inputs));
    }

    #[test]
    fn sha256_lanes_hash_what_one_at_a_time_hashes(messages in vec(vec(any::<u8>(), 0..300), 0..40)) {
        let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
        let reference: Vec<[u8; 32]> = messages.iter().map(|m| sha256(m)).collect();
        prop_assert_eq!(sha256_many(&slices), reference);
    }
}
