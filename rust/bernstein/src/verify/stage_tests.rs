//! Stage verdicts decided in this crate, each on a recorded journal of one
//! `activity.result` stage: bernstein's order of checks (evidence set, chain, reports,
//! reattachment) and its reasons, word for word.

use std::borrow::Cow;
use std::collections::HashMap;

use super::*;
use crate::journal::tests::journal;
use crate::journal::verify_journal_with;
use crate::store::content_hash;

const PAGE: &[u8] = b"page bytes";

/// A content store in memory; `exists: false` stands for a workdir without `.sdd/cas`.
struct Memory {
    exists: bool,
    blobs: HashMap<Vec<u8>, Vec<u8>>,
}

impl Store for Memory {
    fn exists(&self) -> bool {
        self.exists
    }
    fn get(&self, content_hash: &[u8]) -> Option<Cow<'_, [u8]>> {
        self.blobs.get(content_hash).map(|b| Cow::Borrowed(&b[..]))
    }
    fn stored_digest<'a>(&'a self, hash: &'a [u8]) -> Option<Cow<'a, [u8]>> {
        self.blobs.get(hash).map(|b| Cow::Owned(content_hash(b)))
    }
}

/// The page stored under its own content hash (or under it, `bytes` instead).
fn store_holding(bytes: &[u8]) -> Memory {
    Memory {
        exists: true,
        blobs: HashMap::from([(content_hash(PAGE), bytes.to_vec())]),
    }
}

/// A journal with one coding stage citing the page; `evidence`: its anchored evidence
/// set hash (`None`: the right one).
fn stage_journal(evidence: Option<&str>) -> Vec<u8> {
    let digest = String::from_utf8(content_hash(PAGE)).unwrap();
    let right = crate::journal::evidence_set_hash(&[digest.as_bytes()]).unwrap();
    let activity = format!(
        ", \"stage_id\": \"s\", \"kind\": \"coding\", \"artifact_hash\": \"sha256:{}\", \
         \"evidence_set_hash\": \"{}\", \"terminal_state\": \"completed\", \
         \"reason_code\": \"ok\", \"observations\": [{{\"kind\": \"page\", \"ref\": \"p\", \
         \"content_hash\": \"{digest}\"}}]",
        "ab".repeat(32),
        evidence.unwrap_or(&right),
    );
    journal(&[("run_started", ""), ("activity.result", &activity)])
}

fn the_stage(data: &[u8], store: &Memory) -> (Run, Stage) {
    let report = verify_journal_with(data, None);
    let options = Options {
        stages: true,
        ..Options::default()
    };
    let run = verify_run(b"run-1", Some(&report), store, None, options);
    assert_eq!(run.stages.len(), 1, "{run:?}");
    let stage = run.stages[0].clone();
    (run, stage)
}

fn reason(stage: &Stage) -> &str {
    std::str::from_utf8(&stage.reason).unwrap()
}

#[test]
fn a_stage_whose_evidence_reattaches_is_ok() {
    let (run, stage) = the_stage(&stage_journal(None), &store_holding(PAGE));
    assert!(stage.ok && stage.evidence_reattached, "{stage:?}");
    assert_eq!((reason(&stage), stage.step), ("", 1));
    assert_eq!(run.compat_code(), 0);
}

#[test]
fn a_missing_page_fails_the_stage() {
    let store = Memory {
        exists: true,
        blobs: HashMap::new(),
    };
    let (run, stage) = the_stage(&stage_journal(None), &store);
    assert!(!stage.ok && !stage.evidence_reattached);
    assert_eq!(reason(&stage), "evidence bytes missing from store for 'p'");
    assert_eq!(run.compat_code(), 2);
}

#[test]
fn a_page_whose_bytes_hash_otherwise_fails_the_stage() {
    let (_, stage) = the_stage(&stage_journal(None), &store_holding(b"other bytes"));
    assert!(!stage.ok);
    assert_eq!(reason(&stage), "content hash mismatch reattaching 'p'");
}

#[test]
fn an_anchored_evidence_set_that_is_not_the_recomputed_one_fails_first() {
    let wrong = format!("sha256:{}", "00".repeat(32));
    let (_, stage) = the_stage(&stage_journal(Some(&wrong)), &store_holding(b"other bytes"));
    assert!(!stage.ok);
    let digest = String::from_utf8(content_hash(PAGE)).unwrap();
    let right = crate::journal::evidence_set_hash(&[digest.as_bytes()]).unwrap();
    assert_eq!(
        reason(&stage),
        format!("evidence_set_hash mismatch: anchored '{wrong}', recomputed '{right}'")
    );
}

#[test]
fn a_broken_chain_fails_the_stage_before_any_byte_is_read() {
    let data = String::from_utf8(stage_journal(None)).unwrap();
    let edited = data.replacen("\"reason_code\": \"ok\"", "\"reason_code\": \"ko\"", 1);
    let store = Memory {
        exists: true,
        blobs: HashMap::new(),
    };
    let (run, stage) = the_stage(edited.as_bytes(), &store);
    assert!(!run.chain_ok && !stage.ok);
    assert_eq!(reason(&stage), "journal Merkle chain diverges");
}

#[test]
fn without_a_store_the_stage_passes_unreattached() {
    let store = Memory {
        exists: false,
        blobs: HashMap::new(),
    };
    let (run, stage) = the_stage(&stage_journal(None), &store);
    assert!(stage.ok && !stage.evidence_reattached, "{stage:?}");
    assert_eq!(run.compat_code(), 0);
}

#[test]
fn a_stage_citing_nothing_passes_with_nothing_reattached() {
    let empty = crate::journal::evidence_set_hash(&[]).unwrap();
    let activity = format!(
        ", \"stage_id\": \"s\", \"kind\": \"coding\", \"artifact_hash\": \"sha256:{}\", \
         \"evidence_set_hash\": \"{empty}\", \"terminal_state\": \"completed\", \
         \"reason_code\": \"ok\", \"observations\": []",
        "ab".repeat(32),
    );
    let data = journal(&[("run_started", ""), ("activity.result", &activity)]);
    let (_, stage) = the_stage(&data, &store_holding(PAGE));
    assert!(stage.ok && !stage.evidence_reattached, "{stage:?}");
}

#[test]
fn an_observation_the_store_cannot_look_up_makes_bernstein_raise() {
    // `ContentStore.get` builds the path from the name after the first ':'; a NUL in it
    // raises `ValueError` (not the `OSError` it turns into a missing blob).
    let digest = b"sha256:ab\0cd";
    let evidence = crate::journal::evidence_set_hash(&[digest]).unwrap();
    let activity = format!(
        ", \"stage_id\": \"s\", \"kind\": \"coding\", \"artifact_hash\": \"sha256:{}\", \
         \"evidence_set_hash\": \"{evidence}\", \"terminal_state\": \"completed\", \
         \"reason_code\": \"ok\", \"observations\": [{{\"kind\": \"page\", \"ref\": \"p\", \
         \"content_hash\": \"sha256:ab\\u0000cd\"}}]",
        "ab".repeat(32),
    );
    let data = journal(&[("run_started", ""), ("activity.result", &activity)]);
    let (run, stage) = the_stage(&data, &store_holding(PAGE));
    assert_eq!(reason(&stage), "ValueError: embedded null byte");
    assert_eq!(run.crash.as_deref(), Some("ValueError: embedded null byte"));
    assert_eq!(run.compat_code(), 1);
}
