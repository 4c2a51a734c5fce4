//! Stored research and browser reports checked against what bernstein and the Python
//! reference give. The data is in `tests/data` (see `make_report_cases.py` there):
//!
//! - `cas/`: the stored reports of bernstein 3.23.0's shapes fixture and every blob they
//!   cite; `fixture-verdicts.json`: bernstein's own verdict for each;
//! - `report-cases.json`: damaged and quirky reports, each with the verdict (or the
//!   exception) `agentledger.bernstein.reports` gives for it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use agentledger_bernstein::pyjson::{parse, PyValue};
use agentledger_bernstein::report::{
    verify_browser, verify_research, Browser, CheckVerdict, ClaimVerdict, Research, StepVerdict,
};
use agentledger_bernstein::store::{cas_path, Store};
use agentledger_bernstein::Crash;
use agentledger_core::hash::{sha256, to_hex_prefixed};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

/// A content store held in memory, by the workdir path [`cas_path`] gives.
#[derive(Clone)]
struct MemStore(HashMap<String, Vec<u8>>);

impl MemStore {
    /// The blobs copied from the fixture, at `.sdd/cas/<name>`.
    fn copied() -> MemStore {
        let mut blobs = HashMap::new();
        for entry in std::fs::read_dir(Path::new(DATA).join("cas")).expect("tests/data/cas") {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            blobs.insert(format!(".sdd/cas/{name}"), std::fs::read(&path).unwrap());
        }
        MemStore(blobs)
    }
}

impl Store for MemStore {
    fn exists(&self) -> bool {
        true
    }

    fn get(&self, content_hash: &[u8]) -> Option<Cow<'_, [u8]>> {
        let path = cas_path(content_hash)?;
        self.0.get(&path).map(|data| Cow::Borrowed(data.as_slice()))
    }

    fn stored_digest(&self, content_hash: &[u8]) -> Option<Cow<'_, [u8]>> {
        let data = self.get(content_hash)?;
        Some(Cow::Owned(content_hash_of(&data).into_bytes()))
    }
}

fn content_hash_of(data: &[u8]) -> String {
    to_hex_prefixed("sha256:", &sha256(data))
}

/// A JSON file of the test data, parsed as `json.loads` does (kept for the whole run).
fn load(name: &str) -> PyValue<'static> {
    let text = std::fs::read_to_string(Path::new(DATA).join(name)).expect(name);
    parse(Box::leak(text.into_boxed_str())).expect(name).value
}

fn member<'v>(value: &'v PyValue<'static>, key: &str) -> &'v PyValue<'static> {
    value
        .get(key)
        .unwrap_or_else(|| panic!("no {key:?} in {value:?}"))
}

fn items<'v>(value: &'v PyValue<'static>) -> &'v [PyValue<'static>] {
    match value {
        PyValue::Array(items) => items,
        other => panic!("not a list: {other:?}"),
    }
}

fn text(value: &PyValue<'_>) -> Vec<u8> {
    value.as_str_bytes().expect("a string").to_vec()
}

fn flag(value: &PyValue<'_>) -> bool {
    match value {
        PyValue::Bool(b) => *b,
        other => panic!("not a bool: {other:?}"),
    }
}

fn int_text(value: &PyValue<'_>) -> String {
    match value {
        PyValue::Int(digits) => digits.to_string(),
        other => panic!("not an int: {other:?}"),
    }
}

fn claim_verdicts(value: &PyValue<'static>) -> Vec<ClaimVerdict> {
    items(value)
        .iter()
        .map(|claim| ClaimVerdict {
            claim_id: text(member(claim, "claim_id")),
            ok: flag(member(claim, "ok")),
            citations_checked: int_text(member(claim, "citations_checked"))
                .parse()
                .unwrap(),
            reason: text(member(claim, "reason")),
        })
        .collect()
}

fn browser_verdict(value: &PyValue<'static>) -> Browser {
    Browser {
        ok: flag(member(value, "ok")),
        head_anchor_ok: flag(member(value, "head_anchor_ok")),
        reason: text(member(value, "reason")),
        steps: items(member(value, "steps"))
            .iter()
            .map(|step| StepVerdict {
                index: int_text(member(step, "index")),
                ok: flag(member(step, "ok")),
                reason: text(member(step, "reason")),
            })
            .collect(),
        checks: items(member(value, "checks"))
            .iter()
            .map(|check| CheckVerdict {
                check_id: text(member(check, "check_id")),
                ok: flag(member(check, "ok")),
                passed: flag(member(check, "passed")),
                reason: text(member(check, "reason")),
            })
            .collect(),
    }
}

/// A verdict, or what bernstein's own check raised instead.
#[derive(Debug, PartialEq)]
enum Outcome {
    Research(Research),
    Browser(Browser),
    Crash(String),
}

/// An outcome with its strings as text, for a failure message.
fn show(outcome: &Outcome) -> String {
    let s = |bytes: &[u8]| format!("{:?}", String::from_utf8_lossy(bytes));
    match outcome {
        Outcome::Research(r) => {
            let claims: Vec<String> = r
                .claims
                .iter()
                .map(|c| {
                    let (id, ok, n, why) =
                        (s(&c.claim_id), c.ok, c.citations_checked, s(&c.reason));
                    format!("({id} {ok} {n} {why})")
                })
                .collect();
            format!("research {} {} [{}]", r.ok, s(&r.reason), claims.join(" "))
        }
        Outcome::Browser(b) => {
            let steps: Vec<String> = b
                .steps
                .iter()
                .map(|v| format!("({} {} {})", v.index, v.ok, s(&v.reason)))
                .collect();
            let checks: Vec<String> = b
                .checks
                .iter()
                .map(|c| {
                    format!(
                        "({} {} {} {})",
                        s(&c.check_id),
                        c.ok,
                        c.passed,
                        s(&c.reason)
                    )
                })
                .collect();
            format!(
                "browser {} {} {} steps [{}] checks [{}]",
                b.ok,
                b.head_anchor_ok,
                s(&b.reason),
                steps.join(" "),
                checks.join(" ")
            )
        }
        Outcome::Crash(message) => format!("crash {message:?}"),
    }
}

fn check(kind: &[u8], report: &PyValue<'_>, store: &MemStore) -> Outcome {
    let verdict = match kind {
        b"research" => verify_research(report, store).map(Outcome::Research),
        b"browser" => verify_browser(report, store).map(Outcome::Browser),
        other => panic!("unknown kind {other:?}"),
    };
    verdict.unwrap_or_else(|Crash(message)| Outcome::Crash(message))
}

fn expected(kind: &[u8], expect: &PyValue<'static>) -> Outcome {
    if let Some(crash) = expect.get("crash") {
        return Outcome::Crash(String::from_utf8(text(crash)).unwrap());
    }
    match kind {
        b"research" => Outcome::Research(Research {
            ok: flag(member(expect, "ok")),
            reason: text(member(expect, "reason")),
            claims: claim_verdicts(member(expect, "claims")),
        }),
        _ => Outcome::Browser(browser_verdict(expect)),
    }
}

/// Set (`[path, value]`) or delete (`[path]`) the member or item at `path`.
fn apply(doc: &mut PyValue<'static>, edit: &[PyValue<'static>]) {
    let path = items(&edit[0]);
    let (last, parents) = path.split_last().expect("an edit names a member");
    let mut target = doc;
    for key in parents {
        target = child(target, key);
    }
    match (target, last) {
        (PyValue::Object(members), PyValue::Str(key)) => {
            let at = members.iter().position(|(k, _)| k == key);
            match (edit.get(1), at) {
                (Some(value), Some(at)) => members[at].1 = value.clone(),
                (Some(value), None) => members.push((key.clone(), value.clone())),
                (None, Some(at)) => {
                    members.remove(at);
                }
                (None, None) => panic!("no member {key:?} to delete"),
            }
        }
        (PyValue::Array(items), PyValue::Int(n)) => {
            items[n.parse::<usize>().unwrap()] = edit[1].clone();
        }
        (target, key) => panic!("cannot edit {key:?} of {target:?}"),
    }
}

fn child<'v>(value: &'v mut PyValue<'static>, key: &PyValue<'static>) -> &'v mut PyValue<'static> {
    match (value, key) {
        (PyValue::Object(members), PyValue::Str(key)) => {
            &mut members.iter_mut().find(|(k, _)| k == key).unwrap().1
        }
        (PyValue::Array(items), PyValue::Int(n)) => &mut items[n.parse::<usize>().unwrap()],
        (value, key) => panic!("no {key:?} in {value:?}"),
    }
}

/// The bytes of the blob `name` (the hex of its content hash) under `tests/data/cas`.
fn stored(name: &[u8]) -> Vec<u8> {
    let name = std::str::from_utf8(name).unwrap();
    std::fs::read(Path::new(DATA).join("cas").join(name)).expect(name)
}

/// A stored report, parsed as `json.loads` does.
fn parse_report(data: Vec<u8>) -> PyValue<'static> {
    let text = String::from_utf8(data).expect("a UTF-8 report");
    parse(Box::leak(text.into_boxed_str())).unwrap().value
}

#[test]
fn the_fixtures_stored_reports_verify_as_bernstein_verified_them() {
    let store = MemStore::copied();
    let entries = load("fixture-verdicts.json");
    let entries = items(&entries);
    let (mut research, mut browser, mut claims, mut steps, mut checks) = (0, 0, 0, 0, 0);
    for entry in entries {
        let artifact = text(member(entry, "artifact_hash"));
        let stage = String::from_utf8_lossy(&text(member(entry, "stage_id"))).into_owned();
        let name = &artifact[b"sha256:".len()..];
        let data = stored(name);
        assert_eq!(content_hash_of(&data).as_bytes(), artifact, "{stage}");
        let report = parse_report(data);
        match text(member(entry, "kind")).as_slice() {
            b"research" => {
                let verdict = verify_research(&report, &store).unwrap();
                let want = claim_verdicts(member(entry, "claim_verdicts"));
                assert!(
                    verdict.ok && verdict.reason.is_empty(),
                    "{stage}: {verdict:?}"
                );
                assert!(!want.is_empty(), "{stage}");
                assert_eq!(verdict.claims, want, "{stage}");
                research += 1;
                claims += want.len();
            }
            _ => {
                let verdict = verify_browser(&report, &store).unwrap();
                let want = browser_verdict(member(entry, "browser_verdict"));
                assert!(want.ok && !want.steps.is_empty() && !want.checks.is_empty());
                assert_eq!(verdict, want, "{stage}");
                browser += 1;
                steps += want.steps.len();
                checks += want.checks.len();
            }
        }
    }
    // Every stored report of the fixture: 10 research (21 claims), 10 browser (20 steps,
    // 40 checks, one recorded `passed=false` in each).
    assert_eq!(
        (research, claims, browser, steps, checks),
        (10, 21, 10, 20, 40)
    );
}

#[test]
fn damaged_and_quirky_reports_get_the_python_references_verdict() {
    let copied = MemStore::copied();
    let cases = load("report-cases.json");
    let mut failures = Vec::new();
    let mut seen = 0;
    for case in items(&cases) {
        let name = String::from_utf8(text(member(case, "name"))).unwrap();
        let kind = text(member(case, "kind"));
        let report = match case.get("base") {
            Some(base) => {
                let mut report = parse_report(stored(&text(base)));
                for edit in items(member(case, "edits")) {
                    apply(&mut report, items(edit));
                }
                report
            }
            None => member(case, "report").clone(),
        };
        let mut store = copied.clone();
        if let PyValue::Object(put) = member(case, "put") {
            for (path, data) in put {
                let path = String::from_utf8(path.to_vec()).unwrap();
                store.0.insert(path, hex::decode(text(data)).unwrap());
            }
        }
        for path in items(member(case, "drop")) {
            let path = String::from_utf8(text(path)).unwrap();
            assert!(store.0.remove(&path).is_some(), "{name}: {path}");
        }
        let got = check(&kind, &report, &store);
        let want = expected(&kind, member(case, "expect"));
        if got != want {
            failures.push(format!(
                "{name}:\n  got  {}\n  want {}",
                show(&got),
                show(&want)
            ));
        }
        seen += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(seen >= 140, "{seen} cases");
}
