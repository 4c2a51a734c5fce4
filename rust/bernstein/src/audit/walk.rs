//! The audit chain's walk (`_verify_log_bytes`): every line of every segment, in chain
//! order, each problem named as the Python walk names it (the reference,
//! `tests/bernstein/reference.py`, which the tests hold this to), the records counted, and
//! the `activity.result` records read.
//!
//! Lines are parsed, checked for canonical bytes and serialized for their HMAC in
//! parallel; only the links (`prev_hmac` against the head) are followed in order, then
//! the HMACs are checked in parallel again, each against the head its link gave it.
//!
//! Where the Python walk raised instead of answering, this answers: nesting too deep
//! for Python's scanner is "invalid JSON", a head that UTF-8 cannot encode or an `hmac`
//! that is not ASCII is an "HMAC mismatch", and an `event_type` Python cannot hash is
//! not an exempt event (the reference does the same, and says so).

use rayon::prelude::*;

use super::{dumps_spaced, ActivityRecord, AUDITED, EXEMPT_EVENTS, GENESIS, SCHEME2_PREFIX};
use crate::mirror::RecordsByRun;
use crate::pyjson::{decode_json_bytes, owned, parse_wtf8, py_str, PyValue};
use agentledger_core::hash::{hex64, hmac_sha256};

pub const MISSING_NEWLINE: &str = "missing trailing newline";
pub const UNDECODABLE: &str = "undecodable bytes";
pub const INVALID_JSON: &str = "invalid JSON";
pub const NOT_AN_OBJECT: &str = "entry is not a JSON object";
pub const UNSUPPORTED_SCHEME: &str = "unsupported audit scheme";
pub const NON_CANONICAL: &str = "non-canonical line bytes";
pub const PREV_HMAC_MISMATCH: &str = "prev_hmac mismatch";
pub const HMAC_MISMATCH: &str = "HMAC mismatch";
pub const STATED_PREDECESSOR: &str = "prev_chain_digest does not match prev_hmac";

/// The line number of a problem with the segment as a whole (its missing newline).
pub const WHOLE_SEGMENT: i64 = -1;

/// One line (or segment) that does not verify.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub segment: usize,
    /// The 0-based line number ([`WHOLE_SEGMENT`] for the segment's missing newline).
    pub line: i64,
    pub reason: &'static str,
    /// `str(details["run_id"])` of a record that parsed, when it has one.
    pub run_id: Option<Vec<u8>>,
}

/// One `activity.result` record met by the walk (canonical, scheme 1 or 2), whether its
/// links verify or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Walked {
    /// The record as the cross-check reads it (its `journal_index` 0 when not
    /// [`Walked::indexed`]).
    pub activity: ActivityRecord,
    /// `details.get("journal_index")` as parsed when it is not an `i64` (`null` when
    /// absent); `None` when it is `activity.journal_index`.
    pub unindexed: Option<PyValue<'static>>,
}

impl Walked {
    fn new(mut activity: ActivityRecord, journal_index: Option<&PyValue<'_>>) -> Self {
        let step = match journal_index {
            Some(PyValue::Int(digits)) => digits.parse::<i64>().ok(),
            _ => None,
        };
        activity.journal_index = step.unwrap_or_default();
        let unindexed = match step {
            Some(_) => None,
            None => Some(journal_index.map_or(PyValue::Null, owned)),
        };
        Walked {
            activity,
            unindexed,
        }
    }

    /// The journal row the record audits: an integer (one past `i64` audits no row).
    pub fn indexed(&self) -> Option<i64> {
        self.unindexed
            .is_none()
            .then_some(self.activity.journal_index)
    }

    /// `details.get("journal_index")` as parsed.
    pub fn journal_index(&self) -> PyValue<'static> {
        match &self.unindexed {
            Some(value) => value.clone(),
            None => PyValue::Int(self.activity.journal_index.to_string().into()),
        }
    }
}

/// What the walk found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AuditWalk {
    /// Lines that parsed as a JSON object.
    pub records: u64,
    pub problems: Vec<Problem>,
    pub walked: Vec<Walked>,
}

impl AuditWalk {
    /// Whether the chain mirrors activities at all: an `activity.result` record, or a
    /// damaged record that still names its run (`AuditChain.mirrors_activities`).
    pub fn mirrors_activities(&self) -> bool {
        !self.walked.is_empty() || self.problems.iter().any(|p| p.run_id.is_some())
    }

    /// What the runs are cross-checked with: the records that audit a row, by run, when
    /// the chain mirrors activities (`None`: runs are not cross-checked).
    pub fn cross_check(&self) -> Option<RecordsByRun<'_>> {
        self.mirrors_activities()
            .then(|| RecordsByRun::new(self.mirror()))
    }

    /// The records that audit a journal row, in chain order.
    pub fn mirror(&self) -> impl Iterator<Item = &ActivityRecord> {
        self.walked
            .iter()
            .filter(|walked| walked.unindexed.is_none())
            .map(|walked| &walked.activity)
    }
}

/// A line, parsed on its own. Not boxed: nearly every line is a record, and a box would
/// cost each an allocation.
#[allow(clippy::large_enum_variant)]
enum Settled {
    /// `json.loads` raised, or gave no object: no record.
    Unread(&'static str),
    Record(Record),
}

struct Record {
    /// `str(details["run_id"])`, when not in `walked`.
    run_id: Option<Vec<u8>>,
    /// A problem found before the links are followed (the head stays).
    refused: Option<&'static str>,
    scheme: u8,
    /// `prev_hmac`, when a string (nothing else equals a head).
    prev_hmac: Option<Vec<u8>>,
    /// `str(record.get("hmac", ""))`: the head after this record.
    stored: Vec<u8>,
    /// The serialization the HMAC covers (only made when the HMACs are checked).
    body: Vec<u8>,
    walked: Option<Walked>,
    /// `details.prev_chain_digest` names another predecessor than `prev_hmac`.
    stated_predecessor_differs: bool,
}

impl Record {
    fn refused(run_id: Option<Vec<u8>>, reason: &'static str) -> Settled {
        Settled::Record(Record {
            run_id,
            refused: Some(reason),
            scheme: 1,
            prev_hmac: None,
            stored: Vec::new(),
            body: Vec::new(),
            walked: None,
            stated_predecessor_differs: false,
        })
    }
}

/// `record.get("scheme", 1)` when it is 1 or 2 (`1.0` and `2.0` are, `True` is not).
fn scheme(value: Option<&PyValue<'_>>) -> Option<u8> {
    match value {
        None => Some(1),
        Some(PyValue::Int(n)) if n == "1" => Some(1),
        Some(PyValue::Int(n)) if n == "2" => Some(2),
        Some(PyValue::Float(x)) if *x == 1.0 => Some(1),
        Some(PyValue::Float(x)) if *x == 2.0 => Some(2),
        _ => None,
    }
}

/// Parse and check one line; its HMAC body only when `keyed`.
fn settle(segment: usize, number: u64, raw: &[u8], keyed: bool) -> Settled {
    let Some(text) = decode_json_bytes(raw) else {
        return Settled::Unread(UNDECODABLE);
    };
    let Ok(parsed) = parse_wtf8(&text) else {
        return Settled::Unread(INVALID_JSON);
    };
    let record = parsed.value;
    if !matches!(record, PyValue::Object(_)) {
        return Settled::Unread(NOT_AN_OBJECT);
    }
    let details = match record.get("details") {
        Some(d @ PyValue::Object(_)) => Some(d),
        _ => None,
    };
    let run_id = details
        .and_then(|d| d.get("run_id"))
        .map(|v| py_str(v).into_owned());
    let Some(scheme) = scheme(record.get("scheme")) else {
        return Record::refused(run_id, UNSUPPORTED_SCHEME);
    };
    let mut canonical = Vec::with_capacity(raw.len());
    if dumps_spaced(&record, None, &mut canonical).is_none() || canonical != raw {
        return Record::refused(run_id, NON_CANONICAL);
    }
    let event_type = record.get("event_type").and_then(PyValue::as_str_bytes);
    // An activity's run id is kept once, in its record.
    let mut run_id = run_id;
    let walked = (event_type == Some(b"activity.result")).then(|| {
        let activity = ActivityRecord {
            segment,
            line: number,
            run_id: run_id.take(),
            journal_index: 0,
            fields: AUDITED
                .iter()
                .filter_map(|&name| {
                    let value = details?.get(name)?;
                    Some((name, py_str(value).into_owned()))
                })
                .collect(),
        };
        Walked::new(activity, details.and_then(|d| d.get("journal_index")))
    });
    let prev_hmac = record
        .get("prev_hmac")
        .and_then(PyValue::as_str_bytes)
        .map(<[u8]>::to_vec);
    let exempt = event_type.is_some_and(|e| EXEMPT_EVENTS.contains(&e));
    let stated_predecessor_differs = match details.and_then(|d| d.get("prev_chain_digest")) {
        Some(PyValue::Str(digest)) if !digest.is_empty() && !exempt => {
            prev_hmac.as_deref() != Some(digest.as_ref())
        }
        _ => false,
    };
    let (stored, body) = match record.get("hmac") {
        Some(hmac) if keyed => {
            let mut body = Vec::with_capacity(raw.len());
            let _ = dumps_spaced(&record, Some(b"hmac"), &mut body);
            (py_str(hmac).into_owned(), body)
        }
        Some(hmac) => (py_str(hmac).into_owned(), Vec::new()),
        None => (Vec::new(), canonical),
    };
    Settled::Record(Record {
        run_id,
        refused: None,
        scheme,
        prev_hmac,
        stored,
        body,
        walked,
        stated_predecessor_differs,
    })
}

/// What is left of a line once its links and HMAC are settled.
#[derive(Default)]
struct Outcome {
    run_id: Option<Vec<u8>>,
    walked: Option<Walked>,
    stated_predecessor_differs: bool,
}

/// How a line's links came out.
enum Link {
    Failed(&'static str),
    /// Linked to its head (the `stored` of that line, `None`: genesis); its HMAC to check.
    Keyed(Option<usize>),
    Linked,
}

/// Whether the record's HMAC, under its scheme's key, over `head` and its body, is its
/// `hmac`. A head UTF-8 cannot encode matches nothing (Python's walk raised there).
fn hmac_matches(record: &Record, head: &[u8], keys: (&[u8], &[u8])) -> bool {
    if std::str::from_utf8(head).is_err() {
        return false;
    }
    let (key, prefix) = if record.scheme == 2 {
        (keys.1, SCHEME2_PREFIX)
    } else {
        (keys.0, &b""[..])
    };
    let mut message = Vec::with_capacity(prefix.len() + head.len() + record.body.len());
    message.extend_from_slice(prefix);
    message.extend_from_slice(head);
    message.extend_from_slice(&record.body);
    hex64(&hmac_sha256(key, &message)) == record.stored.as_slice()
}

/// Walk `segments` (in chain order). `keys`: `(scheme 1 key, scheme 2 key)`; `None`
/// checks everything but the HMACs. Runs on the current rayon pool.
pub fn walk(segments: &[&[u8]], keys: Option<(&[u8], &[u8])>) -> AuditWalk {
    let mut lines: Vec<(usize, u64, &[u8])> = Vec::new();
    // Each segment's lines, as a range of `lines`.
    let mut spans = Vec::with_capacity(segments.len());
    for (segment, data) in segments.iter().enumerate() {
        let first = lines.len();
        if !data.is_empty() {
            let body = data.strip_suffix(b"\n").unwrap_or(data);
            for (number, line) in body.split(|&b| b == b'\n').enumerate() {
                if !line.is_empty() {
                    lines.push((segment, number as u64, line));
                }
            }
        }
        spans.push(first..lines.len());
    }
    let settled: Vec<Settled> = lines
        .par_iter()
        .map(|&(segment, number, raw)| settle(segment, number, raw, keys.is_some()))
        .collect();
    let mut records = 0;
    let mut links = Vec::with_capacity(settled.len());
    let mut head: Option<usize> = None;
    let stored = |at: Option<usize>| match at.map(|i| &settled[i]) {
        Some(Settled::Record(record)) => record.stored.as_slice(),
        _ => &GENESIS[..],
    };
    for (k, line) in settled.iter().enumerate() {
        let record = match line {
            Settled::Unread(reason) => {
                links.push(Link::Failed(reason));
                continue;
            }
            Settled::Record(record) => record,
        };
        records += 1;
        if let Some(reason) = record.refused {
            links.push(Link::Failed(reason));
            continue;
        }
        let linked = record.prev_hmac.as_deref() == Some(stored(head));
        links.push(match (linked, keys) {
            (false, _) => Link::Failed(PREV_HMAC_MISMATCH),
            (true, Some(_)) => Link::Keyed(head),
            (true, None) => Link::Linked,
        });
        // A record that fails its links still moves the head (bernstein's walk does).
        head = Some(k);
    }
    let hmac_ok: Vec<bool> = match keys {
        Some(keys) => links
            .par_iter()
            .zip(&settled)
            .map(|(link, line)| match (link, line) {
                (Link::Keyed(head), Settled::Record(record)) => {
                    hmac_matches(record, stored(*head), keys)
                }
                _ => true,
            })
            .collect(),
        None => vec![true; links.len()],
    };
    // What the problems and records need of each line, the rest (bodies, hmacs) freed on
    // the pool rather than one by one here.
    let outcomes: Vec<Outcome> = settled
        .into_par_iter()
        .map(|line| match line {
            Settled::Unread(_) => Outcome::default(),
            Settled::Record(record) => Outcome {
                run_id: record.run_id,
                walked: record.walked,
                stated_predecessor_differs: record.stated_predecessor_differs,
            },
        })
        .collect();
    let mut outcomes = outcomes.into_iter();
    let mut walk = AuditWalk {
        records,
        ..AuditWalk::default()
    };
    for (segment, span) in spans.into_iter().enumerate() {
        let data = segments[segment];
        if !data.is_empty() && !data.ends_with(b"\n") {
            walk.problems.push(Problem {
                segment,
                line: WHOLE_SEGMENT,
                reason: MISSING_NEWLINE,
                run_id: None,
            });
        }
        for k in span {
            let (_, number, _) = lines[k];
            let outcome = outcomes.next().unwrap_or_default();
            let reason = match links[k] {
                Link::Failed(reason) => Some(reason),
                _ if !hmac_ok[k] => Some(HMAC_MISMATCH),
                _ if outcome.stated_predecessor_differs => Some(STATED_PREDECESSOR),
                _ => None,
            };
            if let Some(reason) = reason {
                let run_id = match &outcome.walked {
                    Some(walked) => walked.activity.run_id.clone(),
                    None => outcome.run_id,
                };
                walk.problems.push(Problem {
                    segment,
                    line: number as i64,
                    reason,
                    run_id,
                });
            }
            if let Some(walked) = outcome.walked {
                walk.walked.push(walked);
            }
        }
    }
    walk
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY1: &[u8] = b"k1";
    const KEY2: &[u8] = b"k2";

    /// A scheme 2 line after `prev`, signed with `key`, and its hmac.
    fn line(prev: &str, key: &[u8], details: &str) -> (String, String) {
        let body = format!(
            "{{\"actor\": \"a\", \"details\": {{{details}}}, \"event_type\": \"activity.result\", \"prev_hmac\": \"{prev}\", \"scheme\": 2}}"
        );
        let mut message = SCHEME2_PREFIX.to_vec();
        message.extend_from_slice(prev.as_bytes());
        message.extend_from_slice(body.as_bytes());
        let mac = String::from_utf8(hex64(&hmac_sha256(key, &message)).to_vec()).unwrap();
        let line = format!(
            "{{\"actor\": \"a\", \"details\": {{{details}}}, \"event_type\": \"activity.result\", \"hmac\": \"{mac}\", \"prev_hmac\": \"{prev}\", \"scheme\": 2}}"
        );
        (line, mac)
    }

    fn genesis() -> &'static str {
        std::str::from_utf8(GENESIS).unwrap()
    }

    /// Two signed records, `run_id` r, steps 4 and 7.
    fn chain() -> (String, String, String) {
        let (a, mac) = line(genesis(), KEY2, "\"journal_index\": 4, \"run_id\": \"r\"");
        let (b, _) = line(&mac, KEY2, "\"journal_index\": 7, \"run_id\": \"r\"");
        (a, b, mac)
    }

    fn reasons(found: &AuditWalk) -> Vec<(usize, i64, &'static str)> {
        found
            .problems
            .iter()
            .map(|p| (p.segment, p.line, p.reason))
            .collect()
    }

    #[test]
    fn the_reasons_are_the_words_of_the_python_walk() {
        // Verify's findings and the tear rules (audit_tears.py) read these texts.
        assert_eq!(
            [
                MISSING_NEWLINE,
                UNDECODABLE,
                INVALID_JSON,
                NOT_AN_OBJECT,
                UNSUPPORTED_SCHEME,
                NON_CANONICAL,
                PREV_HMAC_MISMATCH,
                HMAC_MISMATCH,
                STATED_PREDECESSOR,
            ],
            [
                "missing trailing newline",
                "undecodable bytes",
                "invalid JSON",
                "entry is not a JSON object",
                "unsupported audit scheme",
                "non-canonical line bytes",
                "prev_hmac mismatch",
                "HMAC mismatch",
                "prev_chain_digest does not match prev_hmac",
            ]
        );
    }

    #[test]
    fn a_clean_chain_has_its_records_and_activity() {
        let (a, b, _) = chain();
        let data = format!("{a}\n\n{b}\n");
        let found = walk(&[data.as_bytes(), b""], Some((KEY1, KEY2)));
        assert_eq!(found.records, 2);
        assert!(found.problems.is_empty());
        let indexes: Vec<Option<i64>> = found.walked.iter().map(Walked::indexed).collect();
        assert_eq!(indexes, vec![Some(4), Some(7)]);
        assert_eq!(found.walked[1].activity.line, 2);
        assert_eq!(found.mirror().count(), 2);
        let by_run = found.cross_check().unwrap();
        assert_eq!(by_run.of_run(b"r").len(), 2);
        assert!(by_run.of_run(b"other").is_empty());
    }

    #[test]
    fn lines_that_do_not_parse_are_named_and_not_counted() {
        let (a, b, _) = chain();
        let data = format!("{a}\n\u{ff}\n[1]\n{{\n\"\\ud800\"\n{b}");
        let mut bytes = data.into_bytes();
        let at = bytes.iter().position(|&c| c == 0xC3).unwrap();
        bytes[at] = 0xFF; // undecodable
        let found = walk(&[&bytes], Some((KEY1, KEY2)));
        assert_eq!(
            reasons(&found),
            vec![
                (0, -1, MISSING_NEWLINE),
                (0, 1, UNDECODABLE),
                (0, 2, NOT_AN_OBJECT),
                (0, 3, INVALID_JSON),
                (0, 4, NOT_AN_OBJECT),
            ]
        );
        // The head stayed: the last record links to the first.
        assert_eq!(found.records, 2);
    }

    #[test]
    fn a_broken_link_moves_the_head_to_the_records_own_hmac() {
        let (a, b, _) = chain();
        let (c, _) = line(&"f".repeat(64), KEY2, "\"run_id\": \"r\"");
        // c links to nothing; b linked to a, not to c: both fail, then the head is b's.
        let (d, _) = line(
            &hmac_of(&b),
            KEY2,
            "\"journal_index\": \"x\", \"run_id\": 5",
        );
        let data = format!("{a}\n{c}\n{b}\n{d}\n");
        let found = walk(&[data.as_bytes()], Some((KEY1, KEY2)));
        assert_eq!(
            reasons(&found),
            vec![(0, 1, PREV_HMAC_MISMATCH), (0, 2, PREV_HMAC_MISMATCH)]
        );
        assert_eq!(found.problems[0].run_id.as_deref(), Some(&b"r"[..]));
        // A record whose journal_index is not an integer is walked, and audits no row.
        assert_eq!(found.walked.len(), 4);
        assert_eq!(found.walked[3].activity.run_id.as_deref(), Some(&b"5"[..]));
        assert_eq!(found.walked[3].indexed(), None);
        assert_eq!(found.mirror().count(), 2);
    }

    /// The `hmac` member of a line made by [`line`].
    fn hmac_of(line: &str) -> String {
        let at = line.find("\"hmac\": \"").unwrap() + 9;
        line[at..at + 64].to_owned()
    }

    #[test]
    fn a_wrong_key_a_bad_scheme_and_edited_bytes_are_named() {
        let (a, b, _) = chain();
        let data = format!("{a}\n{b}\n");
        let found = walk(&[data.as_bytes()], Some((KEY1, b"other")));
        assert_eq!(
            reasons(&found),
            vec![(0, 0, HMAC_MISMATCH), (0, 1, HMAC_MISMATCH)]
        );
        // Without keys the HMACs are not checked.
        assert!(walk(&[data.as_bytes()], None).problems.is_empty());
        let edited = data.replacen("\"scheme\": 2", "\"scheme\": 3", 1);
        let found = walk(&[edited.as_bytes()], None);
        // The head stays at genesis: the next record's link fails too.
        assert_eq!(
            reasons(&found),
            vec![(0, 0, UNSUPPORTED_SCHEME), (0, 1, PREV_HMAC_MISMATCH)]
        );
        let spaced = data.replacen(", ", ",", 1);
        let found = walk(&[spaced.as_bytes()], None);
        // The first line is not canonical (the head stays), so the second is not linked.
        assert_eq!(
            reasons(&found),
            vec![(0, 0, NON_CANONICAL), (0, 1, PREV_HMAC_MISMATCH)]
        );
        // 2.0 is scheme 2 to Python (`2.0 in (1, 2)`); the bytes signed said 2.
        let float = data.replacen("\"scheme\": 2", "\"scheme\": 2.0", 1);
        assert!(walk(&[float.as_bytes()], None).problems.is_empty());
        let found = walk(&[float.as_bytes()], Some((KEY1, KEY2)));
        assert_eq!(reasons(&found), vec![(0, 0, HMAC_MISMATCH)]);
    }

    #[test]
    fn a_stated_predecessor_other_than_prev_hmac_is_named_unless_exempt() {
        let details = format!("\"prev_chain_digest\": \"{}\"", "e".repeat(64));
        let (a, _) = line(genesis(), KEY2, &details);
        let found = walk(&[format!("{a}\n").as_bytes()], Some((KEY1, KEY2)));
        assert_eq!(reasons(&found), vec![(0, 0, STATED_PREDECESSOR)]);
        let exempt = a.replace("activity.result", "skill.catalog.install");
        let found = walk(&[format!("{exempt}\n").as_bytes()], None);
        assert!(found.problems.is_empty());
        assert!(found.walked.is_empty());
        // No activity.result record: the runs are not cross-checked with the chain.
        assert!(found.cross_check().is_none());
    }
}
