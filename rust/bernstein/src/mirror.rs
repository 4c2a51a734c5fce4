//! The strict cross-check of a run's `activity.result` rows with the `activity.result`
//! records of a clean audit chain (`verifier._cross_check_audit`, same findings in the
//! same order): every row audited with the same fields, every audited step in the journal.
//!
//! It applies to every run of a workdir whose chain mirrors activities, that is holds at
//! least one `activity.result` record (`AuditChain.mirrors_activities`; bernstein's own
//! activity commands never mirror, and the chain also holds other events). Then a row
//! with no record is a finding wherever it stands: after the run's last audited row (the
//! chain's last records cut, which leaves the chain valid) or in a run none of whose rows
//! has a record (all of its records cut, or written without the mirror: the two cannot be
//! told apart, and either way nothing vouches for the row).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::audit::{ActivityRecord, AUDITED_FIELDS, JOURNAL_EVENT_HASH};
use crate::journal::ActivityRow;
use crate::pyjson::{py_repr, PyValue};

/// A chain's `activity.result` records that audit a row, found by run: what the pipeline
/// cross-checks each run with.
#[derive(Debug, Clone, Default)]
pub struct RecordsByRun<'a> {
    /// By `str(details["run_id"])` (`""` when absent), in chain order.
    by_run: HashMap<&'a [u8], Vec<&'a ActivityRecord>>,
}

impl<'a> RecordsByRun<'a> {
    pub fn new(records: impl IntoIterator<Item = &'a ActivityRecord>) -> Self {
        let mut by_run: HashMap<&'a [u8], Vec<&'a ActivityRecord>> = HashMap::new();
        for record in records {
            let run = record.run_id.as_deref().unwrap_or_default();
            by_run.entry(run).or_default().push(record);
        }
        Self { by_run }
    }

    /// The records of `run_id`, in chain order.
    pub fn of_run(&self, run_id: &[u8]) -> Vec<&'a ActivityRecord> {
        self.by_run.get(run_id).cloned().unwrap_or_default()
    }
}

/// One strict finding: the step, the check, the field, expected and actual (WTF-8).
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorFinding {
    pub step: i64,
    pub check: &'static str,
    pub field: Vec<u8>,
    pub expected: Vec<u8>,
    pub actual: Vec<u8>,
}

/// The findings for one run (its rows, its records in chain order), and the last
/// journal index its records audit.
pub fn cross_check(
    rows: &[ActivityRow],
    records: &[&ActivityRecord],
) -> (Vec<MirrorFinding>, Option<i64>) {
    // The first record of a step is the one compared (`setdefault`).
    let mut by_index: BTreeMap<i64, &ActivityRecord> = BTreeMap::new();
    for record in records {
        by_index.entry(record.journal_index).or_insert(record);
    }
    let mut findings = Vec::new();
    for row in rows {
        let step = row.step as i64;
        let Some(record) = by_index.get(&step) else {
            findings.push(MirrorFinding {
                step,
                check: "bernstein.audit.missing_record",
                field: stage(&row.stage_id),
                expected: b"an audit record".to_vec(),
                actual: b"none".to_vec(),
            });
            continue;
        };
        // The row's values of AUDITED_FIELDS, in its order (a test pins the names).
        let values: [&[u8]; 6] = [
            &row.stage_id,
            &row.kind,
            &row.artifact_hash,
            &row.evidence_set_hash,
            &row.terminal_state,
            &row.reason_code,
        ];
        let compared = AUDITED_FIELDS
            .iter()
            .map(|&name| (name, name))
            .zip(values)
            .map(|((audited, field), value)| (audited, field, value))
            .chain([(JOURNAL_EVENT_HASH, "event_hash", &row.event_hash[..])]);
        for (audited, field, value) in compared {
            let audited = record.field(audited);
            if audited != value {
                findings.push(MirrorFinding {
                    step,
                    check: "bernstein.audit.mismatch",
                    field: field.as_bytes().to_vec(),
                    expected: audited.to_vec(),
                    actual: value.to_vec(),
                });
            }
        }
    }
    let steps: HashSet<i64> = rows.iter().map(|row| row.step as i64).collect();
    for (&index, record) in &by_index {
        if !steps.contains(&index) {
            findings.push(MirrorFinding {
                step: index,
                check: "bernstein.audit.missing_from_journal",
                field: stage(record.field("stage_id")),
                expected: format!("an activity.result row at step {index}").into_bytes(),
                actual: b"none".to_vec(),
            });
        }
    }
    let last = records.iter().map(|r| r.journal_index).max();
    (findings, last)
}

/// `f"stage {stage_id!r}"`.
fn stage(stage_id: &[u8]) -> Vec<u8> {
    let mut out = b"stage ".to_vec();
    py_repr(&PyValue::Str(stage_id.into()), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Reattach;

    fn row(step: u64, stage_id: &str) -> ActivityRow {
        ActivityRow {
            step,
            line: step,
            event_hash: b"e".to_vec(),
            stage_id: stage_id.as_bytes().to_vec(),
            kind: b"data".to_vec(),
            artifact_hash: b"a".to_vec(),
            evidence_set_hash: b"s".to_vec(),
            terminal_state: b"completed".to_vec(),
            reason_code: b"ok".to_vec(),
            observations: Vec::new(),
            recomputed_evidence_set_hash: Ok(String::new()),
            reattach: Reattach::Ok,
            artifact_stored: None,
        }
    }

    fn record(index: i64, stage_id: &str, kind: &str) -> ActivityRecord {
        let fields = [
            ("stage_id", stage_id),
            ("kind", kind),
            ("artifact_hash", "a"),
            ("evidence_set_hash", "s"),
            ("terminal_state", "completed"),
            ("reason_code", "ok"),
            ("journal_event_hash", "e"),
        ];
        ActivityRecord {
            segment: 0,
            line: index as u64,
            run_id: Some(b"r".to_vec()),
            journal_index: index,
            fields: fields
                .iter()
                .map(|&(name, value)| (name, value.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn matching_records_give_no_finding_and_the_last_audited_step() {
        let records = [record(2, "s2", "data"), record(4, "s4", "data")];
        let refs: Vec<&ActivityRecord> = records.iter().collect();
        let (findings, last) = cross_check(&[row(2, "s2"), row(4, "s4")], &refs);
        assert!(findings.is_empty());
        assert_eq!(last, Some(4));
    }

    #[test]
    fn mismatches_missing_records_and_unjournaled_records_are_named() {
        let records = [
            record(2, "s2", "ops"),
            record(2, "s2", "data"),
            record(9, "it's", "data"),
        ];
        let refs: Vec<&ActivityRecord> = records.iter().collect();
        let (findings, last) = cross_check(&[row(2, "s2"), row(4, "s4")], &refs);
        let named: Vec<(i64, &str, String)> = findings
            .iter()
            .map(|f| {
                let field = String::from_utf8(f.field.clone()).unwrap();
                (f.step, f.check, field)
            })
            .collect();
        assert_eq!(
            named,
            vec![
                (2, "bernstein.audit.mismatch", "kind".to_owned()),
                (4, "bernstein.audit.missing_record", "stage 's4'".to_owned()),
                (
                    9,
                    "bernstein.audit.missing_from_journal",
                    "stage \"it's\"".to_owned()
                ),
            ]
        );
        assert_eq!(last, Some(9));
    }

    #[test]
    fn a_row_after_the_last_audited_one_without_its_record_is_missing() {
        // The chain's last record (step 6) was cut: the chain still verifies.
        let records = [record(3, "s3", "data")];
        let refs: Vec<&ActivityRecord> = records.iter().collect();
        let (findings, last) = cross_check(&[row(3, "s3"), row(6, "s6")], &refs);
        let named: Vec<(i64, &str)> = findings.iter().map(|f| (f.step, f.check)).collect();
        assert_eq!(named, vec![(6, "bernstein.audit.missing_record")]);
        assert_eq!(last, Some(3));
    }

    #[test]
    fn a_run_whose_every_record_was_cut_has_every_row_missing() {
        let (findings, last) = cross_check(&[row(3, "s3"), row(6, "s6")], &[]);
        let named: Vec<(i64, &str)> = findings.iter().map(|f| (f.step, f.check)).collect();
        assert_eq!(
            named,
            vec![
                (3, "bernstein.audit.missing_record"),
                (6, "bernstein.audit.missing_record")
            ]
        );
        assert_eq!(last, None);
    }

    #[test]
    fn each_audited_field_is_compared_with_the_rows_own_value() {
        // A record whose every audited member differs from the row: each finding names
        // its field and carries that field's two values, in AUDITED_FIELDS order.
        let mut audited = record(2, "s2", "data");
        for (name, value) in &mut audited.fields {
            value.insert(0, b'~');
            assert!(AUDITED_FIELDS.contains(name) || *name == JOURNAL_EVENT_HASH);
        }
        let stored = row(2, "s2");
        let (findings, _) = cross_check(std::slice::from_ref(&stored), &[&audited]);
        let named: Vec<(String, String, String)> = findings
            .iter()
            .map(|f| {
                let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
                (text(&f.field), text(&f.expected), text(&f.actual))
            })
            .collect();
        let want: Vec<(String, String, String)> = [
            ("stage_id", "s2"),
            ("kind", "data"),
            ("artifact_hash", "a"),
            ("evidence_set_hash", "s"),
            ("terminal_state", "completed"),
            ("reason_code", "ok"),
            ("event_hash", "e"),
        ]
        .iter()
        .map(|&(field, value)| (field.to_owned(), format!("~{value}"), value.to_owned()))
        .collect();
        assert_eq!(named, want);
    }
}
