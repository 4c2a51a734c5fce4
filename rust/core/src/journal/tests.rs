//! The journal's encoding and verifier, and its fast path against the full checks.

use std::borrow::Cow;

use super::clean_row::check_clean_row;
use super::encode::EVIDENCE_SET_DOMAIN;
use super::row::Prev;
use super::verify::{check_evidence_set, check_row_fully, check_rows};
use super::*;
use crate::canonical::{self, Value};
use crate::hash;

const LEDGER: &str = "00112233445566778899aabbccddeeff";

fn chain(run: &str, n: u64) -> Vec<StoredEntry> {
    let items = (0..n)
        .map(|i| {
            let body = Value::Object(vec![("i".to_owned(), Value::Number(i as f64))]);
            ("step".to_owned(), canonical::to_canonical(&body).unwrap())
        })
        .collect::<Vec<_>>();
    encode_chain(
        run,
        0,
        &genesis_prev(LEDGER, run),
        "2026-11-30T00:00:00Z",
        &items,
    )
    .into_iter()
    .enumerate()
    .map(|(i, (bytes, hash))| StoredEntry {
        run_id: run.to_owned(),
        seq: i as i64,
        kind: "step".to_owned(),
        hash: hash.to_vec(),
        bytes,
    })
    .collect()
}

#[test]
fn the_envelope_around_canonical_bytes_equals_canonicalizing_the_whole_entry() {
    let body = Value::Object(vec![
        ("z".to_owned(), Value::String("é\u{1}\"".to_owned())),
        ("a".to_owned(), Value::Number(1e21)),
    ]);
    let header = EntryHeader {
        run_id: "run.1",
        seq: 9_007_199_254_740_991,
        kind: "activity.result",
        prev: "blake3:00",
        ts: "2026-11-30T00:00:00.000000Z",
    };
    let whole = Value::Object(vec![
        ("v".to_owned(), Value::Number(ENTRY_VERSION)),
        ("ts".to_owned(), Value::String(header.ts.to_owned())),
        ("seq".to_owned(), Value::Number(header.seq as f64)),
        ("run".to_owned(), Value::String(header.run_id.to_owned())),
        ("prev".to_owned(), Value::String(header.prev.to_owned())),
        ("kind".to_owned(), Value::String(header.kind.to_owned())),
        ("body".to_owned(), body.clone()),
    ]);
    assert_eq!(
        encode_entry(&header, &body).unwrap(),
        canonical::to_canonical(&whole).unwrap()
    );
}

#[test]
fn a_fresh_chain_verifies_clean() {
    let mut rows = chain("a", 5);
    rows.extend(chain("b", 3));
    let report = verify_batch(LEDGER, None, &rows);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert_eq!(report.runs.len(), 2);
    assert_eq!(report.runs[0].entries, 5);
    assert_eq!(report.runs[1].last_seq, 2);
}

#[test]
fn a_run_split_across_batches_verifies_with_the_carry() {
    let rows = chain("a", 6);
    let first = verify_batch(LEDGER, None, &rows[..4]);
    let last = &rows[3];
    let carry = Carry {
        run_id: last.run_id.clone(),
        seq: last.seq,
        hash: last.hash.clone(),
    };
    let second = verify_batch(LEDGER, Some(&carry), &rows[4..]);
    assert!(first.findings.is_empty() && second.findings.is_empty());
}

#[test]
fn batches_absorbed_in_order_report_what_one_batch_would() {
    let mut rows = chain("a", 80);
    for row in rows.iter_mut().skip(5) {
        row.hash[0] ^= 1; // each a finding, well past the per-run cap in all
    }
    rows.extend(chain("b", 3));
    let whole = verify_batch(LEDGER, None, &rows);
    for split in [1, 20, 50, 79, 80, 81] {
        // The next row's `prev` must name the hash its predecessor's bytes have.
        let last = &rows[split - 1];
        let carry = Carry {
            run_id: last.run_id.clone(),
            seq: last.seq,
            hash: entry_hash(&last.bytes).to_vec(),
        };
        let mut merged = verify_batch(LEDGER, None, &rows[..split]);
        merged.absorb(verify_batch(LEDGER, Some(&carry), &rows[split..]));
        assert_eq!(merged.runs, whole.runs, "split at {split}");
        assert_eq!(merged.findings, whole.findings, "split at {split}");
    }
    assert_eq!(whole.findings.len(), MAX_FINDINGS_PER_RUN);
    assert!(whole.runs[0].findings > MAX_FINDINGS_PER_RUN as u64);
}

#[test]
fn a_deleted_middle_entry_breaks_the_chain_at_the_next_step() {
    let mut rows = chain("a", 5);
    rows.remove(2);
    let report = verify_batch(LEDGER, None, &rows);
    let checks: Vec<_> = report
        .findings
        .iter()
        .map(|f| (f.seq, f.check.as_str()))
        .collect();
    assert!(checks.contains(&(Some(3), "chain.gap")));
    assert!(checks.contains(&(Some(3), "chain.prev")));
}

#[test]
fn an_edited_body_is_named_at_its_step() {
    let mut rows = chain("a", 3);
    let text = String::from_utf8(rows[1].bytes.clone()).unwrap();
    rows[1].bytes = text.replace("\"i\":1", "\"i\":7").into_bytes();
    let report = verify_batch(LEDGER, None, &rows);
    assert_eq!(report.findings[0].seq, Some(1));
    assert_eq!(report.findings[0].check, "entry.hash");
    let link = report
        .findings
        .iter()
        .find(|f| f.seq == Some(2) && f.check == "chain.prev")
        .expect("the next link is broken too");
    // The same two hashes as the edit's entry.hash, the same sides: the anchored one first.
    assert_eq!(
        (&link.expected, &link.actual),
        (&report.findings[0].expected, &report.findings[0].actual)
    );
}

#[test]
fn a_run_moved_to_another_ledger_fails_at_genesis() {
    let rows = chain("a", 2);
    let report = verify_batch("another-ledger", None, &rows);
    assert_eq!(report.findings.len(), 1);
    assert_eq!(report.findings[0].check, "chain.prev");
    assert_eq!(report.findings[0].seq, Some(0));
}

#[test]
fn the_evidence_set_hash_is_recomputed() {
    let observation = |h: &str| {
        Value::Object(vec![(
            "content_hash".to_owned(),
            Value::String(h.to_owned()),
        )])
    };
    let good = evidence_set_hash(["blake3:bb", "blake3:aa", "blake3:bb"]);
    assert_eq!(good, evidence_set_hash(["blake3:aa", "blake3:bb"]));
    let body = |esh: &str| {
        Value::Object(vec![
            (
                "evidence_set_hash".to_owned(),
                Value::String(esh.to_owned()),
            ),
            (
                "observations".to_owned(),
                Value::Array(vec![observation("blake3:bb"), observation("blake3:aa")]),
            ),
        ])
    };
    assert_eq!(check_evidence_set(&body(&good)), None);
    assert!(check_evidence_set(&body("blake3:00")).is_some());
}

/// The one-pass path must agree with the full path on every row it accepts.
#[test]
fn the_fast_path_agrees_with_the_full_checks_on_mutated_rows() {
    let observation = |h: &str| {
        Value::Object(vec![
            ("content_hash".to_owned(), Value::String(h.to_owned())),
            ("kind".to_owned(), Value::String("page".to_owned())),
            (
                "ref".to_owned(),
                Value::String("https://e/\"x\"".to_owned()),
            ),
        ])
    };
    let hashes = [
        blake3_hex_of(b"a"),
        blake3_hex_of(b"b"),
        blake3_hex_of(b"a"),
    ];
    let body = Value::Object(vec![
        (
            "artifact_hash".to_owned(),
            Value::String(blake3_hex_of(b"art")),
        ),
        (
            "evidence_set_hash".to_owned(),
            Value::String(evidence_set_hash(hashes.iter().map(String::as_str))),
        ),
        (
            "observations".to_owned(),
            Value::Array(hashes.iter().map(|h| observation(h)).collect()),
        ),
        ("stage_id".to_owned(), Value::String("s-1".to_owned())),
    ]);
    let step = Value::Object(vec![("n".to_owned(), Value::Number(12.0))]);
    let encoded = encode_chain(
        "run-1",
        0,
        &genesis_prev(LEDGER, "run-1"),
        "2026-11-30T00:00:00.000000Z",
        &[
            ("step".to_owned(), canonical::to_canonical(&step).unwrap()),
            (
                ACTIVITY_RESULT_KIND.to_owned(),
                canonical::to_canonical(&body).unwrap(),
            ),
        ],
    );
    let seeds: Vec<(String, Vec<u8>)> = encoded
        .into_iter()
        .zip(["step", ACTIVITY_RESULT_KIND])
        .map(|((bytes, _), kind)| (kind.to_owned(), bytes))
        .collect();
    let alphabet = b"\"\\,:[]{}-.019eEabfu:";
    let mut next = crate::hash::testutil::xorshift(0x2545_F491_4F6C_DD1Du64);
    let mut fast = 0;
    for (kind, seed) in &seeds {
        for round in 0..6_000 {
            let mut bytes = seed.clone();
            if round > 0 {
                for _ in 0..=(next() % 2) {
                    let at = (next() as usize) % bytes.len();
                    let byte = alphabet[(next() as usize) % alphabet.len()];
                    match next() % 3 {
                        0 => bytes[at] = byte,
                        1 => {
                            bytes.remove(at);
                        }
                        _ => bytes.insert(at, byte),
                    }
                }
            }
            let row = StoredEntry {
                run_id: "run-1".to_owned(),
                seq: i64::from(kind == ACTIVITY_RESULT_KIND),
                kind: kind.clone(),
                hash: entry_hash(&bytes).to_vec(),
                bytes,
            };
            let full = check_row_fully(&row, entry_hash(&row.bytes));
            // The path verify takes finds exactly what the full checks find.
            let taken = check_rows(std::slice::from_ref(&row)).remove(0);
            assert_eq!(taken.findings, full.findings);
            let Some(quick) = check_clean_row(&row, entry_hash(&row.bytes)) else {
                continue;
            };
            // The fast path holds only if the evidence set it left to hash matches.
            if let Some(evidence) = &quick.evidence {
                if hash::domain_hash(EVIDENCE_SET_DOMAIN, &evidence.set) != evidence.anchored {
                    continue;
                }
            }
            fast += 1;
            let text = String::from_utf8_lossy(&row.bytes).into_owned();
            assert!(full.findings.is_empty(), "{text} {:?}", full.findings);
            assert_eq!(quick.is_activity, full.is_activity, "{text}");
            let as_string = |p: Option<Prev<'_>>| p.map(Prev::into_string);
            assert_eq!(as_string(quick.prev), as_string(full.prev), "{text}");
            let mut a: Vec<String> = quick.referenced.into_iter().map(Cow::into_owned).collect();
            let mut b: Vec<String> = full.referenced.into_iter().map(Cow::into_owned).collect();
            a.sort();
            a.dedup();
            b.sort();
            b.dedup();
            assert_eq!(a, b, "{text}");
        }
    }
    assert!(fast > 100, "{fast}");
}

fn blake3_hex_of(data: &[u8]) -> String {
    hash::blake3_hex(data)
}

#[test]
fn prev_is_compared_as_bytes_exactly_like_its_string() {
    let digest = [0xabu8; 32];
    let text = prefixed_hex(&digest);
    assert!(Prev::new(Cow::Borrowed(&text)).is(&digest));
    assert!(!Prev::new(Cow::Borrowed(&text)).is(&[0xab; 31]));
    let upper = text.to_uppercase().replace("BLAKE3:", "blake3:");
    assert!(matches!(Prev::new(Cow::Borrowed(&upper)), Prev::Text(_)));
    assert!(!Prev::new(Cow::Borrowed(&upper)).is(&digest));
    let odd = prefixed_hex(&[1u8; 33]);
    assert!(Prev::new(Cow::Borrowed(&odd)).is(&[1u8; 33]));
    assert_eq!(genesis_prev(LEDGER, "a"), {
        let value = Value::Object(vec![
            ("ledger".to_owned(), Value::String(LEDGER.to_owned())),
            ("run".to_owned(), Value::String("a".to_owned())),
        ]);
        prefixed_hex(&hash::domain_hash(
            "run-genesis",
            &canonical::to_canonical(&value).unwrap(),
        ))
    });
}

/// A stored row of run `r` at column seq `column` whose entry says `"seq": seq_value`
/// (any JSON value), its stored hash right for its bytes.
fn row_saying_seq(column: i64, seq_value: Value) -> StoredEntry {
    let whole = Value::Object(vec![
        ("body".to_owned(), Value::Object(Vec::new())),
        ("kind".to_owned(), Value::String("step".to_owned())),
        ("prev".to_owned(), Value::String(genesis_prev(LEDGER, "r"))),
        ("run".to_owned(), Value::String("r".to_owned())),
        ("seq".to_owned(), seq_value),
        (
            "ts".to_owned(),
            Value::String("2026-11-30T00:00:00Z".to_owned()),
        ),
        ("v".to_owned(), Value::Number(ENTRY_VERSION)),
    ]);
    let bytes = canonical::to_canonical(&whole).unwrap();
    StoredEntry {
        run_id: "r".to_owned(),
        seq: column,
        kind: "step".to_owned(),
        hash: entry_hash(&bytes).to_vec(),
        bytes,
    }
}

/// The `entry.seq` findings of `row`, by the full checks and by whichever path the batch
/// verifier takes (the two must agree).
fn seq_findings(row: &StoredEntry) -> Vec<(String, String)> {
    let full: Vec<(String, String)> = check_row_fully(row, entry_hash(&row.bytes))
        .findings
        .into_iter()
        .filter(|(check, _, _)| *check == "entry.seq")
        .map(|(_, expected, actual)| (expected, actual))
        .collect();
    let batch: Vec<(String, String)> = verify_batch(LEDGER, None, std::slice::from_ref(row))
        .findings
        .into_iter()
        .filter(|f| f.check == "entry.seq")
        .map(|f| (f.expected, f.actual))
        .collect();
    assert_eq!(full, batch, "the paths disagree on {row:?}");
    full
}

#[test]
fn an_entry_saying_a_lower_seq_than_its_row_is_named() {
    let row = row_saying_seq(5, Value::Number(4.0));
    assert_eq!(seq_findings(&row), [("5".to_owned(), "4".to_owned())]);
}

#[test]
fn an_entry_saying_a_higher_seq_than_its_row_is_named() {
    let row = row_saying_seq(5, Value::Number(6.0));
    assert_eq!(seq_findings(&row), [("5".to_owned(), "6".to_owned())]);
}

#[test]
fn an_entry_saying_its_rows_seq_is_not_named() {
    assert_eq!(seq_findings(&row_saying_seq(5, Value::Number(5.0))), []);
}

#[test]
fn a_negative_seq_is_named_even_where_the_row_agrees() {
    let row = row_saying_seq(-1, Value::Number(-1.0));
    assert_eq!(seq_findings(&row), [("-1".to_owned(), "-1".to_owned())]);
}

#[test]
fn a_fractional_seq_is_named_even_where_it_truncates_to_the_row() {
    let row = row_saying_seq(1, Value::Number(1.5));
    assert_eq!(seq_findings(&row), [("1".to_owned(), "1.5".to_owned())]);
}

#[test]
fn a_seq_that_is_not_a_number_is_named() {
    let row = row_saying_seq(1, Value::String("1".to_owned()));
    assert_eq!(seq_findings(&row), [("1".to_owned(), "\"1\"".to_owned())]);
}

#[test]
fn a_row_longer_than_an_entry_can_be_is_reported_unparsed() {
    // Tiny items parse to tens of times their size: such a row is never parsed.
    let mut bytes = b"[".to_vec();
    bytes.extend(b"0,".repeat(MAX_ENTRY_BYTES / 2));
    bytes.extend_from_slice(b"0]");
    let row = StoredEntry {
        run_id: "r".to_owned(),
        seq: 0,
        kind: "step".to_owned(),
        hash: entry_hash(&bytes).to_vec(),
        bytes: bytes.clone(),
    };
    let report = verify_batch(LEDGER, None, &[row]);
    let checks: Vec<&str> = report.findings.iter().map(|f| f.check.as_str()).collect();
    assert_eq!(checks, ["entry.size"]);
    assert_eq!(report.findings[0].actual, format!("{} bytes", bytes.len()));
}
