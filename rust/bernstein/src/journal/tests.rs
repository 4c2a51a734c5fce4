use super::*;

fn row(index: u64, event: &str, prev: &str, payload: &str, extra: &str) -> String {
    format!(
        "{{\"ts\": 1.5, \"elapsed_s\": 0.001, \"index\": {index}, \"event\": \"{event}\", \"prev_hash\": \"{prev}\", \"payload_hash\": \"{payload}\", \"event_hash\": \"{{EH}}\"{extra}}}"
    )
}

/// Build a valid py-json-v1 journal by computing the hashes the way bernstein does.
pub(crate) fn journal(events: &[(&str, &str)]) -> Vec<u8> {
    let mut prev = String::new();
    let mut out = String::new();
    for (i, (event, extra)) in events.iter().enumerate() {
        let text = format!("{{\"event\": \"{event}\"{extra}}}");
        let value = parse(&text).unwrap().value;
        let ph = payload_hash(&value, event.as_bytes(), Profile::PyJsonV1).unwrap();
        let inputs = EventInputs {
            event_type: event.as_bytes(),
            index: i as u64,
            payload_hash: ph.as_bytes(),
            prev: prev.as_bytes(),
        };
        let eh = inputs.hash(Profile::PyJsonV1, &mut Vec::new()).unwrap();
        let eh = String::from_utf8(eh.to_vec()).unwrap();
        out.push_str(&row(i as u64, event, &prev, &ph, extra).replace("{EH}", &eh));
        out.push('\n');
        prev = eh;
    }
    out.into_bytes()
}

#[test]
fn a_well_formed_journal_verifies_with_its_head() {
    let data = journal(&[("run_started", ", \"goal\": \"x\""), ("run_finished", "")]);
    let report = verify_journal(&data);
    assert!(report.chain_consistent, "{report:?}");
    assert_eq!(report.count, 2);
    assert_eq!(report.head.len(), 64);
    assert!(report.row_findings.is_empty());
}

#[test]
fn an_edited_payload_breaks_the_chain_at_its_step_naming_the_payload() {
    let data = journal(&[("a", ", \"goal\": \"x\""), ("b", ", \"goal\": \"y\"")]);
    let edited = String::from_utf8(data).unwrap().replace("\"y\"", "\"z\"");
    let report = verify_journal(edited.as_bytes());
    assert!(!report.chain_consistent);
    assert_eq!(report.divergent_index, Some(1));
    assert_eq!(report.divergent_field, Some("payload"));
    assert_eq!(report.error.as_deref(), Some("step 1: event_hash mismatch"));
}

#[test]
fn a_deleted_row_breaks_the_link_of_the_next() {
    let data = journal(&[("a", ""), ("b", ""), ("c", "")]);
    let text = String::from_utf8(data).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = format!("{}\n{}\n", lines[0], lines[2]);
    let report = verify_journal(cut.as_bytes());
    assert_eq!(report.divergent_index, Some(1));
    assert_eq!(report.divergent_field, Some("prev_hash"));
}

#[test]
fn unparsable_lines_are_discarded_and_counted_by_physical_number() {
    let mut data = journal(&[("a", "")]);
    data.extend_from_slice(b"\n   \nnot json\n[1]\n");
    let report = verify_journal(&data);
    assert_eq!(report.discarded_lines, vec![3, 4]);
    assert!(report.chain_consistent);
}

#[test]
fn universal_newlines_split_on_cr_and_crlf() {
    assert_eq!(physical_lines(b"a\rb\r\nc\nd").len(), 4);
    assert_eq!(physical_lines(b"a\n").len(), 1);
}

#[test]
fn newline_only_files_split_as_split_does() {
    let text = b"0123456789abcdef\n\nx\n0123456\n01234567\n012345678\nlast".to_vec();
    for end in 0..=text.len() {
        let data = &text[..end];
        let mut expected: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        if expected.last().is_some_and(|l| l.is_empty()) {
            expected.pop();
        }
        assert_eq!(physical_lines(data), expected, "{end}");
    }
}

#[test]
fn stored_index_and_payload_hash_edits_are_strict_findings_only() {
    let data = journal(&[("a", ""), ("b", "")]);
    let edited = String::from_utf8(data)
        .unwrap()
        .replacen("\"index\": 1", "\"index\": 7", 1);
    let report = verify_journal(edited.as_bytes());
    assert!(report.chain_consistent);
    assert_eq!(report.row_findings.len(), 1);
    assert_eq!(report.row_findings[0].field, "index");
}

#[test]
fn an_unknown_profile_fails_without_a_divergent_index() {
    let data = journal(&[("a", ", \"hash_profile\": \"v9\"")]);
    let report = verify_journal(&data);
    assert!(!report.chain_consistent);
    assert_eq!(report.divergent_index, None);
    assert_eq!(report.error.as_deref(), Some("unknown hash_profile 'v9'"));
}

#[test]
fn jcs_nan_is_a_crash_not_a_verdict() {
    let line = b"{\"index\": 0, \"event\": \"a\", \"hash_profile\": \"jcs-v2\", \"x\": NaN}\n";
    let report = verify_journal(line);
    assert!(report.crash.is_some());
}

#[test]
fn nesting_past_the_encoders_recursion_is_a_crash_not_a_verdict() {
    // `canonicalize_jcs` recurses in Python: a member nested past `JCS_MAX_DEPTH` raises
    // `RecursionError` long before `json.loads` would (990 levels).
    // The same for `py-json-v1`'s `json.dumps`, a level short of what `json.loads` reads.
    use crate::pyjson::{JCS_MAX_DEPTH, PY_JSON_MAX_DEPTH};
    let jcs = ", \"hash_profile\": \"jcs-v2\"";
    for (profile, depth, crashes) in [
        (jcs, JCS_MAX_DEPTH, false),
        (jcs, JCS_MAX_DEPTH + 1, true),
        ("", PY_JSON_MAX_DEPTH, false),
        ("", PY_JSON_MAX_DEPTH + 1, true),
    ] {
        let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let line = format!("{{\"index\": 0, \"event\": \"a\"{profile}, \"x\": {nested}}}\n");
        let report = verify_journal(line.as_bytes());
        assert_eq!(
            report.crash.is_some(),
            crashes,
            "{depth}: {:?}",
            report.crash
        );
        if crashes {
            assert!(report.crash.unwrap().starts_with("RecursionError"));
        }
    }
}

#[test]
fn a_line_bernsteins_reader_raises_on_is_a_crash_not_a_discarded_line() {
    // `load_events` catches only JSONDecodeError: deep nesting raises RecursionError, an
    // integer of more than 4,300 digits ValueError, and bernstein gives no verdict.
    let good = journal(&[("a", "")]);
    let deep = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let big = format!("{{\"x\": {}}}\n", "9".repeat(5_000));
    for (line, raised) in [
        (deep, "RecursionError"),
        (big, "ValueError: Exceeds the limit"),
    ] {
        let mut data = good.clone();
        data.extend_from_slice(line.as_bytes());
        let report = verify_journal(&data);
        let crash = report.crash.as_deref().unwrap_or_default();
        assert!(crash.starts_with(raised), "{crash}");
        assert!(crash.ends_with("(line 1)"), "{crash}");
        assert!(report.discarded_lines.is_empty());
        assert!(!report.chain_consistent);
    }
    // A line that is not JSON at all is what the reader discards, as before.
    let mut data = good.clone();
    data.extend_from_slice(b"{\"x\": \n");
    let report = verify_journal(&data);
    assert!(report.crash.is_none());
    assert_eq!(report.discarded_lines, vec![1]);
}

#[test]
fn evidence_set_of_nothing_is_the_empty_array_hash() {
    assert_eq!(
        evidence_set_hash(&[]).unwrap(),
        "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
    );
}
