//! Property tests: the clean-row fast path against the full checks, and `entry.seq`, on
//! entries proptest draws (a few hundred cases each: `make test` runs them twice).

use std::borrow::Cow;

use proptest::collection::vec;
use proptest::prelude::*;

use super::clean_row::check_clean_row;
use super::encode::EVIDENCE_SET_DOMAIN;
use super::row::Prev;
use super::verify::{check_row_fully, check_rows};
use super::*;
use crate::canonical::{self, Value};
use crate::hash;

const LEDGER: &str = "00112233445566778899aabbccddeeff";

/// A few hundred cases, and no regression files written into the source tree.
fn cases() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(256)
    }
}

/// A JSON value of a few levels: the bodies entries carry, escapes and non-ASCII included.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1e6f64..1e6).prop_map(|n| Value::Number(n.trunc())),
        any::<f64>()
            .prop_filter("finite", |n| n.is_finite())
            .prop_map(Value::Number),
        "[a-z\"\\\\\u{1}é€😀 ]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec(("[a-z_\"é]{1,6}", inner), 0..4).prop_map(|members| {
                let mut members = members;
                members.sort_by(|a, b| a.0.cmp(&b.0));
                members.dedup_by(|a, b| a.0 == b.0);
                Value::Object(members)
            }),
        ]
    })
}

/// An entry's canonical bytes with these members, `seq` any JSON value.
fn entry_bytes(kind: &str, seq: Value, body: Value) -> Vec<u8> {
    let whole = Value::Object(vec![
        ("body".to_owned(), body),
        ("kind".to_owned(), Value::String(kind.to_owned())),
        ("prev".to_owned(), Value::String(genesis_prev(LEDGER, "r"))),
        ("run".to_owned(), Value::String("r".to_owned())),
        ("seq".to_owned(), seq),
        (
            "ts".to_owned(),
            Value::String("2026-11-30T00:00:00Z".to_owned()),
        ),
        ("v".to_owned(), Value::Number(ENTRY_VERSION)),
    ]);
    canonical::to_canonical(&whole).unwrap()
}

fn row(column_seq: i64, kind: &str, bytes: Vec<u8>) -> StoredEntry {
    StoredEntry {
        run_id: "r".to_owned(),
        seq: column_seq,
        kind: kind.to_owned(),
        hash: entry_hash(&bytes).to_vec(),
        bytes,
    }
}

/// A seq as an entry may say it: a small integer, a negative one, a fraction, a huge
/// number or not a number at all.
fn seq_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0i64..40).prop_map(|n| Value::Number(n as f64)),
        1 => (-40i64..0).prop_map(|n| Value::Number(n as f64)),
        1 => (0i64..40).prop_map(|n| Value::Number(n as f64 + 0.5)),
        1 => Just(Value::Number(9_007_199_254_740_993.0)),
        1 => "[0-9]{1,3}".prop_map(Value::String),
        1 => Just(Value::Null),
    ]
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn the_clean_row_path_agrees_with_the_full_checks(
        kind in prop_oneof![Just("step".to_owned()), Just(ACTIVITY_RESULT_KIND.to_owned()), "[a-z.]{1,8}"],
        body in json_value(),
        column_seq in -2i64..4,
        said_seq in 0i64..4,
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..2),
    ) {
        let mut bytes = entry_bytes(&kind, Value::Number(said_seq as f64), body);
        for (at, byte, how) in edits {
            let at = at.index(bytes.len());
            match how {
                0 => bytes[at] = byte,
                1 => { bytes.remove(at); }
                _ => bytes.insert(at, byte),
            }
        }
        let row = row(column_seq, &kind, bytes);
        let full = check_row_fully(&row, entry_hash(&row.bytes));
        // The path verify takes finds exactly what the full checks find.
        let taken = check_rows(std::slice::from_ref(&row)).remove(0);
        prop_assert_eq!(&taken.findings, &full.findings);
        if let Some(quick) = check_clean_row(&row, entry_hash(&row.bytes)) {
            let settled = quick.evidence.as_ref().is_none_or(|evidence| {
                hash::domain_hash(EVIDENCE_SET_DOMAIN, &evidence.set) == evidence.anchored
            });
            if settled {
                prop_assert!(full.findings.is_empty(), "{:?}", full.findings);
                prop_assert_eq!(quick.is_activity, full.is_activity);
                let as_string = |p: Option<Prev<'_>>| p.map(Prev::into_string);
                prop_assert_eq!(as_string(quick.prev), as_string(full.prev));
                let sorted = |r: Vec<Cow<'_, str>>| {
                    let mut r: Vec<String> = r.into_iter().map(Cow::into_owned).collect();
                    r.sort();
                    r.dedup();
                    r
                };
                prop_assert_eq!(sorted(quick.referenced), sorted(full.referenced));
            }
        }
    }

    #[test]
    fn entry_seq_is_named_exactly_when_it_is_not_the_rows(
        column_seq in -3i64..40,
        said in seq_value(),
    ) {
        let agrees = matches!(said, Value::Number(n)
            if n.fract() == 0.0 && n >= 0.0 && n as i64 == column_seq);
        let row = row(column_seq, "step", entry_bytes("step", said, Value::Object(Vec::new())));
        let named = |findings: &[(&str, String, String)]| {
            findings.iter().any(|(check, _, _)| *check == "entry.seq")
        };
        let full = check_row_fully(&row, entry_hash(&row.bytes));
        prop_assert_eq!(named(&full.findings), !agrees);
        let taken = check_rows(std::slice::from_ref(&row)).remove(0);
        prop_assert_eq!(named(&taken.findings), !agrees);
    }
}
